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
 * Single frames carry no class: every random number is drawn by vt_mo_draw_params, which never
 * sees the class; the class only chooses which camera parameter the motion drives. The
 * motion is centred on the middle of the video with a speed profile symmetric about it,
 * so over the frames of a video the magnification and orientation are distributed alike
 * in every class: pans and rotations keep the magnification a zoom would have at a random
 * moment, and every class starts at a uniformly random orientation. The main motion's
 * speed is one number for every class — the speed of the content at the frame's
 * half-diagonal, log-uniform in 0.03..0.2 half-diagonals per second — and shake, when on,
 * peaks below 35% of it.
 *
 * Split: synth_motion_draw.c draws a video's parameters, synth_motion_world.c its
 * world; this file holds the scene, the camera and the frames.
 *
 * These files must never print and never depend on wall-clock time or threads: the same
 * seed gives the same pixels.
 */
#include "pipeline/data/synth/synth_motion.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/synth/synth_motion_impl.h"

const char *const vt_motion_class_names[VT_MOTION_CLASSES] = {
    "pan_left", "pan_right", "pan_up", "pan_down", "zoom_in", "zoom_out", "rotate_cw", "rotate_ccw",
};

enum {
    CLS_PAN_LEFT, CLS_PAN_RIGHT, CLS_PAN_UP, CLS_PAN_DOWN,
    CLS_ZOOM_IN, CLS_ZOOM_OUT, CLS_ROTATE_CW, CLS_ROTATE_CCW,
};

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

/* The world rectangle every frame's corners fall in, and the largest magnification. */
static camera_extent path_extent(const vt_motion_scene *sc) {
    camera_extent e = {1e300, 1e300, -1e300, -1e300, 0};
    double hw = 0.5 * sc->l.width, hh = 0.5 * sc->l.height;
    for (int f = 0; f < sc->l.frames; f++) {
        camera cam;
        camera_at(&cam, sc, (double)f / sc->l.fps);
        double c = cos(cam.th), sn = sin(cam.th);
        e.smax = VT_MAX(e.smax, cam.s);
        for (int k = 0; k < 4; k++) {
            double qx = k & 1 ? hw : -hw, qy = k & 2 ? hh : -hh;
            double X = cam.cx + cam.s * (c * qx - sn * qy), Y = cam.cy + cam.s * (sn * qx + c * qy);
            e.minx = VT_MIN(e.minx, X);
            e.maxx = VT_MAX(e.maxx, X);
            e.miny = VT_MIN(e.miny, Y);
            e.maxy = VT_MAX(e.maxy, Y);
        }
    }
    return e;
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
    vt_mo_draw_params(&sc->p, l, video_seed);
    int w = l->width, h = l->height;
    sc->hd = 0.5 * sqrt((double)w * w + (double)h * h);
    camera_extent ext = path_extent(sc);
    vt_mo_build_world(sc, &ext);
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
                p->evo_amp * 1.6f * vt_mo_value_noise3(&p->tab, X * einv, Y * einv, ez, p->evo_seed);
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
                1.0f + p->light_amp * vt_mo_value_noise3(&p->tab, ((float)(i * LIGHT_GRID) + ox) * linv,
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
