/*
 * zoo_x3d.c: the X3D family of the zoo — x3d_xs, x3d_s, x3d_m, x3d_l — as graphs with the
 * module names, shapes and order of pytorchvideo's create_x3d (models/x3d.py; hub/x3d.py
 * for the four members), so that its Kinetics-400 state dicts (model_state of the zoo's
 * .pyth files) load by name. Called by zoo.c's vt_graph_make (zoo.h).
 *
 * The architecture, read from pytorchvideo (our own code; tests/oracle/torch_x3d.py is its
 * PyTorch twin):
 *   blocks.0  stem: conv.conv_t (1,3,3) stride (1,2,2), 3 -> 24 — pytorchvideo names the
 *             SPATIAL conv conv_t and the temporal one conv_xy —, conv.conv_xy (5,1,1)
 *             depthwise (groups 24), norm (BN), activation (ReLU);
 *   blocks.1..4  stages of depth round_repeats({1,2,5,3}, depth factor) (XS/S/M 3,5,11,7;
 *             L 5,10,25,15), widths 24, 48, 96, 192 (round_width(12, 2) doubling), inner
 *             width int(2.25 * width) (54, 108, 216, 432). Block res_blocks.i: branch1_conv
 *             (1x1x1, the stage's stride (1,2,2)) and branch1_norm on the first block only
 *             (the width changes there); branch2 = conv_a 1x1x1, norm_a, act_a (ReLU),
 *             conv_b 3x3x3 depthwise (stride (1,2,2) in the first block, padding 1), norm_b.0
 *             (BN), norm_b.1 squeeze-excitation on blocks 0, 2, 4, ... (fvcore's
 *             SqueezeExcitation: the mean over T, H, W, block.0 1x1x1 conv with bias to
 *             round_width(inner, 1/16) channels, ReLU, block.2 back to inner with bias,
 *             sigmoid, times the input per channel), act_b (Swish = SiLU), conv_c 1x1x1,
 *             norm_c; the sum with the shortcut, then activation (ReLU);
 *   blocks.5  head: pool.pre_conv 1x1x1 192 -> 432, pool.pre_norm, pre_act (ReLU),
 *             pool.pool — AvgPool3d with the kernel (T, ceil(H/32), ceil(W/32)) stride 1,
 *             which is the whole feature map for every clip size, so the global average
 *             here —, pool.post_conv 1x1x1 432 -> 2048 without bias (on the 1x1x1 average),
 *             post_act (ReLU), dropout (cfg->dropout; pytorchvideo's default is 0.5),
 *             proj = Linear(2048, classes) — zoo.c adds it as head 0, "blocks.5.proj".
 * Every BN is PyTorch's default (eps 1e-5, momentum 0.1). Initialisation: pytorchvideo's
 * init_net_weights, which Net's constructor runs (models/weight_init.py; VT_INIT_PYVIDEO):
 * c2_msra_fill = kaiming_normal_ fan_out on every conv (the depthwise ones' fan_out is
 * C x 27, as torch counts it), biases 0 (the SE convs' too); BN weight 1 and bias 0 except
 * each bottleneck's norm_c: X3D's blocks are resnet.py's BottleneckBlock, which flags it
 * block_final_bn, so its weight starts at 0 and every residual block starts as the
 * identity; linear N(0, 0.01), bias 0. Any clip of at least 1x1x1 fits (strides are
 * spatial, padded).
 * Parameters with 400 classes: XS/S/M 3,794,274, L 6,153,384 (tests/test_zoo.c).
 *
 * This file only describes models: it must never allocate backend memory or run ops.
 */
#include "models/zoo.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define K3(a, b, c) ((const int[3]){a, b, c})

/* pytorchvideo's round_width(width, multiplier, min_width=8, divisor=8) (layers/utils.py),
 * in the same double arithmetic. */
static int x3d_round_width(int width, double mult) {
    double w = width * mult;
    int out = (int)(w + 4.0) / 8 * 8;
    if (out < 8)
        out = 8;
    if (out < 0.9 * w)
        out += 8;
    return out;
}

/* round_repeats: ceil(multiplier * repeats). */
static int x3d_round_repeats(int repeats, double mult) { return (int)ceil(mult * repeats); }

static int x3d_bn_relu(vt_graph *g, const char *bn, const char *relu, int x) {
    x = vt_g_bn(g, bn, x);
    return relu ? vt_g_relu(g, relu, x) : x;
}

/* fvcore's SqueezeExcitation(inner, reduced) under `pre` (…norm_b.1). */
static int x3d_se(vt_graph *g, const char *pre, int x, int inner) {
    char a[160]; /* pre is at most 127 characters */
    int reduced = x3d_round_width(inner, 0.0625);
    snprintf(a, sizeof a, "%s.mean", pre);
    int s = vt_g_gap(g, a, x);
    snprintf(a, sizeof a, "%s.block.0", pre);
    s = vt_g_conv(g, a, s, reduced, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0), 1);
    snprintf(a, sizeof a, "%s.block.1", pre);
    s = vt_g_relu(g, a, s);
    snprintf(a, sizeof a, "%s.block.2", pre);
    s = vt_g_conv(g, a, s, inner, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0), 1);
    snprintf(a, sizeof a, "%s.block.3", pre);
    s = vt_g_sigmoid(g, a, s);
    return vt_g_chscale(g, pre, x, s);
}

/* create_x3d_res_block: res_blocks.<idx> of a stage under `pre`. */
static int x3d_block(vt_graph *g, const char *pre, int x, int din, int inner, int dout,
                     int stride, int se) {
    char a[128], b[128];
    int skip = x;
    if (din != dout || stride > 1) {
        snprintf(a, sizeof a, "%s.branch1_conv", pre);
        skip = vt_g_conv(g, a, x, dout, K3(1, 1, 1), K3(1, stride, stride), K3(0, 0, 0), 0);
        if (din != dout) {
            snprintf(a, sizeof a, "%s.branch1_norm", pre);
            skip = vt_g_bn(g, a, skip);
        }
    }
    snprintf(a, sizeof a, "%s.branch2.conv_a", pre);
    int y = vt_g_conv(g, a, x, inner, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0), 0);
    snprintf(a, sizeof a, "%s.branch2.norm_a", pre);
    snprintf(b, sizeof b, "%s.branch2.act_a", pre);
    y = x3d_bn_relu(g, a, b, y);
    snprintf(a, sizeof a, "%s.branch2.conv_b", pre);
    y = vt_g_conv_groups(g, a, y, inner, K3(3, 3, 3), K3(1, stride, stride), K3(1, 1, 1), 0,
                         inner);
    snprintf(a, sizeof a, "%s.branch2.norm_b.0", pre);
    y = vt_g_bn(g, a, y);
    if (se) {
        snprintf(a, sizeof a, "%s.branch2.norm_b.1", pre);
        y = x3d_se(g, a, y, inner);
    }
    snprintf(a, sizeof a, "%s.branch2.act_b", pre);
    y = vt_g_silu(g, a, y);
    snprintf(a, sizeof a, "%s.branch2.conv_c", pre);
    y = vt_g_conv(g, a, y, dout, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0), 0);
    snprintf(a, sizeof a, "%s.branch2.norm_c", pre);
    y = vt_g_bn(g, a, y);
    snprintf(a, sizeof a, "%s.add", pre);
    y = vt_g_add(g, a, y, skip);
    snprintf(a, sizeof a, "%s.activation", pre);
    return vt_g_relu(g, a, y);
}

int vt_zoo_build_x3d(vt_graph *g, const char *model) {
    double depth;
    if (!strcmp(model, "x3d_xs") || !strcmp(model, "x3d_s") || !strcmp(model, "x3d_m"))
        depth = 2.2;
    else if (!strcmp(model, "x3d_l"))
        depth = 5.0;
    else
        return -2;
    const double width = 2.0, bottleneck = 2.25;
    const int stem_in = 12, stem_out = x3d_round_width(stem_in, width);
    int x = vt_g_conv(g, "blocks.0.conv.conv_t", -1, stem_out, K3(1, 3, 3), K3(1, 2, 2),
                      K3(0, 1, 1), 0);
    x = vt_g_conv_groups(g, "blocks.0.conv.conv_xy", x, stem_out, K3(5, 1, 1), K3(1, 1, 1),
                         K3(2, 0, 0), 0, stem_out);
    x = x3d_bn_relu(g, "blocks.0.norm", "blocks.0.activation", x);
    static const int depths[4] = {1, 2, 5, 3};
    int dim = stem_in, din = stem_out, inner = 0;
    for (int st = 0; st < 4; st++) {
        if (st > 0)
            dim = x3d_round_width(dim, 2.0);
        const int dout = x3d_round_width(dim, width);
        inner = (int)(bottleneck * dout);
        const int n = x3d_round_repeats(depths[st], depth);
        for (int i = 0; i < n; i++) {
            char pre[64];
            snprintf(pre, sizeof pre, "blocks.%d.res_blocks.%d", st + 1, i);
            x = x3d_block(g, pre, x, i == 0 ? din : dout, inner, dout, i == 0 ? 2 : 1,
                          (i + 1) % 2);
        }
        din = dout;
    }
    x = vt_g_conv(g, "blocks.5.pool.pre_conv", x, inner, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0),
                  0);
    x = x3d_bn_relu(g, "blocks.5.pool.pre_norm", "blocks.5.pool.pre_act", x);
    x = vt_g_gap(g, "blocks.5.pool.pool", x);
    x = vt_g_conv(g, "blocks.5.pool.post_conv", x, 2048, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0),
                  0);
    g->init = VT_INIT_PYVIDEO;
    return vt_g_relu(g, "blocks.5.pool.post_act", x);
}
