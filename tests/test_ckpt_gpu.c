/*
 * test_ckpt_gpu.c: activation checkpointing (cfg.ckpt, models/net_ckpt.c) on the cuda
 * backend, as test_ckpt.c checks it on the CPU: videomae_vit_s at 4x32x32 (8 tokens, all
 * 12 blocks), drop path 0.3, two passes of 2 clips accumulated into one gradient — the
 * logits, losses and every gradient the same bits with checkpointing as without (the
 * recompute runs the same kernels on the same inputs at the same addresses, and the cuda
 * ops are deterministic: no atomics in the transformer kernels, fixed cuBLAS
 * algorithms, and the patch embedding's convolution on cuDNN's heuristic, deterministic
 * algorithms: the two runs are two backends, and a timed search per backend may pick
 * another algorithm, or a non-deterministic one, in each), in float sums and in exact
 * sums; and the arenas vt_net_init allocates
 * shrink by what the memory plan says a clip saves. Ready for the first GPU run: skips
 * (77) without a GPU or in a build without CUDA. TF32 stays off.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_ckpt_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "base/common.h"
#include "models/cuda/cuda_info.h"
#include "models/net.h"
#include "models/registry.h"

typedef struct run_out {
    float *grads;
    int64_t np;
    float logits[2][10];
    float loss[2][2];
    int64_t arenas; /* bytes vt_net_init took */
} run_out;

static int run(run_out *o, int ckpt, int exact) {
    memset(o, 0, sizeof *o);
    char err[512];
    vt_backend *be = vt_backend_init("cuda", 0, 0, 0);
    TCHECK(be != NULL, "no cuda backend");
    if (!be)
        return -1;
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "videomae_vit_s", 5, 4, 32, 32);
    cfg.drop_path = 0.3f;
    cfg.ckpt = ckpt;
    cfg.exact = exact;
    const int n = 2;
    const int64_t before = be->in_use;
    vt_net *net = vt_net_init(&cfg, be, n, err, sizeof err);
    TCHECK(net != NULL, "%s", err);
    if (!net) {
        vt_backend_free(&be);
        return -1;
    }
    o->arenas = be->in_use - before;
    vt_net_init_weights(net, 7);
    const int64_t per = 3LL * 4 * 32 * 32;
    float *hx = vt_malloc((size_t)(per * n) * sizeof(float));
    float *x = vt_backend_alloc_x(be, (size_t)(per * n) * sizeof(float), "clips");
    int32_t lab[4] = {1, 3, 0, 4};
    int32_t *dl = vt_backend_alloc_x(be, sizeof lab, "labels");
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dl;
    vt_net_zero_grad(net);
    for (int p = 0; p < 2; p++) {
        for (int64_t i = 0; i < per * n; i++)
            hx[i] = (float)(vt_hash64(((uint64_t)p << 40) + (uint64_t)i) >> 40) / 8388608.0f - 1.0f;
        be->i->to_device(be, x, hx, (size_t)(per * n) * sizeof(float));
        be->i->to_device(be, dl, lab + 2 * p, (size_t)n * sizeof(int32_t));
        vt_net_set_dropout_seed(net, 1000 + 17 * (uint64_t)p);
        vt_net_forward(net, x, n, 1);
        vt_net_loss(net, o->loss[p], NULL, &tg, 0.25f);
        be->i->to_host(be, o->logits[p], vt_net_logits(net, 0), (size_t)n * 5 * sizeof(float));
        vt_net_backward(net);
    }
    if (exact)
        vt_net_round_grads(net);
    vt_backend_sync(be);
    o->np = vt_net_num_params(net);
    o->grads = vt_malloc((size_t)o->np * sizeof(float));
    be->i->to_host(be, o->grads, vt_net_grads(net), (size_t)o->np * sizeof(float));
    free(hx);
    vt_backend_free_ptr(be, x);
    vt_backend_free_ptr(be, dl);
    vt_net_free(&net);
    vt_backend_free(&be);
    return 0;
}

static void bits(int exact) {
    run_out off, on;
    if (run(&off, 0, exact) || run(&on, 1, exact))
        return;
    TCHECK(off.np == on.np && !memcmp(off.grads, on.grads, (size_t)off.np * sizeof(float)) &&
           !memcmp(off.logits, on.logits, sizeof off.logits) &&
           !memcmp(off.loss, on.loss, sizeof off.loss),
           "cuda%s: gradients, logits or losses differ with checkpointing",
           exact ? " (exact sums)" : "");
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "videomae_vit_s", 5, 4, 32, 32);
    cfg.exact = exact;
    vt_memplan mp[2];
    char err[256];
    for (int c = 0; c < 2; c++) {
        cfg.ckpt = c;
        VT_CHECK(vt_memplan_build(&mp[c], &cfg, 0, err, sizeof err) == 0, "%s", err);
    }
    /* the input clips and targets the plan's per-clip bytes hold are the caller's, the
     * same in both: the arenas differ by the plan's difference */
    const int64_t planned = 2 * (mp[0].bytes_per_clip - mp[1].bytes_per_clip);
    TCHECK(off.arenas - on.arenas == planned, "cuda arenas shrank by %lld bytes, plan %lld",
           (long long)(off.arenas - on.arenas), (long long)planned);
    printf("cuda%s videomae_vit_s 4x32x32, drop path 0.3, 2 passes of 2 clips: the same bits "
           "with and without checkpointing; arenas %lld -> %lld bytes\n",
           exact ? " exact" : "", (long long)off.arenas, (long long)on.arenas);
    vt_memplan_free(&mp[0]);
    vt_memplan_free(&mp[1]);
    free(off.grads);
    free(on.grads);
}

int main(void) {
    if (vt_cuda_device_count() == 0) {
        printf("test_ckpt_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    unsetenv("VT_TF32");
    /* the same convolution algorithms in both runs, each deterministic (see the top) */
    setenv("VT_CUDA_CONV_ALGO", "heuristic", 1);
    setenv("VT_CUDA_DETERMINISTIC", "1", 1);
    bits(0);
    bits(1);
    return vt_test_done("test_ckpt_gpu");
}
#endif
