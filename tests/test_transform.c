/*
 * test_transform.c: the clip transform (crop, flip, mean/std, channel-first layout) on
 * known arrays, the evaluation clip and crop positions, and the determinism and ranges
 * of the per-sample random parameters.
 *
 * The expected values are computed here independently, in double precision, from the
 * definition out[c][t][y][x] = (in[t][y0+y][x0+x'][c] / 255 - mean[c]) / std[c].
 */
#include "base/common.h"
#include "pipeline/data/sample.h"
#include "tests/testutil.h"

static uint8_t pixel(int f, int y, int x, int c) { return (uint8_t)((f * 71 + y * 13 + x * 7 + c * 101) % 256); }

static void test_transform_values(void) {
    enum { T = 3, H = 6, W = 9, CROP = 4 };
    uint8_t in[T * H * W * 3];
    for (int f = 0; f < T; f++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++)
                for (int c = 0; c < 3; c++)
                    in[((f * H + y) * W + x) * 3 + c] = pixel(f, y, x, c);
    const float mean[3] = {0.43216f, 0.394666f, 0.37645f};
    const float std[3] = {0.22803f, 0.22145f, 0.216989f};
    float out[3 * T * CROP * CROP];
    for (int flip = 0; flip < 2; flip++) {
        const int x0 = 3, y0 = 1;
        vt_clip_transform(out, in, T, H, W, x0, y0, CROP, flip, mean, std);
        double maxerr = 0;
        int placed = 1;
        for (int c = 0; c < 3; c++)
            for (int f = 0; f < T; f++)
                for (int y = 0; y < CROP; y++)
                    for (int x = 0; x < CROP; x++) {
                        int sx = x0 + (flip ? CROP - 1 - x : x);
                        double v = pixel(f, y0 + y, sx, c);
                        double want = (v / 255.0 - mean[c]) / std[c];
                        float got = out[((c * T + f) * CROP + y) * CROP + x];
                        maxerr = fmax(maxerr, fabs(got - want));
                        /* the source pixel is recoverable exactly: the error below is
                         * 1e-6, far under half a grey level (0.5/255/0.22 = 0.009) */
                        placed &= (int)lrint((got * std[c] + mean[c]) * 255.0) == (int)v;
                    }
        /* Values lie in [-2, 2.7]; one float multiply-add with pre-rounded scale and shift
         * errs by a few ulps (ulp(2.7) = 2.4e-7), so 2e-6 is ~8 ulps. */
        TCHECK(maxerr < 2e-6, "flip %d: max error %g", flip, maxerr);
        TCHECK(placed, "flip %d: every output value comes from the expected pixel", flip);
    }
    /* Flip is a mirror of the unflipped crop. */
    float a[3 * T * CROP * CROP], b[3 * T * CROP * CROP];
    vt_clip_transform(a, in, T, H, W, 2, 2, CROP, 0, mean, std);
    vt_clip_transform(b, in, T, H, W, 2, 2, CROP, 1, mean, std);
    int mirror = 1;
    for (int r = 0; r < 3 * T * CROP; r++)
        for (int x = 0; x < CROP; x++)
            mirror &= a[r * CROP + x] == b[r * CROP + CROP - 1 - x];
    TCHECK(mirror, "flip mirrors each row bit-exactly");

    /* mean 0, std 1: out = v / 255 (to a float rounding), exact at 0 and 255. */
    const float zero[3] = {0, 0, 0}, one[3] = {1, 1, 1};
    uint8_t px[4 * 3] = {0, 255, 128, 1, 2, 3, 255, 0, 0, 10, 20, 30};
    float o[3 * 4];
    vt_clip_transform(o, px, 1, 2, 2, 0, 0, 2, 0, zero, one);
    TCHECK(o[0] == 0.0f && o[4] == 1.0f && fabsf(o[8] - 128.0f / 255.0f) < 1e-7f,
           "R plane %g %g %g", o[0], o[4], o[8]);
    TCHECK(fabsf(o[1] - 1.0f / 255.0f) < 1e-9f, "R of pixel 1"); /* 1/255 = 0.0039: 1e-9 is ~4 ulps */
    TCHECK(fabsf(o[3 + 4] - 20.0f / 255.0f) < 1e-7f, "G of pixel (1,1)");
}

static void test_eval_positions(void) {
    /* 100 frames, span 16, 5 clips: room 84 -> 0, 21, 42, 63, 84 (last ends on frame 99). */
    const int64_t want5[] = {0, 21, 42, 63, 84};
    for (int k = 0; k < 5; k++)
        TCHECK(vt_sample_eval_start(100, 16, k, 5) == want5[k], "k=%d: %lld", k,
               (long long)vt_sample_eval_start(100, 16, k, 5));
    /* room 10, K 4: 0, 3.33, 6.67, 10 rounded -> 0, 3, 7, 10 */
    const int64_t want4[] = {0, 3, 7, 10};
    for (int k = 0; k < 4; k++)
        TCHECK(vt_sample_eval_start(25, 15, k, 4) == want4[k], "K4 k=%d", k);
    TCHECK(vt_sample_eval_start(100, 16, 0, 1) == 42, "one clip: the centre");
    TCHECK(vt_sample_eval_start(10, 16, 2, 3) == 0, "short video: 0 (padded)");
    TCHECK(vt_sample_eval_start(16, 16, 2, 3) == 0, "exactly the span");

    int x, y;
    /* 170x128 (landscape), crop 112: centre (29, 8); 3 crops along x: 0, 29, 58. */
    vt_sample_eval_crop(&x, &y, 170, 128, 112, 0, 1);
    TCHECK(x == 29 && y == 8, "centre %d %d", x, y);
    const int wx[] = {0, 29, 58};
    for (int c = 0; c < 3; c++) {
        vt_sample_eval_crop(&x, &y, 170, 128, 112, c, 3);
        TCHECK(x == wx[c] && y == 8, "landscape crop %d: %d %d", c, x, y);
        vt_sample_eval_crop(&x, &y, 128, 170, 112, c, 3);
        TCHECK(y == wx[c] && x == 8, "portrait crop %d: %d %d", c, x, y);
    }
}

static void test_train_params(void) {
    vt_clip_cfg c;
    vt_clip_cfg_default(&c);
    c.t = 8;
    c.stride = 2; /* span 15 */
    const int64_t nframes = 40;
    int seen_lo = 0, seen_hi = 0, flips = 0, start_lo = 0, start_hi = 0, x_lo = 0, x_hi = 0;
    int ok = 1, same = 1;
    for (int64_t i = 0; i < 4000; i++) {
        uint64_t key = vt_sample_key(7, 3, i);
        TCHECK(key == vt_sample_key(7, 3, i), "key is a pure function");
        int ss = vt_sample_train_scale(&c, key);
        int w = ss * 4 / 3, h = ss;
        vt_clip_params p, q;
        memset(&p, 0, sizeof p); /* the padding too: compared with memcmp */
        memset(&q, 0, sizeof q);
        vt_sample_train_params(&p, &c, key, nframes, w, h);
        vt_sample_train_params(&q, &c, key, nframes, w, h);
        same &= !memcmp(&p, &q, sizeof p);
        ok &= p.stride == 2 && p.short_side == ss && ss >= 128 && ss <= 160 && p.start >= 0 && p.start <= 40 - 15 &&
              p.x0 >= 0 && p.x0 + 112 <= w && p.y0 >= 0 && p.y0 + 112 <= h;
        seen_lo |= ss == 128;
        seen_hi |= ss == 160;
        start_lo |= p.start == 0;
        start_hi |= p.start == 25;
        x_lo |= p.x0 == 0;
        x_hi |= p.x0 + 112 == w;
        flips += p.flip;
    }
    TCHECK(ok, "every parameter in range");
    TCHECK(same, "same key, same parameters");
    /* 4000 draws from 33 scales / 26 starts: each end is hit with probability > 1 - 1e-50 */
    TCHECK(seen_lo && seen_hi && start_lo && start_hi && x_lo, "the ends of each range are drawn");
    (void)x_hi;
    /* Binomial(4000, 1/2): sd 32; +-200 is > 6 sd. */
    TCHECK(flips > 1800 && flips < 2200, "flips %d of 4000", flips);
    c.flip = 0;
    int noflip = 0;
    for (int64_t i = 0; i < 200; i++) {
        vt_clip_params p;
        vt_sample_train_params(&p, &c, vt_sample_key(7, 3, i), nframes, 150, 128);
        noflip += p.flip;
    }
    TCHECK(noflip == 0, "--no-flip never flips");
    /* The stride jitter changes the stride and the start only, and a clip whose jittered
     * stride is the configured one is the clip drawn without the jitter. */
    int sj_ok = 1, kept = 0, seen[4] = {0};
    for (int64_t i = 0; i < 600; i++) {
        uint64_t key = vt_sample_key(7, 3, i);
        vt_clip_params p0, p1;
        memset(&p0, 0, sizeof p0); /* the padding too: compared with memcmp */
        memset(&p1, 0, sizeof p1);
        c.stride_jitter = 0;
        vt_sample_train_params(&p0, &c, key, nframes, 150, 128);
        c.stride_jitter = 1;
        vt_sample_train_params(&p1, &c, key, nframes, 150, 128);
        sj_ok &= p1.stride >= 1 && p1.stride <= 3 && p1.start >= 0 &&
                 p1.start <= nframes - (7 * p1.stride + 1) && p1.short_side == p0.short_side &&
                 p1.x0 == p0.x0 && p1.y0 == p0.y0 && p1.flip == p0.flip &&
                 p1.contrast == p0.contrast && p1.brightness == p0.brightness;
        if (p1.stride == 2) {
            sj_ok &= !memcmp(&p0, &p1, sizeof p0);
            kept++;
        }
        seen[VT_MIN(VT_MAX(p1.stride, 0), 3)]++;
    }
    c.stride_jitter = 0;
    /* 600 draws over 3 strides: each about 200, sd 12 */
    TCHECK(sj_ok && seen[0] == 0 && seen[1] > 120 && seen[2] > 120 && seen[3] > 120 && kept,
           "stride jitter: strides 1/2/3 drawn %d/%d/%d times; only stride and start move",
           seen[1], seen[2], seen[3]);
    /* A video shorter than the span starts at 0 (padding policy fills the rest). */
    vt_clip_params p;
    vt_sample_train_params(&p, &c, vt_sample_key(1, 1, 1), 5, 150, 128);
    TCHECK(p.start == 0, "short video starts at 0");
    /* Different seed / epoch / index give different keys. */
    TCHECK(vt_sample_key(7, 3, 5) != vt_sample_key(8, 3, 5) &&
               vt_sample_key(7, 3, 5) != vt_sample_key(7, 4, 5) &&
               vt_sample_key(7, 3, 5) != vt_sample_key(7, 3, 6), "keys differ");

    /* Shuffle: a permutation, same for the same (seed, epoch), different otherwise. */
    enum { N = 1000 };
    static int32_t a[N], b[N], d[N];
    vt_sample_shuffle(a, N, 42, 0);
    vt_sample_shuffle(b, N, 42, 0);
    vt_sample_shuffle(d, N, 42, 1);
    static int hit[N];
    int perm = 1, moved = 0;
    for (int i = 0; i < N; i++) {
        perm &= a[i] >= 0 && a[i] < N && !hit[a[i]];
        if (a[i] >= 0 && a[i] < N)
            hit[a[i]] = 1;
        moved += a[i] != i;
    }
    TCHECK(perm, "shuffle is a permutation");
    TCHECK(!memcmp(a, b, sizeof a), "same seed and epoch, same order");
    TCHECK(memcmp(a, d, sizeof a) != 0, "another epoch, another order");
    /* a random permutation of 1000 has ~1 fixed point; 990+ moved is > 6 sd */
    TCHECK(moved > 990, "shuffled: %d moved", moved);
}

int main(void) {
    test_transform_values();
    test_eval_positions();
    test_train_params();
    return vt_test_done("test_transform");
}
