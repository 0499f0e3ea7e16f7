/*
 * zoowalk.h: one zoo model through the commands a user runs on a trained run, each checked
 * against another command or an outside truth (docs/testing.md, "Models through the
 * commands"), shared by test_zoo_cmds.c and test_zoo_rest.c. On a synthetic set of 2
 * classes (DIR/data, vt_test_synth) a walk trains DIR/MODEL/one (with W_TOWERS: and
 * DIR/MODEL/two on 2 CPU towers, the same bits) and checks:
 *   - predict's top-1 of each test video, tallied by its class folder, is eval's confusion
 *     matrix (one clip a video: both take it by one function, app/eval/eval_clips.c);
 *   - predict --timeline with one window longer than the first test video is predict's
 *     probabilities of that video (the window is classified as the video cut to it);
 *   - embed (one clip a video, a row per clip): D is docs/embed.md's for the model, and
 *     softmax(W e + b) with the run's classifier is predict's probabilities
 *     (tests/check_embed.py; NMSE <= 1e-10, test_embed's bound and argument);
 *   - with W_EXPORT: ONNX Runtime's logits on the clips predict fed the model
 *     (--dump-input) are W e + b of embed's rows (NMSE <= 1e-10, test_onnx's bound: ORT's
 *     convolutions sum in another order, ~1e-12; a wrong layer, eps or weight layout is
 *     > 1e-8). Logits, not probabilities: two steps leave the logits near 0 and the
 *     probabilities near 1/2, where a softmax hides a relative error of the logits by
 *     their size (~1e-2);
 *   - with W_RESUME: 1 step, then `train --resume` to 2, equals the 2 uninterrupted steps
 *     bit for bit, every tensor (docs/design.md §3.5);
 *   - with W_FINETUNE: `train --init one/last.safetensors --freeze 1` leaves the stem and
 *     stage 1 bit for bit as loaded (every BN buffer too: fine-tuning freezes BN) and the
 *     layer after them trains;
 *   - with W_BF16 (cpu-ref, the CPU's bf16: docs/design.md): predict of the run in bf16
 *     gives the fp32 predict's probabilities within bf16's rounding, and a training step
 *     in bf16 runs to a finite loss.
 * Header-only (static inline), like apputil.h. It must never judge a figure it did not
 * read: a missing file or line is a failure (NAN compares false), never a pass.
 */
#ifndef VT_ZOOWALK_H
#define VT_ZOOWALK_H

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "tests/apputil.h"
#include "tests/ortutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* The test's surroundings: the binary, the source tree, the Python with numpy, the scratch
 * folder holding data/, whether ONNX Runtime is there, and data/test's video count. */
typedef struct vt_walk_env {
    const char *bin, *src, *py, *dir;
    int ort;
    int videos;
} vt_walk_env;

/* The parts of a walk besides eval, predict, --timeline and embed, which every model takes. */
enum { W_TOWERS = 1, W_EXPORT = 2, W_RESUME = 4, W_FINETUNE = 8, W_BF16 = 16 };

typedef struct vt_walk {
    const char *model, *clip;
    int dim;           /* embed's D: docs/embed.md */
    int min_tensors;   /* what the checkpoints compared must have at least */
    const char *bn;    /* what the two towers' plan.txt says they do with batch norm */
    int parts;         /* W_*: the rest of the model's family took the others */
    const char *train; /* train's options after vt_test_train_small's (NULL: none) */
    /* W_FINETUNE: `--init one --freeze 1` leaves the tensors under these prefixes
     * (NULL-terminated: the stem and stage 1) as loaded, and one under `moved` trains */
    const char *const *frozen;
    const char *moved;
} vt_walk;

/* The env of a test named `test` whose scratch folder is `name`: VT_TEST_SKIP when it
 * cannot run here (no binary, no numpy for check_embed.py), else 0 with the synthetic set
 * (`synth`: vidtrain synth's options, `videos` the test videos they make) made. */
static inline int vt_walk_init(vt_walk_env *e, const char *test, const char *name,
                               const char *synth, int videos) {
    e->bin = vt_test_bin(test);
    if (!e->bin)
        return VT_TEST_SKIP;
    e->src = vt_test_env("VT_SRC", ".");
    e->py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    e->dir = vt_test_dir(name);
    e->videos = videos;
    if (vt_test_sh("'%s' -c 'import numpy' 2> /dev/null", e->py) != 0) {
        fprintf(stderr, "%s: SKIP: %s cannot import numpy (check_embed.py's)\n", test, e->py);
        return VT_TEST_SKIP;
    }
    e->ort = vt_test_ort_here(e->src);
    if (!e->ort)
        printf("ONNX Runtime is not installed (tools/onnxrt: bash scripts/setup.sh --no-demo): "
               "the exported models are written, not run\n");
    VT_CHECK(vt_test_synth(e->bin, e->dir, synth) == 0, "synth");
    return 0;
}

/* The run's checkpoint predict and embed read: best.safetensors, else last. */
static inline void vt_walk_ckpt(char *out, size_t n, const char *run) {
    snprintf(out, n, "%s/best.safetensors", run);
    if (access(out, F_OK) != 0)
        snprintf(out, n, "%s/last.safetensors", run);
}

/* predict's top-1 of each video (--json) tallied by its class folder against eval.json's
 * confusion matrix of the first head. */
static inline void vt_walk_predict_is_eval(const vt_walk_env *e, const char *dir,
                                           const char *model) {
    char p[4400];
    snprintf(p, sizeof p, "%s/pred.json", dir);
    cJSON *pred = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/one/eval.json", dir);
    cJSON *ev = vt_test_read_json(p);
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "heads"), 0);
    const cJSON *classes = cJSON_GetObjectItem(h, "classes");
    const cJSON *conf = cJSON_GetObjectItem(h, "confusion");
    TCHECK(cJSON_GetArraySize(pred) == e->videos && cJSON_GetArraySize(classes) == 2 &&
               cJSON_GetArraySize(conf) == 2, "%s: predict's %d videos, eval's 2x2 confusion",
           model, e->videos);
    int mine[2][2] = {{0}};
    for (const cJSON *v = pred ? pred->child : NULL; v; v = v->next) {
        const char *path = cJSON_GetStringValue(cJSON_GetObjectItem(v, "path"));
        const cJSON *top = cJSON_GetArrayItem(cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(v, "heads"), 0), "top"), 0);
        const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(top, "label"));
        int t = -1, g = -1;
        for (int c = 0; c < cJSON_GetArraySize(classes); c++) {
            const char *name = cJSON_GetStringValue(cJSON_GetArrayItem(classes, c));
            char folder[128];
            snprintf(folder, sizeof folder, "/%s/", name ? name : "?");
            if (path && strstr(path, folder))
                t = c;
            if (label && name && !strcmp(label, name))
                g = c;
        }
        TCHECK(t >= 0 && t < 2 && g >= 0 && g < 2, "%s: predict's %s: class %d, top-1 %d", model,
               path ? path : "?", t, g);
        if (t >= 0 && t < 2 && g >= 0 && g < 2)
            mine[t][g]++;
    }
    for (int t = 0; t < 2; t++)
        for (int g = 0; g < 2; g++) {
            const cJSON *c = cJSON_GetArrayItem(cJSON_GetArrayItem(conf, t), g);
            TCHECK(cJSON_IsNumber(c) && c->valueint == mine[t][g],
                   "%s: confusion[%d][%d]: eval %d, predict %d", model, t, g,
                   cJSON_IsNumber(c) ? c->valueint : -1, mine[t][g]);
        }
    cJSON_Delete(pred);
    cJSON_Delete(ev);
}

/* predict --timeline with one window over the whole first test video (--window longer
 * than it: "each window is classified as predict classifies a video cut to it") gives
 * predict's probabilities of that video (pred.json), class by class. */
static inline void vt_walk_timeline_is_predict(const vt_walk_env *e, const char *dir,
                                               const char *model) {
    TCHECK(vt_test_sh("cd '%s' && '%s' predict one \"$(ls -d data/test/*/* | sort | head -1)\" "
                      "--timeline --window 100s --clips-per-video 1 --json --top 2 > tl.json "
                      "2> tl.log", dir, e->bin) == 0, "%s: predict --timeline (see %s/tl.log)",
           model, dir);
    char p[4400];
    snprintf(p, sizeof p, "%s/tl.json", dir);
    cJSON *tl = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/pred.json", dir);
    cJSON *pred = vt_test_read_json(p);
    const cJSON *top = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(tl, "heads"),
                                                              0), "top");
    const cJSON *ptop = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
        cJSON_GetArrayItem(pred, 0), "heads"), 0), "top");
    const cJSON *win = cJSON_GetObjectItem(tl, "window");
    TCHECK(cJSON_GetArraySize(top) == 2 && cJSON_GetArraySize(ptop) == 2 && cJSON_IsNumber(win) &&
               win->valueint == 0, "%s: the timeline's one window of 2 classes, predict's 2",
           model);
    double worst = 0;
    int n = 0;
    for (const cJSON *c = top ? top->child : NULL; c; c = c->next) {
        const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(c, "label"));
        for (const cJSON *d = ptop ? ptop->child : NULL; d; d = d->next) {
            const char *pl = cJSON_GetStringValue(cJSON_GetObjectItem(d, "label"));
            const cJSON *x = cJSON_GetObjectItem(c, "prob"), *y = cJSON_GetObjectItem(d, "prob");
            if (!label || !pl || strcmp(label, pl) || !cJSON_IsNumber(x) || !cJSON_IsNumber(y))
                continue;
            const double d1 = fabs(x->valuedouble - y->valuedouble);
            worst = d1 > worst ? d1 : worst;
            n++;
        }
    }
    printf("%-13s timeline: one window over the video vs predict: max |difference| %.3g\n",
           model, worst);
    /* the same clip through the same weights, predict's clips of all the videos a call
     * against the timeline's 1: equal bit for bit on the CPU (2026-11-29, every model
     * walked); a clip cut from other frames (the first 1 s window) moved the probability
     * by 2.4e-5 (x3d_xs) to 1.3e-2 (mvit_v1_test) */
    TCHECK(n == 2 && worst <= 1e-6, "%s: timeline vs predict: %d classes, |difference| %g",
           model, n, worst);
    cJSON_Delete(tl);
    cJSON_Delete(pred);
}

/* export (logits) -> ONNX Runtime on the clips of dump.json, one batch of the test videos
 * -> W e + b of emb.safetensors (check_embed.py logits). */
static inline void vt_walk_export_is_ort(const vt_walk_env *e, const char *dir,
                                         const char *model, const char *ckpt) {
    char p[4400], onnx[4400], outdir[4400];
    snprintf(onnx, sizeof onnx, "%s/m.onnx", dir);
    TCHECK(vt_test_sh("'%s' export '%s/one' --onnx '%s' > '%s/export.log' 2>&1", e->bin, dir,
                      onnx, dir) == 0, "%s: export (see %s/export.log)", model, dir);
    if (!e->ort)
        return;
    snprintf(p, sizeof p, "%s/dump.json", dir);
    cJSON *dump = vt_test_read_json(p);
    int shape[5] = {0}, n = cJSON_GetArraySize(dump);
    float *x = NULL;
    int64_t per = 0, at = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(dump, i), *shp = cJSON_GetObjectItem(v, "shape");
        TCHECK(cJSON_GetArraySize(shp) == 5 && cJSON_GetArrayItem(shp, 0)->valueint == 1,
               "%s: dump of video %d: not one clip", model, i);
        if (cJSON_GetArraySize(shp) != 5)
            break;
        for (int d = 0; d < 5; d++)
            shape[d] = cJSON_GetArrayItem(shp, d)->valueint;
        int64_t m = 0;
        float *xi = vt_test_json_floats(cJSON_GetObjectItem(v, "input"), &m);
        if (!x) {
            per = m;
            x = vt_malloc(sizeof(float) * (size_t)(n * per));
        }
        TCHECK(m == per, "%s: video %d's input of %lld floats", model, i, (long long)m);
        if (m == per)
            memcpy(x + at, xi, sizeof(float) * (size_t)per);
        at += per;
        free(xi);
    }
    shape[0] = n;
    snprintf(outdir, sizeof outdir, "%s/ort", dir);
    mkdir(outdir, 0755);
    TCHECK(n == e->videos && x &&
               vt_test_ort_run(e->src, dir, onnx, x, shape, outdir, NULL, 0) == 0,
           "%s: ORT on the exported run", model);
    snprintf(p, sizeof p, "%s/check_ort.txt", dir);
    TCHECK(vt_test_sh("'%s' '%s/tests/check_embed.py' logits '%s' '%s/emb.safetensors' "
                      "'%s/logits_class.bin' > '%s' 2>&1", e->py, e->src, ckpt, dir, outdir,
                      p) == 0, "%s: check_embed.py logits (see %s)", model, p);
    double d = vt_test_figure(p, "logits_nmse", 0);
    printf("%-13s export: ONNX Runtime's logits vs W e + b: NMSE %.3g (|logits| up to %.3g)\n",
           model, d, vt_test_figure(p, "logits_maxabs", 0));
    TCHECK(d <= 1e-10, "%s: ORT's logits NMSE %g (see %s)", model, d, p);
    free(x);
    cJSON_Delete(dump);
}

/* W_FINETUNE: DIR/ft from one's checkpoint with --freeze 1 (fine-tuning's defaults
 * otherwise: BN frozen), against it tensor by tensor. */
static inline void vt_walk_finetune(const vt_walk_env *e, const vt_walk *w, const char *dir,
                                    const char *args) {
    char a[4400], b[4400], extra[4600];
    snprintf(a, sizeof a, "%s/one/last.safetensors", dir);
    snprintf(extra, sizeof extra, "--devices cpu:1 --init '%s' --freeze 1 %s", a,
             w->train ? w->train : "");
    TCHECK(vt_test_train_small(e->bin, dir, args, "ft", extra) == 0,
           "%s --init --freeze 1 (see %s/ft.log)", w->model, dir);
    snprintf(b, sizeof b, "%s/ft/last.safetensors", dir);
    int n = w->frozen ? vt_test_ckpt_same(a, b, w->frozen, w->moved) : 0;
    printf("%-13s --init --freeze 1: %d tensors of the stem and stage 1 as loaded, %s moved\n",
           w->model, n, w->moved ? w->moved : "?");
    TCHECK(n > 0, "%s --freeze 1: no frozen tensor compared", w->model);
}

/* W_BF16: the run's predict on cpu-ref in bf16 against pred.json (fp32), class by class,
 * and DIR/bf: one training step of 2 clips in bf16 on cpu-ref (cpu-ref is slow: one step
 * says every op has its bf16 form; test_bf16 checks that form against PyTorch). */
static inline void vt_walk_bf16(const vt_walk_env *e, const vt_walk *w, const char *dir,
                                const char *args) {
    TCHECK(vt_test_sh("cd '%s' && '%s' predict one $(ls -d data/test/*/* | sort) "
                      "--clips-per-video 1 --json --top 2 --precision bf16 --backend cpu-ref > "
                      "predb.json 2> predb.log", dir, e->bin) == 0,
           "%s: predict --precision bf16 --backend cpu-ref (see %s/predb.log)", w->model, dir);
    char p[4400];
    snprintf(p, sizeof p, "%s/pred.json", dir);
    cJSON *f = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/predb.json", dir);
    cJSON *h = vt_test_read_json(p);
    double worst = 0;
    int n = 0;
    for (int v = 0; v < cJSON_GetArraySize(f); v++) {
        const cJSON *ft = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
            cJSON_GetArrayItem(f, v), "heads"), 0), "top");
        const cJSON *ht = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(
            cJSON_GetArrayItem(h, v), "heads"), 0), "top");
        for (const cJSON *c = ft ? ft->child : NULL; c; c = c->next)
            for (const cJSON *d = ht ? ht->child : NULL; d; d = d->next) {
                const char *lc = cJSON_GetStringValue(cJSON_GetObjectItem(c, "label"));
                const char *ld = cJSON_GetStringValue(cJSON_GetObjectItem(d, "label"));
                const cJSON *x = cJSON_GetObjectItem(c, "prob"), *y = cJSON_GetObjectItem(d, "prob");
                if (!lc || !ld || strcmp(lc, ld) || !cJSON_IsNumber(x) || !cJSON_IsNumber(y))
                    continue;
                const double d1 = fabs(x->valuedouble - y->valuedouble);
                worst = d1 > worst ? d1 : worst;
                n++;
            }
    }
    printf("%-13s bf16 (cpu-ref): predict vs fp32: max |difference| %.3g over %d probabilities\n",
           w->model, worst, n);
    /* bf16 keeps 8 significant bits (2^-9 relative per stored activation); two steps
     * leave the logits near 0 and the 2 probabilities near 1/2, where they move by a
     * quarter of the logits' difference: measured 1.2e-5 (tiny_nobn) and 2.1e-5 (x3d_l),
     * 2026-11-29. 1e-3 leaves room for deeper models; 0 would be fp32 computed where bf16
     * was asked (the numbers themselves: test_bf16 against PyTorch, test_embed on a
     * trained run). */
    TCHECK(n == 2 * e->videos && worst <= 1e-3 && worst > 0,
           "%s: bf16 predict vs fp32: %d probabilities, |difference| %g", w->model, n, worst);
    cJSON_Delete(f);
    cJSON_Delete(h);
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/bf' %s --batch 2 --max-steps 1 --seed 3 "
                      "--workers 1 -q --devices cpu-ref:1 --precision bf16 > '%s/bf.log' 2>&1",
                      e->bin, dir, dir, args, dir) == 0 &&
               vt_test_file_has_in(dir, "bf.log", "stopped at step 1") &&
               !vt_test_file_has_in(dir, "bf.log", "nan"),
           "%s: a training step in bf16 on cpu-ref (see %s/bf.log)", w->model, dir);
}

/* One model through the commands; its runs in E->dir/MODEL (DIR/one: one tower), whose
 * path goes to dir. */
static inline void vt_walk_one(const vt_walk_env *e, const vt_walk *w, char *dir, size_t dlen) {
    snprintf(dir, dlen, "%s/%s", e->dir, w->model);
    mkdir(dir, 0755);
    VT_CHECK(vt_test_sh("ln -sfn ../data '%s/data'", dir) == 0, "data link");
    char args[256], ckpt[4400], p[4400];
    snprintf(args, sizeof args, "--model %s --clip %s", w->model, w->clip);
    printf("%s %s:\n", w->model, w->clip);
    if (w->parts & W_TOWERS) {
        vt_test_towers_equal(e->bin, dir, args, w->min_tensors);
        snprintf(p, sizeof p, "%s/two/plan.txt", dir);
        TCHECK(vt_test_file_has(p, w->bn), "%s: the towers' plan does not say '%s'", w->model,
               w->bn);
    } else {
        snprintf(p, sizeof p, "--devices cpu:1 %s", w->train ? w->train : "");
        TCHECK(vt_test_train_small(e->bin, dir, args, "one", p) == 0,
               "%s: train (see %s/one.log)", w->model, dir);
    }

    /* predict's input clips (--dump-input, JSON) are ONNX Runtime's: only for export (s3d's
     * 2 clips of 13x209x209 make 50 MB of it) */
    const int dump = (w->parts & W_EXPORT) != 0;
    TCHECK(vt_test_sh("cd '%s' && '%s' eval one data --split test --clips-per-video 1 -q > "
                      "eval.log 2>&1 && '%s' predict one $(ls -d data/test/*/* | sort) "
                      "--clips-per-video 1 --json --top 2 %s > pred.json 2> pred.log && '%s' "
                      "embed one $(ls -d data/test/*/* | sort) --clips-per-video 1 --per-clip "
                      "--out emb.safetensors > emb.log 2>&1", dir, e->bin, e->bin,
                      dump ? "--dump-input dump.json" : "", e->bin) == 0,
           "%s: eval, predict, embed (see %s)", w->model, dir);
    vt_walk_predict_is_eval(e, dir, w->model);
    vt_walk_timeline_is_predict(e, dir, w->model);

    snprintf(p, sizeof p, "%s/one", dir);
    vt_walk_ckpt(ckpt, sizeof ckpt, p);
    snprintf(p, sizeof p, "%s/check_embed.txt", dir);
    TCHECK(vt_test_sh("cd '%s' && '%s' '%s/tests/check_embed.py' classifier '%s' pred.json "
                      "%s emb.safetensors emb.safetensors emb.safetensors pred.json > '%s' 2>&1",
                      dir, e->py, e->src, ckpt, dump ? "dump.json" : "-", p) == 0,
           "%s: check_embed.py (see %s)", w->model, p);
    const double d0 = vt_test_figure(p, "dim", 0), d1 = vt_test_figure(p, "dim", 1);
    TCHECK(d0 == w->dim && d1 == w->dim, "%s: embed's D %g, the classifier's input %g, "
           "docs/embed.md's %d", w->model, d0, d1, w->dim);
    /* one clip a video: the per-video rows are the per-clip ones, and softmax(W e + b) of
     * them against predict's videos (k1) is the per-clip statement; the dump's per-clip
     * probabilities say it once more where there is one */
    TCHECK(vt_test_figure(p, "video_rows", 0) == e->videos &&
               vt_test_figure(p, "video_rows", 1) == e->videos &&
               (!dump || (vt_test_figure(p, "perclip_rows", 0) == e->videos &&
                          vt_test_figure(p, "perclip_rows", 1) == e->videos)),
           "%s: embed rows %g, predict's videos %g (%d)", w->model,
           vt_test_figure(p, "video_rows", 0), vt_test_figure(p, "video_rows", 1), e->videos);
    const double d = vt_test_figure(p, "k1_nmse", 0),
                 d2 = dump ? vt_test_figure(p, "perclip_nmse", 0) : 0;
    printf("%-13s embed: D %g; softmax(W e + b) vs predict: NMSE %.3g\n", w->model, d0, d);
    TCHECK(d <= 1e-10 && d2 <= 1e-10, "%s: softmax(W e + b) vs predict: NMSE %g, %g", w->model,
           d, d2);
    if (w->parts & W_EXPORT)
        vt_walk_export_is_ort(e, dir, w->model, ckpt);
    if (w->parts & W_RESUME) {
        printf("%-13s ", w->model);
        vt_test_resume_equal(e->bin, dir, args, w->min_tensors);
    }
    if (w->parts & W_FINETUNE)
        vt_walk_finetune(e, w, dir, args);
    if (w->parts & W_BF16)
        vt_walk_bf16(e, w, dir, args);
}

#endif
