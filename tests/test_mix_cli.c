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

#include "tests/runutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

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
    vt_test_split_runs(bin, dir, "mixup + CutMix", common, mix, 3, 10); /* cut mid-epoch 2 */
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
    vt_test_ckpt_cmp c;
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/sw' %s %s --mixup-switch-prob 1 "
                    "--devices cpu:1 > '%s/sw.log' 2>&1", bin, dir, dir, common, mix, dir);
    TCHECK(rc == 0, "--mixup-switch-prob 1 exit %d", rc);
    double d = vt_test_run_diff(dir, "one", "sw", &c);
    TCHECK(d > 1e-4, "--mixup-switch-prob changed nothing: %g", d);

    /* the same with repeated augmentation and random erasing: the loader's cursor counts
     * the K clips of a sample, the boxes come from each clip's key */
    const char *more = "--repeat-aug 2 --random-erase 0.5";
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/ra' %s %s %s --devices cpu:1 > '%s/ra.log' "
                    "2>&1 && '%s' train '%s/data' --out '%s/racut' %s %s %s --devices cpu:1 "
                    "--max-steps 5 > '%s/racut.log' 2>&1 && '%s' train --resume '%s/racut' -q > "
                    "'%s/racut2.log' 2>&1", bin, dir, dir, common, mix, more, dir, bin, dir, dir,
                    common, mix, more, dir, bin, dir, dir);
    TCHECK(rc == 0, "--repeat-aug runs exit %d", rc);
    d = vt_test_run_diff(dir, "ra", "racut", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > 10, "--repeat-aug 2 --random-erase: resumed run "
           "differs from the whole one: %g", d);
    TCHECK(vt_test_run_diff(dir, "ra", "one", &c) > 1e-4,
           "--repeat-aug and --random-erase changed nothing");
    const double rep = vt_test_run_num(dir, "ra", "repeat_aug"),
                 erase = vt_test_run_num(dir, "ra", "random_erase");
    TCHECK(rep == 2 && erase == 0.5, "config.json: repeat_aug %g, random_erase %g", rep, erase);

    const double mixup = vt_test_run_num(dir, "one", "mixup"),
                 cutmix = vt_test_run_num(dir, "one", "cutmix"),
                 sw = vt_test_run_num(dir, "one", "mix_switch");
    TCHECK(fabs(mixup - 0.8) < 1e-6 && cutmix == 1 && sw == 0.5 &&
               vt_test_run_num(dir, "plain", "mixup") == 0,
           "config.json: mixup %g cutmix %g mix_switch %g", mixup, cutmix, sw);

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
