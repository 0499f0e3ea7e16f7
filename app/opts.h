/*
 * opts.h: the command line's value syntaxes that several commands share — the clip
 * shape, weight lists, durations — and the checked option values with one error line
 * each. The numbers themselves go through the strict parsers of base/common.h
 * (vt_parse_int, vt_parse_u64, vt_parse_f64...), so every command reads "3x" and "1e9"
 * the same way: as a usage error, never as 3 or 1.
 *
 * It must never decide what a value means for training (defaults, limits that depend
 * on the model or the machine): it only reads strings.
 */
#ifndef VT_OPTS_H
#define VT_OPTS_H

#include <stddef.h>
#include <stdint.h>

/* A clip shape: frames x height x width. */
typedef struct vt_clip_shape {
    int t, h, w;
} vt_clip_shape;

#define VT_CLIP_MAX_T 1024
#define VT_CLIP_MAX_SIDE 4096

/* "16x112" (T x S: an S x S crop) or "16x112x112" (T x H x W), every command's --clip:
 * T in 1..VT_CLIP_MAX_T, H and W in 1..VT_CLIP_MAX_SIDE. 0, or -1 (shape untouched). */
int vt_parse_clip(const char *s, vt_clip_shape *out);
/* "1,0.5" -> weights in [0, 1e6] (up to max); returns the count or -1. */
int vt_parse_floats(const char *s, float *out, int max);
/* "300", "300s", "5m", "5min", "1.5h" -> seconds (> 0); -1 if not a duration. */
double vt_parse_duration(const char *s);

/* Options whose value is kept as typed: the option and where its string goes in the
 * caller's struct (offsetof). */
typedef struct vt_opt_str {
    const char *opt;
    size_t off;
} vt_opt_str;

/* If argv[*i] is one of opts ("--opt V" or "--opt=V"): stores V as a const char * at
 * (char *)dst + off, advancing *i past it, and returns 1; returns 0 for another
 * argument, -1 when the value is missing. */
int vt_opt_take_str(void *dst, const vt_opt_str *opts, size_t n, int argc, char **argv, int *i);

/* v, the value given to option `opt` of command `cmd` (NULL: none was given), checked:
 * 0 with *out set, or -1 after printing one line to stderr —
 *   "vidtrain CMD: OPT needs a value" or
 *   "vidtrain CMD: bad value for OPT: 'V' (expected a whole number from LO to HI)". */
int vt_opt_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out);
int vt_opt_u64(const char *cmd, const char *opt, const char *v, uint64_t *out);
int vt_opt_f64(const char *cmd, const char *opt, const char *v, double lo, double hi,
               double *out);

/* The options a command line gave, by name. A check that an option is ignored, or that
 * two conflict, asks whether the user said it, never whether its value differs from the
 * default: given at its default value (--gop 16 beside mjpeg) it is as ignored as any
 * other. A parser calls vt_opts_given_note on argv[i] at the top of its loop, before it
 * takes the option: a value never stands there (the parser steps over it), and an option
 * the parser does not know ends the parse anyway. */
typedef struct vt_opts_given {
    const char *arg[256]; /* argv's "--name" or "--name=value" (the first 256) */
    int n;
} vt_opts_given;

/* Records arg when it is an option ("-x", "--name", "--name=value"; a lone "-", standard
 * input, is none). */
void vt_opts_given_note(vt_opts_given *g, const char *arg);
/* 1 when name ("--gop") was given, as "--gop V" or "--gop=V"; else 0. */
int vt_opts_given_has(const vt_opts_given *g, const char *name);
/* The first of the NULL-terminated names that was given (the name, for a message), or
 * NULL when none was. */
const char *vt_opts_given_any(const vt_opts_given *g, const char *const *names);

#endif
