/*
 * net_graph_vit.c: the transformer nodes of a graph (net_graph.h): tokens from a patch
 * embedding's feature map, the sin-cos position table, LayerNorm, GELU, linear layers on
 * tokens, VideoMAE's qkv (q_bias and v_bias, no k bias), multi-head attention and the mean
 * over tokens. Shapes and state-dict tensors only, like net_graph.c: it must never
 * allocate backend memory or run an op.
 */
#include <math.h>
#include <stdio.h>

#include "base/common.h"
#include "models/net_graph.h"

/* A token node: c features, t tokens. */
static void tok_shape(vt_node *nd, int c, int t) {
    nd->c = c;
    nd->t = t;
    nd->h = nd->w = 1;
}

int vt_g_tokens(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_TOKENS, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    tok_shape(nd, nd->ic, nd->it * nd->ih * nd->iw);
    return i;
}

int vt_g_pos_sincos(vt_graph *g, const char *name, int in) {
    return vt_g_node_new(g, VT_NODE_POS, name, in);
}

int vt_g_ln(vt_graph *g, const char *name, int in, float eps) {
    int i = vt_g_node_new(g, VT_NODE_LN, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    nd->bn_eps = eps;
    int64_t cs[1] = {nd->c};
    nd->wt = vt_g_tensor_new(g, i, "weight", VT_ROLE_GAMMA, 1, cs, 0, 0);
    nd->bt = vt_g_tensor_new(g, i, "bias", VT_ROLE_BETA, 1, cs, 0, 0);
    return i;
}

int vt_g_gelu(vt_graph *g, const char *name, int in) {
    return vt_g_node_new(g, VT_NODE_GELU, name, in);
}

int vt_g_tlinear(vt_graph *g, const char *name, int in, int out) {
    int i = vt_g_node_new(g, VT_NODE_TLINEAR, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    tok_shape(nd, out, nd->it);
    int64_t ws[2] = {out, nd->ic}, bs[1] = {out};
    nd->wt = vt_g_tensor_new(g, i, "weight", VT_ROLE_WEIGHT, 2, ws, 0, 0);
    nd->bt = vt_g_tensor_new(g, i, "bias", VT_ROLE_BIAS, 1, bs, 0, 0);
    return i;
}

int vt_g_qkv(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_QKV, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    tok_shape(nd, 3 * nd->ic, nd->it);
    int64_t ws[2] = {3 * (int64_t)nd->ic, nd->ic}, bs[1] = {nd->ic};
    /* PyTorch's state-dict order: the Attention module's own parameters, then qkv's */
    nd->bt = vt_g_tensor_new(g, i, "q_bias", VT_ROLE_BIAS, 1, bs, 0, 0);
    nd->vt2 = vt_g_tensor_new(g, i, "v_bias", VT_ROLE_BIAS, 1, bs, 0, 0);
    nd->wt = vt_g_tensor_new(g, i, "qkv.weight", VT_ROLE_WEIGHT, 2, ws, 0, 0);
    return i;
}

int vt_g_attn(vt_graph *g, const char *name, int in, int heads) {
    int i = vt_g_node_new(g, VT_NODE_ATTN, name, in);
    if (i < 0)
        return -1;
    vt_node *nd = &g->nodes[i];
    if (heads < 1 || nd->ic % (3 * heads))
        return vt_g_node_fail(g, name, "qkv of %d features does not split into 3 x %d heads",
                              nd->ic, heads);
    nd->heads = heads;
    tok_shape(nd, nd->ic / 3, nd->it);
    return i;
}

int vt_g_tmean(vt_graph *g, const char *name, int in) {
    int i = vt_g_node_new(g, VT_NODE_TMEAN, name, in);
    if (i < 0)
        return -1;
    tok_shape(&g->nodes[i], g->nodes[i].ic, 1);
    return i;
}

int vt_g_droppath(vt_graph *g, const char *name, int in, float p) {
    int i = vt_g_node_new(g, VT_NODE_DROPPATH, name, in);
    if (i < 0)
        return -1;
    g->nodes[i].drop_p = p;
    for (int j = 0; j < i; j++)
        g->nodes[i].drop_index += g->nodes[j].kind == VT_NODE_DROPPATH;
    return i;
}

float vt_drop_path_scale(uint64_t clip_seed, int index, float p) {
    uint64_t h = vt_hash64(vt_hash64(clip_seed) + 0x5D0000ull + (uint64_t)index);
    float u = (float)(h >> 40) / 16777216.0f; /* 24 bits: exact in float */
    return u >= p && p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
}

void vt_sincos_table(float *tab, int L, int C) {
    for (int p = 0; p < L; p++)
        for (int j = 0; j < C; j++) {
            double a = p / pow(10000.0, 2.0 * (j / 2) / C);
            tab[(int64_t)p * C + j] = (float)(j % 2 ? cos(a) : sin(a));
        }
}
