/*
 * evaluate.h: the evaluation pass that training's validation and `vidtrain eval` share:
 * every clip of the chosen videos through the towers (forward only), each head's
 * probabilities and losses into the evaluation protocol (app/eval/evalproto.h), and the
 * eval.json / val.json form of the result.
 *
 * Every clip is counted once whatever the tower split: the loader hands each clip once,
 * the towers return one output per clip in batch order, and the counts are checked
 * against what was asked for. Under mpirun each rank decodes and evaluates its towers'
 * part of every batch, and the per-video sums of all ranks are added before any metric
 * is computed. It must never train or change a checkpoint.
 */
#ifndef VT_EVALUATE_H
#define VT_EVALUATE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "app/eval/evalproto.h"
#include "app/run/run_heads.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/loader.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/towers/tower.h"

typedef struct vt_eval_opts {
    vt_clip_cfg clip;       /* t, stride, crop, short_side, mean/std; ncrops = crops */
    int clips_per_video;    /* K */
    int crops;              /* 1 or 3 */
    int batch, workers;
    uint64_t seed;
    int quiet;              /* no progress display */
    struct vt_dump *dump;   /* write the inputs and head 0's probabilities (NULL: no) */
} vt_eval_opts;

typedef struct vt_eval_counts {
    int64_t clips;          /* clips evaluated (each once) */
    int64_t videos;         /* videos with at least one clip */
    int64_t expected;       /* videos x K x crops requested */
    int64_t bad_clips;      /* left out because their decode failed */
    int64_t filled_frames;  /* frames of the clips evaluated a damaged stream never gave,
                               filled with the nearest decoded frame (vt_loader_stats) */
    int64_t decode_errors;  /* decode errors the clips' reads met: packets rejected,
                               pictures the decoder repaired (vt_loader_stats) */
    int64_t damaged_videos; /* videos with either: each one's counts are on its dataset
                               entry (damage_errors, damage_filled) until the next one */
    int64_t unknown_videos; /* left out: labelled with a class the model does not know */
} vt_eval_counts;

/* An evaluation loader's configuration from eo (mode, batch, workers, seed, K clips per
 * video, clip with eo->crops crops, no flip); the caller sets the videos. */
void vt_eval_loader_cfg(vt_loader_cfg *lc, const vt_eval_opts *eo);
/* Runs every clip of the videos idx (n) of ds through the towers (forward only) and
 * feeds head h's probabilities and losses to ep[h] (created here: vt_evalproto_free
 * them). Labels of ds are mapped to the model's classes by name before anything uses
 * them, so metrics and loss are right whatever the dataset's class order. Videos with a
 * class (softmax) or tag (BCE) the model does not know are left out before loading,
 * named in a warning and counted in counts->unknown_videos; counts->expected covers the
 * videos kept. 0, or -1 with err (heads or loss kinds that differ from the model's). */
int vt_run_evaluate(vt_evalproto *ep[VT_MAX_HEADS], vt_eval_counts *counts, vt_towers *t,
                    vt_dataset *ds, const vt_run_heads *heads, const int32_t *idx, int n,
                    const vt_eval_opts *eo, char *err, size_t errlen);
/* eval.json / val.json: {"split","clips","videos","clips_per_video","crops","heads":[...]}
 * with head 0's figures also at the top level, and "damaged_videos": the videos of idx (n,
 * those evaluated by vt_run_evaluate on ds) whose clips met decode errors or filled frames,
 * each with its counts. */
cJSON *vt_eval_json(const vt_eval_result *r, const vt_run_heads *heads,
                    const vt_eval_counts *counts, const char *split, const vt_eval_opts *eo,
                    const vt_dataset *ds, const int32_t *idx, int n);

#endif
