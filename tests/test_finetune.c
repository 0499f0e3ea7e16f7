/*
 * test_finetune.c: `vidtrain train --init / --pretrained` as a user runs them, on small
 * synthetic sets (real encoded videos):
 *   - a source run, then a fine-tuning run from its checkpoint with fine-tuning's
 *     defaults: the log says what was loaded, config.json records the resolved recipe
 *     (lr a tenth of the scratch rule, head x10, BN frozen, no precise BN);
 *   - docs/design.md §3.1 with that default recipe: the same fine-tuning run on two
 *     towers split 3:1 ends with one tower's weights (BN frozen: every clip's gradient
 *     is its own, no sync-BN needed), with the colour jitter and every default on;
 *   - --freeze 1 leaves the stem and stage 1 bit for bit as loaded, and trains the rest;
 *   - a 3-class target (the source's 2 classes and one more): the classifier's rows by
 *     class name, the new class's initialised; --init-strict refuses it;
 *   - bad input: a file that is no checkpoint, --pretrained without network (the message
 *     names the URL and the cache path), --freeze past the model's stages;
 *   - eval reads a fine-tuned run like any other.
 */
#include <unistd.h>

#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

int main(void) {
    const char *bin = vt_test_bin("test_finetune");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], p[4300], q[4300];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("finetune"));
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 12 --val 2 --test 4 --frames 24") == 0,
           "synth");
    /* a 3-class target set beside it */
    TCHECK(vt_test_sh("'%s' synth '%s/data3' --classes 3 --train 4 --val 1 --test 2 --frames 24 "
                      "> '%s/synth3.log' 2>&1", bin, dir, dir) == 0, "synth 3 classes");
    const char *common = "--clip 8x32 --stride 2 --batch 8 --val-clips 1 --workers 1 -q";

    /* the source run */
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/src' %s --epochs 3 --no-flip --seed 1 "
                        "> '%s/src.log' 2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "source run exit %d", rc);

    /* fine-tuning with the defaults, one tower and two (3:1) */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/ft1' %s --epochs 2 --seed 2 --init "
                    "'%s/src/last.safetensors' --devices cpu:1 > '%s/ft1.log' 2>&1", bin, dir, dir,
                    common, dir, dir);
    TCHECK(rc == 0, "fine-tuning exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/ft2' %s --epochs 2 --seed 2 --init "
                    "'%s/src/last.safetensors' --devices cpu:2 --tower-split manual:3,1 "
                    "> '%s/ft2.log' 2>&1", bin, dir, dir, common, dir, dir);
    TCHECK(rc == 0, "fine-tuning on 2 towers exit %d", rc);
    snprintf(p, sizeof p, "%s/ft1.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(log && strstr(log, "init: ") && strstr(log, "tensors loaded") &&
               strstr(log, "missing 0, unexpected 0, shape-mismatched 0") &&
               strstr(log, "BN layer(s) in eval mode"), "the log says what was loaded:\n%s",
           log ? log : "");
    free(log);
    snprintf(p, sizeof p, "%s/ft1/config.json", dir);
    cJSON *cfg = vt_test_read_json(p);
    const cJSON *v = NULL;
    TCHECK(cfg && (v = cJSON_GetObjectItem(cfg, "freeze_bn")) && cJSON_IsTrue(v), "freeze_bn");
    TCHECK(cfg && (v = cJSON_GetObjectItem(cfg, "head_lr_mult")) && v->valuedouble == 10,
           "head_lr_mult");
    TCHECK(cfg && (v = cJSON_GetObjectItem(cfg, "precise_bn")) && v->valueint == 0, "precise_bn");
    /* tiny's scratch rule 0.2 * B / 32 = 0.05 at B = 8; fine-tuning a tenth */
    TCHECK(cfg && (v = cJSON_GetObjectItem(cfg, "lr")) && fabs(v->valuedouble - 0.005) < 1e-7,
           "lr %g", v ? v->valuedouble : -1);
    TCHECK(cfg && (v = cJSON_GetObjectItem(cfg, "init")) && strstr(v->valuestring, "src/last"),
           "init recorded");
    cJSON_Delete(cfg);
    /* docs/design.md §3.1: two towers end where one does. Gradients are summed over the towers
     * in another order than over one tower's batch: ~1e-7 relative per step, and six
     * steps of SGD with momentum carry that to ~1e-6; 1e-4 fails any clip counted twice
     * or missing, or a BN that still used batch statistics (~1e-2). */
    vt_test_ckpt_cmp c;
    snprintf(p, sizeof p, "%s/ft1/last.safetensors", dir);
    snprintf(q, sizeof q, "%s/ft2/last.safetensors", dir);
    double d = vt_test_ckpt_diff(q, p, "", &c);
    printf("fine-tuning 1 tower vs 2 towers (3:1): max relative difference %.3g over %d tensors\n",
           d, c.ntensors);
    TCHECK(d >= 0 && d <= 1e-4 && c.ntensors > 10, "1 vs 2 towers: %g over %d tensors", d,
           c.ntensors);
    /* frozen BN: the running statistics are the source's, bit for bit */
    snprintf(q, sizeof q, "%s/src/last.safetensors", dir);
    TCHECK(vt_test_ckpt_diff(q, p, "bn1.running", &c) == 0 && c.ntensors == 2, "bn1 statistics moved");

    /* --freeze 1: the stem (conv1/bn1) and stage 1 (conv2/bn2) as loaded; conv3 moves */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/fz' %s --epochs 1 --seed 2 --freeze 1 --init "
                    "'%s/src/last.safetensors' > '%s/fz.log' 2>&1", bin, dir, dir, common, dir, dir);
    TCHECK(rc == 0, "--freeze 1 exit %d", rc);
    snprintf(p, sizeof p, "%s/fz/last.safetensors", dir);
    TCHECK(vt_test_ckpt_diff(q, p, "conv1.", &c) == 0 && c.ntensors == 1, "conv1 moved under --freeze 1");
    TCHECK(vt_test_ckpt_diff(q, p, "conv2.", &c) == 0 && c.ntensors == 1, "conv2 moved under --freeze 1");
    TCHECK(vt_test_ckpt_diff(q, p, "conv3.", &c) > 0, "conv3 did not train under --freeze 1");

    /* another class count: the head re-initialised; strict refuses */
    rc = vt_test_sh("'%s' train '%s/data3' --out '%s/c3' %s --epochs 1 --seed 2 --init "
                    "'%s/src/last.safetensors' > '%s/c3.log' 2>&1", bin, dir, dir, common, dir, dir);
    TCHECK(rc == 0, "3 classes exit %d", rc);
    snprintf(p, sizeof p, "%s/c3.log", dir);
    log = vt_test_slurp(p, NULL);
    /* a vidtrain checkpoint names its classes: its 2 are 2 of the 3, their rows by name */
    TCHECK(log && strstr(log, "init: fc: rows by class name: 2 of 3 classes from the file's 2, "
                              "the others initialised"), "head message:\n%s", log ? log : "");
    free(log);
    rc = vt_test_sh("'%s' train '%s/data3' --out '%s/c3s' %s --epochs 1 --init-strict --init "
                    "'%s/src/last.safetensors' > '%s/c3s.log' 2>&1", bin, dir, dir, common, dir, dir);
    snprintf(p, sizeof p, "%s/c3s.log", dir);
    log = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && log && strstr(log, "--init-strict") && strstr(log, "src/last.safetensors"),
           "strict: exit %d:\n%s", rc, log ? log : "");
    free(log);

    /* bad inputs */
    vt_test_write_file(dir, "notckpt.pth", "this is not a checkpoint\n");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bad' %s --epochs 1 --init '%s/notckpt.pth' "
                    "> '%s/bad.log' 2>&1", bin, dir, dir, common, dir, dir);
    snprintf(p, sizeof p, "%s/bad.log", dir);
    log = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && log && strstr(log, "notckpt.pth"), "not a checkpoint: exit %d:\n%s", rc,
           log ? log : "");
    free(log);
    rc = vt_test_sh("VIDTRAIN_WEIGHTS_URL=file:///nonexistent-mirror VIDTRAIN_CACHE='%s/cache' "
                    "'%s' train '%s/data' --out '%s/pre' %s --epochs 1 --pretrained r3d18 "
                    "> '%s/pre.log' 2>&1", dir, bin, dir, dir, common, dir);
    snprintf(p, sizeof p, "%s/pre.log", dir);
    log = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && log && strstr(log, "file:///nonexistent-mirror/r3d_18-b3b3357e.pth") &&
               strstr(log, "/cache/r3d_18-b3b3357e.pth"), "no network: exit %d:\n%s", rc,
           log ? log : "");
    free(log);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/fz9' %s --freeze 9 --init x.pth > '%s/fz9.log' "
                    "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 2, "--freeze 9 on tiny: exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/pr' --pretrained r3d18 --model tiny > "
                    "'%s/pr.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 2, "--pretrained r3d18 --model tiny: exit %d", rc);

    /* eval of a fine-tuned run */
    rc = vt_test_sh("'%s' eval '%s/ft1' '%s/data' --split test -q > '%s/eval.log' 2>&1", bin, dir,
                    dir, dir);
    TCHECK(rc == 0, "eval exit %d", rc);
    return vt_test_done("test_finetune");
}
