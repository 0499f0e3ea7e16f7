/*
 * net_vit.c: running the transformer nodes of a graph (net_graph.h, net_graph_vit.c) —
 * the forward and backward of tokens, position table, LayerNorm, GELU, token linear
 * layers, VideoMAE's qkv, attention and the token mean — for net.c, which calls here
 * for every node kind it does not run itself.
 *
 * Exact sums (cfg.exact, net_exact.c): the layers whose parameter gradients sum over
 * clips (token linear, qkv, LayerNorm) compute one clip at a time and fold each clip's
 * gradient into the accumulators, and their forwards run one clip at a time too, so a
 * clip's bits never depend on which others share its batch (towers = one device).
 * BF16: on the cuda backend only (cuda_attn.c; the CPU backends' transformer ops are
 * FP32, vt_netv_check_backend refuses them); the [A] arrays are then bf16, so copies
 * take g.act_size bytes an element, and qkv's bias goes through linear_forward (the
 * sum rounded once, as the CNN's linear layers and PyTorch's autocast).
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net_impl.h"
#include "models/xsum.h"

void vt_netv_init_ws(vt_net *net) {
    const vt_graph *g = &net->g;
    vt_netm_init_ws(net); /* MViT's: net_mvit.c */
    for (int i = 0; i < g->nnodes; i++) {
        const vt_node *nd = &g->nodes[i];
        if (nd->kind != VT_NODE_POS)
            continue;
        float *tab = vt_malloc((size_t)vt_node_floats(nd) * sizeof(float));
        vt_sincos_table(tab, nd->t, nd->c);
        net->be->i->to_device(net->be, net->ws + nd->ws_off, tab,
                              (size_t)vt_node_floats(nd) * sizeof(float));
        free(tab);
    }
}

int vt_netv_check_backend(const vt_net *net, char *err, size_t errlen) {
    const vt_backend_i *t = net->be->i;
    if (vt_netm_check_backend(net, err, errlen) < 0) /* MViT's own ops: net_mvit.c */
        return -1;
    for (int i = 0; i < net->g.nnodes; i++)
        if (net->g.cfg.precision == VT_PREC_BF16 && net->g.nodes[i].kind >= VT_NODE_TOKENS &&
            net->g.nodes[i].kind <= VT_NODE_TFIRST && strcmp(t->name, "cuda") != 0) {
            vt_set_err(err, errlen, "%s: bf16 for the transformer ops exists on the cuda "
                       "backend only (backend %s's are FP32): use --precision fp32, or "
                       "train on a GPU", net->g.cfg.model, t->name);
            return -1;
        }
    for (int i = 0; i < net->g.nnodes; i++)
        if (net->g.nodes[i].kind >= VT_NODE_TOKENS &&
            net->g.nodes[i].kind <= VT_NODE_TFIRST && /* net_graph.h: the last kinds */
            (!t->layernorm_forward || !t->gelu_forward || !t->attention_forward ||
             !t->transpose || !t->token_mean_forward || !t->add_bcast || !t->scale_rows)) {
            vt_set_err(err, errlen, "%s needs the transformer ops (layernorm, GELU, attention), "
                       "which backend %s does not have yet: train it on CPU towers (--devices "
                       "cpu)", net->g.cfg.model, t->name);
            return -1;
        }
    return 0;
}

/* fold xtmp[0..n) into the accumulators of parameter tensor t */
static void fold(vt_net *net, int t, const float *x) { vt_netx_fold(net, t, x); }

/* qkv's bias as one (3C) vector in the scratch: [q_bias | 0 | v_bias]. */
static float *qkv_bias(vt_net *net, const vt_node *nd) {
    vt_backend *be = net->be;
    const int C = nd->ic;
    float *b = net->ws + net->g.scratch_off;
    be->i->copy(be, b, param(net, nd->bt), (size_t)C * sizeof(float));
    VT_OP(be, fill, b + C, 0.0f, C);
    be->i->copy(be, b + 2 * C, param(net, nd->vt2), (size_t)C * sizeof(float));
    return b;
}

void vt_netv_forward(vt_net *net, int i, const float *in, float *out, int n, int train) {
    vt_backend *be = net->be;
    const vt_graph *g = &net->g;
    const vt_node *nd = &g->nodes[i];
    const int L = nd->it, exact = g->cfg.exact;
    const int64_t rows = (int64_t)n * L;
    switch (nd->kind) {
    case VT_NODE_TOKENS:
        VT_OP(be, transpose, out, in, n, nd->ic, nd->t);
        break;
    case VT_NODE_POS:
        VT_OP(be, add_bcast, out, in, net->ws + nd->ws_off, n, vt_node_floats(nd));
        break;
    case VT_NODE_LN: {
        float *st = f32_at(net, nd->mask_off);
        VT_OP(be, layernorm_forward, out, st, st + rows, in, param(net, nd->wt),
              param(net, nd->bt), rows, nd->c, nd->bn_eps);
        break;
    }
    case VT_NODE_GELU:
        VT_OP(be, gelu_forward, out, in, rows * nd->c);
        break;
    case VT_NODE_TLINEAR:
    case VT_NODE_QKV: {
        const float *b = nd->kind == VT_NODE_QKV ? NULL : param(net, nd->bt);
        /* BF16: qkv's bias in the linear layer (one rounding of the sum); FP32: added after
         * it, as before (the same float sum) */
        const int bf16 = g->cfg.precision == VT_PREC_BF16;
        if (nd->kind == VT_NODE_QKV && bf16)
            b = qkv_bias(net, nd);
        if (exact)
            for (int j = 0; j < n; j++)
                VT_OP(be, linear_forward, act_ptr(net, out, (int64_t)j * L * nd->c),
                      act_ptr(net, in, (int64_t)j * L * nd->ic), param(net, nd->wt), b, L, nd->ic,
                      nd->c);
        else
            VT_OP(be, linear_forward, out, in, param(net, nd->wt), b, (int)rows, nd->ic, nd->c);
        if (nd->kind == VT_NODE_QKV && !bf16)
            VT_OP(be, add_bcast, out, out, qkv_bias(net, nd), (int)rows, nd->c);
        break;
    }
    case VT_NODE_ATTN:
        VT_OP(be, attention_forward, out, f32_at(net, nd->mask_off), in, n, L, nd->heads,
              nd->c / nd->heads);
        break;
    case VT_NODE_TMEAN:
        VT_OP(be, token_mean_forward, out, in, n, L, nd->c);
        break;
    case VT_NODE_DROPPATH: {
        const int64_t per = vt_node_floats(nd);
        if (!train) { /* identity at evaluation */
            be->i->copy(be, out, in, (size_t)(n * per) * (size_t)g->act_size);
            break;
        }
        /* per clip, from its global position as dropout's masks (net.c) */
        float sc[64];
        float *scale = f32_at(net, nd->mask_off);
        for (int j0 = 0; j0 < n; j0 += 64) {
            const int m = VT_MIN(64, n - j0);
            for (int j = 0; j < m; j++)
                sc[j] = vt_drop_path_scale(net->dropout_seed + (uint64_t)(j0 + j),
                                           nd->drop_index, nd->drop_p);
            be->i->to_device(be, scale + j0, sc, (size_t)m * sizeof(float));
        }
        VT_OP(be, scale_rows, out, in, scale, n, per);
        break;
    }
    case VT_NODE_CLSTOK:
    case VT_NODE_MSA:
    case VT_NODE_TMAXPOOL:
    case VT_NODE_TFIRST:
        vt_netm_forward(net, i, in, out, n); /* MViT's: net_mvit.c */
        break;
    default:
        VT_DIE("node %s: kind %d has no forward", nd->name, (int)nd->kind);
    }
}

/* A token linear or qkv layer's backward; exact: a clip at a time, folded. */
static void linear_backward(vt_net *net, const vt_node *nd, float *din, const float *dout,
                            const float *in, int n) {
    vt_backend *be = net->be;
    const int L = nd->it, I = nd->ic, O = nd->c, qkv = nd->kind == VT_NODE_QKV;
    const int64_t nw = (int64_t)O * I;
    float *sb = net->ws + net->g.scratch_off + O; /* qkv: the (3C) bias gradient */
    const int parts = net->g.cfg.exact ? n : 1, per = net->g.cfg.exact ? 1 : n;
    for (int j = 0; j < parts; j++) {
        const int64_t ro = (int64_t)j * L;
        float *dw = pgrad(net, nd->wt), *db = qkv ? NULL : pgrad(net, nd->bt);
        if (net->g.cfg.exact) {
            VT_OP(be, fill, net->xtmp, 0.0f, nw + O);
            dw = net->xtmp;
            db = qkv ? NULL : net->xtmp + nw;
        }
        VT_OP(be, linear_backward, din ? act_ptr(net, din, ro * I) : NULL, dw, db,
              act_ptr(net, dout, ro * O), act_ptr(net, in, ro * I), param(net, nd->wt), per * L,
              I, O);
        if (qkv) {
            VT_OP(be, fill, sb, 0.0f, O);
            VT_OP(be, add_bcast_backward, sb, act_ptr(net, dout, ro * O), per * L, O);
        }
        if (net->g.cfg.exact) {
            fold(net, nd->wt, net->xtmp);
            if (qkv) {
                fold(net, nd->bt, sb);
                fold(net, nd->vt2, sb + 2 * I);
            } else {
                fold(net, nd->bt, net->xtmp + nw);
            }
        } else if (qkv) {
            VT_OP(be, axpy, pgrad(net, nd->bt), 1.0f, sb, I);
            VT_OP(be, axpy, pgrad(net, nd->vt2), 1.0f, sb + 2 * I, I);
        }
    }
}

void vt_netv_backward(vt_net *net, int i, float *din, const float *dout, const float *in, int n) {
    vt_backend *be = net->be;
    const vt_graph *g = &net->g;
    const vt_node *nd = &g->nodes[i];
    const int L = nd->it;
    const int64_t rows = (int64_t)n * L;
    switch (nd->kind) {
    case VT_NODE_TOKENS:
        if (din)
            VT_OP(be, transpose, din, dout, n, nd->t, nd->ic);
        break;
    case VT_NODE_POS:
        if (din)
            be->i->copy(be, din, dout, (size_t)rows * nd->c * (size_t)g->act_size);
        break;
    case VT_NODE_LN: {
        const float *st = f32_at(net, nd->mask_off);
        if (!g->cfg.exact) {
            VT_OP(be, layernorm_backward, din, pgrad(net, nd->wt), pgrad(net, nd->bt), dout, in,
                  st, st + rows, param(net, nd->wt), rows, nd->c);
            break;
        }
        for (int j = 0; j < n; j++) {
            const int64_t ro = (int64_t)j * L;
            VT_OP(be, fill, net->xtmp, 0.0f, 2 * (int64_t)nd->c);
            VT_OP(be, layernorm_backward, din ? act_ptr(net, din, ro * nd->c) : NULL, net->xtmp,
                  net->xtmp + nd->c, act_ptr(net, dout, ro * nd->c), act_ptr(net, in, ro * nd->c),
                  st + ro, st + rows + ro, param(net, nd->wt), L, nd->c);
            fold(net, nd->wt, net->xtmp);
            fold(net, nd->bt, net->xtmp + nd->c);
        }
        break;
    }
    case VT_NODE_GELU:
        VT_OP(be, gelu_backward, din, dout, in, rows * nd->c);
        break;
    case VT_NODE_TLINEAR:
    case VT_NODE_QKV:
        linear_backward(net, nd, din, dout, in, n);
        break;
    case VT_NODE_ATTN:
        VT_OP(be, attention_backward, din, dout, in, act(net, i), f32_at(net, nd->mask_off), n, L,
              nd->heads, nd->c / nd->heads);
        break;
    case VT_NODE_TMEAN:
        VT_OP(be, token_mean_backward, din, dout, n, L, nd->c);
        break;
    case VT_NODE_DROPPATH:
        if (din)
            VT_OP(be, scale_rows, din, dout, f32_at(net, nd->mask_off), n, vt_node_floats(nd));
        break;
    case VT_NODE_CLSTOK:
    case VT_NODE_MSA:
    case VT_NODE_TMAXPOOL:
    case VT_NODE_TFIRST:
        vt_netm_backward(net, i, din, dout, in, n);
        break;
    default:
        VT_DIE("node %s: kind %d has no backward", nd->name, (int)nd->kind);
    }
}
