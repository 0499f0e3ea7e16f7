/*
 * test_towers.c: docs/design.md §3.1 — a step on N towers with any split equals a step
 * on one tower with the whole batch. The outside truth is one-device training: the same
 * model, seed and batch on a single tower. Checked after 1 and 3 SGD-momentum steps,
 * parameters within 1e-5 relative, plus: replicas bitwise identical after every step, the
 * step's loss and accuracy equal the one-device ones, evaluation writes every clip's
 * probabilities once in batch order and equals one device, and a checkpoint-style sync
 * makes all replicas equal. Two heads (softmax + multi-label BCE) so that every target
 * path is exercised. Three families:
 *
 * 1. Without batch norm (the zoo's test model tiny_nobn): a clip's gradient depends on
 *    that clip alone, so micro-batches are free-form — splits equal, 5:3, 31:1, a tower
 *    with 0 clips, micro-batches of any size on any tower (10 | 4+4+2; 3+3+2 | 1x4 | 4;
 *    31:1 with the big tower's budget forcing passes of 7; one tower in passes of 5)
 *    must all give the one-pass result.
 * 2. Dropout (tiny_nobn, p 0.3): masks are drawn per clip from its GLOBAL position in the
 *    batch (tower.c seeds each pass with step hash + first clip, net.c hashes seed + j),
 *    so towers and micro-batches draw the same masks as one device.
 * 3. With batch norm (tiny) under sync-BN: statistics combine over the towers of each
 *    pass, which is exact one-device equality per pass. The micro-batch case is built so
 *    that the passes line up with a one-device run that itself uses micro-batches: one
 *    tower with 12 clips per pass over B = 16 (passes [0,12), [12,16)) against tower 0
 *    with clips [0,8) in one pass and tower 1 with [8,16) in passes of 4 (pass 0 = [0,8)
 *    + [8,12), pass 1 = [12,16) with tower 0 running an empty pass), with budgets set
 *    from the memory plan.
 *    Without sync-BN (per-tower statistics, as Keras/DDP): parameters are NOT one
 *    device's (each tower normalises with its own slice's statistics), but replicas stay
 *    bitwise identical (gradients are summed, every replica applies the same update) and
 *    so do running statistics: after each step tower.c replaces every replica's buffers
 *    by their clip-weighted average. After step 1 (same weights as one device) that
 *    makes running_mean one device's running_mean to float rounding; running_var is not
 *    one device's (it misses the spread between the towers' means, and each tower's
 *    unbiased n/(n-1) factor uses its own n); the test prints by how much.
 * 4. Gradient buckets (tower.h): every case above runs with 25 MiB buckets (one bucket
 *    for these models, through the helper threads); then the same runs with 4 KiB
 *    buckets (tiny has ~70 of them, reduced while backward goes on, with micro-batches,
 *    sync-BN, an empty tower) give bitwise the parameters and buffers of the same runs
 *    reduced in one call.
 * 5. Precise BN (vt_towers_bn_stats): the running statistics a pass leaves are the
 *    clip-weighted average of its forwards' batch statistics (precise_bn_family).
 * 6. Batch norm of channels whose mean is ~1e3 x their spread, family 3's sync-BN cases
 *    again (3:1, micro-batches): BN statistics merge without cancellation
 *    (offset_bn_family).
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/testutil.h"

#define NCLASS 5
#define NBCE 3

/* What is trained: the model, its dropout and whether BN statistics are synced. */
typedef struct setup {
    const char *model;  /* "tiny" (batch norm) or "tiny_nobn" */
    float dropout;
    int sync_bn;
} setup;

static vt_net_cfg net_cfg(const setup *su) {
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, su->model, NCLASS, 4, 16, 16);
    nc.dropout = su->dropout;
    nc.nheads = 2;
    snprintf(nc.head[1].name, sizeof nc.head[1].name, "tags");
    nc.head[1].classes = NBCE;
    nc.head[1].loss = VT_LOSS_BCE;
    nc.head[1].weight = 0.5f;
    return nc;
}

static void batch_make(vt_batch *b, int n, uint64_t seed) {
    memset(b, 0, sizeof *b);
    b->n = b->capacity = n;
    b->t = 4;
    b->h = 16;
    b->w = 16;
    b->nheads = 2;
    b->head_classes[0] = NCLASS;
    b->head_loss[0] = VT_LOSS_SOFTMAX_CE;
    b->head_classes[1] = NBCE;
    b->head_loss[1] = VT_LOSS_BCE;
    int64_t cf = vt_batch_clip_floats(b);
    b->x = vt_malloc((size_t)(cf * n) * sizeof(float));
    b->label[0] = vt_malloc((size_t)n * sizeof(int32_t));
    b->target[1] = vt_malloc((size_t)n * NBCE * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < cf * n; i++)
        b->x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < n; i++) {
        b->label[0][i] = (int32_t)vt_rng_below(&r, NCLASS);
        for (int k = 0; k < NBCE; k++)
            b->target[1][i * NBCE + k] = (float)vt_rng_below(&r, 2);
    }
}

static void batch_free(vt_batch *b) {
    free(b->x);
    free(b->label[0]);
    free(b->target[1]);
}

/* Budget that holds exactly `clips` per pass for the test model. */
static double g_bucket_mb = 25; /* vt_towers_cfg.bucket_mb of every run() */
static int g_exact_off = 0;     /* vt_towers_cfg.exact_off of every run() */

static int64_t budget_for(const setup *su, int clips, const vt_optim_cfg *oc) {
    vt_memplan mp;
    char err[256];
    vt_net_cfg nc = net_cfg(su);
    nc.exact = !g_exact_off; /* CPU towers sum exactly unless told not to (tower.h) */
    VT_CHECK(vt_memplan_build(&mp, &nc, vt_optim_state_per_param(oc), err, sizeof err) == 0, "%s", err);
    int64_t b = mp.fixed_bytes + clips * mp.bytes_per_clip + mp.bytes_per_clip / 2;
    vt_memplan_free(&mp);
    return b;
}

typedef struct run_result {
    float *params[3];   /* rank 0's parameters after steps 1..3 */
    float *buffers1;    /* after step 1 */
    float *buffers;     /* after step 3 */
    char *buf_role;     /* per buffer float: 'M' bn1's running_mean, 'm' other running_mean,
                           'v' running_var, 'n' num_batches_tracked */
    int64_t np, nb;
    double loss[3], head_loss[3][2];
    int buckets, buckets_overlapped; /* step 3, tower 0 */
    int64_t correct[3][2];
    float *probs[2];    /* eval after step 3: (B, classes) */
    double eval_loss;
    int64_t eval_correct;
    char plan[128];     /* "slice(passes x clips per pass) ..." per tower */
    int exact;          /* the towers summed exactly (vt_towers_exact) */
    int mixed;          /* towers of different backends */
} run_result;

static void result_free(run_result *r) {
    for (int i = 0; i < 3; i++)
        free(r->params[i]);
    free(r->buffers1);
    free(r->buffers);
    free(r->buf_role);
    free(r->probs[0]);
    free(r->probs[1]);
}

/* ntowers cpu towers (1 thread each) with budgets (0 = unlimited), a split policy and
 * backends (one name, or a comma list with one entry per tower) for batches of B. */
/* Family 6's first layer: conv1 (16, 3, 3, 3, 3) reduced to its centre tap, positive
 * weights 0.2 .. 0.6, so that an input of 1e3 + N(0, 1) reaches bn1 as channels of mean
 * ~1e3 and spread ~0.7 everywhere (a full kernel would mix in zero padding at the borders,
 * whose spread swamps the ratio). Set on replica 0 and synced, as a checkpoint is. */
static int g_centre_conv1;

static void centre_conv1(vt_towers *t) {
    vt_net *n0 = vt_towers_net(t, 0);
    const vt_tensor_info *ti = vt_net_find_tensor(n0, "conv1.weight");
    VT_CHECK(ti && ti->numel == 16 * 3 * 27, "tiny's conv1.weight");
    float *w = vt_net_params(n0) + ti->offset;
    for (int co = 0; co < 16; co++)
        for (int ci = 0; ci < 3; ci++)
            for (int k = 0; k < 27; k++)
                w[(co * 3 + ci) * 27 + k] = k == 13 ? 0.2f + 0.4f * (float)((co * 3 + ci) % 7) / 6 : 0;
    vt_towers_sync_from(t, 0);
}

static vt_towers *towers_new(const char *what, const setup *su, int ntowers,
                             const int64_t *budgets, const char *policy, const char *backend,
                             int B) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    cfg.net = net_cfg(su);
    vt_optim_cfg_default(&cfg.optim, VT_OPT_SGD);
    cfg.optim.momentum = 0.9f;
    cfg.optim.wd = 1e-4f;
    cfg.seed = 1234;
    cfg.sync_bn = su->sync_bn;
    cfg.batch = B;
    cfg.bucket_mb = g_bucket_mb;
    cfg.exact_off = g_exact_off;
    char err[512];
    if (vt_slice_policy_parse(&cfg.policy, policy, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", what, err);
        return NULL;
    }
    cfg.devices.n = ntowers;
    for (int i = 0; i < ntowers; i++) {
        vt_device *d = &cfg.devices.dev[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "cpu%d", i);
        const char *bk = backend;
        for (int k = 0; k < i && strchr(bk, ','); k++)
            bk = strchr(bk, ',') + 1;
        snprintf(d->backend, sizeof d->backend, "%.*s", (int)strcspn(bk, ","), bk);
        d->ordinal = i;
        d->threads = 1;
        d->budget = budgets ? budgets[i] : 0;
        d->slowdown = 1;
    }
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t != NULL, "%s: init: %s", what, err);
    if (t && g_centre_conv1)
        centre_conv1(t);
    return t;
}

/* towers_new's towers: 3 steps on `batches` (three batches of B), then an eval of the
 * first batch. */
static int run(run_result *res, const char *what, const setup *su, int ntowers,
               const int64_t *budgets, const char *policy, const char *backend,
               vt_batch *batches) {
    memset(res, 0, sizeof *res);
    double t_start = vt_now();
    vt_towers *t = towers_new(what, su, ntowers, budgets, policy, backend, batches[0].n);
    if (!t)
        return -1;
    const vt_plan *p = vt_towers_plan(t);
    for (int i = 0; i < ntowers; i++)
        snprintf(res->plan + strlen(res->plan), sizeof res->plan - strlen(res->plan), "%s%d(%dx%d)",
                 i ? " " : "", p->slice[i], p->nmb[i], p->mb[i]);
    printf("%-40s slices %s\n", what, res->plan);
    const vt_net *n0 = vt_towers_net(t, 0);
    res->np = vt_net_num_params(n0);
    res->exact = vt_towers_exact(t);
    res->mixed = strchr(backend, ',') != NULL;
    TCHECK(res->exact == !g_exact_off, "%s: exact sums %s", what, res->exact ? "on" : "off");
    res->nb = vt_net_num_buffers(n0);
    res->buf_role = vt_calloc((size_t)VT_MAX(res->nb, 1), 1);
    for (int i = 0; i < vt_net_num_tensors(n0); i++) {
        const vt_tensor_info *ti = vt_net_tensor(n0, i);
        /* 'M': the first BN layer's running_mean, whose input (conv1 of the clip) does not
         * depend on how earlier layers were normalised */
        char role = !strcmp(ti->name, "bn1.running_mean") ? 'M'
                    : strstr(ti->name, "running_mean")    ? 'm'
                    : strstr(ti->name, "running_var")     ? 'v'
                                                          : 'n';
        if (ti->is_buffer)
            memset(res->buf_role + ti->offset, role, (size_t)ti->numel);
    }
    for (int s = 0; s < 3; s++) {
        vt_step_stats st;
        vt_towers_train_step(t, &batches[s], 0.05f, &st);
        res->loss[s] = st.loss;
        res->buckets = st.buckets;
        res->buckets_overlapped = st.buckets_overlapped;
        for (int h = 0; h < 2; h++) {
            res->head_loss[s][h] = st.head_loss[h];
            res->correct[s][h] = st.head_correct[h];
        }
        int sum = 0;
        for (int i = 0; i < ntowers; i++)
            sum += st.slice[i];
        TCHECK(sum == batches[s].n, "%s: slices cover the batch", what);
        /* replicas bitwise identical after every step: the reducer copies one sum */
        const float *p0 = vt_net_params(vt_towers_net(t, 0));
        const float *b0 = vt_net_buffers(vt_towers_net(t, 0));
        for (int i = 1; i < ntowers; i++) {
            TCHECK(!memcmp(p0, vt_net_params(vt_towers_net(t, i)), (size_t)res->np * sizeof(float)),
                   "%s: step %d: replica %d parameters differ from replica 0", what, s + 1, i);
            TCHECK(res->nb == 0 ||
                       !memcmp(b0, vt_net_buffers(vt_towers_net(t, i)), (size_t)res->nb * sizeof(float)),
                   "%s: step %d: replica %d buffers differ from replica 0", what, s + 1, i);
            TCHECK(vt_optim_step_count(vt_towers_optim(t, i)) == s + 1, "%s: step count", what);
        }
        res->params[s] = vt_malloc((size_t)res->np * sizeof(float));
        memcpy(res->params[s], p0, (size_t)res->np * sizeof(float));
        if (s == 0 || s == 2) {
            float **dst = s == 0 ? &res->buffers1 : &res->buffers;
            *dst = vt_calloc((size_t)VT_MAX(res->nb, 1), sizeof(float));
            if (res->nb)
                memcpy(*dst, b0, (size_t)res->nb * sizeof(float));
        }
    }
    /* eval: every row written once (NaN-filled first), in batch order */
    int B = batches[0].n;
    float *probs[VT_MAX_HEADS] = {0};
    res->probs[0] = probs[0] = vt_malloc((size_t)B * NCLASS * sizeof(float));
    res->probs[1] = probs[1] = vt_malloc((size_t)B * NBCE * sizeof(float));
    for (int i = 0; i < B * NCLASS; i++)
        probs[0][i] = NAN;
    for (int i = 0; i < B * NBCE; i++)
        probs[1][i] = NAN;
    vt_step_stats es;
    vt_towers_eval_step(t, &batches[0], probs, &es);
    res->eval_loss = es.loss;
    res->eval_correct = es.head_correct[0];
    for (int i = 0; i < B; i++) {
        double s = 0;
        for (int k = 0; k < NCLASS; k++)
            s += probs[0][i * NCLASS + k];
        /* softmax rows sum to 1 up to float rounding of 5 terms */
        TCHECK(fabs(s - 1) < 1e-5, "%s: eval row %d sums to %f (row missing or twice?)", what, i, s);
        for (int k = 0; k < NBCE; k++)
            TCHECK(probs[1][i * NBCE + k] >= 0 && probs[1][i * NBCE + k] <= 1, "%s: sigmoid row %d",
                   what, i);
    }
    /* checkpoint path: perturb replica 0, sync from it, every replica equal again */
    if (ntowers > 1) {
        float *p0 = vt_net_params(vt_towers_net(t, 0));
        p0[0] += 1.0f;
        vt_towers_sync_from(t, 0);
        for (int i = 1; i < ntowers; i++)
            TCHECK(!memcmp(p0, vt_net_params(vt_towers_net(t, i)), (size_t)res->np * sizeof(float)),
                   "%s: sync_from(0) left replica %d different", what, i);
    }
    vt_towers_free(&t);
    printf("  %-38s %.2f s\n", "", vt_now() - t_start);
    return 0;
}

static double max_abs(const float *a, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = VT_MAX(m, fabs((double)a[i]));
    return m;
}

/* With exact sums (CPU towers of one backend, the default) parameters and buffers equal
 * one device's BIT FOR BIT: every clip's arithmetic is the same whatever the split, and
 * the sums over clips are integers (models/xsum.h). With float sums (exact_off, or cpu +
 * cpu-ref towers whose per-clip arithmetic differs) within 1e-5 of the arena's largest
 * magnitude: the towers sum the same per-clip gradients in a different order (per
 * tower, then across towers), which in float32 moves results by a few ulps (~1e-7
 * relative) per accumulation; three momentum steps at lr 0.05 keep that below 1e-6. A
 * real bug (a missed clip, averaging instead of summing, a 1/b_i scale) moves parameters
 * by > 1e-3 relative. */
static void compare(const run_result *ref, const run_result *got, const char *what) {
    const int bits = ref->exact && got->exact && !got->mixed && !ref->mixed;
    for (int s = 0; s < 3; s += 2) {
        double scale = max_abs(ref->params[s], ref->np);
        double d = vt_max_abs_diff(got->params[s], ref->params[s], ref->np);
        TCHECK(d <= 1e-5 * scale, "%s: after step %d params differ by %g (scale %g)", what, s + 1, d,
               scale);
        TCHECK(!bits || !memcmp(got->params[s], ref->params[s], (size_t)ref->np * sizeof(float)),
               "%s: exact sums, yet after step %d params differ (by %g)", what, s + 1, d);
        if (s == 2)
            printf("  %-38s step 3 max |dp| / max |p| = %.2e\n", what, d / scale);
    }
    /* running statistics: same statistics per pass -> same buffers (float tolerance as above) */
    double bs = max_abs(ref->buffers, ref->nb);
    double bd = vt_max_abs_diff(got->buffers, ref->buffers, ref->nb);
    TCHECK(bd <= 1e-5 * VT_MAX(bs, 1.0), "%s: buffers differ by %g", what, bd);
    TCHECK(!bits || !memcmp(got->buffers, ref->buffers, (size_t)ref->nb * sizeof(float)),
           "%s: exact sums, yet buffers differ (by %g)", what, bd);
    for (int s = 0; s < 3; s++) {
        /* summed per-clip losses: 16-32 terms of O(1) in float: 1e-5 relative */
        TCHECK(fabs(got->loss[s] - ref->loss[s]) <= 1e-5 * fabs(ref->loss[s]) + 1e-6,
               "%s: step %d loss %f vs %f", what, s + 1, got->loss[s], ref->loss[s]);
        TCHECK(got->correct[s][0] == ref->correct[s][0] && got->correct[s][1] == ref->correct[s][1],
               "%s: step %d correct %lld/%lld vs %lld/%lld", what, s + 1,
               (long long)got->correct[s][0], (long long)got->correct[s][1],
               (long long)ref->correct[s][0], (long long)ref->correct[s][1]);
    }
    TCHECK(fabs(got->eval_loss - ref->eval_loss) <= 1e-5 * fabs(ref->eval_loss) + 1e-6,
           "%s: eval loss %f vs %f", what, got->eval_loss, ref->eval_loss);
    TCHECK(got->eval_correct == ref->eval_correct, "%s: eval correct", what);
}

static void compare_probs(const run_result *ref, const run_result *got, int B, const char *what) {
    /* probabilities from near-identical parameters: 1e-5 absolute */
    TCHECK(vt_max_abs_diff(got->probs[0], ref->probs[0], (int64_t)B * NCLASS) < 1e-5,
           "%s: eval softmax outputs differ from one device", what);
    TCHECK(vt_max_abs_diff(got->probs[1], ref->probs[1], (int64_t)B * NBCE) < 1e-5,
           "%s: eval sigmoid outputs differ from one device", what);
}

/* One case against its one-device reference: run, compare parameters/losses/eval, and
 * check that the plan is the one the case is about (plan = NULL: any). */
static void check_case(const run_result *ref, const char *what, const setup *su, int ntowers,
                       const int64_t *budgets, const char *policy, const char *backend,
                       vt_batch *batches, const char *plan) {
    run_result got;
    if (run(&got, what, su, ntowers, budgets, policy, backend, batches))
        return;
    TCHECK(!plan || !strcmp(got.plan, plan), "%s: plan %s, the case wants %s", what, got.plan,
           plan);
    compare(ref, &got, what);
    compare_probs(ref, &got, batches[0].n, what);
    result_free(&got);
}

/* Family 1 (and 2 with dropout): no batch norm, micro-batches of any size. */
static void nobn_matrix(const setup *su, vt_batch *b16, vt_batch *b32, const vt_optim_cfg *oc,
                        int full, run_result *keep16) {
    const char *tag = su->dropout > 0 ? "nobn+dropout" : "nobn";
    char what[96];
    run_result ref16, ref32;
    snprintf(what, sizeof what, "%s reference: 1 tower, B=16", tag);
    memset(keep16, 0, sizeof *keep16);
    if (run(&ref16, what, su, 1, NULL, "equal", "cpu", b16))
        return;
    /* one step changes the parameters: otherwise equality would prove nothing */
    TCHECK(vt_max_abs_diff(ref16.params[0], ref16.params[2], ref16.np) > 1e-4,
           "%s: training moves params", tag);
    int64_t none = 0;
    if (full) {
        snprintf(what, sizeof what, "%s 2 towers equal", tag);
        check_case(&ref16, what, su, 2, NULL, "equal", "cpu", b16, "8(1x8) 8(1x8)");
    }
    snprintf(what, sizeof what, "%s 3 towers 1:0:1", tag);
    check_case(&ref16, what, su, 3, NULL, "manual:1,0,1", "cpu", b16, "8(1x8) 0(0x0) 8(1x8)");
    /* 5:3 with the small tower in passes of 4: 4 + 4 + 2, a ragged last pass */
    int64_t small4[2] = {none, budget_for(su, 4, oc)};
    snprintf(what, sizeof what, "%s 5:3, small tower 4+4+2", tag);
    check_case(&ref16, what, su, 2, small4, "manual:5,3", "cpu", b16, "10(1x10) 6(2x4)");
    if (full) {
        snprintf(what, sizeof what, "%s 2 towers 5:3", tag);
        check_case(&ref16, what, su, 2, NULL, "manual:5,3", "cpu", b16, "10(1x10) 6(1x6)");
        /* three towers, every one with another pass size: 3+3+2 | 1x4 | 4 */
        int64_t three[3] = {budget_for(su, 3, oc), budget_for(su, 1, oc), none};
        snprintf(what, sizeof what, "%s 2:1:1, passes 3+3+2 | 1x4 | 4", tag);
        check_case(&ref16, what, su, 3, three, "manual:2,1,1", "cpu", b16,
                   "8(3x3) 4(4x1) 4(1x4)");
        /* one device in passes of 5 (5+5+5+1) is one device in one pass */
        int64_t five[1] = {budget_for(su, 5, oc)};
        snprintf(what, sizeof what, "%s 1 tower, passes 5+5+5+1", tag);
        check_case(&ref16, what, su, 1, five, "equal", "cpu", b16, "16(4x5)");
    }
    *keep16 = ref16;

    snprintf(what, sizeof what, "%s reference: 1 tower, B=32", tag);
    if (run(&ref32, what, su, 1, NULL, "equal", "cpu", b32))
        return;
    if (full) {
        snprintf(what, sizeof what, "%s 2 towers 31:1", tag);
        check_case(&ref32, what, su, 2, NULL, "manual:31,1", "cpu", b32, "31(1x31) 1(1x1)");
    }
    /* 31:1 with the big tower's budget forcing passes of 7: 7+7+7+7+3 | 1 */
    int64_t big7[2] = {budget_for(su, 7, oc), none};
    snprintf(what, sizeof what, "%s 31:1, big tower passes of 7", tag);
    check_case(&ref32, what, su, 2, big7, "manual:31,1", "cpu", b32, "31(5x7) 1(1x1)");
    result_free(&ref32);
}

/* Family 3: batch norm. Under sync-BN the towers equal one device per pass; with
 * per-tower statistics the replicas stay identical and running_mean after step 1 is one
 * device's (the file comment says why and what running_var does). */
static void bn_family(vt_batch *b16, vt_batch *b32, const vt_optim_cfg *oc) {
    const setup su = {"tiny", 0.0f, 1};
    run_result ref16, ref32, got;

    if (run(&ref16, "BN reference: 1 tower, B=16", &su, 1, NULL, "equal", "cpu", b16))
        return;
    TCHECK(vt_max_abs_diff(ref16.params[0], ref16.params[2], ref16.np) > 1e-4, "training moves params");
    check_case(&ref16, "sync-BN 2 towers equal 8:8", &su, 2, NULL, "equal", "cpu", b16, NULL);
    check_case(&ref16, "sync-BN 2 towers 5:3", &su, 2, NULL, "manual:5,3", "cpu", b16, NULL);
    check_case(&ref16, "sync-BN 3 towers 1:0:1", &su, 3, NULL, "manual:1,0,1", "cpu", b16, NULL);
    /* float sums (what GPU towers do): equal to float rounding, not bitwise */
    g_exact_off = 1;
    check_case(&ref16, "sync-BN 2 towers 5:3, float sums", &su, 2, NULL, "manual:5,3", "cpu", b16,
               NULL);
    g_exact_off = 0;
    /* micro-batches: see the file comment for why the passes line up */
    {
        int64_t one[1] = {budget_for(&su, 12, oc)};
        run_result refmb;
        if (run(&refmb, "BN reference: 1 tower, 12 clips/pass", &su, 1, one, "equal", "cpu", b16) == 0) {
            int64_t two[2] = {budget_for(&su, 8, oc), budget_for(&su, 4, oc)};
            check_case(&refmb, "sync-BN 8:8, small tower 2x4", &su, 2, two, "equal", "cpu", b16,
                       "8(1x8) 8(2x4)");
            result_free(&refmb);
        }
    }
    if (run(&ref32, "BN reference: 1 tower, B=32", &su, 1, NULL, "equal", "cpu", b32) == 0) {
        check_case(&ref32, "sync-BN 2 towers 31:1", &su, 2, NULL, "manual:31,1", "cpu", b32, NULL);
        result_free(&ref32);
    }
    /* mixed backends (a fast and a reference tower, as a CPU+GPU run would be): rank 0's
     * parameters are broadcast after each update so replicas stay bitwise identical, and
     * the result still equals one device (cpu-ref is the truth the cpu backend is tested
     * against; 1e-5 covers their different summation orders). 15:1 keeps cpu-ref cheap. */
    check_case(&ref16, "sync-BN cpu + cpu-ref towers 15:1", &su, 2, NULL, "manual:15,1",
               "cpu,cpu-ref", b16, NULL);

    /* Per-tower BN: run() checks replicas bitwise identical (parameters AND buffers) after
     * every step and every clip counted. */
    const setup per = {"tiny", 0.0f, 0};
    if (run(&got, "per-tower BN 2 towers 5:3", &per, 2, NULL, "manual:5,3", "cpu", b16) == 0) {
        /* Not one device: each tower normalised its slice with its own statistics. Step
         * 1 lands ~1e-3 (of the largest parameter) away from one device; 1e-6 is far
         * above float noise (~1e-8 in the sync-BN cases) and far below the effect. */
        double scale = max_abs(ref16.params[0], ref16.np);
        double d = vt_max_abs_diff(got.params[0], ref16.params[0], ref16.np);
        printf("  %-38s step 1 max |dp| / max |p| vs one device = %.2e (expected > 0)\n", "",
               d / scale);
        TCHECK(d > 1e-6 * scale, "per-tower BN equals one device (%g): is BN synced anyway?", d);
        /* Running statistics after step 1 (same weights as one device before it): bn1's
         * input is conv1 of each clip, whatever the split, so the clip-weighted average of
         * the towers' running_mean is one device's to float rounding: conv1 outputs are
         * O(1) and their float means carry ~1e-7 absolute error, so allow 1e-6 absolute;
         * an unweighted (1/2, 1/2) average of the 10- and 6-clip towers would be off by
         * ~momentum * 1/8 * (mean0 - mean1) ~ 1e-4. Deeper layers see inputs normalised per tower, so
         * their running_mean differs slightly, and running_var differs everywhere (the
         * spread between towers' means is missed; each tower's n/(n-1) uses its own n).
         * Counts are integers, the same as one device. */
        double m1 = 0, m1s = 0, mm = 0, ms = 0, vm = 0, vs = 0;
        int nbt_ok = 1;
        for (int64_t i = 0; i < ref16.nb; i++) {
            double a = got.buffers1[i], b = ref16.buffers1[i];
            switch (ref16.buf_role[i]) {
            case 'M':
                m1 = VT_MAX(m1, fabs(a - b));
                m1s = VT_MAX(m1s, fabs(b));
                break;
            case 'm':
                mm = VT_MAX(mm, fabs(a - b));
                ms = VT_MAX(ms, fabs(b));
                break;
            case 'v':
                vm = VT_MAX(vm, fabs(a - b));
                vs = VT_MAX(vs, fabs(b));
                break;
            default:
                nbt_ok &= a == b;
            }
        }
        printf("  %-38s step 1 vs one device: bn1 running_mean max diff %.2e (of %.3g), deeper "
               "running_mean %.2e (of %.3g), running_var %.2e (of %.3g)\n", "", m1, m1s, mm, ms,
               vm, vs);
        TCHECK(m1s > 0 && m1 <= 1e-6, "per-tower BN: bn1 running_mean after "
               "step 1 differs from one device by %g", m1);
        TCHECK(nbt_ok, "per-tower BN: num_batches_tracked differs from one device");
        result_free(&got);
    }
    result_free(&ref16);
}

/* Family 6: batch norm of channels whose mean is ~1e3 x their spread (low-contrast clips;
 * docs/design.md §3.1, issue 26). bn1's sums around 0 in float (sum x^2 rounded to
 * ~6e-8 relative) gave a variance off by ~6e-8 * (mean/std)^2 ~ 1e-1 relative, differently
 * per split: 1e-1 of the parameters apart after one step. Sums around the global batch
 * mean k (net.c bn_forward), and x - k - mean never through a mean rounded to one float,
 * leave the towers' float summation order, ~1e-6 after 3 steps: the same 1e-5 as
 * family 3. Sync-BN 3:1 against one tower, and micro-batches lined up as in
 * family 3. */
static void offset_bn_family(const vt_optim_cfg *oc) {
    const setup su = {"tiny", 0.0f, 1};
    vt_batch off[3];
    for (int s = 0; s < 3; s++) {
        batch_make(&off[s], 16, 300 + s);
        const int64_t nx = vt_batch_clip_floats(&off[s]) * off[s].n;
        for (int64_t i = 0; i < nx; i++)
            off[s].x[i] += 1000.0f;
    }
    g_centre_conv1 = 1;
    run_result ref;
    if (run(&ref, "offset BN reference: 1 tower, B=16", &su, 1, NULL, "equal", "cpu", off) == 0) {
        /* the case is what it says: bn1's batch statistics of step 1 from its running ones
         * (momentum 0.1 from mean 0, var 1) */
        double ratio = 1e30;
        const vt_tensor_info *rm = NULL, *rv = NULL;
        vt_towers *tmp = towers_new("offset BN probe", &su, 1, NULL, "equal", "cpu", 16);
        if (tmp) {
            rm = vt_net_find_tensor(vt_towers_net(tmp, 0), "bn1.running_mean");
            rv = vt_net_find_tensor(vt_towers_net(tmp, 0), "bn1.running_var");
            for (int64_t c = 0; rm && rv && c < rm->numel; c++) {
                double m = ref.buffers1[rm->offset + c] / 0.1;
                double v = (ref.buffers1[rv->offset + c] - 0.9) / 0.1;
                ratio = VT_MIN(ratio, fabs(m) / sqrt(VT_MAX(v, 1e-30)));
            }
            vt_towers_free(&tmp);
        }
        printf("  %-38s bn1 |mean| / std >= %.3g over its channels\n", "", ratio);
        TCHECK(ratio > 500 && ratio < 1e30, "offset BN: bn1's mean/std is %g, not ~1e3", ratio);
        check_case(&ref, "offset sync-BN 2 towers 3:1", &su, 2, NULL, "manual:3,1", "cpu", off,
                   "12(1x12) 4(1x4)");
        result_free(&ref);
    }
    int64_t one[1] = {budget_for(&su, 12, oc)};
    if (run(&ref, "offset BN reference: 1 tower, 12 clips/pass", &su, 1, one, "equal", "cpu",
            off) == 0) {
        int64_t two[2] = {budget_for(&su, 8, oc), budget_for(&su, 4, oc)};
        check_case(&ref, "offset sync-BN 8:8, small tower 2x4", &su, 2, two, "equal", "cpu", off,
                   "8(1x8) 8(2x4)");
        result_free(&ref);
    }
    g_centre_conv1 = 0;
    for (int s = 0; s < 3; s++)
        batch_free(&off[s]);
}

/* Family 4: small buckets vs one call, bitwise. */
static void bucket_family(vt_batch *b16, vt_batch *b32, const vt_optim_cfg *oc) {
    const setup sync = {"tiny", 0.0f, 1}, per = {"tiny", 0.0f, 0}, drop = {"tiny_nobn", 0.3f, 0};
    int64_t two[2] = {budget_for(&sync, 8, oc), budget_for(&sync, 4, oc)};
    const struct {
        const char *what;
        const setup *su;
        int n;
        const int64_t *budgets;
        const char *policy;
        vt_batch *b;
    } cases[] = {
        {"sync-BN 8:8, small tower 2x4", &sync, 2, two, "equal", b16},
        {"per-tower BN 3 towers 1:0:1", &per, 3, NULL, "manual:1,0,1", b16},
        {"dropout 2 towers 31:1", &drop, 2, NULL, "manual:31,1", b32},
    };
    g_exact_off = 1; /* buckets reduce float gradients (exact sums: one call after backward) */
    for (size_t c = 0; c < VT_ARRAY_LEN(cases); c++) {
        run_result one, many;
        char w[96];
        g_bucket_mb = 0;
        snprintf(w, sizeof w, "%s, one reduction", cases[c].what);
        int r1 = run(&one, w, cases[c].su, cases[c].n, cases[c].budgets, cases[c].policy, "cpu",
                     cases[c].b);
        g_bucket_mb = 4.0 / 1024; /* 4 KiB: 1024 floats a bucket */
        snprintf(w, sizeof w, "%s, 4 KiB buckets", cases[c].what);
        int r2 = run(&many, w, cases[c].su, cases[c].n, cases[c].budgets, cases[c].policy, "cpu",
                     cases[c].b);
        g_bucket_mb = 25;
        if (r1 || r2)
            continue;
        for (int s = 0; s < 3; s++)
            TCHECK(!memcmp(one.params[s], many.params[s], (size_t)one.np * sizeof(float)),
                   "%s: step %d: bucketed parameters differ from one reduction's", cases[c].what,
                   s + 1);
        TCHECK(one.nb == 0 || !memcmp(one.buffers, many.buffers, (size_t)one.nb * sizeof(float)),
               "%s: bucketed buffers differ", cases[c].what);
        TCHECK(one.loss[2] == many.loss[2], "%s: step 3 loss differs", cases[c].what);
        /* The buckets were many. How many started while tower 0's backward still ran is
         * printed, not checked: it depends on thread scheduling (on a loaded machine the
         * other towers may deliver each bucket only after tower 0 has finished; 0 of 287
         * was seen), and overlap is a speed figure: bench/bench-overlap.sh. */
        printf("  %-38s %d buckets, %d started during backward (tower 0)\n", "", many.buckets,
               many.buckets_overlapped);
        TCHECK(one.buckets == 0 && many.buckets > 30, "%s: %d buckets", cases[c].what,
               many.buckets);
        result_free(&one);
        result_free(&many);
    }
    g_exact_off = 0;
}

/* Family 5, precise BN (vt_towers_bn_stats): after a training step (so the running
 * statistics are the training forward's and the weights are not the initial ones), batch
 * A (5 clips) then batch B (11 clips) through the pass must leave every replica with
 *   buffers = sum over the pass's forwards f of n_f * stats(f) / 16,
 * where stats(f) are the running statistics that a lone net with BN momentum 1 holds
 * after one training forward of f's clips (its batch statistics: PyTorch's definition,
 * checked against torch in test_ops_torch) and the forwards are replica 0's micro-batches
 * of A and of B (what its device fits, whatever its training micro-batch). Parameters stay
 * bitwise what the step left. Cases: one tower; two towers with replica 0's budget
 * holding 4 clips a pass (A in 4 + 1, B in 4 + 4 + 3); two towers under sync-BN, whose
 * training passes are 8 clips and the pass's 5 and 11 (it lifts the hook: it runs on
 * replica 0 alone). */
static void precise_bn_family(vt_batch *b16, const vt_optim_cfg *oc) {
    const setup bn = {"tiny", 0.0f, 0}, bn_sync = {"tiny", 0.0f, 1};
    const int64_t small[2] = {budget_for(&bn, 4, oc), 0};
    struct {
        const char *what;
        const setup *su;
        int ntowers;
        const int64_t *budgets;
    } cases[] = {
        {"precise BN, 1 tower", &bn, 1, NULL},
        {"precise BN, 2 towers, passes of 4", &bn, 2, small},
        {"precise BN, 2 towers, sync-BN", &bn_sync, 2, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *what = cases[c].what;
        vt_towers *t = towers_new(what, cases[c].su, cases[c].ntowers, cases[c].budgets, "equal",
                                  "cpu", 16);
        if (!t)
            continue;
        vt_step_stats st;
        vt_towers_train_step(t, &b16[0], 0.05f, &st);
        vt_net *n0 = vt_towers_net(t, 0);
        const int64_t np = vt_net_num_params(n0), nb = vt_net_num_buffers(n0);
        /* the pass's micro-batches: what replica 0's device fits (its budget) */
        const int mb = VT_MIN(16, vt_towers_plan(t)->fits[0]);
        float *p_before = vt_malloc((size_t)np * sizeof(float));
        memcpy(p_before, vt_net_params(n0), (size_t)np * sizeof(float));
        /* the lone net: replica 0's weights and buffers, momentum 1 */
        char err[256];
        vt_backend *be = vt_backend_cpu_init(1, 0);
        vt_net *lone = vt_net_init(vt_net_config(n0), be, 16, err, sizeof err);
        TCHECK(lone != NULL, "%s: %s", what, err);
        if (!lone) {
            vt_backend_free(&be);
            vt_towers_free(&t);
            free(p_before);
            continue;
        }
        memcpy(vt_net_params(lone), p_before, (size_t)np * sizeof(float));
        memcpy(vt_net_buffers(lone), vt_net_buffers(n0), (size_t)nb * sizeof(float));
        vt_net_set_bn_momentum(lone, 1.0f);
        double *want = vt_calloc((size_t)nb, sizeof(double));
        const int64_t cf = vt_batch_clip_floats(&b16[1]);
        const int first[2] = {0, 5}, count[2] = {5, 11};
        for (int part = 0; part < 2; part++) {
            vt_batch v = b16[1]; /* a view of clips [first, first + count) */
            v.n = count[part];
            v.x += cf * first[part];
            v.label[0] += first[part];
            v.target[1] += (int64_t)first[part] * NBCE;
            vt_towers_bn_stats(t, &v, part == 0);
            for (int k = 0; k < v.n; k += mb) {
                int n = VT_MIN(mb, v.n - k);
                vt_net_forward(lone, v.x + cf * k, n, 1);
                const float *lb = vt_net_buffers(lone);
                for (int64_t i = 0; i < nb; i++)
                    want[i] += (double)n / 16.0 * lb[i];
            }
        }
        vt_towers_sync_from(t, 0);
        n0 = vt_towers_net(t, 0); /* the pass may have rebuilt replica 0 for its chunks */
        TCHECK(!memcmp(p_before, vt_net_params(n0), (size_t)np * sizeof(float)),
               "%s: the pass changed parameters", what);
        /* running means and variances: two to five float terms averaged with weights
         * n/16 in the pass (each an update (1-m) r + m s in float): 1e-5 relative. The
         * batch statistics themselves are the same backend's same forward. */
        double worst = 0;
        for (int r = 0; r < cases[c].ntowers; r++) {
            const float *got = vt_net_buffers(vt_towers_net(t, r));
            for (int i = 0; i < vt_net_num_tensors(n0); i++) {
                const vt_tensor_info *ti = vt_net_tensor(n0, i);
                if (!ti->is_buffer || strstr(ti->name, "num_batches_tracked"))
                    continue;
                for (int64_t k = ti->offset; k < ti->offset + ti->numel; k++) {
                    double d = fabs((double)got[k] - want[k]) / (1 + fabs(want[k]));
                    worst = VT_MAX(worst, d);
                }
            }
        }
        TCHECK(worst <= 1e-5, "%s: running statistics off the clip-weighted batch statistics "
               "by %g relative", what, worst);
        printf("%-40s passes of %d: max rel. diff %.1e\n", what, mb, worst);
        free(want);
        free(p_before);
        vt_net_free(&lone);
        vt_backend_free(&be);
        vt_towers_free(&t);
    }
}

int main(void) {
    double t0 = vt_now();
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);

    /* B = 16 batches for most splits, B = 32 for 31:1 */
    vt_batch b16[3], b32[3];
    for (int s = 0; s < 3; s++) {
        batch_make(&b16[s], 16, 100 + s);
        batch_make(&b32[s], 32, 200 + s);
    }
    const setup nobn = {"tiny_nobn", 0.0f, 0};
    run_result plain, dropped;
    nobn_matrix(&nobn, b16, b32, &oc, 1, &plain);
    /* dropout: the cases with micro-batches and an empty tower (masks by position) */
    const setup drop = {"tiny_nobn", 0.3f, 0};
    nobn_matrix(&drop, b16, b32, &oc, 0, &dropped);
    /* dropout acts (else its cases prove nothing): step 1 differs from the plain model's
     * by far more than float noise */
    if (plain.params[0] && dropped.params[0])
        TCHECK(vt_max_abs_diff(plain.params[0], dropped.params[0], plain.np) >
                   1e-4 * max_abs(plain.params[0], plain.np),
               "dropout 0.3 did not change the first step");
    result_free(&plain);
    result_free(&dropped);
    bn_family(b16, b32, &oc);
    bucket_family(b16, b32, &oc);
    precise_bn_family(b16, &oc);
    offset_bn_family(&oc);

    for (int s = 0; s < 3; s++) {
        batch_free(&b16[s]);
        batch_free(&b32[s]);
    }
    printf("test_towers: %.1f s\n", vt_now() - t0);
    return vt_test_done("test_towers");
}
