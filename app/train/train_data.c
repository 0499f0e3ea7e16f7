/*
 * train_data.c: a training run's data (train.h's vt_train_open_data) — the training
 * folder with --labels, its resumed run's classes checked (train_heads.c), what
 * validation reads (--val-dir, else the folder's val split or its --val-split share),
 * and the dataset's summary printed, with what was left out and why.
 * It must never write the run folder: nothing is written before there is something to
 * train.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/decode_opt.h"
#include "app/dist.h"
#include "app/eval/evaluate.h"
#include "app/run/run_model.h"
#include "app/train/train.h"
#include "app/train/train_val.h"
#include "base/common.h"
#include "base/host_mem.h"
#include "base/textwidth.h"
#include "pipeline/data/loader.h"
#include "pipeline/data/video/video.h"

static void print_dataset(const vt_dataset *ds, vt_dataset *mut, FILE *f) {
    fprintf(f, "dataset %s: %d videos, %d head(s)\n", ds->dir, ds->nvideos, ds->nheads);
    for (int h = 0; h < ds->nheads; h++) {
        fprintf(f, "  head "); /* a labels.csv column's name: columns, not bytes */
        vt_text_pad(f, ds->heads[h].name, VT_MAX(10, vt_text_cols(ds->heads[h].name)));
        fprintf(f, " %s, %d classes:",
                ds->heads[h].loss == VT_LOSS_BCE ? "multi-label (BCE)" : "softmax",
                ds->heads[h].nclasses);
        for (int c = 0; c < ds->heads[h].nclasses && c < 12; c++)
            fprintf(f, " %s", ds->heads[h].classes[c]);
        fprintf(f, "%s\n", ds->heads[h].nclasses > 12 ? " ..." : "");
    }
    const int stray = vt_dataset_count_stray(ds);
    fprintf(f, "  splits: train %d, val %d, test %d; unreadable %d; non-video files %d\n",
            vt_dataset_split_count(mut, VT_SPLIT_TRAIN), vt_dataset_split_count(mut, VT_SPLIT_VAL),
            vt_dataset_split_count(mut, VT_SPLIT_TEST), vt_dataset_count_bad(mut),
            ds->nignored - stray);
    if (stray) /* they were counted as non-video files */
        fprintf(f, "  videos outside a class folder: %d, left out (the layout is "
                "DIR/<class>/<video> or DIR/<split>/<class>/<video>; vidtrain scan lists "
                "them)\n", stray);
    int unlabeled = 0; /* out of every split: they were counted in the videos only */
    for (int i = 0; i < ds->nvideos; i++)
        unlabeled += !ds->videos[i].labeled;
    if (unlabeled)
        fprintf(f, "  without a label: %d (no row in the labels file, or a class the list "
                "does not name): left out of every split\n", unlabeled);
    if (ds->nbroken)
        fprintf(f, "  not followed: %d (dangling links, link loops, FIFOs, devices: see the warnings)\n",
                ds->nbroken);
    if (ds->nsegments) /* docs/segments.md */
        fprintf(f, "  segments: %d samples are segments of longer videos (clips drawn inside "
                "them; \"video\" metrics are per segment)\n", ds->nsegments);
}

/* Training videos counted from the top (no usable timestamps, or times that go back: files
 * joined with overlapping times, video.h's `counted`) decode every clip from their start:
 * a long one slows the loader without a word. Said once, with the longest and the way out,
 * when one holds VT_COUNTED_LONG frames or more (a clip then decodes ~150 frames on
 * average, against a GOP's ~25 after a seek). */
#define VT_COUNTED_LONG 300
static void warn_counted(const vt_dataset *ds) {
    int n = 0, longest = -1;
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        if (v->split != VT_SPLIT_TRAIN || v->bad != VT_BAD_NONE || !v->info.counted)
            continue;
        n++;
        if (longest < 0 || v->info.nframes > ds->videos[longest].info.nframes)
            longest = i;
    }
    if (longest < 0 || ds->videos[longest].info.nframes < VT_COUNTED_LONG)
        return;
    fprintf(stderr, "vidtrain train: warning: %d training video%s counted from the start (no "
            "usable timestamps, or times that go back: segments joined with overlapping "
            "times), so each clip decodes from the top: slow for long ones (the longest: %s, "
            "%lld frames); vidtrain prep SRC DST writes copies that seek (docs/decode.md)\n", n,
            n == 1 ? " is" : "s are", ds->videos[longest].path,
            (long long)ds->videos[longest].info.nframes);
}
/* What a run trains or validates on, as "N HASH" into out: the count of samples idx[0..n)
 * of ds and a hash of each one's path (relative to ds), segment and labels, in order.
 * A function of those only (never of the folder's place or the files' times), so a
 * --resume on the same samples finds the same text and one on others does not. */
static void set_id(const vt_dataset *ds, const int32_t *idx, int n, char *out, size_t len) {
    uint64_t h = VT_FNV_SEED;
    for (int i = 0; i < n; i++) {
        const vt_dataset_video *v = &ds->videos[idx[i]];
        char seg[80];
        h = vt_fnv1a(v->relpath, strlen(v->relpath) + 1, h);
        snprintf(seg, sizeof seg, "%.17g %.17g", v->seg_start, v->seg_end);
        h = vt_fnv1a(seg, strlen(seg) + 1, h);
        for (int k = 0; k < ds->nheads; k++) {
            if (ds->heads[k].loss == VT_LOSS_BCE) {
                h = vt_fnv1a(&v->ntags[k], sizeof v->ntags[k], h);
                if (v->ntags[k] > 0)
                    h = vt_fnv1a(v->tags[k], (size_t)v->ntags[k] * sizeof *v->tags[k], h);
            } else {
                h = vt_fnv1a(&v->label[k], sizeof v->label[k], h);
            }
        }
    }
    snprintf(out, len, "%d %016llx", n, (unsigned long long)h);
}

void vt_train_short_samples(const vt_train *t) {
    const vt_train_opts *o = &t->o;
    int64_t span = (int64_t)(o->clip_t - 1) * VT_MAX(o->stride, 1) + 1;
    int n = 0, least = -1;
    for (int i = 0; i < t->ntrain && o->clip_t > 0; i++) {
        const vt_dataset_video *v = &t->ds->videos[t->train_idx[i]];
        const int64_t frames = vt_dataset_is_segment(v) ? v->seg_frames : v->info.nframes;
        vt_clip_cfg vc; /* --clip-fps: the stride at this video's rate */
        vt_clip_cfg_default(&vc);
        vc.stride = VT_MAX(o->stride, 1);
        vc.fps = o->clip_fps;
        vt_clip_cfg_at_fps(&vc, v->info.fps);
        const int64_t vspan = (int64_t)(o->clip_t - 1) * vc.stride + 1;
        if (!v->probed || frames <= 0 || frames >= vspan)
            continue;
        span = vspan; /* the line names the last one's (one rate: the same for all) */
        n++;
        const vt_dataset_video *w = least >= 0 ? &t->ds->videos[least] : NULL;
        if (!w || frames < (vt_dataset_is_segment(w) ? w->seg_frames : w->info.nframes))
            least = t->train_idx[i];
    }
    if (n == 0)
        return;
    const vt_dataset_video *w = &t->ds->videos[least];
    char name[1200];
    fprintf(t->out, "  shorter than a clip (%d frames at stride %d: %lld): %d training "
            "video%s, their clips repeating frames; the shortest %s, %lld frame%s\n", o->clip_t,
            VT_MAX(o->stride, 1), (long long)span, n, n > 1 ? "s" : "",
            vt_dataset_sample_name(w, name, sizeof name),
            (long long)(vt_dataset_is_segment(w) ? w->seg_frames : w->info.nframes),
            (vt_dataset_is_segment(w) ? w->seg_frames : w->info.nframes) == 1 ? "" : "s");
}

void vt_train_val_fps_warn(const vt_train *t) {
    vt_run_model *m = vt_calloc(1, sizeof *m); /* what eval reads back from config.json */
    m->opts = t->o;
    m->train_fps[0] = t->train_fps[0];
    m->train_fps[1] = t->train_fps[1];
    int n = 0, first = -1;
    for (int k = 0; k < t->nval; k++)
        if (vt_run_fps_outside(m, t->val_ds->videos[t->val_idx[k]].info.fps) && n++ == 0)
            first = t->val_idx[k];
    if (n)
        vt_run_fps_warn("train", "validation video", m, n, t->nval,
                        t->val_ds->videos[first].path, t->val_ds->videos[first].info.fps);
    free(m);
}

int vt_train_open_data(vt_train *t) {
    const vt_train_opts *o = &t->o;
    char err[1024];
    vt_dataset_opts dopt = vt_run_dataset_opts(o);
    t->ds = vt_dataset_open(o->data, &dopt, err, sizeof err);
    if (!t->ds) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        if (t->resume[0]) /* the path config.json recorded, unless one was given */
            fprintf(stderr, "  --resume %s trains on %s (the run's dataset, or the DIR given); "
                    "if it moved, name its new place: vidtrain train --resume %s NEWDIR\n",
                    t->resume, o->data, t->resume);
        return 1;
    }
    vt_dataset *ds = t->ds;
    if (o->labels[0]) {
        int nbad = 0;
        if (vt_dataset_load_labels(ds, o->labels, &nbad, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain train: %s: %s\n", o->labels, err);
            return 1;
        }
    }
    /* --val-split (and --group, which shapes it) act where the data has no val split of
     * its own: on a folder with val/ (or lists with one) they were taken and did nothing */
    static const char *const split_opts[] = {"--val-split", "--group", NULL};
    const char *so = vt_opts_given_any(&t->cli, split_opts);
    if (so && o->val_dir[0]) {
        fprintf(stderr, "vidtrain train: %s: --val-dir %s names the validation videos, so "
                "nothing is drawn from train; leave it out\n", so, o->val_dir);
        return 2;
    }
    if (so && !(ds->val_split > 0) &&
        !(vt_opts_given_has(&t->cli, "--val-split") && !(o->val_split > 0))) {
        fprintf(stderr, "vidtrain train: %s: %s has val videos of its own (a val/ folder or "
                "its lists' val rows), and they are the val split: nothing is drawn from train; "
                "leave it out\n", so, o->data);
        return 2;
    }
    /* --group shapes --val-split's draw: with --val-split 0 (given now or the resumed run's)
     * nothing is drawn, and the regex was taken and did nothing */
    if (vt_opts_given_has(&t->cli, "--group") && !(o->val_split > 0)) {
        fprintf(stderr, "vidtrain train: --group %s keeps a recording's videos on one side of "
                "--val-split's draw: --val-split 0 draws nothing from train, so there is "
                "nothing to keep together; give --val-split F (above 0) with it, or leave "
                "--group out\n", o->group);
        return 2;
    }
    char perr[640];
    if (vt_dataset_probe(ds, 0, 1, NULL, NULL) < 0 && vt_video_system_failed(perr, sizeof perr)) {
        fprintf(stderr, "vidtrain train: %s\n", perr);
        return 1;
    }
    vt_dist_dataset_sync(ds, "the training data");
    print_dataset(ds, ds, t->out);
    if (vt_dist_lead()) { /* file properties that give a class away: said once, not refused */
        vt_shortcut *sc = NULL;
        int nsc = vt_dataset_shortcuts(ds, VT_SPLIT_TRAIN, &sc);
        vt_dataset_shortcuts_print(stderr, "vidtrain train: warning: ", ds, sc, nsc,
                                   "training videos");
        free(sc);
        vt_dataset_copy *cp = NULL; /* copies inside train (a copy in val or test is a leak:
                                     * the leak check names it) */
        int ncp = vt_dataset_copies(ds, &cp), m = 0;
        for (int k = 0; k < ncp; k++)
            if (ds->videos[cp[k].a].split == VT_SPLIT_TRAIN &&
                ds->videos[cp[k].b].split == VT_SPLIT_TRAIN)
                cp[m++] = cp[k];
        vt_dataset_copies_print(stderr, "vidtrain train: warning: among the training videos, ",
                                ds, cp, m);
        free(cp);
        warn_counted(ds);
        vt_like_classes *lk = NULL;
        const int nlk = vt_dataset_like_classes(ds, &lk);
        vt_dataset_like_classes_print(stderr, "vidtrain train: warning: ", ds, lk, nlk);
        free(lk);
    }
    if (o->nweights && o->nweights != ds->nheads) {
        fprintf(stderr, "vidtrain train: --loss-weights has %d values for %d heads\n", o->nweights,
                ds->nheads);
        return 2;
    }
    /* One class: every answer is right, so training "reaches 100%" and learns nothing. */
    for (int h = 0; h < ds->nheads; h++)
        if (ds->heads[h].loss == VT_LOSS_SOFTMAX_CE && ds->heads[h].nclasses < 2) {
            fprintf(stderr, "vidtrain train: %s has %d class%s for head '%s'%s%s%s: a classifier "
                    "needs at least 2 (one folder per class: %s/<class>/<video>)\n", o->data,
                    ds->heads[h].nclasses, ds->heads[h].nclasses == 1 ? "" : "es",
                    ds->heads[h].name, ds->heads[h].nclasses ? " ('" : "",
                    ds->heads[h].nclasses ? ds->heads[h].classes[0] : "",
                    ds->heads[h].nclasses ? "')" : "", o->data);
            return 1;
        }
    if (vt_train_resume_heads(t) != 0)
        return 1;
    t->ntrain = vt_dataset_split_indices(ds, VT_SPLIT_TRAIN, &t->train_idx);
    t->train_fps[0] = t->train_fps[1] = 0;
    for (int k = 0; k < t->ntrain; k++) {
        const double f = ds->videos[t->train_idx[k]].info.fps;
        if (f > 0 && (t->train_fps[0] == 0 || f < t->train_fps[0]))
            t->train_fps[0] = f;
        if (f > t->train_fps[1])
            t->train_fps[1] = f;
    }
    /* rates more than 1.25x apart: a clip of the fastest spans that much less time */
    if (t->train_fps[0] > 0 && t->train_fps[1] > 1.25 * t->train_fps[0] && !(o->clip_fps > 0))
        fprintf(t->out, "  frame rates %.3g-%.3g fps: a clip of the fastest video spans %.1fx "
                "less time than one of the slowest (--clip-fps F counts the stride at F a "
                "second for every video: docs/splits.md)\n", t->train_fps[0], t->train_fps[1],
                t->train_fps[1] / t->train_fps[0]);
    t->val_ds = ds;
    if (o->val_dir[0]) {
        vt_dataset *vds = t->vds = vt_dataset_open(o->val_dir, NULL, err, sizeof err);
        if (!vds) {
            fprintf(stderr, "vidtrain train: --val-dir: %s\n", err);
            return 1;
        }
        if (o->labels[0]) {
            fprintf(stderr, "vidtrain train: --val-dir with --labels is not supported: put the "
                            "validation videos in the labels file and use --val-split\n");
            return 2;
        }
        int same = vds->heads[0].nclasses == ds->heads[0].nclasses;
        for (int k = 0; same && k < ds->heads[0].nclasses; k++)
            same = !strcmp(vds->heads[0].classes[k], ds->heads[0].classes[k]);
        if (!same) {
            fprintf(stderr, "vidtrain train: --val-dir %s has other classes than %s\n", o->val_dir,
                    o->data);
            return 1;
        }
        char perr[640];
        if (vt_dataset_probe(vds, 0, 1, NULL, NULL) < 0 &&
            vt_video_system_failed(perr, sizeof perr)) {
            fprintf(stderr, "vidtrain train: --val-dir: %s\n", perr);
            return 1;
        }
        /* every labelled video of the other folder, whatever its split */
        int n = 0;
        t->val_idx = vt_malloc(sizeof(int32_t) * (size_t)(vds->nvideos ? vds->nvideos : 1));
        for (int i = 0; i < vds->nvideos; i++)
            if (vds->videos[i].labeled && !vt_dataset_bad(vds, i))
                t->val_idx[n++] = i;
        t->nval = n;
        t->val_ds = vds;
        fprintf(t->out, "validation: %s, %d videos\n", o->val_dir, t->nval);
    } else {
        const vt_split vs = vt_dataset_eval_split(ds);
        t->nval = vt_dataset_split_indices(ds, vs, &t->val_idx);
        char gl[256];
        vt_dataset_groups_line(ds, gl, sizeof gl);
        if (t->nval)
            fprintf(t->out, "validation: %s split, %d videos%s%s%s\n", vt_split_name(vs), t->nval,
                    vs == VT_SPLIT_TEST ? " (no val split: best.safetensors is chosen on the "
                                          "test videos; --val-split F holds some training "
                                          "videos out instead)" : "", gl[0] ? "; " : "", gl);
        else
            fprintf(t->out, "validation: none (no val folder and --val-split 0)\n");
    }
    if (vt_frame_rate_check_data("train", ds, t->vds) != 0)
        return 2;
    /* with no validation videos, what shapes validation (and the default length that
     * follows it: train_length.c takes the fixed rule) was taken and did nothing; with no
     * val or test video either, so did what shapes the near-copy check of them */
    static const char *const val_opts[] = {"--val-clips", "--val-crops", "--eval-every",
                                           "--patience", "--min-clips", NULL};
    static const char *const leak_opts[] = {"--strict-splits", "--no-leak-check", NULL};
    const char *vo = t->nval ? NULL : vt_opts_given_any(&t->cli, val_opts);
    if (vo) {
        fprintf(stderr, "vidtrain train: %s acts on validation, and %s has no validation "
                "videos (no val folder or test split, and --val-split 0); leave it out, or "
                "give --val-split F or --val-dir DIR2\n", vo, o->data);
        return 2;
    }
    const char *lo = t->vds || vt_dataset_split_count(ds, VT_SPLIT_VAL) ||
                             vt_dataset_split_count(ds, VT_SPLIT_TEST)
                         ? NULL : vt_opts_given_any(&t->cli, leak_opts);
    if (lo) {
        fprintf(stderr, "vidtrain train: %s: the leak check compares val and test videos with "
                "the training videos, and %s has none; leave it out\n", lo, o->data);
        return 2;
    }
    if (t->ntrain == 0) {
        fprintf(stderr, "vidtrain train: no training video in %s\n", o->data);
        return 1;
    }
    set_id(ds, t->train_idx, t->ntrain, t->train_set, sizeof t->train_set);
    set_id(t->val_ds, t->val_idx, t->nval, t->val_set, sizeof t->val_set);
    return 0;
}

int64_t vt_train_host_reserve(const vt_train *t) {
    const vt_train_opts *o = &t->o;
    vt_loader_cfg lc;
    vt_loader_cfg_default(&lc);
    lc.mode = VT_LOADER_TRAIN;
    lc.batch = o->batch;
    vt_train_clip_cfg(&lc.clip, o);
    /* the loader's own defaults for 0 (loader.c) */
    const int workers = o->workers > 0 ? o->workers : (int)VT_MAX(sysconf(_SC_NPROCESSORS_ONLN), 1);
    const int queue = o->queue > 0 ? o->queue : 2;
    int64_t bytes = vt_loader_batch_bytes(t->ds, &lc) * (queue + workers);
    /* validation's loader runs beside it, with buffers and workers of its own (under a
     * tight limit a run went out of memory at its first validation) */
    vt_eval_opts eo;
    vt_train_val_opts(&eo, o);
    vt_loader_cfg vc;
    vt_eval_loader_cfg(&vc, &eo);
    const int vworkers = vc.workers > 0 ? vc.workers : workers;
    bytes += vt_loader_batch_bytes(t->ds, &vc) * ((vc.queue > 0 ? vc.queue : 2) + vworkers);
    if (o->frame_cache[0] && strcmp(o->frame_cache, "auto"))
        bytes += VT_MAX(vt_parse_bytes(o->frame_cache), 0);
    vt_host_mem m;
    vt_host_mem_get(&m);
    if (vt_host_mem_counts_maps(&m)) /* a stack is mapped whole, touched a little */
        bytes += (int64_t)(workers + vworkers) * vt_host_thread_stack();
    return bytes;
}
