/*
 * test_fuse.c: issue 45 step 3 — the network's fused batch-norm tails (models/net_fuse.c:
 * BN + ReLU and BN + add + ReLU through the backend's bn_apply_relu) change no bit. The
 * truth is the same network run op by one op: the backend's table copied with the fused
 * slot NULL. Both runs, same weights and clips, two training steps (forward, loss,
 * backward; the second forward reads the running statistics the first left) and an
 * evaluation forward, must give bitwise the same losses, logits, gradients and running
 * statistics. The fused slot is wrapped in a counter: R3D-18 must fuse its stem, the
 * first BN of each of its 8 blocks (BN + ReLU) and the second (BN + skip + ReLU), 17 a
 * forward, so a broken pattern match fails here rather than silently running unfused.
 * The backward's fused slots (relu_backward_skip: the residual's gradient without the
 * add's copy; bn_relu_backward_reduce: the ReLU's mask applied in the BN's reduction) are
 * counted the same way. Cases: r3d18 (2x8x8) on cpu (FP32) and on cpu-ref in BF16 (the
 * roundings of bn_apply and add in between), tiny (4x16x16) on cpu-ref (BN + ReLU only),
 * x3d_xs (4x32x32) on cpu (its bottleneck blocks: BN + ReLU, BN + skip + ReLU, and the
 * BN before SE and SiLU left alone), and r3d18 with exact sums (net_exact.c: the BN's
 * reduction stays unfused, the skip's write does not). The CUDA kernels are checked against cpu-ref by
 * test_cuda_ops_gpu.
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "tests/testutil.h"

#define NCLIP 2
#define NCLASS 4

static const vt_backend_i *real;
static int g_exact; /* nets built with exact sums (cfg.exact): the BN's reduce unfused */
static int fused_calls, skip_calls, bnrelu_calls;
static void counted(vt_backend *be, float *out, const float *x, const float *k,
                    const float *mean, const float *invstd, const float *gamma,
                    const float *beta, const float *res, int n, int c, int64_t s) {
    fused_calls++;
    real->bn_apply_relu(be, out, x, k, mean, invstd, gamma, beta, res, n, c, s);
}
static int copy_calls;
static void counted_copy(vt_backend *be, void *dst, const void *src, size_t bytes) {
    copy_calls++;
    real->copy(be, dst, src, bytes);
}
static void counted_skip(vt_backend *be, float *din, float *skip, const float *dout,
                         const float *out, int64_t n) {
    skip_calls++;
    real->relu_backward_skip(be, din, skip, dout, out, n);
}
static void counted_bnrelu(vt_backend *be, float *sdy, float *sdyx, float *dy,
                           const float *dout, const float *y, const float *x, const float *k,
                           const float *mean, const float *invstd, int n, int c, int64_t s) {
    bnrelu_calls++;
    real->bn_relu_backward_reduce(be, sdy, sdyx, dy, dout, y, x, k, mean, invstd, n, c, s);
}

typedef struct out {
    float loss[3], *logits, *grads, *bufs;
    int64_t np, nb;
} out;

static void run(const char *bename, const char *model, int t, vt_precision prec, int fused,
                out *o) {
    vt_backend *be = vt_backend_init(bename, 0, 1, 0);
    VT_CHECK(be, "backend %s", bename);
    static vt_backend_i table; /* the backend's own, with the fused slot counted or NULL */
    real = be->i;
    table = *be->i;
    table.bn_apply_relu = fused ? counted : NULL;
    table.relu_backward_skip = fused ? counted_skip : NULL;
    table.bn_relu_backward_reduce = fused ? counted_bnrelu : NULL;
    table.copy = counted_copy; /* the add's copies the fused backward saves */
    be->i = &table;
    char err[512];
    VT_CHECK(vt_backend_set_precision(be, prec, err, sizeof err) == 0, "%s", err);
    vt_net_cfg cfg;
    /* r3d18 at 2x8x8: seconds on cpu-ref; x3d_xs needs 32 (it strides space by 32) */
    const int side = !strcmp(model, "x3d_xs") ? 32 : t == 2 ? 8 : 16;
    vt_net_cfg_default(&cfg, model, NCLASS, t, side, side);
    cfg.precision = prec;
    cfg.exact = g_exact;
    vt_net *net = vt_net_init(&cfg, be, NCLIP, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_net_init_weights(net, 11);
    const int64_t xn = (int64_t)NCLIP * 3 * t * side * side;
    float *hx = vt_malloc((size_t)xn * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, 5);
    for (int64_t i = 0; i < xn; i++)
        hx[i] = (float)vt_rng_normal(&r);
    const int32_t lab[NCLIP] = {1, 3};
    float *x = vt_backend_alloc_x(be, (size_t)xn * sizeof(float), "input");
    int32_t *dl = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, x, hx, (size_t)xn * sizeof(float));
    be->i->to_device(be, dl, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dl;
    float loss_clip[NCLIP], head_loss[VT_MAX_HEADS];
    for (int s = 0; s < 3; s++) { /* two training steps' passes, then evaluation */
        vt_net_zero_grad(net);
        vt_net_forward(net, x, NCLIP, s < 2);
        vt_net_loss(net, loss_clip, head_loss, &tg, 1.0f / NCLIP);
        if (s < 2)
            vt_net_backward(net);
        o->loss[s] = head_loss[0];
        if (s == 1) { /* the gradients of the second step */
            o->np = vt_net_num_params(net);
            o->grads = vt_malloc((size_t)o->np * sizeof(float));
            be->i->to_host(be, o->grads, vt_net_grads(net), (size_t)o->np * sizeof(float));
        }
    }
    o->nb = vt_net_num_buffers(net);
    o->logits = vt_malloc(NCLIP * NCLASS * sizeof(float));
    o->bufs = vt_malloc((size_t)o->nb * sizeof(float));
    be->i->to_host(be, o->logits, vt_net_logits(net, 0), NCLIP * NCLASS * sizeof(float));
    be->i->to_host(be, o->bufs, vt_net_buffers(net), (size_t)o->nb * sizeof(float));
    vt_backend_free_ptr(be, x);
    vt_backend_free_ptr(be, dl);
    vt_net_free(&net);
    be->i = real;
    vt_backend_free(&be);
    free(hx);
}

/* per_forward fused tails a forward; per_backward: BN + ReLU tails whose ReLU's backward
 * the BN's reduce applies, and adds whose skip gradient the ReLU's backward writes. */
static void check(const char *bename, const char *model, int t, vt_precision prec,
                  int per_forward, int bnrelu_per_backward, int skip_per_backward) {
    out a, b;
    fused_calls = skip_calls = bnrelu_calls = copy_calls = 0;
    run(bename, model, t, prec, 1, &a);
    const int calls = fused_calls, copies = copy_calls;
    copy_calls = 0;
    run(bename, model, t, prec, 0, &b);
    /* the composed skip op copies once itself: the add's copy must be gone, not doubled */
    TCHECK(copies == copy_calls, "%s %s: %d copies fused, %d unfused (the add's copy of the "
           "skip gradient must give way to the ReLU's write)", model, bename, copies,
           copy_calls);
    const char *p = vt_precision_name(prec);
    TCHECK(calls == 3 * per_forward, "%s %s %s: %d fused calls in 3 forwards, expected %d",
           model, bename, p, calls, 3 * per_forward);
    TCHECK(bnrelu_calls == 2 * bnrelu_per_backward && skip_calls == 2 * skip_per_backward,
           "%s %s %s: in 2 backwards %d BN+ReLU reductions (expected %d), %d skip writes "
           "(expected %d)", model, bename, p, bnrelu_calls, 2 * bnrelu_per_backward,
           skip_calls, 2 * skip_per_backward);
    TCHECK(!memcmp(a.loss, b.loss, sizeof a.loss), "%s %s %s: losses %.9g %.9g %.9g vs %.9g "
           "%.9g %.9g", model, bename, p, a.loss[0], a.loss[1], a.loss[2], b.loss[0], b.loss[1],
           b.loss[2]);
    TCHECK(!memcmp(a.logits, b.logits, NCLIP * NCLASS * sizeof(float)),
           "%s %s %s: logits differ by %g", model, bename, p,
           vt_max_abs_diff(a.logits, b.logits, NCLIP * NCLASS));
    TCHECK(a.np == b.np && !memcmp(a.grads, b.grads, (size_t)a.np * sizeof(float)),
           "%s %s %s: gradients differ by %g", model, bename, p,
           vt_max_abs_diff(a.grads, b.grads, a.np));
    TCHECK(a.nb == b.nb && !memcmp(a.bufs, b.bufs, (size_t)a.nb * sizeof(float)),
           "%s %s %s: running statistics differ by %g", model, bename, p,
           vt_max_abs_diff(a.bufs, b.bufs, a.nb));
    printf("%s on %s, %s: %d fused tails a forward, %d + %d a backward, fused and unfused "
           "runs equal bit for bit\n", model, bename, p, calls / 3, bnrelu_calls / 2,
           skip_calls / 2);
    free(a.logits), free(a.grads), free(a.bufs);
    free(b.logits), free(b.grads), free(b.bufs);
}

int main(void) {
    /* r3d18: the stem and each block's first BN with their ReLU (9 a backward), each
     * block's BN + skip + ReLU (8) */
    check("cpu", "r3d18", 2, VT_PREC_FP32, 17, 9, 8);
    check("cpu-ref", "r3d18", 2, VT_PREC_BF16, 17, 9, 8);
    check("cpu-ref", "tiny", 4, VT_PREC_FP32, 4, 4, 0); /* conv-BN-ReLU x 4 */
    /* x3d_xs: the stem's, each of the 26 blocks' norm_a and the head's pre_norm with their
     * ReLU (28 a backward), each block's norm_c + skip + ReLU (26); norm_b goes to SE and
     * SiLU, unfused */
    check("cpu", "x3d_xs", 4, VT_PREC_FP32, 54, 28, 26);
    check("cpu-ref", "x3d_xs", 4, VT_PREC_BF16, 54, 28, 26);
    g_exact = 1; /* exact sums (CPU towers' default): the skip's write alone */
    check("cpu", "r3d18", 2, VT_PREC_FP32, 17, 0, 8);
    return vt_test_done("test_fuse");
}
