/*
 * bench_step.c: `vidtrain bench step` — times training steps on synthetic input across
 * towers and prints clips/s (one line "clips/s: X" that scripts parse), per-tower compute
 * and waiting time, and the plan before and after (auto/speed re-plan while warming up).
 * Input is random normal clips with random labels: the figure is the towers' compute and
 * reduction throughput, without decoding. --precision (fp32, tf32, bf16; --tf32 is
 * --precision tf32) is the towers' (models/backend.h). Under mpirun the towers of every
 * rank take part (each rank feeds its towers' part of the batch), and the step splits
 * into compute, waiting and the exposed reduction, with the bytes reduced per step
 * (bench/bench-mpi.sh). The input batch lives in page-locked memory when a tower's
 * backend has it (CUDA: the towers' host hook, as `vidtrain train`'s loader does), so
 * uploads are asynchronous DMA; --pageable keeps a malloc'd batch (the figure before
 * issue 45). It must never assert anything about speed: it reports
 * (bench/bench-*.sh compare figures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/opts.h"
#include "app/step_opts.h"
#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/data/batch.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/towers/tower.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/backend_cuda.h"
#endif

int vt_bench_step(int argc, char **argv);

/* This command's defaults for the step options (plan has its own). */
static const vt_step_args step_defaults = {
    .model = "tiny", .clip = "8x32x32", .batch = "16", .classes = "10", .tower_split = "equal", .optimizer = "sgd",
};

static void usage(FILE *f) {
    fprintf(f, "usage: vidtrain bench step --model M --clip TxHxW --batch B [options]\n\n"
               "Times training steps on synthetic clips and prints clips/s.\n\n");
    vt_step_args_help(f, &step_defaults);
    fprintf(f,
            "  --sync-bn           batch-norm statistics across towers (train's default;\n"
            "                      without it, train --no-sync-bn's: each tower's own, the\n"
            "                      running statistics averaged after every step). Refused\n"
            "                      for one tower: it has nothing to sync and no average\n"
            "  --tf32              the same as --precision tf32\n"
            "  --bucket-mb MB      gradient buckets reduced during backward (host reducer;\n"
            "                      0 = one reduction after backward; default: 25 when a\n"
            "                      tower is on a GPU, else 0; refused where there are no\n"
            "                      buckets: one tower, or exact sums)\n"
            "  --steps S           timed steps (default 5)\n"
            "  --warmup W          untimed steps first (default 2; auto/speed re-plan here)\n"
            "  --seed N            weights and data (default 1)\n"
            "  --verbose           one line per step\n"
            "  --pageable          the input batch in ordinary (pageable) memory; default:\n"
            "                      page-locked when a tower is on a GPU, as train's loader\n"
            "                      (refused where no tower has page-locked memory)\n"
            "%s%s",
            vt_device_args_help, vt_mpi_help);
}


/* ---- parse, plan (the towers, one batch of random clips), run (timed steps), report ---- */

typedef struct bench_args {
    int steps, warmup, sync_bn, verbose, pageable;
    double bucket_mb; /* --bucket-mb, or -1: the towers' default */
    int bucket_given; /* --bucket-mb was on the command line (0 too) */
    int split_given;  /* --tower-split was */
    uint64_t seed;
    vt_step_args sa; /* the model, clip, batch, devices and optimizer options */
} bench_args;

/* Fills *ba from argv: 0, or the exit status (2) after saying what is wrong. */
static int bench_parse(bench_args *ba, int argc, char **argv) {
    memset(ba, 0, sizeof *ba);
    ba->steps = 5;
    ba->warmup = 2;
    ba->bucket_mb = -1;
    ba->seed = 1;
    ba->sa = step_defaults;
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        vt_opts_given_note(&given, argv[i]);
        int took = vt_step_args_take(&ba->sa, argc, argv, &i);
        if (took == 1)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "--sync-bn")) {
            ba->sync_bn = 1;
            continue;
        }
        if (!strcmp(a, "--tf32")) {
            ba->sa.precision = "tf32";
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            ba->verbose = 1;
            continue;
        }
        if (!strcmp(a, "--pageable")) {
            ba->pageable = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (took < 0 || !v) {
            fprintf(stderr, "vidtrain bench step: %s needs a value\n", a);
            return 2;
        }
        int bad;
        if (!strcmp(a, "--steps"))
            bad = vt_opt_int("bench step", a, v, 1, 1000000, &ba->steps);
        else if (!strcmp(a, "--warmup"))
            bad = vt_opt_int("bench step", a, v, 0, 1000000, &ba->warmup);
        else if (!strcmp(a, "--seed"))
            bad = vt_opt_u64("bench step", a, v, &ba->seed);
        else if (!strcmp(a, "--bucket-mb"))
            bad = vt_opt_f64("bench step", a, v, 0, 1e6, &ba->bucket_mb);
        else {
            fprintf(stderr, "vidtrain bench step: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
        i++;
    }
    ba->bucket_given = vt_opts_given_has(&given, "--bucket-mb");
    ba->split_given = vt_opts_given_has(&given, "--tower-split");
    /* the one given later replaced the other's value without a word */
    if (vt_opts_given_has(&given, "--tf32") && vt_opts_given_has(&given, "--precision")) {
        fprintf(stderr, "vidtrain bench step: --tf32 is --precision tf32: not with --precision "
                "too (the later one replaced the other); give one of them\n");
        return 2;
    }
    return 0;
}

/* Plan: the towers the options describe (*cfg, *batch), their plan printed. NULL with
 * *rc_out the exit status after a message when they cannot be made. */
static vt_towers *bench_plan(const bench_args *ba, vt_towers_cfg *cfg, int *batch, int *rc_out) {
    char err[1024];
    vt_towers_cfg_default(cfg);
    int rc = vt_step_args_resolve(&ba->sa, &cfg->net, &cfg->optim, &cfg->policy, &cfg->devices,
                                  batch, err, sizeof err);
    if (rc) {
        fprintf(stderr, "vidtrain bench step: %s\n", err);
        *rc_out = rc == VT_STEP_ARGS_USAGE ? 2 : 1;
        return NULL;
    }
    cfg->batch = *batch;
    cfg->seed = ba->seed;
    cfg->sync_bn = ba->sync_bn;
    cfg->verbose = 1;
    cfg->speed_warmup = ba->warmup > 1 ? ba->warmup - 1 : 1;
    if (ba->bucket_mb >= 0)
        cfg->bucket_mb = ba->bucket_mb;

    vt_towers *tw = vt_towers_init(cfg, err, sizeof err);
    if (!tw) {
        fprintf(stderr, "vidtrain bench step: %s\n", err);
        *rc_out = 1;
        return NULL;
    }
    /* exact sums reduce once, after backward (tower.c): buckets were dropped unsaid; one
     * tower in this process has no gradients to sum with another's (given at 0 too: one
     * reduction after backward is what these towers do anyway) */
    if (ba->bucket_given && vt_towers_exact(tw)) {
        fprintf(stderr, "vidtrain bench step: --bucket-mb %g: these towers sum exactly, in one "
                "reduction after backward, so there are no buckets; VT_EXACT_SUMS=0 (float "
                "sums) to measure them\n", ba->bucket_mb);
        vt_towers_free(&tw);
        *rc_out = 2;
        return NULL;
    }
    /* buffers are batch norm's running statistics (models/net.h): none, no BN to sync */
    if (ba->sync_bn && vt_net_num_buffers(vt_towers_net(tw, 0)) == 0) {
        fprintf(stderr, "vidtrain bench step: --sync-bn: %s has no batch norm for it to act on; "
                "leave it out\n", ba->sa.model);
        vt_towers_free(&tw);
        *rc_out = 2;
        return NULL;
    }
    /* one tower in the run: no statistics to sync, and no average of running statistics
     * after the step either way (tower_worker.c: merge needs several) */
    if (ba->sync_bn && vt_towers_count_all(tw) < 2) {
        fprintf(stderr, "vidtrain bench step: --sync-bn: one tower has no statistics to sync "
                "(and no average of running statistics to skip), so it changes nothing; leave "
                "it out, or give several towers (--devices cpu:2, --gpus 2)\n");
        vt_towers_free(&tw);
        *rc_out = 2;
        return NULL;
    }
    char serr[512];
    if (vt_tower_split_check(ba->split_given ? ba->sa.tower_split : NULL,
                             vt_towers_count_all(tw), serr, sizeof serr) != 0) {
        fprintf(stderr, "vidtrain bench step: %s\n", serr);
        vt_towers_free(&tw);
        *rc_out = 2;
        return NULL;
    }
    /* (under mpirun another rank's towers may have buckets: no rank stops alone) */
    if (ba->bucket_given && vt_towers_count(tw) < 2 && vt_mpi_size() == 1) {
        fprintf(stderr, "vidtrain bench step: --bucket-mb %g: buckets sum the gradients of this "
                "process's towers during backward, and it has one, so there are no buckets; "
                "give several towers (--devices cpu:2, cuda:0,cuda:1) or leave it out\n",
                ba->bucket_mb);
        vt_towers_free(&tw);
        *rc_out = 2;
        return NULL;
    }
    int ncuda = 0;
    for (int i = 0; i < cfg->devices.n; i++)
        ncuda += !strcmp(cfg->devices.dev[i].backend, "cuda");
    /* VT_CUDA_PROF=1 (the CUDA backend's per-op timer) with nothing to time: say so */
#ifdef VT_HAVE_CUDA
    static const char prof_why[] = " and none is in --devices\n  hint: --devices cuda:0";
#else
    static const char prof_why[] = "; this vidtrain was built without CUDA\n  hint: a CUDA "
                                   "build (-DVT_CUDA=ON, docs/cuda.md) on a GPU machine";
#endif
    const char *prof = getenv("VT_CUDA_PROF");
    if (prof && *prof && strcmp(prof, "0") && !ncuda)
        fprintf(stderr, "vidtrain bench step: warning: VT_CUDA_PROF=%s times the ops of CUDA "
                "towers only%s\n", prof, prof_why);
    if (cfg->net.precision == VT_PREC_TF32 && ncuda < cfg->devices.n)
        fprintf(stderr, "vidtrain bench step: tf32 applies to CUDA towers; the CPU towers "
                "compute in fp32\n");
    vt_towers_print_plan(tw, stdout);
    fflush(stdout);
    return tw;
}

/* The timed steps' sums, per tower of every process and for the step. */
typedef struct bench_totals {
    int n; /* towers, of every process */
    double comp[VT_MAX_DEVICES], wait[VT_MAX_DEVICES];
    double crit, red_wait, red, el; /* el: the timed steps' wall time */
    int buckets, overlapped;
    int64_t red_bytes, wire, red_calls;
} bench_totals;

/* Run: ba->warmup + ba->steps training steps on b (every tower of every process; under
 * mpirun this rank feeds only its part), the timed ones summed into *bt. */
static void bench_run(const bench_args *ba, vt_towers *tw, vt_batch *b_, int batch,
                      bench_totals *bt) {
    const int warmup = ba->warmup, steps = ba->steps, verbose = ba->verbose;
    vt_batch b = *b_;
    int64_t cf = vt_batch_clip_floats(&b);
    int n = bt->n = vt_towers_count_all(tw);
    double *comp = bt->comp, *wait = bt->wait, t0 = 0;
    int buckets = 0, overlapped = 0;
    double crit = 0, red_wait = 0, red = 0;
    int64_t red_bytes = 0, wire = 0, red_calls = 0;
    float *x_all = b.x;
    int32_t *l_all = b.label[0];
    /* Steps as train runs them (issue 45 item 3): each step's gradient norm is read after
     * the next one is issued, so no step waits for it; the last is read before the clock
     * stops. */
    vt_step_stats prev;
    int have_prev = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
#ifdef VT_HAVE_CUDA
            /* VT_CUDA_PROF=1: the table covers the timed steps only (the warm-up holds
             * cuDNN's algorithm search) */
            for (int i = 0; i < vt_towers_count(tw); i++) {
                vt_backend *be = vt_towers_backend(tw, i);
                if (be && be->kind == VT_BACKEND_CUDA)
                    vt_cuda_prof_restart(be);
            }
#endif
            t0 = vt_now();
        }
        int lo = 0, hi = batch;
        vt_towers_part_train(tw, 0, s, batch, 1, &lo, &hi);
        b.epoch = 0;
        b.index = s;
        b.npos = batch;
        b.part_lo = lo;
        b.part_hi = hi;
        b.n = hi - lo;
        b.x = x_all + cf * lo;
        b.label[0] = l_all + lo;
        vt_step_stats st;
        vt_towers_train_issue(tw, &b, 0.01f, &st);
        if (have_prev)
            vt_towers_train_read(tw, &prev);
        prev = st;
        have_prev = 1;
        buckets = st.buckets;
        overlapped = st.buckets_overlapped;
        if (s >= warmup) {
            double slowest = 0;
            for (int i = 0; i < n; i++) {
                comp[i] += st.compute_s[i];
                wait[i] += st.wait_s[i];
                slowest = VT_MAX(slowest, st.compute_s[i]);
            }
            crit += slowest;
            red_wait += st.reduce_wait_s;
            red += st.reduce_s;
            red_bytes += st.reduce_bytes;
            wire += st.wire_bytes;
            red_calls++;
        }
        if (verbose) {
            printf("step %d%s: %.3f s, loss %.4f, slices", s + 1, s < warmup ? " (warm-up)" : "",
                   st.step_s, st.loss / batch);
            for (int i = 0; i < n; i++)
                printf(" %d", st.slice[i]);
            printf(", compute");
            for (int i = 0; i < n; i++)
                printf(" %.3f", st.compute_s[i]);
            printf(", waiting %.4f, reduction %.4f (%lld bytes)\n", st.reduce_wait_s, st.reduce_s,
                   (long long)st.reduce_bytes);
        }
    }
    if (have_prev)
        vt_towers_train_read(tw, &prev);
    bt->el = vt_now() - t0;
    bt->buckets = buckets;
    bt->overlapped = overlapped;
    bt->crit = crit;
    bt->red_wait = red_wait;
    bt->red = red;
    bt->red_bytes = red_bytes;
    bt->wire = wire;
    bt->red_calls = red_calls;
}

/* The report: per tower, the reduction, the step's critical path, clips/s. */
static void bench_report(const bench_args *ba, vt_towers *tw, int batch, const bench_totals *bt) {
    const int warmup = ba->warmup, steps = ba->steps, sync_bn = ba->sync_bn, n = bt->n;
    const int buckets = bt->buckets, overlapped = bt->overlapped;
    const double *comp = bt->comp, *wait = bt->wait, el = bt->el, crit = bt->crit;
    const double red_wait = bt->red_wait, red = bt->red;
    const int64_t red_bytes = bt->red_bytes, wire = bt->wire, red_calls = bt->red_calls;
    const vt_device_list *gdev = vt_towers_devices(tw);
    printf("\nafter %d warm-up + %d timed steps:\n", warmup, steps);
    vt_towers_print_plan(tw, stdout);
    printf("per tower (mean per timed step):\n");
    for (int i = 0; i < n; i++)
        printf("  %-9s slice %3d  compute %.4f s  waiting %.4f s\n", gdev->dev[i].name,
               vt_towers_plan(tw)->slice[i], comp[i] / steps, wait[i] / steps);
    double exposed = 0;
    for (int i = 0; i < n; i++)
        exposed = VT_MAX(exposed, wait[i] / steps);
    printf("gradient reduction: %s", buckets ? "" : "one call after backward");
    if (buckets)
        printf("%d buckets, %d started during backward (tower 0, last step)", buckets, overlapped);
    printf("; exposed (most waiting of a tower) %.4f s a step, %.1f%% of the step\n", exposed,
           el > 0 ? 100.0 * exposed / (el / steps) : 0.0);
    /* The step's critical path: the slowest tower computes, the others wait for it (and
     * for the slowest process), then the reduction runs with nothing to hide it (with
     * buckets, what is left of it after backward: the line above). */
    char mb[32], wb[32];
    printf("per step: compute %.4f s (slowest tower), waiting %.4f s (the reducer, for the other "
           "towers and processes), exposed reduction %.4f s\n", crit / steps, red_wait / steps,
           buckets ? exposed : red / steps);
    printf("reduced per step: %s in the reducer's sums (gradients%s); sent to other processes "
           "by rank 0: %s\n", vt_fmt_bytes(mb, sizeof mb, red_bytes / VT_MAX(red_calls, 1)),
           sync_bn ? ", batch-norm statistics" : ", batch-norm running statistics",
           vt_fmt_bytes(wb, sizeof wb, wire / VT_MAX(red_calls, 1)));
    printf("step time: %.4f s\n", el / steps);
    printf("clips/s: %.2f\n", (double)steps * batch / el);
}

int vt_bench_step(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    bench_args ba;
    int rc = bench_parse(&ba, argc, argv);
    if (rc)
        return rc;
    vt_towers_cfg cfg;
    int batch;
    vt_towers *tw = bench_plan(&ba, &cfg, &batch, &rc);
    if (!tw)
        return rc;
    const int classes = cfg.net.head[0].classes, t = cfg.net.clip_t, h = cfg.net.clip_h,
              w = cfg.net.clip_w;
    const int pageable = ba.pageable;
    const uint64_t seed = ba.seed;
    vt_batch b;
    memset(&b, 0, sizeof b);
    b.n = b.capacity = batch;
    b.t = t;
    b.h = h;
    b.w = w;
    b.nheads = 1;
    b.head_classes[0] = classes;
    int64_t cf = vt_batch_clip_floats(&b);
    /* The batch's memory: pinned from the towers' hook unless --pageable or no tower has
     * it (CPU towers); the output says which, so figures are read with it. */
    void *(*h_alloc)(void *, size_t) = NULL;
    void (*h_free)(void *, void *) = NULL;
    void *h_ctx = NULL;
    vt_towers_host_hook(tw, &h_alloc, &h_free, &h_ctx);
    if (pageable && !h_alloc && vt_mpi_size() == 1) { /* it would measure the same batch
                                                         (a rank alone must not stop) */
        fprintf(stderr, "vidtrain bench step: --pageable keeps the batch out of page-locked "
                "memory, and no tower's backend has any (CPU towers read it where it is); "
                "leave it out\n");
        vt_towers_free(&tw);
        return 2;
    }
    if (pageable)
        h_alloc = NULL, h_free = NULL, h_ctx = NULL;
    const size_t xbytes = (size_t)(cf * batch) * sizeof(float);
    b.x = h_alloc ? h_alloc(h_ctx, xbytes) : vt_malloc(xbytes);
    printf("input batch: %s memory (%s)\n", h_alloc ? "page-locked" : "pageable",
           h_alloc ? "as train's loader; --pageable for ordinary memory"
                   : pageable ? "--pageable" : "no tower's backend has page-locked memory");
    b.label[0] = vt_malloc((size_t)batch * sizeof(int32_t));
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < cf * batch; i++)
        b.x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < batch; i++)
        b.label[0][i] = (int32_t)vt_rng_below(&r, (uint32_t)classes);

    bench_totals bt;
    memset(&bt, 0, sizeof bt);
    bench_run(&ba, tw, &b, batch, &bt);
    bench_report(&ba, tw, batch, &bt);
    if (h_alloc)
        h_free(h_ctx, b.x); /* before the towers: the hook's backend frees it */
    else
        free(b.x);
    vt_towers_free(&tw);
    free(b.label[0]);
    return 0;
}
