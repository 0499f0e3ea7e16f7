/*
 * test_nonfinite_towers.c: a step whose loss or gradient is not finite is skipped by
 * every tower alike and leaves no trace (issue 41; tower.h vt_step_stats.skipped). The
 * outside truth is the run without that step: steps [b0, bad, b2] must end with the
 * bits of steps [b0, b2] — parameters, BN buffers, the optimizer's state and step count —
 * on every replica, on one tower and on two. The bad batch has one NaN clip, which lands
 * on tower 1 only of a 4:4 split: tower 0's loss is finite, so the towers agree only if
 * the decision is reduced. With exact sums (the CPU default) a NaN gradient saturates to
 * a finite number (models/xsum.h), so the loss flag alone can catch it there; with float
 * sums (exact_off) the reduced gradient norm is NaN. Both are run.
 *
 * A diverging run (lr 10, sync-BN) is the same bits on one tower and two at every step,
 * up to and past the first non-finite one, and that step is skipped by both. The outside
 * truth is the one-tower run. Exact sums used to clamp at their range in an order that
 * depended on the split: at step 13 the two parted with finite gradients (a batch-norm
 * sum past 2^54), before any step was found non-finite. Now a term past the range is
 * poison and the sum NaN on any split (models/xsum_arith.h).
 */
#include <math.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/testutil.h"
#include "tests/towerutil.h"

#define NCLASS 3
#define B 8

static void batch_make(vt_batch *b, uint64_t seed, int nan_clip) {
    vt_test_batch_make(b, B, 4, 16, 16, NCLASS, seed);
    const int64_t cf = vt_batch_clip_floats(b);
    if (nan_clip >= 0)
        for (int64_t i = 0; i < cf; i++)
            b->x[nan_clip * cf + i] = NAN;
}

static vt_towers *towers_new(const char *model, int ntowers, int exact_off, int sync_bn) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    vt_net_cfg_default(&cfg.net, model, NCLASS, 4, 16, 16);
    vt_optim_cfg_default(&cfg.optim, VT_OPT_SGD);
    cfg.optim.momentum = 0.9f;
    cfg.seed = 99;
    cfg.batch = B;
    cfg.sync_bn = sync_bn;
    cfg.exact_off = exact_off;
    cfg.bucket_mb = 0;
    char err[512];
    vt_slice_policy_parse(&cfg.policy, ntowers == 2 ? "manual:4,4" : "equal", err, sizeof err);
    vt_test_cpu_towers(&cfg, ntowers);
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t != NULL, "init: %s", err);
    return t;
}

/* Steps over batches[0..nb) (lr 0.05); returns replica 0's state; checks that every
 * replica holds the same bits and that step k was skipped exactly when want_skip[k]. */
static float *train(const char *what, const char *model, int ntowers, int exact_off, int sync_bn,
                    vt_batch *const *batches, const int *want_skip, int nbatch, int64_t *n,
                    int64_t *step) {
    vt_towers *t = towers_new(model, ntowers, exact_off, sync_bn);
    if (!t)
        return NULL;
    for (int k = 0; k < nbatch; k++) {
        vt_step_stats st;
        vt_towers_train_step(t, batches[k], 0.05f, &st);
        TCHECK(st.skipped == want_skip[k], "%s: step %d skipped=%d, want %d (loss %g, norm %g)",
               what, k + 1, st.skipped, want_skip[k], st.loss, (double)st.grad_norm);
    }
    float *s0 = vt_test_replica_state(t, 0, n, step);
    for (int r = 1; r < vt_towers_count(t); r++) {
        int64_t nr, sr;
        float *s = vt_test_replica_state(t, r, &nr, &sr);
        TCHECK(nr == *n && sr == *step && !memcmp(s, s0, (size_t)*n * sizeof(float)),
               "%s: replica %d differs from replica 0", what, r);
        free(s);
    }
    vt_towers_free(&t);
    return s0;
}

static void family(const char *model, int exact_off, int sync_bn) {
    vt_batch b0, bad, b2;
    batch_make(&b0, 1, -1);
    batch_make(&bad, 2, 6); /* clip 6: tower 1's half of a 4:4 split */
    batch_make(&b2, 3, -1);
    vt_batch *with[3] = {&b0, &bad, &b2}, *without[2] = {&b0, &b2};
    const int skip_with[3] = {0, 1, 0}, skip_without[2] = {0, 0};
    char what[128];
    int64_t n_ref, s_ref;
    snprintf(what, sizeof what, "%s%s%s, 1 tower, no bad step", model,
             exact_off ? " float sums" : "", sync_bn ? " sync-BN" : "");
    float *ref = train(what, model, 1, exact_off, sync_bn, without, skip_without, 2, &n_ref, &s_ref);
    for (int nt = 1; nt <= 2 && ref; nt++) {
        int64_t n, s;
        snprintf(what, sizeof what, "%s%s%s, %d tower(s), bad step skipped", model,
                 exact_off ? " float sums" : "", sync_bn ? " sync-BN" : "", nt);
        float *got = train(what, model, nt, exact_off, sync_bn, with, skip_with, 3, &n, &s);
        if (!got)
            continue;
        TCHECK(s == s_ref && s == 2, "%s: optimizer step count %lld, want 2", what, (long long)s);
        int finite = 1;
        for (int64_t i = 0; i < n; i++)
            finite &= isfinite(got[i]) != 0;
        TCHECK(finite, "%s: a non-finite value in the state after the skipped step", what);
        /* Two towers equal one device bit for bit with exact sums (docs/design.md §3.1);
         * with float sums the towers sum in another order: equal to rounding (1e-5 of
         * these O(0.1) weights is ~100 float ulps, far below a step's change). */
        if (nt == 1 || !exact_off) {
            TCHECK(n == n_ref && !memcmp(got, ref, (size_t)n * sizeof(float)),
                   "%s: state is not the bits of the run without the bad step", what);
        } else {
            double d = n == n_ref ? vt_max_abs_diff(got, ref, n) : INFINITY;
            TCHECK(d < 1e-5, "%s: state differs from the run without the bad step by %g", what, d);
        }
        free(got);
    }
    free(ref);
    vt_batch *all[3] = {&b0, &bad, &b2};
    for (int k = 0; k < 3; k++)
        vt_test_batch_free(all[k]);
}

static void diverge(void) {
    vt_towers *t1 = towers_new("tiny", 1, 0, 1), *t2 = towers_new("tiny", 2, 0, 1);
    int first_skip = 0, parted = 0;
    for (int k = 1; k <= 20 && t1 && t2 && !parted; k++) {
        vt_batch b;
        batch_make(&b, 99 + (uint64_t)k, -1);
        vt_step_stats s1, s2;
        vt_towers_train_step(t1, &b, 10.0f, &s1);
        vt_towers_train_step(t2, &b, 10.0f, &s2);
        int64_t n1, n2, st1, st2;
        float *a = vt_test_replica_state(t1, 0, &n1, &st1);
        float *c = vt_test_replica_state(t2, 0, &n2, &st2);
        parted = n1 != n2 || st1 != st2 || memcmp(a, c, (size_t)n1 * sizeof(float)) ||
                 s1.skipped != s2.skipped;
        TCHECK(!parted, "lr 10, step %d: one tower and two part (loss %g / %g, norm %g / %g, "
               "skipped %d / %d)", k, s1.loss, s2.loss, (double)s1.grad_norm,
               (double)s2.grad_norm, s1.skipped, s2.skipped);
        if (s1.skipped && !first_skip)
            first_skip = k;
        free(a);
        free(c);
        vt_test_batch_free(&b);
    }
    printf("lr 10: one tower and two %s; first non-finite step %d\n",
           parted ? "parted" : "the same bits through step 20", first_skip);
    TCHECK(first_skip > 0, "lr 10 never reached a non-finite step in 20 (the test needs one)");
    vt_towers_free(&t1);
    vt_towers_free(&t2);
}

int main(void) {
    diverge();                 /* past the exact sums' range: the same on any split */
    family("tiny_nobn", 0, 0); /* exact sums: the loss flag decides */
    family("tiny_nobn", 1, 0); /* float sums: the reduced norm is NaN */
    family("tiny", 0, 1);      /* BN buffers put back; sync-BN statistics of a NaN clip */
    return vt_test_done("test_nonfinite_towers");
}
