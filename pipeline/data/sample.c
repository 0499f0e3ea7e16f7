/*
 * sample.c: clip positions, crops, flips, colour jitter and the uint8 -> normalised float
 * transform (with RandAugment's ops, pipeline/data/randaug.h, on training clips).
 *
 * Each function is a pure function of its arguments (randomness comes in as a key
 * built from seed, epoch and sample index), so that tests can pin exact values and a
 * sample is the same whichever thread handles it. It must never decode, nor allocate
 * per clip (vt_clip_transform_aug's buffer is the caller's and grows once).
 */
#include "pipeline/data/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

void vt_clip_cfg_default(vt_clip_cfg *c) {
    memset(c, 0, sizeof *c);
    c->t = 16;
    c->stride = 1;
    c->crop = 112;
    c->short_side = 128;
    c->jitter_min = 128;
    c->jitter_max = 160;
    c->flip = 1;
    c->contrast_min = 1.0f;
    c->brightness = 0.0f;
    c->ncrops = 1;
    /* Kinetics-400 statistics, as torchvision's video models were trained with. */
    const float mean[3] = {0.43216f, 0.394666f, 0.37645f};
    const float std[3] = {0.22803f, 0.22145f, 0.216989f};
    memcpy(c->mean, mean, sizeof mean);
    memcpy(c->std, std, sizeof std);
    c->pad = VT_PAD_LOOP;
}

int vt_clip_set_norm(vt_clip_cfg *c, const char *name) {
    static const struct {
        const char *name;
        float mean[3], std[3];
    } t[] = {
        {"kinetics", {0.43216f, 0.394666f, 0.37645f}, {0.22803f, 0.22145f, 0.216989f}},
        {"pytorchvideo", {0.45f, 0.45f, 0.45f}, {0.225f, 0.225f, 0.225f}},
        {"imagenet", {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}},
    };
    for (size_t i = 0; name && i < VT_ARRAY_LEN(t); i++)
        if (!strcmp(name, t[i].name)) {
            memcpy(c->mean, t[i].mean, sizeof c->mean);
            memcpy(c->std, t[i].std, sizeof c->std);
            return 0;
        }
    return -1;
}

uint64_t vt_sample_key(uint64_t seed, int64_t epoch, int64_t index) {
    /* Nested hashing: each level is a bijection of its input mixed with the next
     * coordinate, so distinct (seed, epoch, index) triples collide only by chance. */
    uint64_t k = vt_hash64(seed);
    k = vt_hash64(k ^ (uint64_t)epoch);
    return vt_hash64(k ^ vt_hash64((uint64_t)index));
}

/* Sub-draw j of a key: independent words for start, scale, x, y, flip, contrast,
 * brightness, stride (0..7), erasing (8), RandAugment's key (9). */
static uint64_t draw(uint64_t key, uint64_t j) { return vt_hash64(key + j * 0xD1B54A32D192ED03ull); }

/* Uniform double in [0, 1) from the top 53 bits of a word. */
static double unit(uint64_t word) { return (double)(word >> 11) * 0x1p-53; }

/* Uniform integer in [0, n) from a 64-bit word (multiply-shift; bias < n / 2^64). */
static int64_t below(uint64_t word, int64_t n) {
    if (n <= 1)
        return 0;
    return (int64_t)(((unsigned __int128)word * (uint64_t)n) >> 64);
}

/* timm's RandomErasing box (sl 0.02, sh 1/3, aspect log-uniform in [0.3, 1/0.3], up to
 * 10 attempts at a box that fits) on the crop, drawn with probability erase_prob; draws
 * 8.. of the key, taken only when erasing is on (the other draws stay as they were). */
static void erase_box(vt_clip_params *p, const vt_clip_cfg *c, uint64_t key) {
    p->ex0 = p->ey0 = p->ew = p->eh = 0;
    p->erase_seed = 0;
    if (!(c->erase_prob > 0) || unit(draw(key, 8)) >= c->erase_prob)
        return;
    const double area = (double)c->crop * c->crop, lr = log(0.3);
    for (uint64_t a = 0; a < 10; a++) {
        uint64_t k = vt_hash64(key ^ (0xE5A5Eull + a));
        double target = area * (0.02 + unit(draw(k, 0)) * (1.0 / 3 - 0.02));
        double aspect = exp(lr + unit(draw(k, 1)) * (-2 * lr));
        int h = (int)lround(sqrt(target * aspect)), w = (int)lround(sqrt(target / aspect));
        if (w < c->crop && h < c->crop) {
            p->ey0 = (int)below(draw(k, 2), c->crop - h + 1);
            p->ex0 = (int)below(draw(k, 3), c->crop - w + 1);
            p->eh = h;
            p->ew = w;
            p->erase_seed = (uint32_t)draw(k, 4);
            return;
        }
    }
}

int vt_sample_train_scale(const vt_clip_cfg *c, uint64_t key) {
    int lo = c->jitter_min, hi = VT_MAX(c->jitter_max, c->jitter_min);
    return lo + (int)below(draw(key, 1), (int64_t)hi - lo + 1);
}

void vt_sample_train_params(vt_clip_params *out, const vt_clip_cfg *c, uint64_t key,
                            int64_t nframes, int w, int h) {
    /* Jitter 0: the cfg's stride, and every other draw as it was before the stride
     * jitter existed. */
    int j = VT_MAX(c->stride_jitter, 0), slo = VT_MAX(1, c->stride - j);
    out->stride = slo + (int)below(draw(key, 7), (int64_t)c->stride + j - slo + 1);
    int64_t span = vt_clip_span_at(c, out->stride);
    out->start = nframes > span ? below(draw(key, 0), nframes - span + 1) : 0;
    out->short_side = vt_sample_train_scale(c, key);
    out->x0 = (int)below(draw(key, 2), (int64_t)VT_MAX(w - c->crop + 1, 1));
    out->y0 = (int)below(draw(key, 3), (int64_t)VT_MAX(h - c->crop + 1, 1));
    out->flip = c->flip ? (int)(draw(key, 4) >> 63) : 0;
    /* The draws are taken whether or not the jitter is on, so that turning it off leaves
     * every other choice of the clip as it was. */
    double uc = unit(draw(key, 5)), ub = unit(draw(key, 6));
    double lo = c->contrast_min > 0 && c->contrast_min < 1 ? c->contrast_min : 1.0;
    out->contrast = (float)exp(log(lo) * (1.0 - uc)); /* log-uniform in [lo, 1] */
    out->brightness = (float)((2.0 * ub - 1.0) * c->brightness);
    erase_box(out, c, key);
    out->ra_key = draw(key, 9) | 1; /* non-zero: "RandAugment applies" when it is on */
}

void vt_sample_repeat_params(vt_clip_params *p, const vt_clip_cfg *c, uint64_t key, int r,
                             int w, int h) {
    if (r <= 0)
        return;
    vt_clip_params q;
    vt_sample_train_params(&q, c, vt_hash64(key ^ ((uint64_t)r * 0x9E3779B97F4A7C15ull)), 1, w, h);
    p->x0 = q.x0;
    p->y0 = q.y0;
    p->flip = q.flip;
    p->contrast = q.contrast;
    p->brightness = q.brightness;
    p->ex0 = q.ex0, p->ey0 = q.ey0, p->ew = q.ew, p->eh = q.eh;
    p->erase_seed = q.erase_seed;
    p->ra_key = q.ra_key;
}

/* ---- segments ---- */

/* First index position in [0, n) whose timestamp in seconds is >= t (n when none): the
 * index is in presentation order, so a binary search. */
static int64_t first_at_or_after(const vt_video *v, int64_t n, double t) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int num, den;
        int64_t ts = vt_video_frame_ts(v, mid, &num, &den);
        if ((double)ts * num / den < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

vt_frame_range vt_sample_segment_frames(const vt_video *v, double start, double end) {
    int64_t n = vt_video_get_info(v)->nframes;
    int64_t a = first_at_or_after(v, n, start), b = first_at_or_after(v, n, end);
    return (vt_frame_range){.first = VT_MIN(a, n), .count = VT_MAX(b - a, 0)};
}

vt_frame_range vt_sample_segment_frames_fps(const vt_video_info *info, double start,
                                            double end) {
    double fps = info->fps > 0 ? info->fps : 25.0;
    /* Frame n is at n / fps: the first at or after t is ceil(t * fps), with a margin of a
     * thousandth of a frame for times written with few decimals (10.0 s at 29.97 fps). */
    int64_t a = (int64_t)ceil(start * fps - 1e-3), b = (int64_t)ceil(end * fps - 1e-3);
    a = VT_MIN(VT_MAX(a, 0), info->nframes);
    b = VT_MIN(VT_MAX(b, 0), info->nframes);
    return (vt_frame_range){.first = a, .count = VT_MAX(b - a, 0)};
}

void vt_sample_range_positions(vt_frame_range r, int64_t start, int t, int stride,
                               vt_pad_policy pad, int64_t *pos) {
    int64_t n = VT_MAX(r.count, 1);
    for (int i = 0; i < t; i++) {
        int64_t p = start - r.first + (int64_t)i * stride;
        if (p >= n)
            p = pad == VT_PAD_REPEAT_LAST ? n - 1 : p % n;
        pos[i] = r.first + p;
    }
}

void vt_clip_cfg_at_fps(vt_clip_cfg *c, double video_fps) {
    if (!(c->fps > 0) || !(video_fps > 0))
        return;
    const double r = video_fps / c->fps;
    c->stride = (int)VT_MAX(1, lround(c->stride * r));
    c->stride_jitter = (int)lround(c->stride_jitter * r);
}

int64_t vt_sample_eval_start(int64_t nframes, int span, int k, int K) {
    if (nframes <= span)
        return 0;
    int64_t room = nframes - span;
    if (K <= 1)
        return room / 2;
    /* round(k * room / (K-1)) in integers: (2*k*room + (K-1)) / (2*(K-1)). */
    return (2 * (int64_t)k * room + (K - 1)) / (2 * (int64_t)(K - 1));
}

void vt_sample_eval_crop(int *x0, int *y0, int w, int h, int crop, int c, int ncrops) {
    int cx = VT_MAX(w - crop, 0) / 2, cy = VT_MAX(h - crop, 0) / 2;
    *x0 = cx;
    *y0 = cy;
    if (ncrops != 3 || c == 1)
        return;
    if (w >= h)
        *x0 = c == 0 ? 0 : VT_MAX(w - crop, 0);
    else
        *y0 = c == 0 ? 0 : VT_MAX(h - crop, 0);
}

void vt_clip_transform(float *out, const uint8_t *in, int t, int h, int w, int x0, int y0,
                       int crop, int flip, const float mean[3], const float std[3]) {
    VT_CHECK(x0 >= 0 && y0 >= 0 && x0 + crop <= w && y0 + crop <= h,
             "crop %d at (%d,%d) outside a %dx%d frame", crop, x0, y0, w, h);
    /* One multiply-add per value: (v/255 - m)/s = v * (1/(255 s)) - m/s. */
    float scale[3], shift[3];
    for (int ch = 0; ch < 3; ch++) {
        scale[ch] = 1.0f / (255.0f * std[ch]);
        shift[ch] = -mean[ch] / std[ch];
    }
    int64_t plane = (int64_t)t * crop * crop;
    for (int f = 0; f < t; f++) {
        for (int y = 0; y < crop; y++) {
            const uint8_t *row = in + (((int64_t)f * h + y0 + y) * w + x0) * 3;
            float *o0 = out + ((int64_t)f * crop + y) * crop;
            float *o1 = o0 + plane, *o2 = o1 + plane;
            for (int x = 0; x < crop; x++) {
                const uint8_t *px = row + 3 * (flip ? crop - 1 - x : x);
                o0[x] = (float)px[0] * scale[0] + shift[0];
                o1[x] = (float)px[1] * scale[1] + shift[1];
                o2[x] = (float)px[2] * scale[2] + shift[2];
            }
        }
    }
}

void vt_clip_transform_aug(float *out, uint8_t **buf, size_t *cap, const uint8_t *in, int h,
                           int w, const vt_clip_params *p, const vt_clip_cfg *cc) {
    if (!p->ra_key || cc->randaug.n <= 0) {
        vt_clip_transform(out, in, cc->t, h, w, p->x0, p->y0, cc->crop, p->flip, cc->mean,
                          cc->std);
        return;
    }
    VT_CHECK(p->x0 >= 0 && p->y0 >= 0 && p->x0 + cc->crop <= w && p->y0 + cc->crop <= h,
             "crop %d at (%d,%d) outside a %dx%d frame", cc->crop, p->x0, p->y0, w, h);
    const int crop = cc->crop, t = cc->t;
    const size_t frame = (size_t)crop * crop * 3, need = frame * (size_t)t * 2;
    if (need > *cap) { /* once per worker: the clip size does not change */
        free(*buf);
        *buf = vt_malloc(need);
        *cap = need;
    }
    uint8_t *clip = *buf, *tmp = *buf + frame * (size_t)t;
    /* crop and flip first, as timm's image pipeline does before RandAugment: the ops see
     * the network's field of view, and a rotation's corners are filled inside it */
    for (int f = 0; f < t; f++)
        for (int y = 0; y < crop; y++) {
            const uint8_t *row = in + (((int64_t)f * h + p->y0 + y) * w + p->x0) * 3;
            uint8_t *o = clip + ((size_t)f * crop + y) * crop * 3;
            for (int x = 0; x < crop; x++)
                memcpy(o + 3 * x, row + 3 * (p->flip ? crop - 1 - x : x), 3);
        }
    vt_randaug_draw d;
    vt_randaug_draw_ops(&d, &cc->randaug, p->ra_key);
    vt_randaug_clip(clip, t, crop, crop, &d, tmp);
    vt_clip_transform(out, clip, t, crop, crop, 0, 0, crop, 0, cc->mean, cc->std);
}

void vt_clip_color(float *x, int t, int crop, float contrast, float brightness,
                   const float std[3]) {
    if (contrast == 1.0f && brightness == 0.0f)
        return;
    int64_t plane = (int64_t)t * crop * crop;
    for (int ch = 0; ch < 3; ch++) {
        float *o = x + ch * plane;
        double sum = 0;
        for (int64_t i = 0; i < plane; i++)
            sum += o[i];
        /* x' = x * contrast + (m * (1 - contrast) + brightness / std): one multiply-add */
        float a = contrast;
        float b = (float)(sum / (double)plane * (1.0 - contrast) + brightness / std[ch]);
        for (int64_t i = 0; i < plane; i++)
            o[i] = o[i] * a + b;
    }
}

void vt_clip_erase(float *x, int t, int crop, const vt_clip_params *p) {
    if (p->ew <= 0 || p->eh <= 0)
        return;
    const int64_t plane = (int64_t)crop * crop;
    for (int ch = 0; ch < 3; ch++)
        for (int y = p->ey0; y < p->ey0 + p->eh; y++)
            for (int xx = p->ex0; xx < p->ex0 + p->ew; xx++) {
                /* N(0, 1) by Box-Muller from two words of (seed, channel, pixel) */
                uint64_t k = vt_hash64(((uint64_t)p->erase_seed << 32) ^
                                       (uint64_t)((ch * plane + (int64_t)y * crop + xx)));
                double u1 = ((double)(k >> 11) + 1) * 0x1p-53, u2 = unit(vt_hash64(k));
                float v = (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
                for (int f = 0; f < t; f++)
                    x[(ch * (int64_t)t + f) * plane + (int64_t)y * crop + xx] = v;
            }
}

int vt_sample_auto_clips(double seconds, double every) {
    if (!(seconds > 0) || !(every > 0))
        return 1; /* unknown duration (NaN too): the integer meaning's default */
    double n = floor(seconds / every + 0.5);
    return n < 1 ? 1 : n > VT_SAMPLE_MAX_AUTO_CLIPS ? VT_SAMPLE_MAX_AUTO_CLIPS : (int)n;
}

vt_frame_range vt_sample_stratum(vt_frame_range r, int span, int k, int n) {
    int64_t room = r.count - span; /* starts 0..room keep the clip inside r */
    if (n <= 1 || room <= 0)
        return r;
    /* starts [lo, hi) of stratum k: floor(k * (room + 1) / n), exact in 128 bits */
    int64_t lo = (int64_t)((__int128)k * (room + 1) / n);
    int64_t hi = (int64_t)((__int128)(k + 1) * (room + 1) / n);
    if (hi <= lo) /* more strata than starts: share one */
        hi = lo + 1;
    return (vt_frame_range){.first = r.first + lo,
                            .count = VT_MIN(hi - lo - 1 + span, r.count - lo)};
}

void vt_sample_shuffle(int32_t *perm, int64_t n, uint64_t seed, int64_t epoch) {
    vt_rng r;
    vt_rng_seed(&r, vt_sample_key(seed, epoch, -1));
    for (int64_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = below(vt_rng_u64(&r), i + 1);
        int32_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
    }
}
