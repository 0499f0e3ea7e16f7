/*
 * run_claim.c: the run folder's claim (run_claim.h).
 */
#include "app/run/run_claim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/run/run_files.h"
#include "base/common.h"

/* The files a run writes into its folder (app/run/run.h), removed together by --force. */
static const char *const run_files[] = {
    "config.json", "plan.txt", "metrics.jsonl", "metrics.csv", "last.safetensors",
    "best.safetensors", "val.json", "eval.json", "confusion.csv", "report.html", "leaks.json",
    "tb", /* a folder: TensorBoard's event files (app/eval/tensorboard.h) */
    /* the records of the sets written together (base/fileset.h): a checkpoint's, eval's */
    ".last.safetensors.set", ".eval.json.set",
};

void vt_run_claim_inputs(const char *run, const char *const *writes) {
    char p[4200];
    for (size_t i = 0; i <= VT_ARRAY_LEN(run_files); i++) {
        const char *f = i < VT_ARRAY_LEN(run_files) ? run_files[i] : ".lock";
        int own = 0;
        for (const char *const *w = writes; w && *w; w++)
            own |= !strcmp(*w, f);
        snprintf(p, sizeof p, "%s/%s", run, f);
        if (!own)
            vt_inputs_add(p);
    }
}

/* What a --resume start rewrites before it loads the checkpoint (vt_run_claim.kept). */
static const char *const kept_files[3] = {"config.json", "plan.txt", "leaks.json"};

/* The pid a train wrote into its RUN/.lock (open as fd) into pid (n bytes; "" when none). */
static void lock_pid(int fd, char *pid, size_t n) {
    if (n == 0)
        return;
    ssize_t k = n > 1 ? pread(fd, pid, n - 1, 0) : 0;
    pid[k > 0 ? k : 0] = 0;
    pid[strcspn(pid, "\n")] = 0;
}

static int holds_run(const char *out, const char **which) {
    char p[2200];
    for (size_t i = 0; i < VT_ARRAY_LEN(run_files); i++) {
        snprintf(p, sizeof p, "%s/%s", out, run_files[i]);
        struct stat st;
        if (lstat(p, &st) == 0) {
            *which = run_files[i];
            return 1;
        }
    }
    return 0;
}

/* Puts back into out the first n run files that moved[] says went into bak. */
static void put_back(const char *out, const char *bak, const int *moved, size_t n) {
    char p[2300], q[2300];
    for (size_t k = 0; k < n; k++) {
        if (!moved[k])
            continue;
        snprintf(p, sizeof p, "%s/%s", out, run_files[k]);
        snprintf(q, sizeof q, "%s/%s", bak, run_files[k]);
        if (rename(q, p) != 0)
            fprintf(stderr, "vidtrain train: --force: cannot put back %s from %s: %s\n", p, q,
                    strerror(errno));
    }
    rmdir(bak);
}

/* tb/'s event files (what a run writes there; anything else keeps the folder). */
static void remove_events(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[2600];
    while ((e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
}

/* --force: the old run's files leave together. Each is renamed into one folder beside
 * them (RUN/.replaced.PID, the same file system), then that folder is removed; a file
 * that cannot move, or that this start reads (--init RUN/best.safetensors: the output
 * rule, base/common.h), puts back the ones already moved, so the old run stays whole
 * or goes whole (never a new run beside half of the old one, such as its
 * best.safetensors). 0, or 1 after printing why. */
static int remove_old(const char *out) {
    char bak[2200], p[2300], q[2300], why[1024]; /* the rule's reason; --force says its own */
    snprintf(bak, sizeof bak, "%s/.replaced.%ld", out, (long)getpid());
    if (mkdir(bak, 0700) != 0) {
        fprintf(stderr, "vidtrain train: --force: cannot make %s to move the old run aside: "
                        "%s (the old run is untouched)\n", bak, strerror(errno));
        return 1;
    }
    int moved[VT_ARRAY_LEN(run_files)] = {0};
    for (size_t i = 0; i < VT_ARRAY_LEN(run_files); i++) {
        snprintf(p, sizeof p, "%s/%s", out, run_files[i]);
        snprintf(q, sizeof q, "%s/%s", bak, run_files[i]);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        if (S_ISREG(st.st_mode) && vt_output_check(p, why, sizeof why) != 0) {
            fprintf(stderr, "vidtrain train: --force would remove %s, which this start reads "
                            "(--init, --labels, --lists); the old run is left whole (copy the "
                            "file out of the run first, or give another --out)\n", p);
            put_back(out, bak, moved, i);
            return 1;
        }
        if (rename(p, q) != 0) {
            fprintf(stderr, "vidtrain train: --force: cannot move %s aside: %s; the old run is "
                            "left whole (remove it by hand, or give another --out)\n", p,
                    strerror(errno));
            put_back(out, bak, moved, i);
            return 1;
        }
        moved[i] = 1;
    }
    for (size_t i = 0; i < VT_ARRAY_LEN(run_files); i++) {
        snprintf(q, sizeof q, "%s/%s", bak, run_files[i]);
        if (moved[i] && !strcmp(run_files[i], "tb"))
            remove_events(q);
        if (moved[i] && (!strcmp(run_files[i], "tb") ? rmdir(q) : unlink(q)) != 0)
            fprintf(stderr, "vidtrain train: --force: cannot remove %s: %s (the old file is out "
                            "of the run; remove %s by hand)\n", q, strerror(errno), bak);
    }
    rmdir(bak);
    return 0;
}

/* 1 when `out` (made or not) would lie in `dir`: real path prefixes. */
static int inside(const char *out, const char *dir) {
    if (!dir || !*dir)
        return 0;
    char *rd = realpath(dir, NULL);
    if (!rd)
        return 0;
    /* out may not exist yet: what it would be once made (newp/../DATA/x is inside DATA;
     * the deepest existing ancestor alone said it was not, and mkdir made DATA/x) */
    char *ro = vt_path_real_future(out);
    size_t n = strlen(rd);
    int in = ro && !strncmp(ro, rd, n) && (ro[n] == '/' || ro[n] == 0 || !strcmp(rd, "/"));
    free(rd);
    free(ro);
    return in;
}

int vt_run_claim_take(vt_run_claim *c, const char *out, const char *data, const char *val_dir,
                      int resume, int force) {
    memset(c, 0, sizeof *c);
    c->fd = -1;
    snprintf(c->out, sizeof c->out, "%s", out);
    if (!vt_run_lead())
        return 0;
    const char *dir = inside(out, data) ? data : inside(out, val_dir) ? val_dir : NULL;
    if (dir) {
        fprintf(stderr, "vidtrain train: --out %s is inside the dataset %s: its files would be "
                        "read as data; give a run folder outside it\n", out, dir);
        return 1;
    }
    struct stat st;
    int exists = stat(out, &st) == 0;
    if (exists && !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "vidtrain train: --out %s is not a folder: give a folder for the run's "
                        "files (it is made when missing)\n", out);
        return 1;
    }
    char err[1024], lock[2200];
    if (vt_run_mkdirs(out, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --out: %s\n", err);
        return 1;
    }
    c->created = !exists;
    snprintf(lock, sizeof lock, "%s/.lock", out);
    c->fd = vt_open_lock(lock, 1, err, sizeof err);
    if (c->fd < 0) {
        if (errno == EEXIST || errno == ELOOP)
            fprintf(stderr, "vidtrain train: --out: %s\n", err);
        else
            fprintf(stderr, "vidtrain train: --out %s cannot be written: %s (check its "
                            "permissions and free space)\n", out, strerror(errno));
        vt_run_claim_release(c, 1);
        return 1;
    }
    if (flock(c->fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32];
        lock_pid(c->fd, pid, sizeof pid);
        /* the lock file names the last train; when that one is gone, the holder is an
         * eval of the run (vt_run_claim_share), which writes its files there too */
        const long holder = atol(pid);
        if (holder > 0 && (kill((pid_t)holder, 0) == 0 || errno == EPERM))
            fprintf(stderr, "vidtrain train: %s is in use by another vidtrain train (pid %s): "
                            "one run folder holds one run (give another --out, or wait for it "
                            "to end)\n", out, pid);
        else
            fprintf(stderr, "vidtrain train: %s is in use by a vidtrain eval of its run, which "
                            "writes its eval.json and report there: wait for it to end\n", out);
        close(c->fd);
        c->fd = -1;
        return 1;
    }
    char me[32];
    int len = snprintf(me, sizeof me, "%ld\n", (long)getpid());
    if (ftruncate(c->fd, 0) != 0 || pwrite(c->fd, me, (size_t)len, 0) != len) {
        fprintf(stderr, "vidtrain train: --out %s cannot be written: %s (check its free space)\n",
                out, strerror(errno));
        vt_run_claim_release(c, 1);
        return 1;
    }
    const char *which = NULL;
    if (!resume && holds_run(out, &which)) {
        char last[2200];
        snprintf(last, sizeof last, "%s/last.safetensors", out);
        if (!force && !vt_file_exists(last)) {
            /* a start killed before its first checkpoint: --resume has nothing to take up */
            fprintf(stderr, "vidtrain train: %s holds the start of a run that wrote no "
                            "checkpoint (%s; stopped before its first, or killed): there is "
                            "nothing to resume; --force replaces it (its files are removed), or "
                            "give another --out\n", out, which);
            vt_run_claim_release(c, 0);
            return 1;
        }
        if (!force) {
            fprintf(stderr, "vidtrain train: %s holds a run already (%s): --resume %s continues "
                            "it, --force replaces it (its files are removed), or give another "
                            "--out\n", out, which, out);
            vt_run_claim_release(c, 0);
            return 1;
        }
        if (remove_old(out) != 0) {
            vt_run_claim_release(c, 0);
            return 1;
        }
        fprintf(stderr, "vidtrain train: --force: the run in %s was removed\n", out);
    }
    c->wrote = !resume;
    for (size_t i = 0; resume && i < VT_ARRAY_LEN(c->kept); i++) {
        char p[2200];
        snprintf(p, sizeof p, "%s/%s", out, kept_files[i]);
        c->kept[i] = vt_file_read(p);
    }
    return 0;
}

void vt_run_claim_release(vt_run_claim *c, int failed) {
    if (failed && c->wrote) {
        const char *made[] = {"config.json", "plan.txt", "leaks.json"};
        for (size_t i = 0; i < VT_ARRAY_LEN(made); i++) {
            char p[2200];
            snprintf(p, sizeof p, "%s/%s", c->out, made[i]);
            unlink(p);
        }
    }
    for (size_t i = 0; i < VT_ARRAY_LEN(c->kept); i++) {
        char p[2200], err[1024];
        snprintf(p, sizeof p, "%s/%s", c->out, kept_files[i]);
        if (failed && c->kept[i] &&
            vt_file_write_atomic(p, c->kept[i], strlen(c->kept[i]), err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: --resume failed, and its %s could not be put back "
                            "as it was: %s\n", p, err);
        else if (failed && !c->kept[i] && strcmp(kept_files[i], "config.json"))
            unlink(p); /* made by this start */
        free(c->kept[i]);
        c->kept[i] = NULL;
    }
    if (failed && c->created) {
        char p[2200];
        snprintf(p, sizeof p, "%s/.lock", c->out);
        unlink(p);
        rmdir(c->out); /* only when empty */
    }
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->wrote = c->created = 0;
}

int vt_run_claim_share(const char *run, int make, char *pid, size_t n, int *fd) {
    char lock[2200];
    snprintf(lock, sizeof lock, "%s/.lock", run);
    if (n)
        pid[0] = 0;
    *fd = -1;
    /* made only when asked: eval's RUN may be no run at all (a folder given by mistake),
     * and a command leaves what it reads as it was; once RUN has proved to be a run (its
     * checkpoint opened), one without the file (copied without it, or older than it) gets
     * one, so that the hold keeps a train out there too */
    char err[2400];
    int f = vt_open_lock(lock, make, err, sizeof err);
    if (f < 0 && (errno == EEXIST || errno == ELOOP)) {
        /* not the run's own lock file (a link, a FIFO): nothing to hold, and said */
        vt_warn("%s\n", err);
        return 0;
    }
    if (f < 0)
        return 0; /* no train ever held it, or it cannot be made: nothing to hold */
    if (flock(f, LOCK_SH | LOCK_NB) == 0) {
        *fd = f; /* held until vt_run_claim_unshare or the process ends */
        return 0;
    }
    lock_pid(f, pid, n);
    close(f);
    return 1;
}

void vt_run_claim_unshare(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int vt_run_claim_writes(const char *run) {
    /* the folder, not RUN/.lock: that one is train's (exclusive) and the evals' (shared),
     * and an flock is per open file, so a second lock on another inode cannot upset it */
    int f = open(run, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f < 0)
        return -1;
    while (flock(f, LOCK_EX) != 0)
        if (errno != EINTR) {
            close(f);
            return -1;
        }
    return f;
}
