/*
 * test_clips_auto.c: long videos in training and evaluation.
 *
 * 1. --clips-per-video auto (pipeline/data/loader_clips.c, app/train/train_clips.c): each
 *    video's clips an epoch against the rule applied to ffprobe's duration (the outside
 *    truth), the epoch's sample count, every video drawn exactly its count of times, draw
 *    k of n inside stratum k (so the draws of one epoch spread over the video), the same
 *    epoch list from a loader with other worker counts (what every tower and rank rebuilds
 *    from the seed), and `vidtrain train --clips-per-video auto` end to end: its line, its
 *    steps an epoch, config.json, --clips-per-video N switching auto off.
 * 2. Evaluation clips spread over the whole video: K clips of a long video start at its
 *    first frame and end on its last, evenly between (vt_sample_eval_start over the
 *    sample's frames).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/loader.h"
#include "tests/apputil.h"
#include "tests/testutil.h"

#define EVERY 5.0
static const char *g_dir;

/* (relative path, seconds) of the set: 10 fps, 80x60 */
static const struct { const char *rel; int seconds; } k_videos[] = {
    {"a/one.mp4", 1}, {"a/twelve.mp4", 12}, {"b/four.mp4", 4}, {"b/twentysix.mp4", 26},
};
#define NV 4

static void small_clip(vt_clip_cfg *c) {
    vt_clip_cfg_default(c);
    c->t = 4;
    c->stride = 2;
    c->crop = 32;
    c->short_side = 40;
    c->jitter_min = c->jitter_max = 40;
}

static void auto_counts(vt_dataset *ds) {
    int32_t counts[NV];
    int64_t sum = vt_loader_auto_clips(counts, ds, EVERY, NULL, -1);
    int64_t want_sum = 0;
    for (int v = 0; v < ds->nvideos; v++) {
        double d = vt_test_ffprobe_duration(ds->videos[v].path);
        /* the rule on ffprobe's duration: nearest integer of d / 5, at least 1 */
        int want = (int)fmax(1, floor(d / EVERY + 0.5));
        TCHECK(counts[v] == want, "%s (%.2f s): %d clips, %d by the rule", ds->videos[v].relpath,
               d, counts[v], want);
        want_sum += want;
    }
    TCHECK(sum == want_sum && sum == 1 + 2 + 1 + 5, "sum %lld", (long long)sum);

    /* an epoch: each video its count, each draw in its stratum */
    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.batch = 3;
    c.workers = 2;
    c.seed = 11;
    c.video_clips = counts;
    small_clip(&c.clip);
    char err[512];
    int64_t seen[NV] = {0}, starts[64], videos[64], n = 0;
    for (int run = 0; run < 2; run++) {
        c.workers = run ? 1 : 2; /* the list is the seed's, not the threads' */
        vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
        TCHECK(l != NULL, "loader: %s", err);
        if (!l)
            return;
        TCHECK(vt_loader_num_samples(l) == sum, "epoch of %lld samples, %lld expected",
               (long long)vt_loader_num_samples(l), (long long)sum);
        int64_t i = 0;
        for (const vt_batch *b; (b = vt_loader_next(l)) != NULL;) {
            for (int r = 0; r < b->n; r++, i++) {
                int v = b->video[r], k = b->clip[r], cnt = counts[v];
                int64_t start = b->where[r].start, nf = ds->videos[v].info.nframes;
                if (run == 0) {
                    seen[v]++;
                    starts[n] = start;
                    videos[n++] = v;
                    /* stratum k of the starts 0..nf-span: [k(room+1)/n, (k+1)(room+1)/n) */
                    int64_t room = nf - vt_clip_span(&c.clip);
                    int64_t lo = k * (room + 1) / cnt, hi = (k + 1) * (room + 1) / cnt;
                    TCHECK(k >= 0 && k < cnt && start >= lo && start < VT_MAX(hi, lo + 1),
                           "%s draw %d of %d starts at %lld, outside [%lld, %lld)",
                           ds->videos[v].relpath, k, cnt, (long long)start, (long long)lo,
                           (long long)hi);
                } else {
                    TCHECK(i < n && starts[i] == start && videos[i] == v,
                           "sample %lld differs with 1 worker", (long long)i);
                }
            }
        }
        vt_loader_free(&l);
    }
    for (int v = 0; v < NV; v++)
        TCHECK(seen[v] == counts[v], "%s drawn %lld times, count %d", ds->videos[v].relpath,
               (long long)seen[v], counts[v]);
    /* the rule's edges */
    TCHECK(vt_sample_auto_clips(0, 5) == 1 && vt_sample_auto_clips(NAN, 5) == 1,
           "unknown duration: 1");
    TCHECK(vt_sample_auto_clips(3600, 10) == 360 && vt_sample_auto_clips(14.9, 10) == 1 &&
           vt_sample_auto_clips(15, 10) == 2, "rounding");
    TCHECK(vt_sample_auto_clips(1e12, 1) == VT_SAMPLE_MAX_AUTO_CLIPS, "capped");
}

/* 2. K evaluation clips of the 26 s video: first frame to last frame */
static void eval_spread(vt_dataset *ds) {
    int v = -1;
    for (int i = 0; i < ds->nvideos; i++)
        if (strstr(ds->videos[i].relpath, "twentysix"))
            v = i;
    TCHECK(v >= 0, "the long video");
    if (v < 0)
        return;
    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.mode = VT_LOADER_EVAL;
    c.batch = 8;
    c.workers = 1;
    c.clips_per_video = 5;
    small_clip(&c.clip);
    int32_t idx[1] = {v};
    c.indices = idx;
    c.nindices = 1;
    char err[512];
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "eval loader: %s", err);
    if (!l)
        return;
    const vt_batch *b = vt_loader_next(l);
    int64_t nf = ds->videos[v].info.nframes, span = vt_clip_span(&c.clip);
    TCHECK(b && b->n == 5, "5 clips");
    for (int k = 0; b && k < b->n; k++) {
        /* evenly from 0 to nf - span: gaps of (nf - span) / 4, rounded */
        int64_t want = llround((double)k * (double)(nf - span) / 4);
        TCHECK(b->where[k].start == want, "clip %d starts at %lld, %lld expected", k,
               (long long)b->where[k].start, (long long)want);
    }
    TCHECK(b && b->where[4].start + span - 1 == nf - 1, "the last clip ends on the last frame");
    TCHECK(nf >= 250, "%lld frames: a 26 s video at 10 fps", (long long)nf);
    vt_loader_free(&l);
}

static void train_e2e(const char *bin) {
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 4x32 --stride 2 "
                        "--batch 3 --epochs 1 --val-split 0 --workers 1 "
                        "--clips-per-video auto --seconds-per-clip 5 --precise-bn 0 > "
                        "'%s/train.log' 2>&1", bin, g_dir, g_dir, g_dir);
    TCHECK(rc == 0, "train exit %d (see %s/train.log)", rc, g_dir);
    rc = vt_test_sh("grep -q 'clips per video: auto, one per 5 s: 9 clips an epoch from 4 videos "
                    "(1 to 5 a video)' '%s/train.log'", g_dir);
    TCHECK(rc == 0, "the auto line in train.log");
    /* 9 clips in batches of 3 */
    rc = vt_test_sh("grep -q 'training: 4 videos, 3 batches of 3 per epoch' '%s/train.log'", g_dir);
    TCHECK(rc == 0, "3 steps an epoch");
    char p[4300];
    snprintf(p, sizeof p, "%s/run/config.json", g_dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *s = cJSON_GetObjectItem(j, "seconds_per_clip");
    TCHECK(cJSON_IsNumber(s) && s->valuedouble == 5, "config.json seconds_per_clip");
    cJSON_Delete(j);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run2' --model tiny --clip 4x32 --batch 3 "
                    "--epochs 1 --val-split 0 --workers 1 --clips-per-video auto "
                    "--clips-per-video 2 --max-steps 1 > '%s/train2.log' 2>&1 && grep -q "
                    "'training: 4 videos, 3 batches of 3' '%s/train2.log' && ! grep -q "
                    "'clips per video: auto' '%s/train2.log'", bin, g_dir, g_dir, g_dir, g_dir,
                    g_dir);
    TCHECK(rc == 0, "--clips-per-video 2 after auto: 8 clips, 3 batches, no auto");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run3' --clips-per-video often 2> /dev/null",
                    bin, g_dir, g_dir);
    TCHECK(rc == 2, "--clips-per-video often: usage error, exit %d", rc);
}

int main(void) {
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("clips_auto"));
    g_dir = dir;
    for (int i = 0; i < NV; i++) {
        int rc = vt_test_sh("mkdir -p '%s/data/a' '%s/data/b' && ffmpeg -v error -y -f lavfi -i "
                            "testsrc2=size=80x60:rate=10 -t %d -c:v libx264 -pix_fmt yuv420p "
                            "'%s/data/%s'", dir, dir, k_videos[i].seconds, dir, k_videos[i].rel);
        TCHECK(rc == 0, "ffmpeg %s", k_videos[i].rel);
    }
    char err[512], data[4200];
    snprintf(data, sizeof data, "%s/data", dir);
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL && ds->nvideos == NV, "dataset: %s", ds ? "" : err);
    if (ds) {
        vt_dataset_probe(ds, 1, 1, NULL, NULL);
        auto_counts(ds);
        eval_spread(ds);
        vt_dataset_free(&ds);
    }
    const char *bin = vt_test_bin("test_clips_auto");
    if (bin)
        train_e2e(bin);
    return vt_test_done("test_clips_auto");
}
