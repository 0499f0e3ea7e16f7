/*
 * dataset_impl.h: what the files of the dataset (dataset.c, dataset_scan.c,
 * dataset_lists.c, dataset_labels.c, dataset_probe.c) share and nothing outside
 * pipeline/data/ may use — a growable string list, path and line helpers, sorted
 * lookups, the label bookkeeping of a video and the --val-split (dataset_util.c), the
 * folder walk (dataset_scan.c) and the list-file reader (dataset_lists.c). Whole files
 * and existence checks are models/common.h's vt_file_read / vt_file_exists.
 *
 * Like dataset.h it must never decode frames or abort on bad data, and every helper
 * here depends only on names and contents, never on readdir order or timing. Other
 * folders include pipeline/data/dataset.h only; these names may change with the files.
 */
#ifndef VT_DATASET_IMPL_H
#define VT_DATASET_IMPL_H

#include <stddef.h>
#include <sys/stat.h>

#include "pipeline/data/dataset.h"

/* A growable array of owned strings. */
typedef struct vt_ds_strv {
    char **s;
    int n, cap;
} vt_ds_strv;

void vt_ds_strv_push(vt_ds_strv *v, char *s /* owned */);
void vt_ds_strv_free(vt_ds_strv *v);
int vt_ds_cmp_str(const void *a, const void *b); /* qsort on char * */

/* a/b with one '/' between them (vt_malloc'ed). */
char *vt_ds_join_path(const char *a, const char *b);

/* Next line of a text buffer, trimmed (handles \r\n); NULL at the end. Modifies it. */
char *vt_ds_next_line(char **cursor);

/* Index of name in sorted names (n), or -1. */
int vt_ds_find_sorted(char **names, int n, const char *name);
/* Index of the video with this relpath (ds->videos is sorted by relpath), or -1. */
int vt_ds_find_video(const vt_dataset *ds, const char *relpath);
/* The same in videos[0..n), sorted by relpath. */
int vt_ds_find_video_in(const vt_dataset_video *videos, int n, const char *relpath);
/* Sorted, de-duplicated copies of names (n; names untouched); *out_n gets the count. */
char **vt_ds_unique_sorted(char **names, int n, int *out_n);
/* Class name of a relpath: the component at position `skip` ("train/Walk/x.mp4", skip 1
 * -> "Walk", vt_malloc'ed). NULL when the file sits above the class level. */
char *vt_ds_class_of(const char *relpath, int skip);

void vt_ds_head_free(vt_dataset_head *h);
/* Drops every label and tag of v: unlabeled. */
void vt_ds_video_free_labels(vt_dataset_video *v);
/* v gets class c of head 0 (c < 0: unlabeled). */
void vt_ds_set_video_class(vt_dataset_video *v, int c);

/* --val-split on the current head 0. */
void vt_ds_apply_val_split(vt_dataset *ds, double fraction);

/* ---- the folder walk (dataset_scan.c) ---- */

typedef struct vt_ds_scan {
    vt_ds_strv videos;  /* relpaths of videos at or below the class level, unsorted */
    vt_ds_strv ignored; /* relpaths of other entries ("name/" for a skipped folder) */
    vt_ds_strv broken;  /* "relpath: reason" for what could not be followed (warned) */
    int root_errno;     /* DIR itself could not be listed (0: it could) */
} vt_ds_scan;

/* 1 when DIR holds a split folder (train, val or test) with class folders in it. */
int vt_ds_has_split_folders(const char *dir);
/* Walks dir (a folder, stat'ed as root) with class folders at depth 1, or at depth 2
 * under the split folders when `splits`. Never fails: what cannot be read is in
 * out->broken (or out->root_errno for dir itself). */
void vt_ds_scan_folder(vt_ds_scan *out, const char *dir, const struct stat *root, int splits);

/* ---- UCF101 list files (dataset_lists.c) ---- */

/* classInd.txt, trainlistFF.txt and testlistFF.txt of lists_dir: head 0 becomes
 * classInd's classes, listed videos get their split (train/test) and class, others
 * VT_SPLIT_NONE and unlabeled. Returns 0, or -1 with err set (a list file unreadable,
 * a bad classInd line, no classes); bad list lines are warned about and skipped. */
int vt_ds_apply_lists(vt_dataset *ds, const char *lists_dir, int fold, char *err,
                      size_t errlen);

#endif
