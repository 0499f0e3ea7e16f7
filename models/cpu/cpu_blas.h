/*
 * cpu_blas.h: how the cpu backend sets OpenBLAS up, once per process (cpu_blas.c).
 */
#ifndef VT_CPU_BLAS_H
#define VT_CPU_BLAS_H

/* One OpenBLAS thread for every call (idempotent, thread-safe). Before the first sgemm. */
void vt_cpu_blas_init(void);

#include <stddef.h>

/* One OpenBLAS buffer: a thread's sgemm maps it whole (BUFFER_SIZE of x86-64 builds;
 * VmSize and VmData grow by exactly this per thread), and touches a few MiB of it (its
 * blocks of A and B: 3.0 MiB a thread measured at 2048^3 on Haswell kernels; larger
 * kernels' blocks are larger, hence the margin of VT_CPU_BLAS_TOUCHED). */
#define VT_CPU_BLAS_BUFFER ((size_t)128 << 20)
#define VT_CPU_BLAS_TOUCHED ((size_t)8 << 20)

/* Under a limit on mappings (ulimit -v, ulimit -d), OpenBLAS's buffers for `threads` more
 * threads calling at once, mapped now (cpu_blas.c: "Buffers"; nothing to do without such
 * a limit). 0, or -1 with err when the limit leaves too little, naming it, the room and
 * the buffers' size: OpenBLAS would spin for ever on the refused map at the first call.
 * Thread-safe; before the backend's first sgemm. */
int vt_cpu_blas_reserve(int threads, char *err, size_t errlen);

/* Buffers vt_cpu_blas_reserve has put in OpenBLAS's pool so far. */
int vt_cpu_blas_pooled(void);

/* "Cooperlake", "Haswell (OPENBLAS_CORETYPE)", ...: the kernels OpenBLAS runs, and
 * whether the environment chose them. Sets OpenBLAS up first. */
const char *vt_cpu_blas_kernels(void);

/* The OPENBLAS_CORETYPE this CPU should run, or NULL: non-NULL only when OpenBLAS fell
 * back on its oldest x86-64 kernels ("Prescott") for a CPU it did not recognise while the
 * CPU and the OS support AVX-512 ("SkylakeX"), AVX2 + FMA ("Haswell") or AVX
 * ("Sandybridge"). OpenBLAS reads OPENBLAS_CORETYPE only when it loads (cpu_blas.c). */
const char *vt_cpu_blas_better_core(void);

/* Set (to the core's name) beside OPENBLAS_CORETYPE when vidtrain chose the core itself,
 * so that the device line says so. */
#define VT_CPU_BLAS_AUTO_ENV "VT_OPENBLAS_CORETYPE_AUTO"

#endif
