/*
 * pth_gather.h: copying one tensor out of a raw torch storage as float32 — the storage's
 * little-endian elements (float32/64, float16, bfloat16, int8..int64, uint8, bool)
 * converted with IEEE round-to-nearest as torch's .float() does, a strided view (any
 * strides, 0 included, and an offset) gathered into row-major order. Used by pth.c; it
 * knows nothing of files or pickles beyond the tensor description of pickle.h.
 */
#ifndef VT_PTH_GATHER_H
#define VT_PTH_GATHER_H

#include <stdint.h>

#include "models/formats/pickle.h"

/* 1 when every element of t lies inside a storage of storage_numel elements; *reach is
 * the last element it touches (offset + sum (size-1)*stride). 0 on overflow too. */
int vt_pth_in_bounds(const vt_pkl_tensor *t, int64_t storage_numel, int64_t *reach);

/* dst (t->numel floats) = the view t of the storage whose bytes start at base; call only
 * when vt_pth_in_bounds(t, ...) said 1 for that storage. */
void vt_pth_gather(float *dst, const uint8_t *base, const vt_pkl_tensor *t);

#endif
