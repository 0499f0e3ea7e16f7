/*
 * opts.c: the shared value syntaxes of the command line (opts.h). Every number is read
 * by the strict parsers of base/common.c; this file only splits strings around them
 * and words the error lines. It must never print anything but those error lines.
 */
#include "app/opts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

int vt_parse_clip(const char *s, vt_clip_shape *out) {
    if (!s)
        return -1;
    /* Up to three fields split at 'x'; a fourth (or an empty one) is not a shape. */
    char buf[64], *f[4];
    if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    int n = 0;
    f[n++] = buf;
    for (char *p = buf; *p; p++)
        if (*p == 'x') {
            if (n == 3)
                return -1;
            *p = 0;
            f[n++] = p + 1;
        }
    vt_clip_shape c;
    if (n < 2 || vt_parse_int(f[0], 1, VT_CLIP_MAX_T, &c.t) != 0 ||
        vt_parse_int(f[1], 1, VT_CLIP_MAX_SIDE, &c.h) != 0)
        return -1;
    c.w = c.h; /* TxS: a square crop */
    if (n == 3 && vt_parse_int(f[2], 1, VT_CLIP_MAX_SIDE, &c.w) != 0)
        return -1;
    *out = c;
    return 0;
}

int vt_parse_floats(const char *s, float *out, int max) {
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= max || vt_parse_float(tok, 0, 1e6, &out[n]) != 0)
            return -1;
        n++;
    }
    return n;
}

double vt_parse_duration(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || !isfinite(v))
        return -1;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        return v;
    if (!strcmp(end, "m") || !strcmp(end, "min"))
        return 60 * v;
    if (!strcmp(end, "h"))
        return 3600 * v;
    return -1;
}

int vt_opt_take_str(void *dst, const vt_opt_str *opts, size_t n, int argc, char **argv,
                    int *i) {
    for (size_t k = 0; k < n; k++) {
        const char *val = NULL;
        int r = vt_opt_value(argc, argv, i, opts[k].opt, &val);
        if (r == 1)
            *(const char **)((char *)dst + opts[k].off) = val;
        if (r)
            return r;
    }
    return 0;
}

/* The error line for a value that is missing or does not parse; `want` says what fits. */
static int opt_bad(const char *cmd, const char *opt, const char *v, const char *want) {
    if (!v)
        fprintf(stderr, "vidtrain %s: %s needs a value\n", cmd, opt);
    else
        fprintf(stderr, "vidtrain %s: bad value for %s: '%s' (expected %s)\n", cmd, opt, v, want);
    return -1;
}

int vt_opt_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out) {
    if (v && vt_parse_int(v, lo, hi, out) == 0)
        return 0;
    char want[96];
    snprintf(want, sizeof want, "a whole number from %ld to %ld", lo, hi);
    return opt_bad(cmd, opt, v, want);
}

int vt_opt_u64(const char *cmd, const char *opt, const char *v, uint64_t *out) {
    if (v && vt_parse_u64(v, out) == 0)
        return 0;
    return opt_bad(cmd, opt, v, "a whole number from 0 to 2^64-1");
}

int vt_opt_f64(const char *cmd, const char *opt, const char *v, double lo, double hi,
               double *out) {
    if (v && vt_parse_f64(v, lo, hi, out) == 0)
        return 0;
    char want[96];
    snprintf(want, sizeof want, "a number from %g to %g", lo, hi);
    return opt_bad(cmd, opt, v, want);
}

void vt_opts_given_note(vt_opts_given *g, const char *arg) {
    if (arg[0] == '-' && arg[1] && g->n < (int)VT_ARRAY_LEN(g->arg))
        g->arg[g->n++] = arg;
}

int vt_opts_given_has(const vt_opts_given *g, const char *name) {
    const size_t n = strlen(name);
    for (int k = 0; k < g->n; k++)
        if (!strncmp(g->arg[k], name, n) && (!g->arg[k][n] || g->arg[k][n] == '='))
            return 1;
    return 0;
}

const char *vt_opts_given_any(const vt_opts_given *g, const char *const *names) {
    for (; *names; names++)
        if (vt_opts_given_has(g, *names))
            return *names;
    return NULL;
}
