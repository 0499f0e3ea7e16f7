/*
 * registry.c: the table of known backends and construction by name (registry.h). Each
 * entry adapts one constructor to the common (ordinal, threads, budget) form; a backend
 * not built in (CUDA without VT_HAVE_CUDA) has no entry, so asking for it gives NULL and
 * the caller says so.
 *
 * It must never hold state or grow logic beyond the lookup: what a backend does belongs
 * in its own file, what every backend shares in backend.c.
 */
#include "models/registry.h"

#include <string.h>

#include "base/common.h"
#include "models/backend_waits.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/backend_cuda.h"
#endif

typedef struct backend_reg {
    const char *name;
    vt_backend *(*init)(int ordinal, int threads, int64_t budget);
} backend_reg;

static vt_backend *init_cpu_ref(int ordinal, int threads, int64_t budget) {
    (void)ordinal;
    (void)threads; /* plain loops: always one thread */
    return vt_backend_cpu_ref_init(budget);
}
static vt_backend *init_cpu(int ordinal, int threads, int64_t budget) {
    (void)ordinal;
    return vt_backend_cpu_init(threads, budget);
}
#ifdef VT_HAVE_CUDA
static vt_backend *init_cuda(int ordinal, int threads, int64_t budget) {
    (void)threads;
    return vt_backend_cuda_init(ordinal, budget);
}
#endif

static const backend_reg registry[] = {
    {.name = "cpu-ref", .init = init_cpu_ref},
    {.name = "cpu", .init = init_cpu},
#ifdef VT_HAVE_CUDA
    {.name = "cuda", .init = init_cuda},
#endif
};

vt_backend *vt_backend_init(const char *name, int ordinal, int threads, int64_t budget) {
    for (size_t i = 0; i < VT_ARRAY_LEN(registry); i++) {
        if (strcmp(name, registry[i].name))
            continue;
        vt_backend *be = registry[i].init(ordinal, threads, budget);
        if (be) /* the CPU constructors know no ordinal: "cpu1" is the second cpu tower */
            be->ordinal = ordinal;
        if (be && vt_backend_waits_enabled())
            vt_backend_count_waits(be);
        return be;
    }
    return NULL;
}
