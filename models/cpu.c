/*
 * cpu.c: the fast CPU backend — conv3d as vol2col + OpenBLAS sgemm, linear as sgemm, and
 * OpenMP loops for everything else. Every op is compared with cpu-ref (cpu_ref.c) by
 * tests/test_ops.c. It must never be nondeterministic: the same inputs give bitwise the
 * same outputs run to run (reductions run in a fixed order per output, no atomics, parallel
 * partitions that do not depend on timing), and it must never keep state outside its
 * context (several towers each own one of these and call ops concurrently).
 *
 * Threads. OpenMP regions carry num_threads(be->threads) (never omp_set_num_threads, which
 * would change other towers' teams). OpenBLAS has ONE process-wide thread count, set by
 * openblas_set_num_threads at init: the last cpu backend created wins. With several CPU
 * towers the usual plan is threads = cores / towers each, so all inits set the same value;
 * concurrent sgemm calls from several towers are safe in OpenBLAS >= 0.3.7 (its buffers are
 * locked) but share its one thread pool. sgemm splits only the M and N dimensions across
 * threads, never K, so its results do not depend on the thread count.
 *
 * Scratch. The vol2col buffer lives in the context, grows to the largest layer seen and is
 * reused: Cin*kT*kH*kW * To*Ho*Wo floats for ONE clip (r3d18 conv1 at 16x112x112: 441 x
 * 50176 floats = 88 MB; a 64->64 k3 layer at 8x28x28: 1728 x 6272 = 43 MB). 1x1x1 stride-1
 * unpadded convs use the input directly and need none.
 *
 * Measured once (Release -O2, 2-core build machine shared with other jobs, load ~8, so
 * both figures are pessimistic): conv3d forward, N=4, 64->64, in 8x28x28, k3 s1 p1
 * (5.5 GFLOP): cpu-ref 25.9 s (0.2 GFLOP/s), cpu 0.64-0.82 s (6.8-8.6 GFLOP/s, threads
 * 2) = 32-40x; cpu backward (din + dw) 1.4-1.6 s.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <omp.h>

#include "models/backend.h"
#include "models/common.h"

typedef struct cpu_ctx {
    float *cols;      /* (Cin*kT*kH*kW, To*Ho*Wo) for one clip; grow-only */
    size_t cols_cap;  /* floats */
} cpu_ctx;

/* Element-wise loops below this length run on one thread: a team costs microseconds. */
#define CPU_PAR_MIN 32768

static float *cpu_cols(vt_backend *be, size_t floats) {
    cpu_ctx *c = be->ctx;
    if (floats > c->cols_cap) {
        free(c->cols);
        c->cols = vt_malloc(floats * sizeof(float));
        c->cols_cap = floats;
    }
    return c->cols;
}

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
static void cpu_destroy(vt_backend *be) {
    cpu_ctx *c = be->ctx;
    if (c)
        free(c->cols);
    free(c);
    be->ctx = NULL;
}

/* ---------------------------------------------------------------- element-wise ---- */

static void cpu_fill(vt_backend *be, float *x, float v, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] = v;
}
static void cpu_scale(vt_backend *be, float *x, float a, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        x[i] *= a;
}
static void cpu_axpy(vt_backend *be, float *y, float a, const float *x, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        y[i] += a * x[i];
}
static void cpu_add(vt_backend *be, float *out, const float *a, const float *b, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static)
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

/* ---------------------------------------------------------------- conv3d ---- */

typedef struct conv_geo {
    int T, H, W, To, Ho, Wo;
    int64_t kvol, K, P, in_plane; /* K = Cin*kvol rows of cols, P = To*Ho*Wo columns */
    int direct;                   /* 1x1x1, stride 1, no padding: cols == the input */
} conv_geo;

static conv_geo conv_geometry(const int in_thw[3], const vt_conv3d_p *p) {
    conv_geo g;
    g.T = in_thw[0], g.H = in_thw[1], g.W = in_thw[2];
    g.To = vt_conv_out(g.T, p->k[0], p->s[0], p->p[0]);
    g.Ho = vt_conv_out(g.H, p->k[1], p->s[1], p->p[1]);
    g.Wo = vt_conv_out(g.W, p->k[2], p->s[2], p->p[2]);
    g.kvol = (int64_t)p->k[0] * p->k[1] * p->k[2];
    g.K = p->cin * g.kvol;
    g.P = (int64_t)g.To * g.Ho * g.Wo;
    g.in_plane = (int64_t)g.T * g.H * g.W;
    g.direct = g.kvol == 1 && p->s[0] == 1 && p->s[1] == 1 && p->s[2] == 1 && p->p[0] == 0 &&
               p->p[1] == 0 && p->p[2] == 0;
    return g;
}

/* cols (K, P): row r = (ci, kt, kh, kw), column = (ot, oh, ow); zero where the tap lands
 * in the padding. Rows are independent, so they are split across threads. */
static void vol2col(vt_backend *be, float *cols, const float *in, const conv_geo *g,
                    const vt_conv3d_p *p) {
    const int k1 = p->k[1], k2 = p->k[2];
#pragma omp parallel for num_threads(be->threads) schedule(static) if (g->K * g->P > CPU_PAR_MIN)
    for (int64_t r = 0; r < g->K; r++) {
        int kw = (int)(r % k2), kh = (int)((r / k2) % k1), kt = (int)((r / (k1 * k2)) % p->k[0]);
        int ci = (int)(r / g->kvol);
        const float *src = in + ci * g->in_plane;
        float *dst = cols + r * g->P;
        for (int ot = 0; ot < g->To; ot++) {
            int it = ot * p->s[0] - p->p[0] + kt;
            if (it < 0 || it >= g->T) {
                memset(dst, 0, sizeof(float) * (size_t)g->Ho * g->Wo);
                dst += (int64_t)g->Ho * g->Wo;
                continue;
            }
            for (int oh = 0; oh < g->Ho; oh++, dst += g->Wo) {
                int ih = oh * p->s[1] - p->p[1] + kh;
                if (ih < 0 || ih >= g->H) {
                    memset(dst, 0, sizeof(float) * (size_t)g->Wo);
                    continue;
                }
                const float *row = src + ((int64_t)it * g->H + ih) * g->W;
                if (p->s[2] == 1) { /* zeros, one contiguous run of the row, zeros */
                    int iw0 = -p->p[2] + kw;
                    int lo = VT_MIN(VT_MAX(0, -iw0), g->Wo);
                    int hi = VT_MAX(VT_MIN(g->Wo, g->W - iw0), lo);
                    memset(dst, 0, sizeof(float) * (size_t)lo);
                    if (hi > lo)
                        memcpy(dst + lo, row + iw0 + lo, sizeof(float) * (size_t)(hi - lo));
                    memset(dst + hi, 0, sizeof(float) * (size_t)(g->Wo - hi));
                } else {
                    for (int ow = 0; ow < g->Wo; ow++) {
                        int iw = ow * p->s[2] - p->p[2] + kw;
                        dst[ow] = (iw >= 0 && iw < g->W) ? row[iw] : 0.0f;
                    }
                }
            }
        }
    }
}

/* din (Cin, T, H, W) = sum over taps of cols (K, P), overwritten. One thread per input
 * channel: a channel's rows only touch its own plane, and within it the order is fixed. */
static void col2vol(vt_backend *be, float *din, const float *cols, const conv_geo *g,
                    const vt_conv3d_p *p) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (g->K * g->P > CPU_PAR_MIN)
    for (int ci = 0; ci < p->cin; ci++) {
        float *dst = din + ci * g->in_plane;
        memset(dst, 0, sizeof(float) * (size_t)g->in_plane);
        for (int kt = 0; kt < p->k[0]; kt++)
            for (int kh = 0; kh < p->k[1]; kh++)
                for (int kw = 0; kw < p->k[2]; kw++) {
                    int64_t r = ((int64_t)ci * p->k[0] + kt) * p->k[1] * p->k[2] +
                                (int64_t)kh * p->k[2] + kw;
                    const float *src = cols + r * g->P;
                    for (int ot = 0; ot < g->To; ot++) {
                        int it = ot * p->s[0] - p->p[0] + kt;
                        if (it < 0 || it >= g->T)
                            continue;
                        for (int oh = 0; oh < g->Ho; oh++) {
                            int ih = oh * p->s[1] - p->p[1] + kh;
                            if (ih < 0 || ih >= g->H)
                                continue;
                            float *row = dst + ((int64_t)it * g->H + ih) * g->W;
                            const float *s = src + ((int64_t)ot * g->Ho + oh) * g->Wo;
                            for (int ow = 0; ow < g->Wo; ow++) {
                                int iw = ow * p->s[2] - p->p[2] + kw;
                                if (iw >= 0 && iw < g->W)
                                    row[iw] += s[ow];
                            }
                        }
                    }
                }
    }
}

static void cpu_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                               const float *b, int n, const int in_thw[3],
                               const vt_conv3d_p *p) {
    if (n == 0)
        return;
    conv_geo g = conv_geometry(in_thw, p);
    float *cols = g.direct ? NULL : cpu_cols(be, (size_t)(g.K * g.P));
    for (int ni = 0; ni < n; ni++) {
        const float *in_n = in + (int64_t)ni * p->cin * g.in_plane;
        float *out_n = out + (int64_t)ni * p->cout * g.P;
        if (!g.direct)
            vol2col(be, cols, in_n, &g, p);
        /* out_n (Cout, P) = w (Cout, K) x cols (K, P) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->cout, (int)g.P, (int)g.K, 1.0f,
                    w, (int)g.K, g.direct ? in_n : cols, (int)g.P, 0.0f, out_n, (int)g.P);
        if (b) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (p->cout * g.P > CPU_PAR_MIN)
            for (int co = 0; co < p->cout; co++)
                for (int64_t j = 0; j < g.P; j++)
                    out_n[co * g.P + j] += b[co];
        }
    }
}

static void cpu_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                                const float *dout, const float *in, const float *w, int n,
                                const int in_thw[3], const vt_conv3d_p *p) {
    if (n == 0)
        return;
    conv_geo g = conv_geometry(in_thw, p);
    float *cols = g.direct ? NULL : cpu_cols(be, (size_t)(g.K * g.P));
    for (int ni = 0; ni < n; ni++) {
        const float *in_n = in + (int64_t)ni * p->cin * g.in_plane;
        const float *dout_n = dout + (int64_t)ni * p->cout * g.P;
        if (!g.direct)
            vol2col(be, cols, in_n, &g, p);
        /* dw (Cout, K) += dout_n (Cout, P) x cols^T (P, K); clips add in order. */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->cout, (int)g.K, (int)g.P, 1.0f,
                    dout_n, (int)g.P, g.direct ? in_n : cols, (int)g.P, 1.0f, dw, (int)g.K);
        if (!din)
            continue;
        float *din_n = din + (int64_t)ni * p->cin * g.in_plane;
        /* dcols (K, P) = w^T (K, Cout) x dout_n (Cout, P); the cols buffer is free again. */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g.K, (int)g.P, p->cout, 1.0f, w,
                    (int)g.K, dout_n, (int)g.P, 0.0f, g.direct ? din_n : cols, (int)g.P);
        if (!g.direct)
            col2vol(be, din_n, cols, &g, p);
    }
    if (db) {
#pragma omp parallel for num_threads(be->threads) schedule(static) \
    if ((int64_t)n * p->cout * g.P > CPU_PAR_MIN)
        for (int co = 0; co < p->cout; co++) {
            double s = 0;
            for (int ni = 0; ni < n; ni++) {
                const float *d = dout + ((int64_t)ni * p->cout + co) * g.P;
                for (int64_t j = 0; j < g.P; j++)
                    s += d[j];
            }
            db[co] += (float)s;
        }
    }
}

/* ---------------------------------------------------------------- batch norm ---- */

static void cpu_bn_stats(vt_backend *be, float *sum, float *sumsq, const float *x, int n, int c,
                         int64_t s) {
#pragma omp parallel for num_threads(be->threads) schedule(static) \
    if ((int64_t)n * c * s > CPU_PAR_MIN)
    for (int ci = 0; ci < c; ci++) {
        double a = 0, q = 0;
        for (int ni = 0; ni < n; ni++) {
            const float *xp = x + ((int64_t)ni * c + ci) * s;
            for (int64_t j = 0; j < s; j++) {
                double v = xp[j];
                a += v;
                q += v * v;
            }
        }
        sum[ci] = (float)a;
        sumsq[ci] = (float)q;
    }
}

/* Per-channel scalars: the same arithmetic as cpu-ref, so the two agree bitwise. */
static void cpu_bn_finalize(vt_backend *be, float *mean, float *invstd, float *running_mean,
                            float *running_var, const float *sum, const float *sumsq,
                            int64_t count, int c, float momentum, float eps) {
    VT_CHECK(count > 0 || (running_mean && running_var),
             "bn_finalize: count 0 (eval) needs the running statistics");
    for (int ci = 0; ci < c; ci++) {
        if (count == 0) {
            mean[ci] = running_mean[ci];
            invstd[ci] = (float)(1.0 / sqrt((double)running_var[ci] + eps));
            continue;
        }
        double m = (double)sum[ci] / (double)count;
        double var = (double)sumsq[ci] / (double)count - m * m;
        if (var < 0)
            var = 0;
        mean[ci] = (float)m;
        invstd[ci] = (float)(1.0 / sqrt(var + eps));
        if (running_mean) {
            double unbiased = count > 1 ? var * (double)count / (double)(count - 1) : var;
            running_mean[ci] = (float)((1.0 - momentum) * running_mean[ci] + momentum * m);
            running_var[ci] = (float)((1.0 - momentum) * running_var[ci] + momentum * unbiased);
        }
    }
}

static void cpu_bn_apply(vt_backend *be, float *out, const float *x, const float *mean,
                         const float *invstd, const float *gamma, const float *beta, int n,
                         int c, int64_t s) {
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        int ci = (int)(pl % c);
        /* (x - mean) * sc + beta, not x * sc + (beta - mean * sc): the folded form cancels
         * catastrophically when invstd is large (var ~ 0, e.g. one value per channel). */
        float sc = (gamma ? gamma[ci] : 1.0f) * invstd[ci];
        float m = mean[ci], sh = beta ? beta[ci] : 0.0f;
        const float *xp = x + pl * s;
        float *op = out + pl * s;
        for (int64_t j = 0; j < s; j++)
            op[j] = (xp[j] - m) * sc + sh;
    }
}

static void cpu_bn_backward_reduce(vt_backend *be, float *sum_dy, float *sum_dy_xhat,
                                   const float *dy, const float *x, const float *mean,
                                   const float *invstd, int n, int c, int64_t s) {
#pragma omp parallel for num_threads(be->threads) schedule(static) \
    if ((int64_t)n * c * s > CPU_PAR_MIN)
    for (int ci = 0; ci < c; ci++) {
        double a = 0, q = 0, m = mean[ci];
        for (int ni = 0; ni < n; ni++) {
            const float *d = dy + ((int64_t)ni * c + ci) * s;
            const float *xp = x + ((int64_t)ni * c + ci) * s;
            for (int64_t j = 0; j < s; j++) {
                a += d[j];
                q += (double)d[j] * ((double)xp[j] - m);
            }
        }
        sum_dy[ci] = (float)a;
        sum_dy_xhat[ci] = (float)(q * invstd[ci]);
    }
}

static void cpu_bn_backward_apply(vt_backend *be, float *din, const float *dy, const float *x,
                                  const float *mean, const float *invstd, const float *gamma,
                                  const float *sum_dy, const float *sum_dy_xhat, int64_t count,
                                  int n, int c, int64_t s) {
    if (n == 0)
        return;
    VT_CHECK(count > 0, "bn_backward_apply: count %lld", (long long)count);
    int64_t planes = (int64_t)n * c;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * s > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        int ci = (int)(pl % c);
        float is = invstd[ci], m = mean[ci];
        float k = (gamma ? gamma[ci] : 1.0f) * is;
        float mdy = (float)((double)sum_dy[ci] / (double)count);
        float mdyx = (float)((double)sum_dy_xhat[ci] / (double)count);
        const float *d = dy + pl * s, *xp = x + pl * s;
        float *o = din + pl * s;
        for (int64_t j = 0; j < s; j++)
            o[j] = k * (d[j] - mdy - (xp[j] - m) * is * mdyx);
    }
}

/* ---------------------------------------------------------------- activations ---- */

static void cpu_relu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = in[i] > 0 ? in[i] : 0.0f;
}
static void cpu_relu_backward(vt_backend *be, float *din, const float *dout, const float *out,
                              int64_t n) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        din[i] = out[i] > 0 ? dout[i] : 0.0f;
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

/* Index of the first maximum in the window: (t, h, w) order, strictly-greater replaces. */
static inline int64_t pool_argmax(const float *plane, const int in_thw[3], const pool_win *wv) {
    int64_t best = -1;
    float bv = -INFINITY;
    for (int t = wv->lo[0]; t < wv->hi[0]; t++)
        for (int h = wv->lo[1]; h < wv->hi[1]; h++) {
            int64_t base = ((int64_t)t * in_thw[1] + h) * in_thw[2];
            for (int w = wv->lo[2]; w < wv->hi[2]; w++)
                if (best < 0 || plane[base + w] > bv) {
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

static void cpu_maxpool3d_forward(vt_backend *be, float *out, const float *in, int n, int c,
                                  const int in_thw[3], const vt_pool3d_p *p) {
    POOL_DIMS;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * sin > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * sin > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * sin > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * sin > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * s > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (planes * s > CPU_PAR_MIN)
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
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out_f, in_f, 1.0f, in, in_f, w, in_f,
                0.0f, out, out_f);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in_f, out_f, 1.0f, dout, out_f,
                    w, in_f, 0.0f, din, in_f);
    /* dw (O, I) += dout^T (O, N) x in (N, I) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out_f, in_f, n, 1.0f, dout, out_f, in,
                in_f, 1.0f, dw, in_f);
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
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
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        din[i] = dout[i] * mask[i];
}

/* ---------------------------------------------------------------- losses ---- */

static void cpu_softmax_xent(vt_backend *be, float *loss, float *dlogits, float *prob,
                             const float *logits, const int32_t *label, int n, int k,
                             float smoothing, float grad_scale) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * (int64_t)k > 4096)
    for (int ni = 0; ni < n; ni++) {
        const float *z = logits + (int64_t)ni * k;
        int y = label[ni];
        VT_CHECK(y >= 0 && y < k, "softmax_xent: label %d outside [0, %d)", y, k);
        float mx = z[0];
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        double se = 0, sz = 0;
        for (int j = 0; j < k; j++) {
            se += exp((double)z[j] - mx);
            sz += (double)z[j] - mx;
        }
        double lse = log(se); /* relative to mx */
        /* loss = -sum t_j (z_j - mx - lse) with t = (1-eps) onehot + eps/K */
        double l = (1.0 - smoothing) * (lse - ((double)z[y] - mx)) +
                   (double)smoothing * (lse - sz / k);
        for (int j = 0; j < k; j++) {
            double t = (j == y ? 1.0 - smoothing : 0.0) + (double)smoothing / k;
            double pj = exp((double)z[j] - mx - lse);
            if (prob)
                prob[(int64_t)ni * k + j] = (float)pj;
            if (dlogits)
                dlogits[(int64_t)ni * k + j] = (float)(grad_scale * (pj - t));
        }
        if (loss)
            loss[ni] = (float)l;
    }
}

static void cpu_bce_logits(vt_backend *be, float *loss, float *dlogits, const float *logits,
                           const float *target, int n, int k, float grad_scale) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * (int64_t)k > 4096)
    for (int ni = 0; ni < n; ni++) {
        double l = 0;
        for (int j = 0; j < k; j++) {
            int64_t i = (int64_t)ni * k + j;
            double x = logits[i], t = target[i];
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
/* Element-wise, the same float formulas as cpu-ref (so the two agree bitwise). */

static void cpu_sgd_update(vt_backend *be, float *p, const float *g, float *buf, int64_t n,
                           float lr, float momentum, float dampening, float wd, int nesterov,
                           int64_t step) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0)
            d += wd * p[i];
        if (momentum != 0) {
            buf[i] = step <= 1 ? d : momentum * buf[i] + (1 - dampening) * d;
            d = nesterov ? d + momentum * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}

static void cpu_rmsprop_update(vt_backend *be, float *p, const float *g, float *sq, float *buf,
                               int64_t n, float lr, float alpha, float eps, float wd,
                               float momentum) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = g[i];
        if (wd != 0)
            d += wd * p[i];
        sq[i] = alpha * sq[i] + (1 - alpha) * d * d;
        float avg = sqrtf(sq[i]) + eps;
        if (momentum > 0) {
            buf[i] = momentum * buf[i] + d / avg;
            p[i] -= lr * buf[i];
        } else {
            p[i] -= lr * (d / avg);
        }
    }
}

static void cpu_adamw_update(vt_backend *be, float *p, const float *g, float *m, float *v,
                             int64_t n, float lr, float beta1, float beta2, float eps, float wd,
                             int64_t step) {
    const double bc1 = 1.0 - pow(beta1, (double)step);
    const double bc2 = 1.0 - pow(beta2, (double)step);
    const float step_size = (float)(lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        p[i] *= 1 - lr * wd;
        m[i] = beta1 * m[i] + (1 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
        float denom = sqrtf(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
    }
}

/* ---------------------------------------------------------------- the table ---- */

static const vt_backend_i cpu_i = {
    /* .name = */ "cpu",
    /* .destroy = */ cpu_destroy,
    /* .alloc = */ cpu_alloc,
    /* .free = */ cpu_free,
    /* .to_device = */ cpu_copy,
    /* .to_host = */ cpu_copy,
    /* .copy = */ cpu_copy,
    /* .synchronize = */ NULL,
    /* .host_alloc = */ NULL,
    /* .host_free = */ NULL,
    /* .fill = */ cpu_fill,
    /* .scale = */ cpu_scale,
    /* .axpy = */ cpu_axpy,
    /* .add = */ cpu_add,
    /* .sumsq = */ cpu_sumsq,
    /* .conv3d_forward = */ cpu_conv3d_forward,
    /* .conv3d_backward = */ cpu_conv3d_backward,
    /* .bn_stats = */ cpu_bn_stats,
    /* .bn_finalize = */ cpu_bn_finalize,
    /* .bn_apply = */ cpu_bn_apply,
    /* .bn_backward_reduce = */ cpu_bn_backward_reduce,
    /* .bn_backward_apply = */ cpu_bn_backward_apply,
    /* .relu_forward = */ cpu_relu_forward,
    /* .relu_backward = */ cpu_relu_backward,
    /* .maxpool3d_forward = */ cpu_maxpool3d_forward,
    /* .maxpool3d_backward = */ cpu_maxpool3d_backward,
    /* .avgpool3d_forward = */ cpu_avgpool3d_forward,
    /* .avgpool3d_backward = */ cpu_avgpool3d_backward,
    /* .gap_forward = */ cpu_gap_forward,
    /* .gap_backward = */ cpu_gap_backward,
    /* .linear_forward = */ cpu_linear_forward,
    /* .linear_backward = */ cpu_linear_backward,
    /* .dropout_forward = */ cpu_dropout_forward,
    /* .dropout_backward = */ cpu_dropout_backward,
    /* .softmax_xent = */ cpu_softmax_xent,
    /* .bce_logits = */ cpu_bce_logits,
    /* .sgd_update = */ cpu_sgd_update,
    /* .rmsprop_update = */ cpu_rmsprop_update,
    /* .adamw_update = */ cpu_adamw_update,
};

vt_backend *vt_backend_cpu_init(int threads, int64_t budget) {
    if (threads <= 0)
        threads = omp_get_num_procs();
    vt_backend *be = vt_calloc(1, sizeof(*be));
    be->i = &cpu_i;
    be->ctx = vt_calloc(1, sizeof(cpu_ctx));
    be->kind = VT_BACKEND_CPU;
    be->ordinal = 0;
    be->threads = threads;
    be->budget = budget;
    /* Process-wide (see the top of the file): the last cpu backend created sets it. */
    openblas_set_num_threads(threads);
    return be;
}
