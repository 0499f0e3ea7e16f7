/*
 * cmd_predict.c: `vidtrain predict RUN video...` — the top-k labels with probabilities
 * for each video, from K uniformly spaced clips (x 1 or 3 crops) averaged, exactly the
 * evaluation protocol's view of a video. A file that cannot be read gets a message with
 * FFmpeg's reason and the others go on. --dump-input FILE also writes the normalised
 * clips the model got and their probabilities, the truth an exported model is tested
 * against (tests/test_onnx.c). It must never write into the run folder.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/eval/eval_clips.h"
#include "app/eval/evalproto.h"
#include "app/run/run_model.h"
#include "app/run/run_files.h"
#include "app/stream/timeline_cmd.h"
#include "base/common.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/towers/tower.h"
#include "pipeline/data/video/video.h"
#include "base/json_str.h"
#include "base/textwidth.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain predict RUN VIDEO... [options]\n\n"
        "Prints the top-k labels with their probabilities for each video, averaging K\n"
        "uniformly spaced clips (x crops) per video, with RUN's best checkpoint (else last).\n\n"
        "  --top K               labels per video (default 5, at most the class count)\n"
        "  --json                one JSON document on stdout instead of text (per video: path,\n"
        "                        heads[{name, tie, top[{label, prob}]}]; tie: the top score\n"
        "                        is shared, no single class is the answer)\n"
        "  --clips-per-video K   (default 10)\n"
        "  --crops 1|3           (default 1)\n"
        "  --checkpoint PATH     another checkpoint\n"
        "  --tower-split POLICY  how each batch of clips splits over the towers: equal,\n"
        "                        memory (default), speed, auto, manual:W,W,...\n"
        "  --precision P         fp32 (default, whatever the run trained with), tf32, bf16\n"
        "  --dump-input FILE     also write, as JSON, each video's input exactly as the model\n"
        "                        got it — the normalised clips, float32 (N, 3, T, H, W), N =\n"
        "                        clips x crops — and each clip's probabilities per head: what\n"
        "                        a model from `vidtrain export` must reproduce (docs/export.md);\n"
        "                        FILE may not be one of the videos, a folder or a special file\n"
        VT_DECODE_OPT_HELP
        "\ntimeline (docs/timeline.md): --timeline prints the top-k of every window of each\n"
        "video instead, streaming through it once in bounded memory (VIDEO may be - for\n"
        "standard input, a URL FFmpeg opens or a camera: docs/streams.md); each window is\n"
        "classified as predict classifies a video cut to it:\n"
        "  --timeline            windows of the video, each as soon as it is known\n"
        "  --window D            window length (default 2s; 2, 2s, 0.5s, 1m)\n"
        "  --hop D               start of one window to the next (default 1s)\n"
        "  --clips-per-video K   clips a window (default: enough to cover it, at most 16)\n"
        "  --batch N             clips a model call, several windows at once (default 8)\n"
        "  --decode-threads N    FFmpeg decoder threads (default 0: FFmpeg's choice)\n"
        "  --flush               each window through the model and out as soon as it is\n"
        "                        complete (always so for a stream, a pipe or a camera)\n"
        "  --stats               each window's latency (JSON \"latency\", seconds from its\n"
        "                        last frame's arrival), median and max at the end\n"
        "  --timeout D           a stream or camera that gives no decoded frame for D (no\n"
        "                        data, or data that never decodes) is broken (default 10s)\n"
        "  --reconnect N         tries after a network source breaks (default 5; 0: exit)\n"
        "  --input-format F      FFmpeg's input format (default: guessed; v4l2 for /dev/video*)\n"
        "  --max-behind D        a live source read more than D behind its pace (the model\n"
        "                        slower than it): skip windows to catch up (default 10s for\n"
        "                        network streams and cameras, 0: never)\n"
        "  --json                one JSON object a window, a line: path, window, start, end,\n"
        "                        frames, partial, decode_errors, heads[{name, top[{label,\n"
        "                        prob}]}]\n"
        "%s\n"
        "Unreadable files are reported (on stderr, and as {\"error\"} entries with --json) and\n"
        "skipped; a video whose clips hold frames the stream never delivered (filled with the\n"
        "nearest decoded frame) or met decode errors (packets rejected, pictures the decoder\n"
        "repaired) gets a warning (--json: \"filled_frames\", \"decode_errors\"). Exit codes: 0 when\n"
        "at least one video was predicted, 1 when every video failed (or RUN cannot be\n"
        "loaded), 2 usage.\n",
        vt_device_args_help);
}

typedef struct pred_ctx {
    vt_towers *t;
    const vt_run_heads *heads;
    vt_clip_cfg clip;
    int K, crops;
    vt_batch b;
    float *probs[VT_MAX_HEADS];
    double *avg[VT_MAX_HEADS];
    vt_eval_clips ec;   /* the clips of a video (shared with embed) */
    cJSON *dump;        /* --dump-input: one entry per video predicted; NULL: off */
    const vt_run_model *m;
    vt_fps_tally fps;   /* videos at a frame rate the run did not train on */
    double video_fps;   /* the last video's frame rate */
} pred_ctx;

/* The --dump-input entry of one video: its n clips' input and per-clip probabilities.
 * cJSON prints each float (held as a double) with enough digits to read back exactly. */
static void dump_video(pred_ctx *c, const char *path, int n) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "path", path);
    const int shape[5] = {n, 3, c->clip.t, c->clip.crop, c->clip.crop};
    cJSON_AddItemToObject(e, "shape", cJSON_CreateIntArray(shape, 5));
    int64_t cf = vt_batch_clip_floats(&c->b);
    VT_CHECK((int64_t)n * cf <= INT32_MAX, "--dump-input: %d clips too large", n);
    cJSON_AddItemToObject(e, "input", cJSON_CreateFloatArray(c->b.x, (int)(n * cf)));
    cJSON *hs = cJSON_AddArrayToObject(e, "heads");
    for (int h = 0; h < c->heads->n; h++) {
        cJSON *ho = cJSON_CreateObject();
        cJSON_AddStringToObject(ho, "name", c->heads->cfg[h].name);
        cJSON *pr = cJSON_AddArrayToObject(ho, "probs");
        int K = c->heads->cfg[h].classes;
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(pr, cJSON_CreateFloatArray(c->probs[h] + (size_t)i * K, K));
        cJSON_AddItemToArray(hs, ho);
    }
    cJSON_AddItemToArray(c->dump, e);
}

/* 1 with err when a head's scores of the video are NaN or inf: a model that overflows
 * (its weights finite, a checkpoint's check passed) has no answer, and a ranking of NaN
 * would name whichever class comes first (issue 41). Else 0. */
static int scores_nonfinite(const pred_ctx *c, const vt_run_heads *heads, char *err,
                            size_t errlen) {
    for (int h = 0; h < heads->n; h++)
        for (int j = 0; j < heads->cfg[h].classes; j++)
            if (!isfinite(c->avg[h][j])) {
                vt_set_err(err, errlen, "the model's scores are not finite (%s for class %s): "
                           "the network overflows on its clips although its weights are finite "
                           "(a run at the edge of diverging: train it again with a lower --lr)",
                           isnan(c->avg[h][j]) ? "NaN" : "inf", heads->classes[h][j]);
                return 1;
            }
    return 0;
}

/* Fills c->avg[h] (classes) for one video. 0, or -1 with err. */
static int predict_one(pred_ctx *c, const char *path, char *err, size_t errlen) {
    vt_video *v = NULL;
    int rc = -1;
    if (vt_video_open(&v, path, 1, err, errlen) != 0)
        return -1;
    c->video_fps = vt_video_get_info(v)->fps;
    vt_frame_range all = {0, vt_video_get_info(v)->nframes};
    int n = vt_eval_clips_fill(&c->ec, v, all, &c->b, err, errlen);
    if (n < 0)
        goto end;
    /* counted once its clips are read: a video skipped has no answer the rate could skew */
    vt_fps_tally_add(&c->fps, c->m, path, c->video_fps);
    vt_eval_clips_warn(&c->ec, "predict", path);
    vt_towers_eval_step(c->t, &c->b, c->probs, NULL);
    for (int hh = 0; hh < c->heads->n; hh++) {
        int K = c->heads->cfg[hh].classes;
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int i = 0; i < n; i++)
                s += c->probs[hh][(size_t)i * K + j];
            c->avg[hh][j] = s / n;
        }
    }
    rc = 0;
end:
    vt_video_close(&v);
    return rc;
}

/* ---- the command: parse, plan (the model, the buffers), run (each video, the output) ---- */

typedef struct pred_args {
    const char *run;
    const char **videos; /* [argc] */
    int nvid, top, json, timeline, targs;
    const char *dump_path; /* --dump-input */
    vt_model_args ma;
    vt_timeline_args ta;
} pred_args;

/* Fills *pa from argv (pa->videos allocated either way: free it): 0, or the exit status
 * (2) after saying what is wrong. */
static int predict_parse(pred_args *pa, int argc, char **argv) {
    memset(pa, 0, sizeof *pa);
    pa->videos = vt_calloc((size_t)argc, sizeof(char *));
    pa->top = 5;
    vt_model_args_default(&pa->ma);
    pa->ma.clips_per_video = 0; /* given or not: the timeline picks its own default */
    vt_timeline_args_default(&pa->ta);
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        vt_opts_given_note(&given, a);
        int r = vt_model_args_take(&pa->ma, argc, argv, &i, "predict");
        if (r < 0) {
            return 2;
        }
        if (r == 1)
            continue;
        if ((r = vt_timeline_args_take(&pa->ta, argc, argv, &i)) != 0) {
            if (r < 0) {
                return 2;
            }
            pa->targs++;
            continue;
        }
        if (!strcmp(a, "--timeline")) { pa->timeline = 1; continue; }
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain predict: bad value for %s\n", a); return 2; } while (0)
        if (!strcmp(a, "--json")) { pa->json = 1; continue; }
        if (OPT("--dump-input")) { if (r < 0) BAD(); pa->dump_path = v; continue; }
        if (OPT("--top")) { if (r < 0 || vt_parse_int(v, 1, 1000, &pa->top)) BAD(); continue; }
        if ((r = vt_decode_opt_take("predict", argc, argv, &i)) != 0) {
            if (r < 0) {
                return 2;
            }
            continue;
        }
        if (OPT("--split")) {
            /* predict has no data split; the tower policy was --split once. */
            char herr[512];
            if (r > 0 && vt_slice_policy_like(v))
                vt_slice_policy_moved(herr, sizeof herr, v);
            else
                snprintf(herr, sizeof herr, "--split: predict takes video files, not a data "
                         "split; the tower policy is --tower-split POLICY");
            fprintf(stderr, "vidtrain predict: %s\n", herr);
            return 2;
        }
#undef OPT
#undef BAD
        if (a[0] == '-' && a[1]) { /* a lone "-" is standard input (--timeline) */
            fprintf(stderr, "vidtrain predict: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (!pa->run)
            pa->run = vt_run_path_trim(argv[i]); /* "r7/" is r7: one slash in r7/x */
        else
            pa->videos[pa->nvid++] = a;
    }
    if (!pa->run || pa->nvid == 0) {
        usage(stderr);
        return 2;
    }
    if (pa->targs && !pa->timeline) {
        fprintf(stderr, "vidtrain predict: --window, --hop, --batch, --decode-threads, --flush, "
                        "--stats, --timeout, --reconnect, --input-format and --max-behind are "
                        "--timeline's options\n");
        return 2;
    }
    if (pa->timeline)
        return vt_timeline_args_check(&pa->ta, &given, pa->videos, pa->nvid);
    return 0;
}

/* Plan: the run's model on its towers, and c's buffers for one video's K x crops clips.
 * 0, or the exit status (1, or 2 for a device the options name wrongly) after a message. */
static int predict_load(pred_ctx *c, vt_run_model *m, const pred_args *pa) {
    char err[1024];
    const vt_model_args *ma = &pa->ma;
    const vt_run_heads *heads = &m->heads;
    vt_run_model_clip(&c->clip, m);
    c->K = ma->clips_per_video;
    c->crops = ma->crops;
    c->ec.clip = c->clip;
    c->ec.K = c->K;
    c->ec.crops = c->crops;
    c->heads = heads;
    int B = c->K * c->crops;
    m->precision = ma->precision;
    int lrc = vt_run_model_load(m, &ma->devices, ma->tower_split, B, err, sizeof err);
    if (lrc != 0) {
        fprintf(stderr, "vidtrain predict: %s\n", err);
        return lrc == -2 ? 2 : 1;
    }
    c->t = m->towers;
    c->b.capacity = B;
    c->b.t = c->clip.t;
    c->b.h = c->b.w = c->clip.crop;
    c->b.nheads = heads->n;
    for (int h = 0; h < heads->n; h++) {
        c->b.head_classes[h] = heads->cfg[h].classes;
        c->b.head_loss[h] = heads->cfg[h].loss;
        c->probs[h] = vt_malloc(sizeof(float) * (size_t)B * heads->cfg[h].classes);
        c->avg[h] = vt_malloc(sizeof(double) * (size_t)heads->cfg[h].classes);
    }
    c->b.x = vt_malloc(sizeof(float) * (size_t)B * vt_batch_clip_floats(&c->b));
    c->b.video = vt_calloc((size_t)B, sizeof(int32_t));
    c->b.clip = vt_calloc((size_t)B, sizeof(int32_t));
    return 0;
}

/* Run, one video's answer: its top classes per head, into out (--json) or on stdout. */
static void predict_print(const pred_ctx *c, const char *video, int top, cJSON *out) {
    const vt_run_heads *heads = c->heads;
    cJSON *e = out ? cJSON_CreateObject() : NULL;
    cJSON *hs = NULL;
    if (e) {
        cJSON_AddStringToObject(e, "path", video);
        if (c->ec.filled) /* the warnings' counts, for a reader of the JSON alone */
            cJSON_AddNumberToObject(e, "filled_frames", (double)c->ec.filled);
        if (c->ec.errors)
            cJSON_AddNumberToObject(e, "decode_errors", (double)c->ec.errors);
        if (vt_run_fps_outside(c->m, c->video_fps)) /* the warning's, per video */
            cJSON_AddNumberToObject(e, "fps_outside_training", c->video_fps);
        hs = cJSON_AddArrayToObject(e, "heads");
    } else {
        printf("%s\n", video);
    }
    for (int h = 0; h < heads->n; h++) {
        int Kc = heads->cfg[h].classes, k = VT_MIN(top, Kc);
        float *sc = vt_malloc(sizeof(float) * (size_t)Kc);
        int *idx = vt_malloc(sizeof(int) * (size_t)k);
        for (int j = 0; j < Kc; j++)
            sc[j] = (float)c->avg[h][j];
        vt_topk(idx, sc, Kc, k);
        cJSON *ho = NULL, *tl = NULL;
        if (e) {
            ho = cJSON_CreateObject();
            cJSON_AddStringToObject(ho, "name", heads->cfg[h].name);
            tl = cJSON_AddArrayToObject(ho, "top");
            cJSON_AddItemToArray(hs, ho);
        } else if (heads->n > 1) {
            printf("  head %s%s\n", heads->cfg[h].name,
                   heads->cfg[h].loss == VT_LOSS_BCE ? " (independent tag probabilities)" : "");
        }
        /* the top score shared by another class: no single answer (eval counts such a
         * video as a miss); the list still ranks them by class index, so it is said */
        const int tied = vt_top_tied(sc, Kc, idx[0]);
        if (ho)
            cJSON_AddBoolToObject(ho, "tie", tied);
        else if (tied)
            printf("  (a tie: the top score is shared, so no single class is the answer)\n");
        for (int r = 0; r < k; r++) {
            if (tl) {
                cJSON *p = cJSON_CreateObject();
                cJSON_AddStringToObject(p, "label", heads->classes[h][idx[r]]);
                cJSON_AddNumberToObject(p, "prob", sc[idx[r]]);
                cJSON_AddItemToArray(tl, p);
            } else {
                const char *name = heads->classes[h][idx[r]];
                printf("  %2d. ", r + 1); /* the scores in line: columns, not bytes */
                vt_text_pad(stdout, name, VT_MAX(24, vt_text_cols(name)));
                printf(" %.4f\n", sc[idx[r]]);
            }
        }
        free(sc);
        free(idx);
    }
    if (e)
        cJSON_AddItemToArray(out, e);
}

int vt_cmd_predict(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    pred_args pa;
    int prc = predict_parse(&pa, argc, argv);
    const char **videos = pa.videos;
    if (prc) {
        free(videos);
        return prc;
    }
    const char *run = pa.run, *dump_path = pa.dump_path;
    const int nvid = pa.nvid;
    /* a stream, a camera and a file carry their own timestamps */
    if (vt_frame_rate_check("predict", "none of the inputs is one", videos, nvid) != 0) {
        free(videos);
        return 2;
    }
    if (pa.timeline) {
        pa.ta.top = pa.top;
        pa.ta.json = pa.json;
        int trc = dump_path ? 2 : vt_predict_timeline(run, videos, nvid, &pa.ma,
                                                      pa.ma.clips_per_video, &pa.ta);
        if (dump_path)
            fprintf(stderr, "vidtrain predict: --dump-input is not for --timeline\n");
        free(videos);
        return trc;
    }
    for (int i = 0; i < nvid; i++)
        if (!strcmp(videos[i], "-")) { /* standard input is a live stream: windows only */
            fprintf(stderr, "vidtrain predict: '-' (standard input) is read as a stream, with "
                            "--timeline only (a whole-video prediction needs a file it can "
                            "seek); a file named '-' is ./-\n");
            free(videos);
            return 2;
        }
    if (pa.ma.clips_per_video == 0)
        pa.ma.clips_per_video = 10;
    char err[1024];
    /* The videos are inputs (base/common.h's output rule), and so are the run's files
     * (vt_run_model_open declares them): --dump-input onto one of them, or onto a folder
     * or special file, is refused once all are declared, before any decoding (checked
     * before the run's were, RUN/config.json was refused only after every video). */
    for (int i = 0; i < nvid; i++)
        vt_inputs_add(videos[i]);
    int rc = 1, ok = 0;
    pred_ctx c;
    memset(&c, 0, sizeof c);
    cJSON *out = pa.json ? cJSON_CreateArray() : NULL;
    c.dump = dump_path ? cJSON_CreateArray() : NULL;
    vt_run_model m;
    if (vt_run_model_open(&m, run, pa.ma.ckpt, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain predict: %s\n", err);
        goto end;
    }
    if (dump_path && vt_output_check_early(dump_path, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain predict: --dump-input: %s\n", err);
        rc = 2;
        goto end;
    }
    if ((rc = predict_load(&c, &m, &pa)) != 0)
        goto end;
    c.m = &m;
    rc = 1;
    for (int i = 0; i < nvid; i++) {
        if (predict_one(&c, videos[i], err, sizeof err) != 0 || scores_nonfinite(&c, c.heads, err,
                                                                                  sizeof err)) {
            fprintf(stderr, "vidtrain predict: %s: %s (skipped)\n", videos[i], err);
            if (out) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "path", videos[i]);
                cJSON_AddStringToObject(e, "error", err);
                cJSON_AddItemToArray(out, e);
            }
            continue;
        }
        ok++;
        if (c.dump) /* the videos predicted, as predicted: none that was skipped */
            dump_video(&c, videos[i], c.b.n);
        predict_print(&c, videos[i], pa.top, out);
    }
    if (out) {
        char *s = vt_json_print(out, 1);
        VT_CHECK_MEM(s != NULL, "a JSON text");
        printf("%s\n", s);
        cJSON_free(s);
    }
    vt_fps_tally_warn(&c.fps, "predict", &m);
    if (ok == 0)
        fprintf(stderr, "vidtrain predict: no video could be read\n");
    rc = ok > 0 ? 0 : 1;
    if (c.dump) {
        char *s = vt_json_print(c.dump, 0);
        VT_CHECK_MEM(s != NULL, "a JSON text");
        if (vt_file_write_atomic(dump_path, s, strlen(s), err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain predict: --dump-input: %s\n", err);
            rc = 1;
        }
        cJSON_free(s);
    }
end:
    cJSON_Delete(out);
    cJSON_Delete(c.dump);
    vt_run_model_free(&m);
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(c.probs[h]);
        free(c.avg[h]);
    }
    free(c.b.x);
    free(c.b.video);
    free(c.b.clip);
    vt_eval_clips_free(&c.ec);
    free(videos);
    return rc;
}
