/*
 * test_clip_fps.c: `train --clip-fps F` — the stride counts frames at F a second, each
 * video's scaled to its own rate (pipeline/data/sample.h vt_clip_cfg_at_fps), so a clip
 * spans one time whatever the video's rate. The truth is the ffmpeg command: f60.avi is
 * 50 frames of a test pattern at 60 fps, lossless (FFV1 in AVI: times in frames), and
 * f30.avi its even frames at 30 fps (select), each f60's frame 2k (checked by framemd5).
 *   - training (the loader): with --clip-fps 30 --stride 2 a 60 fps video's clips take
 *     stride 4, a 30 fps one's 2 (the strides --dump records); without it, 2 for both;
 *   - predict and predict --timeline (eval_clips, the timeline) of the run: f60 and f30
 *     give the same probabilities, to the bit (their clips hold the same frames); a run
 *     without --clip-fps does not (f60's clip spans half the time);
 *   - the frame-rate warning knows the run's --clip-fps: none for f60 or f30, one for a
 *     10 fps video (stride 2 at 30 fps is 1 at 15: at 10 the clip spans 1.5x the time).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"
#include "tests/jsonlines.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *bin, *dir;

/* predict RUN's first class probability for each of the files, from --json. */
static void probs(const char *run, const char *args, const char *files, double *p, int n,
                  const char *log) {
    char out[4400];
    snprintf(out, sizeof out, "%s/%s.json", dir, log);
    TCHECK(vt_test_sh("'%s' predict '%s/%s' %s --json --clips-per-video 1 %s > '%s' 2> "
                      "'%s/%s.err'", bin, dir, run, files, args, out, dir, log) == 0,
           "predict %s (%s/%s.err)", run, dir, log);
    int nl = 0;
    cJSON **l = NULL;
    cJSON *j = NULL;
    if (strstr(args, "--timeline")) { /* one JSON line a window: the first of each file */
        l = vt_read_lines(out, &nl);
        for (int i = 0, k = 0; i < nl && k < n; i++)
            if (cJSON_GetObjectItem(l[i], "start") &&
                cJSON_GetObjectItem(l[i], "start")->valuedouble == 0)
                p[k++] = vt_prob_of(l[i], "a");
    } else {
        j = vt_test_read_json(out);
        for (int k = 0; k < n; k++)
            p[k] = vt_prob_of(cJSON_GetArrayItem(j, k), "a");
    }
    vt_free_lines(l, nl);
    cJSON_Delete(j);
}

int main(void) {
    bin = vt_test_bin("test_clip_fps");
    if (!bin)
        return VT_TEST_SKIP;
    dir = vt_test_dir("clip_fps");
    /* two classes, each a 60 fps file and its 30 fps copy (b mirrored) */
    TCHECK(vt_test_sh("cd '%s' && rm -rf data && mkdir -p data/a data/b && for c in a b; do "
                      "f=testsrc2=size=64x48:rate=60; [ $c = b ] && f=$f,hflip; "
                      "ffmpeg -nostdin -v error -y -f lavfi -i $f -frames:v 50 -c:v ffv1 "
                      "data/$c/f60.avi && ffmpeg -nostdin -v error -y -i data/$c/f60.avi -vf "
                      "\"select=not(mod(n\\,2)),setpts=N/(30*TB)\" -r 30 -c:v ffv1 "
                      "data/$c/f30.avi || exit 1; done && "
                      "ffmpeg -nostdin -v error -y -f lavfi -i testsrc2=size=64x48:rate=10 "
                      "-frames:v 9 -c:v ffv1 f10.avi", dir) == 0, "ffmpeg");
    /* the truth: f30's frame k is f60's frame 2k */
    TCHECK(vt_test_sh("cd '%s/data/a' && ffmpeg -nostdin -v error -i f60.avi -f framemd5 - | "
                      "grep -v '^#' | awk -F, 'NR %% 2 == 1 {print $6}' > 60.md5 && "
                      "ffmpeg -nostdin -v error -i f30.avi -f framemd5 - | grep -v '^#' | "
                      "awk -F, '{print $6}' > 30.md5 && test $(wc -l < 30.md5) = 25 && "
                      "cmp -s 60.md5 30.md5 && rm 60.md5 30.md5", dir) == 0,
           "f30.avi's frames are f60.avi's even ones");
    const char *common = "--model tiny --clip 4x32 --stride 2 --batch 4 --epochs 1 --workers 1 "
                         "--val-split 0 --precise-bn 0 --quiet --seed 3";
    for (int r = 0; r < 2; r++) {
        TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/run%d' --force %s %s --dump "
                          "'%s/dump%d' > '%s/train%d.log' 2>&1", bin, dir, dir, r, common,
                          r ? "" : "--clip-fps 30", dir, r, dir, r) == 0,
               "train %d (%s/train%d.log)", r, dir, r);
        /* the strides the loader drew: videos 1 and 3 (a/f60, b/f60) twice the others' */
        char p[4400];
        snprintf(p, sizeof p, "%s/dump%d/train.jsonl", dir, r);
        int nl;
        cJSON **l = vt_read_lines(p, &nl);
        int clips = 0, bad = 0;
        for (int i = 0; i < nl; i++) {
            const cJSON *v = cJSON_GetObjectItem(l[i], "videos"), *w = cJSON_GetObjectItem(l[i], "where");
            for (int k = 0; k < cJSON_GetArraySize(v); k++) {
                int vid = cJSON_GetArrayItem(v, k)->valueint;
                int stride = cJSON_GetArrayItem(cJSON_GetArrayItem(w, k), 5)->valueint;
                bad += stride != (r == 0 && vid % 2 ? 4 : 2);
                clips++;
            }
        }
        vt_free_lines(l, nl);
        /* a dataset of 30 and 60 fps says what that does to clips, unless --clip-fps */
        snprintf(p, sizeof p, "%s/train%d.log", dir, r);
        TCHECK(vt_test_file_has(p, "frame rates 30-60 fps: a clip of the fastest video spans "
                                   "2.0x less time") == (r == 1),
               "run %d: the frame rates' line (%s)", r, p);
        TCHECK(clips >= 4 && bad == 0, "run %d: %d of %d training clips at another stride than "
               "the video's rate gives", r, bad, clips);
    }
    char files[9000];
    snprintf(files, sizeof files, "'%s/data/a/f60.avi' '%s/data/a/f30.avi'", dir, dir);
    double p[2] = {-1, -2}, q[2] = {-1, -2};
    probs("run0", "", files, p, 2, "p0");
    TCHECK(p[0] >= 0 && p[0] == p[1], "--clip-fps 30: predict f60 %.9g, f30 %.9g", p[0], p[1]);
    probs("run0", "--timeline", files, q, 2, "t0");
    TCHECK(q[0] >= 0 && q[0] == q[1] && q[0] == p[0],
           "--clip-fps 30: --timeline f60 %.9g, f30 %.9g (predict %.9g)", q[0], q[1], p[0]);
    probs("run1", "", files, p, 2, "p1");
    TCHECK(p[0] >= 0 && p[1] >= 0 && p[0] != p[1],
           "without --clip-fps: predict f60 %.9g = f30 %.9g (the clips should differ)", p[0],
           p[1]);
    char log[4400];
    snprintf(log, sizeof log, "%s/p0.err", dir);
    TCHECK(!vt_test_file_has(log, "warning"), "--clip-fps 30: a warning for f60 or f30 (%s)", log);
    snprintf(log, sizeof log, "%s/p1.err", dir);
    TCHECK(vt_test_file_has(log, "1 of 2 videos is at a frame rate outside the 30-60 fps") ==
               0, "without --clip-fps, trained on 30 and 60 fps: f30 and f60 are inside (%s)",
           log);
    snprintf(files, sizeof files, "'%s/f10.avi'", dir);
    probs("run0", "", files, p, 1, "p10");
    snprintf(log, sizeof log, "%s/p10.err", dir);
    TCHECK(vt_test_file_has(log, "1 of 1 video is at a frame rate the run's --clip-fps 30 "
                                 "cannot follow at stride 2") &&
               vt_test_file_has(log, "spans 1.5x more time"),
           "--clip-fps 30: the 10 fps video is warned about (%s)", log);
    return vt_test_done("test_clip_fps");
}
