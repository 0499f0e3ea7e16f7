/*
 * test_bn_sync_one.c: issue 45 step 3 — with one tower in the whole run the towers leave
 * sync-BN's hook off (tower_worker.c set_bn_sync), so a batch norm neither calls the
 * reducer's no-op sum nor copies its count to the host. That must change no bit: a net
 * whose hook is the sum over one tower (the identity, what the host reducer does for one
 * rank) and a net without a hook, same weights and clips, two training steps' forwards
 * and backwards, must have bitwise the same logits, losses, gradients and running
 * statistics — on cpu-ref and cpu, with float sums (GPU towers' path; the hooked net
 * takes the pass's clips from the host, vt_net_set_bn_pass_clips, as several towers do,
 * instead of the count's trip through a float and the host) and with exact sums (the
 * int64 hook). The hook counts
 * its calls, so the test fails if the hooked net never synced (the comparison would
 * then prove nothing). 2 x 2 x 2 runs of the tiny model on 6 clips of 4x16x16.
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "tests/testutil.h"

#define NCLIP 6
#define NCLASS 5

static int calls;
static void sum_of_one(void *ctx, float *buf, int64_t n) { (void)ctx, (void)buf, (void)n, calls++; }
static void sum_of_one_i64(void *ctx, int64_t *buf, int64_t n) {
    (void)ctx, (void)buf, (void)n, calls++;
}

typedef struct out {
    float *logits, *grads, *bufs, loss[2];
    int64_t np, nb;
} out;

static void train2(const char *bename, int exact, int hooked, int64_t pass_clips, out *o) {
    vt_backend *be = vt_backend_init(bename, 0, 1, 0);
    VT_CHECK(be, "backend %s", bename);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "tiny", NCLASS, 4, 16, 16);
    cfg.exact = exact;
    char err[512];
    vt_net *net = vt_net_init(&cfg, be, NCLIP, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_net_init_weights(net, 7);
    vt_net_set_bn_pass_clips(net, pass_clips);
    if (hooked) {
        vt_net_set_bn_sync(net, sum_of_one, NULL);
        if (exact)
            vt_net_set_bn_sync_exact(net, sum_of_one_i64, NULL);
    }
    const int64_t xn = (int64_t)NCLIP * 3 * 4 * 16 * 16;
    float *hx = vt_malloc((size_t)xn * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, 3);
    for (int64_t i = 0; i < xn; i++)
        hx[i] = (float)vt_rng_normal(&r) * 2.0f + 0.5f; /* a mean: the shift k matters */
    int32_t lab[NCLIP];
    for (int j = 0; j < NCLIP; j++)
        lab[j] = (int32_t)(j % NCLASS);
    float *x = vt_backend_alloc_x(be, (size_t)xn * sizeof(float), "input");
    int32_t *dl = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, x, hx, (size_t)xn * sizeof(float));
    be->i->to_device(be, dl, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dl;
    o->np = vt_net_num_params(net);
    o->nb = vt_net_num_buffers(net);
    float loss_clip[NCLIP], head_loss[VT_MAX_HEADS];
    for (int s = 0; s < 2; s++) { /* the second forward reads the first's running stats */
        vt_net_zero_grad(net);
        vt_net_forward(net, x, NCLIP, 1);
        vt_net_loss(net, loss_clip, head_loss, &tg, 1.0f / NCLIP);
        vt_net_backward(net);
        if (exact)
            vt_net_round_grads(net);
        o->loss[s] = head_loss[0];
    }
    o->logits = vt_malloc(NCLIP * NCLASS * sizeof(float));
    o->grads = vt_malloc((size_t)o->np * sizeof(float));
    o->bufs = vt_malloc((size_t)o->nb * sizeof(float));
    be->i->to_host(be, o->logits, vt_net_logits(net, 0), NCLIP * NCLASS * sizeof(float));
    be->i->to_host(be, o->grads, vt_net_grads(net), (size_t)o->np * sizeof(float));
    be->i->to_host(be, o->bufs, vt_net_buffers(net), (size_t)o->nb * sizeof(float));
    vt_backend_free_ptr(be, x);
    vt_backend_free_ptr(be, dl);
    vt_net_free(&net);
    vt_backend_free(&be);
    free(hx);
}

int main(void) {
    const char *bes[2] = {"cpu-ref", "cpu"};
    for (int b = 0; b < 2; b++)
        for (int exact = 0; exact < 2; exact++) {
            out a, n;
            calls = 0;
            /* float sums: the hooked net takes the pass's count from the host (what the
             * towers do with several towers), which must be the count's bits too */
            train2(bes[b], exact, 1, exact ? -1 : NCLIP, &a);
            const int hooked_calls = calls;
            train2(bes[b], exact, 0, -1, &n);
            TCHECK(hooked_calls > 0 && calls == hooked_calls,
                   "%s exact=%d: the hook ran %d times, then %d (expected > 0 and no more)",
                   bes[b], exact, hooked_calls, calls);
            TCHECK(a.np == n.np && a.nb == n.nb && a.nb > 0, "sizes");
            TCHECK(!memcmp(a.loss, n.loss, sizeof a.loss), "%s exact=%d: losses %.9g %.9g vs "
                   "%.9g %.9g", bes[b], exact, a.loss[0], a.loss[1], n.loss[0], n.loss[1]);
            TCHECK(!memcmp(a.logits, n.logits, NCLIP * NCLASS * sizeof(float)),
                   "%s exact=%d: logits differ (%g)", bes[b], exact,
                   vt_max_abs_diff(a.logits, n.logits, NCLIP * NCLASS));
            TCHECK(!memcmp(a.grads, n.grads, (size_t)a.np * sizeof(float)),
                   "%s exact=%d: gradients differ (%g)", bes[b], exact,
                   vt_max_abs_diff(a.grads, n.grads, a.np));
            TCHECK(!memcmp(a.bufs, n.bufs, (size_t)a.nb * sizeof(float)),
                   "%s exact=%d: running statistics differ (%g)", bes[b], exact,
                   vt_max_abs_diff(a.bufs, n.bufs, a.nb));
            printf("%s, %s sums: hooked (%d syncs) and unhooked nets equal bit for bit\n",
                   bes[b], exact ? "exact" : "float", hooked_calls);
            free(a.logits), free(a.grads), free(a.bufs);
            free(n.logits), free(n.grads), free(n.bufs);
        }
    return vt_test_done("test_bn_sync_one");
}
