/*
 * test_prep_safety.c: `vidtrain prep` when DST, not a video, is the problem (issue 41).
 *  1. A full disk (a 40 KiB tmpfs; root only, skipped with a message otherwise): exit 1,
 *     not a crash (a failed trailer was written twice: exit 139), a message naming DST and
 *     "No space left on device", no video recorded bad, no partial or temporary file
 *     left; after the tmpfs grows, the same command resumes and completes.
 *  2. Two preps into one DST: the second is refused at once, naming DST and the first's
 *     pid (the first held stopped by SIGSTOP, so the two surely overlap); the first then
 *     completes with no video recorded bad (before, both exited 0 and the renames of one
 *     failed under the other: "bad: cannot rename").
 *  3. Ctrl-C: prep's own line (not training's "writing a checkpoint"), exit 130, the
 *     files not reached counted; a rerun resumes to exit 0. A summary that cannot be
 *     written (standard output on /dev/full) is an error too.
 *  4. --trim: DST/prep-segments.csv names exactly the segments that are on disk (a
 *     segment past its video's end is never written, and was listed); a segment whose
 *     name a file of SRC has gets a number (both were written to one file, listed twice).
 *  5. The output rule (docs/design.md §3.8): SRC is an input. `prep SRC SRC/x` and a DST
 *     that is a link into SRC are refused before anything is made (they wrote copies, a
 *     manifest and a lock into the dataset, exit 0); a link planted at a video's hidden
 *     temporary name never carries the write to the source it points at (FFmpeg's
 *     avio_open truncated the source video through it); a link at an output's name that
 *     points at a source video is refused with its name. SRC's bytes are compared before
 *     and after each (sha256sum of every file, and the list of names).
 *  6. Two sources whose outputs would share a name (a/1.webm -> a/1.webm.mp4 beside a
 *     source a/1.webm.mp4) each get their own copy, and prep-paths.csv names 1.webm's;
 *     a rerun after SRC gained the a/1.webm.mp4 that takes the name from a/1.webm's copy
 *     makes the new source's copy instead of keeping the other's; a prep from another
 *     SRC into that DST is refused (it found every copy done and kept the first SRC's).
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/apputil.h"
#include "tests/procutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin;
static char g_dir[4096], g_data[4300];

/* Lines of the manifest of dst whose status is ok, and those that say bad. */
static void manifest_counts(const char *dst, int *ok, int *bad) {
    char p[4400];
    snprintf(p, sizeof p, "%s/prep-manifest.csv", dst);
    char *m = vt_test_slurp(p, NULL);
    *ok = *bad = 0;
    for (char *l = m; l && *l;) {
        char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        *ok += len > 4 && !strncmp(l + len - 4, ",ok,", 4); /* status ok, damage empty */
        for (size_t i = 0; i + 6 <= len; i++)
            if (!strncmp(l + i, ",bad: ", 6)) {
                (*bad)++;
                break;
            }
        l = e ? e + 1 : l + len;
    }
    free(m);
}

static int nvideos(void) {
    char cmd[4500], line[64] = "";
    /* not hidden: synth's record of what it wrote (.vidtrain-synth) is no video */
    snprintf(cmd, sizeof cmd, "find '%s' -type f -not -name '.*' | wc -l", g_data);
    FILE *p = popen(cmd, "r");
    if (p && !fgets(line, sizeof line, p))
        line[0] = 0;
    if (p)
        pclose(p);
    return atoi(line);
}

static int file_has(const char *path, const char *what) {
    char *t = vt_test_slurp(path, NULL);
    int r = t && strstr(t, what);
    free(t);
    return r;
}

/* 1. A full disk. */
static void test_disk_full(int nvid) {
    if (geteuid() != 0) {
        printf("test_prep_safety: not root: the full-disk test (a tmpfs) is skipped\n");
        return;
    }
    char m[4400], dst[4500], err[4500];
    snprintf(m, sizeof m, "%s/full", g_dir);
    snprintf(dst, sizeof dst, "%s/out", m);
    snprintf(err, sizeof err, "%s/full.err", g_dir);
    if (vt_test_sh("mkdir -p '%s' && mount -t tmpfs -o size=40k tmpfs '%s' 2>/dev/null", m, m)
        != 0) {
        printf("test_prep_safety: cannot mount a tmpfs here: the full-disk test is skipped\n");
        return;
    }
    int rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 --jobs 1 > '%s.out' 2> '%s'", g_bin,
                        g_data, dst, err, err);
    TCHECK(rc == 1, "full disk: exit %d, 1 expected (139 was the crash; see %s)", rc, err);
    TCHECK(file_has(err, "No space left on device") && file_has(err, dst),
           "full disk: no message naming %s and 'No space left on device' in %s", dst, err);
    int ok, bad, ok1;
    manifest_counts(dst, &ok1, &bad);
    TCHECK(bad == 0, "full disk: %d videos recorded bad for DST's failure", bad);
    TCHECK(ok1 < nvid, "full disk: the disk did not fill (%d of %d written)", ok1, nvid);
    rc = vt_test_sh("find '%s' -name '*.prep-part' -o -name '*.tmp.*' | grep -q .", dst);
    TCHECK(rc != 0, "full disk: a partial or temporary file is left in %s", dst);
    /* Space freed: the same command resumes. */
    rc = vt_test_sh("mount -o remount,size=16m '%s'", m);
    TCHECK(rc == 0, "remount the tmpfs larger");
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 --jobs 1 > '%s.out2' 2> '%s.2'", g_bin,
                    g_data, dst, err, err);
    TCHECK(rc == 0, "full disk, then space: the rerun exits %d (see %s.2)", rc, err);
    manifest_counts(dst, &ok, &bad);
    TCHECK(ok == nvid && bad == 0, "after the rerun: %d of %d ok, %d bad", ok, nvid, bad);
    char p[4600], want[64];
    snprintf(p, sizeof p, "%s.out2", err);
    snprintf(want, sizeof want, "%d done before, 0 bad", ok1);
    TCHECK(file_has(p, want), "the rerun resumes: '%s' expected in %s", want, p);
    vt_test_sh("umount '%s' || umount -l '%s'", m, m);
}

/* 2. Two preps into one DST. */
static void test_two_preps(int nvid) {
    char dst[4400], cmd[9000], errb[4400];
    snprintf(dst, sizeof dst, "%s/two", g_dir);
    snprintf(errb, sizeof errb, "%s/two_b.err", g_dir);
    snprintf(cmd, sizeof cmd, "exec '%s' prep '%s' '%s' --short-side 32 --jobs 1 > '%s/two_a.out' "
             "2> '%s/two_a.err'", g_bin, g_data, dst, g_dir, g_dir);
    pid_t a = vt_test_spawn(cmd);
    char manifest[4500];
    snprintf(manifest, sizeof manifest, "%s/prep-manifest.csv", dst);
    int started = vt_test_wait_lines(manifest, 2, a); /* its lock is taken before the manifest */
    TCHECK(started, "the first prep wrote no video (see %s/two_a.err)", g_dir);
    kill(a, SIGSTOP); /* it holds DST while the second one tries */
    double t0 = vt_now();
    int rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 --jobs 1 > /dev/null 2> '%s'", g_bin,
                        g_data, dst, errb);
    double dt = vt_now() - t0;
    kill(a, SIGCONT);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", (int)a);
    TCHECK(rc == 1, "the second prep into one DST: exit %d, 1 expected (see %s)", rc, errb);
    TCHECK(file_has(errb, dst) && file_has(errb, pid) && file_has(errb, "another prep"),
           "the refusal names DST, 'another prep' and %s: see %s", pid, errb);
    TCHECK(dt < 10, "the refusal took %.1f s: not at once", dt);
    rc = vt_test_reap(a, 300);
    TCHECK(rc == 0, "the first prep: exit %d (see %s/two_a.err)", rc, g_dir);
    int ok, bad;
    manifest_counts(dst, &ok, &bad);
    TCHECK(ok == nvid && bad == 0, "the first prep: %d of %d ok, %d bad", ok, nvid, bad);
}

/* 3. Ctrl-C. */
static void test_sigint(int nvid) {
    char dst[4400], cmd[9000], err[4400], out[4400];
    snprintf(dst, sizeof dst, "%s/int", g_dir);
    snprintf(err, sizeof err, "%s/int.err", g_dir);
    snprintf(out, sizeof out, "%s/int.out", g_dir);
    snprintf(cmd, sizeof cmd, "exec '%s' prep '%s' '%s' --short-side 32 --jobs 1 > '%s' 2> '%s'",
             g_bin, g_data, dst, out, err);
    pid_t a = vt_test_spawn(cmd);
    char manifest[4500];
    snprintf(manifest, sizeof manifest, "%s/prep-manifest.csv", dst);
    TCHECK(vt_test_wait_lines(manifest, 2, a), "no video written before Ctrl-C (see %s)", err);
    /* stopped first, so the signal lands with files still to do however fast this is */
    kill(a, SIGSTOP);
    kill(a, SIGINT);
    kill(a, SIGCONT);
    int rc = vt_test_reap(a, 300);
    TCHECK(rc == 130, "prep after Ctrl-C: exit %d, 130 expected (see %s)", rc, err);
    TCHECK(file_has(err, "vidtrain prep: stopping") && file_has(err, "run the same command") &&
               !file_has(err, "checkpoint"),
           "Ctrl-C: prep's own line expected (no checkpoint): see %s", err);
    TCHECK(file_has(out, "not reached") && !file_has(out, " 0 not reached"),
           "Ctrl-C: the files not reached are counted: see %s", out);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 --jobs 1 > '%s.2' 2>&1", g_bin, g_data,
                    dst, out);
    int ok, bad;
    manifest_counts(dst, &ok, &bad);
    TCHECK(rc == 0 && ok == nvid && bad == 0, "rerun after Ctrl-C: exit %d, %d of %d ok, %d bad",
           rc, ok, nvid, bad);
    /* the summary is a writer too: standard output on a full device fails the run */
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side 32 > /dev/full 2> '%s.3'", g_bin, g_data,
                    dst, out);
    TCHECK(rc == 1, "prep with its summary going to /dev/full: exit %d, 1 expected", rc);
}

/* 4. --trim: the labels file names what is on disk. */
static void test_trim_csv(void) {
    char data[4400], dst[4400], csv[4500], p[4600];
    snprintf(data, sizeof data, "%s/trim", g_dir);
    snprintf(dst, sizeof dst, "%s/trim_out", g_dir);
    int rc = vt_test_sh("'%s' synth '%s' --classes 2 --train 2 --val 0 --test 0 --frames 24 "
                        "> /dev/null 2>&1", g_bin, data);
    TCHECK(rc == 0, "synth for --trim");
    /* two segments inside their 1 s videos, one far past its video's end */
    rc = vt_test_sh("cd '%s' && a=$(ls train/move_left/* | sed -n 1p) && "
                    "b=$(ls train/move_left/* | sed -n 2p) && c=$(ls train/move_right/* | sed -n 1p) "
                    "&& printf 'path,class,start,end\\n%%s,move_left,0,0.5\\n%%s,move_left,30,40\\n"
                    "%%s,move_right,0.2,0.8\\n' \"$a\" \"$b\" \"$c\" > ../trim_labels.csv", data);
    TCHECK(rc == 0, "labels for --trim");
    rc = vt_test_sh("'%s' prep '%s' '%s' --trim --labels '%s/trim_labels.csv' --short-side 32 "
                    "--jobs 1 > '%s/trim.out' 2>&1", g_bin, data, dst, g_dir, g_dir);
    TCHECK(rc == 0, "prep --trim: exit %d (see %s/trim.out)", rc, g_dir);
    snprintf(csv, sizeof csv, "%s/prep-segments.csv", dst);
    char *t = vt_test_slurp(csv, NULL);
    TCHECK(t != NULL, "no %s", csv);
    int rows = 0, missing = 0;
    char *save = NULL;
    for (char *l = t ? strtok_r(t, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(l, "path,", 5))
            continue;
        *strchr(l, ',') = 0;
        rows++;
        snprintf(p, sizeof p, "%s/%s", dst, l);
        if (access(p, F_OK) != 0) {
            fprintf(stderr, "prep-segments.csv names %s, which is not on disk\n", l);
            missing++;
        }
    }
    free(t);
    TCHECK(missing == 0 && rows == 2, "prep-segments.csv: %d rows, %d not on disk (want 2, 0)",
           rows, missing);

    /* a segment's name taken by a file of SRC: x.mp4's [0, 0.5) is x_0.000_0.500.mp4, and
     * SRC has a file of that name, another sample of another class. Both were written to
     * the one name, and prep-segments.csv listed it twice with two classes; now the
     * segment is numbered (x_0.000_0.500.2.mp4), every sample on disk once. */
    char two[4400];
    snprintf(two, sizeof two, "%s/trim2", g_dir);
    snprintf(dst, sizeof dst, "%s/trim2_out", g_dir);
    rc = vt_test_sh("mkdir -p '%s/c' && cd '%s/train' && cp \"$(ls move_left/* | sed -n 1p)\" "
                    "'%s/c/x.mp4' && cp \"$(ls move_right/* | sed -n 1p)\" "
                    "'%s/c/x_0.000_0.500.mp4' && printf 'path,class,start,end\nc/x.mp4,move_left,"
                    "0,0.5\nc/x_0.000_0.500.mp4,move_right,,\n' > '%s/trim2.csv' && '%s' prep "
                    "'%s' '%s' --trim --labels '%s/trim2.csv' --short-side 32 --jobs 1 > "
                    "'%s/trim2.out' 2>&1", two, data, two, two, g_dir, g_bin, two, dst, g_dir,
                    g_dir);
    TCHECK(rc == 0, "prep --trim with a segment's name taken: exit %d (see %s/trim2.out)", rc,
           g_dir);
    snprintf(csv, sizeof csv, "%s/prep-segments.csv", dst);
    t = vt_test_slurp(csv, NULL);
    TCHECK(t && strstr(t, "c/x_0.000_0.500.mp4,move_right\n") &&
               strstr(t, "c/x_0.000_0.500.2.mp4,move_left\n"),
           "prep-segments.csv names one file for two samples: %s", t ? t : "(none)");
    free(t);
    TCHECK(vt_test_sh("test $(find '%s/c' -name '*.mp4' | wc -l) -eq 2", dst) == 0,
           "not 2 copies in %s/c", dst);
}

/* Every name under dir and every file's sha256, one text (free()). */
static char *tree_sums(const char *dir) {
    char list[4400];
    snprintf(list, sizeof list, "%s/sums.txt", g_dir);
    if (vt_test_sh("cd '%s' && { find . | sort; find . -type f -exec sha256sum {} + | sort; } "
                   "> '%s'", dir, list) != 0)
        return NULL;
    return vt_test_slurp(list, NULL);
}

/* 5. Outputs never land in SRC. */
static void test_into_src(void) {
    char src[4400], log[4400], lnk[4400], dst[4400];
    snprintf(src, sizeof src, "%s/small", g_dir);
    snprintf(log, sizeof log, "%s/into.log", g_dir);
    int rc = vt_test_sh("mkdir -p '%s/a' '%s/b' && cp \"$(find '%s/train' -name '*.mp4' | sort | "
                        "head -1)\" '%s/a/1.mp4' && cp \"$(find '%s/train' -name '*.avi' | sort | "
                        "head -1)\" '%s/b/2.avi'", src, src, g_data, src, g_data, src);
    TCHECK(rc == 0, "a small SRC");
    char *before = tree_sums(src);
    TCHECK(before != NULL, "sums of %s", src);
#define PREP "'%s' prep --jobs 1 --codec mpeg4 --short-side 32 '%s' '%s' > '%s' 2>&1"
    /* DST inside SRC */
    char in_src[4400];
    snprintf(in_src, sizeof in_src, "%s/x", src);
    rc = vt_test_sh("cd '%s' && '%s' prep --jobs 1 --codec mpeg4 --short-side 32 small small/x "
                    "> '%s' 2>&1", g_dir, g_bin, log);
    TCHECK(rc == 1 && file_has(log, "inside") && file_has(log, "small/x"),
           "prep SRC SRC/x: exit %d (want 1, naming DST and 'inside'; see %s)", rc, log);
    TCHECK(access(in_src, F_OK) != 0, "prep SRC SRC/x made %s", in_src);
    /* DST a link into SRC */
    snprintf(lnk, sizeof lnk, "%s/to_a", g_dir);
    rc = vt_test_sh("ln -sfn '%s/a' '%s' && " PREP, src, lnk, g_bin, src, lnk, log);
    TCHECK(rc == 1 && file_has(log, "inside"), "prep SRC LINK-INTO-SRC: exit %d (see %s)", rc,
           log);
    /* a link at the temporary name of 1.mp4's output, pointing at the source */
    snprintf(dst, sizeof dst, "%s/dst_planted", g_dir);
    rc = vt_test_sh("mkdir -p '%s/a' && ln -s '%s/a/1.mp4' '%s/a/.1.mp4.prep-part' && " PREP,
                    dst, src, dst, g_bin, src, dst, log);
    TCHECK(rc == 0, "prep with a link planted at a temporary name: exit %d (see %s)", rc, log);
    char *after = tree_sums(src);
    TCHECK(before && after && !strcmp(before, after),
           "a link at DST's temporary name changed SRC (the write went through it)");
    free(after);
    /* a link at an output's final name, pointing at the source: refused, naming it */
    snprintf(dst, sizeof dst, "%s/dst_linked", g_dir);
    rc = vt_test_sh("mkdir -p '%s/a' && ln -s '%s/a/1.mp4' '%s/a/1.mp4' && " PREP, dst, src, dst,
                    g_bin, src, dst, log);
    TCHECK(rc == 1 && file_has(log, "dst_linked/a/1.mp4") && file_has(log, "inside"),
           "prep onto a link to a source video: exit %d (want 1, naming it; see %s)", rc, log);
    after = tree_sums(src);
    TCHECK(before && after && !strcmp(before, after), "SRC changed");
    free(after);
    free(before);
#undef PREP
}

/* 6. Two sources, one output name: a/1.webm becomes a/1.webm.mp4 beside a/1.mp4, and SRC
 * has an a/1.webm.mp4 of its own; the two were written to one file (the later copy
 * replaced the other, or with two jobs one failed on the other's temporary name) and
 * prep-paths.csv named the survivor as 1.webm's copy. Every source gets its own output;
 * a rerun redoes nothing (the names are a function of SRC's). */
static void test_names(void) {
    char src[4400], dst[4400], log[4400], p[4600];
    snprintf(src, sizeof src, "%s/names", g_dir);
    snprintf(dst, sizeof dst, "%s/names_out", g_dir);
    snprintf(log, sizeof log, "%s/names.log", g_dir);
    /* a Matroska file named .webm reads as WebM (FFmpeg goes by the bytes) */
    int rc = vt_test_sh("mkdir -p '%s/a' && f=$(find '%s/train' -name '*.mp4' | sort) && "
                        "cp $(echo \"$f\" | sed -n 1p) '%s/a/1.mp4' && "
                        "cp \"$(find '%s/train' -name '*.mkv' | sort | head -1)\" '%s/a/1.webm'",
                        src, g_data, src, g_data, src);
    TCHECK(rc == 0, "SRC with colliding names");
#define PREP "'%s' prep --jobs 2 --codec mpeg4 --short-side 32 '%s' '%s' >> '%s' 2>&1"
    /* first 1.mp4 and 1.webm (-> 1.webm.mp4); then SRC gains a 1.webm.mp4 of its own,
     * which takes that name, and 1.webm's copy moves to 1.webm.2.mp4: the rerun skipped
     * the new source (its name's row said ok, the file was there: 1.webm's copy) */
    rc = vt_test_sh(PREP " && cp $(find '%s/train' -name '*.mp4' | sort | sed -n 2p) "
                    "'%s/a/1.webm.mp4' && " PREP, g_bin, src, dst, log, g_data, src, g_bin, src,
                    dst, log);
    TCHECK(rc == 0, "prep of colliding names: exit %d (see %s)", rc, log);
    char *m = NULL;
    snprintf(p, sizeof p, "%s/prep-manifest.csv", dst);
    TCHECK((m = vt_test_slurp(p, NULL)) && strstr(m, "a/1.webm.mp4,") &&
               strstr(strstr(m, "a/1.webm.mp4,"), "names/a/1.webm.mp4,"),
           "the copy a/1.webm.mp4 is not the source a/1.webm.mp4's: %s", m ? m : "(none)");
    free(m);
    int ok = 0, bad = 0;
    manifest_counts(dst, &ok, &bad);
    TCHECK(ok == 3 && bad == 0, "manifest: %d ok, %d bad rows (want 3 distinct copies, 0)", ok,
           bad);
    TCHECK(vt_test_sh("test $(find '%s/a' -type f | wc -l) -eq 3", dst) == 0,
           "not 3 copies in %s/a", dst);
    snprintf(p, sizeof p, "%s/prep-paths.csv", dst);
    char *paths = vt_test_slurp(p, NULL);
    TCHECK(paths && strstr(paths, "a/1.webm,a/1.webm.2.mp4\n"),
           "prep-paths.csv maps a/1.webm to: %s", paths ? paths : "(none)");
    free(paths);
    rc = vt_test_sh(PREP, g_bin, src, dst, log);
    TCHECK(rc == 0 && file_has(log, "0 written, 3 done before"),
           "the rerun redid copies: exit %d (see %s)", rc, log);

    /* Another SRC into that DST, its files of the same names: every copy was found done,
     * and the first SRC's videos kept as its own (exit 0). Refused, DST untouched; a DST
     * an earlier vidtrain made (no src line) resumes and records it. */
    char copies[4500]; /* the copies (DST's lock file takes each prep's pid) */
    snprintf(copies, sizeof copies, "%s/a", dst);
    char *before = tree_sums(copies);
    TCHECK(vt_test_sh("cp -r '%s' '%s2'", src, src) == 0, "the second SRC");
    rc = vt_test_sh("'%s' prep --jobs 2 --codec mpeg4 --short-side 32 '%s2' '%s' > '%s' 2>&1",
                    g_bin, src, dst, log);
    TCHECK(rc == 2 && file_has(log, "was made from another SRC"),
           "prep from another SRC into a DST: exit %d, want 2 (see %s)", rc, log);
    char *after = tree_sums(copies);
    TCHECK(before && after && !strcmp(before, after), "a refused prep changed DST's copies");
    free(before);
    free(after);
    snprintf(p, sizeof p, "%s/prep-options.txt", dst);
    rc = vt_test_sh("sed -i '/^src=/d' '%s' && " PREP " && grep -q '^src=' '%s'", p, g_bin, src,
                    dst, log, p);
    TCHECK(rc == 0 && file_has(log, "0 written, 3 done before"),
           "a DST without the src line: exit %d, or not resumed (see %s)", rc, log);
#undef PREP
}

int main(void) {
    g_bin = vt_test_bin("test_prep_safety");
    if (!g_bin)
        return VT_TEST_SKIP;
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("prep_safety"));
    snprintf(g_data, sizeof g_data, "%s/data", g_dir);
    /* 32 small videos: enough that a stopped prep has files left to do */
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 12 --val 2 --test 2 --frames 24");
    TCHECK(rc == 0, "synth (see %s/synth.log)", g_dir);
    if (rc)
        return vt_test_done("test_prep_safety");
    int n = nvideos();
    TCHECK(n == 32, "%d videos synthesised, 32 expected", n);
    test_disk_full(n);
    test_two_preps(n);
    test_sigint(n);
    test_trim_csv();
    test_into_src();
    test_names();
    return vt_test_done("test_prep_safety");
}
