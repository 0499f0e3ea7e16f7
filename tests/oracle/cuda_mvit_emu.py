#!/usr/bin/python3
"""cuda_mvit_emu.py: models/cuda/cuda_mvit.c's attention checked without a GPU.

Replays, in numpy, the host side of vt_cuda_mvit_attention_forward and _backward exactly
as written: the walk over (clip, head) pairs (mv_walk: heads batched per clip, or clips
batched per head), the query blocks, every cublasSgemmStridedBatched call with its
column-major m, n, k, pointers (as offsets), leading dimensions and strides, and the
kernels of kernels_mvit.cu with their own index arithmetic (softmax with the relative
terms and the log-sum-exp, ds with the per-coordinate row sums arow, the residual add,
dq's fix-up, the tables' gradients in two stages with their chunking), then compares out,
lse, dq, dk, dv and the three tables' gradients with torchvision's own _add_rel_pos and
MultiscaleAttention's arithmetic under PyTorch's autograd, in float64. Outputs start as
NaN, so an element no call writes shows. Cases: q grid finer than k's (MViT's pooled keys)
and coarser, with and without relative tables and residual pooling, both walks, one
block and several (the last one short), the tables' sums in one chunk and several.
Then the pooling kernels element by element (k_pool_fwd, k_pool_dx, dw's chunked
k_pool_dw_part / _final in one chunk and five; k_tmax_fwd, k_tmax_argmax and the
gathering k_tmax_bwd)
against torch's depthwise conv3d and max_pool3d under autograd (torchvision's Pool and
MViT's pool_skip), kernel 3, stride (1, 2, 2), padding 1.
  /usr/bin/python3 tests/oracle/cuda_mvit_emu.py     exit 0: every case within 1e-12
Run by tests/test_mvit_emu.c; keep it in step with cuda_mvit.c and kernels_mvit.cu.
This script must never depend on vidtrain: it is what the CUDA code is checked against.
"""
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.models.video.mvit as tvm


def gemm(ta, tb, m, n, k, alpha, A, oa, lda, sa, B, ob, ldb, sb, beta, C, oc, ldc, sc, batch):
    """cublasSgemmStridedBatched, column-major: C = alpha op(A) op(B) + beta C."""
    for b in range(batch):
        i = np.arange(m)[:, None]; p = np.arange(k)[None, :]
        opA = A[oa + b*sa + (i + p*lda if ta == 'N' else p + i*lda)]
        p2 = np.arange(k)[:, None]; j = np.arange(n)[None, :]
        opB = B[ob + b*sb + (p2 + j*ldb if tb == 'N' else j + p2*ldb)]
        idx = oc + b*sc + np.arange(m)[:, None] + np.arange(n)[None, :]*ldc
        C[idx] = alpha * (opA @ opB) + (beta * C[idx] if beta else 0)


def rel_dist(qi, qs, kj, ks):
    """backend.h's vt_mvit_rel_dist (kernels_mvit.cu's rel_dist), float32 operations."""
    f = np.float32
    qr = max(f(ks / qs), f(1)); kr = max(f(qs / ks), f(1))
    return int(f(f(qi) * qr) - f(f(f(kj) + f(1 - ks)) * kr))


class Geo:
    def __init__(s, qthw, kthw, D, rel):
        s.qthw, s.kthw, s.D, s.rel = qthw, kthw, D, rel
        s.Lq = 1 + qthw[0]*qthw[1]*qthw[2]; s.Lk = 1 + kthw[0]*kthw[1]*kthw[2]
        s.KK = sum(kthw)


def walk(n, H, Lq, Lk, D):
    C = H*D
    if n > H: return dict(U=H, B=n, u_l=Lq, u_k=Lk*D, u_o=D, b_l=H*Lq, b_k=H*Lk*D, b_o=Lq*C)
    return dict(U=n, B=H, u_l=H*Lq, u_k=H*Lk*D, u_o=Lq*C, b_l=Lq, b_k=Lk*D, b_o=D)


def q_coords(g, i):
    return [(i-1) // (g.qthw[1]*g.qthw[2]), (i-1) // g.qthw[2] % g.qthw[1], (i-1) % g.qthw[2]]


def term_axis(g, x):
    a = 0
    while a < 2 and x >= g.kthw[a]:
        x -= g.kthw[a]; a += 1
    return a, x


def table_row(g, qc, x, tabs):  # tabs: (rt, rh, rw) as (array, offset) pairs
    a, kc = term_axis(g, x)
    arr, off = tabs[a]
    o = off + rel_dist(qc[a], g.qthw[a], kc, g.kthw[a]) * g.D
    return arr[o:o + g.D]


def key_cols(g, t):
    return ((t-1) // (g.kthw[1]*g.kthw[2]), g.kthw[0] + (t-1) // g.kthw[2] % g.kthw[1],
            g.kthw[0] + g.kthw[1] + (t-1) % g.kthw[2])


def rel_row(g, i, qrow, tabs):
    qc = q_coords(g, i)
    return np.array([qrow @ table_row(g, qc, x, tabs) for x in range(g.KK)])


def add_rel(sr, rel, g):
    for t in range(1, g.Lk):
        ct, ch, cw = key_cols(g, t)
        sr[t] += rel[ch] + rel[cw] + rel[ct]


def k_softmax(s, lse, lo, q, qo, tabs, g, B, bq, i0, l_bs):
    for row in range(B*bq):
        m, i = row // bq, i0 + row % bq; qr = m*l_bs + i
        sr = s[row*g.Lk:(row+1)*g.Lk].copy()
        if g.rel and i >= 1:
            add_rel(sr, rel_row(g, i, q[qo + qr*g.D:qo + (qr+1)*g.D], tabs), g)
        mx = sr.max(); l = mx + math.log(np.exp(sr - mx).sum())
        s[row*g.Lk:(row+1)*g.Lk] = np.exp(sr - l); lse[lo + qr] = l


def k_ds(s, dpo, arow, ao, lse, lo, q, qo, tabs, g, B, bq, i0, l_bs):
    for row in range(B*bq):
        m, i = row // bq, i0 + row % bq; qr = m*l_bs + i
        sr = s[row*g.Lk:(row+1)*g.Lk].copy()
        use = g.rel and i >= 1
        if use:
            add_rel(sr, rel_row(g, i, q[qo + qr*g.D:qo + (qr+1)*g.D], tabs), g)
        p = np.exp(sr - lse[lo + qr]); s[row*g.Lk:(row+1)*g.Lk] = p
        dr = s[dpo + row*g.Lk:dpo + (row+1)*g.Lk]
        delta = p @ dr; dr = p * (dr - delta); s[dpo + row*g.Lk:dpo + (row+1)*g.Lk] = dr
        if use:
            kt, kh, kw = g.kthw
            for x in range(g.KK):
                ax, kc = term_axis(g, x)
                if ax == 0: keys = [1 + kc*kh*kw + r for r in range(kh*kw)]
                elif ax == 1: keys = [1 + (tt*kh + kc)*kw + ww for tt in range(kt) for ww in range(kw)]
                else: keys = [1 + (tt*kh + hh)*kw + kc for tt in range(kt) for hh in range(kh)]
                arow[ao + qr*g.KK + x] = dr[keys].sum()


def k_residual(out, q, n, H, g):
    for e in range(n*H*g.Lq*g.D):
        d = e % g.D; r = e // g.D; i = r % g.Lq; jh = r // g.Lq; j, h = jh // H, jh % H
        if i >= 1: out[(j*g.Lq + i)*H*g.D + h*g.D + d] += q[e]


def k_dq_fix(dq, arow, dout, tabs, n, H, g, residual):
    if not g.rel and not residual: return
    for e in range(n*H*g.Lq*g.D):
        d = e % g.D; r = e // g.D; i = r % g.Lq; jh = r // g.Lq; j, h = jh // H, jh % H
        if i < 1: continue
        v = dq[e]
        if g.rel:
            qc = q_coords(g, i)
            v += sum(arow[r*g.KK + x] * table_row(g, qc, x, tabs)[d] for x in range(g.KK))
        if residual: v += dout[(j*g.Lq + i)*H*g.D + h*g.D + d]
        dq[e] = v


def k_rel_grad(dtabs, arow, q, n, H, g, parts):
    """kernels_mvit.cu's k_rel_part and k_rel_final; dtabs: drt, drh, drw arrays."""
    off = [0]
    for a in range(3): off.append(off[a] + g.qthw[a]*g.kthw[a]*g.D)
    cells = off[3]; pa = np.full(parts*cells, np.nan); nh = n*H
    q1, q2 = g.qthw[1], g.qthw[2]
    for e in range(parts*cells):
        pc = e // cells; c = e % cells
        a = 0 if c < off[1] else 1 if c < off[2] else 2
        c -= off[a]
        d = c % g.D; kc = c // g.D % g.kthw[a]; qc = c // g.D // g.kthw[a]
        x = kc + (g.kthw[0] if a >= 1 else 0) + (g.kthw[1] if a == 2 else 0)
        per = (g.Lq - 1) // g.qthw[a]; M = nh*per
        chunk = (M + parts - 1) // parts; lo = pc*chunk; hi = min(lo + chunk, M)
        acc = 0.0
        for mi in range(lo, hi):
            jh = mi // per; rr = mi % per
            i = (1 + qc*q1*q2 + rr if a == 0 else 1 + (rr // q2*q1 + qc)*q2 + rr % q2 if a == 1
                 else 1 + rr*q2 + qc)
            row = jh*g.Lq + i
            acc += arow[row*g.KK + x] * q[row*g.D + d]
        pa[e] = acc
    rows = [2*max(g.qthw[a], g.kthw[a]) - 1 for a in range(3)]
    t1 = rows[0]*g.D; t2 = t1 + rows[1]*g.D
    for e in range(t2 + rows[2]*g.D):
        a = 0 if e < t1 else 1 if e < t2 else 2
        c = e - (0 if a == 0 else t1 if a == 1 else t2)
        d = c % g.D; dist = c // g.D
        acc = 0.0; hit = False
        for qc in range(g.qthw[a]):
            for kc in range(g.kthw[a]):
                if rel_dist(qc, g.qthw[a], kc, g.kthw[a]) != dist: continue
                hit = True
                acc += sum(pa[pc*cells + off[a] + (qc*g.kthw[a] + kc)*g.D + d] for pc in range(parts))
        if hit: dtabs[a][dist*g.D + d] += acc


def fwd(q, k, v, tabs, n, H, g, bq, residual):
    D, C = g.D, H*g.D; w = walk(n, H, g.Lq, g.Lk, D); B = w['B']; scale = 1/math.sqrt(D)
    out = np.full(n*g.Lq*C, np.nan); lse = np.full(n*H*g.Lq, np.nan); s = np.zeros(2*B*bq*g.Lk)
    for u in range(w['U']):
        qu = u*w['u_l']*D; ku = u*w['u_k']; o = u*w['u_o']; ls = u*w['u_l']
        for i0 in range(0, g.Lq, bq):
            b = min(bq, g.Lq - i0)
            gemm('T', 'N', g.Lk, b, D, scale, k, ku, D, w['b_k'], q, qu + i0*D, D, w['b_l']*D,
                 0, s, 0, g.Lk, b*g.Lk, B)
            k_softmax(s, lse, ls, q, qu, tabs, g, B, b, i0, w['b_l'])
            gemm('N', 'N', D, b, g.Lk, 1, v, ku, D, w['b_k'], s, 0, g.Lk, b*g.Lk, 0, out, o + i0*C,
                 C, w['b_o'], B)
    if residual: k_residual(out, q, n, H, g)
    return out, lse


def bwd(dout, q, k, v, tabs, lse, n, H, g, bq, residual, parts):
    D, C = g.D, H*g.D; w = walk(n, H, g.Lq, g.Lk, D); B = w['B']; scale = 1/math.sqrt(D)
    dq = np.full(q.size, np.nan); dk = np.full(k.size, np.nan); dv = np.full(v.size, np.nan)
    s = np.zeros(2*B*bq*g.Lk); dpo = B*bq*g.Lk
    arow = np.full(n*H*g.Lq*g.KK, np.nan)
    for u in range(w['U']):
        qu = u*w['u_l']*D; ku = u*w['u_k']; dO = u*w['u_o']; ls = u*w['u_l']; ar = u*w['u_l']*g.KK
        for i0 in range(0, g.Lq, bq):
            b = min(bq, g.Lq - i0); sb = b*g.Lk; lq = w['b_l']*D; acc = 1 if i0 else 0
            gemm('T', 'N', g.Lk, b, D, scale, k, ku, D, w['b_k'], q, qu + i0*D, D, lq, 0, s, 0,
                 g.Lk, sb, B)
            gemm('T', 'N', g.Lk, b, D, 1, v, ku, D, w['b_k'], dout, dO + i0*C, C, w['b_o'], 0, s,
                 dpo, g.Lk, sb, B)
            k_ds(s, dpo, arow, ar, lse, ls, q, qu, tabs, g, B, b, i0, w['b_l'])
            gemm('N', 'T', D, g.Lk, b, 1, dout, dO + i0*C, C, w['b_o'], s, 0, g.Lk, sb, acc, dv,
                 ku, D, w['b_k'], B)
            gemm('N', 'N', D, b, g.Lk, scale, k, ku, D, w['b_k'], s, dpo, g.Lk, sb, 0, dq,
                 qu + i0*D, D, lq, B)
            gemm('N', 'T', D, g.Lk, b, scale, q, qu + i0*D, D, lq, s, dpo, g.Lk, sb, acc, dk, ku,
                 D, w['b_k'], B)
    k_dq_fix(dq, arow, dout, tabs, n, H, g, residual)
    dtabs = [np.zeros((2*max(g.qthw[a], g.kthw[a]) - 1)*D) for a in range(3)]
    if g.rel: k_rel_grad(dtabs, arow, q, n, H, g, parts)
    return dq, dk, dv, dtabs


def torch_ref(q, k, v, tabs, dout, n, H, g, residual):
    """torchvision 0.14's MultiscaleAttention arithmetic after the pooling, float64."""
    D = g.D
    tq = torch.tensor(q).reshape(n, H, g.Lq, D).requires_grad_()
    tk = torch.tensor(k).reshape(n, H, g.Lk, D).requires_grad_()
    tv = torch.tensor(v).reshape(n, H, g.Lk, D).requires_grad_()
    tt = [torch.tensor(t).reshape(-1, D).requires_grad_() for t, _ in tabs]  # rt, rh, rw
    attn = torch.matmul((1.0 / math.sqrt(D)) * tq, tk.transpose(2, 3))
    if g.rel:
        attn = tvm._add_rel_pos(attn, tq, tuple(g.qthw), tuple(g.kthw), tt[1], tt[2], tt[0])
    lse = torch.logsumexp(attn, -1)
    x = torch.matmul(attn.softmax(-1), tv)
    if residual:
        x = torch.cat([x[:, :, :1], x[:, :, 1:] + tq[:, :, 1:]], 2)
    out = x.transpose(1, 2).reshape(-1)
    out.backward(torch.tensor(dout))
    grads = [tq.grad, tk.grad, tv.grad] + [t.grad if g.rel else torch.zeros(t.shape) for t in tt]
    return out.detach().numpy(), lse.detach().numpy().reshape(-1), [x.numpy().reshape(-1) for x in grads]


def pool_emu(qkv, w, dout, n, heads, D, part, thw, k, st, pd, parts):
    """kernels_mvit.cu's k_pool_fwd, k_pool_dx, k_pool_dw_part / _final, element by element."""
    og = [(thw[a] + 2*pd[a] - k[a]) // st[a] + 1 for a in range(3)]
    L = 1 + thw[0]*thw[1]*thw[2]; Lo = 1 + og[0]*og[1]*og[2]; C = heads*D; C3 = 3*C
    K = k[0]*k[1]*k[2]
    out = np.full(n*heads*Lo*D, np.nan)
    for e in range(out.size):
        d = e % D; r = e // D; o = r % Lo; jh = r // Lo; j, h = jh // heads, jh % heads
        src = j*L*C3 + part*C + h*D + d
        if o == 0: out[e] = qkv[src]; continue
        ot, oh, ow = (o-1) // (og[1]*og[2]), (o-1) // og[2] % og[1], (o-1) % og[2]
        acc = 0.0
        for a in range(k[0]):
            it = ot*st[0] - pd[0] + a
            if it < 0 or it >= thw[0]: continue
            for b in range(k[1]):
                ih = oh*st[1] - pd[1] + b
                if ih < 0 or ih >= thw[1]: continue
                for c in range(k[2]):
                    iw = ow*st[2] - pd[2] + c
                    if iw < 0 or iw >= thw[2]: continue
                    acc += w[d*K + (a*k[1] + b)*k[2] + c] * qkv[src + (1 + (it*thw[1] + ih)*thw[2] + iw)*C3]
        out[e] = acc
    dx = np.full(n*L*C3, np.nan)
    for e in range(n*L*heads*D):
        d = e % D; r = e // D; h = r % heads; jx = r // heads; x = jx % L; j = jx // L
        dst = jx*C3 + part*C + h*D + d; g = (j*heads + h)*Lo*D + d
        if x == 0: dx[dst] = dout[g]; continue
        it, ih, iw = (x-1) // (thw[1]*thw[2]), (x-1) // thw[2] % thw[1], (x-1) % thw[2]
        acc = 0.0
        for a in range(k[0]):
            nt = it + pd[0] - a; ot = nt // st[0] if nt >= 0 else -1
            if nt < 0 or nt % st[0] or ot >= og[0]: continue
            for b in range(k[1]):
                nh = ih + pd[1] - b; oh = nh // st[1] if nh >= 0 else -1
                if nh < 0 or nh % st[1] or oh >= og[1]: continue
                for c in range(k[2]):
                    nw = iw + pd[2] - c; ow = nw // st[2] if nw >= 0 else -1
                    if nw < 0 or nw % st[2] or ow >= og[2]: continue
                    acc += w[d*K + (a*k[1] + b)*k[2] + c] * dout[g + (1 + (ot*og[1] + oh)*og[2] + ow)*D]
        dx[dst] = acc
    nwin = n*heads*(Lo - 1); chunk = (nwin + parts - 1) // parts; pa = np.full(parts*K*D, np.nan)
    for e in range(parts*K*D):
        d = e % D; tap = e // D % K; pc = e // (D*K)
        a, b, c = tap // (k[1]*k[2]), tap // k[2] % k[1], tap % k[2]
        acc = 0.0
        for wi in range(pc*chunk, min(pc*chunk + chunk, nwin)):
            jh = wi // (Lo - 1); o = 1 + wi % (Lo - 1); j, h = jh // heads, jh % heads
            ot, oh, ow = (o-1) // (og[1]*og[2]), (o-1) // og[2] % og[1], (o-1) % og[2]
            it, ih, iw = ot*st[0] - pd[0] + a, oh*st[1] - pd[1] + b, ow*st[2] - pd[2] + c
            if not (0 <= it < thw[0] and 0 <= ih < thw[1] and 0 <= iw < thw[2]): continue
            acc += dout[(jh*Lo + o)*D + d] * qkv[j*L*C3 + part*C + h*D + d + (1 + (it*thw[1] + ih)*thw[2] + iw)*C3]
        pa[e] = acc
    dw = np.zeros(D*K)
    for e in range(K*D):
        d = e % D; tap = e // D
        dw[d*K + tap] += sum(pa[(pc*K + tap)*D + d] for pc in range(parts))
    return out, dx, dw


def tmax_emu(x, dout, n, c, thw, k, st, pd):
    """kernels_mvit.cu's k_tmax_fwd, k_tmax_argmax and the gathering k_tmax_bwd (windows in
    increasing order)."""
    og = [(thw[a] + 2*pd[a] - k[a]) // st[a] + 1 for a in range(3)]
    L = 1 + thw[0]*thw[1]*thw[2]; Lo = 1 + og[0]*og[1]*og[2]
    def taps(ot, oh, ow):
        for a in range(k[0]):
            it = ot*st[0] - pd[0] + a
            if it < 0 or it >= thw[0]: continue
            for b in range(k[1]):
                ih = oh*st[1] - pd[1] + b
                if ih < 0 or ih >= thw[1]: continue
                for cc in range(k[2]):
                    iw = ow*st[2] - pd[2] + cc
                    if 0 <= iw < thw[2]: yield 1 + (it*thw[1] + ih)*thw[2] + iw
    def arg(base, ot, oh, ow):
        best, am = -np.inf, -1
        for xi in taps(ot, oh, ow):
            if am < 0 or x[base + xi*c] > best: best, am = x[base + xi*c], xi
        return am
    out = np.full(n*Lo*c, np.nan)
    for e in range(out.size):
        ch = e % c; r = e // c; o = r % Lo; j = r // Lo; base = j*L*c + ch
        if o == 0: out[e] = x[base]; continue
        ot, oh, ow = (o-1) // (og[1]*og[2]), (o-1) // og[2] % og[1], (o-1) % og[2]
        out[e] = max([-np.inf] + [x[base + xi*c] for xi in taps(ot, oh, ow)])
    Lw = Lo - 1; am = np.full(n*Lw*c, -7)  # k_tmax_argmax: each window's first maximum
    for e in range(am.size):
        ch = e % c; r = e // c; o = r % Lw; j = r // Lw
        am[e] = arg(j*L*c + ch, o // (og[1]*og[2]), o // og[2] % og[1], o % og[2])
    din = np.full(n*L*c, np.nan)
    for e in range(din.size):
        ch = e % c; r = e // c; xi = r % L; j = r // L; base = j*L*c + ch; gb = j*Lo*c + ch
        ag = j*Lw*c + ch
        if xi == 0: din[e] = dout[gb]; continue
        it, ih, iw = (xi-1) // (thw[1]*thw[2]), (xi-1) // thw[2] % thw[1], (xi-1) % thw[2]
        acc = 0.0; last = 0
        for a in range(k[0] - 1, -1, -1):
            nt = it + pd[0] - a
            if nt < 0 or nt % st[0] or nt // st[0] >= og[0]: continue
            for b in range(k[1] - 1, -1, -1):
                nh = ih + pd[1] - b
                if nh < 0 or nh % st[1] or nh // st[1] >= og[1]: continue
                for cc in range(k[2] - 1, -1, -1):
                    nw = iw + pd[2] - cc
                    if nw < 0 or nw % st[2] or nw // st[2] >= og[2]: continue
                    ot, oh, ow = nt // st[0], nh // st[1], nw // st[2]
                    o = 1 + (ot*og[1] + oh)*og[2] + ow
                    assert o > last  # the windows come in increasing order (cpu-ref's add order)
                    last = o
                    if am[ag + (o - 1)*c] == xi: acc += dout[gb + o*c]
        din[e] = acc
    return out, din


def check_pools():
    """The pool and token max pool kernels against torch's depthwise conv3d and max_pool3d."""
    global bad
    k, st, pd = (3, 3, 3), (1, 2, 2), (1, 1, 1)
    for (n, heads, D, thw, parts) in [(2, 2, 3, (3, 5, 5), 1), (1, 2, 2, (2, 4, 6), 5)]:
        rng = np.random.default_rng(3)
        L = 1 + thw[0]*thw[1]*thw[2]
        og = [(thw[a] + 2*pd[a] - k[a]) // st[a] + 1 for a in range(3)]; Lo = 1 + og[0]*og[1]*og[2]
        qkv = rng.uniform(-1, 1, n*L*3*heads*D); w = rng.uniform(-1, 1, D*27)
        dout = rng.uniform(-1, 1, n*heads*Lo*D)
        for part in range(3):
            out, dx, dw = pool_emu(qkv, w, dout, n, heads, D, part, thw, k, st, pd, parts)
            tq = torch.tensor(qkv).reshape(n, L, 3, heads, D).requires_grad_()
            tw = torch.tensor(w).reshape(D, 1, 3, 3, 3).requires_grad_()
            xp = tq[:, :, part].transpose(1, 2)  # (n, heads, L, D), as torchvision's Pool
            grid = xp[:, :, 1:].reshape(n*heads, *thw, D).permute(0, 4, 1, 2, 3)
            y = F.conv3d(grid, tw, stride=st, padding=pd, groups=D)
            y = y.reshape(n, heads, D, -1).transpose(2, 3)
            ref = torch.cat([xp[:, :, :1], y], 2).reshape(-1)
            ref.backward(torch.tensor(dout))
            gx = tq.grad.numpy().reshape(n, L, 3, heads, D)[:, :, part].reshape(-1)
            got = dx.reshape(n, L, 3, heads, D)[:, :, part].reshape(-1)
            errs = dict(out=np.abs(out - ref.detach().numpy()).max(), dqkv=np.abs(got - gx).max(),
                        dw=np.abs(dw - tw.grad.numpy().reshape(-1)).max())
            ok = all(e <= 1e-12 for e in errs.values())
            bad |= not ok
            print('ok ' if ok else 'BAD', 'pool', n, heads, D, thw, 'part', part, 'dw chunks', parts,
                  ' '.join('%s %.1e' % kv for kv in errs.items()))
    for (n, c, thw) in [(2, 3, (3, 5, 5)), (1, 2, (2, 4, 7))]:
        rng = np.random.default_rng(5)
        L = 1 + thw[0]*thw[1]*thw[2]
        og = [(thw[a] + 2*pd[a] - k[a]) // st[a] + 1 for a in range(3)]; Lo = 1 + og[0]*og[1]*og[2]
        x = rng.permutation(n*L*c).astype(np.float64) / 7.0  # distinct values: no ties
        dout = rng.uniform(-1, 1, n*Lo*c)
        out, din = tmax_emu(x, dout, n, c, thw, k, st, pd)
        tx = torch.tensor(x).reshape(n, L, c).requires_grad_()
        g = tx[:, 1:].reshape(n, *thw, c).permute(0, 4, 1, 2, 3)
        y = F.max_pool3d(g, k, st, pd).reshape(n, c, -1).transpose(1, 2)
        ref = torch.cat([tx[:, :1], y], 1).reshape(-1)
        ref.backward(torch.tensor(dout))
        errs = dict(out=np.abs(out - ref.detach().numpy()).max(),
                    din=np.abs(din - tx.grad.numpy().reshape(-1)).max())
        ok = all(e <= 1e-12 for e in errs.values())
        bad |= not ok
        print('ok ' if ok else 'BAD', 'token_maxpool', n, c, thw,
              ' '.join('%s %.1e' % kv for kv in errs.items()))


CASES = [  # n, H, D, q grid, k grid, residual, rel, bq, parts
    (2, 1, 4, (2, 4, 4), (2, 2, 2), 1, 1, 33, 1),   # MViT's pooled keys; clips batched
    (1, 3, 4, (2, 4, 4), (1, 2, 2), 1, 1, 7, 3),    # heads batched, blocks of 7 (last 5)
    (3, 2, 3, (1, 2, 3), (2, 4, 3), 1, 1, 4, 2),    # q coarser than k; clips batched
    (2, 2, 4, (2, 2, 2), (2, 2, 2), 0, 1, 9, 1),    # no residual, one block
    (2, 3, 4, (2, 2, 2), (1, 2, 2), 0, 0, 3, 1),    # mvit_v1_b: neither
    (2, 2, 4, (1, 2, 2), (1, 1, 1), 1, 0, 2, 1),    # residual only, one key cell
]

bad = False
for (n, H, D, qthw, kthw, residual, rel, bq, parts) in CASES:
    g = Geo(qthw, kthw, D, rel)
    rng = np.random.default_rng(7)
    q = rng.uniform(-1, 1, n*H*g.Lq*D); k = rng.uniform(-1, 1, n*H*g.Lk*D)
    v = rng.uniform(-1, 1, n*H*g.Lk*D); dout = rng.uniform(-1, 1, n*g.Lq*H*D)
    # the tables sit in one array at offsets, as device pointers would
    sizes = [(2*max(qthw[a], kthw[a]) - 1)*D for a in range(3)]
    buf = rng.uniform(-0.5, 0.5, sum(sizes))
    tabs = [(buf, 0), (buf, sizes[0]), (buf, sizes[0] + sizes[1])]  # rt, rh, rw
    out, lse = fwd(q, k, v, tabs, n, H, g, bq, residual)
    dq, dk, dv, dt = bwd(dout, q, k, v, tabs, lse, n, H, g, bq, residual, parts)
    tabs_own = [(buf[o:o + sz].copy(), 0) for (_, o), sz in zip(tabs, sizes)]
    ro, rl, rg = torch_ref(q, k, v, tabs_own, dout, n, H, g, residual)
    errs = dict(out=np.abs(out - ro).max(), lse=np.abs(lse - rl).max(), dq=np.abs(dq - rg[0]).max(),
                dk=np.abs(dk - rg[1]).max(), dv=np.abs(dv - rg[2]).max(),
                drt=np.abs(dt[0] - rg[3]).max(), drh=np.abs(dt[1] - rg[4]).max(),
                drw=np.abs(dt[2] - rg[5]).max())
    ok = all(e <= 1e-12 for e in errs.values())  # NaN (an element never written) fails too
    bad |= not ok
    print('ok ' if ok else 'BAD', n, H, D, qthw, kthw, 'residual', residual, 'rel', rel, 'bq', bq,
          'batch', walk(n, H, g.Lq, g.Lk, D)['B'], ' '.join('%s %.1e' % kv for kv in errs.items()))
check_pools()
sys.exit(1 if bad else 0)
