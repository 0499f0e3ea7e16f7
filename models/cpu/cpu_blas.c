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
 *
 * An x86-64 CPU that OpenBLAS does not know gets its oldest kernels ("Prescott", SSE3),
 * whatever the CPU can do: a virtual machine's "Intel(R) Xeon(R) Processor" with
 * AVX-512 (Debian 12's OpenBLAS 0.3.21) trained `tiny` 8x64x64 batch 8 at 15.2 clips/s
 * on Prescott against 45.7 on SkylakeX and 36.3 on Haswell (bench step, 2 threads).
 * vt_cpu_blas_better_core names the kernels such a CPU can run, judged from CPUID and
 * from what the OS saves (XGETBV): the program then starts again with OPENBLAS_CORETYPE
 * set (app/proc_env.c), since OpenBLAS picks once, when it loads. A CPU OpenBLAS knew is
 * never second-guessed, nor a user's OPENBLAS_CORETYPE. test_ops compares every op of
 * the cpu backend with cpu-ref on whichever kernels run.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "models/cpu/cpu_blas.h"

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_name[64] = "?";

static void blas_setup(void) {
    openblas_set_num_threads(1);
    const char *core = openblas_get_corename();
    const char *forced = getenv("OPENBLAS_CORETYPE");
    const char *auto_set = getenv(VT_CPU_BLAS_AUTO_ENV);
    snprintf(blas_name, sizeof blas_name, "%.20s%s", core && *core ? core : "?",
             !(forced && *forced)             ? ""
             : auto_set && !strcmp(auto_set, forced) ? " (vidtrain's pick)"
                                              : " (OPENBLAS_CORETYPE)");
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The register state the OS saves on a context switch (XCR0): kernels that use a state it
 * does not save would crash or compute garbage. */
static uint64_t os_saved_state(void) {
    uint32_t a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    if (!(c & (1u << 27))) /* OSXSAVE: no XGETBV, only SSE state */
        return 0;
    __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
    return ((uint64_t)d << 32) | a;
}

const char *vt_cpu_blas_better_core(void) {
    const char *core = openblas_get_corename();
    if (!core || strcmp(core, "Prescott")) /* OpenBLAS knew the CPU (or it is one) */
        return NULL;
    __builtin_cpu_init();
    uint64_t xcr0 = os_saved_state();
    const int ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0;
    if (zmm && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512cd"))
        return "SkylakeX";
    if (ymm && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "Haswell";
    if (ymm && __builtin_cpu_supports("avx"))
        return "Sandybridge";
    return NULL;
}
#else
const char *vt_cpu_blas_better_core(void) { return NULL; }
#endif

void vt_cpu_blas_init(void) { pthread_once(&blas_once, blas_setup); }

const char *vt_cpu_blas_kernels(void) {
    vt_cpu_blas_init();
    return blas_name;
}
