/*
 * fuzz_devspec.c: libFuzzer target for the device and memory specifications
 * (vt_devices_from_args, app/device_opts.h): --devices "cpu:2,cpu-ref",
 * --gpus "0,1", --mem "cpu0=2G,cpu1=1G", --gpu-mem "1:5G", --speeds, --emulate-slowdown,
 * --backend and --threads. The input is those eight values in that order separated by NUL
 * bytes; an empty or missing part is an option not given, a part "\x01" an option given
 * empty. The fuzz build has no CUDA, so GPU requests are refused with a reason.
 *
 * Oracles besides the sanitizers: a refusal has a reason; an accepted list has 1 to
 * VT_MAX_DEVICES towers with unique, terminated names, non-negative budgets, a slowdown
 * >= 1 and a thread count >= 1 per CPU tower. It must stay small and use the public
 * header only (the option code is being reorganised).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/device_opts.h"
#include "tests/fuzz/fuzz_util.h"

#define NPARTS 8

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!devnull)
        LLVMFuzzerInitialize(NULL, NULL);
    char *p[NPARTS];
    vt_fuzz_split(data, size, p, NPARTS);
    const char *v[NPARTS];
    for (int i = 0; i < NPARTS; i++)
        v[i] = !p[i] || !p[i][0] ? NULL : !strcmp(p[i], "\x01") ? "" : p[i];
    vt_device_args a = {.devices = v[0], .gpus = v[1], .mem = v[2], .gpu_mem = v[3],
                        .speeds = v[4], .emulate = v[5], .backend = v[6]};
    if (v[7]) {
        long t = strtol(v[7], NULL, 10);
        a.threads = t < -1 ? -1 : t > 1024 ? 1024 : (int)t;
    }
    vt_device_list l;
    char err[1024] = "";
    if (vt_devices_from_args(&l, &a, err, sizeof err) == 0) {
        FUZZ_ASSERT(l.n >= 1 && l.n <= VT_MAX_DEVICES, "%d towers", l.n);
        for (int i = 0; i < l.n; i++) {
            const vt_device *d = &l.dev[i];
            FUZZ_ASSERT(memchr(d->name, 0, sizeof d->name) && d->name[0], "tower %d unnamed", i);
            for (int j = 0; j < i; j++)
                FUZZ_ASSERT(strcmp(l.dev[j].name, d->name), "two towers named %s", d->name);
            FUZZ_ASSERT(d->budget >= 0, "%s: budget %lld", d->name, (long long)d->budget);
            FUZZ_ASSERT(d->slowdown >= 1.0, "%s: slowdown %g", d->name, d->slowdown);
            FUZZ_ASSERT(d->speed >= 0, "%s: speed %g", d->name, d->speed);
            FUZZ_ASSERT(strcmp(d->backend, "cuda") == 0 || d->threads >= 1, "%s: %d threads",
                        d->name, d->threads);
        }
        vt_device_list_print(&l, devnull);
    } else {
        FUZZ_ASSERT(err[0], "device options refused without a reason");
    }
    for (int i = 0; i < NPARTS; i++)
        free(p[i]);
    return 0;
}
