/*
 * cpu.c: the fast CPU backend — its op table: conv3d from the conv engine (cpu_conv.c),
 * linear as sgemm over fixed blocks (cpu_blocks.h), and OpenMP loops for everything
 * else. Every op is compared with cpu-ref (cpu_ref.c) by tests/test_ops.c. It must never
 * be nondeterministic: the same inputs give bitwise the same outputs run to run AND
 * whatever the thread count (reductions run in a fixed order per output, no atomics, work
 * cut into blocks that depend on the shape only), and it must never keep state outside
 * its context (several towers each own one of these and call ops concurrently).
 *
 * Threads. All parallelism is OpenMP regions with num_threads(be->threads) (never
 * omp_set_num_threads, which would change other towers' teams); inside them every sgemm
 * call is single-threaded: OpenBLAS runs with ONE thread, process-wide (set at init, the
 * same value from every cpu backend). Its own pool would fight the OpenMP team for the
 * cores (both spin-wait between calls), and fixed blocks of our own keep the bits
 * independent of the thread count, which OpenBLAS's partition by thread does not promise
 * once its small-matrix kernels are picked by the size of each part. Concurrent sgemm
 * calls are safe in OpenBLAS >= 0.3.7 (its buffers are locked). Loops over fixed blocks
 * use dynamic schedules and element-wise loops guided ones: which thread runs a block
 * never changes its bits, and a descheduled thread does not hold back a static share.
 * Threads that share a core spin at barriers (OMP_WAIT_POLICY=passive helps). Step
 * figures against PyTorch: bench/bench-cpu-step.sh.
 *
 * Scratch. The conv's vol2col columns are allocated per op through vt_backend_alloc (so
 * the budget and the high-water mark see them) and freed before it returns; tiles keep
 * them under VT_CPU_CONV_SCRATCH_CAP (8 MiB), and the memory plan counts that bound in its
 * workspace (memplan.c). Under a budget too tight for that, tiles shrink (to one output
 * row) instead of failing; the bits then follow the tiling, which depends on the budget.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/max_rule.h"
#include "models/relu_rule.h"
#include "models/xsum.h"
#include "models/optim_elem.h"
#include "models/cpu/cpu_attn.h"
#include "models/cpu/cpu_mvit.h"
#include "models/cpu/cpu_bn_final.h"
#include "models/cpu/cpu_loss.h"
#include "models/cpu/cpu_blocks.h"
#include "models/cpu/cpu_conv.h"
#include "models/cpu/cpu_blas.h"
#include "models/cpu/cpu_act.h"

/* ---------------------------------------------------------------- memory ---- */

static void *cpu_alloc(vt_backend *be, size_t bytes) {
    size_t rounded = (bytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple */
    return aligned_alloc(64, rounded ? rounded : 64);
}
static void cpu_free(vt_backend *be, void *ptr) { free(ptr); }
static void cpu_copy(vt_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes)
        memmove(dst, src, bytes);
}

/* ---------------------------------------------------------------- element-wise ---- */

static void cpu_fill(vt_backend *be, float *x, float v, int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
}
static void cpu_scale(vt_backend *be, float *x, float a, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] *= a;
}
static void cpu_axpy(vt_backend *be, float *y, float a, const float *x, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}
static void cpu_round_even(vt_backend *be, float *x, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] = rintf(x[i]);
}
static void cpu_add(vt_backend *be, float *out, const float *a, const float *b, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

/* Fixed chunks whose partial sums are added in chunk order: the result does not depend on
 * the thread count or on scheduling. */
#define CPU_SUM_CHUNK 65536
static double cpu_sumsq(vt_backend *be, const float *x, int64_t n) {
    int64_t nch = (n + CPU_SUM_CHUNK - 1) / CPU_SUM_CHUNK;
    if (nch <= 1) {
        double s = 0;
        for (int64_t i = 0; i < n; i++)
            s += (double)x[i] * x[i];
        return s;
    }
    double *part = vt_malloc((size_t)nch * sizeof(double));
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1)
    for (int64_t ch = 0; ch < nch; ch++) {
        int64_t lo = ch * CPU_SUM_CHUNK, hi = VT_MIN(n, lo + CPU_SUM_CHUNK);
        double s = 0;
        for (int64_t i = lo; i < hi; i++)
            s += (double)x[i] * x[i];
        part[ch] = s;
    }
    double s = 0;
    for (int64_t ch = 0; ch < nch; ch++)
        s += part[ch];
    free(part);
    return s;
}
static void cpu_grad_sumsq(vt_backend *be, vt_grad_gate *gate, const float *x, int64_t n, int add) {
    double s = cpu_sumsq(be, x, n);
    gate->sumsq = add ? gate->sumsq + s : s;
}

/* ---------------------------------------------------------------- batch norm ---- */

/* Per-plane sums in CPU_BN_LANES double accumulators, value j into lane j % lanes, the
 * lanes added in a fixed tree at the end: the additions no longer wait on each other (one
 * chain of double adds was 4 cycles a value: BN was 12% of a tiny step) and the order is
 * still a function of the plane length only. With v = u - k (k: bn_stats's shift, 0 for
 * the backward sums, where subtracting it is exact): a += v; q += v * v or, centred,
 * q += v * (x - m). */
#define CPU_BN_LANES 8
static inline __attribute__((always_inline)) void
plane_sums(double *a_out, double *q_out, const float *u, double k, const float *x, double m,
           int64_t s, const int centred) {
    double a[CPU_BN_LANES] = {0}, q[CPU_BN_LANES] = {0};
    int64_t j = 0;
    for (; j + CPU_BN_LANES <= s; j += CPU_BN_LANES)
        for (int l = 0; l < CPU_BN_LANES; l++) {
            const double v = (double)u[j + l] - k;
            a[l] += v;
            q[l] += centred ? v * ((double)x[j + l] - m) : v * v;
        }
    for (int l = 0; j < s; j++, l++) {
        const double v = (double)u[j] - k;
        a[l] += v;
        q[l] += centred ? v * ((double)x[j] - m) : v * v;
    }
    for (int w = CPU_BN_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) {
            a[l] += a[l + w];
            q[l] += q[l + w];
        }
    *a_out += a[0];
    *q_out += q[0];
}

static void cpu_bn_stats(vt_backend *be, float *sum, float *sumsq, const float *x,
                         const float *k, int n, int c, int64_t s) {
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) \
    if ((int64_t)n * c * s > CPU_PAR_MIN)
    for (int ci = 0; ci < c; ci++) {
        const double kc = k ? k[ci] : 0.0;
        double a = 0, q = 0;
        for (int ni = 0; ni < n; ni++)
            plane_sums(&a, &q, x + ((int64_t)ni * c + ci) * s, kc, NULL, 0.0, s, 0);
        sum[ci] = (float)a;
        sumsq[ci] = (float)q;
    }
}

static void cpu_bn_apply(vt_backend *be, float *out, const float *x, const float *k,
                         const float *mean, const float *invstd, const float *gamma,
                         const float *beta, int n, int c, int64_t s) {
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        int ci = (int)(pl % c);
        /* (x - mean) * sc + beta, not x * sc + (beta - mean * sc): the folded form cancels
         * catastrophically when invstd is large (var ~ 0, e.g. one value per channel).
         * x - k first: exact when x is within 2x of k (Sterbenz), so a mean of 1e3 std
         * costs no digits of x - mean (backend.h). */
        float sc = (gamma ? gamma[ci] : 1.0f) * invstd[ci];
        float kc = k ? k[ci] : 0.0f, m = mean[ci], sh = beta ? beta[ci] : 0.0f;
        const float *xp = x + pl * s;
        float *op = out + pl * s;
        for (int64_t j = 0; j < s; j++)
            op[j] = ((xp[j] - kc) - m) * sc + sh;
    }
}

static void cpu_bn_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                   const float *dy, const float *x, const float *k,
                                   const float *mean, const float *invstd, int n, int c,
                                   int64_t s) {
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) \
    if ((int64_t)n * c * s > CPU_PAR_MIN)
    for (int ci = 0; ci < c; ci++) {
        double a = 0, q = 0, m = (k ? (double)k[ci] : 0.0) + (double)mean[ci];
        for (int ni = 0; ni < n; ni++)
            plane_sums(&a, &q, dy + ((int64_t)ni * c + ci) * s, 0.0,
                       x + ((int64_t)ni * c + ci) * s, m, s, 1);
        sum_dy[ci] = (float)a;
        sum_dy_xhat[ci] = (float)(q * invstd[ci]);
    }
}

static void cpu_bn_backward_apply(vt_backend *be, float *din, const float *dy, const float *x,
                                  const float *k, const float *mean, const float *invstd,
                                  const float *gamma,
                                  const float *sum_dy, const float *sum_dy_xhat, int64_t count,
                                  int n, int c, int64_t s) {
    if (n == 0)
        return;
    VT_CHECK(count > 0, "bn_backward_apply: count %lld", (long long)count);
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        int ci = (int)(pl % c);
        float is = invstd[ci], kc = k ? k[ci] : 0.0f, m = mean[ci];
        float gs = (gamma ? gamma[ci] : 1.0f) * is;
        float mdy = (float)((double)sum_dy[ci] / (double)count);
        float mdyx = (float)((double)sum_dy_xhat[ci] / (double)count);
        const float *d = dy + pl * s, *xp = x + pl * s;
        float *o = din + pl * s;
        for (int64_t j = 0; j < s; j++)
            o[j] = gs * (d[j] - mdy - ((xp[j] - kc) - m) * is * mdyx);
    }
}

/* ---------------------------------------------------------------- activations ---- */

/* simd: a select per lane instead of a branch, which activations of random sign would
 * mispredict half the time (measured: 5.6 ns per value scalar). Same results bit for bit.
 * The rule (a NaN passes, both ways) is relu_rule.h's. */
static void cpu_relu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = vt_relu(in[i]);
}
static void cpu_relu_backward(vt_backend *be, float *din, const float *dout, const float *out,
                              int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        din[i] = vt_relu_grad(out[i], dout[i]);
}

/* ---------------------------------------------------------------- pooling ---- */

/* One output cell's window, clipped to the input: [lo, hi) per dim, and the avg divisor
 * (count_include_pad: clipped to the padded input only). */
typedef struct pool_win { int lo[3], hi[3]; int div; } pool_win;

static inline pool_win pool_window(const int in_thw[3], const vt_pool3d_p *p, int ot, int oh,
                                   int ow) {
    pool_win wv;
    int oc[3] = {ot, oh, ow};
    wv.div = 1;
    for (int d = 0; d < 3; d++) {
        int start = oc[d] * p->s[d] - p->p[d];
        int end = VT_MIN(start + p->k[d], in_thw[d] + p->p[d]);
        wv.div *= end - start;
        wv.lo[d] = VT_MAX(start, 0);
        wv.hi[d] = VT_MIN(end, in_thw[d]);
    }
    return wv;
}

/* Index of the window's winning tap: (t, h, w) order, max_rule.h's rule (strictly greater
 * or NaN replaces: the first maximum, a NaN propagates). */
static inline int64_t pool_argmax(const float *plane, const int in_thw[3], const pool_win *wv) {
    int64_t best = -1;
    float bv = -INFINITY;
    for (int t = wv->lo[0]; t < wv->hi[0]; t++)
        for (int h = wv->lo[1]; h < wv->hi[1]; h++) {
            int64_t base = ((int64_t)t * in_thw[1] + h) * in_thw[2];
            for (int w = wv->lo[2]; w < wv->hi[2]; w++)
                if (vt_max_takes(plane[base + w], bv, best < 0)) {
                    best = base + w;
                    bv = plane[base + w];
                }
        }
    return best;
}

#define POOL_DIMS                                                                  \
    int o[3];                                                                      \
    for (int d = 0; d < 3; d++)                                                    \
        o[d] = vt_pool_out(in_thw[d], p->k[d], p->s[d], p->p[d], p->ceil_mode);    \
    const int64_t sin = (int64_t)in_thw[0] * in_thw[1] * in_thw[2];                \
    const int64_t sout = (int64_t)o[0] * o[1] * o[2];                              \
    const int64_t planes = (int64_t)n * c

/* Every window wholly inside the input (no padding, no ceil_mode overhang): the common
 * case (tiny, C3D but pool5), run without per-window clipping. */
static int pool_inside(const int in_thw[3], const int o[3], const vt_pool3d_p *p) {
    for (int d = 0; d < 3; d++)
        if (p->p[d] != 0 || (int64_t)(o[d] - 1) * p->s[d] + p->k[d] > in_thw[d])
            return 0;
    return 1;
}

/* Max and argmax of one row of windows (output row (ot, oh), Wo outputs, in chunks of
 * POOL_CHUNK): taps in (t, h, w) order; lanes are outputs, so the compiler vectorises the
 * select. exact: max_rule.h's rule, as pool_argmax (a later tap replaces if strictly
 * greater or NaN: a NaN anywhere in a window propagates); returns 0. Not exact: strictly
 * greater only — the same for windows without NaN —, a NaN tap's lane marked NaN (its bits
 * or-ed with all ones: sticky, as `v > b` keeps a NaN b); returns whether a lane was, for
 * the caller to redo the row exactly. On c3d's pools the NaN-aware select cost the forward
 * ~50%, a per-tap NaN flag ~12% (a reduction per tap loop), this mark (a compare and an or
 * per lane group) ~8%. arg NULL (not exact only, the forward): the max only, `v > b ? v :
 * b` is one maxps per lane group. */
#define POOL_CHUNK 64
typedef union pool_bits { float f; uint32_t u; } pool_bits;
static inline __attribute__((always_inline)) int
pool_row_max_s(float *restrict best, int32_t *restrict arg, const float *plane,
               const int in_thw[3], const vt_pool3d_p *p, int ot, int oh, int ow0, int len,
               const int64_t sw, const int exact) {
    const int64_t H = in_thw[1], W = in_thw[2];
    int first = 1;
    for (int kt = 0; kt < p->k[0]; kt++)
        for (int kh = 0; kh < p->k[1]; kh++) {
            const float *row = plane + ((int64_t)(ot * p->s[0] + kt) * H + oh * p->s[1] + kh) * W +
                               (int64_t)ow0 * sw;
            for (int kw = 0; kw < p->k[2]; kw++) {
                const int32_t tap = (int32_t)(((int64_t)kt * H + kh) * W + kw);
                const float *r = row + kw;
                if (first) {
#pragma omp simd
                    for (int i = 0; i < len; i++)
                        best[i] = r[i * sw];
                    if (arg)
                        for (int i = 0; i < len; i++)
                            arg[i] = tap;
                    first = 0;
                    continue;
                }
                if (!arg) {
#pragma omp simd
                    for (int i = 0; i < len; i++) {
                        const float v = r[i * sw], b = best[i];
                        pool_bits m = {v > b ? v : b};
                        m.u |= -(uint32_t)(v != v);
                        best[i] = m.f;
                    }
                    continue;
                }
                if (exact) {
#pragma omp simd
                    for (int i = 0; i < len; i++) {
                        const float v = r[i * sw], b = best[i];
                        const int32_t m = -(int32_t)vt_max_takes(v, b, 0); /* ones: v wins */
                        best[i] = m ? v : b;
                        arg[i] = (arg[i] & ~m) | (tap & m);
                    }
                    continue;
                }
#pragma omp simd
                for (int i = 0; i < len; i++) {
                    const float v = r[i * sw], b = best[i];
                    const int32_t m = -(int32_t)(v > b); /* all ones where v wins */
                    pool_bits bv = {v > b ? v : b};
                    bv.u |= -(uint32_t)(v != v);
                    best[i] = bv.f;
                    arg[i] = (arg[i] & ~m) | (tap & m);
                }
            }
        }
    if (exact)
        return 0;
    uint32_t nan = 0; /* a lane NaN: its exponent all ones, its mantissa not 0 */
    const pool_bits *bb = (const pool_bits *)best;
#pragma omp simd reduction(| : nan)
    for (int i = 0; i < len; i++)
        nan |= (uint32_t)((bb[i].u & 0x7fffffffu) > 0x7f800000u);
    return nan != 0;
}
/* The stride a compile-time 2 (the usual pooling): strided loads the compiler can
 * vectorise instead of a gather per lane; the forward wants no argmax (the pools were 12%
 * of a tiny step). Then a row that held a NaN again, exactly (arg: any scratch for the
 * forward). */
static void pool_row_max(float *best, int32_t *arg, int32_t *scratch, const float *plane,
                         const int in_thw[3], const vt_pool3d_p *p, int ot, int oh, int ow0,
                         int len) {
    int nan;
    if (p->s[2] == 2 && !arg)
        nan = pool_row_max_s(best, NULL, plane, in_thw, p, ot, oh, ow0, len, 2, 0);
    else if (p->s[2] == 2)
        nan = pool_row_max_s(best, arg, plane, in_thw, p, ot, oh, ow0, len, 2, 0);
    else if (!arg)
        nan = pool_row_max_s(best, NULL, plane, in_thw, p, ot, oh, ow0, len, p->s[2], 0);
    else
        nan = pool_row_max_s(best, arg, plane, in_thw, p, ot, oh, ow0, len, p->s[2], 0);
    if (nan)
        pool_row_max_s(best, arg ? arg : scratch, plane, in_thw, p, ot, oh, ow0, len, p->s[2], 1);
}

static void cpu_maxpool3d_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    POOL_DIMS;
    if (pool_inside(in_thw, o, p)) {
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
        for (int64_t pl = 0; pl < planes; pl++) {
            float best[POOL_CHUNK];
            int32_t scratch[POOL_CHUNK];
            for (int ot = 0; ot < o[0]; ot++)
                for (int oh = 0; oh < o[1]; oh++)
                    for (int ow0 = 0; ow0 < o[2]; ow0 += POOL_CHUNK) {
                        const int len = VT_MIN(POOL_CHUNK, o[2] - ow0);
                        pool_row_max(best, NULL, scratch, in + pl * sin, in_thw, p, ot, oh, ow0,
                                     len);
                        memcpy(out + pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow0, best,
                               sizeof(float) * (size_t)len);
                    }
        }
        return;
    }
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *plane = in + pl * sin;
        float *op = out + pl * sout;
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    pool_win wv = pool_window(in_thw, p, ot, oh, ow);
                    int64_t a = pool_argmax(plane, in_thw, &wv);
                    VT_CHECK(a >= 0, "maxpool window lies wholly in the padding");
                    *op++ = plane[a];
                }
    }
}

static void cpu_maxpool3d_backward(vt_backend *be, float *din, const float *dout, const float *in,
                                   int n, int c, const int in_thw[3], const vt_pool3d_p *p) {
    POOL_DIMS;
    if (pool_inside(in_thw, o, p)) {
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
        for (int64_t pl = 0; pl < planes; pl++) {
            float best[POOL_CHUNK];
            int32_t arg[POOL_CHUNK];
            float *gp = din + pl * sin;
            memset(gp, 0, sizeof(float) * (size_t)sin);
            for (int ot = 0; ot < o[0]; ot++)
                for (int oh = 0; oh < o[1]; oh++)
                    for (int ow0 = 0; ow0 < o[2]; ow0 += POOL_CHUNK) {
                        const int len = VT_MIN(POOL_CHUNK, o[2] - ow0);
                        pool_row_max(best, arg, NULL, in + pl * sin, in_thw, p, ot, oh, ow0, len);
                        const float *dp = dout + pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow0;
                        float *g0 = gp + ((int64_t)ot * p->s[0] * in_thw[1] + (int64_t)oh * p->s[1]) *
                                             in_thw[2] + (int64_t)ow0 * p->s[2];
                        for (int i = 0; i < len; i++) /* windows may overlap: in order */
                            g0[(int64_t)i * p->s[2] + arg[i]] += dp[i];
                    }
        }
        return;
    }
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *plane = in + pl * sin;
        const float *dp = dout + pl * sout;
        float *gp = din + pl * sin;
        memset(gp, 0, sizeof(float) * (size_t)sin);
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    pool_win wv = pool_window(in_thw, p, ot, oh, ow);
                    int64_t a = pool_argmax(plane, in_thw, &wv);
                    VT_CHECK(a >= 0, "maxpool window lies wholly in the padding");
                    gp[a] += *dp++;
                }
    }
}

static void cpu_avgpool3d_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    POOL_DIMS;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *plane = in + pl * sin;
        float *op = out + pl * sout;
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    pool_win wv = pool_window(in_thw, p, ot, oh, ow);
                    float s = 0;
                    for (int t = wv.lo[0]; t < wv.hi[0]; t++)
                        for (int h = wv.lo[1]; h < wv.hi[1]; h++) {
                            const float *r = plane + ((int64_t)t * in_thw[1] + h) * in_thw[2];
                            for (int w = wv.lo[2]; w < wv.hi[2]; w++)
                                s += r[w];
                        }
                    *op++ = s / (float)wv.div;
                }
    }
}

static void cpu_avgpool3d_backward(vt_backend *be, float *din, const float *dout, int n, int c,
                                   const int in_thw[3], const vt_pool3d_p *p) {
    POOL_DIMS;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * sin > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *dp = dout + pl * sout;
        float *gp = din + pl * sin;
        memset(gp, 0, sizeof(float) * (size_t)sin);
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    pool_win wv = pool_window(in_thw, p, ot, oh, ow);
                    float v = *dp++ / (float)wv.div;
                    for (int t = wv.lo[0]; t < wv.hi[0]; t++)
                        for (int h = wv.lo[1]; h < wv.hi[1]; h++) {
                            float *r = gp + ((int64_t)t * in_thw[1] + h) * in_thw[2];
                            for (int w = wv.lo[2]; w < wv.hi[2]; w++)
                                r[w] += v;
                        }
                }
    }
}

static void cpu_gap_forward(vt_backend *be, float *out, const float *in, int n, int c,
                            int64_t s) {
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        double a = 0;
        for (int64_t j = 0; j < s; j++)
            a += in[pl * s + j];
        out[pl] = (float)(a / (double)s);
    }
}
static void cpu_gap_backward(vt_backend *be, float *din, const float *dout, int n, int c,
                             int64_t s) {
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        float v = (float)((double)dout[pl] / (double)s);
        for (int64_t j = 0; j < s; j++)
            din[pl * s + j] = v;
    }
}

/* ---------------------------------------------------------------- linear ---- */

static void cpu_linear_forward(vt_backend *be, float *out, const float *in, const float *w,
                               const float *b, int n, int in_f, int out_f) {
    if (n == 0)
        return;
    /* out (N, O) = in (N, I) x w^T (I, O) */
    par_sgemm(be, 0, 1, n, out_f, in_f, 1.0f, in, in_f, w, in_f, 0.0f, out, out_f);
    if (b)
        for (int ni = 0; ni < n; ni++)
            for (int o = 0; o < out_f; o++)
                out[(int64_t)ni * out_f + o] += b[o];
}

static void cpu_linear_backward(vt_backend *be, float *din, float *dw, float *db,
                                const float *dout, const float *in, const float *w, int n,
                                int in_f, int out_f) {
    if (n == 0)
        return;
    if (din) /* din (N, I) = dout (N, O) x w (O, I) */
        par_sgemm(be, 0, 0, n, in_f, out_f, 1.0f, dout, out_f, w, in_f, 0.0f, din, in_f);
    /* dw (O, I) += dout^T (O, N) x in (N, I) */
    par_sgemm(be, 1, 0, out_f, in_f, n, 1.0f, dout, out_f, in, in_f, 1.0f, dw, in_f);
    if (db)
        for (int o = 0; o < out_f; o++) {
            double a = 0;
            for (int ni = 0; ni < n; ni++)
                a += dout[(int64_t)ni * out_f + o];
            db[o] += (float)a;
        }
}

/* ---------------------------------------------------------------- dropout ---- */

static void cpu_dropout_forward(vt_backend *be, float *out, float *mask, const float *in,
                                int64_t n, float p, uint64_t seed) {
    const float keep = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = vt_hash64(seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull));
        float u = (float)(h >> 40) / 16777216.0f; /* 24 bits: exact in float */
        float m = u >= p ? keep : 0.0f;
        mask[i] = m;
        out[i] = in[i] * m;
    }
}
static void cpu_dropout_backward(vt_backend *be, float *din, const float *dout, const float *mask,
                                 int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        din[i] = dout[i] * mask[i];
}

/* ---------------------------------------------------------------- losses ---- */

/* cw NULL: the unweighted formulas exactly as they were (no x 1.0 reordering). */
static void cpu_softmax_xent_w(vt_backend *be, float *loss, float *dlogits, float *prob,
                               const float *logits, const int32_t *label, const float *cw, int n,
                               int k, float smoothing, float grad_scale) {
    VT_CHECK(label || (!loss && !dlogits), "softmax_xent: a loss without labels");
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * (int64_t)k > 4096)
    for (int ni = 0; ni < n; ni++) {
        const float *z = logits + (int64_t)ni * k;
        int y = label ? label[ni] : -1; /* no labels: probabilities only */
        VT_CHECK(!label || (y >= 0 && y < k), "softmax_xent: label %d outside [0, %d)", y, k);
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double se = 0, sz = 0, sw = 0, swz = 0;
        for (int j = 0; j < k; j++) {
            se += exp((double)z[j] - mx);
            sz += (double)z[j] - mx;
            if (cw) {
                sw += cw[j];
                swz += cw[j] * ((double)z[j] - mx);
            }
        }
        double lse = log(se); /* relative to mx */
        /* loss = -sum t_j w_j (z_j - mx - lse) with t = (1-eps) onehot + eps/K; formed
         * before the loop below, which may overwrite z (prob == logits) */
        double l = 0, tw = 1.0; /* tw = sum_j t_j w_j */
        if (label && !cw)
            l = (1.0 - smoothing) * (lse - ((double)z[y] - mx)) + (double)smoothing * (lse - sz / k);
        else if (label) {
            l = (1.0 - smoothing) * cw[y] * (lse - ((double)z[y] - mx)) +
                (double)smoothing / k * (sw * lse - swz);
            tw = (1.0 - smoothing) * cw[y] + (double)smoothing / k * sw;
        }
        for (int j = 0; j < k; j++) {
            double t = (j == y ? 1.0 - smoothing : 0.0) + (double)smoothing / k;
            double pj = exp((double)z[j] - mx - lse);
            if (prob)
                prob[(int64_t)ni * k + j] = (float)pj;
            if (dlogits)
                dlogits[(int64_t)ni * k + j] =
                    (float)(grad_scale * (cw ? pj * tw - t * cw[j] : pj - t));
        }
        if (loss)
            loss[ni] = (float)l;
    }
}

static void cpu_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                             const float *logits, const int32_t *label, int n, int k,
                             float smoothing, float grad_scale) {
    cpu_softmax_xent_w(be, loss, dlogits, prob, logits, label, NULL, n, k, smoothing, grad_scale);
}

static void cpu_bce_logits(vt_backend *be, float *loss, float *dlogits, float *prob,
                           const float *logits, const float *target, int n, int k,
                           float grad_scale) {
    VT_CHECK(target || (!loss && !dlogits), "bce_logits: a loss without targets");
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * (int64_t)k > 4096)
    for (int ni = 0; ni < n; ni++) {
        double l = 0;
        for (int j = 0; j < k; j++) {
            int64_t i = (int64_t)ni * k + j;
            double x = logits[i];
            if (prob) /* cpu-ref's formula: the sigmoid users see */
                prob[i] = (float)(1.0 / (1.0 + exp(-x)));
            if (!target) /* no targets: probabilities only */
                continue;
            double t = target[i];
            double e = exp(-fabs(x));
            l += (x > 0 ? x : 0) - x * t + log1p(e);
            if (dlogits) { /* sigmoid from e = exp(-|x|), no overflow either side */
                double sig = x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
                dlogits[i] = (float)(grad_scale * (sig - t));
            }
        }
        if (loss)
            loss[ni] = (float)l;
    }
}

/* ---------------------------------------------------------------- optimizers ---- */
/* cpu-ref's element updates (models/optim_elem.h) under OpenMP: bitwise the same. */

static void cpu_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n,
                           float lr, float momentum, float dampening, float wd, int nesterov,
                           int64_t step, const vt_grad_gate *gate) {
    float c;
    const int clip = vt_grad_gate_clip(gate, &c);
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < (gate && gate->skip ? 0 : n); i++)
        vt_sgd_elem(p, vt_grad_gate_g(g, i, clip, c), buf, i, lr, momentum, dampening, wd,
                    nesterov, step);
}

static void cpu_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                               int64_t n, float lr, float alpha, float eps, float wd,
                               float momentum, const vt_grad_gate *gate) {
    float c;
    const int clip = vt_grad_gate_clip(gate, &c);
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < (gate && gate->skip ? 0 : n); i++)
        vt_rmsprop_elem(p, vt_grad_gate_g(g, i, clip, c), sq, buf, i, lr, alpha, eps, wd,
                        momentum);
}

static void cpu_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v,
                             int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                             int64_t step, const vt_grad_gate *gate) {
    float step_size, bc2_sqrt, c;
    vt_adamw_step_consts(lr, beta1, beta2, step, &step_size, &bc2_sqrt);
    const int clip = vt_grad_gate_clip(gate, &c);
#pragma omp parallel for num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < (gate && gate->skip ? 0 : n); i++)
        vt_adamw_elem(p, vt_grad_gate_g(g, i, clip, c), m, v, i, lr, beta1, beta2, eps, wd,
                      step_size, bc2_sqrt);
}

/* ---------------------------------------------------------------- the table ---- */

/* ---------------------------------------------------------------- exact sums ---- */

static void cpu_xsum_fold(vt_backend *be, int64_t *acc, const float *x, int64_t n, int init,
                          int e0) {
    (init ? vt_xsum_fold_init : vt_xsum_fold)(acc, x, n, e0, be->threads);
}
static void cpu_xsum_round(vt_backend *be, float *out, const int64_t *acc, int64_t n, int e0) {
    vt_xsum_round(out, acc, n, e0, be->threads);
}

static const vt_backend_i cpu_i = {
    .name = "cpu",
    .destroy = NULL, /* no context: every op's scratch lives for that op only */
    .alloc = cpu_alloc,
    .free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .synchronize = NULL,
    .host_alloc = NULL,
    .host_free = NULL,
    .upload = NULL,
    .upload_join = NULL,
    .upload_wait = NULL,
    .set_precision = NULL, /* FP32; TF32 computed as FP32; no BF16 */
    .fill = cpu_fill,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .round_even = cpu_round_even,
    .add = cpu_add,
    .sumsq = cpu_sumsq,
    .grad_sumsq = cpu_grad_sumsq,
    VT_BACKEND_GATE_HOST,
    .act_from_f32 = NULL,
    .act_to_f32 = NULL,
    .conv3d_forward = vt_cpu_conv3d_forward,
    .conv3d_backward = vt_cpu_conv3d_backward,
    .bn_stats = cpu_bn_stats,
    .bn_finalize = vt_cpu_bn_finalize,
    .bn_apply = cpu_bn_apply,
    .bn_backward_reduce = cpu_bn_backward_reduce,
    .bn_backward_apply = cpu_bn_backward_apply,
    VT_BACKEND_FUSED_COMPOSED, /* the net's fusion (forward, backward), checked */
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .silu_forward = vt_cpu_silu_forward,
    .silu_backward = vt_cpu_silu_backward,
    .sigmoid_forward = vt_cpu_sigmoid_forward,
    .sigmoid_backward = vt_cpu_sigmoid_backward,
    .chscale_forward = vt_cpu_chscale_forward,
    .chscale_backward = vt_cpu_chscale_backward,
    .maxpool3d_forward = cpu_maxpool3d_forward,
    .maxpool3d_backward = cpu_maxpool3d_backward,
    .avgpool3d_forward = cpu_avgpool3d_forward,
    .avgpool3d_backward = cpu_avgpool3d_backward,
    .gap_forward = cpu_gap_forward,
    .gap_backward = cpu_gap_backward,
    .linear_forward = cpu_linear_forward,
    .linear_backward = cpu_linear_backward,
    VT_CPU_ATTN_SLOTS(vt_fast_), /* the transformer ops: cpu_attn_fast.c */
    VT_CPU_MVIT_SLOTS(vt_fast_), /* MViT's ops: cpu_mvit_fast.c */
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .softmax_xent = cpu_softmax_xent,
    .softmax_xent_w = cpu_softmax_xent_w,
    .softmax_xent_soft = vt_cpu_softmax_xent_soft,
    .bce_logits = cpu_bce_logits,
    .sgd_update = cpu_sgd_update,
    .rmsprop_update = cpu_rmsprop_update,
    .adamw_update = cpu_adamw_update,
    .xsum_fold = cpu_xsum_fold,
    .xsum_round = cpu_xsum_round,
};

vt_backend *vt_backend_cpu_init(int threads, int64_t budget) {
    if (threads <= 0)
        threads = omp_get_num_procs();
    vt_backend *be = vt_calloc(1, sizeof(*be));
    be->i = &cpu_i;
    be->kind = VT_BACKEND_CPU;
    be->ordinal = 0;
    be->threads = threads;
    be->budget = budget;
    /* Process-wide (see the top of the file): single-threaded sgemm inside our teams,
     * once per process (cpu_blas.c). */
    vt_cpu_blas_init();
    return be;
}
