/*
 * net_graph.h: the network as data, private to models/ (net.c runs it, zoo.c builds it —
 * models/zoo.h —, memplan.c sizes it). A graph is a list of nodes in forward order; each node is one op
 * with its inputs (earlier nodes, or -1 for the input clip), its per-clip output shape,
 * and views into the parameter and buffer arenas. vt_graph_plan then lays out, per clip,
 * every activation, dropout mask, loss and gradient buffer, and the fixed workspace, so
 * the same numbers size the allocation (vt_net_init) and the plan (vt_memplan_build).
 * Per clip there are two regions: ACTIVATION elements (the [A] arrays of backend.h:
 * outputs, gradient slots, dlogits, and under BF16 a bf16 copy of the input clip), whose
 * size is cfg.precision's (2 bytes in BF16, else 4), and FLOAT32 values (dropout masks,
 * per-clip losses, and under BF16 a float32 copy of each head's logits).
 *
 * Nothing here allocates backend memory or calls an op: it must stay pure bookkeeping so
 * that planning a model that does not fit anywhere costs nothing.
 */
#ifndef VT_NET_GRAPH_H
#define VT_NET_GRAPH_H

#include <stdint.h>

#include "models/backend.h"
#include "models/net_types.h" /* not net.h: net.c runs this graph (no circle) */

typedef enum vt_node_kind {
    VT_NODE_CONV,
    VT_NODE_BN,
    VT_NODE_RELU,
    VT_NODE_MAXPOOL,
    VT_NODE_GAP,
    VT_NODE_LINEAR,
    VT_NODE_DROPOUT,
    VT_NODE_ADD,
    VT_NODE_AVGPOOL, /* a windowed average (count_include_pad), not the global one (GAP) */
    VT_NODE_CONCAT,  /* inputs side by side along channels, in[0] first (torch.cat dim 1) */
    VT_NODE_SILU,    /* x * sigmoid(x) (Swish); not in place: backward reads its input */
    VT_NODE_SIGMOID, /* in place (backward reads its output) */
    VT_NODE_CHSCALE, /* in[0] (C, T, H, W) times in[1] (C) per channel (SE's torch.mul) */
    VT_NODE_TGATHER, /* frames of the input clip picked along T (SlowFast's slow pathway:
                        vt_pack_pathway_frame); reads the clip only, needs no gradient */
    /* Transformer nodes (net_graph_vit.c builds them, net_vit.c runs them). Their outputs
     * are TOKEN sequences, (L, C) row-major per clip, recorded as c = C features, t = L
     * tokens, h = w = 1. */
    VT_NODE_TOKENS,  /* (C, T, H, W) feature map -> (L = T*H*W, C) tokens (flatten(2).T) */
    VT_NODE_POS,     /* tokens + the fixed sin-cos position table (VideoMAE's) */
    VT_NODE_LN,      /* LayerNorm over C, per token (rows of a (1, C) input too) */
    VT_NODE_GELU,    /* erf GELU, element-wise */
    VT_NODE_TLINEAR, /* a linear layer on every token: (L, I) -> (L, O) */
    VT_NODE_QKV,     /* VideoMAE's qkv: (L, C) -> (L, 3C) by qkv.weight, with q_bias and
                        v_bias and no k bias */
    VT_NODE_ATTN,    /* multi-head self-attention on (L, 3C) qkv -> (L, C) */
    VT_NODE_TMEAN,   /* the mean over tokens: (L, C) -> (C) */
    VT_NODE_DROPPATH,/* drop path: a clip's whole input x 0 or 1/(1-p) in training */
    /* MViT's nodes (net_graph_mvit.c builds them, net_mvit.c runs them): token sequences
     * whose row 0 is a class token and the rest a grid (vt_node.grid). */
    VT_NODE_CLSTOK,  /* the learned class token put before the tokens: L -> 1 + L (MViTv1:
                        plus learned absolute positions, temporal + spatial, and the class
                        token's own) */
    VT_NODE_MSA,     /* MViT's multiscale attention on qkv (L, 3C) -> (Lq, C): pooling of
                        q, k, v with their LayerNorms, relative positions, residual pooling
                        (torchvision's MultiscaleAttention without qkv and project) */
    VT_NODE_TMAXPOOL,/* max pooling of the grid, the class token kept (pool_skip) */
    VT_NODE_TFIRST,  /* the class token's row: (L, C) -> (1, C) */
} vt_node_kind;

/* Most inputs a node takes: add has 2, concat up to 4 (an Inception block's branches). */
#define VT_NODE_MAX_IN 4

/* How a node's backward delivers the gradient of one of its inputs. */
typedef enum vt_din_mode {
    VT_DIN_NONE,     /* the input clip: no gradient */
    VT_DIN_NEW,      /* first contribution: the op writes the input's gradient slot */
    VT_DIN_ACCUM,    /* later contribution: the op writes a temporary slot, then axpy */
    VT_DIN_TRANSFER, /* element-wise op in place: the input's gradient takes over dout's slot */
    VT_DIN_COPY,     /* add's skip input or a concat input, first contribution: copy dout
                        (concat: its channel slice of dout) */
    VT_DIN_AXPY,     /* the same, later contribution: add dout (or its slice) */
} vt_din_mode;

/* Parameter initialisation families (see vt_net_init_weights). */
typedef enum vt_init_style {
    VT_INIT_TORCHVISION, /* video resnets, tiny: kaiming_normal_ fan_out, linear N(0, 0.01) */
    VT_INIT_C3D,         /* the C3D port: kaiming_normal_ fan_in, PyTorch defaults elsewhere */
    VT_INIT_VIT,         /* VideoMAE's _init_weights: linear weights N(0, 0.02) (timm's
                            trunc_normal_, whose +-2 cut is 100 std away), the head's
                            scaled by init_scale 0.001, biases 0, LayerNorm 1 and 0; the
                            patch embedding's conv keeps PyTorch's default */
    VT_INIT_PYTORCH,     /* PyTorch module defaults everywhere (S3D has no init code): conv
                            and linear kaiming_uniform_(a=sqrt(5)), biases U(+-1/sqrt(fan_in)) */
    VT_INIT_PYVIDEO,     /* pytorchvideo's init_net_weights: as torchvision's, and the last BN
                            of every bottleneck (".norm_c") starts with weight 0 */
    VT_INIT_MVIT,        /* torchvision's MViT: linear weights, the class token and the
                            relative position tables N(0, 0.02) (trunc_normal_ cut at +-2,
                            100 std away), linear biases 0, LayerNorm 1 and 0; convs (the
                            patch embedding, the depthwise pools) PyTorch's default */
} vt_init_style;

/* What a tensor of the state dict is for. */
typedef enum vt_tensor_role {
    VT_ROLE_WEIGHT, VT_ROLE_BIAS, VT_ROLE_GAMMA, VT_ROLE_BETA,
    VT_ROLE_RUNNING_MEAN, VT_ROLE_RUNNING_VAR, VT_ROLE_NUM_BATCHES,
} vt_tensor_role;

typedef struct vt_node {
    vt_node_kind kind;
    char name[64];        /* module path, e.g. "layer1.0.conv1.0" */
    int in[VT_NODE_MAX_IN], nin; /* producer nodes; -1 = the input clip */
    int c, t, h, w;       /* output per clip */
    int ic, it, ih, iw;   /* in[0] per clip */
    vt_conv3d_p conv;
    vt_pool3d_p pool;     /* maxpool, avgpool */
    float bn_eps, bn_momentum; /* BN: PyTorch's eps and momentum (1e-5, 0.1 unless set) */
    int inplace;          /* output aliases in[0]'s activation (relu, add, dropout) */
    int nograd;           /* no gradient flows into it (tgather: made from the clip alone) */
    int head;             /* linear: head index; -1 for hidden layers */
    float drop_p;         /* dropout probability */
    int drop_index;       /* dropout: its ordinal among the graph's dropouts (mask seeds) */
    int wt, bt;           /* tensor indices: conv/linear weight, bias; BN gamma, beta */
    int rm, rv, nbt;      /* BN buffers */
    int64_t params;       /* trainable floats of this node */
    int heads;            /* attention: heads */
    int vt2;              /* qkv: v_bias tensor (q_bias is bt) */
    int grid[3];          /* MViT's nodes: the input's token grid (T, H, W) */
    int kgrid[3];         /* msa: the pooled k and v grid (q's is the output's, qgrid) */
    int qgrid[3];
    int mflags;           /* msa: VT_MSA_* */
    int mt[12];           /* msa: tensors rel_pos_h, _w, _t; pool_q, pool_k, pool_v weight,
                             LayerNorm weight, bias (-1: absent); clstok: spatial_pos,
                             temporal_pos, class_pos (-1: none) */
    int seg;              /* checkpoint segment: 1 + its index (vt_g_segment), 0 outside */
    int recomp;           /* plan, cfg.ckpt: inside its segment (not the output): its output
                             and masks live in the shared recompute region, remade in
                             backward (net_ckpt.c) */
    /* ---- the plan (vt_graph_plan) ---- */
    int64_t act_off;      /* per-clip element offset of the output in the activation region */
    int64_t mask_off;     /* dropout mask (layernorm: mean | invstd; attention: lse): per-clip
                             float offset in the float32 region */
    int64_t act_elems;    /* per-clip activation elements this node adds (0 if in place) */
    int64_t mask_floats;  /* per-clip float32 values this node adds (its dropout mask) */
    int64_t ws_off;       /* BN: mean (C) | invstd (C) | shift k (C) in the fixed workspace;
                             pos: its table (L x C) there; msa: vt_msa_rel */
    int64_t ws_floats;    /* msa: the floats of that (vt_msa_rel's total; its builder) */
    int gslot;            /* slot holding d(output) in backward; -2-h for head h's dlogits */
    vt_din_mode din[VT_NODE_MAX_IN];
    int tmp_slot;         /* VT_DIN_ACCUM: temporary slot */
} vt_node;

typedef struct vt_tensor_aux { int node; vt_tensor_role role; } vt_tensor_aux;

typedef struct vt_graph {
    vt_net_cfg cfg;
    vt_init_style init;
    vt_node *nodes;
    int nnodes, capnodes;
    vt_tensor_info *tensors;   /* state_dict order; names owned here */
    vt_tensor_aux *aux;
    int ntensors, captensors;
    int64_t nparams, nbuffers; /* floats in each arena */
    int feat;                  /* node whose output feeds the heads */
    int head_node[VT_MAX_HEADS];
    int failed;
    char err[256];
    /* ---- the plan, per clip (multiply by max_batch): activation elements (act) and
     *      float32 values (f32) ---- */
    int act_size;              /* bytes per activation element: 2 (BF16) or 4 */
    int nslots, capslots;
    int64_t *slot_size, *slot_off; /* gradient slots (act) */
    int *slot_busy;
    int64_t input_off;         /* act: bf16 copy of the input clip; -1 unless BF16 */
    int64_t dlogit_off[VT_MAX_HEADS]; /* act */
    int64_t loss_off[VT_MAX_HEADS];   /* f32 */
    int64_t logit_off[VT_MAX_HEADS];  /* f32: the logits as the loss reads them; -1 unless
                                         BF16 (then the head's output is that copy) */
    int64_t act_total;         /* act: outputs and the input copy */
    int64_t grad_total;        /* act: gradient slots */
    int64_t head_act, head_f32;/* dlogits (act); losses and logit copies (f32) */
    int64_t mask_total;        /* f32: dropout masks */
    int64_t clip_act, clip_f32;/* per-clip totals of the two regions */
    /* ---- the plan: fixed workspace floats ---- */
    int64_t ws_floats, scratch_off, one_off;
    /* ---- checkpoint segments (vt_g_segment) and, under cfg.ckpt, the shared region
     *      their insides use, per clip (act elements, f32 values; inside clip_act and
     *      clip_f32) ---- */
    int nsegs;
    int64_t recomp_act_off, recomp_act, recomp_f32_off, recomp_f32;
} vt_graph;

/* Builders: each returns the new node's index, or -1 once the graph has failed (the
 * first error is kept in g->err). k, s, p are (T, H, W). */
int vt_g_conv(vt_graph *g, const char *name, int in, int cout, const int k[3], const int s[3],
              const int p[3], int bias);
/* The same with groups (backend.h's vt_conv3d_p; cin and cout multiples of it). */
int vt_g_conv_groups(vt_graph *g, const char *name, int in, int cout, const int k[3],
                     const int s[3], const int p[3], int bias, int groups);
int vt_g_bn(vt_graph *g, const char *name, int in); /* eps 1e-5, momentum 0.1 */
int vt_g_bn_ex(vt_graph *g, const char *name, int in, float eps, float momentum);
int vt_g_relu(vt_graph *g, const char *name, int in);
int vt_g_maxpool(vt_graph *g, const char *name, int in, const int k[3], const int s[3],
                 const int p[3]);
int vt_g_avgpool(vt_graph *g, const char *name, int in, const int k[3], const int s[3],
                 const int p[3]);
int vt_g_gap(vt_graph *g, const char *name, int in);
int vt_g_linear(vt_graph *g, const char *name, int in, int out, int head);
int vt_g_dropout(vt_graph *g, const char *name, int in, float p, int inplace);
int vt_g_add(vt_graph *g, const char *name, int a, int b);
int vt_g_silu(vt_graph *g, const char *name, int in);
int vt_g_sigmoid(vt_graph *g, const char *name, int in);
/* x (C, T, H, W) scaled per channel by s, a node of C values (T = H = W = 1). */
int vt_g_chscale(vt_graph *g, const char *name, int x, int s);
/* Channels of in[0..nin-1] side by side (2 <= nin <= VT_NODE_MAX_IN; equal T, H, W). */
int vt_g_concat(vt_graph *g, const char *name, const int *in, int nin);
/* T/alpha frames of the input clip (in must be -1), chosen as pytorchvideo's PackPathway
 * chooses them: torch.linspace(0, T-1, T/alpha).long(). alpha must divide T. */
int vt_g_tgather(vt_graph *g, const char *name, int in, int alpha);
/* Frame k of the tout that PackPathway picks from t frames: torch.linspace(0, t-1,
 * tout)[k] truncated toward zero, computed in float32 as torch's CPU kernel does
 * (start + step*k in the first half, end - step*(tout-1-k) in the second). */
int vt_pack_pathway_frame(int t, int tout, int k);
/* A linear node whose state-dict weight is a 1x1x1 conv's, (out, in, 1, 1, 1): the same
 * floats as (out, in), which is how the linear op reads it (S3D's classifier.1). */
void vt_g_linear_as_conv1(vt_graph *g, int node);

/* The transformer builders (net_graph_vit.c). Token shapes as above; names as in the
 * state dict of the model's PyTorch twin. vt_g_tokens takes a conv's (C, T, H, W). */
int vt_g_tokens(vt_graph *g, const char *name, int in);
int vt_g_pos_sincos(vt_graph *g, const char *name, int in);
int vt_g_ln(vt_graph *g, const char *name, int in, float eps);
int vt_g_gelu(vt_graph *g, const char *name, int in);
int vt_g_tlinear(vt_graph *g, const char *name, int in, int out);
int vt_g_qkv(vt_graph *g, const char *name, int in); /* tensors NAME.qkv.weight, NAME.q_bias,
                                                        NAME.v_bias */
int vt_g_attn(vt_graph *g, const char *name, int in, int heads);
int vt_g_tmean(vt_graph *g, const char *name, int in);
int vt_g_droppath(vt_graph *g, const char *name, int in, float p);
/* MViT's builders (net_graph_mvit.c). thw: the grid of the input's tokens after its class
 * token. msa: in is the qkv linear's output (L, 3 * heads * head_dim); kq, sq: q's pool
 * kernel and stride (all 1: no pool_q), kkv, skv: k's and v's; rel_thw: NULL, or
 * MViTv2's relative position tables, stored with the lengths torchvision gives them for
 * the grid rel_thw (the block's input grid in the model as built, torchvision's
 * input_size: 2 max(S // sq, S // skv) - 1 for S = max(H, W), 2 T - 1) and interpolated
 * linearly at run time to the 2 max(q, k) - 1 rows this clip's pooled grids need
 * (torchvision's _interpolate; vt_msa_rel_of); residual: MViTv2's residual pooling. Its
 * output grid is q's, returned in out_thw. */
#define VT_MSA_POOLQ 1
#define VT_MSA_POOLKV 2
#define VT_MSA_REL 4
#define VT_MSA_RESIDUAL 8
/* clstok: abs_thw NULL: the class token alone (MViTv2); else MViTv1's learned positions
 * over that grid (tensors spatial_pos (H*W, C), temporal_pos (T, C), class_pos (C)). */
int vt_g_clstok(vt_graph *g, const char *name, int in, const int *abs_thw);
int vt_g_msa(vt_graph *g, const char *name, int in, int heads, const int thw[3],
             const int kq[3], const int sq[3], const int kkv[3], const int skv[3],
             const int *rel_thw, int residual, float eps, int out_thw[3]);
int vt_g_tmaxpool(vt_graph *g, const char *name, int in, const int thw[3], const int k[3],
                  const int s[3], const int p[3]);
int vt_g_tfirst(vt_graph *g, const char *name, int in);
/* An msa node's per-clip float32 region (the plan's mask region), offsets in floats from
 * its mask_off: for part x (0 q, 1 k, 2 v) of rows[x] = heads * (1 + its pooled grid)
 * rows of head_dim: pre[x] the pooled values before the LayerNorm, out[x] after it
 * (= pre[x] when the part is not pooled), st[x] the LayerNorm's mean | invstd (-1: none),
 * and the backward's dout[x] and dpre (the largest part); lse (heads * Lq). pre, out,
 * dout and dpre are [A] arrays of act_size bytes an element (BF16: half the floats,
 * rounded up to 16 bytes); st and lse are float. */
typedef struct vt_msa_layout {
    int64_t rows[3], pre[3], out[3], st[3], dout[3], dpre, lse, total;
} vt_msa_layout;
void vt_msa_layout_of(const vt_node *nd, int act_size, vt_msa_layout *l);
/* An msa node's relative tables k (0 rel_pos_h, 1 rel_pos_w, 2 rel_pos_t): stored[k] rows
 * (the tensor's), need[k] rows (this clip's grids); where they differ, the interpolation
 * lives in the fixed workspace from nd->ws_off: m[k] its (need x stored) matrix (PyTorch's
 * F.interpolate, mode linear, align_corners False), tab[k] the interpolated table
 * (need x head_dim), tabt[k] the stored table transposed, dtab[k] the interpolated
 * table's gradient (-1 each where no interpolation); total: the floats of all. */
typedef struct vt_msa_rel {
    int stored[3], need[3];
    int64_t m[3], tab[3], tabt[3], dtab[3], total;
} vt_msa_rel;
void vt_msa_rel_of(const vt_graph *g, const vt_node *nd, vt_msa_rel *r);
/* Row i of PyTorch's linear interpolation from `in` to `out` rows (align_corners False):
 * weight w0 on row *i0 and w1 on row *i1 (i1 = i0 at the end). */
void vt_interp_linear_row(int in, int out, int i, int *i0, int *i1, double *w0, double *w1);
/* That interpolation as an (out x in) float32 matrix, row-major (free()): vt_msa_rel's
 * m[k] (net_mvit.c puts it in the workspace, the ONNX export makes it a constant). */
float *vt_interp_linear_matrix(int in, int out);

/* Drop path's per-clip scale: 0 or 1/(1-p), from the clip's dropout seed (net.c: the
 * seed of the pass plus the clip's index in it) and the node's index among the graph's
 * drop paths: keep iff (hash64(hash64(seed) + 0x5D0000 + index) >> 40) / 2^24 >= p. */
float vt_drop_path_scale(uint64_t clip_seed, int index, float p);
/* For those builders: a new node fed by in (its shape copied), and a new tensor of it
 * (net_graph.c). */
int vt_g_node_new(vt_graph *g, vt_node_kind kind, const char *name, int in);
/* Fail the graph with "NAME: MSG" (the first error is kept); returns -1. */
int vt_g_node_fail(vt_graph *g, const char *name, const char *fmt, int a, int b);
int vt_g_tensor_new(vt_graph *g, int node, const char *suffix, vt_tensor_role role, int ndim,
                    const int64_t *shape, int is_buffer, int is_int64);
/* VideoMAE's get_sinusoid_encoding_table: tab (L x C) position p, feature j:
 * angle p / 10000^(2 (j/2) / C), sin for even j, cos for odd (host memory). */
void vt_sincos_table(float *tab, int L, int C);

/* Mark nodes first..last (forward order) as one checkpoint segment: a block whose only
 * input from before is in[...] of its nodes and whose only output read after it is
 * `last` (through the in-place chain `last` writes over). Under cfg.ckpt the plan keeps
 * only that output chain and recomputes the rest in backward (net_ckpt.c); its nodes
 * must be add or transformer kinds (vt_netv_forward runs them). */
void vt_g_segment(vt_graph *g, int first, int last);

/* Lay out activations, gradients and workspace of a built graph (zoo.h's vt_graph_make
 * builds and plans in one call). */
void vt_graph_plan(vt_graph *g);
void vt_graph_free(vt_graph *g);
/* Bytes per clip of the input clip and the targets (what the tower holds beside the net). */
int64_t vt_graph_io_bytes_per_clip(const vt_net_cfg *cfg);
/* Per-clip bytes of the two regions (what vt_net_init allocates, per clip). */
static inline int64_t vt_graph_clip_bytes(const vt_graph *g) {
    return g->clip_act * g->act_size + g->clip_f32 * (int64_t)sizeof(float);
}
/* Output elements per clip of a node. */
static inline int64_t vt_node_floats(const vt_node *nd) {
    return (int64_t)nd->c * nd->t * nd->h * nd->w;
}

/* The arenas of cfg.exact beside the gradients' accumulators (2 int64 a parameter),
 * defined in net_exact.c: floats of one clip's largest layer gradient (weight and bias)
 * or BN sums, and int64 of a BN layer's accumulators and count. */
int64_t vt_netx_xtmp_floats(const vt_graph *g);
int64_t vt_netx_xbn_i64(const vt_graph *g);

#endif
