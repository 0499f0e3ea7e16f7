/*
 * fuzz_video.c: libFuzzer target for the video path (pipeline/data/video/video.h) on mutated
 * real files: the input is a whole video file (seeds: small real videos of several
 * codecs and containers made by tests/fuzz/make_seeds.sh with the ffmpeg command). It
 * is opened (vt_video_open: probe, index, decode the first frame) and, when it opens,
 * three clips are read as training and evaluation do: from frame 0, from the middle
 * with a stride (a seek), and past the end (padding).
 *
 * Oracles besides the sanitizers (which see vidtrain's code and every heap buffer, not
 * FFmpeg's own code): a refusal or a failed read has a reason; an opened file has at
 * least one frame and a size within the limits. Nothing is ever printed for a bad file
 * (video.h). Clips whose output would pass 64 MiB are not read: a harness limit, not a
 * finding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/video/video.h"
#include "tests/fuzz/fuzz_util.h"

#define SHORT_SIDE 16
#define MAX_CLIP_BYTES (64 << 20)

static char path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vt_fuzz_path(vt_fuzz_scratch("video"), "input", path, sizeof path);
    return 0;
}

static void read_clip(vt_video *v, int64_t start, int t, int stride, vt_pad_policy pad) {
    int ow = 0, oh = 0;
    vt_video_scaled_size(v, SHORT_SIDE, &ow, &oh);
    FUZZ_ASSERT(ow >= 1 && oh >= 1, "scaled size %dx%d", ow, oh);
    size_t bytes = (size_t)ow * (size_t)oh * 3 * (size_t)t;
    if (bytes > MAX_CLIP_BYTES)
        return;
    uint8_t *out = malloc(bytes);
    char err[512] = "";
    if (vt_video_read_clip(v, out, start, t, stride, SHORT_SIDE, pad, err, sizeof err) < 0)
        FUZZ_ASSERT(err[0], "clip read failed without a reason");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    vt_fuzz_write(path, data, size);
    vt_video *v = NULL;
    char err[512] = "";
    if (vt_video_open(&v, path, 1, err, sizeof err) < 0) {
        FUZZ_ASSERT(v == NULL, "a refused file left a handle");
        FUZZ_ASSERT(err[0], "refused without a reason");
        return 0;
    }
    const vt_video_info *in = vt_video_get_info(v);
    FUZZ_ASSERT(in->nframes >= 1, "%lld frames", (long long)in->nframes);
    FUZZ_ASSERT(in->width >= 1 && in->height >= 1 && in->width <= VT_VIDEO_MAX_SIDE &&
                    in->height <= VT_VIDEO_MAX_SIDE,
                "size %dx%d", in->width, in->height);
    FUZZ_ASSERT(in->rotation == 0 || in->rotation == 90 || in->rotation == 180 ||
                    in->rotation == 270,
                "rotation %d", in->rotation);
    read_clip(v, 0, 4, 1, VT_PAD_LOOP);
    read_clip(v, in->nframes / 2, 3, 2, VT_PAD_REPEAT_LAST);
    read_clip(v, in->nframes - 1, 3, 1, VT_PAD_LOOP);
    const vt_video_stats *st = vt_video_get_stats(v);
    FUZZ_ASSERT(st->missing_frames >= 0 && st->decode_errors >= 0, "negative counters");
    vt_video_close(&v);
    FUZZ_ASSERT(v == NULL, "close left the handle");
    return 0;
}
