/*
 * reduce.c: which reducer of reduce.h a run's towers get (vt_reducer_choose), next to the
 * reducers themselves, so that the towers (tower.c) only ask and never know the kinds.
 * The choice is a pure function of the global device list, the option and the process
 * layout: every process of an MPI run makes the same one.
 *
 * It must never sum anything or hold state: the reducers do the work, and a choice that
 * depended on anything but its arguments would let two processes pick different ones.
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/reduce.h"

#ifdef VT_HAVE_CUDA
/* NCCL's bootstrap across processes goes through MPI (reduce.h). */
static void world_bcast(void *buf, size_t bytes) {
    vt_mpi_bcast(buf, bytes, 0, "the NCCL unique id");
}
static void world_barrier(void) { vt_mpi_barrier("NCCL start-up"); }
#endif

static int rank_of(const int *first, int nproc, int g) {
    int q = 0;
    while (q + 1 < nproc && g >= first[q + 1])
        q++;
    return q;
}

int vt_reducer_gpu_clash(const vt_device_list *all, int nproc, const int *first,
                         const char *(*host)(int rank), int *a, int *b) {
    for (int g = 0; g < first[nproc]; g++) {
        if (strcmp(all->dev[g].backend, "cuda"))
            continue;
        const char *hg = host(rank_of(first, nproc, g));
        for (int h = 0; h < g; h++) {
            if (strcmp(all->dev[h].backend, "cuda") || all->dev[h].ordinal != all->dev[g].ordinal)
                continue;
            const char *hh = host(rank_of(first, nproc, h));
            if (!strcmp(hh ? hh : "", hg ? hg : "")) {
                *a = h;
                *b = g;
                return 1;
            }
        }
    }
    return 0;
}

/* err = which two towers of which ranks share one GPU, and what to do. */
static void clash_err(char *err, size_t errlen, const vt_device_list *all, int nproc,
                      const int *first, int a, int b) {
    const int qa = rank_of(first, nproc, a), qb = rank_of(first, nproc, b);
    vt_set_err(err, errlen, "reducer nccl: rank %d's tower %s and rank %d's tower %s are the "
               "same GPU (cuda:%d on host %s); NCCL does not support one GPU as two ranks of a "
               "communicator (it may hang)\n  hint: give each rank its own GPUs (--devices "
               "cudaN per rank, mpirun's A : B form), or leave the reducer to the automatic "
               "choice (mpi for such towers) and split the GPU's memory with --gpu-mem",
               qa, all->dev[a].name, qb, all->dev[b].name, all->dev[a].ordinal,
               vt_mpi_host(qa) ? vt_mpi_host(qa) : "?");
}

/* Several processes: one decision from the global device list. */
static vt_reducer *choose_world(const char *want, const char *asked, const vt_device_list *all,
                                int nproc, const int *first, int me, char *err, size_t errlen) {
    const int n = first[me + 1] - first[me];
    int ids[VT_MAX_DEVICES];
    int all_cuda = 1, ca = -1, cb = -1;
    for (int g = 0; g < first[nproc]; g++)
        all_cuda &= !strcmp(all->dev[g].backend, "cuda");
    /* distinct (host, GPU) pairs across every rank, not only within this one */
    const int all_distinct = !vt_reducer_gpu_clash(all, nproc, first, vt_mpi_host, &ca, &cb);
    for (int i = 0; i < n; i++)
        ids[i] = all->dev[first[me] + i].ordinal;
    if (!strcmp(want, "auto") || !strcmp(want, "host"))
        want = "mpi";
#ifdef VT_HAVE_CUDA
    if (!strcmp(asked ? asked : "auto", "auto") && all_cuda && all_distinct)
        want = "nccl";
    if (!strcmp(want, "mpi") && !all_distinct && me == 0) {
        const int qa = rank_of(first, nproc, ca);
        vt_warn("rank %d's tower %s and rank %d's tower %s share cuda:%d on host %s: the MPI "
                "reducer sums their gradients; each rank budgets that GPU's memory as its own, "
                "so split it with --gpu-mem\n", qa, all->dev[ca].name, rank_of(first, nproc, cb),
                all->dev[cb].name, all->dev[ca].ordinal, vt_mpi_host(qa) ? vt_mpi_host(qa) : "?");
    }
#endif
    if (!strcmp(want, "mpi"))
        return vt_reducer_mpi_init(n);
#ifdef VT_HAVE_CUDA
    if (!strcmp(want, "nccl")) {
        if (!all_cuda) {
            vt_set_err(err, errlen, "reducer nccl: needs every tower of every process on "
                       "its own GPU");
            return NULL;
        }
        if (!all_distinct) {
            clash_err(err, errlen, all, nproc, first, ca, cb);
            return NULL;
        }
        return vt_reducer_nccl_world_init(n, ids, first[nproc], first[me], world_bcast,
                                          world_barrier);
    }
#endif
    (void)asked;
    (void)ids;
    (void)all_cuda;
    (void)all_distinct;
    (void)clash_err;
    vt_set_err(err, errlen, "reducer '%s': not available across processes (mpi%s)", want,
#ifdef VT_HAVE_CUDA
               ", nccl"
#else
               "; nccl needs CUDA"
#endif
    );
    return NULL;
}

vt_reducer *vt_reducer_choose(const char *asked, const vt_device_list *towers, int nproc,
                              const int *first, int me, char *err, size_t errlen) {
    const char *want = asked && *asked ? asked : "auto";
    if (nproc > 1)
        return choose_world(want, asked, towers, nproc, first, me, err, errlen);
    const vt_device *dev = &towers->dev[first[me]];
    const int n = first[me + 1] - first[me];
    int ncuda = 0, distinct = 1;
    int ids[VT_MAX_DEVICES];
    for (int i = 0; i < n; i++)
        if (!strcmp(dev[i].backend, "cuda")) {
            for (int j = 0; j < ncuda; j++)
                if (ids[j] == dev[i].ordinal)
                    distinct = 0;
            ids[ncuda++] = dev[i].ordinal;
        }
    if (!strcmp(want, "auto")) {
        want = "host";
#ifdef VT_HAVE_CUDA
        if (ncuda == n && n > 1) {
            int same = 1;
            for (int j = 1; j < ncuda; j++)
                same &= ids[j] == ids[0];
            /* one tower per GPU: NCCL; all on one GPU: device-local sums; else host */
            want = distinct ? "nccl" : same ? "local" : "host";
        }
#endif
    }
    if (!strcmp(want, "host") || !strcmp(want, "mpi"))
        return vt_reducer_host_init(n);
#ifdef VT_HAVE_CUDA
    if (!strcmp(want, "nccl")) {
        if (ncuda != n || !distinct) {
            vt_set_err(err, errlen, "reducer nccl: needs one tower per GPU, all towers on GPUs");
            return NULL;
        }
        return vt_reducer_nccl_init(n, ids);
    }
    if (!strcmp(want, "local")) {
        /* every tower a CUDA tower (ncuda == n, so ids[0] is set) and all on one GPU */
        int same = ncuda == n && n > 0;
        for (int j = 1; same && j < ncuda; j++)
            same = ids[j] == ids[0];
        if (!same) {
            vt_set_err(err, errlen, "reducer local: needs every tower on the same GPU");
            return NULL;
        }
        return vt_reducer_local_init(n, ids[0]);
    }
#endif
    (void)distinct;
    vt_set_err(err, errlen, "reducer '%s': not available (host%s)", want,
#ifdef VT_HAVE_CUDA
               ", nccl, local"
#else
               "; nccl and local need CUDA"
#endif
    );
    return NULL;
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
