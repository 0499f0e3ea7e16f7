/*
 * proc_env.c: the thread and kernel environment vidtrain chooses for itself (proc_env.h).
 *
 * GOMP_SPINCOUNT. libgomp's default (OMP_WAIT_POLICY unset) lets a thread that waits at a
 * barrier, or for the next parallel region, spin 300,000 times before it sleeps: about
 * 10 ms. A training step runs hundreds of parallel regions. On a quiet machine the
 * spinning threads own their cores and nothing is lost; once another process wants a
 * core (a browser, an indexer, a second run), the spinning team members take its share,
 * the one member that was descheduled holds up every barrier, and a 2-core machine with
 * one `yes > /dev/null` beside a run trained at 0.40x its quiet speed (issue 40; perf put
 * 71% of the samples in libgomp's spin-wait). libgomp only sees oversubscription inside
 * its own process, never another process's load. A spin of VT_OMP_SPINCOUNT keeps the
 * short waits between back-to-back regions hot and sleeps on anything longer:
 * bench/bench-contention.sh measures both sides of that trade.
 *
 * OPENBLAS_NUM_THREADS=1: the cpu backend runs every sgemm single-threaded inside its own
 * OpenMP team (models/cpu/cpu.c); set before it loads, OpenBLAS (Debian's pthread build) does
 * not start the pool of threads it would never use.
 *
 * OPENBLAS_CORETYPE: only for a CPU OpenBLAS did not recognise and gave its oldest
 * kernels (models/cpu/cpu_blas.c: 3x on an AVX-512 virtual machine).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/proc_env.h"
#include "models/cpu/cpu_blas.h"

static int set_if_unset(const char *name, const char *value) {
    const char *v = getenv(name);
    if (v && *v)
        return 0;
    return setenv(name, value, 1) == 0;
}

void vt_proc_env_apply(char **argv) {
    /* valgrind runs the program inside its own executable: /proc/self/exe is valgrind's */
    const char *pre = getenv("LD_PRELOAD");
    if (pre && strstr(pre, "vgpreload"))
        return;
    int changed = 0;
    const char *policy = getenv("OMP_WAIT_POLICY");
    if (!(policy && *policy))
        changed |= set_if_unset("GOMP_SPINCOUNT", VT_OMP_SPINCOUNT);
    changed |= set_if_unset("OPENBLAS_NUM_THREADS", "1");
    const char *core = getenv("OPENBLAS_CORETYPE");
    const char *better = core && *core ? NULL : vt_cpu_blas_better_core();
    if (better) {
        changed |= set_if_unset("OPENBLAS_CORETYPE", better);
        setenv(VT_CPU_BLAS_AUTO_ENV, better, 1);
    }
    if (!changed)
        return;
    execv("/proc/self/exe", argv);
    /* The exec failed (no /proc): go on as we are, with the variables set for children. */
}
