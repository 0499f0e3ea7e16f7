/*
 * kernels_mvit.h: the C-callable launchers of MViT's CUDA kernels (kernels_mvit.cu), for
 * cuda_mvit.c; kernels.h's rules (enqueue on the stream, check the launch, never allocate,
 * never synchronise; all pointers device memory). The activations (void *) are float or
 * bf16 as the launcher's vt_cuk_dt says (kernels.h); every float * is float whatever the
 * precision. Layouts and semantics: backend.h's MViT section; the arithmetic is cpu-ref's
 * (models/cpu/cpu_mvit_impl.h), each kernel's exactness against it stated in the .cu
 * files (kernels_mvit.cu, kernels_mvit_tmax.cu).
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
void vt_cuk_mvit_pool_fwd(cudaStream_t st, vt_cuk_dt dt, void *out, const void *qkv,
                          const float *w, int n, int heads, int D, int part, const vt_cuk_pool *p);
void vt_cuk_mvit_pool_bwd_dx(cudaStream_t st, vt_cuk_dt dt, void *dqkv, const void *dout,
                             const float *w, int n, int heads, int D, int part,
                             const vt_cuk_pool *p);
/* Chunks of windows dw's sums use (from the shape only): partials needs parts * D * K
 * doubles. */
int vt_cuk_mvit_pool_dw_parts(int n, int heads, int D, const vt_cuk_pool *p);
/* dw (float) += the float sum, whatever dt (a parameter gradient: not rounded to bf16). */
void vt_cuk_mvit_pool_bwd_dw(cudaStream_t st, vt_cuk_dt dt, float *dw, const void *dout,
                             const void *qkv, int n, int heads, int D, int part,
                             const vt_cuk_pool *p, double *partials);

/* ---- attention's row kernels on a (B, bq, Lk) block of logits s: row m * bq + r is
 *      query i0 + r of member m of the GEMM batch; member m's query i is q row
 *      (m * l_bs + i) (q: the walk step's first row), its lse lse[m * l_bs + i], its
 *      relative row sums arow[(m * l_bs + i) * KK ..]. ---- */
/* s (scaled q k^T, float) plus the relative terms -> the probabilities into p (FP32: p is
 * s, in place; BF16: a (B, bq, Lk) bf16 block, each rounded once); lse written. */
void vt_cuk_mvit_softmax(cudaStream_t st, vt_cuk_dt dt, float *s, void *p, float *lse,
                         const void *q, const float *rh, const float *rw, const float *rt,
                         const vt_cuk_mvgeo *g, int B, int bq, int i0, int64_t l_bs);
/* s (scaled q k^T) -> p (relative terms added, exp(s - lse)) in place; dp (dout v^T) ->
 * ds = p (dp - delta) in place (delta = sum p dp, unscaled), both float; p and ds also
 * into p and ds (FP32: s and dp themselves; BF16: bf16 blocks, each rounded once, for the
 * GEMMs); arow (rel only): each row's sums of the float ds over the keys of each key
 * coordinate. */
void vt_cuk_mvit_ds(cudaStream_t st, vt_cuk_dt dt, float *s, float *dp, void *p, void *ds,
                    float *arow, const float *lse, const void *q, const float *rh,
                    const float *rw, const float *rt, const vt_cuk_mvgeo *g, int B, int bq,
                    int i0, int64_t l_bs);
/* FP32: out (N, Lq, heads*D) += q (N, heads, Lq, D) on rows >= 1 (residual pooling). */
void vt_cuk_mvit_residual(cudaStream_t st, float *out, const float *q, int n, int heads,
                          const vt_cuk_mvgeo *g);
/* FP32: dq (N, heads, Lq, D) rows >= 1 += sum_x arow[x] table[dist] (rel) and dout's row
 * (residual); either may be off. */
void vt_cuk_mvit_dq_fix(cudaStream_t st, float *dq, const float *arow, const float *dout,
                        const float *rh, const float *rw, const float *rt, int n, int heads,
                        const vt_cuk_mvgeo *g, int residual);
/* BF16 (out, q, dout, dq bf16), one block of the walk step as the row kernels': out
 * (member m's query i at out + m o_bs + i C, C = heads D) = o (B, b, D) float, the P V
 * GEMM's, + q's row (residual, rows >= 1), rounded once; dq (member m's query i at
 * (m l_bs + i) D) = dqb (B, b, D) float, the dS K GEMM's, + dq_fix's terms, rounded once. */
void vt_cuk_mvit_out16(cudaStream_t st, void *out, const float *o, const void *q,
                       const vt_cuk_mvgeo *g, int B, int b, int i0, int64_t l_bs, int64_t o_bs,
                       int64_t C, int residual);
void vt_cuk_mvit_dq16(cudaStream_t st, void *dq, const float *dqb, const float *arow,
                      const void *dout, const float *rh, const float *rw, const float *rt,
                      const vt_cuk_mvgeo *g, int B, int b, int i0, int64_t l_bs, int64_t o_bs,
                      int64_t C, int residual);
/* Chunks the tables' gradient sums use (from the shape only): partials needs
 * parts * (sum over axes of q_a k_a) * D doubles. */
int vt_cuk_mvit_rel_parts(int n, int heads, const vt_cuk_mvgeo *g);
/* drt, drh, drw (each NULL: skipped) += sum over rows >= 1 of arow[x] q_i at the row
 * of the distance of (i, x), as fixed-order double sums. */
void vt_cuk_mvit_rel_grad(cudaStream_t st, vt_cuk_dt dt, float *drh, float *drw, float *drt,
                          const float *arow, const void *q, int n, int heads,
                          const vt_cuk_mvgeo *g, double *partials);

/* ---- token_maxpool (in (N, L, c) on grid p->in; out (N, Lo, c); kernels_mvit_tmax.cu) ---- */
void vt_cuk_token_maxpool_fwd(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int n,
                              int c, const vt_cuk_pool *p);
/* arg: scratch of n * grid(p->out) * c ints (each window's first maximum). */
void vt_cuk_token_maxpool_bwd(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                              const void *in, int n, int c, const vt_cuk_pool *p, int *arg);

#ifdef __cplusplus
}
#endif

#endif
