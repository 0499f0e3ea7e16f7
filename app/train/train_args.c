/*
 * train_args.c: `vidtrain train`'s command line (train_args.h) in three steps: the
 * configuration --resume loads, the options given (which override it), then the checks
 * that span several options. Flags and the options whose values train_ranges.c checks
 * are tables; what needs more than a range (a name from a list, a file, a value that
 * moves another) is one block each.
 */
#include "app/train/train_args.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/decode_opt.h"
#include "app/device_opts.h"
#include "app/dist.h"
#include "app/opts.h"
#include "app/run/pretrained.h"
#include "app/run/run_ckpt.h"
#include "app/run/run_files.h"
#include "app/train/train_ranges.h"
#include "base/common.h"
#include "base/json_str.h"
#include "models/backend.h"
#include "models/finetune.h"
#include "models/net_types.h"
#include "models/optim.h"
#include "pipeline/data/balance.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/randaug.h"
#include "pipeline/data/sample.h"
#include "pipeline/data/video/video.h"
#include "pipeline/parallel/slices.h"

/* What the options said beyond the configuration, for the checks after them. */
typedef struct train_args {
    const char *pos; /* the dataset folder */
    int quiet;
    int cpv_count_given; /* --clips-per-video N (a count, not auto) */
    /* the options the command line gave (app/opts.h): a check asks given() whether the
     * user said it, never whether a value differs from its default (--momentum 0.9 beside
     * AdamW is as ignored as --momentum 0.5) */
    vt_opts_given given;
    char cfg_src[2200]; /* where the resumed configuration came from, for messages */
} train_args;

/* 1 when the command line gave the option `name`. */
static int given(const train_args *ta, const char *name) {
    return vt_opts_given_has(&ta->given, name);
}

/* Flags: the option sets an int of the options to a value. */
static const struct {
    const char *name;
    size_t off;
    int val;
} flags[] = {
    {"--no-flip", offsetof(vt_train_opts, flip), 0},
    {"--flip", offsetof(vt_train_opts, flip), 1},
    {"--strict-splits", offsetof(vt_train_opts, strict_splits), 1},
    {"--no-leak-check", offsetof(vt_train_opts, no_leak_check), 1},
    {"--force", offsetof(vt_train_opts, force), 1},
    {"--budget-once", offsetof(vt_train_opts, budget_once), 1},
    {"--nesterov", offsetof(vt_train_opts, nesterov), 1},
    {"--no-nesterov", offsetof(vt_train_opts, nesterov), 0},
    {"--skip-nonfinite", offsetof(vt_train_opts, skip_nonfinite), 1},
    {"--init-strict", offsetof(vt_train_opts, init_strict), 1},
    {"--freeze-bn", offsetof(vt_train_opts, freeze_bn), 1},
    {"--no-freeze-bn", offsetof(vt_train_opts, freeze_bn), 0},
    {"--sync-bn", offsetof(vt_train_opts, sync_bn), 1},
    {"--no-sync-bn", offsetof(vt_train_opts, sync_bn), 0},
};

/* Options whose value is a number in the range train_ranges.c gives (vt_train_range_parse). */
static const char *const ranged[] = {
    "--stride", "--stride-jitter", "--clip-fps", "--contrast", "--brightness", "--precise-bn",
    "--head-lr-mult", "--mixup", "--cutmix", "--random-erase", "--repeat-aug",
    "--mixup-switch-prob", "--drop-path", "--layer-decay", "--dropout", "--batch", "--lr",
    "--momentum", "--wd", "--warmup", "--step-epochs", "--gamma", "--label-smoothing",
    "--clip-norm", "--workers", "--queue", "--seconds-per-clip", "--val-split", "--fold",
    "--eval-every", "--val-clips", "--log-every", "--checkpoint-every",
};

/* v into a fixed-size field of the options: 0, or -1 after saying it does not fit. A value
 * cut to the field named something else: a 1,157-byte --out trained into the folder its
 * first 1,023 bytes name, and said so nowhere. */
static int put(char *dst, size_t n, const char *opt, const char *v) {
    size_t len = strlen(v);
    if (len >= n) {
        fprintf(stderr, "vidtrain train: %s: '%.48s...' is %zu bytes, more than the %zu this "
                "option holds (give a shorter path, e.g. through a symbolic link)\n", opt, v,
                len, n - 1);
        return -1;
    }
    memcpy(dst, v, len + 1);
    return 0;
}

/* A note when RUN/config.json is not the configuration RUN/last.safetensors was saved
 * with (every checkpoint carries its own copy, which eval and predict read): a resume with
 * other options that stopped before its first checkpoint, or an edit. The resume goes on
 * with config.json's options, as before; it says so, since they are not those the
 * checkpoint's steps were trained with (the first key that differs is named). */
static void config_vs_ckpt(const char *run, const cJSON *j) {
    char ck[2100], e[1024];
    snprintf(ck, sizeof ck, "%s/last.safetensors", run);
    cJSON *c = vt_run_ckpt_config(ck, e, sizeof e);
    const cJSON *it = NULL, *over = c ? j : NULL; /* no copy: nothing to compare with */
    cJSON_ArrayForEach(it, over) {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(c, it->string);
        if (!o || !cJSON_Compare(o, it, 1))
            break;
    }
    if (it && vt_dist_lead())
        fprintf(stderr, "vidtrain train: note: --resume %s: %s/config.json is not the "
                "configuration %s was saved with (\"%s\" differs: a resume with other options "
                "stopped before its first checkpoint, or an edit): the run goes on with "
                "config.json's options, then the command line's\n", run, run, ck, it->string);
    cJSON_Delete(c);
}

/* Pass 1: --resume loads the saved configuration, which the options then override. 0, or
 * 1 (printed) when there is nothing to resume. */
static int take_resume(vt_train_opts *o, int argc, char **argv, char *resume, size_t resume_n,
                       train_args *ta) {
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (vt_opt_value(argc, argv, &i, "--resume", &v) == 1) {
            if (put(resume, resume_n, "--resume", v) != 0)
                return 2;
            v = vt_run_path_trim(resume); /* "r7/" is r7: one slash in r7/config.json */
            char path[2048];
            snprintf(path, sizeof path, "%s/config.json", v);
            cJSON *j = vt_dist_read_json(path); /* rank 0's copy under mpirun */
            snprintf(ta->cfg_src, sizeof ta->cfg_src, "%s", path);
            if (!j) { /* every checkpoint holds the configuration too */
                char ck[2100], cerr[1024];
                snprintf(ck, sizeof ck, "%s/last.safetensors", v);
                j = vt_run_ckpt_config(ck, cerr, sizeof cerr);
                if (!j) {
                    fprintf(stderr, "vidtrain train: --resume %s: %s is missing or not JSON, and "
                                    "%s: nothing to resume\n", v, path, cerr);
                    return 1;
                }
                fprintf(stderr, "vidtrain train: --resume: %s is missing or not JSON: the "
                                "configuration comes from %s (its own copy)\n", path, ck);
                snprintf(ta->cfg_src, sizeof ta->cfg_src, "%s's configuration", ck);
            } else {
                config_vs_ckpt(v, j); /* on every rank: the checkpoint is read collectively */
            }
            vt_train_opts_from_json(o, j);
            vt_dist_resume_devices(o, j);
            cJSON_Delete(j);
            /* --max-steps is a stop for one invocation, never inherited: a plain --resume
             * continues to the end. */
            o->max_steps = 0;
            if (put(o->out, sizeof o->out, "--resume", v) != 0)
                return 2;
        }
    }
    return 0;
}

/* One option at argv[*ip] (moved past its value): 0 taken, 2 a bad value (printed), -1 not
 * an option train takes. */
static int take_option(vt_train_opts *o, int argc, char **argv, int *ip, train_args *ta) {
    const char *a = argv[*ip], *v = NULL;
    int r;
    char err[256];
    vt_device_args da;
    memset(&da, 0, sizeof da);
    int di = *ip;
    int dr = vt_device_args_take(&da, argc, argv, &di);
    if (dr < 0) {
        fprintf(stderr, "vidtrain train: %s needs a value\n", a);
        return 2;
    }
    if (dr == 1) {
        if (vt_train_opts_take_device_args(o, &da, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain train: %s\n", err);
            return 2;
        }
        *ip = di;
        return 0;
    }
    for (size_t k = 0; k < VT_ARRAY_LEN(flags); k++)
        if (!strcmp(a, flags[k].name)) {
            *(int *)((char *)o + flags[k].off) = flags[k].val;
            return 0;
        }
#define OPT(name) ((r = vt_opt_value(argc, argv, ip, name, &v)) != 0)
#define PUT(f) do { if (put(o->f, sizeof o->f, a, v) != 0) return 2; } while (0)
#define BAD() do { fprintf(stderr, "vidtrain train: bad value for %s: '%s'\n", a, v ? v : ""); return 2; } while (0)
    for (size_t k = 0; k < VT_ARRAY_LEN(ranged); k++)
        if (OPT(ranged[k])) {
            if (r < 0 || vt_train_range_parse(o, ranged[k], v)) { /* what it takes, too */
                char what[96];
                fprintf(stderr, "vidtrain train: bad value for %s: '%s' (%s)\n", a, v ? v : "",
                        vt_train_range_text(ranged[k], what, sizeof what));
                return 2;
            }
            return 0;
        }
    if (OPT("--tb-clips")) { if (r < 0 || vt_parse_int(v, 0, 64, &o->tb_clips) != 0) BAD(); return 0; }
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
        ta->quiet = 1;
        return 0;
    }
    if (OPT("--resume")) {
        if (r < 0) BAD();
        return 0;
    }
    if (OPT("--out")) {
        if (r < 0) BAD();
        PUT(out);
        vt_run_path_trim(o->out); /* "./r7/" would print ./r7//best.safetensors */
        return 0;
    }
    if (OPT("--model")) { if (r < 0) BAD(); PUT(model); return 0; }
    if (OPT("--clip")) {
        vt_clip_shape cs; /* training crops are square: TxS, or TxHxW with H = W */
        if (r < 0 || vt_parse_clip(v, &cs) || cs.h != cs.w) BAD();
        o->clip_t = cs.t;
        o->crop = cs.h;
        return 0;
    }
    if (OPT("--short-side")) { if (r < 0 || vt_train_range_parse(o, "--short-side", v)) BAD(); o->jitter_min = o->jitter_max = 0; return 0; }
    if (OPT("--input-norm")) { if (r < 0) BAD(); PUT(input_norm); return 0; }
    if (OPT("--checkpoint-act")) { if (r < 0 || vt_ckpt_mode_parse(v) < 0) BAD(); PUT(checkpoint_act); return 0; }
    if (OPT("--precision")) { if (r < 0 || vt_precision_parse(v) < 0) BAD(); PUT(precision); return 0; }
    if (OPT("--init")) { if (r < 0 || !v[0]) BAD(); PUT(init); return 0; }
    if (OPT("--pretrained")) {
        if (r < 0 || !vt_pretrained_find(v)) {
            fprintf(stderr, "vidtrain train: --pretrained '%s': one of %s\n", v ? v : "",
                    vt_pretrained_names());
            if (v && !strncmp(v, "videomae", 8))
                fprintf(stderr, "  VideoMAE weights are not in the registry (no URL and "
                        "SHA-256 checkable offline): download them yourself (licence "
                        "CC-BY-NC 4.0: non-commercial) and pass --init FILE "
                        "(docs/models.md)\n");
            return 2;
        }
        snprintf(o->pretrained, sizeof o->pretrained, "%s", vt_pretrained_find(v)->name);
        return 0;
    }
    if (OPT("--freeze")) {
        if (r > 0 && !strcmp(v, "none")) { o->freeze = -1; return 0; }
        if (r < 0 || vt_parse_int(v, 0, 16, &o->freeze)) BAD();
        return 0;
    }
    if (OPT("--randaug")) {
        vt_randaug_cfg rc;
        char e[512];
        if (r < 0)
            BAD();
        if (vt_randaug_parse(&rc, v, e, sizeof e)) {
            fprintf(stderr, "vidtrain train: %s\n", e);
            return 2;
        }
        vt_randaug_format(&rc, o->randaug, sizeof o->randaug); /* every section explicit */
        return 0;
    }
    if (OPT("--wd-exempt")) { if (r < 0 || (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto"))) BAD(); PUT(wd_exempt); return 0; }
    if (OPT("--patience")) { if (r < 0 || vt_train_range_parse(o, "--patience", v)) BAD(); return 0; }
    if (OPT("--min-clips")) { if (r < 0 || vt_train_range_parse(o, "--min-clips", v)) BAD(); return 0; }
    if (OPT("--epochs")) { if (r < 0 || vt_train_range_parse(o, "--epochs", v)) BAD(); return 0; }
    if (OPT("--time-budget")) { if (r < 0 || (o->time_budget = (float)vt_parse_duration(v)) <= 0) BAD(); return 0; }
    if (OPT("--optim")) { if (r < 0 || vt_optim_kind_parse(v) < 0) BAD(); PUT(optim); return 0; }
    if (OPT("--sched")) { if (r < 0 || vt_sched_kind_parse(v) < 0) BAD(); PUT(sched); return 0; }
    if (OPT("--balance")) { if (r < 0 || vt_balance_parse(v) < 0) BAD(); PUT(balance); return 0; }
    if (OPT("--class-weights")) { if (r < 0) BAD(); PUT(class_weights); return 0; }
    if (OPT("--seed")) { if (r < 0 || vt_parse_u64(v, &o->seed)) BAD(); return 0; }
    if ((r = vt_decode_opt_take("train", argc, argv, ip)) != 0) { if (r < 0) return 2; return 0; }
    if (OPT("--frame-cache")) { if (r < 0 || (strcmp(v, "auto") && vt_parse_bytes(v) < 0)) BAD(); PUT(frame_cache); return 0; }
    if (OPT("--clips-per-video")) {
        if (r > 0 && !strcmp(v, "auto")) { /* one per N seconds (train_opts.h) */
            o->seconds_per_clip = o->seconds_per_clip > 0 ? o->seconds_per_clip : VT_AUTO_CLIP_SECONDS;
            return 0;
        }
        if (r < 0 || vt_parse_int(v, 1, 1000, &o->clips_per_video)) BAD();
        o->seconds_per_clip = 0;
        ta->cpv_count_given = 1;
        return 0;
    }
    if (OPT("--group")) {
        char gerr[512];
        if (r < 0 || strlen(v) >= sizeof o->group) BAD();
        if (vt_dataset_group_check(v, gerr, sizeof gerr) < 0) {
            fprintf(stderr, "vidtrain train: %s\n", gerr);
            return 2;
        }
        PUT(group);
        return 0;
    }
    if (OPT("--val-dir")) { if (r < 0) BAD(); PUT(val_dir); return 0; }
    if (OPT("--lists")) { if (r < 0) BAD(); PUT(lists); return 0; }
    if (OPT("--list-format")) { if (r < 0 || vt_lists_format_parse(v) < 0) BAD(); PUT(list_format); return 0; }
    if (OPT("--val-crops")) { if (r < 0 || vt_train_range_parse(o, "--val-crops", v) || o->val_crops == 2) BAD(); return 0; }
    if (OPT("--labels")) { if (r < 0) BAD(); PUT(labels); return 0; }
    if (OPT("--loss-weights")) { if (r < 0 || (o->nweights = vt_parse_floats(v, o->loss_weights, VT_MAX_HEADS)) < 1) BAD(); return 0; }
    if (OPT("--tower-split")) {
        vt_slice_policy pol;
        if (r < 0 || vt_slice_policy_parse(&pol, v, err, sizeof err)) {
            fprintf(stderr, "vidtrain train: %s\n",
                    r < 0 ? "--tower-split needs a value" : err);
            return 2;
        }
        PUT(tower_split);
        return 0;
    }
    if (OPT("--split")) {
        /* Train has no data split option: it trains on the train split. The tower
         * policy was --split before it became --tower-split. */
        if (r > 0 && vt_slice_policy_like(v)) {
            vt_slice_policy_moved(err, sizeof err, v);
            fprintf(stderr, "vidtrain train: %s\n", err);
        } else {
            fprintf(stderr, "vidtrain train: train has no --split: it trains on DIR's train "
                    "videos and validates on its val videos (or --val-split F of train, or "
                    "--val-dir); the tower policy is --tower-split POLICY\n");
        }
        return 2;
    }
    if (OPT("--dump")) { if (r < 0) BAD(); PUT(dump); return 0; }
    if (OPT("--max-steps")) { if (r < 0 || vt_parse_i64(v, 0, INT64_MAX, &o->max_steps)) BAD(); return 0; }
#undef OPT
#undef BAD
#undef PUT
    return -1;
}

/* The checks that span options, and what one option sets for another. */
/* 1 when a and b name one existing folder (another spelling, a link). */
static int same_folder(const char *a, const char *b) {
    char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

static int check_args(vt_train_opts *o, train_args *ta, const char *resume) {
    if (resume[0]) { /* config.json passes the command line's checks too (train_ranges.h) */
        char cerr[1024];
        if (vt_train_opts_check(o, ta->cfg_src, cerr, sizeof cerr) != 0) {
            fprintf(stderr, "vidtrain train: --resume %s: %s\n", resume, cerr);
            return 1;
        }
    }
    if (resume[0] && o->dump[0]) {
        fprintf(stderr, "vidtrain train: --dump replays a run from its first step: not with "
                        "--resume\n");
        return 2;
    }
    /* A run folder holds one run: --resume RUN --out OTHER loaded RUN's checkpoint and
     * wrote the continuation into OTHER (config.json and the report, checkpoints only
     * when due), so neither folder held the run whole, and the end line named an
     * OTHER/best.safetensors that was never written. --out naming RUN itself is fine. */
    if (resume[0] && given(ta, "--out") && strcmp(o->out, resume) && !same_folder(o->out, resume)) {
        fprintf(stderr, "vidtrain train: --out %s with --resume %s: a resumed run continues "
                        "in its own folder (leave --out out); to branch it into a new run, "
                        "start one from its weights: vidtrain train DIR --out %s --init "
                        "%s/last.safetensors\n", o->out, resume, o->out, resume);
        return 2;
    }
    /* The twin replays training steps; a precise-BN pass between them would change the
     * running statistics it checks step by step. */
    if (o->dump[0] && o->precise_bn > 0) {
        fprintf(stderr, "vidtrain train: --dump replays training steps, which precise BN is "
                        "not part of: not with --precise-bn %d (0, or leave it out)\n",
                o->precise_bn);
        return 2;
    }
    /* Random erasing, RandAugment, mixup and CutMix need no refusal: the dump holds the
     * batch the towers received, erased, augmented and mixed (the twin replays the mixed
     * targets from the step's draw). */
    if (o->dump[0])
        o->precise_bn = 0;
    if (o->pretrained[0] && !resume[0]) {
        const vt_pretrained *p = vt_pretrained_find(o->pretrained);
        if (given(ta, "--model") && strcmp(o->model, p->model)) {
            fprintf(stderr, "vidtrain train: --pretrained %s is a %s: not with --model %s\n",
                    p->name, p->model, o->model);
            return 2;
        }
        if (o->init[0]) {
            fprintf(stderr, "vidtrain train: --pretrained and --init both name the starting "
                            "weights: give one\n");
            return 2;
        }
        snprintf(o->model, sizeof o->model, "%s", p->model);
        if (!o->clip_t) { /* the input the weights were trained on */
            o->clip_t = p->clip_t;
            if (!o->crop)
                o->crop = p->crop;
        }
        if (!o->stride && p->stride) /* pytorchvideo's 8x8: every 8th frame */
            o->stride = p->stride;
        /* the registry's weights learnt on their family's statistics (auto's choice) */
        if (strcmp(o->input_norm, "auto") && strcmp(o->input_norm, vt_zoo_input_norm(p->model)))
            fprintf(stderr, "vidtrain train: warning: --input-norm %s, but --pretrained %s's "
                    "weights learnt on clips normalised with %s's statistics: leave "
                    "--input-norm out to keep them\n", o->input_norm, p->name,
                    vt_zoo_input_norm(p->model));
    }
    if (o->init_strict && !o->init[0] && !o->pretrained[0] && !resume[0]) {
        fprintf(stderr, "vidtrain train: --init-strict checks the weights --init or "
                "--pretrained loads: give one of them\n");
        return 2;
    }
    /* --seconds-per-clip implies auto: a count given beside it was dropped, whichever came
     * first decided */
    if (ta->cpv_count_given && given(ta, "--seconds-per-clip")) {
        fprintf(stderr, "vidtrain train: --clips-per-video %d and --seconds-per-clip: one fixes "
                "the clips a video, the other spaces them by its length; give one (the second "
                "with --clips-per-video auto or alone)\n", o->clips_per_video);
        return 2;
    }
    /* the step schedule's own numbers: another schedule never reads them */
    if ((given(ta, "--step-epochs") || given(ta, "--gamma")) && strcmp(o->sched, "step")) {
        fprintf(stderr, "vidtrain train: --step-epochs and --gamma shape --sched step: not "
                "with --sched %s\n", o->sched);
        return 2;
    }
    /* OneCycle (torch's OneCycleLR) rises over its first 30% of steps and cycles the
     * momentum itself (train_epoch.c): --warmup and --momentum were taken and unused */
    static const char *const oc_opts[] = {"--warmup", "--momentum", NULL};
    const char *oc = vt_opts_given_any(&ta->given, oc_opts);
    if (oc && !strcmp(o->sched, "onecycle")) {
        fprintf(stderr, "vidtrain train: --sched onecycle rises from lr/25 over its first "
                "30%% of steps and cycles the momentum (0.95-0.85-0.95; AdamW's beta1) itself: "
                "not with %s; leave it out, or give another --sched\n", oc);
        return 2;
    }
    /* the switch picks mixup or CutMix for a batch: with one of them off it picks nothing */
    if (given(ta, "--mixup-switch-prob") && !(o->mixup > 0 && o->cutmix > 0)) {
        fprintf(stderr, "vidtrain train: --mixup-switch-prob %g chooses between mixup and "
                "CutMix batch by batch: give both --mixup A and --cutmix B (with one, every "
                "mixed batch is that one's)\n", (double)o->mix_switch);
        return 2;
    }
    /* drop path and layer decay act on a transformer's blocks: a CNN has none, and took
     * them without a word (the fine-tuning line even named a layer decay it never used) */
    const int dp = given(ta, "--drop-path"); /* at 0 (or --layer-decay 1) too: given */
    if (vt_finetune_nlayers(o->model) <= 0 && (dp || given(ta, "--layer-decay"))) {
        fprintf(stderr, "vidtrain train: %s %g: %s has no transformer blocks for it to act on "
                "(videomae_vit_*, mvit_* have); a CNN's classifier takes --dropout P, and "
                "fine-tuning's rates --freeze N and --head-lr-mult F\n",
                dp ? "--drop-path" : "--layer-decay",
                (double)(dp ? o->drop_path : o->layer_decay), o->model);
        return 2;
    }
    /* momentum and Nesterov are SGD's (RMSprop takes a momentum, not Nesterov's); AdamW
     * has betas. A resumed run's saved value was never given (vt_train_resume_unused). */
    const char *optim = vt_train_opts_optim(o);
    const char *why = o->optim[0] ? "" : " (the transformers' recipe)";
    if (!strcmp(optim, "adamw") && given(ta, "--momentum")) {
        fprintf(stderr, "vidtrain train: --momentum %g: AdamW%s has no momentum to set (its "
                "betas are 0.9, 0.999); give --optim sgd or rmsprop with it, or leave it out\n",
                (double)o->momentum, why);
        return 2;
    }
    if (given(ta, "--nesterov") && (strcmp(optim, "sgd") || !(o->momentum > 0))) {
        fprintf(stderr, "vidtrain train: --nesterov is SGD's, with a momentum: not with %s%s "
                "(leave it out, or give --optim sgd)\n",
                !strcmp(optim, "adamw")     ? "AdamW"
                : !strcmp(optim, "rmsprop") ? "RMSprop"
                                            : "--momentum 0",
                strcmp(optim, "sgd") ? why : "");
        return 2;
    }
    /* --strict-splits makes the near-copy check's leaks errors: skipped, it finds none */
    if (given(ta, "--strict-splits") && given(ta, "--no-leak-check")) {
        fprintf(stderr, "vidtrain train: --strict-splits makes a near-copy the leak check finds "
                "an error, and --no-leak-check skips that check: give one of them\n");
        return 2;
    }
    /* how --lists is read: nothing to read without it (as scan says) */
    static const char *const lists_only[] = {"--list-format", "--fold", NULL};
    const char *lo = vt_opts_given_any(&ta->given, lists_only);
    if (lo && !o->lists[0]) {
        fprintf(stderr, "vidtrain train: %s says how --lists is read: not without --lists PATH; "
                "leave it out\n", lo);
        return 2;
    }
    if (given(ta, "--fold") && vt_lists_format_parse(o->list_format) == VT_LISTS_KINETICS) {
        fprintf(stderr, "vidtrain train: --fold picks UCF101's trainlist/testlist pair or an "
                "HMDB51 split: a Kinetics CSV has one split column; leave it out\n");
        return 2;
    }
    /* freezing is fine-tuning's: from scratch it keeps random layers random for good */
    const int fz = given(ta, "--freeze") && o->freeze >= 0;
    if (!o->init[0] && !o->pretrained[0] && !resume[0] &&
        (fz || (given(ta, "--freeze-bn") && o->freeze_bn > 0))) {
        fprintf(stderr, "vidtrain train: warning: %s without --init or --pretrained: %s for the "
                "whole run (freezing keeps pretrained weights; from scratch leave it out)\n",
                fz ? "--freeze" : "--freeze-bn",
                fz ? "the frozen layers keep their random initialisation"
                   : "the batch norms normalise with their initial statistics (mean 0, var 1)");
    }
    if (o->freeze >= 0 && o->freeze > vt_finetune_nstages(o->model)) {
        fprintf(stderr, "vidtrain train: --freeze %d: %s has the stem and %d stages (0..%d)\n",
                o->freeze, o->model, vt_finetune_nstages(o->model), vt_finetune_nstages(o->model));
        return 2;
    }
    if (ta->pos && put(o->data, sizeof o->data, "DIR", ta->pos) != 0)
        return 2;
    if (!o->data[0] || !o->out[0]) {
        fprintf(stderr, "vidtrain train: need DIR and --out RUN (or --resume RUN)\n");
        return 2;
    }
    /* a budget is planned from a run's first steps, against the clock of its start
     * (train.c): a resume keeps the run's last plan, and took a budget given now without
     * using it (config.json recorded it) */
    static const char *const budget_opts[] = {"--time-budget", "--budget-once", NULL};
    const char *bo = vt_opts_given_any(&ta->given, budget_opts);
    if (bo && resume[0]) {
        fprintf(stderr, "vidtrain train: %s plans a run's epochs from its first steps, against "
                "the clock of its start: a resumed run keeps its length (its budget's last "
                "plan); give --epochs N for another, or --max-steps N to stop early\n", bo);
        return 2;
    }
    if (o->budget_once && !(o->time_budget > 0) && !resume[0]) {
        fprintf(stderr, "vidtrain train: --budget-once plans --time-budget's epochs once: give "
                        "--time-budget T too\n");
        return 2;
    }
    if (o->time_budget > 0 && given(ta, "--epochs") && !resume[0]) {
        fprintf(stderr, "vidtrain train: --time-budget picks the number of epochs: not with "
                        "--epochs\n");
        return 2;
    }
    /* --patience sets when the default length decays (app/train/train_length.c): a length
     * given, or a schedule other than its own, leaves it nothing to decide. */
    if (given(ta, "--patience") && o->patience > 0 &&
        (given(ta, "--epochs") || o->time_budget > 0 || strcmp(o->sched, "cosine") || o->dump[0])) {
        fprintf(stderr, "vidtrain train: --patience decides the default length: not with %s\n",
                given(ta, "--epochs") ? "--epochs" : o->time_budget > 0 ? "--time-budget"
                : o->dump[0] ? "--dump (the twin replays a schedule fixed in advance)"
                             : "--sched other than cosine");
        return 2;
    }
    if (!given(ta, "--patience") && (given(ta, "--epochs") || o->dump[0]))
        o->patience = 0; /* --epochs means exactly that many; the twin replays a fixed one */
    if (given(ta, "--min-clips") && (o->patience == 0 || given(ta, "--epochs") || o->time_budget > 0 || o->dump[0] ||
                            strcmp(o->sched, "cosine"))) {
        fprintf(stderr, "vidtrain train: --min-clips belongs to the default length (it holds "
                        "off its decay): not with a length given (--epochs, --time-budget, "
                        "--patience 0, --dump or another --sched)\n");
        return 2;
    }
    /* frame folders' rate: given now, or the resumed run's (config.json), or 30 */
    if (vt_frame_rate_given())
        o->frame_rate = (float)vt_video_get_frame_rate();
    else if (o->frame_rate > 0)
        vt_video_set_frame_rate(o->frame_rate);
    return 0;
}

/* A configuration value as a person reads it: numbers %g (a float option's 0.3 is not
 * 0.300000011920929), strings bare. */
static void value_text(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v))
        snprintf(buf, n, "%g", v->valuedouble);
    else if (cJSON_IsString(v))
        snprintf(buf, n, "'%s'", v->valuestring);
    else if (cJSON_IsBool(v))
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (v) {
        char *s = vt_json_print(v, 0);
        snprintf(buf, n, "%s", s);
        cJSON_free(s);
    } else {
        snprintf(buf, n, "(none)");
    }
}

/* 1 when two strings name the same existing file or folder (the dataset given again as
 * ./data, or by its full path), else 0. */
static int same_path(const cJSON *a, const cJSON *b) {
    if (!cJSON_IsString(a) || !cJSON_IsString(b) || !a->valuestring[0] || !b->valuestring[0])
        return 0;
    char *ra = realpath(a->valuestring, NULL), *rb = realpath(b->valuestring, NULL);
    int same = ra && rb && !strcmp(ra, rb);
    free(ra);
    free(rb);
    return same;
}

/* --resume with options: every value that differs from the run's configuration is named
 * (the continuation is then not the run's, and config.json will say the new value for the
 * whole run), but for --input-norm, which is refused: the weights learnt on the saved
 * statistics, and eval of the run's earlier checkpoints would read the new ones; for
 * --model, whose tensors the checkpoint does not hold; and for --init and --pretrained, which a resume never loads (it continues its checkpoint). Keys that
 * change no number of the run (where and how fast it runs, how often it logs) are not
 * named. 0, or 2 (printed). */
static int resume_changes(const vt_train_opts *saved, vt_train_opts *o, const char *resume) {
    static const char *const quiet_keys[] = {
        "out", "max_steps", "workers", "queue", "frame_cache", "devices", "gpus", "mem",
        "gpu_mem", "backend", "emulate", "speeds", "threads", "tower_split", "log_every",
        "checkpoint_every", "checkpoint_act", "recipe"};
    if (!strcmp(o->input_norm, "auto")) /* what resolve would make of it */
        snprintf(o->input_norm, sizeof o->input_norm, "%s", vt_zoo_input_norm(o->model));
    vt_clip_cfg probe; /* a damaged config.json's name is for the option to repair */
    if (strcmp(o->input_norm, saved->input_norm) && vt_clip_set_norm(&probe, saved->input_norm) == 0) {
        fprintf(stderr, "vidtrain train: --resume %s: --input-norm %s, but the run's weights "
                "learnt on clips normalised with %s's statistics, which a resumed run keeps; "
                "to train on others, start a new run from them: train DIR --out NEW --init "
                "%s/last.safetensors --input-norm %s\n", resume, o->input_norm,
                saved->input_norm, resume, o->input_norm);
        return 2;
    }
    if (strcmp(o->model, saved->model)) { /* its checkpoint holds the run's model's tensors */
        fprintf(stderr, "vidtrain train: --resume %s continues a %s: not with --model %s (a "
                "new run trains another model: train DIR --out NEW --model %s)\n", resume,
                saved->model, o->model, o->model);
        return 2;
    }
    if (strcmp(o->init, saved->init) || strcmp(o->pretrained, saved->pretrained)) {
        fprintf(stderr, "vidtrain train: --resume %s continues from its last checkpoint: "
                "--init and --pretrained name a start, which it had (start a new run to start "
                "from other weights)\n", resume);
        return 2;
    }
    cJSON *a = vt_train_opts_to_json(saved), *b = vt_train_opts_to_json(o);
    char list[1024] = "";
    size_t len = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, b) {
        int skip = 0;
        for (size_t k = 0; k < VT_ARRAY_LEN(quiet_keys); k++)
            skip |= !strcmp(x->string, quiet_keys[k]);
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(a, x->string);
        if (skip || (y && (cJSON_Compare(x, y, 1) || same_path(x, y))))
            continue;
        char was[256], now[256];
        value_text(y, was, sizeof was);
        value_text(x, now, sizeof now);
        if (len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s %s -> %s",
                                    len ? ", " : "", x->string, was, now);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    if (len && vt_dist_lead())
        fprintf(stderr, "vidtrain train: warning: --resume %s with other values than the run's "
                "configuration (%s): the continuation is not the run's, and config.json "
                "records the new values for the whole run\n", resume, list);
    return 0;
}

int vt_train_parse_args(vt_train_opts *o, vt_opts_given *cli, int argc, char **argv,
                        int *quiet, char *resume, size_t resume_n) {
    train_args ta = {0};
    int rr = take_resume(o, argc, argv, resume, resume_n, &ta);
    if (rr != 0)
        return rr;
    vt_train_opts saved = *o; /* the run's configuration, for resume_changes */
    for (int i = 1; i < argc; i++) {
        vt_opts_given_note(&ta.given, argv[i]);
        int rc = take_option(o, argc, argv, &i, &ta);
        if (rc > 0)
            return rc;
        if (rc == 0)
            continue;
        const char *a = argv[i];
        if (a[0] == '-') {
            fprintf(stderr, "vidtrain train: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (ta.pos) {
            fprintf(stderr, "vidtrain train: one dataset folder only ('%s' and '%s')\n", ta.pos, a);
            return 2;
        }
        ta.pos = a;
    }
    /* --resume on other towers: the run's device options described its towers as a set;
     * --devices or --gpus given names new ones, and what of the set is not given (the CPU
     * run's --threads 2, its --mem) describes nothing now: dropped, not applied to them */
    if (resume[0] && (given(&ta, "--devices") || given(&ta, "--gpus"))) {
        static const struct {
            const char *opt;
            size_t off, n;
        } set[] = {{"--devices", offsetof(vt_train_opts, devices), sizeof o->devices},
                   {"--gpus", offsetof(vt_train_opts, gpus), sizeof o->gpus},
                   {"--mem", offsetof(vt_train_opts, mem), sizeof o->mem},
                   {"--gpu-mem", offsetof(vt_train_opts, gpu_mem), sizeof o->gpu_mem},
                   {"--backend", offsetof(vt_train_opts, backend), sizeof o->backend},
                   {"--emulate-slowdown", offsetof(vt_train_opts, emulate), sizeof o->emulate},
                   {"--speeds", offsetof(vt_train_opts, speeds), sizeof o->speeds}};
        for (size_t k = 0; k < VT_ARRAY_LEN(set); k++)
            if (!given(&ta, set[k].opt))
                memset((char *)o + set[k].off, 0, set[k].n);
        if (!given(&ta, "--threads"))
            o->threads = 0;
    }
    if (resume[0])
        vt_train_resume_unused(o, &saved, &ta.given, resume);
    *quiet = ta.quiet;
    *cli = ta.given;
    int rc = check_args(o, &ta, resume);
    return rc == 0 && resume[0] ? resume_changes(&saved, o, resume) : rc;
}
