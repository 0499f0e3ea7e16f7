/*
 * train_balance.c: class imbalance in a training run (docs/balance.md) — the training
 * split's class counts printed (a warning above pipeline/data/balance.h's ratio),
 * --balance auto resolved into the mode config.json keeps, the class weights of
 * --balance loss (inverse frequency, or --class-weights) for the towers, and whether the
 * validation split is imbalanced, which makes best.safetensors the epoch of the best mean
 * class accuracy rather than top-1 (a model that drops a rare class can lead on top-1).
 *
 * The counts come from the dataset and the clips per video every rank already agrees
 * on (vt_dist_dataset_sync, train_clips.c), so every rank resolves the same mode and the
 * same weights. It must never open a video or touch the towers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/dist.h"
#include "app/train/train.h"
#include "base/common.h"
#include "pipeline/data/balance.h"

/* Head 0's samples per class in videos idx[0..n) of ds (a video counting its clips per
 * epoch when clips is given). */
static void class_counts(int64_t *count, const vt_dataset *ds, const int32_t *idx, int n,
                         const int32_t *clips) {
    memset(count, 0, sizeof *count * (size_t)ds->heads[0].nclasses);
    for (int i = 0; i < n; i++) {
        const vt_dataset_video *v = &ds->videos[idx[i]];
        if (v->labeled && v->label[0] >= 0 && v->label[0] < ds->heads[0].nclasses)
            count[v->label[0]] += clips ? clips[idx[i]] : 1;
    }
}

/* --class-weights "W,W,...": k non-negative numbers, at least one above 0. 0, or -1. */
static int parse_weights(float *w, int k, const char *s, char *err, size_t errlen) {
    const char *p = s;
    int n = 0, pos = 0;
    while (*p) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !(x >= 0) || x > 1e6 || (*end && *end != ',')) {
            vt_set_err(err, errlen, "'%s': weight %d is not a number in [0, 1e6]", s, n + 1);
            return -1;
        }
        if (n < k)
            w[n] = (float)x;
        n++;
        pos += x > 0;
        p = *end ? end + 1 : end;
    }
    if (n != k || (p > s && p[-1] == ',')) {
        vt_set_err(err, errlen, "'%s' has %d weights for %d classes (one per class, in the "
                   "order `vidtrain scan` lists them)", s, n, k);
        return -1;
    }
    if (!pos) {
        vt_set_err(err, errlen, "'%s': every weight is 0", s);
        return -1;
    }
    return 0;
}

/* The class line and the mode: --balance auto is resolved here. 0, or 2 (printed). */
static int resolve_mode(vt_train *t, const int64_t *count, int k) {
    vt_train_opts *o = &t->o;
    const vt_dataset *ds = t->ds;
    double ratio = vt_balance_print_counts(t->out, "  ", "training class counts", count,
                                           (const char *const *)ds->heads[0].classes, k);
    /* a class only val or test has (a folder there that train lacks): its output never
     * learns, and each of its videos is a sure error in every figure */
    char none[512] = "";
    int nnone = 0;
    for (int c = 0; c < k; c++)
        if (count[c] == 0 && nnone++ < 8)
            snprintf(none + strlen(none), sizeof none - strlen(none), " %s",
                     ds->heads[0].classes[c]);
    if (nnone && vt_dist_lead())
        fprintf(stderr, "vidtrain train: warning: %d class(es) without a training video:%s%s "
                "(in %s's val or test only, or in --labels): the model cannot learn %s, and "
                "%s videos count as errors; add training videos or remove those folders\n",
                nnone, none, nnone > 8 ? " ..." : "", o->data, nnone > 1 ? "them" : "it",
                nnone > 1 ? "their" : "its");
    int mode = vt_balance_parse(o->balance);
    if (mode < 0) { /* a hand-edited config.json */
        fprintf(stderr, "vidtrain train: --balance '%s': none, sampler, loss, logit or auto\n",
                o->balance);
        return 2;
    }
    if (o->class_weights[0] && mode == VT_BALANCE_AUTO)
        mode = VT_BALANCE_LOSS;
    if (o->class_weights[0] && mode != VT_BALANCE_LOSS) {
        fprintf(stderr, "vidtrain train: --class-weights weights the loss: it goes with "
                        "--balance loss, not %s\n", o->balance);
        return 2;
    }
    if (mode == VT_BALANCE_AUTO) {
        mode = vt_balance_auto(count, k);
        t->balance_auto = ratio > VT_BALANCE_RATIO; /* say what auto chose and why */
    }
    snprintf(o->balance, sizeof o->balance, "%s", vt_balance_name((vt_balance_mode)mode));
    return 0;
}

int vt_train_balance(vt_train *t) {
    vt_train_opts *o = &t->o;
    const vt_dataset *ds = t->ds;
    free(t->class_weight);
    free(t->logit_adjust);
    t->class_weight = t->logit_adjust = NULL;
    t->val_by_class = 0;
    t->balance_auto = 0;
    if (ds->heads[0].loss != VT_LOSS_SOFTMAX_CE) { /* per-class figures need one class */
        if (strcmp(o->balance, "auto") && strcmp(o->balance, "none")) {
            fprintf(stderr, "vidtrain train: --balance %s needs a single-label first head; "
                            "head %s is multi-label\n", o->balance, ds->heads[0].name);
            return 2;
        }
        snprintf(o->balance, sizeof o->balance, "none");
        return 0;
    }
    const int k = ds->heads[0].nclasses;
    int64_t *count = vt_calloc((size_t)k, sizeof *count);
    class_counts(count, ds, t->train_idx, t->ntrain, t->video_clips);
    int rc = resolve_mode(t, count, k);
    if (rc == 0 && !strcmp(o->balance, "loss")) {
        char err[600];
        t->class_weight = vt_malloc(sizeof(float) * (size_t)k);
        if (o->class_weights[0] &&
            parse_weights(t->class_weight, k, o->class_weights, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain train: --class-weights %s\n", err);
            rc = 2;
        } else if (!o->class_weights[0]) {
            vt_balance_weights(t->class_weight, count, k);
        }
    }
    if (rc == 0 && !strcmp(o->balance, "logit")) {
        t->logit_adjust = vt_malloc(sizeof(float) * (size_t)k);
        vt_balance_log_priors(t->logit_adjust, count, k);
    }
    if (rc == 0) {
        fprintf(t->out, "  balance: %s", o->balance);
        if (t->logit_adjust) {
            fprintf(t->out, ", logit adjustments (log class shares):");
            for (int c = 0; c < k && c < 16; c++)
                fprintf(t->out, " %.3g", (double)t->logit_adjust[c]);
            fprintf(t->out, "%s", k > 16 ? " ..." : "");
        }
        if (t->class_weight) {
            /* by name: weights given in class order are checked against the names here */
            fprintf(t->out, ", class weights%s:", o->class_weights[0] ? " (given)" : "");
            for (int c = 0; c < k && c < 16; c++)
                fprintf(t->out, "%s %s %.3g", c ? "," : "", t->ds->heads[0].classes[c],
                        (double)t->class_weight[c]);
            fprintf(t->out, "%s", k > 16 ? " ..." : "");
        }
        if (t->balance_auto && !strcmp(o->balance, "none"))
            fprintf(t->out, " (auto: no mode has beaten none in a measurement yet; "
                            "--balance sampler or loss evens the classes out)");
        else if (t->balance_auto) /* VT_BALANCE_DEFAULT, measured in docs/balance.md */
            fprintf(t->out, " (auto: the training classes span x%.1f, above x%.1f; "
                            "--balance none trains on them as they come)",
                    vt_balance_ratio(count, k), VT_BALANCE_RATIO);
        fprintf(t->out, "\n");
    }
    /* validation's classes: best.safetensors on mean class accuracy when they are uneven */
    const vt_dataset *vds = t->val_ds;
    if (rc == 0 && t->nval > 0 && vds->heads[0].loss == VT_LOSS_SOFTMAX_CE &&
        vds->heads[0].nclasses == k) {
        class_counts(count, vds, t->val_idx, t->nval, NULL);
        double vr = vt_balance_ratio(count, k);
        t->val_by_class = vr > VT_BALANCE_RATIO;
        if (t->val_by_class)
            fprintf(t->out, "  validation classes imbalanced (x%.1f): best.safetensors is "
                            "chosen by mean class accuracy, not top-1\n", vr);
    }
    free(count);
    if (rc != 0) {
        free(t->class_weight);
        t->class_weight = NULL;
    }
    return rc;
}
