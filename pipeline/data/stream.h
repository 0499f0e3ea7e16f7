/*
 * stream.h: a video read once, front to back, without an index or a seek — a file, any
 * URL FFmpeg opens, or "-" (standard input) — handing out each frame scaled to RGB at a
 * short side (the very bytes vt_video_read_clip gives for that frame: same scaler, same
 * rotation) with its time from the first frame.
 *
 * For work that must never hold a whole video (predict --timeline over an hour of
 * footage) and for live sources (issue 28: rtsp://, pipes, cameras): nothing here needs
 * the duration, the frame count or a seekable input, and memory is one decoder plus one
 * RGB frame. Data errors return a negative code with the reason; it never prints.
 */
#ifndef VT_STREAM_H
#define VT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/video.h"

typedef struct vt_stream vt_stream;

/* Opens url ("-": standard input) and its best video stream. threads: decoder threads
 * (0: FFmpeg's choice; decoding is bit-exact whatever the count). The info's nframes is 0
 * and its duration the container's guess (0 when unknown: a pipe, a live source). 0, or
 * a negative code with err set. */
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
