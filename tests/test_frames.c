/*
 * test_frames.c: a folder of numbered JPEG or PNG frames read as one video
 * (pipeline/data/video/video_frames.c).
 *   - Outside truth: the ffmpeg command makes the frames (testsrc2: the picture moves every
 *     frame) and then an MKV whose stream is those very files (`-c:v copy`: MJPEG in MKV,
 *     PNG in MKV). Every clip vt_video_read_clip takes from the folder — starts, strides,
 *     sizes, past the end — is bit for bit the clip of the MKV, and the info (frames,
 *     fps, size, duration) agrees.
 *   - --frame-rate: the folder's frames at 12.5 per second (duration, fps).
 *   - A dataset with frame folders in class folders counts each as one video; a folder
 *     with a gap in its numbers is unreadable with the reason; the other files of a class
 *     are not taken for frames.
 *   - `train` (one step, the frame cache on; config.json keeps its --frame-rate) and `prep` (a folder becomes v.mp4 with the
 *     folder's frame count, by ffprobe) run on such a dataset.
 */
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/video/video.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define NF 45

static void same_clips(const char *folder, const char *mkv, const char *what) {
    vt_video *a = NULL, *b = NULL;
    char err[1024];
    TCHECK(vt_video_open(&a, folder, 1, err, sizeof err) == 0, "%s folder open: %s", what, err);
    TCHECK(vt_video_open(&b, mkv, 1, err, sizeof err) == 0, "%s mkv open: %s", what, err);
    if (!a || !b) {
        vt_video_close(&a);
        vt_video_close(&b);
        return;
    }
    const vt_video_info *ia = vt_video_get_info(a), *ib = vt_video_get_info(b);
    TCHECK(ia->nframes == NF && ib->nframes == NF, "%s frames %lld and %lld, want %d", what,
           (long long)ia->nframes, (long long)ib->nframes, NF);
    TCHECK(ia->width == ib->width && ia->height == ib->height, "%s size", what);
    /* both at 30 fps: the folder by default, the MKV by -framerate 30 */
    TCHECK(ia->fps > 29.99 && ia->fps < 30.01, "%s folder fps %g", what, ia->fps);
    /* 45 frames at 30/s: 1.5 s; containers round a frame's length differently, so a frame */
    TCHECK(ia->duration > 1.5 - 0.034 && ia->duration < 1.5 + 0.034, "%s duration %g", what,
           ia->duration);
    static const struct { int64_t start; int t, stride, side; } c[] = {
        {0, 8, 1, 0}, {10, 8, 2, 64}, {37, 8, 1, 48}, {44, 4, 3, 32}, {3, 16, 1, 120}, {20, 6, 4, 50},
    };
    for (size_t k = 0; k < VT_ARRAY_LEN(c); k++) {
        int w, h;
        vt_video_scaled_size(a, c[k].side, &w, &h);
        size_t n = (size_t)c[k].t * (size_t)w * (size_t)h * 3;
        uint8_t *pa = vt_malloc(n), *pb = vt_malloc(n);
        int ra = vt_video_read_clip(a, pa, c[k].start, c[k].t, c[k].stride, c[k].side, VT_PAD_LOOP,
                                    err, sizeof err);
        int rb = vt_video_read_clip(b, pb, c[k].start, c[k].t, c[k].stride, c[k].side, VT_PAD_LOOP,
                                    err, sizeof err);
        TCHECK(ra == 0 && rb == 0 && memcmp(pa, pb, n) == 0,
               "%s clip start %lld t %d stride %d side %d: folder %d, mkv %d, %s", what,
               (long long)c[k].start, c[k].t, c[k].stride, c[k].side, ra, rb,
               ra || rb ? err : "bytes differ");
        free(pa);
        free(pb);
    }
    vt_video_close(&a);
    vt_video_close(&b);
}

int main(void) {
    const char *bin = vt_test_bin("test_frames");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], p[4400], q[4400], err[1024];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("frames"));
    vt_test_sh("rm -rf '%s/data' '%s/prep' '%s/run'", dir, dir, dir);
    /* two frame folders, a video file and a gap folder */
    TCHECK(vt_test_sh("mkdir -p '%s/data/move/jpg' '%s/data/move/png' '%s/data/still/gap' && "
                      "ffmpeg -v error -f lavfi -i testsrc2=s=160x120:r=30 -frames:v %d -q:v 3 "
                      "'%s/data/move/jpg/%%05d.jpg' && "
                      "ffmpeg -v error -f lavfi -i testsrc2=s=96x72:r=30 -frames:v %d "
                      "'%s/data/move/png/f%%d.png' && "
                      "ffmpeg -v error -f lavfi -i testsrc2=s=96x72:r=30 -frames:v 8 "
                      "'%s/data/still/gap/%%03d.jpg' && rm '%s/data/still/gap/004.jpg' && "
                      "ffmpeg -v error -f lavfi -i testsrc2=s=96x72:r=25 -frames:v 25 -c:v mpeg4 "
                      "'%s/data/still/clip.mp4'",
                      dir, dir, dir, NF, dir, NF, dir, dir, dir, dir) == 0, "make frames");
    /* the same files as a stream: MJPEG in MKV and PNG in MKV, nothing re-encoded */
    TCHECK(vt_test_sh("ffmpeg -v error -framerate 30 -i '%s/data/move/jpg/%%05d.jpg' -c:v copy "
                      "'%s/jpg.mkv' -y && ffmpeg -v error -framerate 30 -i "
                      "'%s/data/move/png/f%%d.png' -c:v copy '%s/png.mkv' -y",
                      dir, dir, dir, dir) == 0, "make mkv");
    snprintf(p, sizeof p, "%s/data/move/jpg", dir);
    snprintf(q, sizeof q, "%s/jpg.mkv", dir);
    same_clips(p, q, "jpeg");
    snprintf(p, sizeof p, "%s/data/move/png", dir);
    snprintf(q, sizeof q, "%s/png.mkv", dir);
    same_clips(p, q, "png");

    /* --frame-rate */
    vt_video_set_frame_rate(12.5);
    vt_video *v = NULL;
    snprintf(p, sizeof p, "%s/data/move/jpg", dir);
    TCHECK(vt_video_open(&v, p, 1, err, sizeof err) == 0, "open at 12.5: %s", err);
    if (v) {
        const vt_video_info *in = vt_video_get_info(v);
        TCHECK(in->fps > 12.49 && in->fps < 12.51 && in->duration > 3.5 && in->duration < 3.7,
               "12.5 fps: fps %g duration %g (45 frames: 3.6 s)", in->fps, in->duration);
        vt_video_close(&v);
    }
    vt_video_set_frame_rate(30);

    /* the dataset */
    snprintf(p, sizeof p, "%s/data", dir);
    vt_dataset *ds = vt_dataset_open(p, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open dataset: %s", err);
    if (ds) {
        TCHECK(ds->nvideos == 4, "4 videos (2 folders, a gap folder, a file), got %d", ds->nvideos);
        TCHECK(ds->nignored == 0, "no frame taken for a file of its own: %d ignored", ds->nignored);
        vt_dataset_probe(ds, 1, 0, NULL, NULL);
        for (int i = 0; i < ds->nvideos; i++) {
            const vt_dataset_video *x = &ds->videos[i];
            int gap = strstr(x->relpath, "gap") != NULL;
            TCHECK(gap ? x->bad && x->reason && strstr(x->reason, "gap") : !x->bad,
                   "%s: %s", x->relpath, x->reason ? x->reason : "readable");
        }
        vt_dataset_free(&ds);
    }
    vt_test_sh("rm -rf '%s/data/still/gap'", dir);

    /* train (loader, clips, frame cache) and prep */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 4x32 --batch 2 "
                      "--epochs 1 --max-steps 1 --val-split 0 --frame-cache 64M "
                      "--frame-rate 25 > '%s/train.log' 2>&1", bin, dir, dir, dir) == 0,
           "train on frame folders");
    snprintf(p, sizeof p, "%s/run/config.json", dir);
    cJSON *cfg = vt_test_read_json(p);
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(cfg, "frame_rate");
    TCHECK(cJSON_IsNumber(fr) && fr->valuedouble == 25, "config.json keeps --frame-rate 25");
    cJSON_Delete(cfg);
    TCHECK(vt_test_sh("'%s' prep '%s/data' '%s/prep' > '%s/prep.log' 2>&1", bin, dir, dir, dir) == 0,
           "prep");
    snprintf(p, sizeof p, "%s/prep/move/jpg.mp4", dir);
    TCHECK(vt_test_ffprobe_frames(p) == NF, "prep: %s has %lld frames, want %d", p,
           (long long)vt_test_ffprobe_frames(p), NF);
    return vt_test_done("test_frames");
}
