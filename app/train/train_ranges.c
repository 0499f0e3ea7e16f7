/*
 * train_ranges.c: train's numeric options, their config.json keys and ranges
 * (train_ranges.h). One row per option: the command line and --resume's check read the
 * same row, so they cannot drift apart.
 */
#include "app/train/train_ranges.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/opts.h"
#include "models/backend.h"
#include "base/common.h"
#include "models/optim.h"
#include "pipeline/data/balance.h"
#include "pipeline/data/randaug.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/slices.h"

typedef struct range {
    const char *opt; /* the command-line option; NULL: a key no option sets directly */
    const char *key; /* config.json's key */
    size_t off;      /* the field in vt_train_opts */
    char kind;       /* 'i' int, 'f' float */
    double lo, hi;   /* the option's range, both ends included */
    int nx;          /* values outside it that still mean something: */
    double x[2];     /* "resolve" defaults and words such as --freeze none (-1) */
} range;

#define I(opt, f, lo, hi) {opt, #f, offsetof(vt_train_opts, f), 'i', lo, hi, 0, {0, 0}}
#define F(opt, f, lo, hi) {opt, #f, offsetof(vt_train_opts, f), 'f', lo, hi, 0, {0, 0}}
#define IX(opt, f, lo, hi, n, a, b) {opt, #f, offsetof(vt_train_opts, f), 'i', lo, hi, n, {a, b}}
#define FX(opt, f, lo, hi, n, a, b) {opt, #f, offsetof(vt_train_opts, f), 'f', lo, hi, n, {a, b}}

static const range g_ranges[] = {
    I("--clip", clip_t, 1, VT_CLIP_MAX_T),
    I("--clip", crop, 1, VT_CLIP_MAX_SIDE),
    I("--stride", stride, 1, 64),
    I("--stride-jitter", stride_jitter, 0, 63),
    FX("--clip-fps", clip_fps, 1, 1000, 1, 0, 0), /* 0: off */
    I("--short-side", short_side, 1, 8192),
    I(NULL, jitter_min, 0, 8192), /* the scale jitter --short-side turns off (0) */
    I(NULL, jitter_max, 0, 8192),
    I("--flip", flip, 0, 1),
    F("--contrast", contrast_min, 0.01, 1),
    F("--brightness", brightness, 0, 1),
    IX("--precise-bn", precise_bn, 0, 64, 1, -1, 0), /* -1: resolve */
    FX("--head-lr-mult", head_lr_mult, 1e-6, 1e6, 1, 0, 0), /* 0: resolve */
    IX("--freeze", freeze, 0, 16, 2, -1, -2),              /* none; resolve */
    FX("--layer-decay", layer_decay, 1e-3, 1, 1, 0, 0),    /* 0: resolve */
    IX("--freeze-bn", freeze_bn, 0, 1, 1, -1, 0),          /* -1: resolve */
    F("--dropout", dropout, 0, 0.99),
    FX("--drop-path", drop_path, 0, 0.99, 1, -1, 0), /* -1: resolve */
    F("--mixup", mixup, 0, 100),
    F("--cutmix", cutmix, 0, 100),
    F("--mixup-switch-prob", mix_switch, 0, 1),
    I("--repeat-aug", repeat_aug, 1, 64),
    F("--random-erase", random_erase, 0, 1),
    IX("--patience", patience, 0, 1000000, 1, -1, 0), /* -1: resolve */
    IX("--min-clips", min_clips, 0, 1000000000, 1, -1, 0), /* -1: resolve */
    I("--epochs", epochs, 1, 100000),
    FX("--time-budget", time_budget, 1e-9, 1e12, 1, 0, 0), /* 0: none */
    I("--budget-once", budget_once, 0, 1),
    I("--batch", batch, 1, 65536),
    F("--lr", lr, 0, 100),
    F("--momentum", momentum, 0, 1),
    I("--nesterov", nesterov, 0, 1),
    FX("--wd", wd, 0, 10, 1, -1, 0), /* -1: resolve */
    FX("--warmup", warmup_epochs, 0, 1e6, 1, -1, 0), /* -1: resolve */
    I("--step-epochs", step_epochs, 1, 1000000),
    F("--gamma", gamma, 0, 1),
    FX("--label-smoothing", smoothing, 0, 0.99, 1, -1, 0), /* -1: resolve */
    F("--clip-norm", clip_norm, 0, 1e9),
    I("--init-strict", init_strict, 0, 1),
    I("--skip-nonfinite", skip_nonfinite, 0, 1),
    I("--workers", workers, 0, 256),
    I("--queue", queue, 1, 64),
    I("--threads", threads, 0, 4096), /* 0: cores / towers (app/device_opts.c's limit) */
    I("--sync-bn", sync_bn, 0, 1),
    I("--clips-per-video", clips_per_video, 1, 1000),
    FX("--seconds-per-clip", seconds_per_clip, 0.01, 1e6, 1, 0, 0), /* 0: a fixed count */
    F("--val-split", val_split, 0, 0.9),
    F("--frame-rate", frame_rate, 0.001, 10000),
    I("--fold", fold, 1, 9),
    I("--eval-every", eval_every, 1, 100000),
    I("--val-clips", val_clips, 1, 1000),
    I("--val-crops", val_crops, 1, 3), /* and not 2: vt_train_opts_check */
    I("--log-every", log_every, 1, 1000000000),
    I("--checkpoint-every", checkpoint_every, 0, 1000000000),
};

static const range *find(const char *opt) {
    for (size_t i = 0; i < VT_ARRAY_LEN(g_ranges); i++)
        if (g_ranges[i].opt && !strcmp(g_ranges[i].opt, opt))
            return &g_ranges[i];
    return NULL;
}

int vt_train_range_parse(vt_train_opts *o, const char *opt, const char *v) {
    const range *e = find(opt);
    VT_CHECK(e != NULL, "train option %s is not in the range table", opt);
    void *f = (char *)o + e->off;
    return e->kind == 'i' ? vt_parse_int(v, (long)e->lo, (long)e->hi, f)
                          : vt_parse_float(v, e->lo, e->hi, f);
}

const char *vt_train_range_text(const char *opt, char *buf, size_t n) {
    const range *e = find(opt);
    VT_CHECK(e != NULL, "train option %s is not in the range table", opt);
    snprintf(buf, n, "%s from %.10g to %.10g", e->kind == 'i' ? "an integer" : "a number", e->lo,
             e->hi);
    return buf;
}

static int bad(const char *src, const char *key, const char *what, const char *opt, char *err,
               size_t errlen) {
    vt_set_err(err, errlen, "%s: \"%s\" is %s (the check %s makes on the command line): a "
               "damaged or hand-edited configuration, or one from another vidtrain; fix the "
               "value (train --resume also takes %s, which overrides it)", src, key, what, opt,
               opt);
    return -1;
}

int vt_train_opts_check(const vt_train_opts *o, const char *src, char *err, size_t errlen) {
    char what[256];
    if (o->json_bad[0]) { /* vt_train_opts_from_json kept the default in its place */
        vt_set_err(err, errlen, "%s: \"%s\" has the wrong type for that key, or a string longer "
                   "than its option takes (config.json as vidtrain writes it has a string for "
                   "a name and a number for a number, each as the option took it): a "
                   "damaged or hand-edited configuration; fix the value or rerun", src, o->json_bad);
        return -1;
    }
    if (o->json_unknown[0]) { /* vt_train_opts_from_json read past it */
        vt_set_err(err, errlen, "%s: \"%.63s\" is not a key this vidtrain knows: an option of a "
                   "newer vidtrain, whose effect this one would leave out, or a misspelt edit; "
                   "run it with the vidtrain that wrote it, or remove the key", src,
                   o->json_unknown);
        return -1;
    }
    for (size_t i = 0; i < VT_ARRAY_LEN(g_ranges); i++) {
        const range *e = &g_ranges[i];
        const void *f = (const char *)o + e->off;
        double v = e->kind == 'i' ? *(const int *)f : *(const float *)f;
        int ok = isfinite(v) && v >= e->lo && v <= e->hi;
        for (int k = 0; k < e->nx; k++)
            ok |= v == e->x[k];
        if (!ok) {
            snprintf(what, sizeof what, "%.9g%s, outside %.9g..%.9g", v,
                     isinf(v) ? " (beyond a float's range)" : "", e->lo, e->hi);
            return bad(src, e->key, what, e->opt ? e->opt : "--short-side", err, errlen);
        }
    }
    if (o->val_crops == 2)
        return bad(src, "val_crops", "2, not 1 or 3", "--val-crops", err, errlen);
    for (int k = 0; k < o->nweights; k++)
        if (!(o->loss_weights[k] >= 0 && o->loss_weights[k] <= 1e6)) {
            snprintf(what, sizeof what, "%.9g at %d, outside 0..1e6",
                     (double)o->loss_weights[k], k);
            return bad(src, "loss_weights", what, "--loss-weights", err, errlen);
        }
    /* the named choices, through the parsers the command line uses */
    vt_slice_policy pol;
    vt_clip_cfg probe; /* vt_clip_set_norm checks a name by setting it here */
    char perr[256];
    const struct {
        const char *key, *opt, *v;
        int ok;
    } named[] = {
        {"optim", "--optim", o->optim, !o->optim[0] || vt_optim_kind_parse(o->optim) >= 0},
        {"sched", "--sched", o->sched, vt_sched_kind_parse(o->sched) >= 0},
        {"precision", "--precision", o->precision, vt_precision_parse(o->precision) >= 0},
        {"wd_exempt", "--wd-exempt", o->wd_exempt, !strcmp(o->wd_exempt, "on") ||
         !strcmp(o->wd_exempt, "off") || !strcmp(o->wd_exempt, "auto")},
        {"balance", "--balance", o->balance, vt_balance_parse(o->balance) >= 0},
        {"input_norm", "--input-norm", o->input_norm,
         !strcmp(o->input_norm, "auto") || vt_clip_set_norm(&probe, o->input_norm) == 0},
        {"list_format", "--list-format", o->list_format,
         !o->list_format[0] || vt_lists_format_parse(o->list_format) >= 0},
        {"tower_split", "--tower-split", o->tower_split,
         !o->tower_split[0] || vt_slice_policy_parse(&pol, o->tower_split, perr, sizeof perr) == 0},
        {"randaug", "--randaug", o->randaug,
         vt_randaug_parse(&probe.randaug, o->randaug, perr, sizeof perr) == 0},
        {"frame_cache", "--frame-cache", o->frame_cache,
         !o->frame_cache[0] || !strcmp(o->frame_cache, "auto") || vt_parse_bytes(o->frame_cache) >= 0},
    };
    for (size_t i = 0; i < VT_ARRAY_LEN(named); i++)
        if (!named[i].ok) {
            snprintf(what, sizeof what, "'%.200s', not a value it takes", named[i].v);
            return bad(src, named[i].key, what, named[i].opt, err, errlen);
        }
    return 0;
}
