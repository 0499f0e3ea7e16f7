/*
 * cpu_conv.c: the fast CPU backend's conv3d (cpu_conv.h) — tiled vol2col + single-threaded
 * OpenBLAS sgemm calls over fixed blocks (cpu_blocks.h), forward and backward, with
 * scratch allocated per op through vt_backend_alloc under the tiling's cap — and the
 * tiling arithmetic the memory planner shares. cpu.c puts the two ops in its table;
 * test_ops checks them against cpu-ref, tiles squeezed by budgets included.
 *
 * It must never be nondeterministic (each output value is summed in an order fixed by
 * the shape and the tiling, never by the thread count or the schedule), never keep
 * state between calls, and never hold scratch past the op that allocated it.
 */
#include "models/cpu/cpu_conv.h"

#include <limits.h>
#include <string.h>

#include <omp.h>

#include "base/common.h"
#include "models/cpu/cpu_blocks.h"

/* Columns per block when a conv tile is split by columns: wide enough for sgemm's
 * kernels, narrow enough that a block's vol2col columns stay in its core's cache. */
#define CPU_COL_BLOCK 256

/*
 * Tiles (cpu_conv.h): a tile is clips [n0, n0+nc) x output rows [r0, r1) of each; its
 * columns are UNITS (clip j, output row r) in that order, Wo columns each, so a tile of
 * whole clips is nc clips' outputs side by side. Per tile:
 *   forward   cols (K, tc) = vol2col; out (Cout, tc) = w (Cout, K) x cols. With one clip the
 *             GEMM writes the output directly (ldc = To*Ho*Wo); with several it writes the
 *             scratch after cols and the columns are scattered to each clip's output.
 *   backward  D = dout's columns (a chunk of them gathered into the thread's buffer when
 *             several clips); dw (Cout, K) += D x cols^T; dcols (K, tc) = w^T x D (into
 *             the cols buffer), then col2vol adds the taps into din.
 * Threads: the forward splits a tile by columns (each block builds its columns and
 * multiplies them while they are in its cache) or, for few wide columns (deep layers:
 * small To*Ho*Wo, large Cout), builds cols by rows then splits the GEMM by rows of w. The
 * backward splits by groups of cols rows: whole input channels when din is wanted, so a
 * group's dcols rows feed only its own channels' din planes (no two threads write the
 * same value, no barrier between the dw and din halves), and a group goes through all the
 * tiles in one parallel region (conv_bwd_flat); so does the forward of one-clip tiles
 * (conv_fwd_flat). Threads then build their chunks in their own slices of the scratch.
 */

typedef struct conv_geo {
    int T, H, W, To, Ho, Wo;
    int rows;                     /* To*Ho output rows per clip, Wo columns each */
    int64_t kvol, K, P, in_plane; /* K = Cin*kvol rows of cols, P = To*Ho*Wo */
    int direct;                   /* 1x1x1, stride 1, no padding: cols == the input */
} conv_geo;

static conv_geo conv_geometry(const int in_thw[3], const vt_conv3d_p *p) {
    conv_geo g;
    g.T = in_thw[0], g.H = in_thw[1], g.W = in_thw[2];
    g.To = vt_conv_out(g.T, p->k[0], p->s[0], p->p[0]);
    g.Ho = vt_conv_out(g.H, p->k[1], p->s[1], p->p[1]);
    g.Wo = vt_conv_out(g.W, p->k[2], p->s[2], p->p[2]);
    g.rows = g.To * g.Ho;
    g.kvol = (int64_t)p->k[0] * p->k[1] * p->k[2];
    g.K = p->cin * g.kvol;
    g.P = (int64_t)g.To * g.Ho * g.Wo;
    g.in_plane = (int64_t)g.T * g.H * g.W;
    g.direct = g.kvol == 1 && p->s[0] == 1 && p->s[1] == 1 && p->s[2] == 1 && p->p[0] == 0 &&
               p->p[1] == 0 && p->p[2] == 0;
    return g;
}

void vt_cpu_conv_tiling_make(vt_cpu_conv_tiling *t, int n, const int in_thw[3],
                             const vt_conv3d_p *p, int64_t cap_floats) {
    conv_geo g = conv_geometry(in_thw, p);
    const int64_t per_col = g.K + p->cout; /* cols + gathered out/dout columns */
    const int64_t clip = per_col * g.P;
    int64_t nc = 1;
    if (clip <= cap_floats) {
        int64_t want = VT_MAX(1, VT_CPU_CONV_TILE_COLS / g.P);
        nc = VT_MIN(VT_MIN(want, cap_floats / clip), VT_MAX(n, 1));
    }
    t->clips = (int)nc;
    t->rows = g.rows;
    if (nc == 1 && !g.direct && g.K * g.P > cap_floats) { /* bands of rows, balanced */
        int64_t band = VT_MAX(1, cap_floats / (g.K * g.Wo));
        int64_t ntiles = (g.rows + band - 1) / band;
        t->rows = (int)((g.rows + ntiles - 1) / ntiles);
    }
    const int64_t tc = nc * t->rows * g.Wo;
    t->scratch_floats = nc > 1 ? per_col * tc : g.direct ? 0 : g.K * tc;
}

/* One group of a grouped conv as a dense conv of its own (cpu_conv.h). */
static vt_conv3d_p group_p(const vt_conv3d_p *p) {
    vt_conv3d_p q = *p;
    q.cin = p->cin / vt_conv_groups(p);
    q.cout = p->cout / vt_conv_groups(p);
    q.groups = 1;
    return q;
}

int64_t vt_cpu_conv_scratch_bound(const int in_thw[3], const vt_conv3d_p *p) {
    if (vt_conv_depthwise(p))
        return 0; /* the direct kernel needs none */
    /* the scratch grows with n up to the tile's clip count, never past it; a grouped
     * conv runs its groups one clip at a time, so this bounds it too */
    vt_cpu_conv_tiling t;
    vt_conv3d_p q = group_p(p);
    vt_cpu_conv_tiling_make(&t, INT_MAX, in_thw, &q,
                            VT_CPU_CONV_SCRATCH_CAP / (int64_t)sizeof(float));
    return t.scratch_floats * (int64_t)sizeof(float);
}

/* The op's scratch, budget-counted: the tiling for the cap, made smaller while the budget
 * cannot hold it (down to one output row per tile; below that the op cannot run and
 * vt_backend_alloc_x stops with the budget in its message). NULL when none is needed. */
static float *conv_scratch(vt_backend *be, vt_cpu_conv_tiling *tl, int n, const int in_thw[3],
                           const vt_conv3d_p *p) {
    int64_t cap = VT_CPU_CONV_SCRATCH_CAP / (int64_t)sizeof(float);
    for (;;) {
        vt_cpu_conv_tiling_make(tl, n, in_thw, p, cap);
        if (tl->scratch_floats == 0)
            return NULL;
        size_t bytes = (size_t)tl->scratch_floats * sizeof(float);
        if (tl->clips == 1 && tl->rows == 1)
            return vt_backend_alloc_x(be, bytes, "conv3d scratch");
        float *s = vt_backend_alloc(be, bytes);
        if (s)
            return s;
        cap = tl->scratch_floats / 2;
    }
}

typedef struct conv_tile {
    int n0, nc, r0, r1; /* clips [n0, n0+nc), output rows [r0, r1) of each */
    int64_t units, tc;  /* nc*(r1-r0) units, tc = units*Wo columns */
} conv_tile;

/* Output columns ow whose tap iw = ow*s + iw0 lands inside [0, W): [*lo, *hi). */
static inline void ow_range(int *lo, int *hi, int iw0, int s, int W, int Wo) {
    int l = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
    int h = iw0 > W - 1 ? 0 : (W - 1 - iw0) / s + 1;
    *lo = VT_MIN(l, Wo);
    *hi = VT_MAX(VT_MIN(h, Wo), *lo);
}

/* Where each unit of a chunk reads from: its clip's offset and the first input (t, h) of
 * its window, computed once per chunk instead of per unit and per row of cols (the
 * divisions cost more than copying a short row: Wo = 7 in deep layers). */
#define CPU_MAX_CHUNK_UNITS 256
typedef struct unit_tab {
    int n;
    int span; /* stride 1 in H and W, Wo == W: a run of rows is one input span */
    int64_t clip_off[CPU_MAX_CHUNK_UNITS]; /* (n0 + j) * Cin * T*H*W */
    int t0[CPU_MAX_CHUNK_UNITS], h0[CPU_MAX_CHUNK_UNITS];
    int run[CPU_MAX_CHUNK_UNITS]; /* units from here on with the same clip and t, oh + 1 */
} unit_tab;

static void unit_tab_make(unit_tab *ut, const conv_geo *g, const vt_conv3d_p *p,
                          const conv_tile *t, int64_t u0, int64_t u1) {
    const int R = t->r1 - t->r0;
    int j = (int)(u0 / R), orow = t->r0 + (int)(u0 % R);
    int ot = orow / g->Ho, oh = orow % g->Ho;
    ut->n = (int)(u1 - u0);
    for (int i = 0; i < ut->n; i++) {
        ut->clip_off[i] = (int64_t)(t->n0 + j) * p->cin * g->in_plane;
        ut->t0[i] = ot * p->s[0] - p->p[0];
        ut->h0[i] = oh * p->s[1] - p->p[1];
        if (++orow == t->r1) {
            j++;
            orow = t->r0;
            ot = orow / g->Ho;
            oh = orow % g->Ho;
        } else if (++oh == g->Ho) {
            oh = 0;
            ot++;
        }
    }
    ut->span = p->s[1] == 1 && p->s[2] == 1 && g->Wo == g->W;
    for (int i = ut->n - 1; i >= 0; i--)
        ut->run[i] = i + 1 < ut->n && ut->clip_off[i + 1] == ut->clip_off[i] &&
                             ut->t0[i + 1] == ut->t0[i] && ut->h0[i + 1] == ut->h0[i] + 1
                         ? ut->run[i + 1] + 1
                         : 1;
}

/* A run of units [i, i + len) of a span table for tap (ci, kt, kh): its valid rows
 * [*m0, *m1) (the others lie in the padding), and the offset of row m0's input, or -1
 * when the whole run is padding. */
static inline int64_t run_rows(const unit_tab *ut, const conv_geo *g, int i, int len, int ci,
                               int kt, int kh, int *m0, int *m1) {
    const int ti = ut->t0[i] + kt, h = ut->h0[i] + kh;
    *m0 = VT_MAX(0, -h);
    *m1 = VT_MAX(*m0, VT_MIN(len, g->H - h));
    if (ti < 0 || ti >= g->T || *m1 <= *m0)
        return -1;
    return ut->clip_off[i] + ci * g->in_plane + ((int64_t)ti * g->H + h + *m0) * g->W;
}

/* Offset of the input row unit i's tap (ci, kt, kh) reads, or -1 in the padding. */
static inline int64_t tap_row(const unit_tab *ut, const conv_geo *g, int i, int ci, int kt,
                              int kh) {
    const int ti = ut->t0[i] + kt, hi = ut->h0[i] + kh;
    if (ti < 0 || ti >= g->T || hi < 0 || hi >= g->H)
        return -1;
    return ut->clip_off[i] + ci * g->in_plane + ((int64_t)ti * g->H + hi) * g->W;
}

/* Rows [0, rows) of Wo floats: columns [0, lo) and [hi, Wo) set to 0. Column by column
 * down the rows: a row-wise loop of one or two floats becomes a memset call per row
 * (gcc's loop distribution), which cost 10% of a tiny step. */
static inline void zero_edges(float *d, int64_t rows, int64_t Wo, int lo, int hi) {
    for (int ow = 0; ow < lo; ow++)
        for (int64_t m = 0; m < rows; m++)
            d[m * Wo + ow] = 0.0f;
    for (int64_t ow = hi; ow < Wo; ow++)
        for (int64_t m = 0; m < rows; m++)
            d[m * Wo + ow] = 0.0f;
}

/* Decomposes a cols row r = (ci, kt, kh, kw) and steps it in order. */
typedef struct tap_it { int ci, kt, kh, kw; } tap_it;
static inline tap_it tap_at(const vt_conv3d_p *p, int64_t r) {
    tap_it t;
    t.kw = (int)(r % p->k[2]);
    t.kh = (int)((r / p->k[2]) % p->k[1]);
    t.kt = (int)((r / ((int64_t)p->k[1] * p->k[2])) % p->k[0]);
    t.ci = (int)(r / ((int64_t)p->k[0] * p->k[1] * p->k[2]));
    return t;
}
static inline void tap_next(tap_it *t, const vt_conv3d_p *p) {
    if (++t->kw < p->k[2])
        return;
    t->kw = 0;
    if (++t->kh < p->k[1])
        return;
    t->kh = 0;
    if (++t->kt < p->k[0])
        return;
    t->kt = 0;
    t->ci++;
}

/* cols rows [k0, k1), units [u0, u1) (at most CPU_MAX_CHUNK_UNITS) of tile t, row r =
 * (ci, kt, kh, kw); zero where the tap lands in the padding. cols points at (k0, unit u0):
 * cols ((k1-k0), ld), ld >= (u1-u0)*Wo (the tile's tc, or a thread's own chunk buffer). */
static void vol2col(float *cols, int64_t ld, const float *in, const conv_geo *g,
                    const vt_conv3d_p *p, const conv_tile *t, int64_t k0, int64_t k1, int64_t u0,
                    int64_t u1) {
    const int Wo = g->Wo, sw = p->s[2];
    unit_tab ut;
    unit_tab_make(&ut, g, p, t, u0, u1);
    tap_it tp = tap_at(p, k0);
    for (int64_t r = k0; r < k1; r++, tap_next(&tp, p)) {
        const int iw0 = tp.kw - p->p[2];
        int lo, hi;
        ow_range(&lo, &hi, iw0, sw, g->W, Wo);
        float *dst = cols + (r - k0) * ld;
        if (ut.span) { /* Wo == W: rows m of a run are input[e + iw0], e = m*W + ow */
            for (int i = 0; i < ut.n; i += ut.run[i]) {
                const int len = ut.run[i];
                float *d = dst + (int64_t)i * Wo;
                int m0, m1;
                const int64_t off = hi > lo ? run_rows(&ut, g, i, len, tp.ci, tp.kt, tp.kh, &m0, &m1) : -1;
                if (off < 0) {
                    memset(d, 0, sizeof(float) * (size_t)len * (size_t)Wo);
                    continue;
                }
                memset(d, 0, sizeof(float) * (size_t)m0 * (size_t)Wo);
                memset(d + (int64_t)m1 * Wo, 0, sizeof(float) * (size_t)(len - m1) * (size_t)Wo);
                d += (int64_t)m0 * Wo;
                const float *s = in + off;
                const int64_t L = (int64_t)(m1 - m0) * Wo, e0 = lo, e1 = L - (Wo - hi);
                memcpy(d + e0, s + e0 + iw0, sizeof(float) * (size_t)(e1 - e0));
                zero_edges(d, m1 - m0, Wo, lo, hi); /* the taps in the padding */
            }
            continue;
        }
        for (int i = 0; i < ut.n; i++, dst += Wo) {
            const int64_t off = hi > lo ? tap_row(&ut, g, i, tp.ci, tp.kt, tp.kh) : -1;
            if (off < 0) {
                memset(dst, 0, sizeof(float) * (size_t)Wo);
                continue;
            }
            const float *row = in + off; /* row[iw0 + ow * sw] >= row[0] for ow >= lo */
            for (int ow = 0; ow < lo; ow++)
                dst[ow] = 0.0f;
            if (sw == 1) {
#pragma omp simd
                for (int ow = lo; ow < hi; ow++)
                    dst[ow] = row[iw0 + ow];
            } else {
                for (int ow = lo; ow < hi; ow++)
                    dst[ow] = row[iw0 + ow * sw];
            }
            for (int ow = hi; ow < Wo; ow++)
                dst[ow] = 0.0f;
        }
    }
}

/* din planes of channels [c0, c1) of tile t's clips += the taps of dcols in units [u0, u1)
 * (cols points at dcols' row c0*kvol, unit u0; rows ld apart); the first chunk of the tile that starts a clip zeroes the planes first. Per
 * din value the order of the additions is fixed: tiles, chunks, taps (ci, kt, kh, kw). */
static void col2vol(float *din, float *cols, int64_t ld, const conv_geo *g,
                    const vt_conv3d_p *p, const conv_tile *t, int c0, int c1, int64_t u0,
                    int64_t u1) {
    const int Wo = g->Wo, sw = p->s[2];
    unit_tab ut;
    unit_tab_make(&ut, g, p, t, u0, u1);
    for (int ci = c0; ci < c1; ci++) {
        if (t->r0 == 0 && u0 == 0)
            for (int j = 0; j < t->nc; j++)
                memset(din + ((int64_t)(t->n0 + j) * p->cin + ci) * g->in_plane, 0,
                       sizeof(float) * (size_t)g->in_plane);
        int64_t r = (int64_t)ci * g->kvol;
        for (int kt = 0; kt < p->k[0]; kt++)
            for (int kh = 0; kh < p->k[1]; kh++)
                for (int kw = 0; kw < p->k[2]; kw++, r++) {
                    const int iw0 = kw - p->p[2];
                    int lo, hi;
                    ow_range(&lo, &hi, iw0, sw, g->W, Wo);
                    if (hi <= lo)
                        continue;
                    if (ut.span) {
                        float *s0 = cols + (r - (int64_t)c0 * g->kvol) * ld;
                        for (int i = 0; i < ut.n; i += ut.run[i]) {
                            int m0, m1;
                            const int64_t off = run_rows(&ut, g, i, ut.run[i], ci, kt, kh, &m0, &m1);
                            if (off < 0)
                                continue;
                            /* dcols' taps in the padding become 0, so the span's wrapped
                             * neighbours (row ends) get nothing added */
                            float *s = s0 + (int64_t)(i + m0) * Wo;
                            zero_edges(s, m1 - m0, Wo, lo, hi);
                            float *d = din + off; /* d[e + iw0] >= d[0] for e >= lo */
                            const int64_t L = (int64_t)(m1 - m0) * Wo, e1 = L - (Wo - hi);
#pragma omp simd
                            for (int64_t e = lo; e < e1; e++)
                                d[e + iw0] += s[e];
                        }
                        continue;
                    }
                    const float *src = cols + (r - (int64_t)c0 * g->kvol) * ld;
                    for (int i = 0; i < ut.n; i++, src += Wo) {
                        const int64_t off = tap_row(&ut, g, i, ci, kt, kh);
                        if (off < 0)
                            continue;
                        float *row = din + off;
                        if (sw == 1) {
#pragma omp simd
                            for (int ow = lo; ow < hi; ow++)
                                row[iw0 + ow] += src[ow];
                        } else {
                            for (int ow = lo; ow < hi; ow++)
                                row[iw0 + ow * sw] += src[ow];
                        }
                    }
                }
    }
}

/* Several-clip tiles: the GEMM's (Cout, tc) columns to each clip's output, rows
 * [co0, co1), units [u0, u1); or back (gather: the output's columns into buf). */
static void tile_scatter(float *out, float *buf, int gather, const conv_geo *g, int cout,
                         const conv_tile *t, int64_t co0, int64_t co1, int64_t u0, int64_t u1) {
    const int64_t R = g->rows, Wo = g->Wo;
    for (int64_t co = co0; co < co1; co++)
        for (int64_t u = u0; u < u1;) {
            const int64_t j = u / R, end = VT_MIN(u1, (j + 1) * R);
            float *o = out + ((t->n0 + j) * cout + co) * g->P + (u - j * R) * Wo;
            float *b = buf + co * t->tc + u * Wo;
            size_t bytes = sizeof(float) * (size_t)((end - u) * Wo);
            if (gather)
                memcpy(b, o, bytes);
            else
                memcpy(o, b, bytes);
            u = end;
        }
}

/* Units per chunk: a block works through its columns a chunk at a time, so the chunk's
 * vol2col columns (rows x chunk) are still in its core's cache (~256 KiB) when sgemm
 * reads them, but at least min_cols wide: each chunk's sgemm packs the other operand
 * again (the forward: all of w, Cout x K; the backward: a group's rows of w and dout's
 * chunk, both small). A function of the shape only: chunks set the order of dw's sums. */
#define CPU_CHUNK_FLOATS ((int64_t)64 << 10)
static int64_t chunk_units(int64_t rows, int64_t Wo, int64_t min_cols) {
    int64_t cols = VT_MAX(min_cols, CPU_CHUNK_FLOATS / VT_MAX(rows, 1));
    return VT_MAX(1, VT_MIN(CPU_MAX_CHUNK_UNITS, (cols + Wo - 1) / Wo));
}

static void conv_fwd_tile(vt_backend *be, float *out, const float *in, const float *w,
                          const conv_geo *g, const vt_conv3d_p *p, const conv_tile *t,
                          float *cols, float *tmp) {
    const int64_t K = g->K, Cout = p->cout, tc = t->tc, Wo = g->Wo;
    const int direct1 = g->direct && t->nc == 1; /* the input is cols already */
    const float *B = direct1 ? in + (int64_t)t->n0 * p->cin * g->in_plane + t->r0 * Wo : cols;
    const int64_t ldb = direct1 ? g->P : tc;
    float *C = t->nc == 1 ? out + (int64_t)t->n0 * Cout * g->P + t->r0 * Wo : tmp;
    const int64_t ldc = t->nc == 1 ? g->P : tc;
    const int par = K * tc * Cout >= CPU_GEMM_PAR_MIN;
    if (tc >= Cout && tc >= 2 * CPU_COL_BLOCK) {
        const int nb = (int)VT_MIN(nblocks(tc, CPU_COL_BLOCK), t->units);
        const int64_t cu = chunk_units(K, Wo, 256);
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (par && nb > 1)
        for (int b = 0; b < nb; b++) {
            int64_t b0, b1;
            block_range(t->units, nb, 1, b, &b0, &b1);
            for (int64_t u0 = b0; u0 < b1; u0 += cu) {
                const int64_t u1 = VT_MIN(b1, u0 + cu);
                if (!direct1)
                    vol2col(cols + u0 * Wo, tc, in, g, p, t, 0, K, u0, u1);
                sgemm(0, 0, Cout, (u1 - u0) * Wo, K, 1.0f, w, K, B + u0 * Wo, ldb, 0.0f,
                      C + u0 * Wo, ldc);
            }
            if (t->nc > 1 && b1 > b0)
                tile_scatter(out, tmp, 0, g, p->cout, t, 0, Cout, b0, b1);
        }
        return;
    }
    if (!direct1) {
        const int nb = nblocks(K, 16);
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (par && nb > 1)
        for (int b = 0; b < nb; b++) {
            int64_t k0, k1;
            block_range(K, nb, 1, b, &k0, &k1);
            for (int64_t u0 = 0; u0 < t->units; u0 += CPU_MAX_CHUNK_UNITS)
                vol2col(cols + k0 * tc + u0 * Wo, tc, in, g, p, t, k0, k1, u0,
                        VT_MIN(t->units, u0 + CPU_MAX_CHUNK_UNITS));
        }
    }
    par_sgemm(be, 0, 0, Cout, tc, K, 1.0f, w, K, B, ldb, 0.0f, C, ldc);
    if (t->nc > 1) {
        const int nb = nblocks(Cout, 8);
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (par && nb > 1)
        for (int b = 0; b < nb; b++) {
            int64_t c0, c1;
            block_range(Cout, nb, 1, b, &c0, &c1);
            tile_scatter(out, tmp, 0, g, p->cout, t, c0, c1, 0, t->units);
        }
    }
}

/* The backward's groups of cols rows: whole input channels when din is wanted (a group's
 * dcols rows then feed only its own channels' din planes), at least CPU_BWD_GROUP_ROWS
 * rows each (one channel of a 3x3x3 conv is 27: skinny GEMMs spent more time packing than
 * multiplying; a tiny step took 0.31 s instead of 0.255), at least 4 (or one per channel),
 * at most CPU_MAX_BLOCKS groups. A function of the shape only. */
#define CPU_BWD_GROUP_ROWS 64
static int bwd_groups(const conv_geo *g, const vt_conv3d_p *p, int want_din) {
    if (!want_din)
        return nblocks(g->K, 32);
    const int64_t per = (CPU_BWD_GROUP_ROWS + g->kvol - 1) / g->kvol; /* channels */
    /* but at least 4 (or one per channel): work for a few threads whatever the shape */
    return (int)VT_MIN(VT_MAX(VT_MIN(p->cin, 4), p->cin / per), CPU_MAX_BLOCKS);
}

static conv_tile tile_make(const conv_geo *g, int n0, int nc, int r0, int r1) {
    conv_tile t = {n0, nc, r0, r1, (int64_t)nc * (r1 - r0), 0};
    t.tc = t.units * g->Wo;
    return t;
}

/* The forward of one-clip tiles that all split by columns, as ONE parallel region over
 * every (tile, block) of the op instead of one region per tile: each region ends in a
 * barrier, and on a loaded machine a barrier costs about a time slice whenever one of the
 * team is descheduled (measured: a third of a tiny step at 2 threads). A block needs only
 * its own chunk of vol2col columns, so each thread builds its chunks in its own part of
 * the scratch; the blocks, chunks and sgemm shapes are those of conv_fwd_tile, so the bits
 * are too. Returns 0 (nothing done) when some tile would not take the column path. */
static int conv_fwd_flat(vt_backend *be, float *out, const float *in, const float *w, int n,
                         const conv_geo *g, const vt_conv3d_p *p, const vt_cpu_conv_tiling *tl,
                         float *scratch) {
    const int64_t K = g->K, Cout = p->cout, Wo = g->Wo;
    const int nbands = (g->rows + tl->rows - 1) / tl->rows;
    const int last_rows = g->rows - (nbands - 1) * tl->rows;
    const int64_t tc_min = (int64_t)last_rows * Wo;
    if (tl->clips != 1 || tc_min < Cout || tc_min < 2 * CPU_COL_BLOCK)
        return 0;
    const int direct = g->direct;
    const int nbmax = (int)VT_MIN(nblocks((int64_t)tl->rows * Wo, CPU_COL_BLOCK), tl->rows);
    const int64_t cu = chunk_units(K, Wo, 256);
    /* a thread's chunk buffer: K x (the widest chunk; a shorter last band has fewer but
     * wider blocks, so bound it by the band, not by a full band's block) */
    const int64_t buf = direct ? 0 : K * VT_MIN(cu, tl->rows) * Wo;
    int nthr = be->threads;
    if (buf > 0)
        nthr = (int)VT_MAX(1, VT_MIN(nthr, tl->scratch_floats / buf));
    const int64_t items = (int64_t)n * nbands * nbmax;
    const int par = K * g->P * Cout * n >= CPU_GEMM_PAR_MIN && items > 1;
#pragma omp parallel num_threads(nthr) if (par)
    {
        float *cols = direct ? NULL : scratch + (int64_t)omp_get_thread_num() * buf;
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t ti = it / nbmax;
            const int b = (int)(it % nbmax);
            const int n0 = (int)(ti / nbands), r0 = (int)(ti % nbands) * tl->rows;
            conv_tile t = tile_make(g, n0, 1, r0, VT_MIN(g->rows, r0 + tl->rows));
            const int nb = (int)VT_MIN(nblocks(t.tc, CPU_COL_BLOCK), t.units);
            if (b >= nb)
                continue;
            int64_t b0, b1;
            block_range(t.units, nb, 1, b, &b0, &b1);
            const float *B = in + (int64_t)n0 * p->cin * g->in_plane + (int64_t)r0 * Wo;
            float *C = out + (int64_t)n0 * Cout * g->P + (int64_t)r0 * Wo;
            for (int64_t u0 = b0; u0 < b1; u0 += cu) {
                const int64_t u1 = VT_MIN(b1, u0 + cu), cc = (u1 - u0) * Wo;
                if (direct) {
                    sgemm(0, 0, Cout, cc, K, 1.0f, w, K, B + u0 * Wo, g->P, 0.0f, C + u0 * Wo,
                          g->P);
                } else {
                    vol2col(cols, cc, in, g, p, &t, 0, K, u0, u1);
                    sgemm(0, 0, Cout, cc, K, 1.0f, w, K, cols, cc, 0.0f, C + u0 * Wo, g->P);
                }
            }
        }
    }
    return 1;
}

static void conv_forward_dense(vt_backend *be, float *out, const float *in, const float *w,
                               const float *b, int n, const int in_thw[3],
                               const vt_conv3d_p *p) {
    if (n == 0)
        return;
    conv_geo g = conv_geometry(in_thw, p);
    vt_cpu_conv_tiling tl;
    float *scratch = conv_scratch(be, &tl, n, in_thw, p);
    float *tmp = scratch ? scratch + g.K * tl.clips * tl.rows * g.Wo : NULL;
    if (!conv_fwd_flat(be, out, in, w, n, &g, p, &tl, scratch))
        for (int n0 = 0; n0 < n; n0 += tl.clips)
            for (int r0 = 0; r0 < g.rows; r0 += tl.rows) {
                conv_tile t = tile_make(&g, n0, VT_MIN(tl.clips, n - n0), r0,
                                        VT_MIN(g.rows, r0 + tl.rows));
                conv_fwd_tile(be, out, in, w, &g, p, &t, scratch, tmp);
            }
    vt_backend_free_ptr(be, scratch);
    if (b) {
        const int64_t planes = (int64_t)n * p->cout;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (planes * g.P > CPU_PAR_MIN)
        for (int64_t pl = 0; pl < planes; pl++) {
            float *o = out + pl * g.P;
            const float bv = b[pl % p->cout];
            for (int64_t j = 0; j < g.P; j++)
                o[j] += bv;
        }
    }
}

/* dout's columns of tile t's units [u0, u1) into buf (Cout, ld): a group's own copy of
 * its chunk when a tile spans several clips (their columns are not one strided matrix). */
static void gather_chunk(float *buf, int64_t ld, const float *dout, const conv_geo *g,
                         int64_t cout, const conv_tile *t, int64_t u0, int64_t u1) {
    const int64_t R = t->r1 - t->r0, Wo = g->Wo;
    for (int64_t co = 0; co < cout; co++)
        for (int64_t u = u0; u < u1;) {
            const int64_t j = u / R, end = VT_MIN(u1, (j + 1) * R);
            memcpy(buf + co * ld + (u - u0) * Wo,
                   dout + ((t->n0 + j) * cout + co) * g->P + (t->r0 + u - j * R) * Wo,
                   sizeof(float) * (size_t)((end - u) * Wo));
            u = end;
        }
}

/* The backward as ONE parallel region (why: conv_fwd_flat): each group of cols rows
 * (bwd_groups) works through every tile in order, building its chunks (and,
 * for tiles of several clips, gathering its chunk of dout) in its thread's own part of
 * the scratch. Per dw and din value the order of the additions is fixed: tiles, chunks,
 * taps (chunks are a function of the group's rows, never of the thread count). */
static void conv_bwd_flat(vt_backend *be, float *din, float *dw, const float *dout,
                          const float *in, const float *w, int n, const conv_geo *g,
                          const vt_conv3d_p *p, const vt_cpu_conv_tiling *tl, float *scratch) {
    const int64_t K = g->K, Cout = p->cout, Wo = g->Wo;
    const int nc = tl->clips, direct1 = g->direct && nc == 1, gather = nc > 1;
    const int64_t tu = (int64_t)nc * tl->rows; /* units of the largest tile */
    const int64_t unit = din ? g->kvol : 1, nunits = din ? p->cin : K;
    const int ng = bwd_groups(g, p, din != NULL);
    /* a thread's buffer: cols (the largest group's rows x its widest chunk), then dout's
     * chunk (Cout x the widest chunk) when gathering; at most the tile's scratch */
    int64_t cols_max = 0, d_max = 0;
    for (int b = 0; b < ng; b++) {
        int64_t a0, a1;
        block_range(nunits, ng, 1, b, &a0, &a1);
        const int64_t rk = (a1 - a0) * unit, cw = VT_MIN(chunk_units(rk, Wo, 128), tu) * Wo;
        if (!direct1)
            cols_max = VT_MAX(cols_max, rk * cw);
        if (gather)
            d_max = VT_MAX(d_max, Cout * cw);
    }
    const int64_t buf = cols_max + d_max;
    int nthr = be->threads;
    if (buf > 0)
        nthr = (int)VT_MAX(1, VT_MIN(nthr, tl->scratch_floats / buf));
    const int par = K * g->P * Cout * n >= CPU_GEMM_PAR_MIN && ng > 1;
#pragma omp parallel num_threads(nthr) if (par)
    {
        float *cols = buf ? scratch + (int64_t)omp_get_thread_num() * buf : NULL;
        float *dbuf = gather ? cols + cols_max : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < ng; b++) {
            int64_t a0, a1;
            block_range(nunits, ng, 1, b, &a0, &a1);
            if (a1 <= a0)
                continue;
            const int64_t k0 = a0 * unit, k1 = a1 * unit, cu = chunk_units(k1 - k0, Wo, 128);
            for (int n0 = 0; n0 < n; n0 += nc)
                for (int r0 = 0; r0 < g->rows; r0 += tl->rows) {
                    conv_tile t = tile_make(g, n0, VT_MIN(nc, n - n0), r0,
                                            VT_MIN(g->rows, r0 + tl->rows));
                    const float *D = dout + (int64_t)n0 * Cout * g->P + (int64_t)r0 * Wo;
                    const int64_t xoff = ((int64_t)n0 * p->cin + k0) * g->in_plane + (int64_t)r0 * Wo;
                    for (int64_t u0 = 0; u0 < t.units; u0 += cu) {
                        const int64_t u1 = VT_MIN(t.units, u0 + cu), cc = (u1 - u0) * Wo;
                        const float *Dc = D + u0 * Wo;
                        int64_t ldd = g->P;
                        if (gather) {
                            gather_chunk(dbuf, cc, dout, g, Cout, &t, u0, u1);
                            Dc = dbuf;
                            ldd = cc;
                        }
                        const float *X = cols;
                        int64_t ldx = cc;
                        if (direct1) {
                            X = in + xoff + u0 * Wo;
                            ldx = g->P;
                        } else {
                            vol2col(cols, cc, in, g, p, &t, k0, k1, u0, u1);
                        }
                        /* dw[:, k0:k1] (Cout, k1-k0) += Dc (Cout, cc) x X^T (cc, k1-k0) */
                        sgemm(0, 1, Cout, k1 - k0, cc, 1.0f, Dc, ldd, X, ldx, 1.0f, dw + k0, K);
                        if (!din)
                            continue;
                        if (direct1) { /* dcols rows are din's rows themselves */
                            sgemm(1, 0, k1 - k0, cc, Cout, 1.0f, w + k0, K, Dc, ldd, 0.0f,
                                  din + xoff + u0 * Wo, g->P);
                        } else {
                            sgemm(1, 0, k1 - k0, cc, Cout, 1.0f, w + k0, K, Dc, ldd, 0.0f, cols,
                                  cc);
                            col2vol(din, cols, cc, g, p, &t, (int)a0, (int)a1, u0, u1);
                        }
                    }
                }
        }
    }
}

static void conv_backward_dense(vt_backend *be, float *din, float *dw, float *db,
                                const float *dout, const float *in, const float *w, int n,
                                const int in_thw[3], const vt_conv3d_p *p) {
    if (n == 0)
        return;
    conv_geo g = conv_geometry(in_thw, p);
    vt_cpu_conv_tiling tl;
    float *scratch = conv_scratch(be, &tl, n, in_thw, p);
    conv_bwd_flat(be, din, dw, dout, in, w, n, &g, p, &tl, scratch);
    vt_backend_free_ptr(be, scratch);
    if (db) {
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) \
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

/* ---- groups: depthwise by the direct kernel (cpu_dwconv.c), others group by group ----
 * A group of one clip is a contiguous (Cin/groups, T, H, W) block of the input and a
 * (Cout/groups, ...) block of the output, so it runs as a dense conv of n = 1 on
 * pointers into them; its weight rows and bias are a contiguous slice too. The order of
 * the calls is fixed by the shape, so the bits are too. */
typedef struct group_geo {
    vt_conv3d_p q;
    int G;
    int64_t in_g, out_g, w_g; /* floats of one group: input and output per clip, weight */
} group_geo;

static group_geo group_geometry(const int in_thw[3], const vt_conv3d_p *p) {
    group_geo gg = {.q = group_p(p), .G = vt_conv_groups(p)};
    conv_geo g = conv_geometry(in_thw, &gg.q);
    gg.in_g = (int64_t)gg.q.cin * g.in_plane;
    gg.out_g = (int64_t)gg.q.cout * g.P;
    gg.w_g = (int64_t)gg.q.cout * g.K;
    return gg;
}

void vt_cpu_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, const int in_thw[3], const vt_conv3d_p *p) {
    if (vt_conv_groups(p) == 1) {
        conv_forward_dense(be, out, in, w, b, n, in_thw, p);
        return;
    }
    if (vt_conv_depthwise(p)) {
        vt_cpu_dwconv_forward(be, out, in, w, b, n, in_thw, p);
        return;
    }
    group_geo gg = group_geometry(in_thw, p);
    for (int j = 0; j < n; j++)
        for (int gi = 0; gi < gg.G; gi++)
            conv_forward_dense(be, out + ((int64_t)j * gg.G + gi) * gg.out_g,
                               in + ((int64_t)j * gg.G + gi) * gg.in_g, w + gi * gg.w_g,
                               b ? b + (int64_t)gi * gg.q.cout : NULL, 1, in_thw, &gg.q);
}

void vt_cpu_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                            const float *dout, const float *in, const float *w, int n,
                            const int in_thw[3], const vt_conv3d_p *p) {
    if (vt_conv_groups(p) == 1) {
        conv_backward_dense(be, din, dw, db, dout, in, w, n, in_thw, p);
        return;
    }
    if (vt_conv_depthwise(p)) {
        vt_cpu_dwconv_backward(be, din, dw, db, dout, in, w, n, in_thw, p);
        return;
    }
    group_geo gg = group_geometry(in_thw, p);
    for (int j = 0; j < n; j++)
        for (int gi = 0; gi < gg.G; gi++) {
            const int64_t io = ((int64_t)j * gg.G + gi) * gg.in_g;
            conv_backward_dense(be, din ? din + io : NULL, dw + gi * gg.w_g,
                                db ? db + (int64_t)gi * gg.q.cout : NULL,
                                dout + ((int64_t)j * gg.G + gi) * gg.out_g, in + io,
                                w + gi * gg.w_g, 1, in_thw, &gg.q);
        }
}
