/*
 * timeline_source.c: the frames of `predict --timeline`, across reconnects
 * (timeline_source.h). One connection at a time; a break of a network source closes it,
 * waits 1, 2, 4, 8... s (at most 15) and opens the URL again, up to cfg.reconnect tries
 * in a row (a frame read resets the count), saying so on stderr each time.
 *
 * It must never wait in a way Ctrl-C cannot cut short: the pauses poll the signal flag
 * and the stream's interrupt callback polls it too.
 */
#include "app/stream/timeline_source.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "app/signals.h"
#include "base/common.h"

struct vt_tl_source {
    char *url;
    vt_tl_source_cfg cfg;
    vt_source_kind kind;
    vt_stream *st;
    vt_video_info info;     /* the first connection's */
    int have_info;
    double offset;          /* added to this connection's times */
    double last_t, last_end, last_arrived; /* the last frame handed out */
    int any, fresh;         /* a frame was handed out; the connection is new */
    int tries;              /* failed tries in a row */
    int reconnects;
    int conns, gpu_conns;   /* connections opened; those decoded on the GPU */
    double pace0, behind;   /* least arrival - t so far; the last frame's excess over it */
    int64_t decode_errors;  /* of the connections closed */
};

static int on_interrupt(void *ctx) {
    (void)ctx;
    return vt_signal_pending() != 0;
}

/* Sleeps `seconds`, in steps short enough for Ctrl-C. 0, or -1 when it came. */
static int pause_for(double seconds) {
    for (double end = vt_now() + seconds; vt_now() < end;) {
        if (vt_signal_pending())
            return -1;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return vt_signal_pending() ? -1 : 0;
}

static int connect_once(vt_tl_source *s, char *err, size_t errlen) {
    vt_stream_opts o;
    memset(&o, 0, sizeof o);
    o.threads = s->cfg.threads;
    o.format = s->cfg.format;
    /* a pipe waits: it cannot be reopened, and its writer may pause (Ctrl-C in a shell
     * ends the writer too) */
    o.timeout = s->kind == VT_SOURCE_NETWORK || s->kind == VT_SOURCE_DEVICE ? s->cfg.timeout : 0;
    o.live = s->kind != VT_SOURCE_FILE;
    o.interrupt = on_interrupt;
    if (vt_stream_open_opts(&s->st, s->url, &o, err, errlen) != 0)
        return -1;
    const vt_video_info *in = vt_stream_info(s->st);
    if (s->have_info && (in->disp_width != s->info.disp_width ||
                         in->disp_height != s->info.disp_height)) {
        vt_set_err(err, errlen, "the stream came back at %dx%d, it was %dx%d: a timeline "
                   "keeps one frame size (start it again)", in->disp_width, in->disp_height,
                   s->info.disp_width, s->info.disp_height);
        vt_stream_close(&s->st);
        s->tries = s->cfg.reconnect; /* no use trying again */
        return -1;
    }
    if (!s->have_info)
        s->info = *in;
    s->have_info = 1;
    s->conns++;
    s->gpu_conns += !strcmp(in->decoder, "nvdec");
    s->fresh = 1;
    return 0;
}

/* Another try after `why` broke the connection (or kept it from opening), if one is left.
 * 0 with a new connection, or -1 with err. */
static int reconnect(vt_tl_source *s, char *err, size_t errlen) {
    while (s->kind == VT_SOURCE_NETWORK && s->tries < s->cfg.reconnect && !vt_signal_pending()) {
        double wait = VT_MIN(15.0, (double)(1 << VT_MIN(s->tries, 4)));
        s->tries++;
        fprintf(stderr, "vidtrain predict: %s: %s; trying again in %g s (%d of %d)\n", s->url,
                err, wait, s->tries, s->cfg.reconnect);
        if (pause_for(wait) != 0)
            break;
        if (connect_once(s, err, errlen) == 0) {
            if (s->any) {
                s->reconnects++;
                fprintf(stderr, "vidtrain predict: %s: connected again\n", s->url);
            }
            return 0;
        }
    }
    if (vt_signal_pending())
        vt_set_err(err, errlen, "interrupted");
    else if (s->kind == VT_SOURCE_NETWORK && s->cfg.reconnect > 0)
        vt_set_err(err + strlen(err), errlen - strlen(err), " (gave up after %d tr%s)",
                   s->tries, s->tries == 1 ? "y" : "ies");
    return -1;
}

int vt_tl_source_open(vt_tl_source **out, const char *url, const vt_tl_source_cfg *cfg,
                      char *err, size_t errlen) {
    vt_tl_source *s = vt_calloc(1, sizeof *s);
    s->url = vt_strdup(url);
    s->cfg = *cfg;
    s->kind = vt_stream_source_kind(url);
    if (connect_once(s, err, errlen) != 0 && reconnect(s, err, errlen) != 0) {
        vt_tl_source_close(&s);
        return -1;
    }
    *out = s;
    return 0;
}

void vt_tl_source_close(vt_tl_source **ps) {
    if (!ps || !*ps)
        return;
    vt_stream_close(&(*ps)->st);
    free((*ps)->url);
    free(*ps);
    *ps = NULL;
}

const vt_video_info *vt_tl_source_info(const vt_tl_source *s) { return &s->info; }
int vt_tl_source_live(const vt_tl_source *s) { return s->kind != VT_SOURCE_FILE; }
int vt_tl_source_reconnects(const vt_tl_source *s) { return s->reconnects; }
int vt_tl_source_gpu_connections(const vt_tl_source *s, int *of) {
    *of = s->conns;
    return s->gpu_conns;
}
double vt_tl_source_behind(const vt_tl_source *s) { return s->behind; }
int vt_tl_source_realtime(const vt_tl_source *s) {
    return s->kind == VT_SOURCE_DEVICE || (s->kind == VT_SOURCE_NETWORK && !(s->info.duration > 0));
}
int64_t vt_tl_source_decode_errors(const vt_tl_source *s) {
    return s->decode_errors + (s->st ? vt_stream_decode_errors(s->st) : 0);
}
double vt_tl_source_error_time(const vt_tl_source *s) {
    return s->st ? vt_stream_error_time(s->st) + s->offset : NAN;
}

/* The first frame of a new connection starts where the last one ended, plus the wall
 * time between their arrivals beyond one frame (the time the break lasted). */
static void continue_times(vt_tl_source *s, double t, double arrived) {
    s->fresh = 0;
    if (!s->any)
        return;
    double gap = arrived - s->last_arrived - (s->last_end - s->last_t);
    s->offset = s->last_end + (gap > 0 ? gap : 0) - t;
}

int vt_tl_source_next(vt_tl_source *s, int short_side, const uint8_t **rgb, int *w, int *h,
                      double *t, double *dur, double *arrived, char *err, size_t errlen) {
    for (;;) {
        if (vt_signal_pending()) {
            vt_set_err(err, errlen, "interrupted");
            return -1;
        }
        int got = vt_stream_next(s->st, short_side, rgb, w, h, t, dur, err, errlen);
        if (got == 0)
            return 0;
        if (got > 0) {
            *arrived = vt_stream_arrival(s->st);
            int fresh = s->fresh; /* a new connection: a new pace too */
            if (fresh)
                continue_times(s, *t, *arrived);
            *t += s->offset;
            s->last_t = *t;
            s->last_end = *t + *dur;
            s->last_arrived = *arrived;
            double d = *arrived - *t;
            if (!s->any || fresh || d < s->pace0)
                s->pace0 = d;
            s->behind = d - s->pace0;
            s->any = 1;
            s->tries = 0;
            return 1;
        }
        s->decode_errors += vt_stream_decode_errors(s->st);
        vt_stream_close(&s->st);
        if (reconnect(s, err, errlen) != 0)
            return -1;
    }
}
