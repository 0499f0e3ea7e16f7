/*
 * apputil.h: what the tests that drive the vidtrain command (or the ffmpeg command)
 * share — find the binary under test, run a shell command built printf-style and get
 * its exit code the way a shell reports it, make a synthetic data set with
 * `vidtrain synth`, read a whole file, a JSON file or a script's figures, count a folder's files, measure how
 * far two checkpoints are apart, write a small file, and count a video's frames with
 * ffprobe. Header-only (static inline), like testutil.h.
 *
 * It must never hide a failure: every helper returns what happened (an exit code, NULL)
 * and the test decides; the only exits are for a scratch file that cannot be written,
 * where the test could not go on meaningfully.
 */
#ifndef VT_APPUTIL_H
#define VT_APPUTIL_H

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/common.h" /* VT_CHECK, VT_MAX, vt_malloc: vt_test_ckpt_same */
#include "models/formats/safetensors.h"
#include "tests/testutil.h"

/* $VT_BIN (the vidtrain binary ctest passes), or NULL after saying that `test` must run
 * through ctest: the caller then returns VT_TEST_SKIP. */
static inline const char *vt_test_bin(const char *test) {
    const char *bin = vt_test_env("VT_BIN", NULL);
    if (!bin)
        fprintf(stderr, "%s: VT_BIN not set (run through ctest)\n", test);
    return bin;
}

/* Runs the formatted command with `sh -c` (system). Returns its exit code, 128+N when
 * signal N ended it (as a shell reports it, so a crash is never read as success), -1
 * when it could not be run. A non-zero code is printed with the command, for the log. */
__attribute__((format(printf, 1, 2)))
static inline int vt_test_sh(const char *fmt, ...) {
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof cmd) {
        fprintf(stderr, "command too long (%d bytes): %.200s...\n", len, cmd);
        return -1;
    }
    int st = system(cmd);
    int rc = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc != 0)
        fprintf(stderr, "command exited %d: %s\n", rc, cmd);
    return rc;
}

/* `sh -c cmd` in the background, its pid (stdio flushed first, so nothing buffered is
 * written twice); with "exec CMD" the shell is replaced and the pid is CMD's own, so
 * signals reach it directly. Reap it with waitpid. */
static inline pid_t vt_test_spawn(const char *cmd) {
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return p;
}

/* `vidtrain synth DIR/data ARGS`, its output in DIR/synth.log. Returns the exit code. */
static inline int vt_test_synth(const char *bin, const char *dir, const char *args) {
    return vt_test_sh("'%s' synth '%s/data' %s > '%s/synth.log' 2>&1", bin, dir, args, dir);
}

/* The whole file, NUL-terminated (free()); *len (may be NULL) gets its size in bytes.
 * NULL when it cannot be opened or read. */
static inline char *vt_test_slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n;
    char *buf = vt_fread_all(f, &n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    if (len)
        *len = (long)n;
    return buf;
}

/* The ffmpeg command's frames of path through the filter vf (ending in format=rgb24), raw
 * into the scratch file raw, against mine (bytes of RGB24 frames): the largest absolute
 * difference, or -1 after a failed check (ffmpeg ran and gave exactly `bytes`). */
static inline int vt_test_ffmpeg_max_diff(const char *path, const char *vf, const char *raw,
                                          const uint8_t *mine, size_t bytes) {
    TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -i '%s' -vf '%s' -fps_mode passthrough "
                      "-f rawvideo '%s'", path, vf, raw) == 0, "ffmpeg ran on %s", path);
    long len = 0;
    char *ref = vt_test_slurp(raw, &len);
    TCHECK(ref && (size_t)len == bytes, "ffmpeg gave %ld bytes, want %zu", len, bytes);
    int m = -1;
    if (ref && (size_t)len == bytes) {
        m = 0;
        for (size_t i = 0; i < bytes; i++) {
            int d = abs((int)mine[i] - (int)(uint8_t)ref[i]);
            m = d > m ? d : m;
        }
    }
    free(ref);
    return m;
}

/* 1 when the file at path holds the fixed string text; 0 otherwise (unreadable too). */
static inline int vt_test_file_has(const char *path, const char *text) {
    char *s = vt_test_slurp(path, NULL);
    int r = s && strstr(s, text) != NULL;
    free(s);
    return r;
}

/* The same for the file DIR/NAME (a log a test wrote into its folder). */
static inline int vt_test_file_has_in(const char *dir, const char *name, const char *text) {
    char p[4608];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return vt_test_file_has(p, text);
}

/* The value in field `field` (0 or 1) of the line "NAME A [B]" of the file at path: the
 * figures a checking script printed for the C test to judge (tests/check_embed.py).
 * NAN when the file or the line is not there. */
static inline double vt_test_figure(const char *path, const char *name, int field) {
    FILE *f = fopen(path, "r");
    char line[512];
    double v = NAN;
    while (f && fgets(line, sizeof line, f)) {
        char key[128];
        double a, b = NAN;
        int got = sscanf(line, "%127s %lf %lf", key, &a, &b);
        if (got >= 2 && !strcmp(key, name))
            v = field == 0 ? a : b;
    }
    if (f)
        fclose(f);
    return v;
}

/* The file parsed as JSON (cJSON_Delete it), NULL when unreadable or not JSON. */
static inline cJSON *vt_test_read_json(const char *path) {
    char *s = vt_test_slurp(path, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

/* The entries of dir that `ls` shows (names not starting with '.'), -1 when it cannot be
 * read. */
static inline int vt_test_count_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The files of a class-folder data set: vt_test_count_files of every dir/CLASS/ summed,
 * *nclasses (may be NULL) the number of class folders; -1 when dir cannot be read. */
static inline int vt_test_count_class_files(const char *dir, int *nclasses) {
    DIR *d = opendir(dir);
    if (nclasses)
        *nclasses = 0;
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4400 + 256]; /* the folder and a d_name (at most 255 bytes) */
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        int k = vt_test_count_files(sub);
        if (k < 0)
            continue; /* a file, not a class folder */
        n += k;
        if (nclasses)
            (*nclasses)++;
    }
    closedir(d);
    return n;
}

/* What vt_test_ckpt_diff saw besides the distance. */
typedef struct vt_test_ckpt_cmp {
    int ntensors; /* float tensors compared */
    int exact;    /* every compared tensor (int64 counters included) bitwise equal */
    int bitwise;  /* every data byte of the two files (optimizer state included) equal */
} vt_test_ckpt_cmp;

/* How far checkpoint a is from the reference ref: the largest max|a - ref| / max|ref|
 * over the float tensors whose names start with prefix ("" for all), the optimizer's
 * state ("optim.*") left out; 0 when they are equal. -1 when they cannot be compared: a
 * file unreadable, a tensor of a missing from ref or of another size, (prefix "") not
 * the same tensors, or no float tensor to compare. out (may be NULL) gets the counts and the bitwise verdicts. */
static inline double vt_test_ckpt_diff(const char *a, const char *ref, const char *prefix,
                                       vt_test_ckpt_cmp *out) {
    vt_ckpt_info ia, ib;
    char err[512];
    vt_test_ckpt_cmp c = {0, 1, 0};
    if (vt_ckpt_read_info(&ia, a, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    if (vt_ckpt_read_info(&ib, ref, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        vt_ckpt_info_free(&ia);
        return -1;
    }
    long la = 0, lb = 0;
    char *da = vt_test_slurp(a, &la), *db = vt_test_slurp(ref, &lb);
    double worst = da && db && (*prefix || ia.ntensors == ib.ntensors) ? 0 : -1;
    size_t np = strlen(prefix);
    for (int i = 0; i < ia.ntensors && worst >= 0; i++) {
        const vt_ckpt_tensor *x = &ia.tensors[i];
        if (strncmp(x->name, prefix, np))
            continue;
        const vt_ckpt_tensor *y = vt_ckpt_find(&ib, x->name);
        if (!y || y->end - y->begin != x->end - x->begin || y->is_int64 != x->is_int64) {
            worst = -1;
            break;
        }
        if (!strncmp(x->name, "optim.", 6))
            continue;
        const char *bx = da + ia.data_start + x->begin, *by = db + ib.data_start + y->begin;
        if (memcmp(bx, by, (size_t)(x->end - x->begin)))
            c.exact = 0;
        if (x->is_int64)
            continue;
        const float *fx = (const float *)(const void *)bx, *fy = (const float *)(const void *)by;
        double num = 0, den = 0;
        for (int64_t e = 0; e < x->numel; e++) {
            num = fmax(num, fabs((double)fx[e] - (double)fy[e]));
            den = fmax(den, fabs((double)fy[e]));
        }
        worst = fmax(worst, den > 0 ? num / den : num);
        c.ntensors++;
    }
    if (c.ntensors == 0)
        worst = -1; /* nothing compared is no evidence of sameness */
    long na = la - (long)ia.data_start, nb = lb - (long)ib.data_start;
    c.bitwise = da && db && na == nb && na > 0 &&
                !memcmp(da + ia.data_start, db + ib.data_start, (size_t)na);
    free(da);
    free(db);
    vt_ckpt_info_free(&ia);
    vt_ckpt_info_free(&ib);
    if (out)
        *out = c;
    return worst;
}

/* An empty file root/rel, its folders made; exits the test when it cannot (a scan looks
 * at names only). */
static inline void vt_test_touch(const char *root, const char *rel) {
    char path[8300], cmd[16700];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\" && : > '%s'", path, path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot create %s\n", path);
        exit(1);
    }
}

/* Writes text to root/rel (the folder must exist); exits the test when it cannot. */
static inline void vt_test_write_file(const char *root, const char *rel, const char *text) {
    char path[8300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    int bad = fputs(text, f) < 0;
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* The first line of the output of the shell command fmt... into out (its newline removed;
 * empty when there is none). pclose's status, or -1 when it could not be run. */
__attribute__((format(printf, 3, 4)))
static inline int vt_test_sh_line(char *out, size_t n, const char *fmt, ...) {
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    if (!fgets(out, (int)n, p))
        out[0] = 0;
    int st = pclose(p);
    out[strcspn(out, "\n")] = 0;
    return st;
}

/* Frame count by the ffprobe command (decoding every frame), -1 when it fails. */
static inline int64_t vt_test_ffprobe_frames(const char *file) {
    char cmd[8300];
    snprintf(cmd, sizeof cmd,
             "ffprobe -v error -select_streams v:0 -count_frames -show_entries "
             "stream=nb_read_frames -of csv=p=0 '%s'", file);
    FILE *p = popen(cmd, "r");
    long long n = -1;
    if (p) {
        if (fscanf(p, "%lld", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

/* Container duration in seconds by the ffprobe command, -1 when it fails. */
static inline double vt_test_ffprobe_duration(const char *file) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "ffprobe -v error -show_entries format=duration -of csv=p=0 '%s'",
             file);
    FILE *p = popen(cmd, "r");
    double d = -1;
    if (p) {
        if (fscanf(p, "%lf", &d) != 1)
            d = -1;
        pclose(p);
    }
    return d;
}

/* Every tensor of a and b whose name starts with one of `same` (NULL-terminated) must be
 * bitwise equal, and at least one of those starting with `moved` must differ. Returns the
 * number of tensors compared (the commands' tests: towers against one device, --freeze). */
static inline int vt_test_ckpt_same(const char *a, const char *b, const char *const *same,
                                    const char *moved) {
    vt_ckpt_info ia, ib;
    char err[512];
    VT_CHECK(vt_ckpt_read_info(&ia, a, err, sizeof err) == 0, "%s", err);
    VT_CHECK(vt_ckpt_read_info(&ib, b, err, sizeof err) == 0, "%s", err);
    int n = 0, moves = 0;
    for (int i = 0; i < ia.ntensors; i++) {
        const vt_ckpt_tensor *ta = &ia.tensors[i], *tb = vt_ckpt_find(&ib, ta->name);
        TCHECK(tb && tb->numel == ta->numel, "%s: '%s' missing or reshaped", b, ta->name);
        if (!tb || tb->numel != ta->numel)
            continue;
        int want_same = 0;
        for (int k = 0; same[k]; k++)
            want_same |= !strncmp(ta->name, same[k], strlen(same[k]));
        float *x = vt_malloc((size_t)VT_MAX(ta->numel, 1) * 4);
        float *y = vt_malloc((size_t)VT_MAX(ta->numel, 1) * 4);
        VT_CHECK(vt_ckpt_read_tensor(&ia, ta, x, err, sizeof err) == 0, "%s", err);
        VT_CHECK(vt_ckpt_read_tensor(&ib, tb, y, err, sizeof err) == 0, "%s", err);
        const int eq = !memcmp(x, y, (size_t)ta->numel * 4);
        if (want_same) {
            TCHECK(eq, "%s vs %s: '%s' differs (max %.3g)", a, b, ta->name,
                   vt_max_abs_diff(x, y, ta->numel));
            n++;
        } else if (moved && !strncmp(ta->name, moved, strlen(moved))) {
            moves += !eq;
        }
        free(x);
        free(y);
    }
    if (moved)
        TCHECK(moves > 0, "%s: no tensor under '%s' moved", b, moved);
    vt_ckpt_info_free(&ia);
    vt_ckpt_info_free(&ib);
    return n;
}

/* The models' command tests (test_*_cmds): `vidtrain train DIR/data --out DIR/OUT` with the
 * model's `args` (model, clip), 2 steps of batch 4, seed 3, 1 decode worker, quiet, then
 * `extra`; the output in DIR/OUT.log. The exit status. */
static inline int vt_test_train_small(const char *bin, const char *dir, const char *args,
                                      const char *out, const char *extra) {
    return vt_test_sh("'%s' train '%s/data' --out '%s/%s' %s --batch 4 --max-steps 2 --seed 3 "
                      "--workers 1 -q %s > '%s/%s.log' 2>&1", bin, dir, dir, out, args, extra,
                      dir, out);
}

/* DIR/A/last.safetensors and DIR/B/last.safetensors, every tensor bit for bit
 * (vt_test_ckpt_same); "WHAT, N tensors bit for bit" printed, at least `min` compared
 * (checked). Returns the count. */
static inline int vt_test_last_same(const char *dir, const char *a, const char *b,
                                    const char *what, int min) {
    char pa[4200], pb[4200];
    snprintf(pa, sizeof pa, "%s/%s/last.safetensors", dir, a);
    snprintf(pb, sizeof pb, "%s/%s/last.safetensors", dir, b);
    static const char *const all[] = {"", NULL};
    int n = vt_test_ckpt_same(pa, pb, all, NULL);
    printf("%s, %d tensors bit for bit\n", what, n);
    TCHECK(n >= min, "%s: only %d tensors compared", what, n);
    return n;
}

/* docs/design.md §3.1 through the command for a model: DIR/one trained on 1 CPU tower and
 * DIR/two on 2 split 3:1 (vt_test_train_small) end bit for bit, every tensor; at least
 * `min` of them compared (checked). Returns the count. */
static inline int vt_test_towers_equal(const char *bin, const char *dir, const char *args,
                                       int min) {
    TCHECK(vt_test_train_small(bin, dir, args, "one", "--devices cpu:1") == 0,
           "train on one tower");
    TCHECK(vt_test_train_small(bin, dir, args, "two", "--devices cpu:2 --tower-split "
                               "manual:3,1") == 0, "train on two");
    return vt_test_last_same(dir, "one", "two", "towers: 2 towers (3:1) = 1 device", min);
}

/* docs/design.md §3.5 through the command for a model: DIR/r trained 1 step on 1 CPU
 * tower (vt_test_train_small's arguments otherwise) and resumed to 2 ends bit for bit where
 * DIR/one's 2 uninterrupted steps do (vt_test_towers_equal's), every tensor (weights,
 * buffers, optimizer state); at least `min` of them compared (checked). On the walks' 8
 * training videos (tests/zoowalk.h) a step of 4 clips is half an epoch: the stop falls
 * mid-epoch, and the resumed step ends the epoch. Returns the count. */
static inline int vt_test_resume_equal(const char *bin, const char *dir, const char *args,
                                       int min) {
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/r' %s --batch 4 --max-steps 1 --seed 3 "
                      "--workers 1 -q --devices cpu:1 > '%s/r.log' 2>&1 && '%s' train --resume "
                      "'%s/r' --max-steps 2 -q >> '%s/r.log' 2>&1", bin, dir, dir, args, dir,
                      bin, dir, dir) == 0, "stopped after 1 step and resumed (see %s/r.log)",
           dir);
    return vt_test_last_same(dir, "one", "r", "resume: 1 step + --resume to 2 = 2 steps", min);
}

#endif
