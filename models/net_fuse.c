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

int vt_net_fuse_on(const vt_net *net) {
    static _Atomic int env = -1; /* read once (a race to read it twice is harmless) */
    if (env < 0) {
        const char *e = getenv("VT_FUSE");
        env = !(e && !strcmp(e, "0"));
    }
    return env && net->be->i->bn_apply_relu;
}

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
