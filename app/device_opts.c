/*
 * device_opts.c: the device options (device_opts.h): taken off argv as typed, then each
 * comma list read entry by entry — numbers by the strict parsers of base/common.h,
 * sizes by vt_parse_bytes — and handed to pipeline/parallel/device.h, which knows the
 * machine. Entries are read and applied in the order the lists come, so the first
 * thing wrong is the one reported. It must never abort on what a user typed.
 */
#include "app/device_opts.h"

#include <stdlib.h>
#include <string.h>

#include "app/opts.h"
#include "base/common.h"

/* More threads per CPU tower than any machine has cores: a typo, not a request. */
#define VT_MAX_THREADS 4096

const char vt_device_args_help[] =
    "devices (see `vidtrain devices`):\n"
    "  --devices LIST      cpu[:N] | cpu-ref[:N] | cuda[:I], comma-separated; cuda:I may repeat\n"
    "                      for several towers on one GPU (cuda:0,cuda:0). Default: every GPU, or\n"
    "                      one CPU tower when there is none\n"
    "  --gpus N|I,J        N GPUs (0..N-1) or a list of ids (\"--gpus 1,\" for GPU 1 alone)\n"
    "  --mem SPEC          budgets: \"2G\" for every tower, \"12G,6G\" tower by tower, or\n"
    "                      \"cpu0=2G,cpu1=1G,cuda0=5G\". A CPU tower's default: its share\n"
    "                      of the least of the RAM available, ulimit -v, ulimit -d and the\n"
    "                      cgroup's limit (a container's), less OpenBLAS's buffers and the\n"
    "                      loader's (the \"cpu memory:\" line says which decided); CPU\n"
    "                      caps past what that leaves are warned of\n"
    "  --gpu-mem SPEC      GPU caps \"1:5G\"; several towers on one GPU: \"0:12G,0:6G\" in order\n"
    "  --threads N         threads per tower of the cpu backend (default: cores / CPU towers)\n"
    "  --backend NAME      backend of the cpu entries' towers: cpu (fast, default) or cpu-ref\n"
    "                      (reference, one thread)\n"
    "  --speeds LIST       known clips/s per tower, \"30,15\" or \"cpu0=30,cpu1=15\" (speed policy)\n"
    "  --emulate-slowdown R:K[,R:K]  TEST/BENCHMARK KNOB: tower R runs K x slower (it sleeps\n"
    "                      (K-1) x its measured compute time after each micro-batch)\n";

int vt_device_args_take(vt_device_args *a, int argc, char **argv, int *i) {
    static const vt_opt_str opts[] = {
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
    /* A bad count is kept as -1 and refused by vt_devices_from_args, with the others. */
    if (r == 1 && vt_parse_int(val, 1, VT_MAX_THREADS, &a->threads) != 0)
        a->threads = -1;
    return r ? r : vt_opt_take_str(a, opts, VT_ARRAY_LEN(opts), argc, argv, i);
}

/* ---- the comma lists ---- */

/* A tower count, GPU id or tower index of a list entry: 0..2^20. */
static int parse_count(const char *s, int *out) { return vt_parse_int(s, 0, 1 << 20, out); }

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
    char *save = NULL;
    for (char *s = strtok_r(buf, ",", &save); s && rc == 0; s = strtok_r(NULL, ",", &save))
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

/* GPU id is there (vt_gpu_check), or need not be: a plan for GPUs this machine lacks
 * (absent_gpus), whose budgets --mem gives (vt_devices_from_args checks). 0 or -1. */
static int gpu_ok(const vt_device_args *a, int id, char *err, size_t errlen) {
    return a->absent_gpus ? 0 : vt_gpu_check(id, err, errlen);
}

/* --devices entry "cpu[:N]", "cpu-ref[:N]", "cuda[:I]"; ctx: the vt_device_args. */
static int devices_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err,
                         size_t errlen) {
    (void)k;
    const vt_device_args *a = ctx;
    const char *num;
    const char *kind = entry_split(entry, ':', &num);
    int v = -1;
    if (!kind) {
        kind = entry;
    } else if (parse_count(num, &v)) {
        vt_set_err(err, errlen, "--devices: bad number in '%s:%s'", kind, num);
        return -1;
    }
    if (!strcmp(kind, "cpu") || !strcmp(kind, "cpu-ref")) {
        int count = v < 0 ? 1 : v;
        if (count == 0) {
            vt_set_err(err, errlen, "--devices: %s:0 asks for no tower", kind);
            return -1;
        }
        const char *be = !strcmp(kind, "cpu") ? (a->backend ? a->backend : "cpu") : "cpu-ref";
        for (int c = 0; c < count; c++)
            if (vt_device_list_add(l, be, 0, err, errlen))
                return -1;
        return 0;
    }
    if (!strcmp(kind, "cuda") || !strcmp(kind, "gpu")) {
        if (v >= 0)
            return gpu_ok(a, v, err, errlen) || vt_device_list_add(l, "cuda", v, err, errlen)
                       ? -1 : 0;
        int count = vt_gpu_count();
        if (count == 0 && vt_gpu_check(0, err, errlen))
            return -1;
        for (int g = 0; g < count; g++)
            if (vt_device_list_add(l, "cuda", g, err, errlen))
                return -1;
        return 0;
    }
    vt_set_err(err, errlen, "--devices: unknown device '%s' (cpu[:N], cpu-ref[:N], cuda[:I])", kind);
    return -1;
}

/* 1 when the --devices list has a plain "cpu" or "cpu:N" entry (the towers --backend
 * gives its backend to), else 0. */
static int has_cpu_entry(const char *spec) {
    for (const char *s = spec; *s;) {
        size_t n = strcspn(s, ",:");
        if (n == 3 && !strncmp(s, "cpu", 3))
            return 1;
        s += strcspn(s, ",");
        s += *s == ',';
    }
    return 0;
}

/* --gpus list entry: one GPU id, each at most once. */
static int gpus_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err, size_t errlen) {
    (void)k;
    const vt_device_args *a = ctx;
    int id;
    if (parse_count(entry, &id)) {
        vt_set_err(err, errlen, "--gpus: '%s' is not a GPU id", entry);
        return -1;
    }
    for (int j = 0; j < l->n; j++)
        if (!strcmp(l->dev[j].backend, "cuda") && l->dev[j].ordinal == id) {
            vt_set_err(err, errlen, "--gpus: GPU %d listed twice (several towers on one GPU: "
                       "--devices cuda:%d,cuda:%d)", id, id, id);
            return -1;
        }
    return gpu_ok(a, id, err, errlen) || vt_device_list_add(l, "cuda", id, err, errlen) ? -1 : 0;
}

static int parse_gpus(vt_device_list *l, const vt_device_args *a, char *err, size_t errlen) {
    const char *spec = a->gpus;
    if (strchr(spec, ',')) {
        int n = for_each_entry(l, spec, gpus_entry, (void *)a, err, errlen);
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
    if (parse_count(spec, &count) || count == 0) {
        vt_set_err(err, errlen, "--gpus: '%s' is not a positive count", spec);
        return -1;
    }
    if (gpu_ok(a, count - 1, err, errlen)) {
        char why[512];
        snprintf(why, sizeof why, "%s", err);
        vt_set_err(err, errlen, "--gpus %d: %s", count, why);
        return -1;
    }
    for (int g = 0; g < count; g++)
        if (vt_device_list_add(l, "cuda", g, err, errlen))
            return -1;
    return 0;
}

/* --mem entry "2G" (every tower, when it is the only entry), "cpu0=2G", or the k-th of
 * several: the k-th tower's (ctx: the number of entries). */
static int mem_entry(vt_device_list *l, char *entry, int k, void *ctx, char *err, size_t errlen) {
    const int entries = *(const int *)ctx;
    const char *val;
    const char *name = entry_split(entry, '=', &val);
    int64_t b = vt_parse_bytes(val);
    if (b <= 0) {
        vt_set_err(err, errlen, "--mem: '%s' is not a size (e.g. 2G, 512M)", val);
        return -1;
    }
    if (!name && entries == 1) {
        for (int i = 0; i < l->n; i++)
            l->dev[i].budget = b;
        return 0;
    }
    if (!name && k >= l->n) {
        vt_set_err(err, errlen, "--mem: entry %d ('%s') but %d tower%s", k + 1, val, l->n,
                   l->n == 1 ? "" : "s");
        return -1;
    }
    vt_device *d = name ? vt_device_list_find(l, name) : &l->dev[k];
    if (!d) {
        char names[512];
        vt_device_list_names(l, names, sizeof names);
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
    if (parse_count(gpu, &id) || b <= 0) {
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
    double s;
    if (vt_parse_f64(val, 0, 1e300, &s) || !(s > 0)) {
        vt_set_err(err, errlen, "--speeds: '%s' is not a positive clips/s", val);
        return -1;
    }
    vt_device *d = name ? vt_device_list_find(l, name) : k < l->n ? &l->dev[k] : NULL;
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
    double f;
    if (parse_count(tower, &r) || vt_parse_f64(fac, 1.0, 1000, &f)) {
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
        vt_set_err(err, errlen, "--threads: expects a whole number from 1 to %d (threads per CPU "
                   "tower)", VT_MAX_THREADS);
        return -1;
    }
    if (a->devices && a->gpus) {
        vt_set_err(err, errlen, "--devices and --gpus: give one of them");
        return -1;
    }
    int used = a->devices && has_cpu_entry(a->devices); /* --backend gives it its backend */
    if (a->devices) {
        int n = for_each_entry(out, a->devices, devices_entry, (void *)a, err, errlen);
        if (n == 0)
            vt_set_err(err, errlen, "--devices: empty list");
        if (n <= 0)
            return -1;
    } else if (a->gpus) {
        if (parse_gpus(out, a, err, errlen))
            return -1;
    } else if (vt_device_list_add_default(out, cpu_backend, err, errlen)) {
        return -1;
    } else {
        for (int i = 0; i < out->n; i++) /* no GPU: one tower of --backend's */
            used |= strcmp(out->dev[i].backend, "cuda") != 0;
    }
    vt_device_list_describe(out, a->threads);
    if (a->backend && !used) {
        char names[512];
        vt_device_list_names(out, names, sizeof names);
        vt_set_err(err, errlen, "--backend %s: it picks the backend of the towers a plain cpu "
                   "entry of --devices makes (or the default CPU tower); these towers (%s) have "
                   "none: leave it out, or give --devices cpu[:N]", a->backend, names);
        return -2;
    }
    int cpu_threads = 0; /* towers that run --threads threads */
    for (int i = 0; i < out->n; i++)
        cpu_threads += !strcmp(out->dev[i].backend, "cpu");
    if (a->threads > 0 && !cpu_threads) {
        char names[512];
        vt_device_list_names(out, names, sizeof names);
        vt_set_err(err, errlen, "--threads %d: threads per tower of the cpu backend; these "
                   "towers (%s) have none (cpu-ref runs one thread, a GPU tower its GPU): leave "
                   "it out, or give --devices cpu[:N]", a->threads, names);
        return -2;
    }

    /* Budgets: explicit caps first, then defaults for the rest. */
    int capped[VT_MAX_DEVICES] = {0};
    if (a->gpu_mem && for_each_entry(out, a->gpu_mem, gpu_mem_entry, capped, err, errlen) < 0)
        return -1;
    if (a->mem) {
        int entries = 0; /* one unnamed entry is every tower's, several are positional */
        for (const char *s = a->mem; *s; s++)
            entries += *s != ',' && (s == a->mem || s[-1] == ',');
        if (for_each_entry(out, a->mem, mem_entry, &entries, err, errlen) < 0)
            return -1;
        for (int i = 0; i < out->n; i++)
            if (out->dev[i].budget > 0)
                capped[i] = 1;
    }
    if (vt_device_list_budget_defaults(out, capped, err, errlen))
        return -1;
    if (a->speeds && for_each_entry(out, a->speeds, speeds_entry, NULL, err, errlen) < 0)
        return -1;
    if (a->emulate && for_each_entry(out, a->emulate, emulate_entry, NULL, err, errlen) < 0)
        return -1;
    for (int i = 0; a->absent_gpus && i < out->n; i++) {
        vt_device *d = &out->dev[i];
        if (strcmp(d->backend, "cuda") || d->desc[0]) /* a CPU tower, or a GPU that is here */
            continue;
        if (!capped[i]) {
            vt_set_err(err, errlen, "%s: no such GPU here%s: to plan for it, give its memory "
                       "with --mem (e.g. --devices cuda:0,cuda:1 --mem 12G,6G)", d->name,
                       vt_gpu_count() ? "" : " (no GPU at all, or no CUDA in this build)");
            return -1;
        }
        snprintf(d->desc, sizeof d->desc, "not on this machine: planned from --mem");
    }
    return 0;
}

int vt_device_args_unused(const vt_device_args *a, char *err, size_t errlen) {
    vt_device_args b = *a;
    b.threads = 0; /* the list without the --threads check, which is asked below */
    vt_device_list l;
    int unused = 0, rc = vt_devices_from_args(&l, &b, err, errlen);
    if (rc == -2 && b.backend) { /* with threads 0, -2 is --backend's */
        unused |= VT_DEVARG_BACKEND;
        b.backend = NULL;
        rc = vt_devices_from_args(&l, &b, err, errlen);
    }
    if (rc != 0)
        return -1;
    int cpu_threads = 0;
    for (int i = 0; i < l.n; i++)
        cpu_threads += !strcmp(l.dev[i].backend, "cpu");
    if (a->threads > 0 && !cpu_threads)
        unused |= VT_DEVARG_THREADS;
    return unused;
}

int vt_devices_check_precision(const vt_device_list *l, vt_precision p, char *err,
                               size_t errlen) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->dev[i].backend, "cuda"))
            return 0;
    if (p != VT_PREC_TF32)
        return 0;
    char names[512];
    vt_device_list_names(l, names, sizeof names);
    vt_set_err(err, errlen, "--precision tf32: TF32 is a GPU mode, and these towers (%s) are "
               "CPU towers, which compute it as fp32: leave it out (fp32), or give --devices "
               "cuda[:I]", names);
    return -1;
}

int vt_tower_split_check(const char *policy, int ntowers, char *err, size_t errlen) {
    if (!policy || ntowers >= 2)
        return 0;
    vt_set_err(err, errlen, "--tower-split %s: one tower takes the whole batch, so there is "
               "nothing to split; leave it out, or give several towers (--devices cpu:2, --gpus "
               "2)", policy);
    return -1;
}
