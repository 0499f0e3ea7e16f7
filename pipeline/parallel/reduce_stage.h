/*
 * reduce_stage.h: the host side the host reducer (reduce_host.c) and the MPI reducer
 * (reduce_mpi.c) share — every rank (a tower thread of this process) publishes its
 * buffer (host-memory backends: the buffer itself; others: a host copy), the ranks meet
 * at barriers, each sums one contiguous chunk of the elements IN RANK ORDER
 * ((b0 + b1) + b2 ...) into one shared result, and every rank copies the same result
 * back. Private to those two reducers.
 *
 * It must never reorder a sum by arrival time or thread, and never let a rank reuse the
 * shared buffers before every rank has read them: the callers place the barriers, this
 * file only does each step.
 */
#ifndef VT_REDUCE_STAGE_H
#define VT_REDUCE_STAGE_H

#include <pthread.h>
#include <stdint.h>

#include "models/backend.h"

typedef struct vt_reduce_stage {
    int nranks;
    pthread_barrier_t bar;
    pthread_mutex_t lock;
    const float **src;      /* (nranks) what each rank publishes for this call */
    float **stage;          /* (nranks) host copies for non-host backends */
    int64_t *stage_cap;
    float *result;          /* (cap) the sum */
    int64_t cap;
    int64_t n;              /* this call's length, checked to agree */
} vt_reduce_stage;

void vt_reduce_stage_init(vt_reduce_stage *s, int nranks);
void vt_reduce_stage_destroy(vt_reduce_stage *s);
/* 1 when be's memory is host memory (the CPU backends): buffers are used in place. */
int vt_reduce_stage_in_place(const vt_backend *be);
/* Every rank of this process meets here (nothing to wait for with one rank). */
void vt_reduce_stage_wait(vt_reduce_stage *s);
/* The shared result holds at least n floats; this call's length is n. */
void vt_reduce_stage_grow(vt_reduce_stage *s, int64_t n);
/* rank's buffer (n floats of be's memory) published for the sum. */
void vt_reduce_stage_publish(vt_reduce_stage *s, int rank, vt_backend *be, const float *buf,
                             int64_t n);
/* After every rank published: rank's chunk of the result = the published buffers summed
 * in rank order. */
void vt_reduce_stage_sum_chunk(vt_reduce_stage *s, int rank, int64_t n);
/* The same for int64 buffers of n elements (published, grown and taken as 2n floats'
 * bytes): an integer sum, exact in any order (the exact sums of models/xsum.h). */
void vt_reduce_stage_sum_chunk_i64(vt_reduce_stage *s, int rank, int64_t n);
/* The result into buf (n floats of be's memory), or buf into the result (a broadcast's
 * root). */
void vt_reduce_stage_take(vt_reduce_stage *s, vt_backend *be, float *buf, int64_t n);
void vt_reduce_stage_give(vt_reduce_stage *s, vt_backend *be, const float *buf, int64_t n);

#endif
