/*
 * reduce_stage.c: the host-side steps the host and MPI reducers share (reduce_stage.h):
 * publishing a buffer, the rank-order sum of one chunk, copying the result back.
 *
 * It must never average, never sum in any order but rank order, and never place a
 * barrier itself: where the ranks meet is each reducer's protocol.
 */
#include "pipeline/parallel/reduce_stage.h"

#include <string.h>

#include "base/common.h"

void vt_reduce_stage_init(vt_reduce_stage *s, int nranks) {
    memset(s, 0, sizeof *s);
    s->nranks = nranks;
    VT_CHECK(pthread_barrier_init(&s->bar, NULL, (unsigned)nranks) == 0, "pthread_barrier_init");
    pthread_mutex_init(&s->lock, NULL);
    s->src = vt_calloc((size_t)nranks, sizeof *s->src);
    s->stage = vt_calloc((size_t)nranks, sizeof *s->stage);
    s->stage_cap = vt_calloc((size_t)nranks, sizeof *s->stage_cap);
}

void vt_reduce_stage_destroy(vt_reduce_stage *s) {
    pthread_barrier_destroy(&s->bar);
    pthread_mutex_destroy(&s->lock);
    for (int k = 0; k < s->nranks; k++)
        free(s->stage[k]);
    free(s->stage);
    free(s->stage_cap);
    free(s->src);
    free(s->result);
    memset(s, 0, sizeof *s);
}

int vt_reduce_stage_in_place(const vt_backend *be) {
    return be->kind == VT_BACKEND_CPU || be->kind == VT_BACKEND_CPU_REF;
}

void vt_reduce_stage_wait(vt_reduce_stage *s) {
    if (s->nranks > 1)
        pthread_barrier_wait(&s->bar);
}

void vt_reduce_stage_grow(vt_reduce_stage *s, int64_t n) {
    pthread_mutex_lock(&s->lock);
    if (s->cap < n) {
        free(s->result);
        s->result = vt_malloc((size_t)n * sizeof(float));
        s->cap = n;
    }
    s->n = n;
    pthread_mutex_unlock(&s->lock);
}

/* The pointer itself for host memory, else a host copy. */
void vt_reduce_stage_publish(vt_reduce_stage *s, int rank, vt_backend *be, const float *buf,
                             int64_t n) {
    if (vt_reduce_stage_in_place(be)) {
        s->src[rank] = buf;
        return;
    }
    if (s->stage_cap[rank] < n) {
        free(s->stage[rank]);
        s->stage[rank] = vt_malloc((size_t)n * sizeof(float));
        s->stage_cap[rank] = n;
    }
    vt_backend_sync(be);
    be->i->to_host(be, s->stage[rank], buf, (size_t)n * sizeof(float));
    s->src[rank] = s->stage[rank];
}

void vt_reduce_stage_sum_chunk(vt_reduce_stage *s, int rank, int64_t n) {
    int64_t lo = n * rank / s->nranks, hi = n * (rank + 1) / s->nranks;
    float *out = s->result;
    memcpy(out + lo, s->src[0] + lo, (size_t)(hi - lo) * sizeof(float));
    for (int k = 1; k < s->nranks; k++) {
        const float *src = s->src[k];
        for (int64_t e = lo; e < hi; e++)
            out[e] += src[e];
    }
}

void vt_reduce_stage_sum_chunk_i64(vt_reduce_stage *s, int rank, int64_t n) {
    int64_t lo = n * rank / s->nranks, hi = n * (rank + 1) / s->nranks;
    int64_t *out = (int64_t *)(void *)s->result;
    memcpy(out + lo, (const int64_t *)(const void *)s->src[0] + lo,
           (size_t)(hi - lo) * sizeof(int64_t));
    for (int k = 1; k < s->nranks; k++) {
        const int64_t *src = (const int64_t *)(const void *)s->src[k];
        for (int64_t e = lo; e < hi; e++)
            out[e] += src[e];
    }
}

void vt_reduce_stage_take(vt_reduce_stage *s, vt_backend *be, float *buf, int64_t n) {
    if (vt_reduce_stage_in_place(be))
        memcpy(buf, s->result, (size_t)n * sizeof(float));
    else
        be->i->to_device(be, buf, s->result, (size_t)n * sizeof(float));
}

void vt_reduce_stage_give(vt_reduce_stage *s, vt_backend *be, const float *buf, int64_t n) {
    if (vt_reduce_stage_in_place(be)) {
        memcpy(s->result, buf, (size_t)n * sizeof(float));
    } else {
        vt_backend_sync(be);
        be->i->to_host(be, s->result, buf, (size_t)n * sizeof(float));
    }
}
