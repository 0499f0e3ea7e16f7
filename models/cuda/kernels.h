/*
 * kernels.h: the C-callable launchers of vidtrain's own CUDA kernels (models/cuda/
 * kernels_*.cu, one file per op family, sharing kernels_impl.cuh). Each launcher
 * enqueues its kernel(s) on the given stream, checks the launch, and returns without
 * synchronising. All float pointers are device memory.
 *
 * The host-side logic (the op table in backend_cuda.c, descriptors and algorithm caches
 * in cuda_conv.c, the allocator in cuda_alloc.c) lives elsewhere; this
 * header and kernels_*.cu hold arithmetic only. Every launcher defines the same
 * arithmetic as the cpu-ref op it backs (models/backend.h); semantics are documented
 * there, not repeated here. Launchers never allocate: scratch comes from the caller.
 * Activation arrays ([A] in backend.h) are void *: float, or bf16 (2 bytes an element)
 * under BF16, as the launcher's vt_cuk_dt says; every other float * is float.
 */
#ifndef VT_CUDA_KERNELS_H
#define VT_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "models/grad_gate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an activation array holds. */
typedef enum vt_cuk_dt { VT_CUK_F32 = 0, VT_CUK_BF16 = 1 } vt_cuk_dt;

/* Pooling geometry as the kernels see it (dims in T, H, W order). */
typedef struct vt_cuk_pool {
    int in[3], out[3], k[3], s[3], p[3];
} vt_cuk_pool;

/* ---- element-wise ---- */
/* VT_CUDA_VEC (docs/cuda.md): 1, the default, lets the memory-bound kernels (element-wise,
 * batch-norm apply, bias, optimizers) move 16 bytes an access where their arrays allow
 * (kernels_vec.cuh); 0 keeps every one on its scalar kernel. Same results either way, bit
 * for bit. Read once per process; vt_cuk_vec_set overrides it (0 or 1; -1: the variable
 * again) for a test that compares both, between launches. */
int vt_cuk_vec_enabled(void);
void vt_cuk_vec_set(int on);
void vt_cuk_fill(cudaStream_t st, float *x, float v, int64_t n);
void vt_cuk_scale(cudaStream_t st, float *x, float a, int64_t n);
void vt_cuk_axpy(cudaStream_t st, float *y, float a, const float *x, int64_t n);
void vt_cuk_round_even(cudaStream_t st, float *x, int64_t n);
void vt_cuk_add(cudaStream_t st, vt_cuk_dt dt, void *out, const void *a, const void *b,
                int64_t n);
/* dst (dt) = src rounded to dt; dst = src (dt) widened; dst += src (dt) widened. */
void vt_cuk_to_act(cudaStream_t st, vt_cuk_dt dt, void *dst, const float *src, int64_t n);
void vt_cuk_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src, int64_t n);
void vt_cuk_acc_from_act(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src, int64_t n);
/* Number of double partials vt_cuk_sumsq needs in `partials`. */
int vt_cuk_sumsq_parts(void);
/* *result (device double) = sum x^2, accumulated in double in a fixed order; add: *result
 * + that sum (the gradient gate's groups). */
void vt_cuk_sumsq(cudaStream_t st, double *result, double *partials, const float *x, int64_t n,
                  int add);
/* backend.h's grad_gate and copy_if_skip (one thread; a copy of bytes / 4 words). */
void vt_cuk_grad_gate(cudaStream_t st, vt_grad_gate *gate, float clip_norm, double skip_at,
                      int skip);
void vt_cuk_copy_if_skip(cudaStream_t st, float *dst, const float *src, int64_t n,
                         const vt_grad_gate *gate);

/* ---- activations, dropout ---- */
/* kernels_se.cu: X3D's SiLU, sigmoid and channel scale (backend.h semantics; rows = N*C,
 * sp = T*H*W; chscale_backward's ds first, so dx may be dout). */
void vt_cuk_silu_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int64_t n);
void vt_cuk_silu_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                          const void *in, int64_t n);
void vt_cuk_sigmoid_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int64_t n);
void vt_cuk_sigmoid_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                             const void *out, int64_t n);
void vt_cuk_chscale_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                            const void *s, int64_t rows, int64_t sp);
void vt_cuk_chscale_backward(cudaStream_t st, vt_cuk_dt dt, void *dx, void *ds, const void *dout,
                             const void *x, const void *s, int64_t rows, int64_t sp);
void vt_cuk_relu_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int64_t n);
void vt_cuk_relu_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                          const void *out, int64_t n);
/* scale = the kept value of the mask, computed by the caller exactly as cpu-ref does. */
void vt_cuk_dropout_forward(cudaStream_t st, vt_cuk_dt dt, void *out, float *mask, const void *in,
                            int64_t n, float p, float scale, uint64_t seed);
void vt_cuk_dropout_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                             const float *mask, int64_t n);

/* ---- batch norm (x: (N, C, S)) ---- */
/* Partials per channel the reductions use for this (n, s): scratch needs
 * 2 * c * vt_cuk_bn_parts(n, s) doubles. */
int vt_cuk_bn_parts(int n, int64_t s);
void vt_cuk_bn_stats(cudaStream_t st, vt_cuk_dt dt, float *sum, float *sumsq, const void *x,
                     const float *k, int n, int c, int64_t s, double *partials);
void vt_cuk_bn_finalize(cudaStream_t st, float *mean, float *invstd, float *running_mean,
                        float *running_var, const float *sum, const float *sumsq, const float *k,
                        int64_t count, int c, float momentum, float eps);
void vt_cuk_bn_apply(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x, const float *k,
                     const float *mean, const float *invstd, const float *gamma,
                     const float *beta, int n, int c, int64_t s);
/* relu(bn_apply(x) + res), res NULL: relu(bn_apply(x)), in one pass; bit for bit
 * vt_cuk_bn_apply, vt_cuk_add and vt_cuk_relu_forward in turn (kernels_fused.cu). */
void vt_cuk_bn_apply_relu(cudaStream_t st, vt_cuk_dt dt, void *out, const void *x,
                          const void *res, const float *k, const float *mean,
                          const float *invstd, const float *gamma, const float *beta, int n,
                          int c, int64_t s);
void vt_cuk_bn_backward_reduce(cudaStream_t st, vt_cuk_dt dt, float *sum_dy, float *sum_dy_xhat,
                               const void *dy, const void *x, const float *k, const float *mean,
                               const float *invstd, int n, int c, int64_t s, double *partials);
/* bn_relu_backward_reduce (backend.h): dy = relu_backward(dout, y) stored (dy may be
 * dout) and reduced in the same pass as vt_cuk_bn_backward_reduce's, the same order. */
void vt_cuk_bn_relu_backward_reduce(cudaStream_t st, vt_cuk_dt dt, float *sum_dy,
                                    float *sum_dy_xhat, void *dy, const void *dout,
                                    const void *y, const void *x, const float *k,
                                    const float *mean, const float *invstd, int n, int c,
                                    int64_t s, double *partials);
/* relu_backward_skip (backend.h): din and skip = relu_backward(dout, out), one pass. */
void vt_cuk_relu_backward_skip(cudaStream_t st, vt_cuk_dt dt, void *din, void *skip,
                               const void *dout, const void *out, int64_t n);
void vt_cuk_bn_backward_apply(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dy,
                              const void *x, const float *k, const float *mean,
                              const float *invstd,
                              const float *gamma, const float *sum_dy, const float *sum_dy_xhat,
                              int64_t count, int n, int c, int64_t s);

/* ---- pooling; planes = N * C ---- */
void vt_cuk_maxpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                            int64_t planes, vt_cuk_pool g);
/* din overwritten; each covering window's first maximum is recomputed from `in`, so no
 * argmax tensor has to be kept (it would be as large as the output, in no budget). */
void vt_cuk_maxpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                             const void *in, int64_t planes, vt_cuk_pool g);
void vt_cuk_avgpool_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                            int64_t planes, vt_cuk_pool g);
void vt_cuk_avgpool_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                             int64_t planes, vt_cuk_pool g);
void vt_cuk_gap_forward(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int64_t rows,
                        int64_t s);
void vt_cuk_gap_backward(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout, int64_t rows,
                         int64_t s);

/* ---- linear and conv helpers (the GEMMs are cuBLAS, the convs cuDNN) ---- */
/* out (n, f) += b (f) per row (float). */
void vt_cuk_add_bias_rows(cudaStream_t st, float *out, const float *b, int n, int f);
/* db (f) += sum over rows of dout (n, f), rows in order; under bf16 the sum is rounded to
 * bf16 before it is added (backend.h). */
void vt_cuk_colsum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout, int n, int f);
/* db (c) += sum over (n, s) of dout (n, c, s), rounded as colsum_acc: the conv bias. */
void vt_cuk_chansum_acc(cudaStream_t st, vt_cuk_dt dt, float *db, const void *dout, int n, int c,
                        int64_t s);
/* out (rows, s) = b[row % c] rounded to dt: the bias a GEMM or conv adds onto (beta = 1). */
void vt_cuk_fill_bias(cudaStream_t st, vt_cuk_dt dt, void *out, const float *b, int64_t rows,
                      int c, int64_t s);

/* ---- transformer ops (kernels_attn.cu, kernels_tokens.cu; backend.h's transformer
 *      section; cuda_attn.c runs the GEMMs): float launchers, then the _dt ones ---- */
/* Chunks of rows the column sums use: their scratch needs parts * cols doubles per sum. */
int vt_cuk_colsum_parts(int64_t rows, int64_t cols);
/* dst (cols) += sum over rows of src (rows, cols), double partials (parts * cols). */
void vt_cuk_colsum_acc_parts(cudaStream_t st, float *dst, const float *src, int64_t rows,
                             int64_t cols, double *partials);
/* LayerNorm's dgamma += sum dout * xhat, dbeta += sum dout (either NULL: skipped);
 * partials: 2 * parts * c doubles. */
void vt_cuk_colsum2_acc(cudaStream_t st, float *dgamma, float *dbeta, const float *dout,
                        const float *x, const float *mean, const float *invstd, int64_t rows,
                        int c, double *partials);
void vt_cuk_layernorm_forward(cudaStream_t st, float *out, float *mean, float *invstd,
                              const float *x, const float *gamma, const float *beta,
                              int64_t rows, int c, float eps);
/* partials as vt_cuk_colsum2_acc (unused when dgamma and dbeta are NULL). */
void vt_cuk_layernorm_backward(cudaStream_t st, float *din, float *dgamma, float *dbeta,
                               const float *dout, const float *x, const float *mean,
                               const float *invstd, const float *gamma, int64_t rows, int c,
                               double *partials);
void vt_cuk_gelu_forward(cudaStream_t st, float *out, const float *in, int64_t n);
void vt_cuk_gelu_backward(cudaStream_t st, float *din, const float *dout, const float *in,
                          int64_t n);
/* Attention's row kernels on a (B, bq, L) block of scaled logits s: B members of the GEMM
 * batch (the heads of a clip, or one head of several clips), row b*bq+i is query i0 + i of
 * member b. softmax: in place, lse[b * lse_bs + i] (lse: member 0's entry of query i0).
 * ds: s -> p = exp(s - lse) in place, dp (dout . v) -> p (dp - delta) * scale in place,
 * delta = dout_i . out_i, member b's query i at dout + b * o_bs + i * hd (out alike). */
void vt_cuk_attn_softmax(cudaStream_t st, float *s, float *lse, int64_t rows, int L, int bq,
                         int64_t lse_bs);
void vt_cuk_attn_ds(cudaStream_t st, float *s, float *dp, const float *lse, const float *dout,
                    const float *out, int64_t rows, int L, int bq, int D, int64_t hd,
                    int64_t o_bs, int64_t lse_bs, float scale);
void vt_cuk_transpose(cudaStream_t st, float *out, const float *in, int n, int a, int b);
void vt_cuk_token_mean_forward(cudaStream_t st, float *out, const float *in, int n, int L, int c);
void vt_cuk_token_mean_backward(cudaStream_t st, float *din, const float *dout, int n, int L,
                                int c);
void vt_cuk_add_bcast(cudaStream_t st, float *out, const float *in, const float *pos, int n,
                      int64_t per);
void vt_cuk_scale_rows(cudaStream_t st, float *out, const float *in, const float *scale, int n,
                       int64_t per);
/* The same ops on activations of type dt (the float launchers above are these with
 * VT_CUK_F32). BF16, as the CNN ops (backend.h): [A] arrays bf16, every float result
 * rounded to bf16 once where it is stored; statistics (LayerNorm's mean, invstd), lse,
 * scales, gamma, beta and their gradients float. LayerNorm's outputs are its double
 * result rounded to float, then to bf16 (PyTorch: an fp32 LayerNorm, then autocast's
 * cast). add_bcast reads pos rounded to bf16; colsum_acc_parts rounds its sum to bf16
 * before adding it (a bias gradient); colsum2 (dgamma, dbeta) does not. Attention's
 * rows read float logits s and dp and write p, ds into po, dso: FP32 in place (po = s,
 * dso = dp), BF16 into separate bf16 blocks of the same shape. */
void vt_cuk_colsum_acc_parts_dt(cudaStream_t st, vt_cuk_dt dt, float *dst, const void *src,
                                int64_t rows, int64_t cols, double *partials);
void vt_cuk_colsum2_acc_dt(cudaStream_t st, vt_cuk_dt dt, float *dgamma, float *dbeta,
                           const void *dout, const void *x, const float *mean,
                           const float *invstd, int64_t rows, int c, double *partials);
void vt_cuk_layernorm_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out, float *mean,
                                 float *invstd, const void *x, const float *gamma,
                                 const float *beta, int64_t rows, int c, float eps);
void vt_cuk_layernorm_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din, float *dgamma,
                                  float *dbeta, const void *dout, const void *x,
                                  const float *mean, const float *invstd, const float *gamma,
                                  int64_t rows, int c, double *partials);
void vt_cuk_gelu_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int64_t n);
void vt_cuk_gelu_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                             const void *in, int64_t n);
void vt_cuk_attn_softmax_dt(cudaStream_t st, vt_cuk_dt dt, const float *s, void *po, float *lse,
                            int64_t rows, int L, int bq, int64_t lse_bs);
void vt_cuk_attn_ds_dt(cudaStream_t st, vt_cuk_dt dt, const float *s, const float *dp, void *po,
                       void *dso, const float *lse, const void *dout, const void *out,
                       int64_t rows, int L, int bq, int D, int64_t hd, int64_t o_bs,
                       int64_t lse_bs, float scale);
/* BF16 attention backward: dst (bf16) [b * dst_bs + l * dst_ld + d] = src (float, (nb, L, D)
 * contiguous) rounded once: dK, dV accumulated over query blocks into their dqkv columns. */
void vt_cuk_attn_store16(cudaStream_t st, void *dst, const float *src, int nb, int L, int D,
                         int64_t dst_bs, int64_t dst_ld);
void vt_cuk_transpose_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int n, int a,
                         int b);
void vt_cuk_token_mean_forward_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in, int n,
                                  int L, int c);
void vt_cuk_token_mean_backward_dt(cudaStream_t st, vt_cuk_dt dt, void *din, const void *dout,
                                   int n, int L, int c);
void vt_cuk_add_bcast_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                         const float *pos, int n, int64_t per);
void vt_cuk_scale_rows_dt(cudaStream_t st, vt_cuk_dt dt, void *out, const void *in,
                          const float *scale, int n, int64_t per);

/* ---- losses ---- */
/* cw: (k) class weights or NULL (backend.h softmax_xent_w). */
void vt_cuk_softmax_xent(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits, float *prob,
                         const float *logits, const int32_t *label, const float *cw, int n, int k,
                         float smoothing, float grad_scale);
/* target (n, k): a distribution per clip (backend.h softmax_xent_soft). */
void vt_cuk_softmax_xent_soft(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits,
                              const float *logits, const float *target, int n, int k,
                              float grad_scale);
void vt_cuk_bce_logits(cudaStream_t st, vt_cuk_dt dt, float *loss, void *dlogits, float *prob,
                       const float *logits, const float *target, int n, int k, float grad_scale);

/* ---- optimizers (scalars that depend on the step are computed by the caller) ---- */
/* gate (device memory or NULL): backend.h's update contract (skip; g read clipped). */
void vt_cuk_sgd(cudaStream_t st, float *p, const float *g, float *buf, int64_t n, float lr,
                float momentum, float dampening, float wd, int nesterov, int first_step,
                const vt_grad_gate *gate);
void vt_cuk_rmsprop(cudaStream_t st, float *p, const float *g, float *sq, float *buf, int64_t n,
                    float lr, float alpha, float eps, float wd, float momentum,
                    const vt_grad_gate *gate);
/* step_size = lr / (1 - beta1^t), bc2_sqrt = sqrt(1 - beta2^t), decay = 1 - lr * wd. */
void vt_cuk_adamw(cudaStream_t st, float *p, const float *g, float *m, float *v, int64_t n,
                  float decay, float beta1, float beta2, float eps, float step_size,
                  float bc2_sqrt, const vt_grad_gate *gate);

/* ---- device-local reducer ---- */
#define VT_CUK_MAX_RANKS 32
/* For i in [lo, hi): s = bufs[0][i] + bufs[1][i] + ... (rank order, float), then every
 * bufs[r][i] = s. Ranges of different callers must not overlap. */
void vt_cuk_sum_ranks(cudaStream_t st, float *const *bufs, int nranks, int64_t lo, int64_t hi);
/* The same for int64 (xsum.h accumulators: an integer sum, exact in any order). */
void vt_cuk_sum_ranks_i64(cudaStream_t st, int64_t *const *bufs, int nranks, int64_t lo,
                          int64_t hi);

/* ---- exact sums (models/xsum.h, the arithmetic of models/xsum_arith.h) ---- */
/* acc (2n int64) += x (n) in units of 2^e0. */
void vt_cuk_xsum_fold(cudaStream_t st, int64_t *acc, const float *x, int64_t n, int init,
                      int e0);
/* out (n) = acc (2n int64) rounded to float. */
void vt_cuk_xsum_round(cudaStream_t st, float *out, const int64_t *acc, int64_t n, int e0);

#ifdef __cplusplus
}
#endif

#endif
