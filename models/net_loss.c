/*
 * net_loss.c: a replica's heads at the end of a forward — the losses and their
 * gradients (dlogits) that seed the backward, the per-clip losses copied to the host and
 * summed there, and for evaluation the heads' outputs (probabilities, sigmoids). Split
 * from net.c; the losses' copy to the host waits for nothing when the backend can queue
 * it (issue 45 step 3: vt_net_loss_issue, then the backward, then one wait for the pass).
 *
 * It must never allocate (the host copy of the losses is vt_net_init's, pinned where the
 * backend has host memory for it) nor read host_loss before the sync that follows the
 * copy.
 */
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/net_impl.h"

/* ---- loss, outputs ---- */

/* From the heads' per-clip losses (host_loss, n clips each), each head's scaled by f[h]
 * (f NULL: 1): head_loss[h] = the sum over clips, loss_clip[j] = sum_h weight_h * f[h] *
 * loss_h(clip j); either may be NULL. */
static void loss_sums(const vt_net *net, int n, float *loss_clip, float *head_loss,
                      const double *f) {
    const vt_net_cfg *cfg = &net->g.cfg;
    for (int h = 0; h < cfg->nheads && head_loss; h++) {
        double s = 0;
        for (int j = 0; j < n; j++)
            s += net->host_loss[(int64_t)h * net->mb + j];
        head_loss[h] = (float)(s * (f ? f[h] : 1));
    }
    for (int j = 0; j < n && loss_clip; j++) {
        double s = 0;
        for (int h = 0; h < cfg->nheads; h++)
            s += (double)cfg->head[h].weight * (f ? f[h] : 1) *
                 net->host_loss[(int64_t)h * net->mb + j];
        loss_clip[j] = (float)s;
    }
}

void vt_net_loss_issue(vt_net *net, const vt_targets *t, float grad_scale) {
    vt_backend *be = net->be;
    const vt_net_cfg *cfg = &net->g.cfg;
    const int n = net->last_n;
    for (int h = 0; h < cfg->nheads; h++) {
        const vt_head_cfg *hc = &cfg->head[h];
        float *loss = f32_at(net, net->g.loss_off[h]);
        float *dlog = clip_at(net, net->g.dlogit_off[h]);
        const float *logits = vt_net_logits(net, h);
        const float *cw = hc->loss == VT_LOSS_SOFTMAX_CE ? t->class_weight[h] : NULL;
        float gs = (cw ? t->weight_scale[h] : grad_scale) * hc->weight;
        const float *adj = hc->loss == VT_LOSS_SOFTMAX_CE ? t->logit_adjust[h] : NULL;
        for (int j = 0; j < n && adj; j++) /* the loss sees logits + adj, clip by clip */
            VT_OP(be, axpy, (float *)logits + (int64_t)j * hc->classes, 1.0f, adj, hc->classes);
        if (hc->loss == VT_LOSS_SOFTMAX_CE && t->target[h]) { /* mixed (soft) targets */
            VT_CHECK(!cw && be->i->softmax_xent_soft, "head %d (%s): soft targets need the "
                     "unweighted loss and a backend with softmax_xent_soft", h, hc->name);
            VT_OP(be, softmax_xent_soft, loss, dlog, logits, t->target[h], n, hc->classes, gs);
        } else if (hc->loss == VT_LOSS_SOFTMAX_CE) {
            VT_CHECK(n == 0 || t->label[h], "head %d (%s): softmax head without labels", h,
                     hc->name);
            if (cw)
                VT_OP(be, softmax_xent_w, loss, dlog, NULL, logits, t->label[h], cw, n,
                      hc->classes, hc->smoothing, gs);
            else
                VT_OP(be, softmax_xent, loss, dlog, NULL, logits, t->label[h], n, hc->classes,
                      hc->smoothing, gs);
        } else {
            VT_CHECK(n == 0 || t->target[h], "head %d (%s): BCE head without targets", h,
                     hc->name);
            VT_OP(be, bce_logits, loss, dlog, NULL, logits, t->target[h], n, hc->classes, gs);
        }
        for (int j = 0; j < n && adj; j++) /* and the logits are the model's again */
            VT_OP(be, axpy, (float *)logits + (int64_t)j * hc->classes, -1.0f, adj, hc->classes);
        if (n > 0) /* no wait: vt_net_loss_collect reads it after the next sync */
            vt_backend_to_host_async(be, net->host_loss + (int64_t)h * net->mb, loss,
                                     (size_t)n * sizeof(float));
    }
    /* A class-weighted head's reported loss is PyTorch's weighted mean, the one its
     * gradient follows: sum w_y l / sum w_y over the global batch. Its clips' losses are
     * scaled by weight_scale / grad_scale (= batch / sum w_y), so that the batch mean the
     * callers take (sum / batch) is that mean. */
    for (int h = 0; h < cfg->nheads; h++)
        net->loss_f[h] = cfg->head[h].loss == VT_LOSS_SOFTMAX_CE && t->class_weight[h] &&
                         grad_scale > 0 ? (double)t->weight_scale[h] / grad_scale : 1.0;
    net->have_loss = 1;
}

void vt_net_loss_collect(vt_net *net, float *loss_clip, float *head_loss) {
    VT_CHECK(net->have_loss, "vt_net_loss_collect without vt_net_loss_issue");
    loss_sums(net, net->last_n, loss_clip, head_loss, net->loss_f);
}

void vt_net_loss(vt_net *net, float *loss_clip, float *head_loss, const vt_targets *t,
                 float grad_scale) {
    vt_net_loss_issue(net, t, grad_scale);
    vt_backend_sync(net->be);
    vt_net_loss_collect(net, loss_clip, head_loss);
}

/* Backend room for head h's probabilities of a pass, (n, classes) floats, inside the
 * memory plan: in FP32 and TF32 the head's dlogits (the same size; nothing reads it
 * before vt_net_loss writes it again), under BF16 (dlogits are half that) the float32
 * copy of the logits itself: the loss ops may work in place, and vt_net_outputs makes the
 * copy again from the head's bf16 output afterwards. */
static float *prob_room(const vt_net *net, int h) {
    if (net->g.logit_off[h] >= 0)
        return f32_at(net, net->g.logit_off[h]);
    VT_CHECK(net->g.act_size == (int)sizeof(float), "head %d: no float32 room for outputs", h);
    return clip_at(net, net->g.dlogit_off[h]);
}

void vt_net_outputs(vt_net *net, float *const prob[VT_MAX_HEADS], float *loss_clip,
                    float *head_loss, const vt_targets *t) {
    vt_backend *be = net->be;
    const vt_graph *g = &net->g;
    const int n = net->last_n;
    for (int h = 0; h < g->cfg.nheads; h++) {
        const vt_head_cfg *hc = &g->cfg.head[h];
        const int softmax = hc->loss == VT_LOSS_SOFTMAX_CE;
        const int32_t *label = t && softmax ? t->label[h] : NULL;
        const float *target = t && !softmax ? t->target[h] : NULL;
        float *loss = label || target ? f32_at(net, g->loss_off[h]) : NULL;
        float *p = prob && prob[h] ? prob_room(net, h) : NULL;
        const float *logits = vt_net_logits(net, h);
        const int64_t nk = (int64_t)n * hc->classes;
        float *hl = net->host_loss + (int64_t)h * net->mb;
        if (n > 0 && (loss || p)) {
            if (softmax)
                VT_OP(be, softmax_xent, loss, NULL, p, logits, label, n, hc->classes,
                      hc->smoothing, 0.0f);
            else
                VT_OP(be, bce_logits, loss, NULL, p, logits, target, n, hc->classes, 0.0f);
        }
        if (loss && n > 0)
            be->i->to_host(be, hl, loss, (size_t)n * sizeof(float));
        else if (n > 0) /* no targets for this head: it counts 0 */
            memset(hl, 0, (size_t)n * sizeof(float));
        if (p && n > 0) {
            be->i->to_host(be, prob[h], p, (size_t)nk * sizeof(float));
            if (g->logit_off[h] >= 0) /* BF16: the copy the probabilities went over */
                VT_OP(be, act_to_f32, (float *)logits, act(net, g->head_node[h]), nk);
        }
    }
    loss_sums(net, n, loss_clip, head_loss, NULL);
    net->have_loss = 0; /* dlogits may hold probabilities now: no backward from here */
}

