/*
 * randaug_ops.c: RandAugment's pixel ops on one uint8 RGB frame, each PIL's arithmetic
 * (Pillow 9: ImageOps.py, ImageEnhance.py, libImaging Blend.c, Filter.c, Geometry.c,
 * Convert.c) so that a frame comes out as PIL would make it. The precision of every step
 * is PIL's on purpose — a float where PIL blends in float, truncation where PIL casts —
 * because "PIL's bytes" is the checkable contract (tests/test_randaug.c); cleaner
 * arithmetic would be a different augmentation by a grey level here and there.
 *
 * It must never allocate or keep state: the caller gives the scratch.
 */
#include "pipeline/data/randaug.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_names[VT_RA_NKINDS] = {
    [VT_RA_AUTOCONTRAST] = "autocontrast", [VT_RA_EQUALIZE] = "equalize",
    [VT_RA_INVERT] = "invert",             [VT_RA_ROTATE] = "rotate",
    [VT_RA_POSTERIZE] = "posterize",       [VT_RA_SOLARIZE] = "solarize",
    [VT_RA_SOLARIZE_ADD] = "solarize_add", [VT_RA_COLOR] = "color",
    [VT_RA_CONTRAST] = "contrast",         [VT_RA_BRIGHTNESS] = "brightness",
    [VT_RA_SHARPNESS] = "sharpness",       [VT_RA_SHEAR_X] = "shear_x",
    [VT_RA_SHEAR_Y] = "shear_y",           [VT_RA_TRANSLATE_X] = "translate_x",
    [VT_RA_TRANSLATE_Y] = "translate_y",
};

const char *vt_randaug_kind_name(int kind) {
    return kind >= 0 && kind < VT_RA_NKINDS ? g_names[kind] : "?";
}

/* ---- lookup tables (Image.point with 3 x 256 entries) ---- */

static void apply_lut(uint8_t *img, int64_t npx, const uint8_t lut[3][256]) {
    for (int64_t i = 0; i < npx; i++)
        for (int b = 0; b < 3; b++)
            img[3 * i + b] = lut[b][img[3 * i + b]];
}

static void histogram(const uint8_t *img, int64_t npx, int64_t h[3][256]) {
    memset(h, 0, 3 * 256 * sizeof(int64_t));
    for (int64_t i = 0; i < npx; i++)
        for (int b = 0; b < 3; b++)
            h[b][img[3 * i + b]]++;
}

/* ImageOps.autocontrast(cutoff=0): each band's [lo, hi] stretched to [0, 255] by
 * int(v * scale + offset) in double; a band with one value is left as it is. */
static void autocontrast_lut(const int64_t h[256], uint8_t lut[256]) {
    int lo = 0, hi = 255;
    while (lo < 256 && !h[lo])
        lo++;
    while (hi >= 0 && !h[hi])
        hi--;
    for (int i = 0; i < 256; i++) {
        if (hi <= lo) {
            lut[i] = (uint8_t)i;
            continue;
        }
        double scale = 255.0 / (hi - lo), offset = -lo * scale;
        int v = (int)(i * scale + offset); /* Python's int(): toward zero */
        lut[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

/* ImageOps.equalize: step = (pixels - count of the highest value) // 255; value i maps to
 * (step // 2 + pixels below i) // step, clipped to 255 as Image.point's table is; a band
 * with one value (or step 0) is left as it is. */
static void equalize_lut(const int64_t h[256], uint8_t lut[256]) {
    int64_t total = 0, last = 0;
    int nonzero = 0;
    for (int i = 0; i < 256; i++)
        if (h[i]) {
            total += h[i];
            last = h[i];
            nonzero++;
        }
    int64_t step = nonzero > 1 ? (total - last) / 255 : 0;
    int64_t n = step / 2;
    for (int i = 0; i < 256; i++) {
        if (!step) {
            lut[i] = (uint8_t)i;
            continue;
        }
        int64_t v = n / step;
        lut[i] = (uint8_t)(v > 255 ? 255 : v);
        n += h[i];
    }
}

static void pointwise(uint8_t *img, int64_t npx, int kind, double arg) {
    uint8_t lut[3][256];
    if (kind == VT_RA_AUTOCONTRAST || kind == VT_RA_EQUALIZE) {
        int64_t h[3][256];
        histogram(img, npx, h);
        for (int b = 0; b < 3; b++)
            (kind == VT_RA_AUTOCONTRAST ? autocontrast_lut : equalize_lut)(h[b], lut[b]);
        apply_lut(img, npx, lut);
        return;
    }
    int a = (int)arg;
    for (int i = 0; i < 256; i++) {
        int v = i;
        if (kind == VT_RA_INVERT)
            v = 255 - i;
        else if (kind == VT_RA_POSTERIZE) /* timm returns the image for bits >= 8 */
            v = a >= 8 ? i : i & ~((1 << (8 - (a < 0 ? 0 : a))) - 1);
        else if (kind == VT_RA_SOLARIZE)
            v = i < a ? i : 255 - i;
        else if (kind == VT_RA_SOLARIZE_ADD) /* timm's solarize_add, threshold 128 */
            v = i < 128 ? (i + a > 255 ? 255 : i + a) : i;
        lut[0][i] = lut[1][i] = lut[2][i] = (uint8_t)v;
    }
    apply_lut(img, npx, lut);
}

/* ---- ImageEnhance: Image.blend(degenerate, img, factor) ---- */

/* Blend.c: in1 + alpha * (in2 - in1) in float (alpha is a C float there), clipped to
 * [0, 255] and truncated. */
static inline uint8_t blend(int in1, int in2, float alpha) {
    float v = (float)in1 + alpha * (float)(in2 - in1);
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

/* Convert.c's RGB -> L: ITU-R 601 weights in 16-bit fixed point, rounded. */
static inline int luma(const uint8_t *p) {
    return (p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16;
}

/* Filter.c's 3x3 filter with ImageFilter.SMOOTH (1 1 1 / 1 5 1 / 1 1 1, divisor 13):
 * the kernel divided by 13 in float, each tap's product v * k in float (tabulated: the
 * same products), summed three taps of a row at a time from the row below up (as
 * Filter.c does), rounded; the border rows and columns copied. */
static void smooth(uint8_t *out, const uint8_t *in, int h, int w) {
    memcpy(out, in, (size_t)h * w * 3);
    if (h < 3 || w < 3)
        return;
    const float k1 = 1.0f / 13.0f, k5 = 5.0f / 13.0f;
    float p1[256], p5[256];
    for (int v = 0; v < 256; v++)
        p1[v] = (float)v * k1, p5[v] = (float)v * k5;
    const int64_t row = (int64_t)w * 3;
    for (int y = 1; y < h - 1; y++) {
        const uint8_t *up = in + (y - 1) * row, *mid = in + y * row, *dn = in + (y + 1) * row;
        uint8_t *o = out + y * row;
        for (int64_t e = 3; e < row - 3; e++) { /* value e of the row: pixel e/3, band e%3 */
            float ss = 0.0f;
            ss += p1[dn[e - 3]] + p1[dn[e]] + p1[dn[e + 3]];
            ss += p1[mid[e - 3]] + p5[mid[e]] + p1[mid[e + 3]];
            ss += p1[up[e - 3]] + p1[up[e]] + p1[up[e + 3]];
            /* Filter.c's clip8 rounds half up (unlike Blend.c, which truncates) */
            o[e] = ss <= 0.0f ? 0 : ss >= 255.0f ? 255 : (uint8_t)(ss + 0.5f);
        }
    }
}

/* Image.blend(degenerate, img, alpha) of every pair: tab[d * 256 + v]. For a whole clip
 * it is cheaper than blending each value (65536 blends against t * h * w * 3). */
static void blend_table(uint8_t *tab, float alpha) {
    for (int d = 0; d < 256; d++)
        for (int v = 0; v < 256; v++)
            tab[d * 256 + v] = blend(d, v, alpha);
}

/* The enhance op on one frame; tab: blend_table of the factor, or NULL to blend each
 * value (the same bytes). */
static void enhance(uint8_t *img, int h, int w, int kind, double factor, uint8_t *tmp,
                    const uint8_t *tab) {
    const int64_t npx = (int64_t)h * w;
    const float alpha = (float)factor; /* PIL takes the factor as a C float */
    if (kind == VT_RA_SHARPNESS) {
        smooth(tmp, img, h, w);
        for (int64_t i = 0; i < 3 * npx; i++)
            img[i] = tab ? tab[tmp[i] * 256 + img[i]] : blend(tmp[i], img[i], alpha);
        return;
    }
    int grey = 0; /* Brightness: blend with black */
    if (kind == VT_RA_CONTRAST) {
        /* int(mean of the L image + 0.5), the mean in double as ImageStat's */
        double sum = 0;
        for (int64_t i = 0; i < npx; i++)
            sum += luma(img + 3 * i);
        grey = (int)(sum / (double)npx + 0.5);
    }
    for (int64_t i = 0; i < npx; i++) {
        uint8_t *p = img + 3 * i;
        int d = kind == VT_RA_COLOR ? luma(p) : grey;
        for (int b = 0; b < 3; b++)
            p[b] = tab ? tab[d * 256 + p[b]] : blend(d, p[b], alpha);
    }
}

/* ---- affine transforms (Image.transform AFFINE, BILINEAR, fillcolor) ---- */

/* Geometry.c: output pixel (x, y) samples the source at a * (x + 0.5, y + 0.5, 1);
 * outside [0, w) x [0, h) it keeps the fill; inside, bilinear between the pixel centres
 * around it (neighbours clamped to the frame), in double, truncated. The t frames share
 * the sample points, computed once per pixel; tmp holds the t sources. */
static void affine(uint8_t *img, int t, int h, int w, const double a[6], uint8_t *tmp) {
    const int64_t fr = (int64_t)h * w * 3;
    memcpy(tmp, img, (size_t)(t * fr));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const int64_t at = ((int64_t)y * w + x) * 3;
            double xi = x + 0.5, yi = y + 0.5;
            double xin = a[0] * xi + a[1] * yi + a[2], yin = a[3] * xi + a[4] * yi + a[5];
            if (xin < 0.0 || xin >= w || yin < 0.0 || yin >= h) {
                for (int f = 0; f < t; f++)
                    memset(img + f * fr + at, VT_RANDAUG_FILL, 3);
                continue;
            }
            xin -= 0.5;
            yin -= 0.5;
            int x0 = (int)floor(xin), y0 = (int)floor(yin);
            double dx = xin - x0, dy = yin - y0;
            int xa = x0 < 0 ? 0 : x0 >= w ? w - 1 : x0;
            int xb = x0 + 1 < 0 ? 0 : x0 + 1 >= w ? w - 1 : x0 + 1;
            int ya = y0 < 0 ? 0 : y0 >= h ? h - 1 : y0;
            int yb_ok = y0 + 1 >= 0 && y0 + 1 < h;
            const int64_t r0 = (int64_t)ya * w * 3, r1 = (int64_t)(y0 + 1) * w * 3;
            for (int f = 0; f < t; f++) {
                const uint8_t *src = tmp + f * fr;
                uint8_t *o = img + f * fr + at;
                for (int b = 0; b < 3; b++) {
                    const uint8_t *p0 = src + r0 + b;
                    double v1 = p0[3 * xa] + (p0[3 * xb] - p0[3 * xa]) * dx, v2 = v1;
                    if (yb_ok) {
                        const uint8_t *p1 = src + r1 + b;
                        v2 = p1[3 * xa] + (p1[3 * xb] - p1[3 * xa]) * dx;
                    }
                    o[b] = (uint8_t)(v1 + (v2 - v1) * dy);
                }
            }
        }
}

/* Python's round(v, 15), which Image.rotate applies to its cosines and sines: both are
 * the correctly rounded decimal, so printf's and strtod's round trip is the same number. */
static double round15(double v) {
    char s[64];
    snprintf(s, sizeof s, "%.15f", v);
    return strtod(s, NULL);
}

/* Image.rotate(deg, BILINEAR, fillcolor) without expand: the matrix it builds, about the
 * centre (w/2, h/2), from the angle taken modulo 360 as Python's % does. */
static void rotate_matrix(double deg, int h, int w, double m[6]) {
    double a = fmod(deg, 360.0);
    if (a < 0)
        a += 360.0;
    double r = -(a * (M_PI / 180.0)); /* math.radians */
    m[0] = round15(cos(r)), m[1] = round15(sin(r)), m[2] = 0.0;
    m[3] = round15(-sin(r)), m[4] = round15(cos(r)), m[5] = 0.0;
    double cx = w / 2.0, cy = h / 2.0;
    double tx = m[0] * -cx + m[1] * -cy + m[2], ty = m[3] * -cx + m[4] * -cy + m[5];
    m[2] = tx + cx;
    m[5] = ty + cy;
}

/* The op on t frames alike; tab: the enhance ops' blend_table of arg, or NULL; tmp: t
 * frames for the geometric ops, one for Sharpness. */
static void op_frames(uint8_t *img, int t, int h, int w, int kind, double arg, uint8_t *tmp,
                      const uint8_t *tab) {
    const int64_t npx = (int64_t)h * w;
    switch (kind) {
    case VT_RA_AUTOCONTRAST:
    case VT_RA_EQUALIZE:
    case VT_RA_INVERT:
    case VT_RA_POSTERIZE:
    case VT_RA_SOLARIZE:
    case VT_RA_SOLARIZE_ADD:
        for (int f = 0; f < t; f++) /* each frame's own histogram */
            pointwise(img + f * npx * 3, npx, kind, arg);
        return;
    case VT_RA_COLOR:
    case VT_RA_CONTRAST:
    case VT_RA_BRIGHTNESS:
    case VT_RA_SHARPNESS:
        if ((float)arg != 1.0f) /* Image.blend copies the image at 1 */
            for (int f = 0; f < t; f++)
                enhance(img + f * npx * 3, h, w, kind, arg, tmp, tab);
        return;
    case VT_RA_ROTATE: {
        if (fmod(arg, 360.0) == 0.0) /* Image.rotate returns a copy */
            return;
        double m[6];
        rotate_matrix(arg, h, w, m);
        affine(img, t, h, w, m, tmp);
        return;
    }
    case VT_RA_SHEAR_X:
    case VT_RA_SHEAR_Y:
    case VT_RA_TRANSLATE_X:
    case VT_RA_TRANSLATE_Y: {
        double m[6] = {1, 0, 0, 0, 1, 0};
        if (kind == VT_RA_SHEAR_X)
            m[1] = arg;
        else if (kind == VT_RA_SHEAR_Y)
            m[3] = arg;
        else if (kind == VT_RA_TRANSLATE_X)
            m[2] = arg * w; /* timm: pixels = pct * img.size[0] */
        else
            m[5] = arg * h;
        affine(img, t, h, w, m, tmp);
        return;
    }
    default:
        return;
    }
}

void vt_randaug_op(uint8_t *img, int h, int w, int kind, double arg, uint8_t *tmp) {
    op_frames(img, 1, h, w, kind, arg, tmp, NULL);
}

void vt_randaug_op_frames(uint8_t *frames, int t, int h, int w, int kind, double arg,
                          uint8_t *tmp) {
    uint8_t tab[65536]; /* 64 KiB of stack: the workers' threads have megabytes */
    int blends = kind >= VT_RA_COLOR && kind <= VT_RA_SHARPNESS && (float)arg != 1.0f;
    if (blends)
        blend_table(tab, (float)arg);
    op_frames(frames, t, h, w, kind, arg, tmp, blends ? tab : NULL);
}
