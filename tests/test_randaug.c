/*
 * test_randaug.c: RandAugment on clips (pipeline/data/randaug.h, --randaug SPEC):
 *   1. every op against PIL 9 on this machine (tests/oracle/pil_randaug.py: ImageOps,
 *      ImageEnhance, Image.transform / Image.rotate as timm calls them, bilinear, fill
 *      128) on four frames (full range, low range, an Equalize table past 255, flat
 *      bands) and 5-7 arguments each: EXACT for the pointwise and enhance ops; the
 *      geometric ops (rotate, shear, translate) exact too where our double arithmetic is
 *      PIL's, with at most 1 grey level on at most 0.5% of the values allowed, because a
 *      sample point computed a last bit apart can cross a truncation boundary;
 *   2. timm's level functions (magnitude -> argument, both variants) against the
 *      oracle's, exact;
 *   3. the clip rule: one draw on every frame — equal input frames give equal output
 *      frames, and each frame is what the drawn ops make of it alone, through the
 *      loader's transform too (crop, flip, normalise);
 *   4. the draw: a pure function of the key (the same twice, another key differs), ops
 *      chosen uniformly, each firing half the time, magnitude m + mstd N(0,1) (mean and
 *      sd from rotate's angles), signs half negative; the clip key drawn for every
 *      training clip, anew for a --repeat-aug repeat, none in evaluation;
 *   5. --randaug parsing: VideoMAE's spec, defaults, the canonical form read back, and
 *      errors naming the bad section.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/randaug.h"
#include "pipeline/data/sample.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

static int kind_of(const char *name) {
    for (int k = 0; k < VT_RA_NKINDS; k++)
        if (!strcmp(vt_randaug_kind_name(k), name))
            return k;
    return -1;
}

static int geometric(int k) {
    return k == VT_RA_ROTATE || k == VT_RA_SHEAR_X || k == VT_RA_SHEAR_Y ||
           k == VT_RA_TRANSLATE_X || k == VT_RA_TRANSLATE_Y;
}

static void pil_cases(const vt_test_recs *rs) {
    int ncases = 0, exact_bad = 0, geo_cases = 0;
    int64_t geo_vals = 0, geo_off = 0;
    int geo_max = 0;
    for (int r = 0; r < rs->n; r++) {
        int i;
        char name[64];
        if (sscanf(rs->r[r].name, "op%d.%63s", &i, name) != 2)
            continue;
        int kind = kind_of(name);
        TCHECK(kind >= 0, "unknown op %s", name);
        if (kind < 0)
            continue;
        char key[64];
        int k = (int)rs->r[r].v[0];
        double arg = rs->r[r].v[1];
        snprintf(key, sizeof key, "frame%d", k);
        const vt_test_rec *fr = vt_test_recs_find(rs, key);
        snprintf(key, sizeof key, "shape%d", k);
        const vt_test_rec *sh = vt_test_recs_find(rs, key);
        snprintf(key, sizeof key, "out%d", i);
        const vt_test_rec *out = vt_test_recs_find(rs, key);
        VT_CHECK(fr && sh && out, "records of case %d", i);
        int h = (int)sh->v[0], w = (int)sh->v[1];
        int64_t n = (int64_t)h * w * 3;
        uint8_t *img = vt_malloc((size_t)n), *tmp = vt_malloc((size_t)n);
        for (int64_t e = 0; e < n; e++)
            img[e] = (uint8_t)fr->v[e];
        vt_randaug_op(img, h, w, kind, arg, tmp);
        int64_t off = 0;
        int worst = 0;
        for (int64_t e = 0; e < n; e++) {
            int d = abs((int)img[e] - (int)out->v[e]);
            off += d != 0;
            worst = VT_MAX(worst, d);
        }
        ncases++;
        if (geometric(kind)) {
            geo_cases++;
            geo_vals += n;
            geo_off += off;
            geo_max = VT_MAX(geo_max, worst);
            /* per case too: a wrong matrix moves far more than 0.5% of the values */
            TCHECK(worst <= 1 && off <= n / 200 + 1, "%s(%g) on frame %d (%dx%d): %lld of %lld "
                   "values differ, by up to %d", name, arg, k, w, h, (long long)off,
                   (long long)n, worst);
        } else if (off) {
            exact_bad++;
            TCHECK(0, "%s(%g) on frame %d (%dx%d): %lld of %lld values differ from PIL, by up "
                   "to %d", name, arg, k, w, h, (long long)off, (long long)n, worst);
        }
        free(img), free(tmp);
    }
    printf("PIL: %d cases; pointwise/enhance %d exact of %d; geometric %d cases, %lld of %lld "
           "values off by <= %d\n", ncases, ncases - geo_cases - exact_bad, ncases - geo_cases,
           geo_cases, (long long)geo_off, (long long)geo_vals, geo_max);
    TCHECK(ncases >= 250 && geo_cases >= 100, "only %d cases (%d geometric)", ncases, geo_cases);
}

static void level_cases(const vt_test_recs *rs) {
    int checked = 0;
    for (int inc = 0; inc < 2; inc++)
        for (int k = 0; k < VT_RA_NKINDS; k++) {
            char key[64];
            snprintf(key, sizeof key, "level%d.%s", inc, vt_randaug_kind_name(k));
            const vt_test_rec *lv = vt_test_recs_find(rs, key);
            TCHECK(lv != NULL, "no record %s", key);
            for (int64_t j = 0; lv && j + 1 < lv->n; j += 2) {
                double got = vt_randaug_level(k, inc, lv->v[j], 0);
                TCHECK((float)got == lv->v[j + 1], "%s at magnitude %g: %.9g, timm %.9g", key,
                       (double)lv->v[j], got, (double)lv->v[j + 1]);
                checked++;
            }
        }
    /* the sign: the signed ops negate, the unsigned ones ignore it */
    TCHECK(vt_randaug_level(VT_RA_ROTATE, 1, 7, 1) == -21.0, "rotate sign");
    TCHECK(fabs(vt_randaug_level(VT_RA_CONTRAST, 1, 7, 1) - 0.37) < 1e-12, "contrast inc sign");
    TCHECK(vt_randaug_level(VT_RA_POSTERIZE, 1, 7, 1) == 2, "posterize ignores the sign");
    printf("timm's level functions: %d values exact\n", checked);
}

/* A clip of 4 frames (h, w): frames 0 and 2 equal, 1 and 3 different. */
static void make_clip(uint8_t *c, int h, int w) {
    int64_t fr = (int64_t)h * w * 3;
    for (int f = 0; f < 4; f++)
        for (int64_t e = 0; e < fr; e++) {
            int g = f == 2 ? 0 : f;
            c[f * fr + e] = (uint8_t)(vt_hash64((uint64_t)(g * fr + e)) % 200 + (e % 3) * 20);
        }
}

static void clip_rule(void) {
    vt_randaug_cfg c;
    char err[512];
    VT_CHECK(vt_randaug_parse(&c, "rand-m9-n4-mstd0.5-inc1", err, sizeof err) == 0, "%s", err);
    const int h = 20, w = 24, t = 4;
    const int64_t fr = (int64_t)h * w * 3;
    uint8_t *clip = vt_malloc((size_t)(t * fr)), *ref = vt_malloc((size_t)(t * fr)),
            *one = vt_malloc((size_t)fr), *tmp = vt_malloc((size_t)(t * fr));
    make_clip(ref, h, w);
    int same02 = 1, alone = 1, changed = 0;
    for (int key = 1; key <= 200; key++) {
        memcpy(clip, ref, (size_t)(t * fr));
        vt_randaug_draw d;
        vt_randaug_draw_ops(&d, &c, vt_hash64((uint64_t)key));
        vt_randaug_clip(clip, t, h, w, &d, tmp);
        same02 &= !memcmp(clip, clip + 2 * fr, (size_t)fr);
        for (int f = 0; f < t; f++) { /* frame f alone through the same ops */
            memcpy(one, ref + f * fr, (size_t)fr);
            for (int k = 0; k < d.n; k++)
                vt_randaug_op(one, h, w, d.kind[k], d.arg[k], tmp);
            alone &= !memcmp(one, clip + f * fr, (size_t)fr);
        }
        changed += memcmp(ref, clip, (size_t)(t * fr)) != 0;
    }
    TCHECK(same02, "equal input frames came out different");
    TCHECK(alone, "a frame in the clip is not what the ops make of it alone");
    /* n 4 at probability 1/2: no op fires in 1/16 of clips, and a few ops are identities
     * at some arguments: most clips change */
    TCHECK(changed > 150, "only %d of 200 clips changed", changed);

    /* through the loader's transform: crop (2, 1) of 16, flipped, normalised */
    vt_clip_cfg cc;
    vt_clip_cfg_default(&cc);
    cc.t = t, cc.crop = 16, cc.randaug = c;
    vt_clip_params p = {.x0 = 2, .y0 = 1, .flip = 1, .ra_key = 12345};
    make_clip(clip, h, w);
    const int64_t plane = (int64_t)t * 16 * 16;
    float *x = vt_malloc((size_t)(3 * plane) * 4), *y = vt_malloc((size_t)(3 * plane) * 4);
    uint8_t *buf = NULL;
    size_t cap = 0;
    vt_clip_transform_aug(x, &buf, &cap, clip, h, w, &p, &cc);
    int eq = 1;
    for (int ch = 0; ch < 3; ch++)
        eq &= !memcmp(x + ch * plane, x + ch * plane + 2 * 256, 256 * 4);
    TCHECK(eq, "the transform's frames 0 and 2 differ");
    /* the same by hand: crop + flip, the draw, then the plain transform */
    uint8_t *crop = vt_malloc((size_t)(t * 16 * 16 * 3));
    for (int f = 0; f < t; f++)
        for (int yy = 0; yy < 16; yy++)
            for (int xx = 0; xx < 16; xx++)
                memcpy(crop + ((f * 16 + yy) * 16 + xx) * 3,
                       clip + f * fr + ((1 + yy) * w + 2 + 15 - xx) * 3, 3);
    vt_randaug_draw d;
    vt_randaug_draw_ops(&d, &c, 12345);
    vt_randaug_clip(crop, t, 16, 16, &d, tmp);
    vt_clip_transform(y, crop, t, 16, 16, 0, 0, 16, 0, cc.mean, cc.std);
    TCHECK(!memcmp(x, y, (size_t)(3 * plane) * 4), "vt_clip_transform_aug is not crop, flip, "
           "draw, normalise");
    /* ra_key 0 (evaluation): the plain transform, the buffer untouched */
    p.ra_key = 0;
    uint8_t *before = buf;
    vt_clip_transform_aug(x, &buf, &cap, clip, h, w, &p, &cc);
    vt_clip_transform(y, clip, t, h, w, 2, 1, 16, 1, cc.mean, cc.std);
    TCHECK(!memcmp(x, y, (size_t)(3 * plane) * 4) && buf == before, "ra_key 0 is not plain");
    printf("clip rule: 200 draws on 4 frames, equal frames stay equal; %d of 200 clips changed\n",
           changed);
    free(crop), free(buf), free(x), free(y), free(clip), free(ref), free(one), free(tmp);
}

static void draw_stats(void) {
    vt_randaug_cfg c;
    char err[512];
    VT_CHECK(vt_randaug_parse(&c, "rand-m7-n4-mstd0.5-inc1", err, sizeof err) == 0, "%s", err);
    const int n = 20000;
    int64_t fired = 0, per_kind[VT_RA_NKINDS] = {0}, neg = 0, nrot = 0, same = 1, differ = 0;
    double ms = 0, ms2 = 0;
    for (int i = 0; i < n; i++) {
        uint64_t key = vt_hash64((uint64_t)i * 7 + 1);
        vt_randaug_draw a, b, o;
        vt_randaug_draw_ops(&a, &c, key);
        vt_randaug_draw_ops(&b, &c, key);
        vt_randaug_draw_ops(&o, &c, key + 1);
        same &= a.n == b.n && !memcmp(a.kind, b.kind, sizeof a.kind[0] * (size_t)a.n) &&
                !memcmp(a.arg, b.arg, sizeof a.arg[0] * (size_t)a.n);
        differ += a.n != o.n || memcmp(a.kind, o.kind, sizeof a.kind[0] * (size_t)a.n) ||
                  memcmp(a.arg, o.arg, sizeof a.arg[0] * (size_t)a.n);
        fired += a.n;
        for (int k = 0; k < a.n; k++) {
            per_kind[a.kind[k]]++;
            if (a.kind[k] == VT_RA_ROTATE) {
                double m = fabs(a.arg[k]) / 3.0; /* deg = m / 10 * 30 */
                ms += m, ms2 += m * m, nrot++;
                neg += a.arg[k] < 0;
            }
        }
    }
    double mean_fired = (double)fired / n, mm = ms / nrot, sd = sqrt(ms2 / nrot - mm * mm);
    printf("draws: %.3f ops fire per clip (want 2), rotate's magnitude mean %.3f sd %.3f (want 7, "
           "0.5), %.3f negative\n", mean_fired, mm, sd, (double)neg / nrot);
    TCHECK(same, "the draw is not a function of the key");
    TCHECK(differ > n * 9 / 10, "another key gives the same draw (%lld differ)", (long long)differ);
    /* binomial(4, 1/2): sd 1 per clip, 1/sqrt(n) for the mean; 4.5 sd */
    TCHECK(fabs(mean_fired - 2) < 4.5 / sqrt(n), "ops fired per clip %g", mean_fired);
    for (int k = 0; k < VT_RA_NKINDS; k++) { /* each 1/15 of the fired: binomial, 4.5 sd */
        double p = 1.0 / 15, sdk = sqrt(fired * p * (1 - p));
        TCHECK(fabs(per_kind[k] - fired * p) < 4.5 * sdk, "%s fired %lld of %lld",
               vt_randaug_kind_name(k), (long long)per_kind[k], (long long)fired);
    }
    /* N(7, 0.5) hardly reaches the clamps [0, 10]; the mean's sd is 0.5/sqrt(nrot) */
    TCHECK(fabs(mm - 7) < 4.5 * 0.5 / sqrt((double)nrot) && fabs(sd - 0.5) < 0.03,
           "magnitude mean %g sd %g", mm, sd);
    TCHECK(fabs((double)neg / nrot - 0.5) < 4.5 * 0.5 / sqrt((double)nrot), "negative %lld of %lld",
           (long long)neg, (long long)nrot);
    /* mstd 0: every magnitude exactly m; mstd 101: uniform in [0, m] */
    VT_CHECK(vt_randaug_parse(&c, "rand-m7-n16-mstd0", err, sizeof err) == 0, "%s", err);
    int exact = 1;
    for (int i = 0; i < 500; i++) {
        vt_randaug_draw a;
        vt_randaug_draw_ops(&a, &c, (uint64_t)i + 99);
        for (int k = 0; k < a.n; k++)
            if (a.kind[k] == VT_RA_ROTATE)
                exact &= fabs(a.arg[k]) == 21.0;
    }
    TCHECK(exact, "mstd0 gave a rotation other than 21 degrees");

    /* the sample's key: drawn for training clips, its own for a repeat */
    vt_clip_cfg cc;
    vt_clip_cfg_default(&cc);
    cc.crop = 32;
    int nonzero = 1, rep_differ = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t key = vt_sample_key(5, 1, i);
        vt_clip_params p, q;
        vt_sample_train_params(&p, &cc, key, 100, 48, 36);
        q = p;
        vt_sample_repeat_params(&q, &cc, key, 1, 48, 36);
        nonzero &= p.ra_key != 0 && q.ra_key != 0;
        rep_differ += q.ra_key != p.ra_key;
    }
    TCHECK(nonzero, "a training clip without a RandAugment key");
    TCHECK(rep_differ == 200, "a repeat shares its base clip's key (%d of 200 differ)", rep_differ);
}

static void parse_cases(void) {
    vt_randaug_cfg c;
    char err[512], buf[128];
    TCHECK(vt_randaug_parse(&c, "rand-m7-n4-mstd0.5-inc1", err, sizeof err) == 0, "%s", err);
    TCHECK(c.m == 7 && c.n == 4 && c.mstd == 0.5 && c.inc == 1 && c.mmax == 10, "VideoMAE spec");
    TCHECK(vt_randaug_parse(&c, "rand", err, sizeof err) == 0 && c.m == 10 && c.n == 2 &&
           c.mstd == 0 && c.inc == 0 && c.mmax == 10, "timm's defaults");
    TCHECK(vt_randaug_parse(&c, "off", err, sizeof err) == 0 && c.n == 0, "off");
    vt_randaug_format(&c, buf, sizeof buf);
    TCHECK(!strcmp(buf, "off"), "format off: %s", buf);
    VT_CHECK(vt_randaug_parse(&c, "rand-inc1-mstd0.3-m15-mmax20-n3", err, sizeof err) == 0, "%s",
             err);
    vt_randaug_cfg back;
    vt_randaug_format(&c, buf, sizeof buf);
    TCHECK(vt_randaug_parse(&back, buf, err, sizeof err) == 0 && !memcmp(&back, &c, sizeof c),
           "%s does not read back", buf);
    printf("canonical: %s\n", buf);
    static const struct {
        const char *spec, *names;
    } bad[] = {
        {"rand-m7-x3", "x3"},   {"rand-m7-n0", "n0"},    {"rand-m7.5", "m7.5"},
        {"rand-mstd-1", "mstd"}, {"augmix-m3", "rand"},   {"rand-m7-m8", "m8"},
        {"rand-m12", "mmax12"},  {"rand-inc2", "inc2"},   {"rand-n", "n"},
        {"rand-m7-", "empty"},   {"rand-mstdx", "mstdx"}, {"rand-w0", "w0"},
        {"", "empty"},
    };
    for (size_t i = 0; i < VT_ARRAY_LEN(bad); i++) {
        err[0] = 0;
        int rc = vt_randaug_parse(&c, bad[i].spec, err, sizeof err);
        TCHECK(rc == -1 && strstr(err, bad[i].names) && strstr(err, "--randaug") &&
                   (strstr(err, "e.g.") || strstr(err, "add mmax")),
               "%s: rc %d, message \"%s\"", bad[i].spec, rc, err);
    }
    vt_randaug_parse(&c, "rand-m7-x3", err, sizeof err);
    printf("an error: %s\n", err);
}

int main(void) {
    parse_cases();
    draw_stats();
    clip_rule();
    vt_test_recs rs = {0};
    if (vt_test_oracle_recs("test_randaug", "pil_randaug", "PIL, numpy", &rs) <= 0) {
        printf("test_randaug: the PIL part not run\n");
        return vt_test_done("test_randaug");
    }
    pil_cases(&rs);
    level_cases(&rs);
    vt_test_recs_free(&rs);
    return vt_test_done("test_randaug");
}
