/*
 * device_opts.h: the device options every command that trains or runs a model takes
 * (train, eval, predict, plan, bench step, devices), read off the command line and
 * turned into a device list through pipeline/parallel/device.h.
 *
 * Syntax (also in vt_device_args_help):
 *   --devices LIST   comma list of  cpu[:N]      N CPU towers (default backend, N=1)
 *                                   cpu-ref[:N]  N CPU towers on the reference backend
 *                                   cuda[:I]     one tower on GPU I (repeat for several
 *                                                towers on one GPU: cuda:0,cuda:0)
 *   --gpus N | I,J   N GPUs (0..N-1) or the listed ids. "--gpus 1" is a COUNT; to name
 *                    GPU 1 alone use "--gpus 1," or "--devices cuda:1".
 *   --mem SPEC       budgets by tower name: "2G" (every tower) or "cpu0=2G,cpu1=1G,cuda0=5G"
 *   --gpu-mem SPEC   GPU caps "1:5G" (GPU 1); with several towers on one GPU the entries
 *                    for it apply in order: "0:12G,0:6G"
 *   --threads N      threads per tower of the cpu backend (default: cores / CPU towers)
 *   --backend NAME   backend of "cpu" towers: cpu (default, fast) or cpu-ref
 *   --speeds LIST    known clips/s per tower: "30,15" (in tower order) or "cpu0=30,cpu1=15"
 *   --emulate-slowdown R:K[,R:K]  TEST/BENCHMARK KNOB: tower R sleeps (K-1) x its
 *                    measured compute time after each micro-batch, so it runs K x slower
 *
 * It must never abort on what a user typed: every bad value comes back as -1 with a
 * sentence naming the option and the value.
 */
#ifndef VT_DEVICE_OPTS_H
#define VT_DEVICE_OPTS_H

#include <stddef.h>

#include "models/backend.h"
#include "pipeline/parallel/device.h"

/* The option strings as given (NULL = not given). */
typedef struct vt_device_args {
    const char *devices, *gpus, *mem, *gpu_mem, *emulate, *backend, *speeds;
    int threads;        /* 0 = default; -1 = a value that is not a count (refused by
                           vt_devices_from_args) */
    int absent_gpus;    /* set by the caller, not an option: cuda towers may name GPUs this
                           machine lacks (a plan for the cards a user has elsewhere), each
                           with its budget from --mem */
} vt_device_args;

/* Help text for the options above (one block, for subcommands' --help). */
extern const char vt_device_args_help[];

/* If argv[*i] is a device option, store it (advancing *i past its value) and return 1;
 * return 0 if it is not one, -1 if its value is missing. Accepts "--opt V" and "--opt=V". */
int vt_device_args_take(vt_device_args *a, int argc, char **argv, int *i);

/* Build the device list. Without --devices/--gpus: every GPU when CUDA is built in and
 * present, else one CPU tower with every core. Returns 0, or -1 with err set: a GPU that
 * is not there (naming those that are), GPUs asked for without CUDA, a bad budget, a
 * budget naming no tower, a bad slowdown; -2 with err for an option that would change
 * nothing (a usage error): --threads with no tower of the cpu backend (cpu-ref runs one
 * thread, a GPU tower none of the cores), --backend with no tower it picks the backend
 * of (--gpus, or --devices without a plain cpu entry, or the default list of GPUs). */
int vt_devices_from_args(vt_device_list *out, const vt_device_args *a, char *err, size_t errlen);

/* What vt_devices_from_args refuses as changing nothing, as bits: VT_DEVARG_BACKEND
 * (a->backend with no tower it picks the backend of), VT_DEVARG_THREADS (a->threads with
 * no tower of the cpu backend, once an unused --backend is left out); 0 when each one set
 * acts, -1 with err when the list cannot be built. For a resumed run's saved options,
 * which no longer apply on other towers (app/train/train_args.c). */
enum { VT_DEVARG_BACKEND = 1, VT_DEVARG_THREADS = 2 };
int vt_device_args_unused(const vt_device_args *a, char *err, size_t errlen);

/* --precision p given for the towers of l: -1 with err when no tower of l computes it
 * differently from fp32 (TF32 is a GPU mode: every CPU backend computes it as FP32, so
 * --precision tf32 without a CUDA tower changes nothing), else 0. */
int vt_devices_check_precision(const vt_device_list *l, vt_precision p, char *err,
                               size_t errlen);

/* --tower-split POLICY given (policy non-NULL; NULL: not given) for a run of ntowers
 * towers, every process's counted: -1 with err when there are fewer than two (one tower
 * takes the whole batch: nothing to split, docs/style.md §17), else 0. train, bench step,
 * eval, predict, embed and plan refuse with it. */
int vt_tower_split_check(const char *policy, int ntowers, char *err, size_t errlen);

#endif
