/*
 * testutil.h: what every test file shares — check macros that count failures (a test
 * returns non-zero on any failure; printing NOT OK and exiting 0 is the anti-pattern),
 * NMSE, stderr captured to check warnings, environment paths set by CMake, and the skip
 * code ctest understands. A test that
 * ran zero checks fails too: it must never pass by checking nothing.
 */
#ifndef VT_TESTUTIL_H
#define VT_TESTUTIL_H

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VT_TEST_SKIP 77 /* ctest SKIP_RETURN_CODE */

static int vt_test_failures;
static int vt_test_checks;

#define TCHECK(cond, ...)                                                           \
    do {                                                                            \
        vt_test_checks++;                                                           \
        if (!(cond)) {                                                              \
            vt_test_failures++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* Bytes kept one after another: the frames vt_video_decode_all or a stream hands out
 * (vt_test_keep_frame is the callback) and the clips read between them, for tests that
 * compare two readings of a file byte for byte. Free p. */
typedef struct vt_test_bytes {
    uint8_t *p;
    size_t n;       /* bytes kept */
    size_t frame;   /* the last frame's bytes (w * h * 3) */
    int64_t frames; /* frames kept by vt_test_keep_frame */
} vt_test_bytes;

/* Room for `more` zeroed bytes at the end; where they start. Aborts when out of memory. */
static inline uint8_t *vt_test_bytes_grow(vt_test_bytes *b, size_t more) {
    uint8_t *p = realloc(b->p, b->n + more);
    if (!p && b->n + more) {
        fprintf(stderr, "FAIL: out of memory keeping %zu bytes\n", b->n + more);
        abort();
    }
    b->p = p;
    memset(p + b->n, 0, more);
    b->n += more;
    return p + b->n - more;
}

/* vt_video_decode_all's frame callback: appends the frame to the vt_test_bytes user. */
static inline int vt_test_keep_frame(void *user, const uint8_t *rgb, int64_t n, int w, int h) {
    vt_test_bytes *b = user;
    (void)n;
    b->frame = (size_t)w * h * 3;
    memcpy(vt_test_bytes_grow(b, b->frame), rgb, b->frame);
    b->frames++;
    return 0;
}

/* Closing line; returns the exit code: 1 on any failed check, and 1 when no check ran
 * at all (a test that checked nothing has not passed: an early return, a loop over an
 * empty list, a data folder that was not there). A test that cannot run returns
 * VT_TEST_SKIP itself instead of calling this. */
static inline int vt_test_done(const char *name) {
    printf("%s: %d checks, %d passed, %d failed\n", name, vt_test_checks,
           vt_test_checks - vt_test_failures, vt_test_failures);
    if (vt_test_checks == 0) {
        fprintf(stderr, "FAIL %s: no check ran\n", name);
        return 1;
    }
    return vt_test_failures ? 1 : 0;
}

/* stderr into the file `path` from vt_test_capture_begin to vt_test_capture_end, so that a
 * test can check the warnings its calls gave. _end puts stderr back, writes what was
 * captured there too (it stays in the test log) and returns it (malloc'd; "" when the
 * file cannot be read). */
static int vt_test_capture_fd = -1;
static inline void vt_test_capture_begin(const char *path) {
    fflush(stderr);
    vt_test_capture_fd = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
}
static inline char *vt_test_capture_end(const char *path) {
    fflush(stderr);
    dup2(vt_test_capture_fd, 2);
    close(vt_test_capture_fd);
    vt_test_capture_fd = -1;
    FILE *f = fopen(path, "rb"); /* a regular file this test wrote: its size is its length */
    long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : 0;
    n = n > 0 ? n : 0;
    char *s = malloc((size_t)n + 1);
    n = f && fseek(f, 0, SEEK_SET) == 0 ? (long)fread(s, 1, (size_t)n, f) : 0;
    s[n] = 0;
    if (f)
        fclose(f);
    fputs(s, stderr);
    return s;
}

/* Normalised mean squared error: sum (a-b)^2 / sum b^2 (ggml test-backend-ops). */
static inline double vt_nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? num / den : num;
}

static inline double vt_max_abs_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m || d != d)
            m = d;
    }
    return m;
}

static inline const char *vt_test_env(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* The 18 robustness videos' folder: $VT_ROBUSTNESS, else ../shared/data/robustness
 * beside the source tree ($VT_SRC). Its path always (for a skip message; a static buffer
 * or the environment's), and *here 1 when it is a folder, 0 when the tests must skip it. */
static inline const char *vt_test_robustness_dir(int *here) {
    static char rob[4200];
    snprintf(rob, sizeof rob, "%s/../shared/data/robustness",
             vt_test_env("VT_SRC", VT_SOURCE_DIR));
    const char *r = vt_test_env("VT_ROBUSTNESS", rob);
    struct stat sb;
    *here = stat(r, &sb) == 0 && S_ISDIR(sb.st_mode);
    return r;
}

/* tests/make_media.sh's files into dir (what: its subset, e.g. "hostile", or "" for all;
 * files already there are kept): 0, or 1 after saying why. */
static inline int vt_test_make_media(const char *dir, const char *what) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "bash '%s/tests/make_media.sh' '%s' %s",
             vt_test_env("VT_SRC", VT_SOURCE_DIR), dir, what);
    if (system(cmd) != 0) {
        fprintf(stderr, "tests/make_media.sh failed (needs the ffmpeg command)\n");
        return 1;
    }
    return 0;
}

/* A fresh scratch folder under $VT_TMP (created). Returns a static buffer. */
static inline const char *vt_test_dir(const char *name) {
    static char buf[4096];
    const char *base = vt_test_env("VT_TMP", "/tmp/vidtrain-tests");
    mkdir(base, 0755);
    snprintf(buf, sizeof buf, "%s/%s", base, name);
    char cmd[8300]; /* two paths of up to 4096 bytes: -Wformat-truncation at -O2 */
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", buf, buf);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot create %s\n", buf);
        exit(1);
    }
    return buf;
}

#endif
