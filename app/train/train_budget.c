/*
 * train_budget.c: --time-budget T, the number of epochs that fits T. Steps from epoch 0
 * on are timed on real batches (decode included; learning rate 0), the validation on a
 * few videos and a precise-BN pass, then the state before them is loaded back and the
 * loader restarts at epoch 0, batch 0: the run that follows is bit for bit the one
 * `--epochs E` gives. It must never leave a trace of the timing in the run: the towers,
 * the loader and the run folder are as they were (its scratch checkpoint is removed).
 *
 * Then the run keeps the budget while it runs: at each epoch's end the epochs are planned
 * again from what the steps, validations, precise BN and checkpoints took so far
 * (app/train/budget.h), so a machine that slows down or speeds up part-way (another job starts
 * or ends) still finishes on time. The cosine is bent at the re-plan to end at the new
 * last epoch (models/optim.h's anchor): the rate never jumps. Such a run is the one
 * `--epochs E` gives only as long as no re-plan changed E.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/train/train.h"
#include "base/common.h"

int vt_train_fit_budget(vt_train *t) {
    vt_loader *loader = t->loader;
    const int gpu = t->gpus > 0, nval = t->nval;
    FILE *out = t->out;
    vt_train_opts *o = &t->o;
    char path[2100], err[1024];
    snprintf(path, sizeof path, "%s/" VT_TRAIN_BUDGET_STATE, o->out);
    vt_run_state st0;
    memset(&st0, 0, sizeof st0);
    st0.best = -1;
    double t0 = vt_now();
    if (vt_run_save(path, t->towers, &st0, t->config_json, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --time-budget: %s: %s\n", path, err);
        return -1;
    }
    double t_save = vt_now() - t0;
    /* Steps. The first ones are not counted: the first pays for start-up (threads,
     * allocation, algorithm choice), and the loader decoded the next queue + workers
     * batches before or during it, off the clock (counting them made a 15-step epoch look
     * 11% faster than the run turned out). Then steps are timed until 2% of the budget
     * (at least 3 s) has passed, across epochs when they are short (epoch starts
     * included): a few steps alone misjudge a machine whose load comes and goes. */
    const double window = VT_MAX(3.0, 0.02 * (double)o->time_budget);
    const int64_t untimed = 1 + VT_MAX(o->queue, 0) + VT_MAX(o->workers, 0);
    int64_t steps = 0, clips = 0, clips_first = 0, epoch = 0;
    double t_steps = 0, t_first = 0, tb = vt_now();
    for (;;) {
        const vt_batch *b = vt_loader_next(loader);
        if (!b) { /* the end of an epoch: the next one, unless none ran a step */
            if (steps == 0 || epoch >= 1000)
                break;
            vt_loader_start_epoch(loader, ++epoch, 0);
            continue;
        }
        vt_step_stats ss;
        vt_towers_train_step(t->towers, b, 0.0f, &ss);
        double now = vt_now();
        if (steps++ < untimed) {
            t_first += now - tb;
            clips_first += b->n;
        } else {
            t_steps += now - tb;
            clips += b->n;
        }
        tb = now;
        if (t_steps > window)
            break;
    }
    /* per clip: an epoch's last batch may be short; a budget too short to time past the
     * untimed steps falls back on them */
    double per_clip = clips > 0 ? t_steps / (double)clips : t_first / (double)VT_MAX(clips_first, 1);
    int64_t nclips = vt_loader_num_samples(loader);
    /* Validation: a few videos, scaled to all of them. */
    double t_val = 0;
    if (nval > 0) {
        int sub = VT_MIN(nval, 4);
        vt_eval_opts eo;
        vt_train_val_opts(&eo, o);
        vt_evalproto *ep[VT_MAX_HEADS] = {0};
        vt_eval_counts cnt;
        double tv = vt_now();
        int rc = vt_run_evaluate(ep, &cnt, t->towers, t->val_ds, &t->heads, t->val_idx, sub,
                                 &eo, err, sizeof err);
        t_val = (vt_now() - tv) * nval / sub;
        for (int h = 0; h < VT_MAX_HEADS; h++)
            vt_evalproto_free(&ep[h]);
        if (rc != 0) {
            fprintf(stderr, "vidtrain train: validation: %s\n", err);
            return -1;
        }
    }
    /* Precise BN (train_bn.c): with every validation and after the last epoch. */
    double t_bn = vt_now();
    if (vt_train_precise_bn(t) != 0)
        return -1;
    t_bn = vt_now() - t_bn;
    vt_run_state back;
    if (vt_run_load(path, t->towers, 1, &back, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --time-budget: %s: %s\n", path, err);
        return -1;
    }
    unlink(path);
    vt_loader_start_epoch(loader, 0, 0);

    /* The largest E whose epochs (steps, a checkpoint each), validations and best
     * checkpoints fit what is left, with the defaults E implies (eval_every...). */
    /* 3% kept back: a machine's speed drifts over a run (2 of 6 runs of 300 s in
     * bench/bench-learn.sh went 2-4% over without it), and a budget is a deadline. */
    double left = 0.97 * (o->time_budget - (vt_now() - t->t_start));
    double epoch_s = (double)nclips * per_clip + t_save;
    int best = 1;
    vt_train_opts r = t->given;
    for (int e = 1; e <= 100000; e++) {
        r = t->given;
        r.epochs = e;
        vt_train_opts_resolve(&r, t->epoch_clips, gpu);
        int nv = nval > 0 ? (e + r.eval_every - 1) / r.eval_every : 0;
        if (e * epoch_s + nv * (t_val + t_save) + VT_MAX(nv, 1) * t_bn > left)
            break;
        best = e;
    }
    r = t->given;
    r.epochs = best;
    vt_train_opts_resolve(&r, t->epoch_clips, gpu);
    snprintf(r.dump, sizeof r.dump, "%s", o->dump);
    *o = r;
    t->bud = (vt_budget){.budget = o->time_budget, .eval_every = o->eval_every,
                         .has_val = nval > 0, .epoch_s = (double)nclips * per_clip,
                         .val_s = t_val, .bn_s = t_bn, .save_s = t_save};
    fprintf(out, "time budget %.0f s: %.0f s used so far; training %.1f clips/s (decode "
                 "included, %lld steps timed): an epoch %.1f s, validation %.1f s, precise BN "
                 "%.1f s, a checkpoint %.2f s: %d epochs\n",
            (double)o->time_budget, vt_now() - t->t_start, 1.0 / per_clip,
            (long long)(clips > 0 ? steps - untimed : steps), epoch_s, t_val, t_bn, t_save,
            o->epochs);
    if (left < epoch_s)
        fprintf(out, "  (one epoch does not fit the budget: it trains one anyway)\n");
    return 0;
}

void vt_train_budget_epoch_end(vt_train *t, int64_t epoch, const vt_train_epoch_stats *es) {
    vt_budget *b = &t->bud;
    if (!(b->budget > 0) || t->o.budget_once || t->resume[0] || t->stopped)
        return;
    /* This epoch's steps; a first epoch that began part-way (never here: no resume) would
     * misjudge a whole one. */
    b->epoch_s = vt_budget_epoch_estimate(b->epoch_s, vt_now() - es->t0);
    const int done = (int)epoch + 1, was = t->o.epochs;
    const double elapsed = vt_now() - t->t_start;
    int e = vt_budget_epochs(b, done, elapsed);
    t->st.plan_epochs = e;
    if (e == was)
        return;
    /* Bend the cosine where the next step starts: it covers the epochs left from the
     * share of its decay it has reached (a step schedule or a constant rate has nothing
     * to bend; one-cycle is stretched as it is). */
    if (t->sc.kind == VT_SCHED_COSINE && t->st.step > t->sc.warmup_steps) {
        t->sc.anchor_frac = vt_sched_cosine_frac(&t->sc, t->st.step);
        t->sc.anchor_step = t->st.step;
    }
    t->o.epochs = e;
    t->sc.total_steps = t->spe * e;
    t->st.plan_step = t->sc.anchor_step;
    t->st.plan_frac = t->sc.anchor_frac;
    fprintf(t->out, "time budget: %d epochs instead of %d (%.0f s used of %.0f; an epoch now "
                    "%.1f s)\n", e, was, elapsed, (double)b->budget, b->epoch_s);
}
