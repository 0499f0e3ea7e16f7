/*
 * timeline.c: the window engine of `predict --timeline` (timeline.h) — a ring of the
 * open windows' frames, a batch of clips filled window after window, and a queue of the
 * windows whose clips are in the batch, emitted in order once the model ran them.
 *
 * It must never hold a frame that no open window contains, and never let a window's
 * numbers depend on which batch (or with which other windows) its clips went through
 * beyond float rounding: each clip is built from the window's own frames alone.
 */
#include "app/stream/timeline.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

/* A step back in time larger than this is the stream restarting (spliced on); a smaller
 * one is a broken timestamp (its frame left out). A second: more than any frame interval
 * or B-frame reordering, less than the start of a second file joined to a first. */
#define TL_RESTART 1.0

/* Times closer than this are equal: a microsecond, far under any frame interval, so a
 * frame at 2.0 s computed as 1.9999999999 still opens the window starting at 2 s (the
 * ffmpeg command compares such times exactly in the stream's time base). */
#define TL_EPS 1e-6

typedef struct held { /* a frame of the ring */
    uint8_t *rgb;     /* (h, w, 3) */
    double t, arrived;
    int64_t errors;   /* decode errors noted since the frame held before it */
} held;

typedef struct pending { /* a window whose clips are (partly) in the batch */
    vt_timeline_window w;
    int clips, done;
    double *sum[VT_MAX_HEADS];
} pending;

struct vt_timeline {
    vt_timeline_cfg cfg;
    int w, h;
    size_t frame_bytes;
    vt_timeline_run_fn run;
    vt_timeline_emit_fn emit;
    void *ctx;
    held *ring;             /* (cap) frames [head, head + n) mod cap, times increasing */
    int64_t cap, head, n;
    uint8_t **spare;        /* buffers of dropped frames, for reuse */
    int64_t nspare;
    int64_t next;           /* the oldest window not yet complete */
    double last_t, last_dur, covered; /* covered: end of the last window emitted */
    double splice;          /* added to the stream's times: moved on at each restart */
    int any;
    uint8_t *clip;          /* (t, h, w, 3) one clip's frames, gathered */
    vt_batch b;
    float *probs[VT_MAX_HEADS];
    pending *q;             /* (qcap) windows in the batch, oldest first */
    int qn, qcap;
    int32_t *row_win;       /* (batch) the q entry each batch row belongs to */
    vt_timeline_stats st;
    int64_t errors;         /* noted without a time, not yet on a held frame */
    struct { double t; int64_t n; } *marks; /* errors noted at a time, in the open windows */
    int nmarks, capmarks;
};

static double win_start(const vt_timeline *tl, int64_t k) { return (double)k * tl->cfg.hop; }
static double win_end(const vt_timeline *tl, int64_t k) { return win_start(tl, k) + tl->cfg.window; }

vt_timeline *vt_timeline_new(const vt_timeline_cfg *cfg, int w, int h, vt_timeline_run_fn run,
                             vt_timeline_emit_fn emit, void *ctx, char *err, size_t errlen) {
    if (!(cfg->window > 0) || !(cfg->hop > 0) || cfg->K < 1 || cfg->batch < 1 ||
        (cfg->crops != 1 && cfg->crops != 3) || cfg->nheads < 1) {
        vt_set_err(err, errlen, "window %g s, hop %g s, %d clips x %d crops, batch %d: window and "
                   "hop must be > 0, crops 1 or 3", cfg->window, cfg->hop, cfg->K, cfg->crops,
                   cfg->batch);
        return NULL;
    }
    if (w < cfg->clip.crop || h < cfg->clip.crop) {
        vt_set_err(err, errlen, "frames scale to %dx%d, smaller than the %d crop", w, h,
                   cfg->clip.crop);
        return NULL;
    }
    vt_timeline *tl = vt_calloc(1, sizeof *tl);
    tl->cfg = *cfg;
    tl->w = w;
    tl->h = h;
    tl->frame_bytes = (size_t)w * (size_t)h * 3;
    tl->run = run;
    tl->emit = emit;
    tl->ctx = ctx;
    tl->cap = 64;
    tl->ring = vt_calloc((size_t)tl->cap, sizeof *tl->ring);
    tl->spare = vt_calloc((size_t)tl->cap, sizeof *tl->spare);
    tl->clip = vt_malloc(tl->frame_bytes * (size_t)cfg->clip.t);
    vt_batch *b = &tl->b;
    b->capacity = cfg->batch;
    b->t = cfg->clip.t;
    b->h = b->w = cfg->clip.crop;
    b->nheads = cfg->nheads;
    for (int k = 0; k < cfg->nheads; k++) {
        b->head_classes[k] = cfg->classes[k];
        tl->probs[k] = vt_malloc(sizeof(float) * (size_t)cfg->batch * (size_t)cfg->classes[k]);
    }
    b->x = vt_malloc(sizeof(float) * (size_t)cfg->batch * (size_t)vt_batch_clip_floats(b));
    b->video = vt_calloc((size_t)cfg->batch, sizeof(int32_t));
    b->clip = vt_calloc((size_t)cfg->batch, sizeof(int32_t));
    tl->row_win = vt_calloc((size_t)cfg->batch, sizeof(int32_t));
    tl->st.frame_bytes = (int64_t)tl->frame_bytes;
    return tl;
}

static void pending_free(pending *p) {
    for (int k = 0; k < VT_MAX_HEADS; k++) {
        free(p->sum[k]);
        p->sum[k] = NULL;
    }
}

void vt_timeline_free(vt_timeline **ptl) {
    if (!ptl || !*ptl)
        return;
    vt_timeline *tl = *ptl;
    for (int64_t i = 0; i < tl->n; i++)
        free(tl->ring[(tl->head + i) % tl->cap].rgb);
    for (int64_t i = 0; i < tl->nspare; i++)
        free(tl->spare[i]);
    for (int i = 0; i < tl->qn; i++)
        pending_free(&tl->q[i]);
    for (int k = 0; k < VT_MAX_HEADS; k++)
        free(tl->probs[k]);
    free(tl->ring);
    free(tl->marks);
    free(tl->spare);
    free(tl->clip);
    free(tl->q);
    free(tl->row_win);
    free(tl->b.x);
    free(tl->b.video);
    free(tl->b.clip);
    free(tl);
    *ptl = NULL;
}

/* ---- the model: batch rows to windows, windows out in order ---- */

/* Runs the batch, adds each row's probabilities to its window, and emits the windows at
 * the front of the queue whose clips are all done. */
static void run_batch(vt_timeline *tl) {
    vt_batch *b = &tl->b;
    if (b->n > 0) {
        tl->run(tl->ctx, b, tl->probs);
        tl->st.clips += b->n;
        for (int r = 0; r < b->n; r++) {
            pending *p = &tl->q[tl->row_win[r]];
            for (int k = 0; k < tl->cfg.nheads; k++) {
                int C = tl->cfg.classes[k];
                for (int c = 0; c < C; c++)
                    p->sum[k][c] += tl->probs[k][(size_t)r * C + c];
            }
            p->done++;
        }
        b->n = 0;
    }
    int out = 0;
    while (out < tl->qn && tl->q[out].done == tl->q[out].clips) {
        pending *p = &tl->q[out++];
        for (int k = 0; k < tl->cfg.nheads; k++) {
            for (int c = 0; c < tl->cfg.classes[k]; c++)
                p->sum[k][c] /= p->clips;
            p->w.probs[k] = p->sum[k];
        }
        tl->emit(tl->ctx, &p->w);
        tl->st.windows++;
        pending_free(p);
    }
    if (out == 0) /* nothing emitted; q is NULL before a first window (memmove's UB) */
        return;
    memmove(tl->q, tl->q + out, sizeof *tl->q * (size_t)(tl->qn - out));
    tl->qn -= out;
}

/* The clips of window k over ring frames [i0, i0 + n), into the batch (running it
 * whenever it fills). */
static void add_window(vt_timeline *tl, int64_t k, int64_t i0, int64_t n, int partial) {
    const vt_timeline_cfg *c = &tl->cfg;
    if (tl->qn == tl->qcap) {
        tl->qcap = tl->qcap ? 2 * tl->qcap : 4;
        tl->q = vt_realloc(tl->q, sizeof *tl->q * (size_t)tl->qcap);
    }
    pending *p = &tl->q[tl->qn];
    memset(p, 0, sizeof *p);
    double end = partial ? tl->last_t + tl->last_dur : win_end(tl, k);
    p->w.index = k;
    p->w.start = win_start(tl, k);
    p->w.end = end;
    p->w.nframes = n;
    p->w.partial = partial;
    p->w.arrived = tl->ring[(tl->head + i0 + n - 1) % tl->cap].arrived;
    for (int64_t i = i0; i < i0 + n; i++)
        p->w.decode_errors += tl->ring[(tl->head + i) % tl->cap].errors;
    for (int i = 0; i < tl->nmarks; i++)
        if (tl->marks[i].t >= p->w.start - TL_EPS && (partial || tl->marks[i].t < end - TL_EPS))
            p->w.decode_errors += tl->marks[i].n;
    p->clips = c->K * c->crops;
    for (int h = 0; h < c->nheads; h++)
        p->sum[h] = vt_calloc((size_t)c->classes[h], sizeof(double));
    int qi = tl->qn++; /* p is not used past here: run_batch moves the queue */
    int span = vt_clip_span(&c->clip), t = c->clip.t;
    int64_t *pos = vt_malloc(sizeof(int64_t) * (size_t)t);
    for (int j = 0; j < c->K; j++) {
        /* predict's clip j of a video of n frames, with its pad policy */
        vt_clip_positions(n, vt_sample_eval_start(n, span, j, c->K), t, c->clip.stride,
                          c->clip.pad, pos);
        for (int f = 0; f < t; f++)
            memcpy(tl->clip + (size_t)f * tl->frame_bytes,
                   tl->ring[(tl->head + i0 + pos[f]) % tl->cap].rgb, tl->frame_bytes);
        for (int cr = 0; cr < c->crops; cr++) {
            if (tl->b.n == tl->b.capacity) {
                run_batch(tl); /* may emit earlier windows: q shifts, qi with it */
                qi = tl->qn - 1;
            }
            int x0, y0, r = tl->b.n++;
            vt_sample_eval_crop(&x0, &y0, tl->w, tl->h, c->clip.crop, cr, c->crops);
            vt_clip_transform(tl->b.x + (size_t)r * vt_batch_clip_floats(&tl->b), tl->clip, t,
                              tl->h, tl->w, x0, y0, c->clip.crop, 0, c->clip.mean, c->clip.std);
            tl->b.video[r] = 0;
            tl->b.clip[r] = j * c->crops + cr;
            tl->row_win[r] = qi;
        }
    }
    free(pos);
    tl->covered = end;
    if (tl->b.n == tl->b.capacity || c->eager)
        run_batch(tl);
}

/* ---- frames: the ring of the open windows' frames ---- */

/* Ring index (from head) of the first frame at or after time t, and how many frames from
 * there lie before time end. */
static int64_t ring_find(const vt_timeline *tl, double t, double end, int64_t *n) {
    int64_t i = 0;
    while (i < tl->n && tl->ring[(tl->head + i) % tl->cap].t < t - TL_EPS)
        i++;
    int64_t j = i;
    while (j < tl->n && tl->ring[(tl->head + j) % tl->cap].t < end - TL_EPS)
        j++;
    *n = j - i;
    return i;
}

/* Window k is complete: its clips into the batch (a window without frames, in a gap of
 * the stream, gives nothing). */
static void close_window(vt_timeline *tl, int64_t k, int partial) {
    int64_t n, i0 = ring_find(tl, win_start(tl, k), partial ? INFINITY : win_end(tl, k), &n);
    if (n > 0)
        add_window(tl, k, i0, n, partial);
}

/* Frames before window `next` starts belong to no open window: their buffers go spare. */
static void drop_old(vt_timeline *tl) {
    double from = win_start(tl, tl->next) - TL_EPS;
    while (tl->n > 0 && tl->ring[tl->head].t < from) {
        tl->spare[tl->nspare++] = tl->ring[tl->head].rgb;
        tl->head = (tl->head + 1) % tl->cap;
        tl->n--;
    }
    int k = 0;
    for (int i = 0; i < tl->nmarks; i++)
        if (tl->marks[i].t >= from)
            tl->marks[k++] = tl->marks[i];
    tl->nmarks = k;
}

static void hold(vt_timeline *tl, const uint8_t *rgb, double t, double arrived) {
    if (tl->n == tl->cap) { /* grow, unrolling the ring */
        int64_t cap = 2 * tl->cap;
        held *r = vt_calloc((size_t)cap, sizeof *r);
        for (int64_t i = 0; i < tl->n; i++)
            r[i] = tl->ring[(tl->head + i) % tl->cap];
        free(tl->ring);
        tl->ring = r;
        tl->head = 0;
        tl->spare = vt_realloc(tl->spare, sizeof *tl->spare * (size_t)cap);
        tl->cap = cap;
    }
    held *f = &tl->ring[(tl->head + tl->n++) % tl->cap];
    f->rgb = tl->nspare ? tl->spare[--tl->nspare] : vt_malloc(tl->frame_bytes);
    f->t = t;
    f->arrived = arrived;
    f->errors = tl->errors;
    tl->errors = 0;
    memcpy(f->rgb, rgb, tl->frame_bytes);
    tl->st.peak_frames = VT_MAX(tl->st.peak_frames, tl->n);
}

void vt_timeline_note_errors(vt_timeline *tl, int64_t n, double t) {
    if (n <= 0)
        return;
    t += tl->splice; /* the stream's time, as its frames are placed */
    if (!isfinite(t)) { /* no time: on the next frame held */
        tl->errors += n;
        return;
    }
    if (tl->nmarks == tl->capmarks) {
        tl->capmarks = tl->capmarks ? 2 * tl->capmarks : 8;
        tl->marks = vt_realloc(tl->marks, sizeof *tl->marks * (size_t)tl->capmarks);
    }
    tl->marks[tl->nmarks].t = t;
    tl->marks[tl->nmarks++].n = n;
}

void vt_timeline_push(vt_timeline *tl, const uint8_t *rgb, double t, double dur) {
    vt_timeline_push_at(tl, rgb, t, dur, 0);
}

void vt_timeline_push_at(vt_timeline *tl, const uint8_t *rgb, double t, double dur,
                         double arrived) {
    t += tl->splice;
    if (tl->any && t < tl->last_t - TL_RESTART) {
        /* the stream's times restarted (two MPEG-TS files joined, a camera whose clock
         * began again): what follows goes on right after the last frame, as after a
         * reconnect. Left out, it was lost: every frame after the jump, the run ending 0 */
        const double to = tl->last_t + tl->last_dur;
        if (tl->st.restarts++ == 0)
            vt_warn("--timeline: the stream's times went back from %.3f s to %.3f s (a "
                    "stream restarted or joined to another): its frames from there go on "
                    "at %.3f s of the timeline, each such restart counted at the end\n",
                    tl->last_t, t, to);
        tl->splice += to - t;
        t = to;
    } else if (tl->any && t < tl->last_t) {
        /* a step back of under TL_RESTART: a broken timestamp, no place on the timeline.
         * Never in silence */
        if (tl->st.backwards++ == 0)
            vt_warn("--timeline: a frame at %.3f s came after one at %.3f s (a broken "
                    "timestamp); frames timed before the last one are left out, counted at "
                    "the end\n", t, tl->last_t);
        return;
    }
    tl->st.frames++;
    while (win_end(tl, tl->next) <= t + TL_EPS) { /* this frame is past their end */
        close_window(tl, tl->next++, 0);
        drop_old(tl);
    }
    if (t >= win_start(tl, tl->next) - TL_EPS) /* else in a gap between windows */
        hold(tl, rgb, t, arrived);
    tl->last_t = t;
    tl->last_dur = dur > 0 ? dur : tl->last_dur;
    tl->any = 1;
}

void vt_timeline_finish(vt_timeline *tl) {
    if (tl->any) {
        /* complete: lacking at most half a frame (the last frame's duration is a guess
         * when the stream does not give it) */
        double end = tl->last_t + tl->last_dur, slack = 0.5 * tl->last_dur + TL_EPS;
        while (win_start(tl, tl->next) < end - TL_EPS && win_end(tl, tl->next) <= end + slack) {
            close_window(tl, tl->next++, 0);
            drop_old(tl);
        }
        /* the tail no complete window covered */
        if (win_start(tl, tl->next) < end - TL_EPS && tl->last_t >= tl->covered - TL_EPS)
            close_window(tl, tl->next, 1);
    }
    run_batch(tl);
}

void vt_timeline_drain(vt_timeline *tl) { run_batch(tl); }

int64_t vt_timeline_skip(vt_timeline *tl, double t) {
    int64_t k = (int64_t)ceil((t - TL_EPS) / tl->cfg.hop), was = tl->next;
    if (k <= tl->next)
        return 0;
    tl->next = k;
    drop_old(tl);
    return k - was;
}

void vt_timeline_get_stats(const vt_timeline *tl, vt_timeline_stats *out) { *out = tl->st; }

int64_t vt_timeline_expected_windows(double seconds, double window, double hop) {
    if (!(seconds > 0))
        return 0;
    int64_t full = seconds + TL_EPS >= window ? (int64_t)floor((seconds + TL_EPS - window) / hop) + 1 : 0;
    double covered = full ? (double)(full - 1) * hop + window : 0;
    double start = (double)full * hop;
    return full + (start < seconds - TL_EPS && seconds > covered + TL_EPS);
}

int vt_timeline_clips_for(int K, double window, double fps, const vt_clip_cfg *clip) {
    if (K > 0)
        return K;
    double frames = window * (fps > 0 ? fps : 30.0);
    return (int)VT_MAX(1.0, VT_MIN(16.0, ceil(frames / vt_clip_span(clip))));
}
