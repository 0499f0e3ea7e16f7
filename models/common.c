/*
 * common.c: check/abort, allocation, logging, RNG and small parsers shared by every
 * folder. Nothing here may depend on FFmpeg, BLAS or CUDA.
 */
#define _POSIX_C_SOURCE 200809L
#include "models/common.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

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

void *vt_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    VT_CHECK(p != NULL, "out of host memory allocating %zu bytes", bytes);
    return p;
}

void *vt_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    VT_CHECK(p != NULL, "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *vt_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    VT_CHECK(q != NULL, "out of host memory reallocating %zu bytes", bytes);
    return q;
}

char *vt_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = vt_malloc(n);
    memcpy(d, s, n);
    return d;
}

void vt_freep(void *pp) {
    void **p = (void **)pp;
    if (p && *p) {
        free(*p);
        *p = NULL;
    }
}

void vt_log(int level, const char *fmt, ...) {
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
    return (int64_t)(v * mul);
}

const char *vt_fmt_bytes(char *buf, size_t n, int64_t bytes) {
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%lld B", (long long)bytes);
    return buf;
}
