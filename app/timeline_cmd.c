/*
 * timeline_cmd.c: `predict --timeline` (timeline_cmd.h) — opens each video as a stream
 * (pipeline/data/stream.h: no index, no seek, so a pipe or later a live source does
 * too), pushes its frames through the window engine and prints each window it emits.
 *
 * Output goes out window by window and is flushed, so a consumer reads a long video's
 * timeline while it is being made. It must never hold a video: the engine bounds the
 * frames, and this file holds one decoder.
 */
#include "app/timeline_cmd.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/evalproto.h"
#include "app/opts.h"
#include "app/timeline.h"
#include "models/common.h"
#include "pipeline/data/stream.h"

void vt_timeline_args_default(vt_timeline_args *a) {
    memset(a, 0, sizeof *a);
    a->window = 2;
    a->hop = 1;
    a->batch = 8;
    a->top = 5;
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
    else
        return 0;
    if (bad) {
        fprintf(stderr, "vidtrain predict: bad value for %s (seconds: 2, 2s, 0.5s, 1m)\n", opt);
        return -1;
    }
    return 1;
}

typedef struct tl_out {
    const vt_run_heads *heads;
    const char *path;
    int top, json;
    vt_towers *towers;
} tl_out;

static void run_model(void *ctx, const vt_batch *b, float *probs[VT_MAX_HEADS]) {
    tl_out *o = ctx;
    vt_towers_eval_step(o->towers, b, probs, NULL);
}

/* "  12.00-  14.00 s  label 0.8123  label 0.1002 ..." or one JSON object, a line. */
static void emit_window(void *ctx, const vt_timeline_window *w) {
    tl_out *o = ctx;
    cJSON *e = NULL, *hs = NULL;
    if (o->json) {
        e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", o->path);
        cJSON_AddNumberToObject(e, "window", (double)w->index);
        cJSON_AddNumberToObject(e, "start", w->start);
        cJSON_AddNumberToObject(e, "end", w->end);
        cJSON_AddNumberToObject(e, "frames", (double)w->nframes);
        cJSON_AddBoolToObject(e, "partial", w->partial);
        hs = cJSON_AddArrayToObject(e, "heads");
    } else {
        printf("%9.2f %9.2f s%s", w->start, w->end, w->partial ? "*" : " ");
    }
    for (int h = 0; h < o->heads->n; h++) {
        int C = o->heads->cfg[h].classes, k = VT_MIN(o->top, C);
        float *sc = vt_malloc(sizeof(float) * (size_t)C);
        int idx[1000];
        for (int c = 0; c < C; c++)
            sc[c] = (float)w->probs[h][c];
        vt_topk(idx, sc, C, k);
        cJSON *top = NULL;
        if (e) {
            cJSON *ho = cJSON_CreateObject();
            cJSON_AddStringToObject(ho, "name", o->heads->cfg[h].name);
            top = cJSON_AddArrayToObject(ho, "top");
            cJSON_AddItemToArray(hs, ho);
        } else if (o->heads->n > 1) {
            printf(" | %s:", o->heads->cfg[h].name);
        }
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
        char *s = cJSON_PrintUnformatted(e);
        VT_CHECK(s != NULL, "cJSON_PrintUnformatted (out of memory)");
        printf("%s\n", s);
        cJSON_free(s);
        cJSON_Delete(e);
    } else {
        printf("\n");
    }
    fflush(stdout); /* a window is out as soon as it is known */
}

/* K for a video: the one asked for, else enough clips to cover a window's frames at the
 * nominal rate (30 fps when the stream does not say), 1 to 16. */
static int clips_for(int K, double window, double fps, const vt_clip_cfg *clip) {
    if (K > 0)
        return K;
    double frames = window * (fps > 0 ? fps : 30.0);
    return (int)VT_MAX(1.0, VT_MIN(16.0, ceil(frames / vt_clip_span(clip))));
}

/* One video's timeline. 0, or -1 with err (a video that cannot be read at all). */
static int timeline_one(tl_out *o, const vt_timeline_cfg *base, const vt_timeline_args *a,
                        int K, char *err, size_t errlen) {
    vt_stream *s = NULL;
    if (vt_stream_open(&s, o->path, a->threads, err, errlen) != 0)
        return -1;
    const vt_video_info *info = vt_stream_info(s);
    vt_timeline_cfg c = *base;
    c.K = clips_for(K, a->window, info->fps, &c.clip);
    int w, h;
    vt_video_info_scaled_size(info, c.clip.short_side, &w, &h);
    vt_timeline *tl = vt_timeline_new(&c, w, h, run_model, emit_window, o, err, errlen);
    int rc = tl ? 0 : -1;
    if (!o->json && tl)
        printf("%s  (windows of %g s every %g s, %d clip%s x %d crop%s each; * = partial)\n",
               o->path, a->window, a->hop, c.K, c.K > 1 ? "s" : "", c.crops,
               c.crops > 1 ? "s" : "");
    double t0 = vt_now();
    for (;;) {
        const uint8_t *rgb;
        int fw, fh;
        double t, dur;
        int got = tl ? vt_stream_next(s, c.clip.short_side, &rgb, &fw, &fh, &t, &dur, err, errlen) : 0;
        if (got <= 0) {
            if (got < 0) /* what was read stands: the windows so far are out */
                fprintf(stderr, "vidtrain predict: %s: %s (the timeline stops here)\n", o->path,
                        err);
            break;
        }
        vt_timeline_push(tl, rgb, t, dur);
    }
    if (tl) {
        vt_timeline_finish(tl);
        vt_timeline_stats st;
        vt_timeline_get_stats(tl, &st);
        fprintf(stderr, "timeline %s: %lld frames, %lld windows, %lld clips in %.1f s; at most "
                        "%lld frames held (%.1f MiB); %lld packets the decoder rejected\n",
                o->path, (long long)st.frames, (long long)st.windows, (long long)st.clips,
                vt_now() - t0, (long long)st.peak_frames,
                (double)(st.peak_frames * st.frame_bytes) / (1 << 20),
                (long long)vt_stream_decode_errors(s));
    }
    vt_timeline_free(&tl);
    vt_stream_close(&s);
    return rc;
}

int vt_predict_timeline(const char *run, const char *const *videos, int nvid,
                        const vt_model_args *ma, int K, const vt_timeline_args *a) {
    char err[1024];
    vt_run_model m;
    int rc = 1, ok = 0;
    if (vt_run_model_open(&m, run, ma->ckpt, err, sizeof err) != 0) {
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
    tl_out o = {.heads = &m.heads, .top = a->top, .json = a->json, .towers = m.towers};
    for (int i = 0; i < nvid; i++) {
        o.path = videos[i];
        if (timeline_one(&o, &c, a, K, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain predict: %s: %s (skipped)\n", videos[i], err);
            if (a->json) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "path", videos[i]);
                cJSON_AddStringToObject(e, "error", err);
                char *s = cJSON_PrintUnformatted(e);
                printf("%s\n", s);
                cJSON_free(s);
                cJSON_Delete(e);
            }
            continue;
        }
        ok++;
    }
    if (ok == 0)
        fprintf(stderr, "vidtrain predict: no video could be read\n");
    rc = ok > 0 ? 0 : 1;
end:
    vt_run_model_free(&m);
    return rc;
}
