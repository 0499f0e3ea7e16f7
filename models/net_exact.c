/*
 * net_exact.c: the layers of a network built with cfg.exact (net_types.h) whose results
 * sum over the clips of a pass — conv and linear weight gradients, batch-norm statistics
 * and their backward sums — run one clip at a time, each clip's terms folded into
 * fixed-point accumulators (xsum.h) that add exactly. A clip's own arithmetic is then
 * the same whichever tower, slice or micro-batch holds it (every op sees one clip: the
 * same shapes, so the same kernels, blocks and summation orders), and its terms reach
 * the same integer sums: a step on N towers is bitwise a step on one device (docs/design.md
 * §3.1). The forwards of conv and linear run per clip for the same reason (a
 * multi-clip tile may pick another GEMM kernel than a one-clip one).
 *
 * It must never round a sum over clips to float before the towers' exact sum (the
 * float results are read only after xsum_round), and never let a clip's arithmetic
 * depend on its neighbours.
 */
#include <string.h>

#include "base/common.h"
#include "models/net_impl.h"
#include "models/xsum.h"

/* Floats of one clip's gradient of a layer (weight and bias), and of a BN layer's
 * per-clip sums (2c). */
int64_t vt_netx_xtmp_floats(const vt_graph *g) {
    int64_t m = 1;
    for (int i = 0; i < g->nnodes; i++) {
        const vt_node *nd = &g->nodes[i];
        int64_t f = 0;
        if (nd->kind == VT_NODE_BN)
            f = 2 * (int64_t)nd->c;
        if (nd->wt >= 0)
            f = VT_MAX(f, g->tensors[nd->wt].numel + (nd->bt >= 0 ? g->tensors[nd->bt].numel : 0));
        if (nd->kind == VT_NODE_QKV || nd->kind == VT_NODE_LN) /* net_vit.c: [dw | 3C bias] */
            f = VT_MAX(f, g->tensors[nd->wt].numel + nd->c);
        if (nd->kind == VT_NODE_MSA || nd->kind == VT_NODE_CLSTOK) { /* net_mvit.c: every
                                                                        tensor of the node */
            int64_t s = nd->kind == VT_NODE_CLSTOK ? nd->c : 0;
            for (int k = 0; k < 12; k++)
                s += nd->mt[k] >= 0 ? g->tensors[nd->mt[k]].numel : 0;
            f = VT_MAX(f, s);
        }
        m = VT_MAX(m, f);
    }
    return m;
}

/* A BN layer's accumulators: 2c values (two int64 each) and a count. */
int64_t vt_netx_xbn_i64(const vt_graph *g) {
    int64_t c = 0;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == VT_NODE_BN)
            c = VT_MAX(c, (int64_t)g->nodes[i].c);
    return 4 * c + 2;
}

static int64_t in_elems(const vt_node *nd) { return (int64_t)nd->ic * nd->it * nd->ih * nd->iw; }

/* ---- forward ---- */

void vt_netx_conv_forward(vt_net *net, int i, float *out, const float *in, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int in_thw[3] = {nd->it, nd->ih, nd->iw};
    const int64_t fi = in_elems(nd), fo = vt_node_floats(nd);
    for (int j = 0; j < n; j++)
        VT_OP(be, conv3d_forward, act_ptr(net, out, j * fo), act_ptr(net, in, j * fi),
              param(net, nd->wt), param(net, nd->bt), 1, in_thw, &nd->conv);
}

void vt_netx_linear_forward(vt_net *net, int i, float *out, const float *in, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    for (int j = 0; j < n; j++)
        VT_OP(be, linear_forward, act_ptr(net, out, (int64_t)j * nd->c),
              act_ptr(net, in, (int64_t)j * nd->ic), param(net, nd->wt), param(net, nd->bt), 1,
              nd->ic, nd->c);
}

/* ---- backward: a clip's weight and bias gradient into xtmp, then folded ---- */

void vt_netx_fold(vt_net *net, int t, const float *x) {
    const vt_tensor_info *ti = &net->g.tensors[t];
    const int init = net->xfresh[t]; /* the first fold since zero_grad writes, never reads */
    net->xfresh[t] = 0;
    VT_OP(net->be, xsum_fold, net->xgrads + 2 * ti->offset, x, ti->numel, init,
          VT_XSUM_GRAD_E0);
}

void vt_netx_settle(vt_net *net) {
    const vt_graph *g = &net->g;
    for (int t = 0; t < g->ntensors; t++) {
        if (!net->xfresh[t] || g->tensors[t].is_buffer)
            continue;
        /* a run of fresh parameter tensors that follow each other in the arena: one fill */
        int64_t at = g->tensors[t].offset, end = at + g->tensors[t].numel;
        net->xfresh[t] = 0;
        while (t + 1 < g->ntensors && net->xfresh[t + 1] && !g->tensors[t + 1].is_buffer &&
               g->tensors[t + 1].offset == end) {
            end += g->tensors[++t].numel;
            net->xfresh[t] = 0;
        }
        VT_OP(net->be, fill, (float *)(void *)(net->xgrads + 2 * at), 0.0f, 4 * (end - at));
    }
}

static int64_t param_floats(const vt_net *net, const vt_node *nd) {
    const vt_graph *g = &net->g;
    return g->tensors[nd->wt].numel + (nd->bt >= 0 ? g->tensors[nd->bt].numel : 0);
}

/* xtmp holds one clip's [dw | db] of node nd: into the gradients' accumulators. */
static void fold_params(vt_net *net, const vt_node *nd) {
    vt_netx_fold(net, nd->wt, net->xtmp);
    if (nd->bt >= 0)
        vt_netx_fold(net, nd->bt, net->xtmp + net->g.tensors[nd->wt].numel);
}

void vt_netx_conv_backward(vt_net *net, int i, float *din, const float *dout, const float *in,
                           int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int in_thw[3] = {nd->it, nd->ih, nd->iw};
    const int64_t fi = in_elems(nd), fo = vt_node_floats(nd), nw = net->g.tensors[nd->wt].numel;
    for (int j = 0; j < n; j++) {
        VT_OP(be, fill, net->xtmp, 0.0f, param_floats(net, nd));
        VT_OP(be, conv3d_backward, din ? act_ptr(net, din, j * fi) : NULL, net->xtmp,
              nd->bt >= 0 ? net->xtmp + nw : NULL, act_ptr(net, dout, j * fo),
              act_ptr(net, in, j * fi), param(net, nd->wt), 1, in_thw, &nd->conv);
        fold_params(net, nd);
    }
}

void vt_netx_linear_backward(vt_net *net, int i, float *din, const float *dout,
                             const float *in, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int64_t nw = net->g.tensors[nd->wt].numel;
    for (int j = 0; j < n; j++) {
        VT_OP(be, fill, net->xtmp, 0.0f, param_floats(net, nd));
        VT_OP(be, linear_backward, din ? act_ptr(net, din, (int64_t)j * nd->ic) : NULL,
              net->xtmp, nd->bt >= 0 ? net->xtmp + nw : NULL,
              act_ptr(net, dout, (int64_t)j * nd->c), act_ptr(net, in, (int64_t)j * nd->ic),
              param(net, nd->wt), 1, nd->ic, nd->c);
        fold_params(net, nd);
    }
}

/* ---- batch norm ---- */

void vt_netx_bn_sums(vt_net *net, int i, float *buf, const float *x, const float *k,
                     const float *dy, const float *mean, const float *invstd, int n,
                     int64_t *count, int backward) {
    vt_backend *be = net->be;
    const vt_graph *g = &net->g;
    const vt_node *nd = &g->nodes[i];
    const int c = nd->c;
    const int64_t s = (int64_t)nd->t * nd->h * nd->w, f = (int64_t)c * s;
    int64_t *acc = net->xbn, *cnt = net->xbn + 4 * (int64_t)c;
    /* 4c int64 of accumulators, then the count: zeros (as floats) */
    VT_OP(be, fill, (float *)(void *)acc, 0.0f, 2 * (4 * (int64_t)c + 1));
    for (int j = 0; j < n; j++) {
        const float *xj = act_ptr(net, x, j * f);
        if (backward) {
            VT_OP(be, bn_backward_reduce, net->xtmp, net->xtmp + c, act_ptr(net, dy, j * f), xj,
                  k, mean, invstd, 1, c, s);
            /* gamma += sum_dy_xhat, beta += sum_dy: this clip's, exactly */
            vt_netx_fold(net, nd->wt, net->xtmp + c);
            vt_netx_fold(net, nd->bt, net->xtmp);
        } else {
            VT_OP(be, bn_stats, net->xtmp, net->xtmp + c, xj, k, 1, c, s);
        }
        VT_OP(be, xsum_fold, acc, net->xtmp, 2 * (int64_t)c, 0, VT_XSUM_STAT_E0);
    }
    if (count) { /* the count travels as one raw int64 beside the accumulators */
        int64_t here = (int64_t)n * s;
        be->i->to_device(be, cnt, &here, sizeof here);
    }
    if (net->bn_sync_x && !net->bn_frozen[i])
        net->bn_sync_x(net->bn_sync_ctx, acc, 4 * (int64_t)c + 1);
    VT_OP(be, xsum_round, buf, acc, 2 * (int64_t)c, VT_XSUM_STAT_E0);
    if (count)
        be->i->to_host(be, count, cnt, sizeof *count);
}
