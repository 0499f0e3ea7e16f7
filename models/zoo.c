/*
 * zoo.c: the model zoo as graphs — tiny, tiny_nobn, c3d, r3d18, mc3_18, r2plus1d18, s3d, and
 * pytorchvideo's slow_r50, slowfast_r50, i3d_r50, r2plus1d_r50, csn_r101 (zoo_pv.c) and the
 * X3D family
 * (zoo_x3d.c) —
 * with the module names, shapes and order of their PyTorch twins, so that state dicts
 * move both ways by name:
 *   r3d18, mc3_18, r2plus1d18: torchvision.models.video.{r3d_18, mc3_18, r2plus1d_18}
 *     (BasicStem / R2Plus1dStem, Conv3DSimple / Conv3DNoTemporal / Conv2Plus1D, BasicBlock
 *     [2,2,2,2], AdaptiveAvgPool3d(1), fc); the (2+1)D midplanes are computed once per
 *     block from (inplanes, planes) and used by both of its convs, as torchvision does;
 *   c3d: the common PyTorch C3D port (conv1, pool1 (1,2,2), conv2, pool2, conv3a/b, pool3,
 *     conv4a/b, pool4, conv5a/b, pool5 (2,2,2) padding (0,1,1), fc6, fc7, fc8; ReLU after
 *     every conv and fc6/fc7, dropout after fc6 and fc7), fc6's input from the clip shape;
 *   x3d_xs, x3d_s, x3d_m, x3d_l: pytorchvideo's X3D, built by zoo_x3d.c;
 *   s3d: torchvision.models.video.s3d (features: TemporalSeparableConv = Conv3dNormActivation
 *     (1,k,k) then (k,1,1); SepInceptionBlock3D = four branches concatenated along
 *     channels, branch3 a 3x3x3 max pool (stride 1, padding 1) then a 1x1x1 conv; max
 *     pools; BatchNorm3d eps 0.001 and momentum 0.001; avgpool (2,7,7) stride 1;
 *     classifier Dropout + Conv3d(1024, classes, 1) then the mean over (T, H, W)). No init
 *     code of its own, so PyTorch's module defaults (VT_INIT_PYTORCH). The classifier's
 *     1x1x1 conv followed by the mean is a linear layer on the mean of the avgpool's
 *     output, so here it is avgpool, "mean" (global average), dropout ("classifier.0"),
 *     linear "classifier.1" whose weight keeps the conv's state-dict shape (classes, 1024,
 *     1, 1, 1). The dropout therefore acts AFTER the mean, on 1024 features, where
 *     torchvision's acts element-wise before the conv: the same eval output (and the same
 *     expectation in training), different training masks. Its p is cfg->dropout as for
 *     the other models (torchvision's default is 0.2). Clips need T >= 13 and H, W >= 209
 *     (s3d_min_clip); torchvision's Kinetics weights take 16 frames resized to 256, 224
 *     crops. About 8.3M parameters (8,320,048 with 400 classes);
 *   s3d_block: a TEST model, not in vt_zoo_names (tests/test_zoo_s3d.c): a 1x1x1 stem and
 *     two small SepInceptionBlock3D (s3d's builders and names, channels of a few), an
 *     avgpool (2,3,3) stride 1, the mean and "fc": the concat node's gradients against
 *     PyTorch on cpu-ref in a fraction of a second, independent of S3D's size;
 *   tiny: ours (tests/oracle/torch_zoo.py holds its twin): conv1 3->16 k3 + bn1 + relu +
 *     pool1 (1,2,2), conv2 16->32 + bn2 + relu + pool2 (2,2,2), conv3 32->64 + bn3 + relu +
 *     pool3 (2,2,2), conv4 64->128 + bn4 + relu, avgpool (global), fc. About 293k
 *     parameters; clips need T >= 4 and H, W >= 8 (three halvings of H and W, two of T).
 *   tiny_nobn: a TEST AND TEACHING model, ours too (its twin: Tiny(bn=False)): tiny without
 *     batch norm — conv1/conv2/conv3 carry a bias instead of a BN layer, same names
 *     otherwise (conv1, relu1, pool1, ..., conv4, relu4, avgpool, fc; no bn*). Without BN a clip's
 *     gradient depends on that clip alone, so any split and any micro-batch size give
 *     the one-device result (docs/design.md §3.1, without sync-BN); tests/test_towers.c
 *     relies on that. Not meant to train well: tiny is the small model to use.
 *   videomae_vit_s, videomae_vit_b (and the test model vit_test): zoo_vit.c.
 *   mvit_v2_s, mvit_v1_b (and the test models mvit_test, mvit_v1_test): zoo_mvit.c.
 * Heads: head 0 is the twin's classifier ("fc", or "fc8" for c3d); head h >= 1 is
 * "heads.<h>" (heads.1.weight, heads.1.bias, ...), a linear layer on the same features.
 * cfg->dropout > 0 puts one dropout ("dropout") on the features before every head
 * (resnets, tiny, tiny_nobn); for c3d it is the port's p of the dropouts after fc6 and fc7.
 *
 * vt_graph_make (zoo.h) is the entry: build here, then plan (net_graph.c), so net.c and
 * memplan.c get a graph from one call and net_graph.c never calls back into the zoo.
 *
 * This file only describes models: it must never allocate backend memory or run ops.
 */
#include "models/zoo.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "models/zoo_pv.h"

const char *const vt_zoo_names[] = {"tiny", "tiny_nobn", "c3d", "r3d18", "mc3_18", "r2plus1d18",
                                    "s3d", "x3d_xs", "x3d_s", "x3d_m", "x3d_l", "slow_r50",
                                    "slowfast_r50", "i3d_r50", "videomae_vit_s", "videomae_vit_b",
                                    "r2plus1d_r50", "csn_r101", "mvit_v2_s",
                                    "mvit_v1_b", NULL};

const char *vt_zoo_input_norm(const char *model) {
    /* torchvision's MViT weights were ported from pytorchvideo's SlowFast and keep its
     * 0.45/0.225 (their Weights' transforms say so), unlike torchvision's own R(2+1)D */
    static const char *const pv[] = {"x3d_xs", "x3d_s", "x3d_m", "x3d_l", "slow_r50",
                                     "slowfast_r50", "i3d_r50", "r2plus1d_r50", "csn_r101",
                                     "mvit_v2_s", "mvit_v1_b"};
    if (vt_zoo_is_vit(model))
        return "imagenet";
    for (size_t i = 0; i < VT_ARRAY_LEN(pv); i++)
        if (!strcmp(model, pv[i]))
            return "pytorchvideo";
    return "kinetics";
}

#define K3(a, b, c) ((const int[3]){a, b, c})

static int conv_bn_relu(vt_graph *g, const char *conv, const char *bn, const char *relu, int in,
                        int cout, const int k[3], const int s[3], const int p[3]) {
    int x = vt_g_conv(g, conv, in, cout, k, s, p, 0);
    x = vt_g_bn(g, bn, x);
    return vt_g_relu(g, relu, x);
}

/* One 3x3x3 conv + relu of tiny: with batch norm (bn = "bn1", ...; the conv has no bias,
 * as before any BN) or, bn == NULL, with a conv bias instead (tiny_nobn). */
static int tiny_stage(vt_graph *g, const char *conv, const char *bn, const char *relu, int in,
                      int cout) {
    if (bn)
        return conv_bn_relu(g, conv, bn, relu, in, cout, K3(3, 3, 3), K3(1, 1, 1), K3(1, 1, 1));
    int x = vt_g_conv(g, conv, in, cout, K3(3, 3, 3), K3(1, 1, 1), K3(1, 1, 1), 1);
    return vt_g_relu(g, relu, x);
}

static int build_tiny(vt_graph *g, int bn) {
    int x = tiny_stage(g, "conv1", bn ? "bn1" : NULL, "relu1", -1, 16);
    x = vt_g_maxpool(g, "pool1", x, K3(1, 2, 2), K3(1, 2, 2), K3(0, 0, 0));
    x = tiny_stage(g, "conv2", bn ? "bn2" : NULL, "relu2", x, 32);
    x = vt_g_maxpool(g, "pool2", x, K3(2, 2, 2), K3(2, 2, 2), K3(0, 0, 0));
    x = tiny_stage(g, "conv3", bn ? "bn3" : NULL, "relu3", x, 64);
    x = vt_g_maxpool(g, "pool3", x, K3(2, 2, 2), K3(2, 2, 2), K3(0, 0, 0));
    x = tiny_stage(g, "conv4", bn ? "bn4" : NULL, "relu4", x, 128);
    return vt_g_gap(g, "avgpool", x);
}

static int build_c3d(vt_graph *g, float dropout) {
    static const struct { const char *name; int cout; int pool; } convs[] = {
        {"conv1", 64, 1}, {"conv2", 128, 2}, {"conv3a", 256, 0}, {"conv3b", 256, 3},
        {"conv4a", 512, 0}, {"conv4b", 512, 4}, {"conv5a", 512, 0}, {"conv5b", 512, 5},
    };
    int x = -1;
    char name[64];
    for (size_t i = 0; i < VT_ARRAY_LEN(convs); i++) {
        x = vt_g_conv(g, convs[i].name, x, convs[i].cout, K3(3, 3, 3), K3(1, 1, 1), K3(1, 1, 1),
                      1);
        snprintf(name, sizeof name, "relu.%s", convs[i].name);
        x = vt_g_relu(g, name, x);
        if (convs[i].pool) {
            snprintf(name, sizeof name, "pool%d", convs[i].pool);
            if (convs[i].pool == 1)
                x = vt_g_maxpool(g, name, x, K3(1, 2, 2), K3(1, 2, 2), K3(0, 0, 0));
            else if (convs[i].pool == 5)
                x = vt_g_maxpool(g, name, x, K3(2, 2, 2), K3(2, 2, 2), K3(0, 1, 1));
            else
                x = vt_g_maxpool(g, name, x, K3(2, 2, 2), K3(2, 2, 2), K3(0, 0, 0));
        }
    }
    x = vt_g_linear(g, "fc6", x, 4096, -1);
    x = vt_g_relu(g, "relu.fc6", x);
    if (dropout > 0)
        x = vt_g_dropout(g, "dropout.fc6", x, dropout, 0);
    x = vt_g_linear(g, "fc7", x, 4096, -1);
    x = vt_g_relu(g, "relu.fc7", x);
    /* Not in place: relu's backward reads its output, which in-place dropout would scale. */
    if (dropout > 0)
        x = vt_g_dropout(g, "dropout.fc7", x, dropout, 0);
    return x;
}

typedef enum { CONV_SIMPLE, CONV_NOTEMPORAL, CONV_2PLUS1D } conv_maker;

/* conv_builder(inplanes, planes, midplanes, stride) under module path `base`; the
 * Sequential index of what follows it is the caller's. */
static int conv_builder(vt_graph *g, conv_maker m, const char *base, int in, int planes, int mid,
                        int s) {
    char n0[96], n1[96], n2[96], n3[96];
    switch (m) {
    case CONV_SIMPLE:
        return vt_g_conv(g, base, in, planes, K3(3, 3, 3), K3(s, s, s), K3(1, 1, 1), 0);
    case CONV_NOTEMPORAL:
        return vt_g_conv(g, base, in, planes, K3(1, 3, 3), K3(1, s, s), K3(0, 1, 1), 0);
    case CONV_2PLUS1D:
        snprintf(n0, sizeof n0, "%s.0", base);
        snprintf(n1, sizeof n1, "%s.1", base);
        snprintf(n2, sizeof n2, "%s.2", base);
        snprintf(n3, sizeof n3, "%s.3", base);
        in = vt_g_conv(g, n0, in, mid, K3(1, 3, 3), K3(1, s, s), K3(0, 1, 1), 0);
        in = vt_g_bn(g, n1, in);
        in = vt_g_relu(g, n2, in);
        return vt_g_conv(g, n3, in, planes, K3(3, 1, 1), K3(s, 1, 1), K3(1, 0, 0), 0);
    }
    return -1;
}

static int basic_block(vt_graph *g, conv_maker m, const char *pre, int x, int inplanes,
                       int planes, int stride) {
    int mid = (inplanes * planes * 3 * 3 * 3) / (inplanes * 3 * 3 + 3 * planes);
    char a[96], b[96], c[96];
    snprintf(a, sizeof a, "%s.conv1.0", pre);
    snprintf(b, sizeof b, "%s.conv1.1", pre);
    snprintf(c, sizeof c, "%s.conv1.2", pre);
    int y = conv_builder(g, m, a, x, planes, mid, stride);
    y = vt_g_bn(g, b, y);
    y = vt_g_relu(g, c, y);
    snprintf(a, sizeof a, "%s.conv2.0", pre);
    snprintf(b, sizeof b, "%s.conv2.1", pre);
    y = conv_builder(g, m, a, y, planes, mid, 1);
    y = vt_g_bn(g, b, y);
    int skip = x;
    if (stride != 1 || inplanes != planes) {
        int ds = m == CONV_NOTEMPORAL ? 1 : stride;
        snprintf(a, sizeof a, "%s.downsample.0", pre);
        snprintf(b, sizeof b, "%s.downsample.1", pre);
        skip = vt_g_conv(g, a, x, planes, K3(1, 1, 1), K3(ds, stride, stride), K3(0, 0, 0), 0);
        skip = vt_g_bn(g, b, skip);
    }
    snprintf(a, sizeof a, "%s.add", pre);
    snprintf(b, sizeof b, "%s.relu", pre);
    y = vt_g_add(g, a, y, skip);
    return vt_g_relu(g, b, y);
}

static int build_resnet(vt_graph *g, const conv_maker makers[4], int r2plus1d) {
    int x;
    if (r2plus1d) {
        x = conv_bn_relu(g, "stem.0", "stem.1", "stem.2", -1, 45, K3(1, 7, 7), K3(1, 2, 2),
                         K3(0, 3, 3));
        x = conv_bn_relu(g, "stem.3", "stem.4", "stem.5", x, 64, K3(3, 1, 1), K3(1, 1, 1),
                         K3(1, 0, 0));
    } else {
        x = conv_bn_relu(g, "stem.0", "stem.1", "stem.2", -1, 64, K3(3, 7, 7), K3(1, 2, 2),
                         K3(1, 3, 3));
    }
    int inplanes = 64;
    static const int planes[4] = {64, 128, 256, 512};
    for (int l = 0; l < 4; l++) {
        int stride = l == 0 ? 1 : 2;
        for (int b = 0; b < 2; b++) {
            char pre[32];
            snprintf(pre, sizeof pre, "layer%d.%d", l + 1, b);
            x = basic_block(g, makers[l], pre, x, inplanes, planes[l], b == 0 ? stride : 1);
            inplanes = planes[l];
        }
    }
    return vt_g_gap(g, "avgpool", x);
}

/* ---- s3d ---- */

/* torchvision's Conv3dNormActivation under module path `pre`: conv (pre.0, no bias), S3D's
 * BatchNorm3d(eps=0.001, momentum=0.001) (pre.1), ReLU (pre.2). */
static int s3d_cna(vt_graph *g, const char *pre, int in, int cout, const int k[3],
                   const int s[3], const int p[3]) {
    char a[96], b[96], c[96];
    snprintf(a, sizeof a, "%s.0", pre);
    snprintf(b, sizeof b, "%s.1", pre);
    snprintf(c, sizeof c, "%s.2", pre);
    int x = vt_g_conv(g, a, in, cout, k, s, p, 0);
    x = vt_g_bn_ex(g, b, x, 1e-3f, 1e-3f);
    return vt_g_relu(g, c, x);
}

static int s3d_pointwise(vt_graph *g, const char *pre, int in, int cout) {
    return s3d_cna(g, pre, in, cout, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0));
}

/* TemporalSeparableConv(k, s, p): (1,k,k) stride (1,s,s) at pre.0, then (k,1,1) stride
 * (s,1,1) at pre.1. */
static int s3d_sep(vt_graph *g, const char *pre, int in, int cout, int k, int s, int p) {
    char a[96];
    snprintf(a, sizeof a, "%s.0", pre);
    int x = s3d_cna(g, a, in, cout, K3(1, k, k), K3(1, s, s), K3(0, p, p));
    snprintf(a, sizeof a, "%s.1", pre);
    return s3d_cna(g, a, x, cout, K3(k, 1, 1), K3(s, 1, 1), K3(p, 0, 0));
}

/* SepInceptionBlock3D(in, b0_out, b1_mid, b1_out, b2_mid, b2_out, b3_out) = w[0..5]: the
 * concat node carries the block's own name. */
static int s3d_block(vt_graph *g, const char *pre, int x, const int w[6]) {
    char a[96];
    int br[4];
    snprintf(a, sizeof a, "%s.branch0", pre);
    br[0] = s3d_pointwise(g, a, x, w[0]);
    for (int b = 1; b <= 2; b++) {
        snprintf(a, sizeof a, "%s.branch%d.0", pre, b);
        br[b] = s3d_pointwise(g, a, x, w[2 * b - 1]);
        snprintf(a, sizeof a, "%s.branch%d.1", pre, b);
        br[b] = s3d_sep(g, a, br[b], w[2 * b], 3, 1, 1);
    }
    snprintf(a, sizeof a, "%s.branch3.0", pre);
    br[3] = vt_g_maxpool(g, a, x, K3(3, 3, 3), K3(1, 1, 1), K3(1, 1, 1));
    snprintf(a, sizeof a, "%s.branch3.1", pre);
    br[3] = s3d_pointwise(g, a, br[3], w[5]);
    return vt_g_concat(g, pre, br, 4);
}

/* The smallest clip S3D takes: the avgpool's (2,7,7) window needs features of 2x7x7. T
 * halves twice (the stem's stride-2 (7,1,1) conv, features.7) and then floors to half
 * (features.13); H and W halve four times ((n-1)/2+1: the stem, features.1, .4, .7) and
 * floor to half once (.13). Smallest T: 13 (13 -> 7 -> 4 -> 2); H, W: 209 (209 -> 105
 * -> 53 -> 27 -> 14 -> 7), the sizes torchvision accepts (12 and 208 fail there too). */
static int s3d_min_clip(vt_graph *g, const vt_net_cfg *cfg) {
    int t = cfg->clip_t, hw[2] = {cfg->clip_h, cfg->clip_w};
    for (int i = 0; i < 2; i++)
        t = (t - 1) / 2 + 1;
    t /= 2;
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < 4; i++)
            hw[d] = (hw[d] - 1) / 2 + 1;
        hw[d] /= 2;
    }
    if (t >= 2 && hw[0] >= 7 && hw[1] >= 7)
        return 0;
    g->failed = 1;
    snprintf(g->err, sizeof g->err, "s3d needs clips of at least 13x209x209 (T x H x W: its "
             "avgpool takes 2x7x7 features, this clip gives %dx%dx%d); torchvision's Kinetics "
             "weights use 16x224x224", t, hw[0], hw[1]);
    return -1;
}

static int build_s3d(vt_graph *g) {
    static const int blocks[][7] = { /* features index, then SepInceptionBlock3D's widths */
        {5, 64, 96, 128, 16, 32, 32},     {6, 128, 128, 192, 32, 96, 64},
        {8, 192, 96, 208, 16, 48, 64},    {9, 160, 112, 224, 24, 64, 64},
        {10, 128, 128, 256, 24, 64, 64},  {11, 112, 144, 288, 32, 64, 64},
        {12, 256, 160, 320, 32, 128, 128}, {14, 256, 160, 320, 32, 128, 128},
        {15, 384, 192, 384, 48, 128, 128},
    };
    if (s3d_min_clip(g, &g->cfg) < 0)
        return -1;
    int x = s3d_sep(g, "features.0", -1, 64, 7, 2, 3);
    x = vt_g_maxpool(g, "features.1", x, K3(1, 3, 3), K3(1, 2, 2), K3(0, 1, 1));
    x = s3d_pointwise(g, "features.2", x, 64);
    x = s3d_sep(g, "features.3", x, 192, 3, 1, 1);
    x = vt_g_maxpool(g, "features.4", x, K3(1, 3, 3), K3(1, 2, 2), K3(0, 1, 1));
    for (size_t b = 0; b < VT_ARRAY_LEN(blocks); b++) {
        char pre[32];
        if (blocks[b][0] == 8)
            x = vt_g_maxpool(g, "features.7", x, K3(3, 3, 3), K3(2, 2, 2), K3(1, 1, 1));
        if (blocks[b][0] == 14)
            x = vt_g_maxpool(g, "features.13", x, K3(2, 2, 2), K3(2, 2, 2), K3(0, 0, 0));
        snprintf(pre, sizeof pre, "features.%d", blocks[b][0]);
        x = s3d_block(g, pre, x, blocks[b] + 1);
    }
    x = vt_g_avgpool(g, "avgpool", x, K3(2, 7, 7), K3(1, 1, 1), K3(0, 0, 0));
    return vt_g_gap(g, "mean", x);
}

/* The test model s3d_block (file comment). */
static int build_s3d_block(vt_graph *g) {
    int x = s3d_pointwise(g, "stem", -1, 6);
    x = s3d_block(g, "block1", x, (const int[6]){2, 3, 4, 2, 3, 2});
    x = s3d_block(g, "block2", x, (const int[6]){3, 2, 3, 2, 2, 3});
    x = vt_g_avgpool(g, "avgpool", x, K3(2, 3, 3), K3(1, 1, 1), K3(0, 0, 0));
    return vt_g_gap(g, "mean", x);
}

static int zoo_build(vt_graph *g, const vt_net_cfg *cfg, char *err, size_t errlen) {
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    if (cfg->clip_t < 1 || cfg->clip_h < 1 || cfg->clip_w < 1) {
        vt_set_err(err, errlen, "clip %dx%dx%d: every dimension must be >= 1", cfg->clip_t,
                   cfg->clip_h, cfg->clip_w);
        return -1;
    }
    if (cfg->nheads < 1 || cfg->nheads > VT_MAX_HEADS) {
        vt_set_err(err, errlen, "%d heads: need 1 to %d", cfg->nheads, VT_MAX_HEADS);
        return -1;
    }
    for (int h = 0; h < cfg->nheads; h++)
        if (cfg->head[h].classes < 1) {
            vt_set_err(err, errlen, "head %d (%s): %d classes", h, cfg->head[h].name,
                       cfg->head[h].classes);
            return -1;
        }
    if (!(cfg->dropout >= 0 && cfg->dropout < 1)) {
        vt_set_err(err, errlen, "dropout %g: must be in [0, 1)", (double)cfg->dropout);
        return -1;
    }
    g->init = VT_INIT_TORCHVISION;
    int feat;
    const char *fc = "fc", *drop = "dropout";
    vt_zoo_pv_head pv;
    if (!strcmp(cfg->model, "tiny")) {
        feat = build_tiny(g, 1);
    } else if (!strcmp(cfg->model, "tiny_nobn")) {
        feat = build_tiny(g, 0);
    } else if (!strcmp(cfg->model, "c3d")) {
        g->init = VT_INIT_C3D;
        fc = "fc8";
        feat = build_c3d(g, cfg->dropout);
    } else if (!strcmp(cfg->model, "r3d18")) {
        feat = build_resnet(g, (const conv_maker[4]){CONV_SIMPLE, CONV_SIMPLE, CONV_SIMPLE,
                                                     CONV_SIMPLE}, 0);
    } else if (!strcmp(cfg->model, "mc3_18")) {
        feat = build_resnet(g, (const conv_maker[4]){CONV_SIMPLE, CONV_NOTEMPORAL,
                                                     CONV_NOTEMPORAL, CONV_NOTEMPORAL}, 0);
    } else if (!strcmp(cfg->model, "r2plus1d18")) {
        feat = build_resnet(g, (const conv_maker[4]){CONV_2PLUS1D, CONV_2PLUS1D, CONV_2PLUS1D,
                                                     CONV_2PLUS1D}, 1);
    } else if (!strcmp(cfg->model, "s3d")) {
        g->init = VT_INIT_PYTORCH;
        fc = "classifier.1";
        drop = "classifier.0";
        feat = build_s3d(g);
    } else if (vt_zoo_is_vit(cfg->model)) { /* zoo_vit.c */
        g->init = VT_INIT_VIT;
        fc = "head";
        feat = vt_zoo_build_vit(g, cfg);
    } else if (vt_zoo_is_mvit(cfg->model)) { /* zoo_mvit.c */
        g->init = VT_INIT_MVIT;
        fc = "head.1";
        drop = "head.0";
        feat = vt_zoo_build_mvit(g, cfg);
    } else if (!strcmp(cfg->model, "s3d_block")) {
        g->init = VT_INIT_PYTORCH;
        feat = build_s3d_block(g);
    } else if ((feat = vt_zoo_pv_build(g, cfg->model, &pv)) != -2) {
        fc = pv.fc; /* pytorchvideo's family (zoo_pv.c) */
        drop = pv.drop;
    } else if ((feat = vt_zoo_build_x3d(g, cfg->model)) != -2) {
        fc = "blocks.5.proj"; /* pytorchvideo's ResNetBasicHead (zoo_x3d.c) */
        drop = "blocks.5.dropout";
    } else {
        char names[512] = "";
        for (int i = 0; vt_zoo_names[i]; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     vt_zoo_names[i]);
        vt_set_err(err, errlen, "unknown model '%s' (the zoo has %s)", cfg->model, names);
        return -1;
    }
    if (cfg->dropout > 0 && g->init != VT_INIT_C3D)
        feat = vt_g_dropout(g, drop, feat, cfg->dropout, 1);
    g->feat = feat;
    for (int h = 0; h < cfg->nheads; h++) {
        char name[32];
        if (h == 0)
            snprintf(name, sizeof name, "%s", fc);
        else
            snprintf(name, sizeof name, "heads.%d", h);
        int head = vt_g_linear(g, name, feat, cfg->head[h].classes, h);
        if (h == 0 && !strcmp(cfg->model, "s3d"))
            vt_g_linear_as_conv1(g, head);
    }
    if (g->failed) {
        vt_set_err(err, errlen, "%s at clip %dx%dx%d: %s", cfg->model, cfg->clip_t, cfg->clip_h,
                   cfg->clip_w, g->err);
        return -1;
    }
    return 0;
}

/* Whether cfg's model builds at a clip of t x s x s. */
static int builds_at(const vt_net_cfg *cfg, int t, int s) {
    vt_net_cfg c = *cfg;
    c.clip_t = t;
    c.clip_h = c.clip_w = s;
    vt_graph g;
    char err[8];
    const int ok = zoo_build(&g, &c, err, sizeof err) == 0;
    vt_graph_free(&g);
    return ok;
}

/* The least clip cfg's model takes, for the refusal of one too small: the fewest frames at
 * a side of LEAST_SIDE (above every model's least: s3d's 209), then the least side at those
 * frames, tried from 1 up (a model's other rules, even frames or sides of a multiple of 16,
 * refuse with their own words, not as too small). 0 when none within LEAST_T x LEAST_SIDE
 * builds. Only a refusal pays for the few hundred graphs at most. */
enum { LEAST_T = 64, LEAST_SIDE = 256 };
static int least_clip(const vt_net_cfg *cfg, int *t, int *s) {
    for (*t = 1; *t <= LEAST_T && !builds_at(cfg, *t, LEAST_SIDE); ++*t) {
    }
    for (*s = 1; *t <= LEAST_T && *s <= LEAST_SIDE && !builds_at(cfg, *t, *s); ++*s) {
    }
    return *t <= LEAST_T && *s <= LEAST_SIDE;
}

int vt_graph_make(vt_graph *g, const vt_net_cfg *cfg, char *err, size_t errlen) {
    if (zoo_build(g, cfg, err, errlen) < 0) {
        /* a clip too small says which clip is not (docs/style.md §8: a hint) */
        const int small = g->failed && strstr(g->err, "clip too small");
        vt_graph_free(g);
        int t, s;
        if (small && least_clip(cfg, &t, &s) && strlen(err) + 1 < errlen)
            snprintf(err + strlen(err), errlen - strlen(err), "; the least clip %s takes is "
                     "%dx%dx%d (--clip %dx%d)", cfg->model, t, s, s, t, s);
        return -1;
    }
    vt_graph_plan(g);
    return 0;
}
