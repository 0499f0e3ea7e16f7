/*
 * cuda_alloc.c: the caching allocator of cuda_alloc.h. Blocks are rounded to 512 bytes;
 * a request takes the best-fitting cached block no more than 1/8 larger, else a new
 * cudaMalloc, which first gives the cache back when the budget would be passed, and once
 * more when the device itself is out of memory.
 *
 * It must never hoard (a cached block serves only requests close to its size), never let
 * live + cached pass the budget by its own choice, and never synchronise: stream order
 * makes reuse safe (cuda_alloc.h).
 */
#include "models/cuda/cuda_alloc.h"

#include <string.h>

#include <cuda_runtime_api.h>

#include "base/common.h"
#include "models/cuda/cuda_check.h"

/* Blocks are rounded to 512 bytes so tensors of nearly equal size share cache entries
 * and every block stays aligned for vector loads. */
#define CU_ROUND 512

void vt_cuda_cache_init(vt_cuda_cache *a, int device) {
    memset(a, 0, sizeof *a);
    a->device = device;
    pthread_mutex_init(&a->lock, NULL);
}

static void block_push(vt_cuda_block **arr, size_t *n, size_t *cap, vt_cuda_block b) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *arr = vt_realloc(*arr, *cap * sizeof(**arr));
    }
    (*arr)[(*n)++] = b;
}

/* Called with the lock held. */
static void release_cache_locked(vt_cuda_cache *a) {
    for (size_t i = 0; i < a->ncached; i++)
        CUDA_CHECK(cudaFree(a->cached[i].ptr));
    a->ncached = 0;
    a->cached_bytes = 0;
}

void *vt_cuda_cache_alloc(vt_cuda_cache *a, int64_t budget, size_t bytes) {
    const size_t rb = (bytes + CU_ROUND - 1) / CU_ROUND * CU_ROUND;
    pthread_mutex_lock(&a->lock);
    /* Best fit among cached blocks no more than 1/8 larger: reuse without hoarding. */
    size_t best = a->ncached;
    for (size_t i = 0; i < a->ncached; i++)
        if (a->cached[i].bytes >= rb && a->cached[i].bytes <= rb + rb / 8 &&
            (best == a->ncached || a->cached[i].bytes < a->cached[best].bytes))
            best = i;
    if (best < a->ncached) {
        vt_cuda_block b = a->cached[best];
        a->cached[best] = a->cached[--a->ncached];
        a->cached_bytes -= (int64_t)b.bytes;
        a->live_bytes += (int64_t)b.bytes;
        a->hits++;
        block_push(&a->live, &a->nlive, &a->caplive, b);
        pthread_mutex_unlock(&a->lock);
        return b.ptr;
    }
    /* The budget covers what we hold from the driver, cached blocks included. */
    if (budget > 0 && a->live_bytes + a->cached_bytes + (int64_t)rb > budget)
        release_cache_locked(a);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, rb);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* clear the sticky-free error state of this thread */
        release_cache_locked(a);
        e = cudaMalloc(&p, rb);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            pthread_mutex_unlock(&a->lock);
            return NULL; /* out of device memory: the caller reports it */
        }
    }
    CUDA_CHECK(e);
    a->mallocs++;
    a->live_bytes += (int64_t)rb;
    if (a->live_bytes + a->cached_bytes > a->high_water)
        a->high_water = a->live_bytes + a->cached_bytes;
    block_push(&a->live, &a->nlive, &a->caplive, (vt_cuda_block){p, rb});
    pthread_mutex_unlock(&a->lock);
    return p;
}

/* Freed blocks go to the cache. They may still be read by work queued on this stream;
 * that is safe because anything that reuses them is queued on the same stream later. */
void vt_cuda_cache_free(vt_cuda_cache *a, void *ptr) {
    if (!ptr)
        return;
    pthread_mutex_lock(&a->lock);
    size_t i = a->nlive;
    while (i > 0 && a->live[i - 1].ptr != ptr)
        i--;
    VT_CHECK(i > 0, "cuda%d: freeing a pointer this backend did not allocate", a->device);
    vt_cuda_block b = a->live[i - 1];
    a->live[i - 1] = a->live[--a->nlive];
    a->live_bytes -= (int64_t)b.bytes;
    a->cached_bytes += (int64_t)b.bytes;
    block_push(&a->cached, &a->ncached, &a->capcached, b);
    pthread_mutex_unlock(&a->lock);
}

void vt_cuda_cache_release(vt_cuda_cache *a) {
    pthread_mutex_lock(&a->lock);
    release_cache_locked(a);
    pthread_mutex_unlock(&a->lock);
}

void vt_cuda_cache_stats(vt_cuda_cache *a, vt_cuda_mem_stats *out) {
    pthread_mutex_lock(&a->lock);
    out->live_bytes = a->live_bytes;
    out->cached_bytes = a->cached_bytes;
    out->high_water = a->high_water;
    out->device_mallocs = a->mallocs;
    out->cache_hits = a->hits;
    pthread_mutex_unlock(&a->lock);
}

void vt_cuda_cache_destroy(vt_cuda_cache *a) {
    pthread_mutex_lock(&a->lock);
    release_cache_locked(a);
    if (a->nlive)
        vt_warn("cuda%d: %zu allocations (%lld bytes) still live at destroy; freeing them\n",
                a->device, a->nlive, (long long)a->live_bytes);
    for (size_t i = 0; i < a->nlive; i++)
        CUDA_CHECK(cudaFree(a->live[i].ptr));
    pthread_mutex_unlock(&a->lock);
    free(a->live);
    free(a->cached);
    pthread_mutex_destroy(&a->lock);
    memset(a, 0, sizeof *a);
}
