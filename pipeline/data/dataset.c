/*
 * dataset.c: a video folder as sorted, labelled, split samples — names and splits, the
 * assembly of vt_dataset_open (folder walk in dataset_scan.c, UCF101 lists in
 * dataset_lists.c), the hashed --val-split, the split queries, and the small helpers the
 * other dataset files share (dataset_impl.h). labels.csv is dataset_labels.c, probing
 * and bad files dataset_probe.c.
 *
 * Every decision here depends only on file names and file contents, never on readdir
 * order, thread timing or a shared RNG: that is what makes splits stable and runs
 * reproducible. It must never decode frames, and never abort on bad data — a bad file
 * or a bad list/CSV line is recorded (or reported with file:line) and skipped.
 */
#include "pipeline/data/dataset.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "models/common.h"
#include "pipeline/data/dataset_impl.h"

/* ---- names ---- */

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

/* ---- shared helpers (dataset_impl.h) ---- */

void vt_ds_strv_push(vt_ds_strv *v, char *s /* owned */) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->s = vt_realloc(v->s, (size_t)v->cap * sizeof *v->s);
    }
    v->s[v->n++] = s;
}

void vt_ds_strv_free(vt_ds_strv *v) {
    for (int i = 0; i < v->n; i++)
        free(v->s[i]);
    free(v->s);
    v->s = NULL;
    v->n = v->cap = 0;
}

int vt_ds_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *vt_ds_join_path(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = vt_malloc(na + nb + 2);
    memcpy(s, a, na);
    size_t k = na;
    if (na && a[na - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, b, nb + 1);
    return s;
}

int vt_ds_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int vt_ds_is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *vt_ds_read_text(const char *path) {
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

char *vt_ds_next_line(char **cursor) {
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

int vt_ds_find_sorted(char **names, int n, const char *name) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(names[mid], name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

int vt_ds_find_video(const vt_dataset *ds, const char *relpath) {
    return vt_ds_find_video_in(ds->videos, ds->nvideos, relpath);
}

int vt_ds_find_video_in(const vt_dataset_video *videos, int n, const char *relpath) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(videos[mid].relpath, relpath);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

char **vt_ds_unique_sorted(char **names, int n, int *out_n) {
    char **c = vt_malloc((size_t)(n ? n : 1) * sizeof *c);
    if (n > 0) { /* names is NULL for an empty list: memcpy and qsort must not see it */
        memcpy(c, names, (size_t)n * sizeof *c);
        qsort(c, (size_t)n, sizeof *c, vt_ds_cmp_str);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || strcmp(c[k - 1], c[i]))
            c[k++] = c[i];
    for (int i = 0; i < k; i++)
        c[i] = vt_strdup(c[i]);
    *out_n = k;
    return c;
}

char *vt_ds_class_of(const char *relpath, int skip) {
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

void vt_ds_head_free(vt_dataset_head *h) {
    for (int i = 0; i < h->nclasses; i++)
        free(h->classes[i]);
    free(h->classes);
    memset(h, 0, sizeof *h);
}

void vt_ds_video_free_labels(vt_dataset_video *v) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_freep(&v->tags[h]);
        v->ntags[h] = 0;
        v->label[h] = -1;
    }
    v->labeled = 0;
}

void vt_ds_set_video_class(vt_dataset_video *v, int c) {
    vt_ds_video_free_labels(v);
    if (c >= 0) {
        v->labeled = 1;
        v->label[0] = c;
    }
}

/* ---- --val-split ---- */

/* Uniform in [0,1) from a relative path: stable across scans and machines. */
static double path_unit(const char *relpath) {
    uint64_t h = vt_hash64(vt_fnv1a(relpath, strlen(relpath), VT_FNV_SEED));
    return (double)(h >> 32) * (1.0 / 4294967296.0);
}

/*
 * --val-split: per class, a train video moves to val iff its path hash < fraction. The
 * documented approximation for small classes: a class with >= 2 train videos and none
 * hashed to val sends its lowest-hash video to val, and one with all of them hashed to
 * val (a single video included) keeps its highest-hash video in train. Adding files can
 * only move a video of such a tiny class; every other video's split depends on its own
 * path alone.
 */
void vt_ds_apply_val_split(vt_dataset *ds, double fraction) {
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

/* ---- open and free ---- */

vt_dataset *vt_dataset_open(const char *dir, const vt_dataset_opts *opts, char *err,
                            size_t errlen) {
    vt_dataset_opts o = {0};
    if (opts)
        o = *opts;
    if (o.list_fold <= 0)
        o.list_fold = 1;
    vt_ds_scan sc = {0};
    vt_ds_strv videos = {0}, ignored = {0};
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
    int folders = !o.lists_dir && vt_ds_has_split_folders(dir);
    ds->layout = o.lists_dir ? VT_LAYOUT_LISTS : folders ? VT_LAYOUT_FOLDERS : VT_LAYOUT_FLAT;

    /* Top level: class folders (flat, lists) or split folders; files here are ignored. */
    vt_ds_scan_folder(&sc, dir, &rst, folders);
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
    qsort(videos.s, (size_t)videos.n, sizeof *videos.s, vt_ds_cmp_str);
    if (ignored.n > 1) /* qsort's pointer must not be NULL, even for 0 elements */
        qsort(ignored.s, (size_t)ignored.n, sizeof *ignored.s, vt_ds_cmp_str);
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
        cls[i] = vt_ds_class_of(videos.s[i], skip);
    ds->nheads = 1;
    snprintf(ds->heads[0].name, sizeof ds->heads[0].name, "class");
    ds->heads[0].loss = VT_LOSS_SOFTMAX_CE;
    ds->heads[0].classes = vt_ds_unique_sorted(cls, videos.n, &ds->heads[0].nclasses);
    for (int i = 0; i < videos.n; i++) {
        vt_dataset_video *v = &ds->videos[i];
        v->relpath = videos.s[i];
        videos.s[i] = NULL;
        v->path = vt_ds_join_path(dir, v->relpath);
        vt_ds_video_free_labels(v);
        vt_ds_set_video_class(
            v, vt_ds_find_sorted(ds->heads[0].classes, ds->heads[0].nclasses, cls[i]));
        v->split = VT_SPLIT_TRAIN;
        if (folders)
            v->split = !strncmp(v->relpath, "val/", 4)    ? VT_SPLIT_VAL
                       : !strncmp(v->relpath, "test/", 5) ? VT_SPLIT_TEST
                                                          : VT_SPLIT_TRAIN;
        free(cls[i]);
    }
    free(cls);

    if (o.lists_dir) {
        vt_ds_head_free(&ds->heads[0]);
        if (vt_ds_apply_lists(ds, o.lists_dir, o.list_fold, err, errlen) < 0)
            goto fail;
    }
    if (o.val_split > 0 && !has_val(ds)) {
        ds->val_split = o.val_split;
        vt_ds_apply_val_split(ds, o.val_split);
    }
    vt_ds_strv_free(&videos);
    return ds;
fail:
    vt_ds_strv_free(&videos);
    vt_ds_strv_free(&ignored); /* sc.broken is ds->broken by now, freed with ds */
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
        vt_ds_video_free_labels(v);
    }
    free(ds->videos);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_ds_head_free(&ds->heads[h]);
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

/* ---- split queries ---- */

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
