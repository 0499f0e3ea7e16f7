/*
 * cuda_mem_stats.h: vt_cuda_mem_stats, the CUDA backend's memory figures
 * (vt_cuda_mem_stats_get in backend_cuda.h), part of which the caching allocator
 * (cuda_alloc.h) fills. Plain C, free of CUDA headers, like backend_cuda.h.
 *
 * A header of its own so that cuda_alloc.h need not include backend_cuda.h: backend_cuda.c
 * calls the allocator, so backend_cuda.h from there would make an include circle
 * (tests/check_house.py fails on one).
 */
#ifndef VT_CUDA_MEM_STATS_H
#define VT_CUDA_MEM_STATS_H

#include <stdint.h>

typedef struct vt_cuda_mem_stats {
    int64_t budget;          /* be->budget (free memory at init when none was given) */
    int64_t live_bytes;      /* device bytes held by live allocations (rounded blocks) */
    int64_t cached_bytes;    /* freed blocks kept for reuse */
    int64_t high_water;      /* most of live + cached ever held */
    int64_t device_mallocs;  /* cudaMalloc calls so far */
    int64_t cache_hits;      /* allocations served from the cache */
    int64_t workspace_bytes; /* convolution workspace held now */
    int conv_shapes;         /* convolution shapes with cached algorithms */
} vt_cuda_mem_stats;

#endif
