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
 * This file is the options and the order of the work; the walk, the manifest, the
 * workers, the names and copies, and --trim are app/prep/prep_*.c (app/prep/prep_cmd.h).
 *
 * It must never leave a partial file under a final name (outputs are written under a
 * hidden temporary name in the same folder — the dataset scan skips hidden names — and
 * renamed when whole), never write into SRC, and never stop for one bad video: that is
 * reported with its path and FFmpeg's reason, counted and written to the manifest. A DST
 * that cannot be written (a full disk) is no bad video: the run stops at once with DST's
 * reason, its manifest whole, and resumes when rerun. One prep at a time writes a DST
 * (a lock, DST/.prep-lock).
 */
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
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/prep.h"

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
        "                  mjpeg (all-intra; --gop ignored). Measured on 1080p footage at\n"
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
        "  codec (.mp4 .mov .m4v .mkv .avi .flv); others (.webm .gif .y4m .ts .mpg .ogv)\n"
        "  become .mp4, listed in DST/" PATHS " (old,new), and the copies of .txt, .csv\n"
        "  and .tsv files are rewritten to name the new files.\n"
        "  DST/" MANIFEST ": path,source,duration_s,frames,bytes,sha256,status — one row\n"
        "  per video, status \"ok\" or \"bad: FFmpeg's reason\" (unreadable, truncated, no\n"
        "  video stream, 0 decodable frames). Bad videos are skipped and counted.\n"
        "  Resume: run the same command again. A video whose output exists and whose row\n"
        "  says ok is skipped; an interrupted one is redone (outputs are written under a\n"
        "  hidden temporary name and renamed when whole). DST/" OPTIONS " records the\n"
        "  options; a rerun with others is refused unless --force.\n"
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
        "                  as Kinetics' download scripts name clips), and DST/" SEGMENTS "\n"
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
    fprintf(stderr, "vidtrain prep: stopped: cannot write into %s: %s. %s. No video is "
            "recorded as bad for it, and no partial file is left: run the same command "
            "again to resume.\n", dst, why,
            strstr(why, strerror(ENOSPC)) || strstr(why, strerror(EDQUOT))
                ? "The disk is full (no space left on device): free space there, or choose "
                  "another DST"
                : "Check that DST is writable");
}

/* ---- the command ---- */

int vt_cmd_prep(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_prep_opts o;
    vt_prep_opts_default(&o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = ncpu > 0 ? (int)ncpu : 1, force = 0, rc = 2;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    entry_list list = {0};
    row_list old = {0};
    rename_map m = {0};
    run r = {0};
    char *opt_text = NULL, *recorded = NULL;
    char err[1024], path[4200];
    pthread_t *th = NULL;
    int trim = 0, dr;
    vt_dataset_opts dopt = {0};
    const char *labels = NULL;
    vt_dataset *dset = NULL;
    trim_csv tcsv = {0};
    int lock = -1, nseg = 0;
    r.manifest = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--short-side")) {
            if (vt_opt_int("prep", a, v, 2, VT_CLIP_MAX_SIDE, &o.short_side) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--gop")) {
            if (vt_opt_int("prep", a, v, 1, 1000, &o.gop) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--crf")) {
            if (vt_opt_int("prep", a, v, 0, 51, &o.quality) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--jobs")) {
            if (vt_opt_int("prep", a, v, 1, 256, &jobs) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--fps")) {
            if (vt_opt_f64("prep", a, v, 0.1, 1000, &o.fps) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--codec")) {
            if (!v) {
                fprintf(stderr, "vidtrain prep: --codec needs a value\n");
                goto end;
            }
            o.codec = v;
            i++;
        } else if ((dr = vt_decode_opt_take("prep", argc, argv, &i)) != 0) {
            if (dr < 0)
                goto end;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--trim")) {
            trim = 1;
        } else if (!strcmp(a, "--lists") || !strcmp(a, "--labels") ||
                   !strcmp(a, "--list-format")) {
            if (!v) {
                fprintf(stderr, "vidtrain prep: %s needs a value\n", a);
                goto end;
            }
            if (!strcmp(a, "--list-format") && vt_lists_format_parse(v) < 0) {
                fprintf(stderr, "vidtrain prep: --list-format: ucf101, hmdb51 or kinetics\n");
                goto end;
            }
            if (!strcmp(a, "--lists"))
                dopt.lists_dir = v;
            else if (!strcmp(a, "--labels"))
                labels = v;
            else
                dopt.lists_format = (vt_lists_format)vt_lists_format_parse(v);
            i++;
        } else if (!strcmp(a, "--fold")) {
            if (vt_opt_int("prep", a, v, 1, 9, &dopt.list_fold) != 0)
                goto end;
            i++;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "vidtrain prep: unknown option %s (see --help)\n", a);
            goto end;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "vidtrain prep: one SRC and one DST (see --help)\n");
            goto end;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "usage: vidtrain prep SRC DST [options] (see --help)\n");
        goto end;
    }
    if (trim != (dopt.lists_dir || labels)) {
        fprintf(stderr, "vidtrain prep: %s\n", trim ? "--trim needs the segments: --lists "
                "(a Kinetics CSV) or --labels (a CSV with start,end columns)"
                : "--lists and --labels are read for --trim only (list and labels files "
                "under SRC are copied as they are)");
        goto end;
    }
    if (strcmp(o.codec, "h264") && strcmp(o.codec, "mpeg4") && strcmp(o.codec, "mjpeg")) {
        fprintf(stderr, "vidtrain prep: --codec %s: expected h264, mpeg4 or mjpeg\n", o.codec);
        goto end;
    }
    if (!vt_prep_codec_available(o.codec)) {
        if (strcmp(o.codec, "h264") || !vt_prep_codec_available("mpeg4")) {
            fprintf(stderr, "vidtrain prep: this FFmpeg has no %s encoder\n", o.codec);
            rc = 1;
            goto end;
        }
        fprintf(stderr, "vidtrain prep: this FFmpeg has no libx264: writing mpeg4 instead\n");
        o.codec = "mpeg4";
    }
    if (!strcmp(o.codec, "mjpeg"))
        o.gop = 1; /* every JPEG frame is a keyframe */
    if (o.short_side & 1) {
        o.short_side++;
        fprintf(stderr, "vidtrain prep: --short-side rounded up to %d (4:2:0 needs even sides)\n",
                o.short_side);
    }
    if (o.quality > 31 && strcmp(o.codec, "h264")) {
        fprintf(stderr, "vidtrain prep: --crf for %s is a qscale from 1 to 31\n", o.codec);
        goto end;
    }
    r.src = pos[0];
    r.dst = pos[1];
    r.o = o;
    /* the leak check's signatures from this decode, for free (docs/splits.md) */
    r.o.signature = vt_leaks_cache_dir(r.sig_cache, sizeof r.sig_cache) != NULL;
    if (!r.o.signature)
        r.sig_cache[0] = 0;
    struct stat ss, ds;
    if (stat(r.src, &ss) != 0 || !S_ISDIR(ss.st_mode)) {
        fprintf(stderr, "vidtrain prep: %s is not a folder\n", r.src);
        rc = 1;
        goto end;
    }
    /* The output rule (base/common.h): SRC, and so every source video in it, is this
     * command's input. A DST that is SRC, lies inside it or reaches into it through a link
     * is refused before any folder is made (prep SRC SRC/x wrote its copies, manifest and
     * lock into the dataset); each output is checked again as it is written. */
    vt_inputs_add(r.src);
    snprintf(path, sizeof path, "%s/" MANIFEST, r.dst);
    if (vt_output_check(path, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain prep: DST %s: %s\n", r.dst, err);
        rc = 1;
        goto end;
    }
    if (vt_run_mkdirs(r.dst, err, sizeof err) != 0 || stat(r.dst, &ds) != 0) {
        fprintf(stderr, "vidtrain prep: %s\n", err);
        rc = 1;
        goto end;
    }
    if (ss.st_dev == ds.st_dev && ss.st_ino == ds.st_ino) {
        fprintf(stderr, "vidtrain prep: SRC %s and DST %s are the same folder\n", r.src, r.dst);
        goto end;
    }
    /* Before anything in DST is read or written: a second prep would rename over the
     * first one's files and record them bad. */
    if ((lock = prep_lock_dst(r.dst)) < 0) {
        rc = 1;
        goto end;
    }

    /* Options: a DST made with others would mix two sizes; refuse unless --force. */
    opt_text = options_text(&o);
    if (trim) { /* a DST of segments is another mirror than one of whole files */
        char *t = prep_fmt("%strim=1\n", opt_text);
        free(opt_text);
        opt_text = t;
    }
    snprintf(path, sizeof path, "%s/" OPTIONS, r.dst);
    recorded = vt_file_read(path);
    if (recorded && strcmp(recorded, opt_text) && !force) {
        fprintf(stderr, "vidtrain prep: %s was made with other options:\n%s"
                "now:\n%sRerun with the same options to resume, or --force to redo it all.\n",
                r.dst, recorded, opt_text);
        goto end;
    }
    if (vt_file_write_atomic(path, opt_text, strlen(opt_text), err, sizeof err) != 0) {
        dst_stop(r.dst, err);
        rc = 1;
        goto end;
    }

    walk_ctx wc = {.list = &list, .src = r.src, .dst_dev = ds.st_dev, .dst_ino = ds.st_ino};
    wc.anc_dev[0] = ss.st_dev;
    wc.anc_ino[0] = ss.st_ino;
    prep_walk(&wc, "", 0);
    int nvideo = 0;
    for (int i = 0; i < list.n; i++)
        nvideo += list.e[i].video;
    if (nvideo == 0) {
        fprintf(stderr, "vidtrain prep: no video under %s (videos are recognised by their "
                "extension: mp4 avi mkv webm mov m4v mpg mpeg gif y4m ogv flv ts)\n", r.src);
        rc = 1;
        goto end;
    }

    /* Output names, and the renamed ones. */
    m.old = vt_calloc((size_t)nvideo, sizeof(char *));
    m.new_ = vt_calloc((size_t)nvideo, sizeof(char *));
    for (int i = 0; i < list.n; i++) {
        entry *e = &list.e[i];
        if (!e->video) {
            e->out = vt_strdup(e->rel);
            continue;
        }
        char ext[32];
        vt_prep_out_ext(ext, sizeof ext, e->rel, o.codec);
        const char *dot = strrchr(e->rel, '.'), *slash = strrchr(e->rel, '/');
        if (!dot || (slash && dot < slash)) /* a frame folder: its name, no extension */
            dot = e->rel + strlen(e->rel);
        e->out = prep_fmt("%.*s.%s", (int)(dot - e->rel), e->rel, ext);
        if (strcmp(e->out, e->rel)) {
            m.old[m.n] = e->rel;
            m.new_[m.n] = e->out;
            m.n++;
        }
    }
    /* Two sources that map to one output (a.webm and a.gif beside a.mp4) would overwrite
     * each other: the later ones keep their extension in the name (a.webm.mp4). */
    for (int i = 0; i < list.n; i++) {
        for (int k = 0; list.e[i].video && k < list.n; k++) {
            if (k != i && list.e[k].video && !strcmp(list.e[i].out, list.e[k].out) &&
                strcmp(list.e[i].out, list.e[i].rel)) {
                char ext[32];
                vt_prep_out_ext(ext, sizeof ext, list.e[i].rel, o.codec);
                free(list.e[i].out);
                list.e[i].out = prep_fmt("%s.%s", list.e[i].rel, ext);
                for (int j = 0; j < m.n; j++)
                    if (m.old[j] == list.e[i].rel)
                        m.new_[j] = list.e[i].out;
            }
        }
        if (list.n > 2000) /* the quadratic check is for ordinary folders only */
            break;
    }
    /* Sort the map by old name (parallel arrays: a simple insertion sort; renames are
     * few, or a whole dataset of one extension already in walk order = sorted). */
    for (int i = 1; i < m.n; i++)
        for (int k = i; k > 0 && strcmp(m.old[k - 1], m.old[k]) > 0; k--) {
            char *t = m.old[k];
            m.old[k] = m.old[k - 1];
            m.old[k - 1] = t;
            t = m.new_[k];
            m.new_[k] = m.new_[k - 1];
            m.new_[k - 1] = t;
        }

    /* --trim: a source with segments is written as its segments (new entries). */
    if (trim) {
        nseg = trim_segments(&list, &tcsv, &dset, r.src, r.dst, &dopt, labels, o.codec);
        if (nseg < 0) {
            rc = 1;
            goto end;
        }
        nvideo = 0;
        for (int i = 0; i < list.n; i++)
            nvideo += list.e[i].video && !list.e[i].trimmed;
    }

    /* Resume: a video whose output exists and whose last row says ok is done. */
    snprintf(path, sizeof path, "%s/" MANIFEST, r.dst);
    if (!force)
        prep_manifest_read(&old, path);
    r.jobs = vt_calloc((size_t)nvideo, sizeof(entry));
    int skipped = 0;
    for (int i = 0; i < list.n; i++) {
        entry *e = &list.e[i];
        if (!e->video || e->trimmed)
            continue;
        row *w = prep_manifest_find(&old, e->out);
        char out[4200];
        snprintf(out, sizeof out, "%s/%s", r.dst, e->out);
        if (w && !strcmp(w->f[6], "ok") && vt_file_exists(out)) {
            skipped++;
            continue;
        }
        r.jobs[r.njobs++] = *e;
        r.bytes_total += e->bytes;
    }
    /* The manifest is rewritten with the rows kept, then appended to as files finish. */
    if (prep_manifest_write(path, &old, r.jobs, r.njobs, err, sizeof err) != 0) {
        dst_stop(r.dst, err);
        rc = 1;
        goto end;
    }
    r.manifest = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (r.manifest < 0) {
        fprintf(stderr, "vidtrain prep: cannot append to %s: %s\n", path, strerror(errno));
        rc = 1;
        goto end;
    }

    /* Non-video files first: they are small, and list files are then in place. */
    int copied = 0, rewritten = 0, nother = 0;
    for (int i = 0; i < list.n; i++) {
        if (list.e[i].video)
            continue;
        nother++;
        int rw = 0, cr = prep_copy_file(&r, &list.e[i], &m, &rw, err, sizeof err);
        if (cr == -2) { /* DST, not the file: the videos would meet the same disk */
            dst_stop(r.dst, err);
            rc = 1;
            goto end;
        }
        if (cr != 0)
            fprintf(stderr, "vidtrain prep: %s (not copied)\n", err);
        else
            copied++;
        rewritten += rw;
    }
    if (m.n) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK(f != NULL, "open_memstream: out of memory");
        fputs("old,new\n", f);
        for (int i = 0; i < m.n; i++) {
            vt_csv_put(f, m.old[i], 0);
            vt_csv_put(f, m.new_[i], 1);
        }
        VT_CHECK(fclose(f) == 0, "building %s in memory failed", PATHS);
        snprintf(path, sizeof path, "%s/" PATHS, r.dst);
        int wrc = vt_file_write_atomic(path, text, len, err, sizeof err);
        free(text);
        if (wrc != 0) {
            dst_stop(r.dst, err);
            rc = 1;
            goto end;
        }
    }

    fprintf(stderr, "vidtrain prep: %s -> %s: %d videos (%d to do, %d done before), %d other "
            "files; short side %d, %s, keyframe every %d frames, %s; %d jobs\n",
            r.src, r.dst, nvideo, r.njobs, skipped, nother, o.short_side, o.codec,
            o.gop, o.fps > 0 ? "constant fps" : "timestamps kept", jobs);
    r.tty = isatty(fileno(stderr));
    r.t0 = vt_now();
    atomic_init(&r.next, 0);
    pthread_mutex_init(&r.lock, NULL);
    /* Ctrl-C: the workers take no new file; the ones being encoded finish (their rows in
     * the manifest), and the manifest is rewritten whole. */
    vt_signals_install_msg("\nvidtrain prep: stopping after the files being written now "
                           "(the manifest keeps every finished one); run the same command "
                           "again to resume (Ctrl-C again to quit now)\n");
    int nth = VT_MIN(jobs, VT_MAX(r.njobs, 1));
    th = vt_malloc((size_t)nth * sizeof *th);
    for (int t = 0; t < nth; t++)
        VT_CHECK(pthread_create(&th[t], NULL, prep_worker, &r) == 0, "pthread_create");
    for (int t = 0; t < nth; t++)
        pthread_join(th[t], NULL);
    int sig = vt_signal_pending();
    vt_signals_reset();
    pthread_mutex_destroy(&r.lock);
    close(r.manifest);
    r.manifest = -1;
    if (r.tty && r.njobs)
        fputc('\n', stderr);

    /* The manifest once more, whole and sorted: the kept rows and this run's. On a full
     * disk this fails, and the appended manifest stays: whole rows only, the last per
     * path winning, which is what the next run reads. */
    int wfail = 0;
    {
        row_list all = {0};
        snprintf(path, sizeof path, "%s/" MANIFEST, r.dst);
        prep_manifest_read(&all, path);
        if (prep_manifest_write(path, &all, NULL, 0, err, sizeof err) != 0 && !r.dst_failed) {
            fprintf(stderr, "vidtrain prep: %s\n", err);
            wfail = 1;
        }
        /* --trim: the labels file names only the outputs that are on disk now */
        int left = 0;
        if (nseg > 0 && !r.dst_failed) {
            if (prep_trim_write(&tcsv, r.dst, &all, &left, err, sizeof err) != 0) {
                fprintf(stderr, "vidtrain prep: %s\n", err);
                wfail = 1;
            } else if (left) {
                fprintf(stderr, "vidtrain prep: %d labelled samples are not in %s/" SEGMENTS
                        ": their outputs are bad or not written yet (see below)\n", left,
                        r.dst);
            }
        }
        for (int i = 0; i < all.n; i++)
            prep_row_free(&all.r[i]);
        free(all.r);
    }

    double dt = vt_now() - r.t0;
    char b1[32], b2[32];
    int64_t out_bytes = 0, in_bytes = 0;
    for (int i = 0; i < r.rows.n; i++)
        if (!strcmp(r.rows.r[i].f[6], "ok"))
            out_bytes += strtoll(r.rows.r[i].f[4], NULL, 10);
    for (int i = 0; i < r.njobs; i++)
        in_bytes += r.jobs[i].bytes;
    printf("prep: %d written, %d done before, %d bad, %d not reached; %d other files copied "
           "(%d rewritten for renamed videos%s)\n", r.ok, skipped, r.bad,
           r.njobs - r.done, copied, rewritten, m.n ? ", see " PATHS : "");
    printf("prep: %.1f s of video in %.1f s = %.2f s/s (%.2f per job); %s read, %s written; "
           "manifest %s/" MANIFEST "\n", r.src_seconds, dt, dt > 0 ? r.src_seconds / dt : 0.0,
           dt > 0 ? r.src_seconds / dt / nth : 0.0, vt_fmt_bytes(b1, sizeof b1, in_bytes),
           vt_fmt_bytes(b2, sizeof b2, out_bytes), r.dst);
    if (r.bad) {
        printf("prep: bad videos (not in DST):\n");
        for (int i = 0; i < r.rows.n; i++)
            if (strcmp(r.rows.r[i].f[6], "ok"))
                printf("  %s: %s\n", r.rows.r[i].f[1], r.rows.r[i].f[6] + 5);
    }
    if (r.dst_failed) {
        fflush(stdout);
        dst_stop(r.dst, r.dst_err);
        rc = 1;
    } else if (sig) {
        printf("prep: interrupted; run the same command again to resume\n");
        rc = 128 + sig;
    } else {
        rc = r.ok + skipped > 0 && !wfail ? 0 : 1;
    }
    /* the summary is a writer too: standard output on a full disk fails the run */
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
        fprintf(stderr, "vidtrain prep: cannot write the summary to standard output: %s\n",
                strerror(errno));
        rc = 1;
    }

end:
    for (int i = 0; i < list.n; i++) {
        free(list.e[i].rel);
        free(list.e[i].out);
    }
    free(list.e);
    for (int i = 0; i < old.n; i++)
        prep_row_free(&old.r[i]);
    free(old.r);
    for (int i = 0; i < r.rows.n; i++)
        prep_row_free(&r.rows.r[i]);
    free(r.rows.r);
    free(r.jobs);
    free(m.old);
    free(m.new_);
    free(th);
    free(opt_text);
    free(recorded);
    vt_dataset_free(&dset);
    prep_trim_csv_free(&tcsv);
    if (r.manifest >= 0)
        close(r.manifest);
    if (lock >= 0)
        close(lock); /* releases DST */
    return rc;
}

