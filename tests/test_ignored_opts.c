/*
 * test_ignored_opts.c: an option that would change nothing in the run it is given to is
 * refused with why (exit 2), never taken without a word:
 *   - --drop-path P and --layer-decay F act on a transformer's blocks: for a CNN (tiny,
 *     x3d_xs) both were accepted and ignored, and the fine-tuning line even named the
 *     layer decay; a transformer (vit_test) still takes them (it fails later, on the
 *     missing dataset, not on the option);
 *   - --mixup-switch-prob P without both --mixup and --cutmix chooses nothing: refused;
 *     so are --clips-per-video N beside --seconds-per-clip S (which implies auto: the one
 *     given first was dropped), --gamma/--step-epochs with another --sched than step,
 *     --init-strict without --init or --pretrained, --fold/--list-format without --lists
 *     and --fold with a Kinetics list (as scan refuses them);
 *   - --precise-bn K for a model without batch norm (tiny_nobn, vit_test) recomputes
 *     nothing: it was taken (forwarding up to 2048 clips a validation for nothing), and
 *     colour jitter turned it on by default for them too; now a warning, and config.json
 *     says 0; a model with batch norm keeps it;
 *   - --momentum M with AdamW (which the transformers' recipe picks) was ignored; now
 *     refused, and still taken with --optim sgd; so is --nesterov with AdamW, RMSprop or
 *     --momentum 0 (--no-nesterov, which asks for what they do, is taken);
 *   - an option given at its default value is given: --gamma 0.1, --momentum 0.9 and
 *     --mixup-switch-prob 0.5 were taken in silence where another value was refused (the
 *     checks asked whether a value differed from its default, not whether it was given);
 *   - --val-split F and --group on a folder with its own val/, or beside --val-dir, draw
 *     nothing: refused (as scan refuses them); so is --group beside --val-split 0;
 *   - --frame-rate on a folder of video files only (it times frame folders' frames);
 *   - --drop-path 0 and --layer-decay 1 for a CNN: given, so refused like other values;
 *   - --warmup and --momentum with --sched onecycle (its own rise and cycled momentum),
 *     --strict-splits with --no-leak-check;
 *   - with no validation videos (--val-split 0, no val/ or test split): --val-clips,
 *     --val-crops, --eval-every, --patience, --min-clips; with no val or test video:
 *     --strict-splits, --no-leak-check;
 *   - --sync-bn, --no-sync-bn, --freeze-bn, --no-freeze-bn for a model without batch norm;
 *     --tower-split for one tower; --precise-bn beside frozen batch norm (it recomputes
 *     none of its statistics); --checkpoint-act (any mode) for a model without transformer
 *     blocks, with that refusal alone (it was preceded by a warning that "on" changes
 *     nothing, as if taken);
 *   - --freeze N or --freeze-bn from scratch (no --init, --pretrained) warns: the frozen
 *     layers keep their random initialisation;
 *   - videos a --labels file has no row for are counted ('without a label: N'), not only
 *     missing from the split counts;
 *   - a class with no training video (only in val) is named in a warning (the model
 *     cannot learn it; it was listed with a count of 0 and nothing more);
 *   - --label-smoothing on a dataset whose every head is multi-label (BCE) smooths
 *     nothing: a warning, and config.json's smoothing 0 (the transformers' default 0.1
 *     was recorded and named in the recipe line for such a set too).
 */
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* train with args on a folder that does not exist: the exit code, stderr in dir/e.err */
static int train(const char *bin, const char *dir, const char *args) {
    return vt_test_sh("'%s' train '%s/nodata' --out '%s/run' -q %s > /dev/null 2> '%s/e.err'",
                      bin, dir, dir, args, dir);
}

int main(void) {
    const char *bin = vt_test_bin("test_ignored_opts");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], err[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("ignored_opts"));
    snprintf(err, sizeof err, "%s/e.err", dir);
    static const char *const cnn[] = {"--model tiny --drop-path 0.2",
                                      "--model x3d_xs --drop-path 0.1",
                                      "--model tiny --layer-decay 0.5",
                                      "--model r3d18 --layer-decay 0.75 --init w.pth"};
    for (size_t i = 0; i < sizeof cnn / sizeof *cnn; i++) {
        int rc = train(bin, dir, cnn[i]);
        printf("%-40s exit %d\n", cnn[i], rc);
        TCHECK(rc == 2 && vt_test_file_has(err, "no transformer blocks"),
               "%s: exit %d, want 2 naming why",
               cnn[i], rc);
    }
    static const char *const sw[][2] = {
        {"--mixup-switch-prob 0.3", "give both --mixup A and --cutmix B"},
        {"--cutmix 1 --mixup-switch-prob 0.3", "give both --mixup A and --cutmix B"},
        {"--mixup 0.8 --mixup-switch-prob 1", "give both --mixup A and --cutmix B"},
        {"--clips-per-video 3 --seconds-per-clip 5", "give one"},
        {"--seconds-per-clip 5 --clips-per-video 3", "give one"},
        {"--gamma 0.5", "not with --sched cosine"},
        {"--sched const --step-epochs 3", "not with --sched const"},
        {"--init-strict", "give one of them"},
        {"--fold 2", "says how --lists is read"},
        {"--list-format ucf101", "says how --lists is read"},
        {"--lists l --list-format kinetics --fold 1", "a Kinetics CSV has one split column"},
        /* given at the default value is given: never inferred from a value that differs */
        {"--gamma 0.1", "not with --sched cosine"},
        {"--step-epochs=10", "not with --sched cosine"},
        {"--mixup 0.8 --mixup-switch-prob 0.5", "give both --mixup A and --cutmix B"},
        {"--model vit_test --momentum 0.9", "AdamW (the transformers' recipe) has no momentum"},
        {"--optim adamw --momentum 0.9", "AdamW has no momentum"},
        {"--model vit_test --nesterov", "not with AdamW (the transformers' recipe)"},
        {"--optim rmsprop --nesterov", "not with RMSprop"},
        {"--momentum 0 --nesterov", "not with --momentum 0"},
        /* at their defaults too: the check read the value (0, 1), not whether it was given */
        {"--drop-path 0", "no transformer blocks"},
        {"--model x3d_xs --layer-decay 1", "no transformer blocks"},
        /* OneCycle has its own rise and cycles the momentum; the check skips no leak */
        {"--sched onecycle --warmup 1", "not with --warmup"},
        {"--sched onecycle --momentum 0.9", "not with --momentum"},
        {"--strict-splits --no-leak-check", "--no-leak-check skips that check"}};
    for (size_t i = 0; i < sizeof sw / sizeof *sw; i++) {
        int rc = train(bin, dir, sw[i][0]);
        printf("%-40s exit %d\n", sw[i][0], rc);
        TCHECK(rc == 2 && vt_test_file_has(err, sw[i][1]), "%s: exit %d, want 2 naming why",
               sw[i][0], rc);
    }
    /* freezing from scratch keeps random layers (or initial BN statistics) for good: a
     * warning (it was taken in silence; the fine-tuning line even said "frozen") */
    static const char *const fz[][2] = {{"--freeze 1", "the frozen layers keep their random"},
                                        {"--freeze-bn", "their initial statistics"}};
    for (size_t i = 0; i < sizeof fz / sizeof *fz; i++) {
        int rc = train(bin, dir, fz[i][0]);
        TCHECK(rc != 2 && vt_test_file_has(err, fz[i][1]),
               "%s from scratch: exit %d, want a warning",
               fz[i][0], rc);
    }
    int frc = train(bin, dir, "--freeze 1 --init w.pth");
    TCHECK(!vt_test_file_has(err, "without --init"), "--freeze with --init warned (exit %d)", frc);
    static const char *const fine[] = {"--sched step --gamma 0.5 --step-epochs 3",
                                       "--clips-per-video auto --seconds-per-clip 5",
                                       "--nesterov", "--model vit_test --no-nesterov",
                                       "--optim rmsprop --momentum 0.5"};
    for (size_t i = 0; i < sizeof fine / sizeof *fine; i++) {
        int rc = train(bin, dir, fine[i]);
        TCHECK(rc != 2, "%s refused: exit %d", fine[i], rc);
    }
    int rc = train(bin, dir, "--mixup 0.8 --cutmix 1 --mixup-switch-prob 0.3");
    TCHECK(rc != 2, "--mixup-switch-prob with both refused: exit %d", rc);
    rc = train(bin, dir, "--model vit_test --drop-path 0.1 --layer-decay 0.75");
    TCHECK(rc != 2 && !vt_test_file_has(err, "no transformer blocks"),
           "a transformer's --drop-path/--layer-decay refused: exit %d", rc);
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 2 --val 1 --test 0 --frames 12") == 0,
           "synth");
    static const struct {
        const char *args;
        int want, warn; /* config.json's precise_bn; a warning */
    } pbn[] = {{"--model tiny_nobn --precise-bn 2", 0, 1},
               {"--model vit_test --contrast 0.8", 0, 0}, /* the default's: no warning */
               {"--model tiny --precise-bn 2", 2, 0}};
    for (size_t i = 0; i < sizeof pbn / sizeof *pbn; i++) {
        rc = vt_test_sh("'%s' train '%s/data' --out '%s/pbn%zu' --clip 4x32 --batch 3 --epochs 1 "
                        "--max-steps 1 -q --devices cpu:1 %s > /dev/null 2> '%s/e.err'", bin,
                        dir, dir, i, pbn[i].args, dir);
        TCHECK(rc == 0, "%s: exit %d", pbn[i].args, rc);
        char p[4300];
        snprintf(p, sizeof p, "%s/pbn%zu/config.json", dir, i);
        cJSON *c = vt_test_read_json(p);
        const cJSON *v = c ? cJSON_GetObjectItem(c, "precise_bn") : NULL;
        int got = cJSON_IsNumber(v) ? v->valueint : -1;
        cJSON_Delete(c);
        printf("%-40s precise_bn %d%s\n", pbn[i].args, got,
               vt_test_file_has(err, "no batch norm") ? ", warned" : "");
        TCHECK(got == pbn[i].want, "%s: precise_bn %d, want %d", pbn[i].args, got, pbn[i].want);
        TCHECK(vt_test_file_has(err, "no batch norm") == pbn[i].warn, "%s: warning %s", pbn[i].args,
               pbn[i].warn ? "missing" : "where none is due");
    }
    /* the batch-norm switches for a model without batch norm switched nothing, nor did a
     * tower policy for one tower */
    static const char *const tw[][2] = {
        {"--model tiny_nobn --no-sync-bn", "--no-sync-bn: tiny_nobn has no batch norm"},
        {"--tower-split equal", "one tower takes the whole batch"},
        {"--freeze-bn --precise-bn 2", "precise BN recomputes none"},
        {"--checkpoint-act off", "no transformer blocks to recompute"},
        {"--checkpoint-act on", "no transformer blocks to recompute"}};
    for (size_t i = 0; i < sizeof tw / sizeof *tw; i++) {
        rc = vt_test_sh("'%s' train '%s/data' --out '%s/tw%zu' --clip 4x32 --batch 3 --epochs 1 "
                        "--max-steps 1 -q --devices cpu:1 %s > /dev/null 2> '%s/e.err'", bin, dir,
                        dir, i, tw[i][0], dir);
        TCHECK(rc == 2 && vt_test_file_has(err, tw[i][1]), "%s: exit %d, want 2 naming why",
               tw[i][0], rc);
        /* the refusal alone: "on" was first warned of as taken ("it changes nothing") */
        TCHECK(!vt_test_file_has(err, "changes nothing"), "%s: a warning before the refusal",
               tw[i][0]);
    }
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/mom' --model vit_test --clip 4x32 --batch 3 "
                    "--epochs 1 --max-steps 1 -q --devices cpu:1 --momentum 0.5 > /dev/null 2> "
                    "'%s/e.err'", bin, dir, dir, dir);
    printf("--model vit_test --momentum 0.5 (AdamW): exit %d\n", rc);
    TCHECK(rc == 2 && vt_test_file_has(err, "AdamW (the transformers' recipe) has no momentum"),
           "--momentum with AdamW: exit %d, want 2 naming why", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/mom2' --model vit_test --clip 4x32 --batch 3 "
                    "--epochs 1 --max-steps 1 -q --devices cpu:1 --momentum 0.5 --optim sgd > "
                    "/dev/null 2> '%s/e.err'", bin, dir, dir, dir);
    TCHECK(rc == 0, "--momentum with --optim sgd: exit %d", rc);
    /* a class with no training video (a val folder train lacks): its output never learns;
     * it was listed with a count of 0 and nothing more. Now a warning naming it. */
    rc = vt_test_sh("cd '%s' && rm -rf data0 && cp -a data data0 && mkdir data0/val/zz_valonly && "
                    "cp \"$(ls -d data0/val/*/* | head -n 1)\" data0/val/zz_valonly/ && '%s' "
                    "train data0 --out z0 --clip 4x32 --batch 3 --epochs 1 --max-steps 1 -q "
                    "--devices cpu:1 > /dev/null 2> e.err", dir, bin);
    TCHECK(rc == 0 && vt_test_file_has(err, "1 class(es) without a training video: zz_valonly"),
           "a class without training videos: exit %d, want 0 and a warning naming it", rc);
    /* --val-split and --group on a folder with a val/ of its own, or beside --val-dir:
     * nothing is drawn from train, and they were taken in silence */
    static const char *const vs[][2] = {
        {"--val-split 0.3", "has val videos of its own"},
        {"--group auto", "has val videos of its own"},
        {"--val-split 0.3 --val-dir data/val", "names the validation videos"},
        /* --group beside --val-split 0: no draw to keep a recording on one side of; taken
         * in silence (the check above let --val-split 0 through) */
        {"--group auto --val-split 0", "--val-split 0 draws nothing"},
        /* a folder of video files only: --frame-rate times frame folders' frames */
        {"--frame-rate 12", "data holds none"}};
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++) {
        rc = vt_test_sh("cd '%s' && '%s' train data --out vs%zu --clip 4x32 --batch 3 --epochs 1 "
                        "--max-steps 1 -q --devices cpu:1 %s > /dev/null 2> e.err", dir, bin, i,
                        vs[i][0]);
        TCHECK(rc == 2 && vt_test_file_has(err, vs[i][1]),
               "%s on a folder with val/: exit %d, want 2 naming "
               "why", vs[i][0], rc);
    }
    /* DIR's train split alone with --val-split 0: no validation, and no val or test video
     * for the leak check; what shapes them (and --group, which shapes no draw) was taken */
    static const char *const nv[][2] = {
        {"--group none", "--val-split 0 draws nothing"},
        {"--val-clips 2", "--val-clips acts on validation"},
        {"--eval-every 1", "--eval-every acts on validation"},
        {"--patience 0", "--patience acts on validation"},
        {"--no-leak-check", "the leak check compares val and test videos"}};
    for (size_t i = 0; i < sizeof nv / sizeof *nv; i++) {
        rc = vt_test_sh("cd '%s' && '%s' train data/train --out nv%zu --clip 4x32 --batch 3 "
                        "--epochs 1 --max-steps 1 -q --devices cpu:1 --val-split=0 %s > /dev/null "
                        "2> e.err", dir, bin, i, nv[i][0]);
        TCHECK(rc == 2 && vt_test_file_has(err, nv[i][1]),
               "%s --val-split=0 (no validation): exit %d, want 2 naming why", nv[i][0], rc);
    }
    /* a labels file that leaves videos out: they were dropped from every split with only
     * the split counts to show it; now a line counts them */
    rc = vt_test_sh("cd '%s/data' && (echo path,label; for f in $(ls -d */*/* | head -n 4); do "
                    "echo \"$f,x${#f}\"; done) > ../part.csv && cd .. && '%s' train data --labels "
                    "part.csv --out pl --clip 4x32 --batch 3 --epochs 1 --max-steps 1 --devices "
                    "cpu:1 > pl.log 2>&1; n=$(ls -d data/*/*/* | wc -l); grep -q \"without a "
                    "label: $((n - 4)) \" pl.log", dir, bin);
    TCHECK(rc == 0, "a labels file without rows for some videos: no 'without a label' count "
           "(see %s/pl.log)", dir);
    /* every video tagged from {a, b, c}: one multi-label head */
    rc = vt_test_sh("cd '%s/data' && (echo path,tags; i=0; for f in */*/*; do case $((i %% 2)) "
                    "in 0) t='a;b';; 1) t=c;; esac; echo \"$f,$t\"; i=$((i + 1)); done) > "
                    "'%s/tags.csv'", dir, dir);
    TCHECK(rc == 0, "tags.csv");
    static const struct {
        const char *args;
        int warn;
    } bce[] = {{"--label-smoothing 0.2", 1}, {"--model vit_test", 0}};
    for (size_t i = 0; i < sizeof bce / sizeof *bce; i++) {
        rc = vt_test_sh("'%s' train '%s/data' --labels '%s/tags.csv' --out '%s/bce%zu' --clip "
                        "4x32 --batch 3 --epochs 1 --max-steps 1 -q --devices cpu:1 %s > "
                        "/dev/null 2> '%s/e.err'", bin, dir, dir, dir, i, bce[i].args, dir);
        TCHECK(rc == 0, "%s on a multi-label set: exit %d", bce[i].args, rc);
        char p[4300];
        snprintf(p, sizeof p, "%s/bce%zu/config.json", dir, i);
        cJSON *c = vt_test_read_json(p);
        const cJSON *v = c ? cJSON_GetObjectItem(c, "smoothing") : NULL;
        double got = cJSON_IsNumber(v) ? v->valuedouble : -1;
        cJSON_Delete(c);
        printf("multi-label, %-24s smoothing %g%s\n", bce[i].args, got,
               vt_test_file_has(err, "does not smooth") ? ", warned" : "");
        TCHECK(got == 0, "%s on a multi-label set: config.json's smoothing %g", bce[i].args, got);
        TCHECK(vt_test_file_has(err, "does not smooth") == bce[i].warn, "%s: warning %s",
               bce[i].args,
               bce[i].warn ? "missing" : "where none is due");
    }
    return vt_test_done("test_ignored_opts");
}
