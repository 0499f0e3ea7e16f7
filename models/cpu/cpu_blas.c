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
 * its first use (BUFFER_SIZE, 128 MiB in x86-64 builds: VT_CPU_BLAS_BUFFER) and kept.
 * OpenBLAS 0.3.21 (Debian 12's) retries a refused map for ever (its issue 5289; 0.3.30
 * exits instead): under a limit on mappings (ulimit -v, and ulimit -d, which counts
 * private writable maps) too tight for them, the first step spun with no word. Under
 * such a limit vt_cpu_blas_reserve maps a backend's buffers at its start, while a refusal
 * can still be said: a trial map of their size first, then the pool filled with them
 * (docs/design.md §3.8 has the measurements).
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
#include "base/host_mem.h"
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

/* OpenBLAS's pool, exported by its shared library: holding N buffers at once maps N
 * (every sgemm takes one while it runs, and the pool keeps it after). Weak: another
 * cblas lacks them, and the sgemm warm-up below is all there is. */
extern void *blas_memory_alloc(int procpos) __attribute__((weak));
extern void blas_memory_free(void *buffer) __attribute__((weak));

/* large enough for OpenBLAS's blocked path, which takes a buffer (a small-matrix kernel
 * would not), small enough to cost nothing: 2 * 256^3 flops a thread */
#define WARM_N 256

static pthread_mutex_t reserve_lock = PTHREAD_MUTEX_INITIALIZER;
static int reserved; /* buffers in OpenBLAS's pool, mapped here */

int vt_cpu_blas_pooled(void) {
    pthread_mutex_lock(&reserve_lock);
    int n = reserved;
    pthread_mutex_unlock(&reserve_lock);
    return n;
}

/* The limit on mappings (ulimit -v against VmSize, ulimit -d against VmData) that leaves
 * the least room: its room in *left and its words in what; 0 when there is none. */
static int map_limit(int64_t *left, char *what, size_t n) {
    vt_host_mem m;
    vt_host_mem_get(&m);
    int64_t as = m.as_limit >= 0 ? VT_MAX(m.as_limit - VT_MAX(m.as_used, 0), 0) : -1;
    int64_t data = m.data_limit >= 0 ? VT_MAX(m.data_limit - VT_MAX(m.data_used, 0), 0) : -1;
    if (as < 0 && data < 0)
        return 0;
    char a[32], b[32];
    if (as >= 0 && (data < 0 || as <= data)) {
        *left = as;
        snprintf(what, n, "the address-space limit (ulimit -v: %s, %s mapped)",
                 vt_fmt_bytes(a, sizeof a, m.as_limit), vt_fmt_bytes(b, sizeof b, m.as_used));
    } else {
        *left = data;
        snprintf(what, n, "the data limit (ulimit -d: %s, %s in data mappings)",
                 vt_fmt_bytes(a, sizeof a, m.data_limit), vt_fmt_bytes(b, sizeof b, m.data_used));
    }
    return 1;
}

/* want buffers in OpenBLAS's pool: held at once through its allocator, or, without it,
 * one sgemm per thread at once (which a loaded machine may run one after another, mapping
 * fewer). 0, or -1 when the warm-up's own matrices were refused. */
static int fill_pool(int want) {
    if (blas_memory_alloc && blas_memory_free) {
        void **b = calloc((size_t)want, sizeof *b);
        if (!b)
            return -1;
        for (int i = 0; i < want; i++)
            b[i] = blas_memory_alloc(0);
        for (int i = 0; i < want; i++)
            blas_memory_free(b[i]);
        free(b);
        return 0;
    }
    float *m = calloc((size_t)want * 3 * WARM_N * WARM_N, sizeof(float));
    if (!m)
        return -1;
#pragma omp parallel num_threads(want)
    {
        /* all at once: a call that ended would hand its buffer to the next */
#pragma omp barrier
        float *a = m + (size_t)omp_get_thread_num() * 3 * WARM_N * WARM_N;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, WARM_N, WARM_N, WARM_N, 1.0f, a,
                    WARM_N, a + WARM_N * WARM_N, WARM_N, 0.0f, a + 2 * WARM_N * WARM_N, WARM_N);
    }
    free(m);
    return 0;
}

int vt_cpu_blas_reserve(int threads, char *err, size_t errlen) {
    vt_cpu_blas_init();
    int64_t left = 0;
    char what[200];
    if (threads <= 0 || !map_limit(&left, what, sizeof what))
        return 0; /* no limit on mappings: OpenBLAS maps as it goes, and gets them */
    pthread_mutex_lock(&reserve_lock);
    /* every backend's threads may call at once: the pool must hold them all. What a step
     * maps beside them is the memory plan's, whose budget takes them off first
     * (device.c), so the trial asks for the buffers alone: more refused limits that
     * would not have hung. Writable and private, as OpenBLAS maps them, so that
     * ulimit -d counts it too */
    int want = reserved + threads, rc = 0;
    size_t need = (size_t)threads * VT_CPU_BLAS_BUFFER;
    void *trial = mmap(NULL, need, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (trial == MAP_FAILED) {
        char a[32], b[32], c[32];
        int fit = (int)(left / (int64_t)VT_CPU_BLAS_BUFFER);
        char more[64] = ": not one thread's fits";
        if (fit > 0)
            snprintf(more, sizeof more, ", or give fewer --threads (%d fit)", fit);
        vt_set_err(err, errlen, "%s leaves %s, and OpenBLAS's buffers for %d more computing "
                   "thread(s) take %s (%d MiB each, mapped whole; OpenBLAS 0.3.21 waits for "
                   "ever on one it is refused): raise the limit by %s at least (more for the "
                   "step beside them)%s", what, vt_fmt_bytes(a, sizeof a, left), threads,
                   vt_fmt_bytes(b, sizeof b, (int64_t)need), (int)(VT_CPU_BLAS_BUFFER >> 20),
                   vt_fmt_bytes(c, sizeof c, VT_MAX((int64_t)need - left, 4096)), more);
        rc = -1;
    } else {
        munmap(trial, need);
        if (fill_pool(want) != 0) {
            vt_set_err(err, errlen, "%s leaves too little to start OpenBLAS: raise it", what);
            rc = -1;
        } else {
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
