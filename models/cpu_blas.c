/*
 * cpu_blas.c: OpenBLAS set-up for the cpu backend: one thread for its calls (cpu.c says
 * why), once per process, and which kernels it runs, for the device line.
 *
 * Kernels. OpenBLAS built for many CPUs (DYNAMIC_ARCH: Debian's) picks its kernels once,
 * when it loads, from the CPU — unless OPENBLAS_CORETYPE names a core. Naming an older
 * one costs: on a 2-core AMD Zen 5 with OPENBLAS_CORETYPE=Haswell in its environment the
 * `tiny` 8x64 batch-8 step ran at 105-111 clips/s against 140-146 with the AVX-512
 * kernels OpenBLAS picks itself (Cooperlake; bench step, interleaved runs). We leave the
 * variable alone (it is the user's), and the device line names the kernels and the
 * variable when it is set, so a slow choice is visible.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <cblas.h>

#include "models/cpu_blas.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_name[64] = "?";

static void blas_setup(void) {
    openblas_set_num_threads(1);
    const char *core = openblas_get_corename();
    const char *forced = getenv("OPENBLAS_CORETYPE");
    snprintf(blas_name, sizeof blas_name, "%.20s%s", core && *core ? core : "?",
             forced && *forced ? " (OPENBLAS_CORETYPE)" : "");
}

void vt_cpu_blas_init(void) { pthread_once(&blas_once, blas_setup); }

const char *vt_cpu_blas_kernels(void) {
    vt_cpu_blas_init();
    return blas_name;
}
