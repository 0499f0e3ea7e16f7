/*
 * device.c: parses the device options into a vt_device_list and describes the machine
 * (CPU from /proc, GPUs through models/cuda/cuda_info.h when CUDA is built in).
 *
 * It must never create a backend or touch device memory, and never abort on what a
 * user typed: every bad option comes back as -1 with a sentence in err.
 */
#include "pipeline/device.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/common.h"
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

int vt_device_args_take(vt_device_args *a, int argc, char **argv, int *i) {
    static const struct { const char *opt; size_t off; } opts[] = {
        {"--devices", offsetof(vt_device_args, devices)},
        {"--gpus", offsetof(vt_device_args, gpus)},
        {"--mem", offsetof(vt_device_args, mem)},
        {"--gpu-mem", offsetof(vt_device_args, gpu_mem)},
        {"--emulate-slowdown", offsetof(vt_device_args, emulate)},
        {"--backend", offsetof(vt_device_args, backend)},
        {"--speeds", offsetof(vt_device_args, speeds)},
        {"--threads", 0},
    };
    const char *arg = argv[*i];
    for (size_t k = 0; k < VT_ARRAY_LEN(opts); k++) {
        size_t len = strlen(opts[k].opt);
        const char *val = NULL;
        if (!strcmp(arg, opts[k].opt)) {
            if (*i + 1 >= argc)
                return -1;
            val = argv[++*i];
        } else if (!strncmp(arg, opts[k].opt, len) && arg[len] == '=') {
            val = arg + len + 1;
        } else {
            continue;
        }
        if (!strcmp(opts[k].opt, "--threads"))
            a->threads = atoi(val) > 0 ? atoi(val) : -1;
        else
            *(const char **)((char *)a + opts[k].off) = val;
        return 1;
    }
    return 0;
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

/* Splits a comma list into a fresh buffer; tokens point into it (empty ones dropped). */
static int split_list(char *buf, char **tok, int maxtok) {
    int n = 0;
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ","))
        if (*s && n < maxtok)
            tok[n++] = s;
    return n;
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

static int parse_devices(vt_device_list *l, const char *spec, const char *cpu_backend, char *err,
                         size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int nt = split_list(buf, tok, 64), rc = -1;
    if (nt == 0) {
        vt_set_err(err, errlen, "--devices: empty list");
        goto end;
    }
    for (int k = 0; k < nt; k++) {
        char *colon = strchr(tok[k], ':');
        int v = -1;
        if (colon) {
            *colon = 0;
            if (parse_int(colon + 1, &v)) {
                vt_set_err(err, errlen, "--devices: bad number in '%s:%s'", tok[k], colon + 1);
                goto end;
            }
        }
        if (!strcmp(tok[k], "cpu") || !strcmp(tok[k], "cpu-ref")) {
            int count = v < 0 ? 1 : v;
            if (count == 0) {
                vt_set_err(err, errlen, "--devices: %s:0 asks for no tower", tok[k]);
                goto end;
            }
            const char *be = !strcmp(tok[k], "cpu") ? cpu_backend : "cpu-ref";
            for (int c = 0; c < count; c++)
                if (add_dev(l, be, 0, err, errlen))
                    goto end;
        } else if (!strcmp(tok[k], "cuda") || !strcmp(tok[k], "gpu")) {
            if (v < 0) {
#ifdef VT_HAVE_CUDA
                int count = vt_cuda_device_count();
#else
                int count = 0;
#endif
                if (count == 0 && check_gpu(0, err, errlen))
                    goto end;
                for (int g = 0; g < count; g++)
                    if (add_dev(l, "cuda", g, err, errlen))
                        goto end;
            } else {
                if (check_gpu(v, err, errlen) || add_dev(l, "cuda", v, err, errlen))
                    goto end;
            }
        } else {
            vt_set_err(err, errlen, "--devices: unknown device '%s' (cpu[:N], cpu-ref[:N], cuda[:I])",
                       tok[k]);
            goto end;
        }
    }
    rc = 0;
end:
    free(buf);
    return rc;
}

static int parse_gpus(vt_device_list *l, const char *spec, char *err, size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int rc = -1;
    int is_list = strchr(spec, ',') != NULL;
    int nt = split_list(buf, tok, 64);
    if (nt == 0) {
        vt_set_err(err, errlen, "--gpus: empty");
        goto end;
    }
    if (!is_list) {
        int count;
        if (parse_int(tok[0], &count) || count == 0) {
            vt_set_err(err, errlen, "--gpus: '%s' is not a positive count", tok[0]);
            goto end;
        }
        if (check_gpu(count - 1, err, errlen)) {
            char why[512];
            snprintf(why, sizeof why, "%s", err);
            vt_set_err(err, errlen, "--gpus %d: %s", count, why);
            goto end;
        }
        for (int g = 0; g < count; g++)
            if (add_dev(l, "cuda", g, err, errlen))
                goto end;
    } else {
        for (int k = 0; k < nt; k++) {
            int id;
            if (parse_int(tok[k], &id)) {
                vt_set_err(err, errlen, "--gpus: '%s' is not a GPU id", tok[k]);
                goto end;
            }
            for (int j = 0; j < l->n; j++)
                if (!strcmp(l->dev[j].backend, "cuda") && l->dev[j].ordinal == id) {
                    vt_set_err(err, errlen, "--gpus: GPU %d listed twice (several towers on one "
                               "GPU: --devices cuda:%d,cuda:%d)", id, id, id);
                    goto end;
                }
            if (check_gpu(id, err, errlen) || add_dev(l, "cuda", id, err, errlen))
                goto end;
        }
    }
    rc = 0;
end:
    free(buf);
    return rc;
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

static int parse_mem(vt_device_list *l, const char *spec, char *err, size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int nt = split_list(buf, tok, 64), rc = -1;
    for (int k = 0; k < nt; k++) {
        char *eq = strchr(tok[k], '=');
        const char *val = eq ? eq + 1 : tok[k];
        int64_t b = vt_parse_bytes(val);
        if (b <= 0) {
            vt_set_err(err, errlen, "--mem: '%s' is not a size (e.g. 2G, 512M)", val);
            goto end;
        }
        if (!eq) {
            for (int i = 0; i < l->n; i++)
                l->dev[i].budget = b;
            continue;
        }
        *eq = 0;
        vt_device *d = find_dev(l, tok[k]);
        if (!d) {
            char names[512];
            names_str(l, names, sizeof names);
            vt_set_err(err, errlen, "--mem: no tower named '%s' (towers: %s)", tok[k], names);
            goto end;
        }
        d->budget = b;
    }
    rc = 0;
end:
    free(buf);
    return rc;
}

/* --gpu-mem "1:5G" or "0:12G,0:6G": the k-th entry for a GPU caps its k-th tower. */
static int parse_gpu_mem(vt_device_list *l, const char *spec, int *capped, char *err,
                         size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int nt = split_list(buf, tok, 64), rc = -1;
    for (int k = 0; k < nt; k++) {
        char *colon = strchr(tok[k], ':');
        int id;
        if (!colon) {
            vt_set_err(err, errlen, "--gpu-mem: '%s' is not ID:SIZE (e.g. 1:5G)", tok[k]);
            goto end;
        }
        *colon = 0;
        int64_t b = vt_parse_bytes(colon + 1);
        if (parse_int(tok[k], &id) || b <= 0) {
            vt_set_err(err, errlen, "--gpu-mem: '%s:%s' is not ID:SIZE (e.g. 1:5G)", tok[k], colon + 1);
            goto end;
        }
        int i = 0;
        for (; i < l->n; i++)
            if (!strcmp(l->dev[i].backend, "cuda") && l->dev[i].ordinal == id && !capped[i])
                break;
        if (i == l->n) {
            vt_set_err(err, errlen, "--gpu-mem: no (more) tower on GPU %d to cap", id);
            goto end;
        }
        l->dev[i].budget = b;
        capped[i] = 1;
    }
    rc = 0;
end:
    free(buf);
    return rc;
}

static int parse_speeds(vt_device_list *l, const char *spec, char *err, size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int nt = split_list(buf, tok, 64), rc = -1;
    for (int k = 0; k < nt; k++) {
        char *eq = strchr(tok[k], '=');
        const char *val = eq ? eq + 1 : tok[k];
        char *end;
        double s = strtod(val, &end);
        if (end == val || *end || !(s > 0)) {
            vt_set_err(err, errlen, "--speeds: '%s' is not a positive clips/s", val);
            goto end;
        }
        vt_device *d = NULL;
        if (eq) {
            *eq = 0;
            d = find_dev(l, tok[k]);
        } else if (k < l->n) {
            d = &l->dev[k];
        }
        if (!d) {
            vt_set_err(err, errlen, "--speeds: entry '%s' names no tower", tok[k]);
            goto end;
        }
        d->speed = s;
    }
    rc = 0;
end:
    free(buf);
    return rc;
}

static int parse_emulate(vt_device_list *l, const char *spec, char *err, size_t errlen) {
    char *buf = vt_strdup(spec);
    char *tok[64];
    int nt = split_list(buf, tok, 64), rc = -1;
    for (int k = 0; k < nt; k++) {
        int r;
        char *colon = strchr(tok[k], ':'), *end;
        if (!colon) {
            vt_set_err(err, errlen, "--emulate-slowdown: '%s' is not TOWER:FACTOR (e.g. 1:2)", tok[k]);
            goto end;
        }
        *colon = 0;
        double f = strtod(colon + 1, &end);
        if (parse_int(tok[k], &r) || end == colon + 1 || *end || !(f >= 1.0) || f > 1000) {
            vt_set_err(err, errlen, "--emulate-slowdown: '%s:%s' is not TOWER:FACTOR with FACTOR >= 1",
                       tok[k], colon + 1);
            goto end;
        }
        if (r >= l->n) {
            vt_set_err(err, errlen, "--emulate-slowdown: tower %d does not exist (%d towers)", r, l->n);
            goto end;
        }
        l->dev[r].slowdown = f;
    }
    rc = 0;
end:
    free(buf);
    return rc;
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
        if (parse_devices(out, a->devices, cpu_backend, err, errlen))
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
    if (a->gpu_mem && parse_gpu_mem(out, a->gpu_mem, capped, err, errlen))
        return -1;
    if (a->mem) {
        if (parse_mem(out, a->mem, err, errlen))
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
    if (a->speeds && parse_speeds(out, a->speeds, err, errlen))
        return -1;
    if (a->emulate && parse_emulate(out, a->emulate, err, errlen))
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
