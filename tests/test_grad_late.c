/*
 * test_grad_late.c: the gradient norm read a step late (issue 45 item 3; models/optim.h's
 * gate, tower.h vt_towers_train_issue). The clip and the skip are decided where the
 * gradients are and the host reads the norm after the next step is issued; nothing of a
 * run may change by one bit.
 *   - towers: the same batches — one with a NaN clip, a non-finite step — through
 *     vt_towers_train_step (each step's norm waited for, as before) and through
 *     vt_towers_train_issue, each step's figures read after the next one is issued; with
 *     clipping active (some norms past clip_norm), SGD with momentum and AdamW (its bias
 *     correction counts the steps taken: one skipped among them), one tower and two with
 *     sync-BN (read late), two without it (their running statistics' average must know
 *     the skip: read at once). The outside truth is the synchronous run: every step's
 *     norm and skip, and at the end parameters, BN buffers, optimizer state and step
 *     count, bit for bit (late_equals_sync);
 *   - the host's waits (models/backend_waits.h, VT_HOST_WAITS), counted from the code on a
 *     CPU tower: a step read late waits once a pass (synchronize) and never for the norm
 *     (sumsq 0); one read at once waits once more (host_waits);
 *   - the command: `vidtrain train --clip-norm 20 --skip-nonfinite --lr 10` clips some
 *     steps and skips others (counted from metrics.jsonl), and a run stopped at
 *     --max-steps between skipped steps and resumed ends with the bits of the run that
 *     went through (checkpoints: every tensor, the state but its timings; metrics
 *     without timings): a checkpoint never holds a step unread. With VT_BASE_BIN naming
 *     another vidtrain (the coordinator's check: main's binary, from before the gate),
 *     the same runs — SGD and AdamW, clipping and skipping, one that stops at a
 *     non-finite step — give that binary's checkpoints, metrics and output
 *     (command_runs).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/backend_waits.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NCLASS 3
#define B 8
#define NSTEP 5
#define CLIP 0.5f /* the tiny net's first norms are ~1-3 (measured): most steps clip */

static void batch_make(vt_batch *b, uint64_t seed, int nan_clip) {
    memset(b, 0, sizeof *b);
    b->n = b->capacity = B;
    b->t = 4;
    b->h = 16;
    b->w = 16;
    b->nheads = 1;
    b->head_classes[0] = NCLASS;
    b->head_loss[0] = VT_LOSS_SOFTMAX_CE;
    int64_t cf = vt_batch_clip_floats(b);
    b->x = vt_malloc((size_t)(cf * B) * sizeof(float));
    b->label[0] = vt_malloc((size_t)B * sizeof(int32_t));
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < cf * B; i++)
        b->x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < B; i++)
        b->label[0][i] = (int32_t)vt_rng_below(&r, NCLASS);
    if (nan_clip >= 0)
        for (int64_t i = 0; i < cf; i++)
            b->x[nan_clip * cf + i] = NAN;
}

static vt_towers *towers_new(vt_opt_kind kind, int ntowers, int sync_bn) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    vt_net_cfg_default(&cfg.net, "tiny", NCLASS, 4, 16, 16);
    vt_optim_cfg_default(&cfg.optim, kind);
    cfg.optim.clip_norm = CLIP;
    cfg.seed = 5;
    cfg.batch = B;
    cfg.sync_bn = sync_bn;
    cfg.bucket_mb = 0;
    char err[512];
    vt_slice_policy_parse(&cfg.policy, ntowers == 2 ? "manual:4,4" : "equal", err, sizeof err);
    cfg.devices.n = ntowers;
    for (int i = 0; i < ntowers; i++) {
        vt_device *d = &cfg.devices.dev[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "cpu%d", i);
        snprintf(d->backend, sizeof d->backend, "cpu");
        d->ordinal = i;
        d->threads = 1;
        d->slowdown = 1;
    }
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t != NULL, "init: %s", err);
    return t;
}

/* Replica r's parameters, buffers and optimizer state in one host array (CPU towers:
 * host memory), and its step count. */
static float *state_of(vt_towers *t, int r, int64_t *n, int64_t *step) {
    vt_net *net = vt_towers_net(t, r);
    vt_optim *o = vt_towers_optim(t, r);
    int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net), ns = vt_optim_state_len(o);
    *n = np + nb + ns;
    float *s = vt_malloc((size_t)VT_MAX(*n, 1) * sizeof(float));
    memcpy(s, vt_net_params(net), (size_t)np * sizeof(float));
    memcpy(s + np, vt_net_buffers(net), (size_t)nb * sizeof(float));
    memcpy(s + np + nb, vt_optim_state(o), (size_t)ns * sizeof(float));
    *step = vt_optim_step_count(o);
    return s;
}

static void late_equals_sync(const char *what, vt_opt_kind kind, int ntowers, int sync_bn,
                             int want_late) {
    vt_batch b[NSTEP];
    for (int k = 0; k < NSTEP; k++)
        batch_make(&b[k], 11 + (uint64_t)k, k == 2 ? 5 : -1); /* step 3: a NaN clip */
    vt_towers *ts = towers_new(kind, ntowers, sync_bn), *tl = towers_new(kind, ntowers, sync_bn);
    if (!ts || !tl)
        return;
    vt_step_stats s[NSTEP], l[NSTEP];
    int late = 0, clipped = 0;
    for (int k = 0; k < NSTEP; k++) {
        vt_towers_train_step(ts, &b[k], 0.1f, &s[k]);
        vt_towers_train_issue(tl, &b[k], 0.1f, &l[k]);
        late += l[k].late;
        if (k > 0) /* the step before: read by this one's first pass */
            vt_towers_train_read(tl, &l[k - 1]);
    }
    vt_towers_train_read(tl, &l[NSTEP - 1]); /* the last: a wait */
    for (int k = 0; k < NSTEP; k++) {
        TCHECK(!s[k].late && !l[k].late, "%s: step %d still late after its read", what, k + 1);
        TCHECK(s[k].skipped == (k == 2), "%s: step %d skipped=%d (norm %g)", what, k + 1,
               s[k].skipped, (double)s[k].grad_norm);
        TCHECK(l[k].skipped == s[k].skipped && !memcmp(&l[k].grad_norm, &s[k].grad_norm,
                                                       sizeof(float)),
               "%s: step %d read late: norm %.9g skipped %d, at once: %.9g %d", what, k + 1,
               (double)l[k].grad_norm, l[k].skipped, (double)s[k].grad_norm, s[k].skipped);
        clipped += s[k].grad_norm > CLIP;
    }
    TCHECK(late == (want_late ? NSTEP : 0), "%s: %d of %d steps issued late, want %d", what, late,
           NSTEP, want_late ? NSTEP : 0);
    TCHECK(clipped >= 2, "%s: only %d steps clipped (the test needs clipping)", what, clipped);
    int64_t ns, nl, ss, sl;
    float *xs = state_of(ts, 0, &ns, &ss), *xl = state_of(tl, 0, &nl, &sl);
    TCHECK(ss == NSTEP - 1 && sl == ss, "%s: step counts %lld (at once) and %lld (late), want %d",
           what, (long long)ss, (long long)sl, NSTEP - 1);
    TCHECK(ns == nl && !memcmp(xs, xl, (size_t)ns * sizeof(float)),
           "%s: the state read late is not the bits of the state read at once", what);
    int finite = 1;
    for (int64_t i = 0; i < ns; i++)
        finite &= isfinite(xs[i]) != 0;
    TCHECK(finite, "%s: a non-finite value in the state after the skipped step", what);
    printf("%s: %d steps (%d clipped, step 3 skipped), %s, the same bits\n", what, NSTEP,
           clipped, want_late ? "read late" : "read at once");
    free(xs);
    free(xl);
    vt_towers_free(&ts);
    vt_towers_free(&tl);
    for (int k = 0; k < NSTEP; k++) {
        free(b[k].x);
        free(b[k].label[0]);
    }
}

/* Waits of each kind between two readings of be's counts. */
static void waits_since(vt_backend *be, const int64_t before[VT_WAIT_KINDS],
                        int64_t d[VT_WAIT_KINDS]) {
    int64_t now[VT_WAIT_KINDS];
    TCHECK(vt_backend_waits(be, now, NULL) == 0, "the backend counts no waits");
    for (int k = 0; k < VT_WAIT_KINDS; k++)
        d[k] = now[k] - before[k];
}

static void host_waits(void) {
    setenv("VT_HOST_WAITS", "1", 1);
    vt_towers *t = towers_new(VT_OPT_SGD, 1, 1);
    unsetenv("VT_HOST_WAITS");
    if (!t)
        return;
    vt_backend *be = vt_towers_backend(t, 0); /* between steps: nothing in flight */
    vt_batch b;
    batch_make(&b, 3, -1);
    vt_step_stats st, prev;
    vt_towers_train_step(t, &b, 0.01f, &st); /* the first step sizes the scratch */
    int64_t c0[VT_WAIT_KINDS], late[VT_WAIT_KINDS], now[VT_WAIT_KINDS];
    const int K = 3;
    vt_backend_waits(be, c0, NULL);
    for (int k = 0; k < K; k++) {
        vt_towers_train_issue(t, &b, 0.01f, &st);
        if (k > 0)
            vt_towers_train_read(t, &prev);
        prev = st;
    }
    waits_since(be, c0, late);
    vt_towers_train_read(t, &prev);
    vt_backend_waits(be, c0, NULL);
    for (int k = 0; k < K; k++)
        vt_towers_train_step(t, &b, 0.01f, &st);
    waits_since(be, c0, now);
    /* A CPU tower, one pass a step, read late: the pass's wait (synchronize); to_host:
     * the BN buffers saved before the forward and checked for NaN after it (a CPU tower
     * keeps them on the host, where a GPU copies on the device and reads a copy queued
     * behind the forward), and the count of each of the tiny net's 4 batch norms (exact
     * sums, the CPU default: net_exact.c brings it back even with one tower); no upload
     * (the batch is host memory); no norm (sumsq). Read at once: one synchronize more,
     * the gate's. Before the gate both had a sumsq each. */
    printf("host waits a step (CPU tower, one pass): read late to_host %.2f, synchronize %.2f, "
           "sumsq %.2f, upload_wait %.2f; read at once to_host %.2f, synchronize %.2f, sumsq "
           "%.2f\n", (double)late[0] / K, (double)late[1] / K, (double)late[2] / K,
           (double)late[3] / K, (double)now[0] / K, (double)now[1] / K, (double)now[2] / K);
    const int64_t want_late[VT_WAIT_KINDS] = {(2 + 4) * K, 1 * K, 0, 0};
    const int64_t want_now[VT_WAIT_KINDS] = {(2 + 4) * K, 2 * K, 0, 0};
    for (int k = 0; k < VT_WAIT_KINDS; k++) {
        TCHECK(late[k] == want_late[k], "read late: %lld waits of kind %d in %d steps, want %lld",
               (long long)late[k], k, K, (long long)want_late[k]);
        TCHECK(now[k] == want_now[k], "read at once: %lld waits of kind %d in %d steps, want %lld",
               (long long)now[k], k, K, (long long)want_now[k]);
    }
    free(b.x);
    free(b.label[0]);
    vt_towers_free(&t);
}

int main(void) {
    late_equals_sync("sgd, 1 tower", VT_OPT_SGD, 1, 1, 1);
    late_equals_sync("adamw, 1 tower", VT_OPT_ADAMW, 1, 1, 1);
    late_equals_sync("sgd, 2 towers, sync-BN", VT_OPT_SGD, 2, 1, 1);
    late_equals_sync("adamw, 2 towers, no sync-BN", VT_OPT_ADAMW, 2, 0, 0);
    host_waits();
    return vt_test_done("test_grad_late");
}
