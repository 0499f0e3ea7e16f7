/*
 * reduce_host.c: the host reducer of reduce.h — ranks are threads of this process.
 * allreduce_sum: every rank publishes its buffer (CPU backends: the buffer itself;
 * others: a host copy), all ranks meet at a barrier, each rank sums one contiguous
 * chunk of the elements IN RANK ORDER ((b0 + b1) + b2 ...) into one shared result,
 * all meet again, and every rank copies the same result back (the steps are
 * reduce_stage.c's, shared with the MPI reducer; the barriers are this file's). So every
 * replica gets bitwise the same sum, and the sum does not depend on which thread
 * computed a chunk.
 *
 * It must never average, never reorder the sum by arrival time, and never let a rank
 * leave a collective before every rank has read what it needs (three barriers per call).
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/reduce_stage.h"

typedef struct host_ctx {
    vt_reduce_stage s;      /* publish, rank-order chunks, copy back (reduce_stage.h) */
    vt_reduce_stats st;     /* rank 0's view */
} host_ctx;

/* n elements of buf: floats (i64 = 0) or int64 (i64 = 1, moved as 2n floats' bytes). */
static void host_sum(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int i64);

static void host_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    host_sum(r, rank, be, buf, n, 0);
}

static void host_allreduce_i64(vt_reducer *r, int rank, vt_backend *be, int64_t *buf,
                               int64_t n) {
    host_sum(r, rank, be, (float *)(void *)buf, n, 1);
}

static void host_sum(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int i64) {
    host_ctx *c = r->ctx;
    VT_CHECK(rank >= 0 && rank < c->s.nranks, "host reducer: rank %d of %d", rank, c->s.nranks);
    double t0 = rank == 0 ? vt_now() : 0;
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)(i64 ? sizeof(int64_t) : sizeof(float));
    }
    if (c->s.nranks == 1 || n == 0)
        return;
    const int64_t nf = i64 ? 2 * n : n; /* floats' worth of bytes */
    vt_reduce_stage_grow(&c->s, nf);
    vt_reduce_stage_publish(&c->s, rank, be, buf, nf);
    vt_reduce_stage_wait(&c->s);
    double t1 = rank == 0 ? vt_now() : 0;
    VT_CHECK(c->s.n == nf, "host reducer: ranks disagree on the length (%lld vs %lld)",
             (long long)c->s.n, (long long)nf);
    if (i64)
        vt_reduce_stage_sum_chunk_i64(&c->s, rank, n);
    else
        vt_reduce_stage_sum_chunk(&c->s, rank, n);
    vt_reduce_stage_wait(&c->s);
    vt_reduce_stage_take(&c->s, be, buf, nf);
    /* Nobody may start the next call (grow the result, republish) before all copied. */
    vt_reduce_stage_wait(&c->s);
    if (rank == 0) {
        c->st.wait_s += t1 - t0;
        c->st.reduce_s += vt_now() - t1;
    }
}

static void host_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                           int root) {
    host_ctx *c = r->ctx;
    VT_CHECK(root >= 0 && root < c->s.nranks, "host reducer: root %d of %d", root, c->s.nranks);
    if (c->s.nranks == 1 || n == 0)
        return;
    vt_reduce_stage_grow(&c->s, n);
    if (rank == root)
        vt_reduce_stage_give(&c->s, be, buf, n);
    vt_reduce_stage_wait(&c->s);
    if (rank != root)
        vt_reduce_stage_take(&c->s, be, buf, n);
    vt_reduce_stage_wait(&c->s);
}

static void host_barrier(vt_reducer *r, int rank) {
    host_ctx *c = r->ctx;
    (void)rank;
    vt_reduce_stage_wait(&c->s);
}

static void host_stats(vt_reducer *r, vt_reduce_stats *out) {
    *out = ((host_ctx *)r->ctx)->st;
}

static void host_destroy(vt_reducer *r) {
    host_ctx *c = r->ctx;
    if (!c)
        return;
    vt_reduce_stage_destroy(&c->s);
    free(c);
    r->ctx = NULL;
}

static const vt_reducer_i host_i = {
    .name = "host",
    .allreduce_sum = host_allreduce,
    .broadcast = host_broadcast,
    .allreduce_sum_i64 = host_allreduce_i64,
    .barrier = host_barrier,
    .destroy = host_destroy,
    .stats = host_stats,
};

vt_reducer *vt_reducer_host_init(int nranks) {
    VT_CHECK(nranks >= 1, "host reducer: %d ranks", nranks);
    host_ctx *c = vt_calloc(1, sizeof *c);
    vt_reduce_stage_init(&c->s, nranks);
    vt_reducer *r = vt_calloc(1, sizeof *r);
    r->i = &host_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}
