/*
 * test_synth.c: `vidtrain synth` writes real videos that the ffmpeg command decodes
 * (ffprobe frame counts), in the documented layout; the same seed gives identical bytes and
 * another seed different ones; and the classes differ by motion only: single-frame
 * statistics are the same in every class (a nearest-mean classifier on them is at chance)
 * while the displacement between two decoded frames names the class.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/synth/synth.h"
/* Paths and commands are built with snprintf into fixed buffers; GCC -O2 warns that a
 * 4096-byte path could be truncated. snprintf truncates safely and test paths are short. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/apputil.h"

static const char *splits[3] = {"train", "val", "test"};
static const int per_split[3] = {2, 1, 1};
#define NCLS 4
#define W 64
#define H 48
#define FRAMES 12

/* The one file DIR/split/class/class_idx.* (any extension), or "" */
static void find_video(char *out, size_t n, const char *dir, int sp, int c, int i) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "ls %s/%s/%s/%s_%04d.* 2>/dev/null", dir, splits[sp],
             vt_synth_class_name(c), vt_synth_class_name(c), i);
    out[0] = 0;
    FILE *p = popen(cmd, "r");
    if (p) {
        if (fgets(out, (int)n, p))
            out[strcspn(out, "\n")] = 0;
        pclose(p);
    }
}

/* Frames 0 and 2 as gray through the ffmpeg command. */
static int ffmpeg_gray(uint8_t *out /* (2, H, W) */, const char *file) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "ffmpeg -nostdin -v error -i '%s' -vf 'select=eq(n\\,0)+eq(n\\,2)' -fps_mode "
             "passthrough -f rawvideo -pix_fmt gray -", file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t got = fread(out, 1, 2 * W * H, p);
    pclose(p);
    return got == 2 * W * H ? 0 : -1;
}

/* Displacement from a to b: the shift d minimising |b(p) - a(p - d)| over the pixels that
 * changed (static background excluded, so it does not pull d to 0); wraps like the shapes. */
static void estimate_shift(int *dx, int *dy, const uint8_t *a, const uint8_t *b) {
    double best = 1e30;
    *dx = *dy = 0;
    for (int sy = -7; sy <= 7; sy++)
        for (int sx = -7; sx <= 7; sx++) {
            double e = 0;
            int cnt = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    int p = y * W + x;
                    if (abs((int)b[p] - (int)a[p]) <= 30)
                        continue;
                    int qx = ((x - sx) % W + W) % W, qy = ((y - sy) % H + H) % H;
                    e += abs((int)b[p] - (int)a[qy * W + qx]);
                    cnt++;
                }
            if (cnt && e / cnt < best) {
                best = e / cnt;
                *dx = sx;
                *dy = sy;
            }
        }
}

static void test_files(const char *bin, const char *dir) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' synth '%s' --classes %d --train 2 --val 1 --test 1 --frames %d --size %dx%d "
             "--seed 7 > '%s.log' 2>&1",
             bin, dir, NCLS, FRAMES, W, H, dir);
    TCHECK(vt_test_sh("%s", cmd) == 0, "vidtrain synth failed: see %s.log", dir);
    int right = 0, total = 0;
    uint8_t gray[2 * W * H];
    for (int sp = 0; sp < 3; sp++)
        for (int c = 0; c < NCLS; c++)
            for (int i = 0; i < per_split[sp]; i++) {
                char f[4096];
                find_video(f, sizeof f, dir, sp, c, i);
                TCHECK(f[0], "%s/%s: video %d missing", splits[sp], vt_synth_class_name(c), i);
                if (!f[0])
                    continue;
                int64_t n = vt_test_ffprobe_frames(f);
                TCHECK(n == FRAMES, "%s: ffprobe counts %lld frames, want %d", f, (long long)n,
                       FRAMES);
                if (ffmpeg_gray(gray, f) != 0) {
                    TCHECK(0, "%s: ffmpeg cannot decode frames 0 and 2", f);
                    continue;
                }
                int dx, dy;
                estimate_shift(&dx, &dy, gray, gray + W * H);
                int ok = c == 0 ? (dx < 0 && abs(dx) > abs(dy))
                       : c == 1 ? (dx > 0 && abs(dx) > abs(dy))
                       : c == 2 ? (dy < 0 && abs(dy) > abs(dx))
                                : (dy > 0 && abs(dy) > abs(dx));
                right += ok;
                total++;
                if (!ok)
                    printf("  %s: shift (%d, %d) does not match %s\n", f, dx, dy,
                           vt_synth_class_name(c));
            }
    /* Motion names the class: every video, decoded by ffmpeg, moves its way. */
    TCHECK(total == NCLS * 4 && right == total, "motion direction right in %d of %d videos", right,
           total);
    printf("  motion from two decoded frames: %d of %d videos in their class's direction\n", right,
           total);
}

static void test_determinism(const char *bin, const char *d1) {
    char d2[4096], d3[4096], cmd[16384];
    snprintf(d2, sizeof d2, "%s2", d1);
    snprintf(d3, sizeof d3, "%s3", d1);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' '%s' && '%s' synth '%s' --classes %d --train 2 --val 1 --test 1 "
             "--frames %d --size %dx%d --seed 7 >/dev/null 2>&1 && '%s' synth '%s' --classes %d "
             "--train 2 --val 1 --test 1 --frames %d --size %dx%d --seed 8 >/dev/null 2>&1",
             d2, d3, bin, d2, NCLS, FRAMES, W, H, bin, d3, NCLS, FRAMES, W, H);
    TCHECK(vt_test_sh("%s", cmd) == 0, "second synth run failed");
    snprintf(cmd, sizeof cmd, "diff -r -q '%s' '%s' >/dev/null", d1, d2);
    TCHECK(vt_test_sh("%s", cmd) == 0, "same seed must give byte-identical files (%s vs %s)", d1, d2);
    snprintf(cmd, sizeof cmd, "diff -r -q '%s' '%s' | grep -c differ > '%s.ndiff'", d1, d3, d3);
    (void)vt_test_sh("%s", cmd); /* grep -c exits 1 when it counts 0: the count is checked below */
    snprintf(cmd, sizeof cmd, "%s.ndiff", d3);
    FILE *f = fopen(cmd, "r");
    int ndiff = 0;
    if (f) {
        if (fscanf(f, "%d", &ndiff) != 1)
            ndiff = 0;
        fclose(f);
    }
    TCHECK(ndiff == NCLS * 4, "another seed must change every file (%d of %d differ)", ndiff,
           NCLS * 4);
}

/* Single-frame features per video: mean R, G, B, fraction of bright pixels, and the mean
 * distance of bright pixels from the centre (where shapes sit). */
#define NFEAT 5
static void frame_features(double *feat, const uint8_t *rgb, int w, int h) {
    double s[3] = {0}, nb = 0, rd = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            int mx = p[0] > p[1] ? p[0] : p[1];
            mx = mx > p[2] ? mx : p[2];
            for (int c = 0; c < 3; c++)
                s[c] += p[c];
            if (mx > 185) { /* shapes have value >= 0.85*255; background stays below */
                nb++;
                rd += sqrt((x - w / 2.0) * (x - w / 2.0) + (y - h / 2.0) * (y - h / 2.0));
            }
        }
    for (int c = 0; c < 3; c++)
        feat[c] = s[c] / (w * h);
    feat[3] = nb / (w * h);
    feat[4] = nb > 0 ? rd / nb : 0;
}

static void test_single_frame_stats(void) {
    vt_synth_opts o;
    vt_synth_defaults(&o);
    o.classes = 8;
    enum { PER = 60 };
    int w = o.width, h = o.height;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    static double feat[8][PER][NFEAT];
    for (int c = 0; c < 8; c++)
        for (int i = 0; i < PER; i++) {
            vt_synth_render(rgb, &o, c, vt_synth_video_seed(&o, "stats", c, i), 7);
            frame_features(feat[c][i], rgb, w, h);
        }
    /* Per-feature standardisation over all frames. */
    double mu[NFEAT] = {0}, sd[NFEAT] = {0};
    for (int k = 0; k < NFEAT; k++) {
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < PER; i++)
                mu[k] += feat[c][i][k];
        mu[k] /= 8 * PER;
        for (int c = 0; c < 8; c++)
            for (int i = 0; i < PER; i++)
                sd[k] += (feat[c][i][k] - mu[k]) * (feat[c][i][k] - mu[k]);
        sd[k] = sqrt(sd[k] / (8 * PER - 1)) + 1e-9;
    }
    /* Class means of the mean colour: within 4 standard errors of the grand mean (a
     * class-dependent appearance would sit far outside; 4 SE keeps 8x3 comparisons from
     * failing by chance). */
    for (int c = 0; c < 8; c++)
        for (int k = 0; k < 3; k++) {
            double m = 0;
            for (int i = 0; i < PER; i++)
                m += feat[c][i][k];
            m /= PER;
            TCHECK(fabs(m - mu[k]) < 4 * sd[k] / sqrt(PER),
                   "class %s channel %d mean %.2f vs %.2f (se %.2f)", vt_synth_class_name(c), k, m,
                   mu[k], sd[k] / sqrt(PER));
        }
    /* Nearest class mean on all single-frame features, fit on half, tested on the other
     * half: chance is 1/8 = 12.5%; 25% is > 5 standard errors of chance with 240 tests. */
    double cm[8][NFEAT] = {{0}};
    for (int c = 0; c < 8; c++)
        for (int i = 0; i < PER / 2; i++)
            for (int k = 0; k < NFEAT; k++)
                cm[c][k] += (feat[c][i][k] - mu[k]) / sd[k] / (PER / 2);
    int right = 0, n = 0;
    for (int c = 0; c < 8; c++)
        for (int i = PER / 2; i < PER; i++) {
            int best = 0;
            double bd = 1e30;
            for (int j = 0; j < 8; j++) {
                double d = 0;
                for (int k = 0; k < NFEAT; k++) {
                    double z = (feat[c][i][k] - mu[k]) / sd[k] - cm[j][k];
                    d += z * z;
                }
                if (d < bd) {
                    bd = d;
                    best = j;
                }
            }
            right += best == c;
            n++;
        }
    double acc = (double)right / n;
    printf("  single-frame nearest-mean accuracy over 8 classes: %.3f (chance 0.125)\n", acc);
    TCHECK(acc < 0.25, "single frames reveal the class: accuracy %.3f", acc);
    free(rgb);
}

int main(void) {
    const char *bin = vt_test_bin("test_synth");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/set", vt_test_dir("synth"));
    test_files(bin, dir);
    test_determinism(bin, dir);
    test_single_frame_stats();
    return vt_test_done("test_synth");
}
