/*
 * leaks.h: near-copies of training videos in val and test (docs/splits.md) — what `scan`
 * lists and `train` warns about before it starts (RUN/leaks.json; the report and
 * eval.json count them).
 *
 * Every video of a split that is used (train, val, test) gets a perceptual signature
 * (pipeline/data/signature.h), cached on disk under the vidtrain cache folder
 * (VIDTRAIN_CACHE, else $XDG_CACHE_HOME/vidtrain, else ~/.cache/vidtrain: signatures/),
 * keyed by the file like the frame cache is, so a second scan reads them back. Then
 * every val and test video (and --val-dir's, or the folder eval scores) is compared
 * with every training video: O(train x other x frames^2) popcounts, spread over threads. One file listed in two splits (segments of
 * one recording) is a leak of similarity 1.
 *
 * It must never change the dataset or its splits: it reports.
 */
#ifndef VT_LEAKS_H
#define VT_LEAKS_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "pipeline/data/dataset/dataset.h"

/* The share of frames that must match for a pair to be a copy (vt_sig_near): measured
 * with bench/bench-leaks.sh (docs/splits.md). */
#define VT_LEAK_SHARE 0.5

typedef struct vt_leak_pair {
    int train;      /* dataset index of the training video */
    int other;      /* dataset index of the val or test video; from n0 on, the other
                       folder's video other - n0 (vt_leaks_find_with) */
    double sim;     /* the larger share of matched frames (1: the same file) */
    vt_split split; /* the other video's side: VAL or TEST */
} vt_leak_pair;

typedef struct vt_leaks {
    int npairs;
    vt_leak_pair *pairs;         /* sorted by (other, -sim, train) */
    int copied[VT_NSPLITS];      /* videos of val, test with a near-copy in train */
    int total[VT_NSPLITS];       /* videos of each split compared */
    int nsig, ncached, nfailed;  /* signatures made, read from the cache, unreadable */
    int nsparse;                 /* of them, a long-GOP file's keyframes alone (signature.h) */
    int nblank;                  /* of them, with only flat frames (black, white, one colour):
                                    they match nothing, so a copy of one is never found */
    int unchecked[3];            /* the first videos (pool indices, as pairs') that are blank
                                    or failed: named in the note */
    int nunchecked;              /* blank + failed */
    double seconds;              /* signatures and comparison */
    const vt_dataset *ods;       /* the other folder (borrowed), or NULL */
    int n0;                      /* its videos' indices start here (ds->nvideos) */
} vt_leaks;

/* The signature cache folder (signatures/ of the vidtrain cache), made when missing,
 * into buf; NULL when there is none, it lies inside an input folder of the command (the
 * output rule) or it cannot be made (then signatures are computed, not kept). */
const char *vt_leaks_cache_dir(char *buf, size_t n);

/* Signatures for ds's videos (threads: 0 = cores) and the comparison. progress: a line
 * on stderr while it runs (a tty). Returns 0; a video whose signature cannot be made is
 * counted in nfailed and compared with nothing. */
int vt_leaks_find(vt_dataset *ds, int threads, int progress, vt_leaks *out);
/* The same with another folder's videos: ds's training videos against ds's own val and
 * test (own = 1; 0: none of them) and against ods's videos oidx[0..on) (ods may be NULL),
 * which count as split `as` (VAL for train's --val-dir, the split evaluated for eval on
 * another folder). ods must outlive out (its pairs point into it). */
int vt_leaks_find_with(vt_dataset *ds, int own, vt_dataset *ods, const int32_t *oidx, int on,
                       vt_split as, int threads, int progress, vt_leaks *out);
void vt_leaks_free(vt_leaks *l);

/* {"pairs":[{"train":relpath,"other":relpath,"split":"test","similarity":s}],
 *  "val":{"videos":n,"with_copy_in_train":k},"test":{...},"signatures":{...}} */
cJSON *vt_leaks_json(const vt_dataset *ds, const vt_leaks *l);
/* A summary line per split and the first max_pairs pairs. */
void vt_leaks_print(FILE *f, const vt_dataset *ds, const vt_leaks *l, int max_pairs);
/* train's check before it starts: the leaks between ds's train and its val and test
 * (and, vds not NULL, every labelled, readable video of --val-dir's folder, as val),
 * written to RUN/leaks.json, a line on out when there are none, else a warning with the
 * first pairs on stderr — or, strict (--strict-splits), an error with them (the failed
 start removes leaks.json with the rest of the run). 0, or 1 (strict and a
 * leak found). */
int vt_leaks_train_check(vt_dataset *ds, vt_dataset *vds, const char *run_dir, int strict,
                         int progress, FILE *out);
/* "val 3 of 40, test 5 of 60 videos have a near-copy in train" into buf, or "" when none. */
const char *vt_leaks_line(const vt_leaks *l, char *buf, size_t n);

#endif
