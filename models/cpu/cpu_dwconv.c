/*
 * cpu_dwconv.c: the fast CPU backend's depthwise conv3d (groups == cin == cout; cpu_conv.h),
 * X3D's 3x3x3 and its stem's 5x1x1. A depthwise conv does kT*kH*kW multiply-adds per
 * output value and reads each input value about as often: it is bound by memory, and a
 * GEMM per channel (a 1 x kvol by kvol x P product) would spend its time building columns.
 * So it runs directly: an output row (ot, oh) is the sum, over the taps (kt, kh, kw) that
 * land inside the input, of one input row scaled by the tap's weight — an axpy over the
 * row, which the compiler vectorises (stride 1; strided rows at stride 2).
 *
 * It must never be nondeterministic: every value is summed in an order fixed by the shape
 * (taps in (kt, kh, kw) order for an output or input-gradient value; clips, then rows, then
 * the row's columns for a weight gradient), and each thread owns whole planes (forward,
 * input gradient) or whole channels (weight and bias gradients), so the thread count and
 * the schedule never change a bit. No scratch.
 */
#include <string.h>

#include <omp.h>

#include "base/common.h"
#include "models/cpu/cpu_blocks.h"
#include "models/cpu/cpu_conv.h"

/* The largest kernel volume the weight gradient keeps per-tap sums for on the stack
 * (9x9x9; X3D's largest is 27). */
#define DW_MAX_KVOL 729

typedef struct dw_geo {
    int T, H, W, To, Ho, Wo;
    int64_t in_plane, P, kvol;
} dw_geo;

static dw_geo dw_geometry(const int in_thw[3], const vt_conv3d_p *p) {
    dw_geo g = {.T = in_thw[0], .H = in_thw[1], .W = in_thw[2]};
    g.To = vt_conv_out(g.T, p->k[0], p->s[0], p->p[0]);
    g.Ho = vt_conv_out(g.H, p->k[1], p->s[1], p->p[1]);
    g.Wo = vt_conv_out(g.W, p->k[2], p->s[2], p->p[2]);
    g.in_plane = (int64_t)g.T * g.H * g.W;
    g.P = (int64_t)g.To * g.Ho * g.Wo;
    g.kvol = (int64_t)p->k[0] * p->k[1] * p->k[2];
    return g;
}

/* Output columns ow whose input column ow*s + iw0 lies in [0, W): [*lo, *hi). */
static inline void dw_cols(int *lo, int *hi, int iw0, int s, int W, int Wo) {
    int l = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
    int h = W - 1 - iw0 < 0 ? 0 : (W - 1 - iw0) / s + 1;
    *lo = l;
    *hi = VT_MIN(h, Wo);
    if (*hi < *lo)
        *hi = *lo;
}

/* orow[ow] += wv * xrow[ow*s + iw0] over [lo, hi). */
static inline void row_axpy(float *restrict orow, const float *restrict xrow, float wv, int lo,
                            int hi, int s, int iw0) {
    if (s == 1) {
        const float *x = xrow + iw0;
#pragma omp simd
        for (int ow = lo; ow < hi; ow++)
            orow[ow] += wv * x[ow];
    } else {
        for (int ow = lo; ow < hi; ow++)
            orow[ow] += wv * xrow[ow * s + iw0];
    }
}

void vt_cpu_dwconv_forward(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, const int in_thw[3], const vt_conv3d_p *p) {
    if (n == 0)
        return;
    const dw_geo g = dw_geometry(in_thw, p);
    const int64_t planes = (int64_t)n * p->cout;
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) \
    if (planes * g.P * g.kvol > CPU_PAR_MIN)
    for (int64_t pl = 0; pl < planes; pl++) {
        const int c = (int)(pl % p->cout);
        const float *x = in + pl * g.in_plane, *wc = w + c * g.kvol;
        for (int ot = 0; ot < g.To; ot++)
            for (int oh = 0; oh < g.Ho; oh++) {
                float *orow = out + pl * g.P + ((int64_t)ot * g.Ho + oh) * g.Wo;
                const float bv = b ? b[c] : 0.0f;
                for (int ow = 0; ow < g.Wo; ow++)
                    orow[ow] = bv;
                for (int kt = 0; kt < p->k[0]; kt++) {
                    const int it = ot * p->s[0] - p->p[0] + kt;
                    if (it < 0 || it >= g.T)
                        continue;
                    for (int kh = 0; kh < p->k[1]; kh++) {
                        const int ih = oh * p->s[1] - p->p[1] + kh;
                        if (ih < 0 || ih >= g.H)
                            continue;
                        const float *xrow = x + ((int64_t)it * g.H + ih) * g.W;
                        for (int kw = 0; kw < p->k[2]; kw++) {
                            int lo, hi;
                            const int iw0 = kw - p->p[2];
                            dw_cols(&lo, &hi, iw0, p->s[2], g.W, g.Wo);
                            row_axpy(orow, xrow, wc[(kt * p->k[1] + kh) * p->k[2] + kw], lo, hi,
                                     p->s[2], iw0);
                        }
                    }
                }
            }
    }
}

/* din's plane pl (zeroed first): every output row's gradient scattered back through the
 * taps, in the forward's order. */
static void dw_din_plane(float *din, const float *dout, const float *wc, const dw_geo *g,
                         const vt_conv3d_p *p) {
    memset(din, 0, (size_t)g->in_plane * sizeof(float));
    for (int ot = 0; ot < g->To; ot++)
        for (int oh = 0; oh < g->Ho; oh++) {
            const float *grow = dout + ((int64_t)ot * g->Ho + oh) * g->Wo;
            for (int kt = 0; kt < p->k[0]; kt++) {
                const int it = ot * p->s[0] - p->p[0] + kt;
                if (it < 0 || it >= g->T)
                    continue;
                for (int kh = 0; kh < p->k[1]; kh++) {
                    const int ih = oh * p->s[1] - p->p[1] + kh;
                    if (ih < 0 || ih >= g->H)
                        continue;
                    float *drow = din + ((int64_t)it * g->H + ih) * g->W;
                    for (int kw = 0; kw < p->k[2]; kw++) {
                        int lo, hi;
                        const int iw0 = kw - p->p[2], s = p->s[2];
                        const float wv = wc[(kt * p->k[1] + kh) * p->k[2] + kw];
                        dw_cols(&lo, &hi, iw0, s, g->W, g->Wo);
                        if (s == 1) {
                            float *d = drow + iw0;
#pragma omp simd
                            for (int ow = lo; ow < hi; ow++)
                                d[ow] += wv * grow[ow];
                        } else {
                            for (int ow = lo; ow < hi; ow++)
                                drow[ow * s + iw0] += wv * grow[ow];
                        }
                    }
                }
            }
        }
}

/* Channel c's weight (and bias) gradient: per tap, the dot of dout's rows with the input
 * rows the tap reads, a float dot per row summed in double over rows and clips. */
static void dw_dw_channel(float *dwc, float *dbc, const float *dout, const float *in, int c,
                          int n, const dw_geo *g, const vt_conv3d_p *p) {
    double acc[DW_MAX_KVOL], bacc = 0;
    for (int64_t k = 0; k < g->kvol; k++)
        acc[k] = 0;
    for (int ni = 0; ni < n; ni++) {
        const int64_t pl = (int64_t)ni * p->cout + c;
        const float *x = in + pl * g->in_plane;
        for (int ot = 0; ot < g->To; ot++)
            for (int oh = 0; oh < g->Ho; oh++) {
                const float *grow = dout + pl * g->P + ((int64_t)ot * g->Ho + oh) * g->Wo;
                if (dbc) {
                    float s = 0;
                    for (int ow = 0; ow < g->Wo; ow++)
                        s += grow[ow];
                    bacc += s;
                }
                for (int kt = 0; kt < p->k[0]; kt++) {
                    const int it = ot * p->s[0] - p->p[0] + kt;
                    if (it < 0 || it >= g->T)
                        continue;
                    for (int kh = 0; kh < p->k[1]; kh++) {
                        const int ih = oh * p->s[1] - p->p[1] + kh;
                        if (ih < 0 || ih >= g->H)
                            continue;
                        const float *xrow = x + ((int64_t)it * g->H + ih) * g->W;
                        for (int kw = 0; kw < p->k[2]; kw++) {
                            int lo, hi;
                            const int iw0 = kw - p->p[2], s = p->s[2];
                            dw_cols(&lo, &hi, iw0, s, g->W, g->Wo);
                            float d = 0;
                            if (s == 1) {
                                const float *xr = xrow + iw0;
#pragma omp simd reduction(+ : d)
                                for (int ow = lo; ow < hi; ow++)
                                    d += grow[ow] * xr[ow];
                            } else {
                                for (int ow = lo; ow < hi; ow++)
                                    d += grow[ow] * xrow[ow * s + iw0];
                            }
                            acc[(kt * p->k[1] + kh) * p->k[2] + kw] += d;
                        }
                    }
                }
            }
    }
    for (int64_t k = 0; k < g->kvol; k++)
        dwc[k] += (float)acc[k];
    if (dbc)
        *dbc += (float)bacc;
}

void vt_cpu_dwconv_backward(vt_backend *be, float *din, float *dw, float *db,
                            const float *dout, const float *in, const float *w, int n,
                            const int in_thw[3], const vt_conv3d_p *p) {
    if (n == 0)
        return;
    const dw_geo g = dw_geometry(in_thw, p);
    VT_CHECK(g.kvol <= DW_MAX_KVOL, "depthwise conv3d: kernel of %lld taps (at most %d)",
             (long long)g.kvol, DW_MAX_KVOL);
    const int64_t work = (int64_t)n * p->cout * g.P * g.kvol;
    const int64_t planes = (int64_t)n * p->cout;
    if (din) {
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (work > CPU_PAR_MIN)
        for (int64_t pl = 0; pl < planes; pl++)
            dw_din_plane(din + pl * g.in_plane, dout + pl * g.P,
                         w + (pl % p->cout) * g.kvol, &g, p);
    }
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (work > CPU_PAR_MIN)
    for (int c = 0; c < p->cout; c++)
        dw_dw_channel(dw + c * g.kvol, db ? db + c : NULL, dout, in, c, n, &g, p);
}
