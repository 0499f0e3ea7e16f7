/*
 * net_graph.c: building a network graph node by node (shapes, state-dict tensors) and
 * planning its memory: one per-clip layout holding every activation, dropout mask, loss
 * and gradient slot, and one fixed workspace (BN statistics). Gradient slots are reused
 * by simulating backward once: a slot is taken when the first consumer writes a
 * gradient and given back when its producer has consumed it, so a resnet needs about
 * three activation-sized slots however deep it is.
 *
 * This file must never allocate backend memory or run an op (net_graph.h).
 */
#include "models/net_graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

static int g_fail(vt_graph *g, const char *fmt, const char *a, int v0, int v1, int v2) {
    if (!g->failed) {
        g->failed = 1;
        snprintf(g->err, sizeof g->err, fmt, a, v0, v1, v2);
    }
    return -1;
}

int vt_g_node_fail(vt_graph *g, const char *name, const char *fmt, int a, int b) {
    if (!g->failed) {
        char msg[200];
        snprintf(msg, sizeof msg, fmt, a, b);
        g->failed = 1;
        snprintf(g->err, sizeof g->err, "%s: %s", name, msg);
    }
    return -1;
}

int vt_g_node_new(vt_graph *g, vt_node_kind kind, const char *name, int in) {
    if (g->failed)
        return -1;
    if (g->nnodes == g->capnodes) {
        g->capnodes = g->capnodes ? 2 * g->capnodes : 64;
        g->nodes = vt_realloc(g->nodes, (size_t)g->capnodes * sizeof(*g->nodes));
    }
    vt_node *nd = &g->nodes[g->nnodes];
    memset(nd, 0, sizeof *nd);
    nd->kind = kind;
    snprintf(nd->name, sizeof nd->name, "%s", name);
    for (int k = 0; k < VT_NODE_MAX_IN; k++)
        nd->in[k] = -1;
    nd->in[0] = in;
    nd->nin = 1;
    nd->head = -1;
    nd->wt = nd->bt = nd->rm = nd->rv = nd->nbt = -1;
    nd->gslot = -1;
    nd->tmp_slot = -1;
    if (in < 0) {
        nd->ic = 3;
        nd->it = g->cfg.clip_t;
        nd->ih = g->cfg.clip_h;
        nd->iw = g->cfg.clip_w;
    } else {
        VT_CHECK(in < g->nnodes, "node %s: input %d not built yet", name, in);
        const vt_node *p = &g->nodes[in];
        nd->ic = p->c;
        nd->it = p->t;
        nd->ih = p->h;
        nd->iw = p->w;
    }
    nd->c = nd->ic;
    nd->t = nd->it;
    nd->h = nd->ih;
    nd->w = nd->iw;
    return g->nnodes++;
}

int vt_g_tensor_new(vt_graph *g, int node, const char *suffix, vt_tensor_role role, int ndim,
                    const int64_t *shape, int is_buffer, int is_int64) {
    if (g->ntensors == g->captensors) {
        g->captensors = g->captensors ? 2 * g->captensors : 128;
        g->tensors = vt_realloc(g->tensors, (size_t)g->captensors * sizeof(*g->tensors));
        g->aux = vt_realloc(g->aux, (size_t)g->captensors * sizeof(*g->aux));
    }
    vt_tensor_info *t = &g->tensors[g->ntensors];
    memset(t, 0, sizeof *t);
    char name[128];
    snprintf(name, sizeof name, "%s.%s", g->nodes[node].name, suffix);
    t->name = vt_strdup(name);
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= shape[d];
    }
    t->is_buffer = is_buffer;
    t->is_int64 = is_int64;
    if (is_buffer) {
        t->offset = g->nbuffers;
        g->nbuffers += t->numel;
    } else {
        t->offset = g->nparams;
        g->nparams += t->numel;
        g->nodes[node].params += t->numel;
    }
    g->aux[g->ntensors] = (vt_tensor_aux){node, role};
    return g->ntensors++;
}

int vt_g_conv(vt_graph *g, const char *name, int in, int cout, const int k[3], const int s[3],
              const int p[3], int bias) {
    return vt_g_conv_groups(g, name, in, cout, k, s, p, bias, 1);
}

int vt_g_conv_groups(vt_graph *g, const char *name, int in, int cout, const int k[3],
                     const int s[3], const int p[3], int bias, int groups) {
    int i = vt_g_node_new(g, VT_NODE_CONV, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    if (groups < 1 || nd->ic % groups || cout % groups)
        return g_fail(g, "%s: %d groups do not divide %d input and %d output channels", name,
                      groups, nd->ic, cout);
    nd->conv.cin = nd->ic;
    nd->conv.cout = cout;
    nd->conv.groups = groups;
    for (int d = 0; d < 3; d++) {
        nd->conv.k[d] = k[d];
        nd->conv.s[d] = s[d];
        nd->conv.p[d] = p[d];
    }
    int o[3], ins[3] = {nd->it, nd->ih, nd->iw};
    for (int d = 0; d < 3; d++) {
        o[d] = ins[d] + 2 * p[d] >= k[d] ? vt_conv_out(ins[d], k[d], s[d], p[d]) : 0;
        if (o[d] < 1)
            return g_fail(g, "%s: input %dx%dx%d is too small for this layer (clip too small "
                             "for the model)", name, nd->it, nd->ih, nd->iw);
    }
    nd->c = cout;
    nd->t = o[0];
    nd->h = o[1];
    nd->w = o[2];
    int64_t ws[5] = {cout, nd->ic / groups, k[0], k[1], k[2]};
    nd->wt = vt_g_tensor_new(g, i, "weight", VT_ROLE_WEIGHT, 5, ws, 0, 0);
    if (bias) {
        int64_t bs[1] = {cout};
        nd->bt = vt_g_tensor_new(g, i, "bias", VT_ROLE_BIAS, 1, bs, 0, 0);
    }
    return i;
}

int vt_g_bn(vt_graph *g, const char *name, int in) {
    return vt_g_bn_ex(g, name, in, 1e-5f, 0.1f); /* PyTorch BatchNorm3d defaults */
}

int vt_g_bn_ex(vt_graph *g, const char *name, int in, float eps, float momentum) {
    int i = vt_g_node_new(g, VT_NODE_BN, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    nd->bn_eps = eps;
    nd->bn_momentum = momentum;
    int64_t cs[1] = {nd->c};
    nd->wt = vt_g_tensor_new(g, i, "weight", VT_ROLE_GAMMA, 1, cs, 0, 0);
    nd->bt = vt_g_tensor_new(g, i, "bias", VT_ROLE_BETA, 1, cs, 0, 0);
    nd->rm = vt_g_tensor_new(g, i, "running_mean", VT_ROLE_RUNNING_MEAN, 1, cs, 1, 0);
    nd->rv = vt_g_tensor_new(g, i, "running_var", VT_ROLE_RUNNING_VAR, 1, cs, 1, 0);
    nd->nbt = vt_g_tensor_new(g, i, "num_batches_tracked", VT_ROLE_NUM_BATCHES, 0, NULL, 1, 1);
    return i;
}

int vt_g_relu(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_RELU, name, in);
    if (i < 0)
        return -1;
    /* In place like nn.ReLU(inplace=True): safe because every producer we follow (conv,
     * bn, add, linear) does not need its own output for backward. */
    g->nodes[i].inplace = in >= 0;
    return i;
}

int vt_g_silu(vt_graph *g, const char *name, int in) {
    return vt_g_node_new(g, VT_NODE_SILU, name, in);
}

int vt_g_sigmoid(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_SIGMOID, name, in);
    if (i >= 0) /* in place like relu: backward reads the output only */
        g->nodes[i].inplace = in >= 0;
    return i;
}

int vt_g_chscale(vt_graph *g, const char *name, int x, int s) {
    if (g->failed)
        return -1;
    VT_CHECK(x >= 0 && s >= 0, "%s: channel scale of the clip", name);
    int i = vt_g_node_new(g, VT_NODE_CHSCALE, name, x);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    const vt_node *ps = &g->nodes[s];
    if (ps->c != nd->c || ps->t * ps->h * ps->w != 1)
        return g_fail(g, "%s: scale of %d values for %d channels (t %d)", name,
                      ps->c * ps->t * ps->h * ps->w, nd->c, nd->t);
    nd->in[1] = s;
    nd->nin = 2;
    return i;
}

/* A pooling window over in: max or average. */
static int g_pool(vt_graph *g, vt_node_kind kind, const char *name, int in, const int k[3],
                  const int s[3], const int p[3]) {
    int i = vt_g_node_new(g, kind, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    for (int d = 0; d < 3; d++) {
        nd->pool.k[d] = k[d];
        nd->pool.s[d] = s[d];
        nd->pool.p[d] = p[d];
    }
    nd->pool.ceil_mode = 0;
    int o[3], ins[3] = {nd->it, nd->ih, nd->iw};
    for (int d = 0; d < 3; d++) {
        o[d] = ins[d] + 2 * p[d] >= k[d] ? vt_pool_out(ins[d], k[d], s[d], p[d], 0) : 0;
        if (o[d] < 1)
            return g_fail(g, "%s: input %dx%dx%d is too small for this pooling (clip too small "
                             "for the model)", name, nd->it, nd->ih, nd->iw);
    }
    nd->t = o[0];
    nd->h = o[1];
    nd->w = o[2];
    return i;
}

int vt_g_maxpool(vt_graph *g, const char *name, int in, const int k[3], const int s[3],
                 const int p[3]) {
    return g_pool(g, VT_NODE_MAXPOOL, name, in, k, s, p);
}

int vt_g_avgpool(vt_graph *g, const char *name, int in, const int k[3], const int s[3],
                 const int p[3]) {
    return g_pool(g, VT_NODE_AVGPOOL, name, in, k, s, p);
}

int vt_g_gap(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_GAP, name, in);
    if (i < 0)
        return -1;
    g->nodes[i].t = g->nodes[i].h = g->nodes[i].w = 1;
    return i;
}

int vt_g_linear(vt_graph *g, const char *name, int in, int out, int head) {
    int i = vt_g_node_new(g, VT_NODE_LINEAR, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    /* The input is flattened: (C, T, H, W) contiguous per clip is the same memory. */
    int64_t in_f = (int64_t)nd->ic * nd->it * nd->ih * nd->iw;
    nd->ic = (int)in_f;
    nd->it = nd->ih = nd->iw = 1;
    nd->c = out;
    nd->t = nd->h = nd->w = 1;
    nd->head = head;
    int64_t ws[2] = {out, in_f}, bs[1] = {out};
    nd->wt = vt_g_tensor_new(g, i, "weight", VT_ROLE_WEIGHT, 2, ws, 0, 0);
    nd->bt = vt_g_tensor_new(g, i, "bias", VT_ROLE_BIAS, 1, bs, 0, 0);
    if (head >= 0)
        g->head_node[head] = i;
    return i;
}

int vt_g_dropout(vt_graph *g, const char *name, int in, float p, int inplace) {
    int i = vt_g_node_new(g, VT_NODE_DROPOUT, name, in);
    if (i < 0)
        return -1;
    g->nodes[i].drop_p = p;
    for (int j = 0; j < i; j++)
        g->nodes[i].drop_index += g->nodes[j].kind == VT_NODE_DROPOUT;
    g->nodes[i].inplace = inplace && in >= 0;
    return i;
}

int vt_g_add(vt_graph *g, const char *name, int a, int b) {
    int i = vt_g_node_new(g, VT_NODE_ADD, name, a);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    const vt_node *pb = &g->nodes[b];
    if (pb->c != nd->c || pb->t != nd->t || pb->h != nd->h || pb->w != nd->w)
        return g_fail(g, "%s: residual shapes differ (%d channels vs %d, t %d)", name, nd->c,
                      pb->c, pb->t);
    nd->in[1] = b;
    nd->nin = 2;
    /* out += residual, as torchvision's BasicBlock: the BN output is not needed again. */
    nd->inplace = 1;
    return i;
}

void vt_g_linear_as_conv1(vt_graph *g, int node) {
    if (node < 0 || g->failed)
        return;
    vt_tensor_info *t = &g->tensors[g->nodes[node].wt];
    VT_CHECK(g->nodes[node].kind == VT_NODE_LINEAR && t->ndim == 2, "%s: not a linear layer",
             g->nodes[node].name);
    t->ndim = 5;
    t->shape[2] = t->shape[3] = t->shape[4] = 1;
}

int vt_g_concat(vt_graph *g, const char *name, const int *in, int nin) {
    VT_CHECK(nin >= 2 && nin <= VT_NODE_MAX_IN, "%s: concat of %d inputs", name, nin);
    if (g->failed) /* a branch failed: its index is -1, not the input clip */
        return -1;
    for (int k = 0; k < nin; k++) /* the clip itself is no branch (backward gives it none) */
        VT_CHECK(in[k] >= 0, "%s: input %d is the clip", name, k);
    int i = vt_g_node_new(g, VT_NODE_CONCAT, name, in[0]);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    for (int k = 1; k < nin; k++) {
        const vt_node *p = &g->nodes[in[k]];
        if (p->t != nd->t || p->h != nd->h || p->w != nd->w)
            return g_fail(g, "%s: branch shapes differ (t %d vs %d, h %d)", name, nd->t, p->t,
                          p->h);
        nd->in[k] = in[k];
        nd->c += p->c;
    }
    nd->nin = nin;
    return i;
}

int vt_pack_pathway_frame(int t, int tout, int k) {
    if (tout <= 1)
        return 0; /* linspace of one step is its start */
    /* float32 as torch's CPU linspace kernel computes it, truncated by .long(): where a
     * value falls within rounding of an integer the way it is rounded picks the frame.
     * The kernel (ATen RangeFactoriesKernel.cpp, AVX2 build, x86's default) runs blocks
     * of 16 values from the start as two vectors of 8, each from its first element's
     * value plus j*step (two roundings), then the rest one by one; a value in the first
     * half is step*i, in the second end - step*(steps-1-i), an FMA there. Checked
     * against torch.linspace(...).long() for every T up to 128 and alpha 2, 4, 8
     * (tests/test_pyvideo.c); PyTorch's AVX-512 or ARM kernels may differ by a frame in a
     * few long clips. This file is compiled as ISO C11: no contraction of a*b+c. */
    const float end = (float)(t - 1), step = end / (float)(tout - 1);
    const int half = tout / 2, vectored = tout / 16 * 16;
    float v;
    if (k < vectored) {
        const int i0 = k / 8 * 8;
        const float base = i0 < half ? step * (float)i0 : fmaf(-step, (float)(tout - 1 - i0), end);
        v = base + (float)(k - i0) * step;
    } else {
        v = k < half ? step * (float)k : fmaf(-step, (float)(tout - 1 - k), end);
    }
    return (int)v; /* .long(): toward zero, the values are >= 0 */
}

int vt_g_tgather(vt_graph *g, const char *name, int in, int alpha) {
    VT_CHECK(in < 0 && alpha >= 1, "%s: a frame gather reads the clip (in %d, alpha %d)", name,
             in, alpha);
    int i = vt_g_node_new(g, VT_NODE_TGATHER, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    if (nd->it % alpha != 0)
        return g_fail(g, "%s: the clip's %d frames are not a multiple of alpha = %d (the slow "
                         "pathway takes T/alpha of them; use a clip of 4, 8, ... 32 frames)", name,
                      nd->it, alpha, 0);
    nd->t = nd->it / alpha;
    nd->nograd = 1;
    return i;
}

/* ---- gradient slots: best fit among free slots, else grow one, else a new one ---- */

static int slot_take(vt_graph *g, int64_t size) {
    int best = -1, largest = -1;
    for (int s = 0; s < g->nslots; s++) {
        if (g->slot_busy[s])
            continue;
        if (g->slot_size[s] >= size && (best < 0 || g->slot_size[s] < g->slot_size[best]))
            best = s;
        if (largest < 0 || g->slot_size[s] > g->slot_size[largest])
            largest = s;
    }
    if (best < 0 && largest >= 0) {
        best = largest;
        g->slot_size[best] = size;
    }
    if (best < 0) {
        if (g->nslots == g->capslots) {
            g->capslots = g->capslots ? 2 * g->capslots : 8;
            g->slot_size = vt_realloc(g->slot_size, (size_t)g->capslots * sizeof(int64_t));
            g->slot_off = vt_realloc(g->slot_off, (size_t)g->capslots * sizeof(int64_t));
            g->slot_busy = vt_realloc(g->slot_busy, (size_t)g->capslots * sizeof(int));
        }
        best = g->nslots++;
        g->slot_size[best] = size;
    }
    g->slot_busy[best] = 1;
    return best;
}

static void slot_give(vt_graph *g, int s) {
    if (s >= 0)
        g->slot_busy[s] = 0;
}

static int64_t in_floats(const vt_graph *g, int in) {
    return vt_node_floats(&g->nodes[in]);
}

void vt_g_segment(vt_graph *g, int first, int last) {
    if (g->failed || first < 0 || last < first)
        return;
    g->nsegs++;
    for (int i = first; i <= last; i++)
        g->nodes[i].seg = g->nsegs;
}

/* Under cfg.ckpt, mark each segment's insides (nd->recomp): every node but its output
 * chain (the last node and the nodes it writes over in place). Checks the contract of
 * vt_g_segment, whose breach is a zoo bug: nothing after a segment reads its insides,
 * the insides read no output-chain node (which is not remade and holds the block's
 * output by then) and write in place only over insides, and net_ckpt.c can run them. */
static void mark_recomp(vt_graph *g) {
    for (int i = 0; i < g->nnodes; i++)
        g->nodes[i].recomp = g->cfg.ckpt && g->nodes[i].seg > 0;
    if (!g->cfg.ckpt)
        return;
    for (int i = 0; i < g->nnodes; i++) {
        vt_node *nd = &g->nodes[i];
        const int last = i + 1 == g->nnodes || g->nodes[i + 1].seg != nd->seg;
        if (!nd->seg || !last)
            continue;
        for (int k = i; k >= 0 && g->nodes[k].seg == nd->seg; k = g->nodes[k].in[0]) {
            g->nodes[k].recomp = 0; /* the output chain: kept */
            if (!g->nodes[k].inplace)
                break;
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        const vt_node *nd = &g->nodes[i];
        VT_CHECK(!nd->recomp || nd->kind == VT_NODE_ADD || nd->kind >= VT_NODE_TOKENS,
                 "node %s: kind %d cannot be recomputed (net_ckpt.c)", nd->name, (int)nd->kind);
        VT_CHECK(!nd->recomp || !nd->inplace || g->nodes[nd->in[0]].recomp,
                 "node %s: writes in place over a node its segment keeps", nd->name);
        for (int k = 0; k < nd->nin; k++) {
            const vt_node *p = nd->in[k] < 0 ? NULL : &g->nodes[nd->in[k]];
            VT_CHECK(!p || !p->recomp || p->seg == nd->seg,
                     "node %s reads %s inside another checkpoint segment", nd->name, p->name);
            VT_CHECK(!p || !nd->recomp || p->seg != nd->seg || p->recomp,
                     "node %s reads %s, its segment's output", nd->name, p->name);
        }
    }
}

/* BF16: every activation tensor starts on a multiple of 8 elements per clip, so its start
 * (per-clip offset x max_batch x 2 bytes) is 16-byte aligned whatever max_batch is: the
 * alignment tensor-core kernels load bf16 with. FP32 keeps the dense layout. */
static int64_t act_round(const vt_graph *g, int64_t n) {
    return g->cfg.precision == VT_PREC_BF16 ? (n + 7) & ~(int64_t)7 : n;
}

void vt_graph_plan(vt_graph *g) {
    const int bf16 = g->cfg.precision == VT_PREC_BF16;
    g->act_size = vt_precision_act_size(g->cfg.precision);
    int64_t off = 0, f32 = 0; /* the two regions' per-clip cursors */
    /* BF16: the first conv reads a bf16 copy of the float32 input clip. */
    g->input_off = -1;
    if (bf16) {
        g->input_off = off;
        off += act_round(g, (int64_t)3 * g->cfg.clip_t * g->cfg.clip_h * g->cfg.clip_w);
    }
    /* Activations and masks, in forward order; under cfg.ckpt the insides of each
     * checkpoint segment at offsets relative to the shared region (rel, relf), which
     * every segment starts over and which is placed after the rest. */
    mark_recomp(g);
    int64_t rel = 0, relf = 0;
    g->recomp_act = g->recomp_f32 = 0;
    for (int i = 0; i < g->nnodes; i++) {
        vt_node *nd = &g->nodes[i];
        if (nd->seg && (i == 0 || g->nodes[i - 1].seg != nd->seg))
            rel = relf = 0; /* a new segment: the region starts over */
        if (nd->inplace) {
            nd->act_off = g->nodes[nd->in[0]].act_off;
            nd->act_elems = 0;
        } else if (nd->recomp) {
            nd->act_off = rel;
            nd->act_elems = act_round(g, vt_node_floats(nd));
            rel += nd->act_elems;
            g->recomp_act = VT_MAX(g->recomp_act, rel);
        } else {
            nd->act_off = off;
            nd->act_elems = act_round(g, vt_node_floats(nd));
            off += nd->act_elems;
        }
        if (nd->kind == VT_NODE_DROPOUT)
            nd->mask_floats = vt_node_floats(nd);
        if (nd->kind == VT_NODE_LN) /* mean and invstd of each row */
            nd->mask_floats = 2 * (int64_t)nd->t * nd->h * nd->w;
        if (nd->kind == VT_NODE_ATTN) /* the log-sum-exp of each head's query rows */
            nd->mask_floats = (int64_t)nd->heads * nd->t;
        if (nd->kind == VT_NODE_DROPPATH) /* the clip's scale */
            nd->mask_floats = 1;
        /* msa: its builder set mask_floats (net_graph_mvit.c's vt_msa_layout_of) */
        if (nd->mask_floats && nd->recomp) {
            nd->mask_off = relf;
            relf += nd->mask_floats;
            g->recomp_f32 = VT_MAX(g->recomp_f32, relf);
        } else if (nd->mask_floats) {
            nd->mask_off = f32;
            f32 += nd->mask_floats;
        }
    }
    /* the shared region after the rest; the insides' offsets made absolute */
    g->recomp_act_off = off;
    g->recomp_f32_off = f32;
    off += g->recomp_act;
    f32 += g->recomp_f32;
    for (int i = 0; i < g->nnodes; i++) {
        vt_node *nd = &g->nodes[i];
        if (!nd->recomp)
            continue;
        nd->act_off += g->recomp_act_off; /* in place: its input's, made absolute alike */
        if (nd->mask_floats)
            nd->mask_off += g->recomp_f32_off;
    }
    g->act_total = off;
    g->mask_total = f32;
    /* Per-head loss, logits copy (BF16) and dlogits. */
    for (int h = 0; h < g->cfg.nheads; h++) {
        g->loss_off[h] = f32;
        f32 += 1;
        g->logit_off[h] = -1;
        if (bf16) {
            g->logit_off[h] = f32;
            f32 += g->cfg.head[h].classes;
        }
        g->dlogit_off[h] = off;
        off += act_round(g, g->cfg.head[h].classes);
        g->nodes[g->head_node[h]].gslot = -2 - h;
    }
    g->head_act = off - g->act_total;
    g->head_f32 = f32 - g->mask_total;
    /* Gradient slots: simulate backward in reverse node order. */
    for (int i = g->nnodes - 1; i >= 0; i--) {
        vt_node *nd = &g->nodes[i];
        for (int kk = 0; kk < VT_NODE_MAX_IN; kk++)
            nd->din[kk] = VT_DIN_NONE;
        if (nd->gslot == -1)
            continue; /* nothing downstream needs it (cannot happen in the zoo) */
        int transferred = 0;
        /* add: the skip input first, so the main input can take dout's slot last; concat:
         * the last branch first. */
        for (int kk = nd->nin - 1; kk >= 0; kk--) {
            int in = nd->in[kk];
            if (in < 0)
                continue;
            vt_node *p = &g->nodes[in];
            if (p->nograd)
                continue; /* made from the clip alone: nothing to deliver (VT_DIN_NONE) */
            /* the op may write din over dout (chscale: its x input; its scale input
             * has another size) */
            int elementwise = nd->kind == VT_NODE_RELU || nd->kind == VT_NODE_DROPOUT ||
                              nd->kind == VT_NODE_ADD || nd->kind == VT_NODE_SILU ||
                              nd->kind == VT_NODE_SIGMOID ||
                              (nd->kind == VT_NODE_CHSCALE && kk == 0);
            /* add's skip input and every concat input get dout (a slice of it for
             * concat) by copy or addition: never dout's slot itself. */
            if ((nd->kind == VT_NODE_ADD && kk == 1) || nd->kind == VT_NODE_CONCAT) {
                if (p->gslot == -1) {
                    nd->din[kk] = VT_DIN_COPY;
                    p->gslot = slot_take(g, act_round(g, in_floats(g, in)));
                } else {
                    nd->din[kk] = VT_DIN_AXPY;
                }
            } else if (p->gslot == -1) {
                if (elementwise && nd->gslot >= 0) {
                    nd->din[kk] = VT_DIN_TRANSFER;
                    p->gslot = nd->gslot;
                    transferred = 1;
                } else {
                    nd->din[kk] = VT_DIN_NEW;
                    p->gslot = slot_take(g, act_round(g, in_floats(g, in)));
                }
            } else if (nd->kind == VT_NODE_ADD) {
                nd->din[kk] = VT_DIN_AXPY;
            } else {
                nd->din[kk] = VT_DIN_ACCUM;
                nd->tmp_slot = slot_take(g, act_round(g, in_floats(g, in)));
            }
        }
        slot_give(g, nd->tmp_slot);
        if (!transferred && nd->gslot >= 0)
            slot_give(g, nd->gslot);
    }
    int64_t goff = off;
    for (int s = 0; s < g->nslots; s++) {
        g->slot_off[s] = off;
        off += g->slot_size[s];
    }
    g->grad_total = off - goff;
    g->clip_act = off;
    g->clip_f32 = f32;
    /* Fixed workspace: per BN mean | invstd | shift k (backend.h: the mean is k + mean);
     * one shared scratch for the collective buffers [sum | count | sumsq] (2c+1),
     * [sum | sumsq] and [sum_dy | sum_dy_xhat]; a constant 1. */
    int64_t ws = 0, scratch = 1;
    for (int i = 0; i < g->nnodes; i++) {
        vt_node *nd = &g->nodes[i];
        if (nd->kind == VT_NODE_POS) { /* the sin-cos table */
            nd->ws_off = ws;
            ws += vt_node_floats(nd);
        }
        if (nd->kind == VT_NODE_MSA) { /* its relative tables' interpolation */
            nd->ws_off = ws;
            ws += nd->ws_floats;
        }
        if (nd->kind == VT_NODE_QKV) /* [q_bias | 0 | v_bias] and its gradient */
            scratch = VT_MAX(scratch, 6 * (int64_t)nd->ic);
        if (nd->kind != VT_NODE_BN)
            continue;
        nd->ws_off = ws;
        ws += 3 * (int64_t)nd->c;
        scratch = VT_MAX(scratch, 2 * (int64_t)nd->c + 1);
    }
    g->scratch_off = ws;
    ws += scratch;
    g->one_off = ws;
    ws += 1;
    g->ws_floats = ws;
}

void vt_graph_free(vt_graph *g) {
    if (!g)
        return;
    for (int i = 0; i < g->ntensors; i++)
        free((void *)g->tensors[i].name);
    free(g->tensors);
    free(g->aux);
    free(g->nodes);
    free(g->slot_size);
    free(g->slot_off);
    free(g->slot_busy);
    memset(g, 0, sizeof *g);
}

int64_t vt_graph_io_bytes_per_clip(const vt_net_cfg *cfg) {
    int64_t b = (int64_t)3 * cfg->clip_t * cfg->clip_h * cfg->clip_w * (int64_t)sizeof(float);
    for (int h = 0; h < cfg->nheads; h++)
        b += (cfg->head[h].loss == VT_LOSS_BCE ? 0 : 4) +
             (cfg->head[h].loss == VT_LOSS_BCE || cfg->soft_targets
                  ? (int64_t)cfg->head[h].classes * 4 : 0);
    return b;
}
