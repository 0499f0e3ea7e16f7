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
 *
 * Buffers. Each sgemm call running at once takes a buffer of OpenBLAS's pool, mapped at
 * its first use (BUFFER_SIZE: 128 MiB in x86-64 builds) and kept. OpenBLAS 0.3.21
 * (Debian 12's) retries a refused map for ever (its issue 5289; 0.3.30 exits instead):
 * under an address-space limit (ulimit -v) too tight for them, the first step spun
 * with no word. Under such a limit vt_cpu_blas_reserve maps a backend's buffers at its
 * start, while a refusal can still be said: a trial map of their size first, then one
 * sgemm per thread at once, which leaves them in the pool for the calls after.
 *
 * It must never run an sgemm whose buffer a refused map could hang on unsaid.
 */
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cblas.h>

#include "base/common.h"
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

/* OpenBLAS's buffer and what its allocator adds (the gdb trace of the hang: 128 MiB and
 * 128 MiB + 8 KiB maps), rounded up. */
#define BLAS_BUFFER (((size_t)128 << 20) + ((size_t)64 << 10))
/* large enough for OpenBLAS's blocked path, which takes a buffer (a small-matrix kernel
 * would not), small enough to cost nothing: 2 * 256^3 flops a thread */
#define WARM_N 256

static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;
static int reserved; /* buffers in OpenBLAS's pool, mapped here */

int vt_cpu_blas_reserve(int threads, char *err, size_t errlen) {
    vt_cpu_blas_init();
    struct rlimit rl;
    if (threads <= 0 || getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0; /* no limit: OpenBLAS maps as it goes, and gets what it asks for */
    pthread_mutex_lock(&reserve_lock);
    /* every backend's threads may call at once: the pool must hold them all. The trial
     * asks for as much again: what a step maps beside them (activations, workspace,
     * decoders, thread stacks) comes later, and a buffer refused then spins */
    int want = reserved + threads, rc = 0;
    void *trial = mmap(NULL, (size_t)want * 2 * BLAS_BUFFER, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (trial == MAP_FAILED) {
        vt_set_err(err, errlen, "the address-space limit (ulimit -v: %llu KiB) leaves too "
                   "little for OpenBLAS's buffers, %d of %zu MiB for %d computing thread(s) "
                   "and as much again beside them (%s): raise the limit, or give fewer "
                   "--threads", (unsigned long long)(rl.rlim_cur >> 10), want,
                   BLAS_BUFFER >> 20, want,
                   strerror(errno));
        rc = -1;
    } else {
        munmap(trial, (size_t)want * 2 * BLAS_BUFFER);
        float *m = calloc((size_t)want * 3 * WARM_N * WARM_N, sizeof(float));
        if (!m) {
            vt_set_err(err, errlen, "the address-space limit (ulimit -v: %llu KiB) leaves too "
                       "little to start OpenBLAS: raise it", (unsigned long long)(rl.rlim_cur >> 10));
            rc = -1;
        } else {
#pragma omp parallel num_threads(want)
            {
                /* all at once: a call that ended would hand its buffer to the next */
#pragma omp barrier
                float *a = m + (size_t)omp_get_thread_num() * 3 * WARM_N * WARM_N;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, WARM_N, WARM_N, WARM_N,
                            1.0f, a, WARM_N, a + WARM_N * WARM_N, WARM_N, 0.0f,
                            a + 2 * WARM_N * WARM_N, WARM_N);
            }
            free(m);
            reserved = want;
        }
    }
    pthread_mutex_unlock(&reserve_lock);
    return rc;
}

const char *vt_cpu_blas_kernels(void) {
    vt_cpu_blas_init();
    return blas_name;
}
