/*
 * embed_run.c: rows of features for `vidtrain embed` (embed_run.h). Means are taken in
 * double over the clips, in clip order, then rounded to float32 once — the same rule as
 * predict's probabilities, so a video's features and its top-1 come from one pass over
 * the same clips.
 */
#include "app/stream/embed_run.h"

#include <math.h>
#include <string.h>

#include "app/eval/evalproto.h"
#include "app/stream/timeline.h"
#include "base/common.h"
#include "pipeline/data/video/video.h"

void vt_embedder_init(vt_embedder *e, vt_run_model *m, int K, int crops, int per_clip,
                      vt_embed_set *out) {
    memset(e, 0, sizeof *e);
    e->m = m;
    e->per_clip = per_clip;
    e->out = out;
    e->dim = vt_net_feature_dim(vt_towers_net(m->towers, 0));
    out->dim = e->dim;
    vt_run_model_clip(&e->ec.clip, m);
    e->ec.K = K;
    e->ec.crops = crops;
    int B = K * crops;
    vt_batch *b = &e->b;
    b->capacity = B;
    b->t = e->ec.clip.t;
    b->h = b->w = e->ec.clip.crop;
    b->nheads = m->heads.n;
    for (int h = 0; h < m->heads.n; h++) {
        b->head_classes[h] = m->heads.cfg[h].classes;
        b->head_loss[h] = m->heads.cfg[h].loss;
        e->probs[h] = vt_malloc(sizeof(float) * (size_t)B * m->heads.cfg[h].classes);
    }
    e->feat = vt_malloc(sizeof(float) * (size_t)B * e->dim);
    b->x = vt_malloc(sizeof(float) * (size_t)B * vt_batch_clip_floats(b));
    b->video = vt_calloc((size_t)B, sizeof(int32_t));
    b->clip = vt_calloc((size_t)B, sizeof(int32_t));
}

void vt_embedder_free(vt_embedder *e) {
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_freep(&e->probs[h]);
    vt_freep(&e->feat);
    vt_freep(&e->b.x);
    vt_freep(&e->b.video);
    vt_freep(&e->b.clip);
    vt_eval_clips_free(&e->ec);
}

/* Head h's top-1 over scores p (classes): predict's rule (vt_topk on the float32 values;
 * a top score shared by two classes names none, label -2). Scores that are not all finite name no class (label -1):
 * vt_topk over a NaN row named whichever class came first, with a prob of nan (predict
 * refuses such a video, --timeline says "nonfinite"). */
static void top1(vt_embed_row *r, int h, const float *p, int classes) {
    for (int j = 0; j < classes; j++)
        if (!isfinite(p[j])) {
            r->label[h] = -1;
            r->prob[h] = NAN;
            return;
        }
    int idx = 0;
    vt_topk(&idx, p, classes, 1);
    r->label[h] = vt_top_tied(p, classes, idx) ? -2 : idx; /* a tie names no class */
    r->prob[h] = p[idx];
}

/* 1 when the n rows of dim features at f are all finite. */
static int feats_finite(const float *f, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(f[i]))
            return 0;
    return 1;
}

/* One row per clip: its own features and probabilities. */
static void rows_per_clip(vt_embedder *e, const char *path, int n) {
    const vt_run_heads *heads = &e->m->heads;
    for (int i = 0; i < n; i++) {
        vt_embed_row *r = vt_embed_add(e->out, e->feat + (size_t)i * e->dim, path);
        r->clip = i / e->ec.crops;
        r->crop = i % e->ec.crops;
        for (int h = 0; h < heads->n; h++)
            top1(r, h, e->probs[h] + (size_t)i * heads->cfg[h].classes, heads->cfg[h].classes);
    }
}

/* One row: the mean over the n clips of features and of each head's probabilities. */
static vt_embed_row *row_mean(vt_embedder *e, const char *path, int n) {
    const vt_run_heads *heads = &e->m->heads;
    float *mean = vt_malloc(sizeof(float) * (size_t)e->dim);
    for (int d = 0; d < e->dim; d++) {
        double s = 0;
        for (int i = 0; i < n; i++)
            s += e->feat[(size_t)i * e->dim + d];
        mean[d] = (float)(s / n);
    }
    vt_embed_row *r = vt_embed_add(e->out, mean, path);
    free(mean);
    for (int h = 0; h < heads->n; h++) {
        int C = heads->cfg[h].classes;
        float *avg = vt_malloc(sizeof(float) * (size_t)C);
        for (int j = 0; j < C; j++) { /* predict_one's mean, to the bit */
            double s = 0;
            for (int i = 0; i < n; i++)
                s += e->probs[h][(size_t)i * C + j];
            avg[j] = (float)(s / n);
        }
        top1(r, h, avg, C);
        free(avg);
    }
    return r;
}

int vt_embed_sample(vt_embedder *e, const char *path, const vt_dataset_video *dv, char *err,
                    size_t errlen) {
    vt_video *v = NULL;
    if (vt_video_open(&v, path, 1, err, errlen) != 0)
        return -1;
    const vt_video_info *info = vt_video_get_info(v);
    const double fps = info->fps;
    vt_frame_range r = dv ? vt_dataset_sample_frames(dv, v, info)
                          : (vt_frame_range){0, info->nframes};
    int segment = dv && vt_dataset_is_segment(dv);
    int n = vt_eval_clips_fill(&e->ec, v, r, &e->b, err, errlen);
    vt_video_close(&v);
    if (n < 0)
        return -1;
    /* counted once its clips are read: a video skipped has no rows the rate could skew */
    vt_fps_tally_add(&e->fps, e->m, path, fps);
    vt_eval_clips_warn(&e->ec, "embed", path);
    vt_towers_eval_features(e->m->towers, &e->b, e->probs, e->feat);
    /* a diverged model's NaN features are no embedding: the input is reported and
     * skipped, as predict skips a video whose scores are not finite */
    if (!feats_finite(e->feat, (int64_t)n * e->dim)) {
        vt_set_err(err, errlen, "the model's features are not finite (NaN or inf): the network "
                   "overflows on its clips although its weights are finite (a run at the edge "
                   "of diverging: train it again with a lower --lr)");
        return -1;
    }
    int64_t first = e->out->n;
    if (e->per_clip)
        rows_per_clip(e, path, n);
    else
        row_mean(e, path, n);
    for (int64_t i = first; i < e->out->n; i++) { /* the warning's counts, on its rows */
        e->out->rows[i].decode_errors = e->ec.errors;
        e->out->rows[i].filled_frames = e->ec.filled;
    }
    for (int64_t i = first; segment && i < e->out->n; i++) {
        e->out->rows[i].start = dv->seg_start;
        e->out->rows[i].end = dv->seg_end;
    }
    return 0;
}

/* ---- timeline: the window engine with the features as one more head ---- */

typedef struct tl_ctx {
    vt_embedder *e;
    const char *path;
} tl_ctx;

static void tl_run(void *ctx, const vt_batch *b, float *probs[VT_MAX_HEADS]) {
    tl_ctx *c = ctx;
    vt_towers_eval_features(c->e->m->towers, b, probs, probs[c->e->m->heads.n]);
}

static void tl_emit(void *ctx, const vt_timeline_window *w) {
    tl_ctx *c = ctx;
    vt_embedder *e = c->e;
    const vt_run_heads *heads = &e->m->heads;
    float *f = vt_malloc(sizeof(float) * (size_t)e->dim);
    for (int d = 0; d < e->dim; d++)
        f[d] = (float)w->probs[heads->n][d];
    if (!feats_finite(f, e->dim)) { /* no row: counted, said after the video */
        e->nonfinite++;
        free(f);
        return;
    }
    vt_embed_row *r = vt_embed_add(e->out, f, c->path);
    free(f);
    r->start = w->start;
    r->end = w->end;
    r->decode_errors = w->decode_errors;
    for (int h = 0; h < heads->n; h++) {
        int C = heads->cfg[h].classes;
        float *sc = vt_malloc(sizeof(float) * (size_t)C);
        for (int j = 0; j < C; j++)
            sc[j] = (float)w->probs[h][j];
        top1(r, h, sc, C);
        free(sc);
    }
}

int vt_embed_timeline_video(vt_embedder *e, const char *path, const vt_embed_timeline *tc,
                            char *err, size_t errlen) {
    const vt_run_heads *heads = &e->m->heads;
    if (heads->n >= VT_MAX_HEADS) {
        vt_set_err(err, errlen, "--timeline embeds models of at most %d heads (this one has %d)",
                   VT_MAX_HEADS - 1, heads->n);
        return -1;
    }
    vt_stream *s = NULL;
    if (vt_stream_open(&s, path, tc->threads, err, errlen) != 0)
        return -1;
    const vt_video_info *info = vt_stream_info(s);
    const double fps = info->fps; /* tallied once clips of it went through the model */
    vt_timeline_cfg c;
    memset(&c, 0, sizeof c);
    c.clip = e->ec.clip;
    vt_clip_cfg_at_fps(&c.clip, info->fps); /* --clip-fps: the stride at this rate */
    c.window = tc->window;
    c.hop = tc->hop;
    c.crops = e->ec.crops;
    c.batch = tc->batch;
    c.K = vt_timeline_clips_for(tc->K, tc->window, info->fps, &c.clip); /* predict's K */
    c.nheads = heads->n + 1;
    for (int h = 0; h < heads->n; h++)
        c.classes[h] = heads->cfg[h].classes;
    c.classes[heads->n] = e->dim;
    int w, h;
    vt_video_info_scaled_size(info, c.clip.short_side, &w, &h);
    tl_ctx ctx = {e, path};
    e->nonfinite = 0;
    int64_t first = e->out->n;
    vt_timeline *tl = vt_timeline_new(&c, w, h, tl_run, tl_emit, &ctx, err, errlen);
    if (!tl) {
        vt_stream_close(&s);
        return -1;
    }
    int64_t errors = 0; /* the stream's decode errors when the last frame was pushed */
    for (;;) {
        const uint8_t *rgb;
        int fw, fh;
        double t, dur;
        int got = vt_stream_next(s, c.clip.short_side, &rgb, &fw, &fh, &t, &dur, err, errlen);
        if (got <= 0) {
            if (got < 0) /* the windows so far stand */
                fprintf(stderr, "vidtrain embed: %s: %s (the timeline stops here)\n", path, err);
            break;
        }
        /* the windows that hold a damaged frame say so (predict --timeline's rule) */
        int64_t ne = vt_stream_decode_errors(s);
        vt_timeline_note_errors(tl, ne - errors, vt_stream_error_time(s));
        errors = ne;
        vt_timeline_push(tl, rgb, t, dur);
    }
    /* errors counted as the decoder drained (after the last frame) go to the tail */
    vt_timeline_note_errors(tl, vt_stream_decode_errors(s) - errors, vt_stream_error_time(s));
    vt_timeline_finish(tl);
    vt_timeline_stats tst;
    vt_timeline_get_stats(tl, &tst);
    vt_timeline_free(&tl);
    if (tst.clips > 0)
        vt_fps_tally_add(&e->fps, e->m, path, fps);
    if (tst.backwards)
        fprintf(stderr, "vidtrain embed: warning: %s: %lld frames left out, their times "
                "before an earlier frame's (no window holds them)\n", path,
                (long long)tst.backwards);
    if (tst.restarts)
        fprintf(stderr, "vidtrain embed: warning: %s: the stream's times restarted %lld "
                "time%s: the windows go on after the last frame before each restart\n", path,
                (long long)tst.restarts, tst.restarts == 1 ? "" : "s");
    errors = vt_stream_decode_errors(s);
    vt_stream_close(&s);
    if (errors)
        fprintf(stderr, "vidtrain embed: warning: %s: %lld decode error(s) (a damaged stream: "
                "packets the decoder rejected or pictures it repaired); the windows that hold "
                "them say so in the CSV's decode_errors column\n", path, (long long)errors);
    if (e->nonfinite && e->out->n == first) {
        vt_set_err(err, errlen, "the model's features are not finite (NaN or inf) in all %lld "
                   "windows: the network overflows on them although its weights are finite (a "
                   "run at the edge of diverging: train it again with a lower --lr)",
                   (long long)e->nonfinite);
        return -1;
    }
    if (e->nonfinite)
        fprintf(stderr, "vidtrain embed: %s: %lld window(s) left out, the model's features "
                "not finite there (NaN or inf)\n", path, (long long)e->nonfinite);
    return 0;
}
