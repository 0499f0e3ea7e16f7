/*
 * reduce_mpi.c: the MPI reducer of reduce.h — the towers of several processes
 * (pipeline/parallel/mpi.h). Within a process it is the host reducer: every tower publishes its
 * buffer (CPU backends: the buffer itself; others: a host copy), the towers meet, and
 * each sums one chunk of the elements in tower order into one host result. Then this
 * process's tower 0 alone sums the processes' results with vt_mpi_sum_f32 — in process
 * order, each element by one owner — and every tower copies the same result back. The
 * sum is ((t0 + t1) + ...) of each process, then (p0 + p1) + ... over processes: the
 * host reducer's order whenever every process after the first has one tower, and always
 * the same bits on every replica of every process.
 *
 * It must never average, never let the sum depend on arrival times, never let a tower
 * leave before every tower of its process has read the result, and never call MPI from
 * two threads at once (only tower 0 does).
 */
#include <pthread.h>
#include <string.h>

#include "models/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"

typedef struct mpi_ctx {
    int nranks;             /* towers of this process */
    pthread_barrier_t bar;
    pthread_mutex_t lock;
    const float **src;      /* (nranks) what each tower publishes for this call */
    float **stage;          /* (nranks) host copies for non-host backends */
    int64_t *stage_cap;
    float *result;          /* (cap) this process's sum, then everyone's */
    int64_t cap;
    int64_t n;
    vt_reduce_stats st;     /* tower 0's view */
} mpi_ctx;

static int is_host_memory(const vt_backend *be) {
    return be->kind == VT_BACKEND_CPU || be->kind == VT_BACKEND_CPU_REF;
}

static void barrier(mpi_ctx *c) {
    if (c->nranks > 1)
        pthread_barrier_wait(&c->bar);
}

static void grow_result(mpi_ctx *c, int64_t n) {
    pthread_mutex_lock(&c->lock);
    if (c->cap < n) {
        free(c->result);
        c->result = vt_malloc((size_t)n * sizeof(float));
        c->cap = n;
    }
    c->n = n;
    pthread_mutex_unlock(&c->lock);
}

static void publish(mpi_ctx *c, int rank, vt_backend *be, const float *buf, int64_t n) {
    if (is_host_memory(be)) {
        c->src[rank] = buf;
        return;
    }
    if (c->stage_cap[rank] < n) {
        free(c->stage[rank]);
        c->stage[rank] = vt_malloc((size_t)n * sizeof(float));
        c->stage_cap[rank] = n;
    }
    vt_backend_sync(be);
    be->i->to_host(be, c->stage[rank], buf, (size_t)n * sizeof(float));
    c->src[rank] = c->stage[rank];
}

static void take_back(mpi_ctx *c, vt_backend *be, float *buf, int64_t n) {
    if (is_host_memory(be))
        memcpy(buf, c->result, (size_t)n * sizeof(float));
    else
        be->i->to_device(be, buf, c->result, (size_t)n * sizeof(float));
}

/* Tower 0, with every tower of this process waiting: the processes' sum. Its wait for
 * the other processes counts as waiting, everything else as reducing. */
static void world_sum(mpi_ctx *c, float *buf, int64_t n, double *waited) {
    vt_mpi_sum_stats ms = {0};
    vt_mpi_sum_f32(buf, n, "the sum over processes (gradients or batch-norm statistics)", &ms);
    c->st.wire_bytes += ms.wire_bytes;
    *waited += ms.wait_s;
}

static void mpi_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    mpi_ctx *c = r->ctx;
    VT_CHECK(rank >= 0 && rank < c->nranks, "mpi reducer: rank %d of %d", rank, c->nranks);
    double t0 = vt_now(), waited = 0;
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)sizeof(float);
    }
    if (c->nranks == 1 && is_host_memory(be)) {
        /* One tower here: sum its buffer in place, no copies. */
        world_sum(c, buf, n, &waited);
        c->st.wait_s += waited;
        c->st.reduce_s += vt_now() - t0 - waited;
        return;
    }
    grow_result(c, n);
    publish(c, rank, be, buf, n);
    barrier(c);
    if (rank == 0)
        waited += vt_now() - t0;
    VT_CHECK(c->n == n, "mpi reducer: towers disagree on the length (%lld vs %lld)",
             (long long)c->n, (long long)n);
    int64_t lo = n * rank / c->nranks, hi = n * (rank + 1) / c->nranks;
    float *out = c->result;
    memcpy(out + lo, c->src[0] + lo, (size_t)(hi - lo) * sizeof(float));
    for (int k = 1; k < c->nranks; k++) {
        const float *s = c->src[k];
        for (int64_t e = lo; e < hi; e++)
            out[e] += s[e];
    }
    barrier(c);
    if (rank == 0)
        world_sum(c, c->result, n, &waited);
    barrier(c);
    take_back(c, be, buf, n);
    barrier(c); /* nobody republishes before everyone has copied */
    if (rank == 0) {
        c->st.wait_s += waited;
        c->st.reduce_s += vt_now() - t0 - waited;
    }
}

static void mpi_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                          int root) {
    mpi_ctx *c = r->ctx;
    VT_CHECK(root >= 0 && root < c->nranks, "mpi reducer: root %d of %d", root, c->nranks);
    if (n == 0)
        return;
    double t0 = vt_now();
    const int source = vt_mpi_rank() == 0 && rank == root;
    grow_result(c, n);
    if (source) {
        if (is_host_memory(be)) {
            memcpy(c->result, buf, (size_t)n * sizeof(float));
        } else {
            vt_backend_sync(be);
            be->i->to_host(be, c->result, buf, (size_t)n * sizeof(float));
        }
    }
    barrier(c);
    if (rank == 0)
        vt_mpi_bcast(c->result, (size_t)n * sizeof(float), 0, "a broadcast of replica state");
    barrier(c);
    if (!source)
        take_back(c, be, buf, n);
    barrier(c);
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)sizeof(float);
        c->st.reduce_s += vt_now() - t0;
    }
}

static void mpi_barrier(vt_reducer *r, int rank) {
    mpi_ctx *c = r->ctx;
    barrier(c);
    if (rank == 0)
        vt_mpi_barrier("a reducer barrier");
    barrier(c);
}

static void mpi_stats(vt_reducer *r, vt_reduce_stats *out) { *out = ((mpi_ctx *)r->ctx)->st; }

static void mpi_destroy(vt_reducer *r) {
    mpi_ctx *c = r->ctx;
    if (!c)
        return;
    pthread_barrier_destroy(&c->bar);
    pthread_mutex_destroy(&c->lock);
    for (int k = 0; k < c->nranks; k++)
        free(c->stage[k]);
    free(c->stage);
    free(c->stage_cap);
    free(c->src);
    free(c->result);
    free(c);
    r->ctx = NULL;
}

static const vt_reducer_i mpi_i = {
    /* .name          = */ "mpi",
    /* .allreduce_sum = */ mpi_allreduce,
    /* .broadcast     = */ mpi_broadcast,
    /* .barrier       = */ mpi_barrier,
    /* .destroy       = */ mpi_destroy,
    /* .stats         = */ mpi_stats,
};

vt_reducer *vt_reducer_mpi_init(int nranks) {
    VT_CHECK(nranks >= 1, "mpi reducer: %d towers", nranks);
    mpi_ctx *c = vt_calloc(1, sizeof *c);
    c->nranks = nranks;
    VT_CHECK(pthread_barrier_init(&c->bar, NULL, (unsigned)nranks) == 0, "pthread_barrier_init");
    pthread_mutex_init(&c->lock, NULL);
    c->src = vt_calloc((size_t)nranks, sizeof *c->src);
    c->stage = vt_calloc((size_t)nranks, sizeof *c->stage);
    c->stage_cap = vt_calloc((size_t)nranks, sizeof *c->stage_cap);
    vt_reducer *r = vt_calloc(1, sizeof *r);
    r->i = &mpi_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}
