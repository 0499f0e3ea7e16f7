/*
 * device.h: the devices a run trains on (docs/design.md §4). A device is a backend name and
 * ordinal, a memory budget, a thread count (CPU), a measured speed, and — for tests and
 * benchmarks only — an emulated slowdown. This file builds a device list from values
 * that app/ has already read off the command line (app/device_opts.h holds the options'
 * syntax), and describes the machine (`vidtrain devices`).
 *
 * It must never create backends or allocate device memory: it only describes. The
 * towers (pipeline/parallel/towers/tower.c) build backends from these entries.
 *
 * Tower names: cpu0, cpu1, ... for CPU towers (in order), cuda0, cuda1 for GPUs by id,
 * and cuda0.1, cuda0.2 for the second, third tower on GPU 0.
 */
#ifndef VT_DEVICE_H
#define VT_DEVICE_H

#include <stdint.h>
#include <stdio.h>

#include "base/host_mem.h"

/* Towers in one run: every process of an MPI run together (pipeline/parallel/mpi.h). */
#define VT_MAX_DEVICES 64

typedef struct vt_device {
    char name[32];      /* "cpu0", "cuda1", "cuda0.1": what --mem and the plan use */
    char backend[16];   /* "cpu", "cpu-ref", "cuda" */
    int ordinal;        /* CPU tower index or CUDA device id */
    int threads;        /* CPU threads for this tower (cuda: 0) */
    int64_t budget;     /* bytes the tower's backend may hold; 0 = unlimited */
    int64_t total_bytes;/* RAM or GPU memory, for display; 0 = unknown */
    double speed;       /* measured or given clips/s; 0 = unknown */
    double slowdown;    /* emulated slowdown factor K >= 1 (1 = none); tests/benchmarks */
    char desc[128];     /* "Intel Xeon ... (2 threads)", "NVIDIA H100 (cc 9.0)" */
    int mem_default;    /* a CPU tower whose budget is its share of the memory the process
                           may take (the list's mem_note says it), not a --mem cap */
} vt_device;

typedef struct vt_device_list {
    int n;
    vt_device dev[VT_MAX_DEVICES];
    /* set by the caller before the budgets: bytes the process will hold beside its
     * towers (the loader's frame cache, workers and queue), kept out of the CPU towers'
     * default budgets */
    int64_t host_reserve;
    /* "cpu memory: ...": what the CPU towers' default budgets were drawn from, which
     * limit decided and what was kept out (vt_device_list_print prints it); "" when no
     * CPU tower took a default */
    char mem_note[640];
} vt_device_list;

/* ---- building a list (app/device_opts.c drives these, entry by entry) ---- */

/* Appends a device: backend "cpu", "cpu-ref" or "cuda", ordinal = the GPU id (CPU: 0;
 * vt_device_list_describe numbers them). 0, or -1 with err when the list is full. */
int vt_device_list_add(vt_device_list *l, const char *backend, int ordinal, char *err,
                       size_t errlen);
/* Every GPU when CUDA is built in and present, else one CPU tower of cpu_backend. */
int vt_device_list_add_default(vt_device_list *l, const char *cpu_backend, char *err,
                               size_t errlen);
/* GPUs this process can use (0 without CUDA, a driver or a device). */
int vt_gpu_count(void);
/* 0 when GPU id is there; -1 with err saying what is there (or why there is none). */
int vt_gpu_check(int id, char *err, size_t errlen);
/* Once every device is added: names, CPU ordinals, threads (threads > 0: that many per
 * CPU tower, cpu-ref 1; else cores / CPU towers), memory totals and descriptions. */
void vt_device_list_describe(vt_device_list *l, int threads);
/* The tower called name (after describe), or NULL. */
vt_device *vt_device_list_find(vt_device_list *l, const char *name);
/* "cpu0, cpu1, cuda0": every tower's name, for messages. */
void vt_device_list_names(const vt_device_list *l, char *buf, size_t n);
/* Default budgets of the towers not capped[i]: CPU towers share the memory available now
 * under the tightest of the RAM, ulimit -v, ulimit -d and the cgroup's limit
 * (base/host_mem.h), less l->host_reserve and OpenBLAS's buffers (cpu_blas.h), said in
 * l->mem_note;
 * GPU towers share the GPU's free memory less a reserve and less the caps of the other
 * towers on it. 0, or -1 with err when caps leave nothing for a tower. */
int vt_device_list_budget_defaults(vt_device_list *l, const int *capped, char *err,
                                   size_t errlen);

/* The default budgets of the CPU towers drawn again with `reserve` bytes kept out for
 * what the process will hold beside them (the loader's buffers, workers and a frame cache
 * of a given size: train knows them once its clip is resolved, after the list is built). */
void vt_device_list_keep_host(vt_device_list *l, int64_t reserve);

/* CPU facts: model name from /proc/cpuinfo, online cores, RAM total/available. */
typedef struct vt_cpu_info {
    char model[128];
    int cores;
    int64_t ram_total, ram_available; /* available: under the limit that decided (mem) */
    vt_host_mem mem; /* the RAM and the process's limits (base/host_mem.h) */
} vt_cpu_info;
void vt_cpu_info_get(vt_cpu_info *out);

/* Print the machine: CPU, and GPUs with versions when CUDA is built in. */
void vt_devices_print_machine(FILE *f);
/* Print a device list (name, backend, threads, budget, slowdown). */
void vt_device_list_print(const vt_device_list *l, FILE *f);

#endif
