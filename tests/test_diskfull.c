/*
 * test_diskfull.c: a full disk is an error, never a crash or a lost file (issue 41 item 6),
 * for the writers of run files, export and embed. Each case writes onto a small tmpfs
 * (root only: skipped with a message otherwise, or where no tmpfs can be mounted) and
 * checks: a non-zero exit (never a signal), a message naming the path and "No space left
 * on device", no temporary file left, and every file that was there before unchanged.
 *   The writers: vt_file_append and vt_metrics_append (metrics.jsonl: no torn line, the
 *     reason given; it used to say only "cannot append"), vt_file_write_atomic.
 *   The commands: export --onnx onto a full disk with an old FILE there; train whose
 *     config.json does not fit (stopped at the start); train whose first
 *     checkpoint does not fit; train --resume of a run whose new checkpoint does not fit
 *     beside the old one (last/best.safetensors intact); embed --out onto a full disk.
 */
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/eval/metrics.h"
#include "base/common.h"
#include "tests/apputil.h"

static char g_dir[4096], g_m[4200];
static const char *g_bin;

static int file_has(const char *path, const char *what) {
    char *t = vt_test_slurp(path, NULL);
    int r = t && strstr(t, what);
    free(t);
    return r;
}

/* A fresh tmpfs of `kib` KiB at g_m; `fill`: then filled to the last byte. 0 when mounted. */
static int mount_tmpfs(int kib, int fill) {
    vt_test_sh("umount '%s' 2>/dev/null", g_m);
    if (vt_test_sh("mkdir -p '%s' && mount -t tmpfs -o size=%dk tmpfs '%s' 2>/dev/null", g_m,
                   kib, g_m) != 0)
        return -1;
    if (fill)
        vt_test_sh("dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null; true", g_m);
    return 0;
}

/* No *.tmp.* file anywhere under g_m. */
static int no_temp(void) { return vt_test_sh("find '%s' -name '*.tmp*' | grep -q .", g_m) != 0; }

static void writers(void) {
    char p[4400], err[1024];
    TCHECK(mount_tmpfs(64, 0) == 0, "mount");
    snprintf(p, sizeof p, "%s/run", g_m);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", g_m);
    TCHECK(vt_file_append(p, "{\"a\":1}\n", 8, err, sizeof err) == 0, "append: %s", err);
    vt_test_sh("dd if=/dev/zero of='%s/fill' bs=4k 2>/dev/null; true", g_m);
    /* a line longer than the page the file already holds: it cannot fit */
    size_t n = 64 << 10;
    char *big = malloc(n + 1);
    memset(big, 'x', n);
    big[n] = 0;
    TCHECK(vt_file_append(p, big, n, err, sizeof err) != 0 && strstr(err, "No space left") &&
           strstr(err, p), "vt_file_append on a full disk: '%s'", err);
    char *t = vt_test_slurp(p, NULL);
    TCHECK(t && !strcmp(t, "{\"a\":1}\n"), "a torn line was left in %s", p);
    free(t);
    /* the metrics writer itself: a line too long for the space left */
    cJSON *line = cJSON_CreateObject();
    cJSON_AddStringToObject(line, "kind", "step");
    cJSON_AddStringToObject(line, "pad", big);
    snprintf(p, sizeof p, "%s/run", g_m);
    err[0] = 0;
    TCHECK(vt_metrics_append(p, line, err, sizeof err) != 0 && strstr(err, "No space left") &&
           strstr(err, "metrics.jsonl"), "vt_metrics_append on a full disk: '%s'", err);
    cJSON_Delete(line);
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", g_m);
    t = vt_test_slurp(p, NULL);
    TCHECK(t && !strcmp(t, "{\"a\":1}\n"), "vt_metrics_append left a torn line in %s", p);
    free(t);
    /* the atomic writer: the old file whole, no temporary file */
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", g_m);
    TCHECK(vt_file_write_atomic(p, big, n, err, sizeof err) != 0 && strstr(err, "No space left"),
           "vt_file_write_atomic on a full disk: '%s'", err);
    t = vt_test_slurp(p, NULL);
    TCHECK(t && !strcmp(t, "{\"a\":1}\n") && no_temp(), "the atomic writer: old file changed or "
           "a temporary file left");
    free(t);
    free(big);
}

static void commands(void) {
    const char *targs = "--model tiny --epochs 1 --clip 4x32 --batch 2 --workers 1 -q";
    TCHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 3 --val 1 --test 1 --frames 12") == 0,
           "synth");
    TCHECK(vt_test_sh("cd '%s' && '%s' train data --out r %s > t.log 2>&1", g_dir, g_bin, targs)
           == 0, "train");
    char e[4400];
    snprintf(e, sizeof e, "%s/c.err", g_dir);
    /* export onto a full disk, over an old FILE */
    TCHECK(mount_tmpfs(40, 0) == 0, "mount");
    vt_test_sh("echo old > '%s/x.onnx'", g_m);
    int rc = vt_test_sh("cd '%s' && '%s' export r --onnx m/x.onnx 2> c.err", g_dir, g_bin);
    TCHECK(rc == 1 && file_has(e, "No space left") && file_has(e, "m/x.onnx"),
           "export on a full disk: exit %d (see %s)", rc, e);
    char p[4400];
    snprintf(p, sizeof p, "%s/x.onnx", g_m);
    TCHECK(file_has(p, "old") && no_temp(), "export: the old FILE changed or a temp file left");
    /* train whose first checkpoint does not fit */
    rc = vt_test_sh("cd '%s' && '%s' train data --out m/r %s > /dev/null 2> c.err", g_dir, g_bin,
                    targs);
    TCHECK(rc == 1 && file_has(e, "No space left") && file_has(e, "m/r/last.safetensors"),
           "train on a full disk: exit %d (see %s)", rc, e);
    TCHECK(no_temp(), "train on a full disk: a temporary file left");
    /* train whose config.json does not fit (the lock's page does): it stops at the start,
     * where it used to warn and train the whole run before failing at the first metrics
     * line or checkpoint */
    TCHECK(mount_tmpfs(40, 0) == 0, "mount");
    vt_test_sh("mkdir '%s/r2' && echo 1 > '%s/r2/.lock' && dd if=/dev/zero of='%s/fill' bs=4k "
               "2>/dev/null; true", g_m, g_m, g_m);
    rc = vt_test_sh("cd '%s' && '%s' train data --out m/r2 %s > /dev/null 2> c.err", g_dir, g_bin,
                    targs);
    TCHECK(rc == 1 && file_has(e, "No space left") && file_has(e, "m/r2/config.json") &&
           !file_has(e, "metrics") && !file_has(e, "safetensors"),
           "train whose config.json does not fit: exit %d (see %s)", rc, e);
    TCHECK(no_temp() && vt_test_sh("test ! -e '%s/r2/config.json'", g_m) == 0,
           "train whose config.json does not fit: a file left");
    /* --resume: the new checkpoint does not fit beside the old, which stays whole */
    TCHECK(mount_tmpfs(5000, 0) == 0, "mount");
    vt_test_sh("cp -a '%s/r' '%s/r' && sha256sum '%s'/r/*.safetensors > '%s/sums'", g_dir, g_m,
               g_m, g_dir);
    rc = vt_test_sh("cd '%s' && '%s' train --resume m/r --epochs 2 -q > /dev/null 2> c.err",
                    g_dir, g_bin);
    TCHECK(rc == 1 && file_has(e, "No space left") && file_has(e, "m/r/last.safetensors"),
           "--resume on a full disk: exit %d (see %s)", rc, e);
    TCHECK(vt_test_sh("sha256sum --quiet -c '%s/sums'", g_dir) == 0 && no_temp(),
           "--resume on a full disk: a checkpoint changed or a temporary file left");
    /* embed onto a full disk */
    TCHECK(mount_tmpfs(40, 1) == 0, "mount");
    rc = vt_test_sh("cd '%s' && '%s' embed r data/test --out m/e.npy > /dev/null 2> c.err", g_dir,
                    g_bin);
    /* the .csv is written first (the pair changes together): either file may be named */
    TCHECK(rc == 1 && file_has(e, "No space left") && file_has(e, "m/e."),
           "embed on a full disk: exit %d (see %s)", rc, e);
    TCHECK(no_temp() && vt_test_sh("test ! -e '%s/e.npy' && test ! -e '%s/e.csv'", g_m, g_m) == 0,
           "embed on a full disk: a temporary or partial file left");
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    if (geteuid() != 0) {
        printf("test_diskfull: not root: the full-disk tests (a tmpfs) are skipped\n");
        return VT_TEST_SKIP;
    }
    /* a tmpfs left mounted by an earlier run that was killed would stop vt_test_dir */
    vt_test_sh("umount '%s/diskfull/m' 2>/dev/null; true",
               vt_test_env("VT_TMP", "/tmp/vidtrain-tests"));
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("diskfull"));
    snprintf(g_m, sizeof g_m, "%s/m", g_dir);
    if (mount_tmpfs(64, 0) != 0) {
        printf("test_diskfull: cannot mount a tmpfs here: the full-disk tests are skipped\n");
        return VT_TEST_SKIP;
    }
    writers();
    g_bin = vt_test_bin("test_diskfull");
    if (g_bin)
        commands();
    vt_test_sh("umount '%s' || umount -l '%s'", g_m, g_m);
    return vt_test_done("test_diskfull");
}
