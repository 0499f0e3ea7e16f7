/*
 * backend_waits.h: the host's waits through a backend's op table, counted on any backend
 * (issue 45 item 3: a step should wait for the device as few times as it can; VT_CUDA_PROF
 * counts them on CUDA alone). VT_HOST_WAITS=1 in the environment when a backend is made
 * (registry.h vt_backend_init) gives it a counting copy of its table, which prints the
 * counts to stderr when the backend is freed; tests read them with vt_backend_waits.
 *
 * A wait is a call of a slot that blocks the host until the device is done: to_host,
 * synchronize (vt_backend_sync), sumsq and upload_wait. The CPU backends have nothing to
 * wait for, but the host code calls the same slots on them as on a GPU (the copy wrapper
 * gives them a synchronize and a to_host_async of their own, so vt_backend_sync and
 * vt_backend_to_host_async go through the table as on CUDA): what is counted is what the
 * code asks, the same on every backend but where it branches on host memory.
 */
#ifndef VT_BACKEND_WAITS_H
#define VT_BACKEND_WAITS_H

#include <stdint.h>

#include "models/backend.h"

enum {
    VT_WAIT_TO_HOST,
    VT_WAIT_SYNCHRONIZE,
    VT_WAIT_SUMSQ,
    VT_WAIT_UPLOAD,
    VT_WAIT_KINDS,
};

/* 1 when VT_HOST_WAITS is set (not "0"). */
int vt_backend_waits_enabled(void);
/* Gives be the counting table (once; the counts start at 0). */
void vt_backend_count_waits(vt_backend *be);
/* The counts so far by kind (VT_WAIT_*) and the optimizer updates (sgd, rmsprop and adamw
 * calls) into *updates; 0, or -1 when be does not count. */
int vt_backend_waits(const vt_backend *be, int64_t waits[VT_WAIT_KINDS], int64_t *updates);

#endif
