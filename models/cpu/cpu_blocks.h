/*
 * cpu_blocks.h: how the fast CPU backend shares work between threads without letting the
 * thread count change a bit — element-wise loops go parallel only above CPU_PAR_MIN, and
 * GEMMs are cut into FIXED blocks, one single-threaded sgemm each — shared by its ops
 * (cpu.c), its conv engine (cpu_conv.c) and its transformer ops (cpu_attn_fast.c). Private
 * to those files.
 *
 * It must never depend on the thread count or hold state: a block is a function of the
 * shape only, so the same inputs give the same bits with 1 thread or 16.
 */
#ifndef VT_CPU_BLOCKS_H
#define VT_CPU_BLOCKS_H

#include <stdint.h>

#include <cblas.h>

#include "models/backend.h"
#include "base/common.h"

/* Element-wise loops below this length run on one thread: a team costs microseconds. */
#define CPU_PAR_MIN 32768

/* Work is cut into FIXED blocks (a function of the shape only) that threads then share:
 * each output element is computed by one sgemm call of one shape whatever the thread
 * count, so the bits never depend on it (OpenBLAS picks kernels, small-matrix ones
 * included, by shape). At most CPU_MAX_BLOCKS blocks: enough for 16 threads. */
#define CPU_MAX_BLOCKS 16
/* Below this many multiply-adds a GEMM (or a conv tile) runs on one thread: a team costs
 * microseconds, 2^18 multiply-adds cost about as much. */
#define CPU_GEMM_PAR_MIN ((int64_t)1 << 18)

static inline int nblocks(int64_t len, int64_t min_block) {
    int64_t nb = len / min_block;
    return (int)VT_MAX(1, VT_MIN(nb, CPU_MAX_BLOCKS));
}

/* Block b of [0, len) cut into nb nearly equal blocks whose inner edges are multiples of
 * align (the last blocks may be empty). */
static inline void block_range(int64_t len, int nb, int64_t align, int b, int64_t *lo,
                               int64_t *hi) {
    int64_t per = (len + nb - 1) / nb;
    per = (per + align - 1) / align * align;
    *lo = VT_MIN(len, per * b);
    *hi = VT_MIN(len, per * (b + 1));
}

static inline void sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                         const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                         float *c, int64_t ldc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* C (M, N) = alpha op(A) op(B) + beta C, row-major, as fixed blocks of C's rows or columns
 * (along the longer side), one single-threaded sgemm each, shared by the team. */
static inline void par_sgemm(vt_backend *be, int ta, int tb, int64_t M, int64_t N,
                             int64_t K, float alpha, const float *A, int64_t lda,
                             const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    if (M == 0 || N == 0)
        return;
    const int along_n = N >= M;
    const int64_t len = along_n ? N : M;
    const int nb = M * N * K < CPU_GEMM_PAR_MIN ? 1 : nblocks(len, 64);
#pragma omp parallel for num_threads(be->threads) schedule(dynamic, 1) if (nb > 1)
    for (int b = 0; b < nb; b++) {
        int64_t lo, hi;
        block_range(len, nb, 16, b, &lo, &hi);
        if (hi <= lo)
            continue;
        if (along_n)
            sgemm(ta, tb, M, hi - lo, K, alpha, A, lda, tb ? B + lo * ldb : B + lo, ldb, beta,
                  C + lo, ldc);
        else
            sgemm(ta, tb, hi - lo, N, K, alpha, ta ? A + lo : A + lo * lda, lda, B, ldb, beta,
                  C + lo * ldc, ldc);
    }
}

#endif
