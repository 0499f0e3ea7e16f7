/*
 * cuda_ctx.c: the helpers both op files of the CUDA backend (backend_cuda.c, cuda_conv.c)
 * use on its context (backend_cuda_impl.h): getting it with the device made current,
 * growing its internal buffers inside the budget, and the BF16 staging of weights. They
 * live apart from the op table so that backend_cuda.c calls cuda_conv.c and never the
 * other way round.
 *
 * It must never hold state of its own or run an op beyond the staging conversion: the
 * context is the backend's.
 */
#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels.h"

cu_ctx *vt_cuda_ctx(const vt_backend *be) {
    VT_CHECK(be && be->kind == VT_BACKEND_CUDA, "not a cuda backend");
    return (cu_ctx *)be->ctx;
}

/* Every op starts here: ops may be called from any thread, and the CUDA runtime's current
 * device is per thread. */
cu_ctx *vt_cuda_enter(vt_backend *be) {
    cu_ctx *c = vt_cuda_ctx(be);
    CUDA_CHECK(cudaSetDevice(c->device));
    return c;
}

/* Internal buffers (workspace, scratch) go through vt_backend_alloc so they count against
 * the budget and show in the high-water mark like any tensor. Grows only; the old buffer
 * is returned to the cache (stream order makes that safe). */
void *vt_cuda_grow(vt_backend *be, void **buf, size_t *have, size_t need, const char *what) {
    if (need <= *have && *buf)
        return *buf;
    vt_backend_free_ptr(be, *buf);
    *buf = NULL;
    *have = 0;
    *buf = vt_backend_alloc_x(be, need, what);
    *have = need;
    return *buf;
}

/* BF16 staging (backend_cuda.c, "Precision"): a bf16 copy of n master weights, and room
 * for a bf16 weight gradient of n weights. */
void *vt_cuda_stage_w16(vt_backend *be, cu_ctx *c, const float *w, int64_t n) {
    void *w16 = vt_cuda_grow(be, &c->w16, &c->w16_bytes, (size_t)n * 2, "bf16 weights");
    vt_cuk_to_act(c->stream, VT_CUK_BF16, w16, w, n);
    return w16;
}
void *vt_cuda_stage_dw16(vt_backend *be, cu_ctx *c, int64_t n) {
    return vt_cuda_grow(be, &c->dw16, &c->dw16_bytes, (size_t)n * 2, "bf16 weight gradient");
}
