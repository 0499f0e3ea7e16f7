/*
 * test_fuse_gpu.c: the fused batch-norm tails on cuda (issue 45 step 3) change no bit
 * against cuda's own unfused ops — the promise of kernels_fused.cu and of kernels_bn.cu's
 * mode 2 (the same roundings, the same summation order):
 *   1. the ops alone, FP32 and BF16, at shapes whose BN reduction takes one part and
 *      several (S > 8192: chunks of a channel summed in order): relu_backward_skip against
 *      relu_backward and a copy; bn_relu_backward_reduce (in place, and into another
 *      buffer) against relu_backward then bn_backward_reduce; bn_apply_relu against
 *      bn_apply, add, relu_forward (test_cuda_ops_gpu also holds it to cpu-ref);
 *   2. whole networks (fuse_check.h, as test_fuse on the CPU): r3d18 at 4x16x16 and
 *      x3d_xs at 4x32x32, FP32 and BF16, two training steps and an evaluation forward
 *      with the fused slots and without: losses, logits, gradients and running statistics
 *      bit for bit, the fused calls counted. Both runs use cuDNN's heuristic and
 *      deterministic algorithms (VT_CUDA_CONV_ALGO=heuristic, VT_CUDA_DETERMINISTIC=1),
 *      so the convolutions are the same on both sides.
 * Exits 77 (skipped) without CUDA or a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_fuse_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "tests/fuse_check.h"

/* n floats (or bf16 under BF16) on G, from a host pattern with both signs. */
static float *dev_act(vt_backend *G, int64_t n, uint64_t seed) {
    float *h = vt_malloc((size_t)n * 4), *f = vt_backend_alloc_x(G, (size_t)n * 4, "f32");
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++)
        h[i] = (float)vt_rng_normal(&r) + (i % 7 == 0 ? 3.0f : 0.0f);
    G->i->to_device(G, f, h, (size_t)n * 4);
    float *a = vt_backend_alloc_x(G, (size_t)n * 4, "act");
    VT_OP(G, act_from_f32, a, f, n);
    vt_backend_free_ptr(G, f);
    free(h);
    return a;
}

/* The first `bytes` of two device buffers equal. */
static int dev_same(vt_backend *G, const void *a, const void *b, size_t bytes) {
    char *x = vt_malloc(bytes), *y = vt_malloc(bytes);
    G->i->to_host(G, x, a, bytes);
    G->i->to_host(G, y, b, bytes);
    int same = !memcmp(x, y, bytes);
    free(x), free(y);
    return same;
}

static void ops_case(vt_precision prec, int n, int c, int64_t s) {
    vt_backend *G = vt_backend_cuda_init(0, 0);
    char err[256];
    VT_CHECK(vt_backend_set_precision(G, prec, err, sizeof err) == 0, "%s", err);
    const int64_t nx = (int64_t)n * c * s;
    const size_t ab = (size_t)nx * (size_t)vt_precision_act_size(prec);
    float *x = dev_act(G, nx, 1), *y = dev_act(G, nx, 2), *dout = dev_act(G, nx, 3);
    float *res = dev_act(G, nx, 4), *a = dev_act(G, nx, 5), *b = dev_act(G, nx, 6);
    float *a2 = dev_act(G, nx, 7), *b2 = dev_act(G, nx, 8);
    /* per channel: k, mean, invstd, gamma, beta; the sums, twice */
    float *pc = vt_backend_alloc_x(G, 9 * (size_t)c * 4, "channels");
    float hc[9 * 4096];
    VT_CHECK(c <= 4096, "c %d", c);
    for (int i = 0; i < c; i++) {
        hc[i] = 0.25f * (float)(i % 5);                 /* k */
        hc[c + i] = 0.1f * (float)(i % 3) - 0.1f;       /* mean (relative to k) */
        hc[2 * c + i] = 0.5f + 0.01f * (float)(i % 11); /* invstd */
        hc[3 * c + i] = 1.0f - 0.02f * (float)(i % 13); /* gamma */
        hc[4 * c + i] = 0.03f * (float)(i % 7) - 0.1f;  /* beta */
    }
    G->i->to_device(G, pc, hc, 5 * (size_t)c * 4);
    float *k = pc, *mean = pc + c, *inv = pc + 2 * c, *gam = pc + 3 * c, *bet = pc + 4 * c;
    float *s1 = pc + 5 * c, *s2 = pc + 7 * c;
    const char *p = vt_precision_name(prec);

    /* relu_backward_skip = relu_backward + copy */
    VT_OP(G, relu_backward_skip, a, b, dout, y, nx);
    VT_OP(G, relu_backward, a2, dout, y, nx);
    G->i->copy(G, b2, a2, ab);
    TCHECK(dev_same(G, a, a2, ab) && dev_same(G, b, b2, ab),
           "%s n=%d c=%d s=%lld: relu_backward_skip differs from relu_backward + copy", p, n, c,
           (long long)s);
    /* bn_relu_backward_reduce into another buffer and in place = relu_backward + reduce */
    VT_OP(G, bn_relu_backward_reduce, s1, s1 + c, a, dout, y, x, k, mean, inv, n, c, s);
    VT_OP(G, relu_backward, a2, dout, y, nx);
    VT_OP(G, bn_backward_reduce, s2, s2 + c, a2, x, k, mean, inv, n, c, s);
    TCHECK(dev_same(G, a, a2, ab) && dev_same(G, s1, s2, 2 * (size_t)c * 4),
           "%s n=%d c=%d s=%lld: bn_relu_backward_reduce differs from relu_backward + "
           "bn_backward_reduce", p, n, c, (long long)s);
    G->i->copy(G, b, dout, ab);
    VT_OP(G, bn_relu_backward_reduce, s1, s1 + c, b, b, y, x, k, mean, inv, n, c, s);
    TCHECK(dev_same(G, b, a2, ab) && dev_same(G, s1, s2, 2 * (size_t)c * 4),
           "%s n=%d c=%d s=%lld: bn_relu_backward_reduce in place differs", p, n, c,
           (long long)s);
    /* bn_apply_relu (with and without res) = bn_apply, add, relu_forward */
    for (int r = 0; r < 2; r++) {
        VT_OP(G, bn_apply_relu, a, x, k, mean, inv, gam, bet, r ? res : NULL, n, c, s);
        VT_OP(G, bn_apply, a2, x, k, mean, inv, gam, bet, n, c, s);
        if (r)
            VT_OP(G, add, a2, a2, res, nx);
        VT_OP(G, relu_forward, a2, a2, nx);
        TCHECK(dev_same(G, a, a2, ab), "%s n=%d c=%d s=%lld: bn_apply_relu%s differs", p, n,
               c, (long long)s, r ? " with res" : "");
    }
    printf("%s n=%d c=%d s=%lld: the fused ops = cuda's own unfused ops, bit for bit\n", p, n,
           c, (long long)s);
    float *all[] = {x, y, dout, res, a, b, a2, b2, pc};
    for (size_t i = 0; i < VT_ARRAY_LEN(all); i++)
        vt_backend_free_ptr(G, all[i]);
    vt_backend_free(&G);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_fuse_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    vt_gpu_info gi;
    vt_cuda_device_query(0, &gi);
    printf("cuda:0 %s (cc %d.%d)\n", gi.name, gi.cc_major, gi.cc_minor);
    /* the same convolution algorithms in both runs of a network */
    setenv("VT_CUDA_CONV_ALGO", "heuristic", 1);
    setenv("VT_CUDA_DETERMINISTIC", "1", 1);
    for (int bf = 0; bf < 2; bf++) {
        const vt_precision prec = bf ? VT_PREC_BF16 : VT_PREC_FP32;
        ops_case(prec, 2, 3, 1000);      /* one part a clip */
        ops_case(prec, 3, 5, 3 * 8192 + 17); /* several parts, a short last one */
        vt_fuse_check("cuda", "r3d18", 4, prec, 17, 9, 8);
        vt_fuse_check("cuda", "x3d_xs", 4, prec, 54, 28, 26);
    }
    return vt_test_done("test_fuse_gpu");
}
#endif
