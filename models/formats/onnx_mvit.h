/*
 * onnx_mvit.h: the MViT part of the ONNX export — a piece of onnx.c split off by concern,
 * included once by it after its private writer (onnx_w, op_n, const_t, ...), which it
 * uses; nothing else may include it. MViT's nodes (net_graph_mvit.c) as opset-17 ops:
 *   class token    Concat of (x[:, :1] * 0 + class_token) and x (the token expanded over
 *                  the batch without a Shape op); MViTv1 adds [class_pos; temporal_pos[t]
 *                  + spatial_pos[s]] built by broadcasting;
 *   class row      Slice of token 0, flattened;
 *   pool_skip      the grid Sliced off the class token, Transposed and Reshaped to
 *                  (N, C, T, H, W), MaxPool, back, Concat with the class token;
 *   attention      qkv Reshaped and Transposed to (3, N, heads, L, D) and Gathered; each
 *                  pooled part's grid as (N*heads, D, T, H, W) through a grouped Conv, back,
 *                  Concat with its class row, LayerNormalization; logits MatMul(q * scale,
 *                  k^T) plus the relative terms: the tables (at a clip they were not
 *                  built for, first MatMul'd by the constant (need x stored) matrix of
 *                  torchvision's linear _interpolate: vt_msa_rel_of) Gathered at torchvision's
 *                  distances (constant index tensors) and MatMul'd with q per t, h, w row
 *                  (batched MatMul broadcasting the table over the other axes), summed by
 *                  broadcasting and Padded with zeros for the class row and column;
 *                  Softmax, MatMul v, plus q times a (Lq, 1) mask of [0, 1, ..., 1]
 *                  (residual pooling without the class token), back to (N, Lq, C).
 */

/* Slice of x along axis from start to end. */
static const char *slice_n(onnx_w *w, const char *base, const char *suf, const char *x,
                           int axis, int64_t start, int64_t end) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s.s", suf);
    const int64_t ax = axis;
    const char *in[4] = {x, const_i64(w, base, nm, &start, 1), const_i64(w, base, nm, &end, 1),
                         const_i64(w, base, nm, &ax, 1)};
    return op_n(w, "Slice", base, suf, in, 4, NULL);
}

static const char *reshape_n(onnx_w *w, const char *base, const char *suf, const char *x,
                             const int64_t *shape, int n) {
    char nm[64];
    snprintf(nm, sizeof nm, "%s.shape", suf ? suf : "out");
    const char *in[2] = {x, const_i64(w, base, nm, shape, n)};
    return op_n(w, "Reshape", base, suf, in, 2, NULL);
}

static const char *bin_n(onnx_w *w, const char *op, const char *base, const char *suf,
                         const char *a, const char *b) {
    const char *in[2] = {a, b};
    return op_n(w, op, base, suf, in, 2, NULL);
}

static const char *concat_n(onnx_w *w, const char *base, const char *suf, const char *a,
                            const char *b, int axis) {
    vt_pb at = {0};
    attr_int(&at, "axis", axis);
    const char *in[2] = {a, b};
    return op_n(w, "Concat", base, suf, in, 2, &at);
}

/* One part (0 q, 1 k, 2 v) of an msa node: p (N, H, L, D) -> pooled and normalised. */
static const char *mvit_pool_part(onnx_w *w, const vt_node *nd, const char *p, int x,
                                  const int *og) {
    static const char *const nm[3] = {"q", "k", "v"};
    const int H = nd->heads, D = nd->c / H, L = 1 + nd->grid[0] * nd->grid[1] * nd->grid[2];
    char s[64];
    snprintf(s, sizeof s, "pool_%s.cls", nm[x]);
    const char *cls = slice_n(w, nd->name, s, p, 2, 0, 1);
    snprintf(s, sizeof s, "pool_%s.grid", nm[x]);
    const char *g = slice_n(w, nd->name, s, p, 2, 1, L);
    snprintf(s, sizeof s, "pool_%s.chw", nm[x]);
    g = transpose_n(w, nd->name, s, g, (const int[4]){0, 1, 3, 2}, 4);
    const int64_t sh5[5] = {-1, D, nd->grid[0], nd->grid[1], nd->grid[2]};
    snprintf(s, sizeof s, "pool_%s.map", nm[x]);
    g = reshape_n(w, nd->name, s, g, sh5, 5);
    vt_pb at = {0};
    const int *k = x ? nd->pool.k : nd->conv.k, *st = x ? nd->pool.s : nd->conv.s,
              *pd = x ? nd->pool.p : nd->conv.p;
    attr_window(&at, k, st, pd);
    attr_int(&at, "group", D);
    const char *cin[2] = {g, init_name(w, nd->mt[3 + x])};
    snprintf(s, sizeof s, "pool_%s.conv", nm[x]);
    g = op_n(w, "Conv", nd->name, s, cin, 2, &at);
    const int64_t sh4[4] = {-1, H, D, (int64_t)og[0] * og[1] * og[2]};
    snprintf(s, sizeof s, "pool_%s.rows", nm[x]);
    g = reshape_n(w, nd->name, s, g, sh4, 4);
    snprintf(s, sizeof s, "pool_%s.tok", nm[x]);
    g = transpose_n(w, nd->name, s, g, (const int[4]){0, 1, 3, 2}, 4);
    snprintf(s, sizeof s, "pool_%s.cat", nm[x]);
    g = concat_n(w, nd->name, s, cls, g, 2);
    attr_int(&at, "axis", -1);
    attr_float(&at, "epsilon", nd->bn_eps);
    const char *lin[3] = {g, init_name(w, nd->mt[6 + x]), init_name(w, nd->mt[9 + x])};
    snprintf(s, sizeof s, "pool_%s.norm", nm[x]);
    return op_n(w, "LayerNormalization", nd->name, s, lin, 3, &at);
}

/* The relative terms (N, H, Lq, Lk), zero on the class row and column. */
static const char *mvit_rel(onnx_w *w, const vt_node *nd, const char *q) {
    const int *qg = nd->qgrid, *kg = nd->kgrid, D = nd->c / nd->heads;
    const int Lq = 1 + qg[0] * qg[1] * qg[2], Lk = 1 + kg[0] * kg[1] * kg[2];
    const char *rq = slice_n(w, nd->name, "rel.q", q, 2, 1, Lq);
    const int64_t s6[6] = {0, 0, qg[0], qg[1], qg[2], D};
    rq = reshape_n(w, nd->name, "rel.q6", rq, s6, 6);
    const char *terms[3];
    static const char *const an[3] = {"t", "h", "w"};
    for (int a = 0; a < 3; a++) { /* the table of axis a Gathered: (q_a, k_a, D) -> (q_a, D, k_a) */
        int64_t *idx = vt_malloc((size_t)qg[a] * kg[a] * sizeof(int64_t));
        for (int i = 0; i < qg[a]; i++)
            for (int j = 0; j < kg[a]; j++)
                idx[i * kg[a] + j] = vt_mvit_rel_dist(i, qg[a], j, kg[a]);
        char s[64];
        snprintf(s, sizeof s, "rel.idx_%s", an[a]);
        const int64_t dims[2] = {qg[a], kg[a]};
        const char *ix = const_t(w, s, DTYPE_INT64, dims, 2, idx,
                                 (size_t)qg[a] * kg[a] * sizeof(int64_t));
        free(idx);
        const int k = a == 0 ? 2 : a - 1; /* rel_pos_t, _h, _w */
        vt_pb ga = {0};
        attr_int(&ga, "axis", 0);
        const char *gin[2] = {init_name(w, nd->mt[k]), ix};
        vt_msa_rel r;
        vt_msa_rel_of(&w->g, nd, &r);
        if (r.m[k] >= 0) { /* a clip the tables were not built for: M (need x stored) @ table */
            const int S = r.stored[k], N = r.need[k];
            float *m = vt_interp_linear_matrix(S, N);
            char mn[160];
            snprintf(mn, sizeof mn, "%s.rel.interp_%s", nd->name, an[a]);
            const int64_t md[2] = {N, S};
            const char *min[2] = {const_t(w, mn, DTYPE_FLOAT, md, 2, m, (size_t)N * S * 4),
                                  gin[0]};
            free(m);
            snprintf(s, sizeof s, "rel.tab_%s", an[a]);
            gin[0] = op_n(w, "MatMul", nd->name, s, min, 2, NULL);
        }
        snprintf(s, sizeof s, "rel.R%s", an[a]);
        const char *R = op_n(w, "Gather", nd->name, s, gin, 2, &ga);
        snprintf(s, sizeof s, "rel.R%sT", an[a]);
        R = transpose_n(w, nd->name, s, R, (const int[3]){0, 2, 1}, 3);
        /* q with axis a just before the rows the MatMul runs over */
        const char *x;
        if (a == 0) {
            const int64_t s5[5] = {0, 0, qg[0], (int64_t)qg[1] * qg[2], D};
            x = reshape_n(w, nd->name, "rel.qt", rq, s5, 5);
        } else if (a == 1) {
            x = rq;
        } else {
            x = transpose_n(w, nd->name, "rel.qw", rq, (const int[6]){0, 1, 2, 4, 3, 5}, 6);
        }
        snprintf(s, sizeof s, "rel.%s", an[a]);
        const char *m = bin_n(w, "MatMul", nd->name, s, x, R);
        if (a == 2) /* (.., qt, qw, qh, kw) -> (.., qt, qh, qw, kw) */
            m = transpose_n(w, nd->name, "rel.w6", m, (const int[6]){0, 1, 2, 4, 3, 5}, 6);
        int64_t s8[8] = {0, 0, qg[0], qg[1], qg[2], 1, 1, 1};
        s8[5 + a] = kg[a];
        snprintf(s, sizeof s, "rel.%s8", an[a]);
        terms[a] = reshape_n(w, nd->name, s, m, s8, 8);
    }
    const char *r = bin_n(w, "Add", nd->name, "rel.hw", terms[1], terms[2]);
    r = bin_n(w, "Add", nd->name, "rel.thw", r, terms[0]);
    const int64_t s4[4] = {0, 0, Lq - 1, Lk - 1};
    r = reshape_n(w, nd->name, "rel.grid", r, s4, 4);
    const int64_t pads[8] = {0, 0, 1, 1, 0, 0, 0, 0};
    const char *pin[2] = {r, const_i64(w, nd->name, "rel.pads", pads, 8)};
    return op_n(w, "Pad", nd->name, "rel", pin, 2, NULL);
}

static int emit_mvit(onnx_w *w, int i) {
    const vt_node *nd = &w->g.nodes[i];
    const char *x = in_name(w, nd->in[0]);
    vt_pb at = {0};
    switch (nd->kind) {
    case VT_NODE_CLSTOK: {
        const char *first = slice_n(w, nd->name, "first", x, 1, 0, 1);
        const char *z = bin_n(w, "Mul", nd->name, "zero", first,
                              const_f(w, nd->name, "zeros", 0.0f));
        const int64_t s3[3] = {1, 1, nd->c};
        const char *tok = reshape_n(w, nd->name, "token", init_name(w, nd->wt), s3, 3);
        tok = bin_n(w, "Add", nd->name, "tokens", z, tok);
        if (nd->mt[0] < 0) {
            w->val[i] = (char *)concat_n(w, nd->name, NULL, tok, x, 1);
            return 0;
        }
        /* MViTv1: + [class_pos; temporal_pos[t] + spatial_pos[s]] */
        const int64_t T = nd->grid[0], hw = (int64_t)nd->grid[1] * nd->grid[2];
        const int64_t st[3] = {T, 1, nd->c}, ss[3] = {1, hw, nd->c}, s2[2] = {T * hw, nd->c},
                      sc[2] = {1, nd->c};
        const char *tp = reshape_n(w, nd->name, "tpos", init_name(w, nd->mt[1]), st, 3);
        const char *spn = reshape_n(w, nd->name, "spos", init_name(w, nd->mt[0]), ss, 3);
        const char *tab = bin_n(w, "Add", nd->name, "pos", tp, spn);
        tab = reshape_n(w, nd->name, "pos2", tab, s2, 2);
        const char *cp = reshape_n(w, nd->name, "cpos", init_name(w, nd->mt[2]), sc, 2);
        tab = concat_n(w, nd->name, "table", cp, tab, 0);
        const char *cat = concat_n(w, nd->name, "cat", tok, x, 1);
        w->val[i] = (char *)bin_n(w, "Add", nd->name, NULL, cat, tab);
        return 0;
    }
    case VT_NODE_TFIRST: {
        const char *first = slice_n(w, nd->name, "first", x, 1, 0, 1);
        const int64_t s2[2] = {0, nd->c};
        w->val[i] = (char *)reshape_n(w, nd->name, NULL, first, s2, 2);
        w->flat[i] = 1;
        return 0;
    }
    case VT_NODE_TMAXPOOL: {
        const int L = nd->it, *g = nd->grid;
        const char *cls = slice_n(w, nd->name, "cls", x, 1, 0, 1);
        const char *m = slice_n(w, nd->name, "grid", x, 1, 1, L);
        m = transpose_n(w, nd->name, "chw", m, (const int[3]){0, 2, 1}, 3);
        const int64_t s5[5] = {0, nd->c, g[0], g[1], g[2]}, s3[3] = {0, nd->c, nd->t - 1};
        m = reshape_n(w, nd->name, "map", m, s5, 5);
        attr_window(&at, nd->pool.k, nd->pool.s, nd->pool.p);
        m = op_n(w, "MaxPool", nd->name, "pool", &m, 1, &at);
        m = reshape_n(w, nd->name, "rows", m, s3, 3);
        m = transpose_n(w, nd->name, "tok", m, (const int[3]){0, 2, 1}, 3);
        w->val[i] = (char *)concat_n(w, nd->name, NULL, cls, m, 1);
        return 0;
    }
    case VT_NODE_MSA: {
        const int H = nd->heads, D = nd->c / H, L = nd->it, Lq = nd->t;
        const int64_t s5[5] = {0, L, 3, H, D};
        const char *r = reshape_n(w, nd->name, "heads", x, s5, 5);
        r = transpose_n(w, nd->name, "qkv", r, (const int[5]){2, 0, 3, 1, 4}, 5);
        const char *p[3];
        for (int j = 0; j < 3; j++) { /* (N, H, L, D) each, then pooled */
            int64_t idx = j;
            static const char *const pn[3] = {"q", "k", "v"}, *const ipn[3] = {"iq", "ik", "iv"};
            const char *g[2] = {r, const_i64(w, nd->name, ipn[j], &idx, -1)};
            vt_pb ga = {0};
            attr_int(&ga, "axis", 0);
            p[j] = op_n(w, "Gather", nd->name, pn[j], g, 2, &ga);
            if (nd->mflags & (j ? VT_MSA_POOLKV : VT_MSA_POOLQ))
                p[j] = mvit_pool_part(w, nd, p[j], j, j ? nd->kgrid : nd->qgrid);
        }
        const char *qs = bin_n(w, "Mul", nd->name, "qscaled", p[0],
                               const_f(w, nd->name, "scale", (float)(1.0 / sqrt((double)D))));
        const char *kt = transpose_n(w, nd->name, "kT", p[1], (const int[4]){0, 1, 3, 2}, 4);
        const char *s = bin_n(w, "MatMul", nd->name, "logits", qs, kt);
        if (nd->mflags & VT_MSA_REL)
            s = bin_n(w, "Add", nd->name, "logits_rel", s, mvit_rel(w, nd, p[0]));
        attr_int(&at, "axis", -1);
        s = op_n(w, "Softmax", nd->name, "probs", &s, 1, &at);
        s = bin_n(w, "MatMul", nd->name, "context", s, p[2]);
        if (nd->mflags & VT_MSA_RESIDUAL) {
            float *mask = vt_malloc((size_t)Lq * sizeof(float));
            for (int t = 0; t < Lq; t++)
                mask[t] = t ? 1.0f : 0.0f;
            const int64_t dims[2] = {Lq, 1};
            char nm[200];
            snprintf(nm, sizeof nm, "%s.residual_mask", nd->name);
            const char *mk = const_t(w, nm, DTYPE_FLOAT, dims, 2, mask, (size_t)Lq * sizeof(float));
            free(mask);
            const char *rq = bin_n(w, "Mul", nd->name, "residual", p[0], mk);
            s = bin_n(w, "Add", nd->name, "pooled", s, rq);
        }
        s = transpose_n(w, nd->name, "tokens", s, (const int[4]){0, 2, 1, 3}, 4);
        const int64_t back[3] = {0, Lq, nd->c};
        w->val[i] = (char *)reshape_n(w, nd->name, NULL, s, back, 3);
        return 0;
    }
    default:
        vt_set_err(w->err, w->errlen, "layer %s (node kind %d) has no ONNX form yet: add a case "
                   "to models/formats/onnx.c emit_layer", nd->name, (int)nd->kind);
        return -1;
    }
}
