/*
 * test_erase.c: random erasing of training clips (pipeline/data/sample.h erase_prob,
 * vt_clip_erase; --random-erase P) against timm's RandomErasing (mode "pixel", one box:
 * probability P, area uniform in [0.02, 1/3] of the image, aspect log-uniform in
 * [0.3, 1/0.3], the box inside the image) and the clip rule (the same box and noise in
 * every frame):
 *   - over 20000 draws: erased in P of them (P = 0.25: 4.5 standard deviations 0.014),
 *     every box inside the crop with its area and aspect in timm's ranges (rounding of
 *     the sides allowed), the mean area near timm's (about 0.175 of the crop);
 *   - the fill: every frame the same, N(0, 1) (mean 0, variance 1 within 4.5 sd);
 *     outside the box nothing changes; the other draws of a clip (start, scale, crop,
 *     flip, colour) are the same with erasing on and off;
 *   - P = 0 draws no box, and a repeat (--repeat-aug) gets a box of its own.
 */
#include <math.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/sample.h"
#include "tests/testutil.h"

int main(void) {
    vt_clip_cfg c;
    vt_clip_cfg_default(&c);
    c.crop = 32;
    c.jitter_min = 36;
    c.jitter_max = 40;
    c.erase_prob = 0.25f;
    const int n = 20000;
    int erased = 0, inside = 1, ranges = 1, same_else = 1;
    double area_sum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t key = vt_sample_key(5, 1, i);
        vt_clip_params p, q;
        vt_sample_train_params(&p, &c, key, 100, 48, 36);
        c.erase_prob = 0;
        vt_sample_train_params(&q, &c, key, 100, 48, 36);
        c.erase_prob = 0.25f;
        same_else &= q.ew == 0 && p.start == q.start && p.x0 == q.x0 && p.y0 == q.y0 &&
                     p.flip == q.flip && p.contrast == q.contrast && p.short_side == q.short_side;
        if (!p.ew)
            continue;
        erased++;
        inside &= p.ex0 >= 0 && p.ey0 >= 0 && p.ex0 + p.ew <= 32 && p.ey0 + p.eh <= 32;
        double a = (double)p.ew * p.eh / (32.0 * 32), r = (double)p.eh / p.ew;
        area_sum += a;
        /* sides are rounded: a side of s carries +-0.5, so area and aspect +-1/s each */
        double slack = 1.0 / VT_MIN(p.ew, p.eh);
        ranges &= a >= 0.02 * (1 - 2 * slack) && a <= (1.0 / 3) * (1 + 2 * slack) &&
                  r >= 0.3 * (1 - 2 * slack) && r <= (1 / 0.3) * (1 + 2 * slack);
    }
    double share = (double)erased / n, mean_area = erased ? area_sum / erased : 0;
    printf("erased %d of %d clips (%.4f, want 0.25); mean box area %.3f of the crop\n", erased,
           n, share, mean_area);
    TCHECK(fabs(share - 0.25) < 0.014, "erased share %g", share);
    TCHECK(inside, "a box outside the crop");
    TCHECK(ranges, "a box outside timm's area or aspect ranges");
    /* timm's mean area: (0.02 + 1/3) / 2 = 0.177 before the boxes that do not fit (the
     * long thin ones, retried): a little below */
    TCHECK(mean_area > 0.14 && mean_area < 0.19, "mean area %g", mean_area);
    TCHECK(same_else, "erasing changed another draw of the clip");

    /* the fill, on a clip of 4 frames */
    vt_clip_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; !p.ew; i++)
        vt_sample_train_params(&p, &c, vt_sample_key(9, 0, i), 100, 48, 36);
    const int t = 4;
    const int64_t plane = 32 * 32, nf = 3 * t * plane;
    float *x = vt_malloc((size_t)nf * 4), *x0 = vt_malloc((size_t)nf * 4);
    for (int64_t e = 0; e < nf; e++)
        x[e] = x0[e] = 7.0f + (float)(e % 13);
    vt_clip_erase(x, t, 32, &p);
    int frames_same = 1, outside_same = 1;
    double s = 0, s2 = 0;
    int cnt = 0;
    for (int ch = 0; ch < 3; ch++)
        for (int y = 0; y < 32; y++)
            for (int xx = 0; xx < 32; xx++) {
                int in = y >= p.ey0 && y < p.ey0 + p.eh && xx >= p.ex0 && xx < p.ex0 + p.ew;
                for (int f = 0; f < t; f++) {
                    int64_t e = (ch * (int64_t)t + f) * plane + y * 32 + xx;
                    int64_t e0 = (int64_t)ch * t * plane + y * 32 + xx;
                    if (in)
                        frames_same &= x[e] == x[e0];
                    else
                        outside_same &= x[e] == x0[e];
                }
                if (in) {
                    float v = x[(int64_t)ch * t * plane + y * 32 + xx];
                    s += v, s2 += (double)v * v, cnt++;
                }
            }
    double m = s / cnt, var = s2 / cnt - m * m;
    printf("fill over %d values: mean %.3f, variance %.3f\n", cnt, m, var);
    TCHECK(frames_same, "the box differs between frames");
    TCHECK(outside_same, "erasing changed a value outside its box");
    /* the mean of cnt N(0,1) has sd 1/sqrt(cnt); the variance's sd is sqrt(2/cnt) */
    TCHECK(fabs(m) < 4.5 / sqrt(cnt) && fabs(var - 1) < 4.5 * sqrt(2.0 / cnt),
           "fill mean %g variance %g over %d", m, var, cnt);

    /* a repeat's box is its own: over many, some differ from the base */
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t key = vt_sample_key(5, 2, i);
        vt_clip_params b, r;
        vt_sample_train_params(&b, &c, key, 100, 48, 36);
        r = b;
        vt_sample_repeat_params(&r, &c, key, 1, 48, 36);
        differ += r.ew != b.ew || r.ex0 != b.ex0 || r.erase_seed != b.erase_seed;
    }
    TCHECK(differ > 50, "repeats take the base clip's box: %d of 200 differ", differ);
    free(x), free(x0);
    return vt_test_done("test_erase");
}
