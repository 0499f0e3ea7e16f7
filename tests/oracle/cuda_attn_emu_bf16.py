#!/usr/bin/python3
"""cuda_attn_emu_bf16.py: the BF16 attention of models/cuda/cuda_attn.c (attn16_forward,
attn16_backward) checked without a GPU: its GEMM arguments and its rounding points.

Emulates in numpy cublasGemmStridedBatchedEx as cuda_attn.c calls it (bf16 A and B, float
compute, C float or bf16: the same m, n, k, offsets, leading dimensions, strides, both
walks, several query block sizes, the float dK/dV accumulators of several blocks and
their member groups) and the bf16 variants of kernels_attn.cu's row kernels, with every
bf16 value rounded to nearest even where the CUDA code stores one. Then:
 1. against a per-head reference written from the definition (docs/precision.md:
    S, softmax, lse and dP in float; P, dS, out, dQ, dK, dV rounded to bf16 once, dK
    and dV from their whole float sums): every bf16 output within 1 bf16 ulp
    (2^-8 relative) of the reference, at most 1% of them off by that ulp (measured: 0,
    bit for bit). The two sum the GEMMs in different orders (the emulator rounds each
    query block's partial of dK, dV to float32), so a value near a rounding boundary
    may go either way; a wrong offset, stride or rounding point moves whole rows by far
    more.
 2. against PyTorch's CPU autocast(bfloat16) of the same attention (VideoMAE's
    q @ k^T, softmax, @ v, which also rounds S, P's softmax and dP to bf16) and the
    float64 truth on the same bf16 inputs: the emulation's NMSE against the truth at
    most 2e-5 on out (bf16 keeps 8 bits: one rounding is 2^-9 relative at most, NMSE
    ~ 2^-18 / 3 ~ 1.3e-6 for a value rounded once; out carries P's rounding and its
    own, measured 5-7e-6; 2e-5 is 3x that) and 1e-4 on dqkv (the gradients go through
    dP - delta, which cancels: delta = dout . out reads the rounded out, and its error
    is relative to |dP|, not to the difference; measured 6e-6 to 3.5e-5, the most on
    the smallest case, L = 7, D = 4), and no worse than PyTorch's autocast by more than
    x 1.5 (it rounds at the same points and more; on the small cases the two are
    within 10% of each other, either way).
Run by hand after changing the BF16 attention (keep the two in step):
  /usr/bin/python3 tests/oracle/cuda_attn_emu_bf16.py    exit 0: every case passes
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_attn_emu import walk  # noqa: E402  (the same walk as the FP32 path)


def bf16(x):
    """Round to nearest even bf16 (through float32, as the kernels' st() of a float)."""
    u = np.atleast_1d(np.asarray(x, np.float32)).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def f32(x):
    return np.asarray(x, np.float32).astype(np.float64)


def gemm16(ta, tb, m, n, k, alpha, A, oa, lda, sa, B, ob, ldb, sb, beta, C, oc, ldc, sc, batch, ct):
    """cublasGemmStridedBatchedEx on bf16 A, B (exact in float64), float compute; C of
    type ct ('f': float, 'b': bf16), each result rounded once to it."""
    rnd = f32 if ct == 'f' else bf16
    for b in range(batch):
        i = np.arange(m)[:, None]; p = np.arange(k)[None, :]
        opA = A[oa + b*sa + (i + p*lda if ta == 'N' else p + i*lda)]
        p2 = np.arange(k)[:, None]; j = np.arange(n)[None, :]
        opB = B[ob + b*sb + (p2 + j*ldb if tb == 'N' else j + p2*ldb)]
        idx = oc + b*sc + np.arange(m)[:, None] + np.arange(n)[None, :]*ldc
        C[idx] = rnd(alpha * (opA @ opB) + (beta * C[idx] if beta else 0))


def softmax16(s, p16, lse, lo, rows, L, bq, lse_bs):
    for row in range(rows):
        sr = s[row*L:(row+1)*L]; m = sr.max(); e = f32(np.exp(sr - m)); z = e.sum()
        p16[row*L:(row+1)*L] = bf16(e * f32(1.0 / z))
        lse[lo + (row//bq)*lse_bs + row % bq] = f32(m + np.log(z))


def ds16(s, dp, p16, d16, lse, lo, dout, do_, out, oo, rows, L, bq, D, hd, o_bs, lse_bs, scale):
    for row in range(rows):
        b, i = row // bq, row % bq
        a = do_ + b*o_bs + i*hd; c = oo + b*o_bs + i*hd
        delta = f32(dout[a:a+D] @ out[c:c+D])
        p = f32(np.exp(s[row*L:(row+1)*L] - lse[lo + b*lse_bs + i]))
        p16[row*L:(row+1)*L] = bf16(p)
        d16[row*L:(row+1)*L] = bf16(f32(f32(p * f32(dp[row*L:(row+1)*L] - delta)) * scale))


def fwd(qkv, n, L, H, D, bq):
    ld3, hd = 3*H*D, H*D; scale = f32(1/np.sqrt(D)); w = walk(n, L, H, D); B = w['B']
    out = np.full(n*L*hd, np.nan); lse = np.full(n*H*L, np.nan)
    s = np.zeros(B*bq*L); p16 = np.zeros(B*bq*L)
    for u in range(w['U']):
        q = u*w['u_qkv']; v = q + 2*hd; o = u*w['u_o']; ls = u*w['u_lse']
        for i0 in range(0, L, bq):
            b = min(bq, L - i0)
            gemm16('T', 'N', L, b, D, scale, qkv, q+hd, ld3, w['b_qkv'], qkv, q + i0*ld3, ld3, w['b_qkv'], 0, s, 0, L, b*L, B, 'f')
            softmax16(s, p16, lse, ls + i0, B*b, L, b, w['b_lse'])
            gemm16('N', 'N', D, b, L, 1, qkv, v, ld3, w['b_qkv'], p16, 0, L, b*L, 0, out, o + i0*hd, hd, w['b_o'], B, 'b')
    return out, lse


def bwd(dout, qkv, out, lse, n, L, H, D, bq, G):
    """G: members per group when several blocks sum into the accumulators
    (vt_cuda_attn_acc_members; smaller here to walk the groups)."""
    ld3, hd = 3*H*D, H*D; scale = f32(1/np.sqrt(D)); w = walk(n, L, H, D); B = w['B']
    multi = bq < L; G = G if multi else B; LD = L*D
    dqkv = np.full(n*L*ld3, np.nan)
    s = np.zeros(B*bq*L); dp = np.zeros(B*bq*L); p16 = np.zeros(B*bq*L); d16 = np.zeros(B*bq*L)
    acc = np.full(2*G*LD, np.nan)
    for u in range(w['U']):
        for m0 in range(0, B, G):
            nb = min(G, B - m0)
            q = u*w['u_qkv'] + m0*w['b_qkv']; k = q + hd; v = q + 2*hd; dq = q; dk = dq + hd; dv = dq + 2*hd
            dO = u*w['u_o'] + m0*w['b_o']; O = dO; ls = u*w['u_lse'] + m0*w['b_lse']
            ak, av = 0, nb*LD
            for i0 in range(0, L, bq):
                b = min(bq, L - i0); sb = b*L; beta = 1 if i0 else 0
                gemm16('T', 'N', L, b, D, scale, qkv, k, ld3, w['b_qkv'], qkv, q + i0*ld3, ld3, w['b_qkv'], 0, s, 0, L, sb, nb, 'f')
                gemm16('T', 'N', L, b, D, 1, qkv, v, ld3, w['b_qkv'], dout, dO + i0*hd, hd, w['b_o'], 0, dp, 0, L, sb, nb, 'f')
                ds16(s, dp, p16, d16, lse, ls + i0, dout, dO + i0*hd, out, O + i0*hd, nb*b, L, b, D, hd, w['b_o'], w['b_lse'], scale)
                if multi:
                    gemm16('N', 'T', D, L, b, 1, dout, dO + i0*hd, hd, w['b_o'], p16, 0, L, sb, beta, acc, av, D, LD, nb, 'f')
                else:
                    gemm16('N', 'T', D, L, b, 1, dout, dO + i0*hd, hd, w['b_o'], p16, 0, L, sb, 0, dqkv, dv, ld3, w['b_qkv'], nb, 'b')
                gemm16('N', 'N', D, b, L, 1, qkv, k, ld3, w['b_qkv'], d16, 0, L, sb, 0, dqkv, dq + i0*ld3, ld3, w['b_qkv'], nb, 'b')
                if multi:
                    gemm16('N', 'T', D, L, b, 1, qkv, q + i0*ld3, ld3, w['b_qkv'], d16, 0, L, sb, beta, acc, ak, D, LD, nb, 'f')
                else:
                    gemm16('N', 'T', D, L, b, 1, qkv, q + i0*ld3, ld3, w['b_qkv'], d16, 0, L, sb, 0, dqkv, dk, ld3, w['b_qkv'], nb, 'b')
            if multi:  # vt_cuk_attn_store16
                e = np.arange(nb*LD); d, bl = e % D, e // D
                for dst, src in ((dk, ak), (dv, av)):
                    dqkv[dst + (bl // L)*w['b_qkv'] + (bl % L)*ld3 + d] = bf16(acc[src + e])
    return dqkv


def reference(qkv, dout, n, L, H, D):
    """The definition, per (clip, head), in float64 with the bf16 roundings."""
    t = qkv.reshape(n, L, 3, H, D); g = dout.reshape(n, L, H, D); scale = f32(1/np.sqrt(D))
    out = np.zeros((n, L, H, D)); dq = np.zeros((n, L, H, D)); dk = np.zeros_like(dq); dv = np.zeros_like(dq)
    for c in range(n):
        for h in range(H):
            q, k, v, do = t[c, :, 0, h], t[c, :, 1, h], t[c, :, 2, h], g[c, :, h]
            S = f32(scale * (q @ k.T)); m = S.max(1, keepdims=True)
            P = np.exp(S - m); P = P / P.sum(1, keepdims=True); P16 = bf16(P)
            O = bf16(P16 @ v); out[c, :, h] = O
            dP = f32(do @ v.T); delta = (do * O).sum(1, keepdims=True)
            dS = bf16(P * (dP - delta) * scale)
            dv[c, :, h] = bf16(P16.T @ do); dq[c, :, h] = bf16(dS @ k); dk[c, :, h] = bf16(dS.T @ q)
    return out.reshape(-1), np.stack([dq, dk, dv], 2).reshape(-1)


def ulps(a, b):
    """|a - b| in units of the bf16 ulp of max(|a|, |b|) (2^-7 of its binade)."""
    mag = np.maximum(np.abs(a), np.abs(b)); e = np.floor(np.log2(np.where(mag > 0, mag, 1)))
    return np.abs(a - b) / 2.0**(e - 7)


def nmse(a, b):
    return float(((a - b)**2).sum() / (b**2).sum())


def torch_autocast(qkv, dout, n, L, H, D):
    t = torch.tensor(qkv, dtype=torch.float32).reshape(n, L, 3, H, D).requires_grad_()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        q, k, v = (t[:, :, i].transpose(1, 2) for i in range(3))
        x = ((q * D**-0.5) @ k.transpose(-1, -2)).softmax(-1) @ v
        o = x.transpose(1, 2).reshape(-1)
    o.float().backward(torch.tensor(dout, dtype=torch.float32))
    return o.detach().float().numpy().astype(np.float64), t.grad.numpy().reshape(-1).astype(np.float64)


def truth(qkv, dout, n, L, H, D):
    t = torch.tensor(qkv).reshape(n, L, 3, H, D).requires_grad_()
    q, k, v = (t[:, :, i].transpose(1, 2) for i in range(3))
    o = ((q @ k.transpose(-1, -2)) / np.sqrt(D)).softmax(-1) @ v
    o = o.transpose(1, 2).reshape(-1)
    o.backward(torch.tensor(dout))
    return o.detach().numpy(), t.grad.numpy().reshape(-1)


def main():
    bad = False
    # (n, L, H, D, bq, G): both walks, one block and several, groups of the accumulators
    for (n, L, H, D, bq, G) in [(2, 12, 2, 24, 12, 2), (2, 13, 3, 8, 5, 2), (5, 11, 2, 8, 11, 5),
                                (5, 11, 2, 8, 4, 2), (4, 9, 3, 4, 2, 4), (1, 7, 2, 4, 1, 1),
                                (2, 40, 2, 16, 40, 2)]:
        rng = np.random.default_rng(2)
        qkv = bf16(rng.uniform(-2, 2, n*L*3*H*D)); dout = bf16(rng.uniform(-1, 1, n*L*H*D))
        out, lse = fwd(qkv, n, L, H, D, bq)
        dqkv = bwd(dout, qkv, out, lse, n, L, H, D, bq, G)
        rout, rdq = reference(qkv, dout, n, L, H, D)
        u_o, u_d = ulps(out, rout), ulps(dqkv, rdq)
        frac = max((u_o > 0).mean(), (u_d > 0).mean())
        ok1 = not np.isnan(out).any() and not np.isnan(dqkv).any() and \
            u_o.max() <= 1 and u_d.max() <= 1 and frac <= 0.01
        tout, tdq = truth(qkv, dout, n, L, H, D)
        aout, adq = torch_autocast(qkv, dout, n, L, H, D)
        e = (nmse(out, tout), nmse(dqkv, tdq)); a = (nmse(aout, tout), nmse(adq, tdq))
        ok2 = e[0] <= 2e-5 and e[1] <= 1e-4 and e[0] <= 1.5 * a[0] and e[1] <= 1.5 * a[1]
        bad |= not (ok1 and ok2)
        print(f'{n} {L} {H} {D} bq {bq} G {G}: vs definition max ulps out {u_o.max():.0f} dqkv '
              f'{u_d.max():.0f} (off {frac:.4f}); NMSE vs float64 out {e[0]:.2e} dqkv {e[1]:.2e}, '
              f'torch autocast {a[0]:.2e} {a[1]:.2e}', 'ok' if ok1 and ok2 else 'FAIL')
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
