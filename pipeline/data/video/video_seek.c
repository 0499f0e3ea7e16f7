/*
 * video_seek.c: moving the decoder (video_impl.h). Seeking to a keyframe (or reopening a
 * file whose demuxer cannot seek), deciding whether a read decodes on instead, feeding
 * packets with the send/receive idiom while skipping those no read wants, and placing
 * each decoded frame at its index position by pts.
 *
 * Decode errors here are counted (vt_video_stats), never fatal and never printed: packets
 * the decoder rejects, and pictures it repaired or flagged (vt_vid_dec_damage).
 */
#include <errno.h>
#include <stdint.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

int vt_vid_seek_ts(vt_video *v, int64_t ts, char *err, size_t errlen) {
    if (v->hw.on)
        vt_vid_hw_thread(); /* the flush below reaches NVDEC */
    v->stats.seeks++;
    /* An untimed first GOP is reached only by reading from the top (video_index.c
     * untimed_lead): the demuxer's seek lands on its first timed keyframe. Nor is the top
     * of a file whose times go back (ts_back): the demuxer's search for a time assumes
     * times that grow, and its own index may hold the time twice. */
    int top = v->ts_back || (v->lead_untimed && ts <= v->start_ts);
    int ret = top ? -1 : av_seek_frame(v->fmt, v->sidx, ts, AVSEEK_FLAG_BACKWARD);
    if (ret < 0 && ts <= v->start_ts && !top)
        ret = avformat_seek_file(v->fmt, v->sidx, INT64_MIN, ts, ts, 0);
    if (ret < 0) {
        /* Cannot seek: start again from the top; frames before ts are skipped by pts. */
        ret = vt_vid_reopen(v, err, errlen);
        if (ret < 0)
            return ret;
    }
    avcodec_flush_buffers(v->dec);
    v->nskipped = 0;
    v->skip_at = 0;
    v->skip_lost_hi = -1;
    v->eof_sent = 0;
    v->streaming = 0;
    v->last_pos = -1;
    int64_t at = v->no_ts ? -1 : vt_vid_lower_bound(v->pts, v->info.nframes, ts);
    v->seek_pos = at >= 0 && at < v->info.nframes && v->pts[at] == ts ? at : -1;
    /* Into the file (not to its start), decoding begins at a keyframe: a demuxer that seeks
     * by dts or by byte position (MPEG-TS) lands on whatever packet lies there, and a
     * decoder started mid-GOP either drops what it cannot make (H.264) or hands out
     * frames built on missing references (HEVC: garbage at the right positions, which no
     * later check can tell). Packets before the first keyframe are passed over; landing
     * after the wanted frame is then seen (m > q) and the seek goes a keyframe further
     * back. Only where the index saw keyframes (a stream that marks none would lose
     * every frame). From the start too where the stream begins mid-GOP (cut_start): a
     * decoder that kept the parameter sets of an earlier pass would make pictures of the
     * packets before the first keyframe on missing references, which a fresh one makes
     * differently or not at all (video_open.c drop_unmade_lead). */
    v->await_key = (ts > v->start_ts || v->cut_start) && v->nkf > 0;
    v->land_check = 1;
    v->land_bad = 0;
    return 0;
}

/* The first packet after a seek, when it is a keyframe: is its timestamp one of the
 * index's keyframes? The index and the packet come from the same demuxer, so only a
 * container whose timestamps depend on how it was reached says no: an AVI that lost a
 * chunk numbers the packets after it by counting them when read through and by its idx1
 * index when seeked to, one apart, so a seek would hand out every frame of the clip one
 * position off, silently (vt_video_read_clip seeks further back instead). */
static void check_landing(vt_video *v, const AVPacket *pkt) {
    v->land_check = 0;
    if (v->no_ts || !(pkt->flags & AV_PKT_FLAG_KEY) || pkt->pts == AV_NOPTS_VALUE)
        return;
    int64_t k = vt_vid_lower_bound(v->kf, v->nkf, pkt->pts);
    v->land_bad = !(k < v->nkf && v->kf[k] == pkt->pts);
    /* Past the keyframe the seek asked for (MPEG-TS seeks by dts, which runs behind the
     * pts it was given: the first keyframe after the landing is the next one). A landing
     * past the wanted frame is seen by its position (m > q in vt_video_read_clip), and a
     * landing short of it is as good as the keyframe asked for (a retry asks one earlier
     * than it needs, and lands on the one it needed): only a keyframe whose time another
     * frame shares cannot say where it is (vt_vid_frame_pos takes the first shared
     * position, which may be at or before q though the frame is later). Flagging every
     * later landing would send each retry of a dts-seeking file to the next keyframe
     * again, and every clip to the start of the file. */
    if (v->seek_pos >= 0 && pkt->pts > v->pts[v->seek_pos]) {
        if (vt_vid_ts_shared(v, vt_vid_lower_bound(v->pts, v->info.nframes, pkt->pts),
                             pkt->pts))
            v->land_bad = 1;
    }
}

/* Does the current read need the frame of this packet? Unknown (no exact pts) = yes: a
 * packet with a dts alone, in a stream whose decoder reorders, shows at another time than
 * its dts (video_open.c anchors_to_pts), so its dts names another frame's position.
 * Skipping a B-frame on that guess also changes which packet pushes the next frame out,
 * and with it that frame's best-effort time (an AVI of H.264 read frames 1-2 places off).
 * A skipped position is remembered: a later read that wants it must seek. */
static int packet_wanted(vt_video *v, const AVPacket *pkt) {
    if (!v->want || v->no_ts)
        return 1;
    if (pkt->pts == AV_NOPTS_VALUE && v->fmt->streams[v->sidx]->codecpar->video_delay > 0)
        return 1;
    int64_t ts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
    if (ts == AV_NOPTS_VALUE)
        return 1;
    int64_t i = vt_vid_lower_bound(v->pts, v->info.nframes, ts);
    if (i >= v->info.nframes || v->pts[i] != ts)
        return 1;
    /* A timestamp two frames share (a muxer that rounded VFR times to a coarse time base)
     * names no position alone: the frames take the shared positions in the order they
     * come out (vt_vid_frame_pos), so none of them may be left out, or the next would take
     * its place. */
    if (vt_vid_ts_shared(v, i, ts))
        return 1;
    int64_t j = vt_vid_lower_bound(v->want, v->nwant, i);
    if (j < v->nwant && v->want[j] == i)
        return 1;
    if (v->nskipped < VT_SKIP_KEEP) {
        v->skipped[v->nskipped++] = i;
    } else {
        if (v->skipped[v->skip_at] > v->skip_lost_hi)
            v->skip_lost_hi = v->skipped[v->skip_at];
        v->skipped[v->skip_at] = i;
        v->skip_at = (v->skip_at + 1) % VT_SKIP_KEEP;
    }
    return 0;
}

/* Next frame into v->frame: 1 got one, 0 end of stream, < 0 error (err set).
 * Decode errors (a corrupt packet) are counted and skipped, never fatal. */
int vt_vid_next_frame(vt_video *v, char *err, size_t errlen) {
    int bad_in_a_row = 0;
    if (v->hw.on)
        vt_vid_hw_thread();
    for (;;) {
        int ret = avcodec_receive_frame(v->dec, v->frame);
        if (ret >= 0) {
            v->stats.decode_errors += vt_vid_dec_damage(&v->hw, v->dec, v->frame);
            v->stats.frames_decoded++;
            return 1;
        }
        if (ret == AVERROR_EOF) {
            v->stats.decode_errors += vt_vid_dec_damage(&v->hw, v->dec, NULL);
            return 0;
        }
        if (ret != AVERROR(EAGAIN)) {
            /* A frame-threaded decoder reports a bad packet here, not from send. */
            v->stats.decode_errors++;
            if (++bad_in_a_row > 10000) {
                vt_vid_set_av_err(err, errlen, "decoder keeps failing", ret);
                return ret;
            }
            continue;
        }
        if (v->eof_sent) { /* drained decoder answering EAGAIN: nothing more will come */
            v->stats.decode_errors += vt_vid_dec_damage(&v->hw, v->dec, NULL);
            return 0;
        }
        ret = av_read_frame(v->fmt, v->pkt);
        if (ret < 0) {
            /* EOF, or a read error in a truncated file: drain what was sent. */
            avcodec_send_packet(v->dec, NULL);
            v->eof_sent = 1;
            continue;
        }
        if (v->pkt->stream_index != v->sidx) {
            av_packet_unref(v->pkt);
            continue;
        }
        if (v->await_key) {
            if (!(v->pkt->flags & AV_PKT_FLAG_KEY)) {
                av_packet_unref(v->pkt);
                continue;
            }
            v->await_key = 0;
        }
        if (v->land_check)
            check_landing(v, v->pkt);
        /* Less decoding, same pixels: a frame nobody wants is not decoded when nothing
         * depends on it — any frame of an intra-only stream (not even sent), or a
         * non-reference frame (B-frames) of any codec (skip_frame, read per packet,
         * also by frame threads). Frames that are wanted decode exactly as before. */
        int wanted = packet_wanted(v, v->pkt);
        if (!wanted && v->intra_only && !(v->pkt->flags & AV_PKT_FLAG_DISCARD)) {
            av_packet_unref(v->pkt);
            continue;
        }
        v->dec->skip_frame = wanted ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
        if (v->dec_pool && !v->dec_dirty) /* the decoder pool's question (video_pool.c) */
            v->dec_dirty = vt_vid_pool_inband(v->dec_par, v->pkt);
        ret = avcodec_send_packet(v->dec, v->pkt);
        av_packet_unref(v->pkt);
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            v->stats.decode_errors++;
            if (++bad_in_a_row > 10000) {
                vt_vid_set_av_err(err, errlen, "decoder keeps failing", ret);
                return ret;
            }
        }
    }
}

int64_t vt_vid_frame_time(const vt_video *v, const AVFrame *f) {
    if (f->pts != AV_NOPTS_VALUE)
        return f->pts;
    /* An untimed lead's frames are counted: their best-effort time is the dts of whichever
     * packet pushed them out, which depends on the packets skipped before (the last of
     * them took the first timed frame's place when a B-frame before it was skipped). */
    if (v->lead_untimed)
        return AV_NOPTS_VALUE;
    int64_t ts = f->best_effort_timestamp;
    return ts == AV_NOPTS_VALUE ? ts : ts - v->ts_shift;
}

int vt_vid_ts_shared(const vt_video *v, int64_t i, int64_t ts) {
    return i + 1 < v->info.nframes && v->pts[i + 1] == ts;
}

int vt_vid_ts_alone_at(const vt_video *v, int64_t m, int64_t ts) {
    return m >= 0 && m < v->info.nframes && ts == v->pts[m] && !vt_vid_ts_shared(v, m, ts) &&
           (m == 0 || v->pts[m - 1] != ts);
}

/* Index position of the frame in v->frame (after last_pos). */
int64_t vt_vid_frame_pos(vt_video *v) {
    int64_t n = v->info.nframes;
    int64_t ts = vt_vid_frame_time(v, v->frame);
    if (v->no_ts)
        return v->last_pos + 1;
    if (ts == AV_NOPTS_VALUE) { /* untimed (a reordering decoder's last frame at the end) */
        if (v->last_pos < 0 && v->seek_pos >= 0)
            return v->seek_pos;
        /* the next position no packet was skipped for: a B-frame before it left out by
         * packet_wanted has its position taken already */
        int64_t p = v->last_pos + 1;
        for (int again = 1; again;) {
            again = 0;
            for (int k = 0; k < v->nskipped; k++)
                if (v->skipped[k] == p) {
                    p++;
                    again = 1;
                }
        }
        return p;
    }
    int64_t i = vt_vid_lower_bound(v->pts, n, ts);
    if (i < n && v->pts[i] == ts) {
        /* Duplicate timestamps (broken muxers): take the next unused one. */
        while (i <= v->last_pos && vt_vid_ts_shared(v, i, ts))
            i++;
        return i;
    }
    /* Not in the index (decoder-made timestamp): the nearest indexed frame. */
    if (i == 0)
        return 0;
    if (i == n)
        return n - 1;
    return (ts - v->pts[i - 1] <= v->pts[i] - ts) ? i - 1 : i;
}

/* Seek so that decoding reaches position q: to the keyframe at or before it, `back`
 * keyframes earlier on a retry, the start of the file after VT_MAX_SEEK_RETRY. */
int vt_vid_seek_for(vt_video *v, int64_t q, int back, char *err, size_t errlen) {
    if (v->no_ts || v->nkf == 0 || back >= VT_MAX_SEEK_RETRY)
        return vt_vid_seek_ts(v, v->start_ts, err, errlen);
    int64_t k = vt_vid_lower_bound(v->kf, v->nkf, v->pts[q] + 1) - 1 - back; /* last kf <= pts[q] */
    /* A keyframe whose time another frame shares gives no position to the first frame
     * after the seek (vt_vid_frame_pos takes the first of the shared ones): one further
     * back, whose time is its own, starts the count right. */
    while (k >= 0 &&
           vt_vid_ts_shared(v, vt_vid_lower_bound(v->pts, v->info.nframes, v->kf[k]), v->kf[k]))
        k--;
    if (k < 0)
        return vt_vid_seek_ts(v, v->start_ts, err, errlen);
    return vt_vid_seek_ts(v, v->kf[k], err, errlen);
}

/* Could the decoder reach q from where it is without a seek, and should it? Yes when q
 * is ahead and a seek would not save work: no keyframe lies between the current position
 * and q (a seek would land at or before where we already are), or the keyframe before q
 * is at most VT_CONTINUE_REFS frames ahead (a seek would skip decoding that few frames
 * but costs a demuxer seek, a decoder flush and, with frame threads, refilling the
 * pipeline). In an intra-only stream passing a frame costs one packet read (it is never
 * sent), so up to VT_CONTINUE_INTRA frames are passed rather than seeking per frame.
 * Pixels are the same either way: a keyframe decodes the same whether it was reached by
 * seeking or by decoding on (decoding on is what the ffmpeg command does). A decoder that
 * was sent the end of the stream and still holds frames hands them out in order, so it
 * goes on too, rather than a seek and a GOP's decoding for each of a clip's last frames
 * (docs/decode.md). */
#define VT_CONTINUE_REFS 4
#define VT_CONTINUE_INTRA 32
int vt_vid_can_continue(const vt_video *v, int64_t q) {
    if (!v->streaming || v->last_pos < 0 || q <= v->last_pos)
        return 0;
    if (v->eof_sent)
        return 1;
    if (v->no_ts)
        return 1;
    if (v->intra_only)
        return q - v->last_pos <= VT_CONTINUE_INTRA;
    int64_t k = vt_vid_lower_bound(v->kf, v->nkf, v->pts[q] + 1) - 1;
    if (k < 0 || v->kf[k] <= v->pts[v->last_pos])
        return 1;
    int64_t kpos = vt_vid_lower_bound(v->pts, v->info.nframes, v->kf[k]); /* index position */
    return kpos - v->last_pos - 1 <= VT_CONTINUE_REFS;
}
