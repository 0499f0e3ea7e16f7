/*
 * test_vit_cmds.c: VideoMAE ViT-S through the normal commands with the transformer recipe
 * (AdamW, weight decay 0.05 with its exemptions, drop path 0.1, label smoothing 0.1: what
 * `train` picks for a transformer, docs/finetune.md), on a small synthetic set (vidtrain
 * synth, 2 classes) at clips of 4x32 (8 tokens), 2 steps of 4 clips:
 *   - towers: `train --devices cpu:2 --tower-split manual:3,1` leaves bitwise the state
 *     (every parameter and AdamW moment) of `--devices cpu:1` with those defaults — the
 *     outside truth is one device (exact sums over clips on CPU towers: docs/design.md
 *     §3.1); the step has every transformer op, and drop path draws per clip, so a tower
 *     that drew another clip's mask would differ;
 *   - the run says which recipe it chose (config.json "recipe": "transformer") and that
 *     its clips take ImageNet's mean and std, as VideoMAE's weights were trained (the
 *     exported ONNX metadata too);
 *   - fine-tuning: `--init RUN/last.safetensors --freeze 6` leaves the patch embedding and
 *     blocks.0..5 bit for bit the initial ones, and blocks.6 and the head move;
 *   - export --onnx, embed (384 features a video: the mean of the tokens) and predict
 *     --timeline run and write their outputs (test_onnx checks exported ViT numbers
 *     against ONNX Runtime).
 */
#include <string.h>

#include "base/common.h"
#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin, *g_dir;

#define ARGS "--model videomae_vit_s --clip 4x32"
static int train(const char *out, const char *extra) {
    return vt_test_train_small(g_bin, g_dir, ARGS, out, extra);
}

int main(void) {
    g_bin = vt_test_bin("test_vit_cmds");
    if (!g_bin)
        return VT_TEST_SKIP;
    g_dir = vt_test_dir("vit_cmds");
    VT_CHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 4 --val 2 --test 2") == 0,
             "synth");
    char a[4200], b[4200];

    /* ViT-S: 12 blocks of 12 tensors, the patch embedding, the head's norm and fc, and
     * their AdamW moments: well over 150 */
    int n = vt_test_towers_equal(g_bin, g_dir, ARGS, 151);
    snprintf(a, sizeof a, "%s/one/last.safetensors", g_dir);

    snprintf(a, sizeof a, "%s/one/config.json", g_dir);
    char *cfg = vt_test_slurp(a, NULL);
    TCHECK(cfg && strstr(cfg, "\"recipe\"") && strstr(cfg, "\"transformer\""),
           "config.json names the transformer recipe");
    TCHECK(cfg && strstr(cfg, "adamw"), "the recipe's optimizer is AdamW");
    TCHECK(cfg && strstr(cfg, "\"imagenet\""), "VideoMAE's clips take ImageNet's statistics");
    free(cfg);

    snprintf(a, sizeof a, "%s/one/last.safetensors", g_dir);
    char extra[4400];
    snprintf(extra, sizeof extra, "--init '%s' --freeze 6", a);
    TCHECK(train("ft", extra) == 0, "fine-tune with --freeze 6");
    snprintf(b, sizeof b, "%s/ft/last.safetensors", g_dir);
    static const char *const frozen[] = {"patch_embed.", "blocks.0.", "blocks.1.", "blocks.2.",
                                         "blocks.3.", "blocks.4.", "blocks.5.", NULL};
    n = vt_test_ckpt_same(a, b, frozen, "blocks.6.");
    vt_test_ckpt_same(a, b, (const char *const[]){NULL}, "head.");
    printf("fine-tune --freeze 6: %d tensors of the patch embedding and blocks.0-5 unchanged, "
           "blocks.6 and the head moved\n", n);

    TCHECK(vt_test_sh("'%s' export '%s/one' --onnx '%s/vit.onnx' > '%s/export.log' 2>&1", g_bin,
                      g_dir, g_dir, g_dir) == 0, "export");
    /* the exported metadata tells a deployment ImageNet's mean (VideoMAE's), not Kinetics' */
    TCHECK(vt_test_sh("grep -aq '0.485' '%s/vit.onnx'", g_dir) == 0, "ONNX normalisation");
    TCHECK(vt_test_sh("'%s' embed '%s/one' '%s/data/test' --out '%s/emb.npy' > '%s/emb.log' 2>&1",
                      g_bin, g_dir, g_dir, g_dir, g_dir) == 0, "embed");
    snprintf(a, sizeof a, "%s/emb.npy", g_dir);
    long len = 0;
    char *npy = vt_test_slurp(a, &len);
    /* 4 test videos x 384 float32 features (ViT-S's width) after the .npy header */
    TCHECK(npy && len > 4L * 384 * 4 && memmem(npy, 128, "(4, 384)", 8), "embed: %ld bytes",
           len);
    free(npy);
    TCHECK(vt_test_sh("f=$(find '%s/data/test' -type f | sort | head -1); '%s' predict '%s/one' "
                      "\"$f\" --timeline > '%s/tl.txt' 2>&1 && grep -q 'move_' '%s/tl.txt'",
                      g_dir, g_bin, g_dir, g_dir, g_dir) == 0, "predict --timeline");
    vt_test_sh("rm -rf '%s'", g_dir);
    return vt_test_done("test_vit_cmds");
}
