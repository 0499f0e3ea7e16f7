/*
 * test_eval_counts.c: docs/design.md §3.4 through `vidtrain eval` — with two towers and
 * an uneven split (manual 3:1), a batch size that divides nothing (7, so the last batch
 * is partial and slices round unevenly) and 3 crops, the clips and videos evaluated are
 * exactly the dataset's: videos = the files on disk (counted here with opendir, not with
 * vidtrain's scanner), clips = videos x K x crops, every confusion-matrix row sums to
 * that class's videos, and one tower gives the same counts. Classes the model does not
 * know are named and left out; a class of the model's without a video is named beside
 * the mean class accuracy. A damaged video is named in eval.json with its decode errors.
 */
#include "tests/apputil.h"

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void check_eval(const char *run_dir, int videos, int K, int crops, const char *what,
                       double *acc_out) {
    char p[4200];
    snprintf(p, sizeof p, "%s/eval.json", run_dir);
    cJSON *j = vt_test_read_json(p);
    TCHECK(j != NULL, "%s: eval.json", what);
    if (!j)
        return;
    TCHECK(num(j, "videos") == videos, "%s: videos %g, on disk %d", what, num(j, "videos"), videos);
    TCHECK(num(j, "clips") == (double)videos * K * crops, "%s: clips %g, want %d", what,
           num(j, "clips"), videos * K * crops);
    TCHECK(num(j, "expected_clips") == num(j, "clips"), "%s: expected %g", what,
           num(j, "expected_clips"));
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "heads"), 0);
    const cJSON *cm = cJSON_GetObjectItem(h, "confusion");
    const cJSON *pv = cJSON_GetObjectItem(h, "per_class_videos");
    double total = 0;
    int r = 0;
    for (const cJSON *row = cm ? cm->child : NULL; row; row = row->next, r++) {
        double rs = 0;
        for (const cJSON *c = row->child; c; c = c->next)
            rs += c->valuedouble;
        TCHECK(rs == cJSON_GetArrayItem(pv, r)->valuedouble, "%s: confusion row %d sums to %g", what,
               r, rs);
        total += rs;
    }
    TCHECK(total == videos, "%s: confusion holds %g videos", what, total);
    if (acc_out)
        *acc_out = num(j, "video_top1");
    cJSON_Delete(j);
}

static const cJSON *head0(const cJSON *j, const char *k) {
    return cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "heads"), 0), k);
}

/* Labels are matched to the model's classes by name, for the loss as for the metrics.
 * DIR/renamed holds the test videos in a flat folder plus a class "aaa_unknown" (copies
 * of two test videos) that sorts first, so every class the model knows has a dataset id
 * one higher than the model's, and the last one is past the model's classes. The outside
 * truth is the same videos in the original layout, where the ids agree: same clips in
 * the same batches through the same weights, so the same loss, metrics and confusion;
 * the unknown class's videos are left out, named and counted. */
static void check_class_ids(const char *bin, const char *dir, int ntest) {
    char p[4200];
    const char *opts = "--devices cpu:1 --batch 5 --clips-per-video 2 --crops 1 -q --workers 1";
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/data' --split test %s > '%s/evalref.log' 2>&1", bin,
                      dir, dir, opts, dir) == 0, "reference eval");
    /* 3 classes: top-5 is 100% for any finite model, and the line says so */
    TCHECK(vt_test_sh("grep -q 'video top-1 .*top-5 .*5 or fewer classes: top-5 says nothing' "
                      "'%s/evalref.log'", dir) == 0, "top-5 of 3 classes said to say nothing");
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    cJSON *ref = vt_test_read_json(p);
    TCHECK(vt_test_sh("mkdir -p '%s/renamed/aaa_unknown' '%s/alien/aaa_unknown' && "
                      "cp -r '%s/data/test/.' '%s/renamed/' && "
                      "ls -d '%s/data/test/move_left/'* | head -2 | xargs -I{} cp {} '%s/renamed/aaa_unknown/' && "
                      "cp '%s/renamed/aaa_unknown/'* '%s/alien/aaa_unknown/'", dir, dir, dir, dir,
                      dir, dir, dir, dir) == 0, "copy the test videos");
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/renamed' --split all %s > '%s/evalrenamed.log' 2>&1",
                      bin, dir, dir, opts, dir) == 0, "eval of the renamed set");
    snprintf(p, sizeof p, "%s/run", dir);
    check_eval(p, ntest, 2, 1, "class ids differ", NULL);
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    cJSON *j = vt_test_read_json(p);
    TCHECK(ref && j, "eval.json of both runs");
    if (ref && j) {
        TCHECK(num(j, "unknown_videos") == 2, "unknown_videos %g, want 2", num(j, "unknown_videos"));
        const char *keys[4] = {"loss_mean", "clip_top1", "video_top1", "confusion"};
        for (int k = 0; k < 4; k++)
            TCHECK(head0(ref, keys[k]) && cJSON_Compare(head0(ref, keys[k]), head0(j, keys[k]), 1),
                   "head 0 %s differs from the same videos with the model's class ids", keys[k]);
        printf("class ids shifted by one: loss_mean %.9g (reference %.9g)\n",
               cJSON_GetNumberValue(head0(j, "loss_mean")), cJSON_GetNumberValue(head0(ref, "loss_mean")));
    }
    TCHECK(vt_test_sh("grep -q \"class 'aaa_unknown' is not one of the model's 3 classes: its 2 "
                      "video(s) are left out\" '%s/evalrenamed.log'", dir) == 0,
           "the warning names the unknown class and its videos");
    /* A class of the model's without a video here: the mean class accuracy says what it
     * is a mean over (a split without a class printed the same line as one with it). */
    TCHECK(vt_test_sh("mkdir -p '%s/missing' && cp -r '%s/data/test/.' '%s/missing/' && rm -r "
                      "'%s/missing/move_up' && '%s' eval '%s/run' '%s/missing' --split all %s > "
                      "'%s/evalmissing.log' 2>&1 && grep -q 'mean class accuracy .* (over 2 of "
                      "the model.s 3 classes; no video of: move_up)' '%s/evalmissing.log' && ! "
                      "grep -q 'classes; no video' '%s/evalref.log'", dir, dir, dir, dir, bin, dir,
                      dir, opts, dir, dir, dir) == 0, "a class without videos: not said");
    /* Nothing the model knows: an error that says why, not an empty evaluation. */
    int rc = vt_test_sh("'%s' eval '%s/run' '%s/alien' --split all %s > '%s/evalalien.log' 2>&1",
                        bin, dir, dir, opts, dir);
    TCHECK(rc == 1, "eval of only unknown classes exits %d, want 1", rc);
    TCHECK(vt_test_sh("grep -q \"2 video(s) of classes the model does not know\" '%s/evalalien.log'",
                      dir) == 0, "the error says the videos are of unknown classes");
    cJSON_Delete(ref);
    cJSON_Delete(j);
}

/* A damaged video among clean ones (tests/make_media.sh's concealed.mp4: one P-frame the
 * decoder repairs): eval.json names it, alone, in "damaged_videos" with its decode errors,
 * whose sum is the top-level "decode_errors", and the report line says so. The truth: the
 * ffmpeg command reports errors for it and none for the clean ones. */
static void check_damaged(const char *bin, const char *dir) {
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    TCHECK(vt_test_sh("bash '%s/tests/make_media.sh' '%s/media' hostile && mkdir -p "
                      "'%s/dmg/move_left' && cp '%s/data/test/move_left/'* '%s/media/hostile/"
                      "concealed.mp4' '%s/dmg/move_left/'", src, dir, dir, dir, dir, dir) == 0,
           "the damaged set");
    TCHECK(vt_test_sh("test -n \"$(ffmpeg -nostdin -v error -i '%s/dmg/move_left/concealed.mp4' "
                      "-f null - 2>&1)\" && for f in '%s/data/test/move_left/'*; do test -z "
                      "\"$(ffmpeg -nostdin -v error -i \"$f\" -f null - 2>&1)\" || exit 1; done",
                      dir, dir) == 0, "ffmpeg: errors in concealed.mp4 alone");
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/dmg' --split all --devices cpu:2 --batch 5 "
                      "--clips-per-video 4 --crops 3 -q > '%s/evaldmg.log' 2>&1", bin, dir, dir,
                      dir) == 0, "eval of the damaged set");
    char p[4200];
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *dv = cJSON_GetObjectItem(j, "damaged_videos");
    const cJSON *d0 = cJSON_GetArrayItem(dv, 0);
    const cJSON *path = cJSON_GetObjectItem(d0, "path");
    TCHECK(cJSON_GetArraySize(dv) == 1 && cJSON_IsString(path) &&
               !strcmp(path->valuestring, "move_left/concealed.mp4"),
           "damaged_videos: %d entries, the first %s", cJSON_GetArraySize(dv),
           cJSON_IsString(path) ? path->valuestring : "(none)");
    TCHECK(num(d0, "decode_errors") >= 1 && num(d0, "filled_frames") == 0 &&
               num(j, "decode_errors") == num(d0, "decode_errors"),
           "concealed.mp4: %g decode errors, %g filled; eval.json's decode_errors %g",
           num(d0, "decode_errors"), num(d0, "filled_frames"), num(j, "decode_errors"));
    TCHECK(vt_test_sh("grep -q 'damaged streams: 1 video(s)' '%s/evaldmg.log'", dir) == 0,
           "the report says it (%s/evaldmg.log)", dir);
    cJSON_Delete(j);
}

int main(void) {
    const char *bin = vt_test_bin("test_eval_counts");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("eval_counts"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 3 --val 2 --test 3 --frames 12 "
                                   "--size 40x32") == 0, "synth");
    /* A briefly trained model: the counts do not depend on how good it is. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --clip 4x32 --batch 4 --epochs 1 "
               "--max-steps 2 -q --workers 1 > '%s/train.log' 2>&1", bin, dir, dir, dir) == 0,
           "train");
    int nc = 0, ntest, nall = 0;
    snprintf(p, sizeof p, "%s/data/test", dir);
    ntest = vt_test_count_class_files(p, &nc);
    TCHECK(ntest == 9 && nc == 3, "test files %d classes %d", ntest, nc);
    const char *splits[3] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/data/%s", dir, splits[s]);
        nall += vt_test_count_class_files(p, &nc);
    }

    double acc2 = -1, acc1 = -2;
    snprintf(p, sizeof p, "%s/run", dir);
    /* two towers 3:1, batch 7 (63 test views of 9 videos: 9 batches, slices 5+2 / 6+1..) */
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/data' --devices cpu:2 --tower-split manual:3,1 --batch 7 "
               "--clips-per-video 7 --crops 3 -q --workers 2 > '%s/eval2.log' 2>&1", bin, dir, dir,
               dir) == 0, "eval on 2 towers");
    check_eval(p, ntest, 7, 3, "2 towers 3:1, test", &acc2);
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/data' --devices cpu:1 --batch 7 --clips-per-video 7 "
               "--crops 3 -q > '%s/eval1.log' 2>&1", bin, dir, dir, dir) == 0, "eval on 1 tower");
    check_eval(p, ntest, 7, 3, "1 tower, test", &acc1);
    /* The same clips through the same weights: the same video decisions (the towers'
     * equal-to-one-device promise; a float tie flipping is not plausible at 9 videos). */
    TCHECK(acc1 == acc2, "video top-1: 1 tower %g, 2 towers %g", acc1, acc2);
    TCHECK(vt_test_sh("'%s' eval '%s/run' '%s/data' --devices cpu:2 --split all --tower-split manual:1,3 "
               "--batch 5 --clips-per-video 2 --crops 1 -q > '%s/evalall.log' 2>&1", bin, dir, dir,
               dir) == 0, "eval --split all");
    check_eval(p, nall, 2, 1, "2 towers 1:3, all", NULL);
    check_class_ids(bin, dir, ntest);
    check_damaged(bin, dir);
    return vt_test_done("test_eval_counts");
}
