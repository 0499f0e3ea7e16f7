/*
 * xsum.h: exact sums of floats — the fixed-point accumulators that make a step on N
 * towers the same bits as on one (docs/design.md §3.1). A sum of floats rounded as it
 * goes depends on the order of its terms, and towers add the clips of a batch in another
 * order than one device does; in float32 the difference (1e-7 of a step) then grows
 * through max-pool windows whose two largest values float32 cannot tell apart, up to 1e-2
 * over an epoch (docs/notebook/results.md, 2026-11-25). Here every term (one clip's contribution:
 * its weight gradient, its batch-norm sums) is turned into an integer count of units of
 * 2^e0, rounded to nearest, and integers add exactly in any order: one device, any split
 * into towers and micro-batches, and the towers' sum across threads or processes (an
 * int64 sum, reduce.h) all reach the same integer; it is rounded to float once.
 *
 * An accumulator element is two int64 side by side, hi and lo (acc[2i], acc[2i+1]: a
 * slice of a tensor's elements is a slice of its accumulator), value (hi * 2^52 + lo) * 2^e0, with lo
 * in [0, 2^52) after every fold: 2,048 accumulators (towers, processes) still sum limb by
 * limb without overflow, and xsum_round reads lo up to 2^63. The units: VT_XSUM_GRAD_E0
 * for gradients (terms below 2^-80 ~ 8e-25 round to 0 or one unit; |sum| up to 2^34
 * ~ 1.7e10), VT_XSUM_STAT_E0 for batch-norm sums (2^-60 ~ 8.7e-19; up to 2^54 ~ 1.8e16).
 * Past the range (a diverged run) the sum is NaN, the same on every tower count: a term
 * of 2^97 units or more (a gradient of 2^17 = 131072 from one clip, a batch-norm sum of
 * 2^37), inf or NaN is poison, and a total that holds one rounds to NaN; every other term
 * is small enough that up to 2^14 of them never saturate, so their sum is exact in any
 * order (xsum_arith.h). A saturating clamp used to depend on the order of the terms: at
 * lr 10, one tower and two parted at the first batch-norm sum past the range.
 *
 * It must never depend on the order of the terms or the thread count: each element's
 * fold is a function of its own values only.
 */
#ifndef VT_XSUM_H
#define VT_XSUM_H

#include <stdint.h>

#define VT_XSUM_GRAD_E0 (-80)
#define VT_XSUM_STAT_E0 (-60)
#define VT_XSUM_LO_BITS 52
/* The gradients' range, 2^(62 + LO_BITS + GRAD_E0) = 2^34: a reduced gradient whose norm
 * reaches it is treated as non-finite (tower_worker.c), as a poisoned one (NaN) is. */
#define VT_XSUM_GRAD_MAX 17179869184.0

/* acc (2n int64, element i at acc[2i], acc[2i+1]) += x[0..n) in units of 2^e0. */
void vt_xsum_fold(int64_t *acc, const float *x, int64_t n, int e0, int threads);
/* acc = x[0..n) in units of 2^e0, acc's old values not read: the integers a fill of zeros
 * and vt_xsum_fold would leave (the first fold of an accumulator since it was emptied). */
void vt_xsum_fold_init(int64_t *acc, const float *x, int64_t n, int e0, int threads);
/* out[0..n) = the accumulated values rounded to float (round to nearest). */
void vt_xsum_round(float *out, const int64_t *acc, int64_t n, int e0, int threads);
/* dst (2n) += src (2n), limb by limb: the sum of two accumulators (reduce.h). */
void vt_xsum_add(int64_t *dst, const int64_t *src, int64_t n);

/* The instruction sets the host loops above can run: each gives the same integers and
 * floats (xsum.c). The loops take the widest the CPU has (vt_xsum_isa_best); a test runs
 * each one up to it, on one thread, through the _isa forms (init: as vt_xsum_fold_init). */
enum { VT_XSUM_SCALAR, VT_XSUM_AVX2, VT_XSUM_AVX512 };
int vt_xsum_isa_best(void);
void vt_xsum_fold_isa(int isa, int64_t *acc, const float *x, int64_t n, int e0, int init);
void vt_xsum_round_isa(int isa, float *out, const int64_t *acc, int64_t n, int e0);

#endif
