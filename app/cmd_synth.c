/*
 * cmd_synth.c: `vidtrain synth DIR` — writes the motion-only demo dataset
 * (pipeline/synth.h) and prints progress and a summary. Parsing and printing only: the
 * rendering and encoding live in pipeline/synth.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "models/common.h"
#include "pipeline/synth.h"

static void usage(FILE *f) {
    vt_synth_opts d;
    vt_synth_defaults(&d);
    fprintf(f,
            "usage: vidtrain synth DIR [options]\n"
            "  Write a demo dataset of real encoded videos: DIR/{train,val,test}/<class>/*.\n"
            "  Classes differ by motion only (shapes moving left/right/up/down, rotating\n"
            "  cw/ccw, zooming in/out over a textured background); one frame cannot tell them\n"
            "  apart. Codecs rotate over mpeg4/.mp4, mpeg4/.avi, mjpeg/.mkv, ffv1/.mkv\n"
            "  (+ h264/.mp4 when libx264 is there). Deterministic given --seed.\n"
            "  --classes N   2..%d (default %d: move_left, move_right, move_up, move_down;\n"
            "                5-8 add rotate_cw, rotate_ccw, zoom_in, zoom_out)\n"
            "  --train N     videos per class in train (default %d)\n"
            "  --val N       videos per class in val (default %d)\n"
            "  --test N      videos per class in test (default %d)\n"
            "  --frames N    frames per video (default %d)\n"
            "  --size WxH    even frame size (default %dx%d)\n"
            "  --fps N       frame rate (default %d)\n"
            "  --seed S      (default %llu)\n"
            "  --no-h264     only the codecs every FFmpeg build has (same files everywhere)\n"
            "  --force       write into a DIR that already holds a dataset\n",
            VT_SYNTH_MAX_CLASSES, d.classes, d.train, d.val, d.test, d.frames, d.width, d.height,
            d.fps, (unsigned long long)d.seed);
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

static int parse_int(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 0 || v > 1000000)
        return -1;
    *out = (int)v;
    return 0;
}

int vt_cmd_synth(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_synth_opts o;
    vt_synth_defaults(&o);
    const char *dir = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int *target = !strcmp(a, "--classes") ? &o.classes
                    : !strcmp(a, "--train")   ? &o.train
                    : !strcmp(a, "--val")     ? &o.val
                    : !strcmp(a, "--test")    ? &o.test
                    : !strcmp(a, "--frames")  ? &o.frames
                    : !strcmp(a, "--fps")     ? &o.fps
                                              : NULL;
        if (target) {
            if (!val || parse_int(val, target) != 0) {
                fprintf(stderr, "vidtrain synth: %s needs a non-negative number\n", a);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--size")) {
            if (!val || sscanf(val, "%dx%d", &o.width, &o.height) != 2) {
                fprintf(stderr, "vidtrain synth: --size needs WxH, e.g. 128x96\n");
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (!val) {
                fprintf(stderr, "vidtrain synth: --seed needs a number\n");
                return 2;
            }
            o.seed = strtoull(val, NULL, 10);
            i++;
        } else if (!strcmp(a, "--no-h264")) {
            o.no_h264 = 1;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-') {
            fprintf(stderr, "vidtrain synth: unknown option %s (see --help)\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "vidtrain synth: one DIR only (got %s and %s)\n", dir, a);
            return 2;
        }
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    if (o.classes < 2 || o.classes > VT_SYNTH_MAX_CLASSES) {
        fprintf(stderr, "vidtrain synth: --classes must be 2..%d\n", VT_SYNTH_MAX_CLASSES);
        return 2;
    }
    if (o.width < 16 || o.height < 16 || (o.width & 1) || (o.height & 1)) {
        fprintf(stderr, "vidtrain synth: --size must be even and at least 16x16 (4:2:0 video)\n");
        return 2;
    }
    if (o.frames < 1 || o.fps < 1 || o.train + o.val + o.test < 1) {
        fprintf(stderr, "vidtrain synth: --frames, --fps and the video counts must be positive\n");
        return 2;
    }
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/train", dir);
    struct stat sb;
    if (!force && stat(probe, &sb) == 0) {
        fprintf(stderr, "vidtrain synth: %s already holds a dataset (use --force to overwrite)\n",
                dir);
        return 1;
    }
    int nf = vt_synth_format_count(&o);
    printf("vidtrain synth: %d classes x (%d train + %d val + %d test) videos, %d frames of %dx%d "
           "at %d fps, seed %llu\n  classes:", o.classes, o.train, o.val, o.test, o.frames,
           o.width, o.height, o.fps, (unsigned long long)o.seed);
    for (int c = 0; c < o.classes; c++)
        printf(" %s", vt_synth_class_name(c));
    printf("\n  formats:");
    for (int i = 0; i < nf; i++)
        printf(" %s", vt_synth_format_name(&o, i));
    printf("\n");
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
    printf("next: vidtrain train %s --out runs/demo\n", dir);
    return 0;
}
