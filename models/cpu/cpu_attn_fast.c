/*
 * cpu_attn_fast.c: the transformer ops of backend.h for the fast cpu backend (cpu_attn.h):
 * OpenBLAS sgemm for attention's products, OpenMP across rows, clips and heads.
 * Deterministic like the rest of cpu (cpu_blocks.h): every output element is computed by
 * one thread in a fixed order, so the bits do not depend on the thread count.
 *
 * Attention works per (clip, head) on query blocks of ATT_BQ rows (flash-attention's
 * scheme, cpu_attn.c's comment): the forward holds one block's ATT_BQ x L logits, never a
 * head's L x L matrix, and keeps the log-sum-exp of each row; the backward recomputes a
 * block's probabilities from it. Scratch per task: q, k, v (and in backward dout, out, dk,
 * dv) of one head gathered contiguous (L x D each) and two ATT_BQ x L blocks, one
 * allocation through vt_backend_alloc for all threads, so the budget (and the memory
 * plan's scratch_bytes, vt_cpu_attn_scratch_bound) sees it.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "models/cpu/cpu_attn.h"
#include "models/cpu/cpu_blocks.h"

#define ATT_BQ 64 /* query rows per block: 64 x L floats of logits (400 KB at L = 1568) */

/* Threads an attention op runs on (at most CPU_MAX_BLOCKS, the bound's count, and no more
 * than its tasks), and its scratch, one allocation through the budget (the memory plan's
 * scratch_bytes covers it) cut into one slice of `per` floats a thread. */
static int att_threads(const vt_backend *be, int tasks, int64_t work) {
    return work > CPU_GEMM_PAR_MIN ? VT_MAX(1, VT_MIN(VT_MIN(be->threads, CPU_MAX_BLOCKS), tasks)) : 1;
}

int64_t vt_cpu_attn_scratch_bound(int L, int D) {
    return (int64_t)CPU_MAX_BLOCKS * ((int64_t)8 * L * D + (int64_t)2 * VT_MIN(ATT_BQ, L) * L) *
           (int64_t)sizeof(float);
}

void vt_fast_layernorm_forward(vt_backend *be, float *out, float *mean, float *invstd,
                               const float *x, const float *gamma, const float *beta,
                               int64_t rows, int c, float eps) {
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (rows * c > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        double s = 0, ss = 0;
        for (int j = 0; j < c; j++)
            s += xr[j];
        double mu = s / c;
        for (int j = 0; j < c; j++)
            ss += (xr[j] - mu) * (xr[j] - mu);
        float is = (float)(1.0 / sqrt(ss / c + (double)eps)), m = (float)mu;
        mean[r] = m;
        invstd[r] = is;
        for (int j = 0; j < c; j++)
            out[r * c + j] = (xr[j] - m) * is * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
    }
}

void vt_fast_layernorm_backward(vt_backend *be, float *din, float *dgamma, float *dbeta,
                                const float *dout, const float *x, const float *mean,
                                const float *invstd, const float *gamma, int64_t rows, int c) {
    if (dgamma || dbeta) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (rows * c > CPU_PAR_MIN)
        for (int j = 0; j < c; j++) {
            double sg = 0, sb = 0;
            for (int64_t r = 0; r < rows; r++) {
                float d = dout[r * c + j];
                sg += (double)d * ((x[r * c + j] - mean[r]) * invstd[r]);
                sb += d;
            }
            if (dgamma)
                dgamma[j] += (float)sg;
            if (dbeta)
                dbeta[j] += (float)sb;
        }
    }
    if (!din)
        return;
#pragma omp parallel for num_threads(be->threads) schedule(guided) if (rows * c > CPU_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        double sg = 0, sgx = 0;
        const float m = mean[r], is = invstd[r];
        for (int j = 0; j < c; j++) {
            float g = dout[r * c + j] * (gamma ? gamma[j] : 1.0f);
            sg += g;
            sgx += (double)g * ((x[r * c + j] - m) * is);
        }
        const float a = (float)(sg / c), b = (float)(sgx / c);
        for (int j = 0; j < c; j++) {
            float g = dout[r * c + j] * (gamma ? gamma[j] : 1.0f);
            din[r * c + j] = is * (g - a - (x[r * c + j] - m) * is * b);
        }
    }
}

void vt_fast_gelu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        out[i] = 0.5f * in[i] * (1.0f + erff(in[i] * (float)M_SQRT1_2));
}
void vt_fast_gelu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                           int64_t n) {
#pragma omp parallel for simd num_threads(be->threads) schedule(guided, 4096) if (n > CPU_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        float x = in[i];
        float cdf = 0.5f * (1.0f + erff(x * (float)M_SQRT1_2));
        float pdf = expf(-0.5f * x * x) * 0.39894228040143267794f;
        din[i] = dout[i] * (cdf + x * pdf);
    }
}

/* Copy part w (0 q, 1 k, 2 v) of head h of clip ni out of qkv (N, L, 3, H, D) into
 * dst (L, D), or (back = 1) dst into that part. */
static void att_gather(float *dst, const float *qkv, int ni, int w, int h, int L, int H, int D) {
    for (int l = 0; l < L; l++)
        memcpy(dst + (int64_t)l * D, qkv + ((((int64_t)ni * L + l) * 3 + w) * H + h) * D,
               (size_t)D * sizeof(float));
}
static void att_scatter(float *qkv, const float *src, int ni, int w, int h, int L, int H, int D) {
    for (int l = 0; l < L; l++)
        memcpy(qkv + ((((int64_t)ni * L + l) * 3 + w) * H + h) * D, src + (int64_t)l * D,
               (size_t)D * sizeof(float));
}
/* The same for (N, L, H, D) arrays (out, dout): stride H*D per token. */
static void att_gather_o(float *dst, const float *o, int ni, int h, int L, int H, int D) {
    for (int l = 0; l < L; l++)
        memcpy(dst + (int64_t)l * D, o + (((int64_t)ni * L + l) * H + h) * D,
               (size_t)D * sizeof(float));
}

void vt_fast_attention_forward(vt_backend *be, float *out, float *lse, const float *qkv, int n,
                               int L, int H, int D) {
    const float scale = 1.0f / sqrtf((float)D);
    const int nt = att_threads(be, n * H, (int64_t)n * H * L * L * D);
    const int64_t bqm = VT_MIN(ATT_BQ, L); /* a block's rows: at most L */
    const int64_t per = (int64_t)L * D * 3 + bqm * L + bqm * D;
    float *scr = vt_backend_alloc_x(be, (size_t)(nt * per) * sizeof(float), "attention scratch");
#pragma omp parallel num_threads(nt)
    {
        float *q = scr + omp_get_thread_num() * per, *k = q + (int64_t)L * D,
              *v = k + (int64_t)L * D;
        float *s = v + (int64_t)L * D;
        float *o = s + bqm * L;
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n * H; task++) {
            const int ni = task / H, h = task % H;
            att_gather(q, qkv, ni, 0, h, L, H, D);
            att_gather(k, qkv, ni, 1, h, L, H, D);
            att_gather(v, qkv, ni, 2, h, L, H, D);
            for (int i0 = 0; i0 < L; i0 += ATT_BQ) {
                const int bq = VT_MIN(ATT_BQ, L - i0);
                /* s (bq, L) = q_b k^T * scale */
                sgemm(0, 1, bq, L, D, scale, q + (int64_t)i0 * D, D, k, D, 0.0f, s, L);
                for (int i = 0; i < bq; i++) {
                    float *sr = s + (int64_t)i * L, m = -INFINITY;
                    for (int j = 0; j < L; j++)
                        m = sr[j] > m ? sr[j] : m;
                    double z = 0;
                    for (int j = 0; j < L; j++) {
                        sr[j] = expf(sr[j] - m);
                        z += sr[j];
                    }
                    const float inv = (float)(1.0 / z);
                    for (int j = 0; j < L; j++)
                        sr[j] *= inv;
                    lse[((int64_t)ni * H + h) * L + i0 + i] = m + (float)log(z);
                }
                sgemm(0, 0, bq, D, L, 1.0f, s, L, v, D, 0.0f, o, D);
                for (int i = 0; i < bq; i++)
                    memcpy(out + (((int64_t)ni * L + i0 + i) * H + h) * D, o + (int64_t)i * D,
                           (size_t)D * sizeof(float));
            }
        }
    }
    vt_backend_free_ptr(be, scr);
}

void vt_fast_attention_backward(vt_backend *be, float *dqkv, const float *dout,
                                const float *qkv, const float *out, const float *lse, int n,
                                int L, int H, int D) {
    const float scale = 1.0f / sqrtf((float)D);
    const int nt = att_threads(be, n * H, (int64_t)n * H * L * L * D);
    const int64_t bqm = VT_MIN(ATT_BQ, L); /* a block's rows: at most L */
    const int64_t per = (int64_t)L * D * 8 + bqm * L * 2;
    float *scr = vt_backend_alloc_x(be, (size_t)(nt * per) * sizeof(float), "attention scratch");
#pragma omp parallel num_threads(nt)
    {
        /* q k v do o dq dk dv: eight L x D arrays; p, dp: two ATT_BQ x L blocks */
        float *buf = scr + omp_get_thread_num() * per;
        float *q = buf, *k = q + (int64_t)L * D, *v = k + (int64_t)L * D;
        float *dO = v + (int64_t)L * D, *o = dO + (int64_t)L * D, *dq = o + (int64_t)L * D;
        float *dk = dq + (int64_t)L * D, *dv = dk + (int64_t)L * D;
        float *p = buf + (int64_t)L * D * 8, *dp = p + bqm * L;
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < n * H; task++) {
            const int ni = task / H, h = task % H;
            att_gather(q, qkv, ni, 0, h, L, H, D);
            att_gather(k, qkv, ni, 1, h, L, H, D);
            att_gather(v, qkv, ni, 2, h, L, H, D);
            att_gather_o(dO, dout, ni, h, L, H, D);
            att_gather_o(o, out, ni, h, L, H, D);
            memset(dk, 0, (size_t)L * D * 2 * sizeof(float)); /* dk and dv */
            for (int i0 = 0; i0 < L; i0 += ATT_BQ) {
                const int bq = VT_MIN(ATT_BQ, L - i0);
                sgemm(0, 1, bq, L, D, scale, q + (int64_t)i0 * D, D, k, D, 0.0f, p, L);
                sgemm(0, 1, bq, L, D, 1.0f, dO + (int64_t)i0 * D, D, v, D, 0.0f, dp, L);
                for (int i = 0; i < bq; i++) {
                    const float ls = lse[((int64_t)ni * H + h) * L + i0 + i];
                    double delta = 0;
                    for (int d = 0; d < D; d++)
                        delta += (double)dO[(int64_t)(i0 + i) * D + d] * o[(int64_t)(i0 + i) * D + d];
                    float *pr = p + (int64_t)i * L, *dpr = dp + (int64_t)i * L;
                    for (int j = 0; j < L; j++) {
                        pr[j] = expf(pr[j] - ls);
                        dpr[j] = pr[j] * (dpr[j] - (float)delta) * scale; /* ds / sqrt(D) */
                    }
                }
                /* dv += p^T dO_b; dq_b = ds k; dk += ds^T q_b */
                sgemm(1, 0, L, D, bq, 1.0f, p, L, dO + (int64_t)i0 * D, D, 1.0f, dv, D);
                sgemm(0, 0, bq, D, L, 1.0f, dp, L, k, D, 0.0f, dq + (int64_t)i0 * D, D);
                sgemm(1, 0, L, D, bq, 1.0f, dp, L, q + (int64_t)i0 * D, D, 1.0f, dk, D);
            }
            att_scatter(dqkv, dq, ni, 0, h, L, H, D);
            att_scatter(dqkv, dk, ni, 1, h, L, H, D);
            att_scatter(dqkv, dv, ni, 2, h, L, H, D);
        }
    }
    vt_backend_free_ptr(be, scr);
}

void vt_fast_transpose(vt_backend *be, float *out, const float *in, int n, int a, int b) {
    const int64_t tot = (int64_t)n * a * b;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (tot > CPU_PAR_MIN)
    for (int64_t nj = 0; nj < (int64_t)n * b; nj++) {
        const int64_t ni = nj / b, j = nj % b;
        for (int i = 0; i < a; i++)
            out[nj * a + i] = in[(ni * a + i) * b + j];
    }
}

void vt_fast_token_mean_forward(vt_backend *be, float *out, const float *in, int n, int L, int c) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((int64_t)n * L * c > CPU_PAR_MIN)
    for (int64_t nj = 0; nj < (int64_t)n * c; nj++) {
        const int64_t ni = nj / c, j = nj % c;
        double a = 0;
        for (int l = 0; l < L; l++)
            a += in[(ni * L + l) * c + j];
        out[nj] = (float)(a / L);
    }
}
void vt_fast_token_mean_backward(vt_backend *be, float *din, const float *dout, int n, int L,
                                 int c) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if ((int64_t)n * L * c > CPU_PAR_MIN)
    for (int64_t nl = 0; nl < (int64_t)n * L; nl++)
        for (int j = 0; j < c; j++)
            din[nl * c + j] = (float)((double)dout[nl / L * c + j] / L);
}

void vt_fast_add_bcast(vt_backend *be, float *out, const float *in, const float *pos, int n,
                       int64_t per) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * per > CPU_PAR_MIN)
    for (int64_t i = 0; i < n * per; i++)
        out[i] = in[i] + pos[i % per];
}
void vt_fast_add_bcast_backward(vt_backend *be, float *dpos, const float *dout, int n,
                                int64_t per) {
    if (n == 0)
        return;
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * per > CPU_PAR_MIN)
    for (int64_t i = 0; i < per; i++) {
        double a = 0;
        for (int ni = 0; ni < n; ni++)
            a += dout[ni * per + i];
        dpos[i] += (float)a;
    }
}

void vt_fast_scale_rows(vt_backend *be, float *out, const float *in, const float *scale, int n,
                        int64_t per) {
#pragma omp parallel for num_threads(be->threads) schedule(static) if (n * per > CPU_PAR_MIN)
    for (int64_t i = 0; i < n * per; i++)
        out[i] = in[i] * scale[i / per];
}
