/*
 * synth_motion_impl.h: the inside of the `motion` preset's renderer, shared by
 * synth_motion.c (scene, camera, frames), synth_motion_draw.c (a video's parameters) and
 * synth_motion_world.c (noise and the pre-rendered world). Nothing else includes it.
 */
#ifndef VT_SYNTH_MOTION_IMPL_H
#define VT_SYNTH_MOTION_IMPL_H

#include <math.h>
#include <stdint.h>

#include "base/common.h"
#include "pipeline/data/synth/synth_motion.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

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

/* Fractal sum of octaves, each at twice the frequency and turned by 37 degrees (the
 * lattice of value noise would otherwise show as horizontal and vertical streaks). */
typedef struct fbm_def {
    int gradient, ridged, octaves;
    float period, gain; /* period of the first octave in texels; amplitude ratio */
    uint32_t seed;
} fbm_def;

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

/* ---- across the files ---- */

/* What the camera path sees over the whole video (synth_motion.c measures it, so that
 * the world never asks the camera: the files call one way): the world rectangle every
 * frame's corners fall in, and the largest magnification. */
typedef struct camera_extent {
    double minx, miny, maxx, maxy, smax;
} camera_extent;

/* synth_motion_world.c: the per-video lattice; 3-D value noise (a 2-D field evolving
 * along z); the world rectangle, mip depth and texels for the camera path's extent. */
void vt_mo_noise_tab_init(noise_tab *t, uint64_t seed);
float vt_mo_value_noise3(const noise_tab *t, float x, float y, float z, uint32_t seed);
void vt_mo_build_world(vt_motion_scene *sc, const camera_extent *e);

/* synth_motion_draw.c: every random number of a video, drawn without its class. */
void vt_mo_draw_params(motion_params *p, const vt_synth_layout *l, uint64_t seed);

#endif
