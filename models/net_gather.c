/*
 * net_gather.c: the forward of a tgather node (net_graph.h) for net.c — SlowFast's slow
 * pathway made from the input clip inside the network, without a kernel of its own.
 * Private to models/ (through net_impl.h). It must never allocate or read anything but
 * the clip it is given.
 */
#include "base/common.h"
#include "models/net_graph.h"
#include "models/net_impl.h"

/* Gather node i: the frames PackPathway picks (vt_pack_pathway_frame), each an H*W plane
 * of one channel of one clip, copied from the input clip x. Plain copies, so every
 * backend has it without a kernel (n * 3 * T/alpha of them per pass); no backward: it
 * reads the clip, which takes no gradient. */
void vt_net_tgather_forward(vt_net *net, int i, const float *x, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int64_t hw = (int64_t)nd->h * nd->w;
    float *out = act(net, i);
    for (int j = 0; j < n; j++)
        for (int c = 0; c < nd->c; c++)
            for (int k = 0; k < nd->t; k++) {
                const int64_t src = (((int64_t)j * nd->ic + c) * nd->it +
                                     vt_pack_pathway_frame(nd->it, nd->t, k)) * hw;
                const int64_t dst = (((int64_t)j * nd->c + c) * nd->t + k) * hw;
                be->i->copy(be, act_ptr(net, out, dst), act_ptr(net, x, src),
                            (size_t)hw * (size_t)net->g.act_size);
            }
}
