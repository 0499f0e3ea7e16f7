/*
 * net_impl.h: the inside of a vt_net — its arenas and the accessors that form pointers
 * into them — shared by net.c (forward, backward, arenas), net_exact.c (the same
 * layers clip by clip with exact sums) and net_init.c (initialisation). Private to those
 * files.
 */
#ifndef VT_NET_IMPL_H
#define VT_NET_IMPL_H

#include "models/net.h"
#include "models/net_graph.h"

struct vt_net {
    vt_graph g;
    vt_backend *be;
    int mb;               /* max clips per pass */
    float *params;        /* (nparams) */
    float *grads;         /* (nparams) */
    float *buffers;       /* (nbuffers) */
    float *ws;            /* (ws_floats) BN mean/invstd, collective scratch, a constant 1 */
    void *clip;           /* (mb * clip_act) activation elements, per-clip layout of
                             vt_graph_plan; g.act_size bytes each */
    float *clipf;         /* (mb * clip_f32) float32 values of the same layout */
    const float *input;   /* [A] the last forward's input as the first conv read it (x, or
                             its bf16 copy): the first conv's backward reads it */
    int last_n, last_train, have_loss;
    uint64_t dropout_seed;
    vt_allreduce_fn bn_sync;
    void *bn_sync_ctx;
    vt_grad_ready_fn grad_ready;
    void *grad_ready_ctx;
    int64_t ready_lo;     /* the last lo reported this backward (checks the order) */
    int64_t *bn_count;    /* (nnodes) host: the (global) count of each BN's last forward */
    int64_t bn_pass_clips;/* sync-BN: clips of this pass over every tower, known on the
                             host (vt_net_set_bn_pass_clips); -1: the count travels */
    float bn_momentum;    /* a statistics pass's update weight (else each node's own) */
    int bn_pass;          /* a statistics pass (vt_net_set_bn_momentum m > 0): forwards
                             are not counted in num_batches_tracked */
    unsigned char *bn_frozen; /* (nnodes) BN in eval mode even in training forwards
                             (vt_net_set_bn_frozen: fine-tuning's --freeze-bn) */
    float *host_loss;     /* (nheads, mb) host copy of the per-clip losses (pinned where
                             the backend has host_alloc: net.c) */
    int host_loss_pinned;
    double loss_f[VT_MAX_HEADS]; /* vt_net_loss_issue's scale of each head's losses */
    /* exact sums (cfg.exact, net_exact.c): backend memory */
    int64_t *xgrads;      /* (2 * nparams) the gradients' accumulators (xsum.h) */
    float *xtmp;          /* one clip's weight and bias gradient of a layer, or a BN layer's
                             sums (vt_netx_xtmp_floats) */
    uint8_t *xfresh;      /* (ntensors, host) 1: the tensor's accumulators hold nothing since
                             vt_net_zero_grad and are not zeroed: its first fold writes them
                             (init), vt_netx_settle zeroes those never folded */
    int64_t *xbn;         /* (4 * max BN channels + 2) a BN layer's sums and count */
    vt_allreduce_i64_fn bn_sync_x; /* sync-BN's exact sum over towers (ctx: bn_sync_ctx) */
};

/* An [A] array `elems` activation elements past p (bf16 or float, per the precision). */
static inline float *act_ptr(const vt_net *net, const float *p, int64_t elems) {
    return (float *)(void *)((char *)(void *)p + elems * net->g.act_size);
}
/* Per-clip regions at per-clip offset `off`: regions are laid out scaled by max_batch. */
static inline float *clip_at(const vt_net *net, int64_t off) {
    return act_ptr(net, (float *)net->clip, off * (int64_t)net->mb);
}
static inline float *f32_at(const vt_net *net, int64_t off) {
    return net->clipf + off * (int64_t)net->mb;
}
static inline float *act(const vt_net *net, int node) { return clip_at(net, net->g.nodes[node].act_off); }
static inline float *grad_of(const vt_net *net, int node) {
    int s = net->g.nodes[node].gslot;
    if (s <= -2)
        return clip_at(net, net->g.dlogit_off[-2 - s]);
    VT_CHECK(s >= 0, "node %s has no gradient slot", net->g.nodes[node].name);
    return clip_at(net, net->g.slot_off[s]);
}
static inline float *param(vt_net *net, int t) {
    return t < 0 ? NULL : net->params + net->g.tensors[t].offset;
}
static inline float *pgrad(vt_net *net, int t) {
    return t < 0 ? NULL : net->grads + net->g.tensors[t].offset;
}
static inline float *buffer(vt_net *net, int t) {
    return t < 0 ? NULL : net->buffers + net->g.tensors[t].offset;
}


/* net_gather.c: tgather node i's output from the input clip x (n clips): the frames
 * vt_pack_pathway_frame picks, each an H*W plane copied with the backend's copy. */
void vt_net_tgather_forward(vt_net *net, int i, const float *x, int n);

/* net_vit.c: the transformer nodes (net_graph.h), for the kinds net.c does not run
 * itself; init_ws writes the position tables into the workspace (vt_net_init). din may
 * be NULL (no gradient wanted). */
void vt_netv_init_ws(vt_net *net);
/* 0, or -1 with err when the graph has transformer nodes and net->be lacks their ops
 * (backend.h: optional slots; CUDA has none yet). */
int vt_netv_check_backend(const vt_net *net, char *err, size_t errlen);
void vt_netv_forward(vt_net *net, int i, const float *in, float *out, int n, int train);
void vt_netv_backward(vt_net *net, int i, float *din, const float *dout, const float *in, int n);
/* net_mvit.c: MViT's nodes (class token, multiscale attention, token max pool, class
 * token's row), which net_vit.c hands over; check_backend as vt_netv_check_backend, naming
 * the first op the backend lacks. */
int vt_netm_check_backend(const vt_net *net, char *err, size_t errlen);
void vt_netm_forward(vt_net *net, int i, const float *in, float *out, int n);
void vt_netm_backward(vt_net *net, int i, float *din, const float *dout, const float *in, int n);
/* The relative tables' interpolation matrices into the workspace (vt_msa_rel; from
 * vt_netv_init_ws). */
void vt_netm_init_ws(vt_net *net);

/* net_ckpt.c: under cfg.ckpt, before the backward of node e: when e ends a checkpoint
 * segment whose insides the forward has since overwritten (every one but the last),
 * run them forward again (the last forward's clips, training mode). Otherwise nothing. */
void vt_netc_recompute(vt_net *net, int e);

/* net_exact.c: the layers whose outputs sum over clips, one clip at a time with the sums
 * exact (xsum.h), for networks built with cfg.exact. */
void vt_netx_conv_forward(vt_net *net, int i, float *out, const float *in, int n);
void vt_netx_linear_forward(vt_net *net, int i, float *out, const float *in, int n);
void vt_netx_conv_backward(vt_net *net, int i, float *din, const float *dout, const float *in,
                           int n);
void vt_netx_linear_backward(vt_net *net, int i, float *din, const float *dout,
                             const float *in, int n);
/* x folded into parameter tensor t's accumulators: written (init) by the first fold since
 * vt_net_zero_grad, added to after. */
void vt_netx_fold(vt_net *net, int t, const float *x);
/* The accumulators of every parameter tensor not folded since vt_net_zero_grad zeroed
 * (a frozen layer's, an empty tower's): before anyone reads them. */
void vt_netx_settle(vt_net *net);
/* A BN layer's [sum | sumsq] (backward = 0, x and the shift k) or [sum_dy | sum_dy_xhat]
 * (backward = 1, with dy, mean, invstd), 2c floats into buf: summed exactly over the n
 * clips and, under sync-BN, over every tower; *count (forward) becomes the global count.
 * The backward also folds each clip's sums into gamma's and beta's gradients. */
void vt_netx_bn_sums(vt_net *net, int i, float *buf, const float *x, const float *k,
                     const float *dy, const float *mean, const float *invstd, int n,
                     int64_t *count, int backward);

/* ---- net_fuse.c: batch norms fused with the ReLU (and add) that follow them ---- */
/* 1 when the backend has bn_apply_relu and VT_FUSE is not 0. */
int vt_net_fuse_on(const vt_net *net);
/* For BN node b, the ReLU node its apply is fused into (its only consumer, or the only
 * consumer of the add whose in[0] b is), or -1. */
int vt_net_fuse_tail(const vt_graph *g, int b);
/* BN node b's apply from its workspace statistics: bn_apply(out, x), or fused:
 * bn_apply_relu(out, x, res). */
void vt_net_bn_apply_node(vt_net *net, int b, const float *x, float *out, const float *res,
                          int n, int fused);
/* The backward's fused tails (net_fuse.c): for ReLU node r, the add whose skip gradient
 * r's backward writes, or -1 (the add then copies nothing); ReLU node r's backward (nf
 * elements): relu_backward, relu_backward_skip, or nothing where its BN applies it; BN
 * node b's [sum_dy | sum_dy_xhat] into buf (bn_backward_reduce, or with the ReLU's mask:
 * bn_relu_backward_reduce, dy then written). */
int vt_net_fuse_skip(const vt_net *net, int r);
void vt_net_relu_backward(vt_net *net, int r, float *din, const float *dout, int64_t nf);
void vt_net_bn_backward_reduce(vt_net *net, int b, float *buf, float *dy, const float *x,
                               int n);

#endif
