#!/usr/bin/python3
"""cuda_attn_emu.py: the GEMM arguments of models/cuda/cuda_attn.c checked without a GPU.

Emulates, in numpy, cuBLAS's column-major cublasSgemmStridedBatched exactly as
cuda_attn.c calls it (the same m, n, k, pointers, leading dimensions and strides, both
walks of attn_walk: heads batched per clip, or clips batched per head; several query
block sizes), and the two row kernels of kernels_attn.cu (softmax with the log-sum-exp,
ds), then compares out, lse and dqkv with PyTorch's softmax(q k^T / sqrt(D)) v and its
autograd in float64. Outputs start as NaN, so an element no GEMM writes shows.
Run by hand after changing cuda_attn.c's GEMMs (keep the two in step; the BF16 path's
are cuda_attn_emu_bf16.py's, which imports gemm and walk from here):
  /usr/bin/python3 tests/oracle/cuda_attn_emu.py    exit 0: every case within 1e-12
"""
import sys

import numpy as np, torch
def gemm(ta, tb, m, n, k, alpha, A, oa, lda, sa, B, ob, ldb, sb, beta, C, oc, ldc, sc, batch):
    for b in range(batch):
        i = np.arange(m)[:, None]; p = np.arange(k)[None, :]
        opA = A[oa + b*sa + (i + p*lda if ta == 'N' else p + i*lda)]
        p2 = np.arange(k)[:, None]; j = np.arange(n)[None, :]
        opB = B[ob + b*sb + (p2 + j*ldb if tb == 'N' else j + p2*ldb)]
        idx = oc + b*sc + np.arange(m)[:, None] + np.arange(n)[None, :]*ldc
        C[idx] = alpha * (opA @ opB) + (beta * C[idx] if beta else 0)
def walk(n, L, H, D):
    ld3, hd = 3*H*D, H*D
    if n > H: return dict(U=H, B=n, u_qkv=D, u_o=D, u_lse=L, b_qkv=L*ld3, b_o=L*hd, b_lse=H*L)
    return dict(U=n, B=H, u_qkv=L*ld3, u_o=L*hd, u_lse=H*L, b_qkv=D, b_o=D, b_lse=L)
def softmax(s, lse, lo, rows, L, bq, lse_bs):
    for row in range(rows):
        sr = s[row*L:(row+1)*L]; m = sr.max(); z = np.exp(sr-m).sum()
        s[row*L:(row+1)*L] = np.exp(sr-m)/z
        lse[lo + (row//bq)*lse_bs + row % bq] = m + np.log(z)
def ds(s, dpo, lse, lo, dout, do_, out, oo, rows, L, bq, D, hd, o_bs, lse_bs, scale):
    for row in range(rows):
        b, i = row // bq, row % bq
        a = do_ + b*o_bs + i*hd; c = oo + b*o_bs + i*hd
        delta = dout[a:a+D] @ out[c:c+D]
        p = np.exp(s[row*L:(row+1)*L] - lse[lo + b*lse_bs + i]); s[row*L:(row+1)*L] = p
        s[dpo+row*L:dpo+(row+1)*L] = p * (s[dpo+row*L:dpo+(row+1)*L] - delta) * scale
def fwd(qkv, n, L, H, D, bq):
    ld3, hd = 3*H*D, H*D; scale = 1/np.sqrt(D); w = walk(n, L, H, D); B = w['B']
    out = np.full(n*L*hd, np.nan); lse = np.full(n*H*L, np.nan); s = np.zeros(2*B*bq*L)
    for u in range(w['U']):
        q = u*w['u_qkv']; v = q + 2*hd; o = u*w['u_o']; ls = u*w['u_lse']
        for i0 in range(0, L, bq):
            b = min(bq, L - i0)
            gemm('T','N', L, b, D, scale, qkv, q+hd, ld3, w['b_qkv'], qkv, q + i0*ld3, ld3, w['b_qkv'], 0, s, 0, L, b*L, B)
            softmax(s, lse, ls + i0, B*b, L, b, w['b_lse'])
            gemm('N','N', D, b, L, 1, qkv, v, ld3, w['b_qkv'], s, 0, L, b*L, 0, out, o + i0*hd, hd, w['b_o'], B)
    return out, lse
def bwd(dout, qkv, out, lse, n, L, H, D, bq):
    ld3, hd = 3*H*D, H*D; scale = 1/np.sqrt(D); w = walk(n, L, H, D); B = w['B']
    dqkv = np.full(n*L*ld3, np.nan); s = np.zeros(2*B*bq*L); dpo = B*bq*L
    for u in range(w['U']):
        q = u*w['u_qkv']; k = q + hd; v = q + 2*hd; dq = u*w['u_qkv']; dk = dq + hd; dv = dq + 2*hd
        dO = u*w['u_o']; O = u*w['u_o']; ls = u*w['u_lse']
        for i0 in range(0, L, bq):
            b = min(bq, L - i0); sb = b*L; acc = 1 if i0 else 0
            gemm('T','N', L, b, D, scale, qkv, k, ld3, w['b_qkv'], qkv, q + i0*ld3, ld3, w['b_qkv'], 0, s, 0, L, sb, B)
            gemm('T','N', L, b, D, 1, qkv, v, ld3, w['b_qkv'], dout, dO + i0*hd, hd, w['b_o'], 0, s, dpo, L, sb, B)
            ds(s, dpo, lse, ls + i0, dout, dO + i0*hd, out, O + i0*hd, B*b, L, b, D, hd, w['b_o'], w['b_lse'], scale)
            gemm('N','T', D, L, b, 1, dout, dO + i0*hd, hd, w['b_o'], s, 0, L, sb, acc, dqkv, dv, ld3, w['b_qkv'], B)
            gemm('N','N', D, b, L, 1, qkv, k, ld3, w['b_qkv'], s, dpo, L, sb, 0, dqkv, dq + i0*ld3, ld3, w['b_qkv'], B)
            gemm('N','T', D, L, b, 1, qkv, q + i0*ld3, ld3, w['b_qkv'], s, dpo, L, sb, acc, dqkv, dk, ld3, w['b_qkv'], B)
    return dqkv
def main():
    bad = False
    for (n, L, H, D, bq) in [(2, 12, 2, 24, 12), (2, 13, 3, 8, 5), (5, 11, 2, 8, 11), (5, 11, 2, 8, 4), (4, 9, 3, 4, 2), (1, 7, 2, 4, 1)]:
        rng = np.random.default_rng(1)
        qkv = rng.uniform(-2, 2, n*L*3*H*D); dout = rng.uniform(-1, 1, n*L*H*D)
        out, lse = fwd(qkv, n, L, H, D, bq)
        dqkv = bwd(dout, qkv, out, lse, n, L, H, D, bq)
        t = torch.tensor(qkv).reshape(n, L, 3, H, D).requires_grad_()
        q, k, v = t[:, :, 0].transpose(1, 2), t[:, :, 1].transpose(1, 2), t[:, :, 2].transpose(1, 2)
        sc = q @ k.transpose(-1, -2) / np.sqrt(D)
        o = (sc.softmax(-1) @ v).transpose(1, 2).reshape(-1)
        o.backward(torch.tensor(dout))
        err = max(np.abs(out - o.detach().numpy()).max(), np.abs(dqkv - t.grad.numpy().reshape(-1)).max(),
                  np.abs(lse - torch.logsumexp(sc, -1).detach().numpy().reshape(-1)).max())
        bad |= not err <= 1e-12
        print(n, L, H, D, bq, 'batch', walk(n, L, H, D)['B'], 'out', np.abs(out - o.detach().numpy()).max(),
              'lse', np.abs(lse - torch.logsumexp(sc, -1).detach().numpy().reshape(-1)).max(),
              'dqkv', np.abs(dqkv - t.grad.numpy().reshape(-1)).max())
    sys.exit(1 if bad else 0)

if __name__ == '__main__':
    main()
