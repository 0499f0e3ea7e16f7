/*
 * test_zoo_cmds.c: the zoo's models that no other command test walks (docs/testing.md,
 * "Models through the commands") through train, eval, predict, --timeline, embed, export
 * and --resume, on a small synthetic set (vidtrain synth, 2 classes, 4 test videos), 2
 * steps of 4 clips each:
 *   - towers: `train --devices cpu:2 --tower-split manual:3,1` leaves bitwise the state of
 *     `--devices cpu:1` with the defaults (docs/design.md §3.1; the outside truth is one
 *     device), and its plan.txt says what the towers do with batch norm: synced, or none
 *     in a model without it (it said "synced" for those too, and for fine-tuning's frozen
 *     BN);
 *   - predict's top-1 of each test video, tallied by its class folder, is eval's confusion
 *     matrix (one clip a video: both take it by one function, app/eval/eval_clips.c);
 *   - predict --timeline with one window longer than the first test video is predict's
 *     probabilities of that video (the window is classified as the video cut to it);
 *   - embed (one clip a video, a row per clip): D is docs/embed.md's for the model, and
 *     softmax(W e + b) with the run's classifier is predict's probabilities
 *     (tests/check_embed.py; NMSE <= 1e-10, test_embed's bound and argument);
 *   - export: ONNX Runtime's logits on the clips predict fed the model (--dump-input) are
 *     W e + b of embed's rows (NMSE <= 1e-10, test_onnx's bound: ORT's convolutions sum in
 *     another order, ~1e-12; a wrong layer, eps or weight layout is > 1e-8). Logits, not
 *     probabilities: two steps leave the logits near 0 and the probabilities near 1/2,
 *     where a softmax hides a relative error of the logits by their size (~1e-2);
 *   - resume: 1 step, then `train --resume` to 2, equals the 2 uninterrupted steps bit for
 *     bit, every tensor (docs/design.md §3.5; test_resume stops tiny mid-epoch), one model
 *     of each family: its BN buffers, momentum and the family's own state.
 * The models, each standing for the members whose code it shares:
 *   mc3_18 4x32: torchvision's video ResNets (r3d18 and r2plus1d18 are the same builder with
 *     other convs; their numerics: test_transfer, test_onnx);
 *   c3d 16x16 (its smallest clip: fc6 is sized by it), two dropouts in the head (no resume:
 *     a family of one, its dropout masks drawn per clip as vit_test's drop path);
 *   i3d_r50 4x32: pytorchvideo's ResNets besides slowfast_r50: slow_r50's blocks with a
 *     temporal pool between the first two stages; and `--freeze 2`, where that
 *     parameter-free blocks.2 is no stage: blocks.0, .1 and .3 stay, .4 moves;
 *   mvit_v1_test 8x32: mvit_v1_b's pieces (absolute positions; mvit_v2_s's are
 *     test_mvit_cmds'); and from scratch in passes of 2 clips (--mem from its plan) the
 *     one-pass run bit for bit (no BN: every clip's gradient its own, exact sums);
 *   x3d_xs 4x32 and slowfast_r50 8x32 (the slow pathway takes 2 frames): no towers or
 *     export here (test_x3d_cmds, test_pyvideo_cli, test_onnx have them).
 * And vit_test stopped after 1 step and resumed to 2 equals 2 uninterrupted steps bit for
 * bit with the transformer recipe (AdamW moments, drop path drawn per clip), as
 * test_resume checks the SGD recipe on tiny. Without ONNX Runtime (tools/onnxrt) the
 * export check alone is left out, said on stdout.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "tests/apputil.h"
#include "tests/ortutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin, *g_src, *g_py, *g_dir;
static int g_ort; /* ONNX Runtime is there */

/* The parts of a walk besides eval, predict, --timeline and embed, which every model takes. */
enum { W_TOWERS = 1, W_EXPORT = 2, W_RESUME = 4 };

typedef struct walk {
    const char *model, *clip;
    int dim;          /* embed's D: docs/embed.md */
    int min_tensors;  /* what the checkpoints compared must have at least */
    const char *bn;   /* what the two towers' plan.txt says they do with batch norm */
    int parts;        /* W_*: the rest of the model's family took the others */
} walk;

/* The run's checkpoint predict and embed read: best.safetensors, else last. */
static void run_ckpt(char *out, size_t n, const char *run) {
    snprintf(out, n, "%s/best.safetensors", run);
    if (access(out, F_OK) != 0)
        snprintf(out, n, "%s/last.safetensors", run);
}

/* predict's top-1 of each video (--json) tallied by its class folder against eval.json's
 * confusion matrix of the first head. */
static void predict_is_eval(const char *dir, const char *model) {
    char p[4400];
    snprintf(p, sizeof p, "%s/pred.json", dir);
    cJSON *pred = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/one/eval.json", dir);
    cJSON *ev = vt_test_read_json(p);
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(ev, "heads"), 0);
    const cJSON *classes = cJSON_GetObjectItem(h, "classes");
    const cJSON *conf = cJSON_GetObjectItem(h, "confusion");
    TCHECK(cJSON_GetArraySize(pred) == 4 && cJSON_GetArraySize(classes) == 2 &&
               cJSON_GetArraySize(conf) == 2, "%s: predict's 4 videos, eval's 2x2 confusion", model);
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
            const cJSON *e = cJSON_GetArrayItem(cJSON_GetArrayItem(conf, t), g);
            TCHECK(cJSON_IsNumber(e) && e->valueint == mine[t][g],
                   "%s: confusion[%d][%d]: eval %d, predict %d", model, t, g,
                   cJSON_IsNumber(e) ? e->valueint : -1, mine[t][g]);
        }
    cJSON_Delete(pred);
    cJSON_Delete(ev);
}

/* predict --timeline with one window over the whole first test video (--window longer
 * than it: "each window is classified as predict classifies a video cut to it") gives
 * predict's probabilities of that video (pred.json), class by class. */
static void timeline_is_predict(const char *dir, const char *model) {
    TCHECK(vt_test_sh("cd '%s' && '%s' predict one \"$(ls -d data/test/*/* | sort | head -1)\" "
                      "--timeline --window 100s --clips-per-video 1 --json --top 2 > tl.json "
                      "2> tl.log", dir, g_bin) == 0, "%s: predict --timeline (see %s/tl.log)",
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
            const double e = fabs(x->valuedouble - y->valuedouble);
            worst = e > worst ? e : worst;
            n++;
        }
    }
    printf("%-13s timeline: one window over the video vs predict: max |difference| %.3g\n",
           model, worst);
    /* the same clip through the same weights, predict's 4 clips a call against the
     * timeline's 1: equal bit for bit on the CPU (2026-11-29, every model here); a clip
     * cut from other frames (the first 1 s window) moved the probability by 2.4e-5
     * (x3d_xs) to 1.3e-2 (mvit_v1_test) */
    TCHECK(n == 2 && worst <= 1e-6, "%s: timeline vs predict: %d classes, |difference| %g",
           model, n, worst);
    cJSON_Delete(tl);
    cJSON_Delete(pred);
}

/* export (logits) -> ONNX Runtime on the clips of dump.json, one batch of the 4 videos ->
 * W e + b of emb.safetensors (check_embed.py logits). */
static void export_is_ort(const char *dir, const char *model, const char *ckpt) {
    char p[4400], onnx[4400], outdir[4400];
    snprintf(onnx, sizeof onnx, "%s/m.onnx", dir);
    TCHECK(vt_test_sh("'%s' export '%s/one' --onnx '%s' > '%s/export.log' 2>&1", g_bin, dir,
                      onnx, dir) == 0, "%s: export (see %s/export.log)", model, dir);
    if (!g_ort)
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
    TCHECK(n == 4 && x && vt_test_ort_run(g_src, dir, onnx, x, shape, outdir, NULL, 0) == 0,
           "%s: ORT on the exported run", model);
    snprintf(p, sizeof p, "%s/check_ort.txt", dir);
    TCHECK(vt_test_sh("'%s' '%s/tests/check_embed.py' logits '%s' '%s/emb.safetensors' "
                      "'%s/logits_class.bin' > '%s' 2>&1", g_py, g_src, ckpt, dir, outdir,
                      p) == 0, "%s: check_embed.py logits (see %s)", model, p);
    double e = vt_test_figure(p, "logits_nmse", 0);
    printf("%-13s export: ONNX Runtime's logits vs W e + b: NMSE %.3g (|logits| up to %.3g)\n",
           model, e, vt_test_figure(p, "logits_maxabs", 0));
    TCHECK(e <= 1e-10, "%s: ORT's logits NMSE %g (see %s)", model, e, p);
    free(x);
    cJSON_Delete(dump);
}

/* One model through the commands; its runs in g_dir/MODEL (DIR/one: one tower). */
static void walk_one(const walk *w, char *dir, size_t dlen) {
    snprintf(dir, dlen, "%s/%s", g_dir, w->model);
    mkdir(dir, 0755);
    VT_CHECK(vt_test_sh("ln -sfn ../data '%s/data'", dir) == 0, "data link");
    char args[128], ckpt[4400], p[4400];
    snprintf(args, sizeof args, "--model %s --clip %s", w->model, w->clip);
    printf("%s %s:\n", w->model, w->clip);
    if (w->parts & W_TOWERS) {
        vt_test_towers_equal(g_bin, dir, args, w->min_tensors);
        snprintf(p, sizeof p, "%s/two/plan.txt", dir);
        TCHECK(vt_test_file_has(p, w->bn), "%s: the towers' plan does not say '%s'", w->model,
               w->bn);
    } else {
        TCHECK(vt_test_train_small(g_bin, dir, args, "one", "--devices cpu:1") == 0,
               "%s: train (see %s/one.log)", w->model, dir);
    }

    TCHECK(vt_test_sh("cd '%s' && '%s' eval one data --split test --clips-per-video 1 -q > "
                      "eval.log 2>&1 && '%s' predict one $(ls -d data/test/*/* | sort) "
                      "--clips-per-video 1 --json --top 2 --dump-input dump.json > pred.json "
                      "2> pred.log && '%s' embed one $(ls -d data/test/*/* | sort) "
                      "--clips-per-video 1 --per-clip --out emb.safetensors > emb.log 2>&1",
                      dir, g_bin, g_bin, g_bin) == 0, "%s: eval, predict, embed (see %s)",
           w->model, dir);
    predict_is_eval(dir, w->model);
    timeline_is_predict(dir, w->model);

    snprintf(p, sizeof p, "%s/one", dir);
    run_ckpt(ckpt, sizeof ckpt, p);
    snprintf(p, sizeof p, "%s/check_embed.txt", dir);
    TCHECK(vt_test_sh("cd '%s' && '%s' '%s/tests/check_embed.py' classifier '%s' pred.json "
                      "dump.json emb.safetensors emb.safetensors emb.safetensors pred.json > "
                      "'%s' 2>&1", dir, g_py, g_src, ckpt, p) == 0,
           "%s: check_embed.py (see %s)", w->model, p);
    const double d0 = vt_test_figure(p, "dim", 0), d1 = vt_test_figure(p, "dim", 1);
    TCHECK(d0 == w->dim && d1 == w->dim, "%s: embed's D %g, the classifier's input %g, "
           "docs/embed.md's %d", w->model, d0, d1, w->dim);
    TCHECK(vt_test_figure(p, "perclip_rows", 0) == 4 && vt_test_figure(p, "perclip_rows", 1) == 4,
           "%s: embed rows %g, predict's clips %g (4)", w->model,
           vt_test_figure(p, "perclip_rows", 0), vt_test_figure(p, "perclip_rows", 1));
    const double e = vt_test_figure(p, "perclip_nmse", 0), e1 = vt_test_figure(p, "k1_nmse", 0);
    printf("%-13s embed: D %g; softmax(W e + b) vs predict: NMSE %.3g\n", w->model, d0, e);
    TCHECK(e <= 1e-10 && e1 <= 1e-10, "%s: softmax(W e + b) vs predict: NMSE %g, %g", w->model,
           e, e1);
    if (w->parts & W_EXPORT)
        export_is_ort(dir, w->model, ckpt);
    if (w->parts & W_RESUME) {
        printf("%-13s ", w->model);
        vt_test_resume_equal(g_bin, dir, args, w->min_tensors);
    }
}

/* The budget that holds `clips` clips a pass: the run's plan.txt line "fp32: X UNIT fixed
 * per tower + Y UNIT per clip", in bytes; 0 when the line is not there. */
static long long budget_for(const char *run, double clips) {
    char p[4400];
    snprintf(p, sizeof p, "%s/plan.txt", run);
    char *plan = vt_test_slurp(p, NULL);
    const char *f = plan ? strstr(plan, "fp32: ") : NULL;
    double a = 0, b = 0;
    char ua[8] = "", ub[8] = "";
    long long bytes = 0;
    if (f && sscanf(f, "fp32: %lf %7s fixed per tower + %lf %7s per clip", &a, ua, &b, ub) == 4) {
        const double ka = !strcmp(ua, "GiB") ? 1 << 30 : !strcmp(ua, "MiB") ? 1 << 20 : 1 << 10;
        const double kb = !strcmp(ub, "GiB") ? 1 << 30 : !strcmp(ub, "MiB") ? 1 << 20 : 1 << 10;
        bytes = (long long)(a * ka + clips * b * kb);
    }
    free(plan);
    return bytes;
}

int main(void) {
    g_bin = vt_test_bin("test_zoo_cmds");
    if (!g_bin)
        return VT_TEST_SKIP;
    g_src = vt_test_env("VT_SRC", ".");
    g_py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    g_dir = vt_test_dir("zoo_cmds");
    if (vt_test_sh("'%s' -c 'import numpy' 2> /dev/null", g_py) != 0) {
        fprintf(stderr, "test_zoo_cmds: SKIP: %s cannot import numpy (check_embed.py's)\n", g_py);
        return VT_TEST_SKIP;
    }
    g_ort = vt_test_ort_here(g_src);
    if (!g_ort)
        printf("ONNX Runtime is not installed (tools/onnxrt: bash scripts/setup.sh --no-demo): "
               "the exported models are written, not run\n");
    VT_CHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 4 --val 2 --test 2") == 0,
             "synth");

    /* tensors: mc3_18 has 123 (weights, BN buffers, momentum), c3d 23, i3d_r50 321,
     * mvit_v1_test 94, x3d_xs 564, slowfast_r50 663: "at least" well below those */
    static const char *const sync = "batch norm synced across towers per pass";
    static const walk walks[] = {
        {"mc3_18", "4x32", 512, 100, sync, W_TOWERS | W_EXPORT | W_RESUME},
        {"c3d", "16x16", 4096, 20, "batch norm none in the model", W_TOWERS | W_EXPORT},
        {"i3d_r50", "4x32", 2048, 300, sync, W_TOWERS | W_EXPORT | W_RESUME},
        {"mvit_v1_test", "8x32", 64, 80, "batch norm none in the model",
         W_TOWERS | W_EXPORT | W_RESUME},
        /* towers and export: test_x3d_cmds, test_pyvideo_cli, test_onnx */
        {"x3d_xs", "4x32", 2048, 300, sync, W_RESUME},
        {"slowfast_r50", "8x32", 2304, 600, sync, W_RESUME},
    };
    char dir[4096], a[4400], b[4400], extra[4600];
    for (size_t i = 0; i < VT_ARRAY_LEN(walks); i++) {
        walk_one(&walks[i], dir, sizeof dir);
        snprintf(a, sizeof a, "%s/one/last.safetensors", dir);
        if (!strcmp(walks[i].model, "i3d_r50")) {
            snprintf(extra, sizeof extra, "--devices cpu:1 --init '%s' --freeze 2", a);
            TCHECK(vt_test_train_small(g_bin, dir, "--model i3d_r50 --clip 4x32", "ft", extra) == 0,
                   "i3d_r50 --freeze 2 (see %s/ft.log)", dir);
            snprintf(b, sizeof b, "%s/ft/last.safetensors", dir);
            static const char *const frozen[] = {"blocks.0.", "blocks.1.", "blocks.3.", NULL};
            int n = vt_test_ckpt_same(a, b, frozen, "blocks.4.");
            printf("i3d_r50       --freeze 2: %d tensors of blocks.0, .1, .3 unchanged, blocks.4 "
                   "moved\n", n);
            /* fine-tuning freezes every BN: the plan must not promise a sync */
            snprintf(b, sizeof b, "%s/ft/plan.txt", dir);
            TCHECK(vt_test_file_has(b, "batch norm frozen"), "i3d_r50 fine-tuning's plan does "
                   "not say its BN is frozen");
        }
        if (!strcmp(walks[i].model, "mvit_v1_test")) {
            snprintf(b, sizeof b, "%s/one", dir);
            long long mem = budget_for(b, 2.5);
            TCHECK(mem > 0, "%s/plan.txt: no fp32 line", b);
            snprintf(extra, sizeof extra, "--devices cpu:1 --mem %lld", mem);
            TCHECK(vt_test_train_small(g_bin, dir, "--model mvit_v1_test --clip 8x32", "mb",
                                       extra) == 0, "mvit_v1_test --mem (see %s/mb.log)", dir);
            snprintf(b, sizeof b, "%s/mb/plan.txt", dir);
            TCHECK(vt_test_file_has(b, "2 x 2"), "mvit_v1_test --mem %lld: not in passes of 2",
                   mem);
            char what[128];
            snprintf(what, sizeof what, "mvit_v1_test  passes of 2 clips (--mem %lld) = one pass",
                     mem);
            vt_test_last_same(dir, "one", "mb", what, 0);
        }
    }

    /* vit_test: 2 steps, and 1 step then --resume to 2 */
    snprintf(dir, sizeof dir, "%s/vit_test", g_dir);
    mkdir(dir, 0755);
    VT_CHECK(vt_test_sh("ln -sfn ../data '%s/data'", dir) == 0, "data link");
    const char *vargs = "--model vit_test --clip 4x32";
    TCHECK(vt_test_train_small(g_bin, dir, vargs, "one", "--devices cpu:1") == 0, "vit_test");
    snprintf(extra, sizeof extra, "%s/one/config.json", dir);
    TCHECK(vt_test_file_has(extra, "adamw"), "vit_test's recipe is not AdamW's");
    printf("vit_test      ");
    vt_test_resume_equal(g_bin, dir, vargs, 30);

    vt_test_sh("rm -rf '%s'", g_dir);
    return vt_test_done("test_zoo_cmds");
}
