/*
 * test_robust_cmds.c: the commands, not only the decode layer, on two of the real-world
 * problem videos of ../shared/data/robustness (VT_ROBUSTNESS names another folder;
 * skipped without it): corrupt/decord_corrupted.mp4, an H.264 stream with a packet that
 * never decodes and frames the decoder conceals, and odd/moviepy_bitmap_1x1.mp4, a 1x1
 * "video"; and vfr/moviepy_no_duration.webm, near-black throughout. Each is put in a small
 * synthetic class-folder dataset (the webm in val).
 *   1. scan: the 1x1 file is unreadable, with its path and the reason (it counted as
 *      readable, and training scaled it up to a flat clip without a word); the leak check
 *      names the webm as not checked (its frames are all flat: a signature has none, so a
 *      copy of it in train was never found, and "none" was all it said).
 *   2. train: the damaged file is named once and the frames its clips never got are
 *      counted at the end; the 1x1 file is excluded with its path (train said nothing of
 *      either: the loader's counts were kept but never printed).
 *   3. prep: the damaged source is named with its decode errors and lost frames, and the
 *      summary counts it (its copy reads clean, so after prep nothing could tell); the
 *      copy holds every frame the ffmpeg command decodes from the source (ffprobe); the
 *      1x1 file is a bad video with the reason.
 *   4. predict and predict --timeline refuse the 1x1 file with its path (exit 1); the
 *      damaged file's timeline marks the windows holding the frame ffprobe lists as a
 *      packet without a decoded frame, and only them (the errors were on the end line
 *      alone: which windows rest on the damage was not said); an MP4 whose index is at
 *      its end (odd/mmaction2_demo_spatiotemporal_det_6fps.mp4) and a GIF
 *      (odd/moviepy_pigs_in_a_polka_314x273.gif) read from a pipe, which FFmpeg cannot
 *      demux without seeking, fail with a hint to give the file instead (and the MP4's
 *      empty timeline ends with its line: under UBSan it stopped at a memmove from NULL).
 *   5. train counts the training videos shorter than a clip and names the shortest (a
 *      video of 2 frames trained as a still without a word).
 */
#include <sys/stat.h>

#include "tests/apputil.h"
#include "tests/jsonlines.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static int has(const char *path, const char *text) { return vt_test_file_has(path, text) == 1; }

int main(void) {
    const char *bin = vt_test_bin("test_robust_cmds");
    if (!bin)
        return VT_TEST_SKIP;
    int here;
    const char *r = vt_test_robustness_dir(&here);
    char bad[4400], tiny[4400], dark[4400], gif[4400], tail[4400];
    snprintf(bad, sizeof bad, "%s/corrupt/decord_corrupted.mp4", r);
    snprintf(tiny, sizeof tiny, "%s/odd/moviepy_bitmap_1x1.mp4", r);
    snprintf(dark, sizeof dark, "%s/vfr/moviepy_no_duration.webm", r);
    snprintf(gif, sizeof gif, "%s/odd/moviepy_pigs_in_a_polka_314x273.gif", r);
    snprintf(tail, sizeof tail, "%s/odd/mmaction2_demo_spatiotemporal_det_6fps.mp4", r);
    struct stat sb;
    if (!here || stat(bad, &sb) != 0 || stat(tiny, &sb) != 0 || stat(dark, &sb) != 0 ||
        stat(gif, &sb) != 0 || stat(tail, &sb) != 0) {
        printf("test_robust_cmds: no robustness videos at %s: skipped\n", r);
        return VT_TEST_SKIP;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("robust_cmds"));
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 3 --val 1 --test 0 --frames 24 "
                                   "--size 40x32 --no-h264 --threads 1") == 0, "synth");
    TCHECK(vt_test_sh("ln -s '%s' '%s/data/train/move_left/' && ln -s '%s' "
                      "'%s/data/train/move_right/' && ln -s '%s' '%s/data/val/move_left/'",
                      bad, dir, tiny, dir, dark, dir) == 0, "links");

    /* 1. scan */
    TCHECK(vt_test_sh("'%s' scan '%s/data' --threads 1 > '%s/scan.log' 2>&1", bin, dir, dir)
               == 0, "scan");
    char log[4200];
    snprintf(log, sizeof log, "%s/scan.log", dir);
    TCHECK(has(log, "1 unreadable") && has(log, "moviepy_bitmap_1x1.mp4") &&
           has(log, "no picture"), "scan: the 1x1 file is unreadable, named, with the reason");
    TCHECK(has(log, "1 video not checked (1 with only flat frames") &&
           has(log, "val/move_left/moviepy_no_duration.webm"),
           "scan: the leak check names the video it could not sign");

    /* 2. train: 16-frame clips of the 50 indexed frames, 8 a video: nearly every draw
     * (16 starts of 35) covers the lost frame 30, and the draws are fixed by the seed. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --clip 16x32 "
                      "--epochs 1 --batch 4 --clips-per-video 8 --seed 3 --workers 1 "
                      "--no-leak-check > '%s/train.log' 2>&1", bin, dir, dir, dir) == 0,
           "train");
    snprintf(log, sizeof log, "%s/train.log", dir);
    TCHECK(has(log, "decord_corrupted.mp4: a damaged stream: "),
           "train: the damaged video is named");
    TCHECK(has(log, "damaged streams: ") && !has(log, "damaged streams: 0 frame"),
           "train: the frames filled in are counted at the end");
    TCHECK(has(log, "moviepy_bitmap_1x1.mp4: frames of 1x1 pixels"),
           "train: the 1x1 video is named as excluded");

    /* 3. prep */
    TCHECK(vt_test_sh("'%s' prep '%s/data' '%s/prep' --jobs 1 > '%s/prep.log' 2>&1", bin,
                      dir, dir, dir) == 0, "prep");
    snprintf(log, sizeof log, "%s/prep.log", dir);
    TCHECK(has(log, "decord_corrupted.mp4: ") && has(log, "damaged source (") &&
           has(log, "1 damaged source(s)"), "prep: the damaged source is named and counted");
    TCHECK(has(log, "bad video ") && has(log, "moviepy_bitmap_1x1.mp4: frames of 1x1"),
           "prep: the 1x1 file is a bad video with the reason");
    char copy[4400];
    snprintf(copy, sizeof copy, "%s/prep/train/move_left/decord_corrupted.mp4", dir);
    int64_t want = vt_test_ffprobe_frames(bad), got = vt_test_ffprobe_frames(copy);
    TCHECK(want > 0 && got == want, "prep: the copy has %lld frames, ffmpeg decodes %lld",
           (long long)got, (long long)want);

    /* 4. predict, plain and --timeline: every video failed, exit 1, the reason said */
    TCHECK(vt_test_sh("'%s' predict '%s/run' '%s' > '%s/pred.log' 2>&1", bin, dir, tiny, dir)
               == 1, "predict on the 1x1 file: exit 1");
    snprintf(log, sizeof log, "%s/pred.log", dir);
    TCHECK(has(log, "moviepy_bitmap_1x1.mp4") && has(log, "no picture"),
           "predict: the 1x1 file named with the reason");
    TCHECK(vt_test_sh("'%s' predict '%s/run' '%s' --timeline > '%s/tl.log' 2>&1", bin, dir,
                      tiny, dir) == 1, "predict --timeline on the 1x1 file: exit 1");
    snprintf(log, sizeof log, "%s/tl.log", dir);
    TCHECK(has(log, "moviepy_bitmap_1x1.mp4") && has(log, "no picture"),
           "predict --timeline: the 1x1 file named with the reason");
    /* The damaged file's timeline: the windows that hold the lost frame's time, and only
     * they, say so. The truth: the packet time ffprobe lists with no decoded frame. */
    TCHECK(vt_test_sh("cd '%s' && export LC_ALL=C && ffprobe -v error -select_streams v:0 "
                      "-show_entries packet=pts_time -of csv=p=0 '%s' | cut -d, -f1 | grep . | "
                      "sort > pkts.txt && ffprobe -v error -select_streams v:0 -show_entries "
                      "frame=pts_time -of csv=p=0 '%s' 2>/dev/null | cut -d, -f1 | grep . | "
                      "sort > frames.txt && comm -23 pkts.txt frames.txt > lost.txt", dir, bad,
                      bad) == 0, "ffprobe");
    char lostp[4200];
    snprintf(lostp, sizeof lostp, "%s/lost.txt", dir);
    char *lost = vt_test_slurp(lostp, NULL);
    double lt = lost ? atof(lost) : -1;
    TCHECK(lost && lt > 0 && !strchr(lost, ',') && strchr(lost, '\n') == strrchr(lost, '\n'),
           "one lost frame, at %s", lost ? lost : "(none)");
    free(lost);
    TCHECK(vt_test_sh("'%s' predict '%s/run' '%s' --timeline --json > '%s/tlbad.jsonl' "
                      "2> '%s/tlbad.log'", bin, dir, bad, dir, dir) == 0,
           "timeline of the damaged file");
    snprintf(log, sizeof log, "%s/tlbad.jsonl", dir);
    int nw = 0, hit = 0;
    cJSON **wl = vt_read_lines(log, &nw);
    for (int i = 0; i < nw; i++) {
        double st = cJSON_GetObjectItem(wl[i], "start")->valuedouble;
        double en = cJSON_GetObjectItem(wl[i], "end")->valuedouble;
        const cJSON *de = cJSON_GetObjectItem(wl[i], "decode_errors");
        int holds = st <= lt && lt < en;
        hit += holds;
        TCHECK(cJSON_IsNumber(de) && (de->valuedouble > 0) == holds,
               "window %.2f-%.2f s: decode_errors %g, the lost frame at %.3f s %s", st, en,
               cJSON_IsNumber(de) ? de->valuedouble : -1, lt, holds ? "in it" : "not in it");
    }
    vt_free_lines(wl, nw);
    TCHECK(nw >= 4 && hit == 2, "%d windows, %d of them hold the lost frame", nw, hit);
    /* An MP4 whose index is at its end, from a pipe: no frame ever comes, the timeline
     * ends empty (under UBSan that run stopped at a memmove from NULL: no end line) */
    TCHECK(vt_test_sh("'%s' predict '%s/run' - --timeline < '%s' > '%s/tail.log' 2>&1", bin,
                      dir, tail, dir) == 1, "predict --timeline on an end-indexed MP4 from a "
                                            "pipe: exit 1");
    snprintf(log, sizeof log, "%s/tail.log", dir);
    TCHECK(has(log, "read from a pipe, which cannot seek") && has(log, "timeline -: 0 frames") &&
           !has(log, "runtime error"), "predict --timeline: the end-indexed MP4 from a pipe "
                                       "gets the hint and an end line");
    /* A GIF read from a pipe: FFmpeg's GIF demuxer seeks (the ffmpeg command fails too) */
    TCHECK(vt_test_sh("'%s' predict '%s/run' - --timeline < '%s' > '%s/gif.log' 2>&1", bin,
                      dir, gif, dir) == 1, "predict --timeline on a GIF from a pipe: exit 1");
    snprintf(log, sizeof log, "%s/gif.log", dir);
    TCHECK(has(log, "read from a pipe, which cannot seek"),
           "predict --timeline: a GIF from a pipe gets the hint (FFmpeg's reason alone was "
           "'Input/output error')");

    /* 5. train on a video of 2 frames, a clip spanning 22 (8 frames at stride 3): its
     * clips repeat its frames, a still whatever its class; it trained without a word.
     * Counted, the shortest named with its frame count (ffmpeg writes exactly 2). */
    char sd[4300];
    snprintf(sd, sizeof sd, "%s/short", dir);
    TCHECK(vt_test_sh("mkdir -p '%s'", sd) == 0 &&
               vt_test_synth(bin, sd, "--classes 2 --train 2 --val 1 --test 0 --frames 24 "
                                      "--size 40x32 --no-h264 --threads 1") == 0 &&
               vt_test_sh("ffmpeg -v error -f lavfi -i testsrc2=size=40x32:rate=25 -frames:v 2 "
                          "-c:v mpeg4 '%s/data/train/move_left/two.mp4'", sd) == 0,
           "a dataset with a 2-frame video");
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run' --clip 8x32 --stride 3 --epochs 1 "
                      "--max-steps 1 --batch 2 --workers 1 --no-leak-check -q > '%s/train.log' "
                      "2>&1", bin, sd, sd, sd) == 0, "train on it");
    snprintf(log, sizeof log, "%s/train.log", sd);
    TCHECK(has(log, "shorter than a clip (8 frames at stride 3: 22): 1 training video") &&
               has(log, "the shortest train/move_left/two.mp4, 2 frames"),
           "train: the 2-frame video is not counted as shorter than a clip (see %s)", log);
    return vt_test_done("test_robust_cmds");
}
