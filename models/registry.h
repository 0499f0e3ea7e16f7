/*
 * registry.h: the backends vidtrain knows, by name (ggml's reg/backend split: this is the
 * reg side). A caller that only has a name — a tower built from a device list, a test
 * looping over backends — asks vt_backend_init; code that wants one backend in particular
 * calls its constructor. The op table and everything every backend shares (allocation
 * under a budget, precision) stay in backend.h.
 *
 * It must never hold state: it is a table of constructors, so backend.c (which every
 * backend calls) never needs to know any backend, and adding one is one line here.
 */
#ifndef VT_REGISTRY_H
#define VT_REGISTRY_H

#include <stdint.h>

#include "models/backend.h"

/* Constructors. budget 0 = unlimited; threads 0 = all cores. The CUDA backend's is in
 * models/cuda/backend_cuda.h. */
vt_backend *vt_backend_cpu_ref_init(int64_t budget);
vt_backend *vt_backend_cpu_init(int threads, int64_t budget);

/* By name: "cpu-ref", "cpu", "cuda" (ordinal: device id for cuda, the cpu index for the
 * CPU backends; threads: CPU backends only). NULL if that backend is not built in. */
vt_backend *vt_backend_init(const char *name, int ordinal, int threads, int64_t budget);

#endif
