/*
 * kernels_mvit.h: the C-callable launchers of MViT's CUDA kernels (kernels_mvit.cu), for
 * cuda_mvit.c; kernels.h's rules (enqueue on the stream, check the launch, never allocate,
 * never synchronise; all pointers device memory). FP32 only: every pointer is float.
 * Layouts and semantics: backend.h's MViT section; the arithmetic is cpu-ref's
 * (models/cpu/cpu_mvit_impl.h), each kernel's exactness against it stated in the .cu.
 * Kept apart from kernels.h so the transformer kernels' header stays another area's.
 */
#ifndef VT_CUDA_KERNELS_MVIT_H
#define VT_CUDA_KERNELS_MVIT_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "models/cuda/kernels.h" /* vt_cuk_pool */

#ifdef __cplusplus
extern "C" {
#endif

/* The attention's geometry: the q and k grids, Lq = 1 + grid(q), Lk = 1 + grid(k),
 * KK = kt + kh + kw (a query row's relative terms), D the head dim, rel whether the
 * tables are there. */
typedef struct vt_cuk_mvgeo {
    int qthw[3], kthw[3];
    int Lq, Lk, KK, D, rel;
} vt_cuk_mvgeo;

/* The most relative terms a row may have (they sit in shared memory). */
#define VT_CUK_MVIT_MAXKK 4096

/* ---- mvit_pool (p->in the grid, p->out the pooled grid; w NULL: gather only) ---- */
void vt_cuk_mvit_pool_fwd(cudaStream_t st, float *out, const float *qkv, const float *w, int n,
                          int heads, int D, int part, const vt_cuk_pool *p);
void vt_cuk_mvit_pool_bwd_dx(cudaStream_t st, float *dqkv, const float *dout, const float *w,
                             int n, int heads, int D, int part, const vt_cuk_pool *p);
/* Chunks of windows dw's sums use (from the shape only): partials needs parts * D * K
 * doubles. */
int vt_cuk_mvit_pool_dw_parts(int n, int heads, int D, const vt_cuk_pool *p);
void vt_cuk_mvit_pool_bwd_dw(cudaStream_t st, float *dw, const float *dout, const float *qkv,
                             int n, int heads, int D, int part, const vt_cuk_pool *p,
                             double *partials);

/* ---- attention's row kernels on a (B, bq, Lk) block of logits s: row m * bq + r is
 *      query i0 + r of member m of the GEMM batch; member m's query i is q row
 *      (m * l_bs + i) (q: the walk step's first row), its lse lse[m * l_bs + i], its
 *      relative row sums arow[(m * l_bs + i) * KK ..]. ---- */
/* s (scaled q k^T) plus the relative terms -> probabilities in place; lse written. */
void vt_cuk_mvit_softmax(cudaStream_t st, float *s, float *lse, const float *q, const float *rh,
                         const float *rw, const float *rt, const vt_cuk_mvgeo *g, int B, int bq,
                         int i0, int64_t l_bs);
/* s (scaled q k^T) -> p (relative terms added, exp(s - lse)) in place; dp (dout v^T) ->
 * ds = p (dp - delta) in place (delta = sum p dp, unscaled); arow (rel only): each row's
 * sums of ds over the keys of each key coordinate. */
void vt_cuk_mvit_ds(cudaStream_t st, float *s, float *dp, float *arow, const float *lse,
                    const float *q, const float *rh, const float *rw, const float *rt,
                    const vt_cuk_mvgeo *g, int B, int bq, int i0, int64_t l_bs);
/* out (N, Lq, heads*D) += q (N, heads, Lq, D) on rows >= 1 (residual pooling). */
void vt_cuk_mvit_residual(cudaStream_t st, float *out, const float *q, int n, int heads,
                          const vt_cuk_mvgeo *g);
/* dq (N, heads, Lq, D) rows >= 1 += sum_x arow[x] table[dist] (rel) and dout's row
 * (residual); either may be off. */
void vt_cuk_mvit_dq_fix(cudaStream_t st, float *dq, const float *arow, const float *dout,
                        const float *rh, const float *rw, const float *rt, int n, int heads,
                        const vt_cuk_mvgeo *g, int residual);
/* Chunks the tables' gradient sums use (from the shape only): partials needs
 * parts * (sum over axes of q_a k_a) * D doubles. */
int vt_cuk_mvit_rel_parts(int n, int heads, const vt_cuk_mvgeo *g);
/* drt, drh, drw (each NULL: skipped) += sum over rows >= 1 of arow[x] q_i at the row
 * of the distance of (i, x), as fixed-order double sums. */
void vt_cuk_mvit_rel_grad(cudaStream_t st, float *drh, float *drw, float *drt, const float *arow,
                          const float *q, int n, int heads, const vt_cuk_mvgeo *g,
                          double *partials);

/* ---- token_maxpool (in (N, L, c) on grid p->in; out (N, Lo, c)) ---- */
void vt_cuk_token_maxpool_fwd(cudaStream_t st, float *out, const float *in, int n, int c,
                              const vt_cuk_pool *p);
/* arg: scratch of n * grid(p->out) * c ints (each window's first maximum). */
void vt_cuk_token_maxpool_bwd(cudaStream_t st, float *din, const float *dout, const float *in,
                              int n, int c, const vt_cuk_pool *p, int *arg);

#ifdef __cplusplus
}
#endif

#endif
