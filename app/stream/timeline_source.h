/*
 * timeline_source.h: where `predict --timeline` gets its frames — a stream
 * (pipeline/data/video/video.h) that, for a network source, outlives its connections: a read
 * that fails or stalls past the timeout closes it and opens it again, a few times with a
 * growing pause and a line on stderr each, and the times go on from where they were (plus
 * the wall time the break lasted, so a window stays a stretch of real time). Ctrl-C (the
 * flag of app/signals.h) stops any wait at once.
 *
 * It must never hand out a frame of another size than the first connection's (the window
 * engine holds frames of one size): a stream that comes back resized ends here.
 */
#ifndef VT_TIMELINE_SOURCE_H
#define VT_TIMELINE_SOURCE_H

#include <stdint.h>

#include "pipeline/data/video/video.h"

typedef struct vt_tl_source_cfg {
    int threads;            /* decoder threads */
    const char *format;     /* --input-format (NULL: guessed; v4l2 for /dev/video*) */
    double timeout;         /* seconds waiting without data before a network source or a
                             * camera counts as broken (a pipe waits) */
    int reconnect;          /* tries after a break (network sources only) */
} vt_tl_source_cfg;

typedef struct vt_tl_source vt_tl_source;

/* Opens url (retrying a network source up to cfg->reconnect times). 0, or -1 with err. */
int vt_tl_source_open(vt_tl_source **out, const char *url, const vt_tl_source_cfg *cfg,
                      char *err, size_t errlen);
void vt_tl_source_close(vt_tl_source **s);
const vt_video_info *vt_tl_source_info(const vt_tl_source *s);
/* 1 for a live source (anything but a regular file): windows go out one by one. */
int vt_tl_source_live(const vt_tl_source *s);
/* 1 for a source that plays at its own pace and does not wait for the reader: a network
 * source without a duration (a file served over HTTP has one) or a device. */
int vt_tl_source_realtime(const vt_tl_source *s);
/* How far the last frame came behind the stream's real-time pace, in seconds: its arrival
 * minus its time, less the least that difference has been (the pace of the frames that
 * came soonest). Grows when the reader is slower than the stream. */
double vt_tl_source_behind(const vt_tl_source *s);

/* The next frame as vt_stream_next gives it, t continued across reconnects, *arrived the
 * wall time it arrived. 1, 0 at the end of the stream, -1 with err when it broke for good
 * or Ctrl-C stopped it (vt_signal_pending() says which). */
int vt_tl_source_next(vt_tl_source *s, int short_side, const uint8_t **rgb, int *w, int *h,
                      double *t, double *dur, double *arrived, char *err, size_t errlen);

/* Packets the decoders rejected, and the reconnects that worked. */
int64_t vt_tl_source_decode_errors(const vt_tl_source *s);
/* The time of the last packet the decoder rejected, on the frames' clock (vt_stream_error_time
 * of this connection, moved as its frames are); NAN when none or not placeable. */
double vt_tl_source_error_time(const vt_tl_source *s);
int vt_tl_source_reconnects(const vt_tl_source *s);
/* The connections decoded on the GPU (NVDEC), of *of opened: a reconnect opens the
 * decoder again, and may land on the CPU when the GPU fails it. */
int vt_tl_source_gpu_connections(const vt_tl_source *s, int *of);

#endif
