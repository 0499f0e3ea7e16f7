/*
 * zoo_pv.c: the ResNet family of pytorchvideo (PySlowFast's models) as graphs, with
 * the module names, shapes and order of pytorchvideo's own modules (models/resnet.py,
 * slowfast.py, stem.py, head.py, net.py), so that its state dicts — and the .pyth files of
 * its model zoo — load by name:
 *   slow_r50:     hub.slow_r50 = create_resnet(stem_conv_kernel_size (1,7,7),
 *                 head_pool_kernel_size (8,7,7), depth 50). blocks.0 the stem (conv, norm,
 *                 pool (1,3,3) stride (1,2,2)), blocks.1-4 ResStages of bottleneck blocks
 *                 [3,4,6,3] (res_blocks.<i>.branch1_conv/branch1_norm on the first block
 *                 of a stage, branch2.conv_a (1x1x1 in stages 1-2, 3x1x1 in 3-4), norm_a,
 *                 conv_b (1,3,3) carrying the spatial stride, norm_b, conv_c 1x1x1 to
 *                 4x the width, norm_c; shortcut + branch2 then ReLU), blocks.5 the head
 *                 (AvgPool3d, dropout, proj, global average). 8 frames, 224 crops;
 *   i3d_r50:      hub.i3d_r50: stem (5,7,7), a MaxPool3d (2,1,1) after the first stage
 *                 (blocks.2, so the later stages are blocks.3-5 and the head blocks.6),
 *                 conv_a 3x1x1 / 1x1x1 alternating per block as the hub lists them, head
 *                 pool (4,7,7);
 *   slowfast_r50: hub.slowfast_r50 = create_slowfast(depth 50, fusion kernel (7,1,1)):
 *                 ONE clip of the fast pathway's T frames comes in; the slow pathway takes
 *                 T/4 of them inside the network (a tgather node, net_graph.h), chosen as
 *                 PackPathway does. blocks.0-4 are MultiPathWayWithFuse: per pathway
 *                 (multipathway_blocks.0 slow, .1 fast: beta = 1/8 of the slow widths,
 *                 stem (5,7,7), conv_a 3x1x1 everywhere) the stem or stage, then
 *                 multipathway_fusion = FuseFastToSlow: conv_fast_to_slow (7,1,1) stride
 *                 (4,1,1) from the fast features to 2x their channels, norm, ReLU, and the
 *                 slow features concatenated with it (blocks.4 has none: Identity).
 *                 blocks.5 pools each pathway (pool.0 (8,7,7), pool.1 (32,7,7)) and
 *                 concatenates (2048 + 256 channels), blocks.6 is the head (dropout,
 *                 proj). 32 frames, 224 crops.
 *   r2plus1d_r50: hub.r2plus1d_r50 = create_r2plus1d (dropout 0.5): stem (1,7,7) WITHOUT
 *                 a max pool, stages [3,4,6,3] of (2+1)D bottlenecks (conv_a 1x1x1; conv_b
 *                 a Conv2plus1d: conv_b.conv_t (3,1,1) stride (t,1,1) inner -> inner,
 *                 conv_b.norm, ReLU, conv_b.conv_xy (1,3,3) stride (1,s,s); then norm_b,
 *                 act_b, conv_c, norm_c), spatial strides 2,2,2,2 and temporal 1,1,2,2
 *                 (branch1_conv strides (t,s,s)), head pool (4,7,7) — blocks.5. Its head
 *                 ends in a Softmax (create_r2plus1d's head_activation default), which
 *                 vidtrain leaves out: the logits here are its input (the same argmax; the
 *                 loss takes logits). 16 frames (stride 4), 224 crops;
 *   csn_r101:     hub.csn_r101 = create_csn(depth 101, stem_pool MaxPool3d, head pool
 *                 (4,7,7), dropout 0): stem (3,7,7) and max pool, stages [3,4,23,3] of
 *                 channel-separated bottlenecks (conv_a 1x1x1; conv_b 3x3x3 DEPTHWISE,
 *                 groups = inner, stride (t,s,s) with spatial strides 1,2,2,2 and temporal
 *                 1,2,2,2), head blocks.5. 32 frames (stride 2), 224 crops.
 * Initialisation (VT_INIT_PYVIDEO, net_init.c): init_net_weights' "resnet" style —
 * c2_msra_fill (kaiming_normal_ fan_out, bias 0) for convs, N(0, 0.01) and bias 0 for
 * proj, BN weight 1 and bias 0 except the last BN of every bottleneck (norm_c), whose
 * weight is 0.
 * The head: pytorchvideo pools with a fixed window (8,7,7) stride 1, projects every
 * position and averages them. Here the window is clipped to the features (a smaller clip
 * than the default then pools them all, where pytorchvideo would fail), the average of
 * the positions is taken BEFORE the projection (the same map: proj is linear), and the
 * dropout acts on that average: the same eval output, the same training expectation,
 * other masks when the window leaves more than one position (as s3d's, zoo.c).
 *
 * Like zoo.c it only describes models: it must never allocate backend memory or run ops.
 */
#include "models/zoo_pv.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"

/* Module paths here are at most 58 characters (blocks.1.multipathway_blocks.0.res_blocks.0.
 * branch2.conv_a); GCC cannot see that through the prefix pointers. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define K3(a, b, c) ((const int[3]){a, b, c})

/* How a bottleneck's conv_b looks: resnet.py's (1,3,3) (slow, i3d, slowfast), r2plus1d.py's
 * Conv2plus1d, csn.py's depthwise (3,3,3). */
enum { PV_B_SPATIAL, PV_B_2PLUS1D, PV_B_DEPTHWISE };

/* A bottleneck stage's shape: how conv_a looks in each block and where it strides. */
typedef struct pv_stage {
    int depth, dim_in, inner, out, stride; /* spatial stride of the first block */
    int ta[2];                             /* conv_a's temporal kernel, alternating per block */
    int tstride, convb;                    /* temporal stride of the first block; PV_B_* */
} pv_stage;

/* conv_b of the block under `pre` (…branch2.conv_b), strides (st,s,s). */
static int pv_conv_b(vt_graph *g, const char *pre, int y, int inner, int st, int s, int kind) {
    char a[112];
    snprintf(a, sizeof a, "%s.branch2.conv_b", pre);
    if (kind == PV_B_DEPTHWISE)
        return vt_g_conv_groups(g, a, y, inner, K3(3, 3, 3), K3(st, s, s), K3(1, 1, 1), 0,
                                inner);
    if (kind == PV_B_SPATIAL)
        return vt_g_conv(g, a, y, inner, K3(1, 3, 3), K3(1, s, s), K3(0, 1, 1), 0);
    /* Conv2plus1d (conv_xy_first False): conv_t, norm, activation, conv_xy, all inner wide */
    snprintf(a, sizeof a, "%s.branch2.conv_b.conv_t", pre);
    y = vt_g_conv(g, a, y, inner, K3(3, 1, 1), K3(st, 1, 1), K3(1, 0, 0), 0);
    snprintf(a, sizeof a, "%s.branch2.conv_b.norm", pre);
    y = vt_g_bn(g, a, y);
    snprintf(a, sizeof a, "%s.branch2.conv_b.activation", pre);
    y = vt_g_relu(g, a, y);
    snprintf(a, sizeof a, "%s.branch2.conv_b.conv_xy", pre);
    return vt_g_conv(g, a, y, inner, K3(1, 3, 3), K3(1, s, s), K3(0, 1, 1), 0);
}

/* ResBlock with a BottleneckBlock under `pre` (…res_blocks.<b>): branch1 (when the shape
 * changes) first, as the module registers it, then branch2, the sum and the ReLU. */
static int pv_block(vt_graph *g, const char *pre, int x, int dim_in, int inner, int out, int s,
                    int ta, int st, int convb) {
    char a[96], b[96];
    int skip = x;
    if (dim_in != out || s != 1 || st != 1) {
        snprintf(a, sizeof a, "%s.branch1_conv", pre);
        snprintf(b, sizeof b, "%s.branch1_norm", pre);
        skip = vt_g_conv(g, a, x, out, K3(1, 1, 1), K3(st, s, s), K3(0, 0, 0), 0);
        skip = vt_g_bn(g, b, skip);
    }
    static const char *const part[3] = {"a", "b", "c"};
    int y = x;
    for (int k = 0; k < 3; k++) {
        snprintf(a, sizeof a, "%s.branch2.conv_%s", pre, part[k]);
        if (k == 0)
            y = vt_g_conv(g, a, y, inner, K3(ta, 1, 1), K3(1, 1, 1), K3(ta / 2, 0, 0), 0);
        else if (k == 1)
            y = pv_conv_b(g, pre, y, inner, st, s, convb);
        else
            y = vt_g_conv(g, a, y, out, K3(1, 1, 1), K3(1, 1, 1), K3(0, 0, 0), 0);
        snprintf(a, sizeof a, "%s.branch2.norm_%s", pre, part[k]);
        y = vt_g_bn(g, a, y);
        if (k < 2) {
            snprintf(a, sizeof a, "%s.branch2.act_%s", pre, part[k]);
            y = vt_g_relu(g, a, y);
        }
    }
    snprintf(a, sizeof a, "%s.add", pre);
    snprintf(b, sizeof b, "%s.activation", pre);
    return vt_g_relu(g, b, vt_g_add(g, a, y, skip));
}

/* ResStage under `pre` (e.g. "blocks.1" or "blocks.1.multipathway_blocks.0"). */
static int pv_stage_build(vt_graph *g, const char *pre, int x, const pv_stage *st) {
    char p[96];
    for (int b = 0; b < st->depth; b++) {
        snprintf(p, sizeof p, "%s.res_blocks.%d", pre, b);
        x = pv_block(g, p, x, b == 0 ? st->dim_in : st->out, st->inner, st->out,
                     b == 0 ? st->stride : 1, st->ta[b % 2], b == 0 ? st->tstride : 1,
                     st->convb);
    }
    return x;
}

/* ResNetBasicStem under `pre`: conv (kt,7,7) stride (1,2,2), norm, ReLU, max pool (1,3,3)
 * stride (1,2,2) (none for kt < 0: r2plus1d's stem, kernel (1,7,7)). */
static int pv_stem(vt_graph *g, const char *pre, int in, int cout, int kt) {
    const int pool = kt > 0;
    kt = kt > 0 ? kt : -kt;
    char a[96];
    snprintf(a, sizeof a, "%s.conv", pre);
    int x = vt_g_conv(g, a, in, cout, K3(kt, 7, 7), K3(1, 2, 2), K3(kt / 2, 3, 3), 0);
    snprintf(a, sizeof a, "%s.norm", pre);
    x = vt_g_bn(g, a, x);
    snprintf(a, sizeof a, "%s.activation", pre);
    x = vt_g_relu(g, a, x);
    if (!pool)
        return x;
    snprintf(a, sizeof a, "%s.pool", pre);
    return vt_g_maxpool(g, a, x, K3(1, 3, 3), K3(1, 2, 2), K3(0, 1, 1));
}

/* The head's AvgPool3d(k, stride 1) on x, its window clipped to the features (file
 * comment); a window that covers them all is the global average. */
static int pv_pool(vt_graph *g, const char *name, int x, const int k[3]) {
    if (x < 0 || g->failed)
        return -1;
    const vt_node *nd = &g->nodes[x];
    int kk[3] = {VT_MIN(k[0], nd->t), VT_MIN(k[1], nd->h), VT_MIN(k[2], nd->w)};
    if (kk[0] == nd->t && kk[1] == nd->h && kk[2] == nd->w)
        return vt_g_gap(g, name, x);
    return vt_g_avgpool(g, name, x, kk, K3(1, 1, 1), K3(0, 0, 0));
}

/* The 4 stages of R50 from a 64-channel stem, widths divided by `div` (the fast
 * pathway's beta); dim_in of each stage given (SlowFast's slow pathway adds the fused
 * channels). */
static void r50_stages(pv_stage st[4], int div, const int dim_in[4], const int ta[4][2]) {
    static const int depth[4] = {3, 4, 6, 3};
    for (int s = 0; s < 4; s++) {
        st[s] = (pv_stage){depth[s], dim_in[s], (64 << s) / div, (256 << s) / div,
                           s == 0 ? 1 : 2, {ta[s][0], ta[s][1]}, 1, PV_B_SPATIAL};
    }
}

/* r2plus1d_r50 and csn_r101 (file comment): stem, 4 stages, blocks.5's pool. */
static int build_r2plus1d_csn(vt_graph *g, int csn) {
    static const int dim_in[4] = {64, 256, 512, 1024};
    static const int depth50[4] = {3, 4, 6, 3}, depth101[4] = {3, 4, 23, 3};
    static const int sp_r2[4] = {2, 2, 2, 2}, tp_r2[4] = {1, 1, 2, 2};
    static const int sp_csn[4] = {1, 2, 2, 2}, tp_csn[4] = {1, 2, 2, 2};
    int x = pv_stem(g, "blocks.0", -1, 64, csn ? 3 : -1);
    char pre[32];
    for (int s = 0; s < 4; s++) {
        pv_stage st = {csn ? depth101[s] : depth50[s], dim_in[s], 64 << s, 256 << s,
                       csn ? sp_csn[s] : sp_r2[s], {1, 1}, csn ? tp_csn[s] : tp_r2[s],
                       csn ? PV_B_DEPTHWISE : PV_B_2PLUS1D};
        snprintf(pre, sizeof pre, "blocks.%d", s + 1);
        x = pv_stage_build(g, pre, x, &st);
    }
    return pv_pool(g, "blocks.5.pool", x, K3(4, 7, 7));
}

static int build_resnet(vt_graph *g, int i3d) {
    static const int ta_slow[4][2] = {{1, 1}, {1, 1}, {3, 3}, {3, 3}};
    static const int ta_i3d[4][2] = {{3, 3}, {3, 1}, {3, 1}, {1, 3}};
    static const int dim_in[4] = {64, 256, 512, 1024};
    pv_stage st[4];
    r50_stages(st, 1, dim_in, i3d ? ta_i3d : ta_slow);
    int x = pv_stem(g, "blocks.0", -1, 64, i3d ? 5 : 1);
    int blk = 1;
    char pre[32];
    for (int s = 0; s < 4; s++) {
        snprintf(pre, sizeof pre, "blocks.%d", blk++);
        x = pv_stage_build(g, pre, x, &st[s]);
        if (s == 0 && i3d) { /* stage1_pool: MaxPool3d((2,1,1), stride (2,1,1)) */
            snprintf(pre, sizeof pre, "blocks.%d", blk++);
            x = vt_g_maxpool(g, pre, x, K3(2, 1, 1), K3(2, 1, 1), K3(0, 0, 0));
        }
    }
    snprintf(pre, sizeof pre, "blocks.%d.pool", blk);
    return pv_pool(g, pre, x, i3d ? K3(4, 7, 7) : K3(8, 7, 7));
}

/* FuseFastToSlow under `pre`: the slow features concatenated with conv (7,1,1) stride
 * (4,1,1) of the fast ones (2x their channels), norm, ReLU. */
static int pv_fuse(vt_graph *g, const char *pre, int slow, int fast) {
    char a[96];
    if (fast < 0 || g->failed)
        return -1;
    snprintf(a, sizeof a, "%s.conv_fast_to_slow", pre);
    int f = vt_g_conv(g, a, fast, 2 * g->nodes[fast].c, K3(7, 1, 1), K3(4, 1, 1), K3(3, 0, 0), 0);
    snprintf(a, sizeof a, "%s.norm", pre);
    f = vt_g_bn(g, a, f);
    snprintf(a, sizeof a, "%s.activation", pre);
    f = vt_g_relu(g, a, f);
    if (f >= 0 && g->nodes[f].t != g->nodes[slow].t) {
        g->failed = 1;
        snprintf(g->err, sizeof g->err, "%s: the fast pathway's %d frames fuse into %d, the "
                 "slow pathway has %d (clips of 4, 8, ... frames: a multiple of alpha = 4)",
                 pre, g->nodes[fast].t, g->nodes[f].t, g->nodes[slow].t);
        return -1;
    }
    return vt_g_concat(g, pre, (const int[2]){slow, f}, 2);
}

static int build_slowfast(vt_graph *g) {
    enum { ALPHA = 4, BETA_INV = 8 };
    static const int ta_slow[4][2] = {{1, 1}, {1, 1}, {3, 3}, {3, 3}};
    static const int ta_fast[4][2] = {{3, 3}, {3, 3}, {3, 3}, {3, 3}};
    /* the slow stages read their own channels plus the fused 2 x (fast's) = 1/4 more */
    static const int in_slow[4] = {64 + 16, 256 + 64, 512 + 128, 1024 + 256};
    static const int in_fast[4] = {8, 32, 64, 128};
    pv_stage ss[4], fs[4];
    r50_stages(ss, 1, in_slow, ta_slow);
    r50_stages(fs, BETA_INV, in_fast, ta_fast);
    int slow = vt_g_tgather(g, "pack_pathway", -1, ALPHA);
    slow = pv_stem(g, "blocks.0.multipathway_blocks.0", slow, 64, 1);
    int fast = pv_stem(g, "blocks.0.multipathway_blocks.1", -1, 64 / BETA_INV, 5);
    slow = pv_fuse(g, "blocks.0.multipathway_fusion", slow, fast);
    char pre[64];
    for (int s = 0; s < 4; s++) {
        snprintf(pre, sizeof pre, "blocks.%d.multipathway_blocks.0", s + 1);
        slow = pv_stage_build(g, pre, slow, &ss[s]);
        snprintf(pre, sizeof pre, "blocks.%d.multipathway_blocks.1", s + 1);
        fast = pv_stage_build(g, pre, fast, &fs[s]);
        if (s < 3) {
            snprintf(pre, sizeof pre, "blocks.%d.multipathway_fusion", s + 1);
            slow = pv_fuse(g, pre, slow, fast);
        }
    }
    slow = pv_pool(g, "blocks.5.pool.0", slow, K3(8, 7, 7));
    fast = pv_pool(g, "blocks.5.pool.1", fast, K3(32, 7, 7));
    if (slow < 0 || fast < 0)
        return -1;
    const vt_node *a = &g->nodes[slow], *b = &g->nodes[fast];
    if (a->t != b->t || a->h != b->h || a->w != b->w) {
        g->failed = 1;
        snprintf(g->err, sizeof g->err, "blocks.5: the pathways pool to %dx%dx%d and %dx%dx%d "
                 "(pytorchvideo's windows (8,7,7) and (32,7,7) fit 32x224x224 clips, and any "
                 "clip whose features are at most that size)", a->t, a->h, a->w, b->t, b->h,
                 b->w);
        return -1;
    }
    int x = vt_g_concat(g, "blocks.5", (const int[2]){slow, fast}, 2);
    if (x >= 0 && g->nodes[x].t * g->nodes[x].h * g->nodes[x].w > 1)
        x = vt_g_gap(g, "blocks.6.output_pool", x);
    return x;
}

int vt_zoo_pv_build(vt_graph *g, const char *model, vt_zoo_pv_head *head) {
    int x;
    if (!strcmp(model, "slow_r50")) {
        x = build_resnet(g, 0);
        head->fc = "blocks.5.proj";
        head->drop = "blocks.5.dropout";
        if (x >= 0 && g->nodes[x].kind != VT_NODE_GAP)
            x = vt_g_gap(g, "blocks.5.output_pool", x);
    } else if (!strcmp(model, "i3d_r50")) {
        x = build_resnet(g, 1);
        head->fc = "blocks.6.proj";
        head->drop = "blocks.6.dropout";
        if (x >= 0 && g->nodes[x].kind != VT_NODE_GAP)
            x = vt_g_gap(g, "blocks.6.output_pool", x);
    } else if (!strcmp(model, "r2plus1d_r50") || !strcmp(model, "csn_r101")) {
        x = build_r2plus1d_csn(g, model[0] == 'c');
        head->fc = "blocks.5.proj";
        head->drop = "blocks.5.dropout";
        if (x >= 0 && g->nodes[x].kind != VT_NODE_GAP)
            x = vt_g_gap(g, "blocks.5.output_pool", x);
    } else if (!strcmp(model, "slowfast_r50")) {
        x = build_slowfast(g);
        head->fc = "blocks.6.proj";
        head->drop = "blocks.6.dropout";
    } else {
        return -2;
    }
    g->init = VT_INIT_PYVIDEO;
    return x;
}
