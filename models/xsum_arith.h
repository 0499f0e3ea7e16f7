/*
 * xsum_arith.h: the arithmetic of one element of xsum.h's accumulators — a term folded
 * in, a total rounded to float — as inline functions that both the host (xsum.c: the CPU
 * backends' ops) and the CUDA kernels (models/cuda/kernels_xsum.cu) compile. One source
 * for both, so a GPU tower's accumulators hold the same integers as a CPU tower's for the
 * same terms, a mixed CPU + GPU run sums them together, and test_xsum's checks of the
 * host path (order, split and thread invariance, exact sums against __float128) cover
 * the kernels' arithmetic too. The host's vector loops (xsum.c) spell vt_xs_fold1's fast
 * path and vt_xs_round1 again in AVX-512 and AVX2 lanes; test_xsum holds them to these
 * functions, so a change here that they do not follow fails there.
 *
 * It must never include anything but the C headers below and xsum.h (nvcc compiles it as
 * C++, for host and device), and each function's result must be a function of its
 * arguments only.
 */
#ifndef VT_XSUM_ARITH_H
#define VT_XSUM_ARITH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "models/xsum.h"

#ifdef __CUDACC__
#define VT_XS_FN static inline __host__ __device__
#define VT_XS_COLD static __noinline__ __host__ __device__
#define VT_XS_UNLIKELY(x) (x)
#else
#define VT_XS_FN static inline
#define VT_XS_COLD static __attribute__((noinline))
#define VT_XS_UNLIKELY(x) __builtin_expect(!!(x), 0)
#endif

#define VT_XS_LO_MASK ((((int64_t)1) << VT_XSUM_LO_BITS) - 1)
/* The largest total: hi may reach 2^62 and still take the lo carry and another fold. */
#define VT_XS_XMAX ((((__int128)1) << (62 + VT_XSUM_LO_BITS)) - 1)
/* The fast path's largest shift: hi moves by < 2^42 a term, no overflow in any real sum. */
#define VT_XS_FAST_S_MAX 70
/* Saturation that every order and split of the terms sees alike (xsum.h): a term of at
 * least 2^TERM_BITS units (or inf, NaN) is poison, POISON units, always positive; any
 * other term is below 2^TERM_BITS, so up to 2^14 of them (the clips of a step) sum below
 * 2^111 and never reach XMAX: no clamp, the sum exact in any order. A total of at least
 * 2^111 in magnitude therefore holds a poison, whatever the order its terms came in (one
 * poison is 2^112, the others cannot pull it under 2^111, and several clamp at XMAX), and
 * it rounds to NaN: the step is non-finite on every tower count. */
#define VT_XS_TERM_BITS 97
#define VT_XS_POISON (((__int128)1) << 112)
#define VT_XS_NAN_HI (((int64_t)1) << (111 - VT_XSUM_LO_BITS))

VT_XS_FN uint32_t vt_xs_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* x in units of 2^e0, rounded to nearest (halves away from zero); a term of 2^TERM_BITS
 * units or more, inf and NaN: POISON. */
VT_XS_FN __int128 vt_xs_units(float x, int e0) {
    const uint32_t u = vt_xs_bits(x);
    const int ex = (int)((u >> 23) & 0xff);
    uint32_t m = u & 0x7fffffu;
    if (ex == 0xff) /* inf, NaN */
        return VT_XS_POISON;
    int e = -149; /* x = m * 2^e */
    if (ex != 0) {
        m |= 0x800000u;
        e = ex - 150;
    }
    const int s = e - e0;
    __int128 v;
    if (s >= 0) {
        if (s > VT_XS_TERM_BITS - 24) /* m < 2^24: at least 2^TERM_BITS only past this */
            return VT_XS_POISON;
        v = (__int128)m << s;
        if (v >= (((__int128)1) << VT_XS_TERM_BITS))
            return VT_XS_POISON;
    } else if (s < -25) {
        v = 0;
    } else {
        v = ((uint64_t)m + ((uint64_t)1 << (-s - 1))) >> -s;
    }
    return (u >> 31) ? -v : v;
}

/* The rare terms (zero, subnormal, tiny, huge, inf, NaN): through __int128, rounded to a
 * unit and saturated. */
VT_XS_COLD void vt_xs_fold_slow(int64_t *a, float x, int e0) {
    if (x == 0.0f)
        return;
    __int128 v = (__int128)a[0] * ((__int128)1 << VT_XSUM_LO_BITS) + a[1]; /* hi may be < 0 */
    v += vt_xs_units(x, e0);
    v = v > VT_XS_XMAX ? VT_XS_XMAX : v < -VT_XS_XMAX ? -VT_XS_XMAX : v;
    a[0] = (int64_t)(v >> VT_XSUM_LO_BITS); /* floor: lo stays in [0, 2^52) */
    a[1] = (int64_t)(v & VT_XS_LO_MASK);
}

/* Accumulator element a (a[0] = hi, a[1] = lo) += x: the common case (a normal x of at
 * most 2^(FAST_S_MAX+24) units) in int64 arithmetic without branches on the data, else
 * the slow path. */
VT_XS_FN void vt_xs_fold1(int64_t *a, float x, int e0) {
    const uint32_t u = vt_xs_bits(x);
    const int ex = (int)((u >> 23) & 0xff);
    const int s = ex - 150 - e0; /* normal x = m * 2^(ex-150), m = 2^23 + mantissa */
    if (VT_XS_UNLIKELY(ex == 0 || s < 0 || s > VT_XS_FAST_S_MAX)) {
        vt_xs_fold_slow(a, x, e0);
        return;
    }
    const uint64_t m = (u & 0x7fffffu) | 0x800000u;
    const int sl = s < VT_XSUM_LO_BITS ? s : VT_XSUM_LO_BITS, sh = s - VT_XSUM_LO_BITS;
    const int64_t lo_add = (int64_t)((m << sl) & (uint64_t)VT_XS_LO_MASK);
    const int64_t hi_add = (int64_t)(sh >= 0 ? m << sh : m >> -sh);
    const int64_t neg = -(int64_t)(u >> 31); /* all ones for a negative x */
    /* +-(hi_add * 2^52 + lo_add); the carry of lo (floor, -1..1) moves into hi */
    const int64_t lo = a[1] + ((lo_add ^ neg) - neg);
    a[0] += ((hi_add ^ neg) - neg) + (lo >> VT_XSUM_LO_BITS);
    a[1] = lo & VT_XS_LO_MASK;
}

/* The total of accumulator element a rounded to float; unit = 2^e0. The canonical form
 * first (a towers' sum has lo up to 2^63): the value alone decides the rounding. Then
 * hi * 2^52 + lo rounded to double (lo < 2^52 and |hi| < 2^53 are exact), times a power
 * of two (exact), to float. */
VT_XS_FN float vt_xs_round1(const int64_t *a, double unit) {
    const int64_t lo = a[1];
    const int64_t hi = a[0] + (lo >> VT_XSUM_LO_BITS);
    if (VT_XS_UNLIKELY(hi >= VT_XS_NAN_HI || hi < -VT_XS_NAN_HI)) /* a poison in it */
        return NAN;
    return (float)(((double)hi * 0x1p52 + (double)(lo & VT_XS_LO_MASK)) * unit);
}

#endif
