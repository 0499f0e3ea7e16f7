/*
 * cpu_blas.h: how the cpu backend sets OpenBLAS up, once per process (cpu_blas.c).
 */
#ifndef VT_CPU_BLAS_H
#define VT_CPU_BLAS_H

/* One OpenBLAS thread for every call (idempotent, thread-safe). Before the first sgemm. */
void vt_cpu_blas_init(void);

/* "Cooperlake", "Haswell (OPENBLAS_CORETYPE)", ...: the kernels OpenBLAS runs, and
 * whether the environment chose them. Sets OpenBLAS up first. */
const char *vt_cpu_blas_kernels(void);

#endif
