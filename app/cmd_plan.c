/*
 * cmd_plan.c: `vidtrain plan` — the model summary with memory per clip (the memory plan)
 * and the slice plan for a batch over the chosen devices: what fits per pass on each,
 * the slices, micro-batches and the predicted step time when speeds are given.
 * It must never allocate a model or touch a device: planning is arithmetic, so a plan
 * for GPUs one does not have (--gpu-mem with --devices cpu) is still useful.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "models/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/device.h"
#include "pipeline/split.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain plan --model M --clip TxHxW [options]\n\n"
            "Prints the model summary with memory per clip, then how a batch splits over the\n"
            "devices (fits per pass, slice, micro-batches, predicted step time).\n\n"
            "  --model M           tiny, c3d, r3d18, mc3_18, r2plus1d18 (default r3d18)\n"
            "  --clip TxHxW        clip shape (default 16x112x112)\n"
            "  --batch B           global batch (default 32)\n"
            "  --classes K         classes of the head (default 400)\n"
            "  --split POLICY      equal | memory | speed | auto | manual:W,W... (default memory)\n"
            "  --optimizer NAME    sgd | rmsprop | adamw (default sgd): its state is in the plan\n"
            "%s",
            vt_device_args_help);
}

static int parse_clip(const char *s, int *t, int *h, int *w) {
    char tail;
    return sscanf(s, "%dx%dx%d%c", t, h, w, &tail) == 3 && *t > 0 && *h > 0 && *w > 0 ? 0 : -1;
}

int vt_cmd_plan(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *model = "r3d18", *clip = "16x112x112", *split = "memory", *optname = "sgd";
    int batch = 32, classes = 400;
    vt_device_args da;
    memset(&da, 0, sizeof da);
    for (int i = 1; i < argc; i++) {
        int took = vt_device_args_take(&da, argc, argv, &i);
        if (took == 1)
            continue;
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (took < 0 || (a[0] == '-' && !v)) {
            fprintf(stderr, "vidtrain plan: %s needs a value\n", a);
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
        else {
            fprintf(stderr, "vidtrain plan: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    int t, h, w;
    if (parse_clip(clip, &t, &h, &w) || batch < 1 || classes < 1) {
        fprintf(stderr, "vidtrain plan: need --clip TxHxW, --batch >= 1, --classes >= 1\n");
        return 2;
    }
    int ok = vt_optim_kind_parse(optname);
    if (ok < 0) {
        fprintf(stderr, "vidtrain plan: unknown optimizer '%s' (sgd, rmsprop, adamw)\n", optname);
        return 2;
    }
    char err[1024];
    vt_split_policy pol;
    if (vt_split_policy_parse(&pol, split, err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        return 2;
    }
    vt_device_list devs;
    if (vt_devices_from_args(&devs, &da, err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        return 1;
    }
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, model, classes, t, h, w);
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, (vt_opt_kind)ok);
    vt_memplan mp;
    if (vt_memplan_build(&mp, &nc, vt_optim_state_per_param(&oc), err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        return 1;
    }
    vt_memplan_print(&mp, &nc, stdout);
    printf("\n");
    vt_split_dev sd[VT_MAX_DEVICES];
    int rc = 0;
    for (int i = 0; i < devs.n; i++) {
        memset(&sd[i], 0, sizeof sd[i]);
        snprintf(sd[i].name, sizeof sd[i].name, "%s", devs.dev[i].name);
        sd[i].budget = devs.dev[i].budget;
        sd[i].speed = devs.dev[i].speed;
        sd[i].max_clips = devs.dev[i].budget > 0
                              ? VT_MIN(vt_memplan_max_clips(&mp, devs.dev[i].budget), VT_SPLIT_UNLIMITED)
                              : VT_SPLIT_UNLIMITED;
        if (sd[i].max_clips == 0) {
            char a[32], b[32], c[32];
            fprintf(stderr, "warning: tower %s: its budget of %s cannot hold one clip (needs %s "
                    "fixed + %s per clip); training would refuse it\n", sd[i].name,
                    vt_fmt_bytes(a, sizeof a, sd[i].budget), vt_fmt_bytes(b, sizeof b, mp.fixed_bytes),
                    vt_fmt_bytes(c, sizeof c, mp.bytes_per_clip));
            rc = 1;
        }
    }
    vt_device_list_print(&devs, stdout);
    printf("\n");
    vt_plan plan;
    vt_split_policy start = pol;
    if (vt_split_plan(&plan, &start, batch, devs.n, sd, err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        vt_memplan_free(&mp);
        return 1;
    }
    vt_plan_print(&plan, sd, stdout);
    if (pol.kind == VT_SPLIT_AUTO || (pol.kind == VT_SPLIT_SPEED && plan.predicted == 0))
        printf("  (training measures each tower's clips/s over the first steps and re-plans; "
               "give --speeds to plan with known speeds)\n");
    vt_memplan_free(&mp);
    return rc;
}
