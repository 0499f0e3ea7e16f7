/*
 * onnx.c: the ONNX export of onnx.h — a walk over the model's graph (the zoo rebuilds it
 * from the net's configuration, so the node list is exactly the one the net runs) that
 * emits one or two ONNX nodes per layer, the weights as initializers (float32 raw_data,
 * little-endian) under their state-dict names, and the model around them:
 *   conv      Conv (kernel_shape, strides, pads; bias when the layer has one)
 *   bn        BatchNormalization with the running statistics (eval mode), net.c's epsilon
 *   relu      Relu
 *   maxpool   MaxPool (kernel_shape, strides, pads, ceil_mode)
 *   gap       GlobalAveragePool + Flatten (N, C); without the Flatten when a conv or a
 *             channel scale reads it (X3D's squeeze-excitation and head)
 *   conv      with groups > 1 (X3D's depthwise convs): Conv's group attribute
 *   silu      Sigmoid + Mul (x * sigmoid(x)); sigmoid: Sigmoid
 *   chscale   Mul of (N, C, T, H, W) by (N, C, 1, 1, 1), broadcast
 *   linear    Gemm (transB=1), after a Flatten when its input is still (N, C, T, H, W)
 *             (c3d's fc6: PyTorch's view(N, -1), the same memory order)
 *   dropout   nothing: identity at inference; its consumers read its input
 *   add       Add
 *   concat    Concat (axis 1)
 *   tgather   Gather (axis 2) of the clip with an int64 index initializer "<layer>.index":
 *             the frames SlowFast's slow pathway takes (PackPathway's linspace)
 * and per head a graph output: the head's Gemm, or Softmax(axis=1) / Sigmoid after it.
 * The protobuf bytes are written by our own writer (models/formats/protobuf.h says why); the
 * ONNX field numbers below are those of onnx.proto, which never change.
 *
 * A layer kind it does not know is an error naming the layer, never a guess: a new kind
 * gets a case in emit_layer. It must never change the net, and never write the model
 * other than through the atomic writer.
 */
#include "models/formats/onnx.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "models/backend.h"
#include "base/common.h"
#include "models/net_graph.h"
#include "models/formats/protobuf.h"
#include "models/zoo.h"

/* net.c's VT_BN_EPS (PyTorch BatchNorm3d's default). A BN node that carries its own
 * epsilon (net_graph.h) should be read from the node instead; test_onnx compares every
 * BN model with the net's own eval forward, so a mismatch cannot pass unseen. */

/* ir_version 8 is ONNX 1.12's, the release that brought opset 17 (Debian's python3-onnx
 * checks models up to it). */
#define ONNX_IR_VERSION 8

/* onnx.proto field numbers. */
enum {
    MODEL_IR_VERSION = 1, MODEL_PRODUCER_NAME = 2, MODEL_PRODUCER_VERSION = 3,
    MODEL_MODEL_VERSION = 5, MODEL_DOC = 6, MODEL_GRAPH = 7, MODEL_OPSET = 8,
    MODEL_METADATA = 14,
    OPSET_VERSION = 2,
    ENTRY_KEY = 1, ENTRY_VALUE = 2,
    GRAPH_NODE = 1, GRAPH_NAME = 2, GRAPH_INITIALIZER = 5, GRAPH_INPUT = 11,
    GRAPH_OUTPUT = 12,
    NODE_INPUT = 1, NODE_OUTPUT = 2, NODE_NAME = 3, NODE_OP_TYPE = 4, NODE_ATTRIBUTE = 5,
    ATTR_NAME = 1, ATTR_F = 2, ATTR_I = 3, ATTR_INTS = 8, ATTR_TYPE = 20,
    ATTR_TYPE_FLOAT = 1, ATTR_TYPE_INT = 2, ATTR_TYPE_INTS = 7,
    VALUE_NAME = 1, VALUE_TYPE = 2,
    TYPE_TENSOR = 1, TENSOR_TYPE_ELEM = 1, TENSOR_TYPE_SHAPE = 2,
    SHAPE_DIM = 1, DIM_VALUE = 1, DIM_PARAM = 2,
    TENSOR_DIMS = 1, TENSOR_DATA_TYPE = 2, TENSOR_NAME = 8, TENSOR_RAW_DATA = 9,
    DTYPE_FLOAT = 1, DTYPE_INT64 = 7,
};

void vt_onnx_opts_default(vt_onnx_opts *o) {
    memset(o, 0, sizeof *o);
    o->opset = VT_ONNX_OPSET_DEFAULT;
}

void vt_onnx_output_name(char *out, size_t n, const vt_net_cfg *cfg, int h, int softmax) {
    snprintf(out, n, "%s_%s", softmax ? "probs" : "logits", cfg->head[h].name);
}

/* The export in progress. */
typedef struct onnx_w {
    vt_graph g;
    vt_net *net;
    vt_pb nodes;        /* GraphProto node fields, in forward order */
    char **val;         /* (nnodes) the ONNX value each layer's output is; NULL: not yet */
    int *flat;          /* (nnodes) 1 when that value is (N, F), 0 when (N, C, T, H, W) */
    char **used;        /* every value name given out so far (names must be unique) */
    int nused;
    int *inits;         /* state-dict tensors the nodes read, in order of first use */
    int ninits;
    int *gathers;       /* tgather layers: each has an index initializer */
    int ngathers;
    vt_pb consts;       /* initializers of our own (shapes, the sin-cos table, scalars):
                           encoded GRAPH_INITIALIZER fields */
    int opset;
    char *err;
    size_t errlen;
} onnx_w;

/* A value name not given out before: `want`, else want_2, want_3, ... (the graph must be
 * in SSA form; zoo names are unique, this only guards a future model that reuses one). */
static const char *uniq_name(onnx_w *w, const char *want) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s", want);
    for (int k = 2;; k++) {
        int dup = 0;
        for (int i = 0; i < w->nused && !dup; i++)
            dup = !strcmp(w->used[i], buf);
        if (!dup)
            break;
        snprintf(buf, sizeof buf, "%s_%d", want, k);
    }
    w->used = vt_realloc(w->used, (size_t)(w->nused + 1) * sizeof *w->used);
    w->used[w->nused] = vt_strdup(buf);
    return w->used[w->nused++];
}

static const char *in_name(const onnx_w *w, int in) { return in < 0 ? "clip" : w->val[in]; }

/* A state-dict tensor as a node input: its name, and it becomes an initializer. */
static const char *init_name(onnx_w *w, int t) {
    for (int i = 0; i < w->ninits; i++)
        if (w->inits[i] == t)
            return w->g.tensors[t].name;
    w->inits = vt_realloc(w->inits, (size_t)(w->ninits + 1) * sizeof *w->inits);
    w->inits[w->ninits++] = t;
    return w->g.tensors[t].name;
}

static void attr_int(vt_pb *attrs, const char *name, int64_t v) {
    vt_pb a = {0};
    vt_pb_string(&a, ATTR_NAME, name);
    vt_pb_uint(&a, ATTR_TYPE, ATTR_TYPE_INT);
    vt_pb_int(&a, ATTR_I, v);
    vt_pb_msg(attrs, NODE_ATTRIBUTE, &a);
    vt_pb_free(&a);
}

static void attr_float(vt_pb *attrs, const char *name, float v) {
    vt_pb a = {0};
    vt_pb_string(&a, ATTR_NAME, name);
    vt_pb_uint(&a, ATTR_TYPE, ATTR_TYPE_FLOAT);
    vt_pb_float(&a, ATTR_F, v);
    vt_pb_msg(attrs, NODE_ATTRIBUTE, &a);
    vt_pb_free(&a);
}

/* Repeated int64 written unpacked, one tag each, as onnx.proto (proto2) declares them. */
static void attr_ints(vt_pb *attrs, const char *name, const int *v, int n) {
    vt_pb a = {0};
    vt_pb_string(&a, ATTR_NAME, name);
    vt_pb_uint(&a, ATTR_TYPE, ATTR_TYPE_INTS);
    for (int i = 0; i < n; i++)
        vt_pb_int(&a, ATTR_INTS, v[i]);
    vt_pb_msg(attrs, NODE_ATTRIBUTE, &a);
    vt_pb_free(&a);
}

/* kernel_shape, strides and pads (begin T, H, W then end T, H, W: symmetric here). */
static void attr_window(vt_pb *attrs, const int k[3], const int s[3], const int p[3]) {
    const int pads[6] = {p[0], p[1], p[2], p[0], p[1], p[2]};
    attr_ints(attrs, "kernel_shape", k, 3);
    attr_ints(attrs, "strides", s, 3);
    attr_ints(attrs, "pads", pads, 6);
}

/* One NodeProto; attrs (may be NULL) holds its encoded attribute fields. */
static void emit_node(onnx_w *w, const char *op, const char *name, const char *const *in,
                      int nin, const char *out, const vt_pb *attrs) {
    vt_pb n = {0};
    for (int i = 0; i < nin; i++)
        vt_pb_string(&n, NODE_INPUT, in[i]);
    vt_pb_string(&n, NODE_OUTPUT, out);
    vt_pb_string(&n, NODE_NAME, name);
    vt_pb_string(&n, NODE_OP_TYPE, op);
    if (attrs)
        vt_pb_raw(&n, attrs->data, attrs->len);
    vt_pb_msg(&w->nodes, GRAPH_NODE, &n);
    vt_pb_free(&n);
}

/* Flatten(axis=1) of value `x` unless it is flat already; returns the (N, F) value. */
static const char *flat_of(onnx_w *w, int in, const char *name) {
    if (in >= 0 && w->flat[in])
        return w->val[in];
    char nm[160];
    snprintf(nm, sizeof nm, "%s.flatten", name);
    const char *out = uniq_name(w, nm);
    vt_pb at = {0};
    attr_int(&at, "axis", 1);
    const char *x = in_name(w, in);
    emit_node(w, "Flatten", out, &x, 1, out, &at);
    vt_pb_free(&at);
    return out;
}

/* Whether a consumer of GAP node i reads it as (N, C, 1, 1, 1) — a conv or a channel
 * scale (X3D) — so that it stays unflattened (a linear flattens it itself). */
static int gap_feeds_5d(const onnx_w *w, int i) {
    for (int j = i + 1; j < w->g.nnodes; j++) {
        const vt_node *c = &w->g.nodes[j];
        for (int k = 0; k < c->nin; k++)
            if (c->in[k] == i && (c->kind == VT_NODE_CONV || c->kind == VT_NODE_CHSCALE))
                return 1;
    }
    return 0;
}

/* An initializer of our own: dtype DTYPE_FLOAT or DTYPE_INT64, nd dims (0: a scalar),
 * data little-endian (raw bytes: x86-64 and arm64 hosts). Returns its value name. */
static const char *const_t(onnx_w *w, const char *want, int dtype, const int64_t *dims, int nd,
                           const void *data, size_t nbytes) {
    const char *name = uniq_name(w, want);
    vt_pb t = {0};
    for (int d = 0; d < nd; d++)
        vt_pb_int(&t, TENSOR_DIMS, dims[d]);
    vt_pb_uint(&t, TENSOR_DATA_TYPE, (uint64_t)dtype);
    vt_pb_string(&t, TENSOR_NAME, name);
    vt_pb_bytes(&t, TENSOR_RAW_DATA, data, nbytes);
    vt_pb_msg(&w->consts, GRAPH_INITIALIZER, &t);
    vt_pb_free(&t);
    return name;
}
static const char *const_i64(onnx_w *w, const char *base, const char *suf, const int64_t *v,
                             int n) {
    char nm[200];
    snprintf(nm, sizeof nm, "%s.%s", base, suf);
    const int64_t dims[1] = {n};
    return const_t(w, nm, DTYPE_INT64, dims, n < 0 ? 0 : 1, v, sizeof(int64_t) * (size_t)(n < 0 ? 1 : n));
}
static const char *const_f(onnx_w *w, const char *base, const char *suf, float v) {
    char nm[200];
    snprintf(nm, sizeof nm, "%s.%s", base, suf);
    return const_t(w, nm, DTYPE_FLOAT, NULL, 0, &v, sizeof v);
}
/* One node with output "BASE.SUF" (or BASE itself when suf is NULL); frees at. */
static const char *op_n(onnx_w *w, const char *op, const char *base, const char *suf,
                        const char *const *in, int nin, vt_pb *at) {
    char nm[200];
    snprintf(nm, sizeof nm, suf ? "%s.%s" : "%s", base, suf);
    const char *out = uniq_name(w, nm);
    emit_node(w, op, out, in, nin, out, at);
    if (at)
        vt_pb_free(at);
    return out;
}
static const char *transpose_n(onnx_w *w, const char *base, const char *suf, const char *x,
                               const int *perm, int n) {
    vt_pb at = {0};
    attr_ints(&at, "perm", perm, n);
    return op_n(w, "Transpose", base, suf, &x, 1, &at);
}
/* x @ W^T + b: a linear layer on (N, L, I) tokens (MatMul broadcasts over N). */
static const char *tlinear_n(onnx_w *w, const vt_node *nd, const char *x, const char *b) {
    const char *wt = transpose_n(w, nd->name, "wT", init_name(w, nd->wt), (const int[2]){1, 0}, 2);
    const char *in[2] = {x, wt};
    const char *m = op_n(w, "MatMul", nd->name, "matmul", in, 2, NULL);
    const char *in2[2] = {m, b};
    return op_n(w, "Add", nd->name, NULL, in2, 2, NULL);
}

#include "models/formats/onnx_mvit.h" /* MViT's nodes: a part of this file */

/* The transformer nodes (net_graph_vit.c): opset 17's LayerNormalization, GELU in its erf
 * form, MatMul, Softmax. 0, or -1 with err. */
static int emit_vit(onnx_w *w, int i) {
    const vt_node *nd = &w->g.nodes[i];
    const char *x = in_name(w, nd->in[0]);
    vt_pb at = {0};
    w->flat[i] = nd->in[0] >= 0 && w->flat[nd->in[0]];
    switch (nd->kind) {
    case VT_NODE_TOKENS: {
        const int64_t shp[3] = {0, nd->c, nd->t};
        const char *in[2] = {x, const_i64(w, nd->name, "shape", shp, 3)};
        const char *r = op_n(w, "Reshape", nd->name, "reshape", in, 2, NULL);
        w->val[i] = (char *)transpose_n(w, nd->name, NULL, r, (const int[3]){0, 2, 1}, 3);
        return 0;
    }
    case VT_NODE_POS: {
        float *tab = vt_malloc((size_t)vt_node_floats(nd) * sizeof(float));
        vt_sincos_table(tab, nd->t, nd->c);
        const int64_t dims[2] = {nd->t, nd->c};
        const char *in[2] = {x, const_t(w, "pos_embed.table", DTYPE_FLOAT, dims, 2, tab,
                                        (size_t)vt_node_floats(nd) * sizeof(float))};
        free(tab);
        w->val[i] = (char *)op_n(w, "Add", nd->name, NULL, in, 2, NULL);
        return 0;
    }
    case VT_NODE_LN: {
        if (w->opset < 17) {
            vt_set_err(w->err, w->errlen, "layer %s: LayerNormalization needs opset 17 (got %d)",
                       nd->name, w->opset);
            return -1;
        }
        attr_int(&at, "axis", -1);
        attr_float(&at, "epsilon", nd->bn_eps);
        const char *in[3] = {x, init_name(w, nd->wt), init_name(w, nd->bt)};
        w->val[i] = (char *)op_n(w, "LayerNormalization", nd->name, NULL, in, 3, &at);
        return 0;
    }
    case VT_NODE_GELU: { /* x * 0.5 * (1 + erf(x / sqrt 2)) */
        const char *a[2] = {x, const_f(w, nd->name, "sqrt2", 1.4142135623730951f)};
        const char *e = op_n(w, "Div", nd->name, "div", a, 2, NULL);
        e = op_n(w, "Erf", nd->name, "erf", &e, 1, NULL);
        const char *b[2] = {e, const_f(w, nd->name, "one", 1.0f)};
        e = op_n(w, "Add", nd->name, "add", b, 2, NULL);
        const char *c[2] = {x, e};
        e = op_n(w, "Mul", nd->name, "mul", c, 2, NULL);
        const char *d[2] = {e, const_f(w, nd->name, "half", 0.5f)};
        w->val[i] = (char *)op_n(w, "Mul", nd->name, NULL, d, 2, NULL);
        return 0;
    }
    case VT_NODE_TLINEAR:
        w->val[i] = (char *)tlinear_n(w, nd, x, init_name(w, nd->bt));
        return 0;
    case VT_NODE_QKV: { /* the bias [q_bias | 0 | v_bias] */
        float *z = vt_calloc((size_t)nd->ic, sizeof(float));
        const int64_t dims[1] = {nd->ic};
        char nm[200];
        snprintf(nm, sizeof nm, "%s.k_bias", nd->name);
        const char *in[3] = {init_name(w, nd->bt), const_t(w, nm, DTYPE_FLOAT, dims, 1, z,
                                                             (size_t)nd->ic * sizeof(float)),
                             init_name(w, nd->vt2)};
        free(z);
        attr_int(&at, "axis", 0);
        const char *b = op_n(w, "Concat", nd->name, "bias", in, 3, &at);
        w->val[i] = (char *)tlinear_n(w, nd, x, b);
        return 0;
    }
    case VT_NODE_ATTN: {
        const int H = nd->heads, D = nd->c / H, L = nd->t;
        const int64_t shp[5] = {0, L, 3, H, D}, back[3] = {0, L, nd->c};
        const char *in[2] = {x, const_i64(w, nd->name, "shape", shp, 5)};
        const char *r = op_n(w, "Reshape", nd->name, "heads", in, 2, NULL);
        r = transpose_n(w, nd->name, "qkv", r, (const int[5]){2, 0, 3, 1, 4}, 5);
        const char *qkv[3];
        for (int j = 0; j < 3; j++) { /* (N, H, L, D) each */
            int64_t idx = j;
            const char *g[2] = {r, const_i64(w, nd->name, j == 0 ? "iq" : j == 1 ? "ik" : "iv",
                                             &idx, -1)};
            vt_pb ga = {0};
            attr_int(&ga, "axis", 0);
            qkv[j] = op_n(w, "Gather", nd->name, j == 0 ? "q" : j == 1 ? "k" : "v", g, 2, &ga);
        }
        const char *kt = transpose_n(w, nd->name, "kT", qkv[1], (const int[4]){0, 1, 3, 2}, 4);
        const char *m1[2] = {qkv[0], kt};
        const char *s = op_n(w, "MatMul", nd->name, "logits", m1, 2, NULL);
        const char *sc[2] = {s, const_f(w, nd->name, "scale", 1.0f / sqrtf((float)D))};
        s = op_n(w, "Mul", nd->name, "scaled", sc, 2, NULL);
        attr_int(&at, "axis", -1);
        s = op_n(w, "Softmax", nd->name, "probs", &s, 1, &at);
        const char *m2[2] = {s, qkv[2]};
        s = op_n(w, "MatMul", nd->name, "context", m2, 2, NULL);
        s = transpose_n(w, nd->name, "tokens", s, (const int[4]){0, 2, 1, 3}, 4);
        const char *rb[2] = {s, const_i64(w, nd->name, "back", back, 3)};
        w->val[i] = (char *)op_n(w, "Reshape", nd->name, NULL, rb, 2, NULL);
        return 0;
    }
    case VT_NODE_TMEAN:
        attr_ints(&at, "axes", (const int[1]){1}, 1);
        attr_int(&at, "keepdims", 0);
        w->val[i] = (char *)op_n(w, "ReduceMean", nd->name, NULL, &x, 1, &at);
        w->flat[i] = 1;
        return 0;
    case VT_NODE_DROPPATH: /* the identity at inference */
        w->val[i] = (char *)x;
        return 0;
    case VT_NODE_CLSTOK:
    case VT_NODE_MSA:
    case VT_NODE_TMAXPOOL:
    case VT_NODE_TFIRST:
        vt_pb_free(&at);
        return emit_mvit(w, i);
    default:
        vt_set_err(w->err, w->errlen, "layer %s (node kind %d) has no ONNX form yet: add a case "
                   "to models/formats/onnx.c emit_layer", nd->name, (int)nd->kind);
        return -1;
    }
}

/* The ONNX nodes of layer i; sets w->val[i] and w->flat[i]. 0, or -1 with err. */
static int emit_layer(onnx_w *w, int i) {
    const vt_node *nd = &w->g.nodes[i];
    const int in0 = nd->in[0];
    const char *x = in_name(w, in0);
    vt_pb at = {0};
    w->flat[i] = in0 >= 0 && w->flat[in0];
    switch (nd->kind) {
    case VT_NODE_CONV: {
        const char *in[3] = {x, init_name(w, nd->wt), nd->bt >= 0 ? init_name(w, nd->bt) : NULL};
        VT_CHECK(!w->flat[i], "conv %s on a flattened value", nd->name);
        attr_window(&at, nd->conv.k, nd->conv.s, nd->conv.p);
        if (vt_conv_groups(&nd->conv) > 1) /* X3D's depthwise convs */
            attr_int(&at, "group", vt_conv_groups(&nd->conv));
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Conv", nd->name, in, nd->bt >= 0 ? 3 : 2, w->val[i], &at);
        break;
    }
    case VT_NODE_BN: {
        const char *in[5] = {x, init_name(w, nd->wt), init_name(w, nd->bt), init_name(w, nd->rm),
                             init_name(w, nd->rv)};
        attr_float(&at, "epsilon", nd->bn_eps); /* 1e-5, S3D's 1e-3 */
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "BatchNormalization", nd->name, in, 5, w->val[i], &at);
        break;
    }
    case VT_NODE_RELU:
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Relu", nd->name, &x, 1, w->val[i], NULL);
        break;
    case VT_NODE_MAXPOOL:
        attr_window(&at, nd->pool.k, nd->pool.s, nd->pool.p);
        /* ONNX's ceil_mode, like PyTorch's, drops a last window that would start in the
         * right padding (ORT and torch.onnx agree); the zoo uses floor everywhere. */
        if (nd->pool.ceil_mode)
            attr_int(&at, "ceil_mode", 1);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "MaxPool", nd->name, &x, 1, w->val[i], &at);
        break;
    case VT_NODE_GAP: {
        char nm[160];
        snprintf(nm, sizeof nm, "%s.pool", nd->name);
        const char *pooled = uniq_name(w, nm);
        emit_node(w, "GlobalAveragePool", pooled, &x, 1, pooled, NULL);
        if (gap_feeds_5d(w, i)) { /* X3D: SE's and the head's 1x1x1 convs read (N, C, 1, 1, 1) */
            w->val[i] = (char *)pooled;
            break;
        }
        attr_int(&at, "axis", 1);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Flatten", nd->name, &pooled, 1, w->val[i], &at);
        w->flat[i] = 1;
        break;
    }
    case VT_NODE_LINEAR: {
        const char *in[3] = {flat_of(w, in0, nd->name), init_name(w, nd->wt),
                             nd->bt >= 0 ? init_name(w, nd->bt) : NULL};
        attr_int(&at, "transB", 1);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Gemm", nd->name, in, nd->bt >= 0 ? 3 : 2, w->val[i], &at);
        w->flat[i] = 1;
        break;
    }
    case VT_NODE_AVGPOOL:
        /* S3D's AvgPool3d((2,7,7), stride 1): PyTorch counts padding (backend.h) */
        attr_window(&at, nd->pool.k, nd->pool.s, nd->pool.p);
        attr_int(&at, "count_include_pad", 1);
        if (nd->pool.ceil_mode)
            attr_int(&at, "ceil_mode", 1);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "AveragePool", nd->name, &x, 1, w->val[i], &at);
        break;
    case VT_NODE_CONCAT: {
        /* S3D's branches, in their order, along channels */
        const char *in[VT_NODE_MAX_IN];
        for (int k = 0; k < nd->nin; k++)
            in[k] = in_name(w, nd->in[k]);
        attr_int(&at, "axis", 1);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Concat", nd->name, in, nd->nin, w->val[i], &at);
        break;
    }
    case VT_NODE_TGATHER: {
        char nm[160];
        snprintf(nm, sizeof nm, "%s.index", nd->name);
        const char *in[2] = {x, uniq_name(w, nm)};
        w->gathers = vt_realloc(w->gathers, (size_t)(w->ngathers + 1) * sizeof *w->gathers);
        w->gathers[w->ngathers++] = i;
        attr_int(&at, "axis", 2);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Gather", nd->name, in, 2, w->val[i], &at);
        break;
    }
    case VT_NODE_SIGMOID:
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Sigmoid", nd->name, &x, 1, w->val[i], NULL);
        break;
    case VT_NODE_SILU: { /* x * sigmoid(x): opset 17 has no SiLU */
        char nm[160];
        snprintf(nm, sizeof nm, "%s.sigmoid", nd->name);
        const char *sg = uniq_name(w, nm);
        emit_node(w, "Sigmoid", sg, &x, 1, sg, NULL);
        const char *in[2] = {x, sg};
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Mul", nd->name, in, 2, w->val[i], NULL);
        break;
    }
    case VT_NODE_CHSCALE: { /* (N, C, T, H, W) * (N, C, 1, 1, 1), broadcast as torch.mul */
        const char *in[2] = {x, in_name(w, nd->in[1])};
        VT_CHECK(!w->flat[nd->in[1]], "chscale %s: its scale is flattened", nd->name);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Mul", nd->name, in, 2, w->val[i], NULL);
        break;
    }
    case VT_NODE_DROPOUT:
        /* Identity at inference (PyTorch's eval(), net.c's train=0): no node at all. */
        w->val[i] = (char *)x;
        break;
    case VT_NODE_ADD: {
        const char *in[2] = {x, in_name(w, nd->in[1])};
        VT_CHECK(nd->in[1] < 0 || w->flat[nd->in[1]] == w->flat[i],
                 "add %s: one input flattened, the other not", nd->name);
        w->val[i] = (char *)uniq_name(w, nd->name);
        emit_node(w, "Add", nd->name, in, 2, w->val[i], NULL);
        break;
    }
    default: /* the transformer nodes */
        vt_pb_free(&at);
        return emit_vit(w, i);
    }
    vt_pb_free(&at);
    return 0;
}

/* A ValueInfoProto: float32 tensor, dims[0] the dynamic "batch". */
static void value_info(vt_pb *graph, int field, const char *name, const int64_t *dims, int nd) {
    vt_pb shape = {0}, tt = {0}, type = {0}, vi = {0};
    for (int d = 0; d < nd; d++) {
        vt_pb dim = {0};
        if (d == 0)
            vt_pb_string(&dim, DIM_PARAM, "batch");
        else
            vt_pb_int(&dim, DIM_VALUE, dims[d]);
        vt_pb_msg(&shape, SHAPE_DIM, &dim);
        vt_pb_free(&dim);
    }
    vt_pb_uint(&tt, TENSOR_TYPE_ELEM, DTYPE_FLOAT);
    vt_pb_msg(&tt, TENSOR_TYPE_SHAPE, &shape);
    vt_pb_msg(&type, TYPE_TENSOR, &tt);
    vt_pb_string(&vi, VALUE_NAME, name);
    vt_pb_msg(&vi, VALUE_TYPE, &type);
    vt_pb_msg(graph, field, &vi);
    vt_pb_free(&shape);
    vt_pb_free(&tt);
    vt_pb_free(&type);
    vt_pb_free(&vi);
}

/* The initializers into graph: each TensorProto's small fields are built apart, then its
 * raw_data goes straight into graph (the weights are copied once, not once per level).
 * params/bufs: host copies of the net's arenas. */
static void emit_initializers(onnx_w *w, vt_pb *graph, const float *params, const float *bufs) {
    for (int k = 0; k < w->ninits; k++) {
        const vt_tensor_info *t = &w->g.tensors[w->inits[k]];
        const vt_tensor_info *nt = vt_net_find_tensor(w->net, t->name);
        VT_CHECK(nt && nt->numel == t->numel && nt->is_buffer == t->is_buffer,
                 "tensor %s: the net and its rebuilt graph disagree", t->name);
        vt_pb head = {0};
        /* Gemm's B is 2-D: a linear layer kept with a conv's 5-D state-dict shape (S3D's
         * classifier.1, (classes, 1024, 1, 1, 1)) is written as (classes, 1024), the
         * same bytes. */
        const vt_node *owner = &w->g.nodes[w->g.aux[w->inits[k]].node];
        if (owner->kind == VT_NODE_LINEAR && t->ndim > 2) {
            vt_pb_int(&head, TENSOR_DIMS, t->shape[0]);
            vt_pb_int(&head, TENSOR_DIMS, t->numel / t->shape[0]);
        } else {
            for (int d = 0; d < t->ndim; d++)
                vt_pb_int(&head, TENSOR_DIMS, t->shape[d]);
        }
        vt_pb_uint(&head, TENSOR_DATA_TYPE, DTYPE_FLOAT);
        vt_pb_string(&head, TENSOR_NAME, t->name);
        uint64_t nbytes = 4 * (uint64_t)t->numel;
        uint64_t body = head.len + vt_pb_len_field_size(TENSOR_RAW_DATA, nbytes);
        vt_pb_len_header(graph, GRAPH_INITIALIZER, body);
        vt_pb_raw(graph, head.data, head.len);
        vt_pb_len_header(graph, TENSOR_RAW_DATA, nbytes);
        vt_pb_raw_f32le(graph, (nt->is_buffer ? bufs : params) + nt->offset, (size_t)t->numel);
        vt_pb_free(&head);
    }
    for (int k = 0; k < w->ngathers; k++) { /* the frames a tgather takes, int64 */
        const vt_node *nd = &w->g.nodes[w->gathers[k]];
        char nm[160];
        snprintf(nm, sizeof nm, "%s.index", nd->name);
        vt_pb t = {0};
        uint8_t le8[8];
        vt_pb_int(&t, TENSOR_DIMS, nd->t);
        vt_pb_uint(&t, TENSOR_DATA_TYPE, DTYPE_INT64);
        vt_pb_string(&t, TENSOR_NAME, nm);
        vt_pb_len_header(&t, TENSOR_RAW_DATA, 8 * (uint64_t)nd->t);
        for (int f = 0; f < nd->t; f++) {
            uint64_t v = (uint64_t)vt_pack_pathway_frame(nd->it, nd->t, f);
            for (int b = 0; b < 8; b++)
                le8[b] = (uint8_t)(v >> (8 * b));
            vt_pb_raw(&t, le8, 8);
        }
        vt_pb_msg(graph, GRAPH_INITIALIZER, &t);
        vt_pb_free(&t);
    }
    vt_pb_raw(graph, w->consts.data, w->consts.len);
}

/* The file: the model's small fields, then the graph field, whose bytes are written
 * from their own buffer rather than copied into the model's. */
typedef struct onnx_file { const vt_pb *model, *graph_head, *graph; } onnx_file;

static int onnx_fill(void *ctx, int fd) {
    const onnx_file *f = ctx;
    if (vt_fd_write_all(fd, f->model->data, f->model->len) != 0 ||
        vt_fd_write_all(fd, f->graph_head->data, f->graph_head->len) != 0)
        return -1;
    return vt_fd_write_all(fd, f->graph->data, f->graph->len);
}

int vt_onnx_export(const char *path, vt_net *net, const vt_onnx_opts *o, char *err,
                   size_t errlen) {
    const vt_net_cfg *cfg = vt_net_config(net);
    vt_backend *be = vt_net_backend(net);
    onnx_w w;
    memset(&w, 0, sizeof w);
    w.net = net;
    w.err = err;
    w.errlen = errlen;
    w.opset = o->opset;
    vt_pb graph = {0}, model = {0}, ghead = {0};
    float *params = NULL, *bufs = NULL;
    int rc = -1;
    if (o->opset < VT_ONNX_OPSET_MIN || o->opset > VT_ONNX_OPSET_MAX) {
        vt_set_err(err, errlen, "opset %d: this exporter writes opsets %d to %d", o->opset,
                   VT_ONNX_OPSET_MIN, VT_ONNX_OPSET_MAX);
        return -1;
    }
    /* The graph the net runs: the zoo builds the same nodes from the same configuration
     * (net.c does exactly this), the precision aside — the export is float32. */
    vt_net_cfg gc = *cfg;
    gc.precision = VT_PREC_FP32;
    if (vt_graph_make(&w.g, &gc, err, errlen) != 0)
        return -1;
    w.val = vt_calloc((size_t)w.g.nnodes, sizeof *w.val);
    w.flat = vt_calloc((size_t)w.g.nnodes, sizeof *w.flat);
    (void)uniq_name(&w, "clip");

    for (int i = 0; i < w.g.nnodes; i++)
        if (emit_layer(&w, i) != 0)
            goto end;
    /* Heads: a graph output each, named for the head (vt_onnx_output_name). */
    char outs[VT_MAX_HEADS][80];
    for (int h = 0; h < cfg->nheads; h++) {
        int node = -1;
        for (int i = 0; i < w.g.nnodes; i++)
            if (w.g.nodes[i].kind == VT_NODE_LINEAR && w.g.nodes[i].head == h)
                node = i;
        VT_CHECK(node >= 0, "head %d has no classifier node", h);
        vt_onnx_output_name(outs[h], sizeof outs[h], cfg, h, o->softmax);
        const char *logits = w.val[node];
        if (!o->softmax) {
            /* An Identity names the output, so a head's Gemm keeps its layer's name. */
            emit_node(&w, "Identity", outs[h], &logits, 1, uniq_name(&w, outs[h]), NULL);
        } else if (cfg->head[h].loss == VT_LOSS_BCE) {
            emit_node(&w, "Sigmoid", outs[h], &logits, 1, uniq_name(&w, outs[h]), NULL);
        } else {
            vt_pb at = {0};
            attr_int(&at, "axis", 1);
            emit_node(&w, "Softmax", outs[h], &logits, 1, uniq_name(&w, outs[h]), &at);
            vt_pb_free(&at);
        }
    }

    /* Weights and BN statistics: host copies of the arenas (backend memory). */
    int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net);
    params = vt_malloc(sizeof(float) * (size_t)VT_MAX(np, 1));
    bufs = vt_malloc(sizeof(float) * (size_t)VT_MAX(nb, 1));
    if (be->i->synchronize)
        be->i->synchronize(be);
    if (np)
        be->i->to_host(be, params, vt_net_params(net), sizeof(float) * (size_t)np);
    if (nb)
        be->i->to_host(be, bufs, vt_net_buffers(net), sizeof(float) * (size_t)nb);

    vt_pb_raw(&graph, w.nodes.data, w.nodes.len);
    vt_pb_free(&w.nodes);
    char gname[64];
    snprintf(gname, sizeof gname, "vidtrain_%s", cfg->model);
    vt_pb_string(&graph, GRAPH_NAME, gname);
    emit_initializers(&w, &graph, params, bufs);
    const int64_t in_dims[5] = {0, 3, cfg->clip_t, cfg->clip_h, cfg->clip_w};
    value_info(&graph, GRAPH_INPUT, "clip", in_dims, 5);
    for (int h = 0; h < cfg->nheads; h++) {
        const int64_t od[2] = {0, cfg->head[h].classes};
        value_info(&graph, GRAPH_OUTPUT, outs[h], od, 2);
    }

    vt_pb_int(&model, MODEL_IR_VERSION, ONNX_IR_VERSION);
    vt_pb_string(&model, MODEL_PRODUCER_NAME, "vidtrain");
    vt_pb_string(&model, MODEL_PRODUCER_VERSION, VT_VERSION);
    vt_pb_int(&model, MODEL_MODEL_VERSION, 1);
    if (o->doc)
        vt_pb_string(&model, MODEL_DOC, o->doc);
    vt_pb opset = {0};
    vt_pb_int(&opset, OPSET_VERSION, o->opset); /* domain "" (the default): ai.onnx */
    vt_pb_msg(&model, MODEL_OPSET, &opset);
    vt_pb_free(&opset);
    for (int i = 0; i < o->nmeta; i++) {
        vt_pb e = {0};
        vt_pb_string(&e, ENTRY_KEY, o->meta_key[i]);
        vt_pb_string(&e, ENTRY_VALUE, o->meta_value[i]);
        vt_pb_msg(&model, MODEL_METADATA, &e);
        vt_pb_free(&e);
    }
    vt_pb_len_header(&ghead, MODEL_GRAPH, graph.len);
    /* Protobuf messages are limited to 2 GiB (parsers refuse more); models that large
     * would need ONNX's external-data files, which this exporter does not write. */
    if (model.len + ghead.len + graph.len > (size_t)INT_MAX) {
        char b[32];
        vt_set_err(err, errlen, "%s: the model takes %s, past protobuf's 2 GiB limit (a smaller "
                   "clip makes c3d's fc6 smaller)", path,
                   vt_fmt_bytes(b, sizeof b, (int64_t)(model.len + ghead.len + graph.len)));
        goto end;
    }
    onnx_file f = {&model, &ghead, &graph};
    if (vt_file_write_atomic_fill(path, onnx_fill, &f, err, errlen) != 0)
        goto end;
    rc = 0;
end:
    vt_pb_free(&graph);
    vt_pb_free(&model);
    vt_pb_free(&ghead);
    vt_pb_free(&w.nodes);
    vt_pb_free(&w.consts);
    free(params);
    free(bufs);
    for (int i = 0; i < w.nused; i++)
        free(w.used[i]);
    free(w.used);
    free(w.val);
    free(w.flat);
    free(w.inits);
    free(w.gathers);
    vt_graph_free(&w.g);
    return rc;
}
