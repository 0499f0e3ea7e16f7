/*
 * zoo_mvit.c: MViTv2 and MViTv1 as graphs (zoo.h), with torchvision 0.14's state-dict names
 * (torchvision/models/video/mvit.py; docs/models.md):
 *   conv_proj           Conv3d(3, C0, (3, 7, 7), stride (2, 4, 4), padding (1, 3, 3)), the
 *                       tokens (flatten(2).transpose(1, 2)) of the grid T/2 x H/4 x W/4;
 *   pos_encoding        class_token (C0) put before them (MViTv2: no absolute positions);
 *   blocks.N            torchvision's MultiscaleBlock with residual_pool, rel_pos_embed and
 *                       proj_after_attn (mvit_v2_s's settings), LayerNorm eps 1e-6:
 *                         xn = norm1(x);
 *                         a = attn.project.0(attention(attn.qkv(xn)))  (net_graph_mvit.c:
 *                             pool_q/k/v conv + LayerNorm, rel_pos_h/w/t, residual q);
 *                         s = project(xn) when the width changes, else x; pool_skip
 *                             (MaxPool3d, kernel s+1 where the stride s > 1) when q is
 *                             strided;
 *                         x = s + a; x = x + mlp.3(GELU(mlp.0(norm2(x))));
 *                       with cfg->drop_path > 0 each branch of block b passes a drop path
 *                       of p = rate * b / (blocks - 1) (torchvision's StochasticDepth "row");
 *                       Each block is a checkpoint segment (vt_g_segment):
 *                       --checkpoint-act recomputes it in backward (net_ckpt.c).
 *   norm, then the class token's row; head.0 dropout and head.1 linear (zoo.c).
 *   mvit_v2_s: 16 blocks, 96 -> 768 channels (torchvision's table below).
 *   mvit_test: a TEST model (not in vt_zoo_names): 4 blocks of 16 -> 64 channels with
 *     every piece of mvit_v2_s (a 4x spatial kv pool, q strides with pool_skip and width
 *     changes, unpooled-stride k and v), for tests/test_zoo_mvit.c.
 *   mvit_v1_b: MViTv1-B (torchvision's mvit_v1_b: residual_pool, rel_pos_embed and
 *     proj_after_attn all off): learned absolute positions in pos_encoding (spatial_pos,
 *     temporal_pos, class_pos: torchvision's tables for T/2 x H/4 x W/4), no relative
 *     tables, no residual pooling, q pooled only where strided; the attention and the MLP's
 *     first layer keep the block's input width, and `project` (where the width changes)
 *     reads norm2's output: x = s + a; x = project(norm2(x)) or x, + mlp(norm2(x)).
 *   mvit_v1_test: its TEST model (4 blocks, 16 -> 64 channels, every piece of v1_b).
 * The relative position tables have the lengths torchvision gives them for the clip the
 * model is built for (mvit_v2_s: 16x224, mvit_test: 8x32; mvit_spec's nt x nhw) whatever
 * the clip, and any other clip (other frames, sizes, H != W) interpolates them at run
 * time as torchvision's _add_rel_pos does (net_mvit.c). BF16 on CUDA only, as the ViTs'
 * (net_vit.c refuses it on the CPU backends; docs/precision.md).
 * This file only describes models: it must never allocate backend memory or run ops.
 */
#include <stdio.h>
#include <string.h>

#include "models/zoo.h"

/* q's stride sq: 1 pools q with stride 1 (MViTv2's kernel_q everywhere), 0 leaves q
 * unpooled (MViTv1's empty kernel_q), 2 pools by (1, 2, 2) */
typedef struct mvit_block { int heads, cin, cout, sq, skv; } mvit_block;
/* nt x nhw: the clip torchvision builds the model for (mvit_v2_s: 16x224), which sizes
 * MViTv2's relative tables whatever the clip */
typedef struct mvit_spec {
    const char *name;
    int nblocks;
    const mvit_block *b;
    int v2, nt, nhw;
} mvit_spec;

/* torchvision's mvit_v2_s config: kernel_q = kernel_kv = 3x3x3 everywhere; the strides
 * are (1, s, s) */
static const mvit_block v2_s[] = {
    {1, 96, 96, 1, 8},     {2, 96, 192, 2, 4},    {2, 192, 192, 1, 4},   {4, 192, 384, 2, 2},
    {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},
    {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},
    {4, 384, 384, 1, 2},   {4, 384, 384, 1, 2},   {8, 384, 768, 2, 1},   {8, 768, 768, 1, 1},
};
static const mvit_block test_b[] = {
    {1, 16, 16, 1, 4}, {2, 16, 32, 2, 2}, {2, 32, 32, 1, 2}, {4, 32, 64, 2, 1},
};
/* torchvision's mvit_v1_b config: kernel_q 3x3x3 only where q is strided (blocks 1, 3,
 * 14), kernel_kv 3x3x3 everywhere */
static const mvit_block v1_b[] = {
    {1, 96, 192, 0, 8},    {2, 192, 192, 2, 4},   {2, 192, 384, 0, 4},   {4, 384, 384, 2, 2},
    {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},
    {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},   {4, 384, 384, 0, 2},
    {4, 384, 384, 0, 2},   {4, 384, 768, 0, 2},   {8, 768, 768, 2, 1},   {8, 768, 768, 0, 1},
};
static const mvit_block test_v1[] = {
    {1, 16, 32, 0, 4}, {2, 32, 32, 2, 2}, {2, 32, 64, 0, 2}, {4, 64, 64, 2, 1},
};
static const mvit_spec mvit_specs[] = {
    {"mvit_v2_s", 16, v2_s, 1, 16, 224},
    {"mvit_test", 4, test_b, 1, 8, 32},
    {"mvit_v1_b", 16, v1_b, 0, 16, 224},
    {"mvit_v1_test", 4, test_v1, 0, 8, 32},
};

static const mvit_spec *find(const char *model) {
    for (size_t i = 0; i < sizeof mvit_specs / sizeof *mvit_specs; i++)
        if (!strcmp(model, mvit_specs[i].name))
            return &mvit_specs[i];
    return NULL;
}

int vt_zoo_is_mvit(const char *model) { return find(model) != NULL; }

int vt_zoo_build_mvit(vt_graph *g, const vt_net_cfg *cfg) {
    const mvit_spec *sp = find(cfg->model);
    if (!sp)
        return vt_g_node_fail(g, cfg->model, "not an MViT of the zoo%.0d%.0d", 0, 0);
    if (!(cfg->drop_path >= 0 && cfg->drop_path < 1))
        return vt_g_node_fail(g, cfg->model, "drop path rate must be in [0, 1)%.0d%.0d", 0, 0);
    const float eps = 1e-6f; /* torchvision: partial(nn.LayerNorm, eps=1e-6) */
    int x = vt_g_conv(g, "conv_proj", -1, sp->b[0].cin, (const int[3]){3, 7, 7},
                      (const int[3]){2, 4, 4}, (const int[3]){1, 3, 3}, 1);
    if (x < 0)
        return -1;
    int thw[3] = {g->nodes[x].t, g->nodes[x].h, g->nodes[x].w};
    /* MViTv1's position tables are torchvision's for T/2 x H/4 x W/4 (size // stride) */
    if (!sp->v2 && (cfg->clip_t % 2 || cfg->clip_h % 4 || cfg->clip_w % 4))
        return vt_g_node_fail(g, cfg->model, "the clip's frames must be even and its height "
                              "and width multiples of 4 (MViTv1's position tables): %d frames, "
                              "height %d", cfg->clip_t, cfg->clip_h);
    /* torchvision's input_size: the built clip // conv_proj's stride, then // each
     * block's q stride (floor, where the pooled grid rounds up) */
    int nat[3] = {sp->nt / 2, sp->nhw / 4, sp->nhw / 4};
    x = vt_g_tokens(g, "conv_proj.tokens", x);
    x = vt_g_clstok(g, "pos_encoding", x, sp->v2 ? NULL : thw);
    const int k3[3] = {3, 3, 3}, k1[3] = {1, 1, 1};
    for (int b = 0; b < sp->nblocks; b++) {
        const mvit_block *bk = &sp->b[b];
        const float dp = sp->nblocks > 1 ? cfg->drop_path * (float)b / (float)(sp->nblocks - 1)
                                         : 0.0f;
        char p[48], nm[96];
#define NM(s) (snprintf(nm, sizeof nm, "%s.%s", p, s), nm)
        snprintf(p, sizeof p, "blocks.%d", b);
        const int qs = bk->sq > 1 ? bk->sq : 1;
        const int sq[3] = {1, qs, qs}, skv[3] = {1, bk->skv, bk->skv};
        /* MViTv2 projects after the attention (attn_dim = cout), MViTv1 after norm2 */
        const int ad = sp->v2 ? bk->cout : bk->cin;
        int nthw[3];
        int xn = vt_g_ln(g, NM("norm1"), x, eps);
        const int first = xn; /* the block: one checkpoint segment (cfg.ckpt) */
        int a = vt_g_tlinear(g, NM("attn.qkv"), xn, 3 * ad);
        a = vt_g_msa(g, NM("attn"), a, bk->heads, thw, bk->sq ? k3 : k1, sq, k3, skv,
                     sp->v2 ? nat : NULL, sp->v2, eps, nthw);
        a = vt_g_tlinear(g, NM("attn.project.0"), a, ad);
        int s = sp->v2 && bk->cin != bk->cout ? vt_g_tlinear(g, NM("project"), xn, bk->cout) : x;
        if (qs > 1) /* torchvision: kernel s + 1 where s > 1, padding kernel // 2 */
            s = vt_g_tmaxpool(g, NM("pool_skip"), s, thw, (const int[3]){1, qs + 1, qs + 1},
                              sq, (const int[3]){0, (qs + 1) / 2, (qs + 1) / 2});
        if (dp > 0)
            a = vt_g_droppath(g, NM("drop_path1"), a, dp);
        x = vt_g_add(g, NM("add1"), a, s); /* the branch first: add writes over in[0] */
        int h = vt_g_ln(g, NM("norm2"), x, eps);
        if (!sp->v2 && bk->cin != bk->cout)
            x = vt_g_tlinear(g, NM("project"), h, bk->cout);
        h = vt_g_tlinear(g, NM("mlp.0"), h, 4 * ad);
        h = vt_g_gelu(g, NM("mlp.1"), h);
        h = vt_g_tlinear(g, NM("mlp.3"), h, bk->cout);
        if (dp > 0)
            h = vt_g_droppath(g, NM("drop_path2"), h, dp);
        x = vt_g_add(g, NM("add2"), h, x);
        vt_g_segment(g, first, x);
        for (int d = 0; d < 3; d++) {
            thw[d] = nthw[d];
            nat[d] /= sq[d];
        }
#undef NM
    }
    x = vt_g_ln(g, "norm", x, eps);
    return vt_g_tfirst(g, "class_token_row", x);
}
