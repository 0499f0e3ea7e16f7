/*
 * test_outputs.c: outputs never replace inputs, and a run folder belongs to one run
 * (docs/design.md §3.8; issue 41).
 *   The rule itself (base/common.h vt_output_check), as a property: 3,000 random paths
 *     built from inputs, an input folder, links to them (symbolic and hard), `..`, `.`,
 *     trailing slashes, a FIFO, a socket and (as root) a device node are refused exactly
 *     when an independent oracle says so: the path exists and is not a regular file or
 *     is an input by inode, or its folder's real path lies under an input folder's.
 *   The commands: export --onnx and embed --out onto the run's own checkpoint, export,
 *     embed (its CSV) and predict --dump-input onto the run's other files, onto a FIFO
 *     and (as root) onto a device node are refused with nothing changed; train into a
 *     folder that holds a run is refused unless --resume or --force (which leaves none of
 *     the old files), into a folder another train holds, inside the dataset, onto a file;
 *     predict --dump-input and bench decode --starts-out onto the video they read are
 *     refused, and train --dump inside the dataset (no folder made there); the atomic
 *     writer's temporary name taken by a link or a FIFO is replaced,
 *     never written through;
 *     a start that fails leaves no folder behind; --resume over a garbage config.json takes
 *     the configuration from the checkpoint's own copy.
 *   A run folder's trailing slashes (--out ./r7/, --resume, eval/predict/embed/export
 *     RUN) are dropped: no path printed or recorded has two slashes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/common.h"
#include "tests/apputil.h"

static char g_dir[4096];

static void touch(const char *rel) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", g_dir, rel);
    FILE *f = fopen(p, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
    fputs("x", f);
    fclose(f);
}

/* The oracle: string prefixes of real paths, not the rule's inode walk. */
static int oracle(const char *path, char in_files[][4200], int nf, char in_dirs[][4200],
                  int nd) {
    struct stat st, si;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return 1;
        for (int i = 0; i < nf; i++)
            if (stat(in_files[i], &si) == 0 && si.st_ino == st.st_ino && si.st_dev == st.st_dev)
                return 1;
    }
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", path);
    char *s = strrchr(parent, '/');
    if (!s)
        snprintf(parent, sizeof parent, ".");
    else if (s == parent)
        parent[1] = 0;
    else
        *s = 0;
    char real[PATH_MAX];
    if (!realpath(parent, real)) { /* folders yet to be made: GNU realpath -m's answer */
        char cmd[4400];
        snprintf(cmd, sizeof cmd, "realpath -m -- '%s'", parent);
        FILE *pp = popen(cmd, "r");
        int ok = pp && fgets(real, sizeof real, pp) != NULL;
        if (pp)
            pclose(pp);
        if (!ok)
            return 0;
        real[strcspn(real, "\n")] = 0;
    }
    for (int i = 0; i < nd; i++) {
        size_t n = strlen(in_dirs[i]);
        if (!strncmp(real, in_dirs[i], n) && (real[n] == '/' || real[n] == 0))
            return 1;
    }
    return 0;
}

static void property(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("outputs_rule"));
    char p[4200], q[4200];
    touch("in1");
    touch("in2");
    touch("other");
    snprintf(p, sizeof p, "%s/ind/sub", g_dir);
    vt_test_sh("mkdir -p '%s' '%s/free/deep'", p, g_dir);
    touch("ind/x");
    touch("ind/sub/y");
    touch("free/z");
    snprintf(p, sizeof p, "%s/in1", g_dir);
    snprintf(q, sizeof q, "%s/hard_in1", g_dir);
    link(p, q);
    snprintf(q, sizeof q, "%s/lnk_in1", g_dir);
    symlink("in1", q);
    snprintf(q, sizeof q, "%s/lnk_ind", g_dir);
    symlink("ind", q);
    snprintf(q, sizeof q, "%s/free/up", g_dir);
    symlink("../ind/sub", q);
    snprintf(q, sizeof q, "%s/fifo", g_dir);
    mkfifo(q, 0644);
    snprintf(q, sizeof q, "%s/sock", g_dir);
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int have_sock = strlen(q) < sizeof sa.sun_path;
    if (have_sock) {
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", q);
        have_sock = bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0;
    }
    snprintf(q, sizeof q, "%s/dev", g_dir);
    int have_dev = geteuid() == 0 && mknod(q, S_IFCHR | 0666, makedev(1, 7)) == 0;
    if (!have_dev)
        printf("test_outputs: not root (or mknod refused): the device-node case is skipped\n");
    vt_inputs_clear();
    static char in_files[2][4200], in_dirs[1][4200];
    const char *ins[] = {"in1", "in2"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", g_dir, ins[i]);
        vt_inputs_add(p);
        snprintf(in_files[i], sizeof in_files[i], "%s", p);
    }
    snprintf(p, sizeof p, "%s/ind", g_dir);
    vt_inputs_add(p);
    if (!realpath(p, in_dirs[0]))
        exit(1);
    const char *parts[] = {"in1", "in2", "other", "ind", "sub", "x", "y", "free", "deep", "z",
                           "hard_in1", "lnk_in1", "lnk_ind", "up", "fifo", "sock", "dev", "..",
                           ".", "new", "new.onnx", ""};
    const int np = (int)VT_ARRAY_LEN(parts);
    vt_rng rng;
    vt_rng_seed(&rng, 41);
    int refused = 0, agreed = 0, n = 3000;
    for (int k = 0; k < n; k++) {
        int len = snprintf(p, sizeof p, "%s", g_dir);
        int depth = 1 + (int)vt_rng_below(&rng, 4);
        for (int d = 0; d < depth; d++)
            len += snprintf(p + len, sizeof p - (size_t)len, "/%s",
                            parts[vt_rng_below(&rng, (uint32_t)np)]);
        if (!have_sock && strstr(p, "sock"))
            continue;
        char err[1024];
        int got = vt_output_check(p, err, sizeof err) != 0;
        int want = oracle(p, in_files, 2, in_dirs, 1);
        refused += got;
        agreed += got == want;
        if (got != want)
            TCHECK(0, "%s: the rule %s it, the oracle would %s (%s)", p, got ? "refuses" : "allows",
                   want ? "refuse" : "allow", got ? err : "");
    }
    TCHECK(refused > n / 10 && refused < n - n / 10, "a property that tests both sides: %d of "
           "%d refused", refused, n);
    printf("output rule: %d random paths, %d refused, %d agree with the oracle\n", n, refused, agreed);
    /* the named cases, each once */
    char err[1024];
    snprintf(p, sizeof p, "%s/hard_in1", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) != 0, "a hard link to an input");
    snprintf(p, sizeof p, "%s/free/up/new", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) != 0, "a new file in an input folder via a link");
    snprintf(p, sizeof p, "%s/fifo", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) != 0 && strstr(err, "FIFO"), "a FIFO: %s", err);
    snprintf(p, sizeof p, "%s/other", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) == 0, "a regular non-input file: %s", err);
    snprintf(p, sizeof p, "%s/ind/new/deeper/x", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) != 0, "in folders yet to be made in an input folder");
    snprintf(p, sizeof p, "%s/free/new/../up/x", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) != 0, "via a missing folder's .. and a link");
    snprintf(p, sizeof p, "%s/free/new/x", g_dir);
    TCHECK(vt_output_check(p, err, sizeof err) == 0, "in a folder yet to be made: %s", err);
    /* the writer itself refuses and leaves the FIFO a FIFO */
    snprintf(p, sizeof p, "%s/fifo", g_dir);
    struct stat st;
    TCHECK(vt_file_write_atomic(p, "x", 1, err, sizeof err) != 0 && stat(p, &st) == 0 &&
           S_ISFIFO(st.st_mode), "vt_file_write_atomic onto a FIFO");
    close(sfd);
    vt_inputs_clear();
}

static int sh_err(const char *log, const char *needle) {
    char *s = vt_test_slurp(log, NULL);
    int hit = s && strstr(s, needle);
    free(s);
    return hit;
}

static void commands(const char *bin) {
    const char *dir = vt_test_dir("outputs_cmd");
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 3 --val 1 --test 1 --frames 12") == 0,
           "synth");
    const char *targs = "--model tiny --epochs 1 --clip 4x32 --batch 2 --workers 1 -q";
    TCHECK(vt_test_sh("cd '%s' && '%s' train data --out r %s > t.log 2>&1", dir, bin, targs) == 0,
           "train");
    char p[4200];
    snprintf(p, sizeof p, "%s/r/best.safetensors", dir);
    long before = 0;
    char *orig = vt_test_slurp(p, &before);
    TCHECK(orig != NULL, "no %s", p);
    /* export and embed onto the checkpoint they read: refused, the checkpoint untouched */
    int rc = vt_test_sh("cd '%s' && '%s' export r --onnx r/best.safetensors 2> e.err", dir, bin);
    snprintf(p, sizeof p, "%s/e.err", dir);
    TCHECK(rc == 1 && sh_err(p, "an input of this command"), "export onto best: rc %d", rc);
    rc = vt_test_sh("cd '%s' && '%s' embed r data/test --out r/last.safetensors 2> e.err", dir, bin);
    TCHECK(rc != 0 && sh_err(p, "an input of this command"), "embed onto last: rc %d", rc);
    long after = 0;
    snprintf(p, sizeof p, "%s/r/best.safetensors", dir);
    char *now = vt_test_slurp(p, &after);
    TCHECK(orig && now && before == after && !memcmp(orig, now, (size_t)before),
           "best.safetensors changed");
    free(orig);
    free(now);
    /* onto the run's other files (its record, the lock, tb/): refused, every one
     * unchanged (export replaced metrics.jsonl, val.json and .lock, embed --out
     * r/metrics.npy wrote its CSV over r/metrics.csv, exit 0); eval still writes its own
     * three, and a new file in the run is still an output */
    vt_test_sh("cd '%s' && echo '{}' > r/eval.json && sha256sum r/*.* r/.lock > run.sums", dir);
    snprintf(p, sizeof p, "%s/e.err", dir);
    static const char *const record[] = {"metrics.jsonl", "val.json", ".lock", "report.html",
                                         "eval.json", "tb/x.onnx"};
    for (size_t i = 0; i < sizeof record / sizeof *record; i++) {
        rc = vt_test_sh("cd '%s' && '%s' export r --onnx r/%s 2> e.err", dir, bin, record[i]);
        TCHECK(rc == 1 && sh_err(p, "an input"), "export onto r/%s: rc %d", record[i], rc);
    }
    rc = vt_test_sh("cd '%s' && '%s' embed r data/test --out r/metrics.npy 2> e.err", dir, bin);
    TCHECK(rc != 0 && sh_err(p, "r/metrics.csv"), "embed's CSV onto r/metrics.csv: rc %d", rc);
    rc = vt_test_sh("cd '%s' && '%s' predict r \"$(ls data/test/*/* | head -n 1)\" --dump-input "
                    "r/val.json > /dev/null 2> e.err", dir, bin);
    TCHECK(rc == 2 && sh_err(p, "an input"), "predict --dump-input onto r/val.json: rc %d", rc);
    TCHECK(vt_test_sh("cd '%s' && sha256sum --quiet -c run.sums && test ! -e r/metrics.npy",
                      dir) == 0, "a file of the run changed");
    rc = vt_test_sh("cd '%s' && '%s' eval r data -q --clips-per-video 1 > /dev/null 2> e.err && "
                    "'%s' export r --onnx r/model.onnx > /dev/null 2>> e.err && "
                    "echo '{}' > curly && ! cmp -s r/eval.json curly", dir, bin, bin);
    TCHECK(rc == 0, "eval into its run, or export to a new file there: rc %d", rc);
    /* special files */
    vt_test_sh("cd '%s' && mkfifo ff", dir);
    rc = vt_test_sh("cd '%s' && timeout 20 '%s' export r --onnx ff 2> e.err; test -p ff", dir, bin);
    TCHECK(rc == 0, "export onto a FIFO: refused, the FIFO kept");
    if (geteuid() == 0 && vt_test_sh("cd '%s' && mknod -m 666 dv c 1 7", dir) == 0) {
        rc = vt_test_sh("cd '%s' && timeout 20 '%s' export r --onnx dv 2> e.err; test -c dv", dir, bin);
        TCHECK(rc == 0, "export onto a device node: refused, the node kept");
    } else {
        printf("test_outputs: not root: export onto a device node not tried\n");
    }
    /* predict's and bench decode's outputs onto the video they read: refused before any
     * decoding, the video unchanged */
    rc = vt_test_sh("cd '%s' && cp \"$(ls data/test/*/*.mp4 | head -n 1)\" v.mp4 && cp v.mp4 v0.mp4 && "
                    "'%s' predict r v.mp4 --dump-input v.mp4 > /dev/null 2> e.err", dir, bin);
    snprintf(p, sizeof p, "%s/e.err", dir);
    TCHECK(rc == 2 && sh_err(p, "an input of this command") &&
           vt_test_sh("cd '%s' && cmp -s v.mp4 v0.mp4", dir) == 0,
           "predict --dump-input onto its video: rc %d", rc);
    rc = vt_test_sh("cd '%s' && '%s' bench decode v.mp4 --starts-out v.mp4 > /dev/null 2> e.err",
                    dir, bin);
    TCHECK(rc == 2 && sh_err(p, "an input of this command") &&
           vt_test_sh("cd '%s' && cmp -s v.mp4 v0.mp4", dir) == 0,
           "bench decode --starts-out onto its video: rc %d", rc);
    /* an output whose folder is missing or read-only: refused before any work */
    rc = vt_test_sh("cd '%s' && '%s' embed r data/test --out nodir/e.safetensors > e.out 2> e.err",
                    dir, bin);
    TCHECK(rc != 0 && sh_err(p, "nodir: No such file") && vt_test_sh("cd '%s' && ! grep -q "
           "'embed:.*100%%' e.out e.err", dir) == 0, "embed --out NODIR/x: rc %d, or work done", rc);
    rc = vt_test_sh("cd '%s' && '%s' export r --onnx nodir/m.onnx 2> e.err", dir, bin);
    TCHECK(rc == 1 && sh_err(p, "make it first"), "export --onnx NODIR/x: rc %d", rc);
    /* a folder that holds a run */
    rc = vt_test_sh("cd '%s' && '%s' train data --out r %s 2> t.err", dir, bin, targs);
    snprintf(p, sizeof p, "%s/t.err", dir);
    TCHECK(rc == 1 && sh_err(p, "holds a run already") && sh_err(p, "--force"),
           "train into a run: rc %d", rc);
    vt_test_sh("cd '%s' && touch r/eval.json r/confusion.csv", dir);
    rc = vt_test_sh("cd '%s' && '%s' train data --out r %s --force --max-steps 1 > t.log 2>&1 && "
                    "test ! -e r/eval.json && test ! -e r/confusion.csv && test ! -e r/best.safetensors",
                    dir, bin, targs);
    TCHECK(rc == 0, "--force: the old run's files gone together");
    /* another train holds the folder (its live pid in the lock file: here the shell's):
     * refused at once, naming its pid */
    rc = vt_test_sh("cd '%s' && exec 9>r/.lock && flock -n 9 && echo $$ >&9 && echo $$ > "
                    "holder && '%s' train data --out r --force %s 2> t.err", dir, bin, targs);
    char hp[4300];
    snprintf(hp, sizeof hp, "%s/holder", dir);
    char *holder = vt_test_slurp(hp, NULL);
    if (holder)
        holder[strcspn(holder, "\n")] = 0;
    TCHECK(rc == 1 && sh_err(p, "in use by another vidtrain train") && holder &&
               sh_err(p, holder), "a held folder: rc %d", rc);
    free(holder);
    /* a garbage config.json: --resume takes the configuration from the checkpoint */
    rc = vt_test_sh("cd '%s' && echo 'not json{' > r/config.json && '%s' train --resume r -q "
                    "> t.log 2> t.err", dir, bin);
    TCHECK(rc == 0 && sh_err(p, "its own copy"), "--resume with a garbage config.json: rc %d", rc);
    /* inside the dataset, onto a file */
    rc = vt_test_sh("cd '%s' && '%s' train data --out data/train/run %s 2> t.err", dir, bin, targs);
    TCHECK(rc == 1 && sh_err(p, "inside the dataset") &&
           vt_test_sh("test ! -e '%s/data/train/run'", dir) == 0, "--out inside the dataset: rc %d", rc);
    rc = vt_test_sh("cd '%s' && '%s' train data --out r8 %s --max-steps 1 --dump data/train/dd "
                    "> /dev/null 2> t.err", dir, bin, targs);
    TCHECK(rc == 1 && sh_err(p, "an input folder") &&
           vt_test_sh("test ! -e '%s/data/train/dd' && test ! -e '%s/r8'", dir, dir) == 0,
           "--dump inside the dataset: rc %d, or a folder made there", rc);
    rc = vt_test_sh("cd '%s' && '%s' train data --out newp/../data/x %s 2> t.err", dir, bin, targs);
    TCHECK(rc == 1 && sh_err(p, "inside the dataset") &&
           vt_test_sh("test ! -e '%s/data/x' && test ! -e '%s/newp'", dir, dir) == 0,
           "--out through a missing folder's .. into the dataset: rc %d", rc);
    rc = vt_test_sh("cd '%s' && touch afile && '%s' train data --out afile %s 2> t.err", dir, bin, targs);
    TCHECK(rc == 1 && sh_err(p, "not a folder"), "--out a file: rc %d", rc);
    /* a start that fails gives back the folder it made */
    rc = vt_test_sh("cd '%s' && '%s' train data --out r9 %s --init missing.pth > /dev/null 2> t.err; "
                    "test ! -e r9", dir, bin, targs);
    TCHECK(rc == 0, "a failed start left r9 behind");
}

/* The atomic writer's temporary name (PATH.tmp.PID) already taken: by a link to an input,
 * or by a FIFO, which an open would block on. It is replaced, never written through, and
 * the write succeeds (the FIFO used to hang it: the alarm fails the test instead). */
static void planted_tmp(void) {
    char path[4200], tmp[4300], in[4200], err[1024] = "";
    snprintf(path, sizeof path, "%s/planted.out", g_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    snprintf(in, sizeof in, "%s/planted.in", g_dir);
    FILE *f = fopen(in, "w");
    TCHECK(f && fputs("keep", f) >= 0 && fclose(f) == 0, "cannot write %s", in);
    vt_inputs_add(in);
    unlink(tmp);
    TCHECK(symlink(in, tmp) == 0, "symlink %s", tmp);
    alarm(30);
    int rc = vt_file_write_atomic(path, "new", 3, err, sizeof err);
    TCHECK(rc == 0, "write with a link at its temporary name: %s", err);
    char *s = vt_test_slurp(in, NULL);
    TCHECK(s && !strcmp(s, "keep"), "the input behind the link was written through");
    free(s);
    snprintf(path, sizeof path, "%s/planted2.out", g_dir); /* apart from the case above */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp);
    TCHECK(mkfifo(tmp, 0644) == 0, "mkfifo %s", tmp);
    rc = vt_file_write_atomic(path, "new2", 4, err, sizeof err);
    alarm(0);
    s = vt_test_slurp(path, NULL);
    TCHECK(rc == 0 && s && !strcmp(s, "new2") && access(tmp, F_OK) != 0,
           "write with a FIFO at its temporary name: %s", err);
    free(s);
    vt_inputs_clear();
}

/* A run folder given with trailing slashes ("--out ./r7/", "eval r7/") is taken without
 * them: every path built from it has one slash (the end line said ./r7//best.safetensors,
 * config.json kept "./r7/", eval wrote ./r7//eval.json). */
static void run_slashes(const char *bin) {
    const char *dir = vt_test_dir("outputs_slashes");
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 3 --val 1 --test 1 --frames 12") == 0,
           "synth");
    const char *targs = "--model tiny --epochs 1 --clip 4x32 --batch 2 --workers 1";
    int rc = vt_test_sh(
        "cd '%s' && '%s' train data --out ./r7/ %s > all.log 2>&1 && "
        "'%s' train data --resume r7// --epochs 2 >> all.log 2>&1 && "
        "'%s' eval ./r7/ data -q --clips-per-video 1 >> all.log 2>&1 && "
        "'%s' predict r7/ \"$(ls data/test/*/* | head -n 1)\" >> all.log 2>&1 && "
        "'%s' embed r7/ data/test --out e.npy >> all.log 2>&1 && "
        "'%s' export r7/ --onnx m.onnx >> all.log 2>&1",
        dir, bin, targs, bin, bin, bin, bin, bin);
    char p[4200];
    snprintf(p, sizeof p, "%s/all.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(rc == 0, "train, resume, eval, predict, embed, export of r7/: rc %d\n%s", rc,
           log ? log : "");
    TCHECK(log && strstr(log, "; ./r7/best.safetensors\n") && strstr(log, "wrote ./r7/eval.json") &&
               strstr(log, "resumed from r7/last.safetensors") && !strstr(log, "r7//"),
           "a path with two slashes:\n%s", log ? log : "");
    free(log);
    snprintf(p, sizeof p, "%s/r7/config.json", dir);
    char *cfg = vt_test_slurp(p, NULL);
    TCHECK(cfg && strstr(cfg, "\"out\":\t\"r7\""), "config.json's out: %s", cfg ? cfg : "(none)");
    free(cfg);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    property();
    planted_tmp();
    const char *bin = vt_test_bin("test_outputs");
    if (bin) {
        commands(bin);
        run_slashes(bin);
    }
    return vt_test_done("test_outputs");
}
