/*
 * fuzz_util.h: what the fuzz targets of tests/fuzz/ share — a private scratch folder per
 * process (on /dev/shm when it is there: every input goes through a file, because the
 * parsers under test take paths), writing an input to a file, cutting an input into
 * NUL-separated parts, and the oracle: FUZZ_ASSERT aborts with a message, so a broken
 * invariant is a finding exactly like a crash or a sanitizer report.
 *
 * It must never hide a finding (no signal handlers, no error swallowing) and never touch
 * anything outside its own scratch folder. Header-only, like tests/testutil.h.
 */
#ifndef VT_FUZZ_UTIL_H
#define VT_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The sanitizers' report channel: under libFuzzer with -close_fd_mask=2 the target's
 * stderr is closed and only this reaches the log. Absent without sanitizers (weak). */
void __sanitizer_report_error_summary(const char *error_summary) __attribute__((weak));

/* An invariant of the code under test: a failure is a finding (abort = a crash report
 * with the input saved by libFuzzer, or a failed regression test). The message goes to
 * stderr and to the sanitizers' report channel. */
#define FUZZ_ASSERT(cond, ...)                                                          \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            char m_[8192]; /* any path fits: -Wformat-truncation */                   \
            int k_ = snprintf(m_, sizeof m_, "FUZZ_ASSERT %s:%d: %s: ", __FILE__,       \
                              __LINE__, #cond);                                         \
            if (k_ > 0 && (size_t)k_ < sizeof m_)                                       \
                snprintf(m_ + k_, sizeof m_ - (size_t)k_, __VA_ARGS__);                 \
            fprintf(stderr, "%s\n", m_);                                                \
            if (__sanitizer_report_error_summary)                                       \
                __sanitizer_report_error_summary(m_);                                   \
            abort();                                                                    \
        }                                                                               \
    } while (0)

static char vt_fuzz_dir_buf[1024];

static inline int vt_fuzz_rm_entry(const char *path, const struct stat *st, int flag,
                                   struct FTW *f) {
    (void)st;
    (void)flag;
    (void)f;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static inline void vt_fuzz_rm_scratch(void) {
    if (vt_fuzz_dir_buf[0])
        nftw(vt_fuzz_dir_buf, vt_fuzz_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The scratch folder of this process for target `name` (created once; removed at exit):
 * $VT_FUZZ_TMP, else /dev/shm, else /tmp, + "/vt-fuzz-NAME-PID". */
static inline const char *vt_fuzz_scratch(const char *name) {
    if (vt_fuzz_dir_buf[0])
        return vt_fuzz_dir_buf;
    const char *base = getenv("VT_FUZZ_TMP");
    struct stat st;
    if (!base || !*base)
        base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
                   ? "/dev/shm" : "/tmp";
    mkdir(base, 0755); /* $VT_FUZZ_TMP may not exist yet (EEXIST otherwise) */
    snprintf(vt_fuzz_dir_buf, sizeof vt_fuzz_dir_buf, "%s/vt-fuzz-%s-%d", base, name,
             (int)getpid());
    vt_fuzz_rm_scratch();
    FUZZ_ASSERT(mkdir(vt_fuzz_dir_buf, 0755) == 0, "cannot create %s: %s (harness)",
                vt_fuzz_dir_buf, strerror(errno));
    atexit(vt_fuzz_rm_scratch);
    return vt_fuzz_dir_buf;
}

/* dir/rel (a static buffer per call site is the caller's business: this one is shared). */
static inline const char *vt_fuzz_path(const char *dir, const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s", dir, rel);
    return buf;
}

/* Writes size bytes to path (truncating). Aborts when it cannot: the harness is broken. */
static inline void vt_fuzz_write(const char *path, const void *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    FUZZ_ASSERT(fd >= 0, "cannot write %s: %s (harness)", path, strerror(errno));
    const char *p = data;
    while (size > 0) {
        ssize_t w = write(fd, p, size);
        if (w < 0 && errno == EINTR)
            continue;
        FUZZ_ASSERT(w > 0, "cannot write %s: %s (harness)", path, strerror(errno));
        p += w;
        size -= (size_t)w;
    }
    FUZZ_ASSERT(close(fd) == 0, "cannot close %s (harness)", path);
}

/* Cuts data into at most n parts at NUL bytes; each part is a fresh, exactly-sized,
 * NUL-terminated heap copy (so ASan sees any read past its end), free() each. Missing
 * parts are NULL. Returns the number of parts present. */
static inline int vt_fuzz_split(const uint8_t *data, size_t size, char **parts, int n) {
    int k = 0;
    size_t at = 0;
    for (int i = 0; i < n; i++)
        parts[i] = NULL;
    while (k < n && at <= size) {
        const uint8_t *z = at < size ? memchr(data + at, 0, size - at) : NULL;
        size_t len = z ? (size_t)(z - (data + at)) : size - at;
        if (!z && at == size && k > 0)
            break; /* a trailing NUL ends the last part; it does not open an empty one */
        parts[k] = malloc(len + 1);
        FUZZ_ASSERT(parts[k] != NULL, "out of memory (harness)");
        memcpy(parts[k], data + at, len);
        parts[k][len] = 0;
        k++;
        at += len + 1;
        if (!z)
            break;
    }
    return k;
}

#endif
