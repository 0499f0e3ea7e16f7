/*
 * test_slices.c: the splitter (pipeline/parallel/slices.c) over tables of device mixes — slices
 * sum to B, memory respected (micro-batch <= fits, passes cover the slice), predicted
 * step within 5% of the ideal B / sum(speeds) wherever memory and rounding allow;
 * equal/manual/memory policies; the auto controller on made-up timings; and the
 * device options (app/device_opts.c, which builds the list through
 * pipeline/parallel/device.c). The outside truth here is arithmetic: the ideal time and
 * exact proportional shares computed independently in the test.
 */
#include <string.h>

#include "app/device_opts.h"
#include "base/common.h"
#include "pipeline/parallel/device.h"
#include "pipeline/parallel/slices.h"
#include "tests/testutil.h"

static vt_slice_dev dev(const char *name, int fits, double speed) {
    vt_slice_dev d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.max_clips = fits;
    d.speed = speed;
    return d;
}

/* Invariants every plan must hold. */
static void check_plan(const vt_plan *p, const vt_slice_dev *d, int n, int B, const char *what) {
    int sum = 0;
    for (int i = 0; i < n; i++) {
        sum += p->slice[i];
        TCHECK(p->slice[i] >= 0, "%s: slice %d negative", what, i);
        if (d[i].max_clips <= 0)
            TCHECK(p->slice[i] == 0, "%s: tower %d holds nothing but got %d", what, i, p->slice[i]);
        if (p->slice[i] > 0) {
            TCHECK(p->mb[i] >= 1 && p->mb[i] <= d[i].max_clips, "%s: tower %d mb %d fits %d", what,
                   i, p->mb[i], d[i].max_clips);
            TCHECK((int64_t)p->nmb[i] * p->mb[i] >= p->slice[i] &&
                       (int64_t)(p->nmb[i] - 1) * p->mb[i] < p->slice[i],
                   "%s: tower %d %d passes of %d for %d clips", what, i, p->nmb[i], p->mb[i],
                   p->slice[i]);
        } else {
            TCHECK(p->nmb[i] == 0 && p->mb[i] == 0, "%s: idle tower %d has passes", what, i);
        }
    }
    TCHECK(sum == B, "%s: slices sum to %d, not B=%d", what, sum, B);
}

static void plan_ok(vt_plan *p, const char *policy, int B, int n, const vt_slice_dev *d) {
    vt_slice_policy pol;
    char err[256] = "";
    TCHECK(vt_slice_policy_parse(&pol, policy, err, sizeof err) == 0, "parse %s: %s", policy, err);
    int rc = vt_slice_plan(p, &pol, B, n, d, err, sizeof err);
    TCHECK(rc == 0, "plan %s B=%d: %s", policy, B, err);
    check_plan(p, d, n, B, policy);
}

static double ideal_time(const vt_slice_dev *d, int n, int B) {
    double s = 0;
    for (int i = 0; i < n; i++)
        if (d[i].max_clips > 0)
            s += d[i].speed;
    return B / s;
}

int main(void) {
    vt_plan p;
    char err[256];

    /* 12 GB + 6 GB cards, same speed: memory gives 2:1; speed gives 1:1 with micro-
     * batches on the small card (which holds 12 of its 16 at once). */
    {
        vt_slice_dev d[2] = {dev("g12", 24, 100), dev("g6", 12, 100)};
        plan_ok(&p, "memory", 24, 2, d);
        TCHECK(p.slice[0] == 16 && p.slice[1] == 8, "memory 12G+6G: %d,%d", p.slice[0], p.slice[1]);
        /* B beyond what fits: still 2:1, with micro-batches on both */
        plan_ok(&p, "memory", 72, 2, d);
        TCHECK(p.slice[0] == 48 && p.slice[1] == 24 && p.nmb[0] == 2 && p.nmb[1] == 2,
               "memory B=72: %d (%dx%d), %d (%dx%d)", p.slice[0], p.nmb[0], p.mb[0], p.slice[1],
               p.nmb[1], p.mb[1]);
        plan_ok(&p, "speed", 32, 2, d);
        TCHECK(p.slice[0] == 16 && p.slice[1] == 16, "speed: %d,%d", p.slice[0], p.slice[1]);
        TCHECK(p.nmb[1] == 2 && p.mb[1] == 12, "small card micro-batches %dx%d", p.nmb[1], p.mb[1]);
        /* within 5% of ideal: docs/design.md §4 goal figure */
        TCHECK(p.predicted <= 1.05 * ideal_time(d, 2, 32), "speed predicted %f ideal %f",
               p.predicted, ideal_time(d, 2, 32));
    }
    /* speeds 3:2:1 */
    {
        vt_slice_dev d[3] = {dev("a", 1000, 30), dev("b", 1000, 20), dev("c", 1000, 10)};
        plan_ok(&p, "speed", 60, 3, d);
        TCHECK(p.slice[0] == 30 && p.slice[1] == 20 && p.slice[2] == 10, "3:2:1 -> %d,%d,%d",
               p.slice[0], p.slice[1], p.slice[2]);
        TCHECK(fabs(p.predicted - 1.0) < 1e-9 && fabs(p.ideal - 1.0) < 1e-9,
               "3:2:1 predicted %f ideal %f", p.predicted, p.ideal);
        plan_ok(&p, "speed", 64, 3, d);
        TCHECK(p.predicted <= 1.05 * ideal_time(d, 3, 64), "3:2:1 B=64 %f vs %f", p.predicted,
               ideal_time(d, 3, 64));
        plan_ok(&p, "equal", 60, 3, d);
        TCHECK(p.slice[0] == 20 && p.slice[1] == 20 && p.slice[2] == 20, "equal 60/3");
        /* equal on the 3:2:1 mix is 2x the ideal: speed beats it */
        TCHECK(fabs(p.predicted - 2.0) < 1e-9, "equal predicted %f", p.predicted);
    }
    /* one device with tiny memory but fast: it still gets its speed share, in passes */
    {
        vt_slice_dev d[2] = {dev("fast_small", 2, 40), dev("slow_big", 100, 10)};
        plan_ok(&p, "speed", 50, 2, d);
        TCHECK(p.slice[0] == 40 && p.slice[1] == 10, "tiny-fast %d,%d", p.slice[0], p.slice[1]);
        TCHECK(p.mb[0] == 2 && p.nmb[0] == 20, "tiny-fast passes %dx%d", p.nmb[0], p.mb[0]);
        TCHECK(p.predicted <= 1.05 * ideal_time(d, 2, 50), "tiny-fast %f", p.predicted);
        plan_ok(&p, "memory", 51, 2, d);
        TCHECK(p.slice[0] == 1 && p.slice[1] == 50, "memory tiny-fast %d,%d", p.slice[0],
               p.slice[1]);
        /* a per-pass overhead of 0.1 s makes 20 passes cost 2 s: the refinement moves
         * clips to the big card (predicted must beat proportional shares' 3.0 s) */
        d[0].overhead = 0.1;
        plan_ok(&p, "speed", 50, 2, d);
        double prop = 40 / 40.0 + 20 * 0.1;
        TCHECK(p.predicted < prop && p.slice[1] > 10, "overhead refinement: %d,%d -> %f", p.slice[0],
               p.slice[1], p.predicted);
        /* and it is the optimum: no single-clip move improves it */
        for (int a = 0; a < 2; a++) {
            int b = 1 - a;
            if (p.slice[a] == 0)
                continue;
            double ta = vt_slice_time(&d[a], p.slice[a] - 1), tb = vt_slice_time(&d[b], p.slice[b] + 1);
            TCHECK(VT_MAX(ta, tb) >= p.predicted - 1e-12, "move %d->%d improves", a, b);
        }
    }
    /* B smaller than the number of devices */
    {
        vt_slice_dev d[4] = {dev("a", 8, 1), dev("b", 8, 1), dev("c", 8, 1), dev("d", 8, 1)};
        plan_ok(&p, "equal", 2, 4, d);
        TCHECK(p.slice[0] == 1 && p.slice[1] == 1 && p.slice[2] == 0 && p.slice[3] == 0,
               "B<n: %d %d %d %d (ties to the lower index)", p.slice[0], p.slice[1], p.slice[2],
               p.slice[3]);
        plan_ok(&p, "speed", 3, 4, d);
        plan_ok(&p, "memory", 1, 4, d);
        plan_ok(&p, "equal", 0, 4, d);
        TCHECK(p.predicted == 0 || p.predicted < 1e-12, "B=0 predicted %f", p.predicted);
    }
    /* zero-memory and unknown-speed devices */
    {
        vt_slice_dev d[3] = {dev("none", 0, 50), dev("a", 10, 20), dev("b", 10, 0)};
        plan_ok(&p, "equal", 9, 3, d);
        TCHECK(p.slice[0] == 0, "zero-memory gets nothing");
        plan_ok(&p, "speed", 40, 3, d);
        /* b's unknown speed is taken as the mean of the known usable ones (20) */
        TCHECK(p.slice[1] == 20 && p.slice[2] == 20, "unknown speed at mean: %d %d", p.slice[1],
               p.slice[2]);
        TCHECK(p.note[0] != 0, "note says speeds were assumed");
        vt_slice_dev u[2] = {dev("a", 30, 0), dev("b", 10, 0)};
        plan_ok(&p, "speed", 20, 2, u);
        /* memory shares weigh fits: 30 and 10 -> 15 and 5 */
        TCHECK(p.slice[0] == 15 && p.slice[1] == 5, "all unknown -> memory shares: %d %d",
               p.slice[0], p.slice[1]);
        TCHECK(p.predicted == 0, "unknown speeds: no prediction");
        vt_slice_dev z[2] = {dev("a", 0, 1), dev("b", 0, 1)};
        vt_slice_policy pol = {.kind = VT_SLICE_EQUAL};
        err[0] = 0;
        TCHECK(vt_slice_plan(&p, &pol, 4, 2, z, err, sizeof err) == -1 && err[0],
               "no tower holds a clip -> error");
        TCHECK(vt_slice_plan(&p, &pol, 0, 2, z, err, sizeof err) == 0, "B=0 on nothing is fine");
    }
    /* manual */
    {
        vt_slice_dev d[2] = {dev("a", 64, 0), dev("b", 64, 0)};
        plan_ok(&p, "manual:5,3", 32, 2, d);
        TCHECK(p.slice[0] == 20 && p.slice[1] == 12, "5:3 -> %d,%d", p.slice[0], p.slice[1]);
        plan_ok(&p, "manual:31,1", 32, 2, d);
        TCHECK(p.slice[0] == 31 && p.slice[1] == 1, "31:1 -> %d,%d", p.slice[0], p.slice[1]);
        plan_ok(&p, "manual:1,0", 7, 2, d);
        TCHECK(p.slice[0] == 7 && p.slice[1] == 0, "1:0 -> %d,%d", p.slice[0], p.slice[1]);
        vt_slice_policy pol;
        TCHECK(vt_slice_policy_parse(&pol, "manual:3,1,1", err, sizeof err) == 0, "parse 3 weights");
        TCHECK(vt_slice_plan(&p, &pol, 8, 2, d, err, sizeof err) == -1, "3 weights for 2 towers");
        TCHECK(vt_slice_policy_parse(&pol, "manual:0,0", err, sizeof err) == -1, "all-zero weights");
        TCHECK(vt_slice_policy_parse(&pol, "manual:", err, sizeof err) == -1, "no weights");
        TCHECK(vt_slice_policy_parse(&pol, "manual:2,x", err, sizeof err) == -1, "bad weight");
        TCHECK(vt_slice_policy_parse(&pol, "fastest", err, sizeof err) == -1, "unknown policy");
        vt_slice_dev z[2] = {dev("a", 64, 0), dev("b", 0, 0)};
        TCHECK(vt_slice_policy_parse(&pol, "manual:1,1", err, sizeof err) == 0, "parse 1,1");
        TCHECK(vt_slice_plan(&p, &pol, 8, 2, z, err, sizeof err) == -1, "weight on a full tower");
    }
    /* largest remainder: exact shares computed independently, ties to the lower index */
    {
        double w[3] = {1, 1, 1};
        int out[3];
        vt_slice_round(out, 10, w, 3);
        TCHECK(out[0] == 4 && out[1] == 3 && out[2] == 3, "10/3 -> %d %d %d", out[0], out[1], out[2]);
        double w2[3] = {0.1, 0.2, 0.7};
        vt_slice_round(out, 10, w2, 3);
        TCHECK(out[0] == 1 && out[1] == 2 && out[2] == 7, "0.1/0.2/0.7 of 10 -> %d %d %d", out[0],
               out[1], out[2]);
    }
    /* random tables: invariants for every policy; speed within 5% of ideal where each
     * usable tower's ideal share is >= 20 clips (rounding costs at most one clip on one
     * tower, i.e. <= 1/20 = 5%) */
    {
        vt_rng rng;
        vt_rng_seed(&rng, 7);
        const char *pols[] = {"equal", "memory", "speed", "auto"};
        int within = 0, tried = 0;
        for (int trial = 0; trial < 400; trial++) {
            int n = 1 + (int)vt_rng_below(&rng, 8);
            vt_slice_dev d[VT_MAX_DEVICES];
            int any = 0;
            for (int i = 0; i < n; i++) {
                int kind = (int)vt_rng_below(&rng, 10);
                int fits = kind == 0 ? 0 : kind == 1 ? VT_SLICE_UNLIMITED : 1 + (int)vt_rng_below(&rng, 64);
                d[i] = dev("r", fits, 1 + vt_rng_uniform(&rng) * 99);
                any |= fits > 0;
            }
            if (!any)
                d[0].max_clips = 5;
            int B = (int)vt_rng_below(&rng, 300);
            for (size_t k = 0; k < VT_ARRAY_LEN(pols); k++) {
                plan_ok(&p, pols[k], B, n, d);
                vt_plan q;
                vt_slice_policy pol;
                vt_slice_policy_parse(&pol, pols[k], err, sizeof err);
                vt_slice_plan(&q, &pol, B, n, d, err, sizeof err);
                TCHECK(!memcmp(p.slice, q.slice, sizeof p.slice), "deterministic %s", pols[k]);
            }
            plan_ok(&p, "speed", B, n, d);
            double ideal = ideal_time(d, n, B), minshare = 1e30;
            for (int i = 0; i < n; i++)
                if (d[i].max_clips > 0)
                    minshare = VT_MIN(minshare, d[i].speed * ideal);
            if (B > 0 && minshare >= 20) {
                tried++;
                within += p.predicted <= 1.05 * ideal;
                TCHECK(p.predicted <= 1.05 * ideal, "random speed plan %f vs ideal %f (n=%d B=%d)",
                       p.predicted, ideal, n, B);
            }
        }
        TCHECK(tried > 10, "random tables exercised the 5%% bound (%d)", tried);
        printf("random tables: %d/%d speed plans within 5%% of ideal\n", within, tried);
    }
    /* the auto controller on made-up timings: true rates 20 and 10 clips/s, per-pass
     * noise of +-8% from a fixed stream; start from the memory plan (12:12) */
    {
        vt_slice_dev d[2] = {dev("fast", 100, 0), dev("slow", 100, 0)};
        vt_plan plan;
        vt_slice_policy pol = {.kind = VT_SLICE_MEMORY};
        vt_slice_plan(&plan, &pol, 24, 2, d, err, sizeof err);
        plan.kind = VT_SLICE_AUTO;
        TCHECK(plan.slice[0] == 12, "auto starts from memory shares");
        vt_auto a;
        vt_auto_init(&a, 2);
        vt_rng rng;
        vt_rng_seed(&rng, 3);
        double rate[2] = {20, 10};
        int converged_at = -1;
        for (int step = 0; step < 12; step++) {
            double t[2];
            for (int i = 0; i < 2; i++)
                t[i] = plan.slice[i] / rate[i] * (1 + 0.16 * (vt_rng_uniform(&rng) - 0.5));
            vt_auto_observe(&a, &plan, d, plan.slice, t);
            check_plan(&plan, d, 2, 24, "auto");
            if (converged_at < 0 && abs(plan.slice[0] - 16) <= 1)
                converged_at = step;
        }
        /* 2:1 of 24 is 16:8; within 10% of it means slice0 in [14.4, 17.6] */
        TCHECK(plan.slice[0] >= 15 && plan.slice[0] <= 17, "auto ends at %d:%d", plan.slice[0],
               plan.slice[1]);
        TCHECK(converged_at >= 0 && converged_at <= 4, "auto converged at step %d", converged_at);
        TCHECK(a.replans <= 4, "auto re-planned %d times (no oscillation)", a.replans);
        /* a balanced plan is left alone: gains under 3% do not re-plan */
        for (int step = 0; step < 4; step++) { /* exact timings: settle at 16:8 */
            double t[2] = {plan.slice[0] / 20.0, plan.slice[1] / 10.0};
            vt_auto_observe(&a, &plan, d, plan.slice, t);
        }
        TCHECK(plan.slice[0] == 16, "exact timings settle at 16:8, got %d", plan.slice[0]);
        int before = a.replans;
        for (int step = 0; step < 5; step++) {
            double t[2] = {plan.slice[0] / 20.0, plan.slice[1] / 10.0};
            vt_auto_observe(&a, &plan, d, plan.slice, t);
        }
        TCHECK(a.replans == before, "stable plan re-planned");
    }

    /* device options */
    {
        vt_device_list l;
        vt_device_args a;
        memset(&a, 0, sizeof a);
        a.devices = "cpu:3";
        a.mem = "cpu0=2G,cpu1=1G";
        a.threads = 1;
        a.emulate = "1:2";
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == 0, "cpu:3: %s", err);
        TCHECK(l.n == 3, "3 towers");
        TCHECK(l.dev[0].budget == 2LL << 30 && l.dev[1].budget == 1LL << 30, "budgets");
        TCHECK(l.dev[2].budget >= 0, "default budget");
        TCHECK(!strcmp(l.dev[2].name, "cpu2") && !strcmp(l.dev[0].backend, "cpu"), "names");
        TCHECK(l.dev[1].slowdown == 2.0 && l.dev[0].slowdown == 1.0, "slowdown");
        a.mem = "cpu7=1G";
        err[0] = 0;
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == -1 && strstr(err, "cpu0"),
               "unknown tower name lists the towers: %s", err);
        memset(&a, 0, sizeof a);
        a.devices = "cpu-ref:2,cpu";
        a.mem = "512M";
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == 0 && l.n == 3, "mixed cpu: %s", err);
        TCHECK(!strcmp(l.dev[0].backend, "cpu-ref") && !strcmp(l.dev[2].backend, "cpu") &&
                   l.dev[2].budget == 512LL << 20,
               "cpu-ref:2,cpu");
        memset(&a, 0, sizeof a);
        a.devices = "tpu:1";
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == -1, "tpu is not a device");
        a.devices = "cpu:2";
        a.emulate = "5:2";
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == -1, "slowdown on a missing tower");
        a.emulate = "1:0.5";
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == -1, "speed-up is not a slowdown");
        /* GPUs: without CUDA (or without a GPU) asking for one is a clear error */
        memset(&a, 0, sizeof a);
        a.gpus = "64";
        err[0] = 0;
        TCHECK(vt_devices_from_args(&l, &a, err, sizeof err) == -1 && strstr(err, "GPU"),
               "64 GPUs: %s", err);
        printf("--gpus 64 -> %s\n", err);
        a.gpus = NULL;
        a.devices = "cuda:0,cpu:1";
        int rc = vt_devices_from_args(&l, &a, err, sizeof err);
#ifdef VT_HAVE_CUDA
        if (rc == 0)
            TCHECK(l.n == 2 && !strcmp(l.dev[0].backend, "cuda") && !strcmp(l.dev[1].name, "cpu0"),
                   "mixed cuda+cpu");
#else
        TCHECK(rc == -1 && strstr(err, "without CUDA"), "cuda without CUDA: %s", err);
#endif
        /* option taking */
        char *argv[] = {"x", "--devices", "cpu:2", "--gpu-mem=0:1G", "--threads", "3", "--other"};
        int argc = 7;
        memset(&a, 0, sizeof a);
        int took = 0;
        for (int i = 1; i < argc; i++)
            took += vt_device_args_take(&a, argc, argv, &i) == 1;
        TCHECK(took == 3 && a.threads == 3 && !strcmp(a.devices, "cpu:2") && !strcmp(a.gpu_mem, "0:1G"),
               "vt_device_args_take");
    }
    return vt_test_done("test_slices");
}
