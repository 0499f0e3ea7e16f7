/*
 * mix.c: mix.h — the draw of a step and the mixing of a batch.
 */
#include "pipeline/data/mix.h"

#include <math.h>
#include <string.h>

#include "base/common.h"

/* Gamma(a, 1), Marsaglia and Tsang (2000); a < 1 through Gamma(a + 1) U^(1/a). */
static double gamma_draw(vt_rng *r, double a) {
    if (a < 1) {
        double u = vt_rng_uniform(r);
        return gamma_draw(r, a + 1) * pow(u > 0 ? u : 1e-300, 1.0 / a);
    }
    const double d = a - 1.0 / 3, c = 1.0 / sqrt(9 * d);
    for (;;) {
        double x = vt_rng_normal(r), v = 1 + c * x;
        if (v <= 0)
            continue;
        v = v * v * v;
        double u = vt_rng_uniform(r);
        if (u < 1 - 0.0331 * x * x * x * x || log(u > 0 ? u : 1e-300) < 0.5 * x * x + d * (1 - v + log(v)))
            return d * v;
    }
}

/* log of a Gamma(a, 1) draw, the same draws as gamma_draw: for a < 1, U^(1/a) underflows
 * to 0 once a is small (a = 0.002: U < 0.25 does), where its log is still a number. */
static double log_gamma_draw(vt_rng *r, double a) {
    if (a < 1) {
        double u = vt_rng_uniform(r);
        return log_gamma_draw(r, a + 1) + log(u > 0 ? u : 1e-300) / a;
    }
    return log(gamma_draw(r, a));
}

double vt_mix_beta(uint64_t *state, double a) {
    vt_rng r = {*state};
    double lam;
    if (a >= 1) {
        double x = gamma_draw(&r, a), y = gamma_draw(&r, a);
        lam = x / (x + y);
    } else {
        /* x / (x + y) from the logs: both draws underflowed to 0 at small a, and 0 / 0
         * was taken as 0.5, the one value Beta(a, a) then almost never gives (it sits at
         * 0 or 1) */
        double lx = log_gamma_draw(&r, a), ly = log_gamma_draw(&r, a);
        lam = 1 / (1 + exp(ly - lx));
    }
    *state = r.s;
    return lam;
}

void vt_mix_decide(const vt_mix_cfg *c, int64_t step, int h, int w, vt_mix_draw *d) {
    memset(d, 0, sizeof *d);
    d->lam = 1;
    if (!vt_mix_on(c))
        return;
    /* a stream of its own: the data's draws hash (seed, epoch, sample), dropout's the step */
    vt_rng r = {vt_hash64(c->seed ^ 0x6D69787570ull /* "mixup" */) ^ vt_hash64((uint64_t)step)};
    int cut = c->cutmix > 0 && (c->mixup <= 0 || vt_rng_uniform(&r) < c->switch_prob);
    double lam = vt_mix_beta(&r.s, cut ? c->cutmix : c->mixup);
    d->kind = cut ? VT_MIX_CUTMIX : VT_MIX_MIXUP;
    d->lam = lam;
    if (!cut)
        return;
    int cy = (int)vt_rng_below(&r, (uint32_t)h), cx = (int)vt_rng_below(&r, (uint32_t)w);
    vt_mix_box(lam, cy, cx, h, w, d);
}

void vt_mix_box(double lam, int cy, int cx, int h, int w, vt_mix_draw *d) {
    double ratio = sqrt(1 - lam);
    int ch = (int)(h * ratio), cw = (int)(w * ratio);
    d->kind = VT_MIX_CUTMIX;
    d->y0 = VT_MIN(VT_MAX(cy - ch / 2, 0), h);
    d->y1 = VT_MIN(VT_MAX(cy + ch / 2, 0), h);
    d->x0 = VT_MIN(VT_MAX(cx - cw / 2, 0), w);
    d->x1 = VT_MIN(VT_MAX(cx + cw / 2, 0), w);
    d->lam = 1 - (double)(d->y1 - d->y0) * (d->x1 - d->x0) / ((double)h * w);
}

/* Clips i and j (i <= j) of x mixed with each other by mixup: both new values from the
 * old two. */
static void mixup_pair(float *xi, float *xj, int64_t nf, float a, float b) {
    for (int64_t e = 0; e < nf; e++) {
        float u = xi[e], v = xj[e];
        xi[e] = a * u + b * v;
        xj[e] = a * v + b * u;
    }
}

/* CutMix of clips i and j: their boxes trade places, frame by frame (i == j: nothing). */
static void cutmix_pair(const vt_batch *b, const vt_mix_draw *d, float *xi, float *xj) {
    const int64_t plane = (int64_t)b->h * b->w;
    for (int64_t p = 0; p < (int64_t)3 * b->t; p++)
        for (int y = d->y0; y < d->y1; y++)
            for (int x = d->x0; x < d->x1; x++) {
                int64_t e = p * plane + (int64_t)y * b->w + x;
                float u = xi[e];
                xi[e] = xj[e];
                xj[e] = u;
            }
}

void vt_mix_apply(const vt_mix_draw *d, vt_batch *b, float *const soft[VT_MAX_HEADS],
                  const float smoothing[VT_MAX_HEADS]) {
    const int n = b->n;
    const int64_t nf = vt_batch_clip_floats(b);
    const double lam = d->kind == VT_MIX_NONE ? 1.0 : d->lam;
    for (int i = 0; i <= n - 1 - i && d->kind != VT_MIX_NONE; i++) {
        float *xi = b->x + (int64_t)i * nf, *xj = b->x + (int64_t)(n - 1 - i) * nf;
        if (d->kind == VT_MIX_MIXUP)
            mixup_pair(xi, xj, nf, (float)lam, (float)(1 - lam));
        else if (xi != xj)
            cutmix_pair(b, d, xi, xj);
    }
    for (int h = 0; h < b->nheads; h++) {
        const int k = b->head_classes[h];
        if (b->head_loss[h] == VT_LOSS_SOFTMAX_CE && soft[h] && b->label[h]) {
            const double off = (double)smoothing[h] / k, on = 1 - (double)smoothing[h] + off;
            for (int i = 0; i < n; i++) {
                int yi = b->label[h][i], yj = b->label[h][n - 1 - i];
                for (int c = 0; c < k; c++)
                    soft[h][(int64_t)i * k + c] = (float)(lam * (c == yi ? on : off) +
                                                          (1 - lam) * (c == yj ? on : off));
            }
            if (lam < 0.5) /* the dominant label: the partner's, for every clip */
                for (int i = 0; i < n - 1 - i; i++) {
                    int32_t y = b->label[h][i];
                    b->label[h][i] = b->label[h][n - 1 - i];
                    b->label[h][n - 1 - i] = y;
                }
        } else if (b->head_loss[h] == VT_LOSS_BCE && b->target[h] && lam != 1.0) {
            for (int i = 0; i <= n - 1 - i; i++) {
                float *ti = b->target[h] + (int64_t)i * k, *tj = b->target[h] + (int64_t)(n - 1 - i) * k;
                mixup_pair(ti, tj, k, (float)lam, (float)(1 - lam));
            }
        }
    }
}
