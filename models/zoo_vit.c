/*
 * zoo_vit.c: the VideoMAE vision transformers as graphs (zoo.h), with the VideoMAE /
 * VideoMAEv2 repositories' plain state-dict names (models/vit.py, modeling_finetune.py;
 * the Hugging Face names are mapped on load: docs/models.md):
 *   patch_embed.proj   Conv3d(3, dim, kernel = stride = (2, 16, 16)), then the tokens
 *                      (flatten(2).transpose(1, 2)) plus the fixed sin-cos table
 *                      (get_sinusoid_encoding_table over the L = T/2 * H/16 * W/16 tokens;
 *                      not in the state dict, rebuilt for any clip size);
 *   blocks.N           x = x + attn.proj(attention(attn.qkv(norm1(x)) + [q_bias|0|v_bias]));
 *                      x = x + mlp.fc2(GELU(mlp.fc1(norm2(x)))); LayerNorm eps 1e-6,
 *                      MLP ratio 4, no layer scale; with cfg->drop_path > 0 each
 *                      residual branch of block b passes a drop path (drop_path1,
 *                      drop_path2) of p = rate * b / (depth - 1);
 *   fc_norm            LayerNorm of the mean over tokens (use_mean_pooling), then head.
 *   Each block is a checkpoint segment (vt_g_segment): --checkpoint-act recomputes it.
 *   videomae_vit_s: dim 384, 6 heads; videomae_vit_b: dim 768, 12 heads; depth 12.
 *   vit_test: a TEST model (not in vt_zoo_names): dim 48, 2 heads, depth 2, the same
 *     names and pieces, for the PyTorch comparison in tests/test_zoo_vit.c.
 * BF16 runs on the cuda backend only (its transformer ops have the bf16 path,
 * docs/precision.md); net_vit.c refuses it on the CPU backends, whose are FP32.
 * This file only describes models: it must never allocate backend memory or run ops.
 */
#include <stdio.h>
#include <string.h>

#include "models/zoo.h"

typedef struct vit_spec { const char *name; int dim, depth, heads; } vit_spec;
static const vit_spec vit_specs[] = {
    {"videomae_vit_s", 384, 12, 6},
    {"videomae_vit_b", 768, 12, 12},
    {"vit_test", 48, 2, 2},
};

int vt_zoo_is_vit(const char *model) {
    for (size_t i = 0; i < sizeof vit_specs / sizeof *vit_specs; i++)
        if (!strcmp(model, vit_specs[i].name))
            return 1;
    return 0;
}

int vt_zoo_vit_depth(const char *model) {
    for (size_t i = 0; i < sizeof vit_specs / sizeof *vit_specs; i++)
        if (!strcmp(model, vit_specs[i].name))
            return vit_specs[i].depth;
    return 0;
}

int vt_zoo_build_vit(vt_graph *g, const vt_net_cfg *cfg) {
    const vit_spec *sp = NULL;
    for (size_t i = 0; i < sizeof vit_specs / sizeof *vit_specs; i++)
        if (!strcmp(cfg->model, vit_specs[i].name))
            sp = &vit_specs[i];
    if (!sp)
        return vt_g_node_fail(g, cfg->model, "not a transformer of the zoo%.0d%.0d", 0, 0);
    if (cfg->clip_t % 2 || cfg->clip_h % 16 || cfg->clip_w % 16)
        return vt_g_node_fail(g, cfg->model, "the clip's frames must be even and its height "
                              "and width multiples of 16 (tubelets of 2x16x16): %d frames, "
                              "height %d", cfg->clip_t, cfg->clip_h);
    const float eps = 1e-6f; /* VideoMAE's partial(nn.LayerNorm, eps=1e-6) */
    const int d = sp->dim;
    if (!(cfg->drop_path >= 0 && cfg->drop_path < 1))
        return vt_g_node_fail(g, cfg->model, "drop path rate must be in [0, 1)%.0d%.0d", 0, 0);
    float dp[64] = {0}; /* VideoMAE: torch.linspace(0, drop_path_rate, depth) */
    for (int b = 0; b < sp->depth && b < 64; b++)
        dp[b] = sp->depth > 1 ? (float)((double)cfg->drop_path * b / (sp->depth - 1)) : 0.0f;
    int x = vt_g_conv(g, "patch_embed.proj", -1, d, (const int[3]){2, 16, 16},
                      (const int[3]){2, 16, 16}, (const int[3]){0, 0, 0}, 1);
    x = vt_g_tokens(g, "patch_embed", x);
    x = vt_g_pos_sincos(g, "pos_embed", x);
    for (int b = 0; b < sp->depth; b++) {
        char p[48], nm[96];
#define NM(s) (snprintf(nm, sizeof nm, "%s.%s", p, s), nm)
        snprintf(p, sizeof p, "blocks.%d", b);
        int h = vt_g_ln(g, NM("norm1"), x, eps);
        const int first = h; /* the block: one checkpoint segment (cfg.ckpt) */
        h = vt_g_qkv(g, NM("attn"), h);
        h = vt_g_attn(g, NM("attn.softmax"), h, sp->heads);
        h = vt_g_tlinear(g, NM("attn.proj"), h, d);
        if (dp[b] > 0)
            h = vt_g_droppath(g, NM("drop_path1"), h, dp[b]);
        x = vt_g_add(g, NM("add1"), h, x); /* the branch first: add writes over in[0] */
        h = vt_g_ln(g, NM("norm2"), x, eps);
        h = vt_g_tlinear(g, NM("mlp.fc1"), h, 4 * d);
        h = vt_g_gelu(g, NM("mlp.act"), h);
        h = vt_g_tlinear(g, NM("mlp.fc2"), h, d);
        if (dp[b] > 0)
            h = vt_g_droppath(g, NM("drop_path2"), h, dp[b]);
        x = vt_g_add(g, NM("add2"), h, x);
        vt_g_segment(g, first, x);
#undef NM
    }
    x = vt_g_tmean(g, "mean", x);
    return vt_g_ln(g, "fc_norm", x, eps);
}
