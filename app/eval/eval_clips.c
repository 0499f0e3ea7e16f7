/*
 * eval_clips.c: K clips x crops of a video or segment into a batch (eval_clips.h). A
 * clip that would pass the end of a segment is read frame by frame at the positions
 * vt_sample_range_positions gives, so no frame outside the segment is used; everything
 * else is one vt_video_read_clip run, as predict has always read whole files.
 */
#include "app/eval/eval_clips.h"

#include <string.h>

#include "base/common.h"

/* Clip frames [start, start + span) of r into raw (t, h, w, 3). 0 or -1 with err. */
static int read_in_range(vt_eval_clips *e, const vt_clip_cfg *c, vt_video *v, vt_frame_range r,
                         int64_t start, size_t frame, char *err, size_t errlen) {
    int64_t last = start + (int64_t)(c->t - 1) * c->stride;
    const vt_video_info *info = vt_video_get_info(v);
    int whole = r.first == 0 && r.count >= info->nframes; /* the file pads at its own end */
    if (whole || last < r.first + r.count) /* one run of frames */
        return vt_video_read_clip(v, e->raw, start, c->t, c->stride, c->short_side, c->pad,
                                  err, errlen) < 0 ? -1 : 0;
    int64_t prev = -1;
    for (int k = 0; k < c->t; k++) {
        int64_t pos;
        vt_sample_range_positions(r, start + (int64_t)k * c->stride, 1, 1, c->pad, &pos);
        uint8_t *out = e->raw + (size_t)k * frame;
        if (pos == prev) { /* REPEAT_LAST's tail: a copy, not another decode */
            memcpy(out, out - frame, frame);
            continue;
        }
        if (vt_video_read_clip(v, out, pos, 1, 1, c->short_side, c->pad, err, errlen) < 0)
            return -1;
        prev = pos;
    }
    return 0;
}

int vt_eval_clips_fill(vt_eval_clips *e, vt_video *v, vt_frame_range r, vt_batch *b, char *err,
                       size_t errlen) {
    vt_clip_cfg vc = e->clip; /* this video's: --clip-fps scales the stride to its rate */
    vt_clip_cfg_at_fps(&vc, vt_video_get_info(v)->fps);
    const vt_clip_cfg *c = &vc;
    int w = 0, h = 0;
    vt_video_scaled_size(v, c->short_side, &w, &h);
    if (w < c->crop || h < c->crop) {
        vt_set_err(err, errlen, "frames scale to %dx%d, smaller than the %d crop", w, h, c->crop);
        return -1;
    }
    if (r.count <= 0) {
        vt_set_err(err, errlen, "no frames to read");
        return -1;
    }
    VT_CHECK(e->K * e->crops <= b->capacity, "%d x %d clips into a batch of %d", e->K, e->crops,
             b->capacity);
    size_t frame = (size_t)h * w * 3, need = (size_t)c->t * frame;
    if (need > e->raw_cap) {
        free(e->raw);
        e->raw = vt_malloc(need);
        e->raw_cap = need;
    }
    int span = vt_clip_span(c);
    int64_t cf = vt_batch_clip_floats(b);
    int n = 0;
    int64_t m0 = vt_video_get_stats(v)->missing_frames;
    int64_t e0 = vt_video_get_stats(v)->decode_errors;
    e->filled = 0;
    e->errors = 0;
    for (int k = 0; k < e->K; k++) {
        int64_t start = r.first + vt_sample_eval_start(r.count, span, k, e->K);
        if (read_in_range(e, c, v, r, start, frame, err, errlen) != 0)
            return -1;
        for (int cr = 0; cr < e->crops; cr++) {
            int x0, y0;
            vt_sample_eval_crop(&x0, &y0, w, h, c->crop, cr, e->crops);
            vt_clip_transform(b->x + (size_t)n * cf, e->raw, c->t, h, w, x0, y0, c->crop, 0,
                              c->mean, c->std);
            b->video[n] = 0;
            b->clip[n] = n;
            n++;
        }
    }
    b->n = n;
    e->filled = vt_video_get_stats(v)->missing_frames - m0;
    e->errors = vt_video_get_stats(v)->decode_errors - e0;
    return n;
}

void vt_eval_clips_warn(const vt_eval_clips *e, const char *cmd, const char *name) {
    if (e->filled > 0)
        fprintf(stderr, "vidtrain %s: warning: %s: %lld frame(s) of its clips never decoded (a "
                "damaged or cut-short stream) and hold the nearest decoded frame instead\n",
                cmd, name, (long long)e->filled);
    if (e->errors > 0)
        fprintf(stderr, "vidtrain %s: warning: %s: %lld decode error(s) reading its clips (a "
                "damaged stream: packets the decoder rejected or pictures it repaired; frames "
                "near them hold the decoder's guess)\n", cmd, name, (long long)e->errors);
}

void vt_eval_clips_free(vt_eval_clips *e) {
    vt_freep(&e->raw);
    e->raw_cap = 0;
}
