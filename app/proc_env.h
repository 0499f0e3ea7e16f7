/*
 * proc_env.h: the environment vidtrain's libraries start in, chosen before they read it.
 * libgomp (GOMP_SPINCOUNT, OMP_WAIT_POLICY) and OpenBLAS (OPENBLAS_CORETYPE,
 * OPENBLAS_NUM_THREADS) read their variables once, when they load, before main: a program
 * can only choose them for itself by starting again with them set (proc_env.c says why
 * each). It must never override a variable the user set, and never loop.
 */
#ifndef VT_PROC_ENV_H
#define VT_PROC_ENV_H

/* The spin count of an idle OpenMP thread (libgomp's GOMP_SPINCOUNT) vidtrain chooses
 * when the user sets neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY. */
#define VT_OMP_SPINCOUNT "1000"

/* At the top of main: sets what is unset of GOMP_SPINCOUNT (VT_OMP_SPINCOUNT, unless
 * OMP_WAIT_POLICY is set), OPENBLAS_NUM_THREADS (1) and OPENBLAS_CORETYPE (only where
 * vt_cpu_blas_better_core names one), then executes the program again through
 * /proc/self/exe with argv as given. Returns, doing nothing, when nothing needs setting,
 * under valgrind, or when the exec fails: the run is then the same, only slower. */
void vt_proc_env_apply(char **argv);

#endif
