/*
 * test_memcap.c: docs/design.md §3.3 — a tower never allocates past its budget. The
 * outside truth is the allocator's own high-water mark (models/backend.c records every
 * vt_backend_alloc), not the plan's estimate. Budgets are made small enough that the
 * plan must use micro-batches; a budget that cannot hold one clip is a clear error, both
 * from vt_towers_init and from the command line (`vidtrain bench step --mem`).
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/towers/tower.h"
#include "tests/testutil.h"
#include "tests/towerutil.h"

static vt_net_cfg net_cfg(void) {
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, "tiny", 4, 4, 16, 16);
    nc.exact = 1; /* CPU towers sum exactly (tower.h): their plan counts it */
    return nc;
}

static void set_devices(vt_towers_cfg *cfg, int n, const int64_t *budgets, const double *speeds) {
    vt_test_cpu_towers(cfg, n);
    for (int i = 0; i < n; i++) {
        cfg->devices.dev[i].budget = budgets[i];
        cfg->devices.dev[i].speed = speeds ? speeds[i] : 0;
    }
}

/* Run steps and check every tower's high-water mark against its budget. */
static void run_checked(const char *what, vt_towers_cfg *cfg, vt_batch *b, int want_mb) {
    char err[512];
    vt_towers *t = vt_towers_init(cfg, err, sizeof err);
    TCHECK(t != NULL, "%s: %s", what, err);
    if (!t)
        return;
    const vt_plan *p = vt_towers_plan(t);
    int micro = 0;
    for (int i = 0; i < cfg->devices.n; i++)
        micro |= p->nmb[i] > 1;
    TCHECK(micro == want_mb, "%s: plan %s micro-batches", what, want_mb ? "lacks" : "has");
    vt_towers_print_plan(t, stdout);
    for (int s = 0; s < 3; s++) {
        vt_step_stats st;
        vt_towers_train_step(t, b, 0.01f, &st);
        for (int i = 0; i < cfg->devices.n; i++)
            TCHECK(st.passes[i] == p->nmb[i] || (cfg->sync_bn && st.passes[i] >= p->nmb[i]),
                   "%s: tower %d ran %d passes, plan says %d", what, i, st.passes[i], p->nmb[i]);
    }
    float *probs[VT_MAX_HEADS] = {vt_malloc((size_t)b->n * 4 * sizeof(float))};
    vt_towers_eval_step(t, b, probs, NULL);
    free(probs[0]);
    const vt_memplan *mp = vt_towers_memplan(t);
    for (int i = 0; i < cfg->devices.n; i++) {
        vt_backend *be = vt_towers_backend(t, i);
        char a[32], c[32];
        printf("  %s tower %d: high water %s of budget %s (plan: %d clips/pass)\n", what, i,
               vt_fmt_bytes(a, sizeof a, be->high_water), vt_fmt_bytes(c, sizeof c, be->budget),
               p->mb[i]);
        TCHECK(be->high_water <= be->budget, "%s: tower %d high water %lld > budget %lld", what, i,
               (long long)be->high_water, (long long)be->budget);
        /* the memory plan's contract: fixed + mb * per clip bounds what was allocated */
        TCHECK(be->high_water <= mp->fixed_bytes + (int64_t)p->mb[i] * mp->bytes_per_clip,
               "%s: tower %d high water %lld > plan %lld", what, i, (long long)be->high_water,
               (long long)(mp->fixed_bytes + (int64_t)p->mb[i] * mp->bytes_per_clip));
    }
    vt_towers_free(&t);
}

int main(void) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    cfg.net = net_cfg();
    cfg.batch = 16;
    char err[512];
    vt_memplan mp;
    VT_CHECK(vt_memplan_build(&mp, &cfg.net, vt_optim_state_per_param(&cfg.optim), err, sizeof err) == 0,
             "%s", err);
    /* budgets that hold 3 and 5 clips per pass (+ half a clip of slack) */
    int64_t b3 = mp.fixed_bytes + 3 * mp.bytes_per_clip + mp.bytes_per_clip / 2;
    int64_t b5 = mp.fixed_bytes + 5 * mp.bytes_per_clip + mp.bytes_per_clip / 2;
    vt_batch b;
    vt_test_batch_make(&b, 16, 4, 16, 16, 4, 5);

    int64_t budgets[2] = {b3, b5};
    set_devices(&cfg, 2, budgets, NULL);
    vt_slice_policy_parse(&cfg.policy, "equal", err, sizeof err);
    run_checked("equal 8:8 on 3|5 clips/pass", &cfg, &b, 1);

    /* speed with known speeds 3:1 puts 12 clips on the 3-clip tower: 4 passes */
    double speeds[2] = {30, 10};
    set_devices(&cfg, 2, budgets, speeds);
    vt_slice_policy_parse(&cfg.policy, "speed", err, sizeof err);
    cfg.sync_bn = 1;
    run_checked("speed 12:4 sync-bn", &cfg, &b, 1);
    cfg.sync_bn = 0;

    /* a budget that fits everything: one pass, still within the budget */
    int64_t big[1] = {mp.fixed_bytes + 20 * mp.bytes_per_clip};
    set_devices(&cfg, 1, big, NULL);
    vt_slice_policy_parse(&cfg.policy, "equal", err, sizeof err);
    run_checked("one tower, room for 20", &cfg, &b, 0);

    /* too small for one clip: a clear error naming the tower and the sizes */
    int64_t tiny[2] = {b5, mp.fixed_bytes + mp.bytes_per_clip / 2};
    set_devices(&cfg, 2, tiny, NULL);
    err[0] = 0;
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t == NULL, "budget below one clip accepted");
    TCHECK(strstr(err, "cpu1") && strstr(err, "cannot hold one clip"), "error says which: %s", err);
    printf("too small -> %s\n", err);
    vt_towers_free(&t);

    /* and from the command line */
    const char *bin = getenv("VT_BIN");
    if (bin && *bin) {
        char cmd[9000];
        const char *dir = vt_test_dir("memcap");
        snprintf(cmd, sizeof cmd,
                 "'%s' bench step --model tiny --clip 4x16x16 --batch 4 --devices cpu:1 --mem 64K "
                 "--steps 1 --warmup 0 > '%s/out.txt' 2>&1",
                 bin, dir);
        int rc = system(cmd);
        TCHECK(rc != 0, "bench step with a 64K budget succeeded");
        char path[4200], text[4096] = "";
        snprintf(path, sizeof path, "%s/out.txt", dir);
        FILE *f = fopen(path, "r");
        if (f) {
            size_t got = fread(text, 1, sizeof text - 1, f);
            text[got] = 0;
            fclose(f);
        }
        TCHECK(strstr(text, "cannot hold one clip") != NULL, "CLI error: %s", text);
    } else {
        printf("VT_BIN not set: command-line check skipped\n");
    }

    vt_memplan_free(&mp);
    vt_test_batch_free(&b);
    return vt_test_done("test_memcap");
}
