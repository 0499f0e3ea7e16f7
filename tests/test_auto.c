/*
 * test_auto.c: the auto split policy on real towers. Two identical CPU towers (one thread
 * each); tower 1 carries the emulated 2x slowdown (it idles as long as it computed after
 * every micro-batch), so the truth is known: tower 0 is twice as fast and the step is
 * shortest at a 2:1 split. Auto starts from memory shares (12:12 of B = 24) and must
 * reach within 10% of 16:8 in a bounded number of steps and stay there; the parameters
 * must still be bitwise identical across replicas after the re-plans (which re-size
 * tower 0's replica). Timing on a shared machine is noisy, hence the EMA in the policy
 * and a window of steps rather than one step here.
 */
#include <string.h>

#include "models/common.h"
#include "models/net.h"
#include "pipeline/parallel/tower.h"
#include "tests/testutil.h"

#define B 24
#define MAX_STEPS 14

int main(void) {
    vt_towers_cfg cfg;
    vt_towers_cfg_default(&cfg);
    vt_net_cfg_default(&cfg.net, "tiny", 4, 4, 24, 24);
    cfg.batch = B;
    cfg.seed = 9;
    cfg.verbose = 1;
    char err[512];
    vt_slice_policy_parse(&cfg.policy, "auto", err, sizeof err);
    cfg.devices.n = 2;
    for (int i = 0; i < 2; i++) {
        vt_device *d = &cfg.devices.dev[i];
        memset(d, 0, sizeof *d);
        snprintf(d->name, sizeof d->name, "cpu%d", i);
        snprintf(d->backend, sizeof d->backend, "cpu");
        d->ordinal = i;
        d->threads = 1;
        d->slowdown = i == 1 ? 2.0 : 1.0;
    }
    vt_towers *t = vt_towers_init(&cfg, err, sizeof err);
    TCHECK(t != NULL, "init: %s", err);
    if (!t)
        return vt_test_done("test_auto");
    vt_towers_print_plan(t, stdout);
    TCHECK(vt_towers_plan(t)->slice[0] == 12, "auto starts from memory shares (12:12)");

    vt_batch b;
    memset(&b, 0, sizeof b);
    b.n = b.capacity = B;
    b.t = 4;
    b.h = 24;
    b.w = 24;
    b.nheads = 1;
    b.head_classes[0] = 4;
    int64_t cf = vt_batch_clip_floats(&b);
    b.x = vt_malloc((size_t)(cf * B) * sizeof(float));
    b.label[0] = vt_malloc(B * sizeof(int32_t));
    vt_rng r;
    vt_rng_seed(&r, 1);
    for (int64_t i = 0; i < cf * B; i++)
        b.x[i] = (float)vt_rng_normal(&r);
    for (int i = 0; i < B; i++)
        b.label[0][i] = (int32_t)vt_rng_below(&r, 4);

    /* Each tower's own compute rate (tower 1's compute includes its emulated idling, so
     * its own rate is slice / (compute / 2)), summed over the steps after the first. */
    double c0 = 0, c1 = 0, n0 = 0, n1 = 0;
    int first_in = -1, replans = 0, final0 = 0, plan0[MAX_STEPS];
    double target = 2.0 / 3.0;
    for (int s = 0; s < MAX_STEPS; s++) {
        vt_step_stats st;
        vt_towers_train_step(t, &b, 0.01f, &st);
        replans += st.replanned;
        const vt_plan *p = vt_towers_plan(t);
        printf("step %2d: ran %2d:%-2d compute %.3f s | %.3f s  wait %.3f | %.3f  -> plan %d:%d\n", s + 1,
               st.slice[0], st.slice[1], st.compute_s[0], st.compute_s[1], st.wait_s[0], st.wait_s[1],
               p->slice[0], p->slice[1]);
        if (s > 0) {
            n0 += st.slice[0];
            c0 += st.compute_s[0];
            n1 += st.slice[1];
            c1 += st.compute_s[1] / 2.0;
        }
        plan0[s] = p->slice[0];
        final0 = p->slice[0];
        TCHECK(!memcmp(vt_net_params(vt_towers_net(t, 0)), vt_net_params(vt_towers_net(t, 1)),
                       (size_t)vt_net_num_params(vt_towers_net(t, 0)) * sizeof(float)),
               "step %d: replicas differ", s + 1);
    }
    /* 2:1 is the truth only if both towers compute equally fast. On an overloaded machine
     * (two towers + other work on few cores) tower 1, computing while tower 0 does, gets
     * less CPU than tower 0, which also runs while tower 1 idles; the split that equalises
     * step times is then r0 : r1/2 from the measured own rates, and that is what auto
     * must find. Rates within 15% of each other count as identical hardware. */
    double r0 = n0 / c0, r1 = n1 / c1;
    printf("own compute rates: tower 0 %.1f clips/s, tower 1 %.1f clips/s (ratio %.2f)\n", r0, r1,
           r0 / r1);
    if (fabs(r0 / r1 - 1) > 0.15) {
        double want = r0 / (r0 + r1 / 2);
        printf("WARNING: the towers were not equally fast here (loaded machine): checking auto "
               "against the equal-time split %.1f:%.1f instead of 16:8\n", B * want, B * (1 - want));
        target = want;
    }
    /* within 10% of the 2:1 split: slice0 / B within 10% of 2/3 -> [14.4, 17.6] */
    for (int s = 0; s < MAX_STEPS && first_in < 0; s++)
        if (fabs((double)plan0[s] / B - target) <= 0.1 * target)
            first_in = s + 1;
    /* first step is warm-up (not measured), the second re-plans: 8 steps leave room for
     * the moving average to correct a noisy measurement */
    TCHECK(first_in > 0 && first_in <= 8, "auto reached the 2:1 region at step %d", first_in);
    TCHECK(fabs((double)final0 / B - target) <= 0.1 * target,
           "auto ended at %d:%d, more than 10%% from %.1f:%.1f", final0, B - final0, B * target,
           B * (1 - target));
    TCHECK(replans >= 1 && replans <= 8, "%d re-plans", replans);
    vt_towers_print_plan(t, stdout);

    vt_towers_free(&t);
    free(b.x);
    free(b.label[0]);
    return vt_test_done("test_auto");
}
