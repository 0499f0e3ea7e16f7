/*
 * test_decode.c: pipeline/data/video/video_*.c against the ffmpeg command, the outside truth. For
 * each test file (tests/make_media.sh: H.264/MP4 with B-frames and -g 12, MPEG-4/AVI,
 * MJPEG/MKV, VP9/WebM, FFV1/MKV, a VFR file, two rotated files; and the timing traps of
 * older containers: MPEG-2 in MPEG-PS, MPEG-4 and H.264 with B-frames in AVI, HEVC with
 * open GOPs in MPEG-TS, each of which read frames one or two places off, or built on
 * missing references, before 2026-11-29; a stream copy cut mid-GOP into Matroska, whose
 * one untimed packet turned the whole file into counted frames, one off; a TS whose frames
 * share timestamps in pairs (a skipped one lent its place, a seek landed on the second of a
 * pair); and AVCHD .m2ts,
 * WMV and a raw H.264 stream) it reads clips through
 * vt_video_read_clip and compares them with
 *   ffmpeg -i F -vf "select=eq(n\,a)+...,scale=W:H:flags=bilinear,format=rgb24"
 *          -fps_mode passthrough -f rawvideo
 * for the same frames: clips starting mid-GOP, stride > 1, padding past the end, repeated
 * and backwards reads on one handle, sequential decode, native size and upscaling (also at
 * widths swscale's SIMD blocks do not divide), and
 * reads that decode on across a keyframe instead of seeking (checked by the seek count);
 * and an AVI that lost a chunk, whose clips after a seek must be a read-through's.
 *
 * Tolerance: bit-exact (max abs diff 0). Both sides run the same libavcodec decoder and
 * one libswscale context with the same flags, colour matrix and range, into aligned
 * buffers; rotation is a pure pixel permutation done after scaling, compared with
 * ffmpeg -noautorotate ... ,transpose. Only the comparison with ffmpeg's default
 * autorotate (transpose BEFORE scale) is approximate, see there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/video/video.h"
/* Paths and commands are built with snprintf into fixed buffers; GCC -O2 warns that a
 * 4096-byte path could be truncated. snprintf truncates safely and test paths are short. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/apputil.h"

static const char *dir;
static char err[512];

static int file_exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && sb.st_size > 0;
}

/* Frames idx[0..t) of file through the ffmpeg command, scaled to sw x sh in coded
 * orientation then `post` (e.g. "transpose=clock") -> (t, h, w, 3) in slot order. */
static uint8_t *ffmpeg_frames(const char *file, const int64_t *idx, int t, int sw, int sh,
                              const char *pre, const char *post, int w, int h) {
    int64_t *uniq = malloc(sizeof *uniq * (size_t)(t > 0 ? t : 1));
    int nu = 0;
    for (int i = 0; i < t; i++) { /* sorted distinct */
        int64_t x = idx[i];
        int pos = 0;
        while (pos < nu && uniq[pos] < x)
            pos++;
        if (pos < nu && uniq[pos] == x)
            continue;
        memmove(uniq + pos + 1, uniq + pos, (size_t)(nu - pos) * sizeof(int64_t));
        uniq[pos] = x;
        nu++;
    }
    /* every frame wanted (the references of a whole file): no select, whose expression
     * would grow past the buffer for a long file */
    int every = 1;
    for (int i = 0; i < nu; i++)
        every &= uniq[i] == i;
    char sel[4096] = "select=";
    if (every)
        snprintf(sel, sizeof sel, "null");
    for (int i = 0; i < nu && !every; i++) {
        size_t l = strlen(sel);
        snprintf(sel + l, sizeof sel - l, "%seq(n\\,%lld)", i ? "+" : "", (long long)uniq[i]);
    }
    char raw[4096], cmd[16384];
    snprintf(raw, sizeof raw, "%s/ff.raw", dir);
    char scale[64] = "";
    if (sw > 0)
        snprintf(scale, sizeof scale, "scale=%d:%d:flags=bilinear,", sw, sh);
    snprintf(cmd, sizeof cmd,
             "ffmpeg -nostdin -v error -y %s -i '%s' -vf '%s,%sformat=rgb24%s%s' -fps_mode "
             "passthrough -f rawvideo -pix_fmt rgb24 '%s'",
             pre ? pre : "", file, sel, scale, post ? "," : "", post ? post : "", raw);
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        free(uniq);
        return NULL;
    }
    size_t fb = (size_t)w * h * 3;
    uint8_t *all = malloc(fb * (size_t)nu);
    FILE *f = fopen(raw, "rb");
    size_t got = f ? fread(all, 1, fb * (size_t)nu, f) : 0;
    if (f)
        fclose(f);
    if (got != fb * (size_t)nu) {
        fprintf(stderr, "ffmpeg gave %zu bytes, want %zu (%d frames %dx%d): %s\n", got,
                fb * (size_t)nu, nu, w, h, cmd);
        free(all);
        free(uniq);
        return NULL;
    }
    uint8_t *out = malloc(fb * (size_t)t);
    for (int i = 0; i < t; i++) {
        int k = 0;
        while (uniq[k] != idx[i])
            k++;
        memcpy(out + fb * (size_t)i, all + fb * (size_t)k, fb);
    }
    free(all);
    free(uniq);
    return out;
}

static int max_diff(const uint8_t *a, const uint8_t *b, size_t n, double *mean) {
    int m = 0;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        s += d;
        if (d > m)
            m = d;
    }
    if (mean)
        *mean = n ? s / (double)n : 0;
    return m;
}

/* All frames of the current file through ffmpeg at one scale, cached: one ffmpeg run per
 * (file, short side) instead of one per clip keeps the test fast. */
typedef struct ref_frames {
    char file[4096];
    int short_side, w, h;
    int64_t n;
    uint8_t *rgb; /* (n, h, w, 3) */
} ref_frames;
static ref_frames refs[4];

static void refs_clear(void) {
    for (int i = 0; i < 4; i++) {
        free(refs[i].rgb);
        memset(&refs[i], 0, sizeof refs[i]);
    }
}

static const uint8_t *ref_frame(vt_video *v, const char *file, int short_side, int64_t n) {
    const vt_video_info *in = vt_video_get_info(v);
    int w, h;
    vt_video_scaled_size(v, short_side, &w, &h);
    ref_frames *r = NULL;
    for (int i = 0; i < 4 && !r; i++)
        if (refs[i].rgb && refs[i].short_side == short_side && !strcmp(refs[i].file, file))
            r = &refs[i];
    if (!r) {
        for (int i = 0; i < 4 && !r; i++)
            if (!refs[i].rgb)
                r = &refs[i];
        if (!r) {
            refs_clear();
            r = &refs[0];
        }
        int rot = in->rotation;
        int swap = rot == 90 || rot == 270;
        const char *post = rot == 90 ? "transpose=clock" : rot == 270 ? "transpose=cclock"
                         : rot == 180 ? "hflip,vflip" : NULL;
        int64_t *idx = malloc(sizeof *idx * (size_t)(in->nframes > 0 ? in->nframes : 1));
        for (int64_t i = 0; i < in->nframes; i++)
            idx[i] = i;
        r->rgb = ffmpeg_frames(file, idx, (int)in->nframes, short_side ? (swap ? h : w) : 0,
                               short_side ? (swap ? w : h) : 0, "-noautorotate", post, w, h);
        free(idx);
        if (!r->rgb)
            return NULL;
        snprintf(r->file, sizeof r->file, "%s", file);
        r->short_side = short_side;
        r->w = w;
        r->h = h;
        r->n = in->nframes;
    }
    return n < r->n ? r->rgb + (size_t)n * r->w * r->h * 3 : NULL;
}

/* One clip through vidtrain vs ffmpeg; returns the max abs diff (or 999 on failure). */
static int check_clip(vt_video *v, const char *file, int64_t start, int t, int stride,
                      int short_side, vt_pad_policy pad, const char *what) {
    const vt_video_info *in = vt_video_get_info(v);
    int w, h;
    vt_video_scaled_size(v, short_side, &w, &h);
    size_t fb = (size_t)w * h * 3;
    uint8_t *mine = malloc(fb * (size_t)t);
    int rc = vt_video_read_clip(v, mine, start, t, stride, short_side, pad, err, sizeof err);
    TCHECK(rc == 0, "%s: read_clip(%lld, %d, %d) failed: %s", what, (long long)start, t, stride,
           err);
    int m = rc == 0 ? 0 : 999;
    for (int i = 0; i < t && rc == 0; i++) {
        int64_t p = start + (int64_t)i * stride;
        if (p >= in->nframes)
            p = pad == VT_PAD_LOOP ? p % in->nframes : in->nframes - 1;
        const uint8_t *ref = ref_frame(v, file, short_side, p);
        TCHECK(ref != NULL, "%s: no ffmpeg reference for frame %lld", what, (long long)p);
        if (!ref) {
            m = 999;
            break;
        }
        int d = max_diff(mine + fb * (size_t)i, ref, fb, NULL);
        m = d > m ? d : m;
    }
    /* Bit-exact: same decoder, same swscale context and flags (see file comment). */
    TCHECK(m == 0, "%s: clip start %lld t %d stride %d short %d: max abs diff %d vs ffmpeg", what,
           (long long)start, t, stride, short_side, m);
    free(mine);
    return m;
}

static void test_file(const char *name, int expect_vfr) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(path)) {
        printf("  %s: not made (encoder missing), skipped\n", name);
        return;
    }
    vt_video *v = NULL;
    int rc = vt_video_open(&v, path, 2, err, sizeof err);
    TCHECK(rc == 0, "%s: open failed: %s", name, err);
    if (rc != 0)
        return;
    const vt_video_info *in = vt_video_get_info(v);
    int64_t truth = vt_test_ffprobe_frames(path);
    TCHECK(in->nframes == truth, "%s: %lld frames indexed, ffprobe counts %lld", name,
           (long long)in->nframes, (long long)truth);
    TCHECK(in->width == 160 && in->height == 120, "%s: size %dx%d", name, in->width, in->height);
    TCHECK(in->vfr == expect_vfr, "%s: vfr %d, expected %d", name, in->vfr, expect_vfr);
    TCHECK(in->fps > 0 && in->duration > 0, "%s: fps %.3f duration %.3f", name, in->fps,
           in->duration);
    /* Counted from the top: a raw stream (no times), H.264 in MPEG-PS (most frames untimed)
     * and the two files whose times go back;
     * every other file is read by time (a false "goes back" would make each clip decode
     * from the start). The joined ones at 25 fps as their parts, not the container's
     * figures, which count the overlap (overlap.mp4's own rate says 29.2). */
    const char *const counted[] = {"raw.h264", "h264.mpg", "joined.ts", "overlap.mp4"};
    int want_counted = 0;
    for (size_t i = 0; i < VT_ARRAY_LEN(counted); i++)
        want_counted |= strcmp(name, counted[i]) == 0;
    TCHECK(in->counted == want_counted, "%s: counted %d, expected %d", name, in->counted,
           want_counted);
    if (want_counted && (!strcmp(name, "joined.ts") || !strcmp(name, "overlap.mp4")))
        TCHECK(fabs(in->fps - 25) < 1e-9 && fabs(in->duration - (double)in->nframes / 25) < 1e-9,
               "%s: fps %.3f duration %.3f, want 25 and %lld / 25", name, in->fps, in->duration,
               (long long)in->nframes);
    int w, h;
    vt_video_scaled_size(v, 64, &w, &h);
    TCHECK(w == 85 && h == 64, "%s: scaled size %dx%d, want 85x64 (160x120 at short side 64)",
           name, w, h);
    /* Mid-GOP start (5 is not a multiple of the GOP 12), stride 3, crossing a keyframe. */
    check_clip(v, path, 5, 6, 3, 64, VT_PAD_LOOP, name);
    /* Backwards on the same handle: forces a seek to an earlier keyframe. */
    check_clip(v, path, 2, 4, 1, 64, VT_PAD_LOOP, name);
    /* Forwards again without crossing a keyframe: decodes on without a seek. */
    check_clip(v, path, 7, 3, 1, 64, VT_PAD_LOOP, name);
    /* Past the end: loop and repeat-last. 39 + 4k reaches the last frame (an untimed one
     * in an AVI with B-frames) with the B-frames before it skipped. */
    check_clip(v, path, 40, 6, 2, 64, VT_PAD_LOOP, name);
    check_clip(v, path, 39, 4, 4, 64, VT_PAD_LOOP, name);
    check_clip(v, path, 40, 6, 2, 64, VT_PAD_REPEAT_LAST, name);
    /* Native size (no scaling, colour conversion only) and upscaling. */
    check_clip(v, path, 13, 2, 10, 0, VT_PAD_LOOP, name);
    check_clip(v, path, 25, 2, 1, 150, VT_PAD_LOOP, name);
    /* The same clip twice gives the same bytes (state carried between reads). */
    check_clip(v, path, 5, 6, 3, 64, VT_PAD_LOOP, name);
    vt_video_close(&v);
    TCHECK(v == NULL, "close sets the handle to NULL");
    vt_video_close(&v); /* NULL is fine */
    refs_clear();
}

/* Native size (colour conversion only) at widths whose last pixels swscale's x86 YUV ->
 * RGB blocks of 8 once left unwritten (video_scale.c): 340 (20 mod 64) in 4:2:0 and 4:2:2,
 * 148 in full-range 4:2:0 (MJPEG). Each clip twice on one handle (stale bytes from the
 * frame before were what the rows ended with), and at a short side that scales. */
/* `vidtrain scan` says which videos are counted from the top (each clip decodes from the
 * start): joined.ts, not h264.mp4, in the text and in --json's "counted"; train warns of a
 * long one. */
static void test_scan_counted(void) {
    const char *bin = vt_test_bin("test_decode");
    if (!bin)
        return;
    TCHECK(vt_test_sh("rm -rf '%s/scan' && mkdir -p '%s/scan/a' '%s/scan/b' && cp '%s/joined.ts' "
                      "'%s/scan/a/' && cp '%s/h264.mp4' '%s/scan/b/' && '%s' scan '%s/scan' "
                      "--no-leaks > '%s/scan.txt' 2>&1 && grep -q '^counted  *1 whose frames are "
                      "counted' '%s/scan.txt'", dir, dir, dir, dir, dir, dir, dir, bin, dir, dir,
                      dir) == 0, "scan names the one counted video (%s/scan.txt)", dir);
    TCHECK(vt_test_sh("'%s' scan '%s/scan' --no-leaks --json > '%s/scan.json' 2>/dev/null", bin,
                      dir, dir) == 0, "scan --json");
    char p[4200];
    snprintf(p, sizeof p, "%s/scan.json", dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *c = cJSON_GetObjectItem(j, "counted");
    TCHECK(cJSON_IsNumber(c) && c->valuedouble == 1, "scan --json: counted %g, want 1",
           cJSON_IsNumber(c) ? c->valuedouble : -1);
    cJSON_Delete(j);
    /* train warns of a long counted video (7 joined parts, 336 frames: every clip decodes
     * from the top) and names it; 48 frames are not long */
    TCHECK(vt_test_sh("cd '%s/scan' && for i in 1 2 3 4 5 6 7; do cat ../joined.ts; done > "
                      "a/long.ts && '%s' train . --out ../scanrun --model tiny --epochs 1 --clip "
                      "4x32x32 --batch 2 --val-split 0 --threads 1 > ../train.txt 2>&1 && grep "
                      "-q 'warning: 2 training videos are counted from the start.*a/long.ts, 336 "
                      "frames' ../train.txt", dir, bin) == 0,
           "train warns of the long counted video (%s/train.txt)", dir);
}

static void test_width(void) {
    static const struct {
        const char *name, *enc;
        int w, h;
    } files[] = {
        {"w340.mp4", "-c:v libx264 -pix_fmt yuv420p", 340, 256},
        {"w340_422.mp4", "-c:v libx264 -pix_fmt yuv422p", 340, 256},
        {"w148.mkv", "-c:v mjpeg -pix_fmt yuvj420p", 148, 112},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        TCHECK(vt_test_sh("ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=%dx%d:rate=25 "
                          "-frames:v 8 -g 4 %s '%s'", files[i].w, files[i].h, files[i].enc,
                          path) == 0, "ffmpeg made %s", path);
        vt_video *v = NULL;
        TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "%s: %s", path, err);
        if (!v)
            continue;
        check_clip(v, path, 0, 4, 1, 0, VT_PAD_LOOP, files[i].name);
        check_clip(v, path, 4, 4, 1, 0, VT_PAD_LOOP, files[i].name);
        check_clip(v, path, 0, 4, 1, 0, VT_PAD_LOOP, files[i].name);
        check_clip(v, path, 2, 3, 2, 64, VT_PAD_LOOP, files[i].name);
        vt_video_close(&v);
        refs_clear();
        printf("  %s (%dx%d): native size and scaled, ffmpeg's bytes\n", files[i].name,
               files[i].w, files[i].h);
    }
}

/* The test file `name` (its path into path, 4096 bytes) opened with one decoder thread, or
 * NULL: not made (its encoder is missing: said, skipped) or not opened (a failed check). */
static vt_video *open_one_thread(const char *name, char *path) {
    snprintf(path, 4096, "%s/%s", dir, name);
    if (!file_exists(path)) {
        printf("  %s: not made (encoder missing), skipped\n", name);
        return NULL;
    }
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "%s open: %s", name, err);
    return v;
}

/* Reads that decode on instead of seeking (video_seek.c can_continue): a keyframe a few
 * frames ahead, or a gap in an intra-only stream, is passed by decoding (or dropping
 * packets) rather than by a seek, and the pixels stay ffmpeg's. GOP 12 (make_media.sh):
 * keyframes at 0, 12, 24, 36. */
static void test_continue(const char *name, int intra) {
    char path[4096];
    vt_video *v = open_one_thread(name, path);
    if (!v)
        return;
    const vt_video_stats *st = vt_video_get_stats(v);
    char what[128];
    snprintf(what, sizeof what, "%s decode-on", name);
    /* 20, 22, 24, 26 right after open (at frame 0): one seek to keyframe 12, then
     * keyframe 24 is passed by decoding; an intra-only stream drops 19 packets instead. */
    int64_t s0 = st->seeks;
    check_clip(v, path, 20, 4, 2, 64, VT_PAD_LOOP, what);
    TCHECK(st->seeks == s0 + (intra ? 0 : 1), "%s: %lld seeks for a clip over keyframe 24, "
           "want %d", name, (long long)(st->seeks - s0), intra ? 0 : 1);
    /* 28..34 after 26: ahead, no keyframe in between: no seek. */
    s0 = st->seeks;
    check_clip(v, path, 28, 4, 2, 64, VT_PAD_LOOP, what);
    TCHECK(st->seeks == s0, "%s: %lld seeks for a clip right after the last, want 0", name,
           (long long)(st->seeks - s0));
    /* 40, 41 after 34: keyframe 36 is 1 frame ahead, a seek would save nothing (GOP
     * stream); an intra-only stream drops 5 packets instead of seeking. */
    s0 = st->seeks;
    check_clip(v, path, 40, 2, 1, 64, VT_PAD_LOOP, what);
    TCHECK(st->seeks == s0, "%s: %lld seeks for a jump just over keyframe 36, want 0", name,
           (long long)(st->seeks - s0));
    /* Backwards: a seek. */
    s0 = st->seeks;
    check_clip(v, path, 2, 2, 1, 64, VT_PAD_LOOP, what);
    TCHECK(st->seeks == s0 + 1, "%s: %lld seeks for a read backwards, want 1", name,
           (long long)(st->seeks - s0));
    /* 20 after 3: keyframe 12 is 8 frames ahead, a seek saves decoding them (GOP); an
     * intra-only stream drops 16 packets. */
    s0 = st->seeks;
    check_clip(v, path, 20, 2, 1, 64, VT_PAD_LOOP, what);
    TCHECK(st->seeks == s0 + (intra ? 0 : 1), "%s: %lld seeks for a jump far over keyframe "
           "12, want %d", name, (long long)(st->seeks - s0), intra ? 0 : 1);
    /* Every third frame of an intra-only stream: one seek, not one per frame. */
    if (intra) {
        s0 = st->seeks;
        check_clip(v, path, 0, 16, 3, 64, VT_PAD_LOOP, what);
        TCHECK(st->seeks == s0 + 1, "%s: %lld seeks for 16 frames at stride 3, want 1", name,
               (long long)(st->seeks - s0));
    }
    vt_video_close(&v);
    refs_clear();
}

/* A seek in MPEG-TS (h264.m2ts: B-frames, keyframes at 0, 12, 24, 36) goes by dts, which
 * runs behind the keyframe's pts: it lands past the keyframe asked for, then one earlier
 * (video_seek.c check_landing). The retry's landing, on the keyframe before the clip, is
 * good: a clip near the end costs two seeks and about two GOPs of decoding, not a third
 * seek to the start of the file and every frame before the clip. */
static void test_ts_seek(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "%s open: %s", name, err);
    if (!v)
        return;
    const vt_video_stats *st = vt_video_get_stats(v);
    int64_t s0 = st->seeks, f0 = st->frames_decoded;
    check_clip(v, path, 44, 2, 1, 64, VT_PAD_LOOP, name);
    /* From keyframe 36 (the retry's, or 24's landing there): at most 12 frames and the
     * decoder's reorder delay; from the start it is 46. */
    TCHECK(st->seeks - s0 <= 2 && st->frames_decoded - f0 <= 24,
           "%s: a clip at 44 took %lld seeks and %lld decoded frames, want <= 2 and <= 24",
           name, (long long)(st->seeks - s0), (long long)(st->frames_decoded - f0));
    vt_video_close(&v);
    /* The last GOP in one clip: to hand out its last frames the decoder is sent the end of
     * the stream, and still holds the frames after each, which it hands out without a
     * seek (video_seek.c can_continue): the two seeks that reach keyframe 36, no more. */
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "%s open: %s", name, err);
    if (!v)
        return;
    st = vt_video_get_stats(v);
    s0 = st->seeks;
    check_clip(v, path, 36, 12, 1, 64, VT_PAD_LOOP, name);
    TCHECK(st->seeks - s0 <= 2, "%s: %lld seeks for the last GOP in one clip, want <= 2",
           name, (long long)(st->seeks - s0));
    vt_video_close(&v);
    refs_clear();
}

/* An x264 open GOP (opengop.mp4 and .ts, keyframes 0 and 24): frames 28 and 29 also refer to
 * pictures before keyframe 24, so a decoder started there drops them. A clip of them right
 * after the open (a seek) must still hold them, as the ffmpeg command's read from the
 * start does, not copies of frame 27 (video_read.c: one keyframe further back). */
static void test_open_gop(const char *name) {
    char path[4096];
    vt_video *v = open_one_thread(name, path);
    if (!v)
        return;
    check_clip(v, path, 28, 2, 1, 64, VT_PAD_LOOP, name);
    TCHECK(vt_video_get_stats(v)->missing_frames == 0, "%s: %lld frames missing", name,
           (long long)vt_video_get_stats(v)->missing_frames);
    vt_video_close(&v);
    refs_clear();
}

typedef struct seq_check {
    int64_t count, last_n;
    int ordered;
    int pad_dirty;     /* frames whose VT_RGB_PAD bytes after them were not zeros */
    uint8_t *frame10;
    size_t fb;
} seq_check;

static int on_frame(void *user, const uint8_t *rgb, int64_t n, int w, int h) {
    seq_check *s = user;
    if (n != s->last_n + 1)
        s->ordered = 0;
    s->last_n = n;
    s->count++;
    /* swscale (prep, the leak check) reads past a row that is not a multiple of 16
     * bytes: a frame sized exactly was read beyond its block, and prep's copies of one
     * source differed from run to run (test_prep's "second prep" failed by the path's
     * length). The pad is part of the frame's contract (video.h). */
    int dirty = 0;
    for (size_t k = 0; k < VT_RGB_PAD; k++)
        dirty |= rgb[(size_t)w * h * 3 + k];
    s->pad_dirty += dirty != 0;
    if (n == 10) {
        s->fb = (size_t)w * h * 3;
        s->frame10 = malloc(s->fb);
        memcpy(s->frame10, rgb, s->fb);
    }
    return 0;
}

static void test_sequential(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/h264.mp4", dir);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
    if (!v)
        return;
    seq_check s = {.last_n = -1, .ordered = 1};
    int64_t got = 0;
    int rc = vt_video_decode_all(v, 64, on_frame, &s, &got, err, sizeof err);
    TCHECK(rc == 0 && got == 48 && s.count == 48, "decode_all: rc %d, %lld frames: %s", rc,
           (long long)got, err);
    TCHECK(s.ordered, "decode_all delivers frames 0, 1, 2, ... in presentation order");
    TCHECK(s.pad_dirty == 0, "%d frames without VT_RGB_PAD zero bytes after them",
           s.pad_dirty);
    int64_t idx[1] = {10};
    uint8_t *ref = ffmpeg_frames(path, idx, 1, 85, 64, NULL, NULL, 85, 64);
    if (ref && s.frame10)
        TCHECK(max_diff(ref, s.frame10, s.fb, NULL) == 0, "decode_all frame 10 equals ffmpeg's");
    /* A clip read after a full decode (the decoder was drained) still works. */
    check_clip(v, path, 30, 4, 2, 64, VT_PAD_LOOP, "h264 after decode_all");
    free(ref);
    free(s.frame10);
    vt_video_close(&v);
}

/* A stream cut mid-GOP read through (decode_all, as prep and the frame cache do): after the
 * open's decode the decoder holds the parameter sets, and would make pictures of the
 * packets before the first keyframe on missing references; every frame once, in order,
 * as many as ffprobe counts. */
static void test_cut_sequential(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(path))
        return;
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 2, err, sizeof err) == 0, "%s open: %s", name, err);
    if (!v)
        return;
    seq_check s = {.last_n = -1, .ordered = 1};
    int64_t got = 0, truth = vt_test_ffprobe_frames(path);
    int rc = vt_video_decode_all(v, 64, on_frame, &s, &got, err, sizeof err);
    TCHECK(rc == 0 && got == truth && s.ordered, "%s decode_all: rc %d, %lld frames (ffprobe "
           "%lld), in order %d", name, rc, (long long)got, (long long)truth, s.ordered);
    free(s.frame10);
    vt_video_close(&v);
}

/* An AVI that lost a chunk (hostile/corrupt_mid.avi: 3 KB of 0xff over a chunk header,
 * so a packet is gone): read through, the demuxer numbers the packets after the hole by
 * counting them; seeked to, by its idx1 index, one more. A clip past the hole read right
 * after an open (a seek) must hold the frames a read-through (decode_all, the index's
 * numbering, ffmpeg's) puts at those positions, not the ones a position further on. */
static void test_lost_chunk(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/hostile/corrupt_mid.avi", dir);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
    if (!v)
        return;
    vt_test_bytes a = {0};
    int64_t got = 0;
    vt_video_decode_all(v, 32, vt_test_keep_frame, &a, &got, err, sizeof err);
    const int64_t n = vt_video_get_info(v)->nframes;
    vt_video_close(&v);
    TCHECK(a.frames == n && n > 40, "decode_all: %lld of %lld frames", (long long)a.frames, (long long)n);
    int bad = 0, clips = 0;
    for (int64_t start = 24; start + 4 <= a.frames; start += 5) {
        TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "open: %s", err);
        if (!v)
            break;
        uint8_t *clip = malloc(4 * a.frame);
        TCHECK(vt_video_read_clip(v, clip, start, 4, 1, 32, VT_PAD_LOOP, err, sizeof err) == 0,
               "read %lld: %s", (long long)start, err);
        if (memcmp(clip, a.p + (size_t)start * a.frame, 4 * a.frame)) {
            bad++;
            fprintf(stderr, "  corrupt_mid.avi: the clip at %lld after a seek differs\n",
                    (long long)start);
        }
        clips++;
        free(clip);
        vt_video_close(&v);
    }
    TCHECK(bad == 0, "corrupt_mid.avi: %d of %d clips after a seek hold other frames than a "
           "read-through", bad, clips);
    printf("  corrupt_mid.avi (a chunk lost): %d clips past the hole after a seek, the frames "
           "a read-through gives\n", clips);
    free(a.p);
}

static void test_rotation(const char *name, int want_rot) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    vt_video *v = NULL;
    TCHECK(vt_video_open(&v, path, 1, err, sizeof err) == 0, "%s open: %s", name, err);
    if (!v)
        return;
    const vt_video_info *in = vt_video_get_info(v);
    TCHECK(in->rotation == want_rot, "%s: rotation %d, want %d", name, in->rotation, want_rot);
    TCHECK(in->disp_width == 120 && in->disp_height == 160, "%s: displayed %dx%d, want 120x160",
           name, in->disp_width, in->disp_height);
    int w, h;
    vt_video_scaled_size(v, 60, &w, &h);
    TCHECK(w == 60 && h == 80, "%s: scaled %dx%d, want 60x80", name, w, h);
    /* Exact: scale in coded orientation then transpose, as vidtrain does. */
    check_clip(v, path, 3, 4, 5, 60, VT_PAD_LOOP, name);
    check_clip(v, path, 0, 2, 1, 0, VT_PAD_LOOP, name);
    /* Direction check against ffmpeg's own autorotate (transpose first, then scale).
     * Tolerance: the right direction must be 5x closer than the opposite one. Not closer:
     * transposing yuv420p before scaling moves the chroma siting (left-sited columns
     * become rows) and swaps which pass filters which axis, ~10 levels mean on testsrc2's
     * saturated edges at a 2x downscale; the opposite rotation is ~180 levels off. */
    size_t fb = (size_t)w * h * 3;
    uint8_t *mine = malloc(fb);
    int64_t idx[1] = {6};
    TCHECK(vt_video_read_clip(v, mine, 6, 1, 1, 60, VT_PAD_LOOP, err, sizeof err) == 0, "%s",
           err);
    uint8_t *auto_ref = ffmpeg_frames(path, idx, 1, w, h, NULL, NULL, w, h);
    const char *wrong = want_rot == 90 ? "transpose=cclock" : "transpose=clock";
    uint8_t *wrong_ref = ffmpeg_frames(path, idx, 1, h, w, "-noautorotate", wrong, w, h);
    if (auto_ref && wrong_ref) {
        double mean_ok, mean_wrong;
        max_diff(mine, auto_ref, fb, &mean_ok);
        max_diff(mine, wrong_ref, fb, &mean_wrong);
        TCHECK(mean_ok * 5 < mean_wrong, "%s: mean abs diff %.2f vs ffmpeg autorotate, %.2f vs "
               "the opposite rotation", name, mean_ok, mean_wrong);
        printf("  %s: vs ffmpeg autorotate mean diff %.3f, vs opposite rotation %.3f\n", name,
               mean_ok, mean_wrong);
    }
    free(mine);
    free(auto_ref);
    free(wrong_ref);
    vt_video_close(&v);
}

/* The stream reader (predict --timeline) over the same file: every frame ffprobe counts,
 * at times that only go forward. An AVI with B-frames hands its last frames out untimed;
 * they were timed at the nominal count, before the frame ahead of them, and left out as
 * "a broken timestamp". */
static void stream_times(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!file_exists(path))
        return;
    vt_stream *s = NULL;
    int rc = vt_stream_open(&s, path, 2, err, sizeof err);
    TCHECK(rc == 0, "%s: stream open: %s", name, err);
    if (rc)
        return;
    const uint8_t *rgb;
    int w, h, r, back = 0;
    double t, dur, last = -1;
    long long n = 0;
    while ((r = vt_stream_next(s, 32, &rgb, &w, &h, &t, &dur, err, sizeof err)) == 1) {
        back += t <= last;
        last = t;
        n++;
    }
    long long truth = vt_test_ffprobe_frames(path);
    TCHECK(r == 0 && n == truth && back == 0, "%s: the stream gave %lld frames of %lld, %d not "
           "after the one before", name, n, truth, back);
    vt_stream_close(&s);
}

/* VT_DECODE_SWEEP=DIR (scripts/check-decode.sh): random clips of every video under DIR
 * against the ffmpeg command, for footage and containers the test media do not have. */
static int sweep(const char *sdir, int nclips) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "find '%s' -type f | sort", sdir);
    FILE *ls = popen(cmd, "r");
    char path[4096];
    int files = 0, bad_files = 0;
    while (ls && fgets(path, sizeof path, ls)) {
        path[strcspn(path, "\n")] = 0;
        if (!vt_is_video_name(path))
            continue;
        vt_video *v = NULL;
        if (vt_video_open(&v, path, 2, err, sizeof err) != 0) {
            printf("  %s: not read (%s)\n", path, err);
            continue;
        }
        const vt_video_info *in = vt_video_get_info(v);
        int64_t truth = vt_test_ffprobe_frames(path);
        int bad = 0, fails0 = vt_test_failures;
        unsigned seed = 12345;
        for (int k = 0; k < nclips && in->nframes > 0; k++) {
            seed = seed * 1103515245u + 12345u;
            int64_t start = (int64_t)((seed >> 8) % (unsigned)in->nframes);
            seed = seed * 1103515245u + 12345u;
            int stride = 1 + (int)((seed >> 8) % 4);
            bad += check_clip(v, path, start, 4, stride, 64, VT_PAD_LOOP, path) != 0;
        }
        TCHECK(in->nframes == truth, "%s: %lld frames indexed, ffprobe counts %lld", path,
               (long long)in->nframes, (long long)truth);
        printf("  %s: %lld frames (ffprobe %lld), %d of %d random clips differ from ffmpeg's\n",
               path, (long long)in->nframes, (long long)truth, bad, nclips);
        files++;
        bad_files += vt_test_failures > fails0;
        vt_video_close(&v);
        refs_clear();
    }
    if (ls)
        pclose(ls);
    printf("sweep: %d videos, %d read other frames than the ffmpeg command\n", files, bad_files);
    return vt_test_done("test_decode sweep");
}

int main(void) {
    if (getenv("VT_DECODE_SWEEP")) {
        /* A scratch folder of its own: "decode" is wiped at start and holds the references
         * as ff.raw, so a sweep beside the test (or a second sweep) read another's frames
         * as ffmpeg's and reported differences that were not there. */
        char name[64];
        snprintf(name, sizeof name, "decode_sweep_%ld", (long)getpid());
        dir = vt_test_dir(name);
        int rc = sweep(getenv("VT_DECODE_SWEEP"),
                       getenv("VT_SWEEP_CLIPS") ? atoi(getenv("VT_SWEEP_CLIPS")) : 20);
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
        return rc;
    }
    dir = vt_test_dir("decode");
    if (vt_test_make_media(dir, ""))
        return 1;
    test_file("h264.mp4", 0);
    test_file("mpeg4.avi", 0);
    test_file("mpeg2.mpg", 0);
    test_file("h264.mpg", 0);
    test_file("mpeg4bf.avi", 0);
    test_file("h264.avi", 0);
    test_file("hevc.ts", 0);
    test_file("h264.m2ts", 0);
    test_file("wmv2.wmv", 0);
    test_file("raw.h264", 0);
    test_file("cut.mkv", 0);
    test_file("negts.mkv", 0);
    test_file("dups.ts", 1);
    test_file("joined.ts", 0);
    test_file("overlap.mp4", 0);
    stream_times("h264.avi");
    stream_times("mpeg4bf.avi");
    stream_times("mpeg2.mpg");
    test_file("midgop.ts", 0);
    test_file("midgop_m2.ts", 0);
    test_file("opengop.mp4", 0);
    test_file("mjpeg.mkv", 0);
    test_file("vp9.webm", 0);
    test_file("ffv1.mkv", 0);
    test_file("vfr.mp4", 1);
    test_continue("h264.mp4", 0);
    test_continue("mpeg4.avi", 0);
    test_continue("mjpeg.mkv", 1);
    test_ts_seek("h264.m2ts");
    test_open_gop("opengop.mp4");
    test_open_gop("opengop.ts");
    test_sequential();
    test_cut_sequential("midgop.ts");
    test_cut_sequential("midgop_m2.ts");
    test_rotation("rot90.mp4", 90);
    test_rotation("rot270.mp4", 270);
    test_width();
    test_scan_counted();
    test_lost_chunk();
    refs_clear();
    return vt_test_done("test_decode");
}
