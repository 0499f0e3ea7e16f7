/*
 * cmd_plan.c: `vidtrain plan` — the model summary with memory per clip (the memory plan)
 * and the slice plan for a batch over the chosen devices: what fits per pass on each,
 * the slices, micro-batches and the predicted step time when speeds are given.
 * It must never allocate a model or touch a device: planning is arithmetic, so a plan
 * for GPUs one does not have (--gpu-mem with --devices cpu) is still useful.
 * Activation checkpointing (--checkpoint-act) is chosen per device as training chooses it
 * (vt_ckpt_choose), and the plan says where and why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/opts.h"
#include "app/step_opts.h"
#include "app/train/train_opts.h"
#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/slices.h"
#include "pipeline/parallel/towers/tower.h"

/* This command's defaults for the step options (bench step has its own): a GPU run's. The
 * clip and the optimizer are the model's (vt_train_clip_default on a GPU,
 * vt_train_optim_default: what train takes there without --clip or --optim); their
 * strings are help's. */
static const vt_step_args step_defaults = {
    .model = "r3d18",
    .clip = "the model's clip on a GPU, train's\n"
            "                      there: 16x112x112; s3d 16x224x224; X3D,\n"
            "                      MViT and ViT their own",
    .batch = "32", .classes = "400", .tower_split = "memory",
    .optimizer = "train's, adamw for a\n                      transformer, else sgd",
};

static void usage(FILE *f) {
    fprintf(f, "usage: vidtrain plan --model M --clip TxHxW [options]\n\n"
               "Prints the model summary with memory per clip, then how a batch splits over the\n"
               "devices (fits per pass, slice, micro-batches, predicted step time). The\n"
               "optimizer's state is part of the plan. GPUs this machine does not have (or\n"
               "a vidtrain built without CUDA) are planned from their --mem budgets, e.g. for\n"
               "a 12 GB + 6 GB workstation: --devices cuda:0,cuda:1 --mem 12G,6G.\n\n");
    vt_step_args_help(f, &step_defaults);
    fprintf(f, "  --checkpoint-act auto|on|off\n"
               "                      activation checkpointing: a transformer block keeps only\n"
               "                      its input and output and is recomputed in backward (same\n"
               "                      bits, about a third more compute, a block's activations\n"
               "                      a clip instead of all); auto (default): on for a device\n"
               "                      only where one clip does not fit a pass without it;\n"
               "                      refused for a model without transformer blocks\n");
    fprintf(f, "%s", vt_device_args_help);
}

int vt_cmd_plan(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_step_args sa = step_defaults;
    sa.dev.absent_gpus = 1; /* plan for GPUs elsewhere: --devices cuda:0,cuda:1 --mem 12G,6G */
    int ckmode = VT_CKPT_AUTO;
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        vt_opts_given_note(&given, argv[i]);
        if (!strcmp(argv[i], "--checkpoint-act")) {
            ckmode = i + 1 < argc ? vt_ckpt_mode_parse(argv[++i]) : -1;
            if (ckmode < 0) {
                fprintf(stderr, "vidtrain plan: --checkpoint-act: auto, on or off\n");
                return 2;
            }
            continue;
        }
        int took = vt_step_args_take(&sa, argc, argv, &i);
        if (took == 1)
            continue;
        if (took < 0) {
            fprintf(stderr, "vidtrain plan: %s needs a value\n", argv[i]);
            return 2;
        }
        fprintf(stderr, "vidtrain plan: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    char clip[48];
    if (!vt_opts_given_has(&given, "--clip")) {
        int t, crop, stride;
        vt_train_clip_default(sa.model, 1, &t, &crop, &stride);
        snprintf(clip, sizeof clip, "%dx%dx%d", t, crop, crop);
        sa.clip = clip;
    }
    if (!vt_opts_given_has(&given, "--optimizer"))
        sa.optimizer = vt_train_optim_default(sa.model);
    char err[1024];
    vt_net_cfg nc;
    vt_optim_cfg oc;
    vt_slice_policy pol;
    vt_device_list devs;
    int batch;
    int bad = vt_step_args_resolve(&sa, &nc, &oc, &pol, &devs, &batch, err, sizeof err);
    if (bad) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        return bad == VT_STEP_ARGS_USAGE ? 2 : 1;
    }
    nc.exact = vt_towers_exact_for(&devs, 0); /* exact sums: their bytes too */
    vt_memplan mp;
    if (vt_memplan_build(&mp, &nc, vt_optim_state_per_param(&oc), err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        return 1;
    }
    /* the plan with checkpointing too, when the model has blocks to recompute */
    vt_memplan mpc = {0};
    vt_net_cfg ncc = nc;
    ncc.ckpt = 1;
    const int have_ckpt = mp.ckpt_segments > 0 && ckmode != VT_CKPT_OFF &&
                          vt_memplan_build(&mpc, &ncc, vt_optim_state_per_param(&oc), err,
                                           sizeof err) == 0;
    /* docs/style.md §17: options given where they change nothing are refused, as train
     * refuses them */
    if (vt_opts_given_has(&given, "--checkpoint-act") && !mp.ckpt_segments) {
        fprintf(stderr, "vidtrain plan: --checkpoint-act %s: %s has no transformer blocks to "
                "recompute, so it changes nothing; leave it out\n", vt_ckpt_mode_name(ckmode),
                nc.model);
        vt_memplan_free(&mp);
        vt_memplan_free(&mpc);
        return 2;
    }
    if (vt_tower_split_check(vt_opts_given_has(&given, "--tower-split") ? sa.tower_split : NULL,
                             devs.n, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        vt_memplan_free(&mp);
        vt_memplan_free(&mpc);
        return 2;
    }
    vt_memplan_print(ckmode == VT_CKPT_ON && have_ckpt ? &mpc : &mp,
                     ckmode == VT_CKPT_ON && have_ckpt ? &ncc : &nc, stdout);
    if (have_ckpt && ckmode != VT_CKPT_ON) {
        char a[32], b[32];
        printf("Bytes per clip with activation checkpointing: %s (%d blocks recomputed in "
               "backward; one block's insides held, %s saved a clip)\n",
               vt_fmt_bytes(a, sizeof a, mpc.bytes_per_clip), mpc.ckpt_segments,
               vt_fmt_bytes(b, sizeof b, mp.bytes_per_clip - mpc.bytes_per_clip));
    }
    printf("\n");
    vt_slice_dev sd[VT_MAX_DEVICES];
    int ck[VT_MAX_DEVICES] = {0}, rc = 0;
    for (int i = 0; i < devs.n; i++) {
        memset(&sd[i], 0, sizeof sd[i]);
        snprintf(sd[i].name, sizeof sd[i].name, "%s", devs.dev[i].name);
        sd[i].budget = devs.dev[i].budget;
        sd[i].speed = devs.dev[i].speed;
        ck[i] = vt_ckpt_choose((vt_ckpt_mode)ckmode, &mp, have_ckpt ? &mpc : NULL,
                               &devs.dev[i], &sd[i].max_clips);
        const vt_memplan *used = ck[i] ? &mpc : &mp;
        if (sd[i].max_clips == 0) {
            char a[32], b[32], c[32];
            const int cuda = !strcmp(devs.dev[i].backend, "cuda");
            const int64_t fixed = used->fixed_bytes + (cuda ? vt_memplan_cuda_reserve(used) : 0);
            fprintf(stderr, "warning: tower %s: its budget of %s cannot hold one clip (needs %s "
                    "fixed%s + %s per clip); training would refuse it\n", sd[i].name,
                    vt_fmt_bytes(a, sizeof a, sd[i].budget),
                    vt_fmt_bytes(b, sizeof b, fixed),
                    cuda ? " with the CUDA reserve" : "",
                    vt_fmt_bytes(c, sizeof c, used->bytes_per_clip +
                                                  (cuda ? used->cuda_clip_bytes : 0)));
            rc = 1;
        }
    }
    vt_device_list_print(&devs, stdout);
    if (have_ckpt) {
        printf("\nactivation checkpointing (--checkpoint-act %s):\n", vt_ckpt_mode_name(ckmode));
        for (int i = 0; i < devs.n; i++) {
            const int off = vt_slice_fits(&mp, &devs.dev[i]), on = vt_slice_fits(&mpc, &devs.dev[i]);
            printf("  %-9s %-3s  clips a pass: %d without, %d with%s\n", sd[i].name,
                   ck[i] ? "on" : "off", off, on,
                   ckmode != VT_CKPT_AUTO ? ""
                   : ck[i] ? " (turned on: not one clip fits without it)"
                   : off > 0 ? " (not needed: micro-batches cost less than recomputing)" : "");
        }
    }
    printf("\n");
    vt_plan plan;
    vt_slice_policy start = pol;
    if (vt_slice_plan(&plan, &start, batch, devs.n, sd, err, sizeof err)) {
        fprintf(stderr, "vidtrain plan: %s\n", err);
        vt_memplan_free(&mp);
        vt_memplan_free(&mpc);
        return 1;
    }
    vt_plan_print(&plan, sd, stdout);
    if (pol.kind == VT_SLICE_AUTO || (pol.kind == VT_SLICE_SPEED && plan.predicted == 0))
        printf("  (training measures each tower's clips/s over the first steps and re-plans; "
               "give --speeds to plan with known speeds)\n");
    vt_memplan_free(&mp);
    vt_memplan_free(&mpc);
    return rc;
}
