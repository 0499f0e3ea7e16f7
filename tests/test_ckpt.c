/*
 * test_ckpt.c: activation checkpointing (cfg.ckpt, models/net_ckpt.c) changes memory, not
 * numbers. The outside truth is the same training without it: videomae_vit_s on a tiny
 * clip (4x32x32: 8 tokens, 2 clips a pass), drop path 0.3 so that the recomputed blocks
 * must replay random draws, two passes accumulated into one gradient (the second with
 * other clips and another dropout seed, as a tower's micro-batches): the logits, losses
 * and every gradient bit for bit equal with and without, on cpu-ref and cpu, and with
 * exact sums (what CPU towers run). The test can fail: the same run with the dropout
 * seed changed between a forward and its backward (a recompute that replays the wrong
 * draws) must differ.
 * Memory (the memory plan is the allocation, test_memplan.c): on cpu the high-water mark
 * of those two passes falls by exactly what the plan says a clip saves, times the clips
 * (VT_TEST_CKPT_CLIP=16x112 repeats that at a realistic clip: minutes, not in ctest).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "tests/testutil.h"

typedef struct run_out {
    float *grads;
    int64_t np;
    float logits[2][2 * 5];
    float loss[2][2];
    int64_t high;      /* the allocator's high-water mark over the step */
    int64_t held;      /* what was held before it (net, input, labels) */
} run_out;

/* clip j of pass p: pseudo-random values in [-1, 1) */
static void fill_clips(float *h, int64_t per, int n, int p) {
    for (int64_t i = 0; i < per * n; i++)
        h[i] = (float)(vt_hash64(((uint64_t)p << 40) + (uint64_t)i) >> 40) / 8388608.0f - 1.0f;
}

/* Two training passes of n clips each accumulated into one gradient. reseed: set another
 * dropout seed between pass 1's forward and its backward (the negative control). */
static int run(run_out *o, const char *bename, int ckpt, int exact, int t, int hw, int n,
               int reseed) {
    memset(o, 0, sizeof *o);
    char err[512];
    vt_backend *be = vt_backend_init(bename, 0, 1, 0); /* 1 thread: no OpenMP spinning on a loaded machine; the bits do not depend on it */
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "videomae_vit_s", 5, t, hw, hw);
    cfg.drop_path = 0.3f;
    cfg.ckpt = ckpt;
    cfg.exact = exact;
    vt_net *net = vt_net_init(&cfg, be, n, err, sizeof err);
    TCHECK(net != NULL, "%s: %s", bename, err);
    if (!net) {
        vt_backend_free(&be);
        return -1;
    }
    /* the weights of seed 7, drawn once (22M draws) and copied into every run's net */
    static float *w7;
    static int64_t n7;
    if (!w7) {
        vt_net_init_weights(net, 7);
        n7 = vt_net_num_params(net);
        w7 = vt_malloc((size_t)n7 * sizeof(float));
        be->i->to_host(be, w7, vt_net_params(net), (size_t)n7 * sizeof(float));
    }
    VT_CHECK(n7 == vt_net_num_params(net), "parameters %lld, not %lld",
             (long long)vt_net_num_params(net), (long long)n7);
    be->i->to_device(be, vt_net_params(net), w7, (size_t)n7 * sizeof(float));
    const int64_t per = (int64_t)3 * t * hw * hw;
    float *hx = vt_malloc((size_t)(per * n) * sizeof(float));
    float *x = vt_backend_alloc_x(be, (size_t)(per * n) * sizeof(float), "clips");
    int32_t lab[8] = {1, 3, 0, 4, 2, 2, 1, 0};
    int32_t *dl = vt_backend_alloc_x(be, sizeof lab, "labels");
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dl;
    o->held = be->in_use;
    const int64_t hw0 = be->high_water;
    vt_net_zero_grad(net);
    for (int p = 0; p < 2; p++) {
        fill_clips(hx, per, n, p);
        be->i->to_device(be, x, hx, (size_t)(per * n) * sizeof(float));
        be->i->to_device(be, dl, lab + 2 * p, (size_t)n * sizeof(int32_t));
        vt_net_set_dropout_seed(net, 1000 + 17 * (uint64_t)p);
        vt_net_forward(net, x, n, 1);
        vt_net_loss(net, o->loss[p], NULL, &tg, 0.25f);
        if (n <= 2)
            be->i->to_host(be, o->logits[p], vt_net_logits(net, 0), (size_t)n * 5 * sizeof(float));
        if (reseed && p == 1)
            vt_net_set_dropout_seed(net, 5);
        vt_net_backward(net);
    }
    if (exact)
        vt_net_round_grads(net);
    vt_backend_sync(be);
    o->high = be->high_water > hw0 ? be->high_water : hw0;
    o->np = vt_net_num_params(net);
    o->grads = vt_malloc((size_t)o->np * sizeof(float));
    be->i->to_host(be, o->grads, vt_net_grads(net), (size_t)o->np * sizeof(float));
    free(hx);
    vt_backend_free_ptr(be, x);
    vt_backend_free_ptr(be, dl);
    vt_net_free(&net);
    vt_backend_free(&be);
    return 0;
}

static int same(const run_out *a, const run_out *b) {
    return a->np == b->np && !memcmp(a->grads, b->grads, (size_t)a->np * sizeof(float)) &&
           !memcmp(a->logits, b->logits, sizeof a->logits) &&
           !memcmp(a->loss, b->loss, sizeof a->loss);
}

/* The plan's saving a clip, and the allocator's: the high-water marks of the two runs
 * differ by the arenas' difference. The net's arenas are the plan exactly; a step's peak
 * adds the largest op scratch, the same op in both runs (a recompute runs no new kind of
 * op), and the input clips and labels, which the test allocates the same in both. */
static void memory(const run_out *off, const run_out *on, const char *clip, int t, int hw,
                   int n) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "videomae_vit_s", 5, t, hw, hw);
    cfg.drop_path = 0.3f;
    vt_memplan mp[2];
    char err[256];
    for (int c = 0; c < 2; c++) {
        cfg.ckpt = c;
        TCHECK(vt_memplan_build(&mp[c], &cfg, 0, err, sizeof err) == 0, "%s", err);
    }
    TCHECK(mp[1].fixed_bytes == mp[0].fixed_bytes, "checkpointing changed the fixed bytes");
    const int64_t planned = n * (mp[0].bytes_per_clip - mp[1].bytes_per_clip);
    const int64_t measured = off->high - on->high;
    TCHECK(planned > 0 && measured == planned, "%s: high water fell by %lld bytes, the plan "
           "says %lld", clip, (long long)measured, (long long)planned);
    printf("videomae_vit_s %s, %d clips on cpu: high water %.2f MiB without, %.2f MiB with "
           "checkpointing: saved %.2f MiB, %.2f MiB a clip (plan: %.2f -> %.2f MiB a clip)\n",
           clip, n, off->high / 1048576.0, on->high / 1048576.0, measured / 1048576.0,
           measured / 1048576.0 / n, mp[0].bytes_per_clip / 1048576.0,
           mp[1].bytes_per_clip / 1048576.0);
    for (int c = 0; c < 2; c++)
        vt_memplan_free(&mp[c]);
}

static void bits(const char *bename, int exact) {
    run_out off, on;
    if (run(&off, bename, 0, exact, 4, 32, 2, 0) || run(&on, bename, 1, exact, 4, 32, 2, 0))
        return;
    double gn = 0;
    for (int64_t i = 0; i < off.np; i++)
        gn += (double)off.grads[i] * off.grads[i];
    TCHECK(gn > 0, "%s: zero gradient", bename);
    TCHECK(same(&off, &on), "%s%s: gradients, logits or losses differ with checkpointing",
           bename, exact ? " (exact sums)" : "");
    printf("%-7s%s videomae_vit_s 4x32x32, drop path 0.3, 2 passes of 2 clips: %lld gradients, "
           "logits and losses the same bits with and without checkpointing\n", bename,
           exact ? " exact" : "      ", (long long)off.np);
    if (!exact && !strcmp(bename, "cpu")) {
        memory(&off, &on, "4x32x32", 4, 32, 2);
        run_out bad; /* the control: a wrong replay shows */
        if (!run(&bad, bename, 1, 0, 4, 32, 2, 1)) {
            TCHECK(!same(&off, &bad), "a recompute with another dropout seed went unnoticed");
            free(bad.grads);
        }
    }
    free(off.grads);
    free(on.grads);
}

int main(void) {
    bits("cpu-ref", 0);
    bits("cpu", 0);
    bits("cpu", 1);
    /* VT_TEST_CKPT_CLIP=16x112: the saving at a realistic clip (minutes: not in ctest) */
    const char *big = getenv("VT_TEST_CKPT_CLIP");
    int bt, bhw;
    if (big && sscanf(big, "%dx%d", &bt, &bhw) == 2) {
        run_out r[2];
        if (!run(&r[0], "cpu", 0, 0, bt, bhw, 2, 0) && !run(&r[1], "cpu", 1, 0, bt, bhw, 2, 0)) {
            TCHECK(!memcmp(r[0].grads, r[1].grads, (size_t)r[0].np * 4), "%s: gradients differ",
                   big);
            memory(&r[0], &r[1], big, bt, bhw, 2);
            free(r[0].grads);
            free(r[1].grads);
        }
    }
    return vt_test_done("test_ckpt");
}
