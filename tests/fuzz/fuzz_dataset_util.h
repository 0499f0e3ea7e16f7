/*
 * fuzz_dataset_util.h: the small dataset folder the labels.csv and list-file targets scan
 * for every input — a flat layout with two class folders (UCF101-style names), a loose
 * video at the top level and a file that is not a video, so that CSV rows and list lines
 * can name scanned videos, unscanned files that exist, and files that do not. The video
 * files are empty: neither reader opens them (probing is another target's business).
 *
 * It must never be shared between processes (it lives in the process's scratch folder).
 */
#ifndef VT_FUZZ_DATASET_UTIL_H
#define VT_FUZZ_DATASET_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pipeline/data/dataset/dataset.h"
#include "tests/fuzz/fuzz_util.h"

static inline int vt_fuzz_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Makes SCRATCH/data and returns its path (static). */
static inline const char *vt_fuzz_make_dataset(const char *scratch) {
    static char data[1100];
    static const char *const files[] = {
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c01.avi",
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g01_c02.avi",
        "ApplyEyeMakeup/v_ApplyEyeMakeup_g02_c01.avi",
        "Basketball/v_Basketball_g01_c01.avi",
        "Basketball/v_Basketball_g02_c01.avi",
        "Basketball/v_Basketball_g03_c01.mp4",
        "Basketball/notes.txt",
        "loose.mp4",
    };
    char p[2300];
    snprintf(data, sizeof data, "%s/data", scratch);
    mkdir(data, 0755);
    snprintf(p, sizeof p, "%s/ApplyEyeMakeup", data);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/Basketball", data);
    mkdir(p, 0755);
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", data, files[i]);
        vt_fuzz_write(p, "", 0);
    }
    return data;
}

/* The invariants of any dataset vt_dataset_open or vt_dataset_load_labels returned. */
static inline void vt_fuzz_check_dataset(const vt_dataset *ds) {
    FUZZ_ASSERT(ds->nheads >= 1 && ds->nheads <= VT_MAX_HEADS, "%d heads", ds->nheads);
    for (int h = 0; h < ds->nheads; h++) {
        /* Class names are unique (classInd.txt order is not sorted: sort a copy). */
        int n = ds->heads[h].nclasses;
        FUZZ_ASSERT(n >= 1, "head %d has no classes", h);
        char **c = malloc((size_t)n * sizeof *c);
        memcpy(c, ds->heads[h].classes, (size_t)n * sizeof *c);
        qsort(c, (size_t)n, sizeof *c, vt_fuzz_cmp_str);
        for (int k = 1; k < n; k++)
            FUZZ_ASSERT(strcmp(c[k - 1], c[k]) != 0, "head %d: class '%s' twice", h, c[k]);
        free(c);
    }
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        /* Sorted and unique by (path, segment): segments of one file share its path. */
        const vt_dataset_video *u = i ? &ds->videos[i - 1] : NULL;
        int c = u ? strcmp(u->relpath, v->relpath) : -1;
        FUZZ_ASSERT(c < 0 || (c == 0 && (u->seg_start < v->seg_start ||
                                         (u->seg_start == v->seg_start && u->seg_end < v->seg_end))),
                    "videos not sorted and unique at %s", v->relpath);
        FUZZ_ASSERT(v->split >= VT_SPLIT_TRAIN && v->split <= VT_SPLIT_NONE, "split %d",
                    (int)v->split);
        if (!v->labeled)
            continue;
        for (int h = 0; h < ds->nheads; h++) {
            const vt_dataset_head *hd = &ds->heads[h];
            if (hd->loss == VT_LOSS_SOFTMAX_CE) {
                FUZZ_ASSERT(v->label[h] >= 0 && v->label[h] < hd->nclasses,
                            "%s: head %d label %d of %d classes", v->relpath, h, v->label[h],
                            hd->nclasses);
                continue;
            }
            for (int k = 0; k < v->ntags[h]; k++)
                FUZZ_ASSERT(v->tags[h][k] >= 0 && v->tags[h][k] < hd->nclasses &&
                                (k == 0 || v->tags[h][k - 1] < v->tags[h][k]),
                            "%s: head %d tag %d = %d of %d classes (sorted, unique)",
                            v->relpath, h, k, v->tags[h][k], hd->nclasses);
        }
    }
}

#endif
