/*
 * apputil.h: what the tests that drive the vidtrain command (or the ffmpeg command)
 * share — find the binary under test, run a shell command built printf-style and get
 * its exit code the way a shell reports it, make a synthetic data set with
 * `vidtrain synth`, read a whole file or a JSON file, write a small file, and count a
 * video's frames with ffprobe. Header-only (static inline), like testutil.h.
 *
 * It must never hide a failure: every helper returns what happened (an exit code, NULL)
 * and the test decides; the only exits are for a scratch file that cannot be written,
 * where the test could not go on meaningfully.
 */
#ifndef VT_APPUTIL_H
#define VT_APPUTIL_H

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

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
    size_t cap = 1 << 16, n = 0, r;
    char *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len)
        *len = (long)n;
    return buf;
}

/* The file parsed as JSON (cJSON_Delete it), NULL when unreadable or not JSON. */
static inline cJSON *vt_test_read_json(const char *path) {
    char *s = vt_test_slurp(path, NULL);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
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

#endif
