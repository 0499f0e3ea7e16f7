/*
 * test_zoo_mvit.c: vidtrain's MViTv2 computes what torchvision's MViT computes
 * (tests/oracle/torch_mvit.py runs torchvision 0.14's own MViT class with mvit_v2_s's
 * settings), loads its state dict by torchvision's names, and has mvit_v2_s's names and
 * shapes.
 *   mvit_test (4 blocks, 16 -> 64 channels, every piece of mvit_v2_s: q, k, v pooling
 *     with their LayerNorms, kv strides 4, 2, 1, q strides with pool_skip and width
 *     changes, relative position tables, residual pooling, class token; 5 classes, 2
 *     clips of 8x32x32 — 4 frames of 8x8 tokens, so a T/H mix-up shows) with seeded
 *     non-trivial weights, on cpu-ref and cpu: eval logits; one training forward,
 *     cross-entropy (mean) and backward: logits and EVERY parameter gradient; cpu's
 *     gradients against cpu-ref's.
 *   --init: torch.save of torchvision's state dict (mvit_test.pth) loads strictly into
 *     the golden parameters, bit for bit.
 *   mvit_v1_test: the same for mvit_v1_b's pieces (absolute position tables, no relative
 *     tables nor residual pooling, q pooled only where strided, project after norm2).
 *   other clips: mvit_test (built for 8x32x32) at 2 clips of 6x48x40 — its relative tables
 *     interpolated at run time as torchvision's _add_rel_pos does (up along H and W, down
 *     along T, H != W) — eval logits and every gradient, the tables' included, on cpu-ref
 *     and cpu (torch_mvit.py run_at); mvit_v1_test's 8x32x32 weights into a 6x48x40 net:
 *     the position tables resampled on load as F.interpolate does, and its eval logits.
 *   mvit_v2_s itself (16 blocks, 34.5M parameters; torchvision's 16x224 tables
 *     interpolated) at 2 clips of 8x64x48 (grids 16x12 pooled to 8x6, 4x3, 2x2, where
 *     torchvision's floor-divided table sizes and the pooled grids part): eval logits on cpu.
 *   listing: mvit_v2_s and mvit_v1_b at their default 16x224 clip have torchvision's names
 *     and shapes (torch_mvit.py list; the order differs: vidtrain keeps its arena in node
 *     order) and 34,537,744 and 36,610,672 parameters with 400 classes.
 *   exact sums (the towers' mode): 4 clips in 1 pass and in 2 passes of 2: the same bits.
 *   refusals: bf16 on cpu and on cpu-ref (MViT's bf16 is cuda's only, as the ViTs'); a
 *     backend without MViT's ops (CUDA's before issue 44) names the op and
 *     "not on"; mvit_v2_s at 8x160x112 is accepted with 16x224's parameters.
 * Tolerances (NMSE), argued as test_zoo_x3d.c's: the truth is PyTorch float64 (rounded to
 * float32 once) and vidtrain must be within NMSE_VS_TORCH = 4 times PyTorch float32's own
 * distance from it, with floors NMSE_EVAL 1e-10 and NMSE_TRAIN 1e-8 (float32 sums of a few
 * hundred terms through 4 to 16 LayerNorm-renormalised blocks: ~1e-13 .. 1e-11 measured;
 * a transposed relative table, a missing residual q, an LN on the wrong axis or a pool
 * on the class token is NMSE > 1e-4). pool_k's LayerNorm bias has a gradient that is 0 in
 * exact arithmetic (softmax drops a constant per query): its check is that ours is as
 * small as float32 PyTorch's (sum of squares <= 100x theirs + 1e-20).
 * cpu against cpu-ref: float against double sums of the same algorithm, NMSE_CPU 1e-9.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "models/transfer.h"
#include "models/formats/safetensors.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

#define NMSE_EVAL 1e-10
#define NMSE_TRAIN 1e-8
#define NMSE_VS_TORCH 4.0
#define NMSE_CPU 1e-9

static vt_net *make_hw(const char *model, const char *bename, int classes, int t, int h, int w,
                       int mb) {
    char err[512];
    vt_backend *be = vt_backend_init(bename, 0, 0, 0);
    VT_CHECK(be, "backend %s", bename);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, classes, t, h, w);
    vt_net *net = vt_net_init(&cfg, be, mb, err, sizeof err);
    VT_CHECK(net, "%s on %s: %s", model, bename, err);
    return net;
}
static vt_net *make(const char *model, const char *bename, int classes, int t, int hw, int mb) {
    return make_hw(model, bename, classes, t, hw, hw, mb);
}
static void unmake(vt_net **net) {
    vt_backend *be = vt_net_backend(*net);
    vt_net_free(net);
    TCHECK(be->in_use == 0, "%lld bytes left allocated", (long long)be->in_use);
    vt_backend_free(&be);
}

static float *upload(vt_backend *be, const vt_ckpt_info *info, const char *name, int64_t *n) {
    float *h = vt_test_gread(info, name, n);
    float *d = vt_backend_alloc_x(be, (size_t)*n * 4, name);
    be->i->to_device(be, d, h, (size_t)*n * 4);
    free(h);
    return d;
}

/* Eval logits against float64 within 4x float32 PyTorch's distance (floor NMSE_EVAL). */
static double eval_check(vt_net *net, const vt_ckpt_info *info, const char *what, int classes) {
    vt_backend *be = vt_net_backend(net);
    int64_t xn;
    float *x = upload(be, info, "x", &xn);
    float mine[32];
    vt_net_forward(net, x, 2, 0);
    be->i->to_host(be, mine, vt_net_logits(net, 0), (size_t)2 * classes * 4);
    float *ref = vt_test_gread(info, "eval_logits.0", NULL);
    float *y32 = vt_test_gread(info, "torch32_nmse.eval_logits.0", NULL);
    double e = vt_test_nmse_check(what, "eval_logits.0", mine, ref, 2 * classes,
                                  fmax(NMSE_EVAL, NMSE_VS_TORCH * y32[0]));
    TCHECK(vt_nmse(ref, ref + classes, classes) > 1e-4, "%s: torch's two clips alike", what);
    printf("%-22s eval NMSE %.2g (PyTorch float32's own %.2g)\n", what, e, (double)y32[0]);
    free(ref);
    free(y32);
    vt_backend_free_ptr(be, x);
    return e;
}

/* model (mvit_test, mvit_v1_test) on bename: eval, then a training step; returns its
 * gradients (host). */
static float *run_at(const vt_ckpt_info *info, const char *model, const char *bename,
                     const int thw[3]) {
    vt_net *net = make_hw(model, bename, 5, thw[0], thw[1], thw[2], 2);
    vt_backend *be = vt_net_backend(net);
    char what[64];
    snprintf(what, sizeof what, "%s/%s %dx%dx%d", model, bename, thw[0], thw[1], thw[2]);
    vt_test_load_state(net, info, what);
    double t0 = vt_now();
    eval_check(net, info, what, 5);
    int64_t xn;
    float *x = upload(be, info, "x", &xn);
    int32_t lab[2] = {1, 3}, *dlab = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, dlab, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dlab;
    vt_net_zero_grad(net);
    vt_net_forward(net, x, 2, 1);
    vt_net_loss(net, NULL, NULL, &tg, 0.5f); /* cross_entropy's mean over 2 clips */
    vt_net_backward(net);
    vt_backend_sync(be);
    float mine[10];
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    float *ref = vt_test_gread(info, "logits.0", NULL);
    double worst = vt_test_nmse_check(what, "logits.0", mine, ref, 10, NMSE_TRAIN), t32 = 0;
    free(ref);
    const int64_t np = vt_net_num_params(net);
    float *hg = vt_malloc((size_t)np * 4);
    be->i->to_host(be, hg, vt_net_grads(net), (size_t)np * 4);
    int ngrads = 0, nzero = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        char name[192];
        snprintf(name, sizeof name, "torch32_ss.%s", ti->name);
        if (vt_ckpt_find(info, name)) { /* a gradient that is 0 in exact arithmetic */
            float *ss = vt_test_gread(info, name, NULL);
            double s = 0;
            for (int64_t k = 0; k < ti->numel; k++)
                s += (double)hg[ti->offset + k] * hg[ti->offset + k];
            TCHECK(s <= 100.0 * ss[0] + 1e-20, "%s: %s: sum of squares %.3g, PyTorch float32's "
                   "%.3g (0 in exact arithmetic)", what, ti->name, s, (double)ss[0]);
            free(ss);
            nzero++;
            continue;
        }
        snprintf(name, sizeof name, "torch32_nmse.%s", ti->name);
        float *y = vt_test_gread(info, name, NULL);
        t32 = fmax(t32, y[0]);
        const double tol = fmax(NMSE_TRAIN, NMSE_VS_TORCH * y[0]);
        free(y);
        snprintf(name, sizeof name, "grad.%s", ti->name);
        ref = vt_test_gread(info, name, NULL);
        worst = fmax(worst, vt_test_nmse_check(what, name, hg + ti->offset, ref, ti->numel, tol));
        free(ref);
        ngrads++;
    }
    TCHECK(nzero == 4 && ngrads + nzero == vt_net_num_tensors(net), "%s: %d + %d gradients "
           "checked of %d", what, ngrads, nzero, vt_net_num_tensors(net));
    printf("%-22s train step (%.1fs with eval): logits and %d gradients, worst NMSE %.2g "
           "(PyTorch float32's own %.2g); %d zero gradients as small as PyTorch's\n", what,
           vt_now() - t0, ngrads, worst, t32, nzero);
    vt_backend_free_ptr(be, dlab);
    vt_backend_free_ptr(be, x);
    unmake(&net);
    return hg;
}

static float *run(const vt_ckpt_info *info, const char *model, const char *bename) {
    return run_at(info, model, bename, (const int[3]){8, 32, 32});
}

/* torch.save's .pth of the state dict loads strictly: the golden parameters. */
static void init_pth(const vt_ckpt_info *info, const char *dir, const char *model) {
    char err[512], path[4200];
    snprintf(path, sizeof path, "%s/%s.pth", dir, model);
    vt_net *net = make(model, "cpu-ref", 5, 8, 32, 1);
    vt_init_report rep;
    int rc = vt_net_load_init(net, path, 1, stdout, &rep, err, sizeof err);
    TCHECK(rc == 0, "%s: %s", path, err);
    int same = rc == 0;
    for (int i = 0; same && i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        float *h = vt_test_gread(info, t->name, NULL);
        same = !memcmp(h, vt_net_params(net) + t->offset, (size_t)t->numel * 4);
        TCHECK(same, "%s.pth: %s differs from the golden state", model, t->name);
        free(h);
    }
    printf("--init %s.pth (torch.save): %d tensors loaded strictly, %s\n", model, rep.loaded,
           same ? "the golden values" : "DIFFERENT");
    unmake(&net);
}

/* mvit_v2_s (torchvision's, built for 16x224) at 8x64x48: eval logits. */
static void v2_s(const vt_ckpt_info *info) {
    vt_net *net = make_hw("mvit_v2_s", "cpu", 7, 8, 64, 48, 2);
    vt_test_load_state(net, info, "mvit_v2_s");
    double t0 = vt_now();
    eval_check(net, info, "mvit_v2_s/cpu 8x64x48", 7);
    printf("mvit_v2_s: %lld parameters, eval of 2 clips %.1fs\n",
           (long long)vt_net_num_params(net), vt_now() - t0);
    unmake(&net);
}

/* mvit_v1_test's 8x32x32 weights (--init of torch.save's file) into a 6x48x40 net: the
 * position tables resampled as the oracle's F.interpolate does them (NMSE 1e-13: both
 * round the same float64 sums once, ~1e-15; nearest, align_corners=True or a transposed
 * grid are > 1e-4),
 * nothing mismatched, and the eval logits as torchvision's MViT with those tables. */
static void v1_resampled(const char *dir) {
    char path[4200], err[512];
    vt_ckpt_info info;
    snprintf(path, sizeof path, "%s/mvit_v1_test_6x48x40.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/mvit_v1_test.pth", dir);
    vt_net *net = make_hw("mvit_v1_test", "cpu", 5, 6, 48, 40, 2);
    vt_init_report rep;
    int rc = vt_net_load_init(net, path, 1, stdout, &rep, err, sizeof err);
    TCHECK(rc == 0 && rep.mismatched == 0 && rep.loaded == vt_net_num_tensors(net),
           "mvit_v1_test 8x32x32 -> 6x48x40: %s", rc ? err : "not all loaded");
    double worst = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        if (strncmp(t->name, "pos_encoding.", 13) || !strcmp(t->name, "pos_encoding.class_pos") ||
            !strcmp(t->name, "pos_encoding.class_token"))
            continue;
        int64_t n;
        float *ref = vt_test_gread(&info, t->name, &n);
        TCHECK(n == t->numel, "%s: %lld values, torch %lld", t->name, (long long)t->numel,
               (long long)n);
        if (n == t->numel)
            worst = fmax(worst, vt_test_nmse_check("mvit_v1_test 6x48x40", t->name,
                                                   vt_net_params(net) + t->offset, ref, n, 1e-13));
        free(ref);
    }
    printf("mvit_v1_test 8x32x32 weights at 6x48x40: positions resampled, NMSE %.2g from "
           "F.interpolate's\n", worst);
    eval_check(net, &info, "mvit_v1_test/cpu 6x48x40", 5);
    unmake(&net);
    vt_ckpt_info_free(&info);
}

/* mvit_v2_s's names and shapes at 16x224 against torchvision's (as a set: the order is
 * the arena's, node order), and its parameter count. */
static void listing(const char *py, const char *src, const char *model, long long params) {
    char cmd[8192], err[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_mvit.py' list %s 16 224", py, src,
             model);
    FILE *p = popen(cmd, "r");
    VT_CHECK(p, "%s", cmd);
    vt_backend *be = vt_backend_init("cpu", 0, 1, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, 400, 16, 224, 224);
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    VT_CHECK(net, "%s", err);
    const int nt = vt_net_num_tensors(net);
    char *seen = vt_calloc((size_t)nt, 1), line[512];
    int n = 0, bad = 0;
    long long tp = -1;
    while (fgets(line, sizeof line, p)) {
        char name[256], shape[128];
        if (sscanf(line, "params %lld", &tp) == 1 || sscanf(line, "%255s %127s", name, shape) != 2)
            continue;
        n++;
        int found = 0;
        for (int i = 0; i < nt && !found; i++) {
            const vt_tensor_info *t = vt_net_tensor(net, i);
            if (strcmp(t->name, name))
                continue;
            char mine[128] = "";
            for (int d = 0; d < t->ndim; d++)
                snprintf(mine + strlen(mine), sizeof mine - strlen(mine), "%s%lld", d ? "," : "",
                         (long long)t->shape[d]);
            found = 1;
            seen[i] = 1;
            if (strcmp(shape, mine) && bad++ < 3)
                printf("  %s: torch %s, vidtrain %s\n", name, shape, mine);
        }
        if (!found && bad++ < 3)
            printf("  %s: not in vidtrain's %s\n", name, model);
    }
    TCHECK(pclose(p) == 0, "%s failed", cmd);
    int unseen = 0;
    for (int i = 0; i < nt; i++)
        unseen += !seen[i];
    TCHECK(bad == 0 && unseen == 0 && n == nt, "%s: %d of torch's %d tensors differ, %d "
           "of vidtrain's %d not in torch's", model, bad, n, unseen, nt);
    TCHECK(tp == params && vt_net_num_params(net) == tp, "%s: %lld parameters (torch %lld, "
           "torchvision's meta %lld)", model, (long long)vt_net_num_params(net), tp, params);
    printf("listing: %s at 16x224: %d tensors with torchvision's names and shapes, %lld "
           "parameters\n", model, nt, (long long)vt_net_num_params(net));
    free(seen);
    vt_net_free(&net);
    vt_backend_free(&be);
}

/* cfg.exact: 4 clips in one pass and in two passes of 2 give the same bits. */
static void exact_passes(const vt_ckpt_info *info, const char *model) {
    double ss;
    const int same = vt_test_exact_passes(info, model, model, 8, 32, 32, &ss);
    printf("%s exact: 4 clips in 1 pass and in 2 passes of 2: %s\n", model,
           same ? "the same bits" : "DIFFERENT");
    TCHECK(same && ss > 0, "exact sums: one pass and two passes differ (or no gradient)");
}

static void refusals(void) {
    char err[512];
    vt_backend *be = vt_backend_init("cpu", 0, 1, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "mvit_test", 4, 8, 32, 32);
    cfg.precision = VT_PREC_BF16;
    vt_net *net = vt_net_init(&cfg, be, 1, err, sizeof err);
    TCHECK(!net && strstr(err, "bf16"), "bf16: %s", net ? "accepted" : err);
    /* cpu-ref has bf16 for the CNNs but not for the transformer ops: MViT's bf16 is
     * cuda's only, refused as test_zoo_vit's ViT is */
    vt_backend *ref = vt_backend_init("cpu-ref", 0, 1, 0);
    net = vt_net_init(&cfg, ref, 1, err, sizeof err);
    TCHECK(!net && strstr(err, "bf16") && strstr(err, "cuda"), "bf16 on cpu-ref: %s",
           net ? "accepted" : err);
    vt_backend_free(&ref);
    /* another clip keeps torchvision's 16x224 tables (interpolated at run time): the
     * same parameters, so its weights load at any clip */
    vt_net_cfg_default(&cfg, "mvit_v2_s", 400, 8, 160, 112);
    net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net && vt_net_num_params(net) == 34537744LL, "mvit_v2_s at 8x160x112: %s",
           net ? "other parameters" : err);
    vt_net_free(&net);
    /* a backend without MViT's ops (CUDA's table before issue 44): the op is named */
    vt_backend_i fake = *be->i;
    const vt_backend_i *keep = be->i;
    fake.name = "fakedev";
    fake.mvit_attention_forward = NULL;
    be->i = &fake;
    vt_net_cfg_default(&cfg, "mvit_test", 4, 8, 32, 32);
    net = vt_net_init(&cfg, be, 1, err, sizeof err);
    TCHECK(!net && strstr(err, "mvit_attention") && strstr(err, "not on fakedev yet"),
           "no MViT ops: %s", net ? "accepted" : err);
    printf("refusals: bf16; %s; mvit_v2_s at 8x160x112 has 16x224's parameters\n",
           net ? "?" : err);
    be->i = keep;
    vt_backend_free(&be);
}

int main(void) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    refusals();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torchvision.models.video.mvit' >/dev/null 2>&1",
             py);
    if (system(cmd) != 0) {
        printf("test_zoo_mvit: SKIP: %s cannot import torchvision's MViT\n", py);
        return VT_TEST_SKIP;
    }
    const char *dir = vt_test_dir("zoo_mvit");
    char path[4200], err[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_mvit.py' golden '%s'", py, src, dir);
    VT_CHECK(system(cmd) == 0, "%s failed", cmd);
    vt_ckpt_info info;
    static const char *const tests[2] = {"mvit_test", "mvit_v1_test"};
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.safetensors", dir, tests[k]);
        VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
        float *gr = run(&info, tests[k], "cpu-ref"), *gc = run(&info, tests[k], "cpu");
        vt_net *net = make(tests[k], "cpu", 5, 8, 32, 1);
        const int64_t np = vt_net_num_params(net);
        unmake(&net);
        const double e = vt_nmse(gc, gr, np);
        printf("%s: cpu's gradients against cpu-ref's: NMSE %.2g\n", tests[k], e);
        TCHECK(e <= NMSE_CPU, "%s: cpu against cpu-ref: NMSE %.3g", tests[k], e);
        free(gr);
        free(gc);
        exact_passes(&info, tests[k]);
        init_pth(&info, dir, tests[k]);
        vt_ckpt_info_free(&info);
    }
    /* mvit_test at 6x48x40: its 8x32x32 tables interpolated (up along H, W, down along
     * T); the same bounds as at its own clip */
    snprintf(path, sizeof path, "%s/mvit_test_6x48x40.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    const int sz[3] = {6, 48, 40};
    float *gr = run_at(&info, "mvit_test", "cpu-ref", sz), *gc = run_at(&info, "mvit_test", "cpu", sz);
    vt_net *net = make("mvit_test", "cpu", 5, 8, 32, 1);
    const double e = vt_nmse(gc, gr, vt_net_num_params(net));
    unmake(&net);
    printf("mvit_test 6x48x40: cpu's gradients against cpu-ref's: NMSE %.2g\n", e);
    TCHECK(e <= NMSE_CPU, "mvit_test 6x48x40: cpu against cpu-ref: NMSE %.3g", e);
    free(gr);
    free(gc);
    vt_ckpt_info_free(&info);
    v1_resampled(dir);
    snprintf(path, sizeof path, "%s/mvit_v2_s.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    v2_s(&info);
    vt_ckpt_info_free(&info);
    listing(py, src, "mvit_v2_s", 34537744LL);
    listing(py, src, "mvit_v1_b", 36610672LL);
    return vt_test_done("test_zoo_mvit");
}
