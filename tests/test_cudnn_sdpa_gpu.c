/*
 * test_cudnn_sdpa_gpu.c: a PROBE, not yet a path of vidtrain — would cuDNN's fused (flash)
 * attention take the transformers' bf16 attention? Issue 44 wants cuDNN's SDPA where its
 * support check accepts a shape, with cuda_attn.c's bf16 path (cuBLAS GEMMs and our row
 * kernels) as the fallback; before wiring it in, this asks the GPU at hand.
 *   For each shape — vit_test (N 2, L 12, H 2, D 24), ViT-S at 8x112 (L 196) and 16x224
 *   (L 1568, H 6, D 64), ViT-B at 16x224 (H 12) — in vidtrain's layouts (q, k, v read in
 *   place from qkv (N, L, 3, H, D): strides (3 L H D, D, 3 H D, 1); out and dout (N, L, H,
 *   D); the float log-sum-exp (N, H, L)), bf16, scale 1/sqrt(D) by value, it builds the
 *   backend API's native SDPA forward and backward operations
 *   (CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR, cuDNN 9), asks heuristics mode A for
 *   engine configurations and finalizes an execution plan from each in turn until one
 *   takes: "supported (engine config i of n, workspace W)", or cuDNN's reason.
 * It fails only when a tensor descriptor does not finalize (a malformed description:
 * ours); what cuDNN answers after that is the probe's report, printed, not judged — so
 * read its output (gpu-check.sh keeps it with the GPU tests' logs). Nothing is run.
 * Skips (77) without CUDA, without a GPU, or below compute capability 8.0 (no bf16).
 * NOT YET RUN ON A GPU: written against cudnn_graph.h of cuDNN 9.19 without one.
 */
#include <stdio.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_cudnn_sdpa_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include <stdbool.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

typedef cudnnBackendDescriptor_t desc_t;

static cudnnHandle_t handle;

/* cuDNN's last error message, or its status name. */
static const char *why(cudnnStatus_t st) {
    static char msg[512];
    cudnnGetLastErrorString(msg, sizeof msg);
    return msg[0] ? msg : cudnnGetErrorString(st);
}

/* A tensor descriptor of 4 dims; 0 or cuDNN's status. */
static cudnnStatus_t tensor(desc_t *t, int64_t uid, cudnnDataType_t dt, const int64_t dim[4],
                            const int64_t str[4], int by_value) {
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_TENSOR_DESCRIPTOR, t);
    const int64_t align = by_value ? 4 : 16;
    const bool bv = true;
    if (!st)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    if (!st)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim);
    if (!st)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str);
    if (!st)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (!st)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                      &align);
    if (!st && by_value)
        st = cudnnBackendSetAttribute(*t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &bv);
    if (!st)
        st = cudnnBackendFinalize(*t);
    return st;
}

static cudnnStatus_t set_desc(desc_t d, cudnnBackendAttributeName_t a, desc_t v) {
    return cudnnBackendSetAttribute(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v);
}

/* The graph of one operation, heuristics, and the first plan that finalizes: prints the
 * answer. */
static void ask(const char *what, desc_t op) {
    desc_t graph = NULL, heur = NULL;
    cudnnStatus_t st = cudnnBackendFinalize(op);
    if (!st)
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &graph);
    if (!st)
        st = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                      &handle);
    if (!st)
        st = set_desc(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
    if (!st)
        st = cudnnBackendFinalize(graph);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    if (!st)
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur);
    if (!st)
        st = set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    if (!st)
        st = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                      &mode);
    if (!st)
        st = cudnnBackendFinalize(heur);
    int64_t n = 0;
    if (!st)
        st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
    if (st) {
        printf("  %-34s not supported: %s\n", what, why(st));
    } else if (n <= 0) {
        printf("  %-34s not supported: heuristics offer no engine config\n", what);
    } else {
        desc_t *cfg = calloc((size_t)n, sizeof *cfg);
        int64_t got = 0;
        for (int64_t i = 0; i < n && !st; i++)
            st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[i]);
        if (!st)
            st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got, cfg);
        cudnnStatus_t last = st;
        int64_t ok = -1, ws = 0;
        for (int64_t i = 0; !st && i < got && ok < 0; i++) {
            desc_t plan = NULL;
            last = cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
            if (!last)
                last = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                                CUDNN_TYPE_HANDLE, 1, &handle);
            if (!last)
                last = set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg[i]);
            if (!last)
                last = cudnnBackendFinalize(plan);
            if (!last) {
                int64_t one = 0;
                ok = i;
                cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                         CUDNN_TYPE_INT64, 1, &one, &ws);
            }
            if (plan)
                cudnnBackendDestroyDescriptor(plan);
        }
        if (ok >= 0)
            printf("  %-34s SUPPORTED (engine config %lld of %lld, workspace %lld bytes)\n",
                   what, (long long)ok + 1, (long long)got, (long long)ws);
        else
            printf("  %-34s not supported: %lld engine configs, none finalizes (%s)\n", what,
                   (long long)got, why(last));
        for (int64_t i = 0; i < n; i++)
            if (cfg[i])
                cudnnBackendDestroyDescriptor(cfg[i]);
        free(cfg);
    }
    if (heur)
        cudnnBackendDestroyDescriptor(heur);
    if (graph)
        cudnnBackendDestroyDescriptor(graph);
}

/* One shape: the forward and the backward asked. */
static void probe(const char *name, int64_t N, int64_t L, int64_t H, int64_t D) {
    printf("%s: N %lld L %lld H %lld D %lld, bf16\n", name, (long long)N, (long long)L,
           (long long)H, (long long)D);
    const int64_t ld3 = 3 * H * D, hd = H * D;
    const int64_t qd[4] = {N, H, L, D}, qs[4] = {L * ld3, D, ld3, 1}; /* q, k, v in qkv */
    const int64_t od[4] = {N, H, L, D}, os[4] = {L * hd, D, hd, 1};   /* out, dout */
    const int64_t sd[4] = {N, H, L, 1}, ss[4] = {H * L, L, 1, 1};      /* lse, float */
    const int64_t one[4] = {1, 1, 1, 1};
    enum { Q = 1, K, V, O, STATS, SCALE, DO, DQ, DK, DV, NT };
    desc_t t[NT] = {0};
    const struct { int uid; cudnnDataType_t dt; const int64_t *d, *s; int bv; } spec[] = {
        {Q, CUDNN_DATA_BFLOAT16, qd, qs, 0},  {K, CUDNN_DATA_BFLOAT16, qd, qs, 0},
        {V, CUDNN_DATA_BFLOAT16, qd, qs, 0},  {O, CUDNN_DATA_BFLOAT16, od, os, 0},
        {STATS, CUDNN_DATA_FLOAT, sd, ss, 0}, {SCALE, CUDNN_DATA_FLOAT, one, one, 1},
        {DO, CUDNN_DATA_BFLOAT16, od, os, 0}, {DQ, CUDNN_DATA_BFLOAT16, qd, qs, 0},
        {DK, CUDNN_DATA_BFLOAT16, qd, qs, 0}, {DV, CUDNN_DATA_BFLOAT16, qd, qs, 0},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof spec / sizeof *spec; i++) {
        cudnnStatus_t st = tensor(&t[spec[i].uid], spec[i].uid, spec[i].dt, spec[i].d, spec[i].s,
                                  spec[i].bv);
        TCHECK(!st, "%s: tensor %d does not finalize: %s", name, spec[i].uid, why(st));
        ok &= !st;
    }
    if (ok) {
        desc_t fwd = NULL, bwd = NULL;
        cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR,
                                                        &fwd);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, t[Q]);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, t[K]);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, t[V]);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, t[O]);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, t[STATS]);
        if (!st)
            st = set_desc(fwd, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, t[SCALE]);
        if (st)
            printf("  %-34s not supported: %s\n", "forward (O, lse)", why(st));
        else
            ask("forward (O, lse)", fwd);
        st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR, &bwd);
        const struct { cudnnBackendAttributeName_t a; int uid; } b[] = {
            {CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, Q},         {CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, K},
            {CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, V},         {CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, O},
            {CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, STATS}, {CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, SCALE},
            {CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, DO},      {CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, DQ},
            {CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, DK},       {CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, DV},
        };
        for (size_t i = 0; i < sizeof b / sizeof *b && !st; i++)
            st = set_desc(bwd, b[i].a, t[b[i].uid]);
        if (st)
            printf("  %-34s not supported: %s\n", "backward (dQ, dK, dV)", why(st));
        else
            ask("backward (dQ, dK, dV)", bwd);
        if (fwd)
            cudnnBackendDestroyDescriptor(fwd);
        if (bwd)
            cudnnBackendDestroyDescriptor(bwd);
    }
    for (int i = 0; i < NT; i++)
        if (t[i])
            cudnnBackendDestroyDescriptor(t[i]);
}

int main(void) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("test_cudnn_sdpa_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major < 8) {
        printf("test_cudnn_sdpa_gpu: compute capability below 8.0 (no bf16): skipping\n");
        return VT_TEST_SKIP;
    }
    cudnnStatus_t st = cudnnCreate(&handle);
    TCHECK(!st, "cudnnCreate: %s", cudnnGetErrorString(st));
    if (st)
        return vt_test_done("test_cudnn_sdpa_gpu");
    printf("cuDNN %zu on %s (compute capability %d.%d): the native SDPA operations\n",
           cudnnGetVersion(), p.name, p.major, p.minor);
    probe("vit_test 4x32x48", 2, 12, 2, 24);
    probe("videomae_vit_s 8x112", 4, 196, 6, 64);
    probe("videomae_vit_s 16x224", 8, 1568, 6, 64);
    probe("videomae_vit_b 16x224", 8, 1568, 12, 64);
    cudnnDestroy(handle);
    return vt_test_done("test_cudnn_sdpa_gpu");
}
#endif
