/*
 * kernels_mvit.cu: MViT's CUDA kernels (kernels_mvit.h) — the depthwise pooling of q, k, v
 * (forward, the input's gradient, the kernel's gradient), the row kernels of the
 * multiscale attention around cuBLAS's GEMMs (cuda_mvit.c: softmax with the decomposed
 * relative terms and the log-sum-exp; the backward's ds with its per-coordinate row
 * sums; dq's relative and residual terms; the tables' gradients), the residual pooling
 * add, and BF16's ends of a query block (out and dq, each rounded once). The token grid's
 * max pooling is in kernels_mvit_tmax.cu. The rules all kernel files keep are in
 * kernels_impl.cuh; the formulas are cpu-ref's (models/cpu/cpu_mvit_impl.h).
 *
 * Activations (qkv, the pooled q, k, v, out and their gradients) are float or bf16 as the
 * launcher's vt_cuk_dt says; the weights, the relative tables, the logits, lse, the row
 * sums arow and every parameter gradient are float whatever the activations. BF16's
 * rounding points (docs/precision.md "bf16 for the transformers"): each stored value is
 * the FP32 formula's float result on the bf16 inputs, rounded to nearest even once; the
 * softmax also writes P rounded to bf16 for the P V GEMM, and ds writes dS rounded to
 * bf16 for the three gradient GEMMs, while the row sums of ds (the tables' and q's
 * relative gradients) read the float ds.
 *
 * Exactness against cpu-ref under FP32 (what tests/test_mvit_gpu.c holds them to; under
 * BF16 the same results rounded once, its bounds from bf16's 8-bit significand):
 *  - pool forward, pool backward's dqkv: every output element is formed by one thread
 *    with cpu-ref's operations in cpu-ref's order (double sums of exact float products):
 *    bit for bit.
 *  - pool backward's dw: cpu-ref's double sum cut into chunks of windows (a count fixed
 *    by the shape, never by the GPU), the chunks added in order: cpu-ref's float but for
 *    a rare 1-ulp flip.
 *  - the attention's relative terms q_i . R[dist] and row sums of ds: double sums in
 *    cpu-ref's order (bit for bit given the same inputs); the logits and the GEMM
 *    products are cuBLAS's float sums (~1e-7 relative against cpu-ref's double ones);
 *    the tables' gradients are double sums (cpu-ref adds them in float row by row).
 * No atomics anywhere: every sum has a fixed order, and the chunk counts depend on the
 * shape alone, so the bits do not depend on the launch configuration or the GPU's size.
 */
#include <math.h>
#include <stdint.h>

#include <cuda_runtime.h>

#include "models/cuda/cuda_check.h"
#include "models/cuda/kernels_impl.cuh"
#include "models/cuda/kernels_mvit.h"
#include "models/cuda/kernels_window.cuh"

/* ------------------------------------------------------------------ pooling of q, k, v */

/* out (N, heads, Lo, D): e = ((j heads + h) Lo + o) D + d. */
template <typename A>
__global__ static void k_pool_fwd(A *out, const A *qkv, const float *w, int heads, int D,
                                  int part, vt_cuk_pool p, int64_t total) {
    const int64_t L = grid_rows(p.in), Lo = grid_rows(p.out);
    const int64_t C = (int64_t)heads * D, C3 = 3 * C;
    const int K = p.k[0] * p.k[1] * p.k[2];
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % D);
        const int64_t r = e / D, o = r % Lo, jh = r / Lo, j = jh / heads, h = jh % heads;
        const A *src = qkv + j * L * C3 + part * C + h * D + d; /* row x at src + x C3 */
        if (o == 0 || !w) {
            st(out, e, ld(src, o * C3)); /* a copy: exact in either type */
            continue;
        }
        double acc = 0;
        win_taps(p, o, [&](int tap, int64_t xi) {
            const float x = ld(src, xi * C3);
            acc = __dadd_rn(acc, __dmul_rn((double)w[(int64_t)d * K + tap], (double)x));
        });
        st(out, e, (float)acc);
    }
}

/* dqkv's columns of this part: e = ((j L + x) heads + h) D + d, gathered from the windows
 * that read input row x, in cpu-ref's tap order. */
template <typename A>
__global__ static void k_pool_dx(A *dqkv, const A *dout, const float *w, int heads, int D,
                                 int part, vt_cuk_pool p, int64_t total) {
    const int64_t L = grid_rows(p.in), Lo = grid_rows(p.out);
    const int64_t C = (int64_t)heads * D, C3 = 3 * C;
    const int K = p.k[0] * p.k[1] * p.k[2];
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % D);
        const int64_t r = e / D, h = r % heads, jx = r / heads, x = jx % L, j = jx / L;
        A *dst = dqkv + jx * C3 + part * C + h * D + d;
        const A *g = dout + (j * heads + h) * Lo * D + d; /* this head's output rows */
        if (x == 0 || !w) {
            st(dst, 0, ld(g, x * D));
            continue;
        }
        double acc = 0;
        win_readers<false>(p, x, [&](int tap, int64_t o) {
            const float gy = ld(g, o * D);
            acc = __dadd_rn(acc, __dmul_rn((double)w[(int64_t)d * K + tap], (double)gy));
        });
        st(dst, 0, (float)acc);
    }
}

/* dw's partials: e = (part K + tap) D + d sums the windows [lo, hi) of the flattened
 * (clip-head, window >= 1) sequence, in cpu-ref's order. */
template <typename A>
__global__ static void k_pool_dw_part(double *pa, const A *dout, const A *qkv,
                                      int heads, int D, int part, vt_cuk_pool p, int parts,
                                      int64_t nwin) {
    const int64_t L = grid_rows(p.in), Lo = grid_rows(p.out);
    const int64_t C = (int64_t)heads * D, C3 = 3 * C;
    const int K = p.k[0] * p.k[1] * p.k[2];
    const int64_t chunk = (nwin + parts - 1) / parts;
    VT_GRID_STRIDE(e, (int64_t)parts * K * D) {
        const int d = (int)(e % D), tap = (int)(e / D % K), pc = (int)(e / ((int64_t)D * K));
        const int a = tap / (p.k[1] * p.k[2]), b = tap / p.k[2] % p.k[1], c = tap % p.k[2];
        const int64_t lo = pc * chunk, hi = lo + chunk < nwin ? lo + chunk : nwin;
        double acc = 0;
        for (int64_t wi = lo; wi < hi; wi++) {
            const int64_t jh = wi / (Lo - 1), o = 1 + wi % (Lo - 1);
            const int64_t j = jh / heads, h = jh % heads;
            const int ot = (int)((o - 1) / ((int64_t)p.out[1] * p.out[2])),
                      oh = (int)((o - 1) / p.out[2] % p.out[1]), ow = (int)((o - 1) % p.out[2]);
            const int it = ot * p.s[0] - p.p[0] + a, ih = oh * p.s[1] - p.p[1] + b,
                      iw = ow * p.s[2] - p.p[2] + c;
            if (it < 0 || it >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 || iw >= p.in[2])
                continue;
            const float g = ld(dout, (jh * Lo + o) * D + d);
            const float x = ld(qkv, j * L * C3 + part * C + h * D + d +
                                        (1 + ((int64_t)it * p.in[1] + ih) * p.in[2] + iw) * C3);
            acc = __dadd_rn(acc, __dmul_rn((double)g, (double)x));
        }
        pa[e] = acc;
    }
}

/* dw[d K + tap] += the partials of (tap, d) summed in chunk order. */
__global__ static void k_pool_dw_final(float *dw, const double *pa, int D, int K, int parts) {
    VT_GRID_STRIDE(e, (int64_t)K * D) {
        const int d = (int)(e % D), tap = (int)(e / D);
        double acc = 0;
        for (int pc = 0; pc < parts; pc++)
            acc += pa[((int64_t)pc * K + tap) * D + d];
        dw[(int64_t)d * K + tap] += (float)acc;
    }
}

extern "C" void vt_cuk_mvit_pool_fwd(cudaStream_t st, vt_cuk_dt dt, void *out, const void *qkv,
                                     const float *w, int n, int heads, int D, int part,
                                     const vt_cuk_pool *p) {
    const int64_t total = (int64_t)n * heads * grid_rows(p->out) * D;
    if (total <= 0)
        return;
    VT_DT(dt, k_pool_fwd<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)out, (const A *)qkv, w, heads, D, part, *p, total));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_mvit_pool_bwd_dx(cudaStream_t st, vt_cuk_dt dt, void *dqkv,
                                        const void *dout, const float *w, int n, int heads,
                                        int D, int part, const vt_cuk_pool *p) {
    const int64_t total = (int64_t)n * grid_rows(p->in) * heads * D;
    if (total <= 0 || !dqkv)
        return;
    VT_DT(dt, k_pool_dx<A><<<vt_blocks(total), VT_THREADS, 0, st>>>(
                  (A *)dqkv, (const A *)dout, w, heads, D, part, *p, total));
    CUDA_LAUNCH_CHECK();
}
/* Enough chunks to fill a GPU when D * K is small (96 x 27 sums over up to ~200k windows
 * each), one when the windows are few; at most 2^22 partials. */
extern "C" int vt_cuk_mvit_pool_dw_parts(int n, int heads, int D, const vt_cuk_pool *p) {
    const int64_t nwin = (int64_t)n * heads * grid3(p->out), cells = (int64_t)D * grid3(p->k);
    int64_t parts = (nwin + 511) / 512;
    if (parts > 256)
        parts = 256;
    if (cells > 0 && parts * cells > ((int64_t)1 << 22))
        parts = ((int64_t)1 << 22) / cells;
    return (int)(parts < 1 ? 1 : parts);
}
extern "C" void vt_cuk_mvit_pool_bwd_dw(cudaStream_t st, vt_cuk_dt dt, float *dw,
                                        const void *dout, const void *qkv, int n, int heads,
                                        int D, int part, const vt_cuk_pool *p,
                                        double *partials) {
    const int64_t nwin = (int64_t)n * heads * grid3(p->out);
    const int K = grid3(p->k);
    if (!dw || D <= 0 || K <= 0)
        return;
    const int parts = vt_cuk_mvit_pool_dw_parts(n, heads, D, p);
    if (nwin > 0) {
        VT_DT(dt, k_pool_dw_part<A><<<vt_blocks((int64_t)parts * K * D), VT_THREADS, 0, st>>>(
                      partials, (const A *)dout, (const A *)qkv, heads, D, part, *p, parts, nwin));
        CUDA_LAUNCH_CHECK();
    } else {
        CUDA_CHECK(cudaMemsetAsync(partials, 0, (size_t)parts * K * D * sizeof(double), st));
    }
    k_pool_dw_final<<<vt_blocks((int64_t)K * D), VT_THREADS, 0, st>>>(dw, partials, D, K, parts);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ attention rows */

/* backend.h's vt_mvit_rel_dist with the same float operations (no contraction). */
__device__ static inline int rel_dist(int qi, int qs, int kj, int ks) {
    float qr = (float)((double)ks / qs), kr = (float)((double)qs / ks);
    if (qr < 1.0f)
        qr = 1.0f;
    if (kr < 1.0f)
        kr = 1.0f;
    return (int)__fsub_rn(__fmul_rn((float)qi, qr),
                          __fmul_rn(__fadd_rn((float)kj, (float)(1 - ks)), kr));
}

/* Query row i >= 1's coordinates on the q grid. */
__device__ static inline void q_coords(int qc[3], const vt_cuk_mvgeo &g, int i) {
    qc[0] = (i - 1) / (g.qthw[1] * g.qthw[2]);
    qc[1] = (i - 1) / g.qthw[2] % g.qthw[1];
    qc[2] = (i - 1) % g.qthw[2];
}
/* Relative term x (0..KK) -> its axis (0 t, 1 h, 2 w) and key coordinate. */
__device__ static inline int term_axis(const vt_cuk_mvgeo &g, int x, int *kc) {
    int a = 0;
    while (a < 2 && x >= g.kthw[a]) {
        x -= g.kthw[a];
        a++;
    }
    *kc = x;
    return a;
}
__device__ static inline const float *table_row(const vt_cuk_mvgeo &g, const int qc[3], int x,
                                                const float *rh, const float *rw,
                                                const float *rt) {
    int kc;
    const int a = term_axis(g, x, &kc);
    const float *tab = a == 0 ? rt : a == 1 ? rh : rw;
    return tab + (int64_t)rel_dist(qc[a], g.qthw[a], kc, g.kthw[a]) * g.D;
}
/* Key t >= 1's three relative terms' indices (cpu-ref's mv_key_cols). */
__device__ static inline void key_cols(const vt_cuk_mvgeo &g, int t, int *ct, int *ch, int *cw) {
    *ct = (t - 1) / (g.kthw[1] * g.kthw[2]);
    *ch = g.kthw[0] + (t - 1) / g.kthw[2] % g.kthw[1];
    *cw = g.kthw[0] + g.kthw[1] + (t - 1) % g.kthw[2];
}

/* rel[0..KK) of query row i >= 1 (q: its row): q . R[dist] as a double sum in cpu-ref's
 * order, one term a thread. The caller synchronises before reading. */
template <typename A>
__device__ static void rel_row(float *rel, const vt_cuk_mvgeo &g, int i, const A *q,
                               const float *rh, const float *rw, const float *rt) {
    int qc[3];
    q_coords(qc, g, i);
    for (int x = threadIdx.x; x < g.KK; x += blockDim.x) {
        const float *R = table_row(g, qc, x, rh, rw, rt);
        double s = 0;
        for (int d = 0; d < g.D; d++)
            s = __dadd_rn(s, __dmul_rn((double)ld(q, d), (double)R[d]));
        rel[x] = (float)s;
    }
}
/* dq's column d of query row i >= 1 plus its relative terms, (float)(v + sum_x ar[x]
 * R[dist][d]) in double, x in order (cpu-ref's): k_mv_dq_fix's and k_mv_dq16's. ar: the
 * row's KK attention sums. */
__device__ static inline float dq_rel(float v, const vt_cuk_mvgeo &g, int i, int d,
                                      const float *ar, const float *rh, const float *rw,
                                      const float *rt) {
    int qc[3];
    q_coords(qc, g, i);
    double acc = v;
    for (int x = 0; x < g.KK; x++)
        acc = __dadd_rn(acc, __dmul_rn((double)ar[x], (double)table_row(g, qc, x, rh, rw, rt)[d]));
    return (float)acc;
}
/* A logit plus key t's relative terms, cpu-ref's float adds: v + ((rh + rw) + rt). */
__device__ static inline float add_rel(float v, const float *rel, const vt_cuk_mvgeo &g, int t) {
    int ct, ch, cw;
    key_cols(g, t, &ct, &ch, &cw);
    return __fadd_rn(v, __fadd_rn(__fadd_rn(rel[ch], rel[cw]), rel[ct]));
}

/* One block a row (dynamic shared memory: KK floats of relative terms). */
template <typename A>
__global__ static void k_mv_softmax(float *s, A *p, float *lse, const A *q, const float *rh,
                                    const float *rw, const float *rt, vt_cuk_mvgeo g,
                                    int64_t rows, int bq, int i0, int64_t l_bs) {
    extern __shared__ float rel[];
    __shared__ double sh[VT_THREADS];
    __shared__ float shf[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t m = row / bq;
        const int i = i0 + (int)(row % bq);
        const int64_t qr = m * l_bs + i;
        const int use = g.rel && i >= 1;
        if (use)
            rel_row(rel, g, i, q + qr * g.D, rh, rw, rt);
        __syncthreads();
        float *sr = s + row * g.Lk;
        float mx = -INFINITY;
        for (int t = threadIdx.x; t < g.Lk; t += VT_THREADS) {
            const float v = use && t >= 1 ? add_rel(sr[t], rel, g, t) : sr[t];
            sr[t] = v;
            mx = fmaxf(mx, v);
        }
        mx = vt_block_max(mx, shf);
        double z = 0;
        for (int t = threadIdx.x; t < g.Lk; t += VT_THREADS)
            z += expf(__fsub_rn(sr[t], mx));
        z = vt_block_sum(z, sh);
        const float l = __fadd_rn(mx, (float)log(z)); /* cpu-ref: m + (float)log(sum) */
        A *pr = p + row * g.Lk; /* FP32: sr itself */
        for (int t = threadIdx.x; t < g.Lk; t += VT_THREADS)
            st(pr, t, expf(__fsub_rn(sr[t], l)));
        if (threadIdx.x == 0)
            lse[qr] = l;
        __syncthreads(); /* rel, sh and shf are reused by the next row */
    }
}

/* One block a row: p, delta, ds, then (rel) the row's sums of ds per key coordinate in
 * cpu-ref's key order. */
template <typename A>
__global__ static void k_mv_ds(float *s, float *dp, A *po, A *dso, float *arow, const float *lse,
                               const A *q, const float *rh, const float *rw, const float *rt,
                               vt_cuk_mvgeo g, int64_t rows, int bq, int i0, int64_t l_bs) {
    extern __shared__ float rel[];
    __shared__ double sh[VT_THREADS];
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t m = row / bq;
        const int i = i0 + (int)(row % bq);
        const int64_t qr = m * l_bs + i;
        const int use = g.rel && i >= 1;
        if (use)
            rel_row(rel, g, i, q + qr * g.D, rh, rw, rt);
        __syncthreads();
        float *sr = s + row * g.Lk, *dr = dp + row * g.Lk;
        A *pr = po + row * g.Lk, *dsr = dso + row * g.Lk; /* FP32: sr and dr themselves */
        const float ls = lse[qr];
        double a = 0;
        for (int t = threadIdx.x; t < g.Lk; t += VT_THREADS) {
            const float v = use && t >= 1 ? add_rel(sr[t], rel, g, t) : sr[t];
            const float p = expf(__fsub_rn(v, ls));
            sr[t] = p;
            st(pr, t, p);
            a = __dadd_rn(a, __dmul_rn((double)p, (double)dr[t]));
        }
        const float delta = (float)vt_block_sum(a, sh);
        for (int t = threadIdx.x; t < g.Lk; t += VT_THREADS) {
            const float ds = __fmul_rn(sr[t], __fsub_rn(dr[t], delta));
            dr[t] = ds; /* the row sums below read the float ds */
            st(dsr, t, ds);
        }
        __syncthreads(); /* every ds of the row written before the row sums read them */
        if (use) {
            const int kt = g.kthw[0], kh = g.kthw[1], kw = g.kthw[2];
            for (int x = threadIdx.x; x < g.KK; x += VT_THREADS) {
                int kc;
                const int ax = term_axis(g, x, &kc);
                double acc = 0; /* the keys of coordinate kc, in key order */
                if (ax == 0)
                    for (int r = 0; r < kh * kw; r++)
                        acc += dr[1 + kc * kh * kw + r];
                else if (ax == 1)
                    for (int tt = 0; tt < kt; tt++)
                        for (int ww = 0; ww < kw; ww++)
                            acc += dr[1 + (tt * kh + kc) * kw + ww];
                else
                    for (int tt = 0; tt < kt; tt++)
                        for (int hh = 0; hh < kh; hh++)
                            acc += dr[1 + (tt * kh + hh) * kw + kc];
                arow[qr * g.KK + x] = (float)acc;
            }
        }
        __syncthreads(); /* rel and sh are reused by the next row */
    }
}

static unsigned row_blocks(int64_t rows) {
    return (unsigned)(rows < VT_MAX_BLOCKS ? rows : VT_MAX_BLOCKS);
}

extern "C" void vt_cuk_mvit_softmax(cudaStream_t st, vt_cuk_dt dt, float *s, void *p,
                                    float *lse, const void *q, const float *rh, const float *rw,
                                    const float *rt, const vt_cuk_mvgeo *g, int B, int bq,
                                    int i0, int64_t l_bs) {
    const int64_t rows = (int64_t)B * bq;
    if (rows <= 0 || g->Lk <= 0)
        return;
    const size_t shm = g->rel ? (size_t)g->KK * sizeof(float) : 0;
    VT_DT(dt, k_mv_softmax<A><<<row_blocks(rows), VT_THREADS, shm, st>>>(
                  s, (A *)p, lse, (const A *)q, rh, rw, rt, *g, rows, bq, i0, l_bs));
    CUDA_LAUNCH_CHECK();
}
extern "C" void vt_cuk_mvit_ds(cudaStream_t st, vt_cuk_dt dt, float *s, float *dp, void *p,
                               void *ds, float *arow, const float *lse, const void *q,
                               const float *rh, const float *rw, const float *rt,
                               const vt_cuk_mvgeo *g, int B, int bq, int i0, int64_t l_bs) {
    const int64_t rows = (int64_t)B * bq;
    if (rows <= 0 || g->Lk <= 0)
        return;
    const size_t shm = g->rel ? (size_t)g->KK * sizeof(float) : 0;
    VT_DT(dt, k_mv_ds<A><<<row_blocks(rows), VT_THREADS, shm, st>>>(
                  s, dp, (A *)p, (A *)ds, arow, lse, (const A *)q, rh, rw, rt, *g, rows, bq, i0,
                  l_bs));
    CUDA_LAUNCH_CHECK();
}

/* e = ((j heads + h) Lq + i) D + d over q's layout. */
__global__ static void k_mv_residual(float *out, const float *q, int heads, vt_cuk_mvgeo g,
                                     int64_t total) {
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % g.D);
        const int64_t r = e / g.D, i = r % g.Lq, jh = r / g.Lq, j = jh / heads, h = jh % heads;
        if (i < 1)
            continue;
        float *o = out + (j * g.Lq + i) * heads * g.D + h * g.D + d;
        *o = __fadd_rn(*o, q[e]);
    }
}
extern "C" void vt_cuk_mvit_residual(cudaStream_t st, float *out, const float *q, int n,
                                     int heads, const vt_cuk_mvgeo *g) {
    const int64_t total = (int64_t)n * heads * g->Lq * g->D;
    if (total <= 0)
        return;
    k_mv_residual<<<vt_blocks(total), VT_THREADS, 0, st>>>(out, q, heads, *g, total);
    CUDA_LAUNCH_CHECK();
}

/* dq's element e (q's layout), rows >= 1: (float)(dq + sum_x arow[x] R[dist][d]) in double,
 * x in order (cpu-ref's), then + dout (residual) in float. */
__global__ static void k_mv_dq_fix(float *dq, const float *arow, const float *dout,
                                   const float *rh, const float *rw, const float *rt, int heads,
                                   vt_cuk_mvgeo g, int residual, int64_t total) {
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % g.D);
        const int64_t r = e / g.D, i = r % g.Lq, jh = r / g.Lq, j = jh / heads, h = jh % heads;
        if (i < 1)
            continue;
        float v = dq[e];
        if (g.rel)
            v = dq_rel(v, g, (int)i, d, arow + r * g.KK, rh, rw, rt);
        if (residual)
            v = __fadd_rn(v, dout[(j * g.Lq + i) * heads * g.D + h * g.D + d]);
        dq[e] = v;
    }
}
extern "C" void vt_cuk_mvit_dq_fix(cudaStream_t st, float *dq, const float *arow,
                                   const float *dout, const float *rh, const float *rw,
                                   const float *rt, int n, int heads, const vt_cuk_mvgeo *g,
                                   int residual) {
    const int64_t total = (int64_t)n * heads * g->Lq * g->D;
    if (total <= 0 || (!g->rel && !residual))
        return;
    k_mv_dq_fix<<<vt_blocks(total), VT_THREADS, 0, st>>>(dq, arow, dout, rh, rw, rt, heads, *g,
                                                         residual, total);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ BF16's block ends */

/* BF16's forward, one query block: out's row i of member m (bf16) = O_b's float row (P V
 * from cuBLAS) plus, with residual pooling on rows >= 1, q's row (FP32's float add,
 * k_mv_residual's), rounded once. e = (m b + r) D + d over O_b (B, b, D); i = i0 + r. */
__global__ static void k_mv_out16(__nv_bfloat16 *out, const float *o, const __nv_bfloat16 *q,
                                  vt_cuk_mvgeo g, int b, int i0, int64_t l_bs, int64_t o_bs,
                                  int64_t C, int residual, int64_t total) {
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % g.D);
        const int64_t r = e / g.D, m = r / b;
        const int i = i0 + (int)(r % b);
        float v = o[e];
        if (residual && i >= 1)
            v = __fadd_rn(v, ld(q, (m * l_bs + i) * g.D + d));
        st(out, m * o_bs + i * C + d, v);
    }
}
extern "C" void vt_cuk_mvit_out16(cudaStream_t st, void *out, const float *o, const void *q,
                                  const vt_cuk_mvgeo *g, int B, int b, int i0, int64_t l_bs,
                                  int64_t o_bs, int64_t C, int residual) {
    const int64_t total = (int64_t)B * b * g->D;
    if (total <= 0)
        return;
    k_mv_out16<<<vt_blocks(total), VT_THREADS, 0, st>>>((__nv_bfloat16 *)out, o,
                                                        (const __nv_bfloat16 *)q, *g, b, i0,
                                                        l_bs, o_bs, C, residual, total);
    CUDA_LAUNCH_CHECK();
}

/* BF16's dq, one query block: dq's row i of member m (bf16) = dQ_b's float row (scale dS K
 * from cuBLAS) plus, on rows >= 1, k_mv_dq_fix's terms in its order (the relative terms
 * in double, then dout's row in float), rounded once. e over dQ_b (B, b, D) as above. */
__global__ static void k_mv_dq16(__nv_bfloat16 *dq, const float *dqb, const float *arow,
                                 const __nv_bfloat16 *dout, const float *rh, const float *rw,
                                 const float *rt, vt_cuk_mvgeo g, int b, int i0, int64_t l_bs,
                                 int64_t o_bs, int64_t C, int residual, int64_t total) {
    VT_GRID_STRIDE(e, total) {
        const int d = (int)(e % g.D);
        const int64_t r = e / g.D, m = r / b;
        const int i = i0 + (int)(r % b);
        const int64_t qr = m * l_bs + i;
        float v = dqb[e];
        if (i >= 1 && g.rel)
            v = dq_rel(v, g, i, d, arow + qr * g.KK, rh, rw, rt);
        if (i >= 1 && residual)
            v = __fadd_rn(v, ld(dout, m * o_bs + i * C + d));
        st(dq, qr * g.D + d, v);
    }
}
extern "C" void vt_cuk_mvit_dq16(cudaStream_t st, void *dq, const float *dqb, const float *arow,
                                 const void *dout, const float *rh, const float *rw,
                                 const float *rt, const vt_cuk_mvgeo *g, int B, int b, int i0,
                                 int64_t l_bs, int64_t o_bs, int64_t C, int residual) {
    const int64_t total = (int64_t)B * b * g->D;
    if (total <= 0)
        return;
    k_mv_dq16<<<vt_blocks(total), VT_THREADS, 0, st>>>(
        (__nv_bfloat16 *)dq, dqb, arow, (const __nv_bfloat16 *)dout, rh, rw, rt, *g, b, i0, l_bs,
        o_bs, C, residual, total);
    CUDA_LAUNCH_CHECK();
}

/* ------------------------------------------------------------------ tables' gradients */

/* Stage 1 sums, per axis a, query coordinate qc and key coordinate kc, arow[x] q_i over the
 * rows i >= 1 of every (clip, head) whose a-coordinate is qc (in row order, cut into
 * `parts` chunks); stage 2 adds, per table row (distance) and d, the (qc, kc) pairs at that
 * distance. Cells of stage 1: sum_a q_a k_a D (the offsets below). */
static int64_t rel_cells(const vt_cuk_mvgeo *g, int64_t off[4]) {
    off[0] = 0;
    for (int a = 0; a < 3; a++)
        off[a + 1] = off[a] + (int64_t)g->qthw[a] * g->kthw[a] * g->D;
    return off[3];
}

template <typename A>
__global__ static void k_rel_part(double *pa, const float *arow, const A *q, int64_t nh,
                                  vt_cuk_mvgeo g, int parts, int64_t o1, int64_t o2,
                                  int64_t cells) {
    VT_GRID_STRIDE(e, (int64_t)parts * cells) {
        const int pc = (int)(e / cells);
        int64_t c = e % cells;
        const int a = c < o1 ? 0 : c < o2 ? 1 : 2;
        c -= a == 0 ? 0 : a == 1 ? o1 : o2;
        const int d = (int)(c % g.D), kc = (int)(c / g.D % g.kthw[a]),
                  qc = (int)(c / g.D / g.kthw[a]);
        const int x = kc + (a >= 1 ? g.kthw[0] : 0) + (a == 2 ? g.kthw[1] : 0);
        const int64_t per = (int64_t)(g.Lq - 1) / g.qthw[a], M = nh * per;
        const int64_t chunk = (M + parts - 1) / parts, lo = pc * chunk,
                      hi = lo + chunk < M ? lo + chunk : M;
        const int q1 = g.qthw[1], q2 = g.qthw[2];
        double acc = 0;
        for (int64_t mi = lo; mi < hi; mi++) {
            const int64_t jh = mi / per;
            const int rr = (int)(mi % per);
            const int i = a == 0   ? 1 + qc * q1 * q2 + rr
                          : a == 1 ? 1 + (rr / q2 * q1 + qc) * q2 + rr % q2
                                   : 1 + rr * q2 + qc;
            const int64_t row = jh * g.Lq + i;
            acc = __dadd_rn(acc, __dmul_rn((double)arow[row * g.KK + x],
                                           (double)ld(q, row * g.D + d)));
        }
        pa[e] = acc;
    }
}

/* e over the three tables' rows (2 max(q_a, k_a) - 1 each) times D. */
__global__ static void k_rel_final(float *drt, float *drh, float *drw, const double *pa,
                                   vt_cuk_mvgeo g, int parts, int64_t o1, int64_t o2,
                                   int64_t cells, int64_t t1, int64_t t2, int64_t total) {
    VT_GRID_STRIDE(e, total) {
        const int a = e < t1 ? 0 : e < t2 ? 1 : 2;
        const int64_t c = e - (a == 0 ? 0 : a == 1 ? t1 : t2);
        const int d = (int)(c % g.D), dist = (int)(c / g.D);
        float *dR = a == 0 ? drt : a == 1 ? drh : drw;
        if (!dR)
            continue;
        const int64_t base = a == 0 ? 0 : a == 1 ? o1 : o2;
        double acc = 0;
        int hit = 0;
        for (int qc = 0; qc < g.qthw[a]; qc++)
            for (int kc = 0; kc < g.kthw[a]; kc++) {
                if (rel_dist(qc, g.qthw[a], kc, g.kthw[a]) != dist)
                    continue;
                hit = 1;
                for (int pc = 0; pc < parts; pc++)
                    acc += pa[pc * cells + base + ((int64_t)qc * g.kthw[a] + kc) * g.D + d];
            }
        if (hit)
            dR[(int64_t)dist * g.D + d] += (float)acc;
    }
}

extern "C" int vt_cuk_mvit_rel_parts(int n, int heads, const vt_cuk_mvgeo *g) {
    int64_t off[4];
    const int64_t cells = rel_cells(g, off);
    int64_t parts = ((int64_t)n * heads * (g->Lq - 1) + 4095) / 4096;
    if (parts > 64)
        parts = 64;
    if (cells > 0 && parts * cells > ((int64_t)1 << 22))
        parts = ((int64_t)1 << 22) / cells;
    return (int)(parts < 1 ? 1 : parts);
}
extern "C" void vt_cuk_mvit_rel_grad(cudaStream_t st, vt_cuk_dt dt, float *drh, float *drw,
                                     float *drt, const float *arow, const void *q, int n,
                                     int heads, const vt_cuk_mvgeo *g, double *partials) {
    if (!g->rel || (!drh && !drw && !drt) || n <= 0 || g->Lq <= 1)
        return;
    int64_t off[4];
    const int64_t cells = rel_cells(g, off);
    const int parts = vt_cuk_mvit_rel_parts(n, heads, g);
    VT_DT(dt, k_rel_part<A><<<vt_blocks(parts * cells), VT_THREADS, 0, st>>>(
                  partials, arow, (const A *)q, (int64_t)n * heads, *g, parts, off[1], off[2],
                  cells));
    CUDA_LAUNCH_CHECK();
    int64_t rows[3];
    for (int a = 0; a < 3; a++)
        rows[a] = 2LL * (g->qthw[a] > g->kthw[a] ? g->qthw[a] : g->kthw[a]) - 1;
    const int64_t t1 = rows[0] * g->D, t2 = t1 + rows[1] * g->D, total = t2 + rows[2] * g->D;
    k_rel_final<<<vt_blocks(total), VT_THREADS, 0, st>>>(drt, drh, drw, partials, *g, parts,
                                                         off[1], off[2], cells, t1, t2, total);
    CUDA_LAUNCH_CHECK();
}

