/*
 * test_unfinished.c: a dataset writer that is stopped leaves no folder that a later
 * command takes as whole, a command whose standard output could not be written does not
 * exit 0, and a resume says what it dropped (docs/design.md §3.8).
 *  1. synth killed (SIGKILL) after its first video: DIR is marked unfinished; scan and
 *     train refuse it naming DIR and the mark, and synth without --force refuses to
 *     write into it; synth --force finishes it (no mark, scan exits 0). A killed synth's
 *     DIR used to scan and train as a dataset with videos, a split or a class missing.
 *     synth --force over an earlier synth removes that one's videos first.
 *  2. prep killed (SIGKILL) after its first copy: the same for DST (train on a killed
 *     prep's DST took it as the whole dataset); rerun, prep finishes it. A video removed
 *     from SRC has its copy removed from DST by the next run.
 *  3. standard output on /dev/full: scan, plan and predict --json exit 1 and say so
 *     (predict --json > FILE on a full disk exited 0 with FILE cut short); predict
 *     --timeline stops at its first line refused.
 *  4. train --resume drops the metrics lines logged after its checkpoint and says so.
 *  5. embed's .npy and .csv change together or not at all; 6. so do eval's eval.json and
 *     confusion.csv.
 *  7. a --pretrained download that the disk refuses names the disk, not the network.
 *  8. a run folder a start killed before its first checkpoint: nothing to resume, said.
 *  9. a killed export's temporary file beside FILE goes at the next export to FILE.
 */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/apputil.h"

static char g_dir[4096];
static const char *g_bin;

/* Polls until dir/train holds a video (at most 20 s), then kills pid with SIGKILL.
 * 1 when the kill ended a process that was still writing. */
static int kill_after_first(pid_t pid, const char *dir) {
    char train[4400];
    snprintf(train, sizeof train, "%s/train", dir);
    struct timespec ts = {0, 2000000};
    for (int i = 0; i < 10000 && vt_test_count_class_files(train, NULL) < 1; i++)
        nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static int marked(const char *dir) {
    char p[4400];
    snprintf(p, sizeof p, "%s/.vidtrain-unfinished", dir);
    return access(p, F_OK) == 0;
}

/* `vidtrain CMD DIR ARGS` refused (exit 1), its stderr naming DIR as unfinished and the
 * mark to remove. */
static int refused(const char *cmd, const char *dir, const char *args) {
    char log[4400];
    snprintf(log, sizeof log, "%s/%s.log", g_dir, cmd);
    int rc = vt_test_sh("'%s' %s '%s' %s > /dev/null 2> '%s'", g_bin, cmd, dir, args, log);
    char want[4400];
    snprintf(want, sizeof want, "%s is unfinished", dir);
    int ok = rc == 1 && vt_test_file_has(log, want) && vt_test_file_has(log, "again");
    if (!ok)
        fprintf(stderr, "%s %s: exit %d, see %s\n", cmd, dir, rc, log);
    return ok;
}

static void test_synth(void) {
    char dir[4200], cmd[9000];
    snprintf(dir, sizeof dir, "%s/synth", g_dir);
    /* 60 videos on one thread: over a second, the kill lands after the first */
    const char *args = "--classes 3 --train 16 --val 4 --test 0 --frames 48 --size 128x96 "
                       "--threads 1";
    snprintf(cmd, sizeof cmd, "exec '%s' synth '%s' %s > /dev/null 2>&1", g_bin, dir, args);
    TCHECK(kill_after_first(vt_test_spawn(cmd), dir), "synth was not killed while writing");
    TCHECK(marked(dir), "a killed synth left %s unmarked", dir);
    TCHECK(refused("scan", dir, ""), "scan of a killed synth's folder");
    TCHECK(refused("train", dir, "--out /nonexistent/never"), "train on a killed synth's folder");
    TCHECK(refused("synth", dir, args), "synth into a killed synth's folder without --force");
    int rc = vt_test_sh("'%s' synth '%s' --classes 2 --train 1 --val 1 --test 0 --frames 8 "
                        "--force > /dev/null 2>&1", g_bin, dir);
    TCHECK(rc == 0 && !marked(dir), "synth --force: exit %d, mark %s", rc,
           marked(dir) ? "left" : "gone");
    TCHECK(vt_test_sh("'%s' scan '%s' > /dev/null 2>&1", g_bin, dir) == 0, "scan once finished");
    /* --force over a bigger synth: its videos go, not only the names written again (3
     * classes x 2 stayed beside 2 x 1) */
    rc = vt_test_sh("'%s' synth '%s' --classes 3 --train 2 --val 0 --test 0 --frames 8 --force "
                    "> /dev/null 2>&1 && '%s' synth '%s' --classes 2 --train 1 --val 0 --test 0 "
                    "--frames 8 --force > /dev/null 2>&1", g_bin, dir, g_bin, dir);
    char train[4400];
    snprintf(train, sizeof train, "%s/train", dir);
    int ncls, nvid = vt_test_count_class_files(train, &ncls);
    TCHECK(rc == 0 && nvid == 2 && ncls == 2, "synth --force over a synth of 3 classes x 2: "
           "exit %d, %d videos in %d classes, 2 in 2 expected", rc, nvid, ncls);
}

static void test_prep(void) {
    char src[4400], dst[4400], cmd[9000];
    snprintf(src, sizeof src, "%s/psrc", g_dir); /* a copy: a video of it is removed below */
    snprintf(dst, sizeof dst, "%s/prep", g_dir);
    TCHECK(vt_test_sh("rm -rf '%s' && cp -a '%s/data' '%s'", src, g_dir, src) == 0, "copy");
    snprintf(cmd, sizeof cmd, "exec '%s' prep '%s' '%s' --short-side 32 --jobs 1 > /dev/null "
             "2>&1", g_bin, src, dst);
    TCHECK(kill_after_first(vt_test_spawn(cmd), dst), "prep was not killed while writing");
    TCHECK(marked(dst), "a killed prep left %s unmarked", dst);
    TCHECK(refused("scan", dst, ""), "scan of a killed prep's DST");
    TCHECK(refused("train", dst, "--out /nonexistent/never"), "train on a killed prep's DST");
    int rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 --jobs 1 > /dev/null 2>&1", g_bin,
                        src, dst);
    TCHECK(rc == 0 && !marked(dst), "prep rerun: exit %d, mark %s", rc,
           marked(dst) ? "left" : "gone");
    TCHECK(vt_test_sh("'%s' scan '%s' > /dev/null 2>&1", g_bin, dst) == 0, "scan once finished");
    /* a video gone from SRC: its copy goes from DST at the next run (it stayed, in the
     * dataset DST is, even under --force) */
    char gone[4500];
    snprintf(gone, sizeof gone, "%s/train/move_left/move_left_0000.mp4", dst);
    TCHECK(access(gone, F_OK) == 0, "%s was not written", gone);
    rc = vt_test_sh("rm '%s/train/move_left/move_left_0000.mp4' && '%s' prep '%s' '%s' "
                    "--short-side 32 --jobs 1 > '%s/stale.log' 2>&1", src, g_bin, src, dst, g_dir);
    TCHECK(rc == 0 && access(gone, F_OK) != 0 && vt_test_file_has_in(g_dir, "stale.log",
           "which SRC no longer has"), "prep after a video left SRC: exit %d, its copy %s "
           "(see %s/stale.log)", rc, access(gone, F_OK) ? "removed" : "still there", g_dir);
}

/* `vidtrain ARGS > /dev/full` exits 1 and says that standard output could not be written. */
static int full_stdout(const char *args) {
    char log[4400];
    snprintf(log, sizeof log, "%s/full.log", g_dir);
    int rc = vt_test_sh("'%s' %s > /dev/full 2> '%s'", g_bin, args, log);
    int ok = rc == 1 && vt_test_file_has(log, "cannot write to standard output");
    if (!ok)
        fprintf(stderr, "vidtrain %s > /dev/full: exit %d, see %s\n", args, rc, log);
    return ok;
}

static void test_stdout(void) {
    char a[9000];
    snprintf(a, sizeof a, "scan '%s/data'", g_dir);
    TCHECK(full_stdout(a), "scan");
    TCHECK(full_stdout("plan --model tiny --clip 4x32x32"), "plan");
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --epochs 1 --batch 4 --clip 4x32 "
                        "--devices cpu --threads 1 --workers 1 > '%s/train.log' 2>&1", g_bin,
                        g_dir, g_dir, g_dir);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    snprintf(a, sizeof a, "predict '%s/run' '%s/data/val/move_left/move_left_0000.avi' --json", g_dir,
             g_dir);
    TCHECK(full_stdout(a), "predict --json");
    /* the timeline stops at the first line refused (a live stream was watched on for
     * ever, every line lost) */
    snprintf(a, sizeof a, "predict '%s/run' '%s/data/val/move_left/move_left_0000.avi' "
             "--timeline --window 0.2s --hop 0.1s", g_dir, g_dir);
    TCHECK(full_stdout(a), "predict --timeline");
    snprintf(a, sizeof a, "%s/full.log", g_dir);
    TCHECK(vt_test_file_has(a, "the timeline stops here"), "predict --timeline on /dev/full "
           "did not stop at its first line refused: see %s", a);
}

/* 4. A resume says what it threw away: the metrics lines a killed run logged after its
 * checkpoint (here one made up, step 999) are dropped and counted. Uses test_stdout's run. */
static void test_resume_says(void) {
    char p[4400];
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", g_dir);
    FILE *f = fopen(p, "a");
    TCHECK(f && fputs("{\"kind\":\"step\",\"step\":999,\"epoch\":1}\n", f) >= 0 &&
           fclose(f) == 0, "appending to %s", p);
    int rc = vt_test_sh("'%s' train --resume '%s/run' --epochs 2 > '%s/resume.log' 2>&1", g_bin,
                        g_dir, g_dir);
    TCHECK(rc == 0, "train --resume (see %s/resume.log)", g_dir);
    TCHECK(vt_test_file_has_in(g_dir, "resume.log", "1 line of metrics.jsonl logged after it "
           "dropped"), "the resume did not say that it dropped a line: see %s/resume.log", g_dir);
    TCHECK(!vt_test_file_has(p, "\"step\":999"), "the line after the checkpoint stayed in %s", p);
}

/* 5. embed's .npy and the .csv naming its rows change together: a .csv that does not fit
 * (a file size limit below it, above the .npy: a long path) leaves the old pair whole. It
 * left the new .npy beside the old .csv, whose rows named other videos. Uses test_stdout's
 * run. */
static void test_embed_pair(void) {
    char d[4200], lp[8192];
    snprintf(d, sizeof d, "%s/emb", g_dir);
    /* a video under a path of ~1,900 bytes: its .csv row outweighs its .npy row (512 B) */
    snprintf(lp, sizeof lp, "%s/%0200d/%0200d/%0200d/%0200d/%0200d/%0200d/%0200d/%0200d/"
             "%0200d/v.avi", d, 1, 2, 3, 4, 5, 6, 7, 8, 9);
    int rc = vt_test_sh("mkdir -p \"$(dirname '%s')\" && cp '%s/data/val/move_left/"
                        "move_left_0000.avi' '%s' && '%s' embed '%s/run' '%s/data/val/"
                        "move_right/move_right_0000.avi' --out '%s/e.npy' > /dev/null 2>&1 && "
                        "cp '%s/e.npy' '%s/old.npy' && cp '%s/e.csv' '%s/old.csv'", lp, g_dir, lp,
                        g_bin, g_dir, g_dir, d, d, d, d, d);
    TCHECK(rc == 0, "embed, the first pair");
    /* 1 KiB: the new .npy (640 bytes) fits, its .csv (about 1,900) does not */
    rc = vt_test_sh("bash -c \"trap '' XFSZ; ulimit -f 1; exec '%s' embed '%s/run' '%s' --out "
                    "'%s/e.npy'\" > /dev/null 2> '%s/embed.log'", g_bin, g_dir, lp, d, g_dir);
    TCHECK(rc == 1, "embed whose .csv does not fit: exit %d, 1 expected", rc);
    rc = vt_test_sh("cmp -s '%s/e.npy' '%s/old.npy' && cmp -s '%s/e.csv' '%s/old.csv'", d, d,
                    d, d);
    TCHECK(rc == 0, "embed whose .csv did not fit changed %s/e.npy or e.csv: the pair is "
           "not the old one", d);
}

/* 6. eval's eval.json and confusion.csv change together: an eval.json that does not fit
 * (a file size limit of 1 KiB; the data folder's long path is in it, not in the table)
 * leaves the old pair. It wrote the new table beside the old figures. Uses test_stdout's
 * run. */
static void test_eval_pair(void) {
    char d[4200], lp[8192];
    snprintf(d, sizeof d, "%s/evl", g_dir);
    snprintf(lp, sizeof lp, "%s/%0200d/%0200d/%0200d/%0200d/%0200d/d", d, 1, 2, 3, 4, 5);
    int rc = vt_test_sh("mkdir -p \"$(dirname '%s')\" && ln -sfn '%s/data' '%s' && '%s' eval "
                        "'%s/run' '%s/data' --split val > /dev/null 2>&1 && cp '%s/run/eval.json' "
                        "'%s/old.json' && cp '%s/run/confusion.csv' '%s/old.csv'", lp, g_dir, lp,
                        g_bin, g_dir, g_dir, g_dir, d, g_dir, d);
    TCHECK(rc == 0, "eval, the first pair");
    rc = vt_test_sh("bash -c \"trap '' XFSZ; ulimit -f 1; exec '%s' eval '%s/run' '%s' --split "
                    "train\" > /dev/null 2> '%s/eval.log'", g_bin, g_dir, lp, g_dir);
    TCHECK(rc == 1, "eval whose eval.json does not fit: exit %d, 1 expected", rc);
    rc = vt_test_sh("cmp -s '%s/run/eval.json' '%s/old.json' && cmp -s '%s/run/confusion.csv' "
                    "'%s/old.csv'", g_dir, d, g_dir, d);
    TCHECK(rc == 0, "eval whose eval.json did not fit changed eval.json or confusion.csv in "
           "%s/run: the pair is not the old one", g_dir);
}

/* 7. A --pretrained download that the disk refuses says so, naming the .part: it said
 * "cannot download URL: Failure writing output to destination. Without network: ...". A
 * 300 KB file from a file:// mirror under a 100 KiB file size limit. */
static void test_download_disk(void) {
    int rc = vt_test_sh("rm -rf '%s/wcache' && mkdir -p '%s/mirror' && head -c 300000 /dev/zero > "
                        "'%s/mirror/r3d_18-b3b3357e.pth' && VIDTRAIN_WEIGHTS_URL='file://%s/mirror' "
                        "VIDTRAIN_CACHE='%s/wcache' bash -c \"trap '' XFSZ; ulimit -f 100; exec "
                        "'%s' train '%s/data' --out '%s/rp' --model r3d18 --pretrained r3d18 "
                        "--epochs 1\" > /dev/null 2> '%s/dl.log'", g_dir, g_dir, g_dir, g_dir,
                        g_dir, g_bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 1 && vt_test_file_has_in(g_dir, "dl.log", "r3d_18-b3b3357e.pth.part: File too "
           "large") && !vt_test_file_has_in(g_dir, "dl.log", "network"), "a download the disk "
           "refused: exit %d, see %s/dl.log", rc, g_dir);
}

/* 8. A run folder that a start killed before its first checkpoint left (config.json, no
 * checkpoint) is refused with what can be done: it said "--resume continues it", and
 * --resume then found nothing to resume. */
static void test_no_checkpoint(void) {
    int rc = vt_test_sh("mkdir -p '%s/r0' && echo '{}' > '%s/r0/config.json' && '%s' train "
                        "'%s/data' --out '%s/r0' --epochs 1 > /dev/null 2> '%s/r0.log'", g_dir,
                        g_dir, g_bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 1 && vt_test_file_has_in(g_dir, "r0.log", "nothing to resume") &&
           vt_test_file_has_in(g_dir, "r0.log", "--force"), "train into a run folder without a "
           "checkpoint: exit %d, see %s/r0.log", rc, g_dir);
}

/* 9. The temporary file an export killed in its write left beside FILE (a model-sized
 * file at every kill) is removed by the next export to FILE, with a line; one of a live
 * process stays. Uses test_stdout's run. */
static void test_stale_temp(void) {
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    char left[4400], live[4400];
    snprintf(left, sizeof left, "%s/m.onnx.tmp.%ld", g_dir, (long)dead);
    snprintf(live, sizeof live, "%s/m.onnx.tmp.%ld", g_dir, (long)getpid());
    int rc = vt_test_sh("echo torn > '%s' && echo other > '%s' && '%s' export '%s/run' --onnx "
                        "'%s/m.onnx' > /dev/null 2> '%s/export.log'", left, live, g_bin, g_dir,
                        g_dir, g_dir);
    TCHECK(rc == 0 && access(left, F_OK) != 0 && access(live, F_OK) == 0 &&
           vt_test_file_has_in(g_dir, "export.log", "interrupted write"), "export beside a "
           "killed export's temporary file: exit %d, %s %s, see %s/export.log", rc, left,
           access(left, F_OK) ? "removed" : "left", g_dir);
    unlink(live);
}

int main(void) {
    g_bin = vt_test_bin("test_unfinished");
    if (!g_bin)
        return VT_TEST_SKIP;
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("unfinished"));
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 6 --val 2 --test 0 --frames 24 "
                           "--size 160x120");
    TCHECK(rc == 0, "synth (see %s/synth.log)", g_dir);
    if (rc)
        return vt_test_done("test_unfinished");
    test_synth();
    test_prep();
    test_stdout();
    test_resume_says();
    test_embed_pair();
    test_eval_pair();
    test_download_disk();
    test_no_checkpoint();
    test_stale_temp();
    return vt_test_done("test_unfinished");
}
