/*
 * budget.h: --time-budget's arithmetic, apart from the run so that a fake clock can drive
 * it (tests/test_budget.c). A budget is a promise about the wall clock: the run measures
 * what its parts take all along and, at every epoch's end, re-plans how many epochs fit
 * what is left (app/train/train_budget.c calls these; the learning rate's cosine is stretched or
 * shrunk over the epochs that remain, models/optim.h's anchor). It must never read a clock
 * itself: every time comes in as an argument.
 */
#ifndef VT_BUDGET_H
#define VT_BUDGET_H

/* The share of the budget the plan keeps back: a machine's speed also drifts within an
 * epoch, and a budget is a deadline (2 of 6 runs of 300 s went 2-4% over without it
 * before the re-planning; bench/bench-learn.sh). */
#define VT_BUDGET_MARGIN 0.03

typedef struct vt_budget {
    double budget;    /* seconds, from the command's start */
    int eval_every;   /* a validation every N epochs and after the last */
    int has_val;      /* 0: no validation set (precise BN still runs after the last epoch) */
    /* what the parts take, kept up to date by the run */
    double epoch_s;   /* one epoch's steps (decode included) */
    double val_s;     /* one validation */
    double bn_s;      /* one precise-BN pass (with every validation and after the last) */
    double save_s;    /* one checkpoint (last.safetensors at every epoch's end) */
} vt_budget;

/* The number of epochs the run should have in all, >= max(done, 1): the largest E whose
 * remaining work fits budget x (1 - VT_BUDGET_MARGIN) - elapsed. `done` epochs have run
 * their steps; when done > 0 the end of epoch `done` (its checkpoint, and its validation
 * and precise BN when due, or when it is the last) is still to come and is counted. A
 * budget already spent gives max(done, 1): the run ends as soon as it may. */
int vt_budget_epochs(const vt_budget *b, int done, double elapsed);

/* The epoch time the plan goes on: after an epoch whose steps took `measured` seconds,
 * the mean of it and the previous estimate (a machine whose load comes and goes, epoch
 * to epoch, is judged on both; a lasting change is followed within two epochs). */
double vt_budget_epoch_estimate(double previous, double measured);

#endif
