/*
 * test_pool_gpu.c: the cuda backend's maxpool3d (kernels_pool.cu) with NaN inputs against
 * cpu-ref (the truth; test_pool_nan holds cpu-ref to PyTorch's F.max_pool3d on NaNs): a NaN
 * anywhere in a window is its maximum, and the gradient goes to the tap the forward
 * returned (the first maximum, the last of several NaNs) — models/max_rule.h. Inputs from
 * three integers (windows tie) with about one value in 9 a NaN; dy uniform in [-1, 1].
 * Bit for bit (BIT_NAN: a NaN where cpu-ref has one, every other value the same bits):
 * the forward copies one input, the backward adds the same floats in the same (output)
 * order as cpu-ref's float sum. The finite cases are test_cuda_ops_gpu's. Also ReLU's NaN rule (relu_case).
 *
 * Skips (77) without a GPU or in a build without CUDA.
 */
#include <stdio.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_pool_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/cuda/cuda_info.h"
#include "tests/gpupair.h"

static void nan_case(const char *name, int n, int c, const int thw[3], vt_pool3d_p p) {
    printf("maxpool3d with NaNs: %s\n", name);
    int o[3];
    for (int d = 0; d < 3; d++)
        o[d] = vt_pool_out(thw[d], p.k[d], p.s[d], p.p[d], p.ceil_mode);
    const int64_t nin = (int64_t)n * c * thw[0] * thw[1] * thw[2];
    const int64_t nout = (int64_t)n * c * o[0] * o[1] * o[2];
    pair x = pmake_q(nin, 0, 0, 3, 9), y = pmake(nout, 0, 0), dy = pmake(nout, -1, 1);
    pair dx = pmake(nin, 0, 0);
    VT_OP(G, maxpool3d_forward, y.g, x.g, n, c, thw, &p);
    VT_OP(R, maxpool3d_forward, y.r, x.r, n, c, thw, &p);
    cmp("maxpool3d forward (NaNs propagate)", &y, BIT_NAN);
    VT_OP(G, maxpool3d_backward, dx.g, dy.g, x.g, n, c, thw, &p);
    VT_OP(R, maxpool3d_backward, dx.r, dy.r, x.r, n, c, thw, &p);
    cmp("maxpool3d backward (to the winning tap)", &dx, BIT);
    pfree(&x), pfree(&y), pfree(&dy), pfree(&dx);
}

/* ReLU with NaNs (backend.h relu_forward, relu_backward; test_pool_nan holds cpu-ref to
 * torch.relu): a NaN passes forward, a NaN output passes its gradient back; the fused
 * BN + ReLU tail (kernels_fused.cu) and the residual tail's backward (relu_backward_skip)
 * by the same rule. Inputs uniform in [-1, 1], about one in 9 a NaN. */
static void relu_case(int n, int c, int64_t s) {
    printf("relu with NaNs: %d x %d x %lld\n", n, c, (long long)s);
    const int64_t m = (int64_t)n * c * s;
    pair x = pmake_q(m, -1, 1, 0, 9), y = pmake(m, 0, 0), dy = pmake(m, -1, 1);
    pair dx = pmake(m, 0, 0), skip = pmake(m, 0, 0), t = pmake(m, 0, 0);
    pair mean = pmake(c, -0.5f, 0.5f), invstd = pmake(c, 0.5f, 2), gam = pmake(c, 0.5f, 1.5f);
    pair bet = pmake(c, -0.5f, 0.5f);
    VT_OP(G, relu_forward, y.g, x.g, m);
    VT_OP(R, relu_forward, y.r, x.r, m);
    cmp("relu forward (a NaN passes)", &y, BIT_NAN);
    VT_OP(G, relu_backward, dx.g, dy.g, y.g, m);
    VT_OP(R, relu_backward, dx.r, dy.r, y.r, m);
    cmp("relu backward (a NaN output passes dout)", &dx, BIT);
    VT_OP(G, relu_backward_skip, dx.g, skip.g, dy.g, y.g, m);
    VT_OP(R, relu_backward_skip, dx.r, skip.r, dy.r, y.r, m);
    cmp("relu_backward_skip: din", &dx, BIT);
    cmp("relu_backward_skip: skip", &skip, BIT);
    VT_OP(G, bn_apply_relu, t.g, x.g, NULL, mean.g, invstd.g, gam.g, bet.g, NULL, n, c, s);
    VT_OP(R, bn_apply_relu, t.r, x.r, NULL, mean.r, invstd.r, gam.r, bet.r, NULL, n, c, s);
    cmp("bn_apply_relu (fused; a NaN passes)", &t, BIT_NAN);
    pair *all[] = {&x, &y, &dy, &dx, &skip, &t, &mean, &invstd, &gam, &bet};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        pfree(all[i]);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_pool_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32");
    vt_rng_seed(&rng, 2323);
    R = vt_backend_cpu_ref_init(0);
    G = vt_backend_cuda_init(0, 0);
    nan_case("k2 s2", 2, 3, (const int[3]){4, 6, 6}, (vt_pool3d_p){{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, 0});
    nan_case("k3 s2 p1 (overlapping)", 2, 2, (const int[3]){5, 7, 7},
             (vt_pool3d_p){{3, 3, 3}, {2, 2, 2}, {1, 1, 1}, 0});
    nan_case("k3 s1 p1 (s3d branch)", 1, 3, (const int[3]){4, 6, 6},
             (vt_pool3d_p){{3, 3, 3}, {1, 1, 1}, {1, 1, 1}, 0});
    nan_case("k2 s2 p1 ceil_mode", 1, 3, (const int[3]){5, 6, 7},
             (vt_pool3d_p){{2, 2, 2}, {2, 2, 2}, {1, 1, 1}, 1});
    relu_case(2, 3, 4 * 6 * 6);
    vt_backend_free(&G);
    vt_backend_free(&R);
    return vt_test_done("test_pool_gpu");
}
#endif
