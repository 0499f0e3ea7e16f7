/*
 * common.h: what every vidtrain file shares — check macros, allocation that never
 * returns NULL, logging, a small serialisable RNG, clock helpers, the strict number
 * parsers every command-line value goes through, whole-file reading and the one atomic
 * file writer.
 *
 * This file must never grow policy: no knowledge of videos, devices or layers lives
 * here. Device and programmer errors abort through VT_CHECK; data errors are returned
 * as negative codes by the callers (docs/style.md §8, "Two kinds of failure").
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

/* The system refused `bytes` (0: not known) for `what`: the process is at a memory limit
 * (the RAM, ulimit -v, ulimit -d: base/host_mem.h), no program error and no data error.
 * Says so, naming the limit and what asks for less, and exits 1 (no core: VT_CHECK's
 * abort dumped one and named nothing). Every file vidtrain keeps is written whole or not
 * at all (alloc.c). */
VT_NORETURN void vt_out_of_memory(size_t bytes, const char *what);
/* An allocation through a library (FFmpeg's av_*alloc, open_memstream, cJSON) failed:
 * vt_out_of_memory for `what`, the size unknown. */
#define VT_CHECK_MEM(cond, what) \
    do { if (!(cond)) vt_out_of_memory(0, what); } while (0)

/* Allocation that stops the command through vt_out_of_memory on failure (alloc.c). */
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
 * number and a resumed run continues exactly (docs/design.md §3.5).
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

/* Strict number parsers: the whole string is one number (no trailing text, nothing
 * empty), base 10, inside [lo, hi]. 0 with *out set, or -1 with *out untouched. Every
 * command-line number goes through these, so "3x" or "1e9" is never read as 3 or 1. */
int vt_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int vt_parse_int(const char *s, long lo, long hi, int *out);
/* Any uint64_t (seeds): base 10, or 0x hex / 0 octal as C writes them; no sign. */
int vt_parse_u64(const char *s, uint64_t *out);
/* A finite number in [lo, hi] (strtod's syntax). */
int vt_parse_f64(const char *s, double lo, double hi, double *out);
int vt_parse_float(const char *s, double lo, double hi, float *out);

/* "12G", "512M", "1.5G", "100K", "1234" -> bytes; -1 on a bad string. */
int64_t vt_parse_bytes(const char *s);
/* bytes -> "1.50 GiB" into buf. Returns buf. */
const char *vt_fmt_bytes(char *buf, size_t n, int64_t bytes);

/* 1 when path is a regular file / a folder (links followed). */
int vt_file_exists(const char *path);
int vt_dir_exists(const char *path);
/* Whole file as a NUL-terminated string (free()), NULL if unreadable or not a regular
 * file (vt_open_regular). */
char *vt_file_read(const char *path);
/* The rest of f, up to its end or a read error (ferror(f) says which, for the caller to
 * check), with a NUL after it (free()); its length without the NUL in *len (may be NULL).
 * The one read-it-all loop of the readers above and below. */
char *vt_fread_all(FILE *f, size_t *len);
/* Opens path for reading when it is a regular file (links followed): the descriptor, or
 * -1 with err naming path and what it is instead (a FIFO, a folder, a device node) or the
 * system's reason. Every input file is opened through it: a FIFO is never waited on (it
 * is opened O_NONBLOCK, then refused), where a plain open() blocks until a writer comes,
 * for ever. */
int vt_open_regular(const char *path, char *err, size_t errlen);
/* The same as a stdio stream ("rb"), NULL with err set. */
FILE *vt_fopen_regular(const char *path, char *err, size_t errlen);
/* A lock file (an flock's file, which may hold the holder's pid): opened read-write and
 * made when missing (create), or read-only, never through a symbolic link, and refused
 * unless it is a regular file with one name: the pid written into it must land in the
 * folder's own file, never in a file another name reaches (a link to a video truncated
 * it). The descriptor, or -1 with err (errno ENOENT when it is missing and not made). */
int vt_open_lock(const char *path, int create, char *err, size_t errlen);

/*
 * The atomic file writer: the content goes to a temporary file beside `path` (same
 * folder, so the rename cannot cross file systems), which is fsynced, closed and renamed
 * over `path`, then the folder is fsynced so that the rename itself survives a crash. A
 * reader (or a crash) sees the old whole file or the new whole file, never a part.
 * 0, or -1 with err naming the path and the system's reason; the temporary file is
 * removed and no descriptor is left open on any failure.
 */
int vt_file_write_atomic(const char *path, const void *data, size_t len, char *err,
                         size_t errlen);
/* (These two and vt_file_stage are defined in base/fileset.c: while a set of files that
 * change together is open, a write to one of its members is staged into the set, and
 * renamed with the others when the set commits; base/fileset.h.) */
/* The same for content written in pieces (large files that are not held in memory):
 * fill(ctx, fd) writes everything to fd and returns 0, or -1 with errno set. */
typedef int (*vt_file_fill_fn)(void *ctx, int fd);
int vt_file_write_atomic_fill(const char *path, vt_file_fill_fn fill, void *ctx, char *err,
                              size_t errlen);
/* The stem of a temporary file's name beside `name` (a base name, no '/'), which the
 * writer puts between `pre_len` bytes of its own and a suffix of at most
 * VT_TMP_SUFFIX_MAX (".tmp.PID", ".prep-part"): the name itself, or, when that would
 * pass NAME_MAX (255 bytes), its first bytes, '~' and 16 hex digits of its hash. A legal
 * final name always has a legal temporary one (a 250-byte video could never be prepped,
 * nor a 245-byte --onnx FILE written: "File name too long" on every try), and one name
 * always gives one stem, so a stale temporary file is found again. Into out (n bytes). */
#define VT_TMP_SUFFIX_MAX 32
void vt_tmp_stem(char *out, size_t n, const char *name, size_t pre_len);
/* The two halves of the atomic writer: stage writes and syncs the temporary file of path
 * and returns its name (malloc'd), NULL with err; commit renames it over path and syncs
 * the folder (0, or -1 with err; the temporary file is gone either way, *tmp NULL);
 * unstage removes a staged file that is not to be committed (NULL and a pointer to NULL
 * are fine). Files that must change together do not call them one after the other (a
 * kill between two renames left one new beside one old): they are a set
 * (base/fileset.h). */
char *vt_file_stage(const char *path, const void *data, size_t len, char *err, size_t errlen);
char *vt_file_stage_fill(const char *path, vt_file_fill_fn fill, void *ctx, char *err,
                         size_t errlen);
int vt_file_commit(const char *path, char **tmp, char *err, size_t errlen);
void vt_file_unstage(char **tmp);
/*
 * The output rule (docs/design.md §3.8: outputs never replace inputs). A command declares
 * what it reads that must survive it (vt_inputs_add: a checkpoint, a run's config, a
 * video, a dataset folder) before it writes anything; vt_output_check then refuses an
 * output path that resolves (links followed, hard links included: the same device and
 * inode) to one of those files or lies inside one of those folders (or would, once its
 * missing folders are made: `..` after a missing folder is taken as written), and any existing
 * path that is not a regular file (a directory, device node, FIFO or socket), which a
 * rename would replace. The atomic writers above check every path they write. The list
 * is process-wide and filled before the command's threads start.
 */
/* Adds path (a file or a folder; links followed) to the command's inputs. A path that
 * does not exist adds nothing. */
void vt_inputs_add(const char *path);
/* Forgets every input (tests, and a process that runs several commands). */
void vt_inputs_clear(void);
/* 0 when path may be written, or -1 with err naming path, the reason and a hint. */
int vt_output_check(const char *path, char *err, size_t errlen);
/* The real path that `path` is, or would be once its missing folders are made (mkdir -p):
 * the existing part's links resolved, the rest taken as written ("." dropped, ".." the
 * folder above), as GNU realpath -m does. malloc'd; NULL when the working folder cannot be
 * resolved. */
char *vt_path_real_future(const char *path);
/* vt_output_check, and what a write would otherwise find only at its end: path's folder
 * exists, is a folder and is writable. For a command to call before its work (export,
 * embed, predict --dump-input), so that a bad output path costs nothing. It also removes
 * (and says) the temporary files of path that a killed writer left ("PATH.tmp.PID" of a
 * process that is gone), which nothing else would. */
int vt_output_check_early(const char *path, char *err, size_t errlen);

/* Length of the UTF-8 sequence at p (n >= 1 bytes left), 0 when it is not one: no
 * overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
size_t vt_utf8_len(const unsigned char *p, size_t n);
/* s as valid UTF-8 (free()): every byte that is not part of a UTF-8 sequence becomes the
 * character of the same number (U+0080-U+00FF, its Latin-1 reading), so a file name in
 * another encoding stays identifiable and every JSON text we write is valid. NULL: NULL. */
char *vt_utf8_clean(const char *s);
/* Appends data to path (made when missing) with one write, after vt_output_check: for
 * logs that grow by whole lines (metrics.jsonl). A write cut short (a full disk) is cut
 * back, so the file keeps what it held before. 0, or -1 with err naming path and errno's
 * reason. */
int vt_file_append(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Makes the renames and removals in path's folder durable: fsync of the folder. 0, or -1
 * with errno set; a file system that cannot sync a folder (EINVAL) has nothing more to make
 * durable. */
int vt_file_sync_folder(const char *path);

/* Makes a finished file durable before it is renamed to its final name, for a writer that
 * cannot go through vt_file_write_atomic (FFmpeg's muxer writes prep's copies): fsync of
 * path. 0, or -1 with errno set. */
int vt_file_sync(const char *path);

/* write(2) until all of buf is written (EINTR retried). 0, or -1 with errno set. */
int vt_fd_write_all(int fd, const void *buf, size_t len);

#define VT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define VT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define VT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
