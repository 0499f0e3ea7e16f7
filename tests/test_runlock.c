/*
 * test_runlock.c: a run folder belongs to one run (app/run/run_claim.h; issue 41 item 3),
 * beyond test_outputs' cases:
 *   --force replaces the old run whole or not at all: with one of its files impossible to
 *     move (root: a bind mount on RUN/eval.json makes it busy), train is refused and every
 *     old file is still there, unchanged (the old code removed the files before it and
 *     left the rest: half a run); without it, nothing of the old run nor of the move
 *     aside (RUN/.replaced.PID) is left.
 *     --force never removes a file the new run reads (--init RUN/best.safetensors).
 *   Two real trains into one folder at once: the second is refused at once, naming the
 *     first's pid; eval of that folder is refused too (it writes RUN/eval.json and
 *     report.html into the run); the first finishes. A train --resume while an eval holds
 *     the folder (its shared flock) is refused, naming the eval.
 *   An --out that cannot be written (root: a read-only tmpfs) is refused before any work.
 *   RUN/.lock that is a link (symbolic or hard, to a video) or a FIFO is refused, the
 *     video unchanged (train wrote its pid through the link).
 * Root-only parts are skipped with a message.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/apputil.h"

static char g_dir[4096];
static const char *g_bin;
static const char *g_targs = "--model tiny --clip 4x32 --batch 2 --workers 1 -q";

static int has(const char *rel, const char *what) {
    return vt_test_file_has_in(g_dir, rel, what);
}

static void force_whole(void) {
    if (geteuid() != 0) {
        printf("test_runlock: not root: --force with a busy file (a bind mount) is skipped\n");
        return;
    }
    vt_test_sh("cd '%s' && rm -rf rf && cp -a r rf && touch rf/eval.json busy", g_dir);
    if (vt_test_sh("cd '%s' && mount --bind busy rf/eval.json 2>/dev/null", g_dir) != 0) {
        printf("test_runlock: cannot bind-mount here: --force with a busy file is skipped\n");
        return;
    }
    vt_test_sh("cd '%s' && sha256sum rf/*.* > sums", g_dir);
    int rc = vt_test_sh("cd '%s' && '%s' train data --out rf --force --epochs 1 %s > /dev/null "
                        "2> f.err", g_dir, g_bin, g_targs);
    TCHECK(rc == 1 && has("f.err", "rf/eval.json") && has("f.err", "left whole"),
           "--force with a busy file: exit %d, 1 naming it expected (see f.err)", rc);
    TCHECK(vt_test_sh("cd '%s' && sha256sum --quiet -c sums", g_dir) == 0,
           "--force refused: the old run is not whole");
    TCHECK(vt_test_sh("cd '%s' && ls -a rf | grep -q replaced", g_dir) != 0,
           "--force refused: the folder it moved files into is left");
    vt_test_sh("cd '%s' && umount rf/eval.json", g_dir);
}

static void force_clean(void) {
    vt_test_sh("cd '%s' && rm -rf rg && cp -a r rg && touch rg/eval.json", g_dir);
    int rc = vt_test_sh("cd '%s' && '%s' train data --out rg --force --epochs 1 --max-steps 1 "
                        "%s > /dev/null 2> f.err", g_dir, g_bin, g_targs);
    TCHECK(rc == 0 && has("f.err", "was removed"), "--force: exit %d (see f.err)", rc);
    TCHECK(vt_test_sh("cd '%s' && test ! -e rg/eval.json && test ! -e rg/best.safetensors && "
                      "! ls -a rg | grep -q replaced", g_dir) == 0,
           "--force: an old file or the move-aside folder is left");
}

/* --force with --init RUN/best.safetensors: removing the file the new run starts from
 * would lose it (the old code removed it, then failed to load it: nothing left). */
static void force_init(void) {
    vt_test_sh("cd '%s' && rm -rf ri && cp -a r ri && sha256sum ri/*.* > sums_i", g_dir);
    int rc = vt_test_sh("cd '%s' && '%s' train data --out ri --force --init ri/best.safetensors "
                        "--epochs 1 %s > /dev/null 2> i.err", g_dir, g_bin, g_targs);
    TCHECK(rc == 1 && has("i.err", "ri/best.safetensors") && has("i.err", "left whole"),
           "--force over its own --init: exit %d, 1 expected (see i.err)", rc);
    TCHECK(vt_test_sh("cd '%s' && sha256sum --quiet -c sums_i && ! ls -a ri | grep -q replaced",
                      g_dir) == 0, "--force over its own --init: the old run is not whole");
}

static void two_trains(void) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec '%s' train data --out rt --epochs 400 %s "
             "> a.log 2>&1", g_dir, g_bin, g_targs);
    pid_t a = vt_test_spawn(cmd);
    char lock[4200], pid[32];
    snprintf(lock, sizeof lock, "%s/rt/.lock", g_dir);
    snprintf(pid, sizeof pid, "%ld", (long)a);
    int seen = 0;
    for (int i = 0; i < 600 && !seen; i++) { /* up to 60 s for it to claim the folder */
        char *t = vt_test_slurp(lock, NULL);
        seen = t && strstr(t, pid) != NULL;
        free(t);
        if (!seen)
            usleep(100000);
    }
    TCHECK(seen, "the first train never wrote its pid %s into %s", pid, lock);
    time_t t0 = time(NULL);
    int rc = vt_test_sh("cd '%s' && '%s' train data --out rt --force --epochs 1 %s > /dev/null "
                        "2> b.err", g_dir, g_bin, g_targs);
    TCHECK(rc == 1 && has("b.err", "in use by another vidtrain train") && has("b.err", pid),
           "a second train into a folder in use: exit %d, 1 naming pid %s expected", rc, pid);
    TCHECK(time(NULL) - t0 < 20, "the refusal took %lds", (long)(time(NULL) - t0));
    /* eval writes RUN/eval.json and report.html: not into the running train's folder (it
     * wrote them there, about a checkpoint the run then replaced) */
    rc = vt_test_sh("cd '%s' && '%s' eval rt data > /dev/null 2> e.err", g_dir, g_bin);
    TCHECK(rc == 1 && has("e.err", "in use by a vidtrain train") && has("e.err", pid) &&
               vt_test_sh("cd '%s' && test ! -e rt/eval.json", g_dir) == 0,
           "eval of a run a train is writing: exit %d, 1 naming pid %s and no rt/eval.json "
           "expected (see e.err)", rc, pid);
    kill(a, SIGTERM); /* it checkpoints and exits 143 */
    int st = 0;
    waitpid(a, &st, 0);
    TCHECK(WIFEXITED(st) && (WEXITSTATUS(st) == 143 || WEXITSTATUS(st) == 0),
           "the first train ended with status %d (see a.log)", st);
    TCHECK(vt_test_sh("cd '%s' && test -e rt/last.safetensors", g_dir) == 0,
           "the first train's checkpoint is missing");
    /* the other way round: while an eval of the run holds it (a shared flock on RUN/.lock,
     * here flock(1)'s, whose holder the lock file does not name), a train --resume is
     * refused, naming the eval, not the dead train whose pid the file still holds */
    rc = vt_test_sh("cd '%s' && (flock -s rt/.lock sleep 5 &) && sleep 0.5 && '%s' train "
                    "--resume rt --epochs 1 > /dev/null 2> r.err", g_dir, g_bin);
    TCHECK(rc == 1 && has("r.err", "in use by a vidtrain eval"),
           "train --resume while an eval holds the run: exit %d, 1 naming the eval expected "
           "(see r.err)", rc);
}

/* A run folder without RUN/.lock (copied without it): eval held nothing there, so a
 * train --resume could start while it wrote. Once RUN proves to be a run, eval makes the
 * file and holds it (test_hostile_cli: a folder that is no run gets none). */
static void eval_makes_lock(void) {
    vt_test_sh("cd '%s' && rm -rf rn && cp -a r rn && rm -f rn/.lock rn/eval.json", g_dir);
    int rc = vt_test_sh("cd '%s' && '%s' eval rn data > /dev/null 2> n.err", g_dir, g_bin);
    TCHECK(rc == 0 && vt_test_sh("cd '%s' && test -e rn/.lock && test -e rn/eval.json", g_dir) == 0,
           "eval of a run without .lock: exit %d, rn/.lock and rn/eval.json expected (see "
           "n.err)", rc);
}

static void readonly_out(void) {
    if (geteuid() != 0) {
        printf("test_runlock: not root: --out on a read-only file system is skipped\n");
        return;
    }
    if (vt_test_sh("cd '%s' && mkdir -p ro && mount -t tmpfs -o ro tmpfs ro 2>/dev/null",
                   g_dir) != 0) {
        printf("test_runlock: cannot mount a tmpfs here: --out read-only is skipped\n");
        return;
    }
    int rc = vt_test_sh("cd '%s' && '%s' train data --out ro/r --epochs 1 %s > ro.log 2> ro.err",
                        g_dir, g_bin, g_targs);
    TCHECK(rc == 1 && has("ro.err", "ro/r") && has("ro.err", "Read-only") &&
           !has("ro.log", "training:"), "--out read-only: exit %d, refused before any work "
           "(see ro.err, ro.log)", rc);
    vt_test_sh("cd '%s' && umount ro", g_dir);
}

/* RUN/.lock that is not the run's own file: a symbolic link (to a training video), a
 * hard link to one, a FIFO. train writes its pid into the lock: the old open followed the
 * link and truncated the video to the pid (exit 0; the video then "moov atom not found").
 * Each is refused before any work, the video unchanged, and nothing waits on the FIFO. */
static void lock_links(void) {
    static const char *const make[] = {"ln -s \"$PWD/$v\" rl/.lock", "ln \"$v\" rl/.lock",
                                       "mkfifo rl/.lock"};
    static const char *const what[] = {"symbolic link", "hard link", "FIFO"};
    for (int k = 0; k < 3; k++) {
        vt_test_sh("cd '%s' && rm -rf rl && cp -a r rl && rm -f rl/.lock", g_dir);
        TCHECK(vt_test_sh("cd '%s' && v=$(ls data/train/*/* | head -1) && sha256sum \"$v\" > "
                          "sums_l && %s", g_dir, make[k]) == 0, "%s made", what[k]);
        int rc = vt_test_sh("cd '%s' && timeout 60 '%s' train data --out rl --resume rl "
                            "--epochs 2 %s > l.log 2> l.err", g_dir, g_bin, g_targs);
        TCHECK(rc == 1 && has("l.err", "rl/.lock") && !has("l.log", "epoch"),
               "RUN/.lock a %s: exit %d, 1 expected, refused before any work (see l.err)",
               what[k], rc);
        TCHECK(vt_test_sh("cd '%s' && sha256sum --quiet -c sums_l", g_dir) == 0,
               "RUN/.lock a %s: the video it reaches was changed", what[k]);
    }
    vt_test_sh("cd '%s' && rm -rf rl", g_dir);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    g_bin = vt_test_bin("test_runlock");
    if (!g_bin)
        return 1;
    vt_test_sh("umount '%s/runlock/rf/eval.json' '%s/runlock/ro' 2>/dev/null; true",
               vt_test_env("VT_TMP", "/tmp/vidtrain-tests"), vt_test_env("VT_TMP", "/tmp/vidtrain-tests"));
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("runlock"));
    TCHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 3 --val 1 --test 1 --frames 12") == 0,
           "synth");
    TCHECK(vt_test_sh("cd '%s' && '%s' train data --out r --epochs 1 %s > t.log 2>&1", g_dir,
                      g_bin, g_targs) == 0, "train");
    force_whole();
    force_clean();
    force_init();
    two_trains();
    eval_makes_lock();
    readonly_out();
    lock_links();
    return vt_test_done("test_runlock");
}
