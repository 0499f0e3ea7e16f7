/*
 * test_nccl_gpu.c: the GPU reducers (pipeline/parallel/cuda/) against the host reducer
 * (pipeline/parallel/reduce_host.c), each rank on its own thread as the towers call them.
 *   - NCCL, one GPU, and NCCL over every GPU when there are several: allreduce_sum and
 *     broadcast equal the host reducer's result bit for bit. The data are small integers,
 *     so every partial sum is exact and NCCL's (non rank-order) summation cannot differ
 *     (nccl-tests crafts its inputs the same way).
 *   - device-local (several ranks on GPU 0): random non-integer data; the local reducer
 *     sums in rank order like the host reducer, so the results must be bitwise equal
 *     too, and identical on every rank; several calls in a row with different lengths
 *     (event and pointer reuse), n == 0, broadcast, barrier.
 * Skips (77) without a GPU or in a build without CUDA.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_nccl_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include "models/backend.h"
#include "base/common.h"
#include "models/cuda/backend_cuda.h"
#include "models/cuda/cuda_info.h"
#include "models/registry.h"
#include "pipeline/parallel/reduce.h"

#define MAXR 8

enum { OP_ALLREDUCE, OP_BROADCAST, OP_BARRIER };

typedef struct job {
    vt_reducer *r;
    int rank, op, root;
    vt_backend *be;
    float *buf;
    int64_t n;
} job;

static void *run_job(void *p) {
    job *j = p;
    if (j->op == OP_ALLREDUCE)
        j->r->i->allreduce_sum(j->r, j->rank, j->be, j->buf, j->n);
    else if (j->op == OP_BROADCAST)
        j->r->i->broadcast(j->r, j->rank, j->be, j->buf, j->n, j->root);
    else
        j->r->i->barrier(j->r, j->rank);
    return NULL;
}

/* One collective: every rank on its own thread, as the towers do. */
static void collective(vt_reducer *r, int nranks, vt_backend **be, float **buf, int64_t n, int op,
                       int root) {
    pthread_t th[MAXR];
    job jb[MAXR];
    for (int k = 0; k < nranks; k++) {
        jb[k] = (job){r, k, op, root, be[k], buf[k], n};
        VT_CHECK(pthread_create(&th[k], NULL, run_job, &jb[k]) == 0, "pthread_create");
    }
    for (int k = 0; k < nranks; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < nranks; k++)
        vt_backend_sync(be[k]);
}

/* Rank k's input: integers in [-500, 500) (integer = 1) or normal floats. */
static void make_input(float *h, int64_t n, int k, int integer, vt_rng *rng) {
    for (int64_t i = 0; i < n; i++)
        h[i] = integer ? (float)((i * 7 + (int64_t)k * 13) % 1000 - 500)
                       : (float)vt_rng_normal(rng);
}

/* The truth: the host reducer on cpu-ref ranks (host memory), same inputs. */
static void host_truth(float **out, float **inputs, int nranks, int64_t n, int op, int root) {
    vt_reducer *h = vt_reducer_host_init(nranks);
    vt_backend *be[MAXR];
    for (int k = 0; k < nranks; k++) {
        be[k] = vt_backend_cpu_ref_init(0);
        memcpy(out[k], inputs[k], (size_t)n * 4);
    }
    collective(h, nranks, be, out, n, op, root);
    for (int k = 0; k < nranks; k++)
        vt_backend_free(&be[k]);
    vt_reducer_free(&h);
}

/* Runs op on the reducer with device buffers, compares every rank's result bitwise with
 * the host reducer's. */
static void check_reducer(const char *name, vt_reducer *r, vt_backend **be, int nranks, int64_t n,
                          int op, int root, int integer, uint64_t seed) {
    vt_rng rng;
    vt_rng_seed(&rng, seed);
    float *in[MAXR], *want[MAXR], *dev[MAXR];
    float *got = vt_malloc((size_t)VT_MAX(n, 1) * 4);
    for (int k = 0; k < nranks; k++) {
        in[k] = vt_malloc((size_t)VT_MAX(n, 1) * 4);
        want[k] = vt_malloc((size_t)VT_MAX(n, 1) * 4);
        make_input(in[k], n, k, integer, &rng);
        dev[k] = vt_backend_alloc_x(be[k], (size_t)VT_MAX(n, 1) * 4, "test buffer");
        be[k]->i->to_device(be[k], dev[k], in[k], (size_t)n * 4);
    }
    host_truth(want, in, nranks, n, op, root);
    collective(r, nranks, be, dev, n, op, root);
    for (int k = 0; k < nranks; k++) {
        be[k]->i->to_host(be[k], got, dev[k], (size_t)n * 4);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += memcmp(&got[i], &want[k][i], 4) != 0;
        TCHECK(bad == 0, "%s %s n=%lld rank %d: %lld values differ from the host reducer", name,
               op == OP_ALLREDUCE ? "allreduce" : "broadcast", (long long)n, k, (long long)bad);
        if (op == OP_ALLREDUCE && n > 0 && integer) {
            /* and the exact sum, independently of the host reducer */
            double s = 0;
            for (int q = 0; q < nranks; q++)
                s += in[q][n - 1];
            TCHECK(got[n - 1] == (float)s, "%s: last element %g, exact sum %g", name,
                   (double)got[n - 1], s);
        }
    }
    printf("  %-10s %-9s ranks=%d n=%-9lld %s\n", r->i->name,
           op == OP_ALLREDUCE ? "allreduce" : "broadcast", nranks, (long long)n,
           integer ? "(integer data)" : "(random floats)");
    for (int k = 0; k < nranks; k++) {
        vt_backend_free_ptr(be[k], dev[k]);
        free(in[k]);
        free(want[k]);
    }
    free(got);
}

static void test_nccl(int nranks, const int *devs) {
    printf("nccl over %d GPU%s\n", nranks, nranks > 1 ? "s" : "");
    vt_backend *be[MAXR];
    for (int k = 0; k < nranks; k++)
        be[k] = vt_backend_cuda_init(devs[k], 0);
    vt_reducer *r = vt_reducer_nccl_init(nranks, devs);
    TCHECK(r && r->nranks == nranks && !strcmp(r->i->name, "nccl"), "nccl reducer made");
    check_reducer("nccl", r, be, nranks, 1000, OP_ALLREDUCE, 0, 1, 1);
    check_reducer("nccl", r, be, nranks, 3000017, OP_ALLREDUCE, 0, 1, 2); /* many chunks */
    check_reducer("nccl", r, be, nranks, 0, OP_ALLREDUCE, 0, 1, 3);
    check_reducer("nccl", r, be, nranks, 12345, OP_BROADCAST, nranks - 1, 0, 4);
    collective(r, nranks, be, (float *[MAXR]){0}, 0, OP_BARRIER, 0);
    vt_reducer_free(&r);
    TCHECK(r == NULL, "vt_reducer_free clears the pointer");
    for (int k = 0; k < nranks; k++)
        vt_backend_free(&be[k]);
}

static void test_local(int nranks) {
    printf("device-local, %d ranks on cuda:0\n", nranks);
    vt_backend *be[MAXR];
    /* Uneven budgets as two towers of 12G and 6G would have; irrelevant to the sums. */
    for (int k = 0; k < nranks; k++)
        be[k] = vt_backend_cuda_init(0, 0);
    vt_reducer *r = vt_reducer_local_init(nranks, 0);
    TCHECK(r && r->nranks == nranks && !strcmp(r->i->name, "local"), "local reducer made");
    /* random floats: rank-order float sums, bitwise like the host reducer */
    check_reducer("local", r, be, nranks, 100003, OP_ALLREDUCE, 0, 0, 10);
    check_reducer("local", r, be, nranks, 7, OP_ALLREDUCE, 0, 0, 11); /* fewer than ranks*2 */
    check_reducer("local", r, be, nranks, 2000001, OP_ALLREDUCE, 0, 0, 12);
    check_reducer("local", r, be, nranks, 0, OP_ALLREDUCE, 0, 0, 13);
    check_reducer("local", r, be, nranks, 5000, OP_BROADCAST, 1 % nranks, 0, 14);
    check_reducer("local", r, be, nranks, 1000, OP_ALLREDUCE, 0, 1, 15);
    collective(r, nranks, be, (float *[MAXR]){0}, 0, OP_BARRIER, 0);
    vt_reducer_free(&r);
    for (int k = 0; k < nranks; k++)
        vt_backend_free(&be[k]);
}

int main(void) {
    const int nd = vt_cuda_device_count();
    if (nd == 0) {
        printf("test_nccl_gpu: no CUDA device: skipping\n");
        return VT_TEST_SKIP;
    }
    vt_cuda_versions v;
    vt_cuda_versions_get(&v);
    printf("%d CUDA device%s, NCCL %d\n", nd, nd > 1 ? "s" : "", v.nccl);
    int devs[MAXR];
    for (int k = 0; k < MAXR; k++)
        devs[k] = k;
    test_nccl(1, devs);
    if (nd > 1)
        test_nccl(VT_MIN(nd, MAXR), devs);
    else
        printf("nccl over several GPUs: only one GPU here, not run\n");
    test_local(2);
    test_local(3);
    test_local(1);
    return vt_test_done("test_nccl_gpu");
}
#endif
