/*
 * test_zoo_cmds.c: the zoo's models that no other command test walks (docs/testing.md,
 * "Models through the commands") through train, eval, predict, --timeline, embed, export
 * and --resume, on a small synthetic set (vidtrain synth, 2 classes, 4 test videos), 2
 * steps of 4 clips each, by tests/zoowalk.h's walk (predict = eval, timeline = predict,
 * embed = predict's classifier input, ONNX Runtime = the exported run, --resume = the
 * whole run), and:
 *   - towers: `train --devices cpu:2 --tower-split manual:3,1` leaves bitwise the state of
 *     `--devices cpu:1` with the defaults (docs/design.md §3.1; the outside truth is one
 *     device), and its plan.txt says what the towers do with batch norm: synced, or none
 *     in a model without it (it said "synced" for those too, and for fine-tuning's frozen
 *     BN);
 *   - resume for one model of each family: its BN buffers, momentum and the family's own
 *     state.
 * The models, each standing for the members whose code it shares:
 *   mc3_18 4x32: torchvision's video ResNets (r3d18 and r2plus1d18 are the same builder with
 *     other convs; their numerics: test_transfer, test_onnx);
 *   c3d 16x16 (its smallest clip: fc6 is sized by it), two dropouts in the head (no resume:
 *     a family of one, its dropout masks drawn per clip as vit_test's drop path);
 *   i3d_r50 4x32: pytorchvideo's ResNets besides slowfast_r50: slow_r50's blocks with a
 *     temporal pool between the first two stages; and `--freeze 2`, where that
 *     parameter-free blocks.2 is no stage: blocks.0, .1 and .3 stay, .4 moves;
 *   mvit_v1_test 8x32: mvit_v1_b's pieces (absolute positions; mvit_v2_s's are
 *     test_mvit_cmds'); from scratch in passes of 2 clips (--mem from its plan) the
 *     one-pass run bit for bit (no BN: every clip's gradient its own, exact sums); and
 *     `--init --freeze 1`: conv_proj, the positions and blocks.0 as loaded, blocks.1 moves;
 *   x3d_xs 4x32 and slowfast_r50 8x32 (the slow pathway takes 2 frames): no towers or
 *     export here (test_x3d_cmds, test_pyvideo_cli, test_onnx have them).
 * And vit_test stopped after 1 step and resumed to 2 equals 2 uninterrupted steps bit for
 * bit with the transformer recipe (AdamW moments, drop path drawn per clip), as
 * test_resume checks the SGD recipe on tiny. Without ONNX Runtime (tools/onnxrt) the
 * export check alone is left out, said on stdout.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/common.h"
#include "tests/apputil.h"
#include "tests/zoowalk.h"

static vt_walk_env g_env;

/* The budget that holds `clips` clips a pass: the run's plan.txt line "fp32: X UNIT fixed
 * per tower + Y UNIT per clip", in bytes; 0 when the line is not there. */
static long long budget_for(const char *run, double clips) {
    char p[4400];
    snprintf(p, sizeof p, "%s/plan.txt", run);
    char *plan = vt_test_slurp(p, NULL);
    const char *f = plan ? strstr(plan, "fp32: ") : NULL;
    double a = 0, b = 0;
    char ua[8] = "", ub[8] = "";
    long long bytes = 0;
    if (f && sscanf(f, "fp32: %lf %7s fixed per tower + %lf %7s per clip", &a, ua, &b, ub) == 4) {
        const double ka = !strcmp(ua, "GiB") ? 1 << 30 : !strcmp(ua, "MiB") ? 1 << 20 : 1 << 10;
        const double kb = !strcmp(ub, "GiB") ? 1 << 30 : !strcmp(ub, "MiB") ? 1 << 20 : 1 << 10;
        bytes = (long long)(a * ka + clips * b * kb);
    }
    free(plan);
    return bytes;
}

int main(void) {
    /* 2 classes: 4 training, 2 validation and 2 test videos a class */
    int rc = vt_walk_init(&g_env, "test_zoo_cmds", "zoo_cmds",
                          "--classes 2 --train 4 --val 2 --test 2", 4);
    if (rc)
        return rc;
    const char *g_bin = g_env.bin, *g_dir = g_env.dir;

    /* tensors: mc3_18 has 123 (weights, BN buffers, momentum), c3d 23, i3d_r50 321,
     * mvit_v1_test 94, x3d_xs 564, slowfast_r50 663: "at least" well below those */
    static const char *const sync = "batch norm synced across towers per pass";
    /* --freeze 1 on an MViT: the patch embedding and positions, and blocks.0 */
    static const char *const mvit_frozen[] = {"conv_proj.", "pos_encoding.", "blocks.0.", NULL};
    static const vt_walk walks[] = {
        {.model = "mc3_18", .clip = "4x32", .dim = 512, .min_tensors = 100, .bn = sync,
         .parts = W_TOWERS | W_EXPORT | W_RESUME},
        {.model = "c3d", .clip = "16x16", .dim = 4096, .min_tensors = 20,
         .bn = "batch norm none in the model", .parts = W_TOWERS | W_EXPORT},
        {.model = "i3d_r50", .clip = "4x32", .dim = 2048, .min_tensors = 300, .bn = sync,
         .parts = W_TOWERS | W_EXPORT | W_RESUME},
        {.model = "mvit_v1_test", .clip = "8x32", .dim = 64, .min_tensors = 80,
         .bn = "batch norm none in the model",
         .parts = W_TOWERS | W_EXPORT | W_RESUME | W_FINETUNE, .frozen = mvit_frozen,
         .moved = "blocks.1."},
        /* towers and export: test_x3d_cmds, test_pyvideo_cli, test_onnx */
        {.model = "x3d_xs", .clip = "4x32", .dim = 2048, .min_tensors = 300, .parts = W_RESUME},
        {.model = "slowfast_r50", .clip = "8x32", .dim = 2304, .min_tensors = 600,
         .parts = W_RESUME},
    };
    char dir[4096], a[4400], b[4400], extra[4600];
    for (size_t i = 0; i < VT_ARRAY_LEN(walks); i++) {
        vt_walk_one(&g_env, &walks[i], dir, sizeof dir);
        snprintf(a, sizeof a, "%s/one/last.safetensors", dir);
        if (!strcmp(walks[i].model, "i3d_r50")) {
            snprintf(extra, sizeof extra, "--devices cpu:1 --init '%s' --freeze 2", a);
            TCHECK(vt_test_train_small(g_bin, dir, "--model i3d_r50 --clip 4x32", "ft", extra) == 0,
                   "i3d_r50 --freeze 2 (see %s/ft.log)", dir);
            snprintf(b, sizeof b, "%s/ft/last.safetensors", dir);
            static const char *const frozen[] = {"blocks.0.", "blocks.1.", "blocks.3.", NULL};
            int n = vt_test_ckpt_same(a, b, frozen, "blocks.4.");
            printf("i3d_r50       --freeze 2: %d tensors of blocks.0, .1, .3 unchanged, blocks.4 "
                   "moved\n", n);
            /* fine-tuning freezes every BN: the plan must not promise a sync */
            snprintf(b, sizeof b, "%s/ft/plan.txt", dir);
            TCHECK(vt_test_file_has(b, "batch norm frozen"), "i3d_r50 fine-tuning's plan does "
                   "not say its BN is frozen");
        }
        if (!strcmp(walks[i].model, "mvit_v1_test")) {
            snprintf(b, sizeof b, "%s/one", dir);
            long long mem = budget_for(b, 2.5);
            TCHECK(mem > 0, "%s/plan.txt: no fp32 line", b);
            snprintf(extra, sizeof extra, "--devices cpu:1 --mem %lld", mem);
            TCHECK(vt_test_train_small(g_bin, dir, "--model mvit_v1_test --clip 8x32", "mb",
                                       extra) == 0, "mvit_v1_test --mem (see %s/mb.log)", dir);
            snprintf(b, sizeof b, "%s/mb/plan.txt", dir);
            TCHECK(vt_test_file_has(b, "2 x 2"), "mvit_v1_test --mem %lld: not in passes of 2",
                   mem);
            char what[128];
            snprintf(what, sizeof what, "mvit_v1_test  passes of 2 clips (--mem %lld) = one pass",
                     mem);
            vt_test_last_same(dir, "one", "mb", what, 0);
        }
    }

    /* vit_test: 2 steps, and 1 step then --resume to 2 */
    snprintf(dir, sizeof dir, "%s/vit_test", g_dir);
    mkdir(dir, 0755);
    VT_CHECK(vt_test_sh("ln -sfn ../data '%s/data'", dir) == 0, "data link");
    const char *vargs = "--model vit_test --clip 4x32";
    TCHECK(vt_test_train_small(g_bin, dir, vargs, "one", "--devices cpu:1") == 0, "vit_test");
    snprintf(extra, sizeof extra, "%s/one/config.json", dir);
    TCHECK(vt_test_file_has(extra, "adamw"), "vit_test's recipe is not AdamW's");
    printf("vit_test      ");
    vt_test_resume_equal(g_bin, dir, vargs, 30);

    vt_test_sh("rm -rf '%s'", g_dir);
    return vt_test_done("test_zoo_cmds");
}
