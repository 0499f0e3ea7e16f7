/*
 * timeline_cmd.c: `predict --timeline` (timeline_cmd.h) — opens each video as a source
 * (app/stream/timeline_source.h: a stream with no index and no seek, so a pipe, a URL or a
 * camera does too, reconnected when a network source breaks), pushes its frames through
 * the window engine and prints each window it emits.
 *
 * Output goes out window by window and is flushed, so a consumer reads a long video's
 * timeline while it is being made; a live source runs each window through the model as
 * soon as it is complete rather than waiting for a batch to fill. It must never hold a
 * video: the engine bounds the frames, and this file holds one decoder.
 */
#include "app/stream/timeline_cmd.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/eval/evalproto.h"
#include "app/opts.h"
#include "app/signals.h"
#include "app/stream/timeline.h"
#include "app/stream/timeline_lat.h"
#include "app/stream/timeline_source.h"
#include "base/common.h"
#include "base/json_str.h"

void vt_timeline_args_default(vt_timeline_args *a) {
    memset(a, 0, sizeof *a);
    a->window = 2;
    a->hop = 1;
    a->batch = 8;
    a->top = 5;
    a->timeout = 10;
    a->reconnect = 5;
    a->max_behind = -1;
}

int vt_timeline_args_take(vt_timeline_args *a, int argc, char **argv, int *i) {
    const char *opt = argv[*i], *v = NULL;
    int r, bad;
    if ((r = vt_opt_value(argc, argv, i, "--window", &v)) != 0)
        bad = r < 0 || (a->window = vt_parse_duration(v)) <= 0;
    else if ((r = vt_opt_value(argc, argv, i, "--hop", &v)) != 0)
        bad = r < 0 || (a->hop = vt_parse_duration(v)) <= 0;
    else if ((r = vt_opt_value(argc, argv, i, "--batch", &v)) != 0)
        bad = r < 0 || vt_parse_int(v, 1, 4096, &a->batch);
    else if ((r = vt_opt_value(argc, argv, i, "--decode-threads", &v)) != 0)
        bad = r < 0 || vt_parse_int(v, 0, 64, &a->threads);
    else if ((r = vt_opt_value(argc, argv, i, "--timeout", &v)) != 0)
        bad = r < 0 || (a->timeout = vt_parse_duration(v)) <= 0;
    else if ((r = vt_opt_value(argc, argv, i, "--reconnect", &v)) != 0)
        bad = r < 0 || vt_parse_int(v, 0, 1000, &a->reconnect);
    else if ((r = vt_opt_value(argc, argv, i, "--max-behind", &v)) != 0)
        bad = r < 0 || ((a->max_behind = strcmp(v, "0") ? vt_parse_duration(v) : 0) < 0);
    else if ((r = vt_opt_value(argc, argv, i, "--input-format", &v)) != 0)
        bad = r < 0 || !(a->format = v)[0];
    else if (!strcmp(opt, "--flush"))
        bad = 0, a->flush = 1;
    else if (!strcmp(opt, "--stats"))
        bad = 0, a->stats = 1;
    else
        return 0;
    if (bad) { /* what each option takes, not one line for all of them */
        const char *want = !strcmp(opt, "--batch")            ? "a whole number from 1 to 4096"
                           : !strcmp(opt, "--decode-threads") ? "a whole number from 0 to 64"
                           : !strcmp(opt, "--reconnect")      ? "a whole number from 0 to 1000"
                           : !strcmp(opt, "--input-format")   ? "an FFmpeg input format name"
                           : !strcmp(opt, "--max-behind")
                               ? "a duration (2, 2s, 0.5s, 1m) or 0"
                               : "a duration above 0 (2, 2s, 0.5s, 1m)";
        fprintf(stderr, "vidtrain predict: bad value for %s: expected %s\n", opt, want);
        return -1;
    }
    return 1;
}

int vt_timeline_args_check(const vt_timeline_args *a, const vt_opts_given *g,
                           const char *const *videos, int nvid) {
    int net = 0, cam = 0;
    for (int i = 0; i < nvid; i++) {
        vt_source_kind k = vt_stream_source_kind(videos[i]);
        net |= k == VT_SOURCE_NETWORK;
        cam |= k == VT_SOURCE_DEVICE;
    }
    if (vt_opts_given_has(g, "--timeout") && !net && !cam) {
        fprintf(stderr, "vidtrain predict: --timeout %g s: a network stream or a camera that "
                "gives no frame for that long is broken; none of the inputs is one (a file "
                "ends, a pipe waits for its writer): leave it out\n", a->timeout);
        return 2;
    }
    if (vt_opts_given_has(g, "--reconnect") && !net) {
        fprintf(stderr, "vidtrain predict: --reconnect %d: tries after a network stream "
                "(rtsp://, tcp://, http://...) breaks; none of the inputs is one (a file, a "
                "pipe or a camera is never reopened): leave it out\n", a->reconnect);
        return 2;
    }
    return 0;
}

typedef struct tl_out {
    const vt_run_heads *heads;
    const char *path;
    int top, json, stats;
    vt_towers *towers;
    vt_lat lat;             /* --stats */
    double behind;          /* the most a frame came behind the stream's pace */
    int64_t skipped;        /* windows given up to catch up (--max-behind) */
    int out_errno;          /* standard output refused a line: the timeline stops */
    const vt_run_model *m;
} tl_out;

static void run_model(void *ctx, const vt_batch *b, float *probs[VT_MAX_HEADS]) {
    tl_out *o = ctx;
    vt_towers_eval_step(o->towers, b, probs, NULL);
}

/* "  12.00-  14.00 s  label 0.8123  label 0.1002 ..." or one JSON object, a line. */
static void emit_window(void *ctx, const vt_timeline_window *w) {
    tl_out *o = ctx;
    cJSON *e = NULL, *hs = NULL;
    /* up to the line going out: what printing it adds is microseconds */
    double lat = w->arrived > 0 ? vt_now() - w->arrived : -1;
    if (o->stats && lat >= 0)
        vt_lat_add(&o->lat, lat);
    if (o->json) {
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", o->path);
        cJSON_AddNumberToObject(e, "window", (double)w->index);
        cJSON_AddNumberToObject(e, "start", w->start);
        cJSON_AddNumberToObject(e, "end", w->end);
        cJSON_AddNumberToObject(e, "frames", (double)w->nframes);
        cJSON_AddBoolToObject(e, "partial", w->partial);
        cJSON_AddNumberToObject(e, "decode_errors", (double)w->decode_errors);
        if (o->stats && lat >= 0)
            cJSON_AddNumberToObject(e, "latency", round(lat * 1e6) / 1e6);
        hs = cJSON_AddArrayToObject(e, "heads");
    } else {
        printf("%9.2f %9.2f s%s", w->start, w->end, w->partial ? "*" : " ");
    }
    for (int h = 0; h < o->heads->n; h++) {
        int C = o->heads->cfg[h].classes, k = VT_MIN(o->top, C);
        float *sc = vt_malloc(sizeof(float) * (size_t)C);
        int idx[1000];
        int finite = 1;
        for (int c = 0; c < C; c++) {
            sc[c] = (float)w->probs[h][c];
            finite &= isfinite(w->probs[h][c]) != 0;
        }
        /* A window whose scores are not finite has no answer (never a ranking of NaN):
         * an empty top list, and the reason. */
        if (!finite)
            k = 0;
        vt_topk(idx, sc, C, k);
        /* the top score shared: no single answer (eval counts it a miss), said */
        const int tie = k > 0 && vt_top_tied(sc, C, idx[0]);
        cJSON *top = NULL;
        if (e) {
            cJSON *ho = cJSON_CreateObject();
            cJSON_AddStringToObject(ho, "name", o->heads->cfg[h].name);
            if (!finite)
                cJSON_AddBoolToObject(ho, "nonfinite", 1);
            if (tie)
                cJSON_AddBoolToObject(ho, "tie", 1);
            top = cJSON_AddArrayToObject(ho, "top");
            cJSON_AddItemToArray(hs, ho);
        } else if (o->heads->n > 1) {
            printf(" | %s:", o->heads->cfg[h].name);
        }
        if (!finite && !e)
            printf("  (no answer: non-finite scores)");
        if (tie && !e)
            printf("  (a tie: no single answer)");
        for (int r = 0; r < k; r++) {
            if (top) {
                cJSON *p = cJSON_CreateObject();
                cJSON_AddStringToObject(p, "label", o->heads->classes[h][idx[r]]);
                /* the double mean itself: tests compare it with predict's */
                cJSON_AddNumberToObject(p, "prob", w->probs[h][idx[r]]);
                cJSON_AddItemToArray(top, p);
            } else {
                printf("  %s %.4f", o->heads->classes[h][idx[r]], sc[idx[r]]);
            }
        }
        free(sc);
    }
    if (e) {
        char *s = vt_json_print(e, 0);
        VT_CHECK_MEM(s != NULL, "a JSON text");
        printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(e);
    } else {
        if (w->decode_errors) /* its answer may rest on missing or concealed frames */
            printf("  (damaged: %lld decode error(s))", (long long)w->decode_errors);
        printf("\n");
    }
    /* a window is out as soon as it is known; a line refused (a full disk) stops the
     * timeline: a live stream would otherwise be watched for ever with every line lost */
    if ((fflush(stdout) != 0 || ferror(stdout)) && !o->out_errno)
        o->out_errno = errno ? errno : EIO;
}

/* Bounded latency: a frame that came more than maxb seconds behind the stream's pace
 * (the model slower than the stream) starts a catch-up — frames are read and dropped,
 * which is much quicker than classifying them, until one comes within maxb / 2 — then the
 * windows missed are given up, with a line, and the timeline goes on from that frame.
 * 1 when the frame at t is to be pushed. */
static int keep_up(tl_out *o, vt_timeline *tl, double behind, double maxb, double t,
                   int *catching) {
    o->behind = VT_MAX(o->behind, behind);
    if (maxb > 0 && behind > (*catching ? maxb / 2 : maxb)) {
        if (!*catching)
            fprintf(stderr, "vidtrain predict: %s: %.1f s behind the stream (the model is "
                            "slower than it): catching up\n", o->path, behind);
        *catching = 1;
        return 0;
    }
    if (*catching) {
        int64_t k = vt_timeline_skip(tl, t);
        o->skipped += k;
        fprintf(stderr, "vidtrain predict: %s: caught up at %.2f s, %lld window%s skipped "
                        "(--max-behind %g s)\n", o->path, t, (long long)k, k == 1 ? "" : "s",
                maxb);
        *catching = 0;
    }
    return 1;
}

/* The end-of-run line on stderr (and the latencies with --stats). */
static void report(tl_out *o, vt_timeline *tl, const vt_tl_source *src, double t0) {
    vt_timeline_stats st;
    vt_timeline_get_stats(tl, &st);
    fprintf(stderr, "timeline %s: %lld frames, %lld windows, %lld clips in %.1f s; at most "
                    "%lld frames held (%.1f MiB); %lld packets the decoder rejected",
            o->path, (long long)st.frames, (long long)st.windows, (long long)st.clips,
            vt_now() - t0, (long long)st.peak_frames,
            (double)(st.peak_frames * st.frame_bytes) / (1 << 20),
            (long long)vt_tl_source_decode_errors(src));
    if (o->skipped)
        fprintf(stderr, "; %lld windows skipped to keep up", (long long)o->skipped);
    if (st.backwards)
        fprintf(stderr, "; %lld frames left out, their times before an earlier frame's",
                (long long)st.backwards);
    if (st.restarts)
        fprintf(stderr, "; the stream's times restarted %lld time%s, spliced on",
                (long long)st.restarts, st.restarts == 1 ? "" : "s");
    int conns, gpu = vt_tl_source_gpu_connections(src, &conns);
    if (gpu && gpu == conns)
        fprintf(stderr, "; decoded on the GPU (NVDEC)");
    else if (gpu)
        fprintf(stderr, "; decoded on the GPU (NVDEC) in %d of %d connections, the rest on "
                        "the CPU", gpu, conns);
    if (vt_tl_source_reconnects(src))
        fprintf(stderr, "; reconnected %d time%s", vt_tl_source_reconnects(src),
                vt_tl_source_reconnects(src) > 1 ? "s" : "");
    fprintf(stderr, "\n");
    if (o->stats)
        fprintf(stderr, "latency %s: from a window's last frame arriving to its line: median "
                        "%.3f s, max %.3f s, mean %.3f s over %lld windows; frames read up to "
                        "%.3f s behind the stream's pace\n", o->path, vt_lat_median(&o->lat),
                o->lat.max, o->lat.n ? o->lat.sum / o->lat.n : 0.0, (long long)o->lat.n,
                o->behind);
}

/* One video's timeline. 0, 1 when a live source broke or Ctrl-C stopped it after it was
 * opened (the windows before are out), or -1 with err (a video that cannot be read). */
static int timeline_one(tl_out *o, const vt_timeline_cfg *base, const vt_timeline_args *a,
                        int K, char *err, size_t errlen) {
    vt_tl_source *src = NULL;
    vt_tl_source_cfg sc = {.threads = a->threads, .format = a->format, .timeout = a->timeout,
                           .reconnect = a->reconnect};
    if (vt_tl_source_open(&src, o->path, &sc, err, errlen) != 0)
        return -1;
    const vt_video_info *info = vt_tl_source_info(src);
    if (vt_run_fps_outside(o->m, info->fps)) /* said at once: a live stream may run for hours */
        vt_run_fps_warn("predict", "video", o->m, 1, 1, o->path, info->fps);
    vt_timeline_cfg c = *base;
    vt_clip_cfg_at_fps(&c.clip, info->fps); /* --clip-fps: the stride at this rate */
    c.K = vt_timeline_clips_for(K, a->window, info->fps, &c.clip);
    c.eager = a->flush || vt_tl_source_live(src);
    int w, h;
    vt_video_info_scaled_size(info, c.clip.short_side, &w, &h);
    vt_timeline *tl = vt_timeline_new(&c, w, h, run_model, emit_window, o, err, errlen);
    if (!tl) {
        vt_tl_source_close(&src);
        return -1;
    }
    if (!o->json)
        printf("%s  (windows of %g s every %g s, %d clip%s x %d crop%s each; * = partial)\n",
               o->path, a->window, a->hop, c.K, c.K > 1 ? "s" : "", c.crops,
               c.crops > 1 ? "s" : "");
    if (o->stats)
        vt_lat_init(&o->lat);
    double t0 = vt_now();
    double maxb = a->max_behind >= 0 ? a->max_behind : vt_tl_source_realtime(src) ? 10 : 0;
    int got, behind = 0;
    int64_t errors = 0; /* the source's decode errors when the last frame was pushed */
    o->behind = 0;
    o->skipped = 0;
    for (;;) {
        const uint8_t *rgb;
        int fw, fh;
        double t, dur, at;
        got = vt_tl_source_next(src, c.clip.short_side, &rgb, &fw, &fh, &t, &dur, &at, err,
                                errlen);
        if (got <= 0)
            break;
        int64_t e = vt_tl_source_decode_errors(src);
        vt_timeline_note_errors(tl, e - errors, vt_tl_source_error_time(src));
        errors = e;
        if (o->out_errno)
            break;
        if (keep_up(o, tl, vt_tl_source_behind(src), maxb, t, &behind))
            vt_timeline_push_at(tl, rgb, t, dur, at);
    }
    if (o->out_errno) {
        fprintf(stderr, "vidtrain predict: %s: cannot write to standard output: %s (the "
                        "timeline stops here)\n", o->path, strerror(o->out_errno));
    } else if (got < 0 && vt_signal_pending()) {
        vt_timeline_drain(tl); /* what is complete goes out; no partial window */
        fprintf(stderr, "vidtrain predict: %s: stopped by a signal\n", o->path);
    } else if (behind) {
        /* ended during a catch-up: the frames since were dropped, so the open windows
         * would look complete up to the last frame kept; they are given up */
        vt_timeline_drain(tl);
        fprintf(stderr, "vidtrain predict: %s: the stream ended during a catch-up: the windows "
                        "still open are given up\n", o->path);
    } else {
        if (got < 0) /* what was read stands: the windows so far are out, and the tail */
            fprintf(stderr, "vidtrain predict: %s: %s (the timeline stops here)\n", o->path,
                    err);
        /* errors counted as the decoder drained (after the last frame) go to the tail */
        vt_timeline_note_errors(tl, vt_tl_source_decode_errors(src) - errors,
                                vt_tl_source_error_time(src));
        vt_timeline_finish(tl);
    }
    report(o, tl, src, t0);
    if (o->stats)
        vt_lat_free(&o->lat);
    vt_timeline_free(&tl);
    int broke = o->out_errno || (got < 0 && (vt_signal_pending() || vt_tl_source_live(src)));
    vt_tl_source_close(&src);
    return broke;
}

int vt_predict_timeline(const char *run, const char *const *videos, int nvid,
                        const vt_model_args *ma, int K, const vt_timeline_args *a) {
    char err[1024];
    vt_run_model m;
    int rc = 1, ok = 0;
    if (vt_run_model_open(&m, run, ma->ckpt, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain predict: %s\n", err);
        goto end;
    }
    vt_timeline_cfg c;
    memset(&c, 0, sizeof c);
    vt_run_model_clip(&c.clip, &m);
    c.window = a->window;
    c.hop = a->hop;
    c.crops = ma->crops;
    c.batch = a->batch;
    c.nheads = m.heads.n;
    for (int h = 0; h < m.heads.n; h++)
        c.classes[h] = m.heads.cfg[h].classes;
    m.precision = ma->precision;
    int lrc = vt_run_model_load(&m, &ma->devices, ma->tower_split, a->batch, err, sizeof err);
    if (lrc != 0) {
        fprintf(stderr, "vidtrain predict: %s\n", err);
        rc = lrc == -2 ? 2 : 1;
        goto end;
    }
    tl_out o = {.heads = &m.heads, .top = a->top, .json = a->json, .stats = a->stats,
                .towers = m.towers, .m = &m};
    /* Ctrl-C ends a live stream: the windows complete by then are printed, then the run
     * ends (a second Ctrl-C at once) */
    vt_signals_install_msg("\nvidtrain: stopping: the windows complete so far go out "
                           "(again to quit now)\n");
    int broke = 0;
    for (int i = 0; i < nvid && !vt_signal_pending() && !o.out_errno; i++) {
        o.path = videos[i];
        int r = timeline_one(&o, &c, a, K, err, sizeof err);
        if (r > 0) {
            broke++;
            continue;
        }
        if (r != 0) {
            fprintf(stderr, "vidtrain predict: %s: %s (skipped)\n", videos[i], err);
            if (a->json) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "path", videos[i]);
                cJSON_AddStringToObject(e, "error", err);
                char *s = vt_json_print(e, 0);
                printf("%s\n", s);
                cJSON_free(s);
                cJSON_Delete(e);
            }
            continue;
        }
        ok++;
    }
    if (ok == 0 && !broke && !vt_signal_pending())
        fprintf(stderr, "vidtrain predict: no video could be read\n");
    rc = vt_signal_pending() ? 128 + vt_signal_pending() : ok > 0 && !broke ? 0 : 1;
    vt_signals_reset();
end:
    vt_run_model_free(&m);
    return rc;
}
