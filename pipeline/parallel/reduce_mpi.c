/*
 * reduce_mpi.c: the MPI reducer of reduce.h — the towers of several processes
 * (pipeline/parallel/mpi.h). Within a process it is the host reducer: every tower
 * publishes its buffer (CPU backends: the buffer itself; others: a host copy), the towers
 * meet, and each sums one chunk of the elements in tower order into one host result (the
 * steps are reduce_stage.c's, shared with reduce_host.c). Then this process's tower 0
 * alone sums the processes' results with vt_mpi_sum_f32 — in process order, each element
 * by one owner — and every tower copies the same result back. The
 * sum is ((t0 + t1) + ...) of each process, then (p0 + p1) + ... over processes: the
 * host reducer's order whenever every process after the first has one tower, and always
 * the same bits on every replica of every process.
 *
 * It must never average, never let the sum depend on arrival times, never let a tower
 * leave before every tower of its process has read the result, and never call MPI from
 * two threads at once (only tower 0 does).
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/reduce_stage.h"

typedef struct mpi_ctx {
    vt_reduce_stage s;      /* this process's towers: publish, sum, copy back */
    vt_reduce_stats st;     /* tower 0's view */
} mpi_ctx;

/* Tower 0, with every tower of this process waiting: the processes' sum. Its wait for
 * the other processes counts as waiting, everything else as reducing. */
static void world_sum(mpi_ctx *c, float *buf, int64_t n, int i64, double *waited) {
    vt_mpi_sum_stats ms = {0};
    if (i64)
        vt_mpi_sum_i64((int64_t *)(void *)buf, n,
                       "the exact sum over processes (gradients or batch-norm statistics)", &ms);
    else
        vt_mpi_sum_f32(buf, n, "the sum over processes (gradients or batch-norm statistics)",
                       &ms);
    c->st.wire_bytes += ms.wire_bytes;
    *waited += ms.wait_s;
}

/* n elements of buf: floats (i64 = 0) or int64 (i64 = 1, moved as 2n floats' bytes). */
static void mpi_sum(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int i64);

static void mpi_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    mpi_sum(r, rank, be, buf, n, 0);
}

static void mpi_allreduce_i64(vt_reducer *r, int rank, vt_backend *be, int64_t *buf, int64_t n) {
    mpi_sum(r, rank, be, (float *)(void *)buf, n, 1);
}

static void mpi_sum(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n, int i64) {
    mpi_ctx *c = r->ctx;
    VT_CHECK(rank >= 0 && rank < c->s.nranks, "mpi reducer: rank %d of %d", rank, c->s.nranks);
    double t0 = vt_now(), waited = 0;
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)(i64 ? sizeof(int64_t) : sizeof(float));
    }
    if (c->s.nranks == 1 && vt_reduce_stage_in_place(be)) {
        /* One tower here: sum its buffer in place, no copies. */
        world_sum(c, buf, n, i64, &waited);
        c->st.wait_s += waited;
        c->st.reduce_s += vt_now() - t0 - waited;
        return;
    }
    const int64_t nf = i64 ? 2 * n : n; /* floats' worth of bytes */
    vt_reduce_stage_grow(&c->s, nf);
    vt_reduce_stage_publish(&c->s, rank, be, buf, nf);
    vt_reduce_stage_wait(&c->s);
    if (rank == 0)
        waited += vt_now() - t0;
    VT_CHECK(c->s.n == nf, "mpi reducer: towers disagree on the length (%lld vs %lld)",
             (long long)c->s.n, (long long)nf);
    if (i64)
        vt_reduce_stage_sum_chunk_i64(&c->s, rank, n);
    else
        vt_reduce_stage_sum_chunk(&c->s, rank, n);
    vt_reduce_stage_wait(&c->s);
    if (rank == 0)
        world_sum(c, c->s.result, n, i64, &waited);
    vt_reduce_stage_wait(&c->s);
    vt_reduce_stage_take(&c->s, be, buf, nf);
    vt_reduce_stage_wait(&c->s); /* nobody republishes before everyone has copied */
    if (rank == 0) {
        c->st.wait_s += waited;
        c->st.reduce_s += vt_now() - t0 - waited;
    }
}

static void mpi_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                          int root) {
    mpi_ctx *c = r->ctx;
    VT_CHECK(root >= 0 && root < c->s.nranks, "mpi reducer: root %d of %d", root, c->s.nranks);
    if (n == 0)
        return;
    double t0 = vt_now();
    const int source = vt_mpi_rank() == 0 && rank == root;
    vt_reduce_stage_grow(&c->s, n);
    if (source)
        vt_reduce_stage_give(&c->s, be, buf, n);
    vt_reduce_stage_wait(&c->s);
    if (rank == 0)
        vt_mpi_bcast(c->s.result, (size_t)n * sizeof(float), 0, "a broadcast of replica state");
    vt_reduce_stage_wait(&c->s);
    if (!source)
        vt_reduce_stage_take(&c->s, be, buf, n);
    vt_reduce_stage_wait(&c->s);
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)sizeof(float);
        c->st.reduce_s += vt_now() - t0;
    }
}

static void mpi_barrier(vt_reducer *r, int rank) {
    mpi_ctx *c = r->ctx;
    vt_reduce_stage_wait(&c->s);
    if (rank == 0)
        vt_mpi_barrier("a reducer barrier");
    vt_reduce_stage_wait(&c->s);
}

static void mpi_stats(vt_reducer *r, vt_reduce_stats *out) { *out = ((mpi_ctx *)r->ctx)->st; }

static void mpi_destroy(vt_reducer *r) {
    mpi_ctx *c = r->ctx;
    if (!c)
        return;
    vt_reduce_stage_destroy(&c->s);
    free(c);
    r->ctx = NULL;
}

static const vt_reducer_i mpi_i = {
    .name = "mpi",
    .allreduce_sum = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allreduce_sum_i64 = mpi_allreduce_i64,
    .barrier = mpi_barrier,
    .destroy = mpi_destroy,
    .stats = mpi_stats,
};

vt_reducer *vt_reducer_mpi_init(int nranks) {
    VT_CHECK(nranks >= 1, "mpi reducer: %d towers", nranks);
    mpi_ctx *c = vt_calloc(1, sizeof *c);
    vt_reduce_stage_init(&c->s, nranks);
    vt_reducer *r = vt_calloc(1, sizeof *r);
    r->i = &mpi_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}
