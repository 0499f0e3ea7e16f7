/*
 * xsum.c: the fixed-point accumulators of xsum.h, on the host (the CPU backends' ops
 * xsum_fold and xsum_round call these). The arithmetic of an element is xsum_arith.h's,
 * which the CUDA kernels (models/cuda/kernels_xsum.cu) compile too.
 *
 * The loops run 8 (AVX-512) or 4 (AVX2) elements at a time where the CPU has them, chosen
 * at run time (vt_xsum_isa_best): one element at a time the fold is bound by its integer
 * arithmetic, not by memory, and a step folds every parameter once a clip (the figures:
 * docs/notebook/results.md, session 29). A vector lane computes vt_xs_fold1's fast path
 * with the same integer operations (a shift count of 64 or more, which C leaves
 * undefined, gives 0 in vpsllvq/vpsrlvq and is used so), keeps its old limbs where
 * vt_xs_fold1 would take the slow path, and vt_xs_fold_slow then folds those elements one
 * by one; the rounding lane converts and multiplies as vt_xs_round1 does (the same IEEE
 * operations, round to nearest). A term of +-0, which the slow path leaves alone, keeps
 * its limbs without it, and a lane group of zeros is skipped: they are common (the taps
 * of a 3x3x3 kernel that only ever see padding: at 8 frames r3d18 has one frame left in
 * its last stage, and these taps are 46% of its parameters).
 *
 * It must never give other integers or floats than xsum_arith.h's functions element by
 * element, on any instruction set (test_xsum compares every one this CPU runs against
 * them, edges and misaligned tails included).
 */
#include "models/xsum.h"

#include <math.h>

#include "models/xsum_arith.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define XSUM_X86 1
#include <immintrin.h>
#endif

/* Loops this long go parallel (as cpu_blocks.h's CPU_PAR_MIN). */
#define XSUM_PAR_MIN 32768
/* Elements a thread takes at a time: a multiple of every vector width. */
#define XSUM_BLOCK 4096

/* ---- the plain loops: xsum_arith.h one element at a time ---- */

static void fold_scalar(int64_t *acc, const float *x, int64_t n, int e0, int init) {
    for (int64_t i = 0; i < n; i++) {
        if (init)
            acc[2 * i] = acc[2 * i + 1] = 0;
        if (x[i] != 0.0f) /* +-0 leaves the limbs alone (vt_xs_fold_slow's first line) */
            vt_xs_fold1(acc + 2 * i, x[i], e0);
    }
}

static void round_scalar(float *out, const int64_t *acc, int64_t n, int e0) {
    const double unit = ldexp(1.0, e0);
    for (int64_t i = 0; i < n; i++)
        out[i] = vt_xs_round1(acc + 2 * i, unit);
}

#ifdef XSUM_X86
/* ---- AVX-512: 8 elements, lane j element j (hi and lo deinterleaved by permutes) ---- */
#define T512 __attribute__((target("avx512f,avx512dq")))
/* Before scalar code runs: the upper halves of the vector registers cleared (vzeroupper).
 * GCC 12 left them dirty on the way out of these functions (a tail call to the scalar
 * loop), and the baseline (SSE) code after them then ran at half speed: batch norm's sums
 * after a clip's folds (docs/notebook/results.md, session 29). */
#define XSUM_LEAVE() _mm256_zeroupper()

/* vt_xs_fold1's fast path in 8 lanes: hi, lo (old limbs in, new out) += u's floats
 * (zero-extended bits, lanes in zero: those that are +-0). A lane of +-0 keeps its limbs
 * (as the slow path leaves them), and so does one that needs the slow path: returned. */
T512 static inline __mmask8 fold8(__m512i *hi, __m512i *lo, __m512i u, __mmask8 zero, int e0) {
    const __m512i ex = _mm512_and_si512(_mm512_srli_epi64(u, 23), _mm512_set1_epi64(0xff));
    const __m512i s = _mm512_sub_epi64(ex, _mm512_set1_epi64(150 + e0));
    /* ex == 0, or s outside [0, FAST_S_MAX] (a negative s read unsigned is huge) */
    const __mmask8 keep = _mm512_cmpeq_epi64_mask(ex, _mm512_setzero_si512()) |
                          _mm512_cmpgt_epu64_mask(s, _mm512_set1_epi64(VT_XS_FAST_S_MAX));
    const __m512i m = _mm512_or_si512(_mm512_and_si512(u, _mm512_set1_epi64(0x7fffff)),
                                      _mm512_set1_epi64(0x800000));
    const __m512i mask = _mm512_set1_epi64(VT_XS_LO_MASK);
    const __m512i sl = _mm512_min_epi64(s, _mm512_set1_epi64(VT_XSUM_LO_BITS));
    const __m512i sh = _mm512_sub_epi64(s, _mm512_set1_epi64(VT_XSUM_LO_BITS));
    const __m512i lo_add = _mm512_and_si512(_mm512_sllv_epi64(m, sl), mask);
    /* sh >= 0 ? m << sh : m >> -sh: the other shift's count reads >= 64 and gives 0 (at
     * sh = 0 both give m) */
    const __m512i hi_add =
        _mm512_or_si512(_mm512_sllv_epi64(m, sh),
                        _mm512_srlv_epi64(m, _mm512_sub_epi64(_mm512_setzero_si512(), sh)));
    const __m512i neg = _mm512_srai_epi64(_mm512_slli_epi64(u, 32), 63);
    const __m512i l =
        _mm512_add_epi64(*lo, _mm512_sub_epi64(_mm512_xor_si512(lo_add, neg), neg));
    const __m512i h = _mm512_add_epi64(
        _mm512_add_epi64(*hi, _mm512_sub_epi64(_mm512_xor_si512(hi_add, neg), neg)),
        _mm512_srai_epi64(l, VT_XSUM_LO_BITS));
    *hi = _mm512_mask_blend_epi64(keep, h, *hi);
    *lo = _mm512_mask_blend_epi64(keep, _mm512_and_si512(l, mask), *lo);
    return keep & (__mmask8)~zero;
}

T512 static void fold_avx512(int64_t *acc, const float *x, int64_t n, int e0, int init) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i first = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i second = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        int64_t *a = acc + 2 * i;
        const __m512i u = _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(x + i)));
        /* +-0: no bits but the sign's (a gradient's taps that only ever see padding) */
        const __mmask8 zero = _mm512_testn_epi64_mask(u, _mm512_set1_epi64(0x7fffffff));
        if (zero == 0xff && !init)
            continue;
        __m512i hi = _mm512_setzero_si512(), lo = hi;
        if (!init) {
            const __m512i a0 = _mm512_loadu_si512(a), a1 = _mm512_loadu_si512(a + 8);
            hi = _mm512_permutex2var_epi64(a0, even, a1);
            lo = _mm512_permutex2var_epi64(a0, odd, a1);
        }
        unsigned slow = fold8(&hi, &lo, u, zero, e0);
        _mm512_storeu_si512(a, _mm512_permutex2var_epi64(hi, first, lo));
        _mm512_storeu_si512(a + 8, _mm512_permutex2var_epi64(hi, second, lo));
        if (slow)
            XSUM_LEAVE();
        for (; slow; slow &= slow - 1) {
            const int j = __builtin_ctz(slow);
            vt_xs_fold_slow(a + 2 * j, x[i + j], e0);
        }
    }
    XSUM_LEAVE();
    fold_scalar(acc + 2 * i, x + i, n - i, e0, init);
}

T512 static void round_avx512(float *out, const int64_t *acc, int64_t n, int e0) {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i mask = _mm512_set1_epi64(VT_XS_LO_MASK);
    const __m512d unit = _mm512_set1_pd(ldexp(1.0, e0)), two52 = _mm512_set1_pd(0x1p52);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m512i a0 = _mm512_loadu_si512(acc + 2 * i);
        const __m512i a1 = _mm512_loadu_si512(acc + 2 * i + 8);
        const __m512i lo = _mm512_permutex2var_epi64(a0, odd, a1);
        const __m512i hi = _mm512_add_epi64(_mm512_permutex2var_epi64(a0, even, a1),
                                            _mm512_srai_epi64(lo, VT_XSUM_LO_BITS));
        const __mmask8 poison = _mm512_cmpge_epi64_mask(hi, _mm512_set1_epi64(VT_XS_NAN_HI)) |
                                _mm512_cmplt_epi64_mask(hi, _mm512_set1_epi64(-VT_XS_NAN_HI));
        /* hi * 2^52 is exact, so a fused multiply-add would round the same */
        const __m512d v = _mm512_mul_pd(
            _mm512_add_pd(_mm512_mul_pd(_mm512_cvtepi64_pd(hi), two52),
                          _mm512_cvtepi64_pd(_mm512_and_si512(lo, mask))),
            unit);
        const __m256 f = _mm512_cvtpd_ps(v);
        const __m256 nan = _mm256_set1_ps(NAN);
        /* the poisoned lanes NaN: a 16-lane float blend on the low half */
        const __m512 r = _mm512_mask_blend_ps((__mmask16)poison, _mm512_castps256_ps512(f),
                                              _mm512_castps256_ps512(nan));
        _mm256_storeu_ps(out + i, _mm512_castps512_ps256(r));
    }
    XSUM_LEAVE();
    round_scalar(out + i, acc + 2 * i, n - i, e0);
}

/* ---- AVX2: 4 elements, lanes in unpack's order (elements 0, 2, 1, 3) ---- */
#define T256 __attribute__((target("avx2")))

/* v >> 52, arithmetic: AVX2 has no 64-bit arithmetic shift */
T256 static inline __m256i sra52(__m256i v) {
    const __m256i sg = _mm256_cmpgt_epi64(_mm256_setzero_si256(), v);
    return _mm256_xor_si256(_mm256_srli_epi64(_mm256_xor_si256(v, sg), VT_XSUM_LO_BITS), sg);
}

T256 static void fold_avx2(int64_t *acc, const float *x, int64_t n, int e0, int init) {
    static const int lane_elem[4] = {0, 2, 1, 3};
    const __m256i z = _mm256_setzero_si256(), mask = _mm256_set1_epi64x(VT_XS_LO_MASK);
    const __m256i c52 = _mm256_set1_epi64x(VT_XSUM_LO_BITS);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        int64_t *a = acc + 2 * i;
        const __m256i u = _mm256_permute4x64_epi64(
            _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(x + i))), 0xD8);
        const __m256i zero =
            _mm256_cmpeq_epi64(_mm256_and_si256(u, _mm256_set1_epi64x(0x7fffffff)), z);
        if (!init && _mm256_movemask_pd(_mm256_castsi256_pd(zero)) == 0xf)
            continue;
        __m256i hi0 = z, lo0 = z;
        if (!init) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *)a);
            const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a + 4));
            hi0 = _mm256_unpacklo_epi64(a0, a1);
            lo0 = _mm256_unpackhi_epi64(a0, a1);
        }
        const __m256i ex = _mm256_and_si256(_mm256_srli_epi64(u, 23), _mm256_set1_epi64x(0xff));
        const __m256i s = _mm256_sub_epi64(ex, _mm256_set1_epi64x(150 + e0));
        /* lanes that keep their limbs: the slow path's, and +-0 (which it leaves alone) */
        const __m256i keep = _mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi64(ex, z), _mm256_cmpgt_epi64(z, s)),
            _mm256_cmpgt_epi64(s, _mm256_set1_epi64x(VT_XS_FAST_S_MAX)));
        const __m256i m = _mm256_or_si256(_mm256_and_si256(u, _mm256_set1_epi64x(0x7fffff)),
                                          _mm256_set1_epi64x(0x800000));
        const __m256i sl = _mm256_blendv_epi8(s, c52, _mm256_cmpgt_epi64(s, c52));
        const __m256i sh = _mm256_sub_epi64(s, c52);
        const __m256i lo_add = _mm256_and_si256(_mm256_sllv_epi64(m, sl), mask);
        const __m256i hi_add = _mm256_or_si256(_mm256_sllv_epi64(m, sh),
                                               _mm256_srlv_epi64(m, _mm256_sub_epi64(z, sh)));
        const __m256i neg = _mm256_sub_epi64(z, _mm256_srli_epi64(u, 31));
        const __m256i l =
            _mm256_add_epi64(lo0, _mm256_sub_epi64(_mm256_xor_si256(lo_add, neg), neg));
        const __m256i h = _mm256_add_epi64(
            _mm256_add_epi64(hi0, _mm256_sub_epi64(_mm256_xor_si256(hi_add, neg), neg)),
            sra52(l));
        const __m256i hi = _mm256_blendv_epi8(h, hi0, keep);
        const __m256i lo = _mm256_blendv_epi8(_mm256_and_si256(l, mask), lo0, keep);
        const __m256i slow = _mm256_andnot_si256(zero, keep);
        _mm256_storeu_si256((__m256i *)a, _mm256_unpacklo_epi64(hi, lo));
        _mm256_storeu_si256((__m256i *)(a + 4), _mm256_unpackhi_epi64(hi, lo));
        unsigned sm = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(slow));
        if (sm)
            XSUM_LEAVE();
        for (; sm; sm &= sm - 1) {
            const int j = lane_elem[__builtin_ctz(sm)];
            vt_xs_fold_slow(a + 2 * j, x[i + j], e0);
        }
    }
    XSUM_LEAVE();
    fold_scalar(acc + 2 * i, x + i, n - i, e0, init);
}
#endif /* XSUM_X86 */

int vt_xsum_isa_best(void) {
#ifdef XSUM_X86
    /* libgcc's answers count what the OS saves (XCR0) too */
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        return VT_XSUM_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return VT_XSUM_AVX2;
#endif
    return VT_XSUM_SCALAR;
}

void vt_xsum_fold_isa(int isa, int64_t *acc, const float *x, int64_t n, int e0, int init) {
#ifdef XSUM_X86
    if (isa == VT_XSUM_AVX512) {
        fold_avx512(acc, x, n, e0, init);
        return;
    }
    if (isa == VT_XSUM_AVX2) {
        fold_avx2(acc, x, n, e0, init);
        return;
    }
#endif
    (void)isa;
    fold_scalar(acc, x, n, e0, init);
}

void vt_xsum_round_isa(int isa, float *out, const int64_t *acc, int64_t n, int e0) {
#ifdef XSUM_X86
    if (isa == VT_XSUM_AVX512) { /* AVX2 has no int64 -> double conversion */
        round_avx512(out, acc, n, e0);
        return;
    }
#endif
    (void)isa;
    round_scalar(out, acc, n, e0);
}

/* ---- the ops: blocks of XSUM_BLOCK elements over the threads ---- */

static void fold_par(int64_t *acc, const float *x, int64_t n, int e0, int init, int threads) {
    const int isa = vt_xsum_isa_best();
    const int64_t nb = (n + XSUM_BLOCK - 1) / XSUM_BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i0 = b * XSUM_BLOCK, m = n - i0 < XSUM_BLOCK ? n - i0 : XSUM_BLOCK;
        vt_xsum_fold_isa(isa, acc + 2 * i0, x + i0, m, e0, init);
    }
}

void vt_xsum_fold(int64_t *acc, const float *x, int64_t n, int e0, int threads) {
    fold_par(acc, x, n, e0, 0, threads);
}

void vt_xsum_fold_init(int64_t *acc, const float *x, int64_t n, int e0, int threads) {
    fold_par(acc, x, n, e0, 1, threads);
}

void vt_xsum_round(float *out, const int64_t *acc, int64_t n, int e0, int threads) {
    const int isa = vt_xsum_isa_best();
    const int64_t nb = (n + XSUM_BLOCK - 1) / XSUM_BLOCK;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t i0 = b * XSUM_BLOCK, m = n - i0 < XSUM_BLOCK ? n - i0 : XSUM_BLOCK;
        vt_xsum_round_isa(isa, out + i0, acc + 2 * i0, m, e0);
    }
}

void vt_xsum_add(int64_t *dst, const int64_t *src, int64_t n) {
    for (int64_t i = 0; i < 2 * n; i++)
        dst[i] += src[i];
}
