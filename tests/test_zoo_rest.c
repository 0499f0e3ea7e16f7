/*
 * test_zoo_rest.c: the zoo's models whose cells of docs/testing.md's "Models through the
 * commands" no other test filled, through tests/zoowalk.h's walk (train, eval = predict,
 * predict --timeline = predict, embed = predict's classifier input), on a small synthetic
 * set (vidtrain synth, 2 classes, 2 test videos), each at the least clip it takes or near:
 *   tiny_nobn 4x16: every part — 2 CPU towers = 1, the exported run in ONNX Runtime,
 *     --resume, fine-tuning (--init --freeze 1: conv1 and conv2 as loaded, conv3 trains)
 *     and bf16 on cpu-ref (predict within bf16's rounding of fp32's, a training step);
 *     the model without batch norm, a few CPU seconds for all of it;
 *   r3d18 4x32: torchvision's ResNet of full 3-D convolutions (mc3_18 walks in
 *     test_zoo_cmds; r2plus1d18, the same builder with (2+1)D convolutions, would add 7
 *     CPU s for the same commands: docs/testing.md; the numerics, --init and export of
 *     both: test_transfer, test_onnx);
 *   x3d_l 4x32: every part, as tiny_nobn (x3d_xs's are test_x3d_cmds' and test_zoo_cmds';
 *     x3d_s and x3d_m are x3d_xs's network at other clips);
 *   csn_r101 4x32: pytorchvideo's ResNets past i3d_r50 and slowfast_r50 (test_zoo_cmds):
 *     its 101 layers and depthwise conv_b, the cheapest of slow_r50, r2plus1d_r50 and
 *     csn_r101 (about 5 CPU s; the others: docs/testing.md);
 *   s3d 13x209 (its least clip: the (2,7,7) average pool), one step of 2 clips;
 *   vit_test 4x32 and mvit_test 8x32, videomae_vit_s's and mvit_v2_s's pieces at a few
 *     blocks (test_vit_cmds and test_mvit_cmds train them on towers and fine-tune them,
 *     but only run embed and predict): their features are their classifiers' input, and
 *     mvit_test's --resume;
 *   x3d_xs: --pretrained from a file:// mirror (below);
 * and that the towers the commands after train run a model on hold no training-only
 * state (below).
 * The rest of the zoo, and what each cell costs where a test would cost too much:
 * docs/testing.md. It must never skip a model in silence: a part left out is left out in
 * the table, with why.
 */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/run/run_model.h"
#include "tests/apputil.h"
#include "tests/zoowalk.h"

/* --pretrained from a mirror (VIDTRAIN_WEIGHTS_URL=file://DIR): pytorchvideo's rows publish
 * no checksum, so a file of our own under X3D_XS.pyth stands for theirs (a run of x3d_xs;
 * --init reads a checkpoint by its bytes, not its name) and its SHA-256 is recorded at
 * the first download. Fine-tuning with --freeze 4 must leave blocks.0-4 as the file holds
 * them and train the head (blocks.5): the weights came through the download, the cache
 * and --init, not from the seed. And the same file put in a cache by hand, without
 * network, is taken and recorded at its first use. */
static void pretrained_from_mirror(const vt_walk_env *e) {
    char dir[4200], src[4400], got[4400];
    snprintf(dir, sizeof dir, "%s/pretrained", e->dir);
    mkdir(dir, 0755);
    VT_CHECK(vt_test_sh("ln -sfn ../data '%s/data' && mkdir -p '%s/mirror'", dir, dir) == 0,
             "data link");
    TCHECK(vt_test_train_small(e->bin, dir, "--model x3d_xs --clip 4x32", "src",
                               "--devices cpu:1 --max-steps 1") == 0 &&
               vt_test_sh("cp '%s/src/last.safetensors' '%s/mirror/X3D_XS.pyth'", dir, dir) == 0,
           "x3d_xs: the mirror's file (see %s/src.log)", dir);
    TCHECK(vt_test_sh("VIDTRAIN_WEIGHTS_URL='file://%s/mirror' VIDTRAIN_CACHE='%s/cache' '%s' "
                      "train '%s/data' --out '%s/ft' --pretrained x3d_xs --clip 4x32 --stride 1 "
                      "--freeze 4 --batch 4 --max-steps 1 --seed 3 --workers 1 -q --devices "
                      "cpu:1 > '%s/ft.log' 2>&1", dir, dir, e->bin, dir, dir, dir) == 0,
           "--pretrained x3d_xs from file://%s/mirror (see %s/ft.log)", dir, dir);
    TCHECK(vt_test_file_has_in(dir, "ft.log", "pretrained: x3d_xs on Kinetics-400"),
           "the log does not name the weights (see %s/ft.log)", dir);
    snprintf(got, sizeof got, "%s/cache/X3D_XS.pyth.sha256", dir);
    TCHECK(access(got, F_OK) == 0, "no SHA-256 recorded at %s", got);
    snprintf(src, sizeof src, "%s/mirror/X3D_XS.pyth", dir);
    snprintf(got, sizeof got, "%s/ft/last.safetensors", dir);
    static const char *const frozen[] = {"blocks.0.", "blocks.1.", "blocks.2.", "blocks.3.",
                                         "blocks.4.", NULL};
    int n = vt_test_ckpt_same(src, got, frozen, "blocks.5.");
    printf("x3d_xs        --pretrained from a file:// mirror, --freeze 4: %d tensors of blocks.0-4 "
           "the file's, blocks.5 moved\n", n);
    TCHECK(n > 300, "--pretrained x3d_xs: %d tensors of blocks.0-4 compared", n);

    /* without network, the file put in the cache by hand where the message says: taken,
     * its SHA-256 recorded at this first use (it was refused as "changed or damaged", no
     * record being there) */
    TCHECK(vt_test_sh("mkdir -p '%s/cache2' && cp '%s' '%s/cache2/' && "
                      "VIDTRAIN_WEIGHTS_URL=file:///nonexistent-vidtrain-mirror "
                      "VIDTRAIN_CACHE='%s/cache2' '%s' train '%s/data' --out '%s/ft2' "
                      "--pretrained x3d_xs --clip 4x32 --stride 1 --batch 4 --max-steps 1 "
                      "--seed 3 --workers 1 -q --devices cpu:1 > '%s/ft2.log' 2>&1", dir, src,
                      dir, dir, e->bin, dir, dir, dir) == 0,
           "--pretrained x3d_xs from a file put in the cache by hand (see %s/ft2.log)", dir);
    /* the record is sha256sum's line: the command checks it */
    TCHECK(vt_test_sh("cd '%s/cache2' && sha256sum -c --status X3D_XS.pyth.sha256", dir) == 0,
           "the hand-placed file's SHA-256 was not recorded at its first use (see %s/ft2.log)",
           dir);
}

/* The towers eval, predict, embed and the timeline run a model on (vt_run_model_load) make
 * no exact sums: those are training's sums over a batch's clips, and on CPU towers their
 * accumulators (16 bytes a parameter) made predict of r3d18 hold 983 MB where 437 do. */
static void forward_towers_plain(const vt_walk_env *e) {
    char run[4300], err[1024];
    snprintf(run, sizeof run, "%s/tiny_nobn/one", e->dir);
    vt_run_model m;
    vt_model_args ma;
    vt_model_args_default(&ma);
    int rc = vt_run_model_open(&m, run, NULL, NULL, err, sizeof err);
    if (rc == 0)
        rc = vt_run_model_load(&m, &ma.devices, NULL, 4, err, sizeof err);
    TCHECK(rc == 0, "%s: %s", run, err);
    TCHECK(rc == 0 && !vt_towers_exact(m.towers),
           "the forward-only towers of %s keep exact-sum accumulators", run);
    vt_run_model_free(&m);
}

int main(void) {
    vt_walk_env env;
    /* 2 classes: 4 training videos a class (a step of 4 clips is half an epoch), 2
     * validation and 1 test video a class (s3d's eval, predict and embed cost about 0.4 CPU
     * s a clip) */
    int rc = vt_walk_init(&env, "test_zoo_rest", "zoo_rest",
                          "--classes 2 --train 4 --val 2 --test 1", 2);
    if (rc)
        return rc;
    /* tensors: tiny_nobn has 11 in its checkpoint (weights and biases, no BN) */
    static const char *const tiny_frozen[] = {"conv1.", "conv2.", NULL};
    static const char *const x3d_frozen[] = {"blocks.0.", "blocks.1.", NULL};
    static const vt_walk walks[] = {
        {.model = "tiny_nobn", .clip = "4x16", .dim = 128, .min_tensors = 10,
         .bn = "batch norm none in the model",
         .parts = W_TOWERS | W_EXPORT | W_RESUME | W_FINETUNE | W_BF16, .frozen = tiny_frozen,
         .moved = "conv3."},
        {.model = "r3d18", .clip = "4x32", .dim = 512},
        /* X3D's deep member (stage 3 of 25 blocks), 6M parameters: every part, a few CPU s */
        {.model = "x3d_l", .clip = "4x32", .dim = 2048, .min_tensors = 800,
         .bn = "batch norm synced across towers per pass",
         .parts = W_TOWERS | W_EXPORT | W_RESUME | W_FINETUNE | W_BF16, .frozen = x3d_frozen,
         .moved = "blocks.2."},
        /* pytorchvideo's deepest ResNet (101 layers, depthwise conv_b): the family's
         * features past i3d_r50's and slowfast_r50's (test_zoo_cmds) */
        {.model = "csn_r101", .clip = "4x32", .dim = 2048},
        /* a step of 2 clips: s3d's 15 GMAC a clip make it the test's costliest step */
        {.model = "s3d", .clip = "13x209", .dim = 1024, .train = "--batch 2 --max-steps 1"},
        /* the transformers' features (the tokens' mean, the class token) against their
         * classifiers; mvit_test's --resume (its AdamW moments, relative tables) */
        {.model = "vit_test", .clip = "4x32", .dim = 48},
        {.model = "mvit_test", .clip = "8x32", .dim = 64, .min_tensors = 80, .parts = W_RESUME},
    };
    char dir[4096];
    for (size_t i = 0; i < VT_ARRAY_LEN(walks); i++)
        vt_walk_one(&env, &walks[i], dir, sizeof dir);
    pretrained_from_mirror(&env);
    forward_towers_plain(&env);
    vt_test_sh("rm -rf '%s'", env.dir);
    return vt_test_done("test_zoo_rest");
}
