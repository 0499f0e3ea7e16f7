/*
 * dataset.c: a video folder as sorted, labelled, split samples — the assembly of
 * vt_dataset_open (folder walk in dataset_scan.c, list files through dataset_lists.c,
 * labels.csv in dataset_labels.c) and the split queries. Names, the helpers those files
 * share are dataset_util.c, which calls none of them (so no file here calls back into
 * the one that calls it); the grouped --val-split dataset_split.c; probing and bad
 * files dataset_probe.c.
 *
 * Every decision here depends only on file names and file contents, never on readdir
 * order, thread timing or a shared RNG: that is what makes splits stable and runs
 * reproducible. It must never decode frames, and never abort on bad data — a bad file
 * or a bad list/CSV line is recorded (or reported with file:line) and skipped.
 */
#include "pipeline/data/dataset/dataset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset_impl.h"

static int has_val(const vt_dataset *ds) {
    for (int i = 0; i < ds->nvideos; i++)
        if (ds->videos[i].split == VT_SPLIT_VAL)
            return 1;
    return 0;
}

/* ---- open and free ---- */

static void marker_path(char *buf, size_t n, const char *dir) {
    snprintf(buf, n, "%s/" VT_DATASET_UNFINISHED, dir);
}

int vt_dataset_mark_unfinished(const char *dir, const char *how, char *err, size_t errlen) {
    char path[4200];
    size_t n = strlen(how) + 2;
    char *line = vt_malloc(n);
    marker_path(path, sizeof path, dir);
    snprintf(line, n, "%s\n", how);
    int rc = vt_file_write_atomic(path, line, strlen(line), err, errlen);
    free(line);
    return rc;
}

int vt_dataset_mark_finished(const char *dir, char *err, size_t errlen) {
    char path[4200];
    marker_path(path, sizeof path, dir);
    /* Not synced: a removal that a crash of the machine undoes brings the mark back, and
     * the folder is refused until its writer runs again (the safe side); syncing the
     * folder here waited for every video written before it (0.3-1 s a synth). */
    if (unlink(path) != 0 && errno != ENOENT) {
        vt_set_err(err, errlen, "cannot remove %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

char *vt_dataset_unfinished(const char *dir) {
    char path[4200];
    struct stat st;
    marker_path(path, sizeof path, dir);
    if (lstat(path, &st) != 0)
        return NULL;
    char *t = vt_file_read(path);
    if (!t || !t[0]) { /* there but unreadable or empty: still unfinished */
        free(t);
        return vt_strdup("its writer (prep or synth) has not written every video");
    }
    t[strcspn(t, "\n")] = 0;
    return t;
}

vt_dataset *vt_dataset_open(const char *dir, const vt_dataset_opts *opts, char *err,
                            size_t errlen) {
    vt_dataset_opts o = {0};
    if (opts)
        o = *opts;
    vt_inputs_add(dir); /* no output of the command may land inside it (base/common.h) */
    if (o.lists_dir) /* nor replace a list file (PATH may be a folder or one CSV) */
        vt_inputs_add(o.lists_dir);
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
    char *unfinished = vt_dataset_unfinished(dir);
    if (unfinished) {
        vt_set_err(err, errlen, "%s is unfinished: %s. To use the videos that are there as "
                   "they are, remove %s/" VT_DATASET_UNFINISHED, dir, unfinished, dir);
        free(unfinished);
        goto fail;
    }
    if (vt_dataset_group_check(o.group, err, errlen) < 0)
        goto fail;
    ds = vt_calloc(1, sizeof *ds);
    pthread_mutex_init(&ds->lock, NULL);
    ds->dir = vt_strdup(dir);
    ds->group = o.group ? vt_strdup(o.group) : NULL;

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
    if (sc.unreadable[0]) {
        vt_set_err(err, errlen, "%s; its videos would be left out (a class left out shifts "
                   "every later class id). Make it readable (chmod a+rX), or move it out of %s",
                   sc.unreadable, dir);
        goto fail;
    }
    /* Loose videos (in DIR itself, no class folder) are no class's, but a labels file or
     * a Kinetics list names files anywhere: a folder of them alone is theirs to read,
     * and the rows that name no file there are reported by their readers. */
    int loose = 0;
    for (int i = 0; i < ignored.n; i++)
        loose += vt_is_video_name(ignored.s[i]);
    if (videos.n == 0 && !(loose && (o.lists_dir || o.labels))) {
        vt_set_err(err, errlen,
                   "no videos under %s (expected %s/<class>/<video>, or %s/<split>/<class>/<video> "
                   "with any of the split folders train, val, test; extensions: %s)%s%s",
                   dir, dir, dir, vt_video_exts_text(), ds->nbroken ? "; some entries could not be followed (see the "
                   "warnings)" : "", loose ? "; the videos there are in no class folder: move "
                   "them into class folders, or name their classes with --labels CSV (a path "
                   "column, then a class column)" : "");
        goto fail;
    }
    if (videos.n > 1) /* qsort's pointer must not be NULL, even for 0 elements: none when
                       * the videos are loose ones a labels file or Kinetics CSV names */
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
        if (vt_ds_apply_lists(ds, &o, err, errlen) < 0)
            goto fail;
        vt_ds_sort_videos(ds); /* list rows may have added entries (segments, files) */
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
    free(ds->group);
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

int vt_dataset_count_stray(const vt_dataset *ds) {
    int n = 0;
    for (int i = 0; i < ds->nignored; i++)
        n += vt_is_video_name(ds->ignored[i]);
    return n;
}
