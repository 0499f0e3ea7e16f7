/*
 * test_balance.c: class imbalance (docs/balance.md), each part against an outside truth.
 *
 * 1. The class-weighted softmax cross-entropy (backend op softmax_xent_w) on cpu-ref and
 *    cpu against PyTorch's F.cross_entropy(weight=w, label_smoothing=eps) in float64
 *    (tests/oracle/torch_balance.py): per-clip losses (reduction='none'), and the gradient of
 *    the weighted MEAN, which vidtrain forms as grad_scale = 1 / sum w[label]. Weights
 *    NULL give the unweighted op bit for bit.
 * 2. The towers: a weighted step on 2 towers split 3:1 (and with micro-batches) equals
 *    one tower with the whole batch, where the rare classes all sit in the small tower's
 *    slice — so a per-tower weighted mean (each tower dividing by its own weight sum)
 *    would move the parameters by far more than the tolerance (checked: it differs from
 *    the unweighted run by much more than the tolerance too).
 * 3. The balanced epoch order (vt_balance_order) against counts: every class n/C (+-1)
 *    times, each class's samples floor or ceil of their share, a pure function of (seed,
 *    epoch); the inverse-frequency weights have a mean of 1 over the samples.
 * 4. The loader on an imbalanced synthetic set: an epoch of --balance sampler labels
 *    each class about equally; twice the same epoch gives the same clips.
 * 5. The command: scan and train print the class counts and the imbalance warning, auto
 *    resolves to the default mode on an imbalanced set and to none on a balanced one,
 *    config.json keeps it, --class-weights errors, best.safetensors on mean class
 *    accuracy said in the log.
 */
#include <string.h>

#include <unistd.h>

#include "models/checkpoint.h"
#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "pipeline/data/balance.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/loader.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/apputil.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"
#include "tests/towerutil.h"

/* ---------------------------------------------------------------- 1. the op ---- */

static vt_test_recs g_recs; /* torch_balance.py's records */

static const float *get(int c, const char *what, uint32_t *n) {
    char name[32];
    snprintf(name, sizeof name, "bal%d.%s", c, what);
    const vt_test_rec *r = vt_test_recs_find(&g_recs, name);
    if (r && n)
        *n = (uint32_t)r->n;
    return r ? r->v : NULL;
}

/* Tolerance: both backends compute in double and round each output to float once
 * (~6e-8 relative), so NMSE against float64 PyTorch is ~1e-15; 1e-12 leaves 1000x. A
 * missing weight, the wrong smoothing weight (w_y instead of w_j) or a per-clip instead
 * of a per-batch normaliser gives NMSE > 1e-3. */
#define TOL_OP 1e-12

static void op_case(const char *bename, int c) {
    uint32_t nz = 0;
    const float *z = get(c, "z", &nz), *yf = get(c, "y", NULL), *w = get(c, "w", NULL);
    const float *shape = get(c, "shape", NULL);
    if (!z || !yf || !w || !shape) {
        TCHECK(0, "case %d missing from the torch file", c);
        return;
    }
    const int n = (int)shape[0], k = (int)shape[1];
    const float eps = shape[2];
    vt_backend *be = vt_backend_init(bename, 0, 1, 0);
    int32_t *y = vt_malloc(sizeof *y * (size_t)n);
    double wsum = 0;
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)yf[i];
        wsum += w[y[i]];
    }
    float *loss = vt_malloc(sizeof(float) * (size_t)n), *dz = vt_malloc(sizeof(float) * nz);
    float *prob = vt_malloc(sizeof(float) * nz);
    VT_OP(be, softmax_xent_w, loss, dz, prob, z, y, w, n, k, eps, (float)(1.0 / wsum));
    double lsum = 0;
    for (int i = 0; i < n; i++)
        lsum += loss[i];
    double nl = vt_nmse(loss, get(c, "loss", NULL), n), ng = vt_nmse(dz, get(c, "grad", NULL), nz);
    double mean = lsum / wsum, tmean = get(c, "mean", NULL)[0];
    printf("  %-8s case %d (n %d, k %d, eps %.1f): loss NMSE %.1e, grad NMSE %.1e, mean %.6f "
           "(torch %.6f)\n", bename, c, n, k, (double)eps, nl, ng, mean, tmean);
    TCHECK(nl <= TOL_OP, "%s case %d: per-clip loss NMSE %g vs torch", bename, c, nl);
    TCHECK(ng <= TOL_OP, "%s case %d: gradient of the weighted mean NMSE %g vs torch", bename, c, ng);
    /* the mean as torch forms it: float sums of n terms, 1e-6 relative is ~10x their error */
    TCHECK(fabs(mean - tmean) <= 1e-6 * fabs(tmean), "%s case %d: mean %g vs torch %g", bename, c,
           mean, tmean);
    TCHECK(fabs(wsum - get(c, "wsum", NULL)[0]) <= 1e-6 * wsum, "weight sum");
    /* weights NULL: the unweighted op, bit for bit */
    float *l0 = vt_malloc(sizeof(float) * (size_t)n), *d0 = vt_malloc(sizeof(float) * nz);
    VT_OP(be, softmax_xent, l0, d0, NULL, z, y, n, k, eps, 0.25f);
    VT_OP(be, softmax_xent_w, loss, dz, NULL, z, y, NULL, n, k, eps, 0.25f);
    TCHECK(!memcmp(l0, loss, sizeof(float) * (size_t)n) && !memcmp(d0, dz, sizeof(float) * nz),
           "%s case %d: softmax_xent_w without weights differs from softmax_xent", bename, c);
    free(l0);
    free(d0);
    free(y);
    free(loss);
    free(dz);
    free(prob);
    vt_backend_free(&be);
}

static void test_op(void) {
    if (vt_test_oracle_recs("test_balance_op", "torch_balance", "torch", &g_recs) <= 0) {
        printf("SKIP the op against PyTorch\n");
        return;
    }
    for (int c = 0; c < 4; c++) {
        op_case("cpu-ref", c);
        op_case("cpu", c);
    }
    vt_test_recs_free(&g_recs);
}

/* ---------------------------------------------------------------- 2. the towers ---- */

#define NCLASS 5
#define B 16

/* 12 clips of classes 0-2 first, the 4 clips of the rare classes 3 and 4 last: a 3:1
 * split puts every rare clip on the small tower. */
static void batch_make(vt_batch *b, uint64_t seed) {
    vt_test_batch_make(b, B, 4, 16, 16, NCLASS, seed); /* its clips; the labels set here */
    for (int i = 0; i < B; i++)
        b->label[0][i] = i < 12 ? i % 3 : 3 + i % 2;
}

/* What train3x varies beyond the split: the loss's class weights or logit adjustment,
 * and a shift of fc.bias right after initialisation (all NULL: the plain run). */
typedef struct loss_opts {
    const float *cw, *adj, *bias_shift;
} loss_opts;

static int64_t g_fc_bias; /* fc.bias's offset in the parameter arena (train3x) */

/* Parameters after 3 SGD steps on `batches`, `split` a slice policy (no weight decay). */
static float *train3x(const char *split, int ntowers, int64_t budget1, const loss_opts *lo,
                      vt_batch *batches, int64_t *np) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    vt_net_cfg_default(&cfg.net, "tiny_nobn", NCLASS, 4, 16, 16);
    vt_optim_cfg_default(&cfg.optim, VT_OPT_SGD);
    cfg.optim.momentum = 0.9f;
    cfg.optim.wd = 0; /* a shifted bias would decay differently */
    cfg.seed = 28;
    cfg.batch = B;
    cfg.class_weight[0] = lo->cw;
    cfg.logit_adjust[0] = lo->adj;
    char err[512];
    VT_CHECK(vt_slice_policy_parse(&cfg.policy, split, err, sizeof err) == 0, "%s", err);
    cfg.devices.n = ntowers;
    for (int i = 0; i < ntowers; i++) {
        vt_device *d = &cfg.devices.dev[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "cpu%d", i);
        snprintf(d->backend, sizeof d->backend, "%s", i ? "cpu-ref" : "cpu");
        d->ordinal = i;
        d->threads = 1;
        d->budget = i == 1 ? budget1 : 0;
        d->slowdown = 1;
    }
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    VT_CHECK(t, "towers: %s", err);
    g_fc_bias = vt_net_find_tensor(vt_towers_net(t, 0), "fc.bias")->offset;
    if (lo->bias_shift) { /* fc.bias += shift on replica 0, then every replica */
        float *b = vt_net_params(vt_towers_net(t, 0)) + g_fc_bias;
        for (int c = 0; c < NCLASS; c++)
            b[c] += lo->bias_shift[c];
        vt_towers_sync_from(t, 0);
    }
    for (int s = 0; s < 3; s++) {
        vt_step_stats st;
        vt_towers_train_step(t, &batches[s], 0.05f, &st);
    }
    *np = vt_net_num_params(vt_towers_net(t, 0));
    float *p = vt_malloc(sizeof(float) * (size_t)*np);
    memcpy(p, vt_net_params(vt_towers_net(t, 0)), sizeof(float) * (size_t)*np);
    vt_towers_free(&t);
    return p;
}

static void batches_free(vt_batch *batches) {
    for (int s = 0; s < 3; s++)
        vt_test_batch_free(&batches[s]);
}

static float *train3(const char *split, int ntowers, int64_t budget1, const float *cw,
                     vt_batch *batches, int64_t *np) {
    const loss_opts lo = {cw, NULL, NULL};
    return train3x(split, ntowers, budget1, &lo, batches, np);
}

static double rel_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        m = VT_MAX(m, fabs((double)b[i]));
    return vt_max_abs_diff(a, b, n) / m;
}

static void test_towers(void) {
    vt_batch batches[3];
    for (int s = 0; s < 3; s++)
        batch_make(&batches[s], 100 + (uint64_t)s);
    /* inverse frequency of the batch's classes (4,4,4,2,2): the rare ones weigh double */
    const int64_t count[NCLASS] = {4, 4, 4, 2, 2};
    float cw[NCLASS];
    vt_balance_weights(cw, count, NCLASS);
    int64_t np;
    float *one = train3("equal", 1, 0, cw, batches, &np);
    float *split = train3("manual:3,1", 2, 0, cw, batches, &np);
    /* the small tower's budget holds 2 clips a pass: its 4 rare clips in 2 passes */
    vt_memplan mp;
    char err[256];
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, "tiny_nobn", NCLASS, 4, 16, 16);
    nc.exact = 1; /* CPU towers sum exactly (tower.h) */
    VT_CHECK(vt_memplan_build(&mp, &nc, 1, err, sizeof err) == 0, "%s", err);
    int64_t budget = mp.fixed_bytes + 2 * mp.bytes_per_clip + mp.bytes_per_clip / 2;
    vt_memplan_free(&mp);
    float *micro = train3("manual:3,1", 2, budget, cw, batches, &np);
    float *plain = train3("equal", 1, 0, NULL, batches, &np);
    double d_split = rel_diff(split, one, np), d_micro = rel_diff(micro, one, np);
    double d_plain = rel_diff(plain, one, np);
    printf("  towers, weighted: 3:1 vs one %.2e, 3:1 with micro-batches %.2e; unweighted vs "
           "weighted %.2e\n", d_split, d_micro, d_plain);
    /* 1e-5 of the largest parameter: test_towers.c's tolerance (float sums in another
     * order over 3 momentum steps stay below 1e-6); a per-tower weighted mean moves the
     * parameters as far as dropping the weights does (d_plain, checked to be > 1e-4). */
    TCHECK(d_split <= 1e-5, "weighted 3:1 split differs from one tower by %g", d_split);
    TCHECK(d_micro <= 1e-5, "weighted split with micro-batches differs by %g", d_micro);
    TCHECK(d_plain > 1e-4, "the weights changed nothing (%g): the test could not fail", d_plain);
    free(one);
    free(split);
    free(micro);
    free(plain);
    batches_free(batches);
}

/* --balance logit: the loss on logits + adj. Its outside truth is an identity: softmax(Wx
 * + b + adj) is the plain loss of a classifier whose bias is b + adj, so 3 steps with the
 * adjustment must equal 3 plain steps from fc.bias + adj (then minus adj), every other
 * parameter too: the same gradients, to float rounding (z + adj is rounded once in the
 * first, b + adj in the second: 1e-6 of the largest parameter covers it; fc.bias itself,
 * shifted and shifted back, within 2e-6 absolute). On towers 3:1
 * (cpu + cpu-ref) it equals one tower as every loss does (1e-5, test_towers.c's). */
static void test_logit(void) {
    vt_batch batches[3];
    for (int s = 0; s < 3; s++)
        batch_make(&batches[s], 300 + (uint64_t)s);
    const int64_t count[NCLASS] = {40, 40, 40, 5, 5}; /* x8: the adjustment is 2.08 */
    float adj[NCLASS];
    vt_balance_log_priors(adj, count, NCLASS);
    TCHECK(fabsf(adj[0] - logf(40.0f / 130)) < 1e-6f && fabsf(adj[3] - logf(5.0f / 130)) < 1e-6f,
           "log priors %g %g", (double)adj[0], (double)adj[3]);
    int64_t np;
    const loss_opts la = {NULL, adj, NULL}, shifted = {NULL, NULL, adj}, plain = {0};
    float *a = train3x("equal", 1, 0, &la, batches, &np);
    float *b = train3x("equal", 1, 0, &shifted, batches, &np);
    float *p = train3x("equal", 1, 0, &plain, batches, &np);
    float *s = train3x("manual:3,1", 2, 0, &la, batches, &np);
    for (int c = 0; c < NCLASS; c++)
        b[g_fc_bias + c] -= adj[c];
    /* fc.bias apart: b + adj - adj rounds twice near |adj| ~ 2 (2.4e-7 an ulp) */
    double d_bias = vt_max_abs_diff(a + g_fc_bias, b + g_fc_bias, NCLASS);
    for (int c = 0; c < NCLASS; c++)
        b[g_fc_bias + c] = a[g_fc_bias + c];
    double d_id = rel_diff(a, b, np), d_plain = rel_diff(a, p, np), d_split = rel_diff(s, a, np);
    printf("  logit-adjusted vs shifted bias %.2e (fc.bias %.2e), vs plain %.2e; 3:1 vs one "
           "%.2e\n", d_id, d_bias, d_plain, d_split);
    TCHECK(d_id <= 1e-6, "logit adjustment != a shifted bias (%g)", d_id);
    TCHECK(d_bias <= 2e-6, "logit adjustment != a shifted bias: fc.bias by %g", d_bias);
    TCHECK(d_plain > 1e-4, "the adjustment changed nothing (%g): the test could not fail",
           d_plain);
    TCHECK(d_split <= 1e-5, "logit-adjusted 3:1 split differs from one tower by %g", d_split);
    free(a);
    free(b);
    free(p);
    free(s);
    batches_free(batches);
}

/* ---------------------------------------------------------------- 3. order, weights ---- */

static void test_order(void) {
    enum { N = 103, K = 5 };
    int32_t cls[N], perm[N], again[N], next[N];
    const int64_t want[K] = {80, 15, 5, 3, 0}; /* class 4 has no sample */
    int64_t cnt[K] = {0};
    for (int i = 0, c = 0; i < N; i++) {
        while (cnt[c] == want[c])
            c++;
        cls[i] = c;
        cnt[c]++;
    }
    int32_t *scratch = vt_malloc(sizeof(int32_t) * (size_t)vt_balance_scratch(N, K));
    vt_balance_order(perm, cls, N, K, 7, 3, scratch);
    vt_balance_order(again, cls, N, K, 7, 3, scratch);
    vt_balance_order(next, cls, N, K, 7, 4, scratch);
    TCHECK(!memcmp(perm, again, sizeof perm), "the order is not a function of (seed, epoch)");
    TCHECK(memcmp(perm, next, sizeof perm), "epoch 4 drew epoch 3's order");
    int64_t got[K] = {0}, times[N] = {0};
    int ok = 1;
    for (int i = 0; i < N; i++) {
        ok &= perm[i] >= 0 && perm[i] < N;
        if (perm[i] >= 0 && perm[i] < N) {
            got[cls[perm[i]]]++;
            times[perm[i]]++;
        }
    }
    TCHECK(ok, "an index outside the samples");
    /* 103 slots over the 4 classes that have samples: 25 or 26 each, none for class 4 */
    for (int c = 0; c < 4; c++)
        TCHECK(got[c] == 25 || got[c] == 26, "class %d drawn %lld times, not 103/4", c,
               (long long)got[c]);
    TCHECK(got[4] == 0 && got[0] + got[1] + got[2] + got[3] == N, "slots add up");
    /* within a class, floor or ceil of slots / samples each (class 3: 3 samples, ~8.5) */
    for (int i = 0; i < N; i++) {
        int c = cls[i];
        int64_t lo = got[c] / want[c], hi = (got[c] + want[c] - 1) / want[c];
        TCHECK(times[i] >= lo && times[i] <= hi, "sample %d of class %d drawn %lld times "
               "(want %lld..%lld)", i, c, (long long)times[i], (long long)lo, (long long)hi);
    }
    printf("  order: 103 samples of classes 80/15/5/3/0 -> %lld/%lld/%lld/%lld/%lld\n",
           (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3],
           (long long)got[4]);
    free(scratch);

    float w[K];
    vt_balance_weights(w, want, K);
    double mean = 0;
    for (int c = 0; c < K; c++)
        mean += (double)want[c] * w[c];
    mean /= N;
    /* N / (C n_c) with C = 4: 103/320, 103/60, 103/20, 103/12; float rounding 6e-8 */
    TCHECK(fabs(mean - 1) < 1e-6, "mean weight over the samples %.9f, not 1", mean);
    TCHECK(fabs(w[3] - 103.0 / 12) < 1e-5 && fabs(w[0] - 103.0 / 320) < 1e-6 && w[4] == 1.0f,
           "weights %g %g %g", (double)w[0], (double)w[3], (double)w[4]);
    TCHECK(fabs(vt_balance_ratio(want, K) - 80.0 / 3) < 1e-12, "ratio ignores empty classes");
    TCHECK(vt_balance_parse("sampler") == VT_BALANCE_SAMPLER && vt_balance_parse("x") < 0, "parse");

    /* --balance auto from counts: the bench's x8 set gets the default, UCF-101's spread
     * (100-167, x1.67), exactly x2 (not above) and a missing class (not counted) none */
    const int64_t bench[6] = {24, 24, 24, 3, 3, 3}, ucf[2] = {100, 167}, two[3] = {10, 10, 5},
                  over[3] = {11, 10, 5}, gap[3] = {12, 0, 12}, one[1] = {7};
    TCHECK(vt_balance_auto(bench, 6) == VT_BALANCE_DEFAULT && vt_balance_auto(over, 3) ==
               VT_BALANCE_DEFAULT, "auto on x8 and x2.2: %s %s, not %s",
           vt_balance_name(vt_balance_auto(bench, 6)), vt_balance_name(vt_balance_auto(over, 3)),
           vt_balance_name(VT_BALANCE_DEFAULT));
    TCHECK(vt_balance_auto(ucf, 2) == VT_BALANCE_NONE && vt_balance_auto(two, 3) == VT_BALANCE_NONE &&
               vt_balance_auto(gap, 3) == VT_BALANCE_NONE && vt_balance_auto(one, 1) == VT_BALANCE_NONE,
           "auto on a balanced split is not none");
    TCHECK(VT_BALANCE_DEFAULT != VT_BALANCE_AUTO, "VT_BALANCE_DEFAULT must be a mode");
}

/* ---------------------------------------------------------------- 4. the loader ---- */

/* One epoch's label counts (head 0) and the clips' videos in order into vids (n). */
static int64_t loader_epoch(vt_dataset *ds, const int32_t *idx, int n, int balance, int64_t *count,
                            int32_t *vids, int cap) {
    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.batch = 4;
    c.workers = 1;
    c.seed = 5;
    c.clip.t = 4;
    c.clip.stride = 2;
    c.clip.crop = 32;
    c.clip.short_side = 36;
    c.clip.jitter_min = 36;
    c.clip.jitter_max = 40;
    c.indices = idx;
    c.nindices = n;
    c.balance = balance;
    char err[512];
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "loader: %s", err);
    if (!l)
        return 0;
    int64_t got = 0;
    const vt_batch *b;
    while ((b = vt_loader_next(l)) != NULL)
        for (int i = 0; i < b->n; i++, got++) {
            count[b->label[0][i]]++;
            if (got < cap)
                vids[got] = b->video[i];
        }
    vt_loader_free(&l);
    return got;
}

static void test_loader(const char *data) {
    char err[1024];
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL, "%s: %s", data, err);
    if (!ds)
        return;
    vt_dataset_probe(ds, 1, 0, NULL, NULL);
    int32_t *idx = NULL;
    int n = vt_dataset_split_indices(ds, VT_SPLIT_TRAIN, &idx);
    int64_t raw[3] = {0}, bal[3] = {0}, bal2[3] = {0};
    int32_t v1[64], v2[64];
    int64_t got = loader_epoch(ds, idx, n, 0, raw, v1, 64);
    /* the set: 12, 12 and 3 training videos (main() cut class 2) */
    TCHECK(got == 27 && raw[0] == 12 && raw[1] == 12 && raw[2] == 3,
           "shuffled epoch: %lld clips, %lld/%lld/%lld", (long long)got, (long long)raw[0],
           (long long)raw[1], (long long)raw[2]);
    got = loader_epoch(ds, idx, n, 1, bal, v1, 64);
    loader_epoch(ds, idx, n, 1, bal2, v2, 64);
    printf("  loader: an epoch of 27 clips, shuffled %lld/%lld/%lld, balanced %lld/%lld/%lld\n",
           (long long)raw[0], (long long)raw[1], (long long)raw[2], (long long)bal[0],
           (long long)bal[1], (long long)bal[2]);
    TCHECK(got == 27 && bal[0] == 9 && bal[1] == 9 && bal[2] == 9,
           "balanced epoch: %lld clips, %lld/%lld/%lld (want 9 each)", (long long)got,
           (long long)bal[0], (long long)bal[1], (long long)bal[2]);
    TCHECK(got <= 64 && !memcmp(v1, v2, sizeof(int32_t) * (size_t)got),
           "two loaders drew different balanced epochs from the same seed");
    free(idx);
    vt_dataset_free(&ds);
}

/* ---------------------------------------------------------------- 5. the command ---- */

static int has(const char *text, const char *what) { return text && strstr(text, what) != NULL; }

/* out = dir/name (a scratch path: too long is the test's own error). */
static void join(char *out, size_t n, const char *dir, const char *name) {
    int r = snprintf(out, n, "%s/%s", dir, name);
    VT_CHECK(r > 0 && (size_t)r < n, "path %s/%s too long", dir, name);
}

/* RUN/config.json's "balance". */
static void config_balance(const char *run, char *out, size_t n) {
    char path[4300];
    join(path, sizeof path, run, "config.json");
    cJSON *j = vt_test_read_json(path);
    const cJSON *b = j ? cJSON_GetObjectItemCaseSensitive(j, "balance") : NULL;
    snprintf(out, n, "%s", cJSON_IsString(b) ? b->valuestring : "(none)");
    cJSON_Delete(j);
}

static void test_command(const char *bin, const char *dir, const char *data) {
    char log[4300], run[4300], mode[32];
    const char *small = "--epochs 1 --batch 4 --clip 4x32 --stride 2 --workers 1 --val-clips 1 "
                        "--precise-bn 0 --quiet";
    join(log, sizeof log, dir, "scan.txt");
    TCHECK(vt_test_sh("'%s' scan '%s' > '%s' 2>&1", bin, data, log) == 0, "scan");
    char *t = vt_test_slurp(log, NULL);
    TCHECK(has(t, "imbalance (largest / smallest class): train x4.0") &&
               has(t, "warning: the train split's classes are imbalanced (x4.0"),
           "scan: no imbalance line or warning:\n%s", t ? t : "");
    free(t);

    join(run, sizeof run, dir, "run_auto");
    join(log, sizeof log, dir, "train_auto.txt");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' %s > '%s' 2>&1", bin, data, run, small, log) == 0,
           "train, --balance auto");
    t = vt_test_slurp(log, NULL);
    char want[64];
    snprintf(want, sizeof want, "balance: %s", vt_balance_name(VT_BALANCE_DEFAULT));
    TCHECK(has(t, "training class counts: move_left 12 move_right 12 move_up 3") &&
               has(t, "warning: imbalanced classes: move_left has 12, move_up 3 (x4.0") &&
               has(t, want) && has(t, "validation classes imbalanced (x4.0)") &&
               has(t, "done: best validation mean class accuracy"),
           "train auto on the imbalanced set:\n%s", t ? t : "");
    free(t);
    config_balance(run, mode, sizeof mode);
    TCHECK(!strcmp(mode, vt_balance_name(VT_BALANCE_DEFAULT)), "config.json balance %s", mode);

    join(run, sizeof run, dir, "run_loss");
    join(log, sizeof log, dir, "train_loss.txt");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' %s --balance loss > '%s' 2>&1", bin, data, run,
                      small, log) == 0, "train --balance loss");
    t = vt_test_slurp(log, NULL);
    /* 27 samples, 3 classes: 27/(3*12) = 0.75, 27/(3*3) = 3 */
    TCHECK(has(t, "balance: loss, class weights: move_left 0.75, move_right 0.75, move_up 3"),
           "loss weights:\n%s", t ? t : "");
    free(t);
    config_balance(run, mode, sizeof mode);
    TCHECK(!strcmp(mode, "loss"), "config.json balance %s", mode);

    join(run, sizeof run, dir, "run_bad");
    join(log, sizeof log, dir, "train_bad.txt");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' %s --class-weights 1,2 > '%s' 2>&1", bin, data,
                      run, small, log) == 2, "--class-weights with 2 weights for 3 classes: exit 2");
    t = vt_test_slurp(log, NULL);
    TCHECK(has(t, "'1,2' has 2 weights for 3 classes"), "message:\n%s", t ? t : "");
    free(t);
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' %s --balance sampler --class-weights 1,1,2 "
                      "> '%s' 2>&1", bin, data, run, small, log) == 2,
           "--class-weights with --balance sampler: exit 2");
}

/* ---------------------------------------------------------------- 6. ranks ---- */

/* mpirun -np 2 against one process, for --balance sampler and loss: every rank must
 * build the same balanced epoch, and the weighted mean must divide by the weight of the
 * whole step, every rank's clips. */
static void test_ranks(const char *bin, const char *dir, const char *data) {
    const char *mpirun = getenv("VT_MPIRUN");
#ifndef VT_HAVE_MPI
    mpirun = NULL; /* vidtrain built without MPI */
#endif
    if (!mpirun || !*mpirun) {
        printf("SKIP ranks: no mpirun (VT_MPIRUN)\n");
        return;
    }
    const char *common = "--model tiny_nobn --clip 4x32 --stride 2 --batch 8 --epochs 2 --lr 0.05 "
                         "--seed 3 --workers 1 --threads 1 --max-steps 3 -q --eval-every 100";
    const char *modes[2] = {"sampler", "loss"};
    const char *asan = getenv("ASAN_OPTIONS");
    for (int m = 0; m < 2; m++) {
        char one[4400], two[4400], a[4500], b[4500];
        snprintf(one, sizeof one, "%s/one_%s", dir, modes[m]);
        snprintf(two, sizeof two, "%s/two_%s", dir, modes[m]);
        TCHECK(vt_test_sh("'%s' train '%s' --out '%s' %s --balance %s --devices cpu:1 > '%s.log' "
                          "2>&1", bin, data, one, common, modes[m], one) == 0, "one process, %s",
               modes[m]);
        /* Sanitizer runs: Open MPI's process-lifetime allocations are suppressed by
         * library name (tests/lsan.supp), which needs whole stacks (test_mpi.c) */
        TCHECK(vt_test_sh("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                          "OMPI_MCA_mca_base_component_disable_dlclose=1%s%s%s '%s' --oversubscribe "
                          "--bind-to none -np 2 '%s' train '%s' --out '%s' %s --balance %s "
                          "--devices cpu:1 > '%s.log' 2>&1",
                          asan ? " ASAN_OPTIONS='" : "", asan ? asan : "",
                          asan ? ":fast_unwind_on_malloc=0'" : "", mpirun, bin, data, two, common,
                          modes[m], two) == 0,
               "mpirun -np 2, %s", modes[m]);
        snprintf(a, sizeof a, "%s/last.safetensors", two);
        snprintf(b, sizeof b, "%s/last.safetensors", one);
        double d = vt_test_ckpt_diff(a, b, "", NULL);
        printf("  2 ranks vs one process, --balance %s: max rel diff %.3g\n", modes[m], d);
        /* 1e-5: test_mpi.c's bound (the same sums in another order over 3 SGD steps,
         * ~1e-7); another epoch order on one rank, or a rank's own weight sum, is > 1e-3 */
        TCHECK(d >= 0 && d <= 1e-5, "--balance %s: 2 ranks vs one process differ by %g",
               modes[m], d);
    }
}

int main(void) {
    printf("1. the weighted loss op against PyTorch\n");
    test_op();
    printf("2. weighted towers\n");
    test_towers();
    printf("2b. logit-adjusted loss\n");
    test_logit();
    printf("3. balanced order and weights\n");
    test_order();
    const char *bin = vt_test_bin("test_balance");
    if (!bin)
        return vt_test_done("test_balance");
    const char *dir = vt_test_dir("balance");
    char data[4300], ddir[4300];
    snprintf(ddir, sizeof ddir, "%s", dir);
    join(data, sizeof data, ddir, "data");
    if (vt_test_synth(bin, ddir, "--classes 3 --train 12 --val 4 --test 0 --frames 24 "
                                 "--size 64x48 --no-h264 --threads 1") != 0) {
        TCHECK(0, "synth failed (see %s/synth.log)", ddir);
        return vt_test_done("test_balance");
    }
    /* a balanced set first: auto leaves it alone */
    char run[4300], log[4300], mode[32];
    join(run, sizeof run, ddir, "run_even");
    join(log, sizeof log, ddir, "train_even.txt");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' --epochs 1 --batch 4 --clip 4x32 --stride 2 "
                      "--workers 1 --max-steps 3 --quiet > '%s' 2>&1", bin, data, run, log) == 0,
           "train on the balanced set");
    char *t = vt_test_slurp(log, NULL);
    TCHECK(has(t, "balance: none") && !has(t, "warning: imbalanced"), "balanced set:\n%s",
           t ? t : "");
    free(t);
    config_balance(run, mode, sizeof mode);
    TCHECK(!strcmp(mode, "none"), "config.json balance %s on a balanced set", mode);
    /* and trains bit for bit as --balance none: the same epoch order, no weights */
    char even[4300], a[4400], b[4400];
    join(even, sizeof even, ddir, "run_even_none");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s' --epochs 1 --batch 4 --clip 4x32 --stride 2 "
                      "--workers 1 --max-steps 3 --quiet --balance none > '%s.log' 2>&1", bin,
                      data, even, even) == 0, "train --balance none on the balanced set");
    snprintf(a, sizeof a, "%s/last.safetensors", run);
    snprintf(b, sizeof b, "%s/last.safetensors", even);
    double d = vt_test_ckpt_diff(a, b, "", NULL);
    TCHECK(d == 0, "auto and none on a balanced set: parameters differ by %g (want 0)", d);
    /* cut move_up to a quarter: 3 of its 12 training videos, 1 of its 4 validation ones */
    TCHECK(vt_test_sh("cd '%s/train/move_up' && ls | sort | tail -n +4 | xargs rm -f && "
                      "cd '%s/val/move_up' && ls | sort | tail -n +2 | xargs rm -f", data, data) == 0,
           "cutting a class");
    printf("4. the loader\n");
    test_loader(data);
    printf("5. the command\n");
    test_command(bin, ddir, data);
    printf("6. ranks\n");
    test_ranks(bin, ddir, data);
    return vt_test_done("test_balance");
}
