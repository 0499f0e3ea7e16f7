/*
 * cmd_synth.c: `vidtrain synth DIR` — writes a synthetic dataset of one of the presets
 * (pipeline/data/synth/synth.h: demo, motion) and prints progress and a summary. Parsing and
 * printing only: the rendering and encoding live in pipeline/data/synth/synth.c and synth_motion.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "app/opts.h"
#include "app/run/run_files.h"
#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/synth/synth.h"

static void usage(FILE *f) {
    vt_synth_opts d, m;
    vt_synth_defaults(&d);
    vt_synth_preset_defaults(&m, "motion");
    fprintf(f,
            "usage: vidtrain synth DIR [--preset demo|motion] [options]\n"
            "  Write a dataset of real encoded videos: DIR/{train,val,test}/<class>/*, whose\n"
            "  classes differ by motion only: one frame cannot tell them apart. Deterministic\n"
            "  given --seed: the same options write the same bytes.\n"
            "\n"
            "  --preset demo (default): easy. Bright shapes moving over a static textured\n"
            "    background. Classes: move_left, move_right, move_up, move_down, rotate_cw,\n"
            "    rotate_ccw, zoom_in, zoom_out (the first --classes). Defaults: %d classes,\n"
            "    %d/%d/%d videos per class, %d frames of %dx%d at %d fps. Codecs rotate over\n"
            "    mpeg4/.mp4, mpeg4/.avi, mjpeg/.mkv, ffv1/.mkv (+ h264/.mp4 with libx264).\n"
            "  --preset motion: hard, real-looking. The CAMERA moves over an animated\n"
            "    procedural world (noise, cells, ramps, stripes; evolving texture, drifting\n"
            "    light, flicker, grain) with objects moving at random in every class and\n"
            "    random shake. Classes: pan_left, pan_right, pan_up, pan_down (the picture\n"
            "    content moves that way on screen), zoom_in (content grows), zoom_out,\n"
            "    rotate_cw, rotate_ccw (content turns clockwise / counter-clockwise).\n"
            "    Camera speed is random per video, slow ones included. Per video, never by\n"
            "    class: size from 160x120, 192x144, 240x180, 256x192, 320x240 (1 in 8 portrait),\n"
            "    15/25/30 fps, 2-5 s, quality, and codec/container rotating over mpeg4/.mp4,\n"
            "    mpeg4/.avi, mjpeg/.mkv, mjpeg/.avi (+ h264/.mp4 with libx264). Defaults:\n"
            "    %d classes, %d/%d/%d videos per class (no val: train with --val-split, or\n"
            "    evaluate on test). --size, --fps and --frames override the draws.\n"
            "\n"
            "  --classes N   2..%d: the preset's first N classes\n"
            "  --train N     videos per class in train\n"
            "  --val N       videos per class in val\n"
            "  --test N      videos per class in test\n"
            "  --frames N    frames per video (demo default %d; motion: drawn, 2-5 s)\n"
            "  --size WxH    even frame size (demo default %dx%d; motion: drawn, at most 640)\n"
            "  --fps N       frame rate, at most 240 (demo default %d; motion: drawn)\n"
            "  --seed S      (default %llu)\n"
            "  --threads N   videos encoded at once (default: one per core); the files do\n"
            "                not depend on it\n"
            "  --no-h264     only the codecs every FFmpeg build has (same files everywhere)\n"
            "  --force       write into a DIR that already holds a dataset, or a synth\n"
            "                that was stopped left unfinished (until synth ends, DIR is\n"
            "                marked unfinished: train, eval and scan refuse it). The\n"
            "                videos an earlier synth wrote there are removed first\n"
            "                (DIR/.vidtrain-synth lists them); others stay, and are named.\n"
            "                One synth at a time writes a DIR: a second is refused\n",
            d.classes, d.train, d.val, d.test, d.frames, d.width, d.height, d.fps, m.classes,
            m.train, m.val, m.test, VT_SYNTH_MAX_CLASSES, d.frames, d.width, d.height, d.fps,
            (unsigned long long)d.seed);
}

typedef struct progress_state {
    int tty;
    double t0;
} progress_state;

static void on_progress(void *user, int done, int total, const char *path) {
    progress_state *p = user;
    if (p->tty) {
        fprintf(stderr, "\r  [%d/%d] %s\033[K", done, total, path);
        if (done == total)
            fputc('\n', stderr);
    } else if (done == total || done % VT_MAX(1, total / 10) == 0) {
        fprintf(stderr, "  [%d/%d] %.1f s\n", done, total, vt_now() - p->t0);
    }
}


/* --size "WxH": two whole numbers (the range checks come after the preset is known). */
static int parse_size(const char *s, int *w, int *h) {
    char buf[32];
    if (!s || snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf)
        return -1;
    char *x = strchr(buf, 'x');
    if (!x)
        return -1;
    *x = 0;
    int a, b;
    if (vt_parse_int(buf, 0, 1 << 16, &a) != 0 || vt_parse_int(x + 1, 0, 1 << 16, &b) != 0)
        return -1;
    *w = a;
    *h = b;
    return 0;
}

/* ---- parse, plan (the dataset said), run ---- */

/* Fills *o (the preset's defaults, then the options), *dir and *force from argv, and
 * checks them: 0, or the exit status (2) after saying what is wrong. */
static int synth_parse(vt_synth_opts *o, const char **dir, int *force, int argc, char **argv) {
    *dir = NULL;
    *force = 0;
    /* The preset first: its defaults are what the other options change. */
    const char *preset = "demo";
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r = vt_opt_value(argc, argv, &i, "--preset", &v);
        if (r < 0) {
            fprintf(stderr, "vidtrain synth: --preset needs a name: demo or motion\n");
            return 2;
        }
        if (r > 0)
            preset = v;
    }
    if (vt_synth_preset_defaults(o, preset) != 0) {
        fprintf(stderr, "vidtrain synth: unknown preset '%s' (demo or motion)\n", preset);
        return 2;
    }
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        vt_opts_given_note(&given, a);
        int *target = !strcmp(a, "--classes") ? &o->classes
                    : !strcmp(a, "--train")   ? &o->train
                    : !strcmp(a, "--val")     ? &o->val
                    : !strcmp(a, "--test")    ? &o->test
                    : !strcmp(a, "--frames")  ? &o->frames
                    : !strcmp(a, "--fps")     ? &o->fps
                    : !strcmp(a, "--threads") ? &o->threads
                                              : NULL;
        if (target) {
            if (!val || vt_parse_int(val, 0, 1000000, target) != 0) {
                fprintf(stderr, "vidtrain synth: %s needs a non-negative number\n", a);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--size")) {
            if (parse_size(val, &o->width, &o->height) != 0) {
                fprintf(stderr, "vidtrain synth: --size '%s': expected WxH, two whole numbers up "
                                "to %d, e.g. 128x96\n", val ? val : "", 1 << 16);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (!val || vt_parse_u64(val, &o->seed) != 0) {
                fprintf(stderr, "vidtrain synth: --seed needs a number\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--preset") || !strncmp(a, "--preset=", 9)) {
            i += !strcmp(a, "--preset"); /* read above */
        } else if (!strcmp(a, "--no-h264")) {
            o->no_h264 = 1;
        } else if (!strcmp(a, "--force")) {
            *force = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "vidtrain synth: unknown option %s (see --help)\n", a);
            return 2;
        } else if (!*dir) {
            *dir = a;
        } else {
            fprintf(stderr, "vidtrain synth: one DIR only (got %s and %s)\n", *dir, a);
            return 2;
        }
    }
    if (!*dir) {
        usage(stderr);
        return 2;
    }
    const int motion = o->preset == VT_SYNTH_MOTION;
    if (o->classes < 2 || o->classes > VT_SYNTH_MAX_CLASSES) {
        fprintf(stderr, "vidtrain synth: --classes must be 2..%d\n", VT_SYNTH_MAX_CLASSES);
        return 2;
    }
    if ((!motion || vt_opts_given_has(&given, "--size")) &&
        (o->width < 16 || o->height < 16 || (o->width & 1) || (o->height & 1))) {
        fprintf(stderr, "vidtrain synth: --size must be even and at least 16x16 (4:2:0 video)\n");
        return 2;
    }
    if (motion && (o->width > 640 || o->height > 640)) {
        fprintf(stderr, "vidtrain synth: --size is at most 640x640 for the motion preset (the "
                        "world the camera roams is several times the frame)\n");
        return 2;
    }
    if (o->fps > 240) {
        fprintf(stderr, "vidtrain synth: --fps must be at most 240\n");
        return 2;
    }
    if ((!motion && (o->frames < 1 || o->fps < 1)) || o->train + o->val + o->test < 1) {
        fprintf(stderr, "vidtrain synth: --frames, --fps and the video counts must be positive\n");
        return 2;
    }
    if (motion && ((o->frames == 0 && vt_opts_given_has(&given, "--frames")) ||
                   (o->fps == 0 && vt_opts_given_has(&given, "--fps")))) {
        fprintf(stderr, "vidtrain synth: --frames and --fps must be positive\n");
        return 2;
    }
    return 0;
}

/* The plan on stdout: the preset, the classes and counts, the sizes, the formats. */
static void synth_say_plan(const vt_synth_opts *o) {
    int nf = vt_synth_format_count(o);
    printf("vidtrain synth: preset %s, %d classes x (%d train + %d val + %d test) videos, ",
           vt_synth_preset_name(o->preset), o->classes, o->train, o->val, o->test);
    if (o->preset == VT_SYNTH_MOTION) {
        char fr[32] = "2-5 s", sz[32] = "160x120..320x240", fp[32] = "15/25/30";
        if (o->frames > 0)
            snprintf(fr, sizeof fr, "%d frames", o->frames);
        if (o->width > 0)
            snprintf(sz, sizeof sz, "%dx%d", o->width, o->height);
        if (o->fps > 0)
            snprintf(fp, sizeof fp, "%d", o->fps);
        printf("%s of %s at %s fps (drawn per video unless set), seed %llu\n  classes:", fr, sz,
               fp, (unsigned long long)o->seed);
    } else {
        printf("%d frames of %dx%d at %d fps, seed %llu\n  classes:", o->frames, o->width,
               o->height, o->fps, (unsigned long long)o->seed);
    }
    for (int c = 0; c < o->classes; c++)
        printf(" %s", vt_synth_preset_class_name(o, c));
    printf("\n  formats:");
    for (int i = 0; i < nf; i++)
        printf(" %s", vt_synth_format_name(o, i));
    printf("\n");
}

static int synth_run(const vt_synth_opts *op, const char *dir, int force, int motion);

/* DIR itself, flocked for the run (the kernel drops it when synth dies; no file is left
 * among the videos, and a same-seed synth stays byte-identical), after DIR is made: one
 * synth at a time writes a DIR. Two at once, the second with --force, removed the first's
 * videos while it wrote more: a mixed dataset (7 + 40 + 2 videos of two option sets),
 * unmarked, both exit 0. The descriptor, -2 where it cannot be locked, or -1 after saying
 * why. */
static int lock_dir(const char *dir) {
    char err[1024];
    if (vt_run_mkdirs(dir, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain synth: %s\n", err);
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        if (errno == EWOULDBLOCK) {
            fprintf(stderr, "vidtrain synth: %s is being written by another synth: two into "
                    "one folder would mix their videos. Wait for it to end, or choose another "
                    "DIR\n", dir);
            return -1;
        }
        /* a file system that cannot lock a folder (NFS lends flock only to a file open for
         * writing: EBADF, or ENOLCK): synth runs unlocked, as eval's hold does, not never */
        fd = -2;
    }
    return fd < 0 ? -2 : fd; /* -2: unlocked (DIR unreadable: synth_run says so) */
}

int vt_cmd_synth(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_synth_opts o;
    const char *dir;
    int force;
    int rc = synth_parse(&o, &dir, &force, argc, argv);
    if (rc)
        return rc;
    const int motion = o.preset == VT_SYNTH_MOTION;
    int lock = lock_dir(dir);
    if (lock == -1)
        return 1;
    rc = synth_run(&o, dir, force, motion);
    if (lock >= 0)
        close(lock); /* releases DIR */
    return rc;
}

/* The checks on DIR, the videos, the summary: the exit status. */
static int synth_run(const vt_synth_opts *op, const char *dir, int force, int motion) {
    vt_synth_opts o = *op;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/train", dir);
    struct stat sb;
    char *unfinished = force ? NULL : vt_dataset_unfinished(dir);
    if (unfinished) {
        fprintf(stderr, "vidtrain synth: %s is unfinished: %s\n", dir, unfinished);
        free(unfinished);
        return 1;
    }
    if (!force && stat(probe, &sb) == 0) {
        fprintf(stderr, "vidtrain synth: %s already holds a dataset (use --force to overwrite)\n",
                dir);
        return 1;
    }
    synth_say_plan(&o);
    fflush(stdout);
    progress_state ps = {.tty = isatty(2), .t0 = vt_now()};
    vt_synth_summary sum;
    char err[512];
    if (vt_synth_dataset(dir, &o, on_progress, &ps, &sum, err, sizeof err) < 0) {
        fprintf(stderr, "vidtrain synth: %s\n", err);
        return 1;
    }
    char bytes[32];
    printf("wrote %d videos (%s) to %s in %.1f s:", sum.videos, vt_fmt_bytes(bytes, sizeof bytes, sum.bytes),
           dir, vt_now() - ps.t0);
    for (int i = 0; i < sum.nformats; i++)
        printf(" %s %d%s", vt_synth_format_name(&o, i), sum.per_format[i],
               i + 1 < sum.nformats ? "," : "\n");
    if (sum.foreign > 0)
        fprintf(stderr, "vidtrain synth: warning: %s also holds %d video%s that this synth did "
                "not write (a dataset that was there before, not by a synth): they are part of "
                "the dataset now. For this synth's videos alone, remove them or synth into a "
                "new folder\n", dir, sum.foreign, sum.foreign > 1 ? "s" : "");
    if (motion && o.val == 0)
        printf("next: vidtrain train %s --out runs/motion --val-split 0.2 --no-flip\n", dir);
    else
        printf("next: vidtrain train %s --out runs/demo\n", dir);
    return 0;
}
