/*
 * net.c: one replica of a network on one backend — the arenas (parameters, gradients,
 * buffers, workspace, and one per-clip arena for activations, masks, losses and
 * gradient slots, each ONE vt_backend_alloc), forward in train and eval mode, the
 * heads' losses and, for evaluation, their outputs (probabilities, sigmoids), backward
 * with gradient accumulation at branch points, sync-BN and the merge of replicas' BN
 * buffers through the caller's allreduce hook, counter-based dropout, and torchvision's
 * initialisation. Networks built with cfg.exact run the layers that sum over clips one
 * clip at a time with exact sums instead (net_exact.c, through net_impl.h).
 *
 * Precision: the per-clip arena is two allocations — activation elements (the [A] arrays
 * of backend.h, bf16 under BF16) and float32 values (masks, losses, logit copies) — laid
 * out by vt_graph_plan; pointers into the first are only ever formed by act_ptr/act_at
 * (never float arithmetic, which would be wrong for bf16 elements) and only handed to ops.
 *
 * It must never allocate after vt_net_init (a forward or backward that allocated would
 * break the memory plan the splitter trusts), never talk to other towers except through
 * its allreduce hook, and never do arithmetic on tensors itself: every number is made by
 * an op of the backend table, so the same code runs on cpu-ref, cpu and cuda (the host
 * only adds up per-clip losses it has copied back).
 */
#include <math.h>
#include <string.h>

#include "models/bf16.h"
#include "base/common.h"
#include "models/net.h"
#include "models/net_graph.h"
#include "models/net_impl.h"
#include "models/xsum.h"
#include "models/zoo.h"

/* What net->bn_momentum holds outside a statistics pass; it is then unused: each BN node
 * carries its model's eps and momentum (net_graph.h: PyTorch's 1e-5 and 0.1, S3D's 1e-3
 * and 1e-3). */
#define VT_BN_MOMENTUM 0.1f

void vt_net_cfg_default(vt_net_cfg *cfg, const char *model, int classes, int t, int h, int w) {
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->model, sizeof cfg->model, "%s", model);
    cfg->clip_t = t;
    cfg->clip_h = h;
    cfg->clip_w = w;
    cfg->nheads = 1;
    snprintf(cfg->head[0].name, sizeof cfg->head[0].name, "class");
    cfg->head[0].classes = classes;
    cfg->head[0].loss = VT_LOSS_SOFTMAX_CE;
    cfg->head[0].weight = 1.0f;
    cfg->head[0].smoothing = 0.0f;
    cfg->dropout = 0.0f;
}

static void net_release(vt_net *net) {
    vt_backend_free_ptr(net->be, net->params);
    vt_backend_free_ptr(net->be, net->grads);
    vt_backend_free_ptr(net->be, net->buffers);
    vt_backend_free_ptr(net->be, net->ws);
    vt_backend_free_ptr(net->be, net->clip);
    vt_backend_free_ptr(net->be, net->clipf);
    vt_backend_free_ptr(net->be, net->xgrads);
    vt_backend_free_ptr(net->be, net->xtmp);
    vt_backend_free_ptr(net->be, net->xbn);
    net->xgrads = net->xbn = NULL;
    net->params = net->grads = net->buffers = net->ws = net->clipf = net->xtmp = NULL;
    net->clip = NULL;
}

/* host_loss: pinned where the backend has host memory, so that vt_net_loss_issue's copy
 * into it waits for nothing (net_loss.c). */
static float *host_loss_alloc(vt_net *net) {
    const size_t bytes = (size_t)net->g.cfg.nheads * (size_t)(net->mb ? net->mb : 1) *
                         sizeof(float);
    vt_backend *be = net->be;
    net->host_loss_pinned = be->i->host_alloc != NULL;
    float *p = net->host_loss_pinned ? be->i->host_alloc(be, bytes) : vt_malloc(bytes);
    memset(p, 0, bytes);
    return p;
}

static void host_loss_free(vt_net *net) {
    if (net->host_loss_pinned && net->host_loss)
        net->be->i->host_free(net->be, net->host_loss);
    else
        free(net->host_loss);
    net->host_loss = NULL;
}

vt_net *vt_net_init(const vt_net_cfg *cfg, vt_backend *be, int max_batch, char *err,
                    size_t errlen) {
    VT_CHECK(be != NULL && max_batch >= 0, "vt_net_init: backend %p, max_batch %d", (void *)be,
             max_batch);
    vt_net *net = vt_calloc(1, sizeof *net);
    if (vt_graph_make(&net->g, cfg, err, errlen) < 0) {
        free(net);
        return NULL;
    }
    net->be = be;
    net->mb = max_batch;
    net->bn_momentum = VT_BN_MOMENTUM;
    net->bn_pass_clips = -1;
    const vt_graph *g = &net->g;
    if (vt_backend_set_precision(be, cfg->precision, err, errlen) < 0 ||
        vt_netv_check_backend(net, err, errlen) < 0) {
        vt_graph_free(&net->g);
        free(net);
        return NULL;
    }
    /* Sizes in bytes; every one a multiple of 4 (activation regions of BF16 are multiples
     * of 8 elements), so each arena is zeroed as floats. */
    struct { void **p; int64_t bytes; const char *what; int opt; } arenas[] = {
        {(void **)&net->params, g->nparams * 4, "parameters", 0},
        {(void **)&net->grads, g->nparams * 4, "gradients", 0},
        {(void **)&net->buffers, g->nbuffers * 4, "buffers", 0},
        {(void **)&net->ws, g->ws_floats * 4, "workspace", 0},
        {&net->clip, g->clip_act * g->act_size * max_batch, "activations", 0},
        {(void **)&net->clipf, g->clip_f32 * 4 * max_batch, "per-clip floats", 0},
        /* cfg.exact only (net_exact.c): opt, not allocated without it */
        {(void **)&net->xgrads, cfg->exact ? g->nparams * 16 : 0, "gradient accumulators", 1},
        {(void **)&net->xtmp, cfg->exact ? vt_netx_xtmp_floats(g) * 4 : 0, "a clip's gradients", 1},
        {(void **)&net->xbn, cfg->exact ? vt_netx_xbn_i64(g) * 8 : 0, "batch-norm accumulators", 1},
    };
    if (cfg->exact && (!be->i->xsum_fold || !be->i->xsum_round)) {
        vt_set_err(err, errlen, "%s on %s%d: this backend has no exact sums (xsum ops); "
                   "build the network without cfg.exact", cfg->model, be->i->name, be->ordinal);
        vt_graph_free(&net->g);
        free(net);
        return NULL;
    }
    for (size_t i = 0; i < VT_ARRAY_LEN(arenas); i++) {
        size_t bytes = (size_t)arenas[i].bytes;
        if (bytes == 0 && arenas[i].opt)
            continue; /* an exact-sums arena of a network without them */
        *arenas[i].p = vt_backend_alloc(be, bytes);
        if (!*arenas[i].p) {
            char a[32], b[32], c[32];
            vt_set_err(err, errlen, "%s on %s%d: cannot allocate %s of %s with %d clips per "
                       "pass (holding %s, budget %s); lower the batch or the clip size",
                       cfg->model, be->i->name, be->ordinal, vt_fmt_bytes(a, sizeof a,
                       (int64_t)bytes), arenas[i].what, max_batch, vt_fmt_bytes(b, sizeof b,
                       be->in_use), be->budget ? vt_fmt_bytes(c, sizeof c, be->budget)
                       : "unlimited");
            net_release(net);
            vt_graph_free(&net->g);
            free(net);
            return NULL;
        }
        if (arenas[i].bytes > 0)
            VT_OP(be, fill, (float *)*arenas[i].p, 0.0f, arenas[i].bytes / 4);
    }
    VT_OP(be, fill, net->ws + g->one_off, 1.0f, 1);
    vt_netv_init_ws(net);
    net->bn_count = vt_calloc((size_t)g->nnodes, sizeof(int64_t));
    net->bn_frozen = vt_calloc((size_t)g->nnodes, 1);
    net->xfresh = vt_calloc((size_t)VT_MAX(g->ntensors, 1), 1); /* zeroed above: none fresh */
    net->host_loss = host_loss_alloc(net);
    return net;
}

void vt_net_free(vt_net **pnet) {
    if (!pnet || !*pnet)
        return;
    vt_net *net = *pnet;
    net_release(net);
    vt_graph_free(&net->g);
    free(net->bn_count);
    free(net->bn_frozen);
    free(net->xfresh);
    host_loss_free(net);
    free(net);
    *pnet = NULL;
}

const vt_net_cfg *vt_net_config(const vt_net *net) { return &net->g.cfg; }
vt_backend *vt_net_backend(const vt_net *net) { return net->be; }
int vt_net_max_batch(const vt_net *net) { return net->mb; }
int64_t vt_net_num_params(const vt_net *net) { return net->g.nparams; }
float *vt_net_params(vt_net *net) { return net->params; }
float *vt_net_grads(vt_net *net) { return net->grads; }
int64_t vt_net_num_buffers(const vt_net *net) { return net->g.nbuffers; }
float *vt_net_buffers(vt_net *net) { return net->buffers; }
int vt_net_num_tensors(const vt_net *net) { return net->g.ntensors; }

const vt_tensor_info *vt_net_tensor(const vt_net *net, int i) {
    return i >= 0 && i < net->g.ntensors ? &net->g.tensors[i] : NULL;
}

const vt_tensor_info *vt_net_find_tensor(const vt_net *net, const char *name) {
    for (int i = 0; i < net->g.ntensors; i++)
        if (!strcmp(net->g.tensors[i].name, name))
            return &net->g.tensors[i];
    return NULL;
}

int vt_net_tensor_head(const vt_net *net, int i) {
    if (i < 0 || i >= net->g.ntensors)
        return -1;
    const vt_node *nd = &net->g.nodes[net->g.aux[i].node];
    return nd->kind == VT_NODE_LINEAR ? nd->head : -1;
}

int vt_net_set_bn_frozen(vt_net *net, const char *name, int on) {
    for (int i = 0; i < net->g.nnodes; i++)
        if (net->g.nodes[i].kind == VT_NODE_BN && !strcmp(net->g.nodes[i].name, name)) {
            net->bn_frozen[i] = on != 0;
            return 1;
        }
    return 0;
}

int vt_net_num_bn(const vt_net *net, int *frozen) {
    int n = 0, f = 0;
    for (int i = 0; i < net->g.nnodes; i++)
        if (net->g.nodes[i].kind == VT_NODE_BN) {
            n++;
            f += net->bn_frozen[i] != 0;
        }
    if (frozen)
        *frozen = f;
    return n;
}

void vt_net_zero_grad(vt_net *net) {
    if (net->g.nparams > 0)
        VT_OP(net->be, fill, net->grads, 0.0f, net->g.nparams);
    /* the accumulators are not filled (16 bytes a parameter): each tensor's first fold
     * writes them, and vt_netx_settle zeroes those never folded before they are read */
    if (net->xgrads && net->g.ntensors > 0)
        memset(net->xfresh, 1, (size_t)net->g.ntensors);
}

int64_t *vt_net_xgrads(vt_net *net) {
    if (net->xgrads)
        vt_netx_settle(net);
    return net->xgrads;
}

void vt_net_round_grads(vt_net *net) {
    if (net->xgrads && net->g.nparams > 0) {
        vt_netx_settle(net);
        VT_OP(net->be, xsum_round, net->grads, net->xgrads, net->g.nparams, VT_XSUM_GRAD_E0);
    }
}

void vt_net_set_bn_sync_exact(vt_net *net, vt_allreduce_i64_fn fn, void *ctx) {
    net->bn_sync_x = fn;
    net->bn_sync_ctx = ctx;
}

void vt_net_set_dropout_seed(vt_net *net, uint64_t seed) { net->dropout_seed = seed; }

void vt_net_set_bn_momentum(vt_net *net, float m) {
    VT_CHECK(m >= 0 && m <= 1, "BN momentum %g outside [0, 1]", (double)m);
    net->bn_momentum = m > 0 ? m : VT_BN_MOMENTUM;
    net->bn_pass = m > 0;
}

void vt_net_set_bn_pass_clips(vt_net *net, int64_t clips) { net->bn_pass_clips = clips; }

void vt_net_set_bn_sync(vt_net *net, vt_allreduce_fn fn, void *ctx) {
    net->bn_sync = fn;
    net->bn_sync_ctx = ctx;
}

const float *vt_net_logits(const vt_net *net, int head) {
    VT_CHECK(head >= 0 && head < net->g.cfg.nheads, "head %d of %d", head, net->g.cfg.nheads);
    if (net->g.logit_off[head] >= 0)
        return f32_at(net, net->g.logit_off[head]);
    return act(net, net->g.head_node[head]);
}

/* The features the heads read (their input), copied to the host as float32: the bytes
 * of the activation as they are, widened on the host under BF16 (a bf16 value is the top
 * half of its float, so that is exact and makes no number). */
int vt_net_feature_dim(const vt_net *net) {
    return (int)vt_node_floats(&net->g.nodes[net->g.feat]);
}

void vt_net_features(const vt_net *net, float *host, int n) {
    VT_CHECK(n >= 0 && n <= net->last_n, "features of %d clips after a forward of %d", n,
             net->last_n);
    const int64_t cnt = (int64_t)n * vt_net_feature_dim(net);
    net->be->i->to_host(net->be, host, act(net, net->g.feat), (size_t)cnt * net->g.act_size);
    for (int64_t i = cnt - 1; i >= 0 && net->g.act_size == (int)sizeof(vt_bf16); i--) {
        vt_bf16 h; /* backwards, so the in-place widening reads each value before it is hit */
        memcpy(&h, (const char *)host + i * (int64_t)sizeof h, sizeof h);
        host[i] = vt_bf16_to_f32(h);
    }
}

/* ---- forward ---- */

/* apply = 0: statistics only, the apply deferred into a fused op (net_fuse.c). */
static void bn_forward(vt_net *net, int i, const float *x, float *out, int n, int train,
                       int apply) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int c = nd->c;
    const int64_t s = (int64_t)nd->t * nd->h * nd->w;
    /* mean is relative to the shift k (backend.h); backward reads all three */
    float *mean = net->ws + nd->ws_off, *invstd = mean + c, *k = mean + 2 * c;
    float *buf = net->ws + net->g.scratch_off;
    if (!train || net->bn_frozen[i]) {
        /* count 0: mean/invstd from the running statistics (backend.h), k = 0. A frozen BN
         * (fine-tuning) is a fixed per-channel affine map: no statistics, no sync-BN
         * collective (every tower freezes the same layers, so the collectives still
         * line up), running statistics and num_batches_tracked kept. */
        VT_OP(be, fill, k, 0.0f, c);
        VT_OP(be, bn_finalize, mean, invstd, buffer(net, nd->rm), buffer(net, nd->rv), buf,
              buf + c, NULL, 0, c, nd->bn_momentum, nd->bn_eps);
        if (apply)
            vt_net_bn_apply_node(net, i, x, out, NULL, n, 0);
        return;
    }
    /* Two passes over x, each a plain SUM across towers (docs/design.md §3.1: no float
     * sum x^2 cancelling against mean^2). First [sum x | count] gives the global batch
     * mean k, the same bits on every tower (one allreduced buffer, one float multiply);
     * then [sum (x-k) | sum (x-k)^2] around it, whose float rounding is relative to the
     * variance itself, and the mean is kept as k + (sum (x-k))/count. The scratch holds
     * the first pass's [sum | count | unused sumsq] (2c+1), then the second's sums. */
    int64_t count = (int64_t)n * s;
    const int exact = net->g.cfg.exact;
    if (exact) /* clip by clip, exactly: [sum | sumsq] (sumsq unused) */
        vt_netx_bn_sums(net, i, buf, x, NULL, NULL, NULL, NULL, n, &count, 0);
    else if (n == 0) /* ops do nothing for n == 0; an empty tower contributes zeros */
        VT_OP(be, fill, buf, 0.0f, c);
    else
        VT_OP(be, bn_stats, buf, buf + c + 1, x, NULL, n, c, s);
    if (net->bn_sync && !exact && net->bn_pass_clips >= 0) {
        /* the pass's clips over every tower known on the host (the towers' plan): only
         * the sums travel, and nothing comes back to the host (issue 45 step 3) */
        net->bn_sync(net->bn_sync_ctx, buf, (int64_t)c);
        count = net->bn_pass_clips * s;
    } else if (net->bn_sync && !exact) {
        /* The count travels as a float with the sums; it is a multiple of S and exact
         * below 2^24 elements per channel, and within 6e-8 relative beyond. */
        VT_OP(be, fill, buf + c, (float)count, 1);
        net->bn_sync(net->bn_sync_ctx, buf, (int64_t)c + 1);
        float fc = 0;
        be->i->to_host(be, &fc, buf + c, sizeof fc);
        count = llroundf(fc);
    }
    net->bn_count[i] = count;
    if (!net->bn_pass)
        VT_OP(be, axpy, buffer(net, nd->nbt), 1.0f, net->ws + net->g.one_off, 1);
    if (count == 0)
        return; /* every tower empty: nothing to normalise, running statistics kept */
    be->i->copy(be, k, buf, (size_t)c * sizeof(float));
    VT_OP(be, scale, k, (float)(1.0 / (double)count), c);
    if (exact)
        vt_netx_bn_sums(net, i, buf, x, k, NULL, NULL, NULL, n, NULL, 0);
    else if (n == 0)
        VT_OP(be, fill, buf, 0.0f, 2 * (int64_t)c);
    else
        VT_OP(be, bn_stats, buf, buf + c, x, k, n, c, s);
    if (net->bn_sync && !exact)
        net->bn_sync(net->bn_sync_ctx, buf, 2 * (int64_t)c);
    VT_OP(be, bn_finalize, mean, invstd, buffer(net, nd->rm), buffer(net, nd->rv), buf, buf + c,
          k, count, c, net->bn_pass ? net->bn_momentum : nd->bn_momentum, nd->bn_eps);
    if (apply)
        vt_net_bn_apply_node(net, i, x, out, NULL, n, 0);
}

/* Concat node i moves its inputs' activations into its output's channel slices
 * (backward = 0), or its output's gradient out of them into its inputs' gradients
 * (backward = 1: copied into a first contribution, added to a later one). Clip by clip
 * with the plain copy and add ops, so every backend has it without a kernel of its own:
 * in (N, C, T, H, W) a branch's channels are one block per clip, C * THW elements
 * apart. */
static void concat_slices(vt_net *net, int i, int n, int backward) {
    vt_backend *be = net->be;
    const vt_graph *g = &net->g;
    const vt_node *nd = &g->nodes[i];
    const int64_t thw = (int64_t)nd->t * nd->h * nd->w, whole = (int64_t)nd->c * thw;
    float *cat = backward ? grad_of(net, i) : act(net, i);
    int64_t at = 0; /* the branch's first element within a clip of the output */
    for (int k = 0; k < nd->nin; k++) {
        const int64_t part = (int64_t)g->nodes[nd->in[k]].c * thw;
        float *mine = backward ? grad_of(net, nd->in[k]) : act(net, nd->in[k]);
        for (int j = 0; j < n; j++) {
            float *slice = act_ptr(net, cat, j * whole + at), *own = act_ptr(net, mine, j * part);
            if (!backward)
                be->i->copy(be, slice, own, (size_t)part * (size_t)g->act_size);
            else if (nd->din[k] == VT_DIN_COPY)
                be->i->copy(be, own, slice, (size_t)part * (size_t)g->act_size);
            else
                VT_OP(be, add, own, own, slice, part);
        }
        at += part;
    }
}

void vt_net_forward(vt_net *net, const float *x, int n, int train) {
    VT_CHECK(n >= 0 && n <= net->mb, "forward of %d clips on a net built for %d", n, net->mb);
    vt_backend *be = net->be;
    vt_graph *g = &net->g;
    VT_CHECK(be->precision == g->cfg.precision, "net built for %s, backend set to %s",
             vt_precision_name(g->cfg.precision), vt_precision_name(be->precision));
    if (g->input_off >= 0) { /* BF16: the convs read a bf16 copy of the float32 clip */
        float *xa = clip_at(net, g->input_off);
        VT_OP(be, act_from_f32, xa, x,
              (int64_t)n * 3 * g->cfg.clip_t * g->cfg.clip_h * g->cfg.clip_w);
        x = xa;
    }
    const int fuse = vt_net_fuse_on(net); /* BN + ReLU (+ add) in one op: net_fuse.c */
    for (int i = 0; i < g->nnodes; i++) {
        const vt_node *nd = &g->nodes[i];
        const float *in = nd->in[0] < 0 ? x : act(net, nd->in[0]);
        /* a ReLU, or an add before one, that ends a fused BN: the BN's apply here */
        const int fb = fuse && (nd->kind == VT_NODE_RELU || nd->kind == VT_NODE_ADD) &&
                               nd->in[0] >= 0 && g->nodes[nd->in[0]].kind == VT_NODE_BN
                           ? nd->in[0] : -1;
        const int tail = fb >= 0 ? vt_net_fuse_tail(g, fb) : -1;
        if (tail >= 0 && (tail == i || (nd->kind == VT_NODE_ADD && tail == i + 1))) {
            const int bin = g->nodes[fb].in[0];
            vt_net_bn_apply_node(net, fb, bin < 0 ? x : act(net, bin), act(net, tail),
                                 nd->kind == VT_NODE_ADD ? act(net, nd->in[1]) : NULL, n, 1);
            i = tail; /* the add and the ReLU are done */
            continue;
        }
        float *out = act(net, i);
        const int in_thw[3] = {nd->it, nd->ih, nd->iw};
        const int64_t nf = (int64_t)n * vt_node_floats(nd);
        switch (nd->kind) {
        case VT_NODE_CONV:
            if (g->cfg.exact)
                vt_netx_conv_forward(net, i, out, in, n);
            else
                VT_OP(be, conv3d_forward, out, in, param(net, nd->wt), param(net, nd->bt), n,
                      in_thw, &nd->conv);
            break;
        case VT_NODE_BN:
            bn_forward(net, i, in, out, n, train, !(fuse && vt_net_fuse_tail(g, i) >= 0));
            break;
        case VT_NODE_RELU:
            VT_OP(be, relu_forward, out, in, nf);
            break;
        case VT_NODE_MAXPOOL:
            VT_OP(be, maxpool3d_forward, out, in, n, nd->ic, in_thw, &nd->pool);
            break;
        case VT_NODE_GAP:
            VT_OP(be, gap_forward, out, in, n, nd->ic, (int64_t)nd->it * nd->ih * nd->iw);
            break;
        case VT_NODE_LINEAR:
            if (g->cfg.exact)
                vt_netx_linear_forward(net, i, out, in, n);
            else
                VT_OP(be, linear_forward, out, in, param(net, nd->wt), param(net, nd->bt), n,
                      nd->ic, nd->c);
            if (nd->head >= 0 && g->logit_off[nd->head] >= 0) /* BF16: the loss reads F32 */
                VT_OP(be, act_to_f32, f32_at(net, g->logit_off[nd->head]), out, nf);
            break;
        case VT_NODE_DROPOUT: {
            const int64_t f = vt_node_floats(nd);
            if (!train) {
                if (out != in)
                    be->i->copy(be, out, in, (size_t)nf * (size_t)g->act_size);
                break;
            }
            /* One draw per clip, seeded by the clip's global position: the caller's seed
             * is the value for its FIRST clip, so local clip j draws with
             * hash64(hash64(seed + j) + k) for the k-th dropout of the graph, element
             * index within the clip. The mask of a clip is thus the same whichever tower,
             * slice or micro-batch runs it (tests/oracle/torch_golden.py replays it). */
            float *mask = f32_at(net, nd->mask_off);
            for (int j = 0; j < n; j++)
                VT_OP(be, dropout_forward, act_ptr(net, out, j * f), mask + j * f,
                      act_ptr(net, in, j * f), f, nd->drop_p,
                      vt_hash64(vt_hash64(net->dropout_seed + (uint64_t)j) +
                                (uint64_t)nd->drop_index));
            break;
        }
        case VT_NODE_ADD:
            VT_OP(be, add, out, in, act(net, nd->in[1]), nf);
            break;
        case VT_NODE_AVGPOOL:
            VT_OP(be, avgpool3d_forward, out, in, n, nd->ic, in_thw, &nd->pool);
            break;
        case VT_NODE_CONCAT:
            concat_slices(net, i, n, 0);
            break;
        case VT_NODE_TGATHER:
            vt_net_tgather_forward(net, i, x, n);
            break;
        case VT_NODE_SILU:
            VT_OP(be, silu_forward, out, in, nf);
            break;
        case VT_NODE_SIGMOID:
            VT_OP(be, sigmoid_forward, out, in, nf);
            break;
        case VT_NODE_CHSCALE:
            VT_OP(be, chscale_forward, out, in, act(net, nd->in[1]), n, nd->c,
                  (int64_t)nd->t * nd->h * nd->w);
            break;
        default: /* the transformer nodes */
            vt_netv_forward(net, i, in, out, n, train);
            break;
        }
    }
    net->input = x;
    net->last_n = n;
    net->last_train = train;
    net->have_loss = 0;
}

/* ---- backward ---- */

static void bn_backward(vt_net *net, int i, float *din, const float *dy, const float *x, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int c = nd->c;
    const int64_t s = (int64_t)nd->t * nd->h * nd->w;
    const float *mean = net->ws + nd->ws_off, *invstd = mean + c, *k = mean + 2 * c;
    float *buf = net->ws + net->g.scratch_off;
    const int exact = net->g.cfg.exact;
    if (exact) {
        /* clip by clip: each clip's sums into gamma's and beta's accumulators, and the
         * exact [sum_dy | sum_dy_xhat] over every tower (sync-BN) into buf */
        vt_netx_bn_sums(net, i, buf, x, k, dy, mean, invstd, n, NULL, 1);
    } else {
        if (n == 0)
            VT_OP(be, fill, buf, 0.0f, 2 * (int64_t)c);
        else /* with the ReLU after it where fused (net_fuse.c) */
            vt_net_bn_backward_reduce(net, i, buf, (float *)dy, x, n);
        /* Parameter gradients from the LOCAL sums: the gradient reducer adds the towers. */
        VT_OP(be, axpy, pgrad(net, nd->wt), 1.0f, buf + c, c);
        VT_OP(be, axpy, pgrad(net, nd->bt), 1.0f, buf, c);
    }
    if (net->bn_frozen[i]) {
        /* Eval-mode BN: mean and invstd are constants, so din = gamma * invstd * dy —
         * bn_backward_apply with both sums zero (any count). */
        if (din && n > 0) {
            VT_OP(be, fill, buf, 0.0f, 2 * (int64_t)c);
            VT_OP(be, bn_backward_apply, din, dy, x, k, mean, invstd, param(net, nd->wt), buf,
                  buf + c, 1, n, c, s);
        }
        return;
    }
    if (net->bn_sync && !exact)
        net->bn_sync(net->bn_sync_ctx, buf, 2 * (int64_t)c);
    if (din && n > 0 && net->bn_count[i] > 0)
        VT_OP(be, bn_backward_apply, din, dy, x, k, mean, invstd, param(net, nd->wt), buf,
              buf + c, net->bn_count[i], n, c, s);
}

/* ---- buffers across replicas ---- */

/* The running statistics and counter of every frozen BN layer, out to host memory
 * (out = 1) or back from it; returns the floats moved (keep NULL: only counts them). */
static int64_t frozen_bn_stats(vt_net *net, float *keep, int out) {
    const vt_graph *g = &net->g;
    vt_backend *be = net->be;
    int64_t at = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (!net->bn_frozen[i])
            continue;
        const int tensors[3] = {g->nodes[i].rm, g->nodes[i].rv, g->nodes[i].nbt};
        for (int k = 0; k < 3; k++) {
            const vt_tensor_info *t = &g->tensors[tensors[k]];
            float *p = net->buffers + t->offset;
            if (keep && out)
                be->i->to_host(be, keep + at, p, (size_t)t->numel * sizeof(float));
            else if (keep)
                be->i->to_device(be, p, keep + at, (size_t)t->numel * sizeof(float));
            at += t->numel;
        }
    }
    return at;
}

void vt_net_merge_buffers(vt_net *net, float weight, vt_allreduce_fn sum, void *ctx) {
    const vt_graph *g = &net->g;
    if (g->nbuffers == 0)
        return;
    /* Frozen BN layers hold the same statistics on every replica: kept aside and put
     * back, since a weighted sum of equal values need not round to that value. */
    int64_t nkeep = frozen_bn_stats(net, NULL, 0);
    float *keep = nkeep ? vt_malloc((size_t)nkeep * sizeof(float)) : NULL;
    if (keep)
        frozen_bn_stats(net, keep, 1);
    VT_OP(net->be, scale, net->buffers, weight, g->nbuffers);
    sum(ctx, net->buffers, g->nbuffers);
    /* the counters: a weighted average of integers is not one (the towers ran different
     * numbers of passes) */
    for (int i = 0; i < g->ntensors; i++)
        if (g->tensors[i].is_buffer && g->tensors[i].is_int64)
            VT_OP(net->be, round_even, net->buffers + g->tensors[i].offset, g->tensors[i].numel);
    if (keep) {
        frozen_bn_stats(net, keep, 0);
        vt_backend_sync(net->be);
        free(keep);
    }
}

int vt_net_reads_input_in_backward(const vt_net *net) { return net->g.input_off < 0; }

void vt_net_set_grad_ready(vt_net *net, vt_grad_ready_fn fn, void *ctx) {
    net->grad_ready = fn;
    net->grad_ready_ctx = ctx;
}

void vt_net_backward(vt_net *net) {
    VT_CHECK(net->last_train, "backward without a training forward");
    VT_CHECK(net->have_loss, "backward before vt_net_loss seeded the heads' gradients");
    vt_backend *be = net->be;
    vt_graph *g = &net->g;
    const int n = net->last_n;
    VT_CHECK(!(g->cfg.exact && net->grad_ready), "exact sums: gradients are ready only after "
             "the towers' sum of their accumulators (no grad_ready hook)");
    net->ready_lo = g->nparams;
    for (int i = g->nnodes - 1; i >= 0; i--) {
        const vt_node *nd = &g->nodes[i];
        vt_netc_recompute(net, i); /* checkpointing: a segment's insides again (net_ckpt.c) */
        if (nd->gslot == -1)
            continue;
        const float *dout = grad_of(net, i);
        const int in0 = nd->in[0];
        const float *in = in0 < 0 ? NULL : act(net, in0);
        const int in_thw[3] = {nd->it, nd->ih, nd->iw};
        const int64_t nf_in = in0 < 0 ? 0 : (int64_t)n * vt_node_floats(&g->nodes[in0]);
        if (nd->kind == VT_NODE_CONCAT) {
            concat_slices(net, i, n, 1);
            continue;
        }
        if (nd->kind == VT_NODE_ADD) {
            /* Skip input first (copy or accumulate dout), then the main input. */
            /* Gradients meeting at a branch add with `add`, an activation op (bf16 under
             * BF16); in FP32 it is bitwise axpy with a = 1. */
            float *gb = grad_of(net, nd->in[1]);
            if (nd->din[1] == VT_DIN_COPY && vt_net_fuse_skip(net, i + 1) != i)
                be->i->copy(be, gb, dout, (size_t)nf_in * (size_t)g->act_size);
            else if (nd->din[1] != VT_DIN_COPY) /* (fused: the ReLU wrote it, net_fuse.c) */
                VT_OP(be, add, gb, gb, dout, nf_in);
            if (nd->din[0] == VT_DIN_AXPY)
                VT_OP(be, add, grad_of(net, in0), grad_of(net, in0), dout, nf_in);
            /* VT_DIN_TRANSFER: the main input's gradient IS dout, nothing to do. */
            continue;
        }
        float *din = NULL;
        switch (nd->din[0]) {
        case VT_DIN_NONE: din = NULL; break;
        case VT_DIN_NEW: din = grad_of(net, in0); break;
        case VT_DIN_TRANSFER: din = (float *)dout; break;
        case VT_DIN_ACCUM: din = clip_at(net, g->slot_off[nd->tmp_slot]); break;
        default: VT_DIE("node %s: din mode %d", nd->name, nd->din[0]);
        }
        switch (nd->kind) {
        case VT_NODE_CONV:
            if (g->cfg.exact)
                vt_netx_conv_backward(net, i, din, dout, in0 < 0 ? net->input : in, n);
            else
                VT_OP(be, conv3d_backward, din, pgrad(net, nd->wt), pgrad(net, nd->bt), dout,
                      in0 < 0 ? net->input : in, param(net, nd->wt), n, in_thw, &nd->conv);
            break;
        case VT_NODE_BN:
            bn_backward(net, i, din, dout, in, n);
            break;
        case VT_NODE_RELU: /* fused with its BN or the add's skip where it can */
            vt_net_relu_backward(net, i, din, dout, nf_in);
            break;
        case VT_NODE_MAXPOOL:
            VT_OP(be, maxpool3d_backward, din, dout, in, n, nd->ic, in_thw, &nd->pool);
            break;
        case VT_NODE_GAP:
            VT_OP(be, gap_backward, din, dout, n, nd->ic, (int64_t)nd->it * nd->ih * nd->iw);
            break;
        case VT_NODE_LINEAR:
            if (g->cfg.exact)
                vt_netx_linear_backward(net, i, din, dout, in, n);
            else
                VT_OP(be, linear_backward, din, pgrad(net, nd->wt), pgrad(net, nd->bt), dout, in,
                      param(net, nd->wt), n, nd->ic, nd->c);
            break;
        case VT_NODE_DROPOUT:
            VT_OP(be, dropout_backward, din, dout, f32_at(net, nd->mask_off), nf_in);
            break;
        case VT_NODE_AVGPOOL:
            VT_OP(be, avgpool3d_backward, din, dout, n, nd->ic, in_thw, &nd->pool);
            break;
        case VT_NODE_SILU:
            VT_OP(be, silu_backward, din, dout, in, nf_in);
            break;
        case VT_NODE_SIGMOID:
            VT_OP(be, sigmoid_backward, din, dout, act(net, i), nf_in);
            break;
        case VT_NODE_CHSCALE: /* the scale's gradient is its only consumer's (net_graph.c) */
            VT_CHECK(nd->din[1] == VT_DIN_NEW, "node %s: scale din mode %d", nd->name,
                     nd->din[1]);
            VT_OP(be, chscale_backward, din, grad_of(net, nd->in[1]), dout, in,
                  act(net, nd->in[1]), n, nd->c, (int64_t)nd->t * nd->h * nd->w);
            break;
        case VT_NODE_ADD:
        case VT_NODE_CONCAT:
        case VT_NODE_TGATHER: /* never: nograd, so no gradient slot */
            break;
        default: /* the transformer nodes */
            vt_netv_backward(net, i, din, dout, in, n);
            break;
        }
        if (nd->din[0] == VT_DIN_ACCUM)
            VT_OP(be, add, grad_of(net, in0), grad_of(net, in0), din, nf_in);
        if (net->grad_ready && (nd->wt >= 0 || nd->bt >= 0)) {
            /* this layer's parameters are the lowest of those done so far (vt_graph:
             * tensors are laid out in node order) */
            int64_t lo = nd->wt >= 0 ? g->tensors[nd->wt].offset : g->tensors[nd->bt].offset;
            if (nd->bt >= 0 && g->tensors[nd->bt].offset < lo)
                lo = g->tensors[nd->bt].offset;
            VT_CHECK(lo < net->ready_lo, "node %s: parameters at %lld after %lld (the arena "
                     "must be in node order)", nd->name, (long long)lo, (long long)net->ready_lo);
            net->ready_lo = lo;
            net->grad_ready(net->grad_ready_ctx, lo);
        }
    }
}
