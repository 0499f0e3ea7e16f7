/*
 * device.c: builds a vt_device_list from values app/ has already read off the command
 * line (device_opts.c) — devices added by backend and ordinal, named, given threads and
 * default budgets — and describes the machine (CPU from /proc, GPUs through
 * models/cuda/cuda_info.h when CUDA is built in).
 *
 * It must never create a backend or touch device memory, never read the command line,
 * and never abort on what a user asked for: a GPU that is not there or caps that leave
 * nothing come back as -1 with a sentence in err.
 */
#include "pipeline/parallel/device.h"

#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "models/cpu/cpu_blas.h"
#include "pipeline/data/video/video.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/cuda_info.h"
#endif

/* Keep this much of a GPU's free memory out of the default budget: the CUDA context
 * grows (cuDNN/cuBLAS handles, kernels loaded lazily) after the query, and the caching
 * allocator fragments. 5% is what leaves room on 6-80 GB cards in practice. */
#define VT_GPU_RESERVE_FRACTION 0.05
/* And this much more of GPU 0 when videos may decode there (--decode nvdec or auto): the
 * decoders' CUDA context of their own and each open decoder's picture buffers, none of
 * it in a tower's plan (docs/decode.md: the process held 0.6-0.7 GiB with the decoders in
 * the shared context; their own context adds some hundred MB, not yet measured). */
#define VT_NVDEC_RESERVE ((int64_t)1 << 30)

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
    /* the least room of the RAM and the process's limits (ulimit -v, ulimit -d, the
     * cgroup's): under ulimit -v the device line and the memory plan said the machine's
     * 22 GiB under a 1 GiB limit, in a 4 GiB container the host's RAM */
    vt_host_mem_get(&out->mem);
    out->ram_total = out->mem.ram_total;
    out->ram_available = out->mem.available;
}

/* ---- building a list ---- */

int vt_device_list_add(vt_device_list *l, const char *backend, int ordinal, char *err,
                       size_t errlen) {
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

int vt_gpu_count(void) {
#ifdef VT_HAVE_CUDA
    return vt_cuda_device_count();
#else
    return 0;
#endif
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

int vt_gpu_check(int id, char *err, size_t errlen) {
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

int vt_device_list_add_default(vt_device_list *l, const char *cpu_backend, char *err,
                               size_t errlen) {
    int count = vt_gpu_count();
    for (int g = 0; g < count && g < VT_MAX_DEVICES; g++)
        if (vt_device_list_add(l, "cuda", g, err, errlen))
            return -1;
    if (l->n == 0)
        return vt_device_list_add(l, cpu_backend, 0, err, errlen);
    return 0;
}

/* CPU towers (cpu and cpu-ref) of l: they share the cores and the RAM. */
static int cpu_towers(const vt_device_list *l) {
    int n = 0;
    for (int i = 0; i < l->n; i++)
        n += strcmp(l->dev[i].backend, "cuda") != 0;
    return n;
}

void vt_device_list_describe(vt_device_list *l, int threads) {
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    int ncpu = cpu_towers(l);
    int cpu_threads = threads > 0 ? threads : VT_MAX(1, ci.cores / VT_MAX(ncpu, 1));
    int cpu_idx = 0;
    for (int i = 0; i < l->n; i++) {
        vt_device *d = &l->dev[i];
        if (strcmp(d->backend, "cuda")) {
            d->ordinal = cpu_idx++;
            d->threads = !strcmp(d->backend, "cpu-ref") ? 1 : cpu_threads;
            d->total_bytes = ci.ram_total;
            snprintf(d->name, sizeof d->name, "cpu%d", d->ordinal);
            if (!strcmp(d->backend, "cpu"))
                snprintf(d->desc, sizeof d->desc, "%.60s, %d thread%s, OpenBLAS %.40s",
                         ci.model, d->threads, d->threads == 1 ? "" : "s",
                         vt_cpu_blas_kernels());
            else
                snprintf(d->desc, sizeof d->desc, "%.90s, %d thread%s", ci.model, d->threads,
                         d->threads == 1 ? "" : "s");
        } else {
            int before = 0;
            for (int j = 0; j < i; j++)
                if (!strcmp(l->dev[j].backend, "cuda") && l->dev[j].ordinal == d->ordinal)
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
}

vt_device *vt_device_list_find(vt_device_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->dev[i].name, name))
            return &l->dev[i];
    return NULL;
}

void vt_device_list_names(const vt_device_list *l, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < l->n && o < n; i++)
        o += (size_t)snprintf(buf + o, n - o, "%s%s", i ? ", " : "", l->dev[i].name);
}

/* The default budget of a CPU tower: the memory available under the limit that decided
 * (base/host_mem.h), less l->host_reserve and OpenBLAS's buffers for the cpu towers'
 * threads, which none of the plans counts, shared by the CPU towers; said in
 * l->mem_note. Each is counted as that limit counts: OpenBLAS's buffers whole under
 * ulimit -v or -d, their touched pages against the RAM or a cgroup. At least 1 byte under
 * a limit (0 is no budget at all). */
/* The cpu towers' computing threads (threads) and what the limit m counts of them beside
 * the towers' budgets: OpenBLAS's buffers (*blas) and, under a limit on mappings, every
 * computing thread's stack (OpenMP's, a tower's own), mapped whole: libgomp refused one
 * exits with "Thread creation failed" and no limit named (*stacks). */
static void cpu_beside(const vt_device_list *l, const vt_host_mem *m, int *threads,
                       int64_t *blas, int64_t *stacks) {
    *threads = 0;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->dev[i].backend, "cpu"))
            *threads += l->dev[i].threads;
    int whole = vt_host_mem_counts_maps(m);
    *blas = (int64_t)VT_MAX(*threads - vt_cpu_blas_pooled(), 0) *
            (int64_t)(whole ? VT_CPU_BLAS_BUFFER : VT_CPU_BLAS_TOUCHED);
    *stacks = whole ? (int64_t)*threads * vt_host_thread_stack() : 0;
}

/* --mem caps of cpu towers past what the limit leaves them (the RAM available, ulimit -v
 * or -d, a container's cgroup) are the user's to give, but a plan made for them runs out
 * mid-run, and under a cgroup the kernel's OOM killer ends the process without a word:
 * said, with what is left. */
static void warn_cpu_caps(const vt_device_list *l, const int *capped) {
    int64_t caps = 0;
    for (int i = 0; i < l->n; i++)
        if (capped[i] && strcmp(l->dev[i].backend, "cuda"))
            caps += l->dev[i].budget;
    vt_cpu_info ci;
    if (caps <= 0 || (vt_cpu_info_get(&ci), ci.ram_total <= 0))
        return;
    int threads;
    int64_t blas, stacks;
    cpu_beside(l, &ci.mem, &threads, &blas, &stacks);
    int64_t left = vt_host_mem_left(&ci.mem, blas + stacks + l->host_reserve);
    if (caps <= left)
        return;
    char a[32], b[32], said[700];
    vt_warn("--mem gives the cpu towers %s, more than the %s left to them under %.400s (after "
            "OpenBLAS's buffers and the threads' stacks): a plan for it may run out of memory "
            "mid-run%s; give them %s or less, or leave --mem out\n",
            vt_fmt_bytes(a, sizeof a, caps), vt_fmt_bytes(b, sizeof b, left),
            vt_host_mem_said(&ci.mem, said, sizeof said),
            ci.mem.by == VT_MEM_CGROUP ? " (and the kernel ends a process past a cgroup's "
                                         "limit without a word)" : "",
            b);
}

static int64_t cpu_share(vt_device_list *l, const int *capped) {
    int ncpu = cpu_towers(l), defaults = 0, threads;
    for (int i = 0; i < l->n; i++)
        defaults += strcmp(l->dev[i].backend, "cuda") && !capped[i];
    l->mem_note[0] = 0;
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    if (!defaults || ci.ram_total <= 0)
        return 0;
    const vt_host_mem *m = &ci.mem;
    int whole = vt_host_mem_counts_maps(m);
    int64_t blas, stacks;
    cpu_beside(l, m, &threads, &blas, &stacks);
    int64_t left = vt_host_mem_left(m, blas + stacks + l->host_reserve);
    int64_t share = VT_MAX(left / VT_MAX(ncpu, 1), 1);
    char said[700], a[32], b[32], c[32], r[160] = "";
    vt_host_mem_said(m, said, sizeof said);
    if (l->host_reserve > 0)
        snprintf(r, sizeof r, ", %s for the loader (frame cache, workers, queue)",
                 vt_fmt_bytes(c, sizeof c, l->host_reserve));
    char st[96] = "", d[32];
    if (stacks)
        snprintf(st, sizeof st, ", %s for their stacks", vt_fmt_bytes(d, sizeof d, stacks));
    snprintf(l->mem_note, sizeof l->mem_note, "cpu memory: %s available under %.400s; kept out "
             "%s for OpenBLAS's buffers (%d thread%s x %s%s)%s%s; %s for %d cpu tower%s",
             vt_fmt_bytes(a, sizeof a, m->available), said,
             vt_fmt_bytes(b, sizeof b, blas), threads, threads == 1 ? "" : "s",
             whole ? "128 MiB mapped" : "8 MiB touched", whole ? " whole" : "", st, r,
             vt_fmt_bytes(c, sizeof c, left), ncpu, ncpu == 1 ? "" : "s");
    return share;
}

int vt_device_list_budget_defaults(vt_device_list *l, const int *capped, char *err,
                                   size_t errlen) {
    warn_cpu_caps(l, capped);
    int64_t share = cpu_share(l, capped);
    for (int i = 0; i < l->n; i++) {
        vt_device *d = &l->dev[i];
        if (capped[i])
            continue;
        if (strcmp(d->backend, "cuda")) {
            /* CPU towers share the memory available now, less what the process holds
             * beside them (cpu_share) */
            d->budget = share;
            d->mem_default = 1;
        } else {
#ifdef VT_HAVE_CUDA
            vt_gpu_info gi;
            if (vt_cuda_device_query(d->ordinal, &gi) == 0) {
                int64_t avail = (int64_t)((double)gi.free_bytes * (1.0 - VT_GPU_RESERVE_FRACTION));
                /* NVDEC decodes on GPU 0 (video_hw.c) */
                int nvdec = d->ordinal == 0 && vt_video_get_decode() != VT_DECODE_CPU;
                if (nvdec)
                    avail -= VT_NVDEC_RESERVE;
                int share = 0;
                for (int j = 0; j < l->n; j++)
                    if (!strcmp(l->dev[j].backend, "cuda") && l->dev[j].ordinal == d->ordinal) {
                        if (capped[j])
                            avail -= l->dev[j].budget;
                        else
                            share++;
                    }
                d->budget = avail > 0 ? avail / VT_MAX(share, 1) : 0;
                if (d->budget <= 0) {
                    vt_set_err(err, errlen, "GPU %d: the --gpu-mem caps%s leave nothing for %s",
                               d->ordinal,
                               nvdec ? " and the 1 GiB kept for NVDEC (--decode cpu keeps none)"
                                     : "",
                               d->name);
                    return -1;
                }
            }
#endif
        }
    }
    return 0;
}

void vt_device_list_keep_host(vt_device_list *l, int64_t reserve) {
    int capped[VT_MAX_DEVICES];
    for (int i = 0; i < l->n; i++)
        capped[i] = !l->dev[i].mem_default;
    l->host_reserve = VT_MAX(reserve, 0);
    int64_t share = cpu_share(l, capped);
    for (int i = 0; i < l->n; i++)
        if (l->dev[i].mem_default)
            l->dev[i].budget = share;
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
    if (l->mem_note[0])
        fprintf(f, "%s\n", l->mem_note);
}

void vt_devices_print_machine(FILE *f) {
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    char a[32], b[32];
    char said[700];
    fprintf(f, "CPU   %s\n      %d cores online, RAM %s total, %s available%s%s\n", ci.model,
            ci.cores, vt_fmt_bytes(a, sizeof a, ci.ram_total),
            vt_fmt_bytes(b, sizeof b, ci.ram_available),
            ci.mem.by != VT_MEM_RAM ? " under " : "",
            ci.mem.by != VT_MEM_RAM ? vt_host_mem_said(&ci.mem, said, sizeof said) : "");
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
