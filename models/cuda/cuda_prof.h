/*
 * cuda_prof.h: the CUDA backend's per-op GPU timer (VT_CUDA_PROF=1; cuda_prof.c), private
 * to models/cuda/. backend_cuda.c asks vt_cuda_prof_enabled() when it makes a backend;
 * when on, the backend takes vt_cuda_prof_wrap()'s table and a cu_prof in its context,
 * and prints the report when destroyed.
 */
#ifndef VT_CUDA_PROF_H
#define VT_CUDA_PROF_H

#include <stdio.h>

#include "models/backend.h"

typedef struct cu_prof cu_prof;

/* 1 when VT_CUDA_PROF is set to anything but "" or "0". */
int vt_cuda_prof_enabled(void);
/* A copy of `real` whose compute slots time each call (the same copy for every backend
 * of one table; the first call makes it). */
const vt_backend_i *vt_cuda_prof_wrap(const vt_backend_i *real);
/* A timer with its events (on the current device). */
cu_prof *vt_cuda_prof_new(void);
/* Forget what was timed so far (pending pairs are read and dropped): bench step calls it
 * after its warm-up so the table shows steady steps only. */
void vt_cuda_prof_reset(cu_prof *p);
/* The table, sorted by GPU time, to f (waits for the pending pairs). NULL: nothing. */
void vt_cuda_prof_report(cu_prof *p, int device, FILE *f);
void vt_cuda_prof_free(cu_prof *p);

#endif
