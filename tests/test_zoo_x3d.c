/*
 * test_zoo_x3d.c: vidtrain's X3D computes what pytorchvideo's X3D computes, against
 * tests/oracle/torch_x3d.py (X3D in plain torch from pytorchvideo's published
 * architecture, with its state-dict names; test_zoo.c checks that those names, shapes and
 * order are exactly vidtrain's for all four members, and the parameter counts):
 *   x3d_xs (5 classes, 2 clips of 4x64x64; every op of the family: the stem's depthwise
 *     5x1x1, depthwise 3x3x3 with stride 2, squeeze-excitation, SiLU, the projected-pool
 *     head) with PyTorch's seeded weights, SE biases made non-zero, BN statistics from a
 *     pass over the clips: eval logits, then one training forward + cross-entropy +
 *     backward — logits, EVERY parameter gradient, every BN buffer after the step — on
 *     cpu-ref and cpu;
 *   x3d_l (25 blocks in its third stage; 3 classes, 2 clips of 2x32x32): eval logits on
 *     cpu (the cheap forward of the deep member);
 *   pytorchvideo's initialisation (c2_msra_fill: kaiming_normal_ fan_out on every conv, the
 *     depthwise ones included, biases 0; linear N(0, 0.01)).
 * Tolerances (NMSE, sum (a-b)^2 / sum b^2), argued as test_zoo_s3d.c's: training logits
 * 1e-8, BN buffers 1e-10. EVAL logits: random weights with BN statistics of two clips
 * make X3D's output itself ill-conditioned — x3d_l's logits reach ~1e3 and PyTorch's
 * float32 ones are NMSE ~1e-7 from its float64 ones, x3d_xs's ~5e-11 — so, as for the
 * gradients below, the truth is float64 and vidtrain must be within NMSE_VS_TORCH times
 * PyTorch float32's distance from it (at least 1e-9: x3d_xs's measured 1.5e-10 on cpu is
 * 3.4x PyTorch's 4.4e-11, too near 4x for a floor of 1e-10 to be safe across machines,
 * and a wrong eps or a lost SE still moves the logits by NMSE > 1e-6). The training
 * GRADIENTS are ill-conditioned at this size: the last stage's BN normalises over 2 clips x 4 x 2 x 2
 * values, and PyTorch's own float32 gradients differ from its float64 ones by NMSE up to
 * ~2e-4 (the script prints it). So their truth is PyTorch's float64 gradient, and
 * vidtrain's must be within NMSE_VS_TORCH times PyTorch float32's own distance from it
 * (at least 1e-8): as exact as PyTorch, where a transposed depthwise kernel, a missing SE
 * scale or SiLU's derivative taken from its output instead of its input is NMSE > 1e-2.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "models/formats/safetensors.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

#define NMSE_EVAL 1e-9 /* the floor under the float64 yardstick (file comment) */
#define NMSE_TRAIN 1e-8
#define NMSE_STATS 1e-10
#define NMSE_VS_TORCH 4.0 /* gradients: within 4x PyTorch float32's own NMSE (above) */
/* eval logits too against the float64 truth (file comment) */
static const vt_test_zoo_tol TOL = {NMSE_EVAL, NMSE_VS_TORCH,
                                    {NMSE_TRAIN, NMSE_STATS, NMSE_VS_TORCH}};

/* pytorchvideo's init_net_weights on vidtrain's x3d_xs. */
static void check_init(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    vt_net_cfg cfg;
    char err[512];
    vt_net_cfg_default(&cfg, "x3d_xs", 400, 4, 160, 160);
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net != NULL, "x3d_xs: %s", err);
    if (!net)
        return;
    vt_net_init_weights(net, 3);
    const float *p = vt_net_params(net);
    double m, s, a;
    /* blocks.3.res_blocks.0.branch2.conv_b: depthwise 216 x 1 x 3x3x3, fan_out 216*27:
     * std sqrt(2/5832); 5,832 draws: the sample std within 3/sqrt(2n) = 2.8% (3 sigma). */
    const vt_tensor_info *t = vt_net_find_tensor(net, "blocks.3.res_blocks.0.branch2.conv_b.weight");
    TCHECK(t && t->shape[1] == 1, "conv_b weight shape");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(fabs(s / sqrt(2.0 / (216 * 27)) - 1) < 0.03, "depthwise conv std %g", s);
    /* the SE's 1x1x1 convs: fan_out 432 -> 32 (round_width(432/16) = 32) */
    t = vt_net_find_tensor(net, "blocks.4.res_blocks.0.branch2.norm_b.1.block.0.weight");
    TCHECK(t && t->shape[0] == 32 && t->shape[1] == 432, "SE block.0 shape");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(fabs(s / sqrt(2.0 / 32) - 1) < 0.03, "SE conv std %g", s);
    t = vt_net_find_tensor(net, "blocks.4.res_blocks.0.branch2.norm_b.1.block.2.bias");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(a == 0, "SE bias not 0");
    /* BN: weight 1, bias 0, except the bottleneck's last BN (norm_c), which pytorchvideo's
     * BottleneckBlock flags block_final_bn: weight 0 (weight_init.py) */
    t = vt_net_find_tensor(net, "blocks.3.res_blocks.2.branch2.norm_c.weight");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(a == 0, "norm_c weight not 0 (max |w| %g)", a);
    static const char *const ones[] = {"blocks.0.norm.weight", "blocks.3.res_blocks.2.branch2.norm_a.weight",
                                       "blocks.3.res_blocks.2.branch2.norm_b.0.weight",
                                       "blocks.3.res_blocks.0.branch1_norm.weight",
                                       "blocks.5.pool.pre_norm.weight"};
    for (size_t k = 0; k < sizeof ones / sizeof *ones; k++) {
        t = vt_net_find_tensor(net, ones[k]);
        TCHECK(t != NULL, "%s missing", ones[k]);
        if (t) {
            vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
            TCHECK(m == 1 && s == 0, "%s: mean %g std %g, want 1", ones[k], m, s);
        }
    }
    t = vt_net_find_tensor(net, "blocks.5.proj.weight"); /* N(0, 0.01), 819,200 draws */
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(fabs(s / 0.01 - 1) < 0.01, "proj std %g", s);
    TCHECK(!vt_net_find_tensor(net, "blocks.1.res_blocks.1.branch2.norm_b.1.block.0.weight") &&
               vt_net_find_tensor(net, "blocks.1.res_blocks.2.branch2.norm_b.1.block.0.weight"),
           "SE on every other block");
    vt_net_free(&net);
    vt_backend_free(&be);
}

int main(void) {
    check_init();
    const char *dir = vt_test_dir("zoo_x3d");
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "%s -W ignore '%s/tests/oracle/torch_x3d.py' golden '%s'", py, src,
             dir);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == VT_TEST_SKIP) {
        fprintf(stderr, "SKIP: %s cannot import torch\n", py);
        return VT_TEST_SKIP;
    }
    VT_CHECK(rc == 0, "%s failed (status %d)", cmd, rc);
    char path[4200], err[512];
    vt_ckpt_info info;
    snprintf(path, sizeof path, "%s/x3d_xs.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    vt_test_zoo_run("x3d_xs", 5, 4, 64, &info, "cpu", 2, 1, &TOL);
    vt_test_zoo_run("x3d_xs", 5, 4, 64, &info, "cpu-ref", 2, 1, &TOL);
    vt_ckpt_info_free(&info);
    snprintf(path, sizeof path, "%s/x3d_l.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    vt_test_zoo_run("x3d_l", 3, 4, 64, &info, "cpu", 2, 0, &TOL);
    vt_ckpt_info_free(&info);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return vt_test_done("test_zoo_x3d");
}
