/*
 * dataset_impl.h: what the files of the dataset (dataset.c, dataset_scan.c,
 * dataset_lists.c, dataset_hmdb.c, dataset_kinetics.c, dataset_labels.c,
 * dataset_segments.c, dataset_probe.c, dataset_split.c) share and nothing outside
 * pipeline/data/ may use — a growable string list, path, line and CSV helpers, sorted
 * lookups, the label bookkeeping of a video (dataset_util.c), the grouped --val-split
 * (dataset_split.c), entries that share a file (dataset_segments.c), the folder walk (dataset_scan.c) and the list-file readers
 * (dataset_lists.c and the format files). Whole files and existence checks are
 * base/common.h's vt_file_read / vt_file_exists.
 *
 * Like dataset.h it must never decode frames or abort on bad data, and every helper
 * here depends only on names and contents, never on readdir order or timing. Other
 * folders include pipeline/data/dataset/dataset.h only; these names may change with the files.
 */
#ifndef VT_DATASET_IMPL_H
#define VT_DATASET_IMPL_H

#include <stddef.h>
#include <sys/stat.h>

#include "pipeline/data/dataset/dataset.h"

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
/* Reads a whole text file the dataset lists or labels are in: NULL with err set
 * ("PATH: reason") when it cannot be read, or when it holds a NUL byte or bytes that are
 * not UTF-8 ("PATH:LINE: ..."), so that no reader ever stops early at a NUL or takes
 * half a character into a class name. The text is NUL-terminated and the caller's. */
char *vt_ds_read_text(const char *path, char *err, size_t errlen);
char *vt_ds_next_line(char **cursor);

/* A list line "NAME N" or "N NAME" cut in two where the number ends or begins, so that
 * NAME may hold spaces ("Apply Eye Makeup/v_x.avi 1", "1 Apply Eye Makeup"): the name is
 * the rest of the line, trimmed. vt_ds_cut_last_int: 1 with *n the trailing integer and
 * the line cut before it (its right side trimmed) when the line ends in whitespace and
 * an integer; 0 and the line untouched otherwise. vt_ds_cut_first_int: 1 with *n the
 * leading integer and *rest what follows its whitespace when the line starts with one; 0
 * otherwise. line is trimmed as vt_ds_next_line returns it. */
int vt_ds_cut_last_int(char *line, int *n);

/* Removes the entries of ds->ignored that drop[i] marks (files a labels file or a Kinetics
 * CSV made samples of), in order, freeing their names, and frees drop
 * ((ds->nignored) bytes at least). */
void vt_ds_drop_ignored(vt_dataset *ds, uint8_t *drop);
int vt_ds_cut_first_int(char *line, int *n, char **rest);

/* Next CSV record of a text buffer, trimmed like vt_ds_next_line, but a newline inside
 * a quoted field (RFC 4180) is part of the record: *lines says how many lines it took
 * (the caller's line count advances by it), *open_quote is 1 when a quoted field is
 * still open at the end of the text (the caller refuses the file). NULL at the end. */
char *vt_ds_next_record(char **cursor, int *lines, int *open_quote);

/* A CSV text read record by record (vt_ds_next_record), empty records skipped: cur the
 * text still to read (set it to the text), at the line the last record returned starts
 * on (a quoted field may hold newlines), for messages. */
typedef struct vt_ds_csv {
    char *cur;
    int lineno, at, unclosed;
} vt_ds_csv;
/* The next non-empty record of c; NULL at the end of the text, or NULL with c->unclosed
 * set and err ("PATH:LINE: a quoted field is not closed ...") when a quoted field is
 * still open at the end of the text (the reader refuses the file). */
char *vt_ds_csv_next(vt_ds_csv *c, const char *path, char *err, size_t errlen);

/* One CSV line split into fields (RFC 4180 quotes, "" inside quotes), each trimmed,
 * appended to out. Returns out->n. */
int vt_ds_csv_fields(vt_ds_strv *out, const char *line);

/* Index of name in sorted names (n), or -1. */
int vt_ds_find_sorted(char **names, int n, const char *name);
/* Index of the video with this relpath (ds->videos is sorted by relpath), or -1. */
int vt_ds_find_video(const vt_dataset *ds, const char *relpath);
/* The same in videos[0..n), sorted by relpath. */
int vt_ds_find_video_in(const vt_dataset_video *videos, int n, const char *relpath);
/* Sorted, de-duplicated copies of names (n; names untouched); *out_n gets the count. */
char **vt_ds_unique_sorted(char **names, int n, int *out_n);
/* Class name of a relpath: the component at position `skip` ("train/Walk/x.mp4", skip 1
 * -> "Walk", vt_malloc'ed), in Unicode NFC (base/nfc.h). NULL when the file sits above
 * the class level. */
char *vt_ds_class_of(const char *relpath, int skip);

void vt_ds_head_free(vt_dataset_head *h);
/* Drops every label and tag of v: unlabeled. */
void vt_ds_video_free_labels(vt_dataset_video *v);
/* v gets class c of head 0 (c < 0: unlabeled). */
void vt_ds_set_video_class(vt_dataset_video *v, int c);

/* --val-split on the current head 0, grouped by ds->group (dataset_split.c); fills
 * ds->groups. */
void vt_ds_apply_val_split(vt_dataset *ds, double fraction);

/* ---- samples that share a file: segments (dataset_segments.c) ---- */

/* A new entry at the end of ds->videos for relpath (path = dir/relpath), split TRAIN,
 * unlabeled, whole file; ds->videos may move. Its index. Sort with vt_ds_sort_videos. */
int vt_ds_add_video(vt_dataset *ds, const char *relpath);
/* ds->videos sorted by (relpath, seg_start, seg_end); ds->nsegments recounted. */
void vt_ds_sort_videos(vt_dataset *ds);
/* Index of the first entry with this relpath (several when segments share it), or -1. */
int vt_ds_find_video_first(const vt_dataset *ds, const char *relpath);
/* A number of seconds: "12", "12.5", " 3e1 " (finite, >= 0). 0, or -1 when s is not. */
int vt_ds_parse_seconds(const char *s, double *out);
/* "path [a-b]" warnings: at most `shown` of a kind are printed one by one; the count of
 * the rest is the caller's summary line. */
#define VT_DS_WARN_SHOWN 10

/* ---- the folder walk (dataset_scan.c) ---- */

typedef struct vt_ds_scan {
    vt_ds_strv videos;  /* relpaths of videos at or below the class level, unsorted */
    vt_ds_strv ignored; /* relpaths of other entries ("name/" for a skipped folder) */
    vt_ds_strv broken;  /* "relpath: reason" for what could not be followed (warned) */
    int root_errno;     /* DIR itself could not be listed (0: it could) */
    char unreadable[1400]; /* "": every folder walked could be listed; else the first that
                              could not, "DIR/rel: reason" (the caller refuses the dataset:
                              its videos, maybe a whole class, would be missing) */
} vt_ds_scan;

/* 1 when DIR holds a split folder (train, val or test) with class folders in it. */
int vt_ds_has_split_folders(const char *dir);
/* Walks dir (a folder, stat'ed as root) with class folders at depth 1, or at depth 2
 * under the split folders when `splits`. Never fails: an entry that cannot be followed
 * is in out->broken (warned), a folder that cannot be listed in out->unreadable (or
 * out->root_errno for dir itself). */
void vt_ds_scan_folder(vt_ds_scan *out, const char *dir, const struct stat *root, int splits);

/* ---- list files (dataset_lists.c, dataset_hmdb.c, dataset_kinetics.c) ---- */

/* --lists in the format given or detected: head 0 becomes the lists' classes, listed
 * videos (or segments) get their split and class, every other scanned video
 * VT_SPLIT_NONE and unlabeled; lines naming files that are not there are warned about
 * (the first few with file:line, then a count) and counted in ds->nmissing. Returns 0,
 * or -1 with err set (a list file unreadable or malformed, no classes). */
int vt_ds_apply_lists(vt_dataset *ds, const vt_dataset_opts *o, char *err, size_t errlen);
/* The formats (the same contract; fold: UCF101 fold / HMDB51 split number). */
int vt_ds_apply_hmdb(vt_dataset *ds, const char *dir, int split, char *err, size_t errlen);
int vt_ds_apply_kinetics(vt_dataset *ds, const char *path, char *err, size_t errlen);
/* A list line naming a file that is not there: warned (the first VT_DS_WARN_SHOWN),
 * counted in ds->nmissing; vt_ds_missing_summary prints the count of the rest. */
void vt_ds_missing(vt_dataset *ds, const char *file, int line, const char *name);
void vt_ds_missing_summary(const vt_dataset *ds, const char *lists);

#endif
