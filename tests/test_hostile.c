/*
 * test_hostile.c: files that must never crash vidtrain (docs/design.md §3.6). Each
 * hostile file from tests/make_media.sh either opens and reads gracefully or is refused
 * with a reason that names the problem; under the ASan+UBSan build this also proves no
 * out-of-bounds access, no undefined behaviour and no leak on any of these paths.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/video/video.h"
/* Paths and commands are built with snprintf into fixed buffers; GCC -O2 warns that a
 * 4096-byte path could be truncated. snprintf truncates safely and test paths are short. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/testutil.h"

static char dir[4096];

static int contains_any(const char *s, const char *a, const char *b) {
    return strstr(s, a) || (b && strstr(s, b));
}

/* Must be refused, with err naming the problem (one of two phrases). */
static void refused(const char *name, const char *phrase, const char *alt) {
    char path[8192], err[512] = "";
    snprintf(path, sizeof path, "%s/hostile/%s", dir, name);
    vt_video *v = NULL;
    int rc = vt_video_open(&v, path, 2, err, sizeof err);
    TCHECK(rc < 0 && v == NULL, "%s: should be refused (rc %d)", name, rc);
    TCHECK(contains_any(err, phrase, alt), "%s: reason '%s' should mention '%s'%s%s", name, err,
           phrase, alt ? " or " : "", alt ? alt : "");
    printf("  %-16s refused: %s\n", name, err);
    vt_video_close(&v);
}

/* Must open; every frame position is read as a clip without crashing. */
static vt_video *opens(const char *name) {
    char path[8192], err[512] = "";
    snprintf(path, sizeof path, "%s/hostile/%s", dir, name);
    vt_video *v = NULL;
    int rc = vt_video_open(&v, path, 2, err, sizeof err);
    TCHECK(rc == 0, "%s: should open: %s", name, err);
    return v;
}

static void test_tiny(const char *name, int64_t want_frames) {
    vt_video *v = opens(name);
    if (!v)
        return;
    const vt_video_info *in = vt_video_get_info(v);
    TCHECK(in->nframes == want_frames, "%s: %lld frames, want %lld", name, (long long)in->nframes,
           (long long)want_frames);
    int w, h;
    vt_video_scaled_size(v, 32, &w, &h);
    size_t fb = (size_t)w * h * 3;
    int t = 16;
    uint8_t *loop = malloc(fb * t), *last = malloc(fb * t);
    char err[512];
    TCHECK(vt_video_read_clip(v, loop, 0, t, 1, 32, VT_PAD_LOOP, err, sizeof err) == 0, "%s", err);
    TCHECK(vt_video_read_clip(v, last, 0, t, 1, 32, VT_PAD_REPEAT_LAST, err, sizeof err) == 0,
           "%s", err);
    /* A clip longer than the video: LOOP gives frame i % n, REPEAT_LAST frame min(i, n-1). */
    int64_t n = in->nframes;
    for (int i = 0; i < t && n > 0; i++) {
        TCHECK(!memcmp(loop + fb * i, loop + fb * (i % n), fb), "%s: loop slot %d = frame %lld",
               name, i, (long long)(i % n));
        int64_t j = i < n ? i : n - 1;
        TCHECK(!memcmp(last + fb * i, loop + fb * j, fb), "%s: repeat-last slot %d = frame %lld",
               name, i, (long long)j);
    }
    /* A clip starting past the end loops too (the sampler may ask for it). */
    TCHECK(vt_video_read_clip(v, loop, n + 2, 4, 3, 32, VT_PAD_LOOP, err, sizeof err) == 0, "%s",
           err);
    free(loop);
    free(last);
    vt_video_close(&v);
}

/* Corruption in the middle: opens (the index survives), every clip position reads or fails
 * with a reason, never crashes; the trouble shows in the counters. */
static int64_t test_corrupt(const char *name) {
    vt_video *v = opens(name);
    if (!v)
        return 0;
    const vt_video_info *in = vt_video_get_info(v);
    int w, h;
    vt_video_scaled_size(v, 48, &w, &h);
    int t = 8;
    uint8_t *buf = malloc((size_t)w * h * 3 * t);
    char err[512];
    int ok = 0, bad = 0;
    for (int64_t s = 0; s < in->nframes; s += 3) {
        err[0] = 0;
        int rc = vt_video_read_clip(v, buf, s, t, 1, 48, VT_PAD_LOOP, err, sizeof err);
        if (rc == 0)
            ok++;
        else {
            bad++;
            TCHECK(err[0] != 0, "%s: a failed read must say why", name);
        }
    }
    int64_t got = 0;
    int rc = vt_video_decode_all(v, 48, NULL, NULL, &got, err, sizeof err);
    TCHECK(rc == 0 || err[0], "%s: decode_all fails only with a reason", name);
    const vt_video_stats *st = vt_video_get_stats(v);
    printf("  %-16s %lld frames indexed, %lld decoded in sequence, clips ok %d / failed %d, "
           "decode errors %lld, filled frames %lld\n",
           name, (long long)in->nframes, (long long)got, ok, bad, (long long)st->decode_errors,
           (long long)st->missing_frames);
    TCHECK(ok > 0, "%s: the intact part of the file should still give clips", name);
    int64_t trouble = st->decode_errors + st->missing_frames;
    free(buf);
    vt_video_close(&v);
    return trouble;
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", vt_test_dir("hostile"));
    if (vt_test_make_media(dir, "hostile"))
        return 1;
    refused("empty.mp4", "empty", NULL);
    refused("truncated.mp4", "moov", NULL);
    refused("random.mp4", "container", "video stream");
    refused("text.avi", "container", "video stream");
    refused("audio_only.m4a", "no video stream", NULL);
    refused("huge.y4m", "40000x40000", NULL);      /* the y4m demuxer refuses it itself */
    refused("huge_dims.avi", "exceed the limit", NULL); /* the demuxer accepts: our limit */
    refused("does_not_exist.mp4", "No such file", NULL);
    refused(".", "not a regular file", NULL); /* dir/hostile/. is a folder */
    /* scripts and playlists that name other files: never read as what they name */
    refused("concat.mp4", "not a video", "container");
    refused("playlist.mp4", "not a video", "container");

    test_tiny("one_frame.mp4", 1);
    test_tiny("short5.mp4", 5);
    int64_t trouble = test_corrupt("corrupt_mid.avi") + test_corrupt("corrupt_mid.mp4");
    TCHECK(trouble > 0, "corruption must show in decode_errors or missing_frames");

    /* Bad requests are data errors with a reason, not aborts. */
    vt_video *v = opens("short5.mp4");
    if (v) {
        char err[512] = "";
        uint8_t px[3 * 32 * 32];
        TCHECK(vt_video_read_clip(v, px, -1, 1, 1, 0, VT_PAD_LOOP, err, sizeof err) < 0 &&
                   strstr(err, "bad clip request"),
               "negative start refused: %s", err);
        TCHECK(vt_video_read_clip(v, px, 0, 1, 0, 0, VT_PAD_LOOP, err, sizeof err) < 0,
               "stride 0 refused");
        vt_video_close(&v);
    }
    return vt_test_done("test_hostile");
}
