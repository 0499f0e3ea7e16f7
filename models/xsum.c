/*
 * xsum.c: the fixed-point accumulators of xsum.h, on the host (the CPU backends' ops
 * xsum_fold and xsum_round call these; a CUDA version would be a kernel of the same
 * arithmetic).
 */
#include "models/xsum.h"

#include <math.h>
#include <string.h>

#include "models/common.h"

#define LO_MASK ((((int64_t)1) << VT_XSUM_LO_BITS) - 1)
/* The largest total: hi may reach 2^62 and still take the lo carry and another fold. */
#define XMAX ((((__int128)1) << (62 + VT_XSUM_LO_BITS)) - 1)
/* Loops this long go parallel (as cpu_blocks.h's CPU_PAR_MIN). */
#define XSUM_PAR_MIN 32768

/* x in units of 2^e0, rounded to nearest (halves away from zero), saturated at XMAX. */
static inline __int128 to_units(float x, int e0) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const int ex = (int)((u >> 23) & 0xff);
    uint32_t m = u & 0x7fffffu;
    if (ex == 0xff) /* inf, NaN: the largest term, with inf's sign (NaN: positive) */
        return m == 0 && (u >> 31) ? -XMAX : XMAX;
    int e = -149; /* x = m * 2^e */
    if (ex != 0) {
        m |= 0x800000u;
        e = ex - 150;
    }
    const int s = e - e0;
    __int128 v;
    if (s >= 0)
        v = s > 90 ? XMAX : VT_MIN((__int128)m << s, XMAX); /* m < 2^24: no overflow */
    else if (s < -25)
        v = 0;
    else
        v = ((uint64_t)m + ((uint64_t)1 << (-s - 1))) >> -s;
    return (u >> 31) ? -v : v;
}

static inline __int128 clamp_x(__int128 v) { return v > XMAX ? XMAX : v < -XMAX ? -XMAX : v; }

/* The rare terms: through __int128, rounded to a unit and saturated. */
static __attribute__((noinline)) void fold_slow(int64_t *a, float x, int e0) {
    if (x == 0.0f)
        return;
    __int128 v = (__int128)a[0] * ((__int128)1 << VT_XSUM_LO_BITS) + a[1]; /* hi may be < 0 */
    v = clamp_x(v + to_units(x, e0));
    a[0] = (int64_t)(v >> VT_XSUM_LO_BITS); /* floor: lo stays in [0, 2^52) */
    a[1] = (int64_t)(v & LO_MASK);
}

/* acc element a += x: the common case (a normal x of at most 2^(FAST_S_MAX+24) units)
 * in int64 arithmetic without branches on the data, else fold_slow. */
#define FAST_S_MAX 70 /* hi moves by < 2^42 a term: no overflow in any real sum */
static inline void fold1(int64_t *a, float x, int e0) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const int ex = (int)((u >> 23) & 0xff);
    const int s = ex - 150 - e0; /* normal x = m * 2^(ex-150), m = 2^23 + mantissa */
    if (__builtin_expect(ex == 0 || s < 0 || s > FAST_S_MAX, 0)) {
        fold_slow(a, x, e0);
        return;
    }
    const uint64_t m = (u & 0x7fffffu) | 0x800000u;
    const int sl = s < VT_XSUM_LO_BITS ? s : VT_XSUM_LO_BITS, sh = s - VT_XSUM_LO_BITS;
    const int64_t lo_add = (int64_t)((m << sl) & (uint64_t)LO_MASK);
    const int64_t hi_add = (int64_t)(sh >= 0 ? m << sh : m >> -sh);
    const int64_t neg = -(int64_t)(u >> 31); /* all ones for a negative x */
    /* +-(hi_add * 2^52 + lo_add); the carry of lo (floor, -1..1) moves into hi */
    const int64_t lo = a[1] + ((lo_add ^ neg) - neg);
    a[0] += ((hi_add ^ neg) - neg) + (lo >> VT_XSUM_LO_BITS);
    a[1] = lo & LO_MASK;
}

void vt_xsum_fold(int64_t *acc, const float *x, int64_t n, int e0, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t i = 0; i < n; i++)
        fold1(acc + 2 * i, x[i], e0);
}

void vt_xsum_round(float *out, const int64_t *acc, int64_t n, int e0, int threads) {
    const double unit = ldexp(1.0, e0);
#pragma omp parallel for num_threads(threads) schedule(static) if (n > XSUM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        /* the canonical form first (a towers' sum has lo up to 2^63): the value alone
         * decides the rounding */
        const int64_t lo = acc[2 * i + 1];
        const int64_t hi = acc[2 * i] + (lo >> VT_XSUM_LO_BITS);
        /* hi * 2^52 + lo rounded to double (lo < 2^52 and |hi| < 2^53 are exact), times
         * a power of two (exact), to float: a function of the value only */
        out[i] = (float)(((double)hi * 0x1p52 + (double)(lo & LO_MASK)) * unit);
    }
}

void vt_xsum_add(int64_t *dst, const int64_t *src, int64_t n) {
    for (int64_t i = 0; i < 2 * n; i++)
        dst[i] += src[i];
}
