/*
 * test_auto.c: the auto split policy on real towers. Two identical CPU towers (one thread
 * each); tower 1 carries the emulated 2x slowdown (it idles as long as it computed after
 * every micro-batch), so tower 0 is the faster one whatever else the machine is doing:
 * load slows both towers' compute, and tower 1 then idles longer too. Auto starts from
 * memory shares (12:12 of B = 24) and must re-plan, the first re-plan must move clips to
 * tower 0, every later plan must keep tower 0's slice the larger one, and the parameters
 * must stay bitwise identical across replicas after the re-plans (which re-size tower 0's
 * replica).
 *
 * It must never assert an exact split derived from measured times (a target computed from
 * the same noisy timings auto used proves nothing and fails on a loaded machine): only
 * load-independent facts. It fails when auto never re-plans or re-plans the wrong way.
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "pipeline/parallel/towers/tower.h"
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
     * its own rate is slice / (compute / 2)), summed over the steps after the first: printed
     * for the log only, never checked (it is load-dependent). */
    double c0 = 0, c1 = 0, n0 = 0, n1 = 0;
    int replans = 0, first_replan = -1, plan0[MAX_STEPS];
    for (int s = 0; s < MAX_STEPS; s++) {
        vt_step_stats st;
        vt_towers_train_step(t, &b, 0.01f, &st);
        replans += st.replanned;
        if (st.replanned && first_replan < 0)
            first_replan = s;
        const vt_plan *p = vt_towers_plan(t);
        printf("step %2d: ran %2d:%-2d compute %.3f s | %.3f s  wait %.3f | %.3f  -> plan "
               "%d:%d%s\n", s + 1, st.slice[0], st.slice[1], st.compute_s[0], st.compute_s[1], st.wait_s[0],
               st.wait_s[1], p->slice[0], p->slice[1], st.replanned ? " (re-planned)" : "");
        if (s > 0) {
            n0 += st.slice[0];
            c0 += st.compute_s[0];
            n1 += st.slice[1];
            c1 += st.compute_s[1] / 2.0;
        }
        plan0[s] = p->slice[0];
        /* Every clip counted once (docs/design.md §3.4): whatever the plan, the slices run and the
         * next plan's slices cover the batch exactly. */
        TCHECK(st.slice[0] + st.slice[1] == B, "step %d ran %d:%d, not %d clips", s + 1,
               st.slice[0], st.slice[1], B);
        TCHECK(p->slice[0] + p->slice[1] == B, "step %d: plan %d:%d does not sum to %d", s + 1,
               p->slice[0], p->slice[1], B);
        TCHECK(!memcmp(vt_net_params(vt_towers_net(t, 0)), vt_net_params(vt_towers_net(t, 1)),
                       (size_t)vt_net_num_params(vt_towers_net(t, 0)) * sizeof(float)),
               "step %d: replicas differ", s + 1);
    }
    if (c0 > 0 && c1 > 0)
        printf("own compute rates (log only): tower 0 %.1f clips/s, tower 1 %.1f clips/s\n",
               n0 / c0, n1 / c1);

    /* A re-plan happened. The first step is warm-up (not measured) and the policy smooths
     * its measurements, but a 2x difference is far past its 3% threshold: MAX_STEPS = 14
     * steps leave ample room for the first re-plan on any machine. */
    TCHECK(replans >= 1, "auto never re-planned in %d steps (stayed at %d:%d)", MAX_STEPS,
           plan0[MAX_STEPS - 1], B - plan0[MAX_STEPS - 1]);
    /* It went the right way: tower 0, the faster, gets more than half of the batch from the
     * first re-plan on. Half (12) and not a 2:1 target (16) is the bound, because how much
     * more depends on the measured times, which a loaded machine skews; which tower is
     * faster does not. */
    for (int s = first_replan < 0 ? MAX_STEPS : first_replan; s < MAX_STEPS; s++)
        TCHECK(plan0[s] > B / 2, "after step %d the plan is %d:%d: the faster tower 0 does not "
               "have the larger slice", s + 1, plan0[s], B - plan0[s]);
    /* ...and the plan keeps room for tower 1: it is slower, not stopped (a slice of 0 would
     * mean the policy read tower 1's idle time as infinitely slow). */
    TCHECK(plan0[MAX_STEPS - 1] < B, "auto ended at %d:%d: tower 1 was dropped",
           plan0[MAX_STEPS - 1], B - plan0[MAX_STEPS - 1]);
    vt_towers_print_plan(t, stdout);

    vt_towers_free(&t);
    free(b.x);
    free(b.label[0]);
    return vt_test_done("test_auto");
}
