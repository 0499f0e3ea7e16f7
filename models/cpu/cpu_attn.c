/*
 * cpu_attn.c: the transformer ops of backend.h as plain loops (cpu-ref's; cpu_attn.h).
 * Every sum is formed in double and rounded once, as in cpu_ref.c; nothing here is clever.
 * FP32 only (backend.h's transformer section).
 *
 * Attention follows flash-attention's bookkeeping without its tiling: the forward keeps,
 * per query row, only the log-sum-exp of its scaled logits (lse); the backward recomputes
 * that row's probabilities p_j = exp(s_j - lse) from q, k and lse, so the scratch is one
 * row of L doubles, never a head's L x L matrix.
 *   forward:  s_j = q.k_j / sqrt(D); lse = log sum_j exp(s_j); out = sum_j p_j v_j
 *   backward: delta = dout.out; dp_j = dout.v_j; ds_j = p_j (dp_j - delta);
 *             dq = sum_j ds_j k_j / sqrt(D); dk_j += ds_j q / sqrt(D); dv_j += p_j dout
 */
#include "models/cpu/cpu_attn.h"

#include <math.h>
#include <string.h>

#include "base/common.h"

/* ---------------------------------------------------------------- layernorm ---- */

void vt_ref_layernorm_forward(vt_backend *be, float *out, float *mean, float *invstd,
                                  const float *x, const float *gamma, const float *beta,
                                  int64_t rows, int c, float eps) {
    (void)be;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        double s = 0, ss = 0;
        for (int j = 0; j < c; j++)
            s += xr[j];
        double mu = s / c;
        for (int j = 0; j < c; j++)
            ss += (xr[j] - mu) * (xr[j] - mu);
        double is = 1.0 / sqrt(ss / c + (double)eps);
        mean[r] = (float)mu;
        invstd[r] = (float)is;
        for (int j = 0; j < c; j++)
            out[r * c + j] = (float)((xr[j] - mu) * is * (gamma ? gamma[j] : 1.0) +
                                     (beta ? beta[j] : 0.0));
    }
}

/* din = invstd * (g - mean(g) - xhat * mean(g xhat)) with g = dout * gamma. */
void vt_ref_layernorm_backward(vt_backend *be, float *din, float *dgamma, float *dbeta,
                                   const float *dout, const float *x, const float *mean,
                                   const float *invstd, const float *gamma, int64_t rows, int c) {
    (void)be;
    for (int j = 0; j < c && (dgamma || dbeta); j++) {
        double sg = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            double xh = ((double)x[r * c + j] - mean[r]) * invstd[r];
            sg += dout[r * c + j] * xh;
            sb += dout[r * c + j];
        }
        if (dgamma)
            dgamma[j] += (float)sg;
        if (dbeta)
            dbeta[j] += (float)sb;
    }
    if (!din)
        return;
    for (int64_t r = 0; r < rows; r++) {
        double sg = 0, sgx = 0;
        for (int j = 0; j < c; j++) {
            double g = dout[r * c + j] * (gamma ? (double)gamma[j] : 1.0);
            sg += g;
            sgx += g * ((double)x[r * c + j] - mean[r]) * invstd[r];
        }
        for (int j = 0; j < c; j++) {
            double g = dout[r * c + j] * (gamma ? (double)gamma[j] : 1.0);
            double xh = ((double)x[r * c + j] - mean[r]) * invstd[r];
            din[r * c + j] = (float)(invstd[r] * (g - sg / c - xh * sgx / c));
        }
    }
}

/* ---------------------------------------------------------------- gelu ---- */

void vt_ref_gelu_forward(vt_backend *be, float *out, const float *in, int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) {
        double x = in[i];
        out[i] = (float)(0.5 * x * (1.0 + erf(x * M_SQRT1_2)));
    }
}
/* d/dx x Phi(x) = Phi(x) + x phi(x). */
void vt_ref_gelu_backward(vt_backend *be, float *din, const float *dout, const float *in,
                              int64_t n) {
    (void)be;
    for (int64_t i = 0; i < n; i++) {
        double x = in[i];
        double cdf = 0.5 * (1.0 + erf(x * M_SQRT1_2));
        double pdf = exp(-0.5 * x * x) * 0.39894228040143267794; /* 1/sqrt(2 pi) */
        din[i] = (float)(dout[i] * (cdf + x * pdf));
    }
}

/* ---------------------------------------------------------------- attention ---- */

/* Element d of q (w = 0), k (1) or v (2) of token l, head h, clip ni. */
static inline int64_t qkv_at(int ni, int l, int w, int h, int d, int L, int H, int D) {
    return ((((int64_t)ni * L + l) * 3 + w) * H + h) * D + d;
}
static inline int64_t o_at(int ni, int l, int h, int d, int L, int H, int D) {
    return (((int64_t)ni * L + l) * H + h) * D + d;
}

/* s[j] = q_i . k_j / sqrt(D) for one query row (double). */
static void ref_row_logits(double *s, const float *qkv, int ni, int i, int h, int L, int H,
                           int D) {
    double scale = 1.0 / sqrt((double)D);
    for (int j = 0; j < L; j++) {
        double a = 0;
        for (int d = 0; d < D; d++)
            a += (double)qkv[qkv_at(ni, i, 0, h, d, L, H, D)] * qkv[qkv_at(ni, j, 1, h, d, L, H, D)];
        s[j] = a * scale;
    }
}

void vt_ref_attention_forward(vt_backend *be, float *out, float *lse, const float *qkv,
                                  int n, int L, int H, int D) {
    (void)be;
    double *s = vt_malloc((size_t)VT_MAX(L, 1) * sizeof(double));
    for (int ni = 0; ni < n; ni++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++) {
                ref_row_logits(s, qkv, ni, i, h, L, H, D);
                double m = -INFINITY, z = 0;
                for (int j = 0; j < L; j++)
                    m = s[j] > m ? s[j] : m;
                for (int j = 0; j < L; j++)
                    z += exp(s[j] - m);
                double ls = m + log(z);
                lse[((int64_t)ni * H + h) * L + i] = (float)ls;
                for (int d = 0; d < D; d++) {
                    double a = 0;
                    for (int j = 0; j < L; j++)
                        a += exp(s[j] - ls) * qkv[qkv_at(ni, j, 2, h, d, L, H, D)];
                    out[o_at(ni, i, h, d, L, H, D)] = (float)a;
                }
            }
    free(s);
}

void vt_ref_attention_backward(vt_backend *be, float *dqkv, const float *dout,
                                   const float *qkv, const float *out, const float *lse, int n,
                                   int L, int H, int D) {
    (void)be;
    if (n == 0)
        return;
    memset(dqkv, 0, (size_t)n * L * 3 * H * D * sizeof(float));
    /* dk and dv gather over every query row: summed in double, rounded once at the end. */
    double *acc = vt_calloc((size_t)L * 2 * D, sizeof(double)); /* dk | dv of one head */
    double *s = vt_malloc((size_t)VT_MAX(L, 1) * sizeof(double));
    double scale = 1.0 / sqrt((double)D);
    for (int ni = 0; ni < n; ni++)
        for (int h = 0; h < H; h++) {
            memset(acc, 0, (size_t)L * 2 * D * sizeof(double));
            for (int i = 0; i < L; i++) {
                ref_row_logits(s, qkv, ni, i, h, L, H, D);
                double ls = lse[((int64_t)ni * H + h) * L + i], delta = 0;
                for (int d = 0; d < D; d++)
                    delta += (double)dout[o_at(ni, i, h, d, L, H, D)] * out[o_at(ni, i, h, d, L, H, D)];
                for (int j = 0; j < L; j++) {
                    double p = exp(s[j] - ls), dp = 0;
                    for (int d = 0; d < D; d++)
                        dp += (double)dout[o_at(ni, i, h, d, L, H, D)] *
                              qkv[qkv_at(ni, j, 2, h, d, L, H, D)];
                    s[j] = p * (dp - delta) * scale; /* ds_j / sqrt(D), in place */
                    for (int d = 0; d < D; d++) {
                        acc[(int64_t)j * 2 * D + d] +=
                            s[j] * qkv[qkv_at(ni, i, 0, h, d, L, H, D)];
                        acc[(int64_t)j * 2 * D + D + d] += p * dout[o_at(ni, i, h, d, L, H, D)];
                    }
                }
                for (int d = 0; d < D; d++) {
                    double a = 0;
                    for (int j = 0; j < L; j++)
                        a += s[j] * qkv[qkv_at(ni, j, 1, h, d, L, H, D)];
                    dqkv[qkv_at(ni, i, 0, h, d, L, H, D)] = (float)a;
                }
            }
            for (int j = 0; j < L; j++)
                for (int d = 0; d < D; d++) {
                    dqkv[qkv_at(ni, j, 1, h, d, L, H, D)] = (float)acc[(int64_t)j * 2 * D + d];
                    dqkv[qkv_at(ni, j, 2, h, d, L, H, D)] = (float)acc[(int64_t)j * 2 * D + D + d];
                }
        }
    free(s);
    free(acc);
}

/* ---------------------------------------------------------------- token plumbing ---- */

void vt_ref_transpose(vt_backend *be, float *out, const float *in, int n, int a, int b) {
    (void)be;
    for (int ni = 0; ni < n; ni++)
        for (int i = 0; i < a; i++)
            for (int j = 0; j < b; j++)
                out[((int64_t)ni * b + j) * a + i] = in[((int64_t)ni * a + i) * b + j];
}

void vt_ref_token_mean_forward(vt_backend *be, float *out, const float *in, int n, int L,
                                   int c) {
    (void)be;
    for (int ni = 0; ni < n; ni++)
        for (int j = 0; j < c; j++) {
            double a = 0;
            for (int l = 0; l < L; l++)
                a += in[((int64_t)ni * L + l) * c + j];
            out[(int64_t)ni * c + j] = (float)(a / L);
        }
}
void vt_ref_token_mean_backward(vt_backend *be, float *din, const float *dout, int n, int L,
                                    int c) {
    (void)be;
    for (int ni = 0; ni < n; ni++)
        for (int l = 0; l < L; l++)
            for (int j = 0; j < c; j++)
                din[((int64_t)ni * L + l) * c + j] = (float)((double)dout[(int64_t)ni * c + j] / L);
}

void vt_ref_add_bcast(vt_backend *be, float *out, const float *in, const float *pos, int n,
                          int64_t per) {
    (void)be;
    for (int ni = 0; ni < n; ni++)
        for (int64_t i = 0; i < per; i++)
            out[ni * per + i] = in[ni * per + i] + pos[i];
}
void vt_ref_add_bcast_backward(vt_backend *be, float *dpos, const float *dout, int n,
                                   int64_t per) {
    (void)be;
    if (n == 0)
        return;
    for (int64_t i = 0; i < per; i++) {
        double a = 0;
        for (int ni = 0; ni < n; ni++)
            a += dout[ni * per + i];
        dpos[i] += (float)a;
    }
}

void vt_ref_scale_rows(vt_backend *be, float *out, const float *in, const float *scale, int n,
                           int64_t per) {
    (void)be;
    for (int ni = 0; ni < n; ni++)
        for (int64_t i = 0; i < per; i++)
            out[ni * per + i] = in[ni * per + i] * scale[ni];
}
