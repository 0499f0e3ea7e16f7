/*
 * dataset.c: scan a video folder into sorted, labelled, split samples; read list files
 * and labels.csv; probe files with FFmpeg on a few threads.
 *
 * Every decision here depends only on file names and file contents, never on readdir
 * order, thread timing or a shared RNG: that is what makes splits stable and runs
 * reproducible. It must never decode frames, and never abort on bad data — a bad file
 * or a bad list/CSV line is recorded (or reported with file:line) and skipped.
 */
#include "pipeline/data/dataset.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/common.h"

/* ---- small helpers ---- */

static const char *const video_exts[] = {"mp4", "avi", "mkv", "webm", "mov", "m4v", "mpg",
                                         "mpeg", "gif", "y4m", "ogv", "flv", "ts"};

int vt_is_video_name(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return 0;
    for (size_t i = 0; i < VT_ARRAY_LEN(video_exts); i++)
        if (!strcasecmp(dot + 1, video_exts[i]))
            return 1;
    return 0;
}

const char *vt_split_name(vt_split s) {
    switch (s) {
    case VT_SPLIT_TRAIN: return "train";
    case VT_SPLIT_VAL: return "val";
    case VT_SPLIT_TEST: return "test";
    default: return "none";
    }
}

int vt_split_parse(const char *name) {
    for (int s = VT_SPLIT_TRAIN; s <= VT_SPLIT_TEST; s++)
        if (name && !strcmp(name, vt_split_name((vt_split)s)))
            return s;
    return -1;
}

/* A growable array of strings. */
typedef struct strv {
    char **s;
    int n, cap;
} strv;

static void strv_push(strv *v, char *s /* owned */) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->s = vt_realloc(v->s, (size_t)v->cap * sizeof *v->s);
    }
    v->s[v->n++] = s;
}

static void strv_free(strv *v) {
    for (int i = 0; i < v->n; i++)
        free(v->s[i]);
    free(v->s);
    v->s = NULL;
    v->n = v->cap = 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join_path(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = vt_malloc(na + nb + 2);
    memcpy(s, a, na);
    size_t k = na;
    if (na && a[na - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, b, nb + 1);
    return s;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Sorted names in a directory, without hidden entries. -1 (errno set) when unreadable. */
static int list_dir(strv *out, const char *path) {
    DIR *d = opendir(path);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        strv_push(out, vt_strdup(e->d_name));
    }
    closedir(d);
    if (out->n > 1)
        qsort(out->s, (size_t)out->n, sizeof *out->s, cmp_str);
    return 0;
}

/* ---- the folder walk ---- */

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

typedef struct scan_ctx {
    const char *root;           /* DIR */
    int class_depth;            /* folder depth of the class folders: 1, or 2 under splits */
    int splits;                 /* top level: only the split folders train, val, test */
    int root_errno;             /* DIR itself could not be listed */
    strv videos, ignored, broken;
    int depth;                  /* of the folder being read; DIR is 0 */
    dev_t dev[SCAN_MAX_DEPTH + 1];
    ino_t ino[SCAN_MAX_DEPTH + 1]; /* the folders from DIR down to it: a link to one of
                                      them would be walked forever (a loop) */
} scan_ctx;

/* An entry the walk cannot follow: warned about with its path, listed, never fatal. */
static void scan_broken(scan_ctx *c, const char *rel, const char *why) {
    vt_warn("%s/%s: %s; skipped\n", c->root, rel, why);
    size_t n = strlen(rel) + strlen(why) + 3;
    char *s = vt_malloc(n);
    snprintf(s, n, "%s: %s", rel, why);
    strv_push(&c->broken, s);
}

/* Reads the folder root/rel ("" = DIR) at depth c->depth: videos at or below the class
 * level into c->videos (relpaths), other files into c->ignored, and what cannot be
 * followed into c->broken. Links are followed, to folders and to files alike. */
static void walk(scan_ctx *c, const char *rel) {
    char *abs = rel[0] ? join_path(c->root, rel) : vt_strdup(c->root);
    char why[1200];
    strv names = {0};
    if (list_dir(&names, abs) != 0) {
        if (!rel[0])
            c->root_errno = errno;
        else {
            snprintf(why, sizeof why, "cannot read this folder: %s", strerror(errno));
            scan_broken(c, rel, why);
        }
    }
    for (int i = 0; i < names.n; i++) {
        char *r = rel[0] ? join_path(rel, names.s[i]) : vt_strdup(names.s[i]);
        char *a = join_path(c->root, r);
        struct stat st;
        switch (entry_kind_of(a, &st, why, sizeof why)) {
        case ENTRY_BROKEN:
            scan_broken(c, r, why);
            break;
        case ENTRY_FILE:
            if (c->depth >= c->class_depth && vt_is_video_name(names.s[i])) {
                strv_push(&c->videos, r);
                r = NULL;
            } else {
                strv_push(&c->ignored, r); /* not a video, or above the class level */
                r = NULL;
            }
            break;
        case ENTRY_DIR: {
            int loop = 0;
            for (int k = 0; k <= c->depth; k++)
                loop |= c->dev[k] == st.st_dev && c->ino[k] == st.st_ino;
            if (c->depth == 0 && c->splits && vt_split_parse(names.s[i]) < 0) {
                strv_push(&c->ignored, join_path(r, "")); /* "name/": not a split folder */
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
    strv_free(&names);
    free(abs);
}

/* DIR/name is a split folder: a folder (links followed) with at least one folder in it —
 * its class folders. A folder of loose videos named "test" is a class of a flat dataset. */
static int holds_class_folders(const char *dir, const char *name) {
    char *a = join_path(dir, name);
    strv names = {0};
    int yes = 0;
    if (is_dir(a) && list_dir(&names, a) == 0)
        for (int i = 0; i < names.n && !yes; i++) {
            char *sub = join_path(a, names.s[i]);
            yes = is_dir(sub);
            free(sub);
        }
    strv_free(&names);
    free(a);
    return yes;
}

/* Uniform in [0,1) from a relative path: stable across scans and machines. */
static double path_unit(const char *relpath) {
    uint64_t h = vt_hash64(vt_fnv1a(relpath, strlen(relpath), VT_FNV_SEED));
    return (double)(h >> 32) * (1.0 / 4294967296.0);
}

/* Index of name in sorted classes, or -1. */
static int find_sorted(char **classes, int n, const char *name) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(classes[mid], name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static int find_video(const vt_dataset *ds, const char *relpath) {
    int lo = 0, hi = ds->nvideos - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(ds->videos[mid].relpath, relpath);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

static void head_free(vt_dataset_head *h) {
    for (int i = 0; i < h->nclasses; i++)
        free(h->classes[i]);
    free(h->classes);
    memset(h, 0, sizeof *h);
}

static void video_free_labels(vt_dataset_video *v) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_freep(&v->tags[h]);
        v->ntags[h] = 0;
        v->label[h] = -1;
    }
    v->labeled = 0;
}

/* Class name of a relpath: the component at position `skip` ("train/Walk/x.mp4", skip 1
 * -> "Walk"). NULL when the file sits above the class level. */
static char *class_of(const char *relpath, int skip) {
    const char *p = relpath;
    for (int i = 0; i < skip; i++) {
        p = strchr(p, '/');
        if (!p)
            return NULL;
        p++;
    }
    const char *e = strchr(p, '/');
    if (!e)
        return NULL;
    size_t n = (size_t)(e - p);
    char *s = vt_malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* Sorted, de-duplicated copy of the class names in v (v untouched). */
static char **unique_sorted(char **names, int n, int *out_n) {
    char **c = vt_malloc((size_t)(n ? n : 1) * sizeof *c);
    memcpy(c, names, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_str);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || strcmp(c[k - 1], c[i]))
            c[k++] = c[i];
    for (int i = 0; i < k; i++)
        c[i] = vt_strdup(c[i]);
    *out_n = k;
    return c;
}

/*
 * --val-split: per class, a train video moves to val iff its path hash < fraction. The
 * documented approximation for small classes: a class with >= 2 train videos and none
 * hashed to val sends its lowest-hash video to val, and one with all of them hashed to
 * val (a single video included) keeps its highest-hash video in train. Adding files can only move a video of such
 * a tiny class; every other video's split depends on its own path alone.
 */
static void apply_val_split(vt_dataset *ds, double fraction) {
    if (fraction <= 0)
        return;
    int by_class = ds->heads[0].loss == VT_LOSS_SOFTMAX_CE;
    int nc = by_class ? ds->heads[0].nclasses : 1;
    for (int c = 0; c < nc; c++) {
        int ntrain = 0, nval = 0, lo = -1, hi = -1;
        double ulo = 2, uhi = -1;
        for (int i = 0; i < ds->nvideos; i++) {
            vt_dataset_video *v = &ds->videos[i];
            if (v->split != VT_SPLIT_TRAIN || !v->labeled || (by_class && v->label[0] != c))
                continue;
            double u = path_unit(v->relpath);
            ntrain++;
            if (u < fraction) {
                v->split = VT_SPLIT_VAL;
                nval++;
            }
            if (u < ulo) { ulo = u; lo = i; }
            if (u > uhi) { uhi = u; hi = i; }
        }
        if (ntrain >= 2 && nval == 0)
            ds->videos[lo].split = VT_SPLIT_VAL;
        if (ntrain >= 1 && nval == ntrain)
            ds->videos[hi].split = VT_SPLIT_TRAIN;
    }
}

static int has_val(const vt_dataset *ds) {
    for (int i = 0; i < ds->nvideos; i++)
        if (ds->videos[i].split == VT_SPLIT_VAL)
            return 1;
    return 0;
}

/* Read a whole text file (NUL-terminated). NULL when unreadable. */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *s = vt_malloc(cap);
    size_t k;
    while ((k = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) {
            cap *= 2;
            s = vt_realloc(s, cap);
        }
    }
    fclose(f);
    s[n] = 0;
    return s;
}

/* Next line of a text buffer (handles \r\n); NULL at the end. Modifies the buffer. */
static char *next_line(char **cursor) {
    char *p = *cursor;
    if (!p || !*p)
        return NULL;
    char *e = strchr(p, '\n');
    if (e) {
        *e = 0;
        *cursor = e + 1;
    } else {
        *cursor = p + strlen(p);
    }
    size_t n = strlen(p);
    while (n && (p[n - 1] == '\r' || isspace((unsigned char)p[n - 1])))
        p[--n] = 0;
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

static void set_video_class(vt_dataset_video *v, int c) {
    video_free_labels(v);
    if (c >= 0) {
        v->labeled = 1;
        v->label[0] = c;
    }
}

/* UCF101 lists. classes come from classInd.txt ("1 Name"), ids in its order. */
static int apply_lists(vt_dataset *ds, const char *lists_dir, int fold, char *err, size_t errlen) {
    int rc = -1;
    char name[64];
    char *path = NULL, *text = NULL;
    strv classes = {0};

    path = join_path(lists_dir, "classInd.txt");
    text = read_text(path);
    if (!text) {
        vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto end;
    }
    char *cur = text, *line;
    int lineno = 0;
    while ((line = next_line(&cur)) != NULL) {
        lineno++;
        if (!*line)
            continue;
        char cls[1024];
        int id;
        if (sscanf(line, "%d %1023s", &id, cls) != 2 || id != classes.n + 1) {
            vt_set_err(err, errlen, "%s:%d: expected \"%d ClassName\", got \"%s\"", path, lineno,
                       classes.n + 1, line);
            goto end;
        }
        strv_push(&classes, vt_strdup(cls));
    }
    if (classes.n == 0) {
        vt_set_err(err, errlen, "%s: no classes", path);
        goto end;
    }
    vt_freep(&text);
    vt_freep(&path);

    for (int i = 0; i < ds->nvideos; i++) {
        ds->videos[i].split = VT_SPLIT_NONE;
        video_free_labels(&ds->videos[i]);
    }
    for (int which = 0; which < 2; which++) {
        snprintf(name, sizeof name, "%s%02d.txt", which == 0 ? "trainlist" : "testlist", fold);
        path = join_path(lists_dir, name);
        text = read_text(path);
        if (!text) {
            vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
            goto end;
        }
        cur = text;
        lineno = 0;
        while ((line = next_line(&cur)) != NULL) {
            lineno++;
            if (!*line)
                continue;
            char *sp = line;
            while (*sp && !isspace((unsigned char)*sp))
                sp++;
            int given = 0;
            if (*sp) {
                *sp++ = 0;
                given = atoi(sp);
            }
            char *cls = class_of(line, 0);
            int c = -1;
            for (int k = 0; cls && k < classes.n; k++)
                if (!strcmp(classes.s[k], cls))
                    c = k;
            free(cls);
            if (c < 0) {
                vt_warn("%s:%d: class of '%s' is not in classInd.txt; line skipped\n", path,
                        lineno, line);
                continue;
            }
            if (given && given != c + 1)
                vt_warn("%s:%d: label %d disagrees with classInd.txt (%d for this folder); "
                        "using the folder\n", path, lineno, given, c + 1);
            int vi = find_video(ds, line);
            if (vi < 0) {
                vt_warn("%s:%d: %s not found under %s\n", path, lineno, line, ds->dir);
                ds->nmissing++;
                continue;
            }
            ds->videos[vi].split = which == 0 ? VT_SPLIT_TRAIN : VT_SPLIT_TEST;
            set_video_class(&ds->videos[vi], c);
        }
        vt_freep(&text);
        vt_freep(&path);
    }
    ds->nheads = 1;
    snprintf(ds->heads[0].name, sizeof ds->heads[0].name, "class");
    ds->heads[0].loss = VT_LOSS_SOFTMAX_CE;
    ds->heads[0].nclasses = classes.n;
    ds->heads[0].classes = classes.s;
    classes.s = NULL;
    classes.n = 0;
    rc = 0;
end:
    strv_free(&classes);
    free(text);
    free(path);
    return rc;
}

vt_dataset *vt_dataset_open(const char *dir, const vt_dataset_opts *opts, char *err,
                            size_t errlen) {
    vt_dataset_opts o = {0};
    if (opts)
        o = *opts;
    if (o.list_fold <= 0)
        o.list_fold = 1;
    scan_ctx sc = {.root = dir};
    strv videos = {0}, ignored = {0};
    vt_dataset *ds = NULL;
    struct stat rst;

    if (stat(dir, &rst) != 0 || !S_ISDIR(rst.st_mode)) {
        vt_set_err(err, errlen, "%s is not a readable folder", dir);
        goto fail;
    }
    ds = vt_calloc(1, sizeof *ds);
    pthread_mutex_init(&ds->lock, NULL);
    ds->dir = vt_strdup(dir);

    /* Split folders: any of train/, val/, test/ holding class folders (only test/ is a
     * test set to evaluate; train/ + test/ draws val from train with --val-split). */
    int folders = 0;
    for (int s = VT_SPLIT_TRAIN; s <= VT_SPLIT_TEST && !o.lists_dir; s++)
        folders |= holds_class_folders(dir, vt_split_name((vt_split)s));
    ds->layout = o.lists_dir ? VT_LAYOUT_LISTS : folders ? VT_LAYOUT_FOLDERS : VT_LAYOUT_FLAT;

    /* Top level: class folders (flat, lists) or split folders; files here are ignored. */
    sc.class_depth = folders ? 2 : 1;
    sc.splits = folders;
    sc.dev[0] = rst.st_dev;
    sc.ino[0] = rst.st_ino;
    walk(&sc, "");
    videos = sc.videos;
    ignored = sc.ignored;
    ds->nbroken = sc.broken.n;
    ds->broken = sc.broken.s;
    if (sc.root_errno) {
        vt_set_err(err, errlen, "cannot read %s: %s", dir, strerror(sc.root_errno));
        goto fail;
    }
    if (videos.n == 0) {
        vt_set_err(err, errlen,
                   "no videos under %s (expected %s/<class>/<video>, or %s/<split>/<class>/<video> "
                   "with any of the split folders train, val, test; extensions: mp4 avi mkv webm "
                   "mov m4v mpg mpeg gif y4m ogv flv ts)%s",
                   dir, dir, dir, ds->nbroken ? "; some entries could not be followed (see the "
                   "warnings)" : "");
        goto fail;
    }
    qsort(videos.s, (size_t)videos.n, sizeof *videos.s, cmp_str);
    if (ignored.n > 1) /* qsort's pointer must not be NULL, even for 0 elements */
        qsort(ignored.s, (size_t)ignored.n, sizeof *ignored.s, cmp_str);
    ds->nvideos = videos.n;
    ds->videos = vt_calloc((size_t)videos.n, sizeof *ds->videos);
    ds->nignored = ignored.n;
    ds->ignored = ignored.s;
    ignored.s = NULL;
    ignored.n = 0;

    /* Classes: sorted names at the class level; label ids are positions. */
    int skip = folders ? 1 : 0;
    char **cls = vt_malloc((size_t)videos.n * sizeof *cls);
    for (int i = 0; i < videos.n; i++)
        cls[i] = class_of(videos.s[i], skip);
    ds->nheads = 1;
    snprintf(ds->heads[0].name, sizeof ds->heads[0].name, "class");
    ds->heads[0].loss = VT_LOSS_SOFTMAX_CE;
    ds->heads[0].classes = unique_sorted(cls, videos.n, &ds->heads[0].nclasses);
    for (int i = 0; i < videos.n; i++) {
        vt_dataset_video *v = &ds->videos[i];
        v->relpath = videos.s[i];
        videos.s[i] = NULL;
        v->path = join_path(dir, v->relpath);
        video_free_labels(v);
        set_video_class(v, find_sorted(ds->heads[0].classes, ds->heads[0].nclasses, cls[i]));
        v->split = VT_SPLIT_TRAIN;
        if (folders)
            v->split = !strncmp(v->relpath, "val/", 4)    ? VT_SPLIT_VAL
                       : !strncmp(v->relpath, "test/", 5) ? VT_SPLIT_TEST
                                                          : VT_SPLIT_TRAIN;
        free(cls[i]);
    }
    free(cls);

    if (o.lists_dir) {
        head_free(&ds->heads[0]);
        if (apply_lists(ds, o.lists_dir, o.list_fold, err, errlen) < 0)
            goto fail;
    }
    if (o.val_split > 0 && !has_val(ds)) {
        ds->val_split = o.val_split;
        apply_val_split(ds, o.val_split);
    }
    strv_free(&videos);
    return ds;
fail:
    strv_free(&videos);
    strv_free(&ignored); /* sc.broken is ds->broken by now, freed with ds */
    vt_dataset_free(&ds);
    return NULL;
}

void vt_dataset_free(vt_dataset **pds) {
    if (!pds || !*pds)
        return;
    vt_dataset *ds = *pds;
    for (int i = 0; i < ds->nvideos; i++) {
        vt_dataset_video *v = &ds->videos[i];
        free(v->relpath);
        free(v->path);
        free(v->reason);
        video_free_labels(v);
    }
    free(ds->videos);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        head_free(&ds->heads[h]);
    for (int i = 0; i < ds->nignored; i++)
        free(ds->ignored[i]);
    free(ds->ignored);
    for (int i = 0; i < ds->nbroken; i++)
        free(ds->broken[i]);
    free(ds->broken);
    free(ds->dir);
    pthread_mutex_destroy(&ds->lock);
    free(ds);
    *pds = NULL;
}

/* ---- labels.csv ---- */

/* Split one CSV line into fields (RFC 4180 quotes, "" inside quotes), trimmed. */
static int csv_fields(strv *out, const char *line) {
    const char *p = line;
    for (;;) {
        size_t cap = strlen(p) + 1, n = 0;
        char *f = vt_malloc(cap);
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '"') {
            p++;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    f[n++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    f[n++] = *p++;
                }
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                f[n++] = *p++;
        }
        while (n && isspace((unsigned char)f[n - 1]))
            n--;
        f[n] = 0;
        strv_push(out, f);
        if (*p != ',')
            break;
        p++;
    }
    return out->n;
}

/* ';'-separated tags of a cell, trimmed, empties dropped. */
static void split_tags(strv *out, const char *cell) {
    const char *p = cell;
    while (*p) {
        const char *e = strchr(p, ';');
        if (!e)
            e = p + strlen(p);
        while (p < e && isspace((unsigned char)*p))
            p++;
        const char *q = e;
        while (q > p && isspace((unsigned char)q[-1]))
            q--;
        if (q > p) {
            char *t = vt_malloc((size_t)(q - p) + 1);
            memcpy(t, p, (size_t)(q - p));
            t[q - p] = 0;
            strv_push(out, t);
        }
        p = *e ? e + 1 : e;
    }
}

typedef struct csv_row {
    int line;
    int video;  /* dataset index */
    int ok;
    strv cells; /* [0] = path */
} csv_row;

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_video_rel(const void *a, const void *b) {
    return strcmp(((const vt_dataset_video *)a)->relpath, ((const vt_dataset_video *)b)->relpath);
}

int vt_dataset_load_labels(vt_dataset *ds, const char *csv_path, int *nbad, char *err,
                           size_t errlen) {
    int rc = -1, bad = 0, nrows = 0, ncols = 0;
    csv_row *rows = NULL;
    strv header = {0};
    char *text = read_text(csv_path);
    if (!text) {
        vt_set_err(err, errlen, "cannot read %s: %s", csv_path, strerror(errno));
        goto end;
    }
    char *cur = text, *line;
    int lineno = 0;
    while ((line = next_line(&cur)) != NULL) {
        lineno++;
        if (*line)
            break;
    }
    if (!line || csv_fields(&header, line) < 2) {
        vt_set_err(err, errlen, "%s: expected a header row \"path,head1[,head2...]\"", csv_path);
        goto end;
    }
    ncols = header.n;
    if (ncols - 1 > VT_MAX_HEADS) {
        vt_set_err(err, errlen, "%s: %d label columns, at most %d heads", csv_path, ncols - 1,
                   VT_MAX_HEADS);
        goto end;
    }

    /* Pass 1: structure. Rows naming an unscanned file that exists are added. */
    int cap = 0;
    while ((line = next_line(&cur)) != NULL) {
        lineno++;
        if (!*line)
            continue;
        if (nrows == cap) {
            cap = cap ? 2 * cap : 64;
            rows = vt_realloc(rows, (size_t)cap * sizeof *rows);
        }
        csv_row *r = &rows[nrows++];
        memset(r, 0, sizeof *r);
        r->line = lineno;
        r->video = -1;
        if (csv_fields(&r->cells, line) != ncols) {
            vt_warn("%s:%d: %d columns, the header has %d; line skipped\n", csv_path, lineno,
                    r->cells.n, ncols);
            bad++;
            continue;
        }
        char *p = r->cells.s[0];
        while (p[0] == '.' && p[1] == '/')
            p += 2;
        memmove(r->cells.s[0], p, strlen(p) + 1);
        if (!r->cells.s[0][0]) {
            vt_warn("%s:%d: empty path; line skipped\n", csv_path, lineno);
            bad++;
            continue;
        }
        r->ok = 1;
    }
    /* Add files that exist but were not scanned (e.g. a flat folder of videos). */
    int added = 0;
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].ok || find_video(ds, rows[i].cells.s[0]) >= 0)
            continue;
        char *abs = join_path(ds->dir, rows[i].cells.s[0]);
        int exists = vt_is_video_name(rows[i].cells.s[0]) && is_file(abs);
        int dup = 0;
        for (int k = ds->nvideos - added; k < ds->nvideos; k++)
            dup |= !strcmp(ds->videos[k].relpath, rows[i].cells.s[0]);
        if (exists && !dup) {
            ds->videos = vt_realloc(ds->videos, (size_t)(ds->nvideos + 1) * sizeof *ds->videos);
            vt_dataset_video *v = &ds->videos[ds->nvideos++];
            memset(v, 0, sizeof *v);
            v->relpath = vt_strdup(rows[i].cells.s[0]);
            v->path = abs;
            v->split = VT_SPLIT_TRAIN;
            added++;
        } else {
            free(abs);
        }
    }
    if (added)
        qsort(ds->videos, (size_t)ds->nvideos, sizeof *ds->videos, cmp_video_rel);
    for (int i = 0; i < nrows; i++) {
        csv_row *r = &rows[i];
        if (!r->ok)
            continue;
        r->video = find_video(ds, r->cells.s[0]);
        if (r->video < 0) {
            vt_warn("%s:%d: %s is not a video under %s; line skipped\n", csv_path, r->line,
                    r->cells.s[0], ds->dir);
            r->ok = 0;
            bad++;
            continue;
        }
        for (int k = 0; k < i; k++)
            if (rows[k].ok && rows[k].video == r->video) {
                vt_warn("%s:%d: second row for %s (first at line %d); line skipped\n", csv_path,
                        r->line, r->cells.s[0], rows[k].line);
                r->ok = 0;
                bad++;
                break;
            }
    }

    /* Column kinds: multi-label when any valid cell holds a ';'. */
    vt_loss_kind kind[VT_MAX_HEADS];
    for (int c = 1; c < ncols; c++) {
        kind[c - 1] = VT_LOSS_SOFTMAX_CE;
        for (int i = 0; i < nrows; i++)
            if (rows[i].ok && strchr(rows[i].cells.s[c], ';'))
                kind[c - 1] = VT_LOSS_BCE;
    }
    /* Pass 2: a softmax cell must hold one non-empty class. */
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].ok)
            continue;
        for (int c = 1; c < ncols; c++)
            if (kind[c - 1] == VT_LOSS_SOFTMAX_CE && !rows[i].cells.s[c][0]) {
                vt_warn("%s:%d: empty '%s' (a single-label column); line skipped\n", csv_path,
                        rows[i].line, header.s[c]);
                rows[i].ok = 0;
                bad++;
                break;
            }
    }
    int nok = 0;
    for (int i = 0; i < nrows; i++)
        nok += rows[i].ok;
    if (nok == 0) {
        vt_set_err(err, errlen, "%s: no valid rows", csv_path);
        goto end;
    }

    /* Heads: classes = sorted union of values/tags over valid rows. */
    for (int h = 0; h < VT_MAX_HEADS; h++)
        head_free(&ds->heads[h]);
    for (int i = 0; i < ds->nvideos; i++)
        video_free_labels(&ds->videos[i]);
    ds->nheads = ncols - 1;
    for (int c = 1; c < ncols; c++) {
        vt_dataset_head *hd = &ds->heads[c - 1];
        snprintf(hd->name, sizeof hd->name, "%s", header.s[c]);
        hd->loss = kind[c - 1];
        strv vals = {0};
        for (int i = 0; i < nrows; i++) {
            if (!rows[i].ok)
                continue;
            if (hd->loss == VT_LOSS_BCE)
                split_tags(&vals, rows[i].cells.s[c]);
            else
                strv_push(&vals, vt_strdup(rows[i].cells.s[c]));
        }
        hd->classes = unique_sorted(vals.s, vals.n, &hd->nclasses);
        strv_free(&vals);
    }
    for (int i = 0; i < nrows; i++) {
        csv_row *r = &rows[i];
        if (!r->ok)
            continue;
        vt_dataset_video *v = &ds->videos[r->video];
        v->labeled = 1;
        for (int h = 0; h < ds->nheads; h++) {
            vt_dataset_head *hd = &ds->heads[h];
            if (hd->loss == VT_LOSS_SOFTMAX_CE) {
                v->label[h] = find_sorted(hd->classes, hd->nclasses, r->cells.s[h + 1]);
                continue;
            }
            strv tags = {0};
            split_tags(&tags, r->cells.s[h + 1]);
            v->tags[h] = vt_malloc((size_t)(tags.n ? tags.n : 1) * sizeof(int32_t));
            int n = 0;
            for (int k = 0; k < tags.n; k++)
                v->tags[h][n++] = find_sorted(hd->classes, hd->nclasses, tags.s[k]);
            qsort(v->tags[h], (size_t)n, sizeof(int32_t), cmp_i32);
            int u = 0;
            for (int k = 0; k < n; k++)
                if (u == 0 || v->tags[h][u - 1] != v->tags[h][k])
                    v->tags[h][u++] = v->tags[h][k];
            v->ntags[h] = u;
            strv_free(&tags);
        }
    }
    /* Redo --val-split on the new labels: val videos go back to train first. */
    if (ds->val_split > 0) {
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].split == VT_SPLIT_VAL)
                ds->videos[i].split = VT_SPLIT_TRAIN;
        apply_val_split(ds, ds->val_split);
    }
    rc = 0;
end:
    if (nbad)
        *nbad = bad;
    for (int i = 0; i < nrows; i++)
        strv_free(&rows[i].cells);
    free(rows);
    strv_free(&header);
    free(text);
    return rc;
}

/* ---- probing ---- */

typedef struct probe_ctx {
    vt_dataset *ds;
    int next, done, warn, nbad;
    vt_probe_progress_fn progress;
    void *pctx;
    pthread_mutex_t lock;
} probe_ctx;

static void *probe_worker(void *arg) {
    probe_ctx *p = arg;
    char err[512];
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next < p->ds->nvideos ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (i < 0)
            break;
        vt_dataset_video *v = &p->ds->videos[i];
        vt_video *vid = NULL;
        err[0] = 0;
        int rc = vt_video_open(&vid, v->path, 1, err, sizeof err);
        if (rc == 0) {
            v->info = *vt_video_get_info(vid);
            vt_video_close(&vid);
        }
        v->probed = 1;
        int newly = rc < 0 && vt_dataset_mark_bad(p->ds, i, VT_BAD_OPEN, err[0] ? err : "cannot open");
        pthread_mutex_lock(&p->lock);
        if (newly) {
            p->nbad++;
            if (p->warn)
                vt_warn("%s: %s (excluded)\n", v->path, err[0] ? err : "cannot open");
        }
        p->done++;
        if (p->progress)
            p->progress(p->pctx, p->done, p->ds->nvideos);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

int vt_dataset_probe(vt_dataset *ds, int threads, int warn, vt_probe_progress_fn progress,
                     void *ctx) {
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = VT_MAX(1, VT_MIN(threads, VT_MAX(ds->nvideos, 1)));
    probe_ctx p = {.ds = ds, .warn = warn, .progress = progress, .pctx = ctx};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t *tid = vt_calloc((size_t)threads, sizeof *tid);
    for (int t = 0; t < threads; t++)
        VT_CHECK(pthread_create(&tid[t], NULL, probe_worker, &p) == 0, "pthread_create");
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&p.lock);
    return vt_dataset_count_bad(ds);
}

int vt_dataset_mark_bad(vt_dataset *ds, int i, vt_bad_kind kind, const char *reason) {
    VT_CHECK(i >= 0 && i < ds->nvideos, "video %d of %d", i, ds->nvideos);
    pthread_mutex_lock(&ds->lock);
    vt_dataset_video *v = &ds->videos[i];
    int newly = v->bad == VT_BAD_NONE;
    if (newly) {
        v->bad = kind;
        v->reason = vt_strdup(reason ? reason : "unreadable");
    }
    pthread_mutex_unlock(&ds->lock);
    return newly;
}

vt_bad_kind vt_dataset_bad(vt_dataset *ds, int i) {
    pthread_mutex_lock(&ds->lock);
    vt_bad_kind k = ds->videos[i].bad;
    pthread_mutex_unlock(&ds->lock);
    return k;
}

int vt_dataset_count_bad(vt_dataset *ds) {
    int n = 0;
    pthread_mutex_lock(&ds->lock);
    for (int i = 0; i < ds->nvideos; i++)
        n += ds->videos[i].bad != VT_BAD_NONE;
    pthread_mutex_unlock(&ds->lock);
    return n;
}

int vt_dataset_split_indices(vt_dataset *ds, vt_split split, int32_t **out) {
    int32_t *idx = vt_malloc((size_t)(ds->nvideos ? ds->nvideos : 1) * sizeof *idx);
    int n = 0;
    pthread_mutex_lock(&ds->lock);
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        if (v->split == split && v->labeled && v->bad == VT_BAD_NONE)
            idx[n++] = i;
    }
    pthread_mutex_unlock(&ds->lock);
    if (out)
        *out = idx;
    else
        free(idx);
    return n;
}

int vt_dataset_split_count(vt_dataset *ds, vt_split split) {
    return vt_dataset_split_indices(ds, split, NULL);
}

vt_split vt_dataset_eval_split(vt_dataset *ds) {
    if (vt_dataset_split_count(ds, VT_SPLIT_VAL) > 0)
        return VT_SPLIT_VAL;
    if (vt_dataset_split_count(ds, VT_SPLIT_TEST) > 0)
        return VT_SPLIT_TEST;
    return VT_SPLIT_VAL;
}

void vt_dataset_head_cfgs(const vt_dataset *ds, vt_head_cfg *out) {
    for (int h = 0; h < ds->nheads; h++) {
        memset(&out[h], 0, sizeof out[h]);
        snprintf(out[h].name, sizeof out[h].name, "%s", ds->heads[h].name);
        out[h].classes = ds->heads[h].nclasses;
        out[h].loss = ds->heads[h].loss;
        out[h].weight = 1.0f;
        out[h].smoothing = 0.0f;
    }
}
