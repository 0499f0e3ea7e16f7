/*
 * dataset.h: a folder of videos as a list of labelled samples — scan DIR/<class>/<video>
 * (or DIR/<split>/<class>/<video> with any of train, val, test, or UCF101-style list
 * files), assign splits, read multi-head labels from a CSV, and probe every file once
 * with FFmpeg. Symbolic links are followed, to folders and to files; a dangling link or
 * a link back to a folder above it (a loop) is warned about, listed and skipped.
 *
 * Everything here is a pure function of the folder's contents: videos are sorted by
 * their path relative to DIR, class ids are the sorted class names (or classInd.txt's
 * numbering), and --val-split puts a video in val from a hash of its relative path, so
 * a file keeps its split when others are added. This file must never decode frames or
 * abort on a bad file: bad files are data errors, recorded with their reason.
 *
 * A sample may be a segment of a file (a labels row with start/end, a Kinetics CSV row
 * over an untrimmed video): then several samples share one path, each its own entry of
 * ds->videos with its own labels and split (docs/segments.md).
 *
 * One concern a file: dataset.c (open, splits, queries), dataset_scan.c (the folder
 * walk), dataset_lists.c (UCF101 lists and the list-format detection), dataset_hmdb.c
 * (HMDB51 split files), dataset_kinetics.c (Kinetics CSVs), dataset_labels.c
 * (labels.csv), dataset_segments.c (entries that share a file), dataset_probe.c
 * (probing, bad files), dataset_shortcut.c (file properties that give a class away),
 * dataset_copies.c (one file's bytes under two names),
 * dataset_util.c (names, shared helpers), dataset_split.c
 * (--val-split grouped by recording, --group); what they share is dataset_impl.h, private to pipeline/data/.
 */
#ifndef VT_DATASET_H
#define VT_DATASET_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "models/net.h"
#include "pipeline/data/sample.h"
#include "pipeline/data/video/video.h"

typedef enum vt_split {
    VT_SPLIT_TRAIN = 0,
    VT_SPLIT_VAL = 1,
    VT_SPLIT_TEST = 2,
    VT_SPLIT_NONE = 3, /* found on disk but in no list file: not used */
} vt_split;
#define VT_NSPLITS 4

typedef enum vt_dataset_layout {
    VT_LAYOUT_FLAT,    /* DIR/<class>/<video>; all train unless --val-split */
    VT_LAYOUT_FOLDERS, /* DIR/<split>/<class>/<video> for any non-empty subset of the split
                          folders train, val, test: one that holds a folder (its classes);
                          other top-level entries are ignored */
    VT_LAYOUT_LISTS,   /* DIR/<class>/<video> + classInd.txt, trainlistNN.txt, testlistNN.txt */
} vt_dataset_layout;

/* Why a video is excluded. OPEN failures are a property of the file (deterministic), READ
 * failures of one clip position; both exclude the video from later epochs. */
typedef enum vt_bad_kind {
    VT_BAD_NONE = 0,
    VT_BAD_OPEN = 1,
    VT_BAD_READ = 2,
} vt_bad_kind;

/* What --lists names (VT_LISTS_AUTO: told apart by vt_dataset_lists_detect). */
typedef enum vt_lists_format {
    VT_LISTS_AUTO = 0,
    VT_LISTS_UCF101,   /* a folder: classInd.txt, trainlist0F.txt, testlist0F.txt */
    VT_LISTS_HMDB51,   /* a folder: <class>_test_split<F>.txt, lines "video.avi 1|2|0" */
    VT_LISTS_KINETICS, /* a CSV file (or a folder of them) with the header
                          label,youtube_id,time_start,time_end,split */
} vt_lists_format;

typedef struct vt_dataset_opts {
    double val_split;      /* 0: none. (0,1): per class, a video is val iff
                              hash(relpath) / 2^32 < val_split; applies to train
                              videos only, and only when the layout has no val split */
    const char *lists_dir; /* --lists: a list folder or a Kinetics CSV (format below) */
    int list_fold;         /* UCF101 fold F / HMDB51 split F (1..9); 0 = 1 */
    vt_lists_format lists_format; /* VT_LISTS_AUTO: detected from what lists_dir holds */
    const char *group;     /* --group: which videos are one recording, kept on one side by
                              --val-split. NULL or "auto": UCF101 (v_X_g08_c01) and HMDB51
                              names recognised; "none": every file its own group; else a
                              POSIX ERE over the relpath whose first capture group names
                              the recording (no match: the file is its own group) */
    const char *labels;    /* the labels CSV vt_dataset_load_labels will read next, or
                              NULL: like a Kinetics list it names files anywhere under the
                              folder, loose ones included, so a folder of loose videos and
                              no class folder opens (the rows say which are samples) */
} vt_dataset_opts;

/* The recordings --val-split kept whole (dataset_split.c). Counted over the videos the
 * split drew from (labelled train videos before it); zero when there was no split. */
typedef struct vt_dataset_groups {
    int ngroups[VT_NSPLITS];    /* groups on each side (train, val) */
    int nvideos_grouped;        /* videos that share their group with another video */
    int nucf, nhmdb, nregex;    /* videos whose name a rule recognised (auto: UCF101,
                                   HMDB51; --group REGEX: matched) */
    char mode[16];              /* "auto", "none" or "regex" */
} vt_dataset_groups;

typedef struct vt_dataset_head {
    char name[32];         /* "class" for folder labels, else the CSV header cell */
    vt_loss_kind loss;     /* SOFTMAX_CE: one class per video; BCE: a set of tags */
    int nclasses;
    char **classes;        /* (nclasses) names; id = position */
} vt_dataset_head;

typedef struct vt_dataset_video {
    char *relpath;         /* relative to the dataset folder, '/'-separated */
    char *path;            /* dir/relpath, what vt_video_open gets */
    vt_split split;
    int labeled;           /* 0: no label (class not in classInd, no labels.csv row) */
    int32_t label[VT_MAX_HEADS];  /* softmax heads: class id */
    int32_t *tags[VT_MAX_HEADS];  /* BCE heads: sorted tag ids (ntags[h]) */
    int ntags[VT_MAX_HEADS];
    /* A segment: the sample is the frames whose timestamps (seconds from the file's
     * first frame) lie in [seg_start, seg_end). seg_end <= 0: the whole file. */
    double seg_start, seg_end;
    /* Filled by vt_dataset_probe. */
    int probed;
    vt_video_info info;    /* valid when probed and not bad (the whole file's) */
    int64_t seg_first, seg_frames; /* the sample's frames [seg_first, +seg_frames): the
                              segment's, or (0, info.nframes); 0 frames: the segment
                              lies past the end of the file (marked bad) */
    /* Guarded by the dataset's lock once loaders run: use vt_dataset_bad(). */
    vt_bad_kind bad;
    char *reason;          /* FFmpeg's reason when bad */
    int damaged;           /* a clip of it held frames the stream never gave or met decode
                              errors (said once: vt_dataset_mark_damaged); guarded by the
                              lock too */
    int64_t damage_errors; /* the damage its clips met, each clip and crop its own, added by
                              the loaders (vt_dataset_mark_damaged), from 0 where an
                              evaluation set them so: decode errors ... */
    int64_t damage_filled; /* ... and frames filled in (never decoded); guarded by the lock */
} vt_dataset_video;

typedef struct vt_dataset {
    char *dir;
    vt_dataset_layout layout;
    int nvideos;
    vt_dataset_video *videos;   /* (nvideos) sorted by relpath, then segment start, end */
    int nheads;
    vt_dataset_head heads[VT_MAX_HEADS];
    int nignored;
    char **ignored;             /* (nignored) relpaths of the files left out: not
                                   videos, or videos above the class level (stray) */
    int nmissing;               /* list-file lines naming files that are not there */
    int nsegments;              /* entries that are segments (seg_end > 0) */
    int nbroken;
    char **broken;              /* (nbroken) "relpath: reason" for what the scan could not
                                   follow — dangling links, links back to a folder above
                                   them (loops), unreadable folders, FIFOs and devices —
                                   each also warned about once; never fatal */
    double val_split;           /* the option, re-applied after vt_dataset_load_labels */
    char *group;                /* --group as given (NULL: auto), re-applied with it */
    vt_dataset_groups groups;   /* what the last --val-split made of the groups */
    pthread_mutex_t lock;       /* guards bad/reason, damaged and damage_* */
} vt_dataset;

/* 1 when v is a segment of its file (seg_end > 0), 0 for a whole file. */
static inline int vt_dataset_is_segment(const vt_dataset_video *v) { return v->seg_end > 0; }

/* Seconds of the sample: a segment's length (cut at the end of the file once probed),
 * else the file's duration (0 before probing). What clips are spread over. */
double vt_dataset_sample_duration(const vt_dataset_video *v);

/* The frames v's clips are drawn from (sample.h): a segment's (probed, else worked out
 * now: from the timestamps of vid when open, from the frame rate when only info is at
 * hand, as for a frame cache), or the whole file (0, info->nframes). */
vt_frame_range vt_dataset_sample_frames(const vt_dataset_video *v, const vt_video *vid,
                                        const vt_video_info *info);

/* "a/x.mp4" or, for a segment, "a/x.mp4 [12.000-22.000]": how messages name a sample
 * (into buf, n bytes; returns buf). */
const char *vt_dataset_sample_name(const vt_dataset_video *v, char *buf, size_t n);

/* Recognised by extension (case-insensitive; the list: vt_video_exts_text, mp4 avi mkv
 * ... mts wmv 3gp vob mxf ... h264). Other files are ignored and listed in ds->ignored. */
int vt_is_video_name(const char *name);
/* The extensions, space-separated, for messages. */
const char *vt_video_exts_text(void);
/* Of ds->ignored, the files with a video's name: videos above the class level (a video
 * in DIR or DIR/train itself, not in a class folder), left out like the rest. */
int vt_dataset_count_stray(const vt_dataset *ds);
const char *vt_split_name(vt_split s);
/* "train", "val", "test" -> the split; anything else -1. */
int vt_split_parse(const char *name);

/* The group key of a video (what --group makes of a relpath), into out (n bytes):
 * `group` as in vt_dataset_opts (a regex must pass vt_dataset_group_check). Returns
 * 1 (UCF101 name), 2 (HMDB51 name), 3 (the regex matched), or 0: no rule matched and the
 * key is the relpath itself. HMDB51's key is the source video's name: the file name
 * without the class and the "_u_nm_np1_fr_goo_0" tags, so every clip cut from one
 * source video, in any class, is one group; UCF101's is "gNN", the group number its own
 * train/test lists split by (the same number in every class is one group there too). */
int vt_dataset_group_key(const char *group, const char *relpath, char *out, size_t n);
/* Checks a --group value: 0, or -1 with err set (a regex that does not compile, or has
 * no capture group). */
int vt_dataset_group_check(const char *group, char *err, size_t errlen);
/* "groups (UCF101 names): 21 in train, 4 in val" — the plan line's part on groups, or ""
 * when the split kept no group of several videos together. */
const char *vt_dataset_groups_line(const vt_dataset *ds, char *buf, size_t n);

/*
 * A folder being written as a dataset (prep's DST, synth's DIR) holds the hidden file
 * VT_DATASET_UNFINISHED from before its first video until its writer has written the
 * last: a writer killed, interrupted or stopped by a full disk leaves it there, and
 * vt_dataset_open refuses the folder with the text it holds (how to finish it). A killed
 * prep's DST was trained on as if whole: fewer videos, a split or a class missing, and
 * nothing said. Hidden, so the folder scan never takes it for a sample.
 */
#define VT_DATASET_UNFINISHED ".vidtrain-unfinished"
/* Writes dir/VT_DATASET_UNFINISHED holding `how` (one line: who writes dir and how to
 * finish it), atomically. 0, or -1 with err naming the path. */
int vt_dataset_mark_unfinished(const char *dir, const char *how, char *err, size_t errlen);
/* Removes it (a missing one is no error). 0, or -1 with err. */
int vt_dataset_mark_finished(const char *dir, char *err, size_t errlen);
/* When dir holds the marker: its text (malloc'd, no trailing newline); else NULL. */
char *vt_dataset_unfinished(const char *dir);

/* Scan dir. opts may be NULL. Returns NULL with err set when dir is unreadable or
 * unfinished (VT_DATASET_UNFINISHED), a list file is missing or malformed, or no video is
 * found. Entries that cannot be followed
 * (ds->broken) are never an error by themselves. */
vt_dataset *vt_dataset_open(const char *dir, const vt_dataset_opts *opts, char *err,
                            size_t errlen);
void vt_dataset_free(vt_dataset **ds);

/* What lists_dir holds: UCF101 (classInd.txt), HMDB51 (*_test_split<N>.txt), Kinetics
 * (a .csv with youtube_id, time_start, time_end columns, or a folder of them), or
 * VT_LISTS_AUTO with err set when none. */
vt_lists_format vt_dataset_lists_detect(const char *lists_dir, char *err, size_t errlen);
const char *vt_lists_format_name(vt_lists_format f);
/* "ucf101", "hmdb51", "kinetics", "auto" -> the format; anything else -1. */
int vt_lists_format_parse(const char *name);

/*
 * Multi-head labels: a CSV with a header row; the first column is the video path
 * relative to the dataset folder, then one column per head (the header names it).
 * Columns named "start" and "end" (both, any position after the path) are not heads:
 * they give a segment in seconds, and then a path may have several rows, each its own
 * sample (an empty start and end: the whole file). A
 * column where any cell holds several ';'-separated tags is multi-label (BCE) with
 * classes = sorted union of its tags (an empty cell = no tags); otherwise it is a
 * softmax head with classes = sorted cell values (an empty cell is a bad line). Paths
 * are normalised ("./A//x.mp4" is "A/x.mp4": one file, one video). Bad lines (wrong
 * column count, unknown or duplicate path and segment, a path with "..", a start or end
 * that is not a number or end <= start) are reported with file:line
 * through vt_warn, counted in *nbad (may be NULL) and skipped. Rows naming a file that
 * exists under the folder but was not scanned add it. Videos without a row become
 * unlabeled. The heads replace the folder's "class" head. With --val-split and a layout
 * without its own val split, the split is redone, stratified by the first head when it
 * is a softmax head (by nothing otherwise).
 * Returns 0, or -1 with err set (unreadable file, no header, no valid row, > 8 heads, a
 * multi-label column where no valid row has a tag: a head needs a class).
 */
int vt_dataset_load_labels(vt_dataset *ds, const char *csv_path, int *nbad, char *err,
                           size_t errlen);

/* Progress: called from the probing threads under a lock, done of total. */
typedef void (*vt_probe_progress_fn)(void *ctx, int done, int total);

/* Open every video once (vt_video_open with 1 decoder thread) on `threads` threads (0 =
 * cores), record its info, or mark it bad (VT_BAD_OPEN) with FFmpeg's reason; with
 * warn != 0 each bad file is reported once through vt_warn. Returns the number bad, or -1
 * when the system refused to open a file meanwhile (vt_video_system_failed: the caller
 * stops with its message; the videos it hit are not marked). */
int vt_dataset_probe(vt_dataset *ds, int threads, int warn, vt_probe_progress_fn progress,
                     void *ctx);

/* Mark video i bad (thread-safe). Returns 1 when this call marked it (report it then),
 * 0 when it already was, or when the system refused to open a file (no video is marked
 * after that: vt_video_system_failed). */
int vt_dataset_mark_bad(vt_dataset *ds, int i, vt_bad_kind kind, const char *reason);
vt_bad_kind vt_dataset_bad(vt_dataset *ds, int i);
int vt_dataset_count_bad(vt_dataset *ds);
/* Mark video i damaged: a clip of it was read with `filled` frames its stream never
 * delivered (filled with the nearest decoded one) and `errors` decode errors (packets
 * rejected, pictures repaired), added to its damage_* counts. It stays in use; the mark
 * only makes the loaders name it once a process. Returns 1 when this call marked it
 * (thread-safe); 0, marking nothing, after the system refused a file or memory (the
 * errors are the limit's: vt_video_failed_short). */
int vt_dataset_mark_damaged(vt_dataset *ds, int i, int64_t errors, int64_t filled);

/* Indices of labelled, not-bad videos of a split, ascending, into *out (free with
 * free()). Returns the count. */
int vt_dataset_split_indices(vt_dataset *ds, vt_split split, int32_t **out);
int vt_dataset_split_count(vt_dataset *ds, vt_split split);
/* The split to validate on: VAL if it has videos, else TEST (UCF101 lists), else VAL. */
vt_split vt_dataset_eval_split(vt_dataset *ds);

/* A property of the files that gives a class away (dataset_shortcut.c: frame rate, size,
 * codec, pixel format): `given` of the class's `total` probed samples have a value that
 * samples of the class in two files at least have and no sample of another class has; `values`
 * names up to three of them. */
typedef struct vt_shortcut {
    int property; /* vt_shortcut_property_name */
    int cls;      /* head 0's class */
    int given, total;
    char values[128];
} vt_shortcut;
/* The shortcuts among the readable, labelled samples of `split` (-1: every split), head 0
 * if it is softmax, after vt_dataset_probe: a class of at least 3 samples of which 80% or
 * more have values no other class has. *out (free()) sorted by property, then class;
 * returns how many. */
int vt_dataset_shortcuts(vt_dataset *ds, int split, vt_shortcut **out);
const char *vt_shortcut_property_name(int property);
/* One paragraph a property, its first line after prefix, then a hint; `what`
 * names the samples ("training videos"). Nothing when n is 0. */
void vt_dataset_shortcuts_print(FILE *f, const char *prefix, const vt_dataset *ds,
                                const vt_shortcut *s, int n, const char *what);

/* Two samples whose files hold the same bytes under two names (dataset_copies.c: a copy,
 * not a link; segments left out): dataset indices a < b's first copy of the pair. */
typedef struct vt_dataset_copy {
    int a, b;
} vt_dataset_copy;
/* The copies among the readable, labelled whole-file samples of every split, each a pair
 * with the first of its group; reads only files whose size another shares. *out (free()),
 * the count. */
int vt_dataset_copies(vt_dataset *ds, vt_dataset_copy **out);
/* 1 when samples a and b carry the same labels on every head. */
int vt_dataset_same_labels(const vt_dataset *ds, int a, int b);
/* A paragraph naming them (the first 10), its first line after prefix, and a hint. */
void vt_dataset_copies_print(FILE *f, const char *prefix, const vt_dataset *ds,
                             const vt_dataset_copy *c, int n);

/* Two classes of one head whose names differ only in case, spaces, '_' or '-'
 * (dataset_names.c): classes[head][a] and [b], a < b. */
typedef struct vt_like_classes {
    int head, a, b;
} vt_like_classes;
/* Such pairs, each later class with the first it is like; *out (free()), the count. */
int vt_dataset_like_classes(const vt_dataset *ds, vt_like_classes **out);
/* A paragraph naming them (the first 10), its first line after prefix, and a hint. */
void vt_dataset_like_classes_print(FILE *f, const char *prefix, const vt_dataset *ds,
                                   const vt_like_classes *l, int n);

/* The heads as a network would see them (name, classes, loss; weight 1, smoothing 0). */
void vt_dataset_head_cfgs(const vt_dataset *ds, vt_head_cfg *out /* (nheads) */);

#endif
