/*
 * evalproto.h: the evaluation protocol's arithmetic — from per-clip class probabilities
 * to clip top-1/top-5, video top-1/top-5 (probabilities averaged over a video's clips
 * and crops), mean class accuracy, per-class accuracy and the confusion matrix; for
 * multi-label heads, label-wise accuracy at 0.5 and mean average precision.
 *
 * It is pure maths on host arrays, so test_evalproto can check it on hand-made
 * probabilities with exact expected values. It must never decode, run a network or know
 * about towers: callers feed it each clip exactly once (docs/design.md §3.4) and it
 * counts what it is fed, so a duplicated clip would show up in the counts.
 *
 * Conventions (documented for users in `vidtrain eval --help`):
 *   - top-k: the true class counts as within the top k when fewer than k other classes
 *     score as high or higher: a tie counts against it (a model that scores every class
 *     the same has chosen none; argmax's first maximum would credit it with class 0).
 *     With k >= classes top-k is always 1. A video whose true class ties for the top is
 *     put in the confusion matrix under the first class it ties with.
 *   - mean class accuracy: the mean over classes that have at least one video of each
 *     class's video top-1 accuracy (classes absent from the split are left out).
 *   - confusion[true][pred] counts VIDEOS (rows true class, columns predicted class).
 *   - label-wise accuracy (multi-label): a label is predicted present above 0.5, absent
 *     below; exactly 0.5 (logit 0) is a tie and a miss, as in top-k.
 *   - average precision (multi-label): scikit-learn's average_precision_score over
 *     videos ranked by mean score, tied scores one threshold; a non-finite score is never
 *     retrieved (its positives add no recall).
 */
#ifndef VT_EVALPROTO_H
#define VT_EVALPROTO_H

#include <stdint.h>
#include <stdio.h>

#include "models/net.h"

typedef struct vt_evalproto vt_evalproto;

typedef struct vt_eval_result {
    vt_loss_kind loss;
    int classes;
    int64_t clips;          /* clips fed */
    int64_t videos;         /* videos with at least one clip */
    int64_t nonfinite;      /* clips with a non-finite score (NaN/inf: a diverged model);
                               every such clip, and every video holding one, counts wrong */
    double clip_top1, clip_top5;   /* softmax: fraction of clips; BCE: label-wise acc, 0 */
    double video_top1, video_top5; /* softmax: fraction of videos; BCE: label-wise acc, 0 */
    double mean_class_acc;  /* softmax only */
    double map;             /* BCE only: mean average precision over classes with a positive */
    double loss_sum;        /* sum of per-clip losses fed through vt_evalproto_add_loss */
    double *per_class_acc;  /* (classes) video top-1 per class; NAN for classes with no video */
    int64_t *per_class_videos; /* (classes) videos whose true class is c (softmax) */
    int64_t *confusion;     /* (classes, classes) [true][pred] video counts (softmax) */
} vt_eval_result;

/* nvideos: the dataset's video count (video ids are 0..nvideos-1). */
vt_evalproto *vt_evalproto_init(int nvideos, int classes, vt_loss_kind loss);
void vt_evalproto_free(vt_evalproto **e);

/* One clip (or one crop of a clip: crops are just more views of the video).
 * prob: (classes) softmax probabilities (softmax heads) or sigmoid scores (BCE heads).
 * label: the true class (softmax) — ignored for BCE; target: (classes) {0,1} (BCE) or
 * NULL. Returns 0, or -1 for an out-of-range video or label (a caller bug, reported). */
int vt_evalproto_add(vt_evalproto *e, int video, int label, const float *target,
                     const float *prob);
/* Adds a clip's loss to the running sum (for the validation loss curve). */
void vt_evalproto_add_loss(vt_evalproto *e, double loss);

/* Computes the metrics into r (allocates its arrays; free with vt_eval_result_free).
 * May be called several times; it does not change what was fed. */
void vt_evalproto_result(const vt_evalproto *e, vt_eval_result *r);
void vt_eval_result_free(vt_eval_result *r);

/* Clips fed for one video (0 if none). */
int64_t vt_evalproto_video_clips(const vt_evalproto *e, int video);
/* The scores of one video SUMMED over its clips: (classes), or NULL if it has no clip.
 * Divide by vt_evalproto_video_clips for the average. */
const double *vt_evalproto_video_scores(const vt_evalproto *e, int video);

/* Several processes (app/dist.h): the evaluator's whole state as pack_len numbers. The
 * element-wise SUM of the packs of evaluators fed disjoint clips, unpacked, is the
 * evaluator fed all of them — also when one video's clips were split between them. */
int64_t vt_evalproto_pack_len(const vt_evalproto *e);
void vt_evalproto_pack(const vt_evalproto *e, double *out);
void vt_evalproto_unpack(vt_evalproto *e, const double *in);

/* Row-wise numerically stable softmax: out (n, k) = softmax(logits (n, k)). out may
 * alias logits. */
void vt_softmax_rows(float *out, const float *logits, int n, int k);
/* Element-wise logistic sigmoid. */
void vt_sigmoid(float *out, const float *logits, int64_t n);
/* Indices of the k largest scores (descending, ties to the lower index) into idx (k). */
void vt_topk(int *idx, const float *score, int n, int k);
/* 1 when another of the n scores equals score[top]: a tie for the top, no single answer
 * (eval counts it a miss; predict, --timeline and embed say it). */
int vt_top_tied(const float *score, int n, int top);

/* Human-readable confusion matrix (class names may be NULL: numbers are used). */
void vt_eval_confusion_print(const vt_eval_result *r, const char *const *names, FILE *f);
/* CSV: header "true\pred,<names>..." then one row per true class, written atomically
 * (vt_file_write_atomic; eval writes it in the set of eval.json: base/fileset.h). Returns
 * 0, or -1 with err naming the file. */
int vt_eval_confusion_csv(const vt_eval_result *r, const char *const *names, const char *path,
                          char *err, size_t errlen);

#endif
