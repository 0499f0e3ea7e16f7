/*
 * backend_cuda.h: what the CUDA backend offers beyond the op table (models/backend.h):
 * its stream (for the NCCL and device-local reducers), math and algorithm switches, and
 * the allocator's statistics. Plain C and free of CUDA headers, so app/ and pipeline/
 * may include it under #ifdef VT_HAVE_CUDA. Every function takes a backend made by
 * vt_backend_cuda_init and aborts on any other.
 *
 * Precision is the op table's (vt_backend_set_precision, models/backend.h; vt_net_init sets
 * the net's): FP32 by default, TF32, or BF16 on compute capability >= 8.0.
 * Environment switches read once by vt_backend_cuda_init (the setters override them):
 *   VT_CUDA_DETERMINISTIC=1   require deterministic cuDNN algorithms (default: prefer
 *                             them when they cost < 10% time); =0: fastest, whatever it is
 *   VT_CUDA_CONV_ALGO=find|heuristic   benchmark the algorithms once per shape (default,
 *                             like torch.backends.cudnn.benchmark) or take cuDNN's
 *                             heuristic order without timing
 *   VT_CUDA_WORKSPACE=512M    the most convolution workspace one algorithm may use
 *                             (default 1 GiB, never past the budget)
 *   VT_CUDA_ATTN_BQ=N         attention in blocks of at most N queries (a test switch;
 *                             default: as many as fit 64 MiB of logits, cuda_attn.h)
 *   VT_CUDA_PROF=1            time every op on the GPU (cudaEvent pairs) and print a
 *                             table per backend when it is destroyed (cuda_prof.c); off:
 *                             no cost at all
 */
#ifndef VT_BACKEND_CUDA_H
#define VT_BACKEND_CUDA_H

#include <stdint.h>

#include "models/backend.h"
#include "models/cuda/cuda_mem_stats.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA backend of GPU `device` (registry.h builds it by name too), holding at most
 * `budget` bytes; 0 = the free memory now, less a reserve for what the libraries allocate
 * on their own. Aborts when the device does not exist. */
vt_backend *vt_backend_cuda_init(int device, int64_t budget);

/* The backend's one stream, as a cudaStream_t (void * here to keep CUDA headers out). */
void *vt_cuda_stream(vt_backend *be);
int vt_cuda_device(const vt_backend *be);
/* vt_backend_set_precision(be, on ? TF32 : FP32); whether TF32 is on. */
void vt_cuda_set_tf32(vt_backend *be, int on);
int vt_cuda_tf32(const vt_backend *be);
/* 0 = fastest algorithm, 1 = deterministic required, 2 = deterministic preferred. */
void vt_cuda_set_deterministic(vt_backend *be, int mode);

/* VT_CUDA_PROF=1: forget the ops timed so far (bench step, after its warm-up); nothing
 * when the timer is off. */
void vt_cuda_prof_restart(vt_backend *be);

/* vt_cuda_mem_stats: models/cuda/cuda_mem_stats.h */
void vt_cuda_mem_stats_get(vt_backend *be, vt_cuda_mem_stats *out);
/* Give cached (freed) blocks back to the driver. */
void vt_cuda_release_cache(vt_backend *be);

#ifdef __cplusplus
}
#endif

#endif
