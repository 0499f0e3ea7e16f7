/*
 * bench_step.c: `vidtrain bench step` — times training steps on synthetic input across
 * towers and prints clips/s (one line "clips/s: X" that scripts parse), per-tower compute
 * and waiting time, and the plan before and after (auto/speed re-plan while warming up).
 * Input is random normal clips with random labels: the figure is the towers' compute and
 * reduction throughput, without decoding. It must never assert anything about speed: it
 * reports (scripts/bench-*.sh compare figures).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/batch.h"
#include "pipeline/device.h"
#include "pipeline/tower.h"

int vt_bench_step(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain bench step --model M --clip TxHxW --batch B [options]\n\n"
            "Times training steps on synthetic clips and prints clips/s.\n\n"
            "  --model M           tiny, c3d, r3d18, mc3_18, r2plus1d18 (default tiny)\n"
            "  --clip TxHxW        clip shape (default 8x32x32)\n"
            "  --batch B           global batch (default 16)\n"
            "  --classes K         classes (default 10)\n"
            "  --split POLICY      equal | memory | speed | auto | manual:W,W... (default equal)\n"
            "  --optimizer NAME    sgd | rmsprop | adamw (default sgd)\n"
            "  --sync-bn           batch-norm statistics across towers\n"
            "  --steps S           timed steps (default 5)\n"
            "  --warmup W          untimed steps first (default 2; auto/speed re-plan here)\n"
            "  --seed N            weights and data (default 1)\n"
            "  --verbose           one line per step\n"
            "%s",
            vt_device_args_help);
}

static int parse_clip(const char *s, int *t, int *h, int *w) {
    char tail;
    return sscanf(s, "%dx%dx%d%c", t, h, w, &tail) == 3 && *t > 0 && *h > 0 && *w > 0 ? 0 : -1;
}

int vt_bench_step(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    const char *model = "tiny", *clip = "8x32x32", *split = "equal", *optname = "sgd";
    int batch = 16, classes = 10, steps = 5, warmup = 2, sync_bn = 0, verbose = 0;
    uint64_t seed = 1;
    vt_device_args da;
    memset(&da, 0, sizeof da);
    for (int i = 1; i < argc; i++) {
        int took = vt_device_args_take(&da, argc, argv, &i);
        if (took == 1)
            continue;
        const char *a = argv[i];
        if (!strcmp(a, "--sync-bn")) {
            sync_bn = 1;
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            verbose = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (took < 0 || !v) {
            fprintf(stderr, "vidtrain bench step: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--clip"))
            clip = v;
        else if (!strcmp(a, "--batch"))
            batch = atoi(v);
        else if (!strcmp(a, "--classes"))
            classes = atoi(v);
        else if (!strcmp(a, "--split"))
            split = v;
        else if (!strcmp(a, "--optimizer"))
            optname = v;
        else if (!strcmp(a, "--steps"))
            steps = atoi(v);
        else if (!strcmp(a, "--warmup"))
            warmup = atoi(v);
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "vidtrain bench step: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    int t, h, w;
    if (parse_clip(clip, &t, &h, &w) || batch < 1 || classes < 1 || steps < 1 || warmup < 0) {
        fprintf(stderr, "vidtrain bench step: need --clip TxHxW, --batch >= 1, --classes >= 1, "
                "--steps >= 1, --warmup >= 0\n");
        return 2;
    }
    int ok = vt_optim_kind_parse(optname);
    if (ok < 0) {
        fprintf(stderr, "vidtrain bench step: unknown optimizer '%s'\n", optname);
        return 2;
    }
    char err[1024];
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    if (vt_split_policy_parse(&cfg.policy, split, err, sizeof err)) {
        fprintf(stderr, "vidtrain bench step: %s\n", err);
        return 2;
    }
    if (vt_devices_from_args(&cfg.devices, &da, err, sizeof err)) {
        fprintf(stderr, "vidtrain bench step: %s\n", err);
        return 1;
    }
    vt_net_cfg_default(&cfg.net, model, classes, t, h, w);
    vt_optim_cfg_default(&cfg.optim, (vt_opt_kind)ok);
    cfg.batch = batch;
    cfg.seed = seed;
    cfg.sync_bn = sync_bn;
    cfg.verbose = 1;
    cfg.speed_warmup = warmup > 1 ? warmup - 1 : 1;

    vt_towers *tw = vt_towers_init(&cfg, err, sizeof err);
    if (!tw) {
        fprintf(stderr, "vidtrain bench step: %s\n", err);
        return 1;
    }
    vt_towers_print_plan(tw, stdout);
    fflush(stdout);

    vt_batch b;
    memset(&b, 0, sizeof b);
    b.n = b.capacity = batch;
    b.t = t;
    b.h = h;
    b.w = w;
    b.nheads = 1;
    b.head_classes[0] = classes;
    int64_t cf = vt_batch_clip_floats(&b);
    b.x = vt_malloc((size_t)(cf * batch) * sizeof(float));
    b.label[0] = vt_malloc((size_t)batch * sizeof(int32_t));
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < cf * batch; i++)
        b.x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < batch; i++)
        b.label[0][i] = (int32_t)vt_rng_below(&r, (uint32_t)classes);

    int n = vt_towers_count(tw);
    double comp[VT_MAX_DEVICES] = {0}, wait[VT_MAX_DEVICES] = {0}, t0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup)
            t0 = vt_now();
        vt_step_stats st;
        vt_towers_train_step(tw, &b, 0.01f, &st);
        if (s >= warmup)
            for (int i = 0; i < n; i++) {
                comp[i] += st.compute_s[i];
                wait[i] += st.wait_s[i];
            }
        if (verbose) {
            printf("step %d%s: %.3f s, loss %.4f, slices", s + 1, s < warmup ? " (warm-up)" : "",
                   st.step_s, st.loss / batch);
            for (int i = 0; i < n; i++)
                printf(" %d", st.slice[i]);
            printf(", compute");
            for (int i = 0; i < n; i++)
                printf(" %.3f", st.compute_s[i]);
            printf("\n");
        }
    }
    double el = vt_now() - t0;
    printf("\nafter %d warm-up + %d timed steps:\n", warmup, steps);
    vt_towers_print_plan(tw, stdout);
    printf("per tower (mean per timed step):\n");
    for (int i = 0; i < n; i++)
        printf("  %-8s slice %3d  compute %.4f s  waiting %.4f s\n", cfg.devices.dev[i].name,
               vt_towers_plan(tw)->slice[i], comp[i] / steps, wait[i] / steps);
    printf("step time: %.4f s\n", el / steps);
    printf("clips/s: %.2f\n", (double)steps * batch / el);
    vt_towers_free(&tw);
    free(b.x);
    free(b.label[0]);
    return 0;
}
