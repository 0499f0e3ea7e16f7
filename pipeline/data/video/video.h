/*
 * video.h: one video file through FFmpeg — probe, index the frames, and decode a clip of
 * T frames at a stride, frame-accurately, scaled to RGB at a target short side with the
 * aspect ratio kept and rotation metadata honoured.
 *
 * Frame n is the n-th frame in presentation order (what `ffmpeg -vf select=eq(n\,N)`
 * calls n). The index (one pts per frame) is built by demuxing without decoding, so a
 * variable-frame-rate file is addressed by timestamps, never by fps arithmetic.
 * A bad file is a data error: functions return a negative code and set err with the
 * reason; they never abort and never print (one exception: the warning of --decode
 * nvdec falling back to the CPU, once per process, vt_decode_mode).
 *
 * Files: video_open.c (open, probe, index), video_seek.c (moving the decoder),
 * video_read.c (clips, whole decodes), video_scale.c (to RGB, rotation), video_hw.c
 * (NVDEC), video_log.c (FFmpeg's log), video_known.c (what an open learned, for the
 * next open), stream.c (a video read once, front to back: the
 * Streams section below); video_impl.h holds what they share.
 */
#ifndef VT_VIDEO_H
#define VT_VIDEO_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_video_info {
    int width, height;        /* coded size, before rotation */
    int disp_width, disp_height; /* after rotation */
    int rotation;             /* clockwise degrees to display upright: 0, 90, 180, 270 */
    int sar_num, sar_den;     /* the coded pixel's shape (sample aspect ratio), 1:1 when
                               * the file states none: a DVD's 720x480 at 32:27 shows 16:9.
                               * Frames are read at their stored size, as the ffmpeg
                               * command and PyTorch's readers read them */
    int64_t nframes;          /* frames in the index */
    double fps;               /* average frame rate (nframes / duration if unknown) */
    double duration;          /* seconds */
    char codec[32];           /* "h264", "mpeg4", ... */
    char container[32];       /* "mov,mp4,m4a,3gp,3g2,mj2" short name first part */
    char pix_fmt[32];
    int full_range;           /* 1: full-range (JPEG) levels 0-255, as MJPEG and some phones
                                 write; from the first decoded frame (vt_video_open only) */
    int vfr;                  /* 1 when frame durations differ by more than 1% */
    int counted;              /* 1 when frames are counted from the top, not found by time
                               * (no timestamps: raw streams; times that go back: segments
                               * joined with overlapping times): a clip decodes from the
                               * start (vidtrain prep writes a copy that seeks) */
    char decoder[8];          /* where frames decode: "cpu", or "nvdec" (the GPU) */
} vt_video_info;

/* What to do when a clip runs past the last frame. */
typedef enum vt_pad_policy {
    VT_PAD_LOOP,              /* wrap around to frame 0 (default for training) */
    VT_PAD_REPEAT_LAST,       /* repeat the last frame */
} vt_pad_policy;

typedef struct vt_video vt_video;

/* Where vt_video_open decodes (`--decode`, docs/decode.md). AUTO: on the GPU through
 * FFmpeg's NVDEC hwaccel when a CUDA device is there and the codec has an NVDEC decoder,
 * else on the CPU, silently. NVDEC: the same, but when the GPU cannot decode a file the
 * CPU does, and one warning (the first such path and the reason) is printed per process
 * — the only thing the video reader ever prints. CPU: libavcodec's software decoders.
 * Pixels: H.264 and HEVC decode bit-exactly either way (the standards fix the output);
 * the GPU hands over NV12 instead of yuv420p, which swscale reads by another routine. */
typedef enum vt_decode_mode {
    VT_DECODE_AUTO = 0,
    VT_DECODE_CPU,
    VT_DECODE_NVDEC,
} vt_decode_mode;

/* "auto", "cpu", "nvdec" -> the mode; -1 for anything else. */
int vt_decode_mode_parse(const char *s);
const char *vt_decode_mode_name(vt_decode_mode m);
/* Process-wide: every vt_video_open from now on decodes as m says (default AUTO). Set it
 * once, before the first open (the command line does). */
void vt_video_set_decode(vt_decode_mode m);
vt_decode_mode vt_video_get_decode(void);

/* A folder of numbered JPEG/PNG frames (<prefix><number>.jpg|jpeg|png, one prefix and
 * extension, numbered without a gap) is one video wherever a video path goes: opened
 * through FFmpeg's image2 demuxer and image decoders, frame n at n / the frame rate
 * (video_frames.c). 1 when path is such a folder. */
int vt_video_is_frame_dir(const char *path);
/* The demuxer of path, a file or a frame folder (through image2), as vt_video_open reads
 * it: for readers of their own (pipeline/data/signature.c). 0, or a negative code with
 * err set; *fmt is closed with avformat_close_input. */
struct AVFormatContext;
int vt_video_open_input(struct AVFormatContext **fmt, const char *path, char *err,
                        size_t errlen);
/* Process-wide: frame folders' frames per second (`--frame-rate`, default 30). Set it
 * once, before the first open. */
void vt_video_set_frame_rate(double fps);
double vt_video_get_frame_rate(void);

/* Open and index. threads: decoder threads (0 = FFmpeg's choice, 1 = none).
 * Returns 0, or a negative code with err set ("no video stream", "truncated: moov atom
 * not found", "0 decodable frames", "dimensions 40000x40000 exceed the 16384 limit"...). */
int vt_video_open(vt_video **out, const char *path, int threads, char *err, size_t errlen);
void vt_video_close(vt_video **v);
const vt_video_info *vt_video_get_info(const vt_video *v);

/* Output size for a short side: the displayed (rotated) frame scaled so that its shorter
 * side is short_side, the other side rounded to the nearest integer (>= 1). short_side 0
 * keeps the displayed size. */
void vt_video_scaled_size(const vt_video *v, int short_side, int *out_w, int *out_h);

/* Decode frames start, start+stride, ..., start+(t-1)*stride into out
 * (t, out_h, out_w, 3) uint8 RGB, where (out_w, out_h) = vt_video_scaled_size(v,
 * short_side). Frames past the end follow `pad`. Returns 0 or a negative code with err
 * set (the file may be corrupt past the index). Seeks to the keyframe at or before the
 * first frame and decodes forward; a read ahead of the previous one decodes on without
 * seeking when no keyframe lies in between, when the next keyframe is only a few frames
 * ahead (a seek would save little decoding), or in an intra-only stream when the gap is
 * small (passed packets are not decoded). Pixels are the same either way.
 * Scaling is libswscale SWS_BILINEAR (what `ffmpeg -vf scale=W:H:flags=bilinear` does,
 * a tent filter widened on downscale, so it does not alias) with the source colour matrix
 * and range, straight to RGB24; rotation is applied after scaling, to the RGB pixels.
 * Corruption: a frame the index lists but the decoder never delivers is filled with the
 * nearest decoded frame of the same clip (earlier first, else later) and counted in
 * vt_video_stats.missing_frames; when no frame of the clip decodes the call fails. */
int vt_video_read_clip(vt_video *v, uint8_t *out, int64_t start, int t, int stride,
                       int short_side, vt_pad_policy pad, char *err, size_t errlen);

/* The index positions of frames start, start+stride, ..., start+(t-1)*stride of a video
 * of nframes frames, past the end as `pad` says: what read_clip decodes into slots 0..t-1. */
void vt_clip_positions(int64_t nframes, int64_t start, int t, int stride, vt_pad_policy pad,
                       int64_t *pos);

/* vt_video_scaled_size from the info alone. */
void vt_video_info_scaled_size(const vt_video_info *info, int short_side, int *out_w,
                               int *out_h);

/* Decoded frames to share (a frame cache): read_clip hands sink every frame that comes
 * out of the decoder on its way — wanted or passed — whose pixels cannot depend on the
 * path the decoder took (none after a decode error on this handle, none flagged corrupt,
 * none whose position is not read off a timestamp of its own), as (index position, the
 * frame in the decoder's pixel format). The frame is valid during the call only
 * (av_frame_ref it to keep it). NULL: none (the default). */
struct AVFrame;
typedef void (*vt_video_frame_sink)(void *ctx, int64_t pos, const struct AVFrame *frame);
void vt_video_set_sink(vt_video *v, vt_video_frame_sink sink, void *ctx);

/* Scaling without a video: the swscale contexts and scratch that read_clip uses, for
 * frames kept elsewhere (a frame cache). Not thread-safe: one per thread. */
typedef struct vt_scaler vt_scaler;
vt_scaler *vt_scaler_new(void);
void vt_scaler_free(vt_scaler **s);
/* frame (decoder format) scaled to RGB24 and rotated (rotation: vt_video_info's) into out
 * (oh, ow, 3): the very bytes read_clip writes for that frame at that size. */
int vt_scaler_convert(vt_scaler *s, const struct AVFrame *frame, int rotation, uint8_t *out,
                      int ow, int oh, char *err, size_t errlen);

/* How this video's frames are scaled, for a re-encoder (prep) rather than training:
 * filter: bilinear is the loader's, always (the tests compare it with `ffmpeg -vf
 * scale=...:flags=bilinear`); bicubic is for a copy that is scaled again when training
 * reads it: a training read of a bilinear copy is a tent of a tent, with 10-14% less fine
 * detail at the training scale than a read of the source, of a bicubic copy 2-6% less
 * (docs/prep.md). Bicubic also takes swscale's exact colour path (accurate rounding,
 * full chroma interpolation): the fast one is a level dark, which a copy would keep.
 * even_sides: the scaled size (vt_video_scaled_size, read_clip, decode_all) has even
 * sides, as 4:2:0 encoders want: the short side rounded up to even, the long one to the
 * nearest even number to the exact aspect (at least the short side, at most the source's
 * own long side rounded down to even), so one resampling gives the copy's size. */
typedef enum vt_scale_filter { VT_SCALE_BILINEAR = 0, VT_SCALE_BICUBIC = 1 } vt_scale_filter;
void vt_video_set_scaling(vt_video *v, vt_scale_filter filter, int even_sides);

/* Counters since open, for reports and tests: FFmpeg's own log is silenced (it would
 * print from inside the library), so decode trouble is counted here instead. */
typedef struct vt_video_stats {
    int64_t decode_errors;   /* packets the decoder rejected, pictures it repaired by error
                              * concealment (the picture comes out, partly guessed: what
                              * `ffmpeg -v error` reports as "error while decoding MB"),
                              * and frames it flagged corrupt */
    int64_t missing_frames;  /* indexed frames that never decoded and were filled (see read_clip) */
    int64_t seeks;           /* demuxer seeks done by clip reads */
    int64_t frames_decoded;  /* frames out of the decoder, wanted or not */
} vt_video_stats;

const vt_video_stats *vt_video_get_stats(const vt_video *v);

/* Process-wide: what opening a file learned (its frame index; the first frame's size and
 * format when it decoded on the CPU without an error) is kept, up to `bytes` (default
 * VT_VIDEO_OPEN_CACHE_DEFAULT, least recently used out first), and the next
 * vt_video_open of the same path, unchanged (device, inode, size and modification time),
 * takes it instead of demuxing the whole file and decoding its first frame: the loader's
 * workers open a video again for nearly every clip of a large dataset. The same info, the
 * same frames and the same seeks as a first open (video_known.c). 0: nothing kept (what
 * is kept is dropped). Frame folders, and files modified in the last 2 s, are never kept. */
#define VT_VIDEO_OPEN_CACHE_DEFAULT (64ll << 20)
void vt_video_set_open_cache(int64_t bytes);
typedef struct vt_video_open_cache_stats {
    int64_t hits, misses;    /* opens of a regular file that found it kept, or not */
    int64_t entries, bytes;  /* held now */
    int64_t probes_skipped;  /* hits that took the kept stream parameters, not probing */
} vt_video_open_cache_stats;
void vt_video_get_open_cache_stats(vt_video_open_cache_stats *out);

/* Process-wide: a closed video's decoder is kept, flushed, and the next open of a stream
 * with the same parameters (codec, size, format, extradata byte for byte, time base,
 * threads, GPU or CPU) takes it instead of making one (video_pool.c says which streams
 * qualify: H.264 and HEVC from MP4/Matroska, without parameter sets in band, decoded
 * without an error). The same frames either way. An NVDEC decoder is a hardware session
 * with its picture buffers on the GPU, made for nearly every clip otherwise; a CPU
 * decoder costs ~0.05 ms to make. VT_DECODER_POOL_GPU (the default) keeps NVDEC
 * decoders only; ALL also CPU ones (bench decode --decoder-pool, and the tests); OFF
 * none (idle ones freed). At most VT_DECODER_POOL_IDLE idle, the oldest freed first. */
typedef enum {
    VT_DECODER_POOL_OFF = 0,
    VT_DECODER_POOL_GPU = 1,
    VT_DECODER_POOL_ALL = 2,
} vt_decoder_pool_mode;
#define VT_DECODER_POOL_IDLE 16
/* "off", "gpu", "all" -> the mode, or -1; and back. */
int vt_decoder_pool_parse(const char *s);
const char *vt_decoder_pool_name(vt_decoder_pool_mode m);
void vt_video_set_decoder_pool(vt_decoder_pool_mode m);
vt_decoder_pool_mode vt_video_get_decoder_pool(void);
typedef struct vt_decoder_pool_stats {
    int64_t reused;          /* opens that took a kept decoder */
    int64_t made;            /* opens the pool wanted that made one (none kept matched) */
    int64_t evicted;         /* idle decoders freed for room (or for an NVDEC session) */
    int64_t idle;            /* held now */
    int64_t gpu_live;        /* NVDEC decoders of videos alive now, idle ones included */
    int64_t gpu_peak;        /* the most alive at once */
    int64_t gpu_capped;      /* opens decoded on the CPU: the NVDEC session cap was reached */
} vt_decoder_pool_stats;
void vt_video_get_decoder_pool_stats(vt_decoder_pool_stats *out);
/* Every idle decoder freed (their GPU memory with them): a loader does it when it is
 * freed, after closing its videos, so kept NVDEC decoders live no longer than the pass
 * that made them. */
void vt_video_decoder_pool_drain(void);
/* The NVDEC session cap is the environment's VT_NVDEC_SESSIONS (video_pool.c): at most
 * that many NVDEC decoders alive, an idle one freed first; past it H.264 decodes on the
 * CPU, whose frames NVDEC's equal byte for byte; other codecs open on the GPU all the
 * same. Unset: no cap (until a GPU run has measured one). */

/* The presentation timestamp of index position n (0 <= n < nframes) counted from the
 * first frame's, in the stream's time base (*tb_num / *tb_den): what a re-encoder (prep)
 * needs to keep a variable frame rate as it is. A file without timestamps gives n in
 * 1/fps. */
int64_t vt_video_frame_ts(const vt_video *v, int64_t n, int *tb_num, int *tb_den);

/* Bytes past the end of an RGB24 frame that swscale reads it from (prep's conversion to
 * 4:2:0, the leak check's signatures, synth's encoder): its vector loads take 16 bytes
 * at a time and run past a row that is not a multiple of 16 long, so a frame allocated
 * to its exact size was read beyond its block, the bytes there differing from one run to
 * the next (and copies of one source with them). Such a buffer is allocated this much
 * longer, the tail zeroed. */
#define VT_RGB_PAD 64

/* One decoded, scaled, rotated frame: rgb is (h, w, 3) uint8, valid only during the call,
 * with VT_RGB_PAD zero bytes after it. n is the frame's index position. Return non-zero
 * to stop early. */
typedef int (*vt_video_frame_fn)(void *user, const uint8_t *rgb, int64_t n, int w, int h);

/* Sequential decode of every frame from the start, scaled like read_clip (benchmarks,
 * whole-video evaluation). fn may be NULL (decode and scale only); short_side < 0: no
 * scaling and no fn, frames only go to the sink (filling a frame cache). *out_frames
 * gets the number of frames delivered. Returns 0 or a negative code with err set. */
int vt_video_decode_all(vt_video *v, int short_side, vt_video_frame_fn fn, void *user,
                        int64_t *out_frames, char *err, size_t errlen);

/* The system refused a video's reader a file (too many open files: EMFILE, ENFILE;
 * ulimit -n) or memory (ENOMEM while the process had less than 256 MiB left under its
 * tightest limit, base/host_mem.h: the RAM, ulimit -v, ulimit -d; FFmpeg also returns
 * ENOMEM for the sizes a damaged header asks for, which meet it with more left). That is
 * no property of the video, so once it happened no reader records a video as bad
 * (vt_dataset_mark_bad), and the commands stop instead of going on without the videos it
 * hit (scan listed them as unreadable, train left them out of every epoch and validated
 * on the rest, exit 0). Process-wide, set from any thread by the reader's error path: 1
 * with the sentence to print in msg (may be NULL: the limit, and what asks for less),
 * else 0. */
int vt_video_system_failed(char *msg, size_t n);

/* A reader failed on a video (it did not open, a clip did not decode, frames were lost):
 * with less than 256 MiB left to the process the failure is taken for the system's and
 * noted for vt_video_system_failed, whatever its code, since FFmpeg's decoders report an
 * allocation they were refused as a damaged stream (H.264 under a tight ulimit -v: "no
 * frame!", "Error splitting the input into NAL units"; the video was marked bad). 1 when
 * a failure of the system is noted (now or before), else 0. Called before a video is
 * recorded as bad or damaged; `what` names it and the failure. */
int vt_video_failed_short(const char *what);

/* Route FFmpeg's own log into vidtrain's capture (errors kept for reasons, nothing
 * printed unless VT_FFMPEG_LOG=1). Idempotent; vt_video_open and the synth encoder call
 * it, other FFmpeg users may too. */
void vt_ffmpeg_log_init(void);

/* Limits for vt_video_open: larger frames are refused as data errors, because one
 * 40000x40000 frame would need gigabytes and is almost always a corrupt header; smaller
 * ones too (vt_stream_open as well), because a 1x1 "video" (a placeholder, a bitmap
 * clip) holds no picture: scaled up to the clip it would train and score as a flat
 * colour, without a word. */
#define VT_VIDEO_MAX_SIDE 16384
#define VT_VIDEO_MAX_PIXELS (64ll * 1024 * 1024)
#define VT_VIDEO_MIN_SIDE 8

/* ---- Streams (stream.c) ----
 *
 * A video read once, front to back, without an index or a seek — a file, any
 * URL FFmpeg opens, or "-" (standard input) — handing out each frame scaled to RGB at a
 * short side (the very bytes vt_video_read_clip gives for that frame: same scaler, same
 * rotation) with its time from the first frame.
 *
 * For work that must never hold a whole video (predict --timeline over an hour of
 * footage) and for live sources (rtsp://, tcp://, pipes, V4L2 cameras): nothing here
 * needs the duration, the frame count or a seekable input, and memory is one decoder plus
 * one RGB frame. Data errors return a negative code with the reason; it never prints.
 * Reconnecting is the caller's (app/stream/timeline_source.c): a stream here is one connection.
 */

typedef struct vt_stream vt_stream;

/* What kind of source a url names: a regular file (or a path that is none of the others),
 * standard input or a named pipe, a network URL (a "scheme://" other than file:), or a
 * device (/dev/video*). Only a file has an end the reader can wait for at its own pace. */
typedef enum vt_source_kind {
    VT_SOURCE_FILE,
    VT_SOURCE_PIPE,
    VT_SOURCE_NETWORK,
    VT_SOURCE_DEVICE
} vt_source_kind;
vt_source_kind vt_stream_source_kind(const char *url);
/* 1 when this build can open cameras and other devices (FFmpeg's libavdevice linked). */
int vt_stream_have_devices(void);

typedef struct vt_stream_opts {
    int threads;            /* decoder threads (0: FFmpeg's choice) */
    const char *format;     /* FFmpeg input format (NULL: guessed; "v4l2" for /dev/video*) */
    double timeout;         /* seconds the open (with its probe) or vt_stream_next may wait
                             * for a decoded frame (0: no limit). Bytes that bring no frame
                             * do not count as progress: a trickle stalls too */
    int live;               /* decode for latency: slice threads only (frame threads hold
                             * threads - 1 frames back); pixels are the same */
    int (*interrupt)(void *ctx); /* non-zero: give up a blocking open or read now */
    void *interrupt_ctx;
} vt_stream_opts;

/* vt_stream_open with options. A timeout or an interrupt makes the open or vt_stream_next
 * fail (vt_stream_stopped says which); so does any read error of a network or device
 * source (a file's truncated tail is its end, as before). The timeout holds: the open
 * plus the first vt_stream_next, and each later vt_stream_next, end within timeout (plus
 * the protocol's polling interval, 0.1 s for tcp) when no frame decodes, whatever bytes
 * come. */
int vt_stream_open_opts(vt_stream **out, const char *url, const vt_stream_opts *o, char *err,
                        size_t errlen);
/* Why the last failure happened: 1 timeout, 2 interrupt, 0 another error. */
int vt_stream_stopped(const vt_stream *s);
/* The wall time (vt_now) at which the packet of the frame vt_stream_next last handed out
 * was read: when that frame arrived (0 when not known). */
double vt_stream_arrival(const vt_stream *s);

/* The deadline vt_stream_open gives a network source or a device (predict --timeline's
 * default --timeout): seconds without a decoded frame. */
#define VT_STREAM_TIMEOUT 10.0

/* Opens url ("-": standard input) and its best video stream. threads: decoder threads
 * (0: FFmpeg's choice; decoding is bit-exact whatever the count). The info's nframes is 0
 * and its duration the container's guess (0 when unknown: a pipe, a live source). A
 * network source or a device gets the timeout VT_STREAM_TIMEOUT; a file or a pipe none.
 * 0, or a negative code with err set. */
int vt_stream_open(vt_stream **out, const char *url, int threads, char *err, size_t errlen);
void vt_stream_close(vt_stream **s);
const vt_video_info *vt_stream_info(const vt_stream *s);

/* The next frame in presentation order, scaled to short_side (vt_video_info_scaled_size of
 * the info; the same size for every frame of the stream): *rgb (h, w, 3), valid until the
 * next call; *t its time in seconds from the first frame's; *dur its duration in seconds
 * (from the stream's timing; 0 when unknown). Returns 1 for a frame, 0 at the end, or a
 * negative code with err set (a packet the decoder rejects is skipped and counted, not an
 * error). */
int vt_stream_next(vt_stream *s, int short_side, const uint8_t **rgb, int *w, int *h, double *t,
                   double *dur, char *err, size_t errlen);
/* Packets the decoder rejected so far, and pictures it repaired or flagged (as
 * vt_video_stats.decode_errors counts them). */
int64_t vt_stream_decode_errors(const vt_stream *s);
/* The time of the last packet it rejected (a lost frame's time, as its packet says) or of
 * the frame handed out when a repaired picture was counted, on vt_stream_next's clock;
 * NAN when none, or when it came before the first frame or had no timestamp. */
double vt_stream_error_time(const vt_stream *s);

#endif
