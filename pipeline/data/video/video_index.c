/*
 * video_index.c: a video's frame index (video_impl.h), built by demuxing every packet
 * once, no decoding: one presentation time per frame, sorted, so that VFR files are
 * addressed by timestamp, and the keyframe list. The traps of containers whose
 * timestamps do not say when a frame shows (MPEG-PS/AVI reference pictures, untimed
 * leads of cuts, raw streams) are undone here; a file whose times go back (segments
 * joined with overlapping times) is counted instead (vt_vid_build_index).
 *
 * This file must never print and never abort on a bad file.
 */
#include <stdint.h>
#include <stdlib.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

/* Packets of the index, in decode order (vt_vid_build_index). */
enum { PK_KEY = 1, PK_DTS_ONLY = 2, PK_ANCHOR = 4, PK_UNTIMED = 8 };

/* MPEG-PS and MPEG-TS muxers may leave a reference picture's packet (I or P) without a
 * pts: its dts is then all it says, and that is not when it shows. In the MPEG-1/2 model
 * (one picture of reordering, codecpar video_delay 1) a B-picture shows as it decodes
 * (pts = dts) and a reference picture shows when the next reference picture decodes: its
 * pts is that picture's dts (the decoder hands it out then, and the frame's best-effort
 * timestamp says so: vt_vid_frame_pos). Taken as its pts, the dts put a frame on another
 * frame's time (MPEG-2 .mpg: a duplicate, a gap, frames "out of order" and a VFR
 * verdict). The last reference picture shows one frame after the last time. AVI's
 * packets carry no pts at all, but libavformat times its B-pictures (pts = dts) and leaves
 * the reference pictures without one: the same rule. Applied only where the stream shows
 * that model (video_delay 1, some packets timed, some not); any other stream keeps the
 * dts (one with no pts at all: the open's ts_shift). */
static void anchors_to_pts(vt_video *v, const int64_t *dts, const uint8_t *fl, int64_t n,
                           int64_t last_dur) {
    int depth = v->fmt->streams[v->sidx]->codecpar->video_delay, with_pts = 0, dts_only = 0;
    for (int64_t i = 0; i < n; i++) {
        with_pts |= !(fl[i] & PK_DTS_ONLY);
        dts_only |= (fl[i] & PK_DTS_ONLY) != 0;
    }
    if (depth != 1 || !with_pts || !dts_only)
        return;
    int64_t pending = -1, last = INT64_MIN, first = INT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        last = VT_MAX(last, v->pts[i]);
        first = VT_MIN(first, v->pts[i]);
        if (!(fl[i] & PK_ANCHOR))
            continue;
        if (pending >= 0)
            v->pts[pending] = dts[i];
        pending = (fl[i] & PK_DTS_ONLY) ? i : -1;
    }
    if (last_dur <= 0 && n > 1)
        last_dur = (last - first) / (n - 1);
    if (pending >= 0 && last_dur > 0)
        v->pts[pending] = last + last_dur;
}

/* VFR: in the sorted index (n), frame durations differ by more than 1% and by more than
 * one tick (a 1 ms timebase rounds 29.97 fps into 33/34 ms steps, which is not VFR). */
int vt_vid_index_vfr(const int64_t *pts, int64_t n) {
    int64_t dmin = INT64_MAX, dmax = 0;
    for (int64_t i = 1; i < n; i++) {
        dmin = VT_MIN(dmin, pts[i] - pts[i - 1]);
        dmax = VT_MAX(dmax, pts[i] - pts[i - 1]);
    }
    return n > 2 && dmax > 0 && (dmax - dmin) > 1 && (double)(dmax - dmin) > 0.01 * (double)dmax;
}

/* A stream that opens with an untimed keyframe, its GOP untimed up to the first timed
 * keyframe (a stream copy cut with -ss into Matroska with -avoid_negative_ts disabled: the
 * container holds no time before 0, and the cut's lead-in from the keyframe before the cut
 * point lost its times): these are whole pictures, which the decoder hands out first,
 * untimed, and the ffmpeg command numbers 0, 1, ... Left out as a dropped leading picture
 * (below), the file lost them and every frame was that many places early. They take times
 * one frame apart before the first timed one (the decoder's untimed frames are placed by
 * count after a seek to the first, vt_vid_frame_pos), and are kept. Matroska's seek goes
 * to its first cue, the first timed keyframe: a seek to them reopens the file
 * (vt_vid_seek_ts). */
static void untimed_lead(vt_video *v, uint8_t *fl, int64_t n, int64_t dur) {
    if ((fl[0] & (PK_UNTIMED | PK_KEY)) != (PK_UNTIMED | PK_KEY))
        return;
    int64_t end = 0, lead = 0, tmin = INT64_MAX, tmax = INT64_MIN, ntimed = 0;
    while (end < n && (fl[end] & (PK_UNTIMED | PK_KEY)) != PK_KEY)
        lead += (fl[end++] & PK_UNTIMED) != 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fl[i] & PK_UNTIMED)) {
            tmin = VT_MIN(tmin, v->pts[i]);
            tmax = VT_MAX(tmax, v->pts[i]);
            ntimed++;
        }
    if (end == n || dur <= 0)
        dur = ntimed > 1 ? (tmax - tmin) / (ntimed - 1) : 0;
    if (end == n || dur <= 0)
        return;
    for (int64_t i = 0, j = 0; i < end; i++)
        if (fl[i] & PK_UNTIMED) {
            v->pts[i] = tmin - (lead - j++) * dur;
            fl[i] &= (uint8_t)~PK_UNTIMED;
        }
    v->start_ts = VT_MIN(v->start_ts, tmin - lead * dur);
    v->lead_untimed = 1;
}

/* Are the untimed packets left (fl, n) all a cut's leading pictures (vt_vid_build_index): after
 * the first keyframe, which is timed, before the next, and within the 16 packets after it
 * (a leading picture decodes right after its keyframe, within the reorder depth, which
 * H.264 and HEVC bound by 16)? A stream that leaves packets untimed throughout (MPEG-PS)
 * has some further on, also in a single-GOP file. */
static int untimed_leading_only(const uint8_t *fl, int64_t n) {
    int64_t k1 = 0;
    while (k1 < n && !(fl[k1] & PK_KEY))
        k1++;
    if (k1 >= n || (fl[k1] & PK_UNTIMED))
        return 0;
    for (int64_t i = 0; i < n; i++)
        if ((fl[i] & PK_UNTIMED) && (i <= k1 || i > k1 + 16 || (fl[i] & PK_KEY)))
            return 0;
    return 1;
}

/* Where the stream's times go back: the first packet (decode order) that shows before a
 * frame of an earlier keyframe's run (the packets from one keyframe to the next), or -1.
 * Segments joined by a stream copy with overlapping times (`ffmpeg -f concat` with an
 * inpoint off a keyframe: the second segment's lead-in from its keyframe repeats times of
 * the first; transport stream files joined with `cat`, as HLS downloads and split
 * recordings are: each part starts its clock again) interleave two places of the video
 * in a time-sorted index, so a clip read frames of both (every clip of two joined .ts
 * files). A decoder hands the runs out one after the other, and the ffmpeg command
 * numbers frames so. No sane stream does this: a run's frames show after every frame of
 * the runs before it (an open GOP's leading pictures show before their keyframe, not
 * before the run before it); a time two frames share is not going back. */
static int64_t time_goes_back(const int64_t *pts, const uint8_t *fl, int64_t n) {
    int64_t before = INT64_MIN, run = INT64_MIN;
    for (int64_t i = 0; i < n; i++) {
        if ((fl[i] & PK_KEY) && i > 0) {
            before = VT_MAX(before, run);
            run = INT64_MIN;
        }
        if (pts[i] < before)
            return i;
        run = VT_MAX(run, pts[i]);
    }
    return -1;
}

/* The typical frame duration of times (n, any order; sorted in place): the median of the
 * steps between neighbours that are not 0, or 0 when there is none. */
static int64_t median_step(int64_t *ts, int64_t n) {
    qsort(ts, (size_t)n, sizeof(int64_t), vt_vid_cmp_i64);
    int64_t m = 0;
    for (int64_t i = 1; i < n; i++)
        if (ts[i] > ts[i - 1])
            ts[m++] = ts[i] - ts[i - 1];
    if (m == 0)
        return 0;
    qsort(ts, (size_t)m, sizeof(int64_t), vt_vid_cmp_i64);
    return ts[m / 2];
}

/* One pts per frame by demuxing, no decoding. */
int vt_vid_build_index(vt_video *v, char *err, size_t errlen) {
    int64_t cap = 256, n = 0, nk = 0, nuntimed = 0;
    v->pts = vt_malloc((size_t)cap * sizeof(int64_t));
    int64_t *dts = vt_malloc((size_t)cap * sizeof(int64_t));
    uint8_t *fl = vt_malloc((size_t)cap);
    v->start_ts = INT64_MAX;
    int64_t last_dur = 0;
    for (;;) {
        int ret = av_read_frame(v->fmt, v->pkt);
        if (ret < 0)
            break; /* EOF, or a truncated tail: the index holds what could be read */
        if (v->pkt->stream_index == v->sidx && !(v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            int64_t pts = v->pkt->pts, dt = v->pkt->dts;
            int64_t ts = pts != AV_NOPTS_VALUE ? pts : dt;
            int untimed = ts == AV_NOPTS_VALUE;
            if (untimed)
                ts = n;
            nuntimed += untimed;
            if (dt != AV_NOPTS_VALUE && dt < v->start_ts)
                v->start_ts = dt;
            if (!untimed && ts < v->start_ts) /* a count is no time */
                v->start_ts = ts;
            if (n == cap) {
                cap *= 2;
                v->pts = vt_realloc(v->pts, (size_t)cap * sizeof(int64_t));
                dts = vt_realloc(dts, (size_t)cap * sizeof(int64_t));
                fl = vt_realloc(fl, (size_t)cap);
            }
            v->pts[n] = ts;
            dts[n] = dt;
            fl[n] = (v->pkt->flags & AV_PKT_FLAG_KEY) ? PK_KEY : 0;
            if (untimed)
                fl[n] |= PK_UNTIMED;
            else if (dt != AV_NOPTS_VALUE && pts == AV_NOPTS_VALUE)
                fl[n] |= PK_DTS_ONLY | PK_ANCHOR;
            else if (dt != AV_NOPTS_VALUE && pts > dt)
                fl[n] |= PK_ANCHOR;
            nk += (fl[n] & PK_KEY) != 0;
            n++;
            if (v->pkt->duration > 0)
                last_dur = v->pkt->duration;
        }
        av_packet_unref(v->pkt);
    }
    if (n == 0) {
        free(dts);
        free(fl);
        vt_set_err(err, errlen, "the video stream has no packets (empty or truncated file)");
        return AVERROR_INVALIDDATA;
    }
    /* Packets with neither pts nor dts: in a stream of them (raw H.264) frames are counted
     * (no_ts). Among timed packets, untimed ones in the first GOP only, after its timed
     * keyframe (a stream copy cut mid-GOP into Matroska: the leading pictures the cut left,
     * which the decoder drops) have no place: they are left out of the index, as the
     * ffmpeg command's numbering leaves them out. Untimed packets further on are frames
     * (H.264 in MPEG-PS times only some of its PES packets, and the frames of the others
     * have no time at all): the file is counted, as a stream without timestamps is. */
    if (nuntimed > 0 && nuntimed < n) {
        untimed_lead(v, fl, n, last_dur);
        if (!untimed_leading_only(fl, n))
            nuntimed = n;
    }
    if (nuntimed == n) {
        v->no_ts = 1;
        v->lead_untimed = 0; /* counted from the top, which the demuxer's seek reaches */
        v->start_ts = 0;     /* the count's start */
        for (int64_t i = 0; i < n; i++)
            v->pts[i] = i;
    } else if (nuntimed > 0) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++)
            if (!(fl[i] & PK_UNTIMED)) {
                v->pts[m] = v->pts[i];
                dts[m] = dts[i];
                fl[m++] = fl[i];
            } else {
                nk -= (fl[i] & PK_KEY) != 0;
            }
        n = m;
    }
    v->cut_start = !(fl[0] & PK_KEY);
    v->dts_only = 1;
    for (int64_t i = 0; i < n && v->dts_only; i++)
        v->dts_only = (fl[i] & PK_DTS_ONLY) != 0;
    if (!v->no_ts)
        anchors_to_pts(v, dts, fl, n, last_dur);
    /* Times that go back (time_goes_back) name no frame: the file is counted, in the order
     * the decoder hands its frames out, from its top (vt_vid_seek_ts), at the rate its
     * frames are apart within the runs. */
    int64_t back_step = 0;
    if (!v->no_ts && time_goes_back(v->pts, fl, n) >= 0) {
        back_step = median_step(v->pts, n);
        v->no_ts = v->ts_back = 1;
        v->lead_untimed = 0;
        v->start_ts = 0;
        for (int64_t i = 0; i < n; i++)
            v->pts[i] = i;
    }
    v->kf = vt_malloc((size_t)VT_MAX(nk, 1) * sizeof(int64_t));
    for (int64_t i = 0, k = 0; i < n; i++)
        if (fl[i] & PK_KEY)
            v->kf[k++] = v->pts[i];
    free(dts);
    free(fl);
    if (!v->no_ts) {
        qsort(v->pts, (size_t)n, sizeof(int64_t), vt_vid_cmp_i64);
        qsort(v->kf, (size_t)nk, sizeof(int64_t), vt_vid_cmp_i64);
    }
    v->info.nframes = n;
    v->nkf = nk;
    const AVCodecDescriptor *cd = avcodec_descriptor_get(v->fmt->streams[v->sidx]->codecpar->codec_id);
    v->intra_only = nk == n && cd && (cd->props & AV_CODEC_PROP_INTRA_ONLY);

    /* Duration, fps, VFR from the sorted timestamps. */
    AVStream *st = v->fmt->streams[v->sidx];
    double tb = av_q2d(st->time_base);
    if (last_dur <= 0 && n > 1 && !v->no_ts)
        last_dur = (v->pts[n - 1] - v->pts[0]) / (n - 1);
    if (!v->no_ts && tb > 0)
        v->info.duration = (double)(v->pts[n - 1] - v->pts[0] + last_dur) * tb;
    if (v->info.duration <= 0 && v->fmt->duration > 0)
        v->info.duration = (double)v->fmt->duration / AV_TIME_BASE;
    AVRational afr = st->avg_frame_rate;
    if (back_step > 0 && tb > 0) { /* the container's duration and rate count the overlap */
        v->info.fps = 1.0 / ((double)back_step * tb);
        v->info.duration = (double)n / v->info.fps;
    } else if (afr.num > 0 && afr.den > 0)
        v->info.fps = av_q2d(afr);
    else if (v->info.duration > 0)
        v->info.fps = (double)n / v->info.duration;
    if (v->info.duration <= 0 && v->info.fps > 0) /* a raw stream: frames at its rate */
        v->info.duration = (double)n / v->info.fps;
    if (!v->no_ts)
        v->info.vfr = vt_vid_index_vfr(v->pts, n);
    v->info.counted = v->no_ts;
    return 0;
}

