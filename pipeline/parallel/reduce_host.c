/*
 * reduce_host.c: the host reducer of reduce.h — ranks are threads of this process.
 * allreduce_sum: every rank publishes its buffer (CPU backends: the buffer itself;
 * others: a host copy), all ranks meet at a barrier, each rank sums one contiguous
 * chunk of the elements IN RANK ORDER ((b0 + b1) + b2 ...) into one shared result,
 * all meet again, and every rank copies the same result back. So every replica gets
 * bitwise the same sum, and the sum does not depend on which thread computed a chunk.
 *
 * It must never average, never reorder the sum by arrival time, and never let a rank
 * leave a collective before every rank has read what it needs (three barriers per call).
 */
#include <pthread.h>
#include <string.h>

#include "models/common.h"
#include "pipeline/parallel/reduce.h"

typedef struct host_ctx {
    int nranks;
    pthread_barrier_t bar;
    pthread_mutex_t lock;
    const float **src;      /* (nranks) what each rank publishes for this call */
    float **stage;          /* (nranks) host copies for non-host backends */
    int64_t *stage_cap;
    float *result;          /* (cap) the sum */
    int64_t cap;
    int64_t n;              /* this call's length, checked to agree */
    vt_reduce_stats st;     /* rank 0's view */
} host_ctx;

static int is_host_memory(const vt_backend *be) {
    return be->kind == VT_BACKEND_CPU || be->kind == VT_BACKEND_CPU_REF;
}

static void grow_result(host_ctx *c, int64_t n) {
    pthread_mutex_lock(&c->lock);
    if (c->cap < n) {
        free(c->result);
        c->result = vt_malloc((size_t)n * sizeof(float));
        c->cap = n;
    }
    c->n = n;
    pthread_mutex_unlock(&c->lock);
}

/* Publish rank's buffer: the pointer itself for host memory, else a host copy. */
static void publish(host_ctx *c, int rank, vt_backend *be, const float *buf, int64_t n) {
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

static void take_back(host_ctx *c, vt_backend *be, float *buf, int64_t n) {
    if (is_host_memory(be))
        memcpy(buf, c->result, (size_t)n * sizeof(float));
    else
        be->i->to_device(be, buf, c->result, (size_t)n * sizeof(float));
}

static void host_allreduce(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n) {
    host_ctx *c = r->ctx;
    VT_CHECK(rank >= 0 && rank < c->nranks, "host reducer: rank %d of %d", rank, c->nranks);
    double t0 = rank == 0 ? vt_now() : 0;
    if (rank == 0) {
        c->st.calls++;
        c->st.bytes += n * (int64_t)sizeof(float);
    }
    if (c->nranks == 1 || n == 0)
        return;
    grow_result(c, n);
    publish(c, rank, be, buf, n);
    pthread_barrier_wait(&c->bar);
    double t1 = rank == 0 ? vt_now() : 0;
    VT_CHECK(c->n == n, "host reducer: ranks disagree on the length (%lld vs %lld)",
             (long long)c->n, (long long)n);
    /* This rank's chunk, summed in rank order. */
    int64_t lo = n * rank / c->nranks, hi = n * (rank + 1) / c->nranks;
    float *out = c->result;
    memcpy(out + lo, c->src[0] + lo, (size_t)(hi - lo) * sizeof(float));
    for (int k = 1; k < c->nranks; k++) {
        const float *s = c->src[k];
        for (int64_t e = lo; e < hi; e++)
            out[e] += s[e];
    }
    pthread_barrier_wait(&c->bar);
    take_back(c, be, buf, n);
    /* Nobody may start the next call (grow the result, republish) before all copied. */
    pthread_barrier_wait(&c->bar);
    if (rank == 0) {
        c->st.wait_s += t1 - t0;
        c->st.reduce_s += vt_now() - t1;
    }
}

static void host_broadcast(vt_reducer *r, int rank, vt_backend *be, float *buf, int64_t n,
                           int root) {
    host_ctx *c = r->ctx;
    VT_CHECK(root >= 0 && root < c->nranks, "host reducer: root %d of %d", root, c->nranks);
    if (c->nranks == 1 || n == 0)
        return;
    grow_result(c, n);
    if (rank == root) {
        if (is_host_memory(be)) {
            memcpy(c->result, buf, (size_t)n * sizeof(float));
        } else {
            vt_backend_sync(be);
            be->i->to_host(be, c->result, buf, (size_t)n * sizeof(float));
        }
    }
    pthread_barrier_wait(&c->bar);
    if (rank != root)
        take_back(c, be, buf, n);
    pthread_barrier_wait(&c->bar);
}

static void host_barrier(vt_reducer *r, int rank) {
    host_ctx *c = r->ctx;
    (void)rank;
    if (c->nranks > 1)
        pthread_barrier_wait(&c->bar);
}

static void host_stats(vt_reducer *r, vt_reduce_stats *out) {
    *out = ((host_ctx *)r->ctx)->st;
}

static void host_destroy(vt_reducer *r) {
    host_ctx *c = r->ctx;
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

static const vt_reducer_i host_i = {
    /* .name          = */ "host",
    /* .allreduce_sum = */ host_allreduce,
    /* .broadcast     = */ host_broadcast,
    /* .barrier       = */ host_barrier,
    /* .destroy       = */ host_destroy,
    /* .stats         = */ host_stats,
};

vt_reducer *vt_reducer_host_init(int nranks) {
    VT_CHECK(nranks >= 1, "host reducer: %d ranks", nranks);
    host_ctx *c = vt_calloc(1, sizeof *c);
    c->nranks = nranks;
    VT_CHECK(pthread_barrier_init(&c->bar, NULL, (unsigned)nranks) == 0, "pthread_barrier_init");
    pthread_mutex_init(&c->lock, NULL);
    c->src = vt_calloc((size_t)nranks, sizeof *c->src);
    c->stage = vt_calloc((size_t)nranks, sizeof *c->stage);
    c->stage_cap = vt_calloc((size_t)nranks, sizeof *c->stage_cap);
    vt_reducer *r = vt_calloc(1, sizeof *r);
    r->i = &host_i;
    r->ctx = c;
    r->nranks = nranks;
    return r;
}

void vt_reducer_free(vt_reducer **pr) {
    if (!pr || !*pr)
        return;
    vt_reducer *r = *pr;
    if (r->i->destroy)
        r->i->destroy(r);
    free(r);
    *pr = NULL;
}
