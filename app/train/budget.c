/*
 * budget.c: --time-budget's arithmetic (budget.h). Pure functions of their arguments.
 */
#include "app/train/budget.h"

#include "base/common.h"

/* Validations among epochs lo..e (1-based, inclusive), e the last: every eval_every-th
 * and the last. */
static int validations(int lo, int e, int every) {
    if (e < lo)
        return 0;
    every = VT_MAX(every, 1);
    int n = e / every - (lo - 1) / every;
    return n + (e % every != 0);
}

int vt_budget_epochs(const vt_budget *b, int done, double elapsed) {
    const double left = b->budget * (1.0 - VT_BUDGET_MARGIN) - elapsed;
    /* the epochs whose end is still to come: done's (when it ran) and every later one */
    const int lo = VT_MAX(done, 1), first = VT_MAX(done, 1);
    int best = first;
    for (int e = first; e <= 100000; e++) {
        int nv = b->has_val ? validations(lo, e, b->eval_every) : 0;
        int nbn = b->has_val ? nv : 1; /* precise BN with each validation, else at the end */
        double cost = (double)(e - done) * b->epoch_s + (double)(e - lo + 1) * b->save_s +
                      nv * b->val_s + nbn * b->bn_s;
        if (cost > left)
            break;
        best = e;
    }
    return best;
}

double vt_budget_epoch_estimate(double previous, double measured) {
    return previous > 0 ? 0.5 * (previous + measured) : measured;
}
