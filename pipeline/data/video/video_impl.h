/*
 * video_impl.h: the inside of a vt_video, shared by the files of the video reader
 * (video_open.c, video_seek.c, video_read.c, video_scale.c, video_log.c, video_hw.c) and
 * the streaming reader (stream.c: its scaler and GPU decoder are the reader's). Nothing else
 * includes it; everyone else sees video.h.
 */
#ifndef VT_VIDEO_IMPL_H
#define VT_VIDEO_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>

#include "pipeline/data/video/video.h"

struct SwsContext;

#define VT_SWS_CACHE 4   /* sws contexts per video: a few sizes, a mid-stream format change */
#define VT_MAX_SEEK_RETRY 2
#define VT_SKIP_KEEP 64  /* skipped positions remembered exactly (reorder + thread delay is less) */

typedef struct vt_sws_entry {
    struct SwsContext *ctx;
    int src_w, src_h, src_fmt, dst_w, dst_h, colorspace, range;
    uint64_t used;
} vt_sws_entry;

struct vt_scaler {
    vt_sws_entry sws[VT_SWS_CACHE];
    uint64_t sws_tick;
    uint8_t *tmp;           /* RGB24 before rotation, rows 64-byte aligned */
    size_t tmp_size;
    AVFrame *planar;        /* a GPU frame (NV12, P010) rearranged as a CPU decoder's */
    int filter;             /* vt_scale_filter (0: bilinear, the loader's) */
};

/* One decoder's state that FFmpeg's callbacks reach through AVCodecContext.opaque (a
 * frame thread's copy of the context carries the same pointer): a vt_video's, and a
 * vt_stream's (stream.c). Its GPU state (video_hw.c), and the pictures FFmpeg's error
 * concealment repaired, as its log says (video_log.c, vt_vid_dec_damage). */
#define VT_DEC_MAGIC 0x76746463u /* "vtdc": opaque is a vt_hw_dec */
typedef struct vt_hw_dec {
    uint32_t magic;         /* VT_DEC_MAGIC once vt_vid_dec_tap ran */
    int on;                 /* 1 while the decoder runs on the GPU */
    AVFrame *tmp;           /* a GPU frame's pixels on their way to system memory */
    _Atomic int64_t concealed; /* "concealing ... errors in P frame" lines of its threads */
    int64_t concealed_taken;   /* of those, seen by vt_vid_dec_damage so far */
    int64_t pending;           /* seen, not counted yet: waiting for their frame */
    int64_t pending_age;       /* frames handed out since the oldest of them was seen */
} vt_hw_dec;

/* ---- damage the decoder repaired (video_log.c) ---- */

/* Before avcodec_open2: dec->opaque becomes h, so that FFmpeg's log lines about dec (from
 * any of its threads) reach h. Every decoder of the reader and of streams is tapped. */
void vt_vid_dec_tap(vt_hw_dec *h, AVCodecContext *dec);
/* Damaged pictures to count now, f the frame just received from dec (NULL: the decoder
 * is drained): f itself when it is flagged damaged (decode_error_flags,
 * AV_FRAME_FLAG_CORRUPT), and pictures whose repair the log told of but whose frame never
 * came out marked within the decoder's delay (its reorder depth plus its frame threads).
 * Why both: FFmpeg 5.1 marks a concealed frame FF_DECODE_ERROR_CONCEALMENT_ACTIVE only in
 * the thread that decoded it, and a frame-threaded decoder often hands out another
 * thread's copy without the mark; its log line comes from whichever thread repaired it,
 * before the frame comes out, so a marked frame takes up a line waiting for it (one
 * picture, counted once). Under slice threads, or with a codec without error concealment,
 * the frame's own flags are all there is; with one thread, FFmpeg also marks frames it
 * made up for a missing reference without a log line. A count is never placed before its
 * picture: exactly on it when it is marked, else at most the delay after it. */
int64_t vt_vid_dec_damage(vt_hw_dec *h, const AVCodecContext *dec, const AVFrame *f);

struct vt_video {
    char *path;
    int threads;
    int even_sides;         /* vt_video_set_scaling: scaled sizes with even sides */
    AVFormatContext *fmt;
    AVCodecContext *dec;
    AVPacket *pkt;
    AVFrame *frame;
    int sidx;
    vt_video_info info;
    int64_t *pts;           /* (nframes) presentation timestamps, sorted */
    int64_t *kf;            /* (nkf) keyframe pts, sorted */
    int64_t nkf;
    int64_t start_ts;       /* smallest dts/pts seen: a seek here is a seek to the start */
    int no_ts;              /* packets without timestamps: frames are counted, not looked up */
    int ts_back;            /* timestamps that go back (segments joined with overlapping
                             * times, video_index.c): counted too, read from the top by
                             * reopening (a timestamp seek cannot name it) */
    int dts_only;           /* every packet had a dts and no pts (AVI): the index holds dts */
    int lead_untimed;       /* the first GOP is untimed, its times made up (video_open.c
                             * untimed_lead): a demuxer's seek cannot reach it */
    int cut_start;          /* the first packet (decode order) is no keyframe: a stream cut
                             * mid-GOP, decoded from its first keyframe (video_open.c
                             * drop_unmade_lead) */
    int64_t ts_shift;       /* a frame without a pts is at best_effort - ts_shift in the index
                             * (vt_vid_frame_time) */
    int await_key;          /* after a seek into the file: packets until a keyframe are
                             * passed over (vt_vid_seek_ts) */
    int64_t seek_pos;       /* the index position of the last seek's target (a keyframe),
                             * -1 when it is none: where an untimed first frame after it is */
    int intra_only;         /* every packet is a keyframe (MJPEG, FFV1...): frames independent */
    const int64_t *want;    /* (nwant) sorted index positions the current read needs, or NULL */
    int nwant;
    /* Positions whose packet was skipped (not decoded) since the last seek: a later read
     * that wants one of them must seek. The most recent VT_SKIP_KEEP are kept exactly
     * (a continuing read checks its wanted positions against them); older ones only
     * by their highest position, skip_lost_hi (-1 if none). */
    int64_t skipped[VT_SKIP_KEEP];
    int nskipped;           /* entries filled, up to VT_SKIP_KEEP; then a ring at skip_at */
    int skip_at;
    int64_t skip_lost_hi;
    /* decoder position */
    int streaming;          /* 1 when the decoder continues from last_pos without a seek */
    int eof_sent;           /* NULL packet sent: drained, needs a seek before more reads */
    int64_t last_pos;       /* index position of the last frame received, -1 after a seek */
    int land_check;         /* the first packet after a seek not read yet (video_seek.c) */
    int land_bad;           /* it was a keyframe the index does not have: the container's
                             * timestamps after this seek disagree with the index's */
    vt_scaler sc;           /* scaling */
    vt_video_frame_sink sink; /* clean decoded frames also go here (vt_video_set_sink) */
    void *sink_ctx;
    uint8_t *seq;           /* (h, w, 3) frame handed to decode_all callbacks */
    size_t seq_size;
    vt_video_stats stats;
    vt_hw_dec hw;           /* the GPU decoder's state (video_hw.c) */
    /* what dec was opened for, for the pool at close (video_pool.c); dec_pool: the pool
     * wants it (its packets are then read for parameter sets); dirty once it holds state
     * its parameters do not say */
    AVCodecParameters *dec_par;
    AVRational dec_tb;
    int dec_threads, dec_hw, dec_pool, dec_dirty;
};

/* ---- FFmpeg log capture (video_log.c) ---- */

#define VT_VID_MSG_LEN 256
/* FFmpeg's last error line on this thread; cleared before a call whose failure it explains. */
extern _Thread_local char vt_vid_last_msg[VT_VID_MSG_LEN];
/* err = "what: FFmpeg's last error line (the AVERROR text)". */
void vt_vid_set_av_err(char *err, size_t errlen, const char *what, int code);
/* Notes a refusal of the system (code AVERROR(EMFILE) or AVERROR(ENFILE); others are
 * ignored) for vt_video_system_failed: what failed, and why. vt_vid_set_av_err calls it;
 * an error of the reader's own (a frame folder's listing) must too. */
void vt_vid_note_system(int code, const char *what, const char *reason);

/* ---- the container (video_demux.c) ---- */

/* Opens v->path (a file, or a frame folder) into v->fmt, refusing absurd dimensions in its
 * header. With probe, also reads its stream parameters (vt_vid_probe). 0, or a negative
 * code with err set. */
int vt_vid_open_input(vt_video *v, int probe, char *err, size_t errlen);
/* avformat_open_input of a file: the file protocol only, and no demuxer that reads a list
 * of other inputs (concat, hls, ...): < 0 with err set otherwise. */
int vt_vid_open_file(AVFormatContext **fmt, const char *path, char *err, size_t errlen);
/* FFmpeg's probe of the opened container (avformat_find_stream_info: it demuxes and
 * decodes a few frames to fill what the header leaves out). 0, or a negative code. */
int vt_vid_probe(vt_video *v, char *err, size_t errlen);
/* Keep only the video stream's (v->sidx) packets: demuxing skips the rest cheaply. */
void vt_vid_discard_others(vt_video *v);
/* Reopen the container when a demuxer cannot seek (some formats only read forward). */
int vt_vid_reopen(vt_video *v, char *err, size_t errlen);

/* ---- opening (video_open.c) ---- */

/* A frame folder (video_frames.c) opened through the image2 demuxer into *fmt. 0, or a
 * negative code with err set (a gap, mixed names, an unreadable folder). */
int vt_vid_open_frames(AVFormatContext **fmt, const char *dir, char *err, size_t errlen);

/* ---- what an open learned, kept per file (video_known.c) ---- */

/* A regular file as vt_video_open found it: the same path with the same identity is the
 * same bytes (a file rewritten within the clock's granule is never kept, see put). */
typedef struct vt_vid_file_id {
    int64_t dev, ino, size, mtime_s, mtime_ns;
} vt_vid_file_id;

/* The index, and the first frame's facts, of an open that succeeded. */
typedef struct vt_vid_known {
    vt_video_info info;     /* as the open left it */
    int64_t *pts, *kf;      /* (info.nframes), (nkf) */
    int64_t nkf, start_ts, ts_shift;
    int no_ts, ts_back, intra_only, lead_untimed, cut_start;
    int first;              /* 1: info's first-frame facts (size, format, range) came from a
                             * CPU decoder without an error, at first_pos, whose timestamp
                             * no other frame has: an open may take them instead */
    int64_t first_pos;
    /* The stream the open chose, as its container's header gave it (before the probe)
     * and as the probe left it (par, owned here): an open that finds the header the same
     * takes par instead of probing (video_open.c, take_known_stream). par NULL: probe. */
    AVCodecParameters *par;
    int sidx, nb_streams;
    int hdr_codec, hdr_w, hdr_h;
} vt_vid_known;

/* 1 with *out filled (its pts, kf and par the caller's to free) when path with identity
 * id is kept; 0 otherwise. Counts a hit or a miss. */
int vt_vid_known_get(const char *path, const vt_vid_file_id *id, vt_vid_known *out);
/* Keeps a copy of k for path (nothing when the budget is 0, the entry is larger than it,
 * or the file was modified less than 2 s ago: a rewrite in the same clock granule would
 * keep its identity). */
void vt_vid_known_put(const char *path, const vt_vid_file_id *id, const vt_vid_known *k);
/* Counts an open that took a kept file's stream parameters instead of probing. */
void vt_vid_known_probe_skipped(void);

/* ---- the frame index (video_index.c) ---- */

/* v->pts (sorted presentation times, or counts where the file is counted: no_ts), v->kf,
 * nkf, start_ts and the stream flags (no_ts, ts_back, dts_only, cut_start, lead_untimed,
 * intra_only), info's nframes, fps, duration and vfr, by demuxing every packet of v's
 * stream from where the demuxer is. 0, or a negative code with err set. */
int vt_vid_build_index(vt_video *v, char *err, size_t errlen);
/* VFR: in the sorted index (n), frame durations differ by more than 1% and by more than
 * one tick. */
int vt_vid_index_vfr(const int64_t *pts, int64_t n);

/* ---- moving the decoder (video_seek.c) ---- */

/* Seek the demuxer to ts (stream time base) and flush the decoder. */
int vt_vid_seek_ts(vt_video *v, int64_t ts, char *err, size_t errlen);
/* Next frame into v->frame: 1 got one, 0 end of stream, < 0 error (err set). */
int vt_vid_next_frame(vt_video *v, char *err, size_t errlen);
/* Index position of the frame in v->frame (after last_pos). */
int64_t vt_vid_frame_pos(vt_video *v);
/* The index time of frame f: its pts, else its best-effort timestamp less v->ts_shift;
 * AV_NOPTS_VALUE when it has neither. */
int64_t vt_vid_frame_time(const vt_video *v, const AVFrame *f);
/* Is ts, whose first index position is i (its lower bound), another frame's time too? */
int vt_vid_ts_shared(const vt_video *v, int64_t i, int64_t ts);
/* Is ts the time of position m and of no other frame? Then a decode that meets the frame
 * again places it at m, however it got there (vt_vid_frame_pos). */
int vt_vid_ts_alone_at(const vt_video *v, int64_t m, int64_t ts);
/* Seek so that decoding reaches position q, `back` keyframes earlier on a retry. */
int vt_vid_seek_for(vt_video *v, int64_t q, int back, char *err, size_t errlen);
/* 1 when the decoder should decode on to q rather than seek. */
int vt_vid_can_continue(const vt_video *v, int64_t q);

/* ---- the GPU (video_hw.c) ---- */

/* 1 when the decode mode, the process's CUDA device and the codec let a decoder of path
 * run on the GPU; otherwise 0, noting why (vt_vid_hw_fallback, naming path). */
int vt_vid_hw_usable(const AVCodec *codec, const char *path);
/* Before avcodec_open2, after vt_vid_hw_usable said 1: give dec the CUDA device and set
 * h->on (dec->opaque becomes h). */
void vt_vid_hw_attach(vt_hw_dec *h, AVCodecContext *dec);
/* A GPU decoder opened for another video (the pool's): h takes it over (h->on set). */
void vt_vid_hw_adopt(vt_hw_dec *h, AVCodecContext *dec);
/* f into system memory if it is a GPU frame (props kept): 0, or < 0 with err. */
int vt_vid_hw_download(vt_hw_dec *h, AVFrame *f, char *err, size_t errlen);
/* Frees what h holds (after the decoder is freed). */
void vt_vid_hw_free(vt_hw_dec *h);
/* Before a thread's first call into a GPU decoder (open, decode, copy, close): its CUDA
 * stream-capture mode becomes relaxed, so cuDNN's graph captures in the towers' threads
 * and NVDEC's calls leave each other alone. Once per thread; cheap after. */
void vt_vid_hw_thread(void);
/* The GPU does not decode `path`, because of `reason`: under --decode nvdec the first
 * such call in the process prints one warning; otherwise silent. */
void vt_vid_hw_fallback(const char *path, const char *reason);
/* A decoder opened with the GPU attached (h->on) gave its first frame, f: when it is not
 * a GPU frame, FFmpeg could not start NVDEC on the stream (a profile, size or depth it
 * lacks) and decodes in software: h->on is cleared, the fallback noted, and 1 returned
 * (the decoder then runs with the one thread the GPU path gave it). 0 otherwise. */
int vt_vid_hw_first_frame(vt_hw_dec *h, const AVFrame *f, const char *path);

/* ---- decoders kept for the next open (video_pool.c) ---- */

/* 1 when the pool mode and the codec (H.264/HEVC with avcC/hvcC extradata) let a decoder
 * of a stream with par (hw: NVDEC) be kept and taken. */
int vt_vid_pool_wants(const AVCodecParameters *par, int hw);
/* A closed video's decoder opened for a stream with exactly par, tb, threads (thread_count
 * as given) and hw (1: NVDEC), flushed, when the pool mode and the codec allow it; NULL
 * otherwise (the caller opens one). */
AVCodecContext *vt_vid_pool_take(const AVCodecParameters *par, AVRational tb, int threads,
                                 int hw);
/* *dec (opened for par, tb, threads, hw) kept for a later take, or freed: freed unless
 * clean (no rejected packet, flagged frame, in-band parameter set or GPU give-up) and the
 * pool mode and the codec allow it. *dec becomes NULL. */
void vt_vid_pool_give(AVCodecContext **dec, const AVCodecParameters *par, AVRational tb,
                      int threads, int hw, int clean);
/* Before making a GPU decoder for a stream with par: 1 when it may (its session counted
 * until vt_vid_pool_give frees it: give with hw 1), after freeing an idle GPU decoder when
 * the NVDEC session cap is reached; 0 when it must decode on the CPU (H.264 past the cap,
 * none idle). */
int vt_vid_pool_session(const AVCodecParameters *par);
/* 1 when packet pkt of a stream with par carries a parameter set in band (H.264 SPS/PPS,
 * HEVC VPS/SPS/PPS) or cannot be read as length-prefixed NAL units: its decoder then
 * holds state that its extradata does not say, and is not kept. */
int vt_vid_pool_inband(const AVCodecParameters *par, const AVPacket *pkt);

/* ---- scaling (video_scale.c) ---- */

/* Free a scaler's contexts and scratch, leaving it zeroed (reusable). */
void vt_vid_scaler_clear(vt_scaler *s);

/* ---- small helpers ---- */

static inline int vt_vid_cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* First index i with a[i] >= x (n when none). */
static inline int64_t vt_vid_lower_bound(const int64_t *a, int64_t n, int64_t x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Clockwise degrees (0, 90, 180, 270) that display st upright, from its display matrix
 * (the ffmpeg command's convention, fftools get_rotation); 0 when it has none or it is
 * not a multiple of 90 degrees. video_open.c; the streaming reader (stream.c) too. */
int vt_vid_rotation_of(const AVStream *st);

#endif
