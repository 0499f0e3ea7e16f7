/*
 * dataset_hmdb.c: HMDB51's split files (--lists DIR, format hmdb51) — one file per class
 * and split, <class>_test_split<N>.txt, each line "video.avi K" naming DIR/<class>/video.avi
 * with K = 1 (train), 2 (test) or 0 (in neither for this split). The class is the file
 * name's prefix (class names hold '_': brush_hair, fall_floor); classes are sorted, ids
 * their positions. --fold N picks the split (HMDB51 has 1, 2, 3).
 *
 * A line that is not "name K" with K in 0..2, or a video listed twice, is warned about
 * with file:line and skipped; a line naming a file that is not there is counted in
 * ds->nmissing (the first few warned). No split file for N, or an unreadable one, fails
 * the open. It must never abort or read outside the buffers on any file contents.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* The class of a split file name for split N ("brush_hair_test_split1.txt" -> "brush_hair",
 * vt_malloc'ed), or NULL when the name is not one of split N. */
static char *class_of_split_file(const char *name, int split) {
    char suffix[64];
    snprintf(suffix, sizeof suffix, "_test_split%d.txt", split);
    size_t n = strlen(name), k = strlen(suffix);
    if (n <= k || strcmp(name + n - k, suffix) || name[0] == '.')
        return NULL;
    char *c = vt_malloc(n - k + 1);
    memcpy(c, name, n - k);
    c[n - k] = 0;
    return c;
}

/* Reads one class's split file: its listed videos get class c and their split. */
static int read_split_file(vt_dataset *ds, const char *path, const char *cls, int c,
                           uint8_t *seen, char *err, size_t errlen) {
    char *text = vt_ds_read_text(path, err, errlen);
    if (!text) {
        return -1;
    }
    char *cur = text, *line;
    int lineno = 0;
    while ((line = vt_ds_next_line(&cur)) != NULL) {
        lineno++;
        if (!*line)
            continue;
        /* "video.avi K": the name is all but the trailing K, so it may hold spaces */
        const char *name = line;
        size_t len = strlen(line);
        int k;
        if (!vt_ds_cut_last_int(line, &k) || k < 0 || k > 2) {
            if (strlen(line) < len)
                line[strlen(line)] = ' '; /* the whole line in the message */
            vt_warn("%s:%d: expected \"video.avi 1|2|0\", got \"%s\"; line skipped\n", path,
                    lineno, line);
            continue;
        }
        char *rel = vt_ds_join_path(cls, name);
        int vi = vt_ds_find_video(ds, rel);
        if (vi < 0) {
            vt_ds_missing(ds, path, lineno, rel);
        } else if (seen[vi]) {
            vt_warn("%s:%d: %s is listed a second time; line skipped\n", path, lineno, rel);
        } else {
            seen[vi] = 1;
            vt_ds_set_video_class(&ds->videos[vi], c);
            ds->videos[vi].split = k == 1 ? VT_SPLIT_TRAIN : k == 2 ? VT_SPLIT_TEST : VT_SPLIT_NONE;
        }
        free(rel);
    }
    free(text);
    return 0;
}

int vt_ds_apply_hmdb(vt_dataset *ds, const char *dir, int split, char *err, size_t errlen) {
    vt_ds_strv classes = {0};
    DIR *d = opendir(dir);
    if (!d) {
        vt_set_err(err, errlen, "cannot read the folder %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *c = class_of_split_file(e->d_name, split);
        if (c)
            vt_ds_strv_push(&classes, c);
    }
    closedir(d);
    if (classes.n == 0) {
        vt_set_err(err, errlen, "%s: no <class>_test_split%d.txt files (HMDB51 split %d; "
                   "--fold picks 1, 2 or 3)", dir, split, split);
        return -1;
    }
    qsort(classes.s, (size_t)classes.n, sizeof *classes.s, vt_ds_cmp_str);

    for (int i = 0; i < ds->nvideos; i++) {
        ds->videos[i].split = VT_SPLIT_NONE;
        vt_ds_video_free_labels(&ds->videos[i]);
    }
    uint8_t *seen = vt_calloc((size_t)(ds->nvideos ? ds->nvideos : 1), 1);
    int rc = 0;
    for (int c = 0; c < classes.n && rc == 0; c++) {
        char name[1100];
        snprintf(name, sizeof name, "%s_test_split%d.txt", classes.s[c], split);
        char *path = vt_ds_join_path(dir, name);
        rc = read_split_file(ds, path, classes.s[c], c, seen, err, errlen);
        free(path);
    }
    free(seen);
    if (rc != 0) {
        vt_ds_strv_free(&classes);
        return -1;
    }
    ds->nheads = 1;
    snprintf(ds->heads[0].name, sizeof ds->heads[0].name, "class");
    ds->heads[0].loss = VT_LOSS_SOFTMAX_CE;
    ds->heads[0].nclasses = classes.n;
    ds->heads[0].classes = classes.s; /* sorted: ids are positions */
    return 0;
}
