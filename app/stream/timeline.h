/*
 * timeline.h: `predict --timeline` — windows of a video (start every hop seconds, each
 * window seconds long) classified as they go by, in bounded memory.
 *
 * Frames are pushed in presentation order with their times (from a vt_stream: a file,
 * and later a pipe or a live source). A window is every frame whose time t lies in
 * [start, end); it is complete when a frame at or past its end arrives, or at the end of
 * the stream. A complete window of n frames is classified exactly as `predict` classifies
 * a video of those n frames: K clips at vt_sample_eval_start(n, span, k, K), crops by
 * vt_sample_eval_crop, probabilities averaged — so cutting [start, end) out with the
 * ffmpeg command and predicting it gives the same numbers. Clips of several windows go to
 * the model together (batch clips a call), and each window is emitted, in order, as soon
 * as its last clip has been through it.
 *
 * Memory: the frames of the open windows only (at the model's short side: about window x
 * fps frames), one batch of clips, and the windows waiting for their batch; never the
 * video. It must never seek and never need the duration: at the end of the stream the
 * windows that fit are emitted and one last partial window covers the tail.
 */
#ifndef VT_TIMELINE_H
#define VT_TIMELINE_H

#include <stdint.h>

#include "app/run/run_heads.h"
#include "pipeline/data/batch.h"
#include "pipeline/data/sample.h"

typedef struct vt_timeline_cfg {
    double window, hop;     /* seconds (> 0) */
    int K;                  /* clips per window (>= 1) */
    int crops;              /* 1 or 3 */
    int batch;              /* clips a model call (>= 1) */
    int eager;              /* run the batch as soon as a window's clips are in it (live
                             * sources, --flush): each window out at once, not when a
                             * batch fills; the numbers are the same up to float rounding */
    vt_clip_cfg clip;       /* the model's: t, stride, crop, short_side, mean/std, pad */
    int nheads;
    int classes[VT_MAX_HEADS];
} vt_timeline_cfg;

/* One classified window: [start, end) seconds, nframes frames, partial when the stream
 * ended inside it (end is then the end of the stream); probs[h] (classes[h]) the mean of
 * its clips' probabilities. Valid during the emit call. */
typedef struct vt_timeline_window {
    int64_t index;          /* k: start = k * hop */
    double start, end;
    int64_t nframes;
    int partial;
    double arrived;         /* when its last frame arrived (vt_timeline_push_at; 0: unknown) */
    int64_t decode_errors;  /* noted before its frames (vt_timeline_note_errors): a damaged
                             * stream, whose frames there may be missing or concealed */
    const double *probs[VT_MAX_HEADS];
} vt_timeline_window;

/* The model: fills probs[h] (b->n, classes[h]) for the batch's clips. */
typedef void (*vt_timeline_run_fn)(void *ctx, const vt_batch *b, float *probs[VT_MAX_HEADS]);
typedef void (*vt_timeline_emit_fn)(void *ctx, const vt_timeline_window *w);

typedef struct vt_timeline vt_timeline;

/* A timeline over frames of w x h (the stream's size at clip.short_side). NULL with err
 * for a bad config (frames smaller than the crop, window or hop <= 0...). */
vt_timeline *vt_timeline_new(const vt_timeline_cfg *cfg, int w, int h, vt_timeline_run_fn run,
                             vt_timeline_emit_fn emit, void *ctx, char *err, size_t errlen);
void vt_timeline_free(vt_timeline **tl);
/* Frame rgb (h, w, 3) at time t seconds (non-decreasing; a frame earlier than the one
 * before is dropped), lasting dur seconds (0: unknown). Completes, runs and emits the
 * windows it closes. */
void vt_timeline_push(vt_timeline *tl, const uint8_t *rgb, double t, double dur);
/* The same, with the wall time the frame arrived (its window's `arrived` when it is the
 * window's last frame). */
void vt_timeline_push_at(vt_timeline *tl, const uint8_t *rgb, double t, double dur,
                         double arrived);
/* n decode errors the stream met since the frame pushed last: at time t (seconds, the
 * frames' clock: a rejected packet's timestamp, where the frame it held is missing), so
 * the windows whose [start, end) hold t say so; t NAN (no timestamp, an error from the
 * decoder's output side): on the next frame held instead, which the decoder's reordering
 * delay may put a few frames from the damage. */
void vt_timeline_note_errors(vt_timeline *tl, int64_t n, double t);
/* Gives up the windows that start before t and are not complete yet, and their frames:
 * the next window is the first that starts at or after t (a live source too far behind
 * real time goes on from frame t). Returns how many windows it gave up. */
int64_t vt_timeline_skip(vt_timeline *tl, double t);
/* Runs the clips waiting in the batch now and emits their windows (a stream that stops
 * early: Ctrl-C, a break): the windows still open stay open, nothing partial is made. */
void vt_timeline_drain(vt_timeline *tl);
/* End of the stream: the windows that fit (an end at most half a frame past the last
 * frame's end), then the first that does not when it holds frames no emitted window
 * had (partial). */
void vt_timeline_finish(vt_timeline *tl);

typedef struct vt_timeline_stats {
    int64_t frames;         /* pushed */
    int64_t windows;        /* emitted */
    int64_t clips;          /* through the model */
    int64_t peak_frames;    /* most frames held at once */
    int64_t frame_bytes;    /* bytes of one held frame */
    int64_t backwards;      /* frames left out because their time was before the last
                               frame's by under a second (a broken timestamp): warned at
                               the first, counted in the summary */
    int64_t restarts;       /* times that went back by more (a stream restarted or joined
                               to another): the frames from there go on after the last
                               one; warned at the first, counted in the summary */
} vt_timeline_stats;
void vt_timeline_get_stats(const vt_timeline *tl, vt_timeline_stats *out);

/* Windows a stream of `seconds` gives (the rule of vt_timeline_finish for frames that
 * fill it evenly): complete windows k*hop + window <= seconds, plus one partial. For
 * tests and docs. */
int64_t vt_timeline_expected_windows(double seconds, double window, double hop);

/* Clips a window (its K): K when K > 0, else enough clips to cover a window's frames at
 * the nominal rate fps (30 when the stream does not say), 1 to 16. predict --timeline
 * and embed --timeline both use it. */
int vt_timeline_clips_for(int K, double window, double fps, const vt_clip_cfg *clip);

#endif
