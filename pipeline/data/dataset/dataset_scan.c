/*
 * dataset_scan.c: the folder walk under a dataset folder — which entries are videos
 * (relative paths at or below the class level), which are ignored (other files, files
 * above the class level, top-level folders that are not split folders), and which cannot
 * be followed (dangling links, loops of links, links back to a folder above them, FIFOs
 * and devices, a second name of a video's file in one split), each of those warned about
 * once with its path. A folder that cannot be
 * listed is not one of those: it is reported for the caller to refuse the dataset.
 *
 * It must never open a file's contents (a FIFO named x.mp4 would block forever), never
 * follow a link into a loop, and never fail the scan for one bad entry: only DIR itself
 * or a folder in it being unreadable is reported as an error (by dataset.c). Names are read sorted, so the
 * result never depends on readdir order.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* Sorted names in a directory, without hidden entries. -1 (errno set) when unreadable. */
static int list_dir(vt_ds_strv *out, const char *path) {
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        vt_ds_strv_push(out, vt_strdup(e->d_name));
    }
    closedir(d);
    if (out->n > 1)
        qsort(out->s, (size_t)out->n, sizeof *out->s, vt_ds_cmp_str);
    return 0;
}

/* Folders deeper than this below DIR are not read. Loops through links are caught by the
 * ancestor check below, not by this: it only bounds a tree of links that fans out. */
#define SCAN_MAX_DEPTH 8

typedef enum entry_kind { ENTRY_FILE, ENTRY_DIR, ENTRY_BROKEN } entry_kind;

/* What abs is, following symbolic links (stat). A link that leads nowhere — dangling, a
 * chain of links that loops, a target it may not see — is ENTRY_BROKEN, with why; so is
 * anything that is neither a folder nor a regular file. */
static entry_kind entry_kind_of(const char *abs, struct stat *st, char *why, size_t whylen) {
    if (stat(abs, st) == 0) {
        if (S_ISDIR(st->st_mode) || S_ISREG(st->st_mode))
            return S_ISDIR(st->st_mode) ? ENTRY_DIR : ENTRY_FILE;
        /* A FIFO named x.mp4 would block the prober forever; a device is no dataset. */
        snprintf(why, whylen, "not a regular file (a FIFO, socket or device)");
        return ENTRY_BROKEN;
    }
    int e = errno;
    struct stat lst;
    char target[1024];
    ssize_t k;
    if (lstat(abs, &lst) == 0 && S_ISLNK(lst.st_mode) &&
        (k = readlink(abs, target, sizeof target - 1)) >= 0) {
        target[k] = 0;
        snprintf(why, whylen, "symbolic link to '%s' %s", target,
                 e == ENOENT  ? "leads nowhere (dangling link)"
                 : e == ELOOP ? "is a loop of links"
                              : strerror(e));
    } else {
        snprintf(why, whylen, "%s", strerror(e));
    }
    return ENTRY_BROKEN;
}

/* A video's file (or frame folder) as the walk found it: what says two names are one. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
} file_id;

typedef struct scan_ctx {
    const char *root;           /* DIR */
    int class_depth;            /* folder depth of the class folders: 1, or 2 under splits */
    int splits;                 /* top level: only the split folders train, val, test */
    vt_ds_scan *out;
    int depth;                  /* of the folder being read; DIR is 0 */
    dev_t dev[SCAN_MAX_DEPTH + 1];
    ino_t ino[SCAN_MAX_DEPTH + 1]; /* the folders from DIR down to it: a link to one of
                                      them would be walked forever (a loop) */
    file_id *ids;               /* (out->videos.n) each video's file */
    int ids_cap;
} scan_ctx;

/* A video found at rel, its file st: out->videos and its id. */
static void add_video(scan_ctx *c, char *rel, const struct stat *st) {
    if (c->out->videos.n == c->ids_cap) {
        c->ids_cap = c->ids_cap ? 2 * c->ids_cap : 256;
        c->ids = vt_realloc(c->ids, sizeof *c->ids * (size_t)c->ids_cap);
    }
    c->ids[c->out->videos.n] = (file_id){st->st_dev, st->st_ino};
    vt_ds_strv_push(&c->out->videos, rel);
}

/* An entry the walk cannot follow: warned about with its path, listed, never fatal. */
static void scan_broken(scan_ctx *c, const char *rel, const char *why) {
    vt_warn("%s/%s: %s; skipped\n", c->root, rel, why);
    size_t n = strlen(rel) + strlen(why) + 3;
    char *s = vt_malloc(n);
    snprintf(s, n, "%s: %s", rel, why);
    vt_ds_strv_push(&c->out->broken, s);
}

/* Reads the folder root/rel ("" = DIR) at depth c->depth: videos at or below the class
 * level into out->videos (relpaths), other files into out->ignored, and what cannot be
 * followed into out->broken. Links are followed, to folders and to files alike. */
static void walk(scan_ctx *c, const char *rel) {
    char *abs = rel[0] ? vt_ds_join_path(c->root, rel) : vt_strdup(c->root);
    char why[1200];
    vt_ds_strv names = {0};
    if (list_dir(&names, abs) != 0) {
        if (!rel[0])
            c->out->root_errno = errno;
        else if (!c->out->unreadable[0])
            /* Not a warning: a class folder dropped would shift every later class id, and
             * a folder inside one would drop some of its videos (maybe all). */
            snprintf(c->out->unreadable, sizeof c->out->unreadable, "%s/%s: cannot list this "
                     "%s: %s", c->root, rel, c->depth == c->class_depth ? "class folder"
                     : c->depth < c->class_depth ? "split folder" : "folder", strerror(errno));
    }
    for (int i = 0; i < names.n; i++) {
        char *r = rel[0] ? vt_ds_join_path(rel, names.s[i]) : vt_strdup(names.s[i]);
        char *a = vt_ds_join_path(c->root, r);
        struct stat st;
        switch (entry_kind_of(a, &st, why, sizeof why)) {
        case ENTRY_BROKEN:
            scan_broken(c, r, why);
            break;
        case ENTRY_FILE:
            if (c->depth >= c->class_depth && vt_is_video_name(names.s[i])) {
                add_video(c, r, &st);
                r = NULL;
            } else {
                vt_ds_strv_push(&c->out->ignored, r); /* not a video, or above the class level */
                r = NULL;
            }
            break;
        case ENTRY_DIR: {
            int loop = 0;
            for (int k = 0; k <= c->depth; k++)
                loop |= c->dev[k] == st.st_dev && c->ino[k] == st.st_ino;
            if (c->depth >= c->class_depth && vt_video_is_frame_dir(a)) {
                /* numbered JPEG/PNG frames: one video (pipeline/data/video/video.h) */
                add_video(c, r, &st);
                r = NULL;
            } else if (c->depth == 0 && c->splits && vt_split_parse(names.s[i]) < 0) {
                /* "name/": not a split folder */
                vt_ds_strv_push(&c->out->ignored, vt_ds_join_path(r, ""));
            } else if (loop) {
                scan_broken(c, r, "leads back to a folder above it (a loop)");
            } else if (c->depth >= SCAN_MAX_DEPTH) {
                snprintf(why, sizeof why, "more than %d folders below the dataset folder",
                         SCAN_MAX_DEPTH);
                scan_broken(c, r, why);
            } else {
                c->depth++;
                c->dev[c->depth] = st.st_dev;
                c->ino[c->depth] = st.st_ino;
                walk(c, r);
                c->depth--;
            }
            break;
        }
        }
        free(r);
        free(a);
    }
    vt_ds_strv_free(&names);
    free(abs);
}

/* DIR/name is a split folder: a folder (links followed) with at least one folder in it —
 * its class folders. A folder of loose videos named "test" is a class of a flat dataset. */
static int holds_class_folders(const char *dir, const char *name) {
    char *a = vt_ds_join_path(dir, name);
    vt_ds_strv names = {0};
    int yes = 0;
    if (vt_dir_exists(a) && list_dir(&names, a) == 0)
        for (int i = 0; i < names.n && !yes; i++) {
            char *sub = vt_ds_join_path(a, names.s[i]);
            yes = vt_dir_exists(sub);
            free(sub);
        }
    vt_ds_strv_free(&names);
    free(a);
    return yes;
}

int vt_ds_has_split_folders(const char *dir) {
    int folders = 0;
    for (int s = VT_SPLIT_TRAIN; s <= VT_SPLIT_TEST; s++)
        folders |= holds_class_folders(dir, vt_split_name((vt_split)s));
    return folders;
}

/* A video for drop_same_files' sort: its split folder (the first slen bytes of rel, none
 * for a flat dataset), its file and its index in out->videos. */
typedef struct same_key {
    const char *rel;
    size_t slen;
    file_id id;
    int i;
} same_key;

static int same_place(const same_key *x, const same_key *y) {
    return x->slen == y->slen && !strncmp(x->rel, y->rel, x->slen) &&
           x->id.dev == y->id.dev && x->id.ino == y->id.ino;
}

/* By split folder, then file, then relpath (the name kept is the first). */
static int by_file(const void *pa, const void *pb) {
    const same_key *x = pa, *y = pb;
    int d = strncmp(x->rel, y->rel, x->slen < y->slen ? x->slen : y->slen);
    if (d || x->slen != y->slen)
        return d ? d : (x->slen < y->slen ? -1 : 1);
    if (x->id.dev != y->id.dev)
        return x->id.dev < y->id.dev ? -1 : 1;
    if (x->id.ino != y->id.ino)
        return x->id.ino < y->id.ino ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

/* One file under two names in one split (a link to a video, or a linked class folder,
 * beside the video itself) is one video: the first name is kept, the others are skipped
 * and warned about. Under two classes it was scored (or trained) under both labels,
 * right under at most one; under one class it counted twice. The same file in two splits
 * is the leak check's to report (app/leaks.h), not this. */
static void drop_same_files(scan_ctx *c) {
    vt_ds_strv *v = &c->out->videos;
    if (v->n < 2)
        return;
    same_key *k = vt_malloc(sizeof *k * (size_t)v->n);
    for (int i = 0; i < v->n; i++)
        k[i] = (same_key){v->s[i], c->splits ? strcspn(v->s[i], "/") : 0, c->ids[i], i};
    qsort(k, (size_t)v->n, sizeof *k, by_file);
    char *drop = vt_calloc((size_t)v->n, 1);
    for (int j = 1, first = 0; j < v->n; j++) {
        if (!same_place(&k[first], &k[j])) {
            first = j;
            continue;
        }
        char why[4200];
        snprintf(why, sizeof why, "the same file as %.4000s (a link): one video, read under "
                 "that name only", k[first].rel);
        scan_broken(c, k[j].rel, why);
        drop[k[j].i] = 1;
    }
    int n = 0;
    for (int i = 0; i < v->n; i++) {
        if (drop[i])
            free(v->s[i]);
        else
            v->s[n++] = v->s[i];
    }
    v->n = n;
    free(drop);
    free(k);
}

void vt_ds_scan_folder(vt_ds_scan *out, const char *dir, const struct stat *root, int splits) {
    memset(out, 0, sizeof *out);
    scan_ctx c = {.root = dir, .class_depth = splits ? 2 : 1, .splits = splits, .out = out};
    c.dev[0] = root->st_dev;
    c.ino[0] = root->st_ino;
    walk(&c, "");
    drop_same_files(&c);
    free(c.ids);
}
