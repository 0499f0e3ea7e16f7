/*
 * cuda_alloc.h: the CUDA backend's caching allocator — device blocks kept after they are
 * freed and handed out again for requests of nearly the same size, so a training step
 * in steady state makes no cudaMalloc, while everything held from the driver (cached
 * blocks included) stays inside the backend's budget. One per backend (per GPU and
 * tower), private to models/cuda/: backend_cuda.c calls it from the op table's alloc and
 * free.
 *
 * It must never synchronise a stream or know about ops: freed blocks may still be read
 * by work queued on the backend's one stream, which is safe because whatever reuses
 * them is queued on that same stream later (backend_cuda.c, "Input uploads", says who
 * must wait when a second stream writes into a block).
 */
#ifndef VT_CUDA_ALLOC_H
#define VT_CUDA_ALLOC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "models/cuda/cuda_mem_stats.h" /* not backend_cuda.h: it calls us (no circle) */

typedef struct vt_cuda_block { void *ptr; size_t bytes; } vt_cuda_block;

typedef struct vt_cuda_cache {
    int device;                       /* for messages */
    pthread_mutex_t lock;             /* ops may allocate from any thread */
    vt_cuda_block *live, *cached;
    size_t nlive, caplive, ncached, capcached;
    int64_t live_bytes, cached_bytes; /* rounded block sizes */
    int64_t high_water, mallocs, hits;
} vt_cuda_cache;

void vt_cuda_cache_init(vt_cuda_cache *a, int device);
/* A block of at least `bytes` (rounded up to 512), from the cache when one fits, else
 * from cudaMalloc on the current device (the caller made it current) after giving cached
 * blocks back if live + cached would pass `budget` (0: none). NULL when the device is out
 * of memory: the caller reports it. */
void *vt_cuda_cache_alloc(vt_cuda_cache *a, int64_t budget, size_t bytes);
/* ptr back into the cache; aborts on a pointer this cache did not hand out. NULL: nothing. */
void vt_cuda_cache_free(vt_cuda_cache *a, void *ptr);
/* Cached blocks back to the driver (the device current). */
void vt_cuda_cache_release(vt_cuda_cache *a);
/* The allocator's figures of vt_cuda_mem_stats (live, cached, high water, mallocs, hits). */
void vt_cuda_cache_stats(vt_cuda_cache *a, vt_cuda_mem_stats *out);
/* Every block back to the driver, live ones with a warning (the device current). */
void vt_cuda_cache_destroy(vt_cuda_cache *a);

#endif
