/*
 * test_twin.c: whole training runs are PyTorch-equal, step by step. vidtrain trains tiny
 * on real encoded videos (the hard `--preset motion` set, small) with --dump; the PyTorch
 * twin (tests/oracle/torch_twin.py parity) rebuilds the model, torch.optim.SGD or AdamW,
 * torch's own LR schedulers, and replays every step in float64 from vidtrain's state before it on
 * vidtrain's batch: the parameter updates, momentum buffers, BN running statistics,
 * losses, learning rates and momenta, and the eval-mode outputs of the last validation
 * must agree (tolerances, and why, in the script). The runs:
 *   - the default recipe (SGD Nesterov, warm-up then cosine) on one tower;
 *   - two towers split 3:2 with sync-BN, OneCycle (momentum cycled) and label smoothing:
 *     the multi-tower loop against PyTorch on one device;
 *   - on an imbalanced copy, --balance logit (two towers) and --balance loss (one);
 *   - x3d_xs (pytorchvideo's X3D, head dropout 0.5) on the default recipe, 4 steps;
 *   - vit_test fine-tuned with the transformer recipe (AdamW, layer decay, head x10,
 *     weight-decay exemptions, drop path, mixup and CutMix) on two towers, against
 *     torch.optim.AdamW's groups and timm's soft targets.
 * It also checks that the dump says where every clip came from, within its video.
 */
#include <math.h>
#include <string.h>

#include "tests/apputil.h"

#define VT_MIN(a, b) ((a) < (b) ? (a) : (b))

/* The twin's replay of dump, its report in log and printed: it must say "parity: OK" and,
 * when also is given, that too. */
static void replayed(const char *py, const char *src, const char *dump, const char *log,
                     const char *also, const char *what) {
    int rc = vt_test_sh("'%s' '%s/tests/oracle/torch_twin.py' parity '%s' > '%s' 2>&1", py, src,
                        dump, log);
    char *t = vt_test_slurp(log, NULL);
    printf("%s", t ? t : "");
    TCHECK(rc == 0 && t && strstr(t, "parity: OK") && (!also || strstr(t, also)),
           "%s: PyTorch-equal (%s)", what, log);
    free(t);
}

static void check_where(const char *dump, int crop) {
    char p[4300];
    snprintf(p, sizeof p, "%s/train.jsonl", dump);
    char *s = vt_test_slurp(p, NULL);
    TCHECK(s != NULL, "%s written", p);
    int lines = 0, bad = 0, flips = 0, clips = 0, jittered = 0;
    for (char *save = NULL, *l = s ? strtok_r(s, "\n", &save) : NULL; l;
         l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *w = cJSON_GetObjectItem(j, "where");
        lines++;
        for (int i = 0; i < cJSON_GetArraySize(w); i++) {
            const cJSON *e = cJSON_GetArrayItem(w, i);
            int start = cJSON_GetArrayItem(e, 0)->valueint;
            int ss = cJSON_GetArrayItem(e, 1)->valueint;
            int x0 = cJSON_GetArrayItem(e, 2)->valueint, y0 = cJSON_GetArrayItem(e, 3)->valueint;
            /* short side jittered in [crop*8/7, crop*10/7]; a crop origin inside it */
            bad += start < 0 || ss < (crop * 8 + 6) / 7 || ss > (crop * 10 + 6) / 7 || x0 < 0 ||
                   y0 < 0 || VT_MIN(x0, y0) > ss - crop;
            flips += cJSON_GetArrayItem(e, 4)->valueint;
        }
        /* `vidtrain train`'s colour jitter defaults: contrast in [0.4, 1], brightness
         * within +-0.1 (float32 values printed: a hair of slack) */
        const cJSON *col = cJSON_GetObjectItem(j, "color");
        for (int i = 0; i < cJSON_GetArraySize(col); i++, clips++) {
            double ct = cJSON_GetArrayItem(cJSON_GetArrayItem(col, i), 0)->valuedouble;
            double br = cJSON_GetArrayItem(cJSON_GetArrayItem(col, i), 1)->valuedouble;
            bad += ct < 0.4 - 1e-6 || ct > 1 + 1e-6 || fabs(br) > 0.1 + 1e-6;
            jittered += ct != 1.0 || br != 0.0;
        }
        cJSON_Delete(j);
    }
    free(s);
    TCHECK(lines > 0, "%s: %d steps", p, lines);
    TCHECK(bad == 0, "%d clips with a start, short side or crop outside their ranges", bad);
    TCHECK(flips == 0, "--no-flip: %d flipped clips", flips);
    TCHECK(clips > 0 && jittered == clips, "colour jitter on %d of %d clips (the defaults jitter "
           "every clip)", jittered, clips);
}

int main(void) {
    const char *bin = vt_test_bin("test_twin");
    if (!bin)
        return VT_TEST_SKIP;
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", ".");
    if (vt_test_sh("'%s' -c 'import torch, numpy' 2>/dev/null", py) != 0) {
        fprintf(stderr, "test_twin: %s cannot import torch: skipped\n", py);
        return VT_TEST_SKIP;
    }
    char dir[4096], dump[4200], log[4400], what[64];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("twin"));
    /* 4 classes x 6 training videos of the hard preset: textured, moving camera, mixed
     * sizes, rates and codecs. A quarter of train validates (6 videos, 3 clips each). */
    TCHECK(vt_test_synth(bin, dir, "--preset motion --classes 4 --train 6 --test 1 --seed 5 "
                         "--no-h264") == 0, "synth");

    /* 1. The default optimiser and schedule; 8x32 clips, batch 5 (an uneven last batch:
     * 18 videos), 3 epochs = 12 steps, warm-up 1 epoch. */
    snprintf(dump, sizeof dump, "%s/dump1", dir);
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run1' --clip 8x32 --stride 2 --batch 5 "
                        "--epochs 3 --warmup 1 --val-split 0.25 --no-flip --workers 2 -q "
                        "--dump '%s' > '%s/train1.log' 2>&1", bin, dir, dir, dump, dir);
    TCHECK(rc == 0, "train --dump (see %s/train1.log)", dir);
    check_where(dump, 32);
    snprintf(log, sizeof log, "%s/twin1.log", dir);
    replayed(py, src, dump, log, NULL, "default recipe");

    /* 2. Two towers 3:2 with sync-BN, OneCycle, label smoothing 0.1 vs PyTorch on one
     * device. */
    snprintf(dump, sizeof dump, "%s/dump2", dir);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run2' --clip 8x32 --stride 2 --batch 5 "
                    "--epochs 3 --optim sgd --nesterov --lr 0.05 --sched onecycle "
                    "--label-smoothing 0.1 --devices cpu:2 --tower-split manual:3,2 --sync-bn "
                    "--val-split 0.25 --no-flip --workers 2 -q --dump '%s' > '%s/train2.log' 2>&1",
                    bin, dir, dir, dump, dir);
    TCHECK(rc == 0, "train --dump on two towers (see %s/train2.log)", dir);
    snprintf(log, sizeof log, "%s/twin2.log", dir);
    replayed(py, src, dump, log, NULL, "two towers, sync-BN, OneCycle");

    /* 3, 4. The imbalance modes on an imbalanced copy (the first class keeps 2 of its 6
     * training videos): --balance logit (log priors added to the logits the loss sees) on
     * two towers 3:2, and --balance loss (class-weighted mean, with label smoothing) on
     * one: the twin's F.cross_entropy gets the same priors and weights from dump.json. */
    rc = vt_test_sh("cp -r '%s/data' '%s/imb' && cd '%s/imb/train' && c=$(ls | head -1) && "
                    "ls \"$c\" | tail -n +3 | while read f; do rm \"$c/$f\"; done", dir, dir, dir);
    TCHECK(rc == 0, "imbalanced copy");
    static const char *const bal[2][2] = {
        {"logit", "--balance logit --devices cpu:2 --tower-split manual:3,2"},
        {"loss", "--balance loss --label-smoothing 0.1"}};
    for (int b = 0; b < 2; b++) {
        snprintf(dump, sizeof dump, "%s/dump_%s", dir, bal[b][0]);
        rc = vt_test_sh("'%s' train '%s/imb' --out '%s/run_%s' --clip 8x32 --stride 2 --batch 5 "
                        "--epochs 3 --warmup 1 --val-split 0.25 --no-flip --workers 2 -q %s "
                        "--dump '%s' > '%s/train_%s.log' 2>&1", bin, dir, dir, bal[b][0],
                        bal[b][1], dump, dir, bal[b][0]);
        TCHECK(rc == 0, "train --dump --balance %s (see %s/train_%s.log)", bal[b][0], dir,
               bal[b][0]);
        snprintf(log, sizeof log, "%s/dump_%s/dump.json", dir, bal[b][0]);
        char *t = vt_test_slurp(log, NULL);
        TCHECK(t && !strstr(t, b == 0 ? "\"logit_adjust\":\tnull" : "\"class_weight\":\tnull"),
               "dump.json carries the --balance %s terms", bal[b][0]);
        free(t);
        snprintf(log, sizeof log, "%s/twin_%s.log", dir, bal[b][0]);
        snprintf(what, sizeof what, "--balance %s", bal[b][0]);
        replayed(py, src, dump, log, NULL, what);
    }

    /* 5. X3D (depthwise convolutions, squeeze-excitation, swish, the 2048-wide head) on
     * the default recipe with pytorchvideo's head dropout 0.5: 4x32 clips, batch 5, one
     * epoch = 4 steps. Its twin is pytorchvideo's architecture (torch_x3d.py) with
     * vidtrain's dropout masks replayed from each step's drop_seed (a twin drawing its
     * own masks missed by NMSE ~1 from step 1). The last squeeze-excitation's bias is
     * ill-conditioned on step 4 (PyTorch's float32 step as far off as vidtrain's: the
     * twin excuses it by name). Longer X3D runs on these flat synthetic clips meet
     * float32's ReLU-sign flips (check_step_conditioning.py); 4 steps stay clear. */
    snprintf(dump, sizeof dump, "%s/dump_x3d", dir);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run_x3d' --model x3d_xs --clip 4x32 "
                    "--stride 2 --batch 5 --epochs 1 --seed 3 --dropout 0.5 --val-split 0.25 "
                    "--no-flip --workers 2 -q --dump '%s' > '%s/train_x3d.log' 2>&1", bin, dir,
                    dir, dump, dir);
    TCHECK(rc == 0, "train --model x3d_xs --dump (see %s/train_x3d.log)", dir);
    snprintf(log, sizeof log, "%s/twin_x3d.log", dir);
    replayed(py, src, dump, log, NULL, "x3d_xs");

    /* 6. A transformer fine-tuned with its recipe, on two towers 3:2: vit_test (VideoMAE's
     * ViT, 2 blocks) from a checkpoint of its own, so AdamW (wd 0.05), layer decay 0.75,
     * the head at x10, no decay on 1-D tensors and biases, label smoothing 0.1, drop path
     * 0.1 (block 1's branches; the twin replays vidtrain's per-clip draw from each step's
     * drop_seed), and VideoMAE's mixup 0.8 / CutMix 1.0 (the twin takes the mixed batch and
     * builds timm's soft targets from the step's lambda: a batch reversed against the
     * dump's dominant labels missed by a loss 3e-3 off and NMSE 0.57); random erasing and
     * RandAugment are in the dumped batch (the loader's work). The twin builds
     * torch.optim.AdamW's groups by VideoMAE's and timm's published rules (torch_twin.py
     * param_groups), never from vidtrain's numbers: a layer multiplier one power off puts
     * a step at NMSE 0.1, one LayerNorm gain decayed at 0.01, drop path left out (at 0.5)
     * at 1.4. */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run_vit0' --model vit_test --clip 8x32 "
                    "--stride 2 --batch 5 --epochs 1 --seed 3 --val-split 0.25 --no-flip "
                    "--workers 2 -q > '%s/train_vit0.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 0, "train --model vit_test (see %s/train_vit0.log)", dir);
    snprintf(dump, sizeof dump, "%s/dump_vit", dir);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run_vit' --model vit_test --clip 8x32 "
                    "--stride 2 --batch 5 --epochs 2 --seed 3 --val-split 0.25 --no-flip "
                    "--init '%s/run_vit0/best.safetensors' --mixup 0.8 --cutmix 1.0 "
                    "--random-erase 0.25 --randaug rand-m7-n4-mstd0.5-inc1 --devices cpu:2 "
                    "--tower-split manual:3,2 --workers 2 -q --dump '%s' > '%s/train_vit.log' "
                    "2>&1", bin, dir, dir, dir, dump, dir);
    TCHECK(rc == 0, "train --model vit_test --init --dump (see %s/train_vit.log)", dir);
    snprintf(log, sizeof log, "%s/train.jsonl", dump);
    char *t = vt_test_slurp(log, NULL);
    TCHECK(t && strstr(t, "\"mix\":[1,") && strstr(t, "\"mix\":[2,"),
           "the 8 steps drew both mixup and CutMix (%s)", log);
    free(t);
    snprintf(log, sizeof log, "%s/twin_vit.log", dir);
    replayed(py, src, dump, log,
             "adamw wd 0.05, lr multipliers [0.421875, 0.5625, 0.75, 1.0, 10.0]",
             "vit_test fine-tuning recipe");

    /* --dump replays from the first step: refused with --resume. */
    rc = vt_test_sh("'%s' train --resume '%s/run1' --dump '%s/x' > /dev/null 2>&1", bin, dir, dir);
    TCHECK(rc == 2, "--dump with --resume is a usage error, got %d", rc);
    return vt_test_done("test_twin");
}
