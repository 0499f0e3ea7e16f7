/*
 * net_mvit.c: running MViT's nodes of a graph (net_graph.h, net_graph_mvit.c) — the class
 * token, the multiscale attention, the skip connection's max pooling of the token grid
 * and the class token's row — for net_vit.c, which hands them here.
 *
 * The multiscale attention (torchvision's MultiscaleAttention between qkv and project):
 * per part x of q, k, v, mvit_pool (gather + depthwise conv3d of the grid, the class
 * token's row kept) and, when pooled, a LayerNorm over head_dim; then mvit_attention
 * (relative positions, residual pooling). What its backward needs lives in the node's
 * float32 region (vt_msa_layout), scaled by the pass's clips.
 * Exact sums (cfg.exact): the parameter gradients are formed one clip at a time and each
 * clip's folded into the accumulators, as net_vit.c does (towers = one device).
 * The ops exist on cpu-ref, cpu and cuda (models/cuda/cuda_mvit.c); vt_netm_check_backend
 * names the first one a backend lacks. BF16: on the cuda backend only, as the ViTs'
 * (vt_netv_check_backend refuses it elsewhere); the [A] arrays — activations, the node's
 * pooled q, k, v and their gradients in its region (vt_msa_layout_of's act_size) — are
 * then bf16, so pointers into them step by g.act_size bytes (act_ptr); the parameters
 * (class token, positions, relative tables) and their interpolation stay float, the
 * latter run with the backend's FP32 ops (f32_ops).
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net_impl.h"
#include "models/xsum.h"

int vt_netm_check_backend(const vt_net *net, char *err, size_t errlen) {
    const vt_backend_i *t = net->be->i;
    const struct { const char *name; int have; } ops[] = {
        {"mvit_pool", t->mvit_pool_forward && t->mvit_pool_backward},
        {"mvit_attention", t->mvit_attention_forward && t->mvit_attention_backward},
        {"token_maxpool", t->token_maxpool_forward && t->token_maxpool_backward},
        {"layernorm", t->layernorm_forward && t->layernorm_backward},
    };
    for (int i = 0; i < net->g.nnodes; i++) {
        const vt_node_kind k = net->g.nodes[i].kind;
        if (k != VT_NODE_CLSTOK && k != VT_NODE_MSA && k != VT_NODE_TMAXPOOL &&
            k != VT_NODE_TFIRST)
            continue;
        for (size_t o = 0; o < VT_ARRAY_LEN(ops); o++)
            if (!ops[o].have) {
                vt_set_err(err, errlen, "%s: op %s is not on %s yet (MViT runs on cpu-ref, "
                           "cpu and cuda)", net->g.cfg.model, ops[o].name, t->name);
                return -1;
            }
        return 0;
    }
    return 0;
}

void vt_netm_init_ws(vt_net *net) {
    const vt_graph *g = &net->g;
    for (int i = 0; i < g->nnodes; i++) {
        vt_msa_rel r;
        vt_msa_rel_of(g, &g->nodes[i], &r);
        for (int k = 0; k < 3; k++) {
            if (r.m[k] < 0)
                continue;
            const int S = r.stored[k], N = r.need[k];
            float *m = vt_interp_linear_matrix(S, N);
            net->be->i->to_device(net->be, net->ws + g->nodes[i].ws_off + r.m[k], m,
                                  (size_t)N * S * sizeof(float));
            free(m);
        }
    }
}

/* Under BF16, switch the backend to FP32 ops (on) and back (off) around arithmetic on float
 * parameters that reuses activation ops (transpose, linear, add_bcast, add); a no-op at
 * other precisions. */
static void f32_ops(vt_net *net, int on) {
    if (net->g.cfg.precision != VT_PREC_BF16)
        return;
    char err[256];
    VT_CHECK(vt_backend_set_precision(net->be, on ? VT_PREC_FP32 : VT_PREC_BF16, err,
                                      sizeof err) == 0, "%s", err);
}

/* The relative tables this pass reads: the stored ones, or (torchvision's _interpolate)
 * M (need x stored) times the stored table, through its transpose: out = linear(M, T^T). */
static void rel_tables(vt_net *net, const vt_node *nd, const float *t[3]) {
    vt_backend *be = net->be;
    vt_msa_rel r;
    vt_msa_rel_of(&net->g, nd, &r);
    const int D = nd->c / nd->heads;
    for (int k = 0; k < 3; k++) {
        t[k] = NULL;
        if (!(nd->mflags & VT_MSA_REL))
            continue;
        t[k] = param(net, nd->mt[k]);
        if (r.m[k] < 0)
            continue;
        float *w = net->ws + nd->ws_off;
        f32_ops(net, 1);
        VT_OP(be, transpose, w + r.tabt[k], t[k], 1, r.stored[k], D);
        VT_OP(be, linear_forward, w + r.tab[k], w + r.m[k], w + r.tabt[k], NULL, r.need[k],
              r.stored[k], D);
        f32_ops(net, 0);
        t[k] = w + r.tab[k];
    }
}

/* The interpolated tables' gradients (the workspace's dtab, from the attention's
 * backward) back into the stored tables' at g[k]: g += M^T dtab, a linear layer's weight
 * gradient with M as dout and dtab as its input. */
static void rel_backward(vt_net *net, const vt_node *nd, const vt_msa_rel *r, float *const g[12]) {
    const int D = nd->c / nd->heads;
    float *w = net->ws + nd->ws_off;
    for (int k = 0; k < 3; k++)
        if (r->m[k] >= 0) {
            f32_ops(net, 1);
            VT_OP(net->be, linear_backward, NULL, g[k], NULL, w + r->m[k], w + r->dtab[k],
                  NULL, r->need[k], D, r->stored[k]);
            f32_ops(net, 0);
        }
}

static void fold(vt_net *net, int t, const float *x) { vt_netx_fold(net, t, x); }

static vt_pool3d_p qpool(const vt_node *nd) {
    vt_pool3d_p p;
    memset(&p, 0, sizeof p);
    for (int d = 0; d < 3; d++) {
        p.k[d] = nd->conv.k[d];
        p.s[d] = nd->conv.s[d];
        p.p[d] = nd->conv.p[d];
    }
    return p;
}

static int pooled(const vt_node *nd, int x) {
    return !!(nd->mflags & (x == 0 ? VT_MSA_POOLQ : VT_MSA_POOLKV));
}

/* The node's saved arrays for n clips: array `off` of the layout, clip j's part of
 * `per` elements a clip: float (sv: lse, statistics) or [A] (sva: q, k, v and their
 * gradients). */
static float *sv(vt_net *net, const vt_node *nd, int64_t off, int n, int j, int64_t per) {
    return f32_at(net, nd->mask_off) + off * n + (int64_t)j * per;
}
static float *sva(vt_net *net, const vt_node *nd, int64_t off, int n, int j, int64_t per) {
    return act_ptr(net, f32_at(net, nd->mask_off) + off * n, (int64_t)j * per);
}

static void msa_forward(vt_net *net, const vt_node *nd, const float *in, float *out, int n) {
    vt_backend *be = net->be;
    vt_msa_layout l;
    vt_msa_layout_of(nd, net->g.act_size, &l);
    const int H = nd->heads, D = nd->c / H;
    const vt_pool3d_p pq = qpool(nd);
    for (int x = 0; x < 3; x++) {
        const int pl = pooled(nd, x);
        float *pre = sva(net, nd, l.pre[x], n, 0, 0);
        VT_OP(be, mvit_pool_forward, pre, in, pl ? param(net, nd->mt[3 + x]) : NULL, n, H, D, x,
              nd->grid, x ? &nd->pool : &pq);
        if (pl) {
            float *st = sv(net, nd, l.st[x], n, 0, 0);
            VT_OP(be, layernorm_forward, sva(net, nd, l.out[x], n, 0, 0), st, st + n * l.rows[x],
                  pre, param(net, nd->mt[6 + x]), param(net, nd->mt[9 + x]), n * l.rows[x], D,
                  nd->bn_eps);
        }
    }
    const float *rt[3];
    rel_tables(net, nd, rt);
    VT_OP(be, mvit_attention_forward, out, sv(net, nd, l.lse, n, 0, 0),
          sva(net, nd, l.out[0], n, 0, 0), sva(net, nd, l.out[1], n, 0, 0),
          sva(net, nd, l.out[2], n, 0, 0), rt[0], rt[1], rt[2], n, H, D, nd->qgrid, nd->kgrid,
          !!(nd->mflags & VT_MSA_RESIDUAL));
}

/* Clips j0 .. j0+m of the pass of n: their gradients into the parameter gradients at
 * g[k] (per tensor of nd->mt; NULL where absent), which accumulate. */
static void msa_backward_part(vt_net *net, const vt_node *nd, float *din, const float *dout,
                              const float *in, int n, int j0, int m, float *const g[12]) {
    vt_backend *be = net->be;
    vt_msa_layout l;
    vt_msa_layout_of(nd, net->g.act_size, &l);
    const int H = nd->heads, D = nd->c / H;
    const vt_pool3d_p pq = qpool(nd);
    const int64_t Lq = nd->t, C = nd->c, Lin = nd->it;
    /* interpolated tables: the forward left them in the workspace (the parameters have
     * not changed since); their gradients go there first, then through M^T */
    const float *rt[3];
    float *dr[3];
    vt_msa_rel r;
    vt_msa_rel_of(&net->g, nd, &r);
    for (int k = 0; k < 3; k++) {
        rt[k] = !(nd->mflags & VT_MSA_REL) ? NULL : r.m[k] < 0 ? param(net, nd->mt[k])
                : net->ws + nd->ws_off + r.tab[k];
        dr[k] = g[k];
        if (r.m[k] >= 0) {
            dr[k] = net->ws + nd->ws_off + r.dtab[k];
            VT_OP(be, fill, dr[k], 0.0f, (int64_t)r.need[k] * D);
        }
    }
#define SV(a, x) sva(net, nd, l.a[x], n, j0, l.rows[x] * D)
    VT_OP(be, mvit_attention_backward, SV(dout, 0), SV(dout, 1), SV(dout, 2), dr[0], dr[1],
          dr[2], act_ptr(net, dout, j0 * Lq * C), SV(out, 0), SV(out, 1), SV(out, 2), rt[0], rt[1], rt[2],
          sv(net, nd, l.lse, n, j0, (int64_t)H * Lq), m, H, D, nd->qgrid, nd->kgrid,
          !!(nd->mflags & VT_MSA_RESIDUAL));
    rel_backward(net, nd, &r, g);
    float *dq = act_ptr(net, din, j0 * Lin * 3 * C);
    const float *q = act_ptr(net, in, j0 * Lin * 3 * C);
    for (int x = 2; x >= 0; x--) {
        const int pl = pooled(nd, x);
        const float *dpart = SV(dout, x);
        if (pl) {
            const float *st = sv(net, nd, l.st[x], n, j0, l.rows[x]);
            float *dpre = sva(net, nd, l.dpre, n, j0, l.rows[x] * D);
            VT_OP(be, layernorm_backward, dpre, g[6 + x], g[9 + x], dpart, SV(pre, x), st,
                  st + n * l.rows[x], param(net, nd->mt[6 + x]), m * l.rows[x], D);
            dpart = dpre;
        }
        VT_OP(be, mvit_pool_backward, dq, pl ? g[3 + x] : NULL, dpart, q,
              pl ? param(net, nd->mt[3 + x]) : NULL, m, H, D, x, nd->grid,
              x ? &nd->pool : &pq);
    }
#undef SV
}

static void msa_backward(vt_net *net, const vt_node *nd, float *din, const float *dout,
                         const float *in, int n) {
    VT_CHECK(din, "node %s: the multiscale attention's input needs its gradient", nd->name);
    float *g[12];
    if (!net->g.cfg.exact) {
        for (int k = 0; k < 12; k++)
            g[k] = pgrad(net, nd->mt[k]);
        msa_backward_part(net, nd, din, dout, in, n, 0, n, g);
        return;
    }
    int64_t o = 0, tot = 0;
    for (int k = 0; k < 12; k++)
        tot += nd->mt[k] >= 0 ? net->g.tensors[nd->mt[k]].numel : 0;
    for (int k = 0; k < 12; k++) {
        g[k] = nd->mt[k] >= 0 ? net->xtmp + o : NULL;
        o += nd->mt[k] >= 0 ? net->g.tensors[nd->mt[k]].numel : 0;
    }
    for (int j = 0; j < n; j++) {
        VT_OP(net->be, fill, net->xtmp, 0.0f, tot);
        msa_backward_part(net, nd, din, dout, in, n, j, 1, g);
        for (int k = 0; k < 12; k++)
            if (nd->mt[k] >= 0)
                fold(net, nd->mt[k], g[k]);
    }
}

/* BF16's class token: the float class row (MViTv1: class token + class_pos, a float add
 * with the backend's FP32 ops, in the table's first row before the table is built) rounded
 * once into every clip's row 0; the grid rows as the FP32 path's (add_bcast reads the
 * float table rounded to bf16, as VideoMAE's position table). */
static void clstok_forward16(vt_net *net, const vt_node *nd, const float *in, float *out,
                             int n) {
    vt_backend *be = net->be;
    const int64_t C = nd->c, L = nd->it;
    const int pos = nd->mt[0] >= 0;
    float *tab = pos ? f32_at(net, nd->mask_off) : NULL;
    const float *cls = param(net, nd->wt);
    if (pos) {
        f32_ops(net, 1);
        VT_OP(be, add, tab, cls, param(net, nd->mt[2]), C);
        f32_ops(net, 0);
        cls = tab;
    }
    for (int j = 0; j < n; j++)
        VT_OP(be, act_from_f32, act_ptr(net, out, j * (L + 1) * C), cls, C);
    const int64_t hw = (int64_t)nd->grid[1] * nd->grid[2];
    f32_ops(net, 1);
    for (int t = 0; pos && t < nd->grid[0]; t++) { /* sp + tp[t], as the FP32 path */
        be->i->copy(be, tab + t * hw * C, param(net, nd->mt[0]), (size_t)(hw * C) * sizeof(float));
        VT_OP(be, add_bcast, tab + t * hw * C, tab + t * hw * C, param(net, nd->mt[1]) + t * C,
              (int)hw, C);
    }
    f32_ops(net, 0);
    for (int j = 0; j < n; j++) {
        float *o = act_ptr(net, out, (j * (L + 1) + 1) * C);
        const float *x = act_ptr(net, in, j * L * C);
        if (pos)
            VT_OP(be, add_bcast, o, x, tab, 1, L * C);
        else
            be->i->copy(be, o, x, (size_t)(L * C) * (size_t)net->g.act_size);
    }
}

/* The class token before the tokens; MViTv1: plus the table temporal_pos[t] + spatial_pos[s]
 * (built in the node's float32 region, as torchvision's pos_embedding) on the grid and
 * class_pos on the class token. */
static void clstok_forward(vt_net *net, const vt_node *nd, const float *in, float *out, int n) {
    if (net->g.act_size != (int)sizeof(float)) {
        clstok_forward16(net, nd, in, out, n);
        return;
    }
    vt_backend *be = net->be;
    const int64_t C = nd->c, L = nd->it;
    const int pos = nd->mt[0] >= 0;
    float *tab = pos ? f32_at(net, nd->mask_off) : NULL;
    const int64_t hw = (int64_t)nd->grid[1] * nd->grid[2];
    for (int t = 0; pos && t < nd->grid[0]; t++) { /* sp + tp[t], tp's rows spread */
        be->i->copy(be, tab + t * hw * C, param(net, nd->mt[0]), (size_t)(hw * C) * sizeof(float));
        VT_OP(be, add_bcast, tab + t * hw * C, tab + t * hw * C, param(net, nd->mt[1]) + t * C,
              (int)hw, C);
    }
    for (int j = 0; j < n; j++) {
        float *o = out + j * (L + 1) * C;
        if (pos) {
            VT_OP(be, add, o, param(net, nd->wt), param(net, nd->mt[2]), C);
            VT_OP(be, add_bcast, o + C, in + j * L * C, tab, 1, L * C);
        } else {
            be->i->copy(be, o, param(net, nd->wt), (size_t)C * sizeof(float));
            be->i->copy(be, o + C, in + j * L * C, (size_t)(L * C) * sizeof(float));
        }
    }
}

/* Its backward: the class token's (and class_pos's) gradient is row 0's, temporal_pos[t]
 * sums frame t's rows, spatial_pos[s] position s's over the frames; exact: per clip, folded.
 * The same under BF16, the float parameters' gradients summing the bf16 rows as
 * add_bcast_backward reads them (a float sum of one row: exactly the row, so row 0 takes
 * FP32's axpy there); exact sums widen row 0 into xtmp first (xsum_fold reads float). */
static void clstok_backward(vt_net *net, const vt_node *nd, float *din, const float *dout,
                            int n) {
    vt_backend *be = net->be;
    const int64_t C = nd->c, L = nd->it, T = nd->grid[0], hw = (int64_t)nd->grid[1] * nd->grid[2];
    const int pos = nd->mt[0] >= 0, exact = net->g.cfg.exact;
    const int f32 = net->g.act_size == (int)sizeof(float);
    float *gsp = pos ? pgrad(net, nd->mt[0]) : NULL, *gtp = pos ? pgrad(net, nd->mt[1]) : NULL;
    if (exact && pos) {
        gsp = net->xtmp;
        gtp = net->xtmp + hw * C;
    }
    for (int j = 0; j < n; j++) {
        const float *g = act_ptr(net, dout, j * (L + 1) * C);
        if (exact) {
            const float *g0 = g;
            if (!f32) {
                VT_OP(be, act_to_f32, net->xtmp, g, C);
                g0 = net->xtmp;
            }
            fold(net, nd->wt, g0);
            if (pos)
                fold(net, nd->mt[2], g0);
        } else if (f32) {
            VT_OP(be, axpy, pgrad(net, nd->wt), 1.0f, g, C);
            if (pos)
                VT_OP(be, axpy, pgrad(net, nd->mt[2]), 1.0f, g, C);
        } else {
            VT_OP(be, add_bcast_backward, pgrad(net, nd->wt), g, 1, C);
            if (pos)
                VT_OP(be, add_bcast_backward, pgrad(net, nd->mt[2]), g, 1, C);
        }
        if (pos) {
            if (exact)
                VT_OP(be, fill, net->xtmp, 0.0f, (hw + T) * C);
            for (int t = 0; t < T; t++) {
                const float *gt = act_ptr(net, g, (1 + t * hw) * C);
                VT_OP(be, add_bcast_backward, gsp, gt, 1, hw * C);
                VT_OP(be, add_bcast_backward, gtp + t * C, gt, (int)hw, C);
            }
            if (exact) {
                fold(net, nd->mt[0], gsp);
                fold(net, nd->mt[1], gtp);
            }
        }
        if (din)
            be->i->copy(be, act_ptr(net, din, j * L * C), act_ptr(net, g, C),
                        (size_t)(L * C) * (size_t)net->g.act_size);
    }
}

void vt_netm_forward(vt_net *net, int i, const float *in, float *out, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int64_t C = nd->c, L = nd->it;
    switch (nd->kind) {
    case VT_NODE_CLSTOK:
        clstok_forward(net, nd, in, out, n);
        break;
    case VT_NODE_TFIRST: /* [A] rows: g.act_size bytes an element */
        for (int j = 0; j < n; j++)
            be->i->copy(be, act_ptr(net, out, j * C), act_ptr(net, in, j * L * C),
                        (size_t)C * (size_t)net->g.act_size);
        break;
    case VT_NODE_TMAXPOOL:
        VT_OP(be, token_maxpool_forward, out, in, n, (int)C, nd->grid, &nd->pool);
        break;
    case VT_NODE_MSA:
        msa_forward(net, nd, in, out, n);
        break;
    default:
        VT_DIE("node %s: kind %d is not MViT's", nd->name, (int)nd->kind);
    }
}

void vt_netm_backward(vt_net *net, int i, float *din, const float *dout, const float *in, int n) {
    vt_backend *be = net->be;
    const vt_node *nd = &net->g.nodes[i];
    const int64_t C = nd->c, L = nd->it;
    switch (nd->kind) {
    case VT_NODE_CLSTOK:
        clstok_backward(net, nd, din, dout, n);
        break;
    case VT_NODE_TFIRST:
        if (!din)
            break;
        /* zero bits are 0 in bf16 too: fill the bytes as floats (C is even) */
        VT_CHECK(net->g.act_size == (int)sizeof(float) || (n * L * C) % 2 == 0,
                 "node %s: an odd bf16 count", nd->name);
        VT_OP(be, fill, din, 0.0f, n * L * C * net->g.act_size / (int64_t)sizeof(float));
        for (int j = 0; j < n; j++)
            be->i->copy(be, act_ptr(net, din, j * L * C), act_ptr(net, dout, j * C),
                        (size_t)C * (size_t)net->g.act_size);
        break;
    case VT_NODE_TMAXPOOL:
        if (din)
            VT_OP(be, token_maxpool_backward, din, dout, in, n, (int)C, nd->grid, &nd->pool);
        break;
    case VT_NODE_MSA:
        msa_backward(net, nd, din, dout, in, n);
        break;
    default:
        VT_DIE("node %s: kind %d is not MViT's", nd->name, (int)nd->kind);
    }
}
