/*
 * test_prep.c: `vidtrain prep SRC DST` end to end, against the ffprobe command as the
 * outside truth. Sources made with the ffmpeg command, in class folders with UCF101-style
 * list files: a 640x360 video with an audio track, one with a 90-degree display matrix,
 * a portrait AVI, a variable-frame-rate MKV, a WebM (renamed to .mp4: the list files
 * must follow), a truncated MP4, an audio-only file and a non-video file. Checked: every
 * output's short side, even sides, rotation applied (sides swapped, no display matrix),
 * video only, keyframe interval <= G, frame counts (kept without --fps; duration x fps
 * within one frame with it), the bad files reported and counted, the manifest's rows,
 * sizes and SHA-256 (sha256sum), that scan and a one-epoch train read the mirror, that a
 * second run skips everything, and that a run killed mid-way leaves no partial file
 * under a final name and completes on rerun.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "pipeline/data/prep.h"
#include "tests/apputil.h"
#include "tests/mediautil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define S 64   /* short side: small, so the test is quick; any even S is the same code */
#define G 8    /* keyframe interval */
#define FPS 12 /* the --fps run */

static char src[4096], bin_path[4096];

static int has_libx264(void) {
    return system("ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx264") == 0;
}

/* Width, height, stream count, audio streams and display-matrix side data of a file. */
typedef struct probe {
    int w, h, streams, audio, matrix;
    int64_t frames;
    double duration;
    int max_key_gap;   /* most frames from one keyframe to the next (or to the end) */
} probe;

static int probe_file(probe *pr, const char *file) {
    char cmd[8400], line[512];
    memset(pr, 0, sizeof *pr);
    snprintf(cmd, sizeof cmd, "ffprobe -v error -select_streams v:0 -show_entries "
             "stream=width,height -of csv=p=0:s=x '%s'", file);
    if (vt_test_sh_line(line, sizeof line, "%s", cmd) != 0 ||
        sscanf(line, "%dx%d", &pr->w, &pr->h) != 2)
        return -1;
    snprintf(cmd, sizeof cmd, "ffprobe -v error -show_entries stream=codec_type -of csv=p=0 "
             "'%s' | wc -l", file);
    vt_test_sh_line(line, sizeof line, "%s", cmd);
    pr->streams = atoi(line);
    snprintf(cmd, sizeof cmd, "ffprobe -v error -show_entries stream=codec_type -of csv=p=0 "
             "'%s' | grep -c audio", file);
    vt_test_sh_line(line, sizeof line, "%s", cmd);
    pr->audio = atoi(line);
    snprintf(cmd, sizeof cmd, "ffprobe -v error -show_streams '%s' | grep -c -i "
             "'display matrix\\|rotation'", file);
    vt_test_sh_line(line, sizeof line, "%s", cmd);
    pr->matrix = atoi(line);
    snprintf(cmd, sizeof cmd, "ffprobe -v error -show_entries format=duration -of csv=p=0 '%s'",
             file);
    vt_test_sh_line(line, sizeof line, "%s", cmd);
    pr->duration = atof(line);
    /* Key frames by decoding every frame: the gap is counted in frames, as a seek that
     * lands on the keyframe before a clip decodes forward. */
    snprintf(cmd, sizeof cmd, "ffprobe -v error -select_streams v:0 -show_entries "
             "frame=key_frame -of csv=p=0 '%s'", file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int gap = 0;
    while (fgets(line, sizeof line, p)) {
        /* One "0" or "1" per frame; a frame with side data (x264's SEI) adds a line of
         * its own, which is not a frame. */
        if ((line[0] != '0' && line[0] != '1') || (line[1] && !strchr(",\n", line[1])))
            continue;
        if (line[0] == '1') {
            if (gap > pr->max_key_gap)
                pr->max_key_gap = gap;
            gap = 0;
        }
        gap++;
        pr->frames++;
    }
    if (gap > pr->max_key_gap)
        pr->max_key_gap = gap;
    pclose(p);
    return 0;
}

/* The manifest row of path (its line, or NULL). */
static char *manifest_row(const char *manifest, const char *path) {
    size_t n = strlen(path);
    for (const char *l = manifest; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (!strncmp(l, path, n) && l[n] == ',') {
            size_t len = strcspn(l, "\n");
            char *r = malloc(len + 1);
            memcpy(r, l, len);
            r[len] = 0;
            return r;
        }
    return NULL;
}

static void make_sources(int x264) {
    const char *venc = x264 ? "-c:v libx264 -preset ultrafast" : "-c:v mpeg4 -q:v 4";
    TCHECK(vt_test_sh("mkdir -p '%s/a' '%s/b' && cd '%s' && "
        /* 640x360 with AAC audio, 30 fps, 2 s */
        "ffmpeg -v error -y -f lavfi -i testsrc2=s=640x360:r=30:d=2 -f lavfi -i sine=d=2 "
        "%s -g 60 -c:a aac -shortest a/tone.mp4 && "
        /* 320x240 coded, display matrix: 90 degrees (the rotate tag of a stream copy on
         * FFmpeg 5; -display_rotation on 6 and later) */
        "ffmpeg -v error -y -f lavfi -i testsrc2=s=320x240:r=25:d=2 %s a/rot.src.mp4 && "
        "if ffmpeg -hide_banner -h full 2>/dev/null | grep -q -- -display_rotation; then "
        "ffmpeg -v error -y -display_rotation:v:0 -90 -i a/rot.src.mp4 -c copy a/rot90.mp4; "
        "else ffmpeg -v error -y -i a/rot.src.mp4 -c copy -metadata:s:v:0 rotate=270 "
        "a/rot90.mp4; fi && rm a/rot.src.mp4 && "
        /* portrait MPEG-4 in AVI */
        "ffmpeg -v error -y -f lavfi -i testsrc2=s=240x320:r=25:d=2 -c:v mpeg4 -q:v 4 "
        "b/portrait.avi && "
        /* VFR: 30 fps for one second, then 15 fps: 45 frames over 2 s */
        "ffmpeg -v error -y -f lavfi -i testsrc2=s=320x240:r=30:d=2 "
        "-vf \"select='lt(n\\,30)+not(mod(n\\,2))'\" -vsync vfr %s b/vfr.mkv && "
        /* WebM: its container cannot hold H.264, so the output is b/small.mp4 */
        "ffmpeg -v error -y -f lavfi -i testsrc2=s=160x120:r=25:d=1 -c:v libvpx-vp9 "
        "-deadline realtime b/small.webm && "
        /* truncated (the index, at the end of the file, is cut off) and audio-only */
        "head -c 20000 a/tone.mp4 > b/trunc.mp4 && "
        "ffmpeg -v error -y -f lavfi -i sine=d=1 -c:a aac b/audio_only.mp4 && "
        "echo 'not a video' > b/readme.md",
        src, src, src, venc, venc, venc) == 0, "making the sources with ffmpeg");
    /* UCF101-style lists at the top level (files there are not class folders). */
    vt_test_write_file(src, "classInd.txt", "1 a\n2 b\n");
    vt_test_write_file(src, "trainlist01.txt", "a/tone.mp4 1\nb/portrait.avi 2\nb/small.webm 2\n");
    vt_test_write_file(src, "testlist01.txt", "a/rot90.mp4\nb/vfr.mkv\n");
}

/* The outputs of a good run: name, source, expected width x height at short side S. */
typedef struct expect {
    const char *out, *source;
    int w, h;
} expect;

static const expect good[] = {
    {"a/tone.mp4", "a/tone.mp4", 114, S},      /* 640x360: 113.8 -> 114 */
    /* shown 240x320: 85.3 -> the nearest even 86 (the whole picture resampled to it, so
     * the copy keeps the source's aspect within a pixel: test_prep_frames.c) */
    {"a/rot90.mp4", "a/rot90.mp4", S, 86},
    {"b/portrait.avi", "b/portrait.avi", S, 86},
    {"b/vfr.mkv", "b/vfr.mkv", 86, S},
    {"b/small.mp4", "b/small.webm", 86, S},    /* 160x120: 85.3 -> 86 */
};
#define NGOOD ((int)(sizeof good / sizeof good[0]))

static void check_outputs(const char *dst, double fps) {
    char file[8400], srcfile[8400];
    for (int i = 0; i < NGOOD; i++) {
        snprintf(file, sizeof file, "%s/%s", dst, good[i].out);
        snprintf(srcfile, sizeof srcfile, "%s/%s", src, good[i].source);
        probe pr, ps;
        TCHECK(probe_file(&pr, file) == 0, "%s probes", file);
        TCHECK(probe_file(&ps, srcfile) == 0, "%s probes", srcfile);
        TCHECK(pr.w == good[i].w && pr.h == good[i].h, "%s: %dx%d, expected %dx%d", file,
               pr.w, pr.h, good[i].w, good[i].h);
        TCHECK((pr.w < pr.h ? pr.w : pr.h) == S && pr.w % 2 == 0 && pr.h % 2 == 0,
               "%s: short side %d and even sides (%dx%d)", file, S, pr.w, pr.h);
        TCHECK(pr.matrix == 0, "%s: no rotation side data left", file);
        TCHECK(pr.streams == 1 && pr.audio == 0, "%s: one video stream, no audio (%d streams)",
               file, pr.streams);
        TCHECK(pr.max_key_gap <= G, "%s: keyframe every <= %d frames, found a gap of %d",
               file, G, pr.max_key_gap);
        if (fps > 0) {
            /* Duration x fps within one frame: the source's duration, by its last frame's
             * end, and the ticks a frame owns are rounded to the nearest (one frame). */
            double want = ps.duration * fps;
            TCHECK(fabs((double)pr.frames - want) <= 1.0, "%s: %lld frames at %g fps, want "
                   "%.1f (%.3f s)", file, (long long)pr.frames, fps, want, ps.duration);
        } else {
            TCHECK(pr.frames == ps.frames, "%s: %lld frames, the source has %lld", file,
                   (long long)pr.frames, (long long)ps.frames);
            /* Timestamps kept: the same duration within one frame of the source's slowest
             * rate (VFR: 1/15 s). */
            TCHECK(fabs(pr.duration - ps.duration) < 1.0 / 15 + 1e-3, "%s: %.3f s, source %.3f s",
                   file, pr.duration, ps.duration);
        }
    }
}

static void check_manifest(const char *dst) {
    char path[8400], cmd[8400], line[256];
    snprintf(path, sizeof path, "%s/prep-manifest.csv", dst);
    char *m = vt_test_slurp(path, NULL);
    TCHECK(m && !strncmp(m, "path,source,duration_s,frames,bytes,sha256,status,damage\n", 57),
           "manifest header");
    int rows = 0;
    for (char *c = m; c && *c; c++)
        rows += *c == '\n';
    TCHECK(rows == 1 + NGOOD + 2, "manifest: header + %d good + 2 bad rows, got %d lines",
           NGOOD, rows);
    for (int i = 0; i < NGOOD && m; i++) {
        char *r = manifest_row(m, good[i].out);
        TCHECK(r != NULL, "manifest row for %s", good[i].out);
        if (!r)
            continue;
        char fpath[200] = "", fsrc[8400] = "", fsha[80] = "", fstat[64] = "";
        double dur = 0;
        long long frames = 0, bytes = 0;
        int got = sscanf(r, "%199[^,],%8399[^,],%lf,%lld,%lld,%79[^,],%63[^,\n]", fpath, fsrc,
                         &dur, &frames, &bytes, fsha, fstat);
        /* a clean source: the damage column (the last) empty */
        TCHECK(got == 7 && !strcmp(fstat, "ok") && strstr(r, ",ok,") && r[strlen(r) - 1] == ',',
               "%s row parses, says ok, no damage: %s", good[i].out, r);
        snprintf(cmd, sizeof cmd, "sha256sum '%s/%s' | cut -d' ' -f1", dst, good[i].out);
        vt_test_sh_line(line, sizeof line, "%s", cmd);
        TCHECK(!strcmp(line, fsha), "%s: sha256 %s, sha256sum says %s", good[i].out, fsha, line);
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dst, good[i].out);
        TCHECK(stat(path, &st) == 0 && st.st_size == bytes, "%s: %lld bytes in the manifest",
               good[i].out, bytes);
        snprintf(path, sizeof path, "%s/%s", dst, good[i].out);
        TCHECK(frames == vt_test_ffprobe_frames(path), "%s: manifest frames %lld", good[i].out,
               frames);
        TCHECK(dur > 0.9 && dur < 2.1, "%s: source duration %.3f s", good[i].out, dur);
        TCHECK(strstr(fsrc, good[i].source) != NULL, "%s: source %s", good[i].out, fsrc);
        free(r);
    }
    const char *bad[] = {"b/trunc.mp4", "b/audio_only.mp4"};
    for (int i = 0; i < 2 && m; i++) {
        char *r = manifest_row(m, bad[i]);
        TCHECK(r && strstr(r, ",bad: "), "%s is bad in the manifest: %s", bad[i], r ? r : "none");
        free(r);
        snprintf(path, sizeof path, "%s/%s", dst, bad[i]);
        TCHECK(access(path, F_OK) != 0, "no output for the bad %s", bad[i]);
    }
    free(m);
}

/* make_media's files made (0; -1 when they cannot be), and the SRC and DST folders of one
 * check, DIR/<tag>src and DIR/<tag>dst (4300 bytes each). */
static int media_dirs(const char *dir, const char *tag, char *sdir, char *ddir) {
    if (vt_test_media_make())
        return -1;
    snprintf(sdir, 4300, "%s/%ssrc", dir, tag);
    snprintf(ddir, 4300, "%s/%sdst", dir, tag);
    return 0;
}

/* A clean MPEG-2 program stream with B-frames, whose muxer left some I/P packets without a
 * pts (make_media's mpeg2.mpg): their dts once stood in for their time, so prep called it
 * damaged ("1 decoded out of order and left out") and dropped frames. Every frame is
 * written, and no damage is said. And a raw H.264 stream beside it, and two transport
 * streams joined with cat (make_media's joined.ts, times that start again at frame 24:
 * counted from the top): the copy holds all 48 frames at times that grow, and vidtrain
 * reads it by time. */
static void clean_mpeg2(const char *bin, const char *dir) {
    char sdir[4300], ddir[4300], p[8800];
    if (media_dirs(dir, "m2", sdir, ddir))
        return;
    vt_test_media_put(sdir, "a/m.mpg", "mpeg2.mpg");
    vt_test_media_put(sdir, "a/r.h264", "raw.h264");
    vt_test_media_put(sdir, "a/j.ts", "joined.ts");
    TCHECK(vt_test_sh("'%s' prep '%s' '%s' --jobs 1 > '%s/m2.out' 2>&1", bin, sdir, ddir, dir)
               == 0, "prep of an MPEG-2 .mpg");
    snprintf(p, sizeof p, "%s/m2.out", dir);
    TCHECK(!vt_test_file_has(p, "damaged"), "a clean MPEG-2 .mpg is not called damaged");
    snprintf(p, sizeof p, "%s/a/m.mp4", ddir);
    long long written = vt_test_ffprobe_frames(p);
    snprintf(p, sizeof p, "%s/a/m.mpg", sdir);
    long long src = vt_test_ffprobe_frames(p);
    TCHECK(src == 48 && written == src, "every frame of the .mpg copied: %lld of %lld", written,
           src);
    /* a raw stream's container keeps no timestamps: its copy is an .mp4, not a raw .h264 */
    snprintf(p, sizeof p, "%s/a/r.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 48, "a raw .h264 copied to an .mp4 (%s)", p);
    snprintf(p, sizeof p, "%s/a/r.h264", ddir);
    TCHECK(access(p, F_OK) != 0, "no raw .h264 copy");
    snprintf(p, sizeof p, "%s/a/j.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 48, "the joined .ts copied whole (%s)", p);
    TCHECK(vt_test_sh("'%s' bench decode '%s' --probe 2>&1 | grep -q 'frames=48.*counted=0'",
                      bin, p) == 0, "the joined .ts's copy is read by time (%s)", p);
}

/* A source with non-square pixels (a DVD's 32:27, 160x120 here: it shows 128:81): the copy
 * keeps its shape, so a player shows it as it shows the source (it was tagged square and
 * showed 4:3, squeezed). ffprobe's display aspect of both; scan counts such videos. */
static void pixel_shape(const char *bin, const char *dir) {
    char sdir[4300], ddir[4300], a[256] = {0}, b[256] = {0};
    if (media_dirs(dir, "sar", sdir, ddir))
        return;
    TCHECK(vt_test_sh("rm -rf '%s' '%s' && mkdir -p '%s/a' && ffmpeg -nostdin -v error -f lavfi -i "
                      "testsrc2=size=160x120:rate=25:duration=0.4 -vf setsar=32/27 -c:v libx264 "
                      "-pix_fmt yuv420p '%s/a/s.mp4' && '%s' prep '%s' '%s' --short-side 64 "
                      "--jobs 1 > '%s/sar.out' 2>&1", sdir, ddir, sdir, sdir, bin, sdir, ddir,
                      dir) == 0, "prep of a 32:27 source");
    vt_test_sh_line(a, sizeof a, "ffprobe -v error -show_entries stream=display_aspect_ratio -of "
                    "csv=p=0 '%s/a/s.mp4'", sdir);
    vt_test_sh_line(b, sizeof b, "ffprobe -v error -show_entries stream=width,display_aspect_ratio "
                    "-of csv=p=0 '%s/a/s.mp4'", ddir);
    TCHECK(!strcmp(a, "128:81") && !strcmp(b, "86,128:81"),
           "the copy shows as the source: source %s, copy (width, aspect) %s", a, b);
    TCHECK(vt_test_sh("'%s' scan '%s' --no-leaks 2>&1 | grep -q '^pixel shape  1 with non-square "
                      "pixels'", bin, sdir) == 0, "scan counts the video with non-square pixels");
}

/* A damaged H.264 source whose decoder hands two frames out after later ones (make_media's
 * hostile/corrupt_mid.mp4: 48 indexed, 39 decode, pts 10752 and 11776 come after 16384 and
 * 17408): the copy is written in order, so those two are left out, and the damage line
 * says so; frames written + never decoded + left out = the source's index. */
static void damaged_order(const char *bin, const char *dir) {
    char sdir[4300], ddir[4300], p[8800];
    if (media_dirs(dir, "d", sdir, ddir))
        return;
    vt_test_media_put(sdir, "a/corrupt_mid.mp4", "hostile/corrupt_mid.mp4");
    TCHECK(vt_test_sh("'%s' prep '%s' '%s' --jobs 1 > '%s/dmg.out' 2>&1", bin, sdir, ddir, dir)
               == 0, "prep of a damaged source");
    snprintf(p, sizeof p, "%s/dmg.out", dir);
    char *o = vt_test_slurp(p, NULL);
    long long errs = -1, never = -1, of = -1, dis = 0;
    const char *d = o ? strstr(o, "damaged source (") : NULL;
    int got = d ? sscanf(d, "damaged source (%lld decode error(s), %lld of %lld frames never "
                            "decoded, %lld decoded out of order", &errs, &never, &of, &dis) : 0;
    snprintf(p, sizeof p, "%s/a/corrupt_mid.mp4", ddir);
    long long written = vt_test_ffprobe_frames(p);
    TCHECK(got == 4 && dis > 0 && written + never + dis == of,
           "the damage line counts every frame: %lld written + %lld never decoded + %lld out "
           "of order, of %lld (%s)", written, never, dis, of, d ? d : "no damage line");
    free(o);
    /* the manifest row says it too (its damage column) */
    snprintf(p, sizeof p, "%s/prep-manifest.csv", ddir);
    char *m = vt_test_slurp(p, NULL), want[256];
    snprintf(want, sizeof want, ",ok,%lld decode errors; %lld of %lld frames never decoded; %lld "
             "out of order (left out)\n", errs, never, of, dis);
    TCHECK(m && strstr(m, want), "the manifest's damage column: %s", m ? m : "(none)");
    free(m);
    /* a manifest an earlier vidtrain wrote (no damage column) is read: the copy is done */
    TCHECK(vt_test_sh("cd '%s' && sed -i -e '1s/,damage$//' -e '2,$s/,[^,]*$//' "
                      "prep-manifest.csv && '%s' prep '%s' '%s' --jobs 1 > '%s/dmg2.out' 2>&1",
                      ddir, bin, sdir, ddir, dir) == 0, "prep again over a 7-column manifest");
    snprintf(p, sizeof p, "%s/dmg2.out", dir);
    TCHECK(vt_test_file_has(p, "0 written, 1 done before"), "the old manifest's row was read "
           "(see %s)", p);
}

/* Each frame's presentation time in file, from its first, as ffprobe gives them
 * (best_effort_timestamp_time, the time the ffmpeg command orders frames by): up to max. */
static int probe_times(const char *file, double *t, int max) {
    char cmd[8600], line[256];
    snprintf(cmd, sizeof cmd, "ffprobe -v error -select_streams v:0 -show_entries "
             "frame=best_effort_timestamp_time -of csv=p=0 '%s'", file);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    int n = 0;
    while (fgets(line, sizeof line, p))
        if ((line[0] >= '0' && line[0] <= '9') && n < max) /* a side-data line is no frame */
            t[n++] = atof(line);
    pclose(p);
    for (int i = n - 1; i >= 0; i--)
        t[i] -= t[0];
    return n;
}

/* Frames that share a timestamp (make_media's dups.ts: B-frames in MPEG-TS whose VFR times
 * the 1/25 time base rounded, so pairs share a pts; the loader reads every one of them):
 * the copy keeps every frame, each at its source time within half a frame (the second of
 * a pair one tick later). Prep once left the second of each pair out, silently: 16 of 50
 * frames of such a file were lost and every later frame of the copy was a later frame of
 * the source. */
static void shared_times(const char *bin, const char *dir) {
    char sdir[4300], ddir[4300], p[8800], c[8800];
    if (media_dirs(dir, "dup", sdir, ddir))
        return;
    vt_test_media_put(sdir, "a/d.ts", "dups.ts");
    TCHECK(vt_test_sh("'%s' prep '%s' '%s' --jobs 1 > '%s/dups.out' 2>&1", bin, sdir, ddir, dir)
               == 0, "prep of a TS whose frames share timestamps");
    snprintf(p, sizeof p, "%s/dups.out", dir);
    TCHECK(!vt_test_file_has(p, "damaged"), "shared timestamps are no damage (see %s)", p);
    snprintf(p, sizeof p, "%s/a/d.ts", sdir);
    snprintf(c, sizeof c, "%s/a/d.mp4", ddir);
    enum { MAXF = 256 };
    static double ts[MAXF], tc[MAXF];
    int ns = probe_times(p, ts, MAXF), nc = probe_times(c, tc, MAXF);
    int shared = 0;
    for (int i = 1; i < ns; i++) /* one 1/90000 s tick apart in ffprobe's best effort */
        shared += ts[i] - ts[i - 1] < 0.001;
    TCHECK(ns > 8 && shared > 0, "dups.ts has frames that share a time: %d of %d", shared, ns);
    TCHECK(ns == vt_test_ffprobe_frames(p), "ffprobe lists every frame it counts (%d)", ns);
    TCHECK(nc == ns, "every frame copied: %d of %d", nc, ns);
    /* Half a frame at 25 fps: a copy frame nearer another source frame's time is misplaced;
     * the shared ones are 1/90000 s apart in the copy. */
    int off = 0;
    while (off < ns && off < nc && fabs(tc[off] - ts[off]) < 0.02)
        off++;
    TCHECK(off == ns, "every frame at its source's time: frame %d of the copy at %.4f s, its "
           "source's at %.4f s", off, off < nc ? tc[off] : -1.0, off < ns ? ts[off] : -1.0);
}

/* A container whose tag table lists a codec its muxer then refuses: FLV and MPEG-4 part 2
 * (`--codec mpeg4`, and prep's fallback without libx264). The copy of an .flv kept its name,
 * the header failed with EINVAL, and prep took that for DST failing: the run stopped at
 * that file, exit 1, every later video unwritten. Now the copy goes to .mp4 (as the
 * ffmpeg command would refuse the .flv too) and is written whole. */
static void refused_codec(const char *bin, const char *dir) {
    if (vt_test_media_make())
        return;
    char ext[16];
    vt_prep_out_ext(ext, sizeof ext, "a/x.flv", "mpeg4");
    TCHECK(!strcmp(ext, "mp4"), "an .flv's MPEG-4 copy: .%s", ext);
    vt_prep_out_ext(ext, sizeof ext, "a/x.flv", "h264");
    TCHECK(!strcmp(ext, "flv") || !vt_prep_codec_available("h264"), "an .flv's H.264 copy: .%s",
           ext);
    vt_prep_out_ext(ext, sizeof ext, "a/x.avi", "mpeg4");
    TCHECK(!strcmp(ext, "avi"), "an .avi's MPEG-4 copy: .%s", ext);
    char sdir[4300], ddir[4300], p[8800];
    snprintf(sdir, sizeof sdir, "%s/flvsrc", dir);
    snprintf(ddir, sizeof ddir, "%s/flvdst", dir);
    vt_test_media_put(sdir, "a/y.mp4", "h264.mp4");
    TCHECK(vt_test_sh("ffmpeg -v error -i '%s/a/y.mp4' -c copy '%s/a/x.flv' && rm '%s/a/y.mp4'",
                      sdir, sdir, sdir) == 0, "an .flv made");
    vt_test_media_put(sdir, "b/z.mp4", "h264.mp4"); /* a file after it: prep goes on */
    TCHECK(vt_test_sh("'%s' prep '%s' '%s' --codec mpeg4 --jobs 1 > '%s/flv.out' 2>&1", bin,
                      sdir, ddir, dir) == 0, "prep --codec mpeg4 of an .flv (see %s/flv.out)",
           dir);
    snprintf(p, sizeof p, "%s/a/x.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 48, "the .flv's copy, %s, has its 48 frames", p);
    snprintf(p, sizeof p, "%s/b/z.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 48, "the next file written (%s)", p);
    snprintf(p, sizeof p, "%s/prep-paths.csv", ddir);
    TCHECK(vt_test_file_has(p, "a/x.flv,a/x.mp4"), "prep-paths.csv lists the rename");
}

/* --trim over two sources of one stem whose copies both become .mp4 (x.h264 and x.m2ts,
 * cut at the same times: both x_0.500_1.500.mp4): the first by source name keeps the name,
 * the other is numbered. Both were renamed alike, round after round, and prep never ended
 * (timeout: a regression fails here instead of hanging the suite). */
static void trim_same_stem(const char *bin, const char *dir) {
    char sdir[4300], ddir[4300], p[8800];
    if (media_dirs(dir, "stem", sdir, ddir))
        return;
    vt_test_media_put(sdir, "a/x.h264", "raw.h264");
    vt_test_media_put(sdir, "a/x.m2ts", "h264.m2ts");
    vt_test_write_file(sdir, "seg.csv", "path,class,start,end\na/x.h264,a,0.5,1.5\n"
                                        "a/x.m2ts,a,0.5,1.5\n");
    TCHECK(vt_test_sh("timeout 60 '%s' prep '%s' '%s' --trim --labels '%s/seg.csv' --jobs 1 "
                      "> '%s/stem.out' 2>&1", bin, sdir, ddir, sdir, dir) == 0,
           "prep --trim of x.h264 and x.m2ts ends (see %s/stem.out)", dir);
    /* 25 frames: [0.5, 1.5) s of 25 fps */
    snprintf(p, sizeof p, "%s/a/x_0.500_1.500.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 25, "x.h264's segment under its name (%s)", p);
    snprintf(p, sizeof p, "%s/a/x_0.500_1.500.2.mp4", ddir);
    TCHECK(vt_test_ffprobe_frames(p) == 25, "x.m2ts's segment numbered (%s)", p);
    snprintf(p, sizeof p, "%s/prep-segments.csv", ddir);
    TCHECK(vt_test_file_has(p, "a/x_0.500_1.500.mp4,a") &&
               vt_test_file_has(p, "a/x_0.500_1.500.2.mp4,a"), "prep-segments.csv names both");
}

int main(void) {
    const char *bin = vt_test_bin("test_prep");
    if (!bin)
        return VT_TEST_SKIP;
    snprintf(bin_path, sizeof bin_path, "%s", bin);
    if (system("command -v ffmpeg > /dev/null && command -v ffprobe > /dev/null && "
               "command -v sha256sum > /dev/null") != 0) {
        fprintf(stderr, "test_prep: needs the ffmpeg, ffprobe and sha256sum commands\n");
        return VT_TEST_SKIP;
    }
    char dir[4096], dst[4200], p[8400], out[8400];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("prep"));
    snprintf(src, sizeof src, "%s/src", dir);
    int x264 = has_libx264();
    make_sources(x264);
    const char *codec = x264 ? "h264" : "mpeg4";

    /* 1. A full run: 5 written, 2 bad, exit 0. */
    snprintf(dst, sizeof dst, "%s/dst", dir);
    int rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s --jobs 2 "
                        "> '%s/prep1.out' 2> '%s/prep1.err'", bin, src, dst, S, G, codec, dir,
                        dir);
    TCHECK(rc == 0, "prep exit %d (see %s/prep1.err)", rc, dir);
    snprintf(p, sizeof p, "%s/prep1.out", dir);
    char *o1 = vt_test_slurp(p, NULL);
    TCHECK(o1 && strstr(o1, "prep: 5 written, 0 done before, 2 bad"), "summary: %s", o1 ? o1 : "(none)");
    TCHECK(o1 && strstr(o1, "b/trunc.mp4: ") && strstr(o1, "b/audio_only.mp4: ") &&
           strstr(o1, "no video stream"), "bad files listed with their reasons: %s", o1 ? o1 : "(none)");
    free(o1);
    check_outputs(dst, 0);
    check_manifest(dst);
    /* The same SRC and options again: the same bytes (the muxers' random UIDs and dates
     * made each Matroska copy differ, and so the manifests' hashes). */
    rc = vt_test_sh("'%s' prep '%s' '%s/dst_again' --short-side %d --gop %d --codec %s "
                    "--jobs 2 > /dev/null 2>&1 && cd '%s' && find . -name '*.m*' -o -name "
                    "'*.avi' | sort | xargs sha256sum > '%s/sums_again' && cd '%s/dst_again' "
                    "&& sha256sum --quiet -c '%s/sums_again'", bin, src, dir, S, G, codec, dst,
                    dir, dir, dir);
    TCHECK(rc == 0, "a second prep of the same SRC gave other bytes (exit %d)", rc);
    /* Lists: copied, and the renamed WebM followed; prep-paths.csv says old -> new. */
    snprintf(p, sizeof p, "%s/trainlist01.txt", dst);
    char *l = vt_test_slurp(p, NULL);
    TCHECK(l && !strcmp(l, "a/tone.mp4 1\nb/portrait.avi 2\nb/small.mp4 2\n"),
           "trainlist01.txt rewritten: %s", l ? l : "(missing)");
    free(l);
    snprintf(p, sizeof p, "%s/prep-paths.csv", dst);
    l = vt_test_slurp(p, NULL);
    TCHECK(l && !strcmp(l, "old,new\nb/small.webm,b/small.mp4\n"), "prep-paths.csv: %s",
           l ? l : "(missing)");
    free(l);
    snprintf(p, sizeof p, "%s/b/readme.md", dst);
    TCHECK(access(p, F_OK) == 0, "the non-video file is copied");

    /* 2. vidtrain reads the mirror: scan with the lists, and one tiny epoch of training. */
    rc = vt_test_sh("'%s' scan '%s' --lists '%s' > '%s/scan.out' 2>&1", bin, dst, dst, dir);
    TCHECK(rc == 0, "scan DST exit %d", rc);
    snprintf(p, sizeof p, "%s/scan.out", dir);
    l = vt_test_slurp(p, NULL);
    TCHECK(l && strstr(l, "5 videos (5 readable"), "scan: %s", l ? l : "(none)");
    free(l);
    rc = vt_test_sh("'%s' train '%s' --out '%s/run' --clip 8x32 --batch 2 --epochs 1 "
                    "--val-split 0.4 --workers 1 --seed 1 > '%s/train.log' 2>&1", bin, dst, dir,
                    dir);
    TCHECK(rc == 0, "a one-epoch train on DST exits %d (see %s/train.log)", rc, dir);

    /* 3. Resume: nothing to do the second time, outputs untouched. */
    struct stat before, after;
    snprintf(p, sizeof p, "%s/a/tone.mp4", dst);
    stat(p, &before);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s > '%s/prep2.out' "
                    "2>&1", bin, src, dst, S, G, codec, dir);
    TCHECK(rc == 0, "second prep exit %d", rc);
    snprintf(p, sizeof p, "%s/prep2.out", dir);
    l = vt_test_slurp(p, NULL);
    /* The bad files are retried (they fail fast); the good ones are skipped. */
    TCHECK(l && strstr(l, "prep: 0 written, 5 done before, 2 bad"), "resume: %s", l ? l : "(none)");
    free(l);
    snprintf(p, sizeof p, "%s/a/tone.mp4", dst);
    TCHECK(stat(p, &after) == 0 && after.st_mtime == before.st_mtime &&
           after.st_ino == before.st_ino, "a done file is not rewritten");
    check_manifest(dst);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop 4 > /dev/null 2>&1", bin, src,
                    dst, S);
    TCHECK(rc == 2, "a rerun with other options is refused (exit %d)", rc);

    /* The default quality is written as its number: H.264's CRF 18 (a DST from before,
     * quality=-1 for CRF 23, is refused rather than mixed), the other codecs' -1. */
    snprintf(p, sizeof p, "%s/prep-options.txt", dst);
    l = vt_test_slurp(p, NULL);
    TCHECK(l && strstr(l, x264 ? "\nquality=18\n" : "\nquality=-1\n"), "prep-options.txt: %s",
           l ? l : "(missing)");
    free(l);

    /* 3b. A prep of a prep (DST as SRC, smaller): the new DST's records are its own, not
     * copies of the old one's, so its rerun resumes rather than being refused. */
    char dst2[4300];
    snprintf(dst2, sizeof dst2, "%s/dst2", dir);
    for (int k = 0; k < 2; k++) {
        rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s > "
                        "'%s/prep_again%d.out' 2>&1", bin, dst, dst2, S / 2, G, codec, dir, k);
        TCHECK(rc == 0, "prep of a prep, run %d: exit %d (see %s/prep_again%d.out)", k, rc, dir,
               k);
    }
    snprintf(p, sizeof p, "%s/prep-options.txt", dst2);
    l = vt_test_slurp(p, NULL);
    char want_side[64];
    snprintf(want_side, sizeof want_side, "short_side=%d\n", S / 2);
    TCHECK(l && strstr(l, want_side), "prep of a prep: its own options: %s", l ? l : "(none)");
    free(l);
    snprintf(p, sizeof p, "%s/prep_again1.out", dir);
    l = vt_test_slurp(p, NULL);
    TCHECK(l && strstr(l, "prep: 0 written, 5 done before, 0 bad"), "prep of a prep resumes: %s",
           l ? l : "(none)");
    free(l);
    snprintf(p, sizeof p, "%s/prep-manifest.csv", dst2);
    l = vt_test_slurp(p, NULL);
    TCHECK(l && !strstr(l, ",bad: "), "prep of a prep: its own manifest: %s", l ? l : "(none)");
    free(l);

    /* 4. --fps: constant rate, duration x fps frames. */
    snprintf(dst, sizeof dst, "%s/dst_fps", dir);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s --fps %d "
                    "> /dev/null 2> '%s/prep_fps.err'", bin, src, dst, S, G, codec, FPS, dir);
    TCHECK(rc == 0, "prep --fps exit %d", rc);
    check_outputs(dst, FPS);

    /* 5. Killed after the first file: no partial file under a final name; a rerun
     * completes. One job, so the files finish one by one; kill -9 leaves no chance to
     * clean up. */
    snprintf(dst, sizeof dst, "%s/dst_kill", dir);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s --jobs 1 "
                    "> /dev/null 2>&1 & pid=$!; "
                    "while [ \"$(cat '%s/prep-manifest.csv' 2>/dev/null | wc -l)\" -lt 2 ]; do "
                    "kill -0 $pid 2>/dev/null || break; sleep 0.01; done; kill -9 $pid; "
                    "wait $pid; exit 0", bin, src, dst, S, G, codec, dst);
    int complete = 0, listed = 0;
    for (int i = 0; i < NGOOD; i++) {
        snprintf(out, sizeof out, "%s/%s", dst, good[i].out);
        if (access(out, F_OK) != 0)
            continue;
        listed++;
        snprintf(p, sizeof p, "%s/%s", src, good[i].source);
        complete += vt_test_ffprobe_frames(out) == vt_test_ffprobe_frames(p);
    }
    printf("killed run: %d of %d outputs under their final name\n", listed, NGOOD);
    TCHECK(listed < NGOOD, "the kill landed before the end (%d of %d written)", listed, NGOOD);
    TCHECK(complete == listed, "every file under a final name is whole (%d of %d)", complete,
           listed);
    rc = vt_test_sh("'%s' prep '%s' '%s' --short-side %d --gop %d --codec %s > '%s/prep3.out' "
                    "2>&1", bin, src, dst, S, G, codec, dir);
    TCHECK(rc == 0, "prep after the kill exit %d", rc);
    check_outputs(dst, 0);
    check_manifest(dst);
    rc = vt_test_sh("find '%s' -name '.*prep-part' | grep -q .", dst);
    TCHECK(rc != 0, "no temporary file left after the rerun");

    /* 6. Never upscaled: at S = 200 the 160x120 source keeps its size (re-encoded only),
     * odd 161x121 and 161x120 ones too, their sides rounded down to even (never past the
     * source: 161x120 once became 162x120); the 640x360 one is scaled to 356x200. The odd
     * sources are scaled to their size in 4:4:4 (testsrc2 and 4:2:0 round odd sizes to
     * even ones, which would test nothing). */
    snprintf(p, sizeof p, "%s/big", dir);
    rc = vt_test_sh("mkdir -p '%s/in/c' && cp '%s/b/small.webm' '%s/a/tone.mp4' '%s/in/c/' && "
                    "for s in 161:121:odd 161:120:odd2; do ffmpeg -v error -y -f lavfi -i "
                    "testsrc2=s=160x120:r=25:d=1 -vf scale=${s%%:*} -pix_fmt yuv444p -c:v ffv1 "
                    "'%s/in/c/'${s##*:}.mkv || exit 1; done && '%s' prep '%s/in' '%s/out' "
                    "--short-side 200 --gop %d --codec %s > '%s/prep.err' 2>&1",
                    p, src, src, p, p, bin, p, p, G, codec, p);
    TCHECK(rc == 0, "prep --short-side 200 exit %d (see %s/prep.err)", rc, p);
    probe odd;
    snprintf(out, sizeof out, "%s/in/c/odd2.mkv", p);
    TCHECK(probe_file(&odd, out) == 0 && odd.w == 161 && odd.h == 120,
           "the odd source is %dx%d, not 161x120", odd.w, odd.h);
    static const struct { const char *name; int w, h; } big[] = {
        {"small.mp4", 160, 120}, {"tone.mp4", 356, 200}, {"odd.mkv", 160, 120},
        {"odd2.mkv", 160, 120}};
    for (int i = 0; i < (int)(sizeof big / sizeof *big); i++) {
        probe pr;
        snprintf(out, sizeof out, "%s/out/c/%s", p, big[i].name);
        TCHECK(probe_file(&pr, out) == 0, "%s probes", out);
        TCHECK(pr.w == big[i].w && pr.h == big[i].h, "%s at S=200: %dx%d, expected %dx%d",
               big[i].name, pr.w, pr.h, big[i].w, big[i].h);
    }
    snprintf(out, sizeof out, "%s/prep.err", p);
    char *e = vt_test_slurp(out, NULL);
    TCHECK(e && strstr(e, "160x120 (source size, not upscaled)"), "prep says the size was kept: %s",
           e ? e : "(none)");
    /* the odd 161x120 source was resampled to even sides: said so, not "source size" */
    const char *ol = e ? strstr(e, "odd2.mkv: ") : NULL;
    const char *oe = ol ? strchr(ol, '\n') : NULL;
    const char *on = ol ? strstr(ol, "(source size to even sides, not upscaled)") : NULL;
    TCHECK(on && (!oe || on < oe), "prep says odd2.mkv went to even sides: %s",
           e ? e : "(none)");
    free(e);

    /* --decode nvdec: the same files. Without a GPU it falls back to the CPU (one
     * warning); on a GPU, H.264 and VP9 decode bit-exactly (their standards fix every
     * output sample), so those sources' copies are the same bytes either way: the VP9
     * small.webm, and tone.mp4 when it is H.264 (built with libx264; else MPEG-4 part 2,
     * whose IDCT is fixed only to a tolerance: not compared). */
    rc = vt_test_sh("'%s' prep '%s/in' '%s/nv' --short-side 200 --gop %d --codec %s "
                    "--decode nvdec > '%s/nv.err' 2>&1", bin, p, p, G, codec, p);
    TCHECK(rc == 0, "prep --decode nvdec exit %d (see %s/nv.err)", rc, p);
    for (int i = 0; i < 2; i++) {
        if (!x264 && strcmp(big[i].name, "small.mp4") != 0)
            continue;
        char a[8600], b[8600], *ra, *rb;
        snprintf(a, sizeof a, "%s/out/prep-manifest.csv", p);
        snprintf(b, sizeof b, "%s/nv/prep-manifest.csv", p);
        snprintf(out, sizeof out, "c/%s", big[i].name);
        char *ma = vt_test_slurp(a, NULL), *mb = vt_test_slurp(b, NULL);
        ra = manifest_row(ma, out);
        rb = manifest_row(mb, out);
        free(ma);
        free(mb);
        TCHECK(ra && rb && !strcmp(ra, rb), "%s: the same manifest row with --decode nvdec: "
               "%s vs %s", big[i].name, ra ? ra : "(none)", rb ? rb : "(none)");
        free(ra);
        free(rb);
    }

    /* 7. Nothing readable: exit 1. */
    snprintf(p, sizeof p, "%s/onlybad", dir);
    rc = vt_test_sh("mkdir -p '%s/c' && cp '%s/b/trunc.mp4' '%s/c/' && '%s' prep '%s' '%s/out' "
                    "> /dev/null 2>&1", p, src, p, bin, p, p);
    TCHECK(rc == 1, "prep of only bad videos exits 1, got %d", rc);
    damaged_order(bin, dir);
    clean_mpeg2(bin, dir);
    pixel_shape(bin, dir);
    shared_times(bin, dir);
    refused_codec(bin, dir);
    trim_same_stem(bin, dir);
    return vt_test_done("test_prep");
}
