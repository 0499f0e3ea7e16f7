/*
 * synth_motion_draw.c: every random number of a `motion` video — appearance, camera path,
 * lighting, sensor, objects — drawn from its seed alone. The class is never seen here
 * (synth_motion.c explains why single frames must not carry it); it only picks which
 * camera parameter the motion drives.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/synth/synth_motion.h"
#include "pipeline/data/synth/synth_motion_impl.h"

/* ---- what a video looks like: drawn without the class ---- */

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

void vt_mo_draw_params(motion_params *p, const vt_synth_layout *l, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    memset(p, 0, sizeof *p);
    vt_mo_noise_tab_init(&p->tab, vt_rng_u64(&r));
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
