/*
 * test_fileset.c: files that are read together are replaced together (base/fileset.h,
 * docs/design.md §3.8 "Files read together"). Each writer is killed (SIGKILL, through
 * VT_FILESET_KILL) between two renames of its set, and the test looks at what a reader
 * finds. Before the sets, eval's eval.json and confusion.csv, embed's FILE and FILE.csv,
 * and an epoch's last.safetensors, best.safetensors and val.json were renamed one after
 * the other with nothing on disk to say a kill had come between: a new file beside its
 * old partner, read together in silence.
 *  1. The sets themselves (in this process, a forked writer killed): after a kill between
 *     renames the record is there and vt_fileset_check says the members may be mixed;
 *     vt_fileset_finish completes the set from its staged files, or says which is gone;
 *     a kill after the last rename is whole; a member not written is removed (DROP) or
 *     kept (KEEP); a set not committed changes nothing; a lead of 252 bytes has a record
 *     (its name cut and hashed: ".NAME.set" passed NAME_MAX); a record that is not one,
 *     or that names a path outside its folder, is refused.
 *  2. eval killed after renaming eval.json: confusion.csv and report.html are the old
 *     eval's, the record says so, and the report a later writer builds does not show that
 *     eval.json as the run's evaluation; eval again puts a whole set.
 *  3. embed killed after renaming FILE: FILE.csv names the old rows; the record says so;
 *     embed again puts a whole pair.
 *  4. train killed after renaming last.safetensors at its first epoch's end: train
 *     --resume finishes the set (best.safetensors and val.json of that epoch) and goes
 *     on; with a staged member gone it refuses, naming the record. A config.json that is
 *     not the checkpoint's own configuration is named by --resume (the lr edited).
 *  5. prep's options record is written under DST's unfinished mark, with the copies.
 */
#include <glob.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/eval/report.h"
#include "base/common.h"
#include "base/fileset.h"
#include "tests/apputil.h"

static char g_dir[4096];

static void put(const char *dir, const char *name, const char *text) {
    char p[4400], err[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    TCHECK(vt_file_write_atomic(p, text, strlen(text), err, sizeof err) == 0, "%s", err);
}

static int holds(const char *dir, const char *name, const char *text) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *t = vt_test_slurp(p, NULL);
    int r = t && !strcmp(t, text);
    free(t);
    return r;
}

static int exists(const char *dir, const char *name) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* A forked writer of the set {a, b, c (DROP, not written)} in dir, with new contents;
 * VT_FILESET_KILL=kill (0: none). The child's wait status. */
static int writer(const char *dir, int kill_at, const char *na, const char *nb) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        char a[4400], b[4400], c[4400], err[512], k[16];
        snprintf(a, sizeof a, "%s/a", dir);
        snprintf(b, sizeof b, "%s/b", dir);
        snprintf(c, sizeof c, "%s/c", dir);
        snprintf(k, sizeof k, "%d", kill_at);
        if (kill_at)
            setenv("VT_FILESET_KILL", k, 1);
        vt_fileset *s = vt_fileset_begin(a, VT_FILESET_KEEP);
        vt_fileset_add(s, b, VT_FILESET_KEEP);
        vt_fileset_add(s, c, VT_FILESET_DROP);
        if (vt_file_write_atomic(a, na, strlen(na), err, sizeof err) != 0 ||
            vt_file_write_atomic(b, nb, strlen(nb), err, sizeof err) != 0 ||
            vt_fileset_commit(&s, err, sizeof err) != 0) {
            fprintf(stderr, "writer: %s\n", err);
            _exit(1);
        }
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return st;
}

static void old_set(const char *d) {
    vt_test_sh("rm -f '%s'/* '%s'/.a.set", d, d);
    put(d, "a", "old a");
    put(d, "b", "old b");
    put(d, "c", "old c");
}

static void sets(void) {
    char d[4200], err[2048];
    snprintf(d, sizeof d, "%s/sets", g_dir);
    TCHECK(vt_test_sh("mkdir -p '%s'", d) == 0, "mkdir");
    char a[4300];
    snprintf(a, sizeof a, "%s/a", d);

    /* a kill after the first rename: a new beside the old b, and the record says so */
    old_set(d);
    int st = writer(d, 1, "new a", "new b");
    TCHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the writer was not killed at its "
           "first rename (status %d): VT_FILESET_KILL not acted on", st);
    TCHECK(holds(d, "a", "new a") && holds(d, "b", "old b") && exists(d, ".a.set"),
           "after the kill: a new, b old, the record there");
    err[0] = 0;
    TCHECK(vt_fileset_check(a, err, sizeof err) == -1 && strstr(err, "a, b and c") &&
           strstr(err, ".a.set"), "a mixed set read as whole: %s", err);
    /* finished from the staged files: the whole new set */
    TCHECK(vt_fileset_finish(a, err, sizeof err) == 1, "finish: %s", err);
    TCHECK(holds(d, "a", "new a") && holds(d, "b", "new b") && !exists(d, "c") &&
           !exists(d, ".a.set"), "finish: not the new set, or the record left");
    TCHECK(vt_fileset_check(a, err, sizeof err) == 0, "a finished set: %s", err);
    TCHECK(vt_test_sh("ls -a '%s' | grep -q tmp", d) != 0, "a temporary file left in %s", d);

    /* the same, with b's staged file gone: cannot be finished, and still said */
    old_set(d);
    writer(d, 1, "new a", "new b");
    vt_test_sh("rm -f '%s'/b.tmp.*", d);
    TCHECK(vt_fileset_finish(a, err, sizeof err) == -1 && strstr(err, "is gone"),
           "finish without b's new content: %s", err);
    TCHECK(vt_fileset_check(a, err, sizeof err) == -1, "a set that could not be finished "
           "read as whole");

    /* a kill after the last change (c's removal): whole, though the record is there */
    old_set(d);
    st = writer(d, 3, "new a", "new b");
    TCHECK(WIFSIGNALED(st) && exists(d, ".a.set"), "the writer killed after its last rename");
    TCHECK(vt_fileset_check(a, err, sizeof err) == 0, "a whole set said mixed: %s", err);

    /* no kill: the new set, c (DROP, not written) removed, no record */
    old_set(d);
    st = writer(d, 0, "new a", "new b");
    TCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer");
    TCHECK(holds(d, "a", "new a") && holds(d, "b", "new b") && !exists(d, "c") &&
           !exists(d, ".a.set"), "a committed set");

    /* KEEP: a member not written stays; a set not committed changes nothing */
    old_set(d);
    vt_fileset *s = vt_fileset_begin(a, VT_FILESET_KEEP);
    char b[4300];
    snprintf(b, sizeof b, "%s/b", d);
    vt_fileset_add(s, b, VT_FILESET_KEEP);
    TCHECK(vt_file_write_atomic(a, "new a", 5, err, sizeof err) == 0, "%s", err);
    TCHECK(holds(d, "a", "old a"), "a member written before its set commits is in place");
    TCHECK(vt_fileset_commit(&s, err, sizeof err) == 0 && !s, "commit: %s", err);
    TCHECK(holds(d, "a", "new a") && holds(d, "b", "old b"), "KEEP: b not kept");
    s = vt_fileset_begin(a, VT_FILESET_KEEP);
    TCHECK(vt_file_write_atomic(a, "newer a", 7, err, sizeof err) == 0, "%s", err);
    vt_fileset_free(&s);
    TCHECK(holds(d, "a", "new a") && vt_test_sh("ls -a '%s' | grep -q tmp", d) != 0,
           "a set not committed changed a or left its staged file");
    /* after it, writes are plain again */
    TCHECK(vt_file_write_atomic(a, "plain", 5, err, sizeof err) == 0 && holds(d, "a", "plain"),
           "a write after the set");

    /* a lead of 252 bytes: its record's name still fits NAME_MAX (cut and hashed); every
     * byte of it percent-encoded in the record (a space), and the record read back */
    char lng[4600];
    snprintf(lng, sizeof lng, "%s/%0252d", d, 7);
    memset(lng + strlen(d) + 1, ' ', 200);
    s = vt_fileset_begin(lng, VT_FILESET_KEEP);
    TCHECK(vt_file_write_atomic(lng, "x", 1, err, sizeof err) == 0, "%s", err);
    TCHECK(vt_fileset_commit(&s, err, sizeof err) == 0 && vt_test_file_has(lng, "x"),
           "a set led by a 252-byte name: %s", err);
    pid_t w = fork();
    if (w == 0) { /* killed after its rename: the record stays, and reads as whole */
        setenv("VT_FILESET_KILL", "1", 1);
        vt_fileset *k = vt_fileset_begin(lng, VT_FILESET_KEEP);
        if (vt_file_write_atomic(lng, "y", 1, err, sizeof err) == 0)
            vt_fileset_commit(&k, err, sizeof err);
        _exit(1);
    }
    waitpid(w, &st, 0);
    TCHECK(WIFSIGNALED(st) && vt_fileset_check(lng, err, sizeof err) == 0,
           "the record of a long name with spaces: %s", err);
    char *rec = vt_fileset_record(lng);
    unlink(rec);
    free(rec);
    vt_test_sh("rm -f '%s'", lng);

    /* records that are not one: refused, never followed */
    put(d, ".a.set", "hello\n");
    TCHECK(vt_fileset_check(a, err, sizeof err) == -1 && strstr(err, "cannot read"),
           "a record that is not one: %s", err);
    put(d, ".a.set", "vidtrain file set 1\npid 1\nput %2E%2E%2Fx x.tmp.1 1 1\n");
    TCHECK(vt_fileset_check(a, err, sizeof err) == -1 && vt_fileset_finish(a, err, sizeof err) == -1,
           "a record naming ../x");
    vt_test_sh("rm -f '%s/.a.set'", d);
}

static void eval_cut(const char *bin) {
    char run[4300];
    snprintf(run, sizeof run, "%s/run", g_dir);
    int rc = vt_test_sh("'%s' eval '%s' '%s/data' --split val > '%s/eval1.log' 2>&1 && cp "
                        "'%s/confusion.csv' '%s/old.csv' && cp '%s/eval.json' '%s/old.json'",
                        bin, run, g_dir, g_dir, run, g_dir, run, g_dir);
    TCHECK(rc == 0, "eval (see %s/eval1.log)", g_dir);
    /* another eval (of last.safetensors on train), killed after its first rename */
    rc = vt_test_sh("VT_FILESET_KILL=1 '%s' eval '%s' '%s/data' --split train --checkpoint "
                    "'%s/last.safetensors' > '%s/eval2.log' 2>&1", bin, run, g_dir, run, g_dir);
    TCHECK(rc == 128 + SIGKILL, "eval not killed at its first rename: exit %d", rc);
    TCHECK(vt_test_sh("! cmp -s '%s/eval.json' '%s/old.json' && cmp -s '%s/confusion.csv' "
                      "'%s/old.csv'", run, g_dir, run, g_dir) == 0,
           "the kill left no mixed pair to detect (eval.json new, confusion.csv old)");
    char lead[4400], err[2048];
    snprintf(lead, sizeof lead, "%s/eval.json", run);
    TCHECK(vt_fileset_check(lead, err, sizeof err) == -1 && strstr(err, "confusion.csv"),
           "eval's mixed set read as whole: %s", err);
    /* the report a later writer builds does not show that eval.json as the run's */
    TCHECK(vt_report_write(run, err, sizeof err) == 0, "report: %s", err);
    TCHECK(vt_test_file_has_in(run, "report.html", "Not shown") &&
           vt_test_file_has_in(run, "report.html", ".eval.json.set"),
           "report.html shows a cut-short eval's eval.json without a word");
    /* eval again: a whole set, no record */
    rc = vt_test_sh("'%s' eval '%s' '%s/data' --split val > '%s/eval3.log' 2>&1", bin, run,
                    g_dir, g_dir);
    TCHECK(rc == 0 && vt_fileset_check(lead, err, sizeof err) == 0 &&
           !vt_test_file_has_in(run, "report.html", "Not shown") &&
           vt_test_sh("cmp -s '%s/confusion.csv' '%s/old.csv' && test ! -e '%s/.eval.json.set'",
                      run, g_dir, run) == 0, "eval after the cut: exit %d, %s", rc, err);
}

static void embed_cut(const char *bin) {
    char v1[4400], v2[8800], out[4400], err[2048];
    snprintf(v1, sizeof v1, "'%s/data/val/move_left/move_left_0000.mkv'", g_dir);
    snprintf(v2, sizeof v2, "%s '%s/data/val/move_right/move_right_0000.mkv'", v1, g_dir);
    snprintf(out, sizeof out, "%s/e.npy", g_dir);
    int rc = vt_test_sh("'%s' embed '%s/run' %s --out '%s' > '%s/embed1.log' 2>&1", bin, g_dir,
                        v1, out, g_dir);
    TCHECK(rc == 0, "embed (see %s/embed1.log)", g_dir);
    rc = vt_test_sh("VT_FILESET_KILL=1 '%s' embed '%s/run' %s --out '%s' > '%s/embed2.log' 2>&1",
                    bin, g_dir, v2, out, g_dir);
    TCHECK(rc == 128 + SIGKILL, "embed not killed at its first rename: exit %d", rc);
    /* two rows in e.npy, the old one row named in e.csv: mixed, and said */
    TCHECK(vt_test_sh("test $(wc -l < '%s/e.csv') -eq 2", g_dir) == 0, "e.csv is not the old one");
    TCHECK(vt_fileset_check(out, err, sizeof err) == -1 && strstr(err, "e.csv"),
           "embed's mixed pair read as whole: %s", err);
    rc = vt_test_sh("'%s' embed '%s/run' %s --out '%s' > '%s/embed3.log' 2>&1", bin, g_dir, v2,
                    out, g_dir);
    TCHECK(rc == 0 && vt_fileset_check(out, err, sizeof err) == 0 &&
           vt_test_sh("test $(wc -l < '%s/e.csv') -eq 3", g_dir) == 0, "embed after the cut");
}

static void train_cut(const char *bin) {
    const char *args = "--model tiny --clip 4x32 --batch 2 --epochs 2 --workers 1 --seed 3 -q";
    for (int lose = 0; lose < 2; lose++) {
        char run[4300];
        snprintf(run, sizeof run, "%s/cut%d", g_dir, lose);
        int rc = vt_test_sh("VT_FILESET_KILL=1 '%s' train '%s/data' --out '%s' %s > '%s.log' "
                            "2>&1", bin, g_dir, run, args, run);
        TCHECK(rc == 128 + SIGKILL, "train not killed at its first epoch's commit: exit %d", rc);
        TCHECK(exists(run, ".last.safetensors.set") && !exists(run, "best.safetensors"),
               "after the kill: the record, and best.safetensors not yet in place");
        if (lose) { /* best's staged file gone: the set cannot be finished */
            vt_test_sh("rm -f '%s'/best.safetensors.tmp.*", run);
            rc = vt_test_sh("'%s' train --resume '%s' > '%s.resume.log' 2>&1", bin, run, run);
            TCHECK(rc == 1 && vt_test_file_has_in(g_dir, "cut1.resume.log", ".last.safetensors.set"),
                   "resume of a set that cannot be finished: exit %d (see %s.resume.log)", rc, run);
            continue;
        }
        rc = vt_test_sh("'%s' train --resume '%s' > '%s.resume.log' 2>&1", bin, run, run);
        TCHECK(rc == 0 && vt_test_file_has_in(g_dir, "cut0.resume.log", "finished replacing"),
               "resume after the cut: exit %d (see %s.resume.log)", rc, run);
        TCHECK(!exists(run, ".last.safetensors.set") && exists(run, "best.safetensors") &&
               exists(run, "val.json"), "the set after the resume");
        /* config.json that is not the checkpoint's own configuration (what a resume with
         * other options leaves when it is killed before its first checkpoint; here an
         * edit of the lr): --resume goes on with it, and says so, naming the key */
        rc = vt_test_sh("sed -i 's/\"lr\":[^,]*/\"lr\":0.5/' '%s/config.json' && '%s' train "
                        "--resume '%s' --epochs 3 > '%s.resume2.log' 2>&1", run, bin, run, run);
        TCHECK(rc == 0 && vt_test_file_has_in(g_dir, "cut0.resume2.log", "\"lr\" differs"),
               "resume with config.json not the checkpoint's: exit %d, no note (see "
               "%s.resume2.log)", rc, run);
    }
}

/* 5. prep's options record changes under DST's unfinished mark, with the copies it
 * describes: a --force with other options that stops before the mark (here its plan fails:
 * SRC has no video; a kill there is the same) leaves the record as it was. It recorded the
 * new options over the old copies, and a rerun with them took every copy as done. */
static void prep_options(const char *bin) {
    int rc = vt_test_sh("'%s' prep '%s/data' '%s/p' --short-side 32 --jobs 1 > '%s/prep1.log' "
                        "2>&1 && cp '%s/p/prep-options.txt' '%s/opts.old' && mkdir -p '%s/empty'",
                        bin, g_dir, g_dir, g_dir, g_dir, g_dir, g_dir);
    TCHECK(rc == 0, "prep (see %s/prep1.log)", g_dir);
    rc = vt_test_sh("'%s' prep '%s/empty' '%s/p' --force --short-side 48 --jobs 1 > "
                    "'%s/prep2.log' 2>&1", bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 1 && vt_test_file_has_in(g_dir, "prep2.log", "no video"), "prep of an empty "
           "SRC: exit %d (see %s/prep2.log)", rc, g_dir);
    TCHECK(vt_test_sh("cmp -s '%s/p/prep-options.txt' '%s/opts.old'", g_dir, g_dir) == 0,
           "a prep that stopped before its first copy changed DST's options record");
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("fileset"));
    sets();
    const char *bin = vt_test_bin("test_fileset");
    if (!bin)
        return vt_test_done("test_fileset");
    int rc = vt_test_synth(bin, g_dir, "--classes 2 --train 2 --val 1 --test 1 --frames 10 "
                                       "--size 40x32");
    TCHECK(rc == 0, "synth (see %s/synth.log)", g_dir);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 4x32 --batch 2 "
                    "--epochs 1 --workers 1 --seed 3 -q > '%s/train.log' 2>&1", bin, g_dir,
                    g_dir, g_dir);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    if (rc == 0) {
        eval_cut(bin);
        embed_cut(bin);
        train_cut(bin);
    }
    prep_options(bin);
    return vt_test_done("test_fileset");
}
