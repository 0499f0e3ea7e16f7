/*
 * test_decoder_pool.c: a closed video's decoder kept for the next open of a stream like it
 * (pipeline/data/video/video_pool.c, vt_video_set_decoder_pool). The pool serves NVDEC
 * decoders by default; here it keeps CPU decoders (VT_DECODER_POOL_ALL), the same code
 * path but for the GPU's attach, so the reuse logic is checked without a GPU
 * (scripts/gpu-check.sh runs the NVDEC side). A run of opens and reads must give:
 *   - the same info, frames, seeks and read results with the pool as with none, over
 *     a sequence that reuses decoders across different files of the same parameters
 *     (H.264 with B-frames and HEVC, MP4 and Matroska, 1 and 2 decoder threads), with a
 *     corrupt file, an MPEG-TS copy (Annex B: never kept), a file that repeats its
 *     parameter sets in band (its decoder never kept) and files of other sizes between;
 *   - the decoders taken where they may be, and only there (the pool's counts);
 *   - a clip read by a reused decoder byte-identical to the ffmpeg command's;
 *   - the robustness videos, each opened twice in a row, the same with the pool as without;
 *   - at most VT_DECODER_POOL_IDLE idle decoders, the rest freed.
 * Tolerance: bit-exact (0) everywhere: the same decoder on the same packets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/video/video.h"
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/apputil.h"

static const char *dir;
static char err[512];

/* The files, each opened in turn (names under dir). "same" files share codec, size and
 * encoder settings (so their extradata) with another of the list. */
typedef struct step {
    const char *name;
    int threads;
    int64_t start; /* the clip read after the open (4 frames, stride 2, short side 48) */
} step;

static const step seq[] = {
    {"a.mp4", 1, 5},   {"b.mp4", 1, 17},  {"c.mp4", 1, 0},   {"a.mp4", 1, 30},
    {"bad.mp4", 1, 8}, {"b.mp4", 1, 3},   {"a.ts", 1, 9},    {"c.mp4", 1, 21},
    {"rep.mp4", 1, 2}, {"a.mp4", 1, 11},  {"small.mp4", 1, 4}, {"b.mp4", 1, 26},
    {"a.mp4", 2, 13},  {"c.mp4", 2, 1},   {"b.mp4", 2, 29},  {"a.mkv", 1, 7},
    {"b.mkv", 1, 14},  {"ha.mp4", 1, 6},  {"hb.mp4", 1, 12}, {"ha.mp4", 1, 19},
};
enum { NSEQ = sizeof seq / sizeof seq[0] };

typedef struct run {
    int rc, read_rc;
    vt_video_info info;
    vt_test_bytes out; /* the clip, then decode_all's frames at short side 32 */
    int64_t seeks;
} run;

static run do_step(const step *s) {
    run r;
    memset(&r, 0, sizeof r);
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", s->name[0] == '/' ? "" : dir,
             s->name[0] == '/' ? "" : "/", s->name);
    vt_video *v = NULL;
    r.rc = vt_video_open(&v, path, s->threads, err, sizeof err);
    if (r.rc < 0)
        return r;
    r.info = *vt_video_get_info(v);
    int w, h;
    vt_video_scaled_size(v, 48, &w, &h);
    r.read_rc = vt_video_read_clip(v, vt_test_bytes_grow(&r.out, (size_t)w * h * 3 * 4), s->start, 4, 2, 48, VT_PAD_LOOP, err,
                                   sizeof err);
    r.seeks = vt_video_get_stats(v)->seeks;
    int64_t got = 0;
    vt_video_decode_all(v, 32, vt_test_keep_frame, &r.out, &got, err, sizeof err);
    vt_video_close(&v);
    return r;
}

static vt_decoder_pool_stats stats(void) {
    vt_decoder_pool_stats s;
    vt_video_get_decoder_pool_stats(&s);
    return s;
}

/* The sequence with the pool and without: the same everything; reuse where allowed. */
static void check_sequence(void) {
    run off[NSEQ], on[NSEQ];
    vt_video_set_decoder_pool(VT_DECODER_POOL_OFF);
    for (int i = 0; i < NSEQ; i++)
        off[i] = do_step(&seq[i]);
    vt_decoder_pool_stats s0 = stats();
    TCHECK(s0.reused == 0 && s0.made == 0 && s0.idle == 0, "off: the pool was used");
    vt_video_set_decoder_pool(VT_DECODER_POOL_ALL);
    int64_t took[NSEQ];
    for (int i = 0; i < NSEQ; i++) {
        int64_t r0 = stats().reused;
        on[i] = do_step(&seq[i]);
        took[i] = stats().reused - r0;
    }
    for (int i = 0; i < NSEQ; i++) {
        char what[256];
        snprintf(what, sizeof what, "step %d (%s, %d thread%s)", i, seq[i].name,
                 seq[i].threads, seq[i].threads == 1 ? "" : "s");
        const run *a = &on[i], *b = &off[i];
        TCHECK(a->rc == b->rc, "%s: open %d with the pool, %d without", what, a->rc, b->rc);
        TCHECK(a->rc < 0 || !memcmp(&a->info, &b->info, sizeof a->info), "%s: info differs",
               what);
        TCHECK(a->read_rc == b->read_rc && a->seeks == b->seeks, "%s: read %d/%d, seeks "
               "%lld/%lld", what, a->read_rc, b->read_rc, (long long)a->seeks,
               (long long)b->seeks);
        TCHECK(a->out.n == b->out.n && (a->out.n == 0 || !memcmp(a->out.p, b->out.p, a->out.n)),
               "%s: frames differ with the pool", what);
        free(a->out.p);
        free(b->out.p);
    }
    /* Where a decoder may be taken: an earlier clean decoder of the same parameters and
     * threads has closed. a/b/c.mp4 and a/b.mkv share one encoder setting (their
     * container's time bases differ: MP4 1/15360, Matroska 1/1000); bad.mp4 is theirs but
     * corrupt: it takes one and frees it (step 5 finds none); a.ts is Annex B (never
     * kept); rep.mp4 has their extradata but repeats its parameter sets in band: it takes
     * one and frees it (step 9 finds none); small.mp4 is another size; ha/hb.mp4 HEVC. */
    static const int want[NSEQ] = {0, 1, 1, 1, 1, 0, 0, 1, 1, 0,
                                   0, 1, 0, 1, 1, 0, 1, 0, 1, 1};
    int reused = 0;
    for (int i = 0; i < NSEQ; i++) {
        TCHECK(took[i] == want[i], "step %d (%s): %s a kept decoder", i, seq[i].name,
               took[i] ? "took" : "did not take");
        reused += (int)took[i];
    }
    printf("  %d opens, %d of them on a kept decoder: the same info, frames and seeks as "
           "without the pool\n", NSEQ, reused);
}

/* A clip read by a reused decoder against the ffmpeg command (frames 9, 11, 13, 15 of
 * b.mp4 at its native size). */
static void check_ffmpeg(void) {
    char a[4096], b[4096], raw[4200];
    snprintf(a, sizeof a, "%s/a.mp4", dir);
    snprintf(b, sizeof b, "%s/b.mp4", dir);
    snprintf(raw, sizeof raw, "%s/ff.raw", dir);
    vt_video_set_decoder_pool(VT_DECODER_POOL_ALL);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, a, 1, err, sizeof err) == 0, "open a: %s", err);
    uint8_t tmp[4 * 96 * 64 * 3];
    TCHECK(vt_video_read_clip(v, tmp, 20, 4, 1, 0, VT_PAD_LOOP, err, sizeof err) == 0,
           "read a: %s", err);
    vt_video_close(&v);
    int64_t r0 = stats().reused;
    TCHECK(vt_video_open(&v, b, 1, err, sizeof err) == 0, "open b: %s", err);
    TCHECK(stats().reused == r0 + 1, "b.mp4 took a's decoder");
    if (!v)
        return;
    size_t fb = 96 * 64 * 3;
    uint8_t mine[4 * 96 * 64 * 3];
    TCHECK(vt_video_read_clip(v, mine, 9, 4, 2, 0, VT_PAD_LOOP, err, sizeof err) == 0,
           "read b: %s", err);
    vt_video_close(&v);
    int m = vt_test_ffmpeg_max_diff(b, "select=between(n\\,9\\,15)*mod(n\\,2),format=rgb24",
                                    raw, mine, 4 * fb);
    /* Bit-exact: the same decoder and the same unscaled YUV->RGB conversion (test_decode.c) */
    TCHECK(m == 0, "a clip by a reused decoder: max abs diff %d vs ffmpeg", m);
    printf("  b.mp4 on a.mp4's decoder: ffmpeg's frames, max diff %d\n", m);
}

/* The robustness videos (../shared/data/robustness, when there), each opened twice in a
 * row (the second open takes the first's decoder where the pool keeps it: rotated MOVs,
 * VFR, yuv444p, an unordered MOV, corrupt files), with the pool and without. */
static void check_real(void) {
    int here;
    const char *r = vt_test_robustness_dir(&here);
    if (!here) {
        printf("  (no robustness folder at %s: skipped)\n", r);
        return;
    }
    TCHECK(vt_test_sh("find '%s' -type f ! -name manifest.tsv | sort > '%s/real.txt'", r, dir) ==
               0, "list %s", r);
    char lst[4200];
    snprintf(lst, sizeof lst, "%s/real.txt", dir);
    FILE *f = fopen(lst, "r");
    TCHECK(f != NULL, "open %s", lst);
    char line[4096];
    int files = 0, reused = 0;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        step st = {line, 1, 3};
        run off[2], on[2];
        vt_video_set_decoder_pool(VT_DECODER_POOL_OFF);
        for (int k = 0; k < 2; k++)
            off[k] = do_step(&st);
        vt_video_set_decoder_pool(VT_DECODER_POOL_ALL);
        int64_t r0 = stats().reused;
        for (int k = 0; k < 2; k++)
            on[k] = do_step(&st);
        reused += (int)(stats().reused - r0);
        for (int k = 0; k < 2; k++) {
            const run *a = &on[k], *b = &off[k];
            TCHECK(a->rc == b->rc && a->read_rc == b->read_rc && a->seeks == b->seeks &&
                       (a->rc < 0 || !memcmp(&a->info, &b->info, sizeof a->info)) &&
                       a->out.n == b->out.n && (a->out.n == 0 || !memcmp(a->out.p, b->out.p, a->out.n)),
                   "%s, open %d: differs with the pool", strrchr(line, '/') + 1, k + 1);
            free(on[k].out.p);
            free(off[k].out.p);
        }
        files++;
    }
    if (f)
        fclose(f);
    printf("  %d robustness videos opened twice each: %d opens on a kept decoder, the same "
           "frames as without the pool\n", files, reused);
}

/* More videos open at once than the pool keeps: VT_DECODER_POOL_IDLE stay, the rest go. */
static void check_bound(void) {
    enum { N = VT_DECODER_POOL_IDLE + 4 };
    vt_video_set_decoder_pool(VT_DECODER_POOL_OFF); /* empty */
    vt_video_set_decoder_pool(VT_DECODER_POOL_ALL);
    char path[4096];
    snprintf(path, sizeof path, "%s/a.mp4", dir);
    vt_video *v[N] = {0};
    for (int i = 0; i < N; i++)
        TCHECK(vt_video_open(&v[i], path, 1, err, sizeof err) == 0, "open %d: %s", i, err);
    vt_decoder_pool_stats s0 = stats();
    for (int i = 0; i < N; i++)
        vt_video_close(&v[i]);
    vt_decoder_pool_stats s1 = stats();
    TCHECK(s1.idle == VT_DECODER_POOL_IDLE && s1.evicted - s0.evicted == N - VT_DECODER_POOL_IDLE,
           "%d closed: %lld idle, %lld evicted", N, (long long)s1.idle,
           (long long)(s1.evicted - s0.evicted));
    vt_video_decoder_pool_drain(); /* what a loader does when it is freed */
    TCHECK(stats().idle == 0, "drained: %lld decoders still idle", (long long)stats().idle);
    for (int i = 0; i < N; i++) /* kept again for the checks below */
        TCHECK(vt_video_open(&v[i], path, 1, err, sizeof err) == 0, "open %d: %s", i, err);
    for (int i = 0; i < N; i++)
        vt_video_close(&v[i]);
    s1 = stats();
    vt_video_set_decoder_pool(VT_DECODER_POOL_GPU); /* the default: CPU decoders not kept */
    TCHECK(vt_video_open(&v[0], path, 1, err, sizeof err) == 0, "open: %s", err);
    TCHECK(stats().reused == s1.reused, "the default pool took a CPU decoder");
    vt_video_close(&v[0]);
    vt_video_set_decoder_pool(VT_DECODER_POOL_OFF);
    TCHECK(stats().idle == 0, "off: %lld decoders still idle", (long long)stats().idle);
    printf("  %d closed at once: %d kept, %d freed; the default keeps no CPU decoder\n", N,
           VT_DECODER_POOL_IDLE, N - VT_DECODER_POOL_IDLE);
}

/* 40 frames at 15 fps, GOP 12 with B-frames (clips start mid-GOP), one encoder setting. */
static void make(const char *name, const char *src, const char *size, const char *codec) {
    TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -f lavfi -i '%s=size=%s:rate=15' "
                      "-frames:v 40 -pix_fmt yuv420p %s '%s/%s'", src, size, codec, dir,
                      name) == 0, "ffmpeg made %s", name);
}

int main(void) {
    dir = vt_test_dir("decoder_pool");
    /* x264 without threads: the same bytes on any machine */
    const char *x264 = "-c:v libx264 -g 12 -bf 2 -threads 1 -preset veryfast";
    make("a.mp4", "testsrc2", "96x64", x264);
    make("b.mp4", "smptebars", "96x64", x264);
    make("c.mp4", "mandelbrot", "96x64", x264);
    make("bad.mp4", "rgbtestsrc", "96x64", x264);
    make("small.mp4", "testsrc2", "64x48", x264);
    make("a.mkv", "testsrc2", "96x64", x264);
    make("b.mkv", "smptebars", "96x64", x264);
    char rep[512];
    snprintf(rep, sizeof rep, "%s -x264-params repeat-headers=1", x264);
    make("rep.mp4", "cellauto", "96x64", rep);
    const char *x265 = "-c:v libx265 -g 12 -bf 2 -x265-params log-level=none:pools=1:"
                       "frame-threads=1 -tag:v hvc1";
    make("ha.mp4", "testsrc2", "96x64", x265);
    make("hb.mp4", "smptebars", "96x64", x265);
    TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -i '%s/a.mp4' -c copy '%s/a.ts'", dir,
                      dir) == 0, "ffmpeg made a.ts");
    /* bytes 0xaa over part of bad.mp4's second GOP (its moov is at the end): errors
     * mid-file, as tests/make_media.sh's corrupt_mid */
    TCHECK(vt_test_sh("cd '%s' && sz=$(stat -c %%s bad.mp4) && printf '%%0300d' 0 | tr 0 "
                      "'\\252' | dd of=bad.mp4 bs=1 seek=$((sz / 3)) conv=notrunc status=none",
                      dir) == 0, "corrupted bad.mp4");
    vt_video_set_open_cache(0); /* every open probes and decodes its first frame */
    check_sequence();
    check_ffmpeg();
    check_real();
    check_bound();
    return vt_test_done("test_decoder_pool");
}
