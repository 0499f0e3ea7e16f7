/*
 * device.c: parses the device options into a vt_device_list and describes the machine
 * (CPU from /proc, GPUs through models/cuda/cuda_info.h when CUDA is built in); also the
 * step options (model, clip, batch, classes, tower split, optimizer) that `plan` and `bench
 * step` share, so that both read them the same way.
 *
 * It must never create a backend or touch device memory, and never abort on what a
 * user typed: every bad option comes back as a negative code with a sentence in err.
 */
#include "pipeline/parallel/device.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/slices.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/cuda_info.h"
#endif

/* Keep this much of a GPU's free memory out of the default budget: the CUDA context
 * grows (cuDNN/cuBLAS handles, kernels loaded lazily) after the query, and the caching
 * allocator fragments. 5% is what leaves room on 6-80 GB cards in practice. */
#define VT_GPU_RESERVE_FRACTION 0.05

const char vt_device_args_help[] =
    "devices (see `vidtrain devices`):\n"
    "  --devices LIST      cpu[:N] | cpu-ref[:N] | cuda[:I], comma-separated; cuda:I may repeat\n"
    "                      for several towers on one GPU (cuda:0,cuda:0). Default: every GPU, or\n"
    "                      one CPU tower when there is none\n"
    "  --gpus N|I,J        N GPUs (0..N-1) or a list of ids (\"--gpus 1,\" for GPU 1 alone)\n"
    "  --mem SPEC          budgets: \"2G\" for every tower or \"cpu0=2G,cpu1=1G,cuda0=5G\"\n"
    "  --gpu-mem SPEC      GPU caps \"1:5G\"; several towers on one GPU: \"0:12G,0:6G\" in order\n"
    "  --threads N         threads per CPU tower (default: cores / CPU towers)\n"
    "  --backend NAME      backend of cpu towers: cpu (fast, default) or cpu-ref (reference)\n"
    "  --speeds LIST       known clips/s per tower, \"30,15\" or \"cpu0=30,cpu1=15\" (speed policy)\n"
    "  --emulate-slowdown R:K[,R:K]  TEST/BENCHMARK KNOB: tower R runs K x slower (it sleeps\n"
    "                      (K-1) x its measured compute time after each micro-batch)\n";

/* Options whose value is kept as typed: the option and where the string goes. */
typedef struct str_opt { const char *opt; size_t off; } str_opt;

static int take_str_opt(void *a, const str_opt *opts, size_t n, int argc, char **argv, int *i) {
    for (size_t k = 0; k < n; k++) {
        const char *val = NULL;
        int r = vt_opt_value(argc, argv, i, opts[k].opt, &val);
        if (r == 1)
            *(const char **)((char *)a + opts[k].off) = val;
        if (r)
            return r;
    }
    return 0;
}

int vt_device_args_take(vt_device_args *a, int argc, char **argv, int *i) {
    static const str_opt opts[] = {
        {"--devices", offsetof(vt_device_args, devices)},
        {"--gpus", offsetof(vt_device_args, gpus)},
        {"--mem", offsetof(vt_device_args, mem)},
        {"--gpu-mem", offsetof(vt_device_args, gpu_mem)},
        {"--emulate-slowdown", offsetof(vt_device_args, emulate)},
        {"--backend", offsetof(vt_device_args, backend)},
        {"--speeds", offsetof(vt_device_args, speeds)},
    };
    const char *val = NULL;
    int r = vt_opt_value(argc, argv, i, "--threads", &val);
    if (r == 1)
        a->threads = atoi(val) > 0 ? atoi(val) : -1;
    return r ? r : take_str_opt(a, opts, VT_ARRAY_LEN(opts), argc, argv, i);
}

int vt_step_args_take(vt_step_args *a, int argc, char **argv, int *i) {
    static const str_opt opts[] = {
        {"--model", offsetof(vt_step_args, model)},
        {"--clip", offsetof(vt_step_args, clip)},
        {"--batch", offsetof(vt_step_args, batch)},
        {"--classes", offsetof(vt_step_args, classes)},
        {"--tower-split", offsetof(vt_step_args, tower_split)},
        {"--split", offsetof(vt_step_args, old_split)}, /* refused with a hint by resolve */
        {"--optimizer", offsetof(vt_step_args, optimizer)},
        {"--precision", offsetof(vt_step_args, precision)},
    };
    int r = vt_device_args_take(&a->dev, argc, argv, i);
    return r ? r : take_str_opt(a, opts, VT_ARRAY_LEN(opts), argc, argv, i);
}

/* A whole positive int (up to 2^20), or -1. */
static int positive_int(const char *s) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    return s && !errno && end != s && !*end && v >= 1 && v <= 1 << 20 ? (int)v : -1;
}

int vt_step_args_resolve(const vt_step_args *a, struct vt_net_cfg *net, struct vt_optim_cfg *optim,
                         struct vt_slice_policy *policy, vt_device_list *devs, int *batch,
                         char *err, size_t errlen) {
    int t = 0, h = 0, w = 0, classes;
    char tail;
    if (!a->clip || sscanf(a->clip, "%dx%dx%d%c", &t, &h, &w, &tail) != 3 || t < 1 || h < 1 ||
        w < 1) {
        vt_set_err(err, errlen, "--clip '%s': expected TxHxW, each >= 1 (e.g. 8x32x32)",
                   a->clip ? a->clip : "");
        return VT_STEP_ARGS_USAGE;
    }
    if ((*batch = positive_int(a->batch)) < 1) {
        vt_set_err(err, errlen, "--batch '%s': expected a whole number >= 1", a->batch ? a->batch : "");
        return VT_STEP_ARGS_USAGE;
    }
    if ((classes = positive_int(a->classes)) < 1) {
        vt_set_err(err, errlen, "--classes '%s': expected a whole number >= 1",
                   a->classes ? a->classes : "");
        return VT_STEP_ARGS_USAGE;
    }
    const char *opt = a->optimizer ? a->optimizer : "sgd";
    int ok = vt_optim_kind_parse(opt);
    if (ok < 0) {
        vt_set_err(err, errlen, "unknown optimizer '%s' (sgd, rmsprop, adamw)", opt);
        return VT_STEP_ARGS_USAGE;
    }
    int prec = vt_precision_parse(a->precision ? a->precision : "fp32");
    if (prec < 0) {
        vt_set_err(err, errlen, "--precision '%s': fp32, tf32 or bf16", a->precision);
        return VT_STEP_ARGS_USAGE;
    }
    if (a->old_split) {
        if (vt_slice_policy_like(a->old_split))
            vt_slice_policy_moved(err, errlen, a->old_split);
        else
            vt_set_err(err, errlen, "--split %s: this command has no data split; the tower "
                       "policy option is --tower-split", a->old_split);
        return VT_STEP_ARGS_USAGE;
    }
    if (vt_slice_policy_parse(policy, a->tower_split ? a->tower_split : "equal", err, errlen))
        return VT_STEP_ARGS_USAGE;
    if (vt_devices_from_args(devs, &a->dev, err, errlen))
        return -1;
    vt_net_cfg_default(net, a->model ? a->model : "tiny", classes, t, h, w);
    net->precision = (vt_precision)prec;
    vt_optim_cfg_default(optim, (vt_opt_kind)ok);
    return 0;
}

void vt_step_args_help(FILE *f, const vt_step_args *a) {
    char models[160] = "";
    for (int i = 0; vt_zoo_names[i]; i++)
        snprintf(models + strlen(models), sizeof models - strlen(models), "%s%s", i ? ", " : "",
                 vt_zoo_names[i]);
    fprintf(f,
            "  --model M           %s (default %s)\n"
            "  --clip TxHxW        clip shape (default %s)\n"
            "  --batch B           global batch (default %s)\n"
            "  --classes K         classes of the head (default %s)\n"
            "  --tower-split POLICY\n"
            "                      how a batch splits over the towers: equal | memory | speed |\n"
            "                      auto | manual:W,W... (default %s)\n"
            "  --optimizer NAME    sgd | rmsprop | adamw (default %s)\n"
            "  --precision P       %s\n",
            models, a->model, a->clip, a->batch, a->classes, a->tower_split, a->optimizer,
            vt_precision_help);
}

void vt_cpu_info_get(vt_cpu_info *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->model, sizeof out->model, "unknown CPU");
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    out->cores = n > 0 ? (int)n : 1;
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ' || *c == '\t')
                        c++;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(out->model, sizeof out->model, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    f = fopen("/proc/meminfo", "r");
    if (f) {
        while (fgets(line, sizeof line, f)) {
            long long kb;
            if (sscanf(line, "MemTotal: %lld kB", &kb) == 1)
                out->ram_total = kb * 1024;
            else if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
                out->ram_available = kb * 1024;
        }
        fclose(f);
    }
}

/* ---- helpers ---- */

static int parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 0 || v > 1 << 20)
        return -1;
    *out = (int)v;
    return 0;
}

/* One entry of a comma list, k-th of the list; may cut `entry` up. 0, or -1 with err. */
typedef int (*entry_fn)(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                        size_t errlen);

/* Runs fn on every non-empty entry of the comma list `spec` (a private copy, so fn may
 * cut entries up), stopping at the first failure. Returns how many entries there were
 * (0 for an empty list), or -1 with err set by fn. */
static int for_each_entry(vt_device_list *l, const char *spec, entry_fn fn, void *ctx,
                          char *err, size_t errlen) {
    char *buf = vt_strdup(spec);
    int n = 0, rc = 0;
    for (char *s = strtok(buf, ","); s && rc == 0; s = strtok(NULL, ","))
        if (*s && n < 64)
            rc = fn(l, s, n++, ctx, err, errlen);
    free(buf);
    return rc ? -1 : n;
}

/* Splits "KEY<sep>VALUE" at the first sep: *value is what follows it (or the whole
 * entry, key NULL, when there is no sep). */
static const char *entry_split(char *entry, int sep, const char **value) {
    char *at = strchr(entry, sep);
    if (!at) {
        *value = entry;
        return NULL;
    }
    *at = 0;
    *value = at + 1;
    return entry;
}

static int add_dev(vt_device_list *l, const char *backend, int ordinal, char *err, size_t errlen) {
    if (l->n >= VT_MAX_DEVICES) {
        vt_set_err(err, errlen, "too many towers (at most %d)", VT_MAX_DEVICES);
        return -1;
    }
    vt_device *d = &l->dev[l->n++];
    memset(d, 0, sizeof *d);
    snprintf(d->backend, sizeof d->backend, "%s", backend);
    d->ordinal = ordinal;
    d->slowdown = 1.0;
    return 0;
}

#ifdef VT_HAVE_CUDA
static void gpu_list_str(char *buf, size_t n, int count) {
    size_t o = 0;
    buf[0] = 0;
    for (int g = 0; g < count && o < n; g++) {
        vt_gpu_info gi;
        if (vt_cuda_device_query(g, &gi) == 0)
            o += (size_t)snprintf(buf + o, n - o, "%s%d (%s)", g ? ", " : "", g, gi.name);
    }
}
#endif

static int check_gpu(int id, char *err, size_t errlen) {
#ifdef VT_HAVE_CUDA
    int count = vt_cuda_device_count();
    if (count == 0) {
        vt_set_err(err, errlen, "GPU %d asked for, but no GPU is usable here (no driver or no "
                   "device); run on the CPU with --devices cpu", id);
        return -1;
    }
    if (id >= count) {
        char there[1024];
        gpu_list_str(there, sizeof there, count);
        vt_set_err(err, errlen, "GPU %d asked for, but this machine has %d: %s", id, count, there);
        return -1;
    }
    return 0;
#else
    vt_set_err(err, errlen, "GPU %d asked for, but this vidtrain was built without CUDA "
               "(rebuild with nvcc, cuDNN and NCCL present); run on the CPU with --devices cpu", id);
    return -1;
#endif
}

/* --devices entry "cpu[:N]", "cpu-ref[:N]", "cuda[:I]"; ctx: the backend of "cpu". */
static int devices_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                         size_t errlen) {
    (void)k;
    const char *num;
    const char *kind = entry_split(entry, ':', &num);
    int v = -1;
    if (!kind) {
        kind = entry;
    } else if (parse_int(num, &v)) {
        vt_set_err(err, errlen, "--devices: bad number in '%s:%s'", kind, num);
        return -1;
    }
    if (!strcmp(kind, "cpu") || !strcmp(kind, "cpu-ref")) {
        int count = v < 0 ? 1 : v;
        if (count == 0) {
            vt_set_err(err, errlen, "--devices: %s:0 asks for no tower", kind);
            return -1;
        }
        const char *be = !strcmp(kind, "cpu") ? (const char *)ctx : "cpu-ref";
        for (int c = 0; c < count; c++)
            if (add_dev(l, be, 0, err, errlen))
                return -1;
        return 0;
    }
    if (!strcmp(kind, "cuda") || !strcmp(kind, "gpu")) {
        if (v >= 0)
            return check_gpu(v, err, errlen) || add_dev(l, "cuda", v, err, errlen) ? -1 : 0;
#ifdef VT_HAVE_CUDA
        int count = vt_cuda_device_count();
#else
        int count = 0;
#endif
        if (count == 0 && check_gpu(0, err, errlen))
            return -1;
        for (int g = 0; g < count; g++)
            if (add_dev(l, "cuda", g, err, errlen))
                return -1;
        return 0;
    }
    vt_set_err(err, errlen, "--devices: unknown device '%s' (cpu[:N], cpu-ref[:N], cuda[:I])", kind);
    return -1;
}

/* --gpus list entry: one GPU id, each at most once. */
static int gpus_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err, size_t errlen) {
    (void)k;
    (void)ctx;
    int id;
    if (parse_int(entry, &id)) {
        vt_set_err(err, errlen, "--gpus: '%s' is not a GPU id", entry);
        return -1;
    }
    for (int j = 0; j < l->n; j++)
        if (!strcmp(l->dev[j].backend, "cuda") && l->dev[j].ordinal == id) {
            vt_set_err(err, errlen, "--gpus: GPU %d listed twice (several towers on one GPU: "
                       "--devices cuda:%d,cuda:%d)", id, id, id);
            return -1;
        }
    return check_gpu(id, err, errlen) || add_dev(l, "cuda", id, err, errlen) ? -1 : 0;
}

static int parse_gpus(vt_device_list *l, const char *spec, char *err, size_t errlen) {
    if (strchr(spec, ',')) {
        int n = for_each_entry(l, spec, gpus_entry, NULL, err, errlen);
        if (n == 0)
            vt_set_err(err, errlen, "--gpus: empty");
        return n > 0 ? 0 : -1;
    }
    /* a count: GPUs 0..N-1 */
    if (!*spec) {
        vt_set_err(err, errlen, "--gpus: empty");
        return -1;
    }
    int count;
    if (parse_int(spec, &count) || count == 0) {
        vt_set_err(err, errlen, "--gpus: '%s' is not a positive count", spec);
        return -1;
    }
    if (check_gpu(count - 1, err, errlen)) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        vt_set_err(err, errlen, "--gpus %d: %s", count, why);
        return -1;
    }
    for (int g = 0; g < count; g++)
        if (add_dev(l, "cuda", g, err, errlen))
            return -1;
    return 0;
}

static vt_device *find_dev(vt_device_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->dev[i].name, name))
            return &l->dev[i];
    return NULL;
}

static void names_str(const vt_device_list *l, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", l->dev[i].name);
}

/* --mem entry "2G" (every tower) or "cpu0=2G". */
static int mem_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err, size_t errlen) {
    (void)k;
    (void)ctx;
    const char *val;
    const char *name = entry_split(entry, '=', &val);
    int64_t b = vt_parse_bytes(val);
    if (b <= 0) {
        vt_set_err(err, errlen, "--mem: '%s' is not a size (e.g. 2G, 512M)", val);
        return -1;
    }
    if (!name) {
        for (int i = 0; i < l->n; i++)
            l->dev[i].budget = b;
        return 0;
    }
    vt_device *d = find_dev(l, name);
    if (!d) {
        char names[512];
        names_str(l, names, sizeof names);
        vt_set_err(err, errlen, "--mem: no tower named '%s' (towers: %s)", name, names);
        return -1;
    }
    d->budget = b;
    return 0;
}

/* --gpu-mem entry "1:5G": the k-th entry for a GPU caps its k-th tower (ctx: capped[]). */
static int gpu_mem_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                         size_t errlen) {
    (void)k;
    int *capped = ctx;
    const char *size;
    const char *gpu = entry_split(entry, ':', &size);
    if (!gpu) {
        vt_set_err(err, errlen, "--gpu-mem: '%s' is not ID:SIZE (e.g. 1:5G)", entry);
        return -1;
    }
    int id;
    int64_t b = vt_parse_bytes(size);
    if (parse_int(gpu, &id) || b <= 0) {
        vt_set_err(err, errlen, "--gpu-mem: '%s:%s' is not ID:SIZE (e.g. 1:5G)", gpu, size);
        return -1;
    }
    int i = 0;
    for (; i < l->n; i++)
        if (!strcmp(l->dev[i].backend, "cuda") && l->dev[i].ordinal == id && !capped[i])
            break;
    if (i == l->n) {
        vt_set_err(err, errlen, "--gpu-mem: no (more) tower on GPU %d to cap", id);
        return -1;
    }
    l->dev[i].budget = b;
    capped[i] = 1;
    return 0;
}

/* --speeds entry "30" (the k-th tower) or "cpu0=30". */
static int speeds_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                        size_t errlen) {
    (void)ctx;
    const char *val;
    const char *name = entry_split(entry, '=', &val);
    char *end;
    double s = strtod(val, &end);
    if (end == val || *end || !(s > 0)) {
        vt_set_err(err, errlen, "--speeds: '%s' is not a positive clips/s", val);
        return -1;
    }
    vt_device *d = name ? find_dev(l, name) : k < l->n ? &l->dev[k] : NULL;
    if (!d) {
        vt_set_err(err, errlen, "--speeds: entry '%s' names no tower", entry);
        return -1;
    }
    d->speed = s;
    return 0;
}

/* --emulate-slowdown entry "R:K": tower R runs K x slower. */
static int emulate_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                         size_t errlen) {
    (void)k;
    (void)ctx;
    const char *fac;
    const char *tower = entry_split(entry, ':', &fac);
    if (!tower) {
        vt_set_err(err, errlen, "--emulate-slowdown: '%s' is not TOWER:FACTOR (e.g. 1:2)", entry);
        return -1;
    }
    int r;
    char *end;
    double f = strtod(fac, &end);
    if (parse_int(tower, &r) || end == fac || *end || !(f >= 1.0) || f > 1000) {
        vt_set_err(err, errlen, "--emulate-slowdown: '%s:%s' is not TOWER:FACTOR with FACTOR >= 1",
                   tower, fac);
        return -1;
    }
    if (r >= l->n) {
        vt_set_err(err, errlen, "--emulate-slowdown: tower %d does not exist (%d towers)", r, l->n);
        return -1;
    }
    l->dev[r].slowdown = f;
    return 0;
}

int vt_devices_from_args(vt_device_list *out, const vt_device_args *a, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *cpu_backend = a->backend ? a->backend : "cpu";
    if (strcmp(cpu_backend, "cpu") && strcmp(cpu_backend, "cpu-ref")) {
        vt_set_err(err, errlen, "--backend: '%s' is not cpu or cpu-ref", cpu_backend);
        return -1;
    }
    if (a->threads < 0) {
        vt_set_err(err, errlen, "--threads: expects a positive number");
        return -1;
    }
    if (a->devices && a->gpus) {
        vt_set_err(err, errlen, "--devices and --gpus: give one of them");
        return -1;
    }
    if (a->devices) {
        int n = for_each_entry(out, a->devices, devices_entry, (void *)cpu_backend, err, errlen);
        if (n == 0)
            vt_set_err(err, errlen, "--devices: empty list");
        if (n <= 0)
            return -1;
    } else if (a->gpus) {
        if (parse_gpus(out, a->gpus, err, errlen))
            return -1;
    } else {
#ifdef VT_HAVE_CUDA
        int count = vt_cuda_device_count();
        for (int g = 0; g < count && g < VT_MAX_DEVICES; g++)
            add_dev(out, "cuda", g, err, errlen);
#endif
        if (out->n == 0)
            add_dev(out, cpu_backend, 0, err, errlen);
    }

    /* Names, CPU ordinals and threads. */
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    int ncpu = 0;
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->dev[i].backend, "cuda"))
            ncpu++;
    int cpu_threads = a->threads > 0 ? a->threads : VT_MAX(1, ci.cores / VT_MAX(ncpu, 1));
    int cpu_idx = 0;
    for (int i = 0; i < out->n; i++) {
        vt_device *d = &out->dev[i];
        if (strcmp(d->backend, "cuda")) {
            d->ordinal = cpu_idx++;
            d->threads = !strcmp(d->backend, "cpu-ref") ? 1 : cpu_threads;
            d->total_bytes = ci.ram_total;
            snprintf(d->name, sizeof d->name, "cpu%d", d->ordinal);
            snprintf(d->desc, sizeof d->desc, "%.90s, %d thread%s", ci.model, d->threads,
                     d->threads == 1 ? "" : "s");
        } else {
            int before = 0;
            for (int j = 0; j < i; j++)
                if (!strcmp(out->dev[j].backend, "cuda") && out->dev[j].ordinal == d->ordinal)
                    before++;
            if (before)
                snprintf(d->name, sizeof d->name, "cuda%d.%d", d->ordinal, before);
            else
                snprintf(d->name, sizeof d->name, "cuda%d", d->ordinal);
#ifdef VT_HAVE_CUDA
            vt_gpu_info gi;
            if (vt_cuda_device_query(d->ordinal, &gi) == 0) {
                d->total_bytes = gi.total_bytes;
                snprintf(d->desc, sizeof d->desc, "%.100s (cc %d.%d)", gi.name, gi.cc_major,
                         gi.cc_minor);
            }
#endif
        }
    }

    /* Budgets: explicit caps first, then defaults for the rest. */
    int capped[VT_MAX_DEVICES] = {0};
    if (a->gpu_mem && for_each_entry(out, a->gpu_mem, gpu_mem_entry, capped, err, errlen) < 0)
        return -1;
    if (a->mem) {
        if (for_each_entry(out, a->mem, mem_entry, NULL, err, errlen) < 0)
            return -1;
        for (int i = 0; i < out->n; i++)
            if (out->dev[i].budget > 0)
                capped[i] = 1;
    }
    for (int i = 0; i < out->n; i++) {
        vt_device *d = &out->dev[i];
        if (capped[i])
            continue;
        if (strcmp(d->backend, "cuda")) {
            /* CPU towers share the RAM that is available now. */
            d->budget = ci.ram_available > 0 ? ci.ram_available / VT_MAX(ncpu, 1) : 0;
        } else {
#ifdef VT_HAVE_CUDA
            vt_gpu_info gi;
            if (vt_cuda_device_query(d->ordinal, &gi) == 0) {
                int64_t avail = (int64_t)((double)gi.free_bytes * (1.0 - VT_GPU_RESERVE_FRACTION));
                int share = 0;
                for (int j = 0; j < out->n; j++)
                    if (!strcmp(out->dev[j].backend, "cuda") && out->dev[j].ordinal == d->ordinal) {
                        if (capped[j])
                            avail -= out->dev[j].budget;
                        else
                            share++;
                    }
                d->budget = avail > 0 ? avail / VT_MAX(share, 1) : 0;
                if (d->budget <= 0) {
                    vt_set_err(err, errlen, "GPU %d: the --gpu-mem caps leave nothing for %s",
                               d->ordinal, d->name);
                    return -1;
                }
            }
#endif
        }
    }
    if (a->speeds && for_each_entry(out, a->speeds, speeds_entry, NULL, err, errlen) < 0)
        return -1;
    if (a->emulate && for_each_entry(out, a->emulate, emulate_entry, NULL, err, errlen) < 0)
        return -1;
    return 0;
}

void vt_device_list_print(const vt_device_list *l, FILE *f) {
    fprintf(f, "%-9s %-8s %-8s %-12s %s\n", "tower", "backend", "threads", "budget", "device");
    for (int i = 0; i < l->n; i++) {
        const vt_device *d = &l->dev[i];
        char b[32];
        fprintf(f, "%-9s %-8s %-8d %-12s %s%s\n", d->name, d->backend, d->threads,
                d->budget ? vt_fmt_bytes(b, sizeof b, d->budget) : "unlimited", d->desc,
                d->slowdown > 1.0 ? "  [EMULATED SLOWDOWN]" : "");
        if (d->slowdown > 1.0)
            fprintf(f, "          emulated slowdown x%.2f (test/benchmark knob)\n", d->slowdown);
    }
}

void vt_devices_print_machine(FILE *f) {
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    char a[32], b[32];
    fprintf(f, "CPU   %s\n      %d cores online, RAM %s total, %s available\n", ci.model, ci.cores,
            vt_fmt_bytes(a, sizeof a, ci.ram_total), vt_fmt_bytes(b, sizeof b, ci.ram_available));
    fprintf(f, "      backends: cpu (vol2col + OpenBLAS, OpenMP), cpu-ref (reference loops)\n");
#ifdef VT_HAVE_CUDA
    int count = vt_cuda_device_count();
    vt_cuda_versions v;
    memset(&v, 0, sizeof v);
    vt_cuda_versions_get(&v);
    fprintf(f, "CUDA  built in: driver %d.%d, runtime %d.%d, cuDNN %d, NCCL %d, cuBLAS %d\n",
            v.driver / 1000, (v.driver % 1000) / 10, v.runtime / 1000, (v.runtime % 1000) / 10,
            v.cudnn, v.nccl, v.cublas);
    if (count == 0)
        fprintf(f, "GPUs  none usable (no driver or no device): training runs on the CPU\n");
    for (int g = 0; g < count; g++) {
        vt_gpu_info gi;
        if (vt_cuda_device_query(g, &gi)) {
            fprintf(f, "GPU %d  (query failed)\n", g);
            continue;
        }
        fprintf(f, "GPU %d  %s\n      memory %s total, %s free; compute capability %d.%d; %d SMs\n",
                g, gi.name, vt_fmt_bytes(a, sizeof a, gi.total_bytes),
                vt_fmt_bytes(b, sizeof b, gi.free_bytes), gi.cc_major, gi.cc_minor,
                gi.multiprocessors);
    }
#else
    fprintf(f, "CUDA  not built in (no nvcc/cuDNN/NCCL at build time): training runs on the CPU\n");
#endif
}
