/*
 * test_segments.c: samples that are segments of longer videos (docs/segments.md), on
 * real files made with the ffmpeg command, against ffprobe as the outside truth.
 *
 * The source is a "ramp": 24 s at 10 fps, lossless H.264, frame n a flat grey of luma
 * 16 + n, so every decoded pixel says which frame it came from. Checked:
 *   - a labels file with start,end columns: one entry per row, sorted, the segment's
 *     frames equal to the frames ffprobe lists with start <= pts_time < end;
 *   - training clips (many epochs, jittered stride) and evaluation clips land inside the
 *     segment only, a segment shorter than the clip included; eval gives K clips per
 *     segment (each segment its own sample);
 *   - a Kinetics CSV over a trimmed <id>_<start>_<end>.mp4 in a class folder and an
 *     untrimmed loose <id>.mp4 (two segments), a missing video counted, classes from
 *     every row, splits from the split column; the format detected;
 *   - an HMDB51 split folder (splits 1 and 2; 1 = train, 2 = test, 0 = unused), a missing
 *     video counted;
 *   - `vidtrain prep --trim`: one file per segment, its frame count and duration by
 *     ffprobe equal to the segment's, its first frame's content the segment's first, and
 *     DST/prep-segments.csv reading DST back as the same samples.
 */
#include <math.h>
#include <sys/stat.h>

#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/loader.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define FPS 10
#define SECONDS 24

static char dir[4096];

static int ff(const char *args_fmt, const char *out) {
    return vt_test_sh("ffmpeg -nostdin -hide_banner -loglevel error -y %s '%s'", args_fmt, out);
}

/* The ramp (luma 16 + n in frame n), lossless, a keyframe every 10 frames, at path. */
static int make_ramp(const char *path, int seconds) {
    char args[512];
    snprintf(args, sizeof args,
             "-f lavfi -i color=c=black:s=128x112:r=%d:d=%d -vf \"geq=lum='16+N':cb=128:cr=128\" "
             "-c:v libx264 -qp 0 -g 10 -pix_fmt yuv420p", FPS, seconds);
    vt_test_sh("mkdir -p \"$(dirname '%s')\"", path);
    return ff(args, path);
}

/* Frames of file whose pts_time lies in [a, b), by ffprobe: (first index, count). */
static void ffprobe_range(const char *file, double a, double b, int64_t *first, int64_t *count) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "ffprobe -v error -select_streams v:0 -show_entries "
             "frame=pts_time -of default=nw=1:nk=1 '%s'", file);
    FILE *p = popen(cmd, "r");
    *first = -1;
    *count = 0;
    double t;
    int64_t n = 0;
    while (p && fscanf(p, "%lf", &t) == 1) {
        if (t >= a - 1e-9 && t < b - 1e-9) {
            if (*first < 0)
                *first = n;
            (*count)++;
        }
        n++;
    }
    if (p)
        pclose(p);
}

/* The truth for "which frame is this pixel": the ramp's frames decoded to RGB by the
 * ffmpeg command, unscaled (the loader reads the 112-pixel short side unscaled too), the
 * centre pixel's red value per frame. */
static int ramp_rgb[SECONDS * FPS];

static int load_ramp_truth(const char *file) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -hide_banner -loglevel error -i '%s' -f rawvideo "
             "-pix_fmt rgb24 -", file);
    FILE *p = popen(cmd, "r");
    static uint8_t frame[128 * 112 * 3];
    int n = 0;
    while (p && n < SECONDS * FPS && fread(frame, 1, sizeof frame, p) == sizeof frame)
        ramp_rgb[n++] = frame[(56 * 128 + 64) * 3];
    if (p)
        pclose(p);
    return n;
}

/* Whether a normalised pixel (mean 0, std 1: x = v / 255) is that of some frame in
 * [a, a + n): the ramp rises about 1.16 levels a frame, so a value names one frame, or
 * two when rounding gives both the same level (then either counts). */
static int pixel_in(float x, int64_t a, int64_t n) {
    int v = (int)lroundf(x * 255.0f);
    for (int64_t f = a; f < a + n && f < SECONDS * FPS; f++)
        if (ramp_rgb[f] == v)
            return 1;
    return 0;
}

/* ---- labels with start,end ---- */

static vt_dataset *open_labels(void) {
    char err[1024], csv[8300];
    snprintf(csv, sizeof csv, "%s/labels.csv", dir);
    vt_test_write_file(dir, "labels.csv",
                       "path,class,start,end\n"
                       "vids/ramp.mp4,late,12,20\n"
                       "vids/ramp.mp4,early,5,8\n"
                       "vids/ramp.mp4,tiny,10,10.5\n"   /* 5 frames: shorter than a clip */
                       "vids/ramp.mp4,early,5,8\n"      /* the same segment again: skipped */
                       "vids/ramp.mp4,early,9,\n"       /* half a segment: skipped */
                       "vids/other.mp4,late,,\n");      /* the whole file */
    char data[8300];
    snprintf(data, sizeof data, "%s/data", dir);
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return NULL;
    int nbad = 0;
    int rc = vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err);
    TCHECK(rc == 0, "labels: %s", err);
    TCHECK(nbad == 2, "%d bad lines, want 2 (the duplicate and the half segment)", nbad);
    vt_dataset_probe(ds, 1, 1, NULL, NULL);
    return ds;
}

static void test_labels_segments(vt_dataset *ds) {
    TCHECK(ds->nvideos == 4 && ds->nsegments == 3, "%d entries, %d segments (want 4, 3)",
           ds->nvideos, ds->nsegments);
    if (ds->nvideos != 4)
        return;
    /* Sorted by (path, start): other.mp4 whole, then the ramp's 5-8, 10-10.5, 12-20. */
    const double want[4][2] = {{0, 0}, {5, 8}, {10, 10.5}, {12, 20}};
    const char *cls[4] = {"late", "early", "tiny", "late"};
    char file[8300];
    snprintf(file, sizeof file, "%s/data/vids/ramp.mp4", dir);
    for (int i = 0; i < 4; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        TCHECK(v->seg_start == want[i][0] && v->seg_end == want[i][1] && v->labeled &&
                   !strcmp(ds->heads[0].classes[v->label[0]], cls[i]),
               "entry %d: %s [%g-%g] class %d", i, v->relpath, v->seg_start, v->seg_end,
               v->label[0]);
        if (i == 0)
            continue;
        int64_t first, count;
        ffprobe_range(file, want[i][0], want[i][1], &first, &count);
        TCHECK(v->seg_first == first && v->seg_frames == count,
               "segment %g-%g: frames [%lld +%lld), ffprobe [%lld +%lld)", want[i][0],
               want[i][1], (long long)v->seg_first, (long long)v->seg_frames,
               (long long)first, (long long)count);
        TCHECK(fabs(vt_dataset_sample_duration(v) - (want[i][1] - want[i][0])) < 1e-9,
               "duration %g", vt_dataset_sample_duration(v));
    }
}

/* Every frame of every clip from `mode` loaders lies in its sample's frames. Returns
 * the clips seen per entry in counts (4). */
static void check_clips(vt_dataset *ds, vt_loader_mode mode, int epochs, int64_t *counts) {
    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.mode = mode;
    c.batch = 4;
    c.workers = 2;
    c.clips_per_video = mode == VT_LOADER_TRAIN ? 6 : 3;
    c.clip.t = 8;
    c.clip.stride = 2;
    c.clip.stride_jitter = mode == VT_LOADER_TRAIN ? 1 : 0;
    c.clip.crop = 96;
    c.clip.short_side = c.clip.jitter_min = c.clip.jitter_max = 112; /* unscaled: exact levels */
    for (int ch = 0; ch < 3; ch++) {
        c.clip.mean[ch] = 0;
        c.clip.std[ch] = 1;
    }
    c.clip.contrast_min = 1;
    c.clip.brightness = 0;
    char err[512];
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "loader: %s", err);
    if (!l)
        return;
    memset(counts, 0, 4 * sizeof *counts);
    int bad = 0;
    int64_t plane = (int64_t)c.clip.t * c.clip.crop * c.clip.crop;
    for (int e = 0; e < epochs; e++) {
        vt_loader_start_epoch(l, e, 0);
        const vt_batch *b;
        while ((b = vt_loader_next(l)) != NULL) {
            for (int i = 0; i < b->n; i++) {
                const vt_dataset_video *v = &ds->videos[b->video[i]];
                counts[b->video[i]]++;
                if (!vt_dataset_is_segment(v))
                    continue;
                const float *x = b->x + (int64_t)i * 3 * plane;
                for (int f = 0; f < c.clip.t; f++) {
                    /* The centre pixel of frame f of the clip, in the red plane. */
                    float px = x[(int64_t)f * c.clip.crop * c.clip.crop +
                                 (c.clip.crop / 2) * c.clip.crop + c.clip.crop / 2];
                    if (!pixel_in(px, v->seg_first, v->seg_frames) && bad++ < 5)
                        fprintf(stderr, "clip of [%g-%g] (frames %lld+%lld) holds level %.1f\n",
                                v->seg_start, v->seg_end, (long long)v->seg_first,
                                (long long)v->seg_frames, px * 255.0);
                }
            }
        }
    }
    TCHECK(bad == 0, "%d clip frames outside their segment (%s)", bad,
           mode == VT_LOADER_TRAIN ? "train" : "eval");
    vt_loader_free(&l);
}

static void test_clips_inside(vt_dataset *ds) {
    int64_t counts[4];
    check_clips(ds, VT_LOADER_TRAIN, 4, counts);
    for (int i = 0; i < 4; i++)
        TCHECK(counts[i] == 4 * 6, "train: entry %d gave %lld clips, want 24", i,
               (long long)counts[i]);
    /* Evaluation: K = 3 clips per segment, each segment its own sample (docs/design.md §3.4:
     * every clip counted once, no padding duplicates). */
    check_clips(ds, VT_LOADER_EVAL, 1, counts);
    for (int i = 0; i < 4; i++)
        TCHECK(counts[i] == 3, "eval: entry %d gave %lld clips, want 3", i, (long long)counts[i]);
}

/* ---- Kinetics CSV ---- */

static void test_kinetics(void) {
    char k[8300], csv[8300], err[1024], p[8300];
    snprintf(k, sizeof k, "%s/kinetics", dir);
    snprintf(p, sizeof p, "%s/train/abseiling/AAA_000002_000006.mp4", k);
    TCHECK(make_ramp(p, 4) == 0, "ffmpeg");
    snprintf(p, sizeof p, "%s/BBB.mp4", k); /* untrimmed, loose at the top */
    TCHECK(make_ramp(p, 20) == 0, "ffmpeg");
    snprintf(csv, sizeof csv, "%s/kinetics.csv", dir);
    vt_test_write_file(dir, "kinetics.csv",
                       "label,youtube_id,time_start,time_end,split\n"
                       "abseiling,AAA,2,6,train\n"
                       "\"playing cards\",BBB,4,9,train\n"
                       "\"playing cards\",BBB,12,16,val\n"
                       "zumba,CCC,0,10,train\n");  /* not downloaded: counted, class kept */
    TCHECK(vt_dataset_lists_detect(csv, err, sizeof err) == VT_LISTS_KINETICS, "detect: %s", err);
    vt_dataset_opts o = {.lists_dir = csv};
    vt_dataset *ds = vt_dataset_open(k, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    vt_dataset_probe(ds, 1, 1, NULL, NULL);
    TCHECK(ds->heads[0].nclasses == 3 && !strcmp(ds->heads[0].classes[1], "playing cards"),
           "%d classes", ds->heads[0].nclasses);
    TCHECK(ds->nmissing == 1, "missing %d, want 1 (CCC)", ds->nmissing);
    TCHECK(ds->nvideos == 3 && ds->nsegments == 2, "%d entries, %d segments (want 3, 2)",
           ds->nvideos, ds->nsegments);
    TCHECK(ds->nignored == 0, "BBB.mp4 still ignored (%d)", ds->nignored);
    if (ds->nvideos == 3) { /* sorted by path: BBB.mp4 (two segments), then train/... */
        const vt_dataset_video *a = &ds->videos[2], *b1 = &ds->videos[0], *b2 = &ds->videos[1];
        TCHECK(!vt_dataset_is_segment(a) && a->split == VT_SPLIT_TRAIN && a->label[0] == 0 &&
                   a->seg_frames == 4 * FPS,
               "trimmed AAA: %s seg %g-%g split %d frames %lld", a->relpath, a->seg_start,
               a->seg_end, a->split, (long long)a->seg_frames);
        TCHECK(!strcmp(b1->relpath, "BBB.mp4") && b1->seg_start == 4 && b1->seg_end == 9 &&
                   b1->split == VT_SPLIT_TRAIN && b1->label[0] == 1 &&
                   b1->seg_first == 4 * FPS && b1->seg_frames == 5 * FPS,
               "BBB 4-9: %s %g-%g split %d frames [%lld +%lld)", b1->relpath, b1->seg_start,
               b1->seg_end, b1->split, (long long)b1->seg_first, (long long)b1->seg_frames);
        TCHECK(b2->seg_start == 12 && b2->split == VT_SPLIT_VAL && b2->label[0] == 1,
               "BBB 12-16: split %d", b2->split);
    }
    vt_dataset_free(&ds);
}

/* ---- HMDB51 split files ---- */

static void test_hmdb(void) {
    char h[8300], s[8300], err[1024], p[8300];
    snprintf(h, sizeof h, "%s/hmdb", dir);
    snprintf(s, sizeof s, "%s/hmdb_splits", dir);
    const char *vids[4] = {"brush_hair/v1.avi", "brush_hair/v2.avi", "fall_floor/v3.avi",
                           "fall_floor/v4.avi"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", h, vids[i]);
        vt_test_sh("mkdir -p \"$(dirname '%s')\"", p);
        TCHECK(ff("-f lavfi -i testsrc2=size=160x120:rate=10:duration=1 -c:v mpeg4", p) == 0,
               "ffmpeg");
    }
    vt_test_sh("mkdir -p '%s'", s);
    vt_test_write_file(s, "brush_hair_test_split1.txt", "v1.avi 1 \nv2.avi 2 \n");
    vt_test_write_file(s, "fall_floor_test_split1.txt", "v3.avi 1 \nv4.avi 0 \nmissing.avi 2 \n");
    vt_test_write_file(s, "brush_hair_test_split2.txt", "v1.avi 2 \nv2.avi 1 \n");
    vt_test_write_file(s, "fall_floor_test_split2.txt", "v3.avi 0 \nv4.avi 1 \n");
    TCHECK(vt_dataset_lists_detect(s, err, sizeof err) == VT_LISTS_HMDB51, "detect: %s", err);
    const vt_split want1[4] = {VT_SPLIT_TRAIN, VT_SPLIT_TEST, VT_SPLIT_TRAIN, VT_SPLIT_NONE};
    const vt_split want2[4] = {VT_SPLIT_TEST, VT_SPLIT_TRAIN, VT_SPLIT_NONE, VT_SPLIT_TRAIN};
    for (int fold = 1; fold <= 2; fold++) {
        vt_dataset_opts o = {.lists_dir = s, .list_fold = fold};
        vt_dataset *ds = vt_dataset_open(h, &o, err, sizeof err);
        TCHECK(ds != NULL, "open split %d: %s", fold, err);
        if (!ds)
            continue;
        TCHECK(ds->nvideos == 4 && ds->heads[0].nclasses == 2, "%d videos %d classes",
               ds->nvideos, ds->heads[0].nclasses);
        TCHECK(ds->nmissing == (fold == 1), "split %d: missing %d", fold, ds->nmissing);
        for (int i = 0; i < 4 && ds->nvideos == 4; i++)
            TCHECK(ds->videos[i].split == (fold == 1 ? want1 : want2)[i] &&
                       ds->videos[i].label[0] == i / 2,
                   "split %d: %s split %d class %d", fold, ds->videos[i].relpath,
                   ds->videos[i].split, ds->videos[i].label[0]);
        vt_dataset_free(&ds);
    }
    vt_dataset_opts o = {.lists_dir = s, .list_fold = 3};
    vt_dataset *ds = vt_dataset_open(h, &o, err, sizeof err);
    TCHECK(!ds && strstr(err, "test_split3"), "split 3 (no files) refused: %s", err);
    vt_dataset_free(&ds);
}

/* ---- prep --trim ---- */

/* Mean luma of the first frame (ffmpeg's signalstats), -1 when it fails. */
static double first_yavg(const char *file) {
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "ffmpeg -nostdin -hide_banner -i '%s' -frames:v 1 -vf "
             "signalstats,metadata=print:key=lavfi.signalstats.YAVG:file=- -f null - "
             "2>/dev/null | sed -n 's/.*YAVG=//p' | head -1", file);
    FILE *p = popen(cmd, "r");
    double y = -1;
    if (p) {
        if (fscanf(p, "%lf", &y) != 1)
            y = -1;
        pclose(p);
    }
    return y;
}

static void test_prep_trim(const char *bin) {
    char data[8300], dst[8300];
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(dst, sizeof dst, "%s/trimmed", dir);
    int rc = vt_test_sh("'%s' prep '%s' '%s' --trim --labels '%s/labels.csv' --short-side 112 "
                        "--jobs 2 > '%s/prep.log' 2>&1", bin, data, dst, dir, dir);
    TCHECK(rc == 0, "prep --trim exited %d (see %s/prep.log)", rc, dir);
    const struct {
        const char *name;
        double a, b;
    } segs[3] = {{"vids/ramp_000005_000008.mp4", 5, 8},
                 {"vids/ramp_10.000_10.500.mp4", 10, 10.5},
                 {"vids/ramp_000012_000020.mp4", 12, 20}};
    char src[8300];
    snprintf(src, sizeof src, "%s/vids/ramp.mp4", data);
    for (int i = 0; i < 3; i++) {
        char out[8300];
        snprintf(out, sizeof out, "%s/%s", dst, segs[i].name);
        int64_t first, count;
        ffprobe_range(src, segs[i].a, segs[i].b, &first, &count);
        int64_t frames = vt_test_ffprobe_frames(out);
        TCHECK(frames == count, "%s: %lld frames, the source has %lld in %g-%g", segs[i].name,
               (long long)frames, (long long)count, segs[i].a, segs[i].b);
        /* Duration: the container's, frames x 1/fps; within one frame (the last frame's
         * duration is the muxer's guess). */
        double d = vt_test_ffprobe_duration(out);
        TCHECK(fabs(d - (segs[i].b - segs[i].a)) <= 1.0 / FPS + 1e-3, "%s: %.3f s, want %.3f",
               segs[i].name, d, segs[i].b - segs[i].a);
        /* Content: the first frame is the segment's first (luma 16 + n). A flat grey through
         * libx264 at prep's CRF and a rescale stays within 1.5 levels of the source's. */
        double y = first_yavg(out);
        TCHECK(fabs(y - (16.0 + (double)first)) <= 1.5, "%s: first frame luma %.2f, want %lld",
               segs[i].name, y, (long long)(16 + first));
    }
    char whole[8300];
    snprintf(whole, sizeof whole, "%s/vids/ramp.mp4", dst);
    struct stat st;
    TCHECK(stat(whole, &st) != 0, "the source of the segments was written whole too");
    /* The labels file over DST: the same samples, each a whole file now. */
    char err[1024], csv[8300];
    snprintf(csv, sizeof csv, "%s/prep-segments.csv", dst);
    vt_dataset *ds = vt_dataset_open(dst, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open DST: %s", err);
    if (!ds)
        return;
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc == 0, "prep-segments.csv: %s", err);
    int labeled = 0;
    for (int i = 0; i < ds->nvideos; i++)
        labeled += ds->videos[i].labeled;
    TCHECK(labeled == 4 && ds->nsegments == 0 && ds->heads[0].nclasses == 3,
           "%d labelled samples, %d segments, %d classes (want 4, 0, 3)", labeled,
           ds->nsegments, ds->heads[0].nclasses);
    vt_dataset_free(&ds);
}

int main(void) {
    const char *bin = vt_test_bin("test_segments");
    if (!bin)
        return VT_TEST_SKIP;
    if (system("ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx264") != 0) {
        fprintf(stderr, "test_segments: needs ffmpeg with libx264\n");
        return VT_TEST_SKIP;
    }
    snprintf(dir, sizeof dir, "%s", vt_test_dir("segments"));
    char p[8300];
    snprintf(p, sizeof p, "%s/data/vids/ramp.mp4", dir);
    TCHECK(make_ramp(p, SECONDS) == 0, "ffmpeg");
    TCHECK(load_ramp_truth(p) == SECONDS * FPS, "ffmpeg decode of the ramp");
    snprintf(p, sizeof p, "%s/data/vids/other.mp4", dir);
    TCHECK(make_ramp(p, 3) == 0, "ffmpeg");
    vt_dataset *ds = open_labels();
    if (ds) {
        test_labels_segments(ds);
        test_clips_inside(ds);
        vt_dataset_free(&ds);
    }
    test_kinetics();
    test_hmdb();
    test_prep_trim(bin);
    return vt_test_done("test_segments");
}
