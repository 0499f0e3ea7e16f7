/*
 * test_reduce_gpus.c: one GPU never serves as two NCCL ranks (issue 27, item 2). NCCL
 * documents that the same device as several ranks of one communicator is not supported
 * and may hang; two MPI ranks on one machine with the default --devices would do just
 * that, because the check looked only within a process. vt_reducer_gpu_clash decides on
 * (host, GPU) pairs across every rank, from made-up device lists and host names (no GPU,
 * no mpirun: the decision is a pure function every rank computes alike):
 *   - rank 0 cuda0 | rank 1 cuda0 on one host: the pair (0, 1);
 *   - the same lists on two hosts: none (each host has its own cuda0);
 *   - rank 0 cuda0, cuda1 | rank 1 cuda1: the pair (1, 2), the second GPU;
 *   - cpu towers never clash (their ordinal is a tower index, not a device);
 *   - within one rank, cuda0 twice: the pair (0, 1) as before.
 * With CUDA built in, vt_reducer_choose("nccl") over two ranks that share cuda0 refuses
 * before touching NCCL, with a message naming both ranks (without MPI every rank's host
 * reads "?": one host).
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/reduce.h"
#include "tests/testutil.h"

static const char *g_hosts[4];
static const char *host_of(int rank) { return g_hosts[rank]; }

static vt_device_list make(const char *const *backend, const int *ord, int n) {
    vt_device_list l;
    memset(&l, 0, sizeof l);
    l.n = n;
    for (int i = 0; i < n; i++) {
        snprintf(l.dev[i].backend, sizeof l.dev[i].backend, "%s", backend[i]);
        l.dev[i].ordinal = ord[i];
        snprintf(l.dev[i].name, sizeof l.dev[i].name, "%s%d", backend[i], ord[i]);
    }
    return l;
}

int main(void) {
    int a = -1, b = -1;
    {   /* one host, both ranks on cuda0 */
        const char *be[2] = {"cuda", "cuda"};
        const int ord[2] = {0, 0}, first[3] = {0, 1, 2};
        vt_device_list l = make(be, ord, 2);
        g_hosts[0] = g_hosts[1] = "ws1";
        TCHECK(vt_reducer_gpu_clash(&l, 2, first, host_of, &a, &b) == 1 && a == 0 && b == 1,
               "shared cuda0 across ranks not found (%d, %d)", a, b);
        g_hosts[1] = "ws2";
        TCHECK(vt_reducer_gpu_clash(&l, 2, first, host_of, &a, &b) == 0,
               "cuda0 on two hosts taken for one GPU");
    }
    {   /* rank 0 cuda0 + cuda1, rank 1 cuda1 */
        const char *be[3] = {"cuda", "cuda", "cuda"};
        const int ord[3] = {0, 1, 1}, first[3] = {0, 2, 3};
        vt_device_list l = make(be, ord, 3);
        g_hosts[0] = g_hosts[1] = "ws1";
        TCHECK(vt_reducer_gpu_clash(&l, 2, first, host_of, &a, &b) == 1 && a == 1 && b == 2,
               "shared cuda1 across ranks: (%d, %d), not (1, 2)", a, b);
    }
    {   /* cpu towers: ordinals 0 on both ranks, no GPU involved */
        const char *be[2] = {"cpu", "cpu"};
        const int ord[2] = {0, 0}, first[3] = {0, 1, 2};
        vt_device_list l = make(be, ord, 2);
        TCHECK(vt_reducer_gpu_clash(&l, 2, first, host_of, &a, &b) == 0, "cpu towers clash");
    }
    {   /* one process, cuda0 twice */
        const char *be[2] = {"cuda", "cuda"};
        const int ord[2] = {0, 0}, first[2] = {0, 2};
        vt_device_list l = make(be, ord, 2);
        TCHECK(vt_reducer_gpu_clash(&l, 1, first, host_of, &a, &b) == 1 && a == 0 && b == 1,
               "cuda0 twice in one rank");
    }
#ifdef VT_HAVE_CUDA
    {   /* the chooser refuses nccl, naming both ranks, before any NCCL call */
        const char *be[2] = {"cuda", "cuda"};
        const int ord[2] = {0, 0}, first[3] = {0, 1, 2};
        vt_device_list l = make(be, ord, 2);
        char err[512] = "";
        vt_reducer *r = vt_reducer_choose("nccl", &l, 2, first, 0, err, sizeof err);
        printf("nccl over rank 0 cuda0 | rank 1 cuda0: %s\n", err);
        TCHECK(r == NULL && strstr(err, "rank 0") && strstr(err, "rank 1") &&
                   strstr(err, "same GPU"),
               "nccl not refused with both ranks named: %s", err);
    }
#endif
    return vt_test_done("test_reduce_gpus");
}
