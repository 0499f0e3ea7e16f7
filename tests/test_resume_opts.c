/*
 * test_resume_opts.c: `train --resume RUN` with options given, on a small synthetic set.
 * The options override the saved configuration (cmd_train's --help), never silently:
 *   - --input-norm other than the run's is refused (its weights learnt on the saved
 *     statistics; config.json would say the new ones for the whole run, and eval of its
 *     earlier checkpoints would read them), and config.json keeps the old;
 *   - --init and --pretrained are refused (a resume continues its checkpoint and never
 *     loaded them, yet config.json recorded them);
 *   - --model other than the run's is refused before anything is written;
 *   - a resume that fails to start after writing them (its checkpoint cut short) leaves
 *     config.json, plan.txt and leaks.json as they were, so the run stays resumable;
 *   - a dataset whose classes changed since (a class folder renamed: the same count, so
 *     the checkpoint fits, but every class index moved; or a class added) is refused,
 *     naming the difference, and the run's files stay as they were;
 *   - a dataset with the same classes but other samples (a training video removed) is
 *     named in a warning with the counts, then and now (it continued in silence, as if
 *     exact, its epoch cursor past the new epoch's end);
 *   - --out another folder than the run's is refused before anything is made (the run
 *     continued there, split over two folders); --out naming the run itself is fine;
 *   - --devices given on resume replaces the run's tower set: its other device options
 *     (--threads of a cpu run) are not applied to the new towers;
 *   - --time-budget and --budget-once on resume are refused (a budget is planned against
 *     the clock of the run's start; it was recorded and unused); --epochs given to a budget
 *     run's resume drops its budget (the budget's plan was kept, --epochs ignored);
 *   - a saved option that no longer applies (the run's --threads on cpu-ref towers, its
 *     --gamma after --sched cosine given now, its --class-weights after --balance
 *     sampler, values an older vidtrain took before its checks) is dropped with a note,
 *     never a refusal over an option nobody typed on this command line;
 *   - another value that changes the run's numbers (--lr) is named, old and new, in one
 *     warning; one that changes no number (--workers) is not; a plain --resume (its
 *     dataset named by another spelling of the path) warns of nothing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

int main(void) {
    const char *bin = vt_test_bin("test_resume_opts");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("resume_opts"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 4 --val 1 --test 1 --frames 16") == 0,
           "synth");
    /* 12 videos, batch 6: 2 steps an epoch; --lr 0.05 is given so the warning's old value
     * is known */
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --clip 4x32 --stride 2 --batch 6 "
                        "--val-clips 1 --workers 1 --epochs 2 --lr 0.05 --max-steps 1 --seed 5 "
                        "-q --devices cpu:1 > '%s/start.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 0, "start exit %d", rc);

    rc = vt_test_sh("'%s' train --resume '%s/run' --input-norm imagenet --max-steps 2 -q > "
                    "'%s/norm.log' 2>&1", bin, dir, dir);
    printf("--resume --input-norm imagenet (the run's: kinetics): exit %d\n", rc);
    TCHECK(rc == 2, "--resume with another --input-norm: exit %d, want 2", rc);
    TCHECK(vt_test_file_has_in(dir, "norm.log", "which a resumed run keeps"), "no reason given");
    char p[4300];
    snprintf(p, sizeof p, "%s/run/config.json", dir);
    cJSON *c = vt_test_read_json(p);
    const cJSON *n = c ? cJSON_GetObjectItem(c, "input_norm") : NULL;
    TCHECK(cJSON_IsString(n) && !strcmp(n->valuestring, "kinetics"),
           "config.json's input_norm changed by a refused resume");
    cJSON_Delete(c);

    rc = vt_test_sh("'%s' train --resume '%s/run' --init '%s/run/last.safetensors' --max-steps 2 "
                    "-q > '%s/init.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 2, "--resume with --init (never loaded): exit %d, want 2", rc);

    /* another --model: its checkpoint holds the run's model: refused before anything is
     * written (it once rewrote config.json, then failed on the checkpoint: every later
     * --resume failed the same way) */
    TCHECK(vt_test_sh("cd '%s/run' && sha256sum config.json plan.txt leaks.json > ../sums",
                      dir) == 0, "checksums");
    rc = vt_test_sh("'%s' train --resume '%s/run' --model x3d_xs --max-steps 2 -q > "
                    "'%s/model.log' 2>&1", bin, dir, dir);
    TCHECK(rc == 2 && vt_test_file_has_in(dir, "model.log",
           "continues a tiny: not with --model x3d_xs"),
           "--resume --model x3d_xs of a tiny run: exit %d, want 2 naming it", rc);
    TCHECK(vt_test_sh("cd '%s/run' && sha256sum --quiet -c ../sums", dir) == 0,
           "a refused --resume changed the run's config.json, plan.txt or leaks.json");
    /* a resume that fails to start after it wrote them (a copy of the run whose checkpoint
     * is cut short, resumed with another --lr) leaves the run as it found it */
    TCHECK(vt_test_sh("cp -a '%s/run' '%s/cut' && truncate -s 1000 '%s/cut/last.safetensors' && "
                      "cd '%s/cut' && sha256sum config.json plan.txt leaks.json > ../sums2", dir,
                      dir, dir, dir) == 0, "a copy with a cut checkpoint");
    rc = vt_test_sh("'%s' train --resume '%s/cut' --lr 0.09 --max-steps 2 -q > '%s/cut.log' 2>&1",
                    bin, dir, dir);
    TCHECK(rc == 1, "--resume of a cut checkpoint: exit %d, want 1", rc);
    TCHECK(vt_test_sh("cd '%s/cut' && sha256sum --quiet -c ../sums2", dir) == 0,
           "a failed --resume changed the run's config.json, plan.txt or leaks.json");

    /* the dataset's classes renamed since (the first class folder, in every split, to a
     * name sorted last): the count is the same, so the checkpoint fits, but every class
     * index moved; it resumed in silence, training each output on another class and
     * recording the new names as the run's. Refused, naming the difference, the run
     * untouched; so is a class added. */
    TCHECK(vt_test_sh("cp -a '%s/data' '%s/ren' && cd '%s/ren' && c=$(ls train | head -n 1) && "
                      "for s in train val test; do [ ! -d $s/$c ] || mv $s/$c $s/zz_renamed; "
                      "done && cp -a '%s/data' '%s/add' && mkdir '%s/add/train/zz_added' && "
                      "cp \"$(ls -d '%s'/data/train/*/* | head -n 1)\" '%s/add/train/zz_added/'",
                      dir, dir, dir, dir, dir, dir, dir, dir) == 0, "the renamed copies");
    static const char *const moved[][2] = {{"ren", "new: zz_renamed"}, {"add", "new: zz_added"}};
    for (int i = 0; i < 2; i++) {
        rc = vt_test_sh("'%s' train --resume '%s/run' '%s/%s' --max-steps 2 -q > '%s/cls.log' 2>&1",
                        bin, dir, dir, moved[i][0], dir);
        printf("--resume on the data with its classes changed (%s): exit %d\n", moved[i][0], rc);
        TCHECK(rc == 1 && vt_test_file_has_in(dir, "cls.log", moved[i][1]) &&
                   vt_test_file_has_in(dir, "cls.log", "a resumed run keeps them"),
               "--resume on a dataset with other classes (%s): exit %d, want 1 naming them",
               moved[i][0], rc);
        TCHECK(vt_test_sh("cd '%s/run' && sha256sum --quiet -c ../sums", dir) == 0,
               "a --resume refused for its classes changed the run's files");
    }

    /* the same classes, another training set (a training video removed since): the run
     * claimed to continue exactly, its epoch cursor past the new epoch's end, in silence.
     * Said in a warning naming the counts; the validation set, untouched, is not named. */
    TCHECK(vt_test_sh("cp -a '%s/data' '%s/less' && rm \"$(ls -d '%s'/less/train/*/* | head -n "
                      "1)\" && cp -a '%s/run' '%s/runset'", dir, dir, dir, dir, dir) == 0,
           "the copy with a training video less");
    rc = vt_test_sh("'%s' train --resume '%s/runset' '%s/less' --max-steps 2 -q > '%s/set.log' "
                    "2>&1", bin, dir, dir, dir);
    printf("--resume on the data with a training video less: exit %d\n", rc);
    TCHECK(rc == 0 && vt_test_file_has_in(dir, "set.log", "the training set is not the one") &&
               vt_test_file_has_in(dir, "set.log", "(12 samples then, 11 now"),
           "--resume on another training set: exit %d, want 0 and a warning naming it (see "
           "%s/set.log)", rc, dir);
    TCHECK(!vt_test_file_has_in(dir, "set.log", "the validation set"),
           "the validation set, unchanged, is named");

    /* --out another folder: the continuation went there (config.json, the report; the
     * checkpoints only when due), neither folder holding the run whole, and the end line
     * named a best.safetensors never written there. Refused before anything is made;
     * --out naming the run itself (another spelling) is the run's folder. */
    rc = vt_test_sh("'%s' train --resume '%s/runset' --out '%s/fork' --max-steps 3 -q > "
                    "'%s/fork.log' 2>&1", bin, dir, dir, dir);
    snprintf(p, sizeof p, "%s/fork", dir);
    TCHECK(rc == 2 && vt_test_file_has_in(dir, "fork.log", "a resumed run continues in its own "
                                                           "folder") && access(p, F_OK) != 0,
           "--resume RUN --out OTHER: exit %d, want 2 before OTHER is made (see %s/fork.log)",
           rc, dir);
    rc = vt_test_sh("'%s' train --resume '%s/runset' '%s/less' --out '%s/./runset/' --max-steps 3 "
                    "-q > '%s/fork.log' 2>&1", bin, dir, dir, dir, dir);
    TCHECK(rc == 0, "--resume RUN --out RUN (another spelling): exit %d (see %s/fork.log)", rc,
           dir);

    rc = vt_test_sh("'%s' train --resume '%s/run' --lr 0.07 --workers 2 --max-steps 2 -q > "
                    "'%s/lr.log' 2>&1", bin, dir, dir);
    TCHECK(rc == 0, "--resume --lr 0.07 exit %d", rc);
    TCHECK(vt_test_file_has_in(dir, "lr.log", "warning: --resume") && vt_test_file_has_in(dir,
           "lr.log", "lr 0.05 -> 0.07"),
           "a changed --lr is not named in a warning");
    /* "workers N -> M" in the warning; the cpu memory line names the loader's "workers," */
    TCHECK(!vt_test_file_has_in(dir, "lr.log", "workers "), "--workers (no number changes) named");

    /* another tower set: --devices given drops the run's other device options (its
     * --threads 1 described its cpu tower; applied to cpu-ref it was refused, an option
     * the user never gave on this command line) */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/thr' --clip 4x32 --batch 6 --epochs 2 "
                    "--max-steps 1 --devices cpu --threads 1 -q > '%s/thr.log' 2>&1 && '%s' train "
                    "--resume '%s/thr' --devices cpu-ref --max-steps 2 -q >> '%s/thr.log' 2>&1",
                    bin, dir, dir, dir, bin, dir, dir);
    TCHECK(rc == 0, "--resume --devices cpu-ref of a --threads 1 run: exit %d (see thr.log)", rc);

    /* saved options that no longer apply: the checks for options given refused them, yet
     * nobody typed them on the resuming command line. A run's --gamma after --sched cosine
     * given now, its --class-weights after --balance sampler, its --precise-bn after
     * --freeze-bn (which keeps the statistics it would recompute); and config.json of a run
     * made before the checks (edited here): --threads 2 and --backend cpu beside cpu-ref
     * towers, --mixup-switch-prob without mixing, --layer-decay and --drop-path on a CNN.
     * The resume was refused (exit 2); now each is dropped with a note and config.json
     * records what leaving it out gives. */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/old' --clip 4x32 --batch 6 --epochs 2 "
                    "--max-steps 1 --devices cpu-ref --sched step --gamma 0.5 --balance loss "
                    "--class-weights 1,2,3 -q > '%s/old.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 0, "start of the old run: exit %d (see old.log)", rc);
    snprintf(p, sizeof p, "%s/old/config.json", dir);
    c = vt_test_read_json(p);
    TCHECK(c != NULL, "old/config.json");
    static const struct {
        const char *key;
        double set, want;
    } old[] = {{"threads", 2, 0}, {"mix_switch", 0.25, 0.5}, {"layer_decay", 0.5, 1},
               {"drop_path", 0.2, 0}, {"gamma", 0.5, 0.1}, {"precise_bn", 4, 0}};
    for (size_t i = 0; c && i < sizeof old / sizeof *old; i++)
        cJSON_ReplaceItemInObject(c, old[i].key, cJSON_CreateNumber(old[i].set));
    if (c)
        cJSON_ReplaceItemInObject(c, "backend", cJSON_CreateString("cpu"));
    char *txt = c ? cJSON_Print(c) : NULL;
    FILE *f = txt ? fopen(p, "w") : NULL;
    TCHECK(f && fputs(txt, f) >= 0 && fclose(f) == 0, "writing %s", p);
    free(txt);
    cJSON_Delete(c);
    rc = vt_test_sh("'%s' train --resume '%s/old' --sched cosine --balance sampler --freeze-bn "
                    "--max-steps 2 "
                    "-q > '%s/oldres.log' 2>&1", bin, dir, dir);
    printf("--resume of a run whose saved options no longer apply: exit %d\n", rc);
    TCHECK(rc == 0, "--resume of a run with saved options that no longer apply: exit %d, want 0 "
           "(see %s/oldres.log)", rc, dir);
    static const char *const notes[] = {"run's --threads 2", "run's --backend cpu",
        "run's --step-epochs 10 --gamma 0.5", "run's --mixup-switch-prob 0.25",
        "run's --layer-decay 0.5", "run's --drop-path 0.2", "run's --class-weights 1,2,3",
        "run's --precise-bn 4"};
    for (size_t i = 0; i < sizeof notes / sizeof *notes; i++)
        TCHECK(vt_test_file_has_in(dir, "oldres.log", notes[i]) &&
               vt_test_file_has_in(dir, "oldres.log", "dropped"),
               "no note that the %s (its configuration) was dropped", notes[i]);
    c = vt_test_read_json(p);
    for (size_t i = 0; c && i < sizeof old / sizeof *old; i++) {
        const cJSON *v = cJSON_GetObjectItem(c, old[i].key);
        /* a float option reads back as its float: 0.1f is 0.10000000149 */
        TCHECK(cJSON_IsNumber(v) && fabs(v->valuedouble - old[i].want) < 1e-6,
               "config.json's %s after the resume: %g, want %g", old[i].key,
               cJSON_IsNumber(v) ? v->valuedouble : -1, old[i].want);
    }
    const cJSON *cw = c ? cJSON_GetObjectItem(c, "class_weights") : NULL;
    TCHECK(cJSON_IsString(cw) && !cw->valuestring[0], "config.json keeps the class weights");
    cJSON_Delete(c);

    /* a budget is planned against the clock of a run's start: given on resume it was
     * recorded in config.json and unused (refused now); a budget run resumed with
     * --epochs kept its budget's plan (epochs 220 where the warning said 3): the saved
     * budget is dropped and --epochs rules */
    rc = vt_test_sh("'%s' train --resume '%s/run' --time-budget 1h --max-steps 2 -q > "
                    "'%s/tb.log' 2>&1", bin, dir, dir);
    TCHECK(rc == 2 && vt_test_file_has_in(dir, "tb.log", "a resumed run keeps its length"),
           "--resume --time-budget: exit %d, want 2 naming why", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bud' --clip 4x32 --batch 6 --time-budget 20s "
                    "--max-steps 3 --devices cpu:1 -q > '%s/bud.log' 2>&1 && '%s' train --resume "
                    "'%s/bud' --epochs 2 --max-steps 4 > '%s/bud2.log' 2>&1", bin, dir, dir, dir,
                    bin, dir, dir);
    TCHECK(rc == 0 && vt_test_file_has_in(dir, "bud2.log", "2 batches of 6 per epoch, 2 epochs") &&
               vt_test_file_has_in(dir, "bud2.log", "replaced by --epochs given now"),
           "a --time-budget run resumed with --epochs 2: exit %d, or not 2 epochs with a note "
           "(see %s/bud2.log)", rc, dir);

    /* a dataset that is not there (moved since): the error says how to name its new place */
    rc = vt_test_sh("'%s' train --resume '%s/run' '%s/moved' --max-steps 2 -q > '%s/mv.log' 2>&1",
                    bin, dir, dir, dir);
    TCHECK(rc == 1 && vt_test_file_has_in(dir, "mv.log", "if it moved, name its new place"),
           "--resume on a missing dataset: exit %d, want 1 with a hint", rc);

    /* the dataset named again by another spelling of its path is no change */
    rc = vt_test_sh("'%s' train --resume '%s/run' '%s/./data' --max-steps 3 -q > '%s/plain.log' "
                    "2>&1", bin, dir, dir, dir);
    TCHECK(rc == 0, "plain --resume exit %d", rc);
    TCHECK(!vt_test_file_has_in(dir, "plain.log", "warning"), "a plain --resume warns");
    return vt_test_done("test_resume_opts");
}
