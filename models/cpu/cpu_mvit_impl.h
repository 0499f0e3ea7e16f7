/*
 * cpu_mvit_impl.h: the body of MViT's CPU ops (cpu_mvit.h), included once by cpu_mvit.c
 * and once by cpu_mvit_fast.c with
 *   MV(name)  the function name with the backend's prefix,
 *   ACC       the accumulator type (double on cpu-ref, float on cpu),
 *   NT(be)    the threads (1 on cpu-ref).
 * Layouts and contracts: backend.h's MViT section. Work is split so that every output
 * element is summed by one thread in a fixed order (bits independent of the threads):
 * attention's backward runs a pass over query rows (dq, the row sums its relative tables
 * need) and a pass over keys (dk, dv), recomputing the probabilities in each from lse,
 * then folds the tables' gradients in row order on one thread.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/max_rule.h"

#define MV_MAXD 512 /* head_dim and channels a window's accumulators hold */

static int mv_grid(const int thw[3]) { return thw[0] * thw[1] * thw[2]; }

/* a pool's output grid for input thw (w NULL: the same) */
static void mv_out_grid(int o[3], const int thw[3], const vt_pool3d_p *p, int pooled) {
    for (int d = 0; d < 3; d++)
        o[d] = pooled ? vt_conv_out(thw[d], p->k[d], p->s[d], p->p[d]) : thw[d];
}

#define MV_MAXK 512 /* taps a pooling window may have */

/* Row r >= 1 of a token grid g (row 0 is the class token) as its (t, h, w), and back. */
static void mv_coords(int c[3], int64_t r, const int g[3]) {
    c[0] = (int)((r - 1) / ((int64_t)g[1] * g[2]));
    c[1] = (int)((r - 1) / g[2] % g[1]);
    c[2] = (int)((r - 1) % g[2]);
}
static int64_t mv_row(const int g[3], int t, int h, int w) {
    return 1 + ((int64_t)t * g[1] + h) * g[2] + w;
}

/* Along axis ax, tap a of a pool over grid thw (output grid og): with readers == 0, the
 * input coordinate that the window at output coordinate x reads; with readers != 0, the
 * output coordinate whose window reads input coordinate x. -1 when there is none (the
 * padding, a stride that skips x, past the grid). The one rule every window walk below
 * takes its coordinates from. */
static int mv_tap(int x, int a, int ax, int readers, const int og[3], const int thw[3],
                  const vt_pool3d_p *p) {
    if (!readers) {
        const int i = x * p->s[ax] - p->p[ax] + a;
        return i >= 0 && i < thw[ax] ? i : -1;
    }
    const int m = x + p->p[ax] - a, o = m / p->s[ax];
    return m >= 0 && m % p->s[ax] == 0 && o < og[ax] ? o : -1;
}

/* Row x >= 1 of a pool over grid thw (output grid og). readers == 0, x an output row:
 * the taps of its window that fall inside the grid, each as its index into the kernel and
 * its input row. readers != 0, x an input row: the windows that read it, each as the tap
 * that reads it and the window's output row. In tap ((t, h, w)) order; the count. */
static int mv_taps(int *tap, int64_t *row, int64_t x, int readers, const int og[3],
                   const int thw[3], const vt_pool3d_p *p) {
    const int *from = readers ? thw : og, *to = readers ? og : thw;
    int c[3];
    mv_coords(c, x, from);
    int n = 0;
    for (int a = 0; a < p->k[0]; a++) {
        const int t = mv_tap(c[0], a, 0, readers, og, thw, p);
        if (t < 0)
            continue;
        for (int b = 0; b < p->k[1]; b++) {
            const int h = mv_tap(c[1], b, 1, readers, og, thw, p);
            if (h < 0)
                continue;
            for (int e = 0; e < p->k[2]; e++) {
                const int w = mv_tap(c[2], e, 2, readers, og, thw, p);
                if (w < 0)
                    continue;
                tap[n] = (a * p->k[1] + b) * p->k[2] + e;
                row[n++] = mv_row(to, t, h, w);
            }
        }
    }
    return n;
}

/* A pool's sizes for input grid thw: its output grid og (pooled: p's, else thw), rows L
 * and Lo (the class token's included) and taps K; a window over MV_MAXK taps, or D over
 * MV_MAXD, is refused loudly (the walks' arrays hold that many). */
typedef struct mv_pool_g {
    int og[3];
    int64_t L, Lo;
    int K;
} mv_pool_g;
static mv_pool_g mv_pool_geo(const char *op, const int thw[3], const vt_pool3d_p *p, int pooled,
                             int D) {
    VT_CHECK(D <= MV_MAXD, "%s: head_dim %d > %d", op, D, MV_MAXD);
    VT_CHECK(p->k[0] * p->k[1] * p->k[2] <= MV_MAXK, "%s: a window of more than %d", op, MV_MAXK);
    mv_pool_g g;
    mv_out_grid(g.og, thw, p, pooled);
    g.L = 1 + mv_grid(thw);
    g.Lo = 1 + mv_grid(g.og);
    g.K = p->k[0] * p->k[1] * p->k[2];
    return g;
}

/* dst[0..D) = sum over the taps of row x (mv_taps, readers as there) of the kernel w's
 * (D, K) column tap times row r of src (at src + r stride), in tap order: mvit_pool's
 * forward (x an output row, src the input) and its input gradient (x an input row, src
 * the output's gradient). */
static void mv_pool_row(float *dst, const float *src, int64_t stride, const float *w, int D,
                        int64_t x, int readers, const mv_pool_g *g, const int thw[3],
                        const vt_pool3d_p *p) {
    ACC acc[MV_MAXD];
    for (int d = 0; d < D; d++)
        acc[d] = 0;
    int tap[MV_MAXK];
    int64_t row[MV_MAXK];
    const int nt = mv_taps(tap, row, x, readers, g->og, thw, p);
    for (int t = 0; t < nt; t++) {
        const float *y = src + row[t] * stride;
        for (int d = 0; d < D; d++)
            acc[d] += (ACC)w[(int64_t)d * g->K + tap[t]] * y[d];
    }
    for (int d = 0; d < D; d++)
        dst[d] = (float)acc[d];
}

void MV(mvit_pool_forward)(vt_backend *be, float *out, const float *qkv, const float *w, int n,
                           int heads, int D, int part, const int thw[3], const vt_pool3d_p *p) {
    const mv_pool_g g = mv_pool_geo("mvit_pool", thw, p, w != NULL, D);
    const int64_t L = g.L, Lo = g.Lo, C = (int64_t)heads * D, C3 = 3 * C;
    const int64_t tasks = (int64_t)n * heads * Lo;
    (void)be;
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < tasks; r++) {
        const int64_t jh = r / Lo, o = r % Lo, j = jh / heads, h = jh % heads;
        const float *src = qkv + j * L * C3 + part * C + h * D; /* row x at src + x C3 */
        float *dst = out + r * D;
        if (o == 0 || !w) {
            memcpy(dst, src + o * C3, (size_t)D * sizeof(float));
            continue;
        }
        mv_pool_row(dst, src, C3, w, D, o, 0, &g, thw, p);
    }
}

void MV(mvit_pool_backward)(vt_backend *be, float *dqkv, float *dw, const float *dout,
                            const float *qkv, const float *w, int n, int heads, int D, int part,
                            const int thw[3], const vt_pool3d_p *p) {
    const mv_pool_g g = mv_pool_geo("mvit_pool", thw, p, w != NULL, D);
    const int64_t L = g.L, Lo = g.Lo, C = (int64_t)heads * D, C3 = 3 * C;
    const int *og = g.og, K = g.K;
    const int64_t tasks = (int64_t)n * heads * L;
    (void)be;
    /* the input's gradient, gathered per input row from the windows that read it */
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < tasks; r++) {
        const int64_t jh = r / L, x = r % L, j = jh / heads, h = jh % heads;
        float *dst = dqkv + (j * L + x) * C3 + part * C + h * D;
        const float *gh = dout + jh * Lo * D; /* this head's output rows */
        if (x == 0 || !w) {
            memcpy(dst, gh + x * D, (size_t)D * sizeof(float));
            continue;
        }
        mv_pool_row(dst, gh, D, w, D, x, 1, &g, thw, p);
    }
    if (!dw || !w)
        return;
    /* the kernel's gradient, one (channel, tap) per task over every clip, head, window */
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < (int64_t)D * K; r++) {
        const int d = (int)(r / K), tap = (int)(r % K);
        const int a = tap / (p->k[1] * p->k[2]), b = tap / p->k[2] % p->k[1], c = tap % p->k[2];
        ACC acc = 0;
        for (int64_t jh = 0; jh < (int64_t)n * heads; jh++) {
            const int64_t j = jh / heads, h = jh % heads;
            const float *src = qkv + j * L * C3 + part * C + h * D + d;
            const float *gd = dout + jh * Lo * D + d;
            for (int ot = 0; ot < og[0]; ot++) {
                const int it = mv_tap(ot, a, 0, 0, og, thw, p);
                if (it < 0)
                    continue;
                for (int oh = 0; oh < og[1]; oh++) {
                    const int ih = mv_tap(oh, b, 1, 0, og, thw, p);
                    if (ih < 0)
                        continue;
                    for (int ow = 0; ow < og[2]; ow++) {
                        const int iw = mv_tap(ow, c, 2, 0, og, thw, p);
                        if (iw < 0)
                            continue;
                        acc += (ACC)gd[mv_row(og, ot, oh, ow) * D] *
                               src[mv_row(thw, it, ih, iw) * C3];
                    }
                }
            }
        }
        dw[r] += (float)acc;
    }
}

/* ---- attention ---- */

typedef struct mv_geo {
    int qthw[3], kthw[3];
    int64_t Lq, Lk;
    int KK;      /* kt + kh + kw: a query row's relative terms */
    int rel;
} mv_geo;

static mv_geo mv_geometry(const int qthw[3], const int kthw[3], const float *rh) {
    mv_geo g;
    for (int d = 0; d < 3; d++) {
        g.qthw[d] = qthw[d];
        g.kthw[d] = kthw[d];
    }
    g.Lq = 1 + mv_grid(qthw);
    g.Lk = 1 + mv_grid(kthw);
    g.KK = kthw[0] + kthw[1] + kthw[2];
    g.rel = rh != NULL;
    return g;
}

/* Query row i >= 1's relative terms: rel[0..kt) = q . rt[dist_t], then kh of rh, kw of rw. */
static void mv_rel_row(float *rel, const mv_geo *g, int64_t i, const float *q, const float *rh,
                       const float *rw, const float *rt, int D) {
    int qc[3];
    mv_coords(qc, i, g->qthw);
    const float *tab[3] = {rt, rh, rw};
    int o = 0;
    for (int ax = 0; ax < 3; ax++)
        for (int kc = 0; kc < g->kthw[ax]; kc++) {
            const float *R = tab[ax] +
                (int64_t)vt_mvit_rel_dist(qc[ax], g->qthw[ax], kc, g->kthw[ax]) * D;
            ACC s = 0;
            for (int d = 0; d < D; d++)
                s += (ACC)q[d] * R[d];
            rel[o++] = (float)s;
        }
}

/* Key row j >= 1's (t, h, w) offsets into a row's relative terms. */
static void mv_key_cols(const mv_geo *g, int64_t j, int *ct, int *ch, int *cw) {
    int kc[3];
    mv_coords(kc, j, g->kthw);
    *ct = kc[0];
    *ch = g->kthw[0] + kc[1];
    *cw = g->kthw[0] + g->kthw[1] + kc[2];
}

/* A row's logits s[0..Lk): (scale q) . k_j plus the relative terms (rows and keys >= 1). */
static void mv_logits(float *s, const mv_geo *g, int64_t i, const float *qs, const float *kb,
                      const float *rel, int D) {
    for (int64_t j = 0; j < g->Lk; j++) {
        const float *kj = kb + j * D;
        ACC a = 0;
        for (int d = 0; d < D; d++)
            a += (ACC)qs[d] * kj[d];
        float v = (float)a;
        if (rel && i >= 1 && j >= 1) {
            int ct, ch, cw;
            mv_key_cols(g, j, &ct, &ch, &cw);
            v += rel[ch] + rel[cw] + rel[ct];
        }
        s[j] = v;
    }
}

void MV(mvit_attention_forward)(vt_backend *be, float *out, float *lse, const float *q,
                                const float *k, const float *v, const float *rh, const float *rw,
                                const float *rt, int n, int heads, int D, const int qthw[3],
                                const int kthw[3], int residual) {
    VT_CHECK(D <= MV_MAXD, "mvit_attention: head_dim %d > %d", D, MV_MAXD);
    const mv_geo g = mv_geometry(qthw, kthw, rh);
    const float scale = (float)(1.0 / sqrt((double)D));
    const int64_t rows = (int64_t)n * heads * g.Lq, C = (int64_t)heads * D;
    (void)be;
#pragma omp parallel num_threads(NT(be))
    {
        float *s = vt_malloc((size_t)(g.Lk + g.KK) * sizeof(float)), *rel = s + g.Lk;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t jh = r / g.Lq, i = r % g.Lq, j = jh / heads, h = jh % heads;
            const float *qi = q + r * D, *kb = k + jh * g.Lk * D, *vb = v + jh * g.Lk * D;
            float qs[MV_MAXD];
            for (int d = 0; d < D; d++)
                qs[d] = qi[d] * scale;
            if (g.rel && i >= 1)
                mv_rel_row(rel, &g, i, qi, rh, rw, rt, D);
            mv_logits(s, &g, i, qs, kb, g.rel ? rel : NULL, D);
            float m = s[0];
            for (int64_t t = 1; t < g.Lk; t++)
                m = s[t] > m ? s[t] : m;
            ACC sum = 0;
            for (int64_t t = 0; t < g.Lk; t++)
                sum += (ACC)expf(s[t] - m);
            const float l = m + (float)log((double)sum);
            lse[r] = l;
            ACC acc[MV_MAXD];
            for (int d = 0; d < D; d++)
                acc[d] = 0;
            for (int64_t t = 0; t < g.Lk; t++) {
                const float pr = expf(s[t] - l);
                const float *vt = vb + t * D;
                for (int d = 0; d < D; d++)
                    acc[d] += (ACC)pr * vt[d];
            }
            float *o = out + (j * g.Lq + i) * C + h * D;
            for (int d = 0; d < D; d++)
                o[d] = (float)acc[d] + (residual && i >= 1 ? qi[d] : 0.0f);
        }
        free(s);
    }
}

/* The table row of relative term x (0..KK) of query row i (>= 1), and its table. */
static const float *mv_rel_tab(const mv_geo *g, int64_t i, int x, const float *rh,
                               const float *rw, const float *rt, int D, int *ax, int *dist) {
    int qc[3];
    mv_coords(qc, i, g->qthw);
    int a = 0;
    while (x >= g->kthw[a]) {
        x -= g->kthw[a];
        a++;
    }
    *ax = a;
    *dist = vt_mvit_rel_dist(qc[a], g->qthw[a], x, g->kthw[a]);
    const float *tab = a == 0 ? rt : a == 1 ? rh : rw;
    return tab + (int64_t)*dist * D;
}

void MV(mvit_attention_backward)(vt_backend *be, float *dq, float *dk, float *dv, float *drh,
                                 float *drw, float *drt, const float *dout, const float *q,
                                 const float *k, const float *v, const float *rh,
                                 const float *rw, const float *rt, const float *lse, int n,
                                 int heads, int D, const int qthw[3], const int kthw[3],
                                 int residual) {
    VT_CHECK(D <= MV_MAXD, "mvit_attention: head_dim %d > %d", D, MV_MAXD);
    const mv_geo g = mv_geometry(qthw, kthw, rh);
    const float scale = (float)(1.0 / sqrt((double)D));
    const int64_t rows = (int64_t)n * heads * g.Lq, keys = (int64_t)n * heads * g.Lk;
    const int64_t C = (int64_t)heads * D;
    /* per query row: its relative terms (KK) and the sums of its dS over each key
     * coordinate (KK), what the tables' gradients need; delta = sum_j P dP */
    float *rel = g.rel ? vt_malloc((size_t)(rows * 2 * g.KK) * sizeof(float)) : NULL;
    float *delta = vt_malloc((size_t)rows * sizeof(float));
    (void)be;
    /* pass 1, over query rows: dq, delta, the row sums */
#pragma omp parallel num_threads(NT(be))
    {
        float *pr = vt_malloc((size_t)(2 * g.Lk) * sizeof(float)), *dp = pr + g.Lk;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t jh = r / g.Lq, i = r % g.Lq, j = jh / heads, h = jh % heads;
            const float *qi = q + r * D, *kb = k + jh * g.Lk * D, *vb = v + jh * g.Lk * D;
            const float *go = dout + (j * g.Lq + i) * C + h * D;
            float *rrow = g.rel ? rel + r * 2 * g.KK : NULL, *arow = rrow ? rrow + g.KK : NULL;
            float qs[MV_MAXD];
            for (int d = 0; d < D; d++)
                qs[d] = qi[d] * scale;
            if (rrow) {
                for (int x = 0; x < 2 * g.KK; x++)
                    rrow[x] = 0;
                if (i >= 1)
                    mv_rel_row(rrow, &g, i, qi, rh, rw, rt, D);
            }
            mv_logits(pr, &g, i, qs, kb, rrow, D);
            ACC dl = 0;
            for (int64_t t = 0; t < g.Lk; t++) {
                const float *vt = vb + t * D;
                ACC a = 0;
                for (int d = 0; d < D; d++)
                    a += (ACC)go[d] * vt[d];
                pr[t] = expf(pr[t] - lse[r]);
                dp[t] = (float)a;
                dl += (ACC)pr[t] * dp[t];
            }
            const float de = (float)dl;
            delta[r] = de;
            ACC acc[MV_MAXD], ax[3 * MV_MAXD];
            for (int d = 0; d < D; d++)
                acc[d] = 0;
            const int nax = arow && i >= 1 ? g.KK : 0;
            VT_CHECK(nax <= 3 * MV_MAXD, "mvit_attention: %d relative terms", nax);
            for (int x = 0; x < nax; x++)
                ax[x] = 0;
            for (int64_t t = 0; t < g.Lk; t++) {
                const float ds = pr[t] * (dp[t] - de);
                const float *kt = kb + t * D;
                for (int d = 0; d < D; d++)
                    acc[d] += (ACC)ds * kt[d];
                if (nax && t >= 1) {
                    int ct, ch, cw;
                    mv_key_cols(&g, t, &ct, &ch, &cw);
                    ax[ct] += ds;
                    ax[ch] += ds;
                    ax[cw] += ds;
                }
            }
            for (int d = 0; d < D; d++)
                acc[d] *= scale;
            for (int x = 0; x < nax; x++) {
                int a, dist;
                const float *R = mv_rel_tab(&g, i, x, rh, rw, rt, D, &a, &dist);
                arow[x] = (float)ax[x];
                for (int d = 0; d < D; d++)
                    acc[d] += (ACC)arow[x] * R[d];
            }
            float *dqi = dq + r * D;
            for (int d = 0; d < D; d++)
                dqi[d] = (float)acc[d] + (residual && i >= 1 ? go[d] : 0.0f);
        }
        free(pr);
    }
    /* pass 2, over keys: dk, dv, from every query row's recomputed probabilities */
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < keys; r++) {
        const int64_t jh = r / g.Lk, t = r % g.Lk, j = jh / heads, h = jh % heads;
        const float *kt = k + r * D, *vt = v + r * D;
        int ct = 0, ch = 0, cw = 0;
        if (t >= 1)
            mv_key_cols(&g, t, &ct, &ch, &cw);
        ACC ak[MV_MAXD], av[MV_MAXD];
        for (int d = 0; d < D; d++)
            ak[d] = av[d] = 0;
        for (int64_t i = 0; i < g.Lq; i++) {
            const int64_t qr = jh * g.Lq + i;
            const float *qi = q + qr * D, *go = dout + (j * g.Lq + i) * C + h * D;
            ACC a = 0, b = 0;
            for (int d = 0; d < D; d++) {
                a += (ACC)(qi[d] * scale) * kt[d];
                b += (ACC)go[d] * vt[d];
            }
            float sv = (float)a;
            if (g.rel && i >= 1 && t >= 1) {
                const float *rr = rel + qr * 2 * g.KK;
                sv += rr[ch] + rr[cw] + rr[ct];
            }
            const float p = expf(sv - lse[qr]), ds = p * ((float)b - delta[qr]);
            for (int d = 0; d < D; d++) {
                ak[d] += (ACC)ds * qi[d];
                av[d] += (ACC)p * go[d];
            }
        }
        for (int d = 0; d < D; d++) {
            dk[r * D + d] = (float)ak[d] * scale;
            dv[r * D + d] = (float)av[d];
        }
    }
    /* the tables, in row order on one thread: dR[dist] += (row sum) q_i */
    if (g.rel)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i = r % g.Lq;
            if (i < 1)
                continue;
            const float *qi = q + r * D, *arow = rel + r * 2 * g.KK + g.KK;
            for (int x = 0; x < g.KK; x++) {
                int a, dist;
                mv_rel_tab(&g, i, x, rh, rw, rt, D, &a, &dist);
                float *dR = (a == 0 ? drt : a == 1 ? drh : drw) + (int64_t)dist * D;
                if (!dR)
                    continue;
                for (int d = 0; d < D; d++)
                    dR[d] += arow[x] * qi[d];
            }
        }
    free(rel);
    free(delta);
}

/* ---- max pooling of a token grid ---- */

void MV(token_maxpool_forward)(vt_backend *be, float *out, const float *in, int n, int c,
                               const int thw[3], const vt_pool3d_p *p) {
    const mv_pool_g g = mv_pool_geo("token_maxpool", thw, p, 1, 0);
    const int64_t L = g.L, Lo = g.Lo;
    const int *og = g.og;
    (void)be;
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < (int64_t)n * Lo; r++) {
        const int64_t j = r / Lo, o = r % Lo;
        const float *x = in + j * L * c;
        float *y = out + r * c;
        if (o == 0) {
            memcpy(y, x, (size_t)c * sizeof(float));
            continue;
        }
        for (int ch = 0; ch < c; ch++)
            y[ch] = -INFINITY;
        int tap[MV_MAXK];
        int64_t xr[MV_MAXK];
        const int nt = mv_taps(tap, xr, o, 0, og, thw, p);
        /* max_rule.h's rule, as the backward's argmax: a NaN propagates */
        for (int t = 0; t < nt; t++) {
            const float *xrow = x + xr[t] * c;
            for (int ch = 0; ch < c; ch++)
                if (vt_max_takes(xrow[ch], y[ch], t == 0))
                    y[ch] = xrow[ch];
        }
    }
}

void MV(token_maxpool_backward)(vt_backend *be, float *din, const float *dout, const float *in,
                                int n, int c, const int thw[3], const vt_pool3d_p *p) {
    const mv_pool_g g = mv_pool_geo("token_maxpool", thw, p, 1, 0);
    const int64_t L = g.L, Lo = g.Lo;
    const int *og = g.og;
    (void)be;
    /* one (clip, channel) a task: its windows overlap only each other */
#pragma omp parallel for num_threads(NT(be)) schedule(static)
    for (int64_t r = 0; r < (int64_t)n * c; r++) {
        const int64_t j = r / c, ch = r % c;
        const float *x = in + j * L * c + ch, *gy = dout + j * Lo * c + ch;
        float *gx = din + j * L * c + ch;
        for (int64_t t = 0; t < L; t++)
            gx[t * c] = 0.0f;
        gx[0] = gy[0];
        for (int64_t o = 1; o < Lo; o++) {
            int tap[MV_MAXK];
            int64_t xr[MV_MAXK];
            const int nt = mv_taps(tap, xr, o, 0, og, thw, p);
            float best = -INFINITY;
            int64_t arg = -1;
            for (int t = 0; t < nt; t++) /* the forward's rule (max_rule.h) */
                if (vt_max_takes(x[xr[t] * c], best, arg < 0)) {
                    best = x[xr[t] * c];
                    arg = xr[t];
                }
            if (arg >= 0)
                gx[arg * c] += gy[o * c];
        }
    }
}
