/*
 * fuse_check.h: the comparison test_fuse (CPU backends) and test_fuse_gpu (cuda) share:
 * one network run twice on one backend, with the fused batch-norm tails of net_fuse.c
 * (backend.h bn_apply_relu, relu_backward_skip, bn_relu_backward_reduce, each call
 * counted) and with those slots NULL (the ops one by one, the truth): two training steps
 * and an evaluation forward must give bitwise the same losses, logits, gradients and
 * running statistics, the fused calls their expected counts, and as many copies (the
 * add's copy of the skip gradient gives way to the fused write, it is not doubled).
 */
#ifndef VT_TEST_FUSE_CHECK_H
#define VT_TEST_FUSE_CHECK_H

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

static inline void vt_fuse_run(const char *bename, const char *model, int t,
                               vt_precision prec, int fused, out *o) {
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
static inline void vt_fuse_check(const char *bename, const char *model, int t,
                                 vt_precision prec, int per_forward, int bnrelu_per_backward,
                                 int skip_per_backward) {
    out a, b;
    fused_calls = skip_calls = bnrelu_calls = copy_calls = 0;
    vt_fuse_run(bename, model, t, prec, 1, &a);
    const int calls = fused_calls, copies = copy_calls;
    copy_calls = 0;
    vt_fuse_run(bename, model, t, prec, 0, &b);
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


#endif
