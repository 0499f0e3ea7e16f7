/*
 * test_eval_splits.c: data splits and the tower policy through the commands a user runs,
 * on real encoded videos (`vidtrain synth`) and a briefly trained model:
 *   - `eval --split train` evaluates the train videos: its counts are the files on disk
 *     (counted here with opendir, not with vidtrain's scanner), and eval says which split
 *     and how many videos;
 *   - the same dataset assembled from symbolic links (a split folder, class folders and
 *     single files linked) gives the same counts and the same metrics as the real folders
 *     for every split, while a loop and a dangling link in it are reported and skipped;
 *   - a folder holding only test/ is evaluated on test by default; asking it for val is an
 *     error that lists the splits it has; train/ + test/ draws val from train with the
 *     run's --val-split, and val + train are then the train files;
 *   - --tower-split is taken by train, eval, predict, plan and bench step; --split given
 *     a policy is a usage error (2) pointing at --tower-split, in each of them;
 *   - a run folder whose config.json has the old key ("split") resumes with that policy,
 *     and the rewritten config.json uses the new key ("tower_split");
 *   - only train/ with a run trained without --val-split has nothing held out: eval's
 *     default is an error pointing at --split train; with --val-dir, `eval RUN` evaluates
 *     every video of that folder, as validation did;
 *   - --split all counts a file that is in two splits (a link from test/ into train/) once;
 *   - a run trained on list files (--lists, UCF101's form) is evaluated on their test list;
 *     another DIR with list files of its own on those (eval --lists); a DIR whose videos
 *     the run's lists do not name is refused with a hint at --lists.
 */
#include "tests/apputil.h"

/* Paths here are short scratch paths; GCC cannot know that and warns that 4 KiB of
 * folder plus a file name may not fit in 4 KiB. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static const cJSON *head0(const cJSON *j, const char *k) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "heads"), 0), k);
}

/* The options of every eval here (a test's own come after, so they win): one tower, 2
 * clips per video, quiet. */
#define EVAL_OPTS "--devices cpu:1 --batch 6 --clips-per-video 2 --crops 1 -q --workers 1"
#define K 2

static const char *g_bin;
static char g_dir[4096];

/* `vidtrain eval RUN DATA ARGS` into DIR/LOG.log; returns the exit code. *out gets
 * RUN/eval.json when the command succeeded (else NULL). */
static int eval(cJSON **out, const char *data, const char *args, const char *log) {
    char p[4200];
    snprintf(p, sizeof p, "%s/run/eval.json", g_dir);
    remove(p);
    int rc = vt_test_sh("'%s' eval '%s/run' '%s/%s' " EVAL_OPTS " %s > '%s/%s.log' 2>&1", g_bin,
                        g_dir, g_dir, data, args, g_dir, log);
    if (out)
        *out = rc == 0 ? vt_test_read_json(p) : NULL;
    return rc;
}

/* The log DIR/LOG.log holds the fixed string s. */
static int log_has(const char *log, const char *s) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s.log", g_dir, log);
    char *text = vt_test_slurp(p, NULL);
    int yes = text && strstr(text, s) != NULL;
    if (!yes)
        fprintf(stderr, "%s does not hold \"%s\"\n", p, s);
    free(text);
    return yes;
}

static void check_counts(const cJSON *j, int videos, const char *split, const char *what) {
    TCHECK(j != NULL, "%s: eval.json", what);
    if (!j)
        return;
    const cJSON *s = cJSON_GetObjectItem(j, "split");
    TCHECK(cJSON_IsString(s) && !strcmp(s->valuestring, split), "%s: split %s, want %s", what,
           cJSON_IsString(s) ? s->valuestring : "?", split);
    TCHECK(num(j, "videos") == videos, "%s: videos %g, on disk %d", what, num(j, "videos"), videos);
    TCHECK(num(j, "clips") == (double)videos * K, "%s: clips %g, want %d", what, num(j, "clips"),
           videos * K);
}

/* Same videos through the same weights: the same loss, metrics and confusion, exactly. */
static void check_same(const cJSON *a, const cJSON *b, const char *what) {
    TCHECK(a && b, "%s: both eval.json", what);
    if (!a || !b)
        return;
    TCHECK(num(a, "videos") == num(b, "videos") && num(a, "clips") == num(b, "clips"),
           "%s: videos %g/%g clips %g/%g", what, num(a, "videos"), num(b, "videos"),
           num(a, "clips"), num(b, "clips"));
    const char *keys[4] = {"loss_mean", "clip_top1", "video_top1", "confusion"};
    for (int k = 0; k < 4; k++)
        TCHECK(head0(a, keys[k]) && cJSON_Compare(head0(a, keys[k]), head0(b, keys[k]), 1),
               "%s: head 0 %s differs between the linked and the real folders", what, keys[k]);
}

int main(void) {
    g_bin = vt_test_bin("test_eval_splits");
    if (!g_bin)
        return VT_TEST_SKIP;
    const char *bin = g_bin;
    char p[4200];
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("eval_splits"));
    const char *dir = g_dir;
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 3 --val 2 --test 3 --frames 12 "
                                   "--size 40x32") == 0, "synth");
    const char *splits[3] = {"train", "val", "test"};
    int nfiles[3];
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/data/%s", dir, splits[s]);
        nfiles[s] = vt_test_count_class_files(p, NULL);
    }
    TCHECK(nfiles[0] == 9 && nfiles[1] == 6 && nfiles[2] == 9, "files %d %d %d", nfiles[0],
           nfiles[1], nfiles[2]);

    /* A briefly trained model on two towers 3:1: the counts do not depend on how good it is. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --clip 4x32 --batch 4 --epochs 1 "
                      "--max-steps 2 -q --workers 1 --devices cpu:2 --tower-split manual:3,1 "
                      "> '%s/train.log' 2>&1", bin, dir, dir, dir) == 0, "train --tower-split");
    snprintf(p, sizeof p, "%s/run/config.json", dir);
    cJSON *cfg = vt_test_read_json(p);
    const cJSON *ts = cJSON_GetObjectItem(cfg, "tower_split");
    TCHECK(cJSON_IsString(ts) && !strcmp(ts->valuestring, "manual:3,1") &&
               !cJSON_GetObjectItem(cfg, "split"), "config.json writes tower_split, not split");
    cJSON_Delete(cfg);

    /* Every data split is evaluable; eval says which and how many. */
    cJSON *real[3] = {NULL, NULL, NULL};
    for (int s = 0; s < 3; s++) {
        char args[64], log[64], want[128];
        snprintf(args, sizeof args, "--split %s", splits[s]);
        snprintf(log, sizeof log, "eval_%s", splits[s]);
        TCHECK(eval(&real[s], "data", args, log) == 0, "eval --split %s", splits[s]);
        check_counts(real[s], nfiles[s], splits[s], log);
        snprintf(want, sizeof want, "split: %s, %d videos (chosen with --split)", splits[s], nfiles[s]);
        TCHECK(log_has(log, want), "eval says the split it chose");
    }
    TCHECK(eval(NULL, "data", "--tower-split manual:1,3 --devices cpu:2", "eval_default") == 0,
           "eval --tower-split");
    TCHECK(log_has("eval_default", "split: test, 9 videos (the default"), "default: test");

    /* `eval RUN`: the folder RUN trained on, the same figures as naming it; where that folder
     * is gone, an error that says so and how to name one */
    cJSON *named = NULL, *implied = NULL;
    TCHECK(eval(&named, "data", "", "eval_named") == 0, "eval RUN DATA");
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    remove(p);
    TCHECK(vt_test_sh("'%s' eval '%s/run' " EVAL_OPTS " > '%s/eval_implied.log' 2>&1", bin, dir,
                      dir) == 0, "eval RUN");
    implied = vt_test_read_json(p);
    check_same(implied, named, "eval RUN against eval RUN DATA");
    char want[4300];
    snprintf(want, sizeof want, "%s/data", dir);
    const cJSON *jd = cJSON_GetObjectItem(implied, "data");
    TCHECK(cJSON_IsString(jd) && !strcmp(jd->valuestring, want), "eval RUN: eval.json data %s, "
           "want %s", cJSON_IsString(jd) ? jd->valuestring : "?", want);
    cJSON_Delete(named);
    cJSON_Delete(implied);
    int grc = vt_test_sh("cd '%s' && mv data data.away && { '%s' eval run " EVAL_OPTS
                         " > eval_gone.log 2>&1; r=$?; mv data.away data; exit $r; }", dir, bin);
    TCHECK(grc == 1 && log_has("eval_gone", "data', which is not a folder now; name the videos "
                                            "to evaluate: vidtrain eval run DIR"),
           "eval RUN whose training folder is gone: exit %d", grc);

    /* The same dataset from links: train/ is a link, test/'s class folders are links, val/'s
     * files are links; plus a loop, a dangling file link and a dangling folder link. */
    TCHECK(vt_test_sh("cd '%s' && mkdir -p links/test links/val && ln -s \"$PWD/data/train\" links/train && "
                      "for c in data/test/*; do ln -s \"$PWD/$c\" links/test/; done && "
                      "for c in data/val/*; do n=$(basename \"$c\"); mkdir links/val/$n; "
                      "for f in \"$c\"/*; do ln -s \"$PWD/$f\" links/val/$n/; done; done && "
                      "ln -s .. links/val/move_left/loop && "
                      "ln -s nowhere.mp4 links/val/move_left/gone.mp4 && "
                      "ln -s /nonexistent-vidtrain links/ghost", dir) == 0, "make the links");
    for (int s = 0; s < 3; s++) {
        char args[64], log[64], what[64];
        snprintf(args, sizeof args, "--split %s", splits[s]);
        snprintf(log, sizeof log, "links_%s", splits[s]);
        snprintf(what, sizeof what, "linked %s", splits[s]);
        cJSON *j = NULL;
        TCHECK(eval(&j, "links", args, log) == 0, "eval of the linked folders, %s", splits[s]);
        check_counts(j, nfiles[s], splits[s], what);
        check_same(j, real[s], what);
        TCHECK(log_has(log, "links/val/move_left/gone.mp4: symbolic link to 'nowhere.mp4' leads "
                            "nowhere (dangling link); skipped"), "dangling link reported");
        TCHECK(log_has(log, "links/val/move_left/loop: leads back to a folder above it (a loop)"),
               "loop reported");
        TCHECK(log_has(log, "links/ghost: symbolic link to '/nonexistent-vidtrain' leads nowhere"),
               "dangling folder link reported");
        cJSON_Delete(j);
    }

    /* Only test/: evaluated on test by default; val is an error naming what there is. */
    TCHECK(vt_test_sh("mkdir -p '%s/onlytest' && ln -s '%s/data/test' '%s/onlytest/test'", dir, dir,
                      dir) == 0, "only test/");
    cJSON *j = NULL;
    TCHECK(eval(&j, "onlytest", "", "onlytest") == 0, "eval of a folder with only test/");
    check_counts(j, nfiles[2], "test", "only test/");
    check_same(j, real[2], "only test/");
    cJSON_Delete(j);
    TCHECK(log_has("onlytest", "split: test, 9 videos (the default"), "only test/: says test");
    int rc = eval(NULL, "onlytest", "--split val", "onlytest_val");
    TCHECK(rc == 1, "--split val on only test/ exits %d, want 1", rc);
    TCHECK(log_has("onlytest_val", "has no val split (it has: test 9)"), "the error lists test");

    /* train/ + test/: val is the run's --val-split share of train (default 0.1: per class
     * of 3, one video), train the rest. */
    TCHECK(vt_test_sh("mkdir -p '%s/tt' && ln -s '%s/data/train' '%s/tt/train' && "
                      "ln -s '%s/data/test' '%s/tt/test'", dir, dir, dir, dir, dir) == 0, "train/ + test/");
    cJSON *jv = NULL, *jt = NULL;
    TCHECK(eval(&jv, "tt", "--split val", "tt_val") == 0, "train/ + test/: --split val");
    TCHECK(eval(&jt, "tt", "--split train", "tt_train") == 0, "train/ + test/: --split train");
    TCHECK(jv && jt && num(jv, "videos") >= 1 && num(jv, "videos") + num(jt, "videos") == nfiles[0],
           "val %g + train %g = the %d train files", jv ? num(jv, "videos") : -1,
           jt ? num(jt, "videos") : -1, nfiles[0]);
    TCHECK(log_has("tt_val", "val is the run's --val-split share of train"), "says where val is from");
    cJSON_Delete(jv);
    cJSON_Delete(jt);
    for (int s = 0; s < 3; s++)
        cJSON_Delete(real[s]);

    /* --split POLICY: a usage error pointing at --tower-split, in every command. */
    char video[4200];
    snprintf(video, sizeof video, "%s/data/test/move_left", dir);
    const char *cmds[5] = {"train '%s/data' --out '%s/bad'", "eval '%s/run' '%s/data'",
                           "predict '%s/run' '%s/x.mp4'", "plan", "bench step"};
    for (int c = 0; c < 5; c++) {
        char cmd[512], full[9000];
        snprintf(cmd, sizeof cmd, cmds[c], dir, dir);
        snprintf(full, sizeof full, "'%s' %s --split equal > '%s/hint.log' 2>&1", bin, cmd, dir);
        rc = vt_test_sh("%s", full);
        TCHECK(rc == 2, "%s --split equal exits %d, want 2", cmd, rc);
        TCHECK(log_has("hint", "--split equal: the tower policy option is --tower-split: use "
                               "--tower-split equal"), "%s: the hint", cmd);
    }
    /* --tower-split in the others (train and eval above). */
    TCHECK(vt_test_sh("'%s' plan --model tiny --clip 4x32x32 --batch 4 --classes 3 --devices cpu:2 "
                      "--tower-split manual:3,1 > '%s/plan.log' 2>&1", bin, dir) == 0, "plan --tower-split");
    TCHECK(log_has("plan", "policy manual"), "plan uses the policy");
    TCHECK(vt_test_sh("'%s' bench step --model tiny --clip 4x16x16 --batch 4 --devices cpu:2 "
                      "--tower-split manual:1,1 --steps 1 --warmup 0 > '%s/bench.log' 2>&1", bin,
                      dir) == 0, "bench step --tower-split");
    TCHECK(log_has("bench", "clips/s"), "bench step ran");
    TCHECK(vt_test_sh("f=$(ls '%s'/* | head -1) && '%s' predict '%s/run' \"$f\" --devices cpu:2 "
                      "--tower-split equal --clips-per-video 2 > '%s/predict.log' 2>&1", video, bin,
                      dir, dir) == 0, "predict --tower-split");
    rc = vt_test_sh("'%s' eval '%s/run' '%s/data' --tower-split fastest > '%s/badpol.log' 2>&1", bin,
                    dir, dir, dir);
    TCHECK(rc == 2 && log_has("badpol", "--tower-split 'fastest': expected"), "bad policy: %d", rc);

    /* A run folder from before the rename: config.json says "split". Resuming reads it. */
    TCHECK(vt_test_sh("cp -r '%s/run' '%s/oldrun' && sed -i 's/\"tower_split\":[[:space:]]*"
                      "\"manual:3,1\"/\"split\": \"manual:1,3\"/' '%s/oldrun/config.json' && "
                      "grep -q '\"split\": \"manual:1,3\"' '%s/oldrun/config.json' && "
                      "! grep -q tower_split '%s/oldrun/config.json'", dir, dir, dir, dir, dir) == 0,
           "an old-style config.json");
    TCHECK(vt_test_sh("'%s' train --resume '%s/oldrun' --max-steps 3 -q > '%s/resume.log' 2>&1", bin,
                      dir, dir) == 0, "resume an old run");
    snprintf(p, sizeof p, "%s/oldrun/config.json", dir);
    cfg = vt_test_read_json(p);
    ts = cJSON_GetObjectItem(cfg, "tower_split");
    TCHECK(cJSON_IsString(ts) && !strcmp(ts->valuestring, "manual:1,3"),
           "the old key's policy was read and is written under the new key: %s",
           cJSON_IsString(ts) ? ts->valuestring : "(none)");
    TCHECK(cfg && !cJSON_GetObjectItem(cfg, "split"), "the old key is not written again");
    cJSON_Delete(cfg);
    TCHECK(log_has("resume", "split plan: policy manual"), "the resumed run splits by the old key");

    /* Only train/ and a run without --val-split: nothing held out, so no default split. */
    TCHECK(vt_test_sh("mkdir -p '%s/tronly' && ln -s '%s/data/train' '%s/tronly/train' && "
                      "'%s' train '%s/tronly' --out '%s/run0' --val-split 0 --clip 4x32 --batch 4 "
                      "--epochs 1 --max-steps 1 -q --workers 1 > '%s/train0.log' 2>&1", dir, dir,
                      dir, bin, dir, dir, dir) == 0, "train on only train/, --val-split 0");
    rc = vt_test_sh("'%s' eval '%s/run0' '%s/tronly' -q > '%s/tronly.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 1 && log_has("tronly", "has no test or val videos to evaluate (it has: train 9); "
                                        "pass --split train"), "only train: %d", rc);

    /* and a run of it that validated on --val-dir: `eval RUN` scores what validation did,
     * every video of that folder (test/'s 9), not an error pointing at --split train */
    TCHECK(vt_test_sh("'%s' train '%s/tronly' --val-dir '%s/data/test' --out '%s/runvd' "
                      "--clip 4x32 --batch 4 --epochs 1 --max-steps 1 -q --workers 1 > "
                      "'%s/trainvd.log' 2>&1", bin, dir, dir, dir, dir) == 0,
           "train on only train/, --val-dir data/test");
    rc = vt_test_sh("'%s' eval '%s/runvd' " EVAL_OPTS " > '%s/evalvd.log' 2>&1", bin, dir, dir);
    snprintf(p, sizeof p, "%s/runvd/eval.json", dir);
    cJSON *vd = rc == 0 ? vt_test_read_json(p) : NULL;
    TCHECK(rc == 0 && log_has("evalvd", "split: all, 9 videos (the --val-dir folder the run "
                                        "validated on, all of it)"),
           "eval RUN of a --val-dir run: %d", rc);
    check_counts(vd, 9, "all", "eval RUN of a --val-dir run");
    cJSON_Delete(vd);

    /* --split all over train/ + test/ where a test video is a link to a train video (a
     * leak): every file once, 18, not 19 */
    TCHECK(vt_test_sh("cd '%s' && mkdir -p dup/test && ln -s \"$PWD/data/train\" dup/train && "
                      "for c in data/test/*; do n=$(basename \"$c\"); mkdir dup/test/$n; for f in "
                      "\"$c\"/*; do ln -s \"$PWD/$f\" dup/test/$n/; done; done && "
                      "f=$(ls data/train/move_left | head -1) && "
                      "ln -s \"$PWD/data/train/move_left/$f\" dup/test/move_left/leak_$f", dir)
               == 0, "dup/");
    j = NULL;
    TCHECK(eval(&j, "dup", "--split all", "dup_all") == 0, "eval --split all of dup/");
    TCHECK(j && num(j, "videos") == nfiles[0] + nfiles[2], "--split all counts a leaked file "
           "once: %g videos, %d files", j ? num(j, "videos") : -1, nfiles[0] + nfiles[2]);
    TCHECK(log_has("dup_all", "evaluated once"), "--split all says it");
    cJSON_Delete(j);

    /* --lists: a run trained on list files (UCF101's form) evaluates their test list by
     * default; another DIR with its own list files is evaluated on those (--lists); one
     * whose videos the run's lists do not name is refused with the hint. lists1
     * over train/'s 9 videos: 2 per class to train, 1 to test; lists2 over test/'s 9: 2 per
     * class to test. */
    TCHECK(vt_test_sh("cd '%s' && mk() { src=$1 out=$2 ntr=$3 nte=$4; mkdir -p $out.d; i=0; "
                      "for c in $(ls $src); do i=$((i+1)); ln -s \"$PWD/$src/$c\" $out.d/$c; "
                      "echo \"$i $c\" >> $out/classInd.txt; "
                      "ls $src/$c | head -n $ntr | sed \"s|^|$c/|; s|$| $i|\" >> $out/trainlist01.txt; "
                      "ls $src/$c | tail -n $nte | sed \"s|^|$c/|\" >> $out/testlist01.txt; done; }; "
                      "mkdir lists1 lists2 && mk data/train lists1 2 1 && mk data/test lists2 1 2",
                      dir) == 0, "list files");
    TCHECK(vt_test_sh("'%s' train '%s/lists1.d' --lists '%s/lists1' --out '%s/runl' --clip 4x32 "
                      "--batch 4 --epochs 1 --max-steps 1 -q --workers 1 > '%s/trainl.log' 2>&1",
                      bin, dir, dir, dir, dir) == 0, "train --lists");
    rc = vt_test_sh("'%s' eval '%s/runl' '%s/lists1.d' " EVAL_OPTS " > '%s/evall.log' 2>&1", bin,
                    dir, dir, dir);
    snprintf(p, sizeof p, "%s/runl/eval.json", dir);
    j = rc == 0 ? vt_test_read_json(p) : NULL;
    check_counts(j, 3, "test", "the run's lists");
    cJSON_Delete(j);
    remove(p);
    rc = vt_test_sh("'%s' eval '%s/runl' '%s/lists2.d' --lists '%s/lists2' " EVAL_OPTS
                    " > '%s/evall2.log' 2>&1", bin, dir, dir, dir, dir);
    j = rc == 0 ? vt_test_read_json(p) : NULL;
    check_counts(j, 6, "test", "eval --lists");
    cJSON_Delete(j);
    remove(p);
    /* lists3.d: test/'s videos under other names, which the run's lists do not name */
    TCHECK(vt_test_sh("cd '%s' && for c in $(ls data/test); do mkdir -p lists3.d/$c; for f in "
                      "data/test/$c/*; do ln -s \"$PWD/$f\" lists3.d/$c/x_$(basename $f); done; "
                      "done", dir) == 0, "lists3.d");
    rc = vt_test_sh("'%s' eval '%s/runl' '%s/lists3.d' " EVAL_OPTS " > '%s/evall3.log' 2>&1",
                    bin, dir, dir, dir);
    TCHECK(rc == 1 && !vt_file_exists(p) && log_has("evall3", "name none of") &&
               log_has("evall3", "give its own with --lists PATH"),
           "another DIR on the run's lists: exit %d", rc);
    return vt_test_done("test_eval_splits");
}
