/*
 * cpu_conv.h: the fast CPU backend's conv3d engine (cpu_conv.c) — its two ops, which cpu.c
 * puts in its table, and how it tiles a conv3d, which the memory planner (memplan.c)
 * shares because it must count the scratch those tiles need (docs/design.md §3.3).
 *
 * A conv runs as vol2col + sgemm over TILES of output columns: either several whole clips
 * (small outputs: one bigger GEMM instead of one small GEMM per clip) or a band of output
 * rows of one clip (large outputs: the scratch stays bounded instead of growing with the
 * clip). A tile needs (Cin*kT*kH*kW + Cout) floats of scratch per output column at most
 * (the vol2col columns, plus the output or output-gradient columns gathered when a tile
 * spans several clips), allocated through vt_backend_alloc for the duration of one op.
 * The tiling depends only on the shape, n and the scratch cap, never on the thread count,
 * so results do not depend on it either.
 *
 * This header must never grow backend state: the ops take everything from their
 * arguments, and the tiling is arithmetic on shapes.
 */
#ifndef VT_CPU_CONV_H
#define VT_CPU_CONV_H

#include <stdint.h>

#include "models/backend.h"

/* Largest scratch one conv op asks for (bytes). Above it, tiles become bands of rows. */
#define VT_CPU_CONV_SCRATCH_CAP ((int64_t)8 << 20)
/* Several clips go into one tile until it has about this many output columns: enough for
 * sgemm to run near its peak, no more (more would only hold more scratch). */
#define VT_CPU_CONV_TILE_COLS 1024

typedef struct vt_cpu_conv_tiling {
    int clips;              /* whole clips per tile (>= 1) */
    int rows;               /* output rows (of To*Ho) per tile: all of them when clips > 1 */
    int64_t scratch_floats; /* what one op with this tiling allocates; 0 = none */
} vt_cpu_conv_tiling;

/* The tiling of a conv over n >= 1 clips with at most cap_floats of scratch (a tile of
 * one output row is the floor, whatever the cap). */
void vt_cpu_conv_tiling_make(vt_cpu_conv_tiling *t, int n, const int in_thw[3],
                             const vt_conv3d_p *p, int64_t cap_floats);
/* Bytes of scratch a cpu conv op with this geometry allocates at most, for any n. */
int64_t vt_cpu_conv_scratch_bound(const int in_thw[3], const vt_conv3d_p *p);

/* The cpu backend's conv3d_forward and conv3d_backward (backend.h semantics). Grouped
 * convs run group by group, one clip at a time, as dense convs of Cin/groups -> Cout/groups
 * channels (the tiling and scratch above are those of one group); depthwise ones by the
 * direct kernel below. */
void vt_cpu_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, const int in_thw[3], const vt_conv3d_p *p);
void vt_cpu_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                            const float *dout, const float *in, const float *w, int n,
                            const int in_thw[3], const vt_conv3d_p *p);

/* Depthwise conv3d (groups == cin == cout, backend.h), cpu_dwconv.c: a direct kernel,
 * each output row a sum of whole input rows scaled by one tap — memory-bound, so no
 * vol2col and no GEMM; no scratch. The grouped ops above call these. */
void vt_cpu_dwconv_forward(vt_backend *be, float *out, const float *in, const float *w,
                           const float *b, int n, const int in_thw[3], const vt_conv3d_p *p);
void vt_cpu_dwconv_backward(vt_backend *be, float *din, float *dw, float *db,
                            const float *dout, const float *in, const float *w, int n,
                            const int in_thw[3], const vt_conv3d_p *p);

#endif
