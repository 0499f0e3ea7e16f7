/*
 * test_xsum.c: the exact sums of models/xsum.h, against two outside truths.
 *  1. Order: the same terms folded in another order, split into several accumulators
 *     (towers, micro-batches) whose limbs are then added (vt_xsum_add, what the reducers
 *     do), with 1 thread or 2, reach the same integer and the same float: bit for bit.
 *  2. Value: for terms a unit grid holds exactly (|x| in [2^-56, 2^14) for the gradient
 *     unit 2^-80), the accumulated value equals the sum taken in __float128 (113-bit
 *     mantissa: every partial sum of these terms, which span at most 2^-80..2^24, is
 *     exact there), and the float it rounds to is within 1 ulp of that exact sum rounded
 *     once (xsum_round goes through double: 53 bits, then 24 — a double rounding that may
 *     land one ulp off at a tie; counted, and required rare).
 *  3. Edges: terms below the unit round to the nearest unit; subnormals, signed zeros,
 *     cancellation to exactly zero, huge terms saturating the same way in every order,
 *     the carry between the limbs in both directions.
 *  4. Who sums exactly (vt_towers_exact_for): CPU towers by default, GPU towers on request.
 *  5. A first fold with init (vt_xsum_fold_init, what an accumulator's first fold since
 *     zero_grad takes: it is not filled) over garbage gives, with the other folds after it,
 *     the floats of every fold into a fill of zeros whichever clip comes first (in the same
 *     order, the very limbs), with poisons, huge and tiny terms among them.
 *  6. Every instruction set the host loops run on this CPU (xsum.c: AVX-512, AVX2, plain)
 *     against xsum_arith.h's rule element by element (vt_xs_fold1, vt_xs_round1: the
 *     truth the other checks hold the plain loop to): the very limbs and float bits, for
 *     every exponent and sign, zeros, subnormals, inf, NaN, the fast path's edges, lanes
 *     mixing slow and fast elements, all-zero lane groups, non-canonical limbs (a towers'
 *     sum), poisoned totals, odd lengths and starts off the vector alignment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/xsum.h"
#include "models/xsum_arith.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/testutil.h"

#define E0 VT_XSUM_GRAD_E0

/* The value of element i, canonical (hi * 2^52 + lo, lo in [0, 2^52)). */
static __int128 value_of(const int64_t *acc, int64_t i) {
    int64_t lo = acc[2 * i + 1], hi = acc[2 * i] + (lo >> VT_XSUM_LO_BITS);
    return (__int128)hi * ((__int128)1 << VT_XSUM_LO_BITS) +
           (lo & (((int64_t)1 << VT_XSUM_LO_BITS) - 1));
}

/* A float of random sign, |x| = 2^e * (1 + u) with e uniform in [emin, emax). */
static float rand_term(vt_rng *r, int emin, int emax) {
    float m = 1.0f + (float)vt_rng_uniform(r);
    int e = emin + (int)vt_rng_below(r, (uint32_t)(emax - emin));
    float x = ldexpf(m, e);
    return vt_rng_below(r, 2) ? -x : x;
}

/* n elements x k terms: terms[t * n + i] is term t of element i. */
static void fold_terms(int64_t *acc, const float *terms, int n, int k, const int *order,
                       int threads) {
    memset(acc, 0, sizeof(int64_t) * 2 * (size_t)n);
    for (int t = 0; t < k; t++)
        vt_xsum_fold(acc, terms + (int64_t)order[t] * n, n, E0, threads);
}

static void shuffle(int *a, int k, vt_rng *r) {
    for (int i = k - 1; i > 0; i--) {
        int j = (int)vt_rng_below(r, (uint32_t)i + 1);
        int t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

static void order_and_value(void) {
    enum { N = 50000, K = 24 }; /* N > the fold's parallel threshold: 2 threads split it */
    vt_rng r;
    vt_rng_seed(&r, 7);
    float *terms = vt_malloc(sizeof(float) * N * K);
    for (int64_t i = 0; i < (int64_t)N * K; i++)
        terms[i] = rand_term(&r, -56, 14);
    /* cancellation: element 0's terms sum to exactly 0, element 1's to one tiny value */
    for (int t = 0; t < K; t += 2) {
        terms[(int64_t)t * N] = 1000.0f + (float)t;
        terms[(int64_t)(t + 1) * N] = -(1000.0f + (float)t);
        terms[(int64_t)t * N + 1] = ldexpf(1.0f, 13);
        terms[(int64_t)(t + 1) * N + 1] = -ldexpf(1.0f, 13);
    }
    terms[(int64_t)(K - 2) * N + 1] = ldexpf(1.0f, -55);
    terms[(int64_t)(K - 1) * N + 1] = 0.0f;
    int order[K];
    for (int t = 0; t < K; t++)
        order[t] = t;
    int64_t *a = vt_malloc(sizeof(int64_t) * 2 * N), *b = vt_malloc(sizeof(int64_t) * 2 * N);
    int64_t *part = vt_malloc(sizeof(int64_t) * 2 * N);
    float *fa = vt_malloc(sizeof(float) * N), *fb = vt_malloc(sizeof(float) * N);
    fold_terms(a, terms, N, K, order, 1);
    vt_xsum_round(fa, a, N, E0, 1);

    /* 1. other orders, threads, and splits into accumulators added limb by limb */
    for (int trial = 0; trial < 4; trial++) {
        shuffle(order, K, &r);
        fold_terms(b, terms, N, K, order, 1 + trial % 2);
        int same = 1;
        for (int i = 0; i < N; i++)
            same &= value_of(a, i) == value_of(b, i);
        TCHECK(same, "order %d: another integer sum", trial);
        /* split: terms [0, cut) in b, [cut, K) in part, then b += part (unnormalised lo) */
        const int cut = 1 + (int)vt_rng_below(&r, K - 1);
        fold_terms(b, terms, N, cut, order, 2);
        fold_terms(part, terms, N, K - cut, order + cut, 1);
        vt_xsum_add(b, part, N);
        vt_xsum_round(fb, b, N, E0, 2);
        TCHECK(!memcmp(fa, fb, sizeof(float) * N), "split at %d of %d: other floats", cut, K);
    }
    TCHECK(value_of(a, 0) == 0 && fa[0] == 0.0f, "exact cancellation: %g", (double)fa[0]);
    TCHECK(fa[1] == ldexpf(1.0f, -55), "cancellation to 2^-55: %g", (double)fa[1]);

    /* 2. the value: __float128 holds every partial sum of these terms exactly */
    int64_t off_ulp = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        __float128 s = 0;
        for (int t = 0; t < K; t++)
            s += (__float128)terms[(int64_t)t * N + i];
        __float128 v = (__float128)value_of(a, i) * (__float128)ldexp(1.0, E0);
        if (v != s)
            bad++;
        float once = (float)s;
        if (fa[i] != once) {
            off_ulp++;
            if (fabsf(fa[i] - once) > fabsf(nextafterf(once, INFINITY) - once))
                bad++;
        }
    }
    printf("value: %d elements of %d terms: %lld not the exact sum, %lld one ulp off the "
           "correctly rounded float (double rounding)\n", N, K, (long long)bad, (long long)off_ulp);
    TCHECK(bad == 0, "%lld accumulators differ from the exact sum, or round > 1 ulp off",
           (long long)bad);
    /* a double rounding lands off only at near-ties: a few in a million */
    TCHECK(off_ulp <= N / 1000, "%lld of %d floats one ulp off", (long long)off_ulp, N);
    free(terms);
    free(a);
    free(b);
    free(part);
    free(fa);
    free(fb);
}

static void edges(void) {
    int64_t acc[2 * 8];
    float out[8];
    /* below the unit: 2^-81 is half a unit (rounds away from zero to 1 unit), 2^-82 is 0 */
    const float x[8] = {ldexpf(1.0f, -81), ldexpf(1.0f, -82), 1e-45f /* subnormal */, -0.0f,
                        ldexpf(1.0f, 16), INFINITY, NAN, -INFINITY};
    memset(acc, 0, sizeof acc);
    vt_xsum_fold(acc, x, 8, E0, 1);
    vt_xsum_round(out, acc, 8, E0, 1);
    TCHECK(out[0] == ldexpf(1.0f, -80), "half a unit: %g", (double)out[0]);
    TCHECK(out[1] == 0.0f && out[2] == 0.0f && out[3] == 0.0f, "below half a unit: %g %g %g",
           (double)out[1], (double)out[2], (double)out[3]);
    TCHECK(out[4] == ldexpf(1.0f, 16), "2^16 (the slow path): %g", (double)out[4]);
    TCHECK(isnan(out[5]) && isnan(out[6]) && isnan(out[7]),
           "inf, NaN, -inf are poison, the total NaN: %g %g %g", (double)out[5],
           (double)out[6], (double)out[7]);
    /* saturation is the same in any order: huge, then -1 */
    int64_t a1[2] = {0, 0}, a2[2] = {0, 0};
    const float big = ldexpf(1.0f, 40), one = -1.0f;
    for (int k = 0; k < 3; k++)
        vt_xsum_fold(a1, &big, 1, E0, 1);
    vt_xsum_fold(a1, &one, 1, E0, 1);
    vt_xsum_fold(a2, &one, 1, E0, 1);
    for (int k = 0; k < 3; k++)
        vt_xsum_fold(a2, &big, 1, E0, 1);
    float o1, o2;
    vt_xsum_round(&o1, a1, 1, E0, 1);
    vt_xsum_round(&o2, a2, 1, E0, 1);
    printf("saturated: %g and %g\n", (double)o1, (double)o2);
    TCHECK(isnan(o1) && isnan(o2), "2^40 x 3 is NaN in either order: %g %g", (double)o1,
           (double)o2);
    /* a clamp at the range depended on the order (big, big, -big clamps; big, -big, big
     * does not): now a poison (2^17 and up) makes NaN in any order and split, even beside
     * its negative, and the largest terms that are not (just under 2^17, 2^14 of them)
     * sum exactly */
    int64_t p1[2] = {0, 0}, p2[2] = {0, 0}, p3[2] = {0, 0};
    const float pb = ldexpf(1.0f, 20), mb = -ldexpf(1.0f, 20);
    vt_xsum_fold(p1, &pb, 1, E0, 1);
    vt_xsum_fold(p1, &mb, 1, E0, 1);
    vt_xsum_fold(p2, &pb, 1, E0, 1);
    vt_xsum_add(p1, p2, 1);
    vt_xsum_round(&o1, p1, 1, E0, 1);
    TCHECK(isnan(o1), "a poison cancelled by its negative is still NaN: %g", (double)o1);
    const float near = nextafterf(ldexpf(1.0f, 17), 0.0f);
    for (int k = 0; k < (1 << 14); k++)
        vt_xsum_fold(p3, &near, 1, E0, 1);
    vt_xsum_round(&o2, p3, 1, E0, 1);
    TCHECK(o2 == near * (float)(1 << 14), "2^14 terms just under the poison sum exactly: %g",
           (double)o2);
    /* the carry between the limbs: 2^-29 (lo's top bit region) + 2^-29, minus back */
    int64_t c[2] = {0, 0};
    const float h = ldexpf(1.0f, -29), mh = -ldexpf(1.0f, -29), tiny = ldexpf(3.0f, -80);
    vt_xsum_fold(c, &h, 1, E0, 1);
    vt_xsum_fold(c, &h, 1, E0, 1);
    vt_xsum_fold(c, &tiny, 1, E0, 1);
    vt_xsum_fold(c, &mh, 1, E0, 1);
    vt_xsum_fold(c, &mh, 1, E0, 1);
    float oc;
    vt_xsum_round(&oc, c, 1, E0, 1);
    TCHECK(oc == tiny && c[0] == 0 && c[1] == 3, "carry up and borrow down: %g (hi %lld lo %lld)",
           (double)oc, (long long)c[0], (long long)c[1]);
    /* the stats unit, 2^-60: a sum of squares of 1e5 values of 1e3 (1e11) keeps 1e-7 */
    int64_t q[2] = {0, 0};
    const float sq = 1e6f, small = 1e-7f;
    for (int k = 0; k < 100000; k++)
        vt_xsum_fold(q, &sq, 1, VT_XSUM_STAT_E0, 1);
    vt_xsum_fold(q, &small, 1, VT_XSUM_STAT_E0, 1);
    __int128 v = value_of(q, 0), want = (__int128)100000000000LL << 60;
    double rest = (double)(v - want) * ldexp(1.0, VT_XSUM_STAT_E0);
    TCHECK(fabs(rest - (double)small) <= ldexp(1.0, VT_XSUM_STAT_E0),
           "1e11 + 1e-7 in stats units: rest %.9g", rest);
}

/* Who sums exactly (tower.h vt_towers_exact_for): CPU towers by default, GPU towers only
 * when VT_EXACT_SUMS=1 asks, nobody with VT_EXACT_SUMS=0 or exact_off. A rule on names:
 * no GPU needed. */
static void exact_rule(void) {
    vt_device_list cpu = {0}, mixed = {0};
    cpu.n = 2;
    snprintf(cpu.dev[0].backend, sizeof cpu.dev[0].backend, "cpu");
    snprintf(cpu.dev[1].backend, sizeof cpu.dev[1].backend, "cpu-ref");
    mixed = cpu;
    snprintf(mixed.dev[1].backend, sizeof mixed.dev[1].backend, "cuda");
    static const struct { const char *env; int off, cpu, mixed; } want[] = {
        {NULL, 0, 1, 0}, {"1", 0, 1, 1}, {"0", 0, 0, 0}, {NULL, 1, 0, 0}, {"1", 1, 0, 0}};
    for (int i = 0; i < (int)(sizeof want / sizeof want[0]); i++) {
        if (want[i].env)
            setenv("VT_EXACT_SUMS", want[i].env, 1);
        else
            unsetenv("VT_EXACT_SUMS");
        TCHECK(vt_towers_exact_for(&cpu, want[i].off) == want[i].cpu &&
                   vt_towers_exact_for(&mixed, want[i].off) == want[i].mixed,
               "VT_EXACT_SUMS=%s exact_off %d: cpu towers %d (want %d), with a GPU %d (want %d)",
               want[i].env ? want[i].env : "(unset)", want[i].off,
               vt_towers_exact_for(&cpu, want[i].off), want[i].cpu,
               vt_towers_exact_for(&mixed, want[i].off), want[i].mixed);
    }
    unsetenv("VT_EXACT_SUMS");
}

static void first_fold(void) {
    enum { N = 2000, K = 7 };
    vt_rng r;
    vt_rng_seed(&r, 5);
    float *terms = malloc(sizeof(float) * N * K);
    for (int i = 0; i < N * K; i++)
        terms[i] = rand_term(&r, -100, 40); /* below the unit, across the fast path, huge */
    terms[3] = NAN;
    terms[N + 4] = INFINITY;
    terms[2 * N + 5] = -0.0f;
    terms[3 * N + 6] = 1e-45f; /* subnormal */
    int64_t *want = calloc(2 * N, sizeof(int64_t)), *got = malloc(sizeof(int64_t) * 2 * N);
    for (int k = 0; k < K; k++)
        vt_xsum_fold(want, terms + (int64_t)k * N, N, E0, 1);
    float *fw = malloc(sizeof(float) * N), *fg = malloc(sizeof(float) * N);
    vt_xsum_round(fw, want, N, E0, 1);
    int bad = 0, bad_limbs = 0;
    for (int first = 0; first < K; first++) { /* each clip as the one folded with init */
        memset(got, 0x5a, sizeof(int64_t) * 2 * N); /* garbage: init must not read it */
        vt_xsum_fold_init(got, terms + (int64_t)first * N, N, E0, 1 + (first & 1));
        for (int k = 0; k < K; k++)
            if (k != first)
                vt_xsum_fold(got, terms + (int64_t)k * N, N, E0, 1 + (k & 1));
        /* in the same order (clip 0 first) the very limbs; in another, the same floats (a
         * saturated total's limbs depend on the order, its NaN does not: xsum_arith.h) */
        if (first == 0)
            bad_limbs += memcmp(got, want, sizeof(int64_t) * 2 * N) != 0;
        vt_xsum_round(fg, got, N, E0, 1);
        bad += memcmp(fg, fw, sizeof(float) * N) != 0;
    }
    TCHECK(bad_limbs == 0, "a first fold with init over garbage: other limbs than a fill and a "
           "fold");
    TCHECK(bad == 0, "a first fold with init differs from a fill and a fold in %d of %d orders",
           bad, K);
    printf("first folds: %d clips, each first with init over garbage: the floats (and in order "
           "the limbs) of folds into zeros\n", K);
    free(fw);
    free(fg);
    free(terms);
    free(want);
    free(got);
}

static void shuffle_floats(float *a, int n, vt_rng *r) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)vt_rng_below(r, (uint32_t)i + 1);
        float t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* A float from its bits. */
static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Limbs of an accumulator before a fold: canonical (lo in [0, 2^52)) or a towers' sum's
 * (lo up to 2^62), hi small or large, of either sign; within what a sum can hold, so that
 * the rule's int64 arithmetic cannot overflow. */
static void rand_limbs(int64_t *a, vt_rng *r) {
    const int big = vt_rng_below(r, 8) == 0;
    const int64_t hi = (int64_t)(vt_rng_u64(r) >> (big ? 3 : 24)); /* < 2^61 or < 2^40 */
    a[0] = vt_rng_below(r, 2) ? -hi : hi;
    a[1] = (int64_t)(vt_rng_u64(r) >> (vt_rng_below(r, 4) ? 12 : 2));
}

static void isa_paths(void) {
    enum { N = 6151 }; /* odd, and more than a few lane groups of every kind */
    vt_rng r;
    vt_rng_seed(&r, 11);
    float *x = vt_malloc(sizeof(float) * N), *fw = vt_malloc(sizeof(float) * N);
    float *fg = vt_malloc(sizeof(float) * N);
    int64_t *acc = vt_malloc(sizeof(int64_t) * 2 * N), *want = vt_malloc(sizeof(int64_t) * 2 * N);
    int64_t *got = vt_malloc(sizeof(int64_t) * 2 * N);
    static const uint32_t edge[] = {
        0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
        0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u,
        0xffc00000u, 0x7f800001u, 0xff812345u};
    int i = 0;
    for (int e = 0; e < (int)(sizeof edge / sizeof edge[0]); e++)
        x[i++] = from_bits(edge[e]);
    /* every exponent and sign, with the mantissa 0, all ones, and random */
    for (uint32_t ex = 0; ex < 256; ex++)
        for (uint32_t sg = 0; sg < 2; sg++) {
            x[i++] = from_bits(sg << 31 | ex << 23);
            x[i++] = from_bits(sg << 31 | ex << 23 | 0x7fffffu);
            x[i++] = from_bits(sg << 31 | ex << 23 | ((uint32_t)vt_rng_u64(&r) & 0x7fffffu));
        }
    /* the rest: gradients' magnitudes with zeros and random bits among them */
    while (i < N) {
        const uint32_t kind = vt_rng_below(&r, 8);
        x[i++] = kind == 0   ? 0.0f
                 : kind == 1 ? from_bits((uint32_t)vt_rng_u64(&r))
                             : rand_term(&r, -70, 20);
    }
    shuffle_floats(x, N, &r); /* every kind beside every other in the lanes */
    /* a run of zeros filling whole lane groups wherever the vectors start */
    for (int k = 2000; k < 2040; k++)
        x[k] = vt_rng_below(&r, 2) ? 0.0f : -0.0f;
    for (int k = 0; k < N; k++)
        rand_limbs(acc + 2 * k, &r);
    /* totals at the poison's edge, lo carrying them over it or not */
    for (int k = 0; k < 64; k++) {
        int64_t *a = acc + 2 * (int64_t)vt_rng_below(&r, N);
        a[0] = (k & 1 ? -VT_XS_NAN_HI : VT_XS_NAN_HI) - (k >> 1 & 3);
        a[1] = k & 8 ? ((int64_t)1 << 53) + (k >> 4) : (k >> 4);
    }
    static const int start[] = {0, 1, 3, 7, 8, 13};
    static const int len[] = {0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 4095, 4096, 4097};
    const int e0s[2] = {VT_XSUM_GRAD_E0, VT_XSUM_STAT_E0};
    int bad = 0, runs = 0;
    const int best = vt_xsum_isa_best();
    for (int isa = VT_XSUM_SCALAR; isa <= best; isa++)
        for (int e = 0; e < 2; e++)
            for (int si = 0; si < (int)(sizeof start / sizeof start[0]); si++)
                for (int li = 0; li <= (int)(sizeof len / sizeof len[0]); li++) {
                    const int s0 = start[si];
                    const int n = li < (int)(sizeof len / sizeof len[0]) ? len[li] : N - s0;
                    const int e0 = e0s[e];
                    /* fold into the limbs as they are */
                    memcpy(want, acc, sizeof(int64_t) * 2 * N);
                    memcpy(got, acc, sizeof(int64_t) * 2 * N);
                    for (int k = s0; k < s0 + n; k++)
                        vt_xs_fold1(want + 2 * k, x[k], e0);
                    vt_xsum_fold_isa(isa, got + 2 * s0, x + s0, n, e0, 0);
                    bad += memcmp(want, got, sizeof(int64_t) * 2 * N) != 0;
                    /* the first fold (init) over garbage */
                    memset(got, 0x5a, sizeof(int64_t) * 2 * N);
                    memset(want, 0x5a, sizeof(int64_t) * 2 * N);
                    for (int k = s0; k < s0 + n; k++) {
                        want[2 * k] = want[2 * k + 1] = 0;
                        vt_xs_fold1(want + 2 * k, x[k], e0);
                    }
                    vt_xsum_fold_isa(isa, got + 2 * s0, x + s0, n, e0, 1);
                    bad += memcmp(want, got, sizeof(int64_t) * 2 * N) != 0;
                    /* rounding: the limbs as they are (large hi: poisoned, NaN) */
                    memset(fw, 0x5a, sizeof(float) * N);
                    memset(fg, 0x5a, sizeof(float) * N);
                    for (int k = s0; k < s0 + n; k++)
                        fw[k] = vt_xs_round1(acc + 2 * k, ldexp(1.0, e0));
                    vt_xsum_round_isa(isa, fg + s0, acc + 2 * s0, n, e0);
                    bad += memcmp(fw, fg, sizeof(float) * N) != 0;
                    runs += 3;
                }
    printf("instruction sets: plain to %s, %d folds, first folds and roundings of up to %d "
           "elements: %d differ from xsum_arith.h's rule\n",
           best == VT_XSUM_AVX512 ? "AVX-512" : best == VT_XSUM_AVX2 ? "AVX2" : "plain", runs,
           N, bad);
    TCHECK(bad == 0, "%d of %d loops over the instruction sets differ from the rule", bad,
           runs);
    free(x);
    free(fw);
    free(fg);
    free(acc);
    free(want);
    free(got);
}

int main(void) {
    exact_rule();
    first_fold();
    order_and_value();
    edges();
    isa_paths();
    return vt_test_done("test_xsum");
}
