/*
 * memplan.c: the memory plan of a model for a clip shape — what vt_net_init and
 * vt_optim_init will allocate, split into fixed bytes (parameters, gradients, buffers,
 * optimizer state, workspace — the net's own and the largest scratch one backend op
 * allocates while it runs) and bytes per clip (activations, dropout masks, gradient
 * slots, losses, plus the tower's input clip and targets) — and a Keras-like summary.
 * The numbers come from the same graph and layout (net_graph.c) that vt_net_init
 * allocates from, so the plan is the allocation, not an estimate of it. Under BF16 the
 * activation elements take 2 bytes (what the BF16 path stores in bf16 and what stays
 * float32 is listed in net_graph.h); the input clip and targets the tower stages stay
 * float32 (vt_graph_io_bytes_per_clip). With activation checkpointing (cfg.ckpt) a
 * checkpoint segment's insides — a transformer block's LayerNorm, qkv, attention output
 * and log-sum-exps, MLP hidden layer — are not kept per block but share one block-sized
 * region, remade in backward (net_ckpt.c); only each block's output stays.
 *
 * It must never allocate backend memory: the splitter plans devices that may not exist
 * on this machine.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/cpu/cpu_attn.h"
#include "models/cpu/cpu_conv.h"
#include "models/cuda/cuda_attn.h"
#include "models/net.h"
#include "models/net_graph.h"
#include "models/zoo.h"

static const char *node_kind_name(vt_node_kind k) {
    switch (k) {
    case VT_NODE_CONV: return "conv3d";
    case VT_NODE_BN: return "bn";
    case VT_NODE_RELU: return "relu";
    case VT_NODE_MAXPOOL: return "maxpool";
    case VT_NODE_GAP: return "avgpool";
    case VT_NODE_LINEAR: return "linear";
    case VT_NODE_DROPOUT: return "dropout";
    case VT_NODE_ADD: return "add";
    case VT_NODE_AVGPOOL: return "avgpool3d";
    case VT_NODE_CONCAT: return "concat";
    case VT_NODE_SILU: return "silu";
    case VT_NODE_SIGMOID: return "sigmoid";
    case VT_NODE_CHSCALE: return "chscale";
    case VT_NODE_TOKENS: return "tokens";
    case VT_NODE_POS: return "pos_sincos";
    case VT_NODE_LN: return "layernorm";
    case VT_NODE_GELU: return "gelu";
    case VT_NODE_TLINEAR: return "linear";
    case VT_NODE_QKV: return "qkv";
    case VT_NODE_ATTN: return "attention";
    case VT_NODE_TMEAN: return "mean";
    case VT_NODE_DROPPATH: return "drop_path";
    case VT_NODE_CLSTOK: return "class_token";
    case VT_NODE_MSA: return "mvit_attention";
    case VT_NODE_TMAXPOOL: return "token_maxpool";
    case VT_NODE_TFIRST: return "class_row";
    case VT_NODE_TGATHER: return "tgather";
    }
    return "?";
}

static vt_memplan_row *add_row(vt_memplan *mp, const char *name, const char *kind) {
    mp->rows = vt_realloc(mp->rows, (size_t)(mp->nrows + 1) * sizeof(*mp->rows));
    vt_memplan_row *r = &mp->rows[mp->nrows++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->kind, sizeof r->kind, "%s", kind);
    r->out[0] = r->out[1] = r->out[2] = r->out[3] = 1;
    return r;
}

int vt_memplan_build(vt_memplan *mp, const vt_net_cfg *cfg, int optim_floats_per_param,
                     char *err, size_t errlen) {
    memset(mp, 0, sizeof *mp);
    vt_graph g;
    if (vt_graph_make(&g, cfg, err, errlen) < 0)
        return -1;
    const int64_t fb = (int64_t)sizeof(float);
    vt_memplan_row *r = add_row(mp, "input", "input");
    r->out[0] = 3;
    r->out[1] = cfg->clip_t;
    r->out[2] = cfg->clip_h;
    r->out[3] = cfg->clip_w;
    r->act_bytes = vt_graph_io_bytes_per_clip(cfg); /* clip + targets */
    if (g.input_off >= 0) {
        r = add_row(mp, "(input, bf16 copy)", "input");
        r->out[0] = 3;
        r->out[1] = cfg->clip_t;
        r->out[2] = cfg->clip_h;
        r->out[3] = cfg->clip_w;
        r->act_bytes = (g.nodes[0].act_off - g.input_off) * g.act_size;
    }
    for (int i = 0; i < g.nnodes; i++) {
        const vt_node *nd = &g.nodes[i];
        r = add_row(mp, nd->name, node_kind_name(nd->kind));
        r->out[0] = nd->c;
        r->out[1] = nd->t;
        r->out[2] = nd->h;
        r->out[3] = nd->w;
        r->params = nd->params;
        /* checkpointing: the insides of a segment live in the shared region (below) */
        r->act_bytes = nd->recomp ? 0 : nd->act_elems * g.act_size + nd->mask_floats * fb;
    }
    if (g.recomp_act + g.recomp_f32 > 0) {
        r = add_row(mp, "(recompute region: one block)", "ckpt");
        r->act_bytes = g.recomp_act * g.act_size + g.recomp_f32 * fb;
    }
    r = add_row(mp, "(losses, dlogits)", "heads");
    r->act_bytes = g.head_act * g.act_size + g.head_f32 * fb;
    r = add_row(mp, "(gradient slots)", "grads");
    r->act_bytes = g.grad_total * g.act_size;
    mp->params = g.nparams;
    mp->param_bytes = g.nparams * fb;
    mp->grad_bytes = g.nparams * fb;
    mp->buffer_bytes = g.nbuffers * fb;
    mp->optim_bytes = (int64_t)optim_floats_per_param * g.nparams * fb;
    mp->optim_bytes += (int64_t)sizeof(vt_grad_gate); /* vt_optim_init's gradient gate */
    /* Backend scratch an op allocates for its own duration: ops run one at a time on a
     * backend, so the largest one counts. FP32/TF32: the cpu backend's conv tiles
     * (cpu_conv.h). BF16 (cpu-ref and cuda; the cpu backend has no BF16): the cuda
     * backend's bf16 staging of one layer's weights and of its weight gradient before
     * it is added to the float32 one, 2 x 2 bytes per weight of the largest conv or
     * linear layer (cuda_ctx.c, vt_cuda_stage_w16/dw16). Attention: the cpu backend's
     * per-thread head buffers (cpu_attn.h); the attention's saved log-sum-exps are in
     * the per-clip plan (net_graph.c). The cuda backend budgets its
     * cuDNN workspace from what is left (cuda_conv.c, ws_available). */
    for (int i = 0; i < g.nnodes; i++) {
        const vt_node *nd = &g.nodes[i];
        if (cfg->precision == VT_PREC_BF16) {
            if (nd->kind == VT_NODE_CONV || nd->kind == VT_NODE_LINEAR ||
                nd->kind == VT_NODE_TLINEAR || nd->kind == VT_NODE_QKV) /* tokens' too */
                mp->scratch_bytes = VT_MAX(mp->scratch_bytes, vt_memplan_bf16_stage_bytes(
                                                                  g.tensors[nd->wt].numel));
        } else if (nd->kind == VT_NODE_CONV) {
            const int in_thw[3] = {nd->it, nd->ih, nd->iw};
            mp->scratch_bytes = VT_MAX(mp->scratch_bytes, vt_cpu_conv_scratch_bound(in_thw, &nd->conv));
        } else if (nd->kind == VT_NODE_ATTN) { /* cpu_attn_fast.c's per-thread head */
            mp->scratch_bytes = VT_MAX(mp->scratch_bytes,
                                       vt_cpu_attn_scratch_bound(nd->t, nd->c / nd->heads));
        }
    }
    /* What the cuda backend needs beyond the arenas (vt_memplan_cuda_reserve, and the
     * tensor cap): the largest per-clip tensor an op sees — the input clip, every node's
     * output, a conv's input — and, under FP32/TF32, the float weights of the largest conv
     * (cuda_conv.c's scratch filter for a timed backward-filter search; BF16 searches into
     * its bf16 staging, counted above). */
    mp->max_tensor_elems = 3LL * cfg->clip_t * cfg->clip_h * cfg->clip_w;
    for (int i = 0; i < g.nnodes; i++) {
        const vt_node *nd = &g.nodes[i];
        mp->max_tensor_elems = VT_MAX(mp->max_tensor_elems, (int64_t)nd->c * nd->t * nd->h * nd->w);
        /* the cuda attention's two logits blocks: B = max(clips, heads) rows of them, cut
         * into query blocks of at most VT_CUDA_ATTN_BLOCK_BYTES (cuda_attn.h), so for
         * any clip count at most twice that (B L x 4 bytes alone passes it only past
         * 16 M / L clips a pass); MViT's attention the same (cuda_mvit.h; BF16: P and dS
         * in bf16 besides, 3 blocks' bytes) */
        if (nd->kind == VT_NODE_ATTN) /* BF16: 3 blocks' bytes and dK/dV sums (cuda_attn.h) */
            mp->cuda_attn_bytes = (cfg->precision == VT_PREC_BF16 ? 4 : 2) *
                                  VT_CUDA_ATTN_BLOCK_BYTES;
        const int64_t msa_blocks = (cfg->precision == VT_PREC_BF16 ? 3 : 2) *
                                   VT_CUDA_ATTN_BLOCK_BYTES;
        if (nd->kind == VT_NODE_MSA)
            mp->cuda_attn_bytes = VT_MAX(mp->cuda_attn_bytes, msa_blocks);
        /* cuda_mvit.c's "cuda scratch", grown per pass: the relative-position backward's
         * row sums (a float per head, query and key coordinate: heads (1 + Lq) (Kt+Kh+Kw)
         * a clip) ahead of its tables' double partials (at most 2^22 of them:
         * kernels_mvit.cu's vt_cuk_mvit_rel_parts), and token max-pool's backward's
         * argmax (an int per output value a clip). Not in the arenas: the plan missed
         * ~2 MiB a clip of mvit_v2_s at 16x224 and 32 MiB besides. BF16 adds there a
         * query block's float O or dQ and the float dK, dV sums: B = max(clips, heads)
         * members of at most Lq, Lk and Lk rows of head_dim, under 4 C (Lq + 2 Lk) bytes a
         * clip of the pass. */
        if (nd->kind == VT_NODE_MSA) {
            const int64_t lq = 1 + (int64_t)nd->qgrid[0] * nd->qgrid[1] * nd->qgrid[2];
            const int64_t lk = 1 + (int64_t)nd->kgrid[0] * nd->kgrid[1] * nd->kgrid[2];
            const int64_t kk = (int64_t)nd->kgrid[0] + nd->kgrid[1] + nd->kgrid[2];
            const int rel = !!(nd->mflags & VT_MSA_REL);
            const int64_t b16 = cfg->precision == VT_PREC_BF16 ? 4 * nd->c * (lq + 2 * lk) : 0;
            mp->cuda_clip_bytes = VT_MAX(mp->cuda_clip_bytes,
                                         (rel ? nd->heads * lq * kk * 4 : 0) + b16);
            if (rel)
                mp->cuda_attn_bytes = VT_MAX(mp->cuda_attn_bytes,
                                             msa_blocks + ((int64_t)8 << 22));
        }
        if (nd->kind == VT_NODE_TMAXPOOL)
            mp->cuda_clip_bytes = VT_MAX(mp->cuda_clip_bytes,
                                         (int64_t)nd->c * nd->t * nd->h * nd->w * 4);
        if (nd->kind == VT_NODE_CONV) {
            mp->max_tensor_elems = VT_MAX(mp->max_tensor_elems,
                                          (int64_t)nd->ic * nd->it * nd->ih * nd->iw);
            if (cfg->precision != VT_PREC_BF16)
                mp->search_filter_bytes = VT_MAX(mp->search_filter_bytes,
                                                 g.tensors[nd->wt].numel * fb);
        }
    }
    mp->workspace_bytes = g.ws_floats * fb + mp->scratch_bytes;
    if (cfg->exact) { /* net_exact.c: the gradients' accumulators, a clip's gradients */
        mp->grad_bytes += g.nparams * 16;
        mp->workspace_bytes += vt_netx_xtmp_floats(&g) * fb + vt_netx_xbn_i64(&g) * 8;
    }
    mp->fixed_bytes = mp->param_bytes + mp->grad_bytes + mp->buffer_bytes + mp->optim_bytes +
                      mp->workspace_bytes;
    mp->bytes_per_clip = vt_graph_clip_bytes(&g) + vt_graph_io_bytes_per_clip(cfg);
    mp->ckpt_segments = g.nsegs;
    vt_graph_free(&g);
    return 0;
}

void vt_memplan_print(const vt_memplan *mp, const vt_net_cfg *cfg, FILE *f) {
    char a[32], b[32];
    fprintf(f, "Model: %s, clip 3x%dx%dx%d, %d head%s, precision %s%s\n", cfg->model, cfg->clip_t,
            cfg->clip_h, cfg->clip_w, cfg->nheads, cfg->nheads == 1 ? "" : "s",
            vt_precision_name(cfg->precision),
            cfg->ckpt ? ", activation checkpointing (blocks recomputed in backward)" : "");
    /* the name column fits the longest name (pytorchvideo's run to 58 characters) */
    int wn = 28;
    for (int i = 0; i < mp->nrows; i++)
        wn = VT_MAX(wn, (int)strlen(mp->rows[i].name));
    char rule[160];
    memset(rule, '=', sizeof rule - 1);
    rule[VT_MIN(wn + 61, (int)sizeof rule - 1)] = 0;
    fprintf(f, "%-*s %-9s %-22s %12s %14s\n", wn, "Layer", "Kind", "Output (C,T,H,W)", "Params",
            "Bytes/clip");
    fprintf(f, "%s\n", rule);
    for (int i = 0; i < mp->nrows; i++) {
        const vt_memplan_row *r = &mp->rows[i];
        char shape[48];
        snprintf(shape, sizeof shape, "(%lld, %lld, %lld, %lld)", (long long)r->out[0],
                 (long long)r->out[1], (long long)r->out[2], (long long)r->out[3]);
        fprintf(f, "%-*s %-9s %-22s %12lld %14s\n", wn, r->name, r->kind,
                strcmp(r->kind, "heads") && strcmp(r->kind, "grads") && strcmp(r->kind, "ckpt") ? shape : "",
                (long long)r->params, r->act_bytes ? vt_fmt_bytes(a, sizeof a, r->act_bytes) : "-");
    }
    fprintf(f, "%s\n", rule);
    fprintf(f, "Total params: %lld (%s)\n", (long long)mp->params,
            vt_fmt_bytes(a, sizeof a, mp->param_bytes));
    fprintf(f, "Fixed bytes: %s (params %s, grads %s, buffers %s, optimizer %s, workspace %s "
               "incl. %s op scratch)\n",
            vt_fmt_bytes(a, sizeof a, mp->fixed_bytes), vt_fmt_bytes(b, sizeof b, mp->param_bytes),
            vt_fmt_bytes((char[32]){0}, 32, mp->grad_bytes),
            vt_fmt_bytes((char[32]){0}, 32, mp->buffer_bytes),
            vt_fmt_bytes((char[32]){0}, 32, mp->optim_bytes),
            vt_fmt_bytes((char[32]){0}, 32, mp->workspace_bytes),
            vt_fmt_bytes((char[32]){0}, 32, mp->scratch_bytes));
    fprintf(f, "Bytes per clip: %s\n", vt_fmt_bytes(a, sizeof a, mp->bytes_per_clip));
    static const int64_t budgets[] = {2LL << 30, 6LL << 30, 12LL << 30, 24LL << 30};
    fprintf(f, "Clips per pass:");
    for (size_t i = 0; i < VT_ARRAY_LEN(budgets); i++)
        fprintf(f, "%s %d in %s", i ? "," : "", vt_memplan_max_clips(mp, budgets[i]),
                vt_fmt_bytes(a, sizeof a, budgets[i]));
    fprintf(f, " (vt_memplan_max_clips for other budgets)\n");
    char c[48] = "";
    if (mp->cuda_clip_bytes) /* MViT's backward scratch (cuda_mvit.c) */
        snprintf(c, sizeof c, " and %s a clip",
                 vt_fmt_bytes((char[32]){0}, 32, mp->cuda_clip_bytes));
    fprintf(f, "CUDA towers: %s reserved besides (cuBLAS workspace, cuDNN workspace of up to "
               "%s, search scratch%s)%s, at most %d clips per pass (cuDNN's 2^31-element tensor "
               "limit; largest tensor %lld elements a clip)\n",
            vt_fmt_bytes(a, sizeof a, vt_memplan_cuda_reserve(mp)),
            vt_fmt_bytes(b, sizeof b, vt_memplan_cuda_ws_cap()),
            mp->cuda_attn_bytes ? ", attention's logits blocks" : "", c,
            vt_memplan_cudnn_clip_cap(mp), (long long)mp->max_tensor_elems);
}

void vt_memplan_free(vt_memplan *mp) {
    if (!mp)
        return;
    free(mp->rows);
    mp->rows = NULL;
    mp->nrows = 0;
}

int vt_memplan_max_clips(const vt_memplan *mp, int64_t budget) {
    if (budget < mp->fixed_bytes || mp->bytes_per_clip <= 0)
        return 0;
    int64_t n = (budget - mp->fixed_bytes) / mp->bytes_per_clip;
    return n > 1000000000 ? 1000000000 : (int)n;
}

/* ---- CUDA towers ---- */

/* cuDNN's legacy API refuses a tensor descriptor of more than 2 Giga-elements
 * (cudnnSetTensorNdDescriptor: CUDNN_STATUS_NOT_SUPPORTED); element counts are int. */
#define VT_CUDNN_MAX_ELEMS ((int64_t)INT32_MAX)

int64_t vt_memplan_cuda_ws_cap(void) {
    const char *s = getenv("VT_CUDA_WORKSPACE");
    int64_t v = s && *s ? vt_parse_bytes(s) : -1;
    return v >= 0 ? v : (int64_t)1 << 30; /* backend_cuda.h: the default limit */
}

/* The cuda backend allocates, through its budget but outside the arenas the plan sizes:
 * the cuBLAS workspace (32 MiB, cuBLAS's figure for Hopper and newer; 4 MiB before:
 * backend_cuda.c), the persistent cuDNN workspace — an algorithm may take up to the cap,
 * and ws_available (cuda_conv.c) offers only 15/16 of what is left, so 16/15 of the cap
 * leaves the whole cap usable — which a timed search also runs in (its temporary
 * workspace is the same room: the persistent one is grown only after the search frees
 * it), under FP32/TF32, the search's scratch filter, and for a transformer the
 * attention's logits blocks (cuda_attn.c, its own persistent scratch). Reserved, a tower
 * filled to its budget still gets the fast, large-workspace algorithms. */
int64_t vt_memplan_cuda_reserve(const vt_memplan *mp) {
    return ((int64_t)32 << 20) + vt_memplan_cuda_ws_cap() / 15 * 16 + mp->search_filter_bytes +
           mp->cuda_attn_bytes;
}

int vt_memplan_cudnn_clip_cap(const vt_memplan *mp) {
    if (mp->max_tensor_elems <= 0)
        return 1000000000;
    int64_t n = VT_CUDNN_MAX_ELEMS / mp->max_tensor_elems;
    return n > 1000000000 ? 1000000000 : (int)n;
}

int vt_memplan_max_clips_cuda(const vt_memplan *mp, int64_t budget) {
    int fits = 1000000000;
    if (budget > 0) {
        int64_t left = budget - vt_memplan_cuda_reserve(mp);
        vt_memplan m = *mp; /* the backend's per-clip scratch on top of the arenas' */
        m.bytes_per_clip += mp->cuda_clip_bytes;
        fits = left > 0 ? vt_memplan_max_clips(&m, left) : 0;
    }
    return VT_MIN(fits, vt_memplan_cudnn_clip_cap(mp));
}
