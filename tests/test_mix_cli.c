/*
 * test_mix_cli.c: `vidtrain train --mixup --cutmix` as a user runs it, on a small
 * synthetic set (real encoded videos):
 *   - docs/design.md §3.1 with mixing on: the batch is mixed whole, from the draw of
 *     (seed, step), before the towers slice it, so two CPU towers split 3:1 end with one
 *     tower's weights BIT FOR BIT (exact sums: the same clips and soft targets reach
 *     every split);
 *   - mixing is really on: the same run without it ends elsewhere, and so does another
 *     --mixup-switch-prob (a run that ignored the options would pass the first check);
 *   - a run stopped after 3 steps and resumed ends bit for bit where the whole run does
 *     (the draws come from the step in the checkpoint, no RNG stream);
 *   - with --repeat-aug 2 --random-erase 0.5 too, stopped mid-epoch (step 5 of 4 an epoch)
 *     and resumed: bit for bit the whole run;
 *   - the run's recipe line calls a CNN's recipe the CNN defaults plus the mixing, never
 *     VideoMAE's (a transformer's recipe: that wording once told CNN users otherwise);
 *   - config.json holds mixup, cutmix, mix_switch, repeat_aug and random_erase; --balance
 *     loss is refused with why.
 */
#include <unistd.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static double cfg_num(const char *dir, const char *run, const char *key) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/config.json", dir, run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    double r = v && cJSON_IsNumber(v) ? v->valuedouble : -1;
    cJSON_Delete(c);
    return r;
}

/* Checkpoints RUN_A and RUN_B: 0 when bit for bit the same (every tensor), else the
 * distance (-1: not comparable). */
static double diff(const char *dir, const char *a, const char *b, vt_test_ckpt_cmp *c) {
    char p[4300], q[4300];
    snprintf(p, sizeof p, "%s/%s/last.safetensors", dir, a);
    snprintf(q, sizeof q, "%s/%s/last.safetensors", dir, b);
    return vt_test_ckpt_diff(q, p, "", c);
}

int main(void) {
    const char *bin = vt_test_bin("test_mix_cli");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("mix_cli"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 4 --val 1 --test 1 --frames 16") == 0,
           "synth");
    /* 12 training videos, batch 6: 2 steps an epoch, 3 epochs */
    const char *common = "--clip 4x32 --stride 2 --batch 6 --val-clips 1 --workers 1 --epochs 3 "
                         "--seed 5 --label-smoothing 0.1 -q";
    const char *mix = "--mixup 0.8 --cutmix 1.0";
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/one' %s %s --devices cpu:1 > "
                        "'%s/one.log' 2>&1", bin, dir, dir, common, mix, dir);
    TCHECK(rc == 0, "1 tower exit %d", rc);
    {
        char lp[4300];
        snprintf(lp, sizeof lp, "%s/one.log", dir);
        char *l = vt_test_slurp(lp, NULL);
        char *r = l ? strstr(l, "recipe: ") : NULL;
        if (r && strchr(r, '\n'))
            *strchr(r, '\n') = 0; /* that line only */
        TCHECK(r && !strncmp(r, "recipe: the CNN defaults (sgd", 29) && !strstr(r, "VideoMAE") &&
                   strstr(r, "mixup 0.8, CutMix 1"),
               "a CNN's recipe line: %.200s", r ? r : "(none)");
        free(l);
    }
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/two' %s %s --devices cpu:2 --tower-split "
                    "manual:3,1 > '%s/two.log' 2>&1", bin, dir, dir, common, mix, dir);
    TCHECK(rc == 0, "2 towers exit %d", rc);
    vt_test_ckpt_cmp c;
    double d = diff(dir, "one", "two", &c);
    printf("mixup + CutMix, 1 tower vs 2 towers (3:1): max relative difference %.3g over %d "
           "tensors, %s\n", d, c.ntensors, c.exact ? "bit for bit" : "NOT bitwise");
    TCHECK(d == 0 && c.exact && c.ntensors > 10, "1 vs 2 towers: %g over %d tensors", d,
           c.ntensors);

    rc = vt_test_sh("'%s' train '%s/data' --out '%s/plain' %s --devices cpu:1 > '%s/plain.log' "
                    "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "unmixed run exit %d", rc);
    d = diff(dir, "one", "plain", &c);
    TCHECK(d > 1e-4, "mixing changed nothing: %g", d); /* a step's update is ~1e-2 */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/sw' %s %s --mixup-switch-prob 1 "
                    "--devices cpu:1 > '%s/sw.log' 2>&1", bin, dir, dir, common, mix, dir);
    TCHECK(rc == 0, "--mixup-switch-prob 1 exit %d", rc);
    d = diff(dir, "one", "sw", &c);
    TCHECK(d > 1e-4, "--mixup-switch-prob changed nothing: %g", d);

    /* stopped after step 3 (mid-epoch 2), resumed */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/cut' %s %s --devices cpu:1 --max-steps 3 "
                    "> '%s/cut.log' 2>&1 && '%s' train --resume '%s/cut' -q > '%s/cut2.log' 2>&1",
                    bin, dir, dir, common, mix, dir, bin, dir, dir);
    TCHECK(rc == 0, "stop and resume exit %d", rc);
    d = diff(dir, "one", "cut", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > 10, "resumed run differs from the whole one: %g", d);

    /* the same with repeated augmentation and random erasing: the loader's cursor counts
     * the K clips of a sample, the boxes come from each clip's key */
    const char *more = "--repeat-aug 2 --random-erase 0.5";
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/ra' %s %s %s --devices cpu:1 > '%s/ra.log' "
                    "2>&1 && '%s' train '%s/data' --out '%s/racut' %s %s %s --devices cpu:1 "
                    "--max-steps 5 > '%s/racut.log' 2>&1 && '%s' train --resume '%s/racut' -q > "
                    "'%s/racut2.log' 2>&1", bin, dir, dir, common, mix, more, dir, bin, dir, dir,
                    common, mix, more, dir, bin, dir, dir);
    TCHECK(rc == 0, "--repeat-aug runs exit %d", rc);
    d = diff(dir, "ra", "racut", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > 10, "--repeat-aug 2 --random-erase: resumed run "
           "differs from the whole one: %g", d);
    TCHECK(diff(dir, "ra", "one", &c) > 1e-4, "--repeat-aug and --random-erase changed nothing");
    TCHECK(cfg_num(dir, "ra", "repeat_aug") == 2 && cfg_num(dir, "ra", "random_erase") == 0.5,
           "config.json: repeat_aug %g, random_erase %g", cfg_num(dir, "ra", "repeat_aug"),
           cfg_num(dir, "ra", "random_erase"));

    TCHECK(fabs(cfg_num(dir, "one", "mixup") - 0.8) < 1e-6 && cfg_num(dir, "one", "cutmix") == 1 &&
               cfg_num(dir, "one", "mix_switch") == 0.5 && cfg_num(dir, "plain", "mixup") == 0,
           "config.json: mixup %g cutmix %g mix_switch %g", cfg_num(dir, "one", "mixup"),
           cfg_num(dir, "one", "cutmix"), cfg_num(dir, "one", "mix_switch"));

    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bal' %s %s --balance loss > '%s/bal.log' "
                    "2>&1", bin, dir, dir, common, mix, dir);
    char p[4300];
    snprintf(p, sizeof p, "%s/bal.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(rc == 2 && log && strstr(log, "--balance loss"), "--balance loss: exit %d:\n%s", rc,
           log ? log : "");
    free(log);
    return vt_test_done("test_mix_cli");
}
