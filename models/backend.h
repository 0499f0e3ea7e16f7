/*
 * backend.h: the op table every compute backend fills (docs/design.md §5.1;
 * docs/style.md §4, "opaque handle plus an op table", after ggml-backend-impl.h).
 *
 * A backend is a handle (vt_backend) holding its table (vt_backend_i), a private
 * context, and an allocator that enforces a memory budget. Three fill the table, each
 * with designated initializers (`.to_host = cpu_copy,`) so that a slot can never shift
 * onto its neighbour's function; registry.h builds them by name:
 *   cpu-ref  plain loops, obviously correct: the truth the others are tested against;
 *   cpu      vol2col + OpenBLAS sgemm, OpenMP elsewhere; deterministic;
 *   cuda     cuDNN / cuBLAS / own kernels (models/cuda/), one handle per device.
 *
 * Conventions, the same for every op and every backend:
 *   - all float pointers are backend memory (host memory for the CPU backends, device
 *     memory for cuda); outputs come first in every signature;
 *   - layouts are PyTorch's: activations (N, C, T, H, W) contiguous, conv weights
 *     (Cout, Cin, kT, kH, kW), linear weights (Out, In);
 *   - PARAMETER gradients (dw, db, dgamma, dbeta) ACCUMULATE (+=) so micro-batches and
 *     several heads add up; INPUT gradients (din) are OVERWRITTEN; din == NULL skips it;
 *   - n (the batch) may be 0: every op then does nothing, except that reductions
 *     (bn_stats, bn_backward_reduce) write zeros, the sum over nothing (a tower with no
 *     clips still walks the graph so that sync-BN collectives line up);
 *   - ops are issued in order on the backend's one stream; results are visible to the
 *     host after synchronize (a no-op on the CPU).
 *
 * Precision (vt_backend_set_precision; FP32 unless set):
 *   FP32  every float is an IEEE float32 and computed as such.
 *   TF32  as FP32, except that convolutions and linear GEMMs (attention's too) MAY round
 *         their inputs to TF32 on tensor cores (cuda on compute capability >= 8.0; a
 *         permission, like torch.backends.cudnn.allow_tf32: the CPU backends compute in
 *         FP32).
 *   BF16  mixed precision, the storage form of PyTorch autocast(bfloat16) for 3-D CNNs:
 *         ACTIVATIONS — the arguments marked [A] below: layer inputs and outputs, their
 *         gradients, logits' gradients — are bf16 arrays (models/bf16.h: 2 bytes an
 *         element, the float * type is then nominal: only the backend reads them, as
 *         uint16). Every op that writes an [A] array rounds its float result to nearest
 *         even bf16 once. conv3d and linear read w and b (float32 master copies) rounded
 *         to bf16, multiply bf16 by bf16 and accumulate in float32 (or wider), and round
 *         each call's weight and bias gradients to bf16 before ACCUMULATING them into the
 *         float32 dw/db. Everything else is float32: batch-norm statistics, gamma/beta and
 *         their gradients, running statistics, dropout masks, losses, logits as the loss
 *         reads them, optimizer state and updates. Backends that cannot store bf16
 *         refuse it (set_precision fails); cpu-ref implements it with plain loops and is
 *         the truth for it (tests/test_bf16.c checks it against PyTorch).
 * In FP32 and TF32 an [A] array is float32 like any other.
 * This file must never know about videos, towers or devices lists.
 */
#ifndef VT_BACKEND_H
#define VT_BACKEND_H

#include <stdint.h>
#include <stddef.h>

#include "models/grad_gate.h"

typedef struct vt_backend vt_backend;

typedef enum vt_precision {
    VT_PREC_FP32 = 0,
    VT_PREC_TF32 = 1,
    VT_PREC_BF16 = 2,
} vt_precision;

/* "fp32", "tf32", "bf16". */
const char *vt_precision_name(vt_precision p);
/* The text of a --precision option in a command's help (after "--precision P  "). */
extern const char vt_precision_help[];
/* Name -> precision; -1 if unknown. */
int vt_precision_parse(const char *name);
/* Bytes one stored activation element takes at this precision: 2 for BF16, else 4. */
static inline int vt_precision_act_size(vt_precision p) { return p == VT_PREC_BF16 ? 2 : 4; }

/* conv3d geometry. Dims in (T, H, W) order. Output size per dim: (in + 2p - k)/s + 1.
 * groups (PyTorch's Conv3d groups; 0 or 1: a dense conv) splits the channels into groups
 * that only see their own: input channels [g*cin/groups, (g+1)*cin/groups) make output
 * channels [g*cout/groups, ...), and the weight is (Cout, Cin/groups, kT, kH, kW).
 * groups == cin == cout is a depthwise conv (X3D's 3x3x3 and its stem's 5x1x1). Last, so
 * that positional initialisers of dense convs stay valid. */
typedef struct vt_conv3d_p {
    int cin, cout;
    int k[3], s[3], p[3];
    int groups;
} vt_conv3d_p;

/* A conv's group count, 1 for a dense conv whatever p->groups holds (0 or 1). */
static inline int vt_conv_groups(const vt_conv3d_p *p) { return p->groups > 1 ? p->groups : 1; }
/* Depthwise: one input and one output channel a group. */
static inline int vt_conv_depthwise(const vt_conv3d_p *p) {
    return p->groups > 1 && p->groups == p->cin && p->groups == p->cout;
}

/* Pooling window (max and avg). avg counts padding (PyTorch count_include_pad=True). */
typedef struct vt_pool3d_p {
    int k[3], s[3], p[3];
    int ceil_mode; /* PyTorch ceil_mode; C3D's pool5 uses padding, not ceil */
} vt_pool3d_p;

static inline int vt_conv_out(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }
int vt_pool_out(int in, int k, int s, int p, int ceil_mode);

/* torchvision's _add_rel_pos distance along one axis for query index qi of qs and key
 * index kj of ks, in float32 as torch computes it, truncated: an index into a table of
 * 2 max(qs, ks) - 1 rows. */
static inline int vt_mvit_rel_dist(int qi, int qs, int kj, int ks) {
    float qr = (float)((double)ks / qs), kr = (float)((double)qs / ks);
    if (qr < 1.0f)
        qr = 1.0f;
    if (kr < 1.0f)
        kr = 1.0f;
    return (int)((float)qi * qr - ((float)kj + (float)(1 - ks)) * kr);
}

typedef struct vt_backend_i {
    const char *name; /* "cpu-ref", "cpu", "cuda" */
    void (*destroy)(vt_backend *be); /* frees be->ctx (not be itself); optional */

    /* ---- memory (called through vt_backend_alloc/free, which enforce the budget) ---- */
    void *(*alloc)(vt_backend *be, size_t bytes); /* NULL if the device is out of memory */
    void (*free)(vt_backend *be, void *ptr);
    void (*to_device)(vt_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*to_host)(vt_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*copy)(vt_backend *be, void *dst, const void *src, size_t bytes);
    void (*synchronize)(vt_backend *be); /* optional: NULL = nothing to wait for */
    /* optional: page-locked host memory for input batches (the loader's hook). NULL =
     * use malloc. */
    void *(*host_alloc)(vt_backend *be, size_t bytes);
    void (*host_free)(vt_backend *be, void *ptr);
    /* optional: asynchronous host-to-device copies of input batches (NULL: callers use
     * to_device). upload queues a copy on the backend's COPY stream, ordered after every
     * op issued before it (so dst may be a buffer earlier work still reads) and before
     * every op issued after upload_join(ticket); it returns that ticket. host_src (best
     * pinned, from host_alloc) must stay unchanged until upload_wait returns, which blocks
     * the host until every upload issued so far is done. */
    uint64_t (*upload)(vt_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*upload_join)(vt_backend *be, uint64_t ticket);
    void (*upload_wait)(vt_backend *be);
    /* optional: accept a precision (called through vt_backend_set_precision). Returns 0,
     * or -1 when this backend does not have it. NULL = FP32 and TF32 (computed as FP32). */
    int (*set_precision)(vt_backend *be, vt_precision p);
    /* optional: to_host without the wait (issue 45 step 3: fewer host syncs): the copy is
     * queued on the stream and host_dst (pinned, from host_alloc) holds the bytes after
     * the next synchronize. NULL: the copy is done when to_host returns (the CPU
     * backends); callers use vt_backend_to_host_async, which falls back to to_host. */
    void (*to_host_async)(vt_backend *be, void *host_dst, const void *src, size_t bytes);

    /* ---- element-wise ---- */
    void (*fill)(vt_backend *be, float *x, float v, int64_t n);
    void (*scale)(vt_backend *be, float *x, float a, int64_t n);                  /* x *= a */
    void (*axpy)(vt_backend *be, float *y, float a, const float *x, int64_t n);   /* y += a*x */
    /* x = the nearest integer, ties to even (rintf): counters kept as floats, such as
     * num_batches_tracked after the towers' weighted average (vt_net_merge_buffers). */
    void (*round_even)(vt_backend *be, float *x, int64_t n);
    /* out = a + b, every array [A] (residual sums, gradients meeting at a branch); out may
     * be a. fill, scale, axpy, round_even and sumsq work on F32 arrays only. */
    void (*add)(vt_backend *be, float *out, const float *a, const float *b, int64_t n);
    double (*sumsq)(vt_backend *be, const float *x, int64_t n); /* sum x^2 in double; syncs */
    /* The gradient gate (vt_grad_gate), without a wait. grad_sumsq: gate->sumsq = sumsq's
     * value of x (add: gate->sumsq + that). grad_gate: from gate->sumsq, norm = sqrt(sumsq);
     * skip = skip || (skip_at > 0 && !(norm < skip_at)); coef = clip_norm > 0 ?
     * (double)clip_norm / (norm + 1e-6) : 1.0 — IEEE double, rounded once each, the same
     * bits on every backend. copy_if_skip: dst = src (bytes, a multiple of 4) when
     * gate->skip, else nothing. */
    void (*grad_sumsq)(vt_backend *be, vt_grad_gate *gate, const float *x, int64_t n, int add);
    void (*grad_gate)(vt_backend *be, vt_grad_gate *gate, float clip_norm, double skip_at,
                      int skip);
    void (*copy_if_skip)(vt_backend *be, void *dst, const void *src, size_t bytes,
                         const vt_grad_gate *gate);
    /* Conversions between float32 and activation storage (BF16: round / widen; FP32 and
     * TF32: copies). optional: NULL in backends without BF16. */
    void (*act_from_f32)(vt_backend *be, float *dst /* [A] */, const float *src, int64_t n);
    void (*act_to_f32)(vt_backend *be, float *dst, const float *src /* [A] */, int64_t n);

    /* ---- conv3d ---- */
    /* out [A]: (N, Cout, To, Ho, Wo); in [A]: (N, Cin, T, H, W);
     * w: (Cout, Cin/groups, kT, kH, kW); b: (Cout) or NULL. in_thw = {T, H, W}. */
    void (*conv3d_forward)(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, const int in_thw[3], const vt_conv3d_p *p);
    /* din [A]: (N, Cin, T, H, W) overwritten or NULL; dw, db accumulated (db may be NULL);
     * dout [A], in [A]. */
    void (*conv3d_backward)(vt_backend *be, float *din, float *dw, float *db, const float *dout,
                            const float *in, const float *w, int n, const int in_thw[3],
                            const vt_conv3d_p *p);

    /* ---- batch norm, split the SyncBN way so towers can combine statistics ----
     * x is (N, C, S) with S = T*H*W. Per channel c over N*S values, around a shift k[c]
     * (NULL: 0) that every tower and micro-batch of one forward shares; `mean` is always
     * RELATIVE to k (the batch mean is k + mean), so that it keeps its digits when the
     * mean is large against the spread:
     *   bn_stats:    sum[c] = sum (x-k), sumsq[c] = sum (x-k)^2 (accumulated in double,
     *                rounded to float once)  (overwrite)
     *   bn_finalize: from (sum, sumsq, k, count): mean = sum/count,
     *                var_biased = sumsq/count - mean^2 (clamped at 0),
     *                invstd = 1/sqrt(var_biased + eps);
     *                if running_mean != NULL: running = (1-m)*running + m*stat, with stat
     *                k + mean and the UNBIASED variance count/(count-1) for running_var
     *                (PyTorch).
     *   bn_apply:    out = gamma * (x - k - mean) * invstd + beta  (also used in eval, with
     *                mean/invstd computed from the running statistics by bn_finalize with
     *                count = 0 meaning "mean := running_mean, var := running_var", and k
     *                NULL or zeros).
     *   bn_backward_reduce: sum_dy[c] = sum dy, sum_dy_xhat[c] = sum dy*xhat (overwrite),
     *                xhat = (x - k - mean)*invstd
     *   bn_backward_apply:  din = gamma*invstd*(dy - sum_dy/count - xhat*sum_dy_xhat/count)
     *                with count and the sums over ALL towers under sync-BN.
     * x - k - mean is formed as (x - k) - mean, or in double from k + mean: never from a
     * mean rounded to one float (half an ulp of a mean of 1e3 std is 3e-5 std).
     * dgamma += sum_dy_xhat and dbeta += sum_dy are done by the network with the LOCAL
     * sums (the gradient reducer sums across towers afterwards).
     * Why the shift (docs/design.md §3.1, §9): with k = 0 the float sumsq carries a relative
     * error of 6e-8, which sumsq/count - mean^2 turns into 6e-8 * mean^2/var of the
     * variance (6e-2 at mean = 1e3 std). Around a k near the mean that factor becomes
     * (mean-k)^2/var; the network takes k = the global batch mean from a first pass
     * (net.c bn_forward), so towers' sums still merge by a plain SUM.
     * [A]: x, out, dy, din; the sums, k, mean, invstd, gamma, beta and running stats are
     * F32. */
    void (*bn_stats)(vt_backend *be, float *sum, float *sumsq, const float *x, const float *k,
                     int n, int c, int64_t s);
    void (*bn_finalize)(vt_backend *be, float *mean, float *invstd, float *running_mean,
                        float *running_var, const float *sum, const float *sumsq, const float *k,
                        int64_t count, int c, float momentum, float eps);
    void (*bn_apply)(vt_backend *be, float *out, const float *x, const float *k,
                     const float *mean, const float *invstd, const float *gamma,
                     const float *beta, int n, int c, int64_t s);
    void (*bn_backward_reduce)(vt_backend *be, float *sum_dy, float *sum_dy_xhat, const float *dy,
                               const float *x, const float *k, const float *mean,
                               const float *invstd, int n, int c, int64_t s);
    void (*bn_backward_apply)(vt_backend *be, float *din, const float *dy, const float *x,
                              const float *k, const float *mean, const float *invstd,
                              const float *gamma,
                              const float *sum_dy, const float *sum_dy_xhat, int64_t count, int n,
                              int c, int64_t s);

    /* ---- fused batch-norm tail (optional: NULL = the network runs the ops one by one)
     * out = relu(bn_apply(x) + res), res NULL: relu(bn_apply(x)); every array [A], res of
     * x's shape. Bit for bit what bn_apply into a temporary, then add (when res), then
     * relu_forward give — each [A] rounding where those ops round (BF16: the normalised
     * value rounded to bf16, then the sum) — in one pass over memory (issue 45 step 3:
     * R3D's BN+ReLU and BN+add+ReLU). out must not overlap x or res. cpu-ref and cpu
     * compose it from their own three ops (vt_backend_bn_apply_relu_composed), so the CPU
     * tests check the network's fusion; cuda has one kernel. */
    void (*bn_apply_relu)(vt_backend *be, float *out, const float *x, const float *k,
                          const float *mean, const float *invstd, const float *gamma,
                          const float *beta, const float *res, int n, int c, int64_t s);
    /* The same tails' backward (optional: NULL = the network runs the ops one by one),
     * each bit for bit its unfused ops, every array but the sums [A]:
     *   relu_backward_skip: relu_backward(din, dout, out, n) that also writes the same
     *     values into skip — the residual's gradient the add's backward would copy (BN +
     *     add + ReLU's backward without the copy). din may be dout; skip overlaps neither.
     *   bn_relu_backward_reduce: relu_backward(dy, dout, y, n*c*s) (y the ReLU's output),
     *     then bn_backward_reduce(sum_dy, sum_dy_xhat, dy, x, ...), in one pass over
     *     memory on cuda. dy may be dout (in place); sums as bn_backward_reduce (n == 0:
     *     zeros). */
    void (*relu_backward_skip)(vt_backend *be, float *din, float *skip, const float *dout,
                               const float *out, int64_t n);
    void (*bn_relu_backward_reduce)(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                    float *dy, const float *dout, const float *y,
                                    const float *x, const float *k, const float *mean,
                                    const float *invstd, int n, int c, int64_t s);

    /* ---- activations (every array [A]) ---- */
    /* out = v > 0 ? v : 0, and a NaN passes as PyTorch's relu passes it (so a diverged
     * activation reaches the loss and the non-finite guards instead of turning into 0);
     * -0 gives +0 (PyTorch keeps -0: the same value). models/relu_rule.h vt_relu. */
    void (*relu_forward)(vt_backend *be, float *out, const float *in, int64_t n);
    /* din = out > 0 ? dout : 0, out the forward OUTPUT (so in-place relu works); a NaN
     * output passes dout, as PyTorch's threshold_backward (out <= 0 ? 0 : dout) does.
     * models/relu_rule.h vt_relu_grad. */
    void (*relu_backward)(vt_backend *be, float *din, const float *dout, const float *out,
                          int64_t n);

    /* SiLU (Swish, X3D's inner activation): out = x * sigmoid(x); its backward reads the
     * forward INPUT: din = dout * s * (1 + x * (1 - s)), s = sigmoid(x) (pytorchvideo's
     * SwishFunction). din may be dout (each dout[i] is read before din[i] is written). */
    void (*silu_forward)(vt_backend *be, float *out, const float *in, int64_t n);
    void (*silu_backward)(vt_backend *be, float *din, const float *dout, const float *in,
                          int64_t n);
    /* sigmoid: out = 1 / (1 + exp(-x)); its backward reads the OUTPUT (so it may run in
     * place): din = dout * y * (1 - y). din may be dout. */
    void (*sigmoid_forward)(vt_backend *be, float *out, const float *in, int64_t n);
    void (*sigmoid_backward)(vt_backend *be, float *din, const float *dout, const float *out,
                             int64_t n);
    /* Channel scale, squeeze-excitation's last step (torch.mul(x, s) with s broadcast over
     * T, H, W): out (N, C, S) = x (N, C, S) * s (N, C). backward: ds[n,c] = sum_S dout * x
     * (overwritten; NULL skips it), dx = dout * s (overwritten; NULL skips it). dx may be
     * dout: every ds is formed before dx is written. Every array [A]. */
    void (*chscale_forward)(vt_backend *be, float *out, const float *x, const float *s, int n,
                            int c, int64_t sp);
    void (*chscale_backward)(vt_backend *be, float *dx, float *ds, const float *dout,
                             const float *x, const float *s, int n, int c, int64_t sp);

    /* ---- pooling; in: (N, C, T, H, W); every array [A] ---- */
    void (*maxpool3d_forward)(vt_backend *be, float *out, const float *in, int n, int c,
                              const int in_thw[3], const vt_pool3d_p *p);
    /* Gradient goes to the FIRST maximum of each window (PyTorch's choice). A NaN in a
     * window is its maximum and the last NaN takes the gradient (PyTorch's rule, forward
     * and backward alike: models/max_rule.h), so a NaN propagates to the loss. */
    void (*maxpool3d_backward)(vt_backend *be, float *din, const float *dout, const float *in,
                               int n, int c, const int in_thw[3], const vt_pool3d_p *p);
    void (*avgpool3d_forward)(vt_backend *be, float *out, const float *in, int n, int c,
                              const int in_thw[3], const vt_pool3d_p *p);
    void (*avgpool3d_backward)(vt_backend *be, float *din, const float *dout, int n, int c,
                               const int in_thw[3], const vt_pool3d_p *p);
    /* Adaptive global average pool: out (N, C) = mean over S of in (N, C, S). */
    void (*gap_forward)(vt_backend *be, float *out, const float *in, int n, int c, int64_t s);
    void (*gap_backward)(vt_backend *be, float *din, const float *dout, int n, int c, int64_t s);

    /* ---- linear: out (N, O) = in (N, I) @ w^T (O, I) + b (O); out, in, din, dout [A] ---- */
    void (*linear_forward)(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, int in_f, int out_f);
    void (*linear_backward)(vt_backend *be, float *din, float *dw, float *db, const float *dout,
                            const float *in, const float *w, int n, int in_f, int out_f);

    /* ---- transformer ops (models/cpu/cpu_attn.c; docs/design.md §5.1). FP32 on the CPU
     *      backends; cuda has BF16 too (x, out, din, dout, qkv, dqkv are then [A]; LayerNorm's
     *      mean/invstd, lse, pos, scale and the parameter gradients stay float;
     *      docs/precision.md). A backend without them leaves the slots NULL. ----
     * Token sequences are (N, L, C) row-major: L tokens of C features per clip, so a linear
     * layer on tokens is linear_forward with n = N*L rows.
     * layernorm over the last dim (rows = N*L, c features): out = (x - mean) * invstd *
     * gamma + beta, invstd = 1/sqrt(var_biased + eps); mean and invstd (rows) are saved for
     * the backward (PyTorch F.layer_norm). dgamma, dbeta accumulate; din is overwritten. */
    void (*layernorm_forward)(vt_backend *be, float *out, float *mean, float *invstd,
                              const float *x, const float *gamma, const float *beta, int64_t rows,
                              int c, float eps);
    void (*layernorm_backward)(vt_backend *be, float *din, float *dgamma, float *dbeta,
                               const float *dout, const float *x, const float *mean,
                               const float *invstd, const float *gamma, int64_t rows, int c);
    /* GELU, erf form (PyTorch's default): out = x/2 (1 + erf(x/sqrt 2)); the backward reads
     * the forward INPUT (so it is never in place). */
    void (*gelu_forward)(vt_backend *be, float *out, const float *in, int64_t n);
    void (*gelu_backward)(vt_backend *be, float *din, const float *dout, const float *in,
                          int64_t n);
    /* Multi-head self-attention, scaled dot product. qkv (N, L, 3, H, D) is the output of
     * the qkv linear (q, k, v side by side per token, timm/VideoMAE's layout); out
     * (N, L, H, D) = softmax(q k^T / sqrt(D)) v per head, heads side by side (what the
     * projection reads); lse (N, H, L) the log-sum-exp of each query's scaled logits,
     * saved for the backward, which recomputes the probabilities a query row at a time:
     * no T x T matrix is ever stored (flash-attention's scheme; the cuda backend holds
     * blocks of logits of at most 64 MiB, models/cuda/cuda_attn.h). dqkv is overwritten. */
    void (*attention_forward)(vt_backend *be, float *out, float *lse, const float *qkv, int n,
                              int tokens, int heads, int head_dim);
    void (*attention_backward)(vt_backend *be, float *dqkv, const float *dout, const float *qkv,
                               const float *out, const float *lse, int n, int tokens, int heads,
                               int head_dim);
    /* out (N, B, A) = the transpose of each clip's in (N, A, B): (N, C, T*H*W) feature maps
     * to (N, L, C) tokens (the patch embedding) and back (its backward, with A, B swapped). */
    void (*transpose)(vt_backend *be, float *out, const float *in, int n, int a, int b);
    /* out (N, C) = the mean over L of in (N, L, C) (mean pooling of tokens); the backward
     * spreads dout/L over the tokens (din overwritten). */
    void (*token_mean_forward)(vt_backend *be, float *out, const float *in, int n, int tokens,
                               int c);
    void (*token_mean_backward)(vt_backend *be, float *din, const float *dout, int n, int tokens,
                                int c);
    /* out = in + pos, pos (L*C) broadcast over the N clips (position embeddings; the
     * gradient of a learned pos is the sum of dout over the clips: dpos accumulates). */
    void (*add_bcast)(vt_backend *be, float *out, const float *in, const float *pos, int n,
                      int64_t per);
    void (*add_bcast_backward)(vt_backend *be, float *dpos, const float *dout, int n,
                               int64_t per);
    /* Drop path (stochastic depth): out[n] = in[n] * scale[n], scale (N) of 0 or 1/(1-p)
     * per clip from vt_drop_path_keep (the same draw on every backend and tower, like
     * dropout's mask); the backward multiplies dout by the same scale. */
    void (*scale_rows)(vt_backend *be, float *out, const float *in, const float *scale, int n,
                       int64_t per);

    /* ---- MViT's ops (models/cpu/cpu_mvit.c; torchvision's video/mvit.py). CUDA also has
     *      them in BF16 ([A] arrays); a backend without them leaves the slots NULL and net_mvit.c names the op. ----
     * MViT's token sequences carry a class token: L = 1 + T*H*W rows, row 0 the class
     * token, then the (T, H, W) grid in row-major order.
     * mvit_pool: part (0 q, 1 k, 2 v) of qkv (N, L, 3, heads, D) pooled per head as
     * torchvision's Pool does before its LayerNorm: out (N, heads, Lo, D), row 0 the class
     * token's values, then the depthwise conv3d (w (D, 1, kT, kH, kW), no bias, groups D,
     * kernel/stride/padding p->k, s, p) of the grid, Lo = 1 + T'H'W'. w NULL: the part
     * gathered as it is (no pool, p ignored). backward: dqkv's columns of this part are
     * OVERWRITTEN (the three parts write every column), dw accumulates (NULL: skipped). */
    void (*mvit_pool_forward)(vt_backend *be, float *out, const float *qkv, const float *w,
                              int n, int heads, int head_dim, int part, const int thw[3],
                              const vt_pool3d_p *p);
    void (*mvit_pool_backward)(vt_backend *be, float *dqkv, float *dw, const float *dout,
                               const float *qkv, const float *w, int n, int heads, int head_dim,
                               int part, const int thw[3], const vt_pool3d_p *p);
    /* mvit_attention: q (N, heads, Lq, D), k and v (N, heads, Lk, D) on grids qthw, kthw;
     * out (N, Lq, heads*D) = softmax(q k^T / sqrt(D) + rel) v, plus q on rows >= 1 when
     * residual (MViTv2's residual pooling without the class token); rel[i][j], i, j >= 1:
     * MViTv2's decomposed relative positions q_i . (rh[dh] + rw[dw] + rt[dt]) with q
     * unscaled and torchvision's _add_rel_pos distances (tables of 2 max(q, k) - 1 rows of
     * D; rh NULL: no rel). lse (N, heads, Lq): each row's log-sum-exp, for the backward,
     * which recomputes the probabilities (no Lq x Lk matrix is stored). dq, dk, dv are
     * OVERWRITTEN; drh, drw, drt accumulate. */
    void (*mvit_attention_forward)(vt_backend *be, float *out, float *lse, const float *q,
                                   const float *k, const float *v, const float *rh,
                                   const float *rw, const float *rt, int n, int heads,
                                   int head_dim, const int qthw[3], const int kthw[3],
                                   int residual);
    void (*mvit_attention_backward)(vt_backend *be, float *dq, float *dk, float *dv, float *drh,
                                    float *drw, float *drt, const float *dout, const float *q,
                                    const float *k, const float *v, const float *rh,
                                    const float *rw, const float *rt, const float *lse, int n,
                                    int heads, int head_dim, const int qthw[3],
                                    const int kthw[3], int residual);
    /* token_maxpool: the grid of in (N, L, C) max-pooled (nn.MaxPool3d: padding never
     * wins), the class token row copied: out (N, 1 + T'H'W', C) (MViT's pool_skip);
     * backward: din OVERWRITTEN, each window's gradient to its first maximum. A NaN in
     * a window is its maximum, the last NaN takes the gradient (PyTorch's rule, both ways:
     * models/max_rule.h). */
    void (*token_maxpool_forward)(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int thw[3], const vt_pool3d_p *p);
    void (*token_maxpool_backward)(vt_backend *be, float *din, const float *dout,
                                   const float *in, int n, int c, const int thw[3],
                                   const vt_pool3d_p *p);

    /* ---- dropout: counter-based so every backend draws the same mask ----
     * keep[i] = (vt_hash64(seed ^ (i * golden)) >> 40) / 2^24 >= p; mask[i] = keep/(1-p).
     * out, in, din, dout [A]; the mask is F32. */
    void (*dropout_forward)(vt_backend *be, float *out, float *mask, const float *in, int64_t n,
                            float p, uint64_t seed);
    void (*dropout_backward)(vt_backend *be, float *din, const float *dout, const float *mask,
                             int64_t n);

    /* ---- losses: per-clip loss and dlogits = grad_scale * dloss/dlogits ----
     * and, for evaluation, prob (N, K): what the head predicts (softmax probabilities,
     * sigmoids). Every output is optional (NULL: not computed); without loss and dlogits
     * the targets may be NULL too (probabilities of clips that have no labels). prob may
     * be logits itself: each logit is read before its probability is written.
     * dlogits [A] (it feeds the head's backward); logits, loss and prob are F32.
     * softmax cross-entropy with label smoothing eps (PyTorch semantics: target =
     * (1-eps)*onehot + eps/K). label: (N) int32 class ids. */
    void (*softmax_xent)(vt_backend *be, float *loss, float *dlogits, float *prob,
                         const float *logits, const int32_t *label, int n, int k, float smoothing,
                         float grad_scale);
    /* The same with class weights cw (K, F32, backend memory; NULL: softmax_xent itself,
     * bit for bit): PyTorch's F.cross_entropy(weight=cw, label_smoothing=eps,
     * reduction='none') per clip, loss = -sum_j t_j cw_j log p_j, and dlogits = grad_scale
     * * (p (sum_j t_j cw_j) - t cw). The weighted MEAN is the caller's: grad_scale = 1 /
     * (sum over the global batch of cw[label]), as docs/balance.md says. */
    void (*softmax_xent_w)(vt_backend *be, float *loss, float *dlogits, float *prob,
                           const float *logits, const int32_t *label, const float *cw, int n,
                           int k, float smoothing, float grad_scale);
    /* Soft targets (mixup and CutMix, pipeline/data/mix.h): target (N, K) F32 in backend
     * memory, one distribution per clip with any label smoothing already folded in.
     * PyTorch's F.cross_entropy(logits, target, reduction='none') with probability
     * targets: loss = -sum_j t_j log p_j, dlogits = grad_scale * (p_j sum_i t_i - t_j).
     * Optional (NULL: this backend cannot train on mixed targets; the towers refuse). */
    void (*softmax_xent_soft)(vt_backend *be, float *loss, float *dlogits, const float *logits,
                              const float *target, int n, int k, float grad_scale);
    /* BCE with logits, summed over the K outputs of a clip; target (N, K) in {0, 1};
     * prob = sigmoid(logits). */
    void (*bce_logits)(vt_backend *be, float *loss, float *dlogits, float *prob,
                       const float *logits, const float *target, int n, int k, float grad_scale);

    /* ---- optimizer updates over a whole arena, PyTorch torch.optim semantics ----
     * step counts from 1. wd: SGD/RMSprop add wd*p to the gradient (L2); AdamW decays
     * p *= 1 - lr*wd (decoupled). gate (backend memory, or NULL: every step is taken,
     * unclipped): a step the gate skips changes nothing; else the update reads each
     * gradient as g * (float)gate->coef where gate->coef < 1 (clipping: the float product
     * the scale op would leave in g; g itself is left as it is). */
    void (*sgd_update)(vt_backend *be, float *p, const float *g, float *buf, int64_t n, float lr,
                       float momentum, float dampening, float wd, int nesterov, int64_t step,
                       const vt_grad_gate *gate);
    void (*rmsprop_update)(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                           int64_t n, float lr, float alpha, float eps, float wd, float momentum,
                           const vt_grad_gate *gate);
    void (*adamw_update)(vt_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                         float lr, float beta1, float beta2, float eps, float wd, int64_t step,
                         const vt_grad_gate *gate);

    /* ---- exact sums (models/xsum.h) ----
     * acc: 2n int64 of the backend's memory (hi, lo of element i at acc[2i], acc[2i+1]),
     * zeroed with fill (4n floats of 0);
     * xsum_fold: acc += x in units of 2^e0 (each term rounded to a unit: the result does
     * not depend on the order of folds); init: acc's old values are not read, as if
     * zeroed first;
     * xsum_round: out = acc rounded to float once.
     * Every backend has them (the arithmetic of models/xsum_arith.h on the host and in
     * the CUDA kernels); NULL would mean a network on it cannot sum exactly
     * (vt_net_cfg.exact). */
    void (*xsum_fold)(vt_backend *be, int64_t *acc, const float *x, int64_t n, int init,
                      int e0);
    void (*xsum_round)(vt_backend *be, float *out, const int64_t *acc, int64_t n, int e0);
} vt_backend_i;

typedef enum vt_backend_kind {
    VT_BACKEND_CPU_REF,
    VT_BACKEND_CPU,
    VT_BACKEND_CUDA,
} vt_backend_kind;

struct vt_backend {
    const vt_backend_i *i;
    void *ctx;               /* the backend's own state */
    vt_backend_kind kind;
    int ordinal;             /* device id (cuda) or cpu index */
    int threads;             /* CPU threads this backend may use (cpu, cpu-ref: 1) */
    int64_t budget;          /* bytes this backend may hold at once; 0 = unlimited */
    int64_t in_use;          /* bytes held now through vt_backend_alloc */
    int64_t high_water;      /* most bytes ever held */
    vt_precision precision;  /* what the ops follow (vt_backend_set_precision) */
};

/* Constructors, by name or by backend: models/registry.h (the CUDA one:
 * models/cuda/backend_cuda.h). Frees be->ctx through the table's destroy, then be. */
void vt_backend_free(vt_backend **be);

/* Set the precision the ops follow (see the top of this file). Returns 0, or -1 with err
 * naming the backend when it does not have that precision. */
int vt_backend_set_precision(vt_backend *be, vt_precision p, char *err, size_t errlen);

/* Budget-enforcing allocation. Returns NULL (never aborts) when the request would pass
 * the budget or the device is out of memory, so callers can report it; the _x variant
 * aborts with a message naming the backend, budget and request. */
void *vt_backend_alloc(vt_backend *be, size_t bytes);
void *vt_backend_alloc_x(vt_backend *be, size_t bytes, const char *what);
void vt_backend_free_ptr(vt_backend *be, void *ptr);
static inline void vt_backend_sync(vt_backend *be) { if (be->i->synchronize) be->i->synchronize(be); }

/* bn_apply_relu made of be's own bn_apply, add and relu_forward (the CPU backends' slot;
 * backend.h's contract, so out must not overlap x or res). */
void vt_backend_bn_apply_relu_composed(vt_backend *be, float *out, const float *x,
                                       const float *k, const float *mean, const float *invstd,
                                       const float *gamma, const float *beta, const float *res,
                                       int n, int c, int64_t s);

/* The fused tails' backward made of be's own ops (backend.h's contracts). */
void vt_backend_relu_backward_skip_composed(vt_backend *be, float *din, float *skip,
                                            const float *dout, const float *out, int64_t n);
void vt_backend_bn_relu_backward_reduce_composed(vt_backend *be, float *sum_dy,
                                                 float *sum_dy_xhat, float *dy,
                                                 const float *dout, const float *y,
                                                 const float *x, const float *k,
                                                 const float *mean, const float *invstd, int n,
                                                 int c, int64_t s);
/* The CPU backends' fused slots: composed, so the CPU tests check the network's fusion. */
#define VT_BACKEND_FUSED_COMPOSED                                                              \
    .bn_apply_relu = vt_backend_bn_apply_relu_composed,                                       \
    .relu_backward_skip = vt_backend_relu_backward_skip_composed,                             \
    .bn_relu_backward_reduce = vt_backend_bn_relu_backward_reduce_composed

/* The CPU backends' gate slots (backend.h's grad_gate and copy_if_skip on host memory;
 * grad_sumsq is each backend's own, with its sumsq). The CUDA kernels spell the same
 * arithmetic. */
void vt_backend_grad_gate_host(vt_backend *be, vt_grad_gate *gate, float clip_norm,
                               double skip_at, int skip);
void vt_backend_copy_if_skip_host(vt_backend *be, void *dst, const void *src, size_t bytes,
                                  const vt_grad_gate *gate);
#define VT_BACKEND_GATE_HOST                                                                   \
    .grad_gate = vt_backend_grad_gate_host, .copy_if_skip = vt_backend_copy_if_skip_host

/* to_host queued without a wait where the backend can (to_host_async), else to_host:
 * host_dst holds the bytes after the next vt_backend_sync either way. */
static inline void vt_backend_to_host_async(vt_backend *be, void *host_dst, const void *src,
                                            size_t bytes) {
    if (be->i->to_host_async)
        be->i->to_host_async(be, host_dst, src, bytes);
    else
        be->i->to_host(be, host_dst, src, bytes);
}

/* Shorthand for calling an op: VT_OP(be, relu_forward, out, in, n). */
#define VT_OP(be, op, ...) ((be)->i->op((be), __VA_ARGS__))

#endif
