/*
 * bf16.h: bfloat16 as vidtrain stores it — the top 16 bits of an IEEE float32 (sign, the
 * 8 exponent bits, 7 mantissa bits), converted from float32 by rounding to nearest, ties
 * to even, exactly as PyTorch's c10::BFloat16 (round_to_nearest_even) and CUDA's
 * __float2bfloat16_rn do; NaN stays a (quiet) NaN. Converting back is exact.
 *
 * Plain C, header-only, no CUDA: the CPU reference backend, host code and the tests use
 * it. It must never change rounding mode: the tests compare with PyTorch bit for bit.
 */
#ifndef VT_BF16_H
#define VT_BF16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t vt_bf16;

static inline vt_bf16 vt_bf16_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep the sign, force a quiet NaN */
        return (vt_bf16)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even on the dropped 16 bits */
    return (vt_bf16)(u >> 16);
}

static inline float vt_bf16_to_f32(vt_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to the nearest bf16, as a float (what a bf16 store then load gives). */
static inline float vt_bf16_round(float f) { return vt_bf16_to_f32(vt_bf16_from_f32(f)); }

#endif
