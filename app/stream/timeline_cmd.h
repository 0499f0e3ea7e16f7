/*
 * timeline_cmd.h: `vidtrain predict RUN VIDEO... --timeline` — each video streamed once,
 * front to back, through the window engine (app/stream/timeline.h), each window's top-k printed
 * (text, or one JSON object a line) as soon as the model has run it.
 */
#ifndef VT_TIMELINE_CMD_H
#define VT_TIMELINE_CMD_H

#include "app/opts.h"
#include "app/run/run_model.h"

typedef struct vt_timeline_args {
    double window, hop;     /* --window, --hop seconds (default 2, 1) */
    int batch;              /* --batch: clips a model call (default 8) */
    int threads;            /* --decode-threads: FFmpeg decoder threads (default 0: its choice) */
    int top, json;
    int flush;              /* --flush: each window through the model and out as soon as it
                             * is complete (always so for a live source) */
    int stats;              /* --stats: each window's latency (JSON "latency"), median and
                             * max at the end */
    double timeout;         /* --timeout: seconds without data before a live source counts
                             * as broken (default 10) */
    int reconnect;          /* --reconnect N: tries after a network source breaks (default 5) */
    const char *format;     /* --input-format: FFmpeg's input format (v4l2, ...) */
    double max_behind;      /* --max-behind: seconds behind real time before windows are
                             * skipped (0: never; -1, the default: 10 for a real-time
                             * source, see vt_tl_source_realtime, else never) */
} vt_timeline_args;

void vt_timeline_args_default(vt_timeline_args *a);
/* Takes argv[*i] when it is a timeline option: 1; 0 for another argument; -1 after
 * printing a bad value (a usage error). */
int vt_timeline_args_take(vt_timeline_args *a, int argc, char **argv, int *i);
/* The options given (g) that none of the videos would read: --timeout without a network
 * URL or a camera (a file ends, a pipe waits for its writer), --reconnect without a
 * network URL (a file, pipe or camera is never reopened). 0, or 2 after saying which
 * and why. */
int vt_timeline_args_check(const vt_timeline_args *a, const vt_opts_given *g,
                           const char *const *videos, int nvid);

/* Runs the timeline of each video ("-": standard input, or a URL, a camera) with RUN's
 * model; K clips a window (0: enough to cover a window at the video's frame rate, at most
 * 16). Exit code: 0 when at least one video was read through, 1 otherwise (a live source
 * that broke for good included) or when RUN cannot be loaded, 2 for bad device arguments,
 * 128 + the signal after Ctrl-C (130) or SIGTERM (143), the completed windows printed. */
int vt_predict_timeline(const char *run, const char *const *videos, int nvid,
                        const vt_model_args *ma, int K, const vt_timeline_args *a);

#endif
