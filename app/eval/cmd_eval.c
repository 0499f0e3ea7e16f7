/*
 * cmd_eval.c: `vidtrain eval RUN DIR` — the evaluation protocol: K uniformly spaced clips
 * per video x 1 or 3 crops through the towers (forward only), probabilities averaged per
 * video, then clip/video top-1/top-5, mean class accuracy, per-class accuracy and the
 * confusion matrix, printed and written to RUN/eval.json and RUN/confusion.csv. The
 * pass itself (each clip once, whatever the tower split; ranks' sums merged before any
 * metric) is app/eval/evaluate.c's, shared with training's validation; this file chooses the
 * split, loads the model and reports. It must never train or change a checkpoint.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/dist.h"
#include "app/eval/evalproto.h"
#include "app/eval/evaluate.h"
#include "app/eval/report.h"
#include "app/leaks.h"
#include "app/run/run_claim.h"
#include "app/run/run_files.h"
#include "app/run/run_model.h"
#include "base/common.h"
#include "base/fileset.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/video/video.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/slices.h"
#include "pipeline/parallel/towers/tower.h"

/* Videos of split s, whatever their state (unlabelled and unreadable ones included): a
 * split "exists" when it has any. */
static int split_total(const vt_dataset *ds, vt_split s) {
    int n = 0;
    for (int i = 0; i < ds->nvideos; i++)
        n += ds->videos[i].split == s;
    return n;
}

/* "train 24, val 8, test 8": the splits DIR has, with their labelled, readable videos. */
static void describe_splits(vt_dataset *ds, char *buf, size_t n) {
    static const vt_split order[3] = {VT_SPLIT_TRAIN, VT_SPLIT_VAL, VT_SPLIT_TEST};
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < 3; i++)
        if (split_total(ds, order[i]) > 0 && k < n)
            k += (size_t)snprintf(buf + k, n - k, "%s%s %d", k ? ", " : "",
                                  vt_split_name(order[i]), vt_dataset_split_count(ds, order[i]));
    if (!buf[0])
        snprintf(buf, n, "no split with videos");
}

/* eval.json "leaks": how many videos of the split evaluated have a near-copy in
 * training. DIR the folder the run trained on: from RUN/leaks.json (train's check,
 * app/leaks.h). Another folder (an outside test set, --val-dir's): its videos idx[0..n)
 * are compared here with the run's training videos (signatures cached, so train's are
 * read back), and the pairs go into eval.json. */
static void add_leaks(cJSON *j, const char *run, const char *dir, const vt_train_opts *o,
                      const char *split, vt_dataset *ds, const int32_t *idx, int n) {
    char path[4200], err[1024];
    snprintf(path, sizeof path, "%s/leaks.json", run);
    char *a = realpath(dir, NULL), *b = realpath(o->data, NULL);
    int same = a && b && !strcmp(a, b);
    free(a);
    free(b);
    if (!same) {
        if (!vt_dist_lead()) /* rank 0 writes eval.json: the others need no count */
            return;
        vt_dataset *tds = vt_run_dataset_open(o, o->data, NULL, NULL, err, sizeof err);
        if (!tds) { /* a run copied away from its data: no count, said so */
            fprintf(stderr, "note: no leak check against training (%s)\n", err);
            return;
        }
        vt_split as = !strcmp(split, "val") ? VT_SPLIT_VAL : VT_SPLIT_TEST;
        vt_leaks lk;
        vt_leaks_find_with(tds, 0, ds, idx, n, as, 0, 0, &lk);
        cJSON *o2 = vt_leaks_json(tds, &lk);
        cJSON_AddNumberToObject(o2, "with_copy_in_train", lk.copied[as]);
        cJSON_AddNumberToObject(o2, "videos", lk.total[as]);
        cJSON_AddItemToObject(j, "leaks", o2);
        if (lk.copied[as] > 0) {
            fprintf(stderr, "warning: %d of the %d videos evaluated have a near-copy in the "
                    "run's training videos (%s): the score counts scenes training has seen "
                    "(pairs in eval.json)\n", lk.copied[as], lk.total[as], o->data);
            vt_leaks_print(stderr, tds, &lk, 5);
        }
        vt_leaks_free(&lk);
        vt_dataset_free(&tds);
        return;
    }
    cJSON *lk = vt_file_read_json(path);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(lk, split);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "with_copy_in_train");
    const cJSON *nv = cJSON_GetObjectItemCaseSensitive(s, "videos");
    if (cJSON_IsNumber(k) && cJSON_IsNumber(nv)) {
        cJSON *o2 = cJSON_AddObjectToObject(j, "leaks");
        cJSON_AddNumberToObject(o2, "with_copy_in_train", k->valuedouble);
        cJSON_AddNumberToObject(o2, "videos", nv->valuedouble);
        cJSON_AddStringToObject(o2, "pairs_in", "leaks.json");
        if (k->valuedouble > 0)
            fprintf(stderr, "warning: %g of the %g %s videos have a near-copy in train "
                    "(%s): the score counts scenes training has seen\n", k->valuedouble,
                    nv->valuedouble, split, path);
    }
    cJSON_Delete(lk);
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain eval RUN [DIR] [options]\n\n"
        "Evaluates RUN's best checkpoint (else last) on the videos of DIR (default: the\n"
        "folder RUN trained on, as its config.json names it; where that folder has no val or\n"
        "test videos and RUN validated on --val-dir, every video of that): K uniformly spaced\n"
        "clips per video x 1 or 3 crops, softmax averaged per video. Prints and writes\n"
        "RUN/eval.json (clip and video top-1/top-5, mean class accuracy, per-class accuracy,\n"
        "confusion matrix) and RUN/confusion.csv, and refreshes RUN/report.html; a RUN that\n"
        "a train is still writing is refused (wait for it, or evaluate a copy), and a train\n"
        "--resume of RUN is refused while eval runs. Two evals of RUN at once write their\n"
        "three files one set after the other, never mixed.\n\n"
        "  --split NAME           the data split to evaluate: train, val, test, or all (every\n"
        "                         labelled video, a file in two splits once). Default: test\n"
        "                         when DIR has test videos, else val. DIR may hold any of\n"
        "                         train/, val/, test/ (e.g. only test/), or be a flat\n"
        "                         DIR/<class>/ folder. When DIR has train\n"
        "                         videos and no val/, val is the run's --val-split share of\n"
        "                         train, drawn exactly as training drew it. A split DIR does\n"
        "                         not have is an error that lists the ones it has.\n"
        "  --labels FILE.csv      DIR's labels file (train --labels's form: a path column,\n"
        "                         then one column per head; docs/segments.md for start and\n"
        "                         end) instead of the run's: for a DIR other than the one\n"
        "                         the run's labels file describes\n"
        "  --lists PATH           DIR's list files (train --lists's forms, format detected;\n"
        "                         the run's --fold) instead of the run's: for a DIR other\n"
        "                         than the one the run's list files describe\n"
        "  --clips-per-video K    (default 10)\n"
        "  --crops 1|3            centre crop, or start/centre/end of the long side (default 1)\n"
        "  --checkpoint PATH      another checkpoint of RUN than its best.safetensors (one of\n"
        "                         another model, clip, input statistics or classes than\n"
        "                         RUN/config.json is refused: its figures go into RUN)\n"
        "  --precision P          fp32 (default, whatever the run trained with), tf32, bf16\n"
        "  --batch N              clips per forward batch (default: the run's batch)\n"
        "  --workers N            decode threads (default 2)\n"
        VT_DECODE_OPT_HELP
        "  --tower-split POLICY   how batches split over the towers: equal, memory (default),\n"
        "                         speed, auto, manual:W,W,...\n"
        "  -q, --quiet            no progress display\n"
        "%s\n"
        "top-k: the true class counts within the top k when fewer than k other classes score\n"
        "as high or higher (a tie is a miss: a model that scores every class the same is\n"
        "right on none). Mean class accuracy averages the per-class video top-1 over the\n"
        "classes present (the model's classes without a video are named beside it). A model\n"
        "that puts every video under one class is warned about. Every clip is counted once\n"
        "across towers.\n"
        "Classes are matched to the model's by name; videos of a class the model does not\n"
        "know are left out, named in a warning and counted (eval.json \"unknown_videos\").\n"
        "Frames of a damaged stream that never decode hold the nearest decoded frame: counted\n"
        "and said (eval.json \"filled_frames\"), as are clips that fail (\"bad_clips\") and\n"
        "decode errors (\"decode_errors\": packets rejected, pictures the decoder repaired);\n"
        "eval.json \"damaged_videos\" names each damaged video with its counts.\n"
        "Videos at a frame rate more than 1.25x outside the training videos' (their clips\n"
        "span another length of time) are warned of and counted (eval.json\n"
        "\"fps_outside_training\"; docs/splits.md), and so are videos whose bytes another\n"
        "evaluated file holds under a second name (a copy: counted twice; \"copies\").\n"
        "Videos evaluated that are near-copies of the run's training videos are counted in\n"
        "eval.json \"leaks\" with a warning: from RUN/leaks.json when DIR is the training\n"
        "folder, else compared here (docs/splits.md).\n"
        "Exit codes: 0 ok, 1 error (also: a --split DIR does not have), 2 usage.\n"
        "%s",
        vt_device_args_help, vt_mpi_help);
}

/* ---- the command: parse, plan (the run, the data, the videos), run (evaluate, report) ---- */

typedef struct eval_args {
    const char *run, *dir;
    const char *split; /* --split: train, val, test, all; NULL: test, else val */
    int val_dir;       /* `eval RUN` of a --val-dir run: split "all" of that folder */
    const char *labels; /* --labels: DIR's labels file; NULL: the run's (if it has one) */
    const char *lists;  /* --lists: DIR's list files; NULL: the run's (if it has them) */
    const char *lists_read; /* the list files DIR was read with (--lists, else the run's) */
    int quiet, batch, workers;
    vt_model_args ma;
    int ncopies, nfps;  /* pairs of copies, videos at rates outside training's, among those
                           evaluated: found once before the evaluation, said and recorded */
} eval_args;

/* Fills *ea from argv: 0, or the exit status (2) after saying what is wrong. */
static int eval_parse(eval_args *ea, int argc, char **argv) {
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    memset(ea, 0, sizeof *ea);
    ea->workers = 2;
    vt_model_args_default(&ea->ma);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = vt_model_args_take(&ea->ma, argc, argv, &i, "eval");
        if (r < 0)
            return 2;
        if (r == 1)
            continue;
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain eval: bad value for %s\n", a); return 2; } while (0)
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { ea->quiet = 1; continue; }
        if (OPT("--split")) {
            if (r < 0) BAD();
            if (strcmp(v, "all") && vt_split_parse(v) < 0) {
                char herr[512];
                if (vt_slice_policy_like(v))
                    vt_slice_policy_moved(herr, sizeof herr, v);
                else
                    snprintf(herr, sizeof herr, "--split %s: expected a data split: train, val, "
                             "test or all", v);
                fprintf(stderr, "vidtrain eval: %s\n", herr);
                return 2;
            }
            ea->split = v;
            continue;
        }
        if (OPT("--labels")) {
            if (r < 0) BAD();
            ea->labels = v;
            continue;
        }
        if (OPT("--lists")) {
            if (r < 0) BAD();
            ea->lists = v;
            continue;
        }
        if (OPT("--batch")) {
            if (r < 0 || vt_parse_int(v, 1, 65536, &ea->batch)) BAD();
            continue;
        }
        if (OPT("--workers")) {
            if (r < 0 || vt_parse_int(v, 0, 256, &ea->workers)) BAD();
            continue;
        }
        if ((r = vt_decode_opt_take("eval", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
#undef OPT
#undef BAD
        if (a[0] == '-') {
            fprintf(stderr, "vidtrain eval: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (npos == 2) {
            fprintf(stderr, "vidtrain eval: expected RUN [DIR], got a third argument '%s'\n", a);
            return 2;
        }
        pos[npos] = npos ? a : vt_run_path_trim(argv[i]); /* RUN: "r7/" is r7 */
        npos++;
    }
    if (npos == 0) {
        fprintf(stderr, "vidtrain eval: expected RUN [DIR]: the run folder, and the videos to "
                "evaluate (default: the folder RUN trained on); see vidtrain eval --help\n");
        return 2;
    }
    ea->run = pos[0];
    ea->dir = pos[1]; /* NULL: the run's training folder, once its config is read */
    return 0;
}

/* --split all: a file in two splits (a link from test/ into train/: the leak check names
 * it) is one sample, not two; the scan keeps one name per split only. The same file and
 * segment under a later name is left out, and said. idx[0..n) in place; the count kept. */
typedef struct sample_key {
    dev_t dev;
    ino_t ino;
    double start, end;
    int32_t i;
} sample_key;

static int by_sample(const void *pa, const void *pb) {
    const sample_key *x = pa, *y = pb;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int drop_same_samples(const vt_dataset *ds, int32_t *idx, int n) {
    sample_key *k = vt_malloc(sizeof *k * (size_t)(n ? n : 1));
    int m = 0;
    for (int j = 0; j < n; j++) {
        const vt_dataset_video *v = &ds->videos[idx[j]];
        struct stat st;
        if (stat(v->path, &st) != 0) { /* not this check's to refuse: kept */
            st.st_dev = 0;
            st.st_ino = (ino_t)-1 - (ino_t)j;
        }
        k[m++] = (sample_key){st.st_dev, st.st_ino, v->seg_start, v->seg_end, idx[j]};
    }
    qsort(k, (size_t)m, sizeof *k, by_sample);
    int kept = 0, dropped = 0;
    for (int j = 0; j < m; j++) {
        if (j > 0 && k[j].dev == k[j - 1].dev && k[j].ino == k[j - 1].ino &&
            k[j].start == k[j - 1].start && k[j].end == k[j - 1].end) {
            if (dropped++ == 0)
                vt_warn("eval --split all: %s is %s under another name (in another split: "
                        "the leak check names it); evaluated once\n",
                        ds->videos[k[j].i].relpath, ds->videos[k[j - 1].i].relpath);
            continue;
        }
        idx[kept++] = k[j].i;
    }
    if (dropped > 1)
        vt_warn("eval --split all: %d samples in all were another's file under a second name; "
                "each evaluated once\n", dropped);
    qsort(idx, (size_t)kept, sizeof *idx, cmp_i32); /* the dataset's order again */
    free(k);
    return kept;
}

/* Plan: which videos of ds, said before anything runs (the split asked for, else test,
 * else val): *idx (allocated), *n > 0 and the split's name; 0, or 1 after a message. */
static int eval_pick_videos(const eval_args *ea, vt_dataset *ds, int32_t **idxp, int *np,
                            const char **snamep) {
    const char *split = ea->split, *dir = ea->dir;
    int32_t *idx = NULL;
    char have[256];
    describe_splits(ds, have, sizeof have);
    const char *sname;
    int n;
    if (split && !strcmp(split, "all")) {
        idx = vt_malloc(sizeof(int32_t) * (size_t)(ds->nvideos ? ds->nvideos : 1));
        n = 0;
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].labeled && !vt_dataset_bad(ds, i))
                idx[n++] = i;
        n = drop_same_samples(ds, idx, n);
        sname = "all";
    } else {
        vt_split s;
        if (split) {
            s = (vt_split)vt_split_parse(split);
            if (split_total(ds, s) == 0) {
                int no_share = s == VT_SPLIT_VAL && split_total(ds, VT_SPLIT_TRAIN) > 0;
                fprintf(stderr, "vidtrain eval: %s has no %s split (it has: %s)%s\n", dir, split,
                        have, no_share ? "; the run has no --val-split share of train to use "
                                         "as val either" : "");
                return 1;
            }
        } else if (vt_dataset_split_count(ds, VT_SPLIT_TEST) > 0) {
            s = VT_SPLIT_TEST;
        } else if (vt_dataset_split_count(ds, VT_SPLIT_VAL) > 0) {
            s = VT_SPLIT_VAL;
        } else if (ea->lists_read && vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 0) {
            fprintf(stderr, "vidtrain eval: the list files %s name none of %s's videos (the "
                    "warnings above); %s\n", ea->lists_read, dir,
                    ea->lists ? "check them against DIR" :
                    "they are the run's: for another DIR, give its own with --lists PATH");
            return 1;
        } else {
            fprintf(stderr, "vidtrain eval: %s has no test or val videos to evaluate (it has: %s); "
                    "pass --split train (or --split all) to evaluate on those\n", dir, have);
            return 1;
        }
        n = vt_dataset_split_indices(ds, s, &idx);
        sname = vt_split_name(s);
    }
    if (n == 0) {
        fprintf(stderr, "vidtrain eval: no labelled, readable video in the %s split of %s (it has: "
                "%s)\n", sname, dir, have);
        free(idx);
        return 1;
    }
    printf("split: %s, %d videos (%s); %s has: %s%s\n", sname, n,
           ea->val_dir ? "the --val-dir folder the run validated on, all of it"
           : split     ? "chosen with --split"
                       : "the default: test when there is one, else val", dir,
           have,
           !strcmp(sname, "val") && ds->val_split > 0
               ? "; val is the run's --val-split share of train, as training drew it" : "");
    if (ds->nsegments) /* docs/segments.md: a segment is a sample like a video */
        printf("segments: %d samples are segments of longer videos; each is its own sample, so "
               "the \"video\" figures below are per segment\n", ds->nsegments);
    fflush(stdout);
    *idxp = idx;
    *np = n;
    *snamep = sname;
    return 0;
}

/* Every video put under one class, with videos of two classes or more: the model answers
 * the same whatever the clip (a collapsed run), and its top-1 is that class's share of
 * the split, which an imbalanced split makes look good. Said on stderr; the mean class
 * accuracy is the figure that shows it. */
static void constant_warning(const vt_eval_result *r, char *const *names) {
    int k = r->classes, present = 0, col = -1;
    int64_t videos = 0;
    for (int t = 0; t < k; t++) {
        present += r->per_class_videos[t] > 0;
        videos += r->per_class_videos[t];
    }
    for (int c = 0; c < k && col < 0; c++) {
        int64_t n = 0;
        for (int t = 0; t < k; t++)
            n += r->confusion[(size_t)t * k + c];
        if (n == videos)
            col = c;
    }
    if (present >= 2 && videos > 0 && col >= 0)
        fprintf(stderr, "warning: every video was predicted '%s': the model answers the same "
                "whatever the clip (a collapsed or untrained run), and its top-1 is that "
                "class's share of the split; the mean class accuracy shows what it is worth\n",
                names[col]);
}

/* Run, the report: the figures per head on stdout, RUN/eval.json (with the near-copies in
 * training of the videos idx[0..n) of ds), RUN/confusion.csv and the report page. 0, or 1
 * when a file could not be written (said). */
/* The videos of idx at a frame rate outside the run's training videos' (run_model.h); *first:
 * the first of them (-1 when none). */
static int fps_outside(const vt_run_model *m, const vt_dataset *ds, const int32_t *idx, int n,
                       int *first) {
    int k = 0;
    *first = -1;
    for (int i = 0; i < n; i++)
        if (vt_run_fps_outside(m, ds->videos[idx[i]].info.fps) && k++ == 0)
            *first = idx[i];
    return k;
}

/* The pairs of idx's samples whose files hold the same bytes (dataset_copies.c), into *out
 * (free()); the count. */
static int eval_copies(vt_dataset *ds, const int32_t *idx, int n, vt_dataset_copy **out) {
    char *in = vt_calloc((size_t)(ds->nvideos ? ds->nvideos : 1), 1);
    for (int i = 0; i < n; i++)
        in[idx[i]] = 1;
    int nc = vt_dataset_copies(ds, out), m = 0;
    for (int k = 0; k < nc; k++)
        if (in[(*out)[k].a] && in[(*out)[k].b])
            (*out)[m++] = (*out)[k];
    free(in);
    return m;
}

static int eval_report(const eval_args *ea, const vt_run_model *m, vt_evalproto *ep[VT_MAX_HEADS],
                       const vt_eval_counts *cnt, const char *sname, const vt_eval_opts *eo,
                       vt_dataset *ds, const int32_t *idx, int n) {
    const vt_run_heads *heads = &m->heads;
    char err[1024], path[4200];
    vt_eval_result r[VT_MAX_HEADS];
    for (int h = 0; h < heads->n; h++)
        vt_evalproto_result(ep[h], &r[h]);
    printf("clips evaluated: %lld of %lld (decode failures %lld); videos: %lld\n",
           (long long)cnt->clips, (long long)cnt->expected, (long long)cnt->bad_clips,
           (long long)cnt->videos);
    if (cnt->filled_frames) /* a damaged stream's clips, scored all the same: said */
        printf("frames filled in: %lld frames of the clips evaluated never decoded (a damaged "
               "or cut-short stream) and hold the nearest decoded frame instead "
               "(eval.json \"filled_frames\")\n", (long long)cnt->filled_frames);
    if (cnt->damaged_videos) /* each named in eval.json, with its counts */
        printf("damaged streams: %lld video(s) whose clips met decode errors (%lld: packets "
               "rejected, pictures the decoder repaired) or filled frames, scored all the same "
               "(eval.json \"damaged_videos\" names them)\n", (long long)cnt->damaged_videos,
               (long long)cnt->decode_errors);
    for (int h = 0; h < heads->n; h++) {
        if (heads->n > 1)
            printf("head %s:\n", heads->cfg[h].name);
        if (r[h].nonfinite) /* a diverged model: its NaN scores never pass as right */
            printf("  non-finite scores: %lld of %lld clips (NaN or inf; counted wrong)\n",
                   (long long)r[h].nonfinite, (long long)r[h].clips);
        if (r[h].loss == VT_LOSS_BCE) {
            printf("  label-wise accuracy: clip %.2f%%, video %.2f%%; mAP %.2f%%\n",
                   100 * r[h].clip_top1, 100 * r[h].video_top1, 100 * r[h].map);
            continue;
        }
        /* 5 or fewer classes: every finite row holds its label in its top 5 (scikit-learn's
         * top_k_accuracy_score warns the same); said, so 100% is not read as a result */
        const char *t5 = r[h].classes <= 5 ? "   (5 or fewer classes: top-5 says nothing)" : "";
        printf("  clip  top-1 %6.2f%%   top-5 %6.2f%%%s\n", 100 * r[h].clip_top1,
               100 * r[h].clip_top5, t5);
        printf("  video top-1 %6.2f%%   top-5 %6.2f%%%s\n", 100 * r[h].video_top1,
               100 * r[h].video_top5, t5);
        /* the classes it is a mean over, when not all of the model's: a split without a
         * class scored the same figure as one with it, and nothing said which */
        int absent = 0;
        for (int k = 0; k < r[h].classes; k++)
            absent += isnan(r[h].per_class_acc[k]) != 0;
        printf("  mean class accuracy %.2f%%", 100 * r[h].mean_class_acc);
        if (absent) {
            printf(" (over %d of the model's %d classes; no video of:", r[h].classes - absent,
                   r[h].classes);
            for (int k = 0, shown = 0; k < r[h].classes; k++)
                if (isnan(r[h].per_class_acc[k]) && shown++ < 10)
                    printf(" %s", heads->classes[h][k]);
            printf("%s)", absent > 10 ? " ..." : "");
        }
        printf("\n  per class:");
        for (int k = 0; k < r[h].classes; k++) {
            if (isnan(r[h].per_class_acc[k]))
                continue;
            printf(" %s %.1f%%", heads->classes[h][k], 100 * r[h].per_class_acc[k]);
        }
        printf("\n");
        if (r[h].classes <= 30)
            vt_eval_confusion_print(&r[h], (const char *const *)heads->classes[h], stdout);
        constant_warning(&r[h], heads->classes[h]);
    }
    cJSON *j = vt_eval_json(r, heads, cnt, sname, eo, ds, idx, n);
    add_leaks(j, ea->run, ea->dir, &m->opts, sname, ds, idx, n);
    /* the three files below are one evaluation's: another eval of RUN at the same time
     * writes its own set before or after this one, never between (run_claim.h) */
    int wfd = vt_dist_lead() ? vt_run_claim_writes(ea->run) : -1;
    cJSON_AddStringToObject(j, "checkpoint", m->ckpt);
    cJSON_AddStringToObject(j, "data", ea->dir);
    cJSON_AddNumberToObject(j, "copies", ea->ncopies);
    if (m->train_fps[1] > 0) /* the videos whose clips span another time than training's */
        cJSON_AddNumberToObject(j, "fps_outside_training", ea->nfps);
    /* and change together: a set (base/fileset.h), each staged whole, then renamed one
     * after the other behind a record that says, until the last rename, that they may be
     * mixed (a kill between two renames left new figures beside the old table, silently).
     * A member this eval does not write is removed with the old set: confusion.csv after
     * multi-label heads only, and the report when it fails (it showed the old figures). */
    char csv[4200];
    int wrc = 0, rrc = 0;
    snprintf(csv, sizeof csv, "%s/confusion.csv", ea->run);
    snprintf(path, sizeof path, "%s/eval.json", ea->run);
    vt_fileset *set = NULL;
    if (vt_dist_lead()) {
        char rep[4200];
        snprintf(rep, sizeof rep, "%s/report.html", ea->run);
        set = vt_fileset_begin(path, VT_FILESET_DROP);
        vt_fileset_add(set, csv, VT_FILESET_DROP);
        vt_fileset_add(set, rep, VT_FILESET_DROP);
    }
    int has_csv = r[0].loss == VT_LOSS_SOFTMAX_CE && vt_dist_lead();
    if (has_csv)
        wrc = vt_eval_confusion_csv(&r[0], (const char *const *)heads->classes[0], csv, err,
                                    sizeof err);
    if (wrc == 0)
        wrc = vt_run_write_json(path, j, err, sizeof err);
    char rerr[1024];
    if (wrc == 0 && (rrc = vt_report_write_eval(ea->run, j, rerr, sizeof rerr)) != 0)
        fprintf(stderr, "vidtrain eval: report: %s (the old report.html is removed with the "
                "old evaluation)\n", rerr);
    cJSON_Delete(j);
    int staged = wrc == 0;
    if (staged)
        wrc = vt_fileset_commit(&set, err, sizeof err);
    vt_fileset_free(&set); /* not committed: the staged files go, the old set stays */
    if (wrc != 0)
        fprintf(stderr, "vidtrain eval: %s%s\n", err, staged ? "" : " (eval.json, confusion.csv "
                "and report.html are left as they were)");
    if (wrc == 0 && vt_dist_lead()) {
        printf("wrote %s\n", path);
        if (has_csv)
            printf("wrote %s\n", csv);
        if (!rrc)
            printf("wrote %s/report.html\n", ea->run);
    }
    for (int h = 0; h < heads->n; h++)
        vt_eval_result_free(&r[h]);
    vt_run_claim_unshare(&wfd);
    return wrc == 0 ? 0 : 1;
}

/* 1 after printing why when a train holds RUN (vt_run_claim_share), else 0 with *held
 * eval's shared hold (-1: none). */
static int run_in_use(const char *run, int make, int *held) {
    char pid[32];
    if (!vt_run_claim_share(run, make, pid, sizeof pid, held))
        return 0;
    fprintf(stderr, "vidtrain eval: %s is in use by a vidtrain train%s%s%s, which writes its "
                    "checkpoints and report there: eval writes RUN/eval.json and report.html, "
                    "so wait for the train to end (or copy the run folder, cp -a RUN COPY, and "
                    "evaluate the copy)\n", run, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    return 1;
}

int vt_cmd_eval(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    eval_args ea;
    int rc = eval_parse(&ea, argc, argv);
    if (rc)
        return rc;
    const char *run = ea.run, *dir = ea.dir;
    const vt_model_args *ma = &ea.ma;
    char err[1024];
    rc = 1;
    vt_dataset *ds = NULL;
    int32_t *idx = NULL;
    vt_evalproto *ep[VT_MAX_HEADS] = {0};
    vt_run_model m;
    int held = -1; /* a shared hold on RUN/.lock while eval writes there */
    /* eval writes RUN/eval.json, confusion.csv and report.html: not into a run a train is
     * still writing (its report and checkpoints replace them, and the figures would be of
     * a checkpoint the run has since replaced, saved beside it as if of it) */
    memset(&m, 0, sizeof m);
    if (vt_dist_lead() && run_in_use(run, 0, &held))
        goto end;
    /* the files eval writes into RUN; every other file of the run is an input that no
     * output may replace (base/common.h's output rule) */
    static const char *const outs[] = {"eval.json", "confusion.csv", "report.html",
                                       ".eval.json.set", NULL}; /* the set's record */
    if (vt_run_model_open(&m, run, ma->ckpt, outs, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    /* eval files its figures in RUN: --checkpoint of another run (another model, clip,
     * statistics or classes) would have them written there as RUN's */
    if (ma->ckpt && vt_run_model_of_run(&m, run, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    /* a run without RUN/.lock (copied without it): held from here, made now that RUN
     * proved to be a run, so that no train starts there while eval writes */
    if (vt_dist_lead() && held < 0 && run_in_use(run, 1, &held))
        goto end;
    const vt_train_opts *o = &m.opts;
    const int implied = !dir;
    if (!dir) { /* `eval RUN`: the folder it trained on, where it still is */
        struct stat st;
        if (!o->data[0] || stat(o->data, &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "vidtrain eval: %s trained on %s%s%s, which is not a folder now; "
                    "name the videos to evaluate: vidtrain eval %s DIR\n", run,
                    o->data[0] ? "'" : "", o->data[0] ? o->data : "a folder its config.json "
                    "does not name", o->data[0] ? "'" : "", run);
            goto end;
        }
        dir = ea.dir = o->data;
    }

    /* The same val split as training when DIR is the training folder (flat layout); the
     * run's labels file and list files unless --labels and --lists name DIR's own. */
    ds = vt_run_dataset_open(o, dir, ea.labels, ea.lists, err, sizeof err);
    ea.lists_read = ea.lists ? ea.lists : o->lists[0] ? o->lists : NULL;
    /* a run that validated on --val-dir, of a folder with no val or test videos of its
     * own: what its validation scored, every labelled video there (train_data.c) */
    if (ds && implied && o->val_dir[0] && !ea.split && !ea.labels && !ea.lists &&
        !vt_dataset_split_count(ds, VT_SPLIT_VAL) && !vt_dataset_split_count(ds, VT_SPLIT_TEST)) {
        vt_dataset_free(&ds);
        dir = ea.dir = o->val_dir;
        ea.split = "all";
        ea.val_dir = 1;
        ds = vt_dataset_open(dir, NULL, err, sizeof err);
        ea.lists_read = NULL;
        if (ds && !ea.quiet)
            printf("data: %s (the folder %s validated on, --val-dir: all its videos)\n", dir,
                   run);
    } else if (ds && implied && !ea.quiet) {
        printf("data: %s (the folder %s trained on)\n", dir, run);
    }
    if (!ds) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    if (vt_frame_rate_check_data("eval", ds, NULL) != 0) {
        rc = 2;
        goto end;
    }
    /* DIR and the labels file are inputs now (vt_dataset_open, vt_dataset_load_labels): a
     * RUN inside DIR cannot take eval.json, nor --labels be one of the files eval writes,
     * said before the evaluation rather than after it (base/common.h's output rule) */
    int orc = 0;
    for (int i = 0; i < 3 && orc == 0 && vt_dist_lead(); i++) {
        if (i == 1 && m.heads.cfg[0].loss != VT_LOSS_SOFTMAX_CE)
            continue; /* written for a softmax first head only (eval_report) */
        char out[4200];
        snprintf(out, sizeof out, "%s/%s", run, outs[i]);
        orc = vt_output_check_early(out, err, sizeof err);
    }
    if (vt_dist_share_result(orc, err, sizeof err) != 0) { /* every rank stops */
        if (vt_dist_lead())
            fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    /* Unreadable files are reported here and left out of every split (not an error);
     * files the system refused to open are (the evaluation would be of part of them). */
    if (vt_dataset_probe(ds, 0, 1, NULL, NULL) < 0 && vt_video_system_failed(err, sizeof err)) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    vt_dist_dataset_sync(ds, "the evaluation data");
    const char *sname;
    int n;
    if (eval_pick_videos(&ea, ds, &idx, &n, &sname) != 0)
        goto end;
    vt_dataset_copy *copies = NULL; /* counted twice, or under two labels: said, kept */
    ea.ncopies = eval_copies(ds, idx, n, &copies);
    if (vt_dist_lead())
        vt_dataset_copies_print(stderr, "vidtrain eval: warning: among the videos evaluated, ",
                                ds, copies, ea.ncopies);
    free(copies);
    int first_fps;
    ea.nfps = fps_outside(&m, ds, idx, n, &first_fps);
    if (ea.nfps && vt_dist_lead())
        vt_run_fps_warn("eval", "video", &m, ea.nfps, n, ds->videos[first_fps].relpath,
                        ds->videos[first_fps].info.fps);

    int batch = ea.batch ? ea.batch : o->batch;
    m.precision = ma->precision;
    int lrc = vt_run_model_load(&m, &ma->devices, ma->tower_split, batch, err, sizeof err);
    if (lrc != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        rc = lrc == -2 ? 2 : 1;
        goto end;
    }
    if (!ea.quiet && vt_dist_lead()) {
        char line[1024];
        vt_towers_plan_line(m.towers, line, sizeof line);
        fprintf(stderr, "towers: %s\n", line);
    }
    printf("evaluating %s on %s: %s split, %d videos, %d clips x %d crop(s) per video\n", m.ckpt,
           dir, sname, n, ma->clips_per_video, ma->crops);
    fflush(stdout);

    vt_eval_opts eo;
    memset(&eo, 0, sizeof eo);
    vt_run_model_clip(&eo.clip, &m);
    eo.clips_per_video = ma->clips_per_video;
    eo.crops = ma->crops;
    eo.batch = batch;
    eo.workers = ea.workers;
    eo.seed = o->seed;
    eo.quiet = ea.quiet;
    vt_eval_counts cnt;
    if (vt_run_evaluate(ep, &cnt, m.towers, ds, &m.heads, idx, n, &eo, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s: %s\n", dir, err);
        goto end;
    }
    if (cnt.unknown_videos) {
        printf("left out: %lld video(s) of classes the model does not know\n",
               (long long)cnt.unknown_videos);
        fflush(stdout);
    }
    if (cnt.clips == 0) {
        fprintf(stderr, "vidtrain eval: no clip of the %s split of %s could be evaluated (%lld "
                "video(s) of classes the model does not know, %lld decode failure(s))\n", sname,
                dir, (long long)cnt.unknown_videos, (long long)cnt.bad_clips);
        goto end;
    }
    rc = eval_report(&ea, &m, ep, &cnt, sname, &eo, ds, idx, n);
end:
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_evalproto_free(&ep[h]);
    free(idx);
    vt_dataset_free(&ds);
    vt_run_model_free(&m);
    vt_run_claim_unshare(&held);
    return rc;
}
