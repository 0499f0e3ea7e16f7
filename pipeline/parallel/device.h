/*
 * device.h: the devices a run trains on (DESIGN.md §4). A device is a backend name and
 * ordinal, a memory budget, a thread count (CPU), a measured speed, and — for tests and
 * benchmarks only — an emulated slowdown. This file turns the command-line options
 * (--devices, --gpus, --mem, --gpu-mem, --threads, --backend, --emulate-slowdown) into
 * a device list and describes the machine (`vidtrain devices`).
 *
 * It must never create backends or allocate device memory: it only describes. The
 * towers (pipeline/parallel/tower.c) build backends from these entries.
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
 *   --threads N      threads per CPU tower (default: cores / CPU towers)
 *   --backend NAME   backend of "cpu" towers: cpu (default, fast) or cpu-ref
 *   --emulate-slowdown R:K[,R:K]  TEST/BENCHMARK KNOB: tower R sleeps (K-1) x its
 *                    measured compute time after each micro-batch, so it runs K x slower
 * Tower names: cpu0, cpu1, ... for CPU towers (in order), cuda0, cuda1 for GPUs by id,
 * and cuda0.1, cuda0.2 for the second, third tower on GPU 0.
 */
#ifndef VT_DEVICE_H
#define VT_DEVICE_H

#include <stdint.h>
#include <stdio.h>

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
} vt_device;

typedef struct vt_device_list {
    int n;
    vt_device dev[VT_MAX_DEVICES];
} vt_device_list;

/* The option strings as given (NULL = not given). */
typedef struct vt_device_args {
    const char *devices, *gpus, *mem, *gpu_mem, *emulate, *backend, *speeds;
    int threads;        /* 0 = default */
} vt_device_args;

/* Help text for the options above (one block, for subcommands' --help). */
extern const char vt_device_args_help[];

/* If argv[*i] is a device option, store it (advancing *i past its value) and return 1;
 * return 0 if it is not one, -1 if its value is missing. Accepts "--opt V" and "--opt=V". */
int vt_device_args_take(vt_device_args *a, int argc, char **argv, int *i);

/* Build the device list. Without --devices/--gpus: every GPU when CUDA is built in and
 * present, else one CPU tower with every core. Returns 0, or -1 with err set: a GPU that
 * is not there (naming those that are), GPUs asked for without CUDA, a bad budget, a
 * budget naming no tower, a bad slowdown. */
int vt_devices_from_args(vt_device_list *out, const vt_device_args *a, char *err, size_t errlen);

/* ---- the options of a training step, shared by `vidtrain plan` and `bench step` ----
 *   --model M  --clip TxHxW  --batch B  --classes K  --tower-split POLICY  --optimizer NAME
 *   --precision fp32|tf32|bf16
 * plus the device options above. The caller sets its defaults in the struct, takes
 * options with vt_step_args_take, then checks and converts them with
 * vt_step_args_resolve. (`train`, `eval` and `predict` parse their own richer sets.) */
typedef struct vt_step_args {
    vt_device_args dev;
    const char *model, *clip, *tower_split, *optimizer, *precision;
    const char *batch, *classes;    /* as typed: resolve checks them */
    const char *old_split;          /* --split as given: a usage error in resolve, with a
                                       hint when it names a policy (now --tower-split) */
} vt_step_args;

struct vt_net_cfg;
struct vt_optim_cfg;
struct vt_slice_policy;

#define VT_STEP_ARGS_USAGE (-2)

/* As vt_device_args_take, for the device options and the seven above (and --split). */
int vt_step_args_take(vt_step_args *a, int argc, char **argv, int *i);
/* Check and convert, in this order: clip (TxHxW, each >= 1), batch >= 1, classes >= 1,
 * the optimizer's name, the precision, --split (refused), the tower policy — each a
 * usage error, VT_STEP_ARGS_USAGE with err set — then the device list (-1 with err set,
 * as vt_devices_from_args). 0 on
 * success: net = the model with one softmax head of `classes` (the model name is not
 * checked here: the memory plan or the towers refuse an unknown one), optim = the
 * optimizer's defaults. */
int vt_step_args_resolve(const vt_step_args *a, struct vt_net_cfg *net, struct vt_optim_cfg *optim,
                         struct vt_slice_policy *policy, vt_device_list *devs, int *batch,
                         char *err, size_t errlen);
/* Help lines for the seven options, showing the defaults in `a`. */
void vt_step_args_help(FILE *f, const vt_step_args *a);

/* CPU facts: model name from /proc/cpuinfo, online cores, RAM total/available. */
typedef struct vt_cpu_info {
    char model[128];
    int cores;
    int64_t ram_total, ram_available;
} vt_cpu_info;
void vt_cpu_info_get(vt_cpu_info *out);

/* Print the machine: CPU, and GPUs with versions when CUDA is built in. */
void vt_devices_print_machine(FILE *f);
/* Print a device list (name, backend, threads, budget, slowdown). */
void vt_device_list_print(const vt_device_list *l, FILE *f);

#endif
