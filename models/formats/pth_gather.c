/*
 * pth_gather.c: a tensor out of a raw torch storage (pth_gather.h) — little-endian
 * elements of any storage dtype converted to float32, strided views gathered into
 * row-major order. Byte order is spelled out (no host-order casts), so the result is the
 * same on any machine.
 *
 * It must never read outside the storage: callers check vt_pth_in_bounds first, and it
 * touches exactly the elements that check covered.
 */
#include "models/formats/pth_gather.h"

#include <string.h>

static float half_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 31u, man = h & 1023u, u;
    if (ex == 31)
        u = sign | 0x7f800000u | man << 13;
    else if (ex)
        u = sign | (ex + 112) << 23 | man << 13;
    else if (man) { /* subnormal: exact in float */
        float f = (float)man * 0x1p-24f;
        return sign ? -f : f;
    } else
        u = sign;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* count elements of dtype d from src (element stride `stride`) to dst as floats. The
 * conversions are IEEE round-to-nearest, as torch's .float() is, so fp32 reference values
 * written by torch compare bitwise. */
static void convert_run(float *dst, const uint8_t *src, vt_pkl_dtype d, int64_t count,
                        int64_t stride) {
    size_t es = (size_t)vt_pkl_dtype_size(d), step = (size_t)stride * es;
    for (int64_t i = 0; i < count; i++, src += step) {
        uint8_t b[8];
        memcpy(b, src, es);
        switch (d) {
        case VT_PKL_F32: {
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                         (uint32_t)b[3] << 24;
            memcpy(&dst[i], &u, 4);
            break;
        }
        case VT_PKL_F64: {
            uint64_t u = 0;
            double v;
            for (int k = 7; k >= 0; k--)
                u = u << 8 | b[k];
            memcpy(&v, &u, 8);
            dst[i] = (float)v;
            break;
        }
        case VT_PKL_F16: dst[i] = half_to_f32((uint16_t)(b[0] | b[1] << 8)); break;
        case VT_PKL_BF16: {
            uint32_t u = ((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16;
            memcpy(&dst[i], &u, 4);
            break;
        }
        case VT_PKL_I64: {
            uint64_t u = 0;
            for (int k = 7; k >= 0; k--)
                u = u << 8 | b[k];
            int64_t v;
            memcpy(&v, &u, 8);
            dst[i] = (float)v;
            break;
        }
        case VT_PKL_I32: {
            uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                         (uint32_t)b[3] << 24;
            dst[i] = (float)(int32_t)u;
            break;
        }
        case VT_PKL_I16: dst[i] = (float)(int16_t)(uint16_t)(b[0] | b[1] << 8); break;
        case VT_PKL_I8: dst[i] = (float)(int8_t)b[0]; break;
        case VT_PKL_U8: dst[i] = (float)b[0]; break;
        case VT_PKL_BOOL8: dst[i] = b[0] ? 1.0f : 0.0f; break;
        default: dst[i] = 0; break;
        }
    }
}

/* Runs along the last dimension, the others counted like an odometer. */
void vt_pth_gather(float *dst, const uint8_t *base, const vt_pkl_tensor *t) {
    if (t->ndim == 0) {
        convert_run(dst, base + (size_t)t->offset * (size_t)vt_pkl_dtype_size(t->dtype),
                    t->dtype, 1, 1);
        return;
    }
    int last = t->ndim - 1;
    int64_t idx[8] = {0}, run = t->shape[last];
    size_t es = (size_t)vt_pkl_dtype_size(t->dtype);
    for (int64_t o = 0; o < t->numel; o += run) {
        int64_t off = t->offset;
        for (int d = 0; d < last; d++)
            off += idx[d] * t->stride[d];
        convert_run(dst + o, base + (size_t)off * es, t->dtype, run, t->stride[last]);
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
}

/* offset + sum (size-1)*stride, every step checked for overflow. */
int vt_pth_in_bounds(const vt_pkl_tensor *t, int64_t storage_numel, int64_t *reach) {
    int64_t last = t->offset;
    *reach = last;
    if (t->numel == 0)
        return t->offset <= storage_numel;
    for (int d = 0; d < t->ndim; d++) {
        int64_t span;
        if (__builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &span) ||
            __builtin_add_overflow(last, span, &last))
            return 0;
    }
    *reach = last;
    return last < storage_numel;
}
