/*
 * net_graph_mvit.c: MViT's nodes of a graph (net_graph.h), as torchvision's
 * video/mvit.py builds them: the class token, the multiscale attention (pool_q, pool_k,
 * pool_v with their LayerNorms, the relative position tables), the skip connection's max
 * pooling and the class token's row that the head reads. Shapes and state-dict tensors
 * only, like net_graph.c: it must never allocate backend memory or run an op.
 */
#include <stdio.h>

#include "base/common.h"
#include "models/net_graph.h"

static void tok_shape(vt_node *nd, int c, int t) {
    nd->c = c;
    nd->t = t;
    nd->h = nd->w = 1;
}

static int prod3(const int a[3]) { return a[0] * a[1] * a[2]; }

int vt_g_clstok(vt_graph *g, const char *name, int in, const int *abs_thw) {
    int i = vt_g_node_new(g, VT_NODE_CLSTOK, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    for (int k = 0; k < 12; k++)
        nd->mt[k] = -1;
    tok_shape(nd, nd->ic, nd->it + 1);
    int64_t cs[1] = {nd->c};
    nd->wt = vt_g_tensor_new(g, i, "class_token", VT_ROLE_WEIGHT, 1, cs, 0, 0);
    if (!abs_thw)
        return i;
    if (nd->it != prod3(abs_thw))
        return vt_g_node_fail(g, name, "%d tokens are not the grid's (%d)", nd->it,
                              prod3(abs_thw));
    for (int d = 0; d < 3; d++)
        nd->grid[d] = abs_thw[d];
    int64_t ss[2] = {(int64_t)abs_thw[1] * abs_thw[2], nd->c}, ts[2] = {abs_thw[0], nd->c};
    nd->mt[0] = vt_g_tensor_new(g, i, "spatial_pos", VT_ROLE_WEIGHT, 2, ss, 0, 0);
    nd->mt[1] = vt_g_tensor_new(g, i, "temporal_pos", VT_ROLE_WEIGHT, 2, ts, 0, 0);
    nd->mt[2] = vt_g_tensor_new(g, i, "class_pos", VT_ROLE_WEIGHT, 1, cs, 0, 0);
    nd->mask_floats = (int64_t)prod3(abs_thw) * nd->c; /* the table: net_mvit.c */
    return i;
}

int vt_g_tfirst(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_TFIRST, name, in);
    if (i < 0)
        return -1;
    tok_shape(&g->nodes[i], g->nodes[i].ic, 1);
    return i;
}

int vt_g_tmaxpool(vt_graph *g, const char *name, int in, const int thw[3], const int k[3],
                  const int s[3], const int p[3]) {
    int i = vt_g_node_new(g, VT_NODE_TMAXPOOL, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    if (nd->it != 1 + prod3(thw))
        return vt_g_node_fail(g, name, "%d tokens are not a class token and the grid (%d)",
                              nd->it, prod3(thw));
    int o[3];
    for (int d = 0; d < 3; d++) {
        nd->grid[d] = thw[d];
        nd->pool.k[d] = k[d];
        nd->pool.s[d] = s[d];
        nd->pool.p[d] = p[d];
        o[d] = vt_conv_out(thw[d], k[d], s[d], p[d]);
    }
    tok_shape(nd, nd->ic, 1 + prod3(o));
    return i;
}

/* pool_X of torchvision's MultiscaleAttention: Conv3d(D, D, k, s, k // 2, groups D, no
 * bias), then LayerNorm(D) — tensors NAME.pool.weight, NAME.norm_act.0.{weight, bias}. */
static void pool_tensors(vt_graph *g, int i, const char *name, const char *part, int D, const int k[3],
                         int *w, int *lw, int *lb) {
    char nm[96];
    int64_t ws[5] = {D, 1, k[0], k[1], k[2]}, ds[1] = {D};
    snprintf(nm, sizeof nm, "%s.pool.weight", part);
    *w = vt_g_tensor_new(g, i, nm, VT_ROLE_WEIGHT, 5, ws, 0, 0);
    snprintf(nm, sizeof nm, "%s.norm_act.0.weight", part);
    *lw = vt_g_tensor_new(g, i, nm, VT_ROLE_GAMMA, 1, ds, 0, 0);
    snprintf(nm, sizeof nm, "%s.norm_act.0.bias", part);
    *lb = vt_g_tensor_new(g, i, nm, VT_ROLE_BETA, 1, ds, 0, 0);
    (void)name;
}

int vt_g_msa(vt_graph *g, const char *name, int in, int heads, const int thw[3],
             const int kq[3], const int sq[3], const int kkv[3], const int skv[3],
             const int *rel_thw, int residual, float eps, int out_thw[3]) {
    int i = vt_g_node_new(g, VT_NODE_MSA, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    if (heads < 1 || nd->ic % (3 * heads))
        return vt_g_node_fail(g, name, "qkv of %d features does not split into 3 x %d heads",
                              nd->ic, heads);
    if (nd->it != 1 + prod3(thw))
        return vt_g_node_fail(g, name, "%d tokens are not a class token and the grid (%d)",
                              nd->it, prod3(thw));
    const int C = nd->ic / 3, D = C / heads, rel = rel_thw != NULL;
    nd->heads = heads;
    nd->bn_eps = eps;
    for (int k = 0; k < 12; k++)
        nd->mt[k] = -1;
    /* torchvision: a pool exists when its kernel or stride has more than one element */
    const int poolq = prod3(kq) > 1 || prod3(sq) > 1, poolkv = prod3(kkv) > 1 || prod3(skv) > 1;
    nd->mflags = (poolq ? VT_MSA_POOLQ : 0) | (poolkv ? VT_MSA_POOLKV : 0) |
                 (rel ? VT_MSA_REL : 0) | (residual ? VT_MSA_RESIDUAL : 0);
    for (int d = 0; d < 3; d++) {
        nd->grid[d] = thw[d];
        nd->conv.k[d] = kq[d];
        nd->conv.s[d] = sq[d];
        nd->conv.p[d] = kq[d] / 2;
        nd->pool.k[d] = kkv[d];
        nd->pool.s[d] = skv[d];
        nd->pool.p[d] = kkv[d] / 2;
        nd->qgrid[d] = poolq ? vt_conv_out(thw[d], kq[d], sq[d], kq[d] / 2) : thw[d];
        nd->kgrid[d] = poolkv ? vt_conv_out(thw[d], kkv[d], skv[d], kkv[d] / 2) : thw[d];
        out_thw[d] = nd->qgrid[d];
    }
    tok_shape(nd, C, 1 + prod3(nd->qgrid));
    /* PyTorch's state-dict order: the module's own tables, then qkv, project (other
     * nodes), pool_q, pool_k, pool_v */
    if (rel) {
        /* torchvision sizes the tables for the grid it was built for (MultiscaleAttention's
         * input_size); other clips interpolate them (vt_msa_rel_of) */
        const int size = VT_MAX(rel_thw[1], rel_thw[2]), qs = size / sq[1], ks = size / skv[1];
        const int sd = 2 * VT_MAX(qs, ks) - 1, td = 2 * rel_thw[0] - 1;
        if (qs < 1 || ks < 1 || rel_thw[0] < 1)
            return vt_g_node_fail(g, name, "the relative tables' grid %d x %d is empty",
                                  rel_thw[0], size);
        int64_t hs[2] = {sd, D}, ts[2] = {td, D};
        nd->mt[0] = vt_g_tensor_new(g, i, "rel_pos_h", VT_ROLE_WEIGHT, 2, hs, 0, 0);
        nd->mt[1] = vt_g_tensor_new(g, i, "rel_pos_w", VT_ROLE_WEIGHT, 2, hs, 0, 0);
        nd->mt[2] = vt_g_tensor_new(g, i, "rel_pos_t", VT_ROLE_WEIGHT, 2, ts, 0, 0);
    }
    if (poolq)
        pool_tensors(g, i, name, "pool_q", D, kq, &nd->mt[3], &nd->mt[6], &nd->mt[9]);
    if (poolkv) {
        pool_tensors(g, i, name, "pool_k", D, kkv, &nd->mt[4], &nd->mt[7], &nd->mt[10]);
        pool_tensors(g, i, name, "pool_v", D, kkv, &nd->mt[5], &nd->mt[8], &nd->mt[11]);
    }
    /* pooled q, k, v, their statistics, lse, the backward's arrays: net_mvit.c */
    vt_msa_layout l;
    vt_msa_layout_of(nd, vt_precision_act_size(g->cfg.precision), &l);
    nd->mask_floats = l.total;
    vt_msa_rel r; /* the tables' interpolation, in the fixed workspace */
    vt_msa_rel_of(g, nd, &r);
    nd->ws_floats = r.total;
    /* the first tensor, for the arena's order (net.c's grad_ready) */
    for (int k = 0; k < 12 && nd->wt < 0; k++)
        if (nd->mt[k] >= 0)
            nd->wt = nd->mt[k];
    return i;
}

void vt_interp_linear_row(int in, int out, int i, int *i0, int *i1, double *w0, double *w1) {
    /* ATen's upsample_linear1d: src = scale (i + 1/2) - 1/2, scale = in / out, clamped at
     * 0; the right neighbour only while one exists */
    double src = (double)in / out * (i + 0.5) - 0.5;
    if (src < 0)
        src = 0;
    *i0 = (int)src;
    *i1 = *i0 + (*i0 < in - 1);
    *w1 = src - *i0;
    *w0 = 1.0 - *w1;
}

float *vt_interp_linear_matrix(int in, int out) {
    float *m = vt_calloc((size_t)out * in, sizeof(float));
    for (int o = 0; o < out; o++) {
        int i0, i1;
        double w0, w1;
        vt_interp_linear_row(in, out, o, &i0, &i1, &w0, &w1);
        m[(int64_t)o * in + i0] += (float)w0;
        m[(int64_t)o * in + i1] += (float)w1;
    }
    return m;
}

void vt_msa_rel_of(const vt_graph *g, const vt_node *nd, vt_msa_rel *r) {
    static const int axis[3] = {1, 2, 0}; /* rel_pos_h, _w, _t */
    const int64_t D = nd->kind == VT_NODE_MSA ? nd->c / nd->heads : 0;
    int64_t o = 0;
    for (int k = 0; k < 3; k++) {
        r->m[k] = r->tab[k] = r->tabt[k] = r->dtab[k] = -1;
        r->stored[k] = r->need[k] = 0;
        if (nd->kind != VT_NODE_MSA || !(nd->mflags & VT_MSA_REL) || nd->mt[k] < 0)
            continue; /* (mt < 0: a graph that failed to build) */
        const int a = axis[k];
        r->stored[k] = (int)g->tensors[nd->mt[k]].shape[0];
        r->need[k] = 2 * VT_MAX(nd->qgrid[a], nd->kgrid[a]) - 1;
        if (r->stored[k] == r->need[k])
            continue;
        const int64_t S = r->stored[k], N = r->need[k];
        r->m[k] = o;
        o += N * S;
        r->tab[k] = o;
        o += N * D;
        r->tabt[k] = o;
        o += D * S;
        r->dtab[k] = o;
        o += N * D;
    }
    r->total = o;
}

/* An [A] array of f elements in the float region: f floats, or under BF16 (act_size 2)
 * f / 2 rounded up to whole 16 bytes (the bf16 GEMMs' loads stay aligned). */
static int64_t act_floats(int64_t f, int act_size) {
    return act_size == (int)sizeof(float) ? f : (f * act_size + 15) / 16 * 4;
}

void vt_msa_layout_of(const vt_node *nd, int act_size, vt_msa_layout *l) {
    const int D = nd->c / nd->heads;
    const int *grids[3] = {nd->qgrid, nd->kgrid, nd->kgrid};
    const int pooled[3] = {!!(nd->mflags & VT_MSA_POOLQ), !!(nd->mflags & VT_MSA_POOLKV),
                           !!(nd->mflags & VT_MSA_POOLKV)};
    int64_t o = 0, big = 0;
    for (int x = 0; x < 3; x++) {
        l->rows[x] = (int64_t)nd->heads * (1 + prod3(grids[x]));
        const int64_t f = act_floats(l->rows[x] * D, act_size);
        l->pre[x] = o;
        o += f;
        l->out[x] = l->pre[x];
        l->st[x] = -1;
        if (pooled[x]) {
            l->out[x] = o;
            o += f;
            l->st[x] = o;
            o += 2 * l->rows[x];
        }
        l->dout[x] = o;
        o += f;
        big = VT_MAX(big, f);
    }
    l->dpre = o;
    o += big;
    l->lse = o;
    o += l->rows[0];
    l->total = o;
}
