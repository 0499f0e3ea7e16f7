/*
 * test_zoo_s3d.c: vidtrain's s3d computes what torchvision's S3D computes, and the concat
 * node it is built on has the right gradients, against PyTorch (tests/oracle/torch_zoo.py
 * s3d-golden writes the truth; names, shapes, order and the 8,320,048 parameters are
 * test_zoo.c's listing check).
 *   s3d_block (the test model: S3D's stem conv, two SepInceptionBlock3D, its avgpool
 *     window, the mean, fc; 706 parameters, 2 clips of 4x8x8) on cpu-ref and cpu: a
 *     training forward, cross-entropy and backward give torchvision's logits, EVERY
 *     parameter gradient (each concat input's gradient is a slice of the block output's)
 *     and BN running statistics (momentum 0.001), then eval-mode logits (eps 0.001).
 *   s3d (torchvision's, 400 classes, the smallest clip it takes, 13x209x209: 14.8 GMAC a
 *     clip) with PyTorch's seeded weights and BN statistics from a pass over the clips:
 *     eval logits of 2 clips on cpu, of 1 on cpu-ref; on cpu a training forward and
 *     backward of the 2 clips (the classifier's dropout off on both sides: vidtrain's sits
 *     after the mean, models/zoo.c) gives PyTorch's logits, the gradients of twelve
 *     tensors across the network and three BN buffers after the step. cpu-ref would spend
 *     minutes on S3D's backward; the cpu backend is itself compared op by op with
 *     cpu-ref (test_ops), and s3d_block runs every node kind of S3D on cpu-ref.
 *   refusals: a clip below 13x209x209 names the minimum; the initialisation is PyTorch's
 *     module defaults (S3D has no init code).
 * Tolerances (NMSE, sum (a-b)^2 / sum b^2). Both sides compute float32 with different
 * summation orders, ~1e-7 relative per op. Eval mode has no data-dependent
 * normalisation: errors add up over S3D's 60 layers to ~1e-6 relative, NMSE ~1e-12, and
 * the brief's 1e-10 holds with room (a wrong eps, 1e-5 for 1e-3, moves the logits by
 * NMSE ~1e-6). Training BN divides by batch standard deviations and backward multiplies
 * the errors through every layer again, as in test_golden.c: ~1e-5 relative in the
 * deepest gradients, so 1e-8 for logits and gradients (a wrong slice or a lost branch
 * gives NMSE > 1e-3) and 1e-10 for running statistics (momentum 0.001 moves them by 1e-3
 * of the batch statistics: a wrong momentum is NMSE > 1e-8).
 * S3D's training gradients are the exception, measured: at its smallest clip, batch 2,
 * PyTorch's own float32 gradients differ from its float64 ones by NMSE 6e-4 in the early
 * and middle layers (1.6e-4 in the last block, 1e-9 at the classifier), and vidtrain's
 * from PyTorch's float32 ones by 9e-4 — two float32 computations each that far from the
 * exact value (some 120 of 15M max-pool windows pick another maximum between float32 and
 * float64, and batch-statistics BN through 60 layers amplifies rounding). So the truth
 * for them is PyTorch's float64 gradient, and vidtrain's must be within NMSE_VS_TORCH
 * times PyTorch float32's distance from it (at least 1e-8): as exact as PyTorch, where a
 * wrong slice, a lost branch or a transposed kernel is NMSE > 1e-2. s3d_block pins the
 * concat node itself to 1e-8 on both backends.
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

#define NMSE_EVAL 1e-10
#define NMSE_TRAIN 1e-8
#define NMSE_STATS 1e-10
#define NMSE_VS_TORCH 4.0 /* S3D's gradients: within 4x PyTorch float32's own NMSE */
static const vt_test_zoo_tol TOL = {NMSE_EVAL, 0, {NMSE_TRAIN, NMSE_STATS, NMSE_VS_TORCH}};

/* PyTorch's defaults: Conv3d weight and bias U(+-1/sqrt(fan_in)) (kaiming_uniform_ with
 * a = sqrt(5)), BN gamma 1 and beta 0; and the clip floor. */
static void refusals_and_init(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    vt_net_cfg cfg;
    char err[512];
    static const int small[][3] = {{12, 209, 209}, {13, 208, 209}, {13, 209, 208}};
    for (size_t i = 0; i < VT_ARRAY_LEN(small); i++) {
        vt_net_cfg_default(&cfg, "s3d", 400, small[i][0], small[i][1], small[i][2]);
        TCHECK(!vt_net_init(&cfg, be, 1, err, sizeof err) && strstr(err, "13x209x209"),
               "s3d at %dx%dx%d: %s", small[i][0], small[i][1], small[i][2], err);
    }
    printf("refused: %s\n", err);
    vt_net_cfg_default(&cfg, "s3d", 400, 13, 209, 209);
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net && vt_net_num_params(net) == 8320048, "s3d/400: %s", net ? "count" : err);
    if (!net)
        return;
    vt_net_init_weights(net, 3);
    const float *p = vt_net_params(net);
    double m, s, a;
    /* features.3.0.0: 192 x 64 x 1x3x3, fan_in 576, bound 1/24; 110,592 draws of a
     * uniform: std bound/sqrt(3) within 1% (3 sigma is 0.5%). */
    const vt_tensor_info *t = vt_net_find_tensor(net, "features.3.0.0.weight");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(a <= 1.0 / 24 && fabs(s * sqrt(3.0) * 24 - 1) < 0.01, "conv init: std %g max %g", s,
           a);
    t = vt_net_find_tensor(net, "classifier.1.bias"); /* fan_in 1024: U(+-1/32) */
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(a <= 1.0 / 32 && s > 0.5 / 32 / sqrt(3.0), "classifier bias: std %g max %g", s, a);
    t = vt_net_find_tensor(net, "classifier.1.weight");
    TCHECK(t && t->ndim == 5 && t->shape[1] == 1024 && t->shape[4] == 1, "classifier.1.weight");
    vt_test_stats(p + t->offset, t->numel, &m, &s, &a);
    TCHECK(a <= 1.0 / 32 && fabs(s * sqrt(3.0) * 32 - 1) < 0.01, "classifier init: std %g", s);
    t = vt_net_find_tensor(net, "features.15.branch3.1.1.weight");
    TCHECK(p[t->offset] == 1.0f && p[t->offset + t->numel - 1] == 1.0f, "bn weight not 1");
    vt_net_free(&net);
    TCHECK(be->in_use == 0, "%lld bytes left", (long long)be->in_use);
    vt_backend_free(&be);
}

int main(void) {
    const char *dir = vt_test_dir("zoo_s3d");
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "%s -W ignore '%s/tests/oracle/torch_zoo.py' s3d-golden '%s'", py, src,
             dir);
    /* The oracle runs beside the checks (its float64 S3D pass and the cpu-ref S3D eval are
     * each most of a core for ~20 s): refusals_and_init needs none of it; s3d_block's file
     * comes first; s3d_eval.safetensors (the eval half of s3d.safetensors: state, x, eval
     * logits) before PyTorch's training passes, so the cpu-ref eval runs during them. */
    FILE *oracle = popen(cmd, "r");
    VT_CHECK(oracle != NULL, "%s: cannot start", cmd);
    refusals_and_init();
    char path[4200], err[512], line[512];
    vt_ckpt_info info;
    int seen = 0; /* 1: s3d_block's file, 2: s3d_eval's, 3: s3d's */
    while (fgets(line, sizeof line, oracle)) {
        printf("%s", line);
        if (!strncmp(line, "s3d_block: ", 11) && seen == 0) {
            seen = 1;
            snprintf(path, sizeof path, "%s/s3d_block.safetensors", dir);
            VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
            vt_test_zoo_run("s3d_block", 5, 4, 8, &info, "cpu-ref", 2, 1, &TOL);
            vt_test_zoo_run("s3d_block", 5, 4, 8, &info, "cpu", 2, 1, &TOL);
            vt_ckpt_info_free(&info);
        } else if (!strcmp(line, "eval written s3d\n") && seen == 1) {
            seen = 2;
            snprintf(path, sizeof path, "%s/s3d_eval.safetensors", dir);
            VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
            vt_test_zoo_run("s3d", 400, 13, 209, &info, "cpu-ref", 1, 0, &TOL);
            vt_ckpt_info_free(&info);
        } else if (!strncmp(line, "s3d: ", 5) && seen == 2) {
            seen = 3;
        }
    }
    int rc = pclose(oracle);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == VT_TEST_SKIP) {
        fprintf(stderr, "SKIP: %s cannot import torch and torchvision\n", py);
        return VT_TEST_SKIP;
    }
    VT_CHECK(rc == 0, "%s failed (status %d)", cmd, rc);
    VT_CHECK(seen == 3, "%s: ended after %d of its 3 files", cmd, seen);

    snprintf(path, sizeof path, "%s/s3d.safetensors", dir);
    VT_CHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "%s", err);
    vt_test_zoo_run("s3d", 400, 13, 209, &info, "cpu", 2, 1, &TOL);
    vt_ckpt_info_free(&info);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* 52 MB */
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return vt_test_done("test_zoo_s3d");
}
