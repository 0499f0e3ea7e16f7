/*
 * cpu_ref.c: the cpu-ref backend — every op of vt_backend_i (backend.h) written as plain
 * nested loops, single-threaded, with double accumulators wherever a sum is formed. It is
 * the truth the fast CPU backend and the CUDA backend are tested against, and it is itself
 * tested against finite differences (test_gradcheck) and PyTorch (test_ops_torch).
 *
 * Precision (backend.h): FP32 and TF32 compute in FP32 (double accumulators); BF16 stores
 * every [A] array as bf16 and follows backend.h's rules through four helpers — ald/ast
 * load and store an activation, wld reads a master weight rounded to bf16, pacc rounds a
 * parameter-gradient contribution — so each op below reads as its FP32 form.
 *
 * It must never be clever: no BLAS, no threads, no reordering for speed, no shared state
 * (so several instances may run concurrently). If a loop here is hard to read, it is wrong.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/backend.h"
#include "models/bf16.h"
#include "models/cpu/cpu_attn.h"
#include "models/cpu/cpu_mvit.h"
#include "models/cpu/cpu_bn_final.h"
#include "models/cpu/cpu_loss.h"
#include "base/common.h"
#include "models/max_rule.h"
#include "models/relu_rule.h"
#include "models/xsum.h"
#include "models/optim_elem.h"
#include "models/cpu/cpu_ref_impl.h"


static int ref_set_precision(vt_backend *be, vt_precision p) {
    (void)be;
    (void)p;
    return 0; /* FP32, TF32 (computed as FP32) and BF16 */
}

/* ---------------------------------------------------------------- memory ---- */

static void *ref_alloc(vt_backend *be, size_t bytes) {
    (void)be;
    /* 64-byte alignment: cache lines and AVX-512 loads; aligned_alloc needs a multiple. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, rounded ? rounded : 64);
}
static void ref_free(vt_backend *be, void *ptr) { (void)be; free(ptr); }
static void ref_copy(vt_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes)
        memmove(dst, src, bytes);
}

/* ---------------------------------------------------------------- element-wise ---- */

static void ref_fill(vt_backend *be, float *x, float v, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
}
static void ref_scale(vt_backend *be, float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] *= a;
}
static void ref_axpy(vt_backend *be, float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}
static void ref_round_even(vt_backend *be, float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        x[i] = rintf(x[i]);
}
static void ref_add(vt_backend *be, float *out, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, out, i, ald(be, a, i) + ald(be, b, i));
}
static double ref_sumsq(vt_backend *be, const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return s;
}
static void ref_grad_sumsq(vt_backend *be, vt_grad_gate *gate, const float *x, int64_t n,
                           int add) {
    double s = ref_sumsq(be, x, n);
    gate->sumsq = add ? gate->sumsq + s : s;
}
static void ref_act_from_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, dst, i, src[i]);
}
static void ref_act_to_f32(vt_backend *be, float *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        dst[i] = ald(be, src, i);
}

/* ---------------------------------------------------------------- conv3d ---- */

/* Flat index of (n, c, t, h, w) in an (N, C, T, H, W) tensor. */
static inline int64_t idx5(int c_, int t_, int h_, int w_, int n, int c, int t, int h, int w) {
    return ((((int64_t)n * c_ + c) * t_ + t) * h_ + h) * w_ + w;
}

/* The taps k of one output position o that land inside an input of n along one axis
 * (stride s, padding p): [*lo, *hi), visited in the order a loop over every tap that
 * skips the rest would (the same sums, bit for bit). */
static inline void tap_range(int o, int s, int p, int k, int n, int *lo, int *hi) {
    const int i0 = o * s - p; /* the input index of tap 0 */
    *lo = i0 < 0 ? -i0 : 0;
    *hi = i0 + k > n ? n - i0 : k;
    if (*hi < *lo)
        *hi = *lo;
}

/* The outputs ow of a row whose tap kw lands inside an input of W (stride s, padding p),
 * iw = ow * s - p + kw in [0, W): [*lo, *hi). */
static inline void row_range(int kw, int s, int p, int W, int Wo, int *lo, int *hi) {
    const int first = p - kw; /* ow * s >= first */
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    const int last = W - 1 + p - kw; /* ow * s <= last */
    *hi = last < 0 ? 0 : VT_MIN(Wo, last / s + 1);
    if (*hi < *lo)
        *hi = *lo;
}

/* One output row (ni, co, ot, oh) at a time, in double accumulators: each output's sum
 * visits its taps in the order ci, kt, kh, kw as a loop over its own taps would (the same
 * sums, bit for bit); the row lets the CPU carry Wo sums at once, not wait on one. */
static void ref_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                               const float *b, int n, const int in_thw[3],
                               const vt_conv3d_p *p) {
    const int T = in_thw[0], H = in_thw[1], W = in_thw[2];
    const int To = vt_conv_out(T, p->k[0], p->s[0], p->p[0]);
    const int Ho = vt_conv_out(H, p->k[1], p->s[1], p->p[1]);
    const int Wo = vt_conv_out(W, p->k[2], p->s[2], p->p[2]);
    /* groups: output channel co reads the cig input channels of its group */
    const int cig = p->cin / vt_conv_groups(p), cog = p->cout / vt_conv_groups(p);
    double *acc = vt_malloc((size_t)VT_MAX(Wo, 1) * sizeof *acc);
    for (int ni = 0; ni < n; ni++)
        for (int co = 0; co < p->cout; co++)
            for (int ot = 0; ot < To; ot++)
                for (int oh = 0; oh < Ho; oh++) {
                    int t0, t1, h0, h1;
                    tap_range(ot, p->s[0], p->p[0], p->k[0], T, &t0, &t1);
                    tap_range(oh, p->s[1], p->p[1], p->k[1], H, &h0, &h1);
                    for (int ow = 0; ow < Wo; ow++)
                        acc[ow] = b ? wld(be, b, co) : 0.0;
                    for (int ci = co / cog * cig; ci < (co / cog + 1) * cig; ci++)
                        for (int kt = t0; kt < t1; kt++)
                            for (int kh = h0; kh < h1; kh++)
                                for (int kw = 0; kw < p->k[2]; kw++) {
                                    const int it = ot * p->s[0] - p->p[0] + kt;
                                    const int ih = oh * p->s[1] - p->p[1] + kh;
                                    const double wv = wld(be, w, idx5(cig, p->k[0], p->k[1],
                                                                      p->k[2], co, ci % cig, kt,
                                                                      kh, kw));
                                    /* x0: the input index of ow = 0's tap kw */
                                    const int64_t x0 =
                                        idx5(p->cin, T, H, W, ni, ci, it, ih, 0) - p->p[2] + kw;
                                    int lo, hi;
                                    row_range(kw, p->s[2], p->p[2], W, Wo, &lo, &hi);
                                    for (int ow = lo; ow < hi; ow++)
                                        acc[ow] += ald(be, in, x0 + (int64_t)ow * p->s[2]) * wv;
                                }
                    for (int ow = 0; ow < Wo; ow++)
                        ast(be, out, idx5(p->cout, To, Ho, Wo, ni, co, ot, oh, ow), acc[ow]);
                }
    free(acc);
}

static void ref_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                                const float *dout, const float *in, const float *w, int n,
                                const int in_thw[3], const vt_conv3d_p *p) {
    if (n == 0)
        return;
    const int T = in_thw[0], H = in_thw[1], W = in_thw[2];
    const int To = vt_conv_out(T, p->k[0], p->s[0], p->p[0]);
    const int Ho = vt_conv_out(H, p->k[1], p->s[1], p->p[1]);
    const int Wo = vt_conv_out(W, p->k[2], p->s[2], p->p[2]);
    const int64_t kvol = (int64_t)p->k[0] * p->k[1] * p->k[2];
    const int64_t nin = (int64_t)n * p->cin * T * H * W;
    const int cig = p->cin / vt_conv_groups(p), cog = p->cout / vt_conv_groups(p);
    const int64_t nw = (int64_t)p->cout * cig * kvol;

    /* Scatter every (output, tap) product into double accumulators, then store. */
    double *gin = din ? vt_calloc((size_t)nin, sizeof(double)) : NULL;
    double *gw = vt_calloc((size_t)nw, sizeof(double));
    for (int ni = 0; ni < n; ni++)
        for (int co = 0; co < p->cout; co++)
            for (int ot = 0; ot < To; ot++)
                for (int oh = 0; oh < Ho; oh++)
                    for (int ow = 0; ow < Wo; ow++) {
                        double g = ald(be, dout, idx5(p->cout, To, Ho, Wo, ni, co, ot, oh, ow));
                        for (int ci = co / cog * cig; ci < (co / cog + 1) * cig; ci++)
                            for (int kt = 0; kt < p->k[0]; kt++)
                                for (int kh = 0; kh < p->k[1]; kh++)
                                    for (int kw = 0; kw < p->k[2]; kw++) {
                                        int it = ot * p->s[0] - p->p[0] + kt;
                                        int ih = oh * p->s[1] - p->p[1] + kh;
                                        int iw = ow * p->s[2] - p->p[2] + kw;
                                        if (it < 0 || it >= T || ih < 0 || ih >= H || iw < 0 ||
                                            iw >= W)
                                            continue;
                                        int64_t xi = idx5(p->cin, T, H, W, ni, ci, it, ih, iw);
                                        int64_t wi = idx5(cig, p->k[0], p->k[1], p->k[2], co,
                                                          ci % cig, kt, kh, kw);
                                        gw[wi] += g * ald(be, in, xi);
                                        if (gin)
                                            gin[xi] += g * wld(be, w, wi);
                                    }
                    }
    for (int64_t i = 0; i < nw; i++)
        dw[i] += pacc(be, gw[i]);
    if (gin)
        for (int64_t i = 0; i < nin; i++)
            ast(be, din, i, gin[i]);
    if (db)
        for (int co = 0; co < p->cout; co++) {
            double s = 0;
            for (int ni = 0; ni < n; ni++)
                for (int64_t j = 0; j < (int64_t)To * Ho * Wo; j++)
                    s += ald(be, dout, ((int64_t)ni * p->cout + co) * To * Ho * Wo + j);
            db[co] += pacc(be, s);
        }
    free(gin);
    free(gw);
}

/* ---------------------------------------------------------------- batch norm ---- */

/* n == 0: the sums over an empty set are 0, written so a tower without clips still
 * contributes (zeros) to the sync-BN collective. Sums around the shift k (backend.h). */
static void ref_bn_stats(vt_backend *be, float *sum, float *sumsq, const float *x,
                         const float *k, int n, int c, int64_t s) {
    for (int ci = 0; ci < c; ci++) {
        const double kc = k ? k[ci] : 0.0;
        double a = 0, q = 0;
        for (int ni = 0; ni < n; ni++)
            for (int64_t j = 0; j < s; j++) {
                double v = ald(be, x, ((int64_t)ni * c + ci) * s + j) - kc;
                a += v;
                q += v * v;
            }
        sum[ci] = (float)a;
        sumsq[ci] = (float)q;
    }
}

/* The mean is k + mean, formed in double (k NULL: 0). */
static double ref_bn_mean(const float *k, const float *mean, int ci) {
    return (k ? (double)k[ci] : 0.0) + (double)mean[ci];
}

static void ref_bn_apply(vt_backend *be, float *out, const float *x, const float *k,
                         const float *mean, const float *invstd, const float *gamma,
                         const float *beta, int n, int c, int64_t s) {
    for (int ni = 0; ni < n; ni++)
        for (int ci = 0; ci < c; ci++) {
            double g = gamma ? gamma[ci] : 1.0, b = beta ? beta[ci] : 0.0;
            const double m = ref_bn_mean(k, mean, ci);
            for (int64_t j = 0; j < s; j++) {
                int64_t i = ((int64_t)ni * c + ci) * s + j;
                ast(be, out, i, g * ((double)ald(be, x, i) - m) * invstd[ci] + b);
            }
        }
}

static void ref_bn_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                   const float *dy, const float *x, const float *k,
                                   const float *mean, const float *invstd, int n, int c,
                                   int64_t s) {
    for (int ci = 0; ci < c; ci++) {
        const double m = ref_bn_mean(k, mean, ci);
        double a = 0, q = 0;
        for (int ni = 0; ni < n; ni++)
            for (int64_t j = 0; j < s; j++) {
                int64_t i = ((int64_t)ni * c + ci) * s + j;
                double d = ald(be, dy, i);
                a += d;
                q += d * ((double)ald(be, x, i) - m) * invstd[ci];
            }
        sum_dy[ci] = (float)a;
        sum_dy_xhat[ci] = (float)q;
    }
}

static void ref_bn_backward_apply(vt_backend *be, float *din, const float *dy, const float *x,
                                  const float *k, const float *mean, const float *invstd,
                                  const float *gamma,
                                  const float *sum_dy, const float *sum_dy_xhat, int64_t count,
                                  int n, int c, int64_t s) {
    if (n == 0)
        return;
    VT_CHECK(count > 0, "bn_backward_apply: count %lld", (long long)count);
    for (int ni = 0; ni < n; ni++)
        for (int ci = 0; ci < c; ci++) {
            double g = gamma ? gamma[ci] : 1.0;
            double mdy = (double)sum_dy[ci] / (double)count;
            double mdyx = (double)sum_dy_xhat[ci] / (double)count;
            const double m = ref_bn_mean(k, mean, ci);
            for (int64_t j = 0; j < s; j++) {
                int64_t i = ((int64_t)ni * c + ci) * s + j;
                double xhat = ((double)ald(be, x, i) - m) * invstd[ci];
                ast(be, din, i, g * invstd[ci] * ((double)ald(be, dy, i) - mdy - xhat * mdyx));
            }
        }
}

/* ---------------------------------------------------------------- activations ---- */

static void ref_relu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, out, i, vt_relu(ald(be, in, i))); /* a NaN passes (relu_rule.h) */
}
static void ref_relu_backward(vt_backend *be, float *din, const float *dout, const float *out,
                              int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, din, i, vt_relu_grad(ald(be, out, i), ald(be, dout, i)));
}

/* SiLU and sigmoid in double from the stored input: the reference's one rounding is the
 * store. */
static double ref_sig(double x) { return 1.0 / (1.0 + exp(-x)); }
static void ref_silu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double x = ald(be, in, i);
        ast(be, out, i, x * ref_sig(x));
    }
}
static void ref_silu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                              int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double x = ald(be, in, i), s = ref_sig(x);
        ast(be, din, i, ald(be, dout, i) * s * (1.0 + x * (1.0 - s)));
    }
}
static void ref_sigmoid_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, out, i, ref_sig(ald(be, in, i)));
}
static void ref_sigmoid_backward(vt_backend *be, float *din, const float *dout, const float *out,
                                 int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double y = ald(be, out, i);
        ast(be, din, i, ald(be, dout, i) * y * (1.0 - y));
    }
}
static void ref_chscale_forward(vt_backend *be, float *out, const float *x, const float *s,
                                int n, int c, int64_t sp) {
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++)
        for (int64_t j = 0; j < sp; j++)
            ast(be, out, pl * sp + j, (double)ald(be, x, pl * sp + j) * ald(be, s, pl));
}
static void ref_chscale_backward(vt_backend *be, float *dx, float *ds, const float *dout,
                                 const float *x, const float *s, int n, int c, int64_t sp) {
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++) {
        if (ds) { /* before dx: dx may be dout */
            double a = 0;
            for (int64_t j = 0; j < sp; j++)
                a += (double)ald(be, dout, pl * sp + j) * ald(be, x, pl * sp + j);
            ast(be, ds, pl, a);
        }
        if (dx)
            for (int64_t j = 0; j < sp; j++)
                ast(be, dx, pl * sp + j, (double)ald(be, dout, pl * sp + j) * ald(be, s, pl));
    }
}

/* ---------------------------------------------------------------- pooling ---- */

static void pool_outs(int o[3], const int in_thw[3], const vt_pool3d_p *p) {
    for (int d = 0; d < 3; d++)
        o[d] = vt_pool_out(in_thw[d], p->k[d], p->s[d], p->p[d], p->ceil_mode);
}

/* Index (relative to the plane) of the winning tap of output cell (ot, oh, ow): windows
 * are visited in (t, h, w) order under max_rule.h's rule (PyTorch's): a strictly larger
 * value or a NaN replaces the best, so ties keep the first maximum, a NaN anywhere in the
 * window propagates and of several NaNs the last wins. Padding never wins (PyTorch pads
 * max pooling with -inf). */
static int64_t ref_max_arg(const vt_backend *be, const float *in, int64_t base,
                           const int in_thw[3], const vt_pool3d_p *p, int ot, int oh, int ow) {
    int64_t best = -1;
    float bv = 0;
    for (int kt = 0; kt < p->k[0]; kt++)
        for (int kh = 0; kh < p->k[1]; kh++)
            for (int kw = 0; kw < p->k[2]; kw++) {
                int it = ot * p->s[0] - p->p[0] + kt;
                int ih = oh * p->s[1] - p->p[1] + kh;
                int iw = ow * p->s[2] - p->p[2] + kw;
                if (it < 0 || it >= in_thw[0] || ih < 0 || ih >= in_thw[1] || iw < 0 ||
                    iw >= in_thw[2])
                    continue;
                int64_t i = ((int64_t)it * in_thw[1] + ih) * in_thw[2] + iw;
                float v = ald(be, in, base + i);
                if (vt_max_takes(v, bv, best < 0)) {
                    best = i;
                    bv = v;
                }
            }
    VT_CHECK(best >= 0, "maxpool window (%d,%d,%d) lies wholly in the padding", ot, oh, ow);
    return best;
}

static void ref_maxpool3d_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    int o[3];
    pool_outs(o, in_thw, p);
    const int64_t sin = (int64_t)in_thw[0] * in_thw[1] * in_thw[2];
    const int64_t sout = (int64_t)o[0] * o[1] * o[2];
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++)
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    int64_t a = ref_max_arg(be, in, pl * sin, in_thw, p, ot, oh, ow);
                    ast(be, out, pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow,
                        ald(be, in, pl * sin + a));
                }
}

static void ref_maxpool3d_backward(vt_backend *be, float *din, const float *dout, const float *in,
                                   int n, int c, const int in_thw[3], const vt_pool3d_p *p) {
    int o[3];
    pool_outs(o, in_thw, p);
    const int64_t sin = (int64_t)in_thw[0] * in_thw[1] * in_thw[2];
    const int64_t sout = (int64_t)o[0] * o[1] * o[2];
    /* Sums per input cell (overlapping windows add up) in float, in output order, then
     * stored once. */
    float *g = vt_calloc((size_t)VT_MAX(sin, 1), sizeof(float));
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++) {
        memset(g, 0, (size_t)sin * sizeof(float));
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    int64_t a = ref_max_arg(be, in, pl * sin, in_thw, p, ot, oh, ow);
                    g[a] += ald(be, dout, pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow);
                }
        for (int64_t i = 0; i < sin; i++)
            ast(be, din, pl * sin + i, g[i]);
    }
    free(g);
}

/* PyTorch's avg_pool3d divisor with count_include_pad=True: the window clipped to the
 * PADDED input (so ceil_mode windows running past it count fewer cells). */
static int ref_avg_window(int lo[3], int hi[3], const int in_thw[3], const vt_pool3d_p *p,
                          const int oc[3]) {
    int div = 1;
    for (int d = 0; d < 3; d++) {
        int start = oc[d] * p->s[d] - p->p[d];
        int end = VT_MIN(start + p->k[d], in_thw[d] + p->p[d]);
        div *= end - start;
        lo[d] = VT_MAX(start, 0);
        hi[d] = VT_MIN(end, in_thw[d]);
    }
    return div;
}

static void ref_avgpool3d_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    int o[3];
    pool_outs(o, in_thw, p);
    const int64_t sin = (int64_t)in_thw[0] * in_thw[1] * in_thw[2];
    const int64_t sout = (int64_t)o[0] * o[1] * o[2];
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++)
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    int lo[3], hi[3], oc[3] = {ot, oh, ow};
                    int div = ref_avg_window(lo, hi, in_thw, p, oc);
                    double s = 0;
                    for (int t = lo[0]; t < hi[0]; t++)
                        for (int h = lo[1]; h < hi[1]; h++)
                            for (int w = lo[2]; w < hi[2]; w++)
                                s += ald(be, in, pl * sin + ((int64_t)t * in_thw[1] + h) *
                                                                 in_thw[2] + w);
                    ast(be, out, pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow, s / div);
                }
}

static void ref_avgpool3d_backward(vt_backend *be, float *din, const float *dout, int n, int c,
                                   const int in_thw[3], const vt_pool3d_p *p) {
    int o[3];
    pool_outs(o, in_thw, p);
    const int64_t sin = (int64_t)in_thw[0] * in_thw[1] * in_thw[2];
    const int64_t sout = (int64_t)o[0] * o[1] * o[2];
    double *g = vt_calloc((size_t)VT_MAX(sin, 1), sizeof(double));
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++) {
        memset(g, 0, (size_t)sin * sizeof(double));
        for (int ot = 0; ot < o[0]; ot++)
            for (int oh = 0; oh < o[1]; oh++)
                for (int ow = 0; ow < o[2]; ow++) {
                    int lo[3], hi[3], oc[3] = {ot, oh, ow};
                    int div = ref_avg_window(lo, hi, in_thw, p, oc);
                    double v = ald(be, dout, pl * sout + ((int64_t)ot * o[1] + oh) * o[2] + ow) /
                               (double)div;
                    for (int t = lo[0]; t < hi[0]; t++)
                        for (int h = lo[1]; h < hi[1]; h++)
                            for (int w = lo[2]; w < hi[2]; w++)
                                g[((int64_t)t * in_thw[1] + h) * in_thw[2] + w] += v;
                }
        for (int64_t i = 0; i < sin; i++)
            ast(be, din, pl * sin + i, g[i]);
    }
    free(g);
}

static void ref_gap_forward(vt_backend *be, float *out, const float *in, int n, int c,
                            int64_t s) {
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++) {
        double a = 0;
        for (int64_t j = 0; j < s; j++)
            a += ald(be, in, pl * s + j);
        ast(be, out, pl, a / (double)s);
    }
}
static void ref_gap_backward(vt_backend *be, float *din, const float *dout, int n, int c,
                             int64_t s) {
    for (int64_t pl = 0; pl < (int64_t)n * c; pl++)
        for (int64_t j = 0; j < s; j++)
            ast(be, din, pl * s + j, (double)ald(be, dout, pl) / (double)s);
}

/* ---------------------------------------------------------------- linear ---- */

static void ref_linear_forward(vt_backend *be, float *out, const float *in, const float *w,
                               const float *b, int n, int in_f, int out_f) {
    for (int ni = 0; ni < n; ni++)
        for (int o = 0; o < out_f; o++) {
            double a = b ? wld(be, b, o) : 0.0;
            for (int i = 0; i < in_f; i++)
                a += (double)ald(be, in, (int64_t)ni * in_f + i) * wld(be, w, (int64_t)o * in_f + i);
            ast(be, out, (int64_t)ni * out_f + o, a);
        }
}

static void ref_linear_backward(vt_backend *be, float *din, float *dw, float *db,
                                const float *dout, const float *in, const float *w, int n,
                                int in_f, int out_f) {
    if (n == 0)
        return;
    if (din)
        for (int ni = 0; ni < n; ni++)
            for (int i = 0; i < in_f; i++) {
                double a = 0;
                for (int o = 0; o < out_f; o++)
                    a += (double)ald(be, dout, (int64_t)ni * out_f + o) *
                         wld(be, w, (int64_t)o * in_f + i);
                ast(be, din, (int64_t)ni * in_f + i, a);
            }
    for (int o = 0; o < out_f; o++)
        for (int i = 0; i < in_f; i++) {
            double a = 0;
            for (int ni = 0; ni < n; ni++)
                a += (double)ald(be, dout, (int64_t)ni * out_f + o) *
                     ald(be, in, (int64_t)ni * in_f + i);
            dw[(int64_t)o * in_f + i] += pacc(be, a);
        }
    if (db)
        for (int o = 0; o < out_f; o++) {
            double a = 0;
            for (int ni = 0; ni < n; ni++)
                a += ald(be, dout, (int64_t)ni * out_f + o);
            db[o] += pacc(be, a);
        }
}

/* ---------------------------------------------------------------- dropout ---- */

static void ref_dropout_forward(vt_backend *be, float *out, float *mask, const float *in,
                                int64_t n, float p, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) {
        uint64_t h = vt_hash64(seed ^ ((uint64_t)i * 0x9E3779B97F4A7C15ull));
        float u = (float)(h >> 40) / 16777216.0f; /* 24 bits: exact in float */
        float m = (u >= p && p < 1.0f) ? 1.0f / (1.0f - p) : 0.0f;
        mask[i] = m;
        ast(be, out, i, ald(be, in, i) * m);
    }
}
static void ref_dropout_backward(vt_backend *be, float *din, const float *dout, const float *mask,
                                 int64_t n) {
    for (int64_t i = 0; i < n; i++)
        ast(be, din, i, ald(be, dout, i) * mask[i]);
}

/* ---------------------------------------------------------------- the table ---- */

/* ---------------------------------------------------------------- exact sums ---- */

static void ref_xsum_fold(vt_backend *be, int64_t *acc, const float *x, int64_t n, int init,
                          int e0) {
    if (init) /* readable: zeroed, then folded (the fast path's one pass: the same integers) */
        memset(acc, 0, (size_t)n * 2 * sizeof *acc);
    vt_xsum_fold(acc, x, n, e0, be->threads);
}
static void ref_xsum_round(vt_backend *be, float *out, const int64_t *acc, int64_t n, int e0) {
    vt_xsum_round(out, acc, n, e0, be->threads);
}

static const vt_backend_i ref_i = {
    .name = "cpu-ref",
    /* NULL (nothing to do or no such thing on the host): destroy, synchronize,
     * host_alloc, host_free, upload, upload_join, upload_wait */
    .alloc = ref_alloc,
    .free = ref_free,
    .to_device = ref_copy,
    .to_host = ref_copy,
    .copy = ref_copy,
    .set_precision = ref_set_precision,
    .fill = ref_fill,
    .scale = ref_scale,
    .axpy = ref_axpy,
    .round_even = ref_round_even,
    .add = ref_add,
    .sumsq = ref_sumsq,
    .grad_sumsq = ref_grad_sumsq,
    VT_BACKEND_GATE_HOST,
    .act_from_f32 = ref_act_from_f32,
    .act_to_f32 = ref_act_to_f32,
    .conv3d_forward = ref_conv3d_forward,
    .conv3d_backward = ref_conv3d_backward,
    .bn_stats = ref_bn_stats,
    .bn_finalize = vt_cpu_bn_finalize,
    .bn_apply = ref_bn_apply,
    .bn_backward_reduce = ref_bn_backward_reduce,
    .bn_backward_apply = ref_bn_backward_apply,
    VT_BACKEND_FUSED_COMPOSED, /* the net's fusion (forward, backward), checked */
    .relu_forward = ref_relu_forward,
    .relu_backward = ref_relu_backward,
    .silu_forward = ref_silu_forward,
    .silu_backward = ref_silu_backward,
    .sigmoid_forward = ref_sigmoid_forward,
    .sigmoid_backward = ref_sigmoid_backward,
    .chscale_forward = ref_chscale_forward,
    .chscale_backward = ref_chscale_backward,
    .maxpool3d_forward = ref_maxpool3d_forward,
    .maxpool3d_backward = ref_maxpool3d_backward,
    .avgpool3d_forward = ref_avgpool3d_forward,
    .avgpool3d_backward = ref_avgpool3d_backward,
    .gap_forward = ref_gap_forward,
    .gap_backward = ref_gap_backward,
    .linear_forward = ref_linear_forward,
    .linear_backward = ref_linear_backward,
    VT_CPU_ATTN_SLOTS(vt_ref_), /* the transformer ops: cpu_attn.c */
    VT_CPU_MVIT_SLOTS(vt_ref_), /* MViT's ops: cpu_mvit.c */
    .dropout_forward = ref_dropout_forward,
    .dropout_backward = ref_dropout_backward,
    .softmax_xent = vt_cpuref_softmax_xent,
    .softmax_xent_w = vt_cpuref_softmax_xent_w,
    .softmax_xent_soft = vt_cpu_softmax_xent_soft,
    .bce_logits = vt_cpuref_bce_logits,
    .sgd_update = vt_cpuref_sgd_update,
    .rmsprop_update = vt_cpuref_rmsprop_update,
    .adamw_update = vt_cpuref_adamw_update,
    .xsum_fold = ref_xsum_fold,
    .xsum_round = ref_xsum_round,
};

vt_backend *vt_backend_cpu_ref_init(int64_t budget) {
    vt_backend *be = vt_calloc(1, sizeof(*be));
    be->i = &ref_i;
    be->ctx = NULL;
    be->kind = VT_BACKEND_CPU_REF;
    be->ordinal = 0;
    be->threads = 1;
    be->budget = budget;
    return be;
}
