/*
 * train_length.c: the default training length, which follows validation. With no
 * --epochs, no --time-budget and the default cosine schedule, a run is warm-up /
 * stable / decay (the "WSD" schedule): the linear warm-up of the fixed rule, then the
 * base learning rate held constant while validation goes on improving, and once it
 * has not improved for --patience evaluations (3 by default) a cosine decay to 0 over
 * a quarter as many epochs again, after which the run ends. The stable phase ends at
 * the latest at four fifths of the cap (VT_TRAIN_CAP x the fixed rule's epochs, so the
 * whole run stays within the cap). A validation improves when its video top-1 beats
 * every earlier one or its loss is more than 1% below every earlier one: either alone
 * misjudges a small validation set (top-1 moves in steps of a video; the loss of an
 * over-confident model rises while top-1 still climbs). docs/training-defaults.md has
 * the figures against the fixed rule.
 *
 * Exactness: every decision is taken at an epoch's end from the validation figures,
 * which are the same bits on every rank (evaluate.c merges the ranks' sums in rank
 * order), and rank 0's decision is broadcast all the same; the decision and the
 * figures it weighs live in the run state (run_ckpt.h), so --resume continues the same
 * run. --epochs and --time-budget never come here.
 */
/* It must never run a step or a validation itself: train_epoch.c hands it the figures. */

#include <math.h>
#include <stdio.h>

#include "app/train/train.h"
#include "base/common.h"
#include "pipeline/parallel/mpi.h"

/* A validation loss this much below the best so far counts as an improvement: less is
 * within what a small validation set's loss moves between two evaluations of the same
 * model quality. */
#define LOSS_MARGIN 0.01

/* A validation split smaller than this holds the rate twice as long: its top-1 moves in
 * steps of 2+ points and "no improvement in --patience validations" is mostly noise
 * there (issue 40: 13 videos decayed a held-out run at a third of the fixed rule). */
#define SMALL_VAL 50

/* The patience in force: doubled on a small validation split. */
static int patience_now(const vt_train *t) {
    return t->nval < SMALL_VAL ? 2 * t->o.patience : t->o.patience;
}

/* The first epoch at whose end the decay may begin: --min-clips' worth of clips drawn. */
static int floor_epochs(const vt_train *t) {
    const int64_t per = VT_MAX(t->epoch_clips, 1);
    return (int)VT_MIN((t->o.min_clips + per - 1) / per, (int64_t)t->o.epochs);
}

/* The decay's epochs after `stable` epochs at the base rate: a quarter as many (the
 * cool-down of a WSD schedule is commonly a fifth of the whole run). */
static int decay_epochs(int stable) {
    return VT_MAX(1, (stable + 3) / 4);
}

int vt_train_length_start(vt_train *t) {
    vt_train_opts *o = &t->o;
    if (o->patience <= 0)
        return 0;
    if (t->nval == 0) { /* nothing to follow: the fixed rule (the cap's quarter) */
        o->patience = 0;
        o->epochs = VT_MAX(1, o->epochs / VT_TRAIN_CAP);
        fprintf(t->out, "length: no validation set to follow: the fixed rule, %d epochs\n",
                o->epochs);
        return 1;
    }
    if (t->st.decay_epoch > 0)
        o->epochs = t->st.decay_epoch + decay_epochs(t->st.decay_epoch);
    fprintf(t->out, "length: follows validation: warm-up %g epochs, then lr %g until %d "
                    "validations (every %d epochs) bring no improvement, then a cosine decay "
                    "over a quarter as many epochs again; at most %d epochs (--epochs N or "
                    "--time-budget T for a fixed length)\n",
            (double)o->warmup_epochs, (double)o->lr, patience_now(t), o->eval_every, o->epochs);
    if (o->min_clips > 0)
        fprintf(t->out, "length: no decay before %d training clips (epoch %d; --min-clips)\n",
                o->min_clips, floor_epochs(t));
    if (t->nval < SMALL_VAL)
        fprintf(t->out, "length: the validation split holds %d videos, under %d: its top-1 moves "
                        "in steps of %.1f points, so the rate holds for %d validations, not %d "
                        "(a val/ folder or a larger --val-split judges better)\n",
                t->nval, SMALL_VAL, 100.0 / VT_MAX(t->nval, 1), patience_now(t), o->patience);
    if (t->st.decay_epoch > 0)
        fprintf(t->out, "length: decaying since epoch %d, to epoch %d\n", t->st.decay_epoch,
                o->epochs);
    return 0;
}

float vt_train_lr(const vt_train *t, int64_t step) {
    const int d = t->st.decay_epoch;
    if (t->o.patience <= 0 || d <= 0 || step < (int64_t)d * t->spe)
        return vt_sched_lr(&t->sc, step); /* fixed length, or warm-up then constant */
    vt_sched_cfg c = {.kind = VT_SCHED_COSINE, .base_lr = t->sc.base_lr,
                      .total_steps = (int64_t)decay_epochs(d) * t->spe};
    return vt_sched_lr(&c, step - (int64_t)d * t->spe);
}

void vt_train_length_epoch_end(vt_train *t, int64_t epoch, int do_val, double vacc,
                               double vloss, vt_run_state *next) {
    vt_train_opts *o = &t->o;
    if (o->patience <= 0 || next->decay_epoch > 0)
        return;
    const int done = (int)epoch + 1;
    if (do_val) {
        const int have_loss = isfinite(vloss) && vloss > 0;
        int better = next->len_loss <= 0 || vacc > next->len_acc ||
                     (have_loss && vloss < (1 - LOSS_MARGIN) * next->len_loss);
        if (vacc > next->len_acc)
            next->len_acc = vacc;
        if (have_loss && (next->len_loss <= 0 || vloss < next->len_loss))
            next->len_loss = vloss;
        next->stall = better ? 0 : next->stall + 1;
    }
    /* The stable phase ends by four fifths of the cap: its decay then ends within it. */
    const int warm = done >= o->warmup_epochs;
    const int at_cap = done >= o->epochs - o->epochs / 5;
    const int floor = done >= floor_epochs(t);
    int decay = at_cap || (warm && floor && do_val && next->stall >= patience_now(t));
    if (vt_mpi_size() > 1) /* the same bits everywhere already; rank 0's word is final */
        vt_mpi_bcast(&decay, sizeof decay, 0, "the default length's decay");
    if (!decay)
        return;
    next->decay_epoch = done;
    next->decay_why = at_cap ? 2 : 1;
    o->epochs = done + decay_epochs(done);
    if (at_cap)
        fprintf(t->out, "length: the stable phase's cap (%d epochs) reached: the learning rate "
                        "decays over epochs %d-%d\n", done, done + 1, o->epochs);
    else
        fprintf(t->out, "length: %d validations without improvement (best video top-1 %.1f%%, "
                        "loss %.4f): the learning rate decays over epochs %d-%d\n",
                next->stall, 100 * next->len_acc, next->len_loss, done + 1, o->epochs);
}

void vt_train_length_finish(const vt_train *t) {
    const vt_run_state *st = &t->st;
    if (t->o.patience <= 0 || st->decay_epoch <= 0 || st->epoch < t->o.epochs)
        return;
    if (st->decay_why == 2)
        fprintf(t->out, "length: ended at epoch %lld: the stable phase reached its cap (epoch %d, "
                        "four fifths of at most %d), then decayed; validation was still "
                        "improving (a longer run may do better: --epochs N)\n",
                (long long)st->epoch, st->decay_epoch, t->o.epochs);
    else
        fprintf(t->out, "length: ended at epoch %lld: validation stopped improving by epoch %d "
                        "(best video top-1 %.1f%%, loss %.4f; %d validations in a row without "
                        "either improving, past --min-clips' %d clips), then the rate decayed "
                        "over epochs %d-%lld\n",
                (long long)st->epoch, st->decay_epoch, 100 * st->len_acc, st->len_loss,
                st->stall, t->o.min_clips, st->decay_epoch + 1, (long long)st->epoch);
}
