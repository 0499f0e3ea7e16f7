/*
 * synth_motion_world.c: the world a `motion` video's camera sees (synth_motion.c says
 * what it looks like): value, gradient and cellular noise whose texel values depend on
 * the world position only, the texture layers coloured through palettes, and the mip
 * pyramid rendered once per video just large enough for the whole camera path.
 * It must never print and never depend on wall-clock time or threads.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/synth/synth_motion.h"
#include "pipeline/data/synth/synth_motion_impl.h"

void vt_mo_noise_tab_init(noise_tab *t, uint64_t seed) {
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
float vt_mo_value_noise3(const noise_tab *t, float x, float y, float z, uint32_t seed) {
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
static void level_alloc(world_level *L, int w, int h) {
    L->w = w;
    L->h = h;
    L->data = vt_calloc((size_t)w * h, sizeof(uint64_t));
}
/* The mip depth the magnification needs, the world rectangle with margins, and the
 * texels themselves. */
void vt_mo_build_world(vt_motion_scene *sc, const camera_extent *e) {
    const motion_params *p = &sc->p;
    const double minx = e->minx, miny = e->miny, maxx = e->maxx, maxy = e->maxy, smax = e->smax;
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
