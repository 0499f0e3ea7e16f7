/*
 * test_x3d_cmds.c: X3D through the normal commands, x3d_xs on a small synthetic set
 * (vidtrain synth, 2 classes) at clips of 4x64, 2 steps of 4 clips:
 *   - towers: `train --devices cpu:2 --tower-split manual:3,1` leaves bitwise the state
 *     (every parameter, BN buffer and momentum buffer) of `--devices cpu:1` with the
 *     defaults (sync-BN, exact sums over clips on CPU towers: docs/design.md §3.1) — the
 *     outside truth is one device; every new op (depthwise conv, SE, SiLU) is in the step;
 *   - fine-tuning: `--init RUN/last.safetensors --freeze 3` leaves blocks.0..3 (the stem and
 *     the first three stages, parameters and frozen BN statistics) bit for bit the
 *     initial ones, and blocks.4 and the classifier blocks.5.proj move;
 *   - `plan --model x3d_m` (its default 16x224 clip) lists the new layer kinds;
 *   - export --onnx, embed (2048 features a video) and predict --timeline run and write
 *     their outputs (test_onnx checks the exported numbers against ONNX Runtime).
 */
#include <string.h>

#include "base/common.h"
#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin, *g_dir;

#define ARGS "--model x3d_xs --clip 4x64"
static int train(const char *out, const char *extra) {
    return vt_test_train_small(g_bin, g_dir, ARGS, out, extra);
}

int main(void) {
    g_bin = vt_test_bin("test_x3d_cmds");
    if (!g_bin)
        return VT_TEST_SKIP;
    g_dir = vt_test_dir("x3d_cmds");
    VT_CHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 4 --val 2 --test 2") == 0,
             "synth");
    char a[4200], b[4200];

    int n = vt_test_towers_equal(g_bin, g_dir, ARGS, 301);
    snprintf(a, sizeof a, "%s/one/last.safetensors", g_dir);

    char extra[4400];
    snprintf(extra, sizeof extra, "--init '%s' --freeze 3", a);
    TCHECK(train("ft", extra) == 0, "fine-tune with --freeze 3");
    snprintf(b, sizeof b, "%s/ft/last.safetensors", g_dir);
    static const char *const frozen[] = {"blocks.0.", "blocks.1.", "blocks.2.", "blocks.3.", NULL};
    n = vt_test_ckpt_same(a, b, frozen, "blocks.4.");
    vt_test_ckpt_same(a, b, (const char *const[]){NULL}, "blocks.5.proj.");
    printf("fine-tune --freeze 3: %d tensors of blocks.0-3 unchanged, blocks.4 and the "
           "classifier moved\n", n);

    TCHECK(vt_test_sh("'%s' plan --model x3d_m --clip 16x224 --batch 8 > '%s/plan.txt' 2>&1",
                      g_bin, g_dir) == 0, "plan x3d_m");
    snprintf(a, sizeof a, "%s/plan.txt", g_dir);
    char *plan = vt_test_slurp(a, NULL);
    TCHECK(plan && strstr(plan, "silu") && strstr(plan, "chscale") && strstr(plan, "sigmoid") &&
               strstr(plan, "blocks.5.proj"), "plan lists X3D's layers");
    free(plan);

    TCHECK(vt_test_sh("'%s' export '%s/one' --onnx '%s/x3d.onnx' > /dev/null 2>&1", g_bin, g_dir,
                      g_dir) == 0, "export");
    TCHECK(vt_test_sh("'%s' embed '%s/one' '%s/data/test' --out '%s/emb.npy' > '%s/emb.log' 2>&1",
                      g_bin, g_dir, g_dir, g_dir, g_dir) == 0, "embed");
    snprintf(a, sizeof a, "%s/emb.npy", g_dir);
    long len = 0;
    char *npy = vt_test_slurp(a, &len);
    /* 4 test videos x 2048 float32 features after the .npy header */
    TCHECK(npy && len > 4L * 2048 * 4 && memmem(npy, 128, "(4, 2048)", 9), "embed: %ld bytes",
           len);
    free(npy);
    TCHECK(vt_test_sh("f=$(find '%s/data/test' -type f | sort | head -1); '%s' predict '%s/one' "
                      "\"$f\" --timeline > '%s/tl.txt' 2>&1 && grep -q 'move_' '%s/tl.txt'",
                      g_dir, g_bin, g_dir, g_dir, g_dir) == 0, "predict --timeline");
    vt_test_sh("rm -rf '%s'", g_dir);
    return vt_test_done("test_x3d_cmds");
}
