/*
 * randaug.c: RandAugment's policy — the --randaug spec, one clip's draw of ops and
 * arguments (timm's RandAugment / AugmentOp / level functions), and its application to
 * every frame of a clip.
 *
 * The draw is a vt_rng seeded with the clip's key and consumed in timm's order (op
 * choices, then per op: fire?, magnitude noise, sign), so it is a pure function of the
 * key. It must never allocate.
 */
#include "pipeline/data/randaug.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

#define HINT "sections m<magnitude>, n<ops>, mstd<noise sd>, mmax<magnitude cap>, inc<0|1>; " \
             "e.g. rand-m7-n4-mstd0.5-inc1 (VideoMAE's), or off"

static int fail(char *err, size_t errlen, const char *spec, const char *why, const char *sec) {
    snprintf(err, errlen, "--randaug %s: %s%s%s (%s)", spec, why, sec ? " " : "", sec ? sec : "",
             HINT);
    return -1;
}

/* An integer section value in [lo, hi]; 0 or -1. */
static int int_val(const char *v, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return -1;
    *out = (int)x;
    return 0;
}

int vt_randaug_parse(vt_randaug_cfg *c, const char *spec, char *err, size_t errlen) {
    memset(c, 0, sizeof *c);
    if (!spec || !strcmp(spec, "off"))
        return 0;
    char buf[128];
    if (strlen(spec) >= sizeof buf)
        return fail(err, errlen, "(too long)", "a spec is at most 127 characters", NULL);
    snprintf(buf, sizeof buf, "%s", spec);
    vt_randaug_cfg r = {.n = 2, .m = 10, .mstd = 0, .mmax = 10, .inc = 0};
    int seen[5] = {0};
    if (!spec[0])
        return fail(err, errlen, "''", "an empty spec", NULL);
    if (strstr(spec, "--") || spec[0] == '-' || spec[strlen(spec) - 1] == '-')
        return fail(err, errlen, spec, "an empty section (two dashes, or one at an end)", NULL);
    char *save = NULL, *sec = strtok_r(buf, "-", &save);
    if (!sec || strcmp(sec, "rand"))
        return fail(err, errlen, spec, "it must start with \"rand\" (timm's RandAugment; "
                    "AutoAugment and AugMix are not here)", NULL);
    while ((sec = strtok_r(NULL, "-", &save))) {
        char key[8] = "";
        size_t k = 0;
        while (isalpha((unsigned char)sec[k]) && k < sizeof key - 1)
            key[k] = sec[k], k++;
        const char *v = sec + k;
        static const char *const keys[5] = {"m", "n", "mstd", "mmax", "inc"};
        int which = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(key, keys[i]))
                which = i;
        if (which < 0 || isalpha((unsigned char)*v))
            return fail(err, errlen, spec, "unknown section", sec);
        if (!*v)
            return fail(err, errlen, spec, "a section without its number:", sec);
        if (seen[which]++)
            return fail(err, errlen, spec, "a section given twice:", sec);
        int bad = 0;
        if (which == 0)
            bad = int_val(v, 0, 100, &r.m);
        else if (which == 1)
            bad = int_val(v, 1, VT_RANDAUG_MAX_N, &r.n);
        else if (which == 3)
            bad = int_val(v, 1, 100, &r.mmax);
        else if (which == 4)
            bad = int_val(v, 0, 1, &r.inc);
        else {
            char *end;
            r.mstd = strtod(v, &end);
            bad = end == v || *end || !(r.mstd >= 0) || !isfinite(r.mstd);
        }
        if (bad) {
            static const char *const what[5] = {
                "the magnitude must be an integer 0..100:", "the op count must be 1..16:",
                "the magnitude noise must be a number >= 0 (above 100: uniform in [0, m]):",
                "the magnitude cap must be an integer 1..100:", "inc takes 0 or 1:"};
            return fail(err, errlen, spec, what[which], sec);
        }
    }
    if (r.m > r.mmax) { /* timm clamps every draw to mmax: say so rather than do it */
        snprintf(err, errlen, "--randaug %s: the magnitude m%d is above the cap mmax%d (every "
                 "draw would be clamped to %d): lower m or add mmax%d", spec, r.m, r.mmax,
                 r.mmax, r.m);
        return -1;
    }
    *c = r;
    return 0;
}

void vt_randaug_format(const vt_randaug_cfg *c, char *buf, size_t n) {
    if (c->n <= 0) {
        snprintf(buf, n, "off");
        return;
    }
    /* the shortest of %.15g and %.17g that reads back to the same double */
    char sd[32];
    snprintf(sd, sizeof sd, "%.15g", c->mstd);
    if (strtod(sd, NULL) != c->mstd)
        snprintf(sd, sizeof sd, "%.17g", c->mstd);
    snprintf(buf, n, "rand-m%d-n%d-mstd%s-mmax%d-inc%d", c->m, c->n, sd, c->mmax, c->inc);
}

double vt_randaug_level(int kind, int inc, double mag, int negative) {
    double l = mag / 10.0, sg = negative ? -1.0 : 1.0; /* _LEVEL_DENOM; _randomly_negate */
    switch (kind) {
    case VT_RA_ROTATE:
        return sg * (l * 30.0);
    case VT_RA_POSTERIZE: /* Posterize: int(l * 4) bits; PosterizeIncreasing: 4 minus it */
        return inc ? 4 - (int)(l * 4) : (int)(l * 4);
    case VT_RA_SOLARIZE:  /* threshold int(l * 256); SolarizeIncreasing: 256 minus it */
        return inc ? 256 - (int)(l * 256) : (int)(l * 256);
    case VT_RA_SOLARIZE_ADD:
        return (int)(l * 110);
    case VT_RA_COLOR:
    case VT_RA_CONTRAST:
    case VT_RA_BRIGHTNESS:
    case VT_RA_SHARPNESS:
        if (!inc)
            return l * 1.8 + 0.1;
        return fmax(0.1, 1.0 + sg * (l * 0.9)); /* _enhance_increasing_level_to_arg */
    case VT_RA_SHEAR_X:
    case VT_RA_SHEAR_Y:
        return sg * (l * 0.3);
    case VT_RA_TRANSLATE_X:
    case VT_RA_TRANSLATE_Y:
        return sg * (l * 0.45); /* translate_pct's default */
    default:
        return 0;
    }
}

/* Whether timm's level function for the kind draws a sign. */
static int signed_kind(int kind, int inc) {
    return kind == VT_RA_ROTATE || kind == VT_RA_SHEAR_X || kind == VT_RA_SHEAR_Y ||
           kind == VT_RA_TRANSLATE_X || kind == VT_RA_TRANSLATE_Y ||
           (inc && kind >= VT_RA_COLOR && kind <= VT_RA_SHARPNESS);
}

void vt_randaug_draw_ops(vt_randaug_draw *d, const vt_randaug_cfg *c, uint64_t key) {
    d->n = 0;
    if (c->n <= 0)
        return;
    vt_rng r;
    vt_rng_seed(&r, key);
    int pick[VT_RANDAUG_MAX_N];
    const int n = c->n < VT_RANDAUG_MAX_N ? c->n : VT_RANDAUG_MAX_N;
    for (int j = 0; j < n; j++) /* np.random.choice(ops, n, replace=True) */
        pick[j] = (int)vt_rng_below(&r, VT_RA_NKINDS);
    for (int j = 0; j < n; j++) {
        if (vt_rng_uniform(&r) > 0.5) /* AugmentOp: prob 0.5 */
            continue;
        double mag = c->m;
        if (c->mstd > 100)
            mag = vt_rng_uniform(&r) * c->m;
        else if (c->mstd > 0)
            mag = c->m + c->mstd * vt_rng_normal(&r);
        mag = fmax(0.0, fmin(mag, (double)c->mmax));
        d->kind[d->n] = pick[j];
        /* timm's _randomly_negate: negative when random() > 0.5 */
        int neg = signed_kind(pick[j], c->inc) && vt_rng_uniform(&r) > 0.5;
        d->arg[d->n] = vt_randaug_level(pick[j], c->inc, mag, neg);
        d->n++;
    }
}

void vt_randaug_clip(uint8_t *clip, int t, int h, int w, const vt_randaug_draw *d,
                     uint8_t *tmp) {
    for (int k = 0; k < d->n; k++)
        vt_randaug_op_frames(clip, t, h, w, d->kind[k], d->arg[k], tmp);
}
