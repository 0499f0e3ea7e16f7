/*
 * test_mix_gpu.c: the CUDA soft-target loss (backend.h softmax_xent_soft, the loss mixup
 * and CutMix train through) against cpu-ref, FP32 and BF16 dlogits, for the first GPU run.
 * cpu-ref itself is checked against PyTorch in tests/test_mix.c. Skips (77) without a GPU
 * or in a build without CUDA.
 *
 * Tolerance: both sides compute in double and round once (the kernel is cpu_loss.c's loop,
 * one thread a clip); only libm's last ulp in exp/log differs: NMSE <= ~1e-14, 1e-12
 * catches any real error (a missing sum-of-targets term is NMSE ~1e-2). BF16 dlogits: both
 * round the same float to bf16, so the same bits but where that float sits on a rounding
 * boundary: at most one bf16 ulp anywhere, which is 2^-7 of the value at the bottom of a
 * binade (bf16 keeps 8 significant bits) and 2^-8 at its top: 2^-7 relative.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_mix_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "base/common.h"
#include "models/backend.h"
#include "models/bf16.h"
#include "models/cuda/cuda_info.h"
#include "models/registry.h"

static void run(vt_precision prec) {
    vt_backend *G = vt_backend_init("cuda", 0, 1, 0), *R = vt_backend_init("cpu-ref", 0, 1, 0);
    TCHECK(G && R, "backends");
    if (!G || !R)
        return;
    char err[256];
    TCHECK(vt_backend_set_precision(G, prec, err, sizeof err) == 0, "cuda: %s", err);
    TCHECK(vt_backend_set_precision(R, prec, err, sizeof err) == 0, "cpu-ref: %s", err);
    const int n = 7, k = 11;
    float z[7 * 11], t[7 * 11], loss_g[7], loss_r[7], dl_g[7 * 11], dl_r[7 * 11];
    vt_rng rng = {17};
    for (int i = 0; i < n * k; i++) {
        z[i] = (float)(3 * vt_rng_normal(&rng));
        t[i] = (float)vt_rng_uniform(&rng) * (i % 3 == 0);
    }
    float *zg = vt_backend_alloc_x(G, sizeof z, "z"), *tg = vt_backend_alloc_x(G, sizeof t, "t");
    float *lg = vt_backend_alloc_x(G, sizeof loss_g, "loss");
    float *dg = vt_backend_alloc_x(G, sizeof dl_g, "dl");
    G->i->to_device(G, zg, z, sizeof z);
    G->i->to_device(G, tg, t, sizeof t);
    memset(dl_r, 0, sizeof dl_r);
    VT_OP(G, softmax_xent_soft, lg, dg, zg, tg, n, k, 0.125f);
    VT_OP(R, softmax_xent_soft, loss_r, dl_r, z, t, n, k, 0.125f);
    G->i->to_host(G, loss_g, lg, sizeof loss_g);
    memset(dl_g, 0, sizeof dl_g);
    const int bf = prec == VT_PREC_BF16;
    G->i->to_host(G, dl_g, dg, (size_t)n * k * (bf ? 2 : 4));
    if (bf) { /* both hold bf16: widen for the comparison */
        vt_bf16 *a = (vt_bf16 *)(void *)dl_g, *b = (vt_bf16 *)(void *)dl_r;
        for (int i = n * k - 1; i >= 0; i--) {
            dl_g[i] = vt_bf16_to_f32(a[i]);
            dl_r[i] = vt_bf16_to_f32(b[i]);
        }
    }
    double el = vt_nmse(loss_g, loss_r, n), ed = vt_nmse(dl_g, dl_r, (int64_t)n * k);
    int far = 0;
    for (int i = 0; i < n * k; i++)
        far += fabsf(dl_g[i] - dl_r[i]) > fabsf(dl_r[i]) * 0x1p-7f + 1e-30f;
    printf("  %s: loss nmse %.2e, dlogits nmse %.2e (%d beyond a bf16 ulp)\n",
           bf ? "bf16" : "fp32", el, ed, far);
    TCHECK(el <= 1e-12, "loss nmse %g", el);
    TCHECK(bf ? far == 0 : ed <= 1e-12, "dlogits nmse %g, %d far", ed, far);
    vt_backend_free_ptr(G, zg), vt_backend_free_ptr(G, tg), vt_backend_free_ptr(G, lg);
    vt_backend_free_ptr(G, dg);
    vt_backend_free(&G);
    vt_backend_free(&R);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_mix_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    run(VT_PREC_FP32);
    run(VT_PREC_BF16);
    return vt_test_done("test_mix_gpu");
}
#endif
