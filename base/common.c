/*
 * common.c: check/abort, allocation, logging, RNG, the strict parsers and the atomic
 * file writer shared by every folder (allocation: alloc.c). Nothing here may depend on FFmpeg, BLAS or CUDA,
 * and nothing here may print: errors go back to the caller as codes and sentences.
 */
#define _POSIX_C_SOURCE 200809L
#include "base/common.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/bytes_text.h"

int vt_log_level = 1;

void vt_die_at(const char *file, int line, const char *func, const char *expr,
               const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "vidtrain: fatal: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (expr && expr[0])
        fprintf(stderr, "\n  check failed: %s", expr);
    fprintf(stderr, "\n  at %s (%s:%d)\n", func, file, line);
    abort();
}

/* VT_LOG=N raises (or lowers) the level from the environment, read on the first message:
 * VT_LOG=2 prints the debug lines (each convolution's cuDNN algorithm and workspace, the
 * allocator's growth) of any command. Every thread reads the same value, so the race on
 * the first call is harmless. */
void vt_log(int level, const char *fmt, ...) {
    static int env_read;
    if (!env_read) {
        const char *e = getenv("VT_LOG");
        if (e && *e >= '0' && *e <= '9')
            vt_log_level = atoi(e);
        env_read = 1;
    }
    if (level > vt_log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void vt_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "warning: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void vt_set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

double vt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vt_rng_seed(vt_rng *r, uint64_t seed) { r->s = seed; }

uint64_t vt_rng_u64(vt_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double vt_rng_uniform(vt_rng *r) { return (double)(vt_rng_u64(r) >> 11) * 0x1.0p-53; }

double vt_rng_normal(vt_rng *r) {
    double u1 = vt_rng_uniform(r), u2 = vt_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

uint32_t vt_rng_below(vt_rng *r, uint32_t n) {
    if (n <= 1)
        return 0;
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (uint64_t)(uint32_t)vt_rng_u64(r) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (lo < t) {
            m = (uint64_t)(uint32_t)vt_rng_u64(r) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

uint64_t vt_fnv1a(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

int vt_opt_value(int argc, char **argv, int *i, const char *name, const char **val) {
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0 || (a[n] != 0 && a[n] != '='))
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

int vt_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_int(const char *s, long lo, long hi, int *out) {
    int64_t v;
    if (vt_parse_i64(s, lo, hi, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

int vt_parse_u64(const char *s, uint64_t *out) {
    /* strtoull skips white space and then negates "-1" to 2^64-1: refuse both. */
    if (!s || !*s || *s == '-' || isspace((unsigned char)*s))
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_f64(const char *s, double lo, double hi, double *out) {
    if (!s || !*s)
        return -1;
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_float(const char *s, double lo, double hi, float *out) {
    double v;
    if (vt_parse_f64(s, lo, hi, &v) != 0)
        return -1;
    *out = (float)v;
    return 0;
}

int64_t vt_parse_bytes(const char *s) {
    if (!s || !*s)
        return -1;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    /* "nan", "inf" and sizes past int64_t are not sizes: converting them is UB. */
    double b = v * mul;
    if (!(b < 9223372036854775807.0))
        return -1;
    return (int64_t)b;
}

const char *vt_fmt_bytes(char *buf, size_t n, int64_t bytes) {
    return vt_bytes_text(buf, n, bytes);
}

int vt_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int vt_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const char *kind_of(mode_t m);

int vt_open_regular(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        vt_set_err(err, errlen, "cannot read %s: cannot open it: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        vt_set_err(err, errlen, "cannot read %s: it is %s, not a regular file (give a file)",
                   path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

int vt_open_lock(const char *path, int create, char *err, size_t errlen) {
    /* O_NOFOLLOW: a link is never followed (the old open truncated what RUN/.lock linked
     * to, a training video among them); O_NONBLOCK: a FIFO is never waited on */
    int fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_NONBLOCK |
                            O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int en = errno;
        if (fd >= 0)
            close(fd);
        if (en == ELOOP)
            vt_set_err(err, errlen, "%s is a symbolic link: a lock file is the folder's own "
                       "(remove the link)", path);
        else
            vt_set_err(err, errlen, "cannot open %s: %s", path, strerror(en));
        errno = en;
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
        if (!S_ISREG(st.st_mode))
            vt_set_err(err, errlen, "%s is %s, not a regular file: a lock file is the "
                       "folder's own (remove it)", path, kind_of(st.st_mode));
        else
            vt_set_err(err, errlen, "%s has %lu names (a hard link): a lock file is the "
                       "folder's own, and its pid would be written into the other name's "
                       "file (remove it)", path, (unsigned long)st.st_nlink);
        close(fd);
        errno = EEXIST;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *vt_fopen_regular(const char *path, char *err, size_t errlen) {
    int fd = vt_open_regular(path, err, errlen);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (fd >= 0 && !f) {
        vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

char *vt_fread_all(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0, r;
    char *buf = vt_malloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = vt_realloc(buf, cap);
        }
    }
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

char *vt_file_read(const char *path) {
    char err[8];
    FILE *f = vt_fopen_regular(path, err, sizeof err);
    if (!f)
        return NULL;
    char *buf = vt_fread_all(f, NULL);
    fclose(f);
    return buf;
}

int vt_fd_write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The folder path's file is in, as written (free()): "a/b/x" -> "a/b", "/x" -> "/",
 * "x" -> ".". */
static char *folder_of(const char *path) {
    char *dir = vt_strdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash) {
        free(dir);
        return vt_strdup(".");
    }
    slash[slash == dir ? 1 : 0] = 0;
    return dir;
}

int vt_file_sync_folder(const char *path) {
    char *dir = folder_of(path);
    int rc = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        rc = -1;
    int saved = errno;
    if (fd >= 0)
        close(fd);
    free(dir);
    errno = saved;
    return rc;
}

int vt_file_sync(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    int rc = fsync(fd) != 0 && errno != EINVAL ? -1 : 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* ---------------------------------------------------------------- the output rule ---- */

typedef struct input_ent {
    dev_t dev;
    ino_t ino;
    int dir;
    char *path;
} input_ent;
static input_ent *g_inputs;
static int g_ninputs;

void vt_inputs_add(const char *path) {
    struct stat st;
    if (!path || !*path || stat(path, &st) != 0)
        return;
    for (int i = 0; i < g_ninputs; i++)
        if (g_inputs[i].dev == st.st_dev && g_inputs[i].ino == st.st_ino)
            return;
    g_inputs = vt_realloc(g_inputs, sizeof *g_inputs * (size_t)(g_ninputs + 1));
    g_inputs[g_ninputs++] = (input_ent){st.st_dev, st.st_ino, S_ISDIR(st.st_mode) != 0,
                                        vt_strdup(path)};
}

void vt_inputs_clear(void) {
    for (int i = 0; i < g_ninputs; i++)
        free(g_inputs[i].path);
    vt_freep(&g_inputs);
    g_ninputs = 0;
}

static const input_ent *input_of(const struct stat *st, int dir) {
    for (int i = 0; i < g_ninputs; i++)
        if (g_inputs[i].dir == dir && g_inputs[i].dev == st->st_dev && g_inputs[i].ino == st->st_ino)
            return &g_inputs[i];
    return NULL;
}

static const char *kind_of(mode_t m) {
    return S_ISDIR(m)                 ? "a directory"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device node"
           : S_ISFIFO(m)              ? "a FIFO"
           : S_ISSOCK(m)              ? "a socket"
                                      : "not a regular file";
}

/* See common.h. Without it, an output whose folder is yet to be made (embed --out NEW/x,
 * train --dump NEW) escaped the input-folder check, and the folder was made inside the
 * dataset. */
char *vt_path_real_future(const char *dir) {
    char *r = realpath(dir, NULL);
    if (r)
        return r;
    size_t cap = strlen(dir) + PATH_MAX + 2;
    char *base = vt_malloc(cap);
    if (dir[0] == '/') {
        snprintf(base, cap, "/");
    } else {
        char *cwd = realpath(".", NULL);
        if (!cwd) {
            free(base);
            return NULL;
        }
        snprintf(base, cap, "%s", cwd);
        free(cwd);
    }
    char *copy = vt_strdup(dir), *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            char *s = strrchr(base, '/');
            if (s == base)
                base[1] = 0;
            else if (s)
                *s = 0;
            continue;
        }
        size_t bl = strlen(base);
        snprintf(base + bl, cap - bl, "%s%s", bl > 1 ? "/" : "", c);
        char *rc = realpath(base, NULL);
        if (rc && strlen(rc) < cap) /* exists: its links resolved; else as written */
            snprintf(base, cap, "%s", rc);
        free(rc);
    }
    free(copy);
    return base;
}

/* 0 when neither real (a resolved path, cut in place) nor a folder above it is an input
 * folder; else -1 with err naming path and the input. */
static int inside_input(char *real, const char *path, char *err, size_t errlen) {
    struct stat st;
    for (char *p = real; p && *p;) {
        const input_ent *in = stat(p, &st) == 0 ? input_of(&st, 1) : NULL;
        if (in) {
            vt_set_err(err, errlen, "refusing to write %s: it is inside %s, an input folder "
                       "of this command (write outputs outside it)", path, in->path);
            return -1;
        }
        char *s = strrchr(p, '/');
        if (!s || (s == p && p[1] == 0))
            break;
        if (s == p)
            s[1] = 0; /* "/" itself last */
        else
            *s = 0;
    }
    return 0;
}

int vt_output_check(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0 && errno == ELOOP) {
        /* A link loop at the name: the rename would replace the link itself. (Other
         * failures, a file used as a folder, fail at the write with their reason.) */
        vt_set_err(err, errlen, "refusing to write %s: %s (give the path of a regular file "
                   "or a new name)", path, strerror(errno));
        return -1;
    }
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) {
            vt_set_err(err, errlen, "refusing to write %s: it is %s, which the output would "
                       "replace (give the path of a regular file or a new name)", path,
                       kind_of(st.st_mode));
            return -1;
        }
        const input_ent *in = input_of(&st, 0);
        if (in) {
            vt_set_err(err, errlen, "refusing to write %s: it is %s, an input of this command, "
                       "which the output would destroy (give another output path)", path,
                       in->path);
            return -1;
        }
    }
    /* the folders it would land in, up to the root: none may be an input folder */
    char *dir = folder_of(path);
    char *real = vt_path_real_future(dir);
    free(dir);
    int rc = inside_input(real, path, err, errlen);
    free(real);
    /* A link at the output's name lands where it points, which the rename would not
     * change, but a writer that opens the name (FFmpeg's avio_open) writes there: one
     * that points into an input folder (DST/x.mp4 -> SRC/x.mp4) is refused too. */
    if (rc == 0 && lstat(path, &st) == 0 && S_ISLNK(st.st_mode) &&
        (real = realpath(path, NULL)) != NULL) {
        rc = inside_input(real, path, err, errlen);
        free(real);
    }
    return rc;
}

void vt_tmp_stem(char *out, size_t n, const char *name, size_t pre_len) {
    const size_t name_max = 255; /* NAME_MAX of Linux's file systems */
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: the same name, the same stem */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    int keep = (int)(name_max - VT_TMP_SUFFIX_MAX - 17 - VT_MIN(pre_len, 64));
    if (pre_len + strlen(name) + VT_TMP_SUFFIX_MAX <= name_max)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "%.*s~%016llx", keep, name, (unsigned long long)h);
}

/* The temporary files of this output (base "NAME", in dir) that a killed writer left:
 * "NAME.tmp.PID" of a process that is gone, regular files only. An export killed in its
 * write left a model-sized file beside FILE at every kill (a run folder is cleaned by
 * train: app/run/runclean.h). Each removal is said. */
static void clean_stale(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    if (!d)
        return;
    char stem[256]; /* what the writer named them after */
    vt_tmp_stem(stem, sizeof stem, name, 0);
    size_t bl = strlen(name = stem);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *p = e->d_name + bl + 5, *q = p;
        if (strncmp(e->d_name, name, bl) || strncmp(e->d_name + bl, ".tmp.", 5))
            continue;
        while (*q >= '0' && *q <= '9' && q - p < 10)
            q++;
        long pid = q > p && !*q ? strtol(p, NULL, 10) : 0;
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM)
            continue; /* not one, or its writer is alive */
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *f = vt_malloc(n);
        snprintf(f, n, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(f, &st) == 0 && S_ISREG(st.st_mode) && unlink(f) == 0)
            vt_info("removed %s: a temporary file left by an interrupted write\n", f);
        free(f);
    }
    closedir(d);
}

int vt_output_check_early(const char *path, char *err, size_t errlen) {
    if (vt_output_check(path, err, errlen) != 0)
        return -1;
    char *dir = folder_of(path);
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0) {
        vt_set_err(err, errlen, "cannot write %s: its folder %s: %s (make it first, or give "
                   "another path)", path, dir, strerror(errno));
        rc = -1;
    } else if (!S_ISDIR(st.st_mode)) {
        vt_set_err(err, errlen, "cannot write %s: %s is not a folder", path, dir);
        rc = -1;
    } else if (access(dir, W_OK | X_OK) != 0) { /* EROFS even for root */
        vt_set_err(err, errlen, "cannot write %s: its folder %s is not writable: %s", path,
                   dir, strerror(errno));
        rc = -1;
    } else {
        const char *slash = strrchr(path, '/');
        clean_stale(dir, slash ? slash + 1 : path);
    }
    free(dir);
    return rc;
}

char *vt_file_stage_fill(const char *path, vt_file_fill_fn fill, void *ctx, char *err,
                         size_t errlen) {
    if (vt_output_check(path, err, errlen) != 0)
        return NULL;
    /* The process id keeps two processes writing the same path (ranks sharing a run
     * folder by mistake) off each other's temporary file. */
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char stem[256];
    vt_tmp_stem(stem, sizeof stem, base, 0);
    size_t tn = strlen(path) + 32;
    char *tmp = vt_malloc(tn);
    snprintf(tmp, tn, "%.*s%s.tmp.%ld", (int)(base - path), path, stem, (long)getpid());
    /* A new file only: an existing name here (a stale temporary file of a killed process
     * with this pid, or one planted there: a link to an input, a FIFO that would block the
     * open) is unlinked, never opened and truncated through. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        vt_set_err(err, errlen, "cannot write %s: cannot create %s: %s", path, tmp,
                   strerror(errno));
        vt_freep(&tmp); /* nothing made: nothing to remove */
        return NULL;
    }
    /* fsync before the rename: after a crash the name points at the old or the new
     * whole file, never at an empty one. */
    if (fill(ctx, fd) != 0 || fsync(fd) != 0) {
        vt_set_err(err, errlen, "cannot write %s: writing %s: %s", path, tmp, strerror(errno));
        close(fd);
        goto fail;
    }
    if (close(fd) != 0) {
        vt_set_err(err, errlen, "cannot write %s: closing %s: %s", path, tmp, strerror(errno));
        goto fail;
    }
    return tmp;
fail:
    vt_file_unstage(&tmp); /* removed, the name freed */
    return NULL;
}

int vt_file_commit(const char *path, char **tmp, char *err, size_t errlen) {
    if (rename(*tmp, path) != 0) {
        vt_set_err(err, errlen, "cannot write %s: renaming %s over it: %s", path, *tmp,
                   strerror(errno));
        vt_file_unstage(tmp);
        return -1;
    }
    vt_freep(tmp); /* renamed: nothing left to remove */
    if (vt_file_sync_folder(path) != 0) {
        vt_set_err(err, errlen, "%s was written but its folder could not be synced: %s", path,
                   strerror(errno));
        return -1;
    }
    return 0;
}

void vt_file_unstage(char **tmp) {
    if (!tmp || !*tmp)
        return;
    unlink(*tmp);
    vt_freep(tmp);
}

int vt_file_append(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (vt_output_check(path, err, errlen) != 0)
        return -1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        vt_set_err(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        return -1;
    }
    /* The size before: a write cut short (a full disk) is cut back to it, so the file
     * never keeps a torn line that the next append would glue onto. */
    struct stat st;
    off_t before = fstat(fd, &st) == 0 ? st.st_size : -1;
    int rc = 0;
    if (vt_fd_write_all(fd, data, len) != 0) {
        vt_set_err(err, errlen, "cannot append to %s: %s (it keeps what it held before)", path,
                   strerror(errno));
        if (before >= 0 && ftruncate(fd, before) != 0)
            vt_set_err(err, errlen, "cannot append to %s: %s (and a torn last line stays)",
                       path, strerror(errno));
        rc = -1;
    }
    if (close(fd) != 0 && rc == 0) {
        vt_set_err(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        rc = -1;
    }
    return rc;
}

size_t vt_utf8_len(const unsigned char *p, size_t n) {
    if (p[0] < 0x80)
        return 1;
    size_t k = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3
             : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
    if (!k || k > n)
        return 0;
    for (size_t i = 1; i < k; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
        return 0;
    return k;
}

char *vt_utf8_clean(const char *s) {
    if (!s)
        return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    char *out = vt_malloc(2 * n + 1), *o = out; /* each bad byte becomes two */
    for (size_t i = 0; i < n;) {
        size_t k = vt_utf8_len(u + i, n - i);
        if (k) {
            memcpy(o, u + i, k);
            o += k;
            i += k;
        } else {
            *o++ = (char)(0xc0 | (u[i] >> 6));
            *o++ = (char)(0x80 | (u[i] & 0x3f));
            i++;
        }
    }
    *o = 0;
    return out;
}
