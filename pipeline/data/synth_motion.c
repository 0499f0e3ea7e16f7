/*
 * synth_motion.c: the `motion` preset (synth.h) — a camera that pans, zooms or rotates
 * over an animated procedural world, rendered frame by frame for real encoding.
 *
 * A video: the world is a texture drawn per video — a random mix of multi-octave value or
 * gradient noise through a colour palette ("photo-like"), cellular (Worley) patterns,
 * colour ramps, stripes and checkers, with large-scale shading and fine detail. It is
 * rendered once into a mip pyramid just large enough for the whole camera path (zoom and
 * rotation included) and sampled bilinearly per frame in fixed point (trilinear across
 * two levels when the camera sees more than one world texel per pixel), so no noise is
 * evaluated per pixel per frame. On top, common to every class: an evolving pattern tied
 * to the world (3-D noise at the world position of a coarse screen grid, its third axis
 * time), screen-space lighting that drifts and evolves, colour and brightness drift,
 * flicker, vignetting, sensor grain, camera shake, and up to three objects that move and
 * spin on their own in random directions (bouncing off the frame edges).
 *
 * Conventions (on screen, y pointing down): pan_left means the picture content moves LEFT
 * across the frame (the camera turns right), pan_right right, pan_up up, pan_down down;
 * zoom_in: the content grows (magnification increases); rotate_cw: the content turns
 * clockwise as the viewer sees it. A pan's direction is jittered by up to 15 degrees.
 *
 * Single frames carry no class: every random number is drawn by draw_params, which never
 * sees the class; the class only chooses which camera parameter the motion drives. The
 * motion is centred on the middle of the video with a speed profile symmetric about it,
 * so over the frames of a video the magnification and orientation are distributed alike
 * in every class: pans and rotations keep the magnification a zoom would have at a random
 * moment, and every class starts at a uniformly random orientation. The main motion's
 * speed is one number for every class — the speed of the content at the frame's
 * half-diagonal, log-uniform in 0.03..0.2 half-diagonals per second — and shake, when on,
 * peaks below 35% of it.
 *
 * This file must never print and never depend on wall-clock time or threads: the same
 * seed gives the same pixels.
 */
#include "pipeline/data/synth_motion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "models/common.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

const char *const vt_motion_class_names[VT_MOTION_CLASSES] = {
    "pan_left", "pan_right", "pan_up", "pan_down", "zoom_in", "zoom_out", "rotate_cw", "rotate_ccw",
};

enum {
    CLS_PAN_LEFT, CLS_PAN_RIGHT, CLS_PAN_UP, CLS_PAN_DOWN,
    CLS_ZOOM_IN, CLS_ZOOM_OUT, CLS_ROTATE_CW, CLS_ROTATE_CCW,
};

#define MAX_LEV 4 /* mip levels: enough for 8 world texels per screen pixel */
#define GRAIN_N 128 /* sensor grain: a (GRAIN_N, GRAIN_N, 3) table read at a new offset per frame */
#define MAX_OBJ 4
#define NSTOPS 5  /* palette colour stops */
#define LIGHT_GRID 16 /* screen pixels between lighting nodes */
#define EVO_GRID 4    /* screen pixels between evolving-pattern nodes */
#define SHADE_GRID 8  /* world texels between shading nodes */

/* ---- noise: a texel's value depends on its world position only, never on the extent ---- */

static inline uint32_t hash3(int32_t x, int32_t y, int32_t z, uint32_t seed) {
    uint32_t h = seed ^ ((uint32_t)x * 0x8da6b343u) ^ ((uint32_t)y * 0xd8163841u) ^
                 ((uint32_t)z * 0xcb1ab31fu);
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

static inline float hashf(uint32_t h) { /* [-1, 1) */
    return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

static inline float fade(float t) { return t * t * t * (t * (t * 6.0f - 15.0f) + 10.0f); }
static inline float lerpf(float a, float b, float t) { return a + (b - a) * t; }
static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The world's 2-D noise reads a per-video lattice table (Perlin's permutation) instead of
 * hashing each corner: a few times faster, and the world is most of a video's set-up
 * time. The lattice repeats every 256 cells, far beyond any world at the coarse octaves
 * and unnoticeable under the coarse ones at the fine. A field's seed picks its offset in
 * the lattice. */
typedef struct noise_tab {
    uint8_t perm[512];         /* a permutation of 0..255, twice */
    float val[256];            /* [-1, 1) */
} noise_tab;

static void noise_tab_init(noise_tab *t, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int i = 0; i < 256; i++) {
        t->perm[i] = (uint8_t)i;
        t->val[i] = (float)(2.0 * vt_rng_uniform(&r) - 1.0);
    }
    for (int i = 255; i > 0; i--) { /* Fisher-Yates */
        int j = (int)vt_rng_below(&r, (uint32_t)i + 1);
        uint8_t x = t->perm[i];
        t->perm[i] = t->perm[j];
        t->perm[j] = x;
    }
    memcpy(t->perm + 256, t->perm, 256);
}

static inline int lattice(const noise_tab *t, int x, int y) { /* x, y in 0..255 */
    return t->perm[t->perm[x] + y];
}

static float tvalue_noise(const noise_tab *t, float x, float y, uint32_t seed) {
    float fx = floorf(x), fy = floorf(y);
    int ix = ((int)fx + (int)(seed & 0xffff)) & 255, iy = ((int)fy + (int)(seed >> 16)) & 255;
    int jx = (ix + 1) & 255, jy = (iy + 1) & 255;
    float tx = fade(x - fx), ty = fade(y - fy);
    float a = t->val[lattice(t, ix, iy)], b = t->val[lattice(t, jx, iy)];
    float c = t->val[lattice(t, ix, jy)], d = t->val[lattice(t, jx, jy)];
    return lerpf(lerpf(a, b, tx), lerpf(c, d, tx), ty);
}

/* Value noise in 3-D: two 2-D slices at the neighbouring integer z, each at its own
 * lattice offset, blended. */
static float tvalue_noise3(const noise_tab *t, float x, float y, float z, uint32_t seed) {
    float fz = floorf(z);
    int32_t iz = (int32_t)fz;
    float tz = fade(z - fz);
    return lerpf(tvalue_noise(t, x, y, seed ^ hash3(iz, 0, 0, 0x51ed270bu)),
                 tvalue_noise(t, x, y, seed ^ hash3(iz + 1, 0, 0, 0x51ed270bu)), tz);
}

/* Perlin gradient noise: 16 gradient directions, scaled to about [-1, 1]. */
static float tgradient_noise(const noise_tab *t, float x, float y, uint32_t seed) {
    static const float g[16][2] = {
        {1, 0}, {0.924f, 0.383f}, {0.707f, 0.707f}, {0.383f, 0.924f},
        {0, 1}, {-0.383f, 0.924f}, {-0.707f, 0.707f}, {-0.924f, 0.383f},
        {-1, 0}, {-0.924f, -0.383f}, {-0.707f, -0.707f}, {-0.383f, -0.924f},
        {0, -1}, {0.383f, -0.924f}, {0.707f, -0.707f}, {0.924f, -0.383f},
    };
    float fx = floorf(x), fy = floorf(y);
    int ix = ((int)fx + (int)(seed & 0xffff)) & 255, iy = ((int)fy + (int)(seed >> 16)) & 255;
    int jx = (ix + 1) & 255, jy = (iy + 1) & 255;
    float rx = x - fx, ry = y - fy;
    const float *g00 = g[lattice(t, ix, iy) & 15], *g10 = g[lattice(t, jx, iy) & 15];
    const float *g01 = g[lattice(t, ix, jy) & 15], *g11 = g[lattice(t, jx, jy) & 15];
    float n00 = g00[0] * rx + g00[1] * ry, n10 = g10[0] * (rx - 1) + g10[1] * ry;
    float n01 = g01[0] * rx + g01[1] * (ry - 1), n11 = g11[0] * (rx - 1) + g11[1] * (ry - 1);
    float tx = fade(rx), ty = fade(ry);
    return 1.4f * lerpf(lerpf(n00, n10, tx), lerpf(n01, n11, tx), ty);
}

/* Fractal sum of octaves, each at twice the frequency and turned by 37 degrees (the
 * lattice of value noise would otherwise show as horizontal and vertical streaks). */
typedef struct fbm_def {
    int gradient, ridged, octaves;
    float period, gain; /* period of the first octave in texels; amplitude ratio */
    uint32_t seed;
} fbm_def;

static float fbm(const noise_tab *t, const fbm_def *f, float x, float y) {
    float inv = 1.0f / f->period, sum = 0, amp = 1, norm = 0;
    x *= inv;
    y *= inv;
    for (int o = 0; o < f->octaves; o++) {
        uint32_t sd = f->seed + 0x9e3779b9u * (uint32_t)o;
        float v = f->gradient ? tgradient_noise(t, x, y, sd) : tvalue_noise(t, x, y, sd);
        if (f->ridged)
            v = 1.0f - 2.0f * fabsf(v);
        sum += amp * v;
        norm += amp;
        amp *= f->gain;
        float nx = 1.6f * x - 1.2f * y + 17.3f, ny = 1.2f * x + 1.6f * y - 5.1f;
        x = nx;
        y = ny;
    }
    return sum / norm;
}

/* Worley cells: a value per cell in [0, 1) and, in *edge, 0 on a border rising to 1 inside. */
static float cells(float x, float y, float jitter, uint32_t seed, float *edge) {
    float fx = floorf(x), fy = floorf(y);
    int32_t ix = (int32_t)fx, iy = (int32_t)fy;
    float d1 = 1e9f, d2 = 1e9f;
    uint32_t id = 0;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            uint32_t h = hash3(ix + dx, iy + dy, 2, seed);
            float px = (float)(ix + dx) + 0.5f + jitter * 0.5f * hashf(h);
            float py = (float)(iy + dy) + 0.5f + jitter * 0.5f * hashf(h * 0x9e3779b9u + 7u);
            float d = (px - x) * (px - x) + (py - y) * (py - y);
            if (d < d1) {
                d2 = d1;
                d1 = d;
                id = h;
            } else if (d < d2) {
                d2 = d;
            }
        }
    float gap = sqrtf(d2) - sqrtf(d1);
    *edge = clampf(gap / 0.12f, 0.0f, 1.0f);
    return (float)(hash3((int32_t)id, 0, 3, seed) >> 8) / 16777216.0f;
}

/* ---- what a video looks like: drawn without the class ---- */

typedef struct palette {
    float c[NSTOPS][3]; /* 0..255, darkest first */
} palette;

enum { TEX_VALUE, TEX_GRADIENT, TEX_CELLS, TEX_RAMP, TEX_STRIPES, TEX_CHECKER };

typedef struct tex_layer {
    int kind;
    fbm_def f;                 /* noise kinds; a weak warp of the others */
    float contrast, bias;      /* noise value -> palette position */
    float ca, sa;              /* orientation of ramps, stripes, checkers */
    float period;              /* cells, ramps, stripes, checkers: texels */
    float sharp, jitter;       /* stripe/checker edge hardness; cell irregularity */
    float warp;                /* ramps, stripes, checkers: bent by noise, in periods */
    palette pal;
} tex_layer;

typedef struct object_def {
    int rect, pattern;         /* ellipse or rectangle; flat, stripes, rings */
    float a, b;                /* half-axes, screen px */
    float angle0, spin;        /* rad, rad/s */
    float col[2][3];
    float pfreq;               /* pattern, rad per px */
    float x0, y0, vx, vy;      /* screen px, px/s */
} object_def;

typedef struct motion_params {
    noise_tab tab;             /* the world's noise lattice */
    tex_layer tex[2];
    float mix;                 /* weight of the second layer (0: not rendered) */
    fbm_def shade;
    float shade_amp;
    fbm_def detail;            /* fine texture on top of everything (grain of the surface) */
    float detail_amp;
    uint32_t evo_seed;
    float evo_period, evo_amp, evo_rate, evo_col[3];
    /* camera */
    double s_mid;              /* world texels per screen pixel in the middle of a zoom */
    double speed;              /* main motion: half-diagonals per second */
    double theta0, jitter;     /* start orientation; pan direction jitter */
    double mod_m, mod_w;       /* speed profile 1 + m cos(w (t - T/2)) */
    double u, coin;            /* magnification of the non-zoom classes: see camera_at */
    double shake[2][2][3];     /* axis, component: amplitude px, frequency Hz, phase */
    /* lighting and sensor */
    uint32_t light_seed;
    float light_amp, light_scale, light_vx, light_vy, light_evolve;
    float bright_amp, chan_amp[3], drift_freq, drift_phase[4];
    float wb[3], vignette;
    float flicker;
    uint32_t flicker_seed;
    float grain;
    uint32_t grain_seed;
    int nobj;
    object_def obj[MAX_OBJ];
} motion_params;

static float U(vt_rng *r, float a, float b) { return a + (b - a) * (float)vt_rng_uniform(r); }
static float LU(vt_rng *r, float a, float b) { return a * expf(logf(b / a) * (float)vt_rng_uniform(r)); }

void vt_synth_hsv_to_rgb(float *rgb, float h, float s, float v) {
    h -= floorf(h);
    float c = v * s, hp = h * 6.0f, x = c * (1.0f - fabsf(fmodf(hp, 2.0f) - 1.0f)), m = v - c;
    float r = 0, g = 0, b = 0;
    if (hp < 1) { r = c; g = x; }
    else if (hp < 2) { r = x; g = c; }
    else if (hp < 3) { g = c; b = x; }
    else if (hp < 4) { g = x; b = c; }
    else if (hp < 5) { r = x; b = c; }
    else { r = c; b = x; }
    rgb[0] = 255.0f * (r + m);
    rgb[1] = 255.0f * (g + m);
    rgb[2] = 255.0f * (b + m);
}

/* Dark to bright stops around a base hue: close hues (foliage, sand, sky), a
 * complementary pair, or anything. */
static void draw_palette(palette *p, vt_rng *r) {
    float h0 = U(r, 0, 1);
    int scheme = (int)vt_rng_below(r, 3);
    float spread = scheme == 0 ? 0.08f : scheme == 1 ? 0.04f : 0.5f;
    for (int k = 0; k < NSTOPS; k++) {
        float h = h0 + spread * U(r, -1, 1) + (scheme == 1 && (k & 1) ? 0.5f : 0.0f);
        float s = U(r, 0.1f, 0.85f);
        float v = 0.1f + 0.85f * ((float)k + U(r, 0, 1)) / (float)NSTOPS;
        vt_synth_hsv_to_rgb(p->c[k], h, s, v);
    }
}

static void draw_layer(tex_layer *L, vt_rng *r) {
    /* Weights 3:3:2:1:1:1 — mostly photo-like noise, sometimes cells, rarely geometry. */
    static const int kinds[11] = {TEX_VALUE, TEX_VALUE, TEX_VALUE, TEX_GRADIENT, TEX_GRADIENT,
                                  TEX_GRADIENT, TEX_CELLS, TEX_CELLS, TEX_RAMP, TEX_STRIPES,
                                  TEX_CHECKER};
    L->kind = kinds[vt_rng_below(r, 11)];
    L->f.gradient = L->kind == TEX_GRADIENT;
    L->f.ridged = vt_rng_below(r, 4) == 0;
    L->f.octaves = 3 + (int)vt_rng_below(r, 3);
    L->f.period = LU(r, 24, 128);
    /* No octave finer than 2 texels: it would only alias (and cost time). */
    L->f.octaves = VT_MIN(L->f.octaves, 1 + (int)floorf(log2f(L->f.period / 2.0f)));
    L->f.gain = U(r, 0.5f, 0.7f); /* lower, and a frame shows one smooth blob */
    L->f.seed = (uint32_t)vt_rng_u64(r);
    L->contrast = U(r, 0.8f, 1.8f);
    L->bias = U(r, -0.15f, 0.15f);
    float a = U(r, 0, 2.0f * (float)M_PI);
    L->ca = cosf(a);
    L->sa = sinf(a);
    L->period = L->kind == TEX_CELLS ? LU(r, 14, 90) : L->kind == TEX_RAMP ? LU(r, 200, 900)
                                                                        : LU(r, 12, 60);
    L->sharp = LU(r, 1, 8);
    L->jitter = U(r, 0.4f, 1.0f);
    /* Bent like fabric or wood grain: a perfectly periodic pattern matches itself one
     * period away, and would make the motion of a whole video ambiguous. */
    L->warp = U(r, 0.3f, 1.0f);
    draw_palette(&L->pal, r);
}

static void draw_params(motion_params *p, const vt_synth_layout *l, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    memset(p, 0, sizeof *p);
    noise_tab_init(&p->tab, vt_rng_u64(&r));
    float w = (float)l->width, h = (float)l->height;
    float hd = 0.5f * sqrtf(w * w + h * h), mn = VT_MIN(w, h);
    for (int k = 0; k < 2; k++)
        draw_layer(&p->tex[k], &r);
    float second = U(&r, 0, 1), mix = U(&r, 0.15f, 0.6f); /* both drawn: a fixed sequence */
    p->mix = second < 0.35f ? 0.0f : mix;
    p->shade = (fbm_def){.octaves = 3, .period = LU(&r, 60, 300), .gain = 0.5f,
                         .seed = (uint32_t)vt_rng_u64(&r)};
    p->shade_amp = U(&r, 0.08f, 0.4f);
    p->detail = (fbm_def){.octaves = 2, .period = U(&r, 3.0f, 8.0f), .gain = 0.6f,
                          .seed = (uint32_t)vt_rng_u64(&r)};
    p->detail_amp = U(&r, 4, 16);
    p->evo_seed = (uint32_t)vt_rng_u64(&r);
    p->evo_period = LU(&r, 24, 100);
    p->evo_amp = U(&r, 8, 36);
    p->evo_rate = U(&r, 0.15f, 0.6f); /* new noise per second: 1 = a whole new pattern */
    float sign = vt_rng_below(&r, 2) ? 1.0f : -1.0f;
    for (int c = 0; c < 3; c++)
        p->evo_col[c] = sign * U(&r, 0.4f, 1.2f);

    p->s_mid = LU(&r, 1.0f, 1.6f);
    p->speed = LU(&r, 0.03f, 0.2f);
    p->theta0 = U(&r, 0, 2.0f * (float)M_PI);
    p->jitter = U(&r, -1, 1) * 15.0 * M_PI / 180.0;
    p->mod_m = U(&r, -0.4f, 0.4f);
    p->mod_w = U(&r, 0.6f, 2.5f);
    p->u = U(&r, 0, 1);
    p->coin = vt_rng_below(&r, 2) ? 1.0 : -1.0;
    /* Shake on in 60% of videos: two sines per axis whose summed peak velocity is sigma
     * times the main motion's (sigma <= 0.35), so the main motion always dominates. */
    int shake = U(&r, 0, 1) < 0.6f;
    double sigma = U(&r, 0.1f, 0.35f) * shake, v = p->speed * hd;
    for (int ax = 0; ax < 2; ax++) {
        double wsum = 0, wk[2];
        for (int k = 0; k < 2; k++) {
            p->shake[ax][k][1] = U(&r, 0.8f, 3.0f);
            p->shake[ax][k][2] = U(&r, 0, 2.0f * (float)M_PI);
            wk[k] = U(&r, 0.2f, 1.0f);
            wsum += wk[k];
        }
        for (int k = 0; k < 2; k++)
            p->shake[ax][k][0] = sigma * v * wk[k] / (2.0 * M_PI * p->shake[ax][k][1] * wsum);
    }

    p->light_seed = (uint32_t)vt_rng_u64(&r);
    p->light_amp = U(&r, 0, 0.3f);
    p->light_scale = U(&r, 0.3f, 1.2f) * hd;
    float la = U(&r, 0, 2.0f * (float)M_PI), ls = U(&r, 0, 0.25f) * hd;
    p->light_vx = ls * cosf(la);
    p->light_vy = ls * sinf(la);
    p->light_evolve = U(&r, 0.05f, 0.4f);
    p->bright_amp = U(&r, 0, 0.12f);
    for (int c = 0; c < 3; c++)
        p->chan_amp[c] = U(&r, 0, 0.05f);
    p->drift_freq = U(&r, 0.05f, 0.5f);
    for (int k = 0; k < 4; k++)
        p->drift_phase[k] = U(&r, 0, 2.0f * (float)M_PI);
    for (int c = 0; c < 3; c++)
        p->wb[c] = U(&r, 0.88f, 1.12f);
    p->vignette = U(&r, 0, 0.35f);
    int flicker = U(&r, 0, 1) < 0.3f;
    p->flicker = U(&r, 0.01f, 0.06f) * (float)flicker;
    p->flicker_seed = (uint32_t)vt_rng_u64(&r);
    p->grain = U(&r, 0.5f, 5);
    p->grain_seed = (uint32_t)vt_rng_u64(&r);

    p->nobj = (int)vt_rng_below(&r, 4);
    for (int k = 0; k < MAX_OBJ; k++) {
        object_def *o = &p->obj[k];
        o->rect = (int)vt_rng_below(&r, 2);
        o->pattern = (int)vt_rng_below(&r, 3);
        o->a = U(&r, 0.05f, 0.14f) * mn;
        o->b = o->a * U(&r, 0.45f, 1.0f);
        o->angle0 = U(&r, 0, 2.0f * (float)M_PI);
        o->spin = U(&r, -1.2f, 1.2f);
        for (int j = 0; j < 2; j++)
            vt_synth_hsv_to_rgb(o->col[j], U(&r, 0, 1), U(&r, 0.2f, 0.9f), U(&r, 0.3f, 1.0f));
        o->pfreq = U(&r, 0.15f, 0.6f);
        o->x0 = U(&r, 0, w);
        o->y0 = U(&r, 0, h);
        float d = U(&r, 0, 2.0f * (float)M_PI), s = U(&r, 0.02f, 0.35f) * hd;
        o->vx = s * cosf(d);
        o->vy = s * sinf(d);
    }
}

/* ---- the world ---- */

static void palette_at(float *rgb, const palette *p, float t) {
    float x = clampf(t, 0.0f, 1.0f) * (float)(NSTOPS - 1);
    int i = VT_MIN((int)x, NSTOPS - 2);
    float f = x - (float)i;
    for (int c = 0; c < 3; c++)
        rgb[c] = lerpf(p->c[i][c], p->c[i + 1][c], f);
}

static void layer_color(float *rgb, const noise_tab *nt, const tex_layer *L, float X, float Y) {
    float t, shade = 1.0f, u = (X * L->ca + Y * L->sa) / L->period;
    float v = (-X * L->sa + Y * L->ca) / L->period;
    if (L->kind == TEX_RAMP || L->kind == TEX_STRIPES || L->kind == TEX_CHECKER) {
        u += L->warp * fbm(nt, &L->f, X, Y);
        v += L->warp * fbm(nt, &L->f, Y + 1000.5f, X - 700.25f);
    }
    switch (L->kind) {
    case TEX_VALUE:
    case TEX_GRADIENT:
        t = 0.5f + L->contrast * fbm(nt, &L->f, X, Y) + L->bias;
        break;
    case TEX_CELLS: {
        float edge;
        t = cells(X / L->period, Y / L->period, L->jitter, L->f.seed, &edge);
        shade = 0.55f + 0.45f * edge;
        break;
    }
    case TEX_RAMP:
        t = 0.5f + 0.45f * sinf(2.0f * (float)M_PI * u) + 0.15f * L->bias;
        break;
    case TEX_STRIPES:
        t = 0.5f + 0.5f * clampf(L->sharp * sinf(2.0f * (float)M_PI * u), -1.0f, 1.0f);
        break;
    default: /* TEX_CHECKER */
        t = 0.5f + 0.5f * clampf(L->sharp * sinf(2.0f * (float)M_PI * u) *
                                     sinf(2.0f * (float)M_PI * v), -1.0f, 1.0f);
        break;
    }
    palette_at(rgb, &L->pal, t);
    for (int c = 0; c < 3; c++)
        rgb[c] *= shade;
}

/* A world texel's colour (0..255 before clamping); shade is the large-scale shading,
 * interpolated from a coarse grid by the caller. */
static void world_texel(float *out /* (3) */, const motion_params *p, float X, float Y,
                        float shade) {
    float a[3], b[3];
    layer_color(a, &p->tab, &p->tex[0], X, Y);
    if (p->mix > 0) {
        layer_color(b, &p->tab, &p->tex[1], X, Y);
        for (int c = 0; c < 3; c++)
            a[c] = lerpf(a[c], b[c], p->mix);
    }
    float det = p->detail_amp * fbm(&p->tab, &p->detail, X, Y);
    for (int c = 0; c < 3; c++)
        out[c] = a[c] * shade + det;
}

/* A mip level. A texel is one uint64_t holding R, G, B (0..255) in 16-bit lanes (bits
 * 0, 16, 32), so that a bilinear sample is four multiplies by 8-bit weights summing to
 * 256 with no lane overflowing (255 * 256 < 65536). Row-major: a rotated camera walks
 * the world diagonally, but one scanline's rows (a few hundred texels wide) stay in L2. */
typedef struct world_level {
    int w, h;
    uint64_t *data;            /* (h, w) */
} world_level;

#define LANES 0x0000ffff0000ffffull /* lanes 0 and 2 (R, B); G sits in lane 1 */

static inline uint64_t pack_texel(const uint8_t *rgb) {
    return (uint64_t)rgb[0] | (uint64_t)rgb[1] << 16 | (uint64_t)rgb[2] << 32;
}

static void level_alloc(world_level *L, int w, int h) {
    L->w = w;
    L->h = h;
    L->data = vt_calloc((size_t)w * h, sizeof(uint64_t));
}

struct vt_motion_scene {
    vt_synth_layout l;
    int cls;
    motion_params p;
    double hd;                 /* half-diagonal of the frame, px */
    int nlev;
    world_level lev[MAX_LEV];  /* level l texels are 2^l world units */
    double X0, Y0;             /* world position of the corner of texel (0, 0) */
    float *img;                /* (h, w, 3) frame being composed */
    float *vig;                /* (h, w) vignette, fixed */
    float *light;              /* (lgh, lgw) lighting nodes */
    float *evo;                /* (egh, egw) evolving-pattern nodes */
    int lgw, lgh, egw, egh;
    int *lxi, *exi;            /* (w) node left of each pixel column, for each grid */
    float *lxf, *exf;          /* (w) and the fraction */
    float *row, *gtmp;         /* (w) one interpolated grid row; (max(lgw, egw)) scratch */
    float *grain;              /* (GRAIN_N, GRAIN_N, 3) sensor noise, levels */
};

typedef struct camera {
    double cx, cy;             /* world position seen at the frame centre */
    double s, th;              /* world texels per pixel; orientation */
} camera;

/* Time from the middle of the video, warped by the speed profile: odd about T/2. */
static double progress(const motion_params *p, double t, double T) {
    double tm = t - 0.5 * T;
    return tm + p->mod_m / p->mod_w * sin(p->mod_w * tm);
}

/* Screen pixel q (from the centre) sees world point c + s R(th) (q - D), D being the
 * content's displacement on screen: pan + shake. */
static void camera_at(camera *cam, const vt_motion_scene *sc, double t) {
    const motion_params *p = &sc->p;
    double T = (double)(sc->l.frames - 1) / (double)sc->l.fps;
    double pr = sc->p.speed * progress(p, t, T);
    /* The magnification of pans and rotations: what a zoom (either way, by the coin)
     * shows at a uniformly random moment, so frames of every class share one law. */
    double logs = log(p->s_mid) + p->coin * p->speed * progress(p, p->u * T, T);
    double th = p->theta0, dx = 0, dy = 0;
    switch (sc->cls) {
    case CLS_PAN_LEFT:
    case CLS_PAN_RIGHT:
    case CLS_PAN_UP:
    case CLS_PAN_DOWN: {
        static const double dir[4] = {M_PI, 0.0, -0.5 * M_PI, 0.5 * M_PI}; /* y down */
        double a = dir[sc->cls] + p->jitter;
        dx = pr * sc->hd * cos(a);
        dy = pr * sc->hd * sin(a);
        break;
    }
    case CLS_ZOOM_IN:
        logs = log(p->s_mid) - pr; /* fewer texels per pixel: content grows */
        break;
    case CLS_ZOOM_OUT:
        logs = log(p->s_mid) + pr;
        break;
    case CLS_ROTATE_CW:
        th -= pr; /* content angle on screen = world angle - th: grows, clockwise (y down) */
        break;
    default: /* CLS_ROTATE_CCW */
        th += pr;
        break;
    }
    for (int k = 0; k < 2; k++) {
        dx += p->shake[0][k][0] * sin(2.0 * M_PI * p->shake[0][k][1] * t + p->shake[0][k][2]);
        dy += p->shake[1][k][0] * sin(2.0 * M_PI * p->shake[1][k][1] * t + p->shake[1][k][2]);
    }
    double s = exp(logs), c = cos(th), sn = sin(th);
    cam->s = s;
    cam->th = th;
    cam->cx = -s * (c * dx - sn * dy);
    cam->cy = -s * (sn * dx + c * dy);
}

/* The world rectangle every frame's corners fall in, the mip depth the magnification
 * needs, and the texels themselves. */
static void build_world(vt_motion_scene *sc) {
    const motion_params *p = &sc->p;
    double minx = 1e300, miny = 1e300, maxx = -1e300, maxy = -1e300, smax = 0;
    double hw = 0.5 * sc->l.width, hh = 0.5 * sc->l.height;
    for (int f = 0; f < sc->l.frames; f++) {
        camera cam;
        camera_at(&cam, sc, (double)f / sc->l.fps);
        double c = cos(cam.th), sn = sin(cam.th);
        smax = VT_MAX(smax, cam.s);
        for (int k = 0; k < 4; k++) {
            double qx = k & 1 ? hw : -hw, qy = k & 2 ? hh : -hh;
            double X = cam.cx + cam.s * (c * qx - sn * qy), Y = cam.cy + cam.s * (sn * qx + c * qy);
            minx = VT_MIN(minx, X);
            maxx = VT_MAX(maxx, X);
            miny = VT_MIN(miny, Y);
            maxy = VT_MAX(maxy, Y);
        }
    }
    double lam = log2(smax) - 0.5;
    sc->nlev = VT_MIN(MAX_LEV, 1 + (int)ceil(VT_MAX(lam, 0.0)));
    /* Texel grid aligned to multiples of SHADE_GRID (>= the coarsest texel), so that a
     * texel's value — shading nodes and mip averages included — depends on its world
     * position only, never on the extent; a margin for the bilinear taps. */
    double unit = SHADE_GRID, margin = 2.0 * (1 << (sc->nlev - 1)) + 2.0;
    sc->X0 = unit * floor((minx - margin) / unit);
    sc->Y0 = unit * floor((miny - margin) / unit);
    int W = (int)(unit * ceil((maxx + margin - sc->X0) / unit));
    int H = (int)(unit * ceil((maxy + margin - sc->Y0) / unit));
    /* Shading: smooth (periods >= 60 texels), so evaluated every SHADE_GRID texels. */
    int sw = W / SHADE_GRID + 1, sh = H / SHADE_GRID + 1;
    float *shade = vt_malloc((size_t)sw * sh * sizeof(float));
    for (int j = 0; j < sh; j++)
        for (int i = 0; i < sw; i++)
            shade[(size_t)j * sw + i] =
                1.0f + 2.0f * p->shade_amp * fbm(&p->tab, &p->shade, (float)(sc->X0 + i * SHADE_GRID),
                                                 (float)(sc->Y0 + j * SHADE_GRID));
    world_level *L0 = &sc->lev[0];
    level_alloc(L0, W, H);
    for (int j = 0; j < H; j++) {
        float Y = (float)(sc->Y0 + j + 0.5), fy = ((float)j + 0.5f) / SHADE_GRID;
        int gj = (int)fy;
        fy -= (float)gj;
        const float *s0 = shade + (size_t)gj * sw, *s1 = s0 + sw;
        for (int i = 0; i < W; i++) {
            float fx = ((float)i + 0.5f) / SHADE_GRID, rgb[3];
            int gi = (int)fx;
            fx -= (float)gi;
            float shv = lerpf(lerpf(s0[gi], s0[gi + 1], fx), lerpf(s1[gi], s1[gi + 1], fx), fy);
            world_texel(rgb, p, (float)(sc->X0 + i + 0.5), Y, shv);
            uint8_t q[3];
            for (int c = 0; c < 3; c++)
                q[c] = (uint8_t)(rgb[c] <= 0 ? 0 : rgb[c] >= 255 ? 255 : (int)(rgb[c] + 0.5f));
            L0->data[(size_t)j * W + i] = pack_texel(q);
        }
    }
    free(shade);
    for (int l = 1; l < sc->nlev; l++) {
        const world_level *src = &sc->lev[l - 1];
        world_level *dst = &sc->lev[l];
        level_alloc(dst, src->w / 2, src->h / 2);
        for (int j = 0; j < dst->h; j++)
            for (int i = 0; i < dst->w; i++) {
                const uint64_t *a = src->data + (size_t)(2 * j) * src->w + 2 * i, *b = a + src->w;
                /* Lanes hold <= 255, four of them <= 1020 + 2: no carry between lanes. */
                uint64_t sum = a[0] + a[1] + b[0] + b[1] + 0x000200020002ull;
                dst->data[(size_t)j * dst->w + i] = (sum >> 2) & 0x00ff00ff00ffull;
            }
    }
}

static void grid_cols(int **xi, float **xf, int w, int step) {
    *xi = vt_malloc((size_t)w * sizeof(int));
    *xf = vt_malloc((size_t)w * sizeof(float));
    for (int x = 0; x < w; x++) {
        float gx = ((float)x + 0.5f) / (float)step;
        (*xi)[x] = (int)gx;
        (*xf)[x] = gx - (float)(int)gx;
    }
}

vt_motion_scene *vt_motion_scene_init(const vt_synth_layout *l, int cls, uint64_t video_seed) {
    VT_CHECK(cls >= 0 && cls < VT_MOTION_CLASSES, "class %d", cls);
    VT_CHECK(l->width >= 16 && l->height >= 16 && l->fps >= 1 && l->frames >= 1,
             "layout %dx%d, %d fps, %d frames", l->width, l->height, l->fps, l->frames);
    vt_motion_scene *sc = vt_calloc(1, sizeof *sc);
    sc->l = *l;
    sc->cls = cls;
    draw_params(&sc->p, l, video_seed);
    int w = l->width, h = l->height;
    sc->hd = 0.5 * sqrt((double)w * w + (double)h * h);
    build_world(sc);
    sc->img = vt_malloc((size_t)w * h * 3 * sizeof(float));
    sc->vig = vt_malloc((size_t)w * h * sizeof(float));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double qx = x + 0.5 - 0.5 * w, qy = y + 0.5 - 0.5 * h;
            sc->vig[(size_t)y * w + x] =
                (float)(1.0 - sc->p.vignette * (qx * qx + qy * qy) / (sc->hd * sc->hd));
        }
    sc->lgw = w / LIGHT_GRID + 2;
    sc->lgh = h / LIGHT_GRID + 2;
    sc->light = vt_malloc((size_t)sc->lgw * sc->lgh * sizeof(float));
    sc->egw = w / EVO_GRID + 2;
    sc->egh = h / EVO_GRID + 2;
    sc->evo = vt_malloc((size_t)sc->egw * sc->egh * sizeof(float));
    grid_cols(&sc->lxi, &sc->lxf, w, LIGHT_GRID);
    grid_cols(&sc->exi, &sc->exf, w, EVO_GRID);
    sc->row = vt_malloc((size_t)w * sizeof(float));
    sc->gtmp = vt_malloc((size_t)VT_MAX(sc->lgw, sc->egw) * sizeof(float));
    sc->grain = vt_malloc((size_t)GRAIN_N * GRAIN_N * 3 * sizeof(float));
    for (int i = 0; i < GRAIN_N * GRAIN_N * 3; i++) /* uniform, +-grain levels */
        sc->grain[i] = sc->p.grain * hashf(hash3(i, 0, 6, sc->p.grain_seed));
    return sc;
}

void vt_motion_scene_free(vt_motion_scene **sp) {
    vt_motion_scene *sc = *sp;
    if (!sc)
        return;
    for (int l = 0; l < MAX_LEV; l++)
        free(sc->lev[l].data);
    free(sc->img);
    free(sc->vig);
    free(sc->light);
    free(sc->evo);
    free(sc->lxi);
    free(sc->lxf);
    free(sc->exi);
    free(sc->exf);
    free(sc->row);
    free(sc->gtmp);
    free(sc->grain);
    free(sc);
    *sp = NULL;
}

/* Bilinear sample of level L at (fx, fy), 16.16 fixed point in its texel units with
 * texel centres at integers, in lanes: the four texels weighted by 8-bit weights summing
 * to `total` (<= 256). Coordinates outside the level are clamped (the world's margin
 * keeps every frame inside it; this only guards). */
static inline uint64_t sample_lanes(const world_level *L, int32_t fx, int32_t fy, unsigned total) {
    int ix = fx >> 16, iy = fy >> 16;
    unsigned wx = ((unsigned)fx >> 8) & 255, wy = ((unsigned)fy >> 8) & 255;
    if ((unsigned)ix > (unsigned)(L->w - 2) || (unsigned)iy > (unsigned)(L->h - 2)) {
        ix = ix < 0 ? 0 : ix > L->w - 2 ? L->w - 2 : ix;
        iy = iy < 0 ? 0 : iy > L->h - 2 ? L->h - 2 : iy;
    }
    wx = (wx * total) >> 8;
    unsigned w11 = (wx * wy) >> 8, w01 = wx - w11;                  /* right column: wx */
    unsigned w10 = ((total - wx) * wy) >> 8, w00 = total - wx - w10; /* left: total - wx */
    const uint64_t *p = L->data + (size_t)iy * L->w + ix, *q = p + L->w;
    return p[0] * w00 + p[1] * w01 + q[0] * w10 + q[1] * w11;
}

static double bounce(double x, double lo, double hi) {
    double L = hi - lo;
    if (L <= 0)
        return 0.5 * (lo + hi);
    double y = fmod(x - lo, 2.0 * L);
    if (y < 0)
        y += 2.0 * L;
    return lo + (y > L ? 2.0 * L - y : y);
}

static void draw_object(vt_motion_scene *sc, const object_def *o, double t) {
    int w = sc->l.width, h = sc->l.height;
    float R = VT_MAX(o->a, o->b);
    float px = (float)bounce(o->x0 + o->vx * t, 0.0, w), py = (float)bounce(o->y0 + o->vy * t, 0.0, h);
    float ang = o->angle0 + o->spin * (float)t, ca = cosf(ang), sa = sinf(ang);
    float ext = 1.5f * R + 1.0f;
    int x0 = VT_MAX(0, (int)floorf(px - ext)), x1 = VT_MIN(w - 1, (int)ceilf(px + ext));
    int y0 = VT_MAX(0, (int)floorf(py - ext)), y1 = VT_MIN(h - 1, (int)ceilf(py + ext));
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) {
            float dx = (float)x + 0.5f - px, dy = (float)y + 0.5f - py;
            float lx = ca * dx + sa * dy, ly = -sa * dx + ca * dy, d;
            if (o->rect)
                d = VT_MAX(fabsf(lx) - o->a, fabsf(ly) - o->b);
            else
                d = (sqrtf((lx / o->a) * (lx / o->a) + (ly / o->b) * (ly / o->b)) - 1.0f) * o->b;
            float cov = clampf(0.5f - d, 0.0f, 1.0f); /* one-pixel soft edge */
            if (cov <= 0)
                continue;
            float m = o->pattern == 0   ? 0.0f
                    : o->pattern == 1 ? 0.5f + 0.5f * sinf(lx * o->pfreq)
                                      : 0.5f + 0.5f * sinf(sqrtf(lx * lx + ly * ly) * o->pfreq);
            float shade = 1.0f - 0.12f * (lx / o->a + ly / o->b); /* lit from the top left */
            float *pix = sc->img + ((size_t)y * w + x) * 3;
            for (int c = 0; c < 3; c++)
                pix[c] += cov * (lerpf(o->col[0][c], o->col[1][c], m) * shade - pix[c]);
        }
}

/* Row y of a node grid (gh, gw) spaced `step` pixels, bilinearly interpolated into
 * dst (w); xi/xf: each pixel's left node and fraction along x. */
static void grid_row(float *dst, const vt_motion_scene *sc, const float *g, int gw, int step,
                     const int *xi, const float *xf, int y) {
    float gy = ((float)y + 0.5f) / (float)step;
    int j = (int)gy;
    float fy = gy - (float)j;
    const float *n0 = g + (size_t)j * gw, *n1 = n0 + gw;
    float *col = sc->gtmp;
    for (int i = 0; i < gw; i++)
        col[i] = lerpf(n0[i], n1[i], fy);
    for (int x = 0; x < sc->l.width; x++)
        dst[x] = lerpf(col[xi[x]], col[xi[x] + 1], xf[x]);
}

void vt_motion_scene_render(vt_motion_scene *sc, uint8_t *rgb, int frame) {
    const motion_params *p = &sc->p;
    int w = sc->l.width, h = sc->l.height;
    double t = (double)frame / sc->l.fps;
    camera cam;
    camera_at(&cam, sc, t);
    /* Mip level: log2 of texels per pixel, biased half a level towards sharp. */
    double lam = VT_MIN(VT_MAX(log2(cam.s) - 0.5, 0.0), (double)(sc->nlev - 1));
    int l0 = (int)floor(lam);
    float fr = (float)(lam - l0);
    if (l0 >= sc->nlev - 1) {
        l0 = sc->nlev - 1;
        fr = 0;
    }
    float s = (float)cam.s, c = (float)cos(cam.th), sn = (float)sin(cam.th);
    float hw = 0.5f * (float)w, hh = 0.5f * (float)h;

    /* The evolving pattern: 3-D noise at the world position of each node, time its third
     * axis, so it moves with the world and changes while it does. */
    float einv = 1.0f / p->evo_period, ez = p->evo_rate * (float)t;
    for (int j = 0; j < sc->egh; j++)
        for (int i = 0; i < sc->egw; i++) {
            float qx = (float)(i * EVO_GRID) - hw, qy = (float)(j * EVO_GRID) - hh;
            float X = (float)cam.cx + s * (c * qx - sn * qy), Y = (float)cam.cy + s * (sn * qx + c * qy);
            sc->evo[(size_t)j * sc->egw + i] =
                p->evo_amp * 1.6f * tvalue_noise3(&p->tab, X * einv, Y * einv, ez, p->evo_seed);
        }

    /* The world, through one or two mip levels, plus the evolving pattern. Coordinates
     * step along a scanline in 16.16 fixed point (level-l0 texel units, centres at
     * integers); level l0 + 1 is at half of (u + 0.5), minus 0.5. */
    unsigned t0 = (unsigned)lrintf(256.0f * (1.0f - fr)), t1 = 256 - t0;
    const world_level *L0 = &sc->lev[l0], *L1 = &sc->lev[VT_MIN(l0 + 1, sc->nlev - 1)];
    float inv = 1.0f / (float)(1 << l0);
    int32_t dXx = (int32_t)lrintf(65536.0f * s * c * inv), dYx = (int32_t)lrintf(65536.0f * s * sn * inv);
    for (int y = 0; y < h; y++) {
        float qy = (float)y + 0.5f - hh, qx0 = 0.5f - hw;
        double X0 = ((cam.cx - sc->X0) + s * (c * qx0 - sn * qy)) * inv - 0.5;
        double Y0 = ((cam.cy - sc->Y0) + s * (sn * qx0 + c * qy)) * inv - 0.5;
        int32_t fx = (int32_t)lrint(65536.0 * X0), fy = (int32_t)lrint(65536.0 * Y0);
        float *row = sc->img + (size_t)y * w * 3, *erow = sc->row;
        grid_row(erow, sc, sc->evo, sc->egw, EVO_GRID, sc->exi, sc->exf, y);
        for (int x = 0; x < w; x++, fx += dXx, fy += dYx) {
            uint64_t v = sample_lanes(L0, fx, fy, t0);
            if (t1)
                v += sample_lanes(L1, (fx - 32768) >> 1, (fy - 32768) >> 1, t1);
            float e = erow[x];
            /* Through int: converting a uint64_t to float is a slow, branchy sequence. */
            row[3 * x + 0] = (float)(int)(v & 0xffff) * (1.0f / 256.0f) + e * p->evo_col[0];
            row[3 * x + 1] = (float)(int)((v >> 16) & 0xffff) * (1.0f / 256.0f) + e * p->evo_col[1];
            row[3 * x + 2] = (float)(int)((v >> 32) & 0xffff) * (1.0f / 256.0f) + e * p->evo_col[2];
        }
    }
    for (int k = 0; k < p->nobj; k++)
        draw_object(sc, &p->obj[k], t);

    /* Lighting: a coarse grid of 3-D noise drifting across the screen and evolving. */
    float ox = p->light_vx * (float)t, oy = p->light_vy * (float)t, linv = 1.0f / p->light_scale;
    for (int j = 0; j < sc->lgh; j++)
        for (int i = 0; i < sc->lgw; i++)
            sc->light[j * sc->lgw + i] =
                1.0f + p->light_amp * tvalue_noise3(&p->tab, ((float)(i * LIGHT_GRID) + ox) * linv,
                                                    ((float)(j * LIGHT_GRID) + oy) * linv,
                                                    p->light_evolve * (float)t, p->light_seed);
    /* Whole-frame colour and brightness drift, white balance, flicker. */
    float wt = 2.0f * (float)M_PI * p->drift_freq * (float)t, g[3];
    float fl = 1.0f + p->flicker * hashf(hash3(frame, 0, 4, p->flicker_seed));
    float br = 1.0f + p->bright_amp * sinf(wt + p->drift_phase[3]);
    for (int k = 0; k < 3; k++)
        g[k] = p->wb[k] * br * fl * (1.0f + p->chan_amp[k] * sinf(1.3f * wt + p->drift_phase[k]));
    /* Grain: the table read from a new random offset each frame. */
    uint32_t gh = hash3(frame, 1, 5, p->grain_seed);
    int gox = (int)(gh % GRAIN_N), goy = (int)((gh >> 16) % GRAIN_N);
    for (int y = 0; y < h; y++) {
        grid_row(sc->row, sc, sc->light, sc->lgw, LIGHT_GRID, sc->lxi, sc->lxf, y);
        const float *grow = sc->grain + (size_t)((y + goy) % GRAIN_N) * GRAIN_N * 3;
        for (int x = 0; x < w; x++) {
            size_t i = (size_t)y * w + x;
            float gain = sc->row[x] * sc->vig[i];
            const float *gn = grow + ((x + gox) % GRAIN_N) * 3;
            for (int k = 0; k < 3; k++) {
                float val = sc->img[i * 3 + k] * gain * g[k] + gn[k] + 0.5f;
                val = val > 0.0f ? val : 0.0f; /* maxss, minss: no branches, no libm call */
                val = val < 255.0f ? val : 255.0f;
                rgb[i * 3 + k] = (uint8_t)(int)val;
            }
        }
    }
}
