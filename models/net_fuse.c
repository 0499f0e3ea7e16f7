/*
 * net_fuse.c: which batch norms the network runs fused with what follows them (issue 45
 * step 3). A BN whose only consumer is a ReLU, or an add (as its in[0]) whose only
 * consumer is a ReLU — R3D's, MC3's and R(2+1)D's conv-BN-ReLU and the BasicBlock's
 * BN + skip + ReLU — computes its statistics at its own node and defers the apply: the
 * ReLU (or the add, when the skip is ready) calls the backend's bn_apply_relu, which
 * writes the ReLU's output in one pass. Nothing else reads the BN's or the add's own
 * output (BN's backward reads its input, ReLU's its output, add's none), so the skipped
 * stores are not missed; backward is unchanged. Only when the backend has the op
 * (backend.h) and VT_FUSE is not 0.
 *
 * Backward (backend.h relu_backward_skip, bn_relu_backward_reduce; the same switch, and
 * each its own slot): the ReLU of a BN + add + ReLU tail writes the skip's gradient with
 * its own (the add's copy skipped), and the ReLU right after a BN (BN + ReLU) leaves its
 * backward to the BN's reduce, which applies the mask on the way (not with exact sums:
 * their BN sums go clip by clip, net_exact.c). Neither with activation checkpointing (a
 * segment recomputed between the two nodes; no CNN of the zoo has segments); only where
 * nothing runs between the two nodes and the gradients meet as the graph planned them:
 * the ReLU's gradient goes to its input by TRANSFER or NEW (never ACCUM), the add's skip
 * by COPY (its first gradient: the ReLU's write is then the only one before the skip's
 * other consumers add theirs).
 *
 * It must never fuse a node another node reads, the features node or a head, nor an add
 * whose skip is its in[0] (the ReLU's output aliases in[0], the fused op's out must not
 * overlap its res).
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net_impl.h"

/* The consumers of node i: their count, the first in *who. */
static int consumers(const vt_graph *g, int i, int *who) {
    int n = 0;
    for (int j = i + 1; j < g->nnodes; j++)
        for (int k = 0; k < g->nodes[j].nin; k++)
            if (g->nodes[j].in[k] == i) {
                if (!n)
                    *who = j;
                n++;
            }
    return n;
}

static int is_output(const vt_graph *g, int i) {
    if (i == g->feat)
        return 1;
    for (int h = 0; h < g->cfg.nheads; h++)
        if (g->head_node[h] == i)
            return 1;
    return 0;
}

static int env_on(void) {
    static _Atomic int env = -1; /* read once (a race to read it twice is harmless) */
    if (env < 0) {
        const char *e = getenv("VT_FUSE");
        env = !(e && !strcmp(e, "0"));
    }
    return env;
}

int vt_net_fuse_on(const vt_net *net) { return env_on() && net->be->i->bn_apply_relu; }

int vt_net_fuse_tail(const vt_graph *g, int b) {
    if (g->nodes[b].kind != VT_NODE_BN || is_output(g, b))
        return -1;
    int c = -1;
    if (consumers(g, b, &c) != 1 || is_output(g, c))
        return -1;
    const vt_node *nc = &g->nodes[c];
    if (nc->kind == VT_NODE_RELU)
        return c;
    if (nc->kind != VT_NODE_ADD || nc->nin != 2 || nc->in[0] != b)
        return -1;
    int r = -1;
    /* the ReLU right after the add: the forward then skips both in one step */
    if (consumers(g, c, &r) != 1 || r != c + 1 || is_output(g, r) ||
        g->nodes[r].kind != VT_NODE_RELU)
        return -1;
    return r;
}

void vt_net_bn_apply_node(vt_net *net, int b, const float *x, float *out, const float *res,
                          int n, int fused) {
    const vt_node *nd = &net->g.nodes[b];
    const int c = nd->c;
    const int64_t s = (int64_t)nd->t * nd->h * nd->w;
    const float *mean = net->ws + nd->ws_off, *invstd = mean + c, *k = mean + 2 * c;
    if (fused)
        VT_OP(net->be, bn_apply_relu, out, x, k, mean, invstd, param(net, nd->wt),
              param(net, nd->bt), res, n, c, s);
    else
        VT_OP(net->be, bn_apply, out, x, k, mean, invstd, param(net, nd->wt),
              param(net, nd->bt), n, c, s);
}

/* ---- backward ---- */

/* exact = 0: the BN's reduction is fused too, which exact sums do clip by clip. */
static int bwd_on(const vt_net *net, int exact_ok) {
    return env_on() && (exact_ok || !net->g.cfg.exact) && !net->g.cfg.ckpt;
}

/* The ReLU right after BN node b that b's backward applies (BN + ReLU), or -1. */
static int bn_relu(const vt_net *net, int b) {
    const vt_graph *g = &net->g;
    if (b < 0 || b + 1 >= g->nnodes || !net->be->i->bn_relu_backward_reduce ||
        !bwd_on(net, 0) || vt_net_fuse_tail(g, b) != b + 1 || g->nodes[b + 1].in[0] != b)
        return -1;
    const int d = g->nodes[b + 1].din[0];
    return d == VT_DIN_TRANSFER || d == VT_DIN_NEW ? b + 1 : -1;
}

int vt_net_fuse_skip(const vt_net *net, int r) {
    const vt_graph *g = &net->g;
    if (r <= 0 || r >= g->nnodes || !net->be->i->relu_backward_skip || !bwd_on(net, 1))
        return -1;
    const vt_node *nr = &g->nodes[r], *na = &g->nodes[r - 1];
    if (nr->kind != VT_NODE_RELU || nr->in[0] != r - 1 || na->kind != VT_NODE_ADD ||
        na->nin != 2 || na->in[0] < 0 || vt_net_fuse_tail(g, na->in[0]) != r ||
        na->din[1] != VT_DIN_COPY ||
        (nr->din[0] != VT_DIN_TRANSFER && nr->din[0] != VT_DIN_NEW))
        return -1;
    return r - 1;
}

void vt_net_relu_backward(vt_net *net, int r, float *din, const float *dout, int64_t nf) {
    const vt_graph *g = &net->g;
    const int a = vt_net_fuse_skip(net, r);
    if (bn_relu(net, g->nodes[r].in[0]) == r)
        return; /* the BN's backward applies it (vt_net_bn_backward_reduce) */
    if (a >= 0)
        VT_OP(net->be, relu_backward_skip, din, grad_of(net, g->nodes[a].in[1]), dout,
              act(net, r), nf);
    else
        VT_OP(net->be, relu_backward, din, dout, act(net, r), nf);
}

void vt_net_bn_backward_reduce(vt_net *net, int b, float *buf, float *dy, const float *x,
                               int n) {
    const vt_node *nd = &net->g.nodes[b];
    const int c = nd->c, r = bn_relu(net, b);
    const int64_t s = (int64_t)nd->t * nd->h * nd->w;
    const float *mean = net->ws + nd->ws_off, *invstd = mean + c, *k = mean + 2 * c;
    if (r >= 0) /* dy is the ReLU's din: its mask applied here, on the way */
        VT_OP(net->be, bn_relu_backward_reduce, buf, buf + c, dy, grad_of(net, r), act(net, r),
              x, k, mean, invstd, n, c, s);
    else
        VT_OP(net->be, bn_backward_reduce, buf, buf + c, dy, x, k, mean, invstd, n, c, s);
}
