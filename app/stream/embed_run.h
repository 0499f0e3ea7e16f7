/*
 * embed_run.h: the features of `vidtrain embed` (docs/embed.md) — a video, a segment of
 * one, or the windows of a video run through a trained model, keeping the pooled
 * features its heads are applied to (vt_towers_eval_features), averaged like predict
 * averages probabilities:
 *   - a video or segment: the K clips x crops of app/eval/eval_clips.h, predict's own clips;
 *     one row with the mean of their features (or, per_clip, one row per clip and crop);
 *   - a timeline: the windows of app/stream/timeline.h, each row the mean over the window's
 *     clips (the engine averages the features as one more "head" of D values).
 * Each row also gets each head's top-1 from the clips' probabilities averaged, exactly
 * predict's (and predict --timeline's) answer.
 *
 * It must never write files: rows go into a vt_embed_set that cmd_embed.c writes.
 */
#ifndef VT_EMBED_RUN_H
#define VT_EMBED_RUN_H

#include "app/stream/embed_out.h"
#include "app/eval/eval_clips.h"
#include "app/run/run_model.h"
#include "pipeline/data/dataset/dataset.h"

typedef struct vt_embedder {
    vt_run_model *m;
    int dim;                       /* D: the heads' input features */
    int per_clip;                  /* one row per clip and crop instead of per video */
    vt_eval_clips ec;              /* clip, K, crops */
    vt_batch b;                    /* K x crops clips (timeline: its own batches) */
    float *probs[VT_MAX_HEADS];    /* (K x crops, classes) */
    float *feat;                   /* (K x crops, D) */
    vt_embed_set *out;
    int64_t nonfinite;             /* timeline: windows of the current video left out, their
                                      features not finite */
    vt_fps_tally fps;              /* videos at a frame rate the run did not train on */
} vt_embedder;

/* Sets e up for m (loaded, towers for at least K x crops clips) writing into out. */
void vt_embedder_init(vt_embedder *e, vt_run_model *m, int K, int crops, int per_clip,
                      vt_embed_set *out);
void vt_embedder_free(vt_embedder *e);

/* The rows of one file (dv NULL: the whole of `path`) or one dataset sample dv (a
 * segment, or a whole file). 0, or -1 with err. */
int vt_embed_sample(vt_embedder *e, const char *path, const vt_dataset_video *dv, char *err,
                    size_t errlen);

typedef struct vt_embed_timeline {
    double window, hop;            /* seconds */
    int K;                         /* clips a window; 0: enough to cover it (at most 16) */
    int batch, threads;
} vt_embed_timeline;

/* One row per window of the video at path (streamed once, "-": standard input). 0, or
 * -1 with err (a video that cannot be read at all; a read error midway keeps the
 * windows before it and is reported on stderr). */
int vt_embed_timeline_video(vt_embedder *e, const char *path, const vt_embed_timeline *tc,
                            char *err, size_t errlen);

#endif
