/*
 * test_mvit_cmds.c: MViT through the normal commands, mvit_test (mvit_v2_s's pieces at 4
 * blocks: zoo_mvit.c) on a small synthetic set (vidtrain synth, 2 classes) at clips of
 * 8x32, 2 steps of 4 clips:
 *   - towers: `train --devices cpu:2 --tower-split manual:3,1` leaves bitwise the state
 *     (every parameter and momentum buffer) of `--devices cpu:1` with the defaults
 *     (exact sums over clips on CPU towers: docs/design.md §3.1) — the outside truth is
 *     one device; every MViT op (pooled attention, relative tables, pool_skip, class
 *     token) is in the step;
 *   - fine-tuning: `--init RUN/last.safetensors --freeze 2` leaves conv_proj,
 *     pos_encoding and blocks.0-1 bit for bit the initial ones, and blocks.2 moves;
 *   - another clip: those weights fine-tuned at 4x48 with --checkpoint-act on load
 *     strictly and their relative tables (interpolated at 4x48) move;
 *   - `plan --model mvit_v2_s` (16x224) lists MViT's layer kinds; with --precision bf16 on
 *     two absent GPUs (--mem 12G,6G) it fits about twice fp32's clips a pass;
 *   - `train --precision bf16` is refused on the CPU (MViT's bf16 is cuda's), saying why;
 *   - export --onnx, embed (the class token's 64 features a video) and predict --timeline
 *     run and write their outputs (test_onnx checks the exported numbers against ONNX
 *     Runtime).
 */
#include <string.h>

#include "base/common.h"
#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin, *g_dir;

static int train_at(const char *out, const char *clip, const char *extra) {
    char args[64];
    snprintf(args, sizeof args, "--model mvit_test --clip %s", clip);
    return vt_test_train_small(g_bin, g_dir, args, out, extra);
}
static int train(const char *out, const char *extra) { return train_at(out, "8x32", extra); }

int main(void) {
    g_bin = vt_test_bin("test_mvit_cmds");
    if (!g_bin)
        return VT_TEST_SKIP;
    g_dir = vt_test_dir("mvit_cmds");
    VT_CHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 4 --val 2 --test 2") == 0,
             "synth");
    char a[4200], b[4200];

    int n = vt_test_towers_equal(g_bin, g_dir, "--model mvit_test --clip 8x32", 101);
    snprintf(a, sizeof a, "%s/one/last.safetensors", g_dir);

    char extra[4400];
    snprintf(extra, sizeof extra, "--init '%s' --freeze 2", a);
    TCHECK(train("ft", extra) == 0, "fine-tune with --freeze 2");
    snprintf(b, sizeof b, "%s/ft/last.safetensors", g_dir);
    static const char *const frozen[] = {"conv_proj.", "pos_encoding.", "blocks.0.", "blocks.1.",
                                         NULL};
    n = vt_test_ckpt_same(a, b, frozen, "blocks.2.");
    vt_test_ckpt_same(a, b, (const char *const[]){NULL}, "head.1.");
    printf("fine-tune --freeze 2: %d tensors of the stem and blocks.0-1 unchanged, blocks.2 "
           "and the classifier moved\n", n);

    /* another clip: the 8x32 run's weights fine-tuned at 4x48 with checkpointing on — every
     * tensor loads strictly (the relative tables keep their shapes) and the tables learn
     * through their run-time interpolation */
    snprintf(extra, sizeof extra, "--init '%s' --init-strict --checkpoint-act on", a);
    TCHECK(train_at("clip48", "4x48", extra) == 0, "fine-tune at 4x48");
    snprintf(b, sizeof b, "%s/clip48/last.safetensors", g_dir);
    vt_test_ckpt_same(a, b, (const char *const[]){NULL}, "blocks.0.attn.rel_pos_h");
    /* (not the last block's: only the class row reaches the head, and its attention has no
     * relative terms, so torchvision's gradient of those tables is 0 too) */
    vt_test_ckpt_same(a, b, (const char *const[]){NULL}, "blocks.2.attn.rel_pos_t");
    printf("fine-tune at 4x48 (checkpointing on) from 8x32: loaded strictly, the interpolated "
           "tables moved\n");

    TCHECK(vt_test_sh("'%s' plan --model mvit_v2_s --clip 16x224 --batch 8 > '%s/plan.txt' 2>&1",
                      g_bin, g_dir) == 0, "plan mvit_v2_s");
    snprintf(a, sizeof a, "%s/plan.txt", g_dir);
    char *plan = vt_test_slurp(a, NULL);
    TCHECK(plan && strstr(plan, "mvit_attention") && strstr(plan, "token_maxpool") &&
               strstr(plan, "class_token") && strstr(plan, "head.1"), "plan lists MViT's layers");
    free(plan);

    /* bf16: cuda's only (docs/precision.md): on this CPU-only run, train refuses it before
     * any step, saying so; the plan for two absent GPUs (--mem) holds about twice the clips
     * of fp32's at 16x112, the activations stored at 2 bytes (measured with the plan's
     * AdamW 60 + 24 against 31 + 13) */
    TCHECK(train("bf16", "--precision bf16") != 0, "train --precision bf16 on the CPU ran");
    TCHECK(vt_test_file_has_in(g_dir, "bf16.log", "bf16") &&
               vt_test_file_has_in(g_dir, "bf16.log", "cuda"),
           "the bf16 refusal does not say why");
    int fit[2][2];
    for (int b = 0; b < 2; b++) {
        TCHECK(vt_test_sh("'%s' plan --model mvit_v2_s --clip 16x112 --precision %s --devices "
                          "cuda:0,cuda:1 --mem 12G,6G > '%s/plan_%d.txt' 2>&1", g_bin, b ? "bf16" : "fp32",
                          g_dir, b) == 0, "plan mvit_v2_s %s", b ? "bf16" : "fp32");
        snprintf(a, sizeof a, "%s/plan_%d.txt", g_dir, b);
        char *pl = vt_test_slurp(a, NULL);
        /* the checkpointing lines, cuda0's then cuda1's: "clips a pass: N without" */
        const char *c0 = pl ? strstr(pl, "clips a pass: ") : NULL;
        const char *c1 = c0 ? strstr(c0 + 1, "clips a pass: ") : NULL;
        fit[b][0] = c0 ? atoi(c0 + 14) : 0;
        fit[b][1] = c1 ? atoi(c1 + 14) : 0;
        free(pl);
    }
    printf("plan mvit_v2_s 16x112 on 12G + 6G: fp32 %d + %d clips a pass, bf16 %d + %d\n",
           fit[0][0], fit[0][1], fit[1][0], fit[1][1]);
    for (int d = 0; d < 2; d++)
        TCHECK(fit[0][d] > 0 && fit[1][d] >= 18 * fit[0][d] / 10 && fit[1][d] <= 2 * fit[0][d] + 1,
               "bf16 fits %d clips where fp32 fits %d: not about twice", fit[1][d], fit[0][d]);

    TCHECK(vt_test_sh("'%s' export '%s/one' --onnx '%s/mvit.onnx' > /dev/null 2>&1", g_bin, g_dir,
                      g_dir) == 0, "export");
    snprintf(a, sizeof a, "%s/mvit.onnx", g_dir);
    long olen = 0;
    char *onnx = vt_test_slurp(a, &olen);
    TCHECK(onnx && olen > 88000L * 4 && memmem(onnx, (size_t)olen, "rel_pos_t", 9),
           "export: %ld bytes", olen);
    free(onnx);
    TCHECK(vt_test_sh("'%s' embed '%s/one' '%s/data/test' --out '%s/emb.npy' > '%s/emb.log' 2>&1",
                      g_bin, g_dir, g_dir, g_dir, g_dir) == 0, "embed");
    snprintf(a, sizeof a, "%s/emb.npy", g_dir);
    long len = 0;
    char *npy = vt_test_slurp(a, &len);
    /* 4 test videos x 64 float32 features (the class token after the last norm) */
    TCHECK(npy && len > 4L * 64 * 4 && memmem(npy, 128, "(4, 64)", 7), "embed: %ld bytes", len);
    free(npy);
    TCHECK(vt_test_sh("f=$(find '%s/data/test' -type f | sort | head -1); '%s' predict '%s/one' "
                      "\"$f\" --timeline > '%s/tl.txt' 2>&1 && grep -q 'move_' '%s/tl.txt'",
                      g_dir, g_bin, g_dir, g_dir, g_dir) == 0, "predict --timeline");
    vt_test_sh("rm -rf '%s'", g_dir);
    return vt_test_done("test_mvit_cmds");
}
