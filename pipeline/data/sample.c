/*
 * sample.c: clip positions, crops, flips, colour jitter and the uint8 -> normalised float
 * transform.
 *
 * Each function is a pure function of its arguments (randomness comes in as a key
 * built from seed, epoch and sample index), so that tests can pin exact values and a
 * sample is the same whichever thread handles it. It must never decode or allocate.
 */
#include "pipeline/data/sample.h"

#include <math.h>
#include <string.h>

#include "models/common.h"

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

uint64_t vt_sample_key(uint64_t seed, int64_t epoch, int64_t index) {
    /* Nested hashing: each level is a bijection of its input mixed with the next
     * coordinate, so distinct (seed, epoch, index) triples collide only by chance. */
    uint64_t k = vt_hash64(seed);
    k = vt_hash64(k ^ (uint64_t)epoch);
    return vt_hash64(k ^ vt_hash64((uint64_t)index));
}

/* Sub-draw j of a key: independent words for start, scale, x, y, flip, contrast,
 * brightness, stride. */
static uint64_t draw(uint64_t key, uint64_t j) { return vt_hash64(key + j * 0xD1B54A32D192ED03ull); }

/* Uniform double in [0, 1) from the top 53 bits of a word. */
static double unit(uint64_t word) { return (double)(word >> 11) * 0x1p-53; }

/* Uniform integer in [0, n) from a 64-bit word (multiply-shift; bias < n / 2^64). */
static int64_t below(uint64_t word, int64_t n) {
    if (n <= 1)
        return 0;
    return (int64_t)(((unsigned __int128)word * (uint64_t)n) >> 64);
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
