/*
 * stream.h: a video read once, front to back, without an index or a seek — a file, any
 * URL FFmpeg opens, or "-" (standard input) — handing out each frame scaled to RGB at a
 * short side (the very bytes vt_video_read_clip gives for that frame: same scaler, same
 * rotation) with its time from the first frame.
 *
 * For work that must never hold a whole video (predict --timeline over an hour of
 * footage) and for live sources (rtsp://, tcp://, pipes, V4L2 cameras): nothing here
 * needs the duration, the frame count or a seekable input, and memory is one decoder plus
 * one RGB frame. Data errors return a negative code with the reason; it never prints.
 * Reconnecting is the caller's (app/timeline_source.c): a stream here is one connection.
 */
#ifndef VT_STREAM_H
#define VT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/video.h"

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
/* Packets the decoder rejected so far. */
int64_t vt_stream_decode_errors(const vt_stream *s);

#endif
