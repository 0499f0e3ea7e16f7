/*
 * test_sampling.c: training clips are drawn as intended — through the real loader, on
 * real encoded videos (`vidtrain synth`), over many epochs. Each batch says where every
 * clip came from (vt_batch.where); the test checks, over 200 epochs x 8 videos x 2 clips:
 *   - the start frame is uniform over [0, frames - span] (chi-square), the short side
 *     uniform over the jitter range, the crop origin uniform over the room the scaled
 *     frame leaves, flip a fair coin (and never with --no-flip), the contrast factor
 *     log-uniform in [contrast_min, 1] and the brightness uniform in [-b, b];
 *   - the draws are fresh each epoch (a video's start in epoch e and e+1 agree no more
 *     often than chance) and per clip (a video's two clips of one epoch likewise), and
 *     start, scale, crop and flip are uncorrelated;
 *   - every clip's pixels are those draws: decoding the video at that start and short
 *     side, cropping and flipping there, reproduces the batch row bit for bit, and each
 *     channel of it is the plain transform moved toward its clip mean by the contrast and
 *     shifted by the brightness (computed here in double);
 *   - evaluation never jitters: an evaluation loader with the same settings delivers the
 *     plain transform and says contrast 1, brightness 0;
 *   - the stride jitter (stride 2 +- 1): the stride uniform over {1, 2, 3}, the start
 *     uniform over [0, frames - span] for the span of the stride drawn, fresh each epoch,
 *     the pixels those frames; off (jitter 0), every clip is the one drawn without it;
 *     evaluation keeps the stride.
 * The bounds are 5 standard deviations (or the chi-square mean + 5 sd): a fair sampler
 * fails one with probability ~1e-6, a sampler that reuses draws, drops a range or leaks
 * the epoch is off by tens of deviations.
 */
#include <math.h>

#include "base/common.h"
#include "pipeline/data/loader.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define EPOCHS 200
#define PER 2     /* clips per video per epoch */
#define MAXV 16

typedef struct draw {
    int start, ss, x0, y0, flip;
    double lc, br;    /* log(contrast) / log(contrast_min) in [0, 1]; brightness / b */
    int wroom, hroom; /* scaled size - crop: the crop origin's range is 0..room */
    double xr;        /* x0 / wroom, in [0, 1] (correlations) */
} draw;

/* Largest difference between the batch row got and the plain transform row moved per
 * channel as vt_clip_color says, computed in double. */
static double color_check(const float *row, const float *got, const vt_clip_params *p,
                          const float std[3]) {
    const int64_t plane = 4 * 32 * 32;
    double worst = 0;
    for (int ch = 0; ch < 3; ch++) {
        double mean = 0;
        for (int64_t i = 0; i < plane; i++)
            mean += row[ch * plane + i];
        mean /= plane;
        for (int64_t i = 0; i < plane; i++) {
            double want = mean + (row[ch * plane + i] - mean) * p->contrast + p->brightness / std[ch];
            worst = fmax(worst, fabs(want - got[ch * plane + i]));
        }
    }
    return worst;
}

/* The clip p names, decoded and transformed independently of the loader (no colour):
 * a seek and a decode of its frames at its short side, then the crop and flip. raw grows
 * to the largest frame stack seen. */
static void plain_clip(float *row, vt_video *v, const vt_clip_params *p, const vt_clip_cfg *cc,
                       uint8_t **raw, int64_t *maxpix) {
    char err[1024];
    int w, h;
    vt_video_scaled_size(v, p->short_side, &w, &h);
    int64_t need = (int64_t)4 * w * h * 3;
    if (need > *maxpix) {
        free(*raw);
        *raw = vt_malloc((size_t)need);
        *maxpix = need;
    }
    VT_CHECK(vt_video_read_clip(v, *raw, p->start, 4, p->stride, p->short_side, cc->pad, err,
                                sizeof err) == 0, "%s", err);
    vt_clip_transform(row, *raw, 4, h, w, p->x0, p->y0, 32, p->flip, cc->mean, cc->std);
}

/* chi-square of counts against the uniform over k bins */
static double chi2(const int *cnt, int k, int n) {
    double e = (double)n / k, c = 0;
    for (int i = 0; i < k; i++)
        c += (cnt[i] - e) * (cnt[i] - e) / e;
    return c;
}

/* chi-square with df degrees of freedom under its mean + 5 sd */
static void check_chi2(const char *what, double c, int df) {
    double bound = df + 5 * sqrt(2.0 * df);
    printf("  %-12s chi-square %.1f, %d degrees of freedom (bound %.1f)\n", what, c, df, bound);
    TCHECK(c < bound, "%s: chi-square %.1f with %d degrees of freedom, bound %.1f", what, c, df,
           bound);
}

static void check_uniform(const char *what, const int *cnt, int k, int n) {
    check_chi2(what, chi2(cnt, k, n), k - 1);
}

/* The crop origin is uniform over 0..room, where room = scaled size - crop depends on the
 * short side drawn: one chi-square per short side, summed (degrees of freedom add up). */
static void check_crop(const char *what, const draw *d, int m, int horizontal) {
    double c = 0;
    int df = 0;
    for (int ss = 37; ss <= 46; ss++) {
        int cnt[64] = {0}, n = 0, room = -1;
        for (int i = 0; i < m; i++) {
            if (d[i].ss != ss)
                continue;
            int o = horizontal ? d[i].x0 : d[i].y0;
            room = horizontal ? d[i].wroom : d[i].hroom;
            if (o >= 0 && o < 64)
                cnt[o]++;
            n++;
        }
        if (n == 0 || room < 1 || room >= 64)
            continue;
        c += chi2(cnt, room + 1, n);
        df += room;
    }
    check_chi2(what, c, df);
}

static double corr(const double *a, const double *b, int n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= n;
    mb /= n;
    for (int i = 0; i < n; i++) {
        sab += (a[i] - ma) * (b[i] - mb);
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : 0;
}

int main(void) {
    const char *bin = vt_test_bin("test_sampling");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], data[4200], err[512];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("sampling"));
    /* 8 videos of 40 frames, 96x72 */
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 4 --val 0 --test 0 --frames 40 "
                         "--no-h264") == 0, "synth");
    snprintf(data, sizeof data, "%s/data", dir);
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    VT_CHECK(ds, "%s", err);
    VT_CHECK(ds->nvideos == 8 && ds->nvideos <= MAXV, "%d videos", ds->nvideos);

    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.clip.t = 4;
    c.clip.stride = 2;        /* span 7: starts 0..33 */
    c.clip.crop = 32;
    c.clip.short_side = 37;
    c.clip.jitter_min = 37;
    c.clip.jitter_max = 46;   /* 10 sizes */
    c.clip.contrast_min = 0.4f; /* `vidtrain train`'s defaults */
    c.clip.brightness = 0.1f;
    c.batch = 6;
    c.workers = 2;
    c.clips_per_video = PER;
    const int span = vt_clip_span(&c.clip), nstart = 40 - span + 1, nss = 10;
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    VT_CHECK(l, "%s", err);

    const int n = EPOCHS * 8 * PER;
    draw *d = vt_calloc((size_t)n, sizeof *d);
    static draw by[EPOCHS][MAXV][PER]; /* by epoch, video, its k-th clip that epoch */
    static int seen[EPOCHS][MAXV];
    int m = 0, checked = 0, mismatched = 0;
    double color_err = 0;
    int64_t maxpix = 0;
    uint8_t *raw = NULL;
    float *row = vt_malloc(sizeof(float) * 3 * 4 * 32 * 32);
    vt_video *vids[MAXV] = {0};
    for (int e = 0; e < EPOCHS; e++) {
        if (e)
            vt_loader_start_epoch(l, e, 0);
        const vt_batch *b;
        while ((b = vt_loader_next(l)) != NULL) {
            for (int i = 0; i < b->n && m < n; i++, m++) {
                const vt_clip_params *p = &b->where[i];
                int v = b->video[i];
                TCHECK(p->stride == 2, "no stride jitter asked, stride %d drawn", p->stride);
                if (!vids[v])
                    VT_CHECK(vt_video_open(&vids[v], ds->videos[v].path, 1, err, sizeof err) == 0,
                             "%s", err);
                int w, h;
                vt_video_scaled_size(vids[v], p->short_side, &w, &h);
                draw *q = &d[m];
                *q = (draw){(int)p->start, p->short_side, p->x0, p->y0, p->flip,
                            log(p->contrast) / log(0.4), p->brightness / 0.1, w - 32, h - 32,
                            w > 32 ? (double)p->x0 / (w - 32) : 0};
                TCHECK(p->x0 >= 0 && p->x0 + 32 <= w && p->y0 >= 0 && p->y0 + 32 <= h,
                       "crop (%d,%d) outside %dx%d", p->x0, p->y0, w, h);
                if (seen[e][v] < PER)
                    by[e][v][seen[e][v]] = *q;
                seen[e][v]++;
                /* The pixels are the draws: decode, crop and flip independently. Every
                 * 7th clip: each is a seek and a decode. */
                if (m % 7 == 0) {
                    plain_clip(row, vids[v], p, &c.clip, &raw, &maxpix);
                    const float *got = b->x + (int64_t)i * vt_batch_clip_floats(b);
                    color_err = fmax(color_err, color_check(row, got, p, c.clip.std));
                    vt_clip_color(row, 4, 32, p->contrast, p->brightness, c.clip.std);
                    checked++;
                    mismatched += memcmp(row, got, sizeof(float) * 3 * 4 * 32 * 32) != 0;
                }
            }
        }
    }
    vt_loader_free(&l);
    TCHECK(m == n, "%d clips delivered, want %d", m, n);
    TCHECK(checked > 400 && mismatched == 0, "%d of %d clips differ from their draws", mismatched,
           checked);
    printf("sampling: %d clips over %d epochs; %d re-decoded, identical\n", m, EPOCHS, checked);
    /* vt_clip_color works in float with the channel mean summed in double: values of a few
     * units carry float rounding of ~1e-6; a wrong factor, mean or shift is off by 1e-2+ */
    printf("  colour jitter against double: max error %.2e (bound 1e-5)\n", color_err);
    TCHECK(color_err < 1e-5, "colour jitter off by %.2e from m + (x - m) c + b / std", color_err);

    /* Marginals. */
    int cs[64] = {0}, css[16] = {0}, clc[10] = {0}, cbr[10] = {0}, flips = 0;
    for (int i = 0; i < m; i++) {
        TCHECK(d[i].start >= 0 && d[i].start < nstart, "start %d", d[i].start);
        TCHECK(d[i].ss >= 37 && d[i].ss <= 46, "short side %d", d[i].ss);
        if (d[i].start >= 0 && d[i].start < nstart)
            cs[d[i].start]++;
        if (d[i].ss >= 37 && d[i].ss <= 46)
            css[d[i].ss - 37]++;
        flips += d[i].flip;
        TCHECK(d[i].lc >= 0 && d[i].lc <= 1 && fabs(d[i].br) <= 1, "contrast %g, brightness %g",
               exp(d[i].lc * log(0.4)), 0.1 * d[i].br);
        clc[VT_MIN((int)(d[i].lc * 10), 9)]++;
        cbr[VT_MIN((int)((d[i].br + 1) * 5), 9)]++;
    }
    check_uniform("contrast", clc, 10, m);    /* log-uniform: log c uniform */
    check_uniform("brightness", cbr, 10, m);
    check_uniform("start", cs, nstart, m);
    check_uniform("short side", css, nss, m);
    check_crop("crop x", d, m, 1);
    check_crop("crop y", d, m, 0);
    double sd = sqrt(0.25 / m);
    printf("  flip         %.4f (0.5 +- %.4f)\n", (double)flips / m, 5 * sd);
    TCHECK(fabs((double)flips / m - 0.5) < 5 * sd, "flip rate %.4f", (double)flips / m);

    /* Fresh per epoch and per clip: same start as chance, 1/nstart. */
    int same_epoch = 0, pairs_epoch = 0, same_clip = 0, pairs_clip = 0;
    for (int e = 0; e < EPOCHS; e++)
        for (int v = 0; v < 8; v++) {
            TCHECK(seen[e][v] == PER, "epoch %d video %d: %d clips", e, v, seen[e][v]);
            same_clip += by[e][v][0].start == by[e][v][1].start;
            pairs_clip++;
            if (e + 1 < EPOCHS) {
                same_epoch += by[e][v][0].start == by[e + 1][v][0].start;
                pairs_epoch++;
            }
        }
    double pe = 1.0 / nstart;
    double lim_e = pairs_epoch * pe + 5 * sqrt(pairs_epoch * pe * (1 - pe));
    double lim_c = pairs_clip * pe + 5 * sqrt(pairs_clip * pe * (1 - pe));
    printf("  same start, next epoch: %d of %d (chance %.1f); same epoch, other clip: %d of %d\n",
           same_epoch, pairs_epoch, pairs_epoch * pe, same_clip, pairs_clip);
    TCHECK(same_epoch < lim_e, "a video's start repeats across epochs %d times (chance %.1f)",
           same_epoch, pairs_epoch * pe);
    TCHECK(same_clip < lim_c, "a video's two clips share a start %d times (chance %.1f)",
           same_clip, pairs_clip * pe);

    /* Independent fields: |r| < 5 / sqrt(n) for independent draws. */
    double *a = vt_malloc(sizeof(double) * (size_t)m), *bb = vt_malloc(sizeof(double) * (size_t)m);
    double *cc = vt_malloc(sizeof(double) * (size_t)m), *dd = vt_malloc(sizeof(double) * (size_t)m);
    double *nx = vt_malloc(sizeof(double) * (size_t)m);
    double *lc = vt_malloc(sizeof(double) * (size_t)m), *br = vt_malloc(sizeof(double) * (size_t)m);
    for (int i = 0; i < m; i++) {
        a[i] = d[i].start;
        bb[i] = d[i].ss;
        cc[i] = d[i].xr;
        dd[i] = d[i].flip;
        nx[i] = i + 1 < m ? d[i + 1].start : d[0].start;
        lc[i] = d[i].lc;
        br[i] = d[i].br;
    }
    const double lim = 5 / sqrt((double)m);
    const struct { const char *what; const double *u, *v; } pairs[] = {
        {"start/scale", a, bb}, {"start/crop x", a, cc}, {"start/flip", a, dd},
        {"scale/crop x", bb, cc}, {"crop x/flip", cc, dd}, {"start/next clip's start", a, nx},
        {"start/contrast", a, lc}, {"contrast/brightness", lc, br}, {"flip/contrast", dd, lc},
        {"scale/brightness", bb, br},
    };
    for (size_t i = 0; i < VT_ARRAY_LEN(pairs); i++) {
        double r = corr(pairs[i].u, pairs[i].v, m);
        TCHECK(fabs(r) < lim, "%s correlate: r = %.4f (bound %.4f)", pairs[i].what, r, lim);
    }
    printf("  correlations between fields all under %.4f\n", lim);
    free(a);
    free(bb);
    free(cc);
    free(dd);
    free(nx);
    free(lc);
    free(br);

    /* --no-flip: never flipped. */
    c.clip.flip = 0;
    c.clips_per_video = 1;
    l = vt_loader_init(ds, &c, err, sizeof err);
    VT_CHECK(l, "%s", err);
    int nf = 0, tot = 0;
    for (int e = 0; e < 20; e++) {
        if (e)
            vt_loader_start_epoch(l, e, 0);
        const vt_batch *b;
        while ((b = vt_loader_next(l)) != NULL)
            for (int i = 0; i < b->n; i++, tot++)
                nf += b->where[i].flip;
    }
    vt_loader_free(&l);
    TCHECK(tot == 160 && nf == 0, "no flip: %d of %d clips flipped", nf, tot);

    /* Evaluation never jitters, whatever the clip settings say. */
    c.mode = VT_LOADER_EVAL;
    c.clips_per_video = 2;
    l = vt_loader_init(ds, &c, err, sizeof err);
    VT_CHECK(l, "%s", err);
    int ne = 0, eval_bad = 0;
    const vt_batch *eb;
    while ((eb = vt_loader_next(l)) != NULL)
        for (int i = 0; i < eb->n; i++, ne++) {
            const vt_clip_params *p = &eb->where[i];
            eval_bad += p->contrast != 1.0f || p->brightness != 0.0f;
            plain_clip(row, vids[eb->video[i]], p, &c.clip, &raw, &maxpix);
            eval_bad += memcmp(row, eb->x + (int64_t)i * vt_batch_clip_floats(eb),
                               sizeof(float) * 3 * 4 * 32 * 32) != 0;
        }
    vt_loader_free(&l);
    TCHECK(ne == 16 && eval_bad == 0, "evaluation: %d of %d clips jittered", eval_bad, ne);
    printf("  evaluation: %d clips, none jittered\n", ne);

    /* The stride jitter. Jitter 0 (above) gave every clip stride 2; with jitter 1 the
     * stride is uniform over {1, 2, 3} and the start uniform over what that stride's span
     * leaves: one chi-square per stride, summed. */
    c.mode = VT_LOADER_TRAIN;
    c.clips_per_video = 1;
    c.clip.stride_jitter = 1;
    enum { SJ_EPOCHS = 150 };
    l = vt_loader_init(ds, &c, err, sizeof err);
    VT_CHECK(l, "%s", err);
    int cstr[3] = {0}, cst[3][40] = {{0}}, sj = 0, sj_checked = 0, sj_bad = 0, same_stride = 0;
    static int last_stride[MAXV];
    for (int e = 0; e < SJ_EPOCHS; e++) {
        if (e)
            vt_loader_start_epoch(l, e, 0);
        const vt_batch *b;
        while ((b = vt_loader_next(l)) != NULL)
            for (int i = 0; i < b->n; i++, sj++) {
                const vt_clip_params *p = &b->where[i];
                int v = b->video[i], k = p->stride - 1;
                TCHECK(k >= 0 && k < 3, "stride %d drawn, want 1..3", p->stride);
                if (k < 0 || k >= 3)
                    continue;
                int room = 40 - (3 * p->stride + 1); /* 4 frames: span 3 * stride + 1 */
                TCHECK(p->start >= 0 && p->start <= room, "stride %d: start %lld past %d",
                       p->stride, (long long)p->start, room);
                cstr[k]++;
                if (p->start >= 0 && p->start <= room)
                    cst[k][p->start]++;
                if (e)
                    same_stride += last_stride[v] == p->stride;
                last_stride[v] = p->stride;
                if (sj % 5 == 0) { /* the pixels: those frames, decoded apart */
                    plain_clip(row, vids[v], p, &c.clip, &raw, &maxpix);
                    vt_clip_color(row, 4, 32, p->contrast, p->brightness, c.clip.std);
                    sj_checked++;
                    sj_bad += memcmp(row, b->x + (int64_t)i * vt_batch_clip_floats(b),
                                     sizeof(float) * 3 * 4 * 32 * 32) != 0;
                }
            }
    }
    vt_loader_free(&l);
    TCHECK(sj == SJ_EPOCHS * 8 && sj_bad == 0, "stride jitter: %d of %d clips differ from "
           "their draws (%d clips)", sj_bad, sj_checked, sj);
    check_uniform("stride", cstr, 3, sj);
    double cstart = 0;
    int dfstart = 0;
    for (int k = 0; k < 3; k++) {
        int nroom = 40 - (3 * (k + 1) + 1) + 1;
        cstart += chi2(cst[k], nroom, cstr[k]);
        dfstart += nroom - 1;
    }
    check_chi2("start|stride", cstart, dfstart);
    /* Fresh each epoch: a video keeps its stride with chance 1/3. */
    int spairs = (SJ_EPOCHS - 1) * 8;
    double slim = spairs / 3.0 + 5 * sqrt(spairs * (1 / 3.0) * (2 / 3.0));
    printf("  stride jitter: %d clips, %d re-decoded, identical; same stride next epoch %d of "
           "%d (chance %.0f)\n", sj, sj_checked, same_stride, spairs, spairs / 3.0);
    TCHECK(same_stride < slim, "a video's stride repeats across epochs %d of %d times",
           same_stride, spairs);

    /* Evaluation keeps the configured stride. */
    c.mode = VT_LOADER_EVAL;
    c.clips_per_video = 2;
    l = vt_loader_init(ds, &c, err, sizeof err);
    VT_CHECK(l, "%s", err);
    int ev_stride_bad = 0;
    while ((eb = vt_loader_next(l)) != NULL)
        for (int i = 0; i < eb->n; i++)
            ev_stride_bad += eb->where[i].stride != 2;
    vt_loader_free(&l);
    TCHECK(ev_stride_bad == 0, "evaluation: %d clips at another stride than 2", ev_stride_bad);

    for (int v = 0; v < MAXV; v++)
        vt_video_close(&vids[v]);
    free(raw);
    free(row);
    free(d);
    vt_dataset_free(&ds);
    return vt_test_done("test_sampling");
}
