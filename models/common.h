/*
 * common.h: what every vidtrain file shares — check macros, allocation that never
 * returns NULL, logging, a small serialisable RNG, and clock helpers.
 *
 * This file must never grow policy: no knowledge of videos, devices or layers lives
 * here. Device and programmer errors abort through VT_CHECK; data errors are returned
 * as negative codes by the callers (STYLE.md, "Two kinds of failure").
 */
#ifndef VT_COMMON_H
#define VT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define VT_VERSION "0.1.0"

#if defined(__GNUC__)
#define VT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define VT_NORETURN __attribute__((noreturn))
#else
#define VT_PRINTF(a, b)
#define VT_NORETURN
#endif

/* Abort with the expression, function, file:line and a message. */
VT_NORETURN void vt_die_at(const char *file, int line, const char *func, const char *expr,
                           const char *fmt, ...) VT_PRINTF(5, 6);

/* Programmer/device error: abort loudly. VT_CHECK(x > 0, "bad x=%d", x). */
#define VT_CHECK(cond, ...) \
    do { if (!(cond)) vt_die_at(__FILE__, __LINE__, __func__, #cond, __VA_ARGS__); } while (0)
#define VT_DIE(...) vt_die_at(__FILE__, __LINE__, __func__, "", __VA_ARGS__)

/* Allocation that aborts on failure (out of host memory is not a data error). */
void *vt_malloc(size_t bytes);
void *vt_calloc(size_t n, size_t size);
void *vt_realloc(void *p, size_t bytes);
char *vt_strdup(const char *s);
/* Frees *p and sets it to NULL; takes NULL and a pointer to NULL. */
void vt_freep(void *pp);

/* Logging to stderr. Level 0 = quiet, 1 = info (default), 2 = debug. */
extern int vt_log_level;
void vt_log(int level, const char *fmt, ...) VT_PRINTF(2, 3);
#define vt_info(...) vt_log(1, __VA_ARGS__)
#define vt_debug(...) vt_log(2, __VA_ARGS__)
void vt_warn(const char *fmt, ...) VT_PRINTF(1, 2);

/* Error text for data-error returns: callers pass (char *err, size_t errlen). */
void vt_set_err(char *err, size_t errlen, const char *fmt, ...) VT_PRINTF(3, 4);

/* Monotonic seconds. */
double vt_now(void);

/*
 * RNG: splitmix64. One 64-bit word of state, so it goes into a checkpoint as one
 * number and a resumed run continues exactly (DESIGN.md invariant 5).
 */
typedef struct vt_rng { uint64_t s; } vt_rng;
void vt_rng_seed(vt_rng *r, uint64_t seed);
uint64_t vt_rng_u64(vt_rng *r);
double vt_rng_uniform(vt_rng *r);          /* [0, 1) */
double vt_rng_normal(vt_rng *r);           /* N(0, 1), Box-Muller */
uint32_t vt_rng_below(vt_rng *r, uint32_t n); /* [0, n), unbiased */
/* A stateless hash for counter-based randomness (same on CPU and GPU). */
static inline uint64_t vt_hash64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* FNV-1a over bytes: stable ids (split assignment, batch hashes in tests). */
uint64_t vt_fnv1a(const void *data, size_t n, uint64_t h);
#define VT_FNV_SEED 0xcbf29ce484222325ull

/* Command-line option with a value: argv[*i] is `name` -> 1 with *val its value
 * ("--name V", advancing *i past V, or "--name=V"); -1 when V is missing; 0 when
 * argv[*i] is another option (a longer name that starts with `name` included). */
int vt_opt_value(int argc, char **argv, int *i, const char *name, const char **val);

/* "12G", "512M", "1.5G", "100K", "1234" -> bytes; -1 on a bad string. */
int64_t vt_parse_bytes(const char *s);
/* bytes -> "1.50 GiB" into buf. Returns buf. */
const char *vt_fmt_bytes(char *buf, size_t n, int64_t bytes);

#define VT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
