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
#include "tests/jsonlines.h"
#include "tests/towerutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NCLASS 3
#define B 8
#define NSTEP 5
#define CLIP 0.5f /* the tiny net's first norms are ~1-3 (measured): most steps clip */

static void batch_make(vt_batch *b, uint64_t seed, int nan_clip) {
    vt_test_batch_make(b, B, 4, 16, 16, NCLASS, seed);
    const int64_t cf = vt_batch_clip_floats(b);
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
    vt_test_cpu_towers(&cfg, ntowers);
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t != NULL, "init: %s", err);
    return t;
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
    float *xs = vt_test_replica_state(ts, 0, &ns, &ss);
    float *xl = vt_test_replica_state(tl, 0, &nl, &sl);
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
    for (int k = 0; k < NSTEP; k++)
        vt_test_batch_free(&b[k]);
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
    vt_test_batch_free(&b);
    vt_towers_free(&t);
}

/* ---- the command (command_runs) ---- */

/* run's metrics.jsonl, its lines parsed (jsonlines.h; a line that is not JSON fails). */
static cJSON **metrics_lines(const char *run, int *n) {
    char p[4400];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    return vt_read_lines(p, n);
}

/* Counts of steps with "skipped":true and with a grad_norm past `clip` in run's metrics. */
static void metrics_counts(const char *run, float clip, int *skipped, int *clipped) {
    int n;
    cJSON **l = metrics_lines(run, &n);
    *skipped = *clipped = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(l[i], "kind");
        if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "step")) {
            *skipped += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l[i], "skipped"));
            const cJSON *g = cJSON_GetObjectItemCaseSensitive(l[i], "grad_norm");
            *clipped += cJSON_IsNumber(g) && g->valuedouble > clip;
        }
    }
    vt_free_lines(l, n);
}

/* run a's and run b's checkpoint `file`: every tensor the same bits (the optimizer's state
 * and int64 counters included). */
static void same_ckpt(const char *a, const char *b, const char *file, const char *what) {
    char pa[4400], pb[4400];
    snprintf(pa, sizeof pa, "%s/%s", a, file);
    snprintf(pb, sizeof pb, "%s/%s", b, file);
    vt_test_ckpt_cmp c = {0, 0, 0};
    double d = vt_test_ckpt_diff(pa, pb, "", &c);
    TCHECK(d == 0 && c.exact && c.bitwise, "%s: %s differs from %s (max rel %g, exact %d, "
           "bitwise %d)", what, pb, pa, d, c.exact, c.bitwise);
}

/* a's and b's metrics.jsonl: the same lines once their timings are left out. */
static void same_metrics(const char *a, const char *b, const char *what) {
    static const char *const timed[] = {"clips_per_s", "data_wait", "seconds", "step_s",
                                        "wait_s", NULL};
    int na, nb, same = 0;
    cJSON **la = metrics_lines(a, &na), **lb = metrics_lines(b, &nb);
    for (int i = 0; na == nb && i < na; i++) {
        for (int k = 0; timed[k]; k++) {
            cJSON_DeleteItemFromObjectCaseSensitive(la[i], timed[k]);
            cJSON_DeleteItemFromObjectCaseSensitive(lb[i], timed[k]);
        }
        same += cJSON_Compare(la[i], lb[i], 1) != 0;
    }
    TCHECK(na > 0 && na == nb && same == na, "%s: %s/metrics.jsonl and %s/metrics.jsonl differ "
           "beyond their timings (%d and %d lines, %d the same)", what, a, b, na, nb, same);
    vt_free_lines(la, na);
    vt_free_lines(lb, nb);
}

/* `vidtrain train` with clipping (--clip-norm 20), 18 steps (3 epochs of 6) that clip and
 * skip (--skip-nonfinite), measured: SGD at --lr 10 clips 2 and skips 13 (steps 6 to 18),
 * AdamW at --lr 3 clips 3 and skips step 16 (its bias correction then counts 17 steps
 * taken of 18). The run stopped at step 8 (for SGD, among its skipped steps) and resumed
 * ends with the straight run's bits: a checkpoint written at --max-steps holds that step
 * finished, never one whose skip is unread. Without --skip-nonfinite the run stops at its
 * first non-finite step. With VT_BASE_BIN (a vidtrain from before the gate) the same runs
 * give that binary's checkpoints and metrics (without their timings). */
#define CMD_ARGS "--model tiny --epochs 3 --clip 4x32 --batch 2 --workers 1 -q --log-every 1 " \
                 "--clip-norm 20 --seed 4"
static void command_runs(void) {
    const char *bin = vt_test_bin("test_grad_late");
    if (!bin)
        return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("grad_late"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 4 --val 2 --test 2 --frames 12") == 0,
           "synth");
    const char *base = getenv("VT_BASE_BIN");
    static const char *const optims[] = {"--optim sgd --lr 10 --skip-nonfinite",
                                         "--optim adamw --lr 3 --skip-nonfinite",
                                         "--optim sgd --lr 10"};
    for (int o = 0; o < 3; o++) {
        const int skips = strstr(optims[o], "--skip-nonfinite") != NULL;
        char straight[4200], split[4200], what[256];
        snprintf(straight, sizeof straight, "%s/straight%d", dir, o);
        snprintf(split, sizeof split, "%s/split%d", dir, o);
        snprintf(what, sizeof what, "train %s", optims[o]);
        int rc = vt_test_sh("'%s' train '%s/data' --out '%s' %s %s > '%s.log' 2>&1", bin, dir,
                            straight, CMD_ARGS, optims[o], straight);
        if (!skips) {
            /* the first non-finite step stops the run; the checkpoint is the last finite */
            TCHECK(rc != 0 && vt_test_file_has_in(dir, "straight2.log", "training diverged"),
                   "%s: rc %d, no 'training diverged' in %s.log", what, rc, straight);
        } else {
            TCHECK(rc == 0, "%s: exited %d (see %s.log)", what, rc, straight);
            int sk, cl;
            metrics_counts(straight, 20, &sk, &cl);
            printf("%s: %d steps skipped, %d clipped\n", what, sk, cl);
            TCHECK(sk >= 1 && cl >= 1, "%s: %d skipped, %d clipped: the test needs both", what,
                   sk, cl);
            TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s' %s %s --max-steps 8 > '%s.log' "
                              "2>&1 && '%s' train --resume '%s' >> '%s.log' 2>&1", bin, dir,
                              split, CMD_ARGS, optims[o], split, bin, split, split) == 0,
                   "%s: stopped at step 8 and resumed (see %s.log)", what, split);
            same_ckpt(straight, split, "last.safetensors", what);
            same_ckpt(straight, split, "best.safetensors", what);
        }
        if (!base || !*base)
            continue;
        char old[4200];
        snprintf(old, sizeof old, "%s/base%d", dir, o);
        int rb = vt_test_sh("'%s' train '%s/data' --out '%s' %s %s > '%s.log' 2>&1", base, dir,
                            old, CMD_ARGS, optims[o], old);
        TCHECK((rb == 0) == (rc == 0), "%s: exit %d here, %d with %s", what, rc, rb, base);
        if (skips) {
            same_ckpt(old, straight, "last.safetensors", what);
            same_ckpt(old, straight, "best.safetensors", what);
        } else { /* stopped at its first step: no checkpoint, or the same one */
            char po[4400], ps[4400];
            snprintf(po, sizeof po, "%s/last.safetensors", old);
            snprintf(ps, sizeof ps, "%s/last.safetensors", straight);
            TCHECK(vt_file_exists(po) == vt_file_exists(ps), "%s: last.safetensors %d here, "
                   "%d with %s", what, vt_file_exists(ps), vt_file_exists(po), base);
            if (vt_file_exists(po))
                same_ckpt(old, straight, "last.safetensors", what);
        }
        same_metrics(old, straight, what);
        printf("%s: the bits of %s\n", what, base);
    }
}

int main(void) {
    late_equals_sync("sgd, 1 tower", VT_OPT_SGD, 1, 1, 1);
    late_equals_sync("adamw, 1 tower", VT_OPT_ADAMW, 1, 1, 1);
    late_equals_sync("sgd, 2 towers, sync-BN", VT_OPT_SGD, 2, 1, 1);
    late_equals_sync("adamw, 2 towers, no sync-BN", VT_OPT_ADAMW, 2, 0, 0);
    host_waits();
    command_runs();
    return vt_test_done("test_grad_late");
}
