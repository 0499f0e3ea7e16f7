/*
 * test_loader.c: the prefetching loader end to end on real encoded videos (made by
 * tests/make_media.sh with the ffmpeg command):
 *   - determinism: the same seed gives bitwise-identical batches with 1 and 2 workers,
 *     another seed differs, a resume at batch k gives the tail of the full epoch, every
 *     sampled clip appears exactly once; the same with what opening a video learned kept
 *     for its next open (video.h's open cache) and without;
 *   - outside truth: an evaluation clip equals the ffmpeg command's frames (select,
 *     scale=bilinear), centre-cropped and normalised here;
 *   - hostile files: a pass over good videos plus the hostile set completes, counts
 *     add up, each bad file is reported exactly once and left out of the next epoch, a
 *     damaged one (clips filled in, decode errors) named once;
 *   - memory: the buffers are allocated once through the hook ((queue + workers) *
 *     batch bytes) and RSS does not grow over many epochs;
 *   - clean shutdown while workers are mid-batch;
 *   - the release protocol: a kept batch (vt_loader_keep) stays bitwise unchanged while
 *     the consumer reads later batches, across an epoch start, until vt_loader_release;
 *     with two buffers the one kept is the one the worker would otherwise refill next,
 *     so a loader that ignored keep fails the hash check; keeping every buffer and
 *     asking for more aborts instead of hanging.
 * Clips are 4 x 32 x 32 from 160x120 videos so the whole test takes seconds.
 */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "base/common.h"
#include "pipeline/data/loader.h"
#include "tests/mediautil.h"
#include "tests/testutil.h"

static void sh(const char *cmd) {
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        exit(1);
    }
}

static void small_clip(vt_loader_cfg *c) {
    vt_loader_cfg_default(c);
    c->clip.t = 4;
    c->clip.stride = 2;
    c->clip.crop = 32;
    c->clip.short_side = 36;
    c->clip.jitter_min = 32;
    c->clip.jitter_max = 44;
    c->batch = 4;
    c->queue = 2;
    c->cache = 3; /* fewer than the videos: the LRU evicts and reopens */
}

/* One epoch: per-batch hashes into hs (up to max), returns the number of batches. Also
 * counts each (video, clip) pair into seen (nvideos * 16). */
static int run_epoch(vt_loader *l, uint64_t *hs, int max, int *seen, int *labels_ok,
                     const vt_dataset *ds) {
    const vt_batch *b;
    int nb = 0;
    while ((b = vt_loader_next(l)) != NULL) {
        if (nb < max)
            hs[nb] = vt_test_batch_hash(b);
        nb++;
        for (int i = 0; i < b->n; i++) {
            if (seen && b->clip[i] < 16)
                seen[b->video[i] * 16 + b->clip[i]]++;
            if (labels_ok)
                *labels_ok &= b->label[0][i] == ds->videos[b->video[i]].label[0];
        }
    }
    return nb;
}

static void test_determinism(void) {
    vt_dataset *ds = vt_test_media_good_set("loader_det");
    enum { MAXB = 64 };
    uint64_t h1[MAXB], h2[MAXB], h3[MAXB], h4[MAXB], h5[MAXB];
    char err[512];
    vt_loader_cfg c;
    small_clip(&c);
    c.clips_per_video = 3;
    c.seed = 1234;
    c.epoch = 5;

    c.workers = 1;
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "init: %s", err);
    if (!l) {
        vt_dataset_free(&ds);
        return;
    }
    int seen[8 * 16] = {0}, labels_ok = 1;
    int n1 = run_epoch(l, h1, MAXB, seen, &labels_ok, ds);
    int once = 1;
    for (int v = 0; v < 8; v++)
        for (int k = 0; k < 16; k++)
            once &= seen[v * 16 + k] == (k < 3 ? 1 : 0);
    TCHECK(n1 == 6, "24 clips in batches of 4: %d batches", n1);
    TCHECK(once, "every (video, clip) exactly once");
    TCHECK(labels_ok, "labels are the videos' classes");
    vt_loader_stats st;
    vt_loader_get_stats(l, &st);
    TCHECK(st.clips == 24 && st.bad_clips == 0, "clips %lld bad %lld", (long long)st.clips,
           (long long)st.bad_clips);
    /* Next epoch differs; going back to epoch 5 repeats it exactly. */
    vt_loader_start_epoch(l, 6, 0);
    int n4 = run_epoch(l, h4, MAXB, NULL, NULL, ds);
    TCHECK(n4 == n1 && memcmp(h1, h4, sizeof(uint64_t) * (size_t)n1) != 0, "epoch 6 differs");
    vt_loader_start_epoch(l, 5, 0);
    int n5 = run_epoch(l, h5, MAXB, NULL, NULL, ds);
    TCHECK(n5 == n1 && !memcmp(h1, h5, sizeof(uint64_t) * (size_t)n1), "epoch 5 again identical");
    vt_loader_free(&l);

    c.workers = 2;
    c.queue = 1;
    l = vt_loader_init(ds, &c, err, sizeof err);
    int n2 = run_epoch(l, h2, MAXB, NULL, NULL, ds);
    TCHECK(n2 == n1 && !memcmp(h1, h2, sizeof(uint64_t) * (size_t)n1),
           "2 workers: identical batches to 1 worker");
    vt_loader_free(&l);

    /* Resume from a data cursor: batches 2.. equal the full epoch's. */
    c.start_batch = 2;
    l = vt_loader_init(ds, &c, err, sizeof err);
    int n3 = run_epoch(l, h3, MAXB, NULL, NULL, ds);
    TCHECK(n3 == n1 - 2 && !memcmp(h1 + 2, h3, sizeof(uint64_t) * (size_t)n3),
           "resume at batch 2 gives the rest of the epoch");
    vt_loader_free(&l);

    c.start_batch = 0;
    c.seed = 1235;
    l = vt_loader_init(ds, &c, err, sizeof err);
    n3 = run_epoch(l, h3, MAXB, NULL, NULL, ds);
    int differ = 0;
    for (int i = 0; i < n1 && i < n3; i++)
        differ += h1[i] != h3[i];
    TCHECK(differ == n1, "another seed: %d of %d batches differ", differ, n1);
    vt_loader_free(&l);

    /* Evaluation: K = 2 clips x 3 crops per video, in order, same with any workers. */
    small_clip(&c);
    c.mode = VT_LOADER_EVAL;
    c.clips_per_video = 2;
    c.clip.ncrops = 3;
    c.batch = 5;
    c.workers = 1;
    l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l && vt_loader_num_samples(l) == 8 * 6, "eval samples");
    memset(seen, 0, sizeof seen);
    n1 = run_epoch(l, h1, MAXB, seen, NULL, ds);
    once = 1;
    for (int v = 0; v < 8; v++)
        for (int k = 0; k < 16; k++)
            once &= seen[v * 16 + k] == (k < 6 ? 1 : 0);
    TCHECK(n1 == 10 && once, "eval: 48 clips once each in 10 batches (%d)", n1);
    vt_loader_free(&l);
    c.workers = 2;
    l = vt_loader_init(ds, &c, err, sizeof err);
    n2 = run_epoch(l, h2, MAXB, NULL, NULL, ds);
    TCHECK(n2 == n1 && !memcmp(h1, h2, sizeof(uint64_t) * (size_t)n1), "eval: 1 and 2 workers agree");
    vt_loader_free(&l);

    /* A bad config is an error, not an abort. */
    small_clip(&c);
    c.clip.crop = 64; /* larger than the jittered short side */
    l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l == NULL && strstr(err, "crop"), "crop > short side: %s", err);
    vt_dataset_free(&ds);
}

/* What opening a video learned, kept for the next open (video.h's open cache): with one
 * open video per worker every clip reopens, and the batches must be the same bits with
 * nothing kept, with it kept on one worker and on two opening the same files at once. */
static void test_open_cache(void) {
    vt_dataset *ds = vt_test_media_good_set("loader_open_cache");
    for (int i = 0; i < ds->nvideos; i++) { /* a copy made now is too fresh to be kept */
        struct timespec t[2];
        clock_gettime(CLOCK_REALTIME, &t[0]);
        t[0].tv_sec -= 3600;
        t[1] = t[0];
        utimensat(AT_FDCWD, ds->videos[i].path, t, 0);
    }
    enum { MAXB = 64 };
    uint64_t h[3][MAXB];
    int nb[3];
    char err[512];
    vt_loader_cfg c;
    small_clip(&c);
    c.clips_per_video = 3;
    c.seed = 77;
    c.cache = 1;
    for (int k = 0; k < 3; k++) {
        vt_video_set_open_cache(k == 0 ? 0 : VT_VIDEO_OPEN_CACHE_DEFAULT);
        c.workers = k == 2 ? 2 : 1;
        vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
        TCHECK(l != NULL, "init: %s", err);
        nb[k] = l ? run_epoch(l, h[k], MAXB, NULL, NULL, ds) : 0;
        vt_loader_free(&l);
    }
    vt_video_open_cache_stats st;
    vt_video_get_open_cache_stats(&st);
    TCHECK(st.hits >= 10, "the epochs with it on found %lld opens kept", (long long)st.hits);
    TCHECK(nb[0] == 6 && nb[1] == nb[0] && !memcmp(h[0], h[1], sizeof(uint64_t) * (size_t)nb[0]),
           "open cache, 1 worker: the same batches as without");
    TCHECK(nb[2] == nb[0] && !memcmp(h[0], h[2], sizeof(uint64_t) * (size_t)nb[0]),
           "open cache, 2 workers: the same batches as without");
    vt_dataset_free(&ds);
}

/* The eval clip against the ffmpeg command: select frames, scale bilinear, crop here. */
static void test_vs_ffmpeg(void) {
    const char *dir = vt_test_dir("loader_ffmpeg");
    vt_test_media_put(dir, "only/a.mp4", "h264.mp4");
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    vt_loader_cfg c;
    small_clip(&c);
    c.mode = VT_LOADER_EVAL;
    c.clips_per_video = 1;
    c.workers = 1;
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    const vt_batch *b = l ? vt_loader_next(l) : NULL;
    TCHECK(b && b->n == 1, "one clip");
    if (b && b->n == 1) {
        /* 48 frames, span 7: centre start (48-7)/2 = 20 -> frames 20 22 24 26. 160x120 at
         * short side 36 -> 48x36; centre crop 32 at (8, 2). */
        enum { W = 48, H = 36, T = 4, CROP = 32 };
        char cmd[8800], raw[8300];
        snprintf(raw, sizeof raw, "%s/ref.rgb", dir);
        snprintf(cmd, sizeof cmd,
                 "ffmpeg -nostdin -loglevel error -y -i '%s/only/a.mp4' -vf "
                 "\"select='between(n\\,20\\,26)*not(mod(n\\,2))',scale=%d:%d:flags=bilinear\" "
                 "-fps_mode passthrough -f rawvideo -pix_fmt rgb24 '%s'",
                 dir, W, H, raw);
        sh(cmd);
        static uint8_t ref[T * H * W * 3];
        FILE *f = fopen(raw, "rb");
        size_t got = f ? fread(ref, 1, sizeof ref, f) : 0;
        if (f)
            fclose(f);
        TCHECK(got == sizeof ref, "ffmpeg gave %zu of %zu bytes", got, sizeof ref);
        double sum = 0, maxd = 0;
        for (int ch = 0; ch < 3; ch++)
            for (int t = 0; t < T; t++)
                for (int y = 0; y < CROP; y++)
                    for (int x = 0; x < CROP; x++) {
                        double v = ref[((t * H + y + 2) * W + x + 8) * 3 + ch];
                        double mine = b->x[((ch * T + t) * CROP + y) * CROP + x] * c.clip.std[ch] +
                                      c.clip.mean[ch];
                        double d = fabs(mine * 255.0 - v);
                        sum += d;
                        maxd = fmax(maxd, d);
                    }
        double mean = sum / (3.0 * T * CROP * CROP);
        /* Same decoder and same swscale bilinear filter: equal up to swscale's SIMD vs C
         * paths and colour conversion rounding, i.e. about one grey level. A wrong frame or
         * a crop one pixel off gives a mean difference of tens of levels on testsrc2. */
        TCHECK(mean < 1.0 && maxd <= 8.0, "vs ffmpeg: mean %.3f max %.1f levels", mean, maxd);
        printf("  eval clip vs ffmpeg: mean abs diff %.3f, max %.1f grey levels\n", mean, maxd);
    }
    vt_loader_free(&l);
    vt_dataset_free(&ds);
}

/* The warnings "PATH: ..." in the log: those that say a clip of PATH was filled in
 * (damaged), and the others (bad: left out). */
static void count_warnings(const char *log, const char *path, int *damaged, int *bad) {
    *damaged = *bad = 0;
    for (const char *p = log; (p = strstr(p, path)) != NULL; p += strlen(path)) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)VT_MIN(len, sizeof line - 1), p);
        if (strstr(line, ": a damaged stream: "))
            ++*damaged;
        else
            ++*bad;
    }
}

static void test_hostile(void) {
    const char *d = vt_test_dir("loader_hostile");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", d);
    vt_test_media_put(dir, "good/a.mp4", "h264.mp4");
    vt_test_media_put(dir, "good/b.avi", "mpeg4.avi");
    vt_test_media_put(dir, "good/c.mkv", "mjpeg.mkv");
    vt_test_media_put(dir, "good/d.mp4", "vfr.mp4");
    /* Must be refused: nothing decodable in them. */
    const char *bad[][2] = {
        {"bad/empty.mp4", "hostile/empty.mp4"},   {"bad/truncated.mp4", "hostile/truncated.mp4"},
        {"bad/random.mp4", "hostile/random.mp4"}, {"bad/text.avi", "hostile/text.avi"},
        {"bad/huge.y4m", "hostile/huge.y4m"},     {"bad/audio_only.mp4", "hostile/audio_only.m4a"},
    };
    const int nbad = (int)VT_ARRAY_LEN(bad);
    for (int i = 0; i < nbad; i++)
        vt_test_media_put(dir, bad[i][0], bad[i][1]);
    /* Short files are padded (clip span 7 > 1 or 5 frames) and must be delivered. */
    vt_test_media_put(dir, "short/one_frame.mp4", "hostile/one_frame.mp4");
    vt_test_media_put(dir, "short/short5.mp4", "hostile/short5.mp4");
    /* Corrupt in the middle: delivered (missing frames filled) or reported once. */
    vt_test_media_put(dir, "corrupt/mid.avi", "hostile/corrupt_mid.avi");
    vt_test_media_put(dir, "corrupt/mid.mp4", "hostile/corrupt_mid.mp4");
    vt_test_media_put(dir, "good/notes.txt", "hostile/text.avi"); /* not a video name: ignored */
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    const int total = 4 + nbad + 4;
    TCHECK(ds->nvideos == total && ds->nignored == 1, "%d videos, %d ignored", ds->nvideos,
           ds->nignored);

    char cap[4200];
    snprintf(cap, sizeof cap, "%s/stderr.txt", dir);
    vt_loader_cfg c;
    small_clip(&c);
    c.mode = VT_LOADER_TRAIN;
    c.batch = 3;
    c.workers = 2;
    c.seed = 9;
    vt_test_capture_begin(cap); /* to count the reports */
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    int seen[32 * 16] = {0}, was_bad[32] = {0};
    int nb1 = l ? run_epoch(l, NULL, 0, seen, NULL, ds) : 0;
    vt_loader_stats s1 = {0}, s2 = {0};
    int64_t ns2 = -1;
    if (l) {
        vt_loader_get_stats(l, &s1);
        for (int i = 0; i < ds->nvideos && i < 32; i++)
            was_bad[i] = vt_dataset_bad(ds, i) != VT_BAD_NONE;
        vt_loader_start_epoch(l, 1, 0);
        ns2 = vt_loader_num_samples(l);
        run_epoch(l, NULL, 0, NULL, NULL, ds);
        vt_loader_get_stats(l, &s2);
    }
    vt_loader_free(&l);
    char *log = vt_test_capture_end(cap);
    TCHECK(nb1 > 0, "epoch ran: %s", err);

    int reported = 0, all_once = 1, bad1 = 0, newbad = 0, damaged_named = 0;
    for (int i = 0; i < ds->nvideos; i++) {
        int n, ndamaged;
        count_warnings(log, ds->videos[i].path, &ndamaged, &n);
        int isbad = vt_dataset_bad(ds, i) != VT_BAD_NONE;
        all_once &= n == (isbad ? 1 : 0);
        if (n != (isbad ? 1 : 0))
            fprintf(stderr, "  %s reported %d times (bad %d)\n", ds->videos[i].relpath, n, isbad);
        /* A clip filled in names its video once, whatever the clips after it do. */
        TCHECK(ndamaged <= 1 && (!ndamaged || !strncmp(ds->videos[i].relpath, "corrupt/", 8)),
               "%s named as damaged %d times", ds->videos[i].relpath, ndamaged);
        damaged_named += ndamaged;
        reported += isbad;
        bad1 += was_bad[i];
        newbad += isbad && !was_bad[i];
        int delivered = seen[i * 16];
        TCHECK(delivered + was_bad[i] == 1, "%s: delivered %d, bad after epoch 1 %d",
               ds->videos[i].relpath, delivered, was_bad[i]);
        /* Only a corrupt file can fail later: at another random clip position. */
        TCHECK(!(isbad && !was_bad[i]) || !strncmp(ds->videos[i].relpath, "corrupt/", 8),
               "%s went bad in epoch 2", ds->videos[i].relpath);
    }
    TCHECK(all_once, "each bad file reported exactly once (over two epochs)");
    TCHECK(s2.filled_frames == 0 || damaged_named > 0, "%lld frames filled in, %d videos "
           "named as damaged", (long long)s2.filled_frames, damaged_named);
    for (int i = 0; i < nbad; i++) {
        int j = -1;
        for (int k = 0; k < ds->nvideos; k++)
            if (!strcmp(ds->videos[k].relpath, bad[i][0]))
                j = k;
        TCHECK(j >= 0 && vt_dataset_bad(ds, j) == VT_BAD_OPEN && ds->videos[j].reason &&
                   ds->videos[j].reason[0], "%s refused with a reason (%s)", bad[i][0],
               j >= 0 && ds->videos[j].reason ? ds->videos[j].reason : "none");
    }
    for (int i = 0; i < ds->nvideos; i++)
        if (!strncmp(ds->videos[i].relpath, "good/", 5) || !strncmp(ds->videos[i].relpath, "short/", 6))
            TCHECK(seen[i * 16] == 1, "%s delivered", ds->videos[i].relpath);
    TCHECK(s1.clips + s1.bad_clips == total, "epoch 1: %lld delivered + %lld bad = %d",
           (long long)s1.clips, (long long)s1.bad_clips, total);
    TCHECK(s1.bad_clips == bad1 && s1.bad_videos == bad1, "bad clips %lld, bad videos %lld, "
           "bad after epoch 1 %d", (long long)s1.bad_clips, (long long)s1.bad_videos, bad1);
    TCHECK(bad1 >= nbad && bad1 <= nbad + 2, "bad %d: the 6 hostile ones (+ corrupt ones)", bad1);
    TCHECK(ns2 == total - bad1, "epoch 2 leaves the bad ones out: %lld samples", (long long)ns2);
    TCHECK(s2.bad_clips == s1.bad_clips + newbad && s2.clips == s1.clips + ns2 - newbad &&
               s2.bad_videos == reported, "epoch 2: %lld clips, %lld bad", (long long)s2.clips,
           (long long)s2.bad_clips);
    printf("  hostile: %d videos, epoch 1: %lld clips delivered, %d bad; epoch 2: %d more bad\n",
           total, (long long)s1.clips, bad1, newbad);
    free(log);

    /* vt_dataset_probe finds the same refusals up front (on a fresh scan). */
    vt_dataset *ds2 = vt_dataset_open(dir, NULL, err, sizeof err);
    int nprobe = ds2 ? vt_dataset_probe(ds2, 2, 0, NULL, NULL) : -1;
    int open_bad = 0;
    for (int i = 0; i < ds->nvideos; i++)
        open_bad += vt_dataset_bad(ds, i) == VT_BAD_OPEN;
    TCHECK(nprobe == open_bad, "probe: %d bad, loader found %d that fail to open", nprobe, open_bad);
    int probed = 1;
    for (int i = 0; ds2 && i < ds2->nvideos; i++)
        probed &= ds2->videos[i].probed &&
                  (ds2->videos[i].bad != VT_BAD_NONE || ds2->videos[i].info.nframes > 0);
    TCHECK(probed, "every file probed");
    vt_dataset_free(&ds2);

    /* `vidtrain scan --json` lists the same unreadable files. */
    const char *bin = vt_test_env("VT_BIN", "");
    if (bin[0]) {
        char cmd[8600], out[4300];
        snprintf(out, sizeof out, "%s/scan.json", dir);
        snprintf(cmd, sizeof cmd, "'%s' scan '%s' --threads 2 --json > '%s'", bin, dir, out);
        TCHECK(system(cmd) == 0, "vidtrain scan exits 0 with unreadable files");
        FILE *f = fopen(out, "r");
        static char js[1 << 16];
        size_t n = f ? fread(js, 1, sizeof js - 1, f) : 0;
        js[n] = 0;
        if (f)
            fclose(f);
        cJSON *o = cJSON_Parse(js);
        cJSON *un = cJSON_GetObjectItem(o, "unreadable_files");
        TCHECK(o && cJSON_GetObjectItem(o, "videos") &&
                   cJSON_GetObjectItem(o, "videos")->valueint == total && cJSON_GetArraySize(un) == open_bad,
               "scan --json: %d unreadable listed, %d expected", cJSON_GetArraySize(un), open_bad);
        cJSON_Delete(o);
    }
    vt_dataset_free(&ds);
}

/* Counting allocation hook: what a pinned-memory allocator would see. */
typedef struct counting {
    int64_t bytes, allocs, frees;
} counting;
static void *count_alloc(void *ctx, size_t n) {
    counting *c = ctx;
    c->bytes += (int64_t)n;
    c->allocs++;
    return vt_malloc(n);
}
static void count_free(void *ctx, void *p) {
    counting *c = ctx;
    c->frees++;
    free(p);
}

static long rss_pages(void) {
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res;
}

static void test_memory(void) {
    vt_dataset *ds = vt_test_media_good_set("loader_mem");
    counting cnt = {0};
    vt_loader_cfg c;
    small_clip(&c);
    c.workers = 2;
    c.queue = 3;
    c.clips_per_video = 1;
    c.host_alloc = count_alloc;
    c.host_free = count_free;
    c.host_ctx = &cnt;
    char err[512];
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "init: %s", err);
    if (!l) {
        vt_dataset_free(&ds);
        return;
    }
    vt_loader_stats st;
    vt_loader_get_stats(l, &st);
    int64_t bb = vt_loader_batch_bytes(ds, &c);
    TCHECK(st.batch_bytes == bb && st.buffer_bytes == (c.queue + c.workers) * bb,
           "buffer bytes %lld = (3 + 2) x %lld", (long long)st.buffer_bytes, (long long)bb);
    TCHECK(cnt.bytes == st.buffer_bytes && cnt.allocs == c.queue + c.workers,
           "hook saw %lld bytes in %lld allocations", (long long)cnt.bytes, (long long)cnt.allocs);
    /* x alone: 4 clips x 3 x 4 x 32 x 32 floats */
    TCHECK(bb >= 4LL * 3 * 4 * 32 * 32 * 4, "batch bytes %lld hold x", (long long)bb);

    long page = sysconf(_SC_PAGESIZE);
    long r0 = 0, r1 = 0;
    int64_t batches = 0;
    const int epochs = 40, warm = 4, window = 6;
    for (int e = 0; e < epochs; e++) {
        if (e > 0)
            vt_loader_start_epoch(l, e, 0);
        batches += run_epoch(l, NULL, 0, NULL, NULL, ds);
        /* Peak RSS over a window after warm-up and over the last epochs: single readings
         * swing by ~2 MiB as FFmpeg's per-open buffers are mmapped and trimmed. */
        long r = rss_pages();
        if (e >= warm && e < warm + window)
            r0 = VT_MAX(r0, r);
        if (e >= epochs - window)
            r1 = VT_MAX(r1, r);
        if (getenv("VT_DEBUG_RSS"))
            fprintf(stderr, "epoch %d rss %ld KiB\n", e, r * page / 1024);
    }
    vt_loader_get_stats(l, &st);
    double grow = (double)(r1 - r0) * (double)page;
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's quarantine keeps freed memory resident by design; LeakSanitizer checks leaks. */
    printf("  memory: RSS bound not checked under AddressSanitizer (grew %.0f KiB)\n", grow / 1024);
#else
    /* A leak per batch would be >= one batch buffer (192 KiB x 60 batches after warm-up =
     * 11 MiB); a leaked video per LRU eviction (3 handles, 8 videos: several reopens per
     * epoch) would be larger still. 6 MiB of slack is above the ~3.5 MiB swing of malloc
     * trimming and below either leak. */
    TCHECK(grow < 6.0 * 1024 * 1024, "peak RSS grew %.0f KiB over %d epochs after warm-up",
           grow / 1024, epochs - warm - window);
#endif
    TCHECK(cnt.allocs == c.queue + c.workers, "no buffer allocated after init (%lld)",
           (long long)cnt.allocs);
    TCHECK(st.clips == (int64_t)epochs * 8 && st.bad_clips == 0, "clips %lld", (long long)st.clips);
    printf("  memory: %lld batches over %d epochs, RSS %+.0f KiB after warm-up, buffers %lld B, "
           "scratch %lld B, data wait %.3f s\n", (long long)batches, epochs, grow / 1024,
           (long long)st.buffer_bytes, (long long)st.scratch_bytes, st.wait_s);
    vt_loader_free(&l);
    TCHECK(cnt.frees == cnt.allocs, "every buffer freed through the hook");
    vt_dataset_free(&ds);
}

static void test_shutdown(void) {
    vt_dataset *ds = vt_test_media_good_set("loader_stop");
    vt_loader_cfg c;
    small_clip(&c);
    c.workers = 2;
    c.clips_per_video = 8;
    char err[512];
    double worst = 0;
    for (int round = 0; round < 6; round++) {
        vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
        if (!l)
            break;
        /* 0: free right away; 1: after one batch; 2+: after a start_epoch mid-epoch */
        if (round >= 1)
            vt_loader_next(l);
        if (round >= 2) {
            vt_loader_start_epoch(l, round, 1);
            vt_loader_next(l);
        }
        if (round >= 4) /* let the workers get well into their batches */
            usleep(20000);
        double t0 = vt_now();
        vt_loader_free(&l);
        worst = fmax(worst, vt_now() - t0);
        TCHECK(l == NULL, "freed");
    }
    /* Workers stop between clips: one 4-frame clip decode is ~ms; 2 s means a hang. */
    TCHECK(worst < 2.0, "free took %.3f s", worst);
    vt_loader_free(NULL);
    vt_dataset_free(&ds);
}

static void test_keep(void) {
    vt_dataset *ds = vt_test_media_good_set("loader_keep");
    enum { MAXB = 16 };
    char err[512];
    vt_loader_cfg c;
    small_clip(&c);
    c.batch = 2; /* 8 videos: 4 batches an epoch */
    c.workers = 1;
    c.queue = 1; /* 2 buffers: after b0 and b1, b2 must go where b1 was, never over b0 */
    uint64_t plain[MAXB];
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "%s", err);
    if (!l) {
        vt_dataset_free(&ds);
        return;
    }
    int nb = run_epoch(l, plain, MAXB, NULL, NULL, ds);
    TCHECK(nb == 4, "%d batches, expected 4", nb);
    vt_loader_start_epoch(l, 0, 0);
    /* Keep batch 0 for the whole epoch, reading it after every later vt_loader_next. */
    const vt_batch *b0 = vt_loader_next(l);
    uint64_t h0 = vt_test_batch_hash(b0);
    TCHECK(h0 == plain[0], "batch 0 differs from the plain epoch's");
    vt_loader_keep(l, b0);
    int later = 0, intact = 1;
    const vt_batch *b;
    while ((b = vt_loader_next(l)) != NULL) {
        later++;
        TCHECK(later < MAXB && vt_test_batch_hash(b) == plain[later],
               "batch %d differs while 0 is kept", later);
        intact &= vt_test_batch_hash(b0) == h0 && b0->index == 0;
    }
    TCHECK(later == 3, "%d batches after the kept one, expected 3", later);
    TCHECK(intact, "the kept batch 0 changed while later batches were delivered");
    /* Across an epoch start too; then give it back and the ring keeps turning. */
    vt_loader_start_epoch(l, 1, 0);
    b = vt_loader_next(l);
    TCHECK(b && b != b0 && vt_test_batch_hash(b0) == h0, "epoch start touched the kept batch");
    vt_loader_release(l, b0);
    nb = 1;
    while (vt_loader_next(l))
        nb++;
    TCHECK(nb == 4, "after the release: %d batches, expected 4", nb);
    vt_loader_free(&l);

    /* Two kept of three buffers: both intact while the third circulates. */
    c.queue = 2;
    l = vt_loader_init(ds, &c, err, sizeof err);
    const vt_batch *k0 = vt_loader_next(l);
    vt_loader_keep(l, k0);
    const vt_batch *k1 = vt_loader_next(l);
    vt_loader_keep(l, k1);
    uint64_t hk0 = vt_test_batch_hash(k0), hk1 = vt_test_batch_hash(k1);
    int n2 = 0;
    while ((b = vt_loader_next(l)) != NULL)
        n2++;
    TCHECK(n2 == 2 && vt_test_batch_hash(k0) == hk0 && vt_test_batch_hash(k1) == hk1 &&
               hk0 == plain[0] && hk1 == plain[1],
           "two kept batches: %d more delivered, kept ones %s", n2,
           vt_test_batch_hash(k0) == hk0 && vt_test_batch_hash(k1) == hk1 ? "intact" : "CHANGED");
    vt_loader_release(l, k1);
    vt_loader_release(l, k0);
    vt_loader_free(&l);

    /* Every buffer kept, then one more asked for: a clear abort, not a hang. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* a hang would end as SIGALRM, which the parent reports */
        c.queue = 1;
        vt_loader *lc = vt_loader_init(ds, &c, err, sizeof err);
        vt_loader_keep(lc, vt_loader_next(lc));
        vt_loader_keep(lc, vt_loader_next(lc));
        vt_loader_next(lc);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    TCHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
           "next with every buffer kept: %s %d (expected an abort)",
           WIFSIGNALED(status) ? "signal" : "exit",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    vt_dataset_free(&ds);
}

int main(void) {
    if (vt_test_media_make() != 0)
        return 1;
    test_determinism();
    test_open_cache();
    test_vs_ffmpeg();
    test_hostile();
    test_memory();
    test_shutdown();
    test_keep();
    return vt_test_done("test_loader");
}
