/*
 * cmd_prep.c: `vidtrain prep SRC DST` — a training-ready mirror of a dataset folder:
 * every video under SRC re-encoded (pipeline/data/prep.h) to the same relative path
 * under DST, every other file (list files, labels CSVs) copied, in parallel over files,
 * with a progress line, a manifest (DST/prep-manifest.csv) and resume. A video whose
 * container cannot hold the codec changes extension; then DST/prep-paths.csv maps old
 * names to new and the copied .txt/.csv/.tsv files are rewritten to name the new files.
 * With --trim, the segments the dataset's lists or labels name are written as files of
 * their own, named in DST/prep-segments.csv (docs/segments.md).
 *
 * This file is the options and the order of the work: vt_cmd_prep is the parse
 * (prep_parse), the plan (prep_claim_dst, prep_plan) and the run (prep_copy_others,
 * prep_encode, prep_rewrite_manifest, prep_report). The walk, the manifest, the workers,
 * the names and copies, and --trim are app/prep/prep_*.c (app/prep/prep_cmd.h).
 *
 * It must never leave a partial file under a final name (outputs are written under a
 * hidden temporary name in the same folder — the dataset scan skips hidden names — and
 * renamed when whole), never write into SRC, and never stop for one bad video: that is
 * reported with its path and FFmpeg's reason, counted and written to the manifest. A DST
 * that cannot be written (a full disk) is no bad video: the run stops at once with DST's
 * reason, its manifest whole, and resumes when rerun. One prep at a time writes a DST
 * (a lock, DST/.prep-lock). A DST is marked unfinished (VT_DATASET_UNFINISHED) from its
 * first write until a run ends with every video done, so that nothing reads a killed
 * prep's DST as a whole dataset.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/leaks.h"
#include "app/opts.h"
#include "app/prep/prep_cmd.h"
#include "app/run/run_files.h"
#include "app/signals.h"
#include "base/common.h"
#include "base/thread.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/prep.h"
#include "pipeline/data/video/video.h"

/* Paths are checked once, at the walk, to leave room under 4 KiB for DST and the
 * temporary names; GCC cannot see that and warns on every later snprintf. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain prep SRC DST [--short-side S] [--fps F] [--gop G] [--codec C]\n"
        "                             [--crf Q] [--jobs N] [--force]\n"
        "                             [--trim (--lists PATH [--list-format F] [--fold N] |\n"
        "                                      --labels CSV)]\n"
        "  Re-encode every video under SRC to training size, into the same relative path\n"
        "  under DST; copy every other file (list files, labels CSVs). Any layout vidtrain\n"
        "  reads works: class folders, train/val/test folders, UCF101 list files, labels\n"
        "  CSVs. HD footage decodes 10-40x slower than a training-size copy, so do this\n"
        "  once before training on 720p/1080p/4K video. Each output is scaled so that its\n"
        "  short side is S (aspect kept, even sides, one bicubic resampling, which keeps\n"
        "  the detail training's own scaling needs; a source already that small keeps its\n"
        "  size: nothing is upscaled), turned upright (rotation metadata applied to the\n"
        "  pixels), video only (audio and other streams dropped), with a keyframe every G\n"
        "  frames so that any clip seeks cheaply. The leak check's signatures of each copy\n"
        "  and its source come from the same decode, into the vidtrain cache (docs/splits.md).\n"
        "\n"
        "  --short-side S  short side in pixels (default %d). Choose S = crop * 8/7: the\n"
        "                  default clip 16x112 crops 112 from 128; a 16x160 clip wants 183\n"
        "                  -> 184; 8x32 works from anything >= 32. Train with the same\n"
        "                  --short-side S (or smaller) and nothing is scaled up.\n"
        "  --fps F         constant frame rate F, resampled (frames repeated or dropped by\n"
        "                  time); default: keep every frame and its timestamp (VFR stays VFR)\n"
        "  --gop G         keyframe interval in frames (default %d): a clip read seeks to the\n"
        "                  keyframe before it and decodes on, so G bounds the wasted frames\n"
        "  --codec C       h264 (libx264, tuned for fast decoding: the default), mpeg4,\n"
        "                  mjpeg (all-intra: no --gop). Measured on 1080p footage at\n"
        "                  S=128 (bench/bench-prep-codecs.sh, docs/prep.md): h264 G=%d\n"
        "                  reads at ~300 clips/s per core in 2.4 MiB per minute of video;\n"
        "                  mpeg4 G=16 ~480 in 1.6x the bytes, mjpeg 4.7x the bytes; the HD\n"
        "                  source itself: 2.3 clips/s per core\n"
        "  --crf Q         quality: h264 CRF 0-51 (default %d; lower = better, larger:\n"
        "                  23, x264's own default, is 1.4-1.6x faster to read in half\n"
        "                  the bytes, but cost ~2 points of accuracy on one of two test\n"
        "                  sets in docs/prep.md);\n"
        "                  mpeg4/mjpeg qscale 1-31 (default 4 / 3)\n"
        "  --jobs N        files at once, one core each (default: the cores, %ld here)\n"
        "  --decode MODE   cpu (default), nvdec or auto: where the sources decode. HD\n"
        "                  prep is bound by decoding; NVDEC takes most of it off the CPU\n"
        "                  (H.264/HEVC pixels identical; docs/decode.md)\n"
        "  --force         redo every file, and accept other options than DST was made with\n"
        "\n"
        "  Output names keep the file name and extension when that container holds the\n"
        "  codec (.mp4 .mov .m4v .mkv .avi .flv .3gp .asf .wmv); others (.webm .gif .y4m\n"
        "  .ts .mts .m2ts .mpg .vob .mxf .divx .ogv, raw .h264 .hevc .m2v .mjpeg) become\n"
        "  .mp4, listed in DST/" PATHS " (old,new), and the copies of .txt, .csv\n"
        "  and .tsv files are rewritten to name the new files. Two sources that would\n"
        "  share a name keep their whole name (a.webm beside a.mp4: a.webm.mp4; a.webm.2.mp4\n"
        "  where SRC has an a.webm.mp4 too): every source its own copy.\n"
        "  DST/" MANIFEST ": path,source,duration_s,frames,bytes,sha256,status,damage —\n"
        "  one row per video, status \"ok\" or \"bad: FFmpeg's reason\" (unreadable,\n"
        "  truncated, no video stream, 0 decodable frames, frames under 8 pixels a side).\n"
        "  Bad videos are skipped and counted. A damaged source (decode errors, frames\n"
        "  that never decode) is copied as it decoded, named on its line, counted at the\n"
        "  end and described in its row's damage column (empty when clean): its copy\n"
        "  reads clean.\n"
        "  Resume: run the same command again. A video whose output exists and whose row\n"
        "  says ok, made from that source, is skipped; an interrupted one is redone\n"
        "  (outputs are written under a hidden temporary name and renamed when whole).\n"
        "  DST/" OPTIONS " records the options and the SRC (its real path); a rerun\n"
        "  with other options or from another SRC is refused unless --force. Until a run ends with\n"
        "  every video done, DST is marked unfinished (DST/" VT_DATASET_UNFINISHED "):\n"
        "  train, eval and scan refuse it. A copy whose source SRC no longer has is\n"
        "  removed (named on stderr).\n"
        "  One prep at a time writes a DST: a second one is refused (DST/.prep-lock).\n"
        "  DST may not be SRC, lie inside it or reach into it through a link (refused).\n"
        "  A DST that cannot be written (a full disk) stops the run with its reason; no\n"
        "  video is blamed for it, and a rerun after freeing space resumes.\n"
        "  Exit: 0 when every readable video is in DST (bad ones are listed), 1 when no\n"
        "  video could be written or DST failed, 2 on a usage error, 130 after Ctrl-C.\n"
        "\n"
        "  --trim          write each segment the dataset names as a file of its own (cut\n"
        "                  from its source, re-encoded as above) instead of the whole source:\n"
        "                  <folder>/<stem>_<start>_<end>.<ext> (times %%06d when whole seconds,\n"
        "                  as Kinetics' download scripts name clips; .2 before the\n"
        "                  extension where a file of SRC or another source's segment\n"
        "                  has that name), and DST/" SEGMENTS "\n"
        "                  a labels file naming every sample's output without start/end\n"
        "                  (written at the end: only the outputs that are on disk):\n"
        "                  train with --labels DST/" SEGMENTS " (docs/segments.md). The\n"
        "                  segments come from --lists (a Kinetics CSV over untrimmed videos)\n"
        "                  or --labels (a CSV with start,end columns), read as train does\n",
        VT_PREP_SHORT_SIDE, VT_PREP_GOP, VT_PREP_GOP, VT_PREP_CRF,
        sysconf(_SC_NPROCESSORS_ONLN));
}

/* ---- options recorded in DST ---- */

static char *options_text(const vt_prep_opts *o) {
    /* Every choice that changes a copy's pixels is recorded, so that a rerun with other
     * choices is refused rather than mixing two kinds of copy in one DST: a mix shifts
     * with the file order, which is the class order, and training learns the shift.
     * small=kept: sources at most S keep their size (a DST without the line has them
     * upscaled to S). colour=exact: the source's brightness and range kept through
     * swscale's exact path (without the line: about a level darker); it also stands for
     * the bicubic scaling, which has no line of its own because no DST has one without
     * the other. quality: H.264's CRF as a number, the default resolved, so a later
     * change of the default cannot pass for the same copy (quality=-1 in an old DST
     * meant 23 and is refused). */
    int q = o->quality < 0 && !strcmp(o->codec, "h264") ? VT_PREP_CRF : o->quality;
    return prep_fmt("short_side=%d\nsmall=kept\ncolour=exact\nfps=%g\ngop=%d\ncodec=%s\n"
                    "quality=%d\n", o->short_side, o->fps, o->gop, o->codec, q);
}

/* The options' line naming SRC: "src=PATH\n", a newline in PATH written \n and a
 * backslash \\ (a path may hold any byte but NUL: the line must stay one line). */
static char *src_record(const char *path) {
    size_t n = strlen(path), k = 4;
    char *l = vt_malloc(2 * n + 6);
    memcpy(l, "src=", 4);
    for (size_t i = 0; i < n; i++) {
        if (path[i] == '\n' || path[i] == '\\')
            l[k++] = '\\';
        l[k++] = path[i] == '\n' ? 'n' : path[i];
    }
    l[k++] = '\n';
    l[k] = 0;
    return l;
}

/* --trim: the dataset as train reads it (lists, labels), its segments as new entries.
 * The number of segments, or -1 after a message. */
static int trim_segments(entry_list *list, trim_csv *csv, vt_dataset **ds, const char *src,
                         const char *dst, const vt_dataset_opts *dopt, const char *labels,
                         const char *codec) {
    char err[1024];
    *ds = vt_dataset_open(src, dopt, err, sizeof err);
    if (!*ds || (labels && vt_dataset_load_labels(*ds, labels, NULL, err, sizeof err) != 0)) {
        fprintf(stderr, "vidtrain prep: --trim: %s\n", err);
        return -1;
    }
    int n = prep_trim_entries(list, csv, *ds, codec);
    if (n == 0)
        fprintf(stderr, "vidtrain prep: --trim: the dataset names no segment (rows without "
                "start/end): every video is written whole\n");
    else
        fprintf(stderr, "vidtrain prep: --trim: %d segments, written as files of their own; "
                "labels in %s/" SEGMENTS " at the end\n", n, dst);
    return n;
}

/* DST failed (why names the file): the run stops, no source is blamed. */
static void dst_stop(const char *dst, const char *why) {
    /* by the reason: a process limit is no fault of DST ("check that DST is writable") */
    const char *hint = strstr(why, strerror(ENOSPC)) || strstr(why, strerror(EDQUOT))
        ? "The disk is full (no space left on device): free space there, or choose another DST"
        : strstr(why, strerror(EMFILE)) || strstr(why, strerror(ENFILE))
        ? "The limit on open files is reached: raise it (ulimit -n), or give fewer --jobs"
        : strstr(why, strerror(EFBIG)) ? "A file passed the limit on file size (ulimit -f) or "
          "the largest file DST's file system holds: raise it, or choose another DST"
        : "Check that DST is writable";
    fprintf(stderr, "vidtrain prep: stopped: cannot write into %s: %s. %s. No video is "
            "recorded as bad for it, and no partial file is left: run the same command "
            "again to resume.\n", dst, why, hint);
}

/* ---- the command: parse, plan (claim DST, list the work), run (copy, encode, report) ---- */

/* The command line. */
typedef struct prep_args {
    vt_prep_opts o;
    const char *src, *dst;
    int jobs, force, trim;
    vt_dataset_opts dopt; /* --trim's --lists, --list-format, --fold */
    const char *labels;   /* --trim's --labels */
} prep_args;

/* Everything a run holds, freed at the end whatever step stopped it. */
typedef struct prep_state {
    struct stat ss, ds; /* SRC and DST */
    int lock;           /* DST/.prep-lock, or -1 */
    char *opt_text, *recorded;
    entry_list list;
    rename_map m;
    vt_dataset *dset;
    trim_csv tcsv;
    int nseg, nvideo, skipped, copied, rewritten, nother, nth, sig, stale;
    row_list old;
    run r;
    pthread_t *th;
} prep_state;

/* Fills *a from argv and checks the options against each other and this FFmpeg: 0, or
 * the exit status after saying what is wrong. */
static int prep_parse(prep_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    vt_prep_opts_default(&a->o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    a->jobs = ncpu > 0 ? (int)ncpu : 1;
    vt_prep_opts *o = &a->o;
    const char *pos[2] = {NULL, NULL};
    int npos = 0, dr;
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        vt_opts_given_note(&given, arg);
        if (!strcmp(arg, "--short-side")) {
            if (vt_opt_int("prep", arg, v, 2, VT_CLIP_MAX_SIDE, &o->short_side) != 0)
                return 2;
            i++;
        } else if (!strcmp(arg, "--gop")) {
            if (vt_opt_int("prep", arg, v, 1, 1000, &o->gop) != 0)
                return 2;
            i++;
        } else if (!strcmp(arg, "--crf")) {
            if (vt_opt_int("prep", arg, v, 0, 51, &o->quality) != 0)
                return 2;
            i++;
        } else if (!strcmp(arg, "--jobs")) {
            if (vt_opt_int("prep", arg, v, 1, 256, &a->jobs) != 0)
                return 2;
            i++;
        } else if (!strcmp(arg, "--fps")) {
            if (vt_opt_f64("prep", arg, v, 0.1, 1000, &o->fps) != 0)
                return 2;
            i++;
        } else if (!strcmp(arg, "--codec")) {
            if (!v) {
                fprintf(stderr, "vidtrain prep: --codec needs a value\n");
                return 2;
            }
            o->codec = v;
            i++;
        } else if ((dr = vt_decode_opt_take("prep", argc, argv, &i)) != 0) {
            if (dr < 0)
                return 2;
        } else if (!strcmp(arg, "--force")) {
            a->force = 1;
        } else if (!strcmp(arg, "--trim")) {
            a->trim = 1;
        } else if (!strcmp(arg, "--lists") || !strcmp(arg, "--labels") ||
                   !strcmp(arg, "--list-format")) {
            if (!v) {
                fprintf(stderr, "vidtrain prep: %s needs a value\n", arg);
                return 2;
            }
            if (!strcmp(arg, "--list-format") && vt_lists_format_parse(v) < 0) {
                fprintf(stderr, "vidtrain prep: --list-format: ucf101, hmdb51 or kinetics\n");
                return 2;
            }
            if (!strcmp(arg, "--lists"))
                a->dopt.lists_dir = v;
            else if (!strcmp(arg, "--labels"))
                a->labels = a->dopt.labels = v;
            else
                a->dopt.lists_format = (vt_lists_format)vt_lists_format_parse(v);
            i++;
        } else if (!strcmp(arg, "--fold")) {
            if (vt_opt_int("prep", arg, v, 1, 9, &a->dopt.list_fold) != 0)
                return 2;
            i++;
        } else if (arg[0] == '-' && arg[1] == '-') {
            fprintf(stderr, "vidtrain prep: unknown option %s (see --help)\n", arg);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = arg;
        } else {
            fprintf(stderr, "vidtrain prep: one SRC and one DST (see --help)\n");
            return 2;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "usage: vidtrain prep SRC DST [options] (see --help)\n");
        return 2;
    }
    a->src = pos[0];
    a->dst = pos[1];
    if (a->trim != (a->dopt.lists_dir || a->labels)) {
        fprintf(stderr, "vidtrain prep: %s\n", a->trim ? "--trim needs the segments: --lists "
                "(a Kinetics CSV) or --labels (a CSV with start,end columns)"
                : "--lists and --labels are read for --trim only (list and labels files "
                "under SRC are copied as they are)");
        return 2;
    }
    /* how --lists is read: without it there is nothing to read that way */
    static const char *const lists_only[] = {"--list-format", "--fold", NULL};
    const char *lo = vt_opts_given_any(&given, lists_only);
    if (lo && !a->dopt.lists_dir) {
        fprintf(stderr, "vidtrain prep: %s says how --lists is read: not without --lists "
                "(--trim --lists PATH); leave it out\n", lo);
        return 2;
    }
    if (vt_opts_given_has(&given, "--fold") && a->dopt.lists_format == VT_LISTS_KINETICS) {
        fprintf(stderr, "vidtrain prep: --fold picks UCF101's trainlist/testlist pair or an "
                "HMDB51 split: a Kinetics CSV has one split column; leave it out\n");
        return 2;
    }
    if (strcmp(o->codec, "h264") && strcmp(o->codec, "mpeg4") && strcmp(o->codec, "mjpeg")) {
        fprintf(stderr, "vidtrain prep: --codec %s: expected h264, mpeg4 or mjpeg\n", o->codec);
        return 2;
    }
    if (!vt_prep_codec_available(o->codec)) {
        if (strcmp(o->codec, "h264") || !vt_prep_codec_available("mpeg4")) {
            fprintf(stderr, "vidtrain prep: this FFmpeg has no %s encoder\n", o->codec);
            return 1;
        }
        fprintf(stderr, "vidtrain prep: this FFmpeg has no libx264: writing mpeg4 instead\n");
        o->codec = "mpeg4";
        if (vt_opts_given_has(&given, "--crf")) { /* a CRF is no qscale: 0 meant lossless */
            fprintf(stderr, "vidtrain prep: --crf %d is libx264's; mpeg4 is written at its own "
                    "default (qscale 4): give --codec mpeg4 --crf Q (1-31) to choose\n",
                    o->quality);
            o->quality = -1;
        }
    }
    if (!strcmp(o->codec, "mjpeg")) {
        if (vt_opts_given_has(&given, "--gop")) {
            fprintf(stderr, "vidtrain prep: --gop %d: mjpeg makes every frame a keyframe (it "
                    "has no interval to set); leave --gop out, or give --codec h264 or mpeg4\n",
                    o->gop);
            return 2;
        }
        o->gop = 1; /* every JPEG frame is a keyframe */
    }
    if (o->short_side & 1) {
        o->short_side++;
        fprintf(stderr, "vidtrain prep: --short-side rounded up to %d (4:2:0 needs even sides)\n",
                o->short_side);
    }
    /* 0 is no qscale: the encoder took its default (4 or 3) and DST recorded 0 */
    if ((o->quality > 31 || o->quality == 0) && strcmp(o->codec, "h264")) {
        fprintf(stderr, "vidtrain prep: --crf %d: for %s it is a qscale from 1 to 31 (1 the "
                "best)\n", o->quality, o->codec);
        return 2;
    }
    if (vt_frame_rate_given() && !prep_has_frame_dir(a->src, 0)) {
        char why[4200];
        snprintf(why, sizeof why, "%s holds none", a->src);
        return vt_frame_rate_check("prep", why, NULL, 0);
    }
    return 0;
}

/* Plan, first half: SRC is a folder, DST may be written (not SRC, not inside it), is
 * made, locked, and records these options (or already did). 0, or the exit status. */
static int prep_claim_dst(const prep_args *a, prep_state *s) {
    char err[1024], path[4200];
    if (stat(a->src, &s->ss) != 0 || !S_ISDIR(s->ss.st_mode)) {
        fprintf(stderr, "vidtrain prep: %s is not a folder\n", a->src);
        return 1;
    }
    /* The output rule (base/common.h): SRC, and so every source video in it, is this
     * command's input. A DST that is SRC, lies inside it or reaches into it through a link
     * is refused before any folder is made (prep SRC SRC/x wrote its copies, manifest and
     * lock into the dataset); each output is checked again as it is written. */
    vt_inputs_add(a->src);
    snprintf(path, sizeof path, "%s/" MANIFEST, a->dst);
    if (vt_output_check(path, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain prep: DST %s: %s\n", a->dst, err);
        return 1;
    }
    if (vt_run_mkdirs(a->dst, err, sizeof err) != 0 || stat(a->dst, &s->ds) != 0) {
        fprintf(stderr, "vidtrain prep: %s\n", err);
        return 1;
    }
    if (s->ss.st_dev == s->ds.st_dev && s->ss.st_ino == s->ds.st_ino) {
        fprintf(stderr, "vidtrain prep: SRC %s and DST %s are the same folder\n", a->src,
                a->dst);
        return 2;
    }
    /* Before anything in DST is read or written: a second prep would rename over the
     * first one's files and record them bad. */
    if ((s->lock = prep_lock_dst(a->dst)) < 0)
        return 1;

    /* Options: a DST made with others would mix two sizes; refuse unless --force. */
    s->opt_text = options_text(&a->o);
    if (a->trim) { /* a DST of segments is another mirror than one of whole files */
        char *t = prep_fmt("%strim=1\n", s->opt_text);
        free(s->opt_text);
        s->opt_text = t;
    }
    snprintf(path, sizeof path, "%s/" OPTIONS, a->dst);
    s->recorded = vt_file_read(path);
    /* the folder DST mirrors, last (a DST of an earlier vidtrain has no such line): a
     * rerun from another SRC whose files have the same names found every copy done, and
     * kept the other SRC's videos as its own (the manifest names copies by their path) */
    char *real = realpath(a->src, NULL);
    char *src_line = src_record(real ? real : a->src);
    free(real);
    char *was_src = s->recorded ? strstr(s->recorded, "\nsrc=") : NULL;
    if (was_src)
        *was_src++ = 0; /* recorded: the options, then (kept apart) its src line */
    const size_t was_n = was_src ? strcspn(was_src, "\n") : 0, now_n = strlen(src_line) - 1;
    if (s->recorded && was_src && !a->force &&
        (was_n != now_n || strncmp(was_src, src_line, now_n))) {
        fprintf(stderr, "vidtrain prep: %s was made from another SRC (%s %.*s): its copies "
                "are that folder's videos, which this run would take for those of %s and "
                "keep. Prep into another DST, or --force to redo every file from %s\n",
                a->dst, OPTIONS, (int)was_n, was_src, a->src, a->src);
        free(src_line);
        return 2;
    }
    if (s->recorded && was_src) /* the options' text ends with its newline again */
        strcat(s->recorded, "\n");
    if (s->recorded && strcmp(s->recorded, s->opt_text) && !a->force) {
        fprintf(stderr, "vidtrain prep: %s was made with other options:\n%s"
                "now:\n%sRerun with the same options to resume, or --force to redo it all.\n",
                a->dst, s->recorded, s->opt_text);
        free(src_line);
        return 2;
    }
    char *with_src = prep_fmt("%s%s", s->opt_text, src_line);
    free(src_line);
    free(s->opt_text);
    s->opt_text = with_src; /* written once DST is marked unfinished (prep_copy_others) */
    return 0;
}

/* 1 when manifest row w's copy was made from SRC's rel: its source column is SRC/rel as
 * the run that wrote it spelt SRC. An output name can pass to another source between two
 * runs (SRC gained an a.webm.mp4, and a.webm's copy moves to a.webm.2.mp4): the copy on
 * disk under the name is then the other source's, not one to keep. */
static int row_source_is(const row *w, const char *rel) {
    const char *src = w->f[1];
    if (!src)
        return 0;
    size_t n = strlen(src), k = strlen(rel);
    return (n == k || (n > k && src[n - k - 1] == '/')) && !strcmp(src + n - k, rel);
}

/* Plan, second half: the walk of SRC, the output names, --trim's segments, and the jobs
 * (the videos not done before: resume). 0, or the exit status. */
static int prep_plan(const prep_args *a, prep_state *s) {
    walk_ctx wc = {.list = &s->list, .src = a->src, .dst_dev = s->ds.st_dev,
                   .dst_ino = s->ds.st_ino};
    wc.anc_dev[0] = s->ss.st_dev;
    wc.anc_ino[0] = s->ss.st_ino;
    prep_walk(&wc, "", 0);
    entry_list *list = &s->list;
    for (int i = 0; i < list->n; i++)
        s->nvideo += list->e[i].video;
    if (s->nvideo == 0) {
        fprintf(stderr, "vidtrain prep: no video under %s (videos are recognised by their "
                "extension: %s)\n", a->src, vt_video_exts_text());
        return 1;
    }
    prep_name_outputs(&s->list, s->nvideo, a->o.codec, &s->m);

    /* --trim: a source with segments is written as its segments (new entries). */
    if (a->trim) {
        s->nseg = trim_segments(list, &s->tcsv, &s->dset, a->src, a->dst, &a->dopt, a->labels,
                                a->o.codec);
        if (s->nseg < 0)
            return 1;
        s->nvideo = 0;
        for (int i = 0; i < list->n; i++)
            s->nvideo += list->e[i].video && !list->e[i].trimmed;
    }

    /* Resume: a video whose output exists and whose last row says ok is done. */
    char path[4200];
    snprintf(path, sizeof path, "%s/" MANIFEST, a->dst);
    prep_manifest_read(&s->old, path); /* --force redoes every file, but needs the rows
                                        * of copies SRC no longer has (prep_copy_others) */
    run *r = &s->r;
    r->jobs = vt_calloc((size_t)s->nvideo, sizeof(entry));
    for (int i = 0; i < list->n; i++) {
        entry *e = &list->e[i];
        if (!e->video || e->trimmed)
            continue;
        row *w = prep_manifest_find(&s->old, e->out);
        char out[4200];
        snprintf(out, sizeof out, "%s/%s", a->dst, e->out);
        if (!a->force && w && !strcmp(w->f[6], "ok") && row_source_is(w, e->rel) &&
            vt_file_exists(out)) {
            s->skipped++;
            continue;
        }
        r->jobs[r->njobs++] = *e;
        r->bytes_total += e->bytes;
    }
    return 0;
}

/* Run, first: the manifest rewritten with the rows kept (then appended to as files
 * finish), the non-video files copied (small, and list files are then in place), and
 * DST/prep-paths.csv. 0, or the exit status. */
static int prep_copy_others(const prep_args *a, prep_state *s) {
    char err[1024], path[4200];
    run *r = &s->r;
    /* From here until the report DST is not whole: a train, eval or scan of it is refused
     * until a run ends with every video done (a killed prep's DST was trained on as if
     * whole). Not before the plan: a plan that fails changes nothing in a finished DST. */
    char *how = prep_fmt("`vidtrain prep %s %s` has not written every video (it is running, "
                         "or it was stopped: killed, interrupted, out of disk space); run "
                         "the same command again to finish it", a->src, a->dst);
    int mrc = vt_dataset_mark_unfinished(a->dst, how, err, sizeof err);
    free(how);
    if (mrc != 0) {
        dst_stop(a->dst, err);
        return 1;
    }
    /* The options record describes the copies: it changes under the mark, with them. It
     * was written before (at the claim): a --force with other options whose plan failed,
     * or that was killed before this point, left DST's old copies recorded as made with
     * the new options, and a rerun with those took them as done. */
    snprintf(path, sizeof path, "%s/" OPTIONS, a->dst);
    if (vt_file_write_atomic(path, s->opt_text, strlen(s->opt_text), err, sizeof err) != 0) {
        dst_stop(a->dst, err);
        return 1;
    }
    /* a copy of a video SRC no longer has would stay in the dataset DST is */
    s->stale = prep_manifest_drop_stale(a->dst, &s->old, &s->list);
    if (a->force)
        prep_rows_clear(&s->old);
    snprintf(path, sizeof path, "%s/" MANIFEST, a->dst);
    if (prep_manifest_write(path, &s->old, r->jobs, r->njobs, err, sizeof err) != 0) {
        dst_stop(a->dst, err);
        return 1;
    }
    r->manifest = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (r->manifest < 0) {
        fprintf(stderr, "vidtrain prep: cannot append to %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (int i = 0; i < s->list.n; i++) {
        if (s->list.e[i].video)
            continue;
        s->nother++;
        int rw = 0, cr = prep_copy_file(r, &s->list.e[i], &s->m, &rw, err, sizeof err);
        if (cr == -2) { /* DST, not the file: the videos would meet the same disk */
            dst_stop(a->dst, err);
            return 1;
        }
        if (cr != 0)
            fprintf(stderr, "vidtrain prep: %s (not copied)\n", err);
        else
            s->copied++;
        s->rewritten += rw;
    }
    if (s->m.n) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK_MEM(f != NULL, "a text built in memory");
        fputs("old,new\n", f);
        for (int i = 0; i < s->m.n; i++) {
            vt_csv_put(f, s->m.old[i], 0);
            vt_csv_put(f, s->m.new_[i], 1);
        }
        VT_CHECK(fclose(f) == 0, "building %s in memory failed", PATHS);
        snprintf(path, sizeof path, "%s/" PATHS, a->dst);
        int wrc = vt_file_write_atomic(path, text, len, err, sizeof err);
        free(text);
        if (wrc != 0) {
            dst_stop(a->dst, err);
            return 1;
        }
    }
    return 0;
}

/* Run, second: the jobs on a->jobs worker threads, until done or Ctrl-C. */
static void prep_encode(const prep_args *a, prep_state *s) {
    run *r = &s->r;
    const vt_prep_opts *o = &a->o;
    fprintf(stderr, "vidtrain prep: %s -> %s: %d videos (%d to do, %d done before), %d other "
            "files; short side %d, %s, keyframe every %d frames, %s; %d jobs\n",
            a->src, a->dst, s->nvideo, r->njobs, s->skipped, s->nother, o->short_side,
            o->codec, o->gop, o->fps > 0 ? "constant fps" : "timestamps kept", a->jobs);
    r->tty = isatty(fileno(stderr));
    r->t0 = vt_now();
    atomic_init(&r->next, 0);
    pthread_mutex_init(&r->lock, NULL);
    /* Ctrl-C: the workers take no new file; the ones being encoded finish (their rows in
     * the manifest), and the manifest is rewritten whole. */
    vt_signals_install_msg("\nvidtrain prep: stopping after the files being written now "
                           "(the manifest keeps every finished one); run the same command "
                           "again to resume (Ctrl-C again to quit now)\n");
    s->nth = VT_MIN(a->jobs, VT_MAX(r->njobs, 1));
    s->th = vt_malloc((size_t)s->nth * sizeof *s->th);
    for (int t = 0; t < s->nth; t++)
        vt_thread_start(&s->th[t], prep_worker, r, "prep's jobs");
    for (int t = 0; t < s->nth; t++)
        pthread_join(s->th[t], NULL);
    s->sig = vt_signal_pending();
    vt_signals_reset();
    pthread_mutex_destroy(&r->lock);
    close(r->manifest);
    r->manifest = -1;
    if (r->tty && r->njobs)
        fputc('\n', stderr);
}

/* Run, last: the manifest once more, whole and sorted (the kept rows and this run's), and
 * --trim's labels file. On a full disk this fails, and the appended manifest stays: whole
 * rows only, the last per path winning, which is what the next run reads. 1 when a write
 * failed (said), else 0. */
static int prep_rewrite_manifest(const prep_args *a, prep_state *s) {
    char err[1024], path[4200];
    int wfail = 0;
    row_list all = {0};
    snprintf(path, sizeof path, "%s/" MANIFEST, a->dst);
    prep_manifest_read(&all, path);
    if (prep_manifest_write(path, &all, NULL, 0, err, sizeof err) != 0 && !s->r.dst_failed) {
        fprintf(stderr, "vidtrain prep: %s\n", err);
        wfail = 1;
    }
    /* --trim: the labels file names only the outputs that are on disk now */
    int left = 0;
    if (s->nseg > 0 && !s->r.dst_failed) {
        if (prep_trim_write(&s->tcsv, a->dst, &all, &left, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain prep: %s\n", err);
            wfail = 1;
        } else if (left) {
            fprintf(stderr, "vidtrain prep: %d labelled samples are not in %s/" SEGMENTS
                    ": their outputs are bad or not written yet (see below)\n", left, a->dst);
        }
    }
    for (int i = 0; i < all.n; i++)
        prep_row_free(&all.r[i]);
    free(all.r);
    return wfail;
}

/* Run, the report: the summary on stdout and the exit status (0 when every readable
 * video is in DST, 1 when none or DST failed, 128 + the signal after Ctrl-C). */
static int prep_report(const prep_args *a, prep_state *s, int wfail) {
    const run *r = &s->r;
    double dt = vt_now() - r->t0;
    char b1[32], b2[32];
    int64_t out_bytes = 0, in_bytes = 0;
    int rc;
    for (int i = 0; i < r->rows.n; i++)
        if (!strcmp(r->rows.r[i].f[6], "ok"))
            out_bytes += strtoll(r->rows.r[i].f[4], NULL, 10);
    for (int i = 0; i < r->njobs; i++)
        in_bytes += r->jobs[i].bytes;
    printf("prep: %d written, %d done before, %d bad, %d not reached; %d other files copied "
           "(%d rewritten for renamed videos%s)\n", r->ok, s->skipped, r->bad,
           r->njobs - r->done, s->copied, s->rewritten, s->m.n ? ", see " PATHS : "");
    if (s->stale)
        printf("prep: %d cop%s of videos SRC no longer has removed from DST (listed above)\n",
               s->stale, s->stale > 1 ? "ies" : "y");
    printf("prep: %.1f s of video in %.1f s = %.2f s/s (%.2f per job); %s read, %s written; "
           "manifest %s/" MANIFEST "\n", r->src_seconds, dt, dt > 0 ? r->src_seconds / dt : 0.0,
           dt > 0 ? r->src_seconds / dt / s->nth : 0.0, vt_fmt_bytes(b1, sizeof b1, in_bytes),
           vt_fmt_bytes(b2, sizeof b2, out_bytes), a->dst);
    if (r->damaged)
        printf("prep: %d damaged source(s) copied as they decoded (named above): their copies "
               "read clean, so later commands cannot tell\n", r->damaged);
    if (r->bad) {
        printf("prep: bad videos (not in DST):\n");
        for (int i = 0; i < r->rows.n; i++)
            if (strcmp(r->rows.r[i].f[6], "ok"))
                printf("  %s: %s\n", r->rows.r[i].f[1], r->rows.r[i].f[6] + 5);
    }
    char why[640];
    if (r->dst_failed) {
        fflush(stdout);
        dst_stop(a->dst, r->dst_err);
        rc = 1;
    } else if (vt_video_system_failed(why, sizeof why)) {
        fflush(stdout);
        fprintf(stderr, "vidtrain prep: stopped: %s; no partial file is left, and the same "
                "command resumes\n", why);
        rc = 1;
    } else if (s->sig) {
        printf("prep: interrupted; run the same command again to resume\n");
        rc = 128 + s->sig;
    } else {
        rc = r->ok + s->skipped > 0 && !wfail ? 0 : 1;
        /* every video done (or bad, and said): DST is whole, its copies synced */
        char err[1024];
        if (!wfail && vt_dataset_mark_finished(a->dst, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain prep: %s\n", err);
            rc = 1;
        }
    }
    return rc; /* the summary on a full disk fails the run too: app/main.c, stdout_check */
}

static void prep_state_free(prep_state *s) {
    for (int i = 0; i < s->list.n; i++) {
        free(s->list.e[i].rel);
        free(s->list.e[i].out);
    }
    free(s->list.e);
    for (int i = 0; i < s->old.n; i++)
        prep_row_free(&s->old.r[i]);
    free(s->old.r);
    for (int i = 0; i < s->r.rows.n; i++)
        prep_row_free(&s->r.rows.r[i]);
    free(s->r.rows.r);
    free(s->r.jobs);
    free(s->m.old);
    free(s->m.new_);
    free(s->th);
    free(s->opt_text);
    free(s->recorded);
    vt_dataset_free(&s->dset);
    prep_trim_csv_free(&s->tcsv);
    if (s->r.manifest >= 0)
        close(s->r.manifest);
    if (s->lock >= 0)
        close(s->lock); /* releases DST */
}

int vt_cmd_prep(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    prep_args a;
    prep_state s = {.lock = -1, .r.manifest = -1};
    int rc = prep_parse(&a, argc, argv);
    s.r.src = a.src;
    s.r.dst = a.dst;
    s.r.o = a.o;
    if (rc == 0) {
        /* the leak check's signatures from this decode, for free (docs/splits.md) */
        s.r.o.signature = vt_leaks_cache_dir(s.r.sig_cache, sizeof s.r.sig_cache) != NULL;
        if (!s.r.o.signature)
            s.r.sig_cache[0] = 0;
    }
    if (rc == 0)
        rc = prep_claim_dst(&a, &s);
    if (rc == 0)
        rc = prep_plan(&a, &s);
    if (rc == 0)
        rc = prep_copy_others(&a, &s);
    if (rc == 0) {
        prep_encode(&a, &s);
        int wfail = prep_rewrite_manifest(&a, &s);
        rc = prep_report(&a, &s, wfail);
    }
    prep_state_free(&s);
    return rc;
}
