/*
 * kernels_vec_ops.cuh: the memory-bound ops as functors for kernels_vec.cuh's bodies:
 * element-wise (kernels_elem.cu), the fused batch-norm tail and the residual's ReLU
 * backward (kernels_fused.cu), batch-norm apply and its backward apply (kernels_bn.cu),
 * the bias adds and fills (kernels_bias.cu) and the optimizer updates (kernels_optim.cu).
 * Each has one(i) (rows ops: one_rc(i, channel)), which both the scalar and the vector
 * kernels compute element i with, vec(i) for the group at i, arrays() for vt_vec_choose,
 * and take_gate() (the optimizers read the step's gradient gate first; kernels_optim.cu).
 * The formulas are the kernels' of before, moved here unchanged: cpu-ref's arithmetic
 * (kernels_impl.cuh's rules). It must never give vec() a formula of its own: vec() loads,
 * calls the per-element function one() calls, and stores.
 */
#ifndef VT_CUDA_KERNELS_VEC_OPS_CUH
#define VT_CUDA_KERNELS_VEC_OPS_CUH

#include <stdint.h>

#include <cuda_bf16.h>

#include "models/cuda/kernels_vec.cuh"
#include "models/grad_gate.h"
#include "models/relu_rule.h"

/* Each element of a group, unrolled on the GPU so the group stays in registers. */
#ifdef __CUDA_ARCH__
#define VT_FOR8(e) _Pragma("unroll") for (int e = 0; e < VT_VEC_W; e++)
#else
#define VT_FOR8(e) for (int e = 0; e < VT_VEC_W; e++)
#endif

/* Element sizes for arrays(). */
template <typename T> static inline int vt_esz(const T *) { return (int)sizeof(T); }

/* Ops without a gradient gate. */
struct vt_nogate {
    VT_HD bool take_gate() { return true; }
};

/* ------------------------------------------------------------------ element-wise */

struct vt_op_fill : vt_nogate {
    float *x;
    float v;
    int arrays(const void **p, int *e) const { return p[0] = x, e[0] = 4, 1; }
    VT_HD void one(int64_t i) const { vt_st1(x, i, v); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        VT_FOR8(e) o[e] = v;
        vt_st8(x + i, o);
    }
};
struct vt_op_scale : vt_nogate {
    float *x;
    float a;
    int arrays(const void **p, int *e) const { return p[0] = x, e[0] = 4, 1; }
    VT_HD void one(int64_t i) const { vt_st1(x, i, VT_FMUL(vt_ld1(x, i), a)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_ld8(x + i, o);
        VT_FOR8(e) o[e] = VT_FMUL(o[e], a);
        vt_st8(x + i, o);
    }
};
/* y += a * x */
struct vt_op_axpy : vt_nogate {
    float *y;
    const float *x;
    float a;
    int arrays(const void **p, int *e) const { return p[0] = y, p[1] = x, e[0] = e[1] = 4, 2; }
    VT_HD static float f(float y, float a, float x) { return VT_FADD(y, VT_FMUL(a, x)); }
    VT_HD void one(int64_t i) const { vt_st1(y, i, f(vt_ld1(y, i), a, vt_ld1(x, i))); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], u[VT_VEC_W];
        vt_ld8(y + i, o);
        vt_ld8(x + i, u);
        VT_FOR8(e) o[e] = f(o[e], a, u[e]);
        vt_st8(y + i, o);
    }
};
/* out = a + b, in the activation type */
template <typename A> struct vt_op_add : vt_nogate {
    A *out;
    const A *a, *b;
    int arrays(const void **p, int *e) const {
        p[0] = out, p[1] = a, p[2] = b;
        e[0] = e[1] = e[2] = vt_esz(out);
        return 3;
    }
    VT_HD void one(int64_t i) const { vt_st1(out, i, VT_FADD(vt_ld1(a, i), vt_ld1(b, i))); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], u[VT_VEC_W];
        vt_ld8(a + i, o);
        vt_ld8(b + i, u);
        VT_FOR8(e) o[e] = VT_FADD(o[e], u[e]);
        vt_st8(out + i, o);
    }
};
/* dst = src between float and the activation type (rounded to bf16, or widened exactly) */
template <typename D, typename S> struct vt_op_convert : vt_nogate {
    D *dst;
    const S *src;
    int arrays(const void **p, int *e) const {
        return p[0] = dst, p[1] = src, e[0] = vt_esz(dst), e[1] = vt_esz(src), 2;
    }
    VT_HD void one(int64_t i) const { vt_st1(dst, i, vt_ld1(src, i)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_ld8(src + i, o);
        vt_st8(dst + i, o);
    }
};
/* dst (float) += src (activation type) */
template <typename A> struct vt_op_acc_from : vt_nogate {
    float *dst;
    const A *src;
    int arrays(const void **p, int *e) const {
        return p[0] = dst, p[1] = src, e[0] = 4, e[1] = vt_esz(src), 2;
    }
    VT_HD void one(int64_t i) const { vt_st1(dst, i, VT_FADD(vt_ld1(dst, i), vt_ld1(src, i))); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], u[VT_VEC_W];
        vt_ld8(dst + i, o);
        vt_ld8(src + i, u);
        VT_FOR8(e) o[e] = VT_FADD(o[e], u[e]);
        vt_st8(dst + i, o);
    }
};
/* out = relu(in): a NaN passes (relu_rule.h) */
template <typename A> struct vt_op_relu_fwd : vt_nogate {
    A *out;
    const A *in;
    int arrays(const void **p, int *e) const {
        return p[0] = out, p[1] = in, e[0] = e[1] = vt_esz(out), 2;
    }
    VT_HD void one(int64_t i) const { vt_st1(out, i, vt_relu(vt_ld1(in, i))); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_ld8(in + i, o);
        VT_FOR8(e) o[e] = vt_relu(o[e]);
        vt_st8(out + i, o);
    }
};
/* din = relu's gradient at its output out (relu_rule.h); skip (may be NULL): the same
 * value stored again (kernels_fused.cu relu_backward_skip) */
template <typename A> struct vt_op_relu_bwd : vt_nogate {
    A *din, *skip;
    const A *dout, *out;
    int arrays(const void **p, int *e) const {
        p[0] = din, p[1] = skip, p[2] = dout, p[3] = out;
        e[0] = e[1] = e[2] = e[3] = vt_esz(din);
        return 4;
    }
    VT_HD void one(int64_t i) const {
        const float v = vt_relu_grad(vt_ld1(out, i), vt_ld1(dout, i));
        vt_st1(din, i, v);
        if (skip)
            vt_st1(skip, i, v);
    }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], d[VT_VEC_W];
        vt_ld8(out + i, o);
        vt_ld8(dout + i, d);
        VT_FOR8(e) o[e] = vt_relu_grad(o[e], d[e]);
        vt_st8(din + i, o);
        if (skip)
            vt_st8(skip + i, o);
    }
};

/* ------------------------------------------------------------------ bias */

/* out[i] += b[i % f] (float; a linear layer's bias on (N, F)) */
struct vt_op_add_bias_rows : vt_nogate {
    float *out;
    const float *b;
    int f;
    int arrays(const void **p, int *e) const { return p[0] = out, e[0] = 4, 1; }
    VT_HD void one(int64_t i) const { vt_st1(out, i, VT_FADD(vt_ld1(out, i), vt_ld1(b, i % f))); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_ld8(out + i, o);
        int ci = (int)(i - vt_div(i, f) * f);
        VT_FOR8(e) {
            o[e] = VT_FADD(o[e], vt_ld1(b, ci));
            if (++ci == f)
                ci = 0;
        }
        vt_st8(out + i, o);
    }
};
/* out[row, j] = b[row % c] rounded to A (the bias a conv or GEMM accumulates onto) */
template <typename A> struct vt_op_fill_bias : vt_nogate {
    A *out;
    const float *b;
    int c;
    int64_t s;
    int arrays(const void **p, int *e) const { return p[0] = out, e[0] = vt_esz(out), 1; }
    VT_HD void one_rc(int64_t i, int ci) const { vt_st1(out, i, vt_ld1(b, ci)); }
    VT_HD void one(int64_t i) const { one_rc(i, (int)((i / s) % c)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_rc r = vt_rc_at(i, s, c);
        float v = vt_ld1(b, r.ci);
        VT_FOR8(e) {
            o[e] = v;
            if (vt_rc_next(&r, s, c))
                v = vt_ld1(b, r.ci);
        }
        vt_st8(out + i, o);
    }
};

/* ------------------------------------------------------------------ batch norm */

/* A channel's parameters of bn_apply: out = g*(x-m)*is + b formed in double, rounded once
 * (cpu-ref's order; kernels_bn.cu). */
struct vt_bn_par {
    double g, b, m;
    float is;
};
struct vt_bn_base {
    const float *k, *mean, *invstd, *gamma, *beta;
    int c;
    int64_t s;
    VT_HD vt_bn_par par(int ci) const {
        vt_bn_par p;
        p.g = gamma ? vt_ld1(gamma, ci) : 1.0;
        p.b = beta ? vt_ld1(beta, ci) : 0.0;
        p.m = (k ? (double)vt_ld1(k, ci) : 0.0) + (double)vt_ld1(mean, ci);
        p.is = vt_ld1(invstd, ci);
        return p;
    }
    VT_HD static float apply(const vt_bn_par &p, float x) {
        return VT_DF(p.g * ((double)x - p.m) * p.is + p.b);
    }
};
template <typename A> struct vt_op_bn_apply : vt_nogate, vt_bn_base {
    A *out;
    const A *x;
    int arrays(const void **p, int *e) const {
        return p[0] = out, p[1] = x, e[0] = e[1] = vt_esz(out), 2;
    }
    VT_HD void one_rc(int64_t i, int ci) const { vt_st1(out, i, apply(par(ci), vt_ld1(x, i))); }
    VT_HD void one(int64_t i) const { one_rc(i, (int)((i / s) % c)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W];
        vt_ld8(x + i, o);
        vt_rc r = vt_rc_at(i, s, c);
        if (r.j + VT_VEC_W <= s) { /* the group in one row: one channel */
            const vt_bn_par p = par(r.ci);
            VT_FOR8(e) o[e] = apply(p, o[e]);
        } else {
            VT_FOR8(e) {
                o[e] = apply(par(r.ci), o[e]);
                vt_rc_next(&r, s, c);
            }
        }
        vt_st8(out + i, o);
    }
};
/* out = relu(bn_apply(x) [+ res]) bit for bit the three kernels it replaces
 * (kernels_fused.cu): rounded to A after the apply and after the sum */
template <typename A> struct vt_op_bn_apply_relu : vt_nogate, vt_bn_base {
    A *out;
    const A *x, *res;
    int arrays(const void **p, int *e) const {
        p[0] = out, p[1] = x, p[2] = res;
        e[0] = e[1] = e[2] = vt_esz(out);
        return 3;
    }
    VT_HD float f(const vt_bn_par &p, float xv, float rv) const {
        float v = vt_as_stored(out, apply(p, xv));
        if (res)
            v = vt_as_stored(out, VT_FADD(v, rv));
        return vt_relu(v); /* relu_forward's rule (relu_rule.h): a NaN passes */
    }
    VT_HD void one_rc(int64_t i, int ci) const {
        vt_st1(out, i, f(par(ci), vt_ld1(x, i), res ? vt_ld1(res, i) : 0.0f));
    }
    VT_HD void one(int64_t i) const { one_rc(i, (int)((i / s) % c)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], u[VT_VEC_W];
        vt_ld8(x + i, o);
        if (res)
            vt_ld8(res + i, u);
        else
            VT_FOR8(e) u[e] = 0.0f;
        vt_rc r = vt_rc_at(i, s, c);
        if (r.j + VT_VEC_W <= s) { /* the group in one row: one channel */
            const vt_bn_par p = par(r.ci);
            VT_FOR8(e) o[e] = f(p, o[e], u[e]);
        } else {
            VT_FOR8(e) {
                o[e] = f(par(r.ci), o[e], u[e]);
                vt_rc_next(&r, s, c);
            }
        }
        vt_st8(out + i, o);
    }
};
/* din = g*is*(dy - mean(dy) - xhat*mean(dy*xhat)), in double as cpu-ref (kernels_bn.cu) */
struct vt_bn_bpar {
    double g, mdy, mdyx, m;
    float is;
};
template <typename A> struct vt_op_bn_bwd_apply : vt_nogate {
    A *din;
    const A *dy, *x;
    const float *k, *mean, *invstd, *gamma, *sum_dy, *sum_dy_xhat;
    int64_t count;
    int c;
    int64_t s;
    int arrays(const void **p, int *e) const {
        p[0] = din, p[1] = dy, p[2] = x;
        e[0] = e[1] = e[2] = vt_esz(din);
        return 3;
    }
    VT_HD vt_bn_bpar par(int ci) const {
        vt_bn_bpar p;
        p.g = gamma ? vt_ld1(gamma, ci) : 1.0;
        p.mdy = (double)vt_ld1(sum_dy, ci) / (double)count;
        p.mdyx = (double)vt_ld1(sum_dy_xhat, ci) / (double)count;
        p.m = (k ? (double)vt_ld1(k, ci) : 0.0) + (double)vt_ld1(mean, ci);
        p.is = vt_ld1(invstd, ci);
        return p;
    }
    VT_HD static float f(const vt_bn_bpar &p, float dyv, float xv) {
        const double xhat = ((double)xv - p.m) * p.is;
        return VT_DF(p.g * p.is * ((double)dyv - p.mdy - xhat * p.mdyx));
    }
    VT_HD void one_rc(int64_t i, int ci) const {
        vt_st1(din, i, f(par(ci), vt_ld1(dy, i), vt_ld1(x, i)));
    }
    VT_HD void one(int64_t i) const { one_rc(i, (int)((i / s) % c)); }
    VT_HD void vec(int64_t i) const {
        float o[VT_VEC_W], u[VT_VEC_W];
        vt_ld8(dy + i, o);
        vt_ld8(x + i, u);
        vt_rc r = vt_rc_at(i, s, c);
        if (r.j + VT_VEC_W <= s) { /* the group in one row: one channel */
            const vt_bn_bpar p = par(r.ci);
            VT_FOR8(e) o[e] = f(p, o[e], u[e]);
        } else {
            VT_FOR8(e) {
                o[e] = f(par(r.ci), o[e], u[e]);
                vt_rc_next(&r, s, c);
            }
        }
        vt_st8(din + i, o);
    }
};

/* ------------------------------------------------------------------ optimizers */

/* The step's gradient gate (backend.h; NULL: none): a skipped step returns before any
 * element; a clipping one reads g * (float)coef, the product the scale kernel would have
 * left in g (never contracted into what follows). take_gate() reads it once per thread. */
struct vt_gated {
    const vt_grad_gate *gate;
    bool clip_;
    float c_;
    VT_HD bool take_gate() {
        if (gate && gate->skip)
            return false;
        clip_ = gate && gate->coef < 1.0;
        c_ = clip_ ? VT_D2F(gate->coef) : 1.0f;
        return true;
    }
    VT_HD float gg(float g) const { return clip_ ? VT_FMUL(g, c_) : g; }
};
/* torch.optim.SGD as cpu-ref's ref_sgd_update, unfused float operations. buf is read and
 * written only with momentum (it may be NULL without). */
struct vt_op_sgd : vt_gated {
    float *p, *buf;
    const float *g;
    float lr, momentum, dampening, wd;
    int nesterov, first_step;
    int arrays(const void **q, int *e) const {
        q[0] = p, q[1] = g, q[2] = momentum != 0 ? buf : NULL;
        e[0] = e[1] = e[2] = 4;
        return 3;
    }
    /* pi, bi: p and buf of one element (bi unread at the first step), gi: the gradient */
    VT_HD void f(float &pi, float &bi, float gi) const {
        float d = gg(gi);
        if (wd != 0)
            d = VT_FADD(d, VT_FMUL(wd, pi));
        if (momentum != 0) {
            float b = first_step ? d
                                 : VT_FADD(VT_FMUL(momentum, bi), VT_FMUL(1.0f - dampening, d));
            bi = b;
            d = nesterov ? VT_FADD(d, VT_FMUL(momentum, b)) : b;
        }
        pi = VT_FSUB(pi, VT_FMUL(lr, d));
    }
    VT_HD void one(int64_t i) const {
        float pi = vt_ld1(p, i), bi = momentum != 0 && !first_step ? vt_ld1(buf, i) : 0.0f;
        f(pi, bi, vt_ld1(g, i));
        if (momentum != 0)
            vt_st1(buf, i, bi);
        vt_st1(p, i, pi);
    }
    VT_HD void vec(int64_t i) const {
        float pv[VT_VEC_W], gv[VT_VEC_W], bv[VT_VEC_W];
        vt_ld8(p + i, pv);
        vt_ld8(g + i, gv);
        if (momentum != 0 && !first_step)
            vt_ld8(buf + i, bv);
        else
            VT_FOR8(e) bv[e] = 0.0f;
        VT_FOR8(e) f(pv[e], bv[e], gv[e]);
        if (momentum != 0)
            vt_st8(buf + i, bv);
        vt_st8(p + i, pv);
    }
};
/* torch.optim.RMSprop as cpu-ref; buf only with momentum > 0 */
struct vt_op_rmsprop : vt_gated {
    float *p, *sq, *buf;
    const float *g;
    float lr, alpha, eps, wd, momentum;
    int arrays(const void **q, int *e) const {
        q[0] = p, q[1] = g, q[2] = sq, q[3] = momentum > 0 ? buf : NULL;
        e[0] = e[1] = e[2] = e[3] = 4;
        return 4;
    }
    VT_HD void f(float &pi, float &si, float &bi, float gi) const {
        float d = gg(gi);
        if (wd != 0)
            d = VT_FADD(d, VT_FMUL(wd, pi));
        /* cpu-ref: alpha * sq + (1 - alpha) * d * d, i.e. ((1-alpha)*d)*d */
        si = VT_FADD(VT_FMUL(alpha, si), VT_FMUL(VT_FMUL(1.0f - alpha, d), d));
        float avg = VT_FADD(VT_FSQRT(si), eps);
        if (momentum > 0) {
            bi = VT_FADD(VT_FMUL(momentum, bi), VT_FDIV(d, avg));
            pi = VT_FSUB(pi, VT_FMUL(lr, bi));
        } else {
            pi = VT_FSUB(pi, VT_FMUL(lr, VT_FDIV(d, avg)));
        }
    }
    VT_HD void one(int64_t i) const {
        float pi = vt_ld1(p, i), si = vt_ld1(sq, i), bi = momentum > 0 ? vt_ld1(buf, i) : 0.0f;
        f(pi, si, bi, vt_ld1(g, i));
        vt_st1(sq, i, si);
        if (momentum > 0)
            vt_st1(buf, i, bi);
        vt_st1(p, i, pi);
    }
    VT_HD void vec(int64_t i) const {
        float pv[VT_VEC_W], gv[VT_VEC_W], sv[VT_VEC_W], bv[VT_VEC_W];
        vt_ld8(p + i, pv);
        vt_ld8(g + i, gv);
        vt_ld8(sq + i, sv);
        if (momentum > 0)
            vt_ld8(buf + i, bv);
        else
            VT_FOR8(e) bv[e] = 0.0f;
        VT_FOR8(e) f(pv[e], sv[e], bv[e], gv[e]);
        vt_st8(sq + i, sv);
        if (momentum > 0)
            vt_st8(buf + i, bv);
        vt_st8(p + i, pv);
    }
};
/* torch.optim.AdamW as cpu-ref: decay = 1 - lr*wd, step_size and bc2_sqrt from the step */
struct vt_op_adamw : vt_gated {
    float *p, *m, *v;
    const float *g;
    float decay, beta1, beta2, eps, step_size, bc2_sqrt;
    int arrays(const void **q, int *e) const {
        q[0] = p, q[1] = g, q[2] = m, q[3] = v;
        e[0] = e[1] = e[2] = e[3] = 4;
        return 4;
    }
    VT_HD void f(float &pi, float &mi, float &vi, float gr) const {
        const float gi = gg(gr);
        float pn = VT_FMUL(pi, decay);
        mi = VT_FADD(VT_FMUL(beta1, mi), VT_FMUL(1.0f - beta1, gi));
        /* cpu-ref: beta2 * v + (1 - beta2) * g * g, i.e. ((1-beta2)*g)*g */
        vi = VT_FADD(VT_FMUL(beta2, vi), VT_FMUL(VT_FMUL(1.0f - beta2, gi), gi));
        float denom = VT_FADD(VT_FDIV(VT_FSQRT(vi), bc2_sqrt), eps);
        pi = VT_FSUB(pn, VT_FMUL(step_size, VT_FDIV(mi, denom)));
    }
    VT_HD void one(int64_t i) const {
        float pi = vt_ld1(p, i), mi = vt_ld1(m, i), vi = vt_ld1(v, i);
        f(pi, mi, vi, vt_ld1(g, i));
        vt_st1(m, i, mi);
        vt_st1(v, i, vi);
        vt_st1(p, i, pi);
    }
    VT_HD void vec(int64_t i) const {
        float pv[VT_VEC_W], gv[VT_VEC_W], mv[VT_VEC_W], vv[VT_VEC_W];
        vt_ld8(p + i, pv);
        vt_ld8(g + i, gv);
        vt_ld8(m + i, mv);
        vt_ld8(v + i, vv);
        VT_FOR8(e) f(pv[e], mv[e], vv[e], gv[e]);
        vt_st8(m + i, mv);
        vt_st8(v + i, vv);
        vt_st8(p + i, pv);
    }
};

#endif
