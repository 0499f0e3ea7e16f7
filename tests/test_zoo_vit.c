/*
 * test_zoo_vit.c: vidtrain's VideoMAE transformers compute what a PyTorch VideoMAE ViT
 * computes (tests/oracle/torch_vit.py, written from VideoMAE's modeling_finetune.py), and
 * load its weights under every naming.
 *   vit_test (the test model: dim 48, 2 heads, depth 2, every piece and name of
 *     videomae_vit_s; 5 classes, 2 clips of 4x32x48 — non-square, so a token order or
 *     position table transposed between H and W shows) with seeded non-trivial weights,
 *     on cpu-ref and cpu: eval logits; one training forward, cross-entropy (mean) and
 *     backward: logits and EVERY parameter gradient.
 *   drop path 0.5 with vidtrain's per-clip draw replayed in PyTorch: the training step's
 *     logits and gradients; eval mode the identity.
 *   another clip size: the same weights at 8x64x32 (32 tokens; the sin-cos position
 *     table is rebuilt for the clip, there is no learned one to interpolate): PyTorch's
 *     eval logits.
 *   names: the same weights from the Hugging Face file (query/key/value, layernorm_before,
 *     ..., classifier) and from a .pth whose blocks sit under "encoder." load strictly and
 *     give the golden parameters bit for bit.
 *   listing: videomae_vit_s and videomae_vit_b have PyTorch's names, shapes and order
 *     (torch_vit.py list; 22,033,936 and 86,534,800 parameters with 400 classes).
 *   refusals: bf16 on cpu-ref (the transformers' bf16 is cuda's only), a clip not made
 *     of 2x16x16 tubelets.
 * Tolerances (NMSE). Both sides compute float32 in different orders, ~1e-7 relative per
 * op; LayerNorm renormalises every block, so eval logits after 2 blocks carry ~1e-6
 * relative at most: NMSE_EVAL 1e-10 (a wrong eps, 1e-5 for 1e-6, is ~1e-9 here only
 * through tiny variances, but a missing k-bias zero, a transposed token order or a wrong
 * softmax scale is NMSE > 1e-3). Backward multiplies the errors again through the same
 * layers: NMSE_TRAIN 1e-8, as test_zoo_s3d.c (a wrong gradient term is > 1e-4).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/finetune.h"
#include "models/registry.h"
#include "models/transfer.h"
#include "models/formats/safetensors.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

#define NMSE_EVAL 1e-10
#define NMSE_TRAIN 1e-8

static vt_net *make(const char *model, const char *bename, int classes, int t, int h, int w,
                    char *err, size_t errlen) {
    vt_backend *be = vt_backend_init(bename, 0, 0, 0);
    VT_CHECK(be, "backend %s", bename);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, classes, t, h, w);
    vt_net *net = vt_net_init(&cfg, be, 2, err, errlen);
    if (!net)
        vt_backend_free(&be);
    return net;
}
static void unmake(vt_net **net) {
    vt_backend *be = vt_net_backend(*net);
    vt_net_free(net);
    TCHECK(be->in_use == 0, "%lld bytes left allocated", (long long)be->in_use);
    vt_backend_free(&be);
}

static void run(const vt_ckpt_info *info, const char *bename) {
    char err[512];
    vt_net *net = make("vit_test", bename, 5, 4, 32, 48, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_backend *be = vt_net_backend(net);
    vt_test_load_state(net, info, "vit");
    int64_t xn;
    float *hx = vt_test_gread(info, "x", &xn);
    float *x = vt_backend_alloc_x(be, (size_t)xn * 4, "input");
    be->i->to_device(be, x, hx, (size_t)xn * 4);
    float mine[10];
    vt_net_forward(net, x, 2, 0);
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    float *ref = vt_test_gread(info, "eval_logits.0", NULL);
    double eval = vt_test_nmse_check(bename, "eval_logits.0", mine, ref, 10, NMSE_EVAL);
    TCHECK(vt_nmse(ref, ref + 5, 5) > 1e-4, "torch's logits of the two clips are alike");
    free(ref);
    float *lf = vt_test_gread(info, "label.0", NULL);
    int32_t lab[2] = {(int32_t)lf[0], (int32_t)lf[1]};
    free(lf);
    int32_t *dlab = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, dlab, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dlab;
    vt_net_zero_grad(net);
    vt_net_forward(net, x, 2, 1);
    vt_net_loss(net, NULL, NULL, &tg, 0.5f);
    vt_net_backward(net);
    vt_backend_sync(be);
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    ref = vt_test_gread(info, "logits.0", NULL);
    double worst = vt_test_nmse_check(bename, "logits.0", mine, ref, 10, NMSE_TRAIN);
    free(ref);
    const int64_t np = vt_net_num_params(net);
    float *hg = vt_malloc((size_t)np * 4);
    be->i->to_host(be, hg, vt_net_grads(net), (size_t)np * 4);
    int ngrads = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        char name[192];
        snprintf(name, sizeof name, "grad.%s", ti->name);
        ref = vt_test_gread(info, name, NULL);
        worst = fmax(worst, vt_test_nmse_check(bename, name, hg + ti->offset, ref, ti->numel,
                                               NMSE_TRAIN));
        free(ref);
        ngrads++;
    }
    printf("vit_test %-8s eval NMSE %.2g; train step: logits and %d gradients, worst NMSE %.2g\n",
           bename, eval, ngrads, worst);
    free(hg);
    free(hx);
    vt_backend_free_ptr(be, dlab);
    vt_backend_free_ptr(be, x);
    unmake(&net);
}

/* Drop path 0.5 (vit_test's block 1 at p 0.5), clip seeds 72 and 73, whose draws drop
 * clip 0's attention branch and clip 1's MLP branch: PyTorch with the same scales
 * replayed gives the logits and gradients; eval is the identity (no drop path's logits). */
static void drop_path(const vt_ckpt_info *info, const char *bename) {
    char err[512];
    vt_backend *be = vt_backend_init(bename, 0, 0, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "vit_test", 5, 4, 32, 48);
    cfg.drop_path = 0.5f;
    vt_net *net = vt_net_init(&cfg, be, 2, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_test_load_state(net, info, "vit");
    int64_t xn;
    float *hx = vt_test_gread(info, "x", &xn), mine[10];
    float *x = vt_backend_alloc_x(be, (size_t)xn * 4, "input");
    be->i->to_device(be, x, hx, (size_t)xn * 4);
    vt_net_forward(net, x, 2, 0);
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    float *ref = vt_test_gread(info, "eval_logits.0", NULL);
    double e = vt_test_nmse_check(bename, "drop path eval_logits.0", mine, ref, 10, NMSE_EVAL);
    free(ref);
    float *sc = vt_test_gread(info, "dp.scales", NULL);
    TCHECK(sc[0] == 0 && sc[1] == 2 && sc[2] == 2 && sc[3] == 0, "torch's draws: %g %g %g %g",
           (double)sc[0], (double)sc[1], (double)sc[2], (double)sc[3]);
    free(sc);
    int32_t lab[2] = {1, 3};
    int32_t *dlab = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, dlab, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dlab;
    vt_net_zero_grad(net);
    vt_net_set_dropout_seed(net, 72);
    vt_net_forward(net, x, 2, 1);
    vt_net_loss(net, NULL, NULL, &tg, 0.5f);
    vt_net_backward(net);
    vt_backend_sync(be);
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    ref = vt_test_gread(info, "dp.logits.0", NULL);
    double worst = vt_test_nmse_check(bename, "dp.logits.0", mine, ref, 10, NMSE_TRAIN);
    free(ref);
    const int64_t np = vt_net_num_params(net);
    float *hg = vt_malloc((size_t)np * 4);
    be->i->to_host(be, hg, vt_net_grads(net), (size_t)np * 4);
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        char name[192];
        snprintf(name, sizeof name, "dp.grad.%s", ti->name);
        ref = vt_test_gread(info, name, NULL);
        worst = fmax(worst, vt_test_nmse_check(bename, name, hg + ti->offset, ref, ti->numel,
                                               NMSE_TRAIN));
        free(ref);
    }
    printf("vit_test %-8s drop path 0.5: eval the identity (NMSE %.2g), train step worst NMSE "
           "%.2g\n", bename, e, worst);
    free(hg);
    free(hx);
    vt_backend_free_ptr(be, dlab);
    vt_backend_free_ptr(be, x);
    unmake(&net);
}

/* The weights of the 4x32x48 golden model at 8x64x32 (32 tokens for 12): the position
 * table is rebuilt for the clip, as VideoMAE builds it: PyTorch's logits. */
static void other_size(const vt_ckpt_info *info) {
    char err[512];
    vt_net *net = make("vit_test", "cpu", 5, 8, 64, 32, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_backend *be = vt_net_backend(net);
    vt_test_load_state(net, info, "vit");
    int64_t xn;
    float *hx = vt_test_gread(info, "x_other", &xn), mine[10];
    float *x = vt_backend_alloc_x(be, (size_t)xn * 4, "input");
    be->i->to_device(be, x, hx, (size_t)xn * 4);
    vt_net_forward(net, x, 2, 0);
    be->i->to_host(be, mine, vt_net_logits(net, 0), sizeof mine);
    float *ref = vt_test_gread(info, "eval_logits_other.0", NULL);
    double e = vt_test_nmse_check("cpu", "eval_logits_other.0 (8x64x32)", mine, ref, 10, NMSE_EVAL);
    printf("vit_test cpu      8x64x32 from 4x32x48 weights: eval NMSE %.2g\n", e);
    free(ref);
    free(hx);
    vt_backend_free_ptr(be, x);
    unmake(&net);
}

/* The HF file and the encoder.-prefixed .pth load strictly into the golden parameters. */
static void names(const vt_ckpt_info *info, const char *dir) {
    static const char *const files[] = {"vit_test_hf.safetensors", "vit_test.pth"};
    for (int f = 0; f < 2; f++) {
        char err[512], path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        vt_net *net = make("vit_test", "cpu-ref", 5, 4, 32, 48, err, sizeof err);
        VT_CHECK(net, "%s", err);
        vt_init_report rep;
        int rc = vt_net_load_init(net, path, 1, stdout, &rep, err, sizeof err);
        TCHECK(rc == 0, "%s: %s", files[f], err);
        int same = rc == 0;
        for (int i = 0; same && i < vt_net_num_tensors(net); i++) {
            const vt_tensor_info *t = vt_net_tensor(net, i);
            float *h = vt_test_gread(info, t->name, NULL);
            same = !memcmp(h, vt_net_params(net) + t->offset, (size_t)t->numel * 4);
            TCHECK(same, "%s: %s differs from the golden state", files[f], t->name);
            free(h);
        }
        printf("names: %s: %d tensors loaded strictly, %s\n", files[f], rep.loaded,
               same ? "the golden values" : "DIFFERENT");
        unmake(&net);
    }
}

/* Layer-wise lr decay F (VideoMAE's, as docs/models.md): blocks.N (layer N+1 of D) at
 * F^(D - N), the patch embedding at F^(D+1), fc_norm and the head at 1 (times the head
 * multiplier); --freeze K puts the patch embedding and blocks 0..K-1 at 0. */
static void check_decay(const vt_net *net, int depth) {
    const float F = 0.75f;
    for (int freeze = -1; freeze <= 1; freeze += 2) {
        vt_optim_group g[VT_OPTIM_MAX_GROUPS];
        int ng = vt_finetune_groups(g, VT_OPTIM_MAX_GROUPS, net, freeze, 10.0f, F);
        /* patch embedding, D blocks, fc_norm, head; frozen: the first two merged at 0 */
        TCHECK(ng == (freeze < 0 ? depth + 3 : depth + 2), "%d groups (freeze %d)", ng, freeze);
        int bad = 0;
        for (int i = 0; i < vt_net_num_tensors(net); i++) {
            const vt_tensor_info *t = vt_net_tensor(net, i);
            int b = -1, layer = !strncmp(t->name, "patch_embed.", 12) ? 0 : depth + 1;
            if (sscanf(t->name, "blocks.%d.", &b) == 1)
                layer = b + 1;
            double want = pow(F, depth + 1 - layer) * (!strncmp(t->name, "head.", 5) ? 10 : 1);
            if (freeze >= 0 && layer <= freeze)
                want = 0;
            float got = -1;
            for (int k = 0; k < ng; k++)
                if (t->offset >= g[k].lo && t->offset < g[k].hi)
                    got = g[k].lr_mult;
            if (fabs(got - want) > 1e-6 * want + 1e-12 && bad++ < 3)
                printf("  %s: lr x%g, want x%g\n", t->name, (double)got, want);
        }
        TCHECK(bad == 0, "layer decay: %d tensors at the wrong lr (freeze %d)", bad, freeze);
    }
    printf("layer decay 0.75 over depth %d (and --freeze 1): every tensor's lr as VideoMAE's\n",
           depth);
}

/* videomae_vit_s/b: names, shapes and order against torch_vit.py list. */
static void listing(const char *py, const char *src, const char *model, int dim, int heads,
                    int64_t params) {
    char cmd[8192], err[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_vit.py' list %d 12 %d 400 16 224 224",
             py, src, dim, heads);
    FILE *p = popen(cmd, "r");
    VT_CHECK(p, "%s", cmd);
    vt_backend *be = vt_backend_init("cpu", 0, 1, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, 400, 16, 224, 224);
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    VT_CHECK(net, "%s", err);
    char line[512];
    int i = 0, bad = 0;
    long long tp = -1;
    while (fgets(line, sizeof line, p)) {
        char name[256], shape[128];
        if (sscanf(line, "params %lld", &tp) == 1)
            continue;
        if (sscanf(line, "%255s %127s", name, shape) != 2)
            continue;
        if (i >= vt_net_num_tensors(net)) {
            bad++;
            continue;
        }
        const vt_tensor_info *t = vt_net_tensor(net, i++);
        char mine[128] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(mine + strlen(mine), sizeof mine - strlen(mine), "%s%lld", d ? "," : "",
                     (long long)t->shape[d]);
        if (strcmp(name, t->name) || strcmp(shape, mine)) {
            if (bad++ < 3)
                printf("  %s: torch %s %s, vidtrain %s %s\n", model, name, shape, t->name, mine);
        }
    }
    TCHECK(pclose(p) == 0, "%s failed", cmd);
    TCHECK(bad == 0 && i == vt_net_num_tensors(net), "%s: %d of %d tensors differ from torch's",
           model, bad, vt_net_num_tensors(net));
    TCHECK(tp == params && vt_net_num_params(net) == params, "%s: %lld parameters (torch %lld, "
           "expected %lld)", model, (long long)vt_net_num_params(net), tp, (long long)params);
    printf("listing: %s: %d tensors, %lld parameters as torch's\n", model, i,
           (long long)vt_net_num_params(net));
    check_decay(net, 12);
    vt_net_free(&net);
    vt_backend_free(&be);
}

/* cfg.exact (what towers train with): 4 clips in one pass and in two passes of 2 give
 * the same gradient bits and the same logits (a clip's bits never depend on its batch). */
static void exact_passes(const vt_ckpt_info *info) {
    double ss;
    const int same = vt_test_exact_passes(info, "vit_test", "vit", 4, 32, 48, &ss);
    printf("exact: 4 clips in 1 pass and in 2 passes of 2: %s\n", same ? "the same bits" : "DIFFERENT");
    TCHECK(same, "exact sums: one pass and two passes differ");
    TCHECK(ss > 0, "exact sums: no gradient at all");
}

static void refusals(void) {
    char err[512];
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "videomae_vit_s", 4, 16, 200, 224);
    vt_net *net = vt_net_init(&cfg, be, 1, err, sizeof err);
    TCHECK(!net && strstr(err, "multiples of 16"), "200 high: %s", net ? "accepted" : err);
    vt_net_cfg_default(&cfg, "vit_test", 4, 4, 32, 32);
    cfg.precision = VT_PREC_BF16;
    net = vt_net_init(&cfg, be, 1, err, sizeof err);
    TCHECK(!net && strstr(err, "bf16") && strstr(err, "cuda"), "bf16: %s",
           net ? "accepted" : err);
    vt_backend_free(&be);
}

int main(void) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    refusals();
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    if (system(cmd) != 0) {
        printf("test_zoo_vit: SKIP: %s cannot import torch\n", py);
        return VT_TEST_SKIP;
    }
    const char *dir = vt_test_dir("zoo_vit");
    char path[4200], err[512];
    snprintf(path, sizeof path, "%s/vit_test.safetensors", dir);
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_vit.py' golden '%s'", py, src, path);
    VT_CHECK(system(cmd) == 0, "%s failed", cmd);
    vt_ckpt_info info;
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    run(&info, "cpu-ref");
    run(&info, "cpu");
    drop_path(&info, "cpu-ref");
    drop_path(&info, "cpu");
    other_size(&info);
    names(&info, dir);
    exact_passes(&info);
    vt_ckpt_info_free(&info);
    listing(py, src, "videomae_vit_s", 384, 6, 22033936);
    listing(py, src, "videomae_vit_b", 768, 12, 86534800);
    return vt_test_done("test_zoo_vit");
}
