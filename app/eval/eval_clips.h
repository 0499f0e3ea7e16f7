/*
 * eval_clips.h: the evaluation protocol's view of one video (or one segment of it) as
 * network input — K uniformly spaced clips (vt_sample_eval_start over the sample's
 * frames) x 1 or 3 crops (vt_sample_eval_crop), transformed into the rows of a batch in
 * the order clip 0 crop 0, clip 0 crop 1, ... `predict` and `embed` both fill their
 * batches here, so an embedding is made from exactly the clips predict classifies.
 *
 * It must never run the model: it decodes and transforms, the caller runs the batch.
 */
#ifndef VT_EVAL_CLIPS_H
#define VT_EVAL_CLIPS_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/batch.h"
#include "pipeline/data/sample.h"

typedef struct vt_eval_clips {
    vt_clip_cfg clip;       /* the model's clip (vt_run_model_clip) */
    int K, crops;           /* clips per video, crops per clip */
    uint8_t *raw;           /* decode scratch, grown as needed */
    size_t raw_cap;
    int64_t filled;         /* the last fill: frames its clips read that the stream never
                               delivered, filled with the nearest decoded frame */
    int64_t errors;         /* the last fill: decode errors its reads met (packets the
                               decoder rejected, pictures it repaired: vt_video_stats) */
} vt_eval_clips;

/* The K x crops clips of frames r of the open video v (r = {0, nframes}: the whole file;
 * a segment's frames: clips inside it only, the pad policy applied at its end as the
 * loader does) into rows 0.. of b (b->capacity >= K * crops), b->video[i] = 0 and
 * b->clip[i] = i. Returns the rows written (b->n is set to it), or -1 with err (frames
 * smaller than the crop, a decode failure, an empty range); e->filled says how many of
 * the frames read were filled in (vt_video_read_clip) and e->errors how many decode errors
 * the reads met, for the caller to tell. */
int vt_eval_clips_fill(vt_eval_clips *e, vt_video *v, vt_frame_range r, vt_batch *b, char *err,
                       size_t errlen);
/* After a fill: a warning on stderr naming `name` when e->filled or e->errors > 0 (its
 * answer came from fewer frames than it seems, or from frames the decoder repaired),
 * nothing otherwise. */
void vt_eval_clips_warn(const vt_eval_clips *e, const char *cmd, const char *name);
void vt_eval_clips_free(vt_eval_clips *e);

#endif
