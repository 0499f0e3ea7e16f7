/*
 * net_ckpt.c: activation checkpointing (cfg.ckpt) — remaking a checkpoint segment's
 * insides in backward. The plan (net_graph.c) gives every segment's insides the same
 * shared region, so the forward leaves only the last segment's there; backward, reaching
 * the last node of an earlier segment, runs that segment's insides forward again from its
 * kept input before their backwards read them.
 *
 * The remade values are the forward's bits: the same ops on the same inputs (the kept
 * block input is never written after its forward) at the same addresses, in training
 * mode, and the one random thing in a segment, drop path, draws its per-clip scale from
 * the net's dropout seed and the node's index (vt_drop_path_scale), which nothing
 * changes between a forward and its backward (the tower sets it before each forward). The
 * backends are deterministic (every element made by one thread in a fixed order), so
 * gradients with checkpointing equal those without, bit for bit (tests/test_ckpt.c).
 * Like net.c it never allocates: the region is in the per-clip arena.
 */
#include "base/common.h"
#include "models/net_impl.h"

void vt_netc_recompute(vt_net *net, int e) {
    const vt_graph *g = &net->g;
    const int seg = g->nodes[e].seg;
    if (!g->cfg.ckpt || !seg || seg == g->nsegs)
        return; /* not a segment, or the last one: its insides are still the forward's */
    if (e + 1 < g->nnodes && g->nodes[e + 1].seg == seg)
        return; /* not its last node: remade already */
    int first = e;
    while (first > 0 && g->nodes[first - 1].seg == seg)
        first--;
    vt_backend *be = net->be;
    const int n = net->last_n;
    for (int i = first; i <= e; i++) {
        const vt_node *nd = &g->nodes[i];
        if (!nd->recomp)
            continue;
        const float *in = nd->in[0] < 0 ? net->input : act(net, nd->in[0]);
        if (nd->kind == VT_NODE_ADD) /* as net.c's forward: out over in[0] */
            VT_OP(be, add, act(net, i), in, act(net, nd->in[1]), (int64_t)n * vt_node_floats(nd));
        else
            vt_netv_forward(net, i, in, act(net, i), n, 1);
    }
}
