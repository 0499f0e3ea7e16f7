/*
 * video_read.c: what callers read from an open video (video.h): a clip of T frames at a
 * stride, frame-accurately, with padding past the end and nearest-frame filling of frames
 * a corrupt stream never delivers; and the sequential decode of every frame. Frames are
 * scaled and rotated by video_scale.c and handed to the frame sink when clean.
 *
 * A bad file is a data error: a negative code with err set, never a print or an abort.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

void vt_clip_positions(int64_t nframes, int64_t start, int t, int stride, vt_pad_policy pad,
                       int64_t *pos) {
    for (int i = 0; i < t; i++) {
        int64_t p = start + (int64_t)i * stride;
        if (p >= nframes)
            p = pad == VT_PAD_REPEAT_LAST ? nframes - 1 : p % nframes;
        pos[i] = p;
    }
}

void vt_video_set_sink(vt_video *v, vt_video_frame_sink sink, void *ctx) {
    v->sink = sink;
    v->sink_ctx = ctx;
}

/* May the frame in v->frame, at index position m, go to the sink? Only when its pixels
 * cannot depend on how the decoder got there: no decode error on this handle so far (a
 * repair its log told of included, before it is counted: vt_vid_dec_damage), the frame
 * not flagged corrupt, and its position read off a timestamp that only it has (a counted
 * or duplicate-timestamp position could depend on the seek). */
static int frame_is_clean(const vt_video *v, int64_t m) {
    const AVFrame *f = v->frame;
    if (v->no_ts || v->stats.decode_errors || atomic_load(&v->hw.concealed) ||
        (f->flags & AV_FRAME_FLAG_CORRUPT) ||
        f->decode_error_flags || m < 0 || m >= v->info.nframes)
        return 0;
    return vt_vid_ts_alone_at(v, m, vt_vid_frame_time(v, f));
}

/* Does slot i of the clip still want the frame at position m? */
static int wanted_unfilled(const int64_t *want, const char *filled, int t, int64_t m) {
    for (int i = 0; i < t; i++)
        if (want[i] == m && !filled[i])
            return 1;
    return 0;
}

int vt_video_read_clip(vt_video *v, uint8_t *out, int64_t start, int t, int stride,
                       int short_side, vt_pad_policy pad, char *err, size_t errlen) {
    int64_t n = v->info.nframes;
    if (start < 0 || t <= 0 || stride <= 0) {
        vt_set_err(err, errlen, "bad clip request: start %lld, %d frames, stride %d",
                   (long long)start, t, stride);
        return AVERROR(EINVAL);
    }
    int ow, oh;
    vt_video_scaled_size(v, short_side, &ow, &oh);
    size_t fbytes = (size_t)ow * oh * 3;
    int64_t *want = vt_malloc((size_t)t * sizeof(int64_t));   /* (t) index position per slot */
    int64_t *uniq = vt_malloc((size_t)t * sizeof(int64_t));   /* (nu) sorted distinct positions */
    char *filled = vt_calloc((size_t)t, 1);
    int ret = 0, nu = 0;
    vt_clip_positions(n, start, t, stride, pad, want);
    memcpy(uniq, want, (size_t)t * sizeof(int64_t));
    qsort(uniq, (size_t)t, sizeof(int64_t), vt_vid_cmp_i64);
    for (int i = 0; i < t; i++)
        if (nu == 0 || uniq[nu - 1] != uniq[i])
            uniq[nu++] = uniq[i];
    /* The decoder may be past packets that an earlier read skipped (not decoded); if this
     * read wants one of them, it starts from a seek. */
    if (v->skip_lost_hi >= uniq[0])
        v->streaming = 0;
    for (int i = 0; i < v->nskipped && v->streaming; i++) {
        int64_t j = vt_vid_lower_bound(uniq, nu, v->skipped[i]);
        if (j < nu && uniq[j] == v->skipped[i])
            v->streaming = 0;
    }
    v->want = uniq;
    v->nwant = nu;

    for (int k = 0; k < nu; k++) {
        int64_t q = uniq[k];
        int got_q = 0;
        for (int i = 0; i < t; i++)
            if (want[i] == q && filled[i])
                got_q = 1;
        if (got_q)
            continue;
        int back = 0, fresh = 0, sought = 0, passed = 0;
        if (!vt_vid_can_continue(v, q)) {
            ret = vt_vid_seek_for(v, q, back, err, errlen);
            if (ret < 0)
                goto done;
            fresh = sought = 1;
        }
        for (;;) {
            ret = vt_vid_next_frame(v, err, errlen);
            if (ret < 0)
                goto done;
            if (ret == 0) { /* end of stream before q: q (and later ones) are missing */
                v->streaming = 0;
                if (fresh && back < VT_MAX_SEEK_RETRY && v->last_pos < 0) {
                    /* Nothing decoded after this seek: try from an earlier keyframe. */
                    back++;
                    ret = vt_vid_seek_for(v, q, back, err, errlen);
                    if (ret < 0)
                        goto done;
                    continue;
                }
                if (sought && !fresh && v->last_pos < q && !passed &&
                    back < VT_MAX_SEEK_RETRY) {
                    passed = 1; /* q never came: see "Passed q" below */
                    back++;
                    ret = vt_vid_seek_for(v, q, back, err, errlen);
                    if (ret < 0)
                        goto done;
                    fresh = 1;
                    continue;
                }
                ret = 0;
                break;
            }
            int64_t m = vt_vid_frame_pos(v);
            if (fresh && (m > q || v->land_bad) && back < VT_MAX_SEEK_RETRY) {
                /* Overshot: the demuxer's seek landed after q (dts-indexed containers,
                 * open GOPs). Or landed on a keyframe the index does not have (a damaged
                 * AVI: video_seek.c check_landing), whose frames' positions would be
                 * off. Go one keyframe further back (at the last retry, to the start,
                 * which numbers the packets as the index did). */
                av_frame_unref(v->frame);
                back++;
                ret = vt_vid_seek_for(v, q, back, err, errlen);
                if (ret < 0)
                    goto done;
                continue;
            }
            if (sought && !fresh && m > q && v->last_pos < q && !passed &&
                back < VT_MAX_SEEK_RETRY) {
                /* Passed q without it, decoding from the keyframe sought for it: an open
                 * GOP's keyframe whose later pictures also refer to pictures before it
                 * (x264 --open-gop with several references: the decoder drops them after
                 * a seek, and hands them out when it comes from further back, as the
                 * ffmpeg command's read from the start does). One keyframe further back
                 * than the seek that got here (MPEG-TS's had landed a keyframe late
                 * already), once: a frame that never decodes (a damaged stream) costs one
                 * GOP more. */
                av_frame_unref(v->frame);
                passed = 1;
                back++;
                ret = vt_vid_seek_for(v, q, back, err, errlen);
                if (ret < 0)
                    goto done;
                fresh = 1;
                continue;
            }
            fresh = 0;
            v->last_pos = m;
            v->streaming = 1;
            int to_sink = v->sink && frame_is_clean(v, m);
            /* A GPU frame's pixels come to system memory only when someone takes them. */
            if ((to_sink || wanted_unfilled(want, filled, t, m)) &&
                (ret = vt_vid_hw_download(&v->hw, v->frame, err, errlen)) < 0) {
                av_frame_unref(v->frame);
                goto done;
            }
            if (to_sink)
                v->sink(v->sink_ctx, m, v->frame);
            int first = -1;
            for (int i = 0; i < t; i++) {
                if (want[i] != m || filled[i])
                    continue;
                uint8_t *dst = out + (size_t)i * fbytes;
                if (first < 0) {
                    ret = vt_scaler_convert(&v->sc, v->frame, v->info.rotation, dst, ow, oh,
                                            err, errlen);
                    if (ret < 0) {
                        av_frame_unref(v->frame);
                        goto done;
                    }
                    first = i;
                } else {
                    memcpy(dst, out + (size_t)first * fbytes, fbytes);
                }
                filled[i] = 1;
            }
            av_frame_unref(v->frame);
            if (m >= q)
                break;
        }
    }

    /* Frames that never decoded: nearest decoded frame of the clip, earlier first. */
    int any = 0;
    for (int i = 0; i < t; i++)
        any |= filled[i];
    if (!any) {
        vt_set_err(err, errlen, "no frame of the clip decoded (frames %lld..%lld of %lld; "
                   "corrupt stream)", (long long)want[0], (long long)want[t - 1], (long long)n);
        ret = AVERROR_INVALIDDATA;
        goto done;
    }
    for (int i = 0; i < t; i++) {
        if (filled[i])
            continue;
        int src = -1;
        for (int j = i - 1; j >= 0 && src < 0; j--)
            if (filled[j])
                src = j;
        for (int j = i + 1; j < t && src < 0; j++)
            if (filled[j])
                src = j;
        memcpy(out + (size_t)i * fbytes, out + (size_t)src * fbytes, fbytes);
        v->stats.missing_frames++;
    }
    ret = 0;

done:
    if (ret < 0)
        v->streaming = 0; /* after an error, the next read starts from a clean seek */
    v->want = NULL;
    v->nwant = 0;
    free(want);
    free(uniq);
    free(filled);
    return ret;
}

int vt_video_decode_all(vt_video *v, int short_side, vt_video_frame_fn fn, void *user,
                        int64_t *out_frames, char *err, size_t errlen) {
    int ow, oh, scale = short_side >= 0;
    vt_video_scaled_size(v, VT_MAX(short_side, 0), &ow, &oh);
    size_t fbytes = (size_t)ow * oh * 3;
    if (scale && fbytes > v->seq_size) {
        free(v->seq);
        v->seq = vt_calloc(fbytes + VT_RGB_PAD, 1); /* swscale reads past the end */
        v->seq_size = fbytes;
    }
    int64_t count = 0;
    int ret = vt_vid_seek_ts(v, v->start_ts, err, errlen);
    if (ret < 0)
        goto done;
    for (;;) {
        ret = vt_vid_next_frame(v, err, errlen);
        if (ret <= 0)
            break;
        int64_t m = vt_vid_frame_pos(v);
        v->last_pos = m;
        ret = vt_vid_hw_download(&v->hw, v->frame, err, errlen);
        if (ret < 0) {
            av_frame_unref(v->frame);
            break;
        }
        if (v->sink && frame_is_clean(v, m))
            v->sink(v->sink_ctx, m, v->frame);
        if (scale)
            ret = vt_scaler_convert(&v->sc, v->frame, v->info.rotation, v->seq, ow, oh, err,
                                    errlen);
        av_frame_unref(v->frame);
        if (ret < 0)
            break;
        count++;
        if (scale && fn && fn(user, v->seq, m, ow, oh))
            break;
    }
    v->streaming = 0; /* the decoder is drained or stopped mid-way: next read seeks */
    if (ret >= 0 && count == 0) {
        vt_set_err(err, errlen, "0 decodable frames");
        ret = AVERROR_INVALIDDATA;
    }
done:
    if (out_frames)
        *out_frames = count;
    return ret < 0 ? ret : 0;
}
