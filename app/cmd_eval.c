/*
 * cmd_eval.c: `vidtrain eval RUN DIR` — the evaluation protocol: K uniformly spaced clips
 * per video x 1 or 3 crops through the towers (forward only), probabilities averaged per
 * video, then clip/video top-1/top-5, mean class accuracy, per-class accuracy and the
 * confusion matrix, printed and written to RUN/eval.json and RUN/confusion.csv.
 * Also the evaluation pass that training's validation uses (vt_run_evaluate).
 *
 * Every clip is counted once whatever the tower split: the loader hands each clip once,
 * the towers return one output per clip in batch order, and the counts are checked
 * against what was asked for. Under mpirun each rank decodes and evaluates its towers'
 * part of every batch, and the per-video sums of all ranks are added before any metric
 * is computed, so a video whose clips landed on several ranks counts once with all its
 * clips. This file must never train or change a checkpoint.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/dist.h"
#include "app/dump.h"
#include "app/evalproto.h"
#include "app/progress.h"
#include "app/report.h"
#include "app/run.h"
#include "models/common.h"
#include "pipeline/data/dataset.h"
#include "pipeline/data/loader.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/tower.h"

/* ds class id -> model class id by name (-1: the model does not know it). */
static int *class_map(const vt_dataset_head *dh, int nmodel, char *const *model_names) {
    int *m = vt_malloc(sizeof(int) * (size_t)(dh->nclasses ? dh->nclasses : 1));
    for (int c = 0; c < dh->nclasses; c++) {
        m[c] = -1;
        for (int k = 0; k < nmodel; k++)
            if (!strcmp(dh->classes[c], model_names[k])) {
                m[c] = k;
                break;
            }
    }
    return m;
}

/* 1 when video dv of head h holds class (softmax) or tag (BCE) c of the dataset. */
static int video_has_class(const vt_dataset_video *dv, const vt_dataset_head *dh, int h, int c) {
    if (dh->loss == VT_LOSS_SOFTMAX_CE)
        return dv->label[h] == c;
    for (int k = 0; k < dv->ntags[h]; k++)
        if (dv->tags[h][k] == c)
            return 1;
    return 0;
}

/* 1 when video dv has, in some head, a class or tag the model does not know. */
static int video_unknown(const vt_dataset *ds, const vt_dataset_video *dv, int *const *map) {
    for (int h = 0; h < ds->nheads; h++)
        for (int c = 0; c < ds->heads[h].nclasses; c++)
            if (map[h][c] < 0 && video_has_class(dv, &ds->heads[h], h, c))
                return 1;
    return 0;
}

/* One warning per class of the dataset that the model does not know and that some video
 * of idx (n) holds: what it is called and how many videos are left out for it. */
static void warn_unknown(const vt_dataset *ds, const vt_run_heads *heads, int *const *map,
                         const int32_t *idx, int n) {
    for (int h = 0; h < ds->nheads; h++) {
        const vt_dataset_head *dh = &ds->heads[h];
        for (int c = 0; c < dh->nclasses; c++) {
            if (map[h][c] >= 0)
                continue;
            int64_t nv = 0;
            for (int i = 0; i < n; i++)
                nv += video_has_class(&ds->videos[idx[i]], dh, h, c);
            if (nv)
                vt_warn("%s: head '%s': %s '%s' is not one of the model's %d classes: its %lld "
                        "video(s) are left out\n", ds->dir, dh->name,
                        dh->loss == VT_LOSS_BCE ? "tag" : "class", dh->classes[c],
                        heads->cfg[h].classes, (long long)nv);
        }
    }
}

int vt_run_evaluate(vt_evalproto *ep[VT_MAX_HEADS], vt_eval_counts *counts, vt_towers *t,
                    vt_dataset *ds, const vt_run_heads *heads, const int32_t *idx, int n,
                    const vt_eval_opts *eo, char *err, size_t errlen) {
    memset(counts, 0, sizeof *counts);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        ep[h] = NULL;
    if (ds->nheads != heads->n) {
        vt_set_err(err, errlen, "the dataset has %d head(s), the model %d (use the same --labels)",
                   ds->nheads, heads->n);
        return -1;
    }
    int *map[VT_MAX_HEADS] = {0};
    int32_t *lab[VT_MAX_HEADS] = {0}; /* (batch) labels in the model's class ids */
    float *tgt[VT_MAX_HEADS] = {0};   /* (batch, model classes) targets in the model's ids */
    float *probs[VT_MAX_HEADS] = {0};
    int32_t *keep = NULL;
    int rc = -1, nkeep = 0;
    vt_loader *l = NULL;
    vt_progress *pg = NULL;
    /* Under mpirun: the same videos on every rank, unreadable ones left out everywhere. */
    vt_mpi_dataset_sync(ds, "the evaluation data");
    for (int h = 0; h < heads->n; h++) {
        if (ds->heads[h].loss != heads->cfg[h].loss) {
            vt_set_err(err, errlen, "head %s: the dataset's loss kind differs from the model's",
                       heads->cfg[h].name);
            goto end;
        }
        map[h] = class_map(&ds->heads[h], heads->cfg[h].classes, heads->classes[h]);
    }
    /* Videos of a class the model does not know have no right answer among its outputs
     * and no loss: they are left out before loading, so every count below is of the
     * videos kept. */
    keep = vt_malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) {
        const vt_dataset_video *dv = &ds->videos[idx[i]];
        VT_CHECK(dv->labeled, "video %d (%s) has no label", idx[i], dv->relpath);
        if (video_unknown(ds, dv, map))
            counts->unknown_videos++;
        else
            keep[nkeep++] = idx[i];
    }
    if (counts->unknown_videos)
        warn_unknown(ds, heads, map, idx, n);
    for (int h = 0; h < heads->n; h++)
        ep[h] = vt_evalproto_init(ds->nvideos, heads->cfg[h].classes, heads->cfg[h].loss);
    counts->expected = (int64_t)nkeep * eo->clips_per_video * eo->crops;
    if (nkeep == 0) {
        rc = 0;
        goto end;
    }
    vt_loader_cfg lc;
    vt_loader_cfg_default(&lc);
    lc.mode = VT_LOADER_EVAL;
    lc.batch = eo->batch;
    lc.workers = eo->workers;
    lc.seed = eo->seed;
    lc.clips_per_video = eo->clips_per_video;
    lc.clip = eo->clip;
    lc.clip.ncrops = eo->crops;
    lc.clip.flip = 0;
    lc.indices = keep;
    lc.nindices = nkeep;
    vt_towers_host_hook(t, &lc.host_alloc, &lc.host_free, &lc.host_ctx); /* pinned on GPUs */
    if (vt_mpi_size() > 1) { /* each rank decodes only its towers' part of every batch */
        lc.part = vt_towers_part_eval;
        lc.part_ctx = t;
    }
    l = vt_loader_init(ds, &lc, err, errlen);
    if (!l)
        goto end;
    for (int h = 0; h < heads->n; h++) {
        size_t K = (size_t)heads->cfg[h].classes;
        probs[h] = vt_malloc(sizeof(float) * (size_t)eo->batch * K);
        if (heads->cfg[h].loss == VT_LOSS_SOFTMAX_CE)
            lab[h] = vt_malloc(sizeof(int32_t) * (size_t)eo->batch);
        else
            tgt[h] = vt_malloc(sizeof(float) * (size_t)eo->batch * K);
    }
    int64_t nb = vt_loader_num_batches(l);
    pg = eo->quiet ? NULL : vt_progress_init(stderr, "eval", nb, 0, -1, 0);
    int64_t done = 0;
    const vt_batch *b;
    double lsum = 0;
    int64_t right = 0; /* head 0 clips right so far, for the progress line */
    while ((b = vt_loader_next(l)) != NULL) {
        VT_CHECK(b->n <= eo->batch, "a batch of %d clips from a loader of %d", b->n, eo->batch);
        /* The same clips with labels in the model's class ids: the loss the towers
         * compute and the metrics below both see the model's numbering. */
        vt_batch mb = *b;
        for (int h = 0; h < heads->n; h++) {
            const int K = heads->cfg[h].classes;
            mb.head_classes[h] = K;
            if (heads->cfg[h].loss == VT_LOSS_SOFTMAX_CE) {
                for (int i = 0; i < b->n; i++) {
                    lab[h][i] = map[h][b->label[h][i]];
                    VT_CHECK(lab[h][i] >= 0, "video %d: a class left out reached the loader",
                             b->video[i]);
                }
                mb.label[h] = lab[h];
            } else {
                const int dk = b->head_classes[h];
                for (int i = 0; i < b->n; i++) {
                    float *y = tgt[h] + (size_t)i * K;
                    const float *dy = b->target[h] + (size_t)i * dk;
                    for (int k = 0; k < K; k++)
                        y[k] = 0;
                    for (int c = 0; c < dk; c++)
                        if (map[h][c] >= 0)
                            y[map[h][c]] = dy[c];
                }
                mb.target[h] = tgt[h];
            }
        }
        vt_step_stats ss;
        vt_towers_eval_step(t, &mb, probs, &ss);
        if (eo->dump && heads->cfg[0].loss == VT_LOSS_SOFTMAX_CE &&
            vt_dump_eval(eo->dump, &mb, probs[0], heads->cfg[0].classes, err, errlen) != 0)
            goto end;
        for (int h = 0; h < heads->n; h++) {
            const int K = heads->cfg[h].classes;
            for (int i = 0; i < b->n; i++) {
                int bad = vt_evalproto_add(ep[h], b->video[i], lab[h] ? lab[h][i] : 0,
                                           tgt[h] ? tgt[h] + (size_t)i * K : NULL,
                                           probs[h] + (size_t)i * K);
                VT_CHECK(bad == 0, "video %d label %d out of range", b->video[i],
                         lab[h] ? lab[h][i] : 0);
            }
            vt_evalproto_add_loss(ep[h], ss.head_loss[h]);
        }
        counts->clips += b->n;
        lsum += ss.loss;
        right += ss.head_correct[0];
        done++;
        vt_progress_update(pg, done, counts->clips, counts->clips ? lsum / counts->clips : 0,
                           counts->clips ? (double)right / counts->clips : 0, 0);
    }
    vt_progress_finish(pg, NULL);
    vt_loader_stats ls;
    vt_loader_get_stats(l, &ls);
    counts->bad_clips = ls.bad_clips;
    if (vt_mpi_size() > 1) {
        /* Every rank's clips into every rank's evaluators (sums in rank order: the same
         * bits everywhere), before any metric: video scores add up across ranks. */
        for (int h = 0; h < heads->n; h++) {
            int64_t np = vt_evalproto_pack_len(ep[h]);
            double *pk = vt_malloc(sizeof(double) * (size_t)np);
            vt_evalproto_pack(ep[h], pk);
            vt_mpi_sum_f64(pk, np, "merging the ranks' evaluation results");
            vt_evalproto_unpack(ep[h], pk);
            free(pk);
        }
        double cb[2] = {(double)counts->clips, (double)counts->bad_clips};
        vt_mpi_sum_f64(cb, 2, "merging the ranks' clip counts");
        counts->clips = (int64_t)cb[0];
        counts->bad_clips = (int64_t)cb[1];
    }
    for (int v = 0; v < ds->nvideos; v++)
        counts->videos += vt_evalproto_video_clips(ep[0], v) > 0;
    rc = 0;
end:
    vt_progress_free(&pg);
    vt_loader_free(&l);
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(map[h]);
        free(lab[h]);
        free(tgt[h]);
        free(probs[h]);
    }
    free(keep);
    if (rc != 0)
        for (int h = 0; h < VT_MAX_HEADS; h++)
            vt_evalproto_free(&ep[h]);
    return rc;
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

cJSON *vt_eval_json(const vt_eval_result *r, const vt_run_heads *heads, const vt_eval_counts *counts,
                    const char *split, const vt_eval_opts *eo) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "split", split);
    cJSON_AddNumberToObject(j, "clips", (double)counts->clips);
    cJSON_AddNumberToObject(j, "videos", (double)counts->videos);
    cJSON_AddNumberToObject(j, "expected_clips", (double)counts->expected);
    cJSON_AddNumberToObject(j, "bad_clips", (double)counts->bad_clips);
    cJSON_AddNumberToObject(j, "unknown_videos", (double)counts->unknown_videos);
    cJSON_AddNumberToObject(j, "clips_per_video", eo->clips_per_video);
    cJSON_AddNumberToObject(j, "crops", eo->crops);
    cJSON_AddItemToObject(j, "clip_top1", num_or_null(r[0].clip_top1));
    cJSON_AddItemToObject(j, "clip_top5", num_or_null(r[0].clip_top5));
    cJSON_AddItemToObject(j, "video_top1", num_or_null(r[0].video_top1));
    cJSON_AddItemToObject(j, "video_top5", num_or_null(r[0].video_top5));
    cJSON_AddItemToObject(j, "mean_class_acc", num_or_null(r[0].mean_class_acc));
    cJSON *hs = cJSON_AddArrayToObject(j, "heads");
    for (int h = 0; h < heads->n; h++) {
        const vt_eval_result *x = &r[h];
        int K = x->classes;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", heads->cfg[h].name);
        cJSON_AddStringToObject(o, "loss", x->loss == VT_LOSS_BCE ? "bce" : "softmax");
        cJSON *cl = cJSON_AddArrayToObject(o, "classes");
        for (int k = 0; k < K; k++)
            cJSON_AddItemToArray(cl, cJSON_CreateString(heads->classes[h][k]));
        cJSON_AddNumberToObject(o, "clips", (double)x->clips);
        cJSON_AddNumberToObject(o, "videos", (double)x->videos);
        cJSON_AddItemToObject(o, "loss_mean", num_or_null(x->clips ? x->loss_sum / (double)x->clips : NAN));
        cJSON_AddItemToObject(o, "clip_top1", num_or_null(x->clip_top1));
        if (x->loss == VT_LOSS_BCE) {
            cJSON_AddItemToObject(o, "video_top1", num_or_null(x->video_top1));
            cJSON_AddItemToObject(o, "map", num_or_null(x->map));
        } else {
            cJSON_AddItemToObject(o, "clip_top5", num_or_null(x->clip_top5));
            cJSON_AddItemToObject(o, "video_top1", num_or_null(x->video_top1));
            cJSON_AddItemToObject(o, "video_top5", num_or_null(x->video_top5));
            cJSON_AddItemToObject(o, "mean_class_acc", num_or_null(x->mean_class_acc));
        }
        cJSON *pa = cJSON_AddArrayToObject(o, "per_class_acc");
        cJSON *pv = cJSON_AddArrayToObject(o, "per_class_videos");
        for (int k = 0; k < K; k++) {
            cJSON_AddItemToArray(pa, num_or_null(x->per_class_acc[k]));
            cJSON_AddItemToArray(pv, cJSON_CreateNumber((double)x->per_class_videos[k]));
        }
        if (x->loss == VT_LOSS_SOFTMAX_CE) {
            cJSON *cm = cJSON_AddArrayToObject(o, "confusion");
            for (int a = 0; a < K; a++) {
                cJSON *row = cJSON_CreateArray();
                for (int p = 0; p < K; p++)
                    cJSON_AddItemToArray(row, cJSON_CreateNumber((double)x->confusion[(size_t)a * K + p]));
                cJSON_AddItemToArray(cm, row);
            }
        }
        cJSON_AddItemToArray(hs, o);
    }
    return j;
}

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

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain eval RUN DIR [options]\n\n"
        "Evaluates RUN's best checkpoint (else last) on the videos of DIR: K uniformly spaced\n"
        "clips per video x 1 or 3 crops, softmax averaged per video. Prints and writes\n"
        "RUN/eval.json (clip and video top-1/top-5, mean class accuracy, per-class accuracy,\n"
        "confusion matrix) and RUN/confusion.csv, and refreshes RUN/report.html.\n\n"
        "  --split NAME           the data split to evaluate: train, val, test, or all (every\n"
        "                         labelled video). Default: test when DIR has test videos,\n"
        "                         else val. DIR may hold any of train/, val/, test/ (e.g. only\n"
        "                         test/), or be a flat DIR/<class>/ folder. When DIR has train\n"
        "                         videos and no val/, val is the run's --val-split share of\n"
        "                         train, drawn exactly as training drew it. A split DIR does\n"
        "                         not have is an error that lists the ones it has.\n"
        "  --clips-per-video K    (default 10)\n"
        "  --crops 1|3            centre crop, or start/centre/end of the long side (default 1)\n"
        "  --checkpoint PATH      another checkpoint than RUN/best.safetensors\n"
        "  --precision P          fp32 (default, whatever the run trained with), tf32, bf16\n"
        "  --batch N              clips per forward batch (default: the run's batch)\n"
        "  --workers N            decode threads (default 2)\n"
        "  --tower-split POLICY   how batches split over the towers: equal, memory (default),\n"
        "                         speed, auto, manual:W,W,...\n"
        "  -q, --quiet            no progress display\n"
        "%s\n"
        "top-k: the true class counts within the top k when fewer than k classes score higher\n"
        "(ties go to the lower class index). Mean class accuracy averages the per-class video\n"
        "top-1 over the classes present. Every clip is counted once across towers.\n"
        "Classes are matched to the model's by name; videos of a class the model does not\n"
        "know are left out, named in a warning and counted (eval.json \"unknown_videos\").\n"
        "Exit codes: 0 ok, 1 error (also: a --split DIR does not have), 2 usage.\n"
        "%s",
        vt_device_args_help, vt_mpi_help);
}

int vt_cmd_eval(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *pos[2] = {NULL, NULL};
    int npos = 0, quiet = 0, batch = 0, workers = 2;
    const char *split = NULL;
    vt_model_args ma;
    vt_model_args_default(&ma);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = vt_model_args_take(&ma, argc, argv, &i, "eval");
        if (r < 0)
            return 2;
        if (r == 1)
            continue;
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain eval: bad value for %s\n", a); return 2; } while (0)
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { quiet = 1; continue; }
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
            split = v;
            continue;
        }
        if (OPT("--batch")) { if (r < 0 || vt_parse_int(v, 1, 65536, &batch)) BAD(); continue; }
        if (OPT("--workers")) { if (r < 0 || vt_parse_int(v, 0, 256, &workers)) BAD(); continue; }
#undef OPT
#undef BAD
        if (a[0] == '-') {
            fprintf(stderr, "vidtrain eval: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (npos == 2) {
            fprintf(stderr, "vidtrain eval: expected RUN DIR, got a third argument '%s'\n", a);
            return 2;
        }
        pos[npos++] = a;
    }
    if (npos != 2) {
        usage(stderr);
        return 2;
    }
    const char *run = pos[0], *dir = pos[1];
    char err[1024], path[4200];
    int rc = 1;
    vt_dataset *ds = NULL;
    int32_t *idx = NULL;
    vt_evalproto *ep[VT_MAX_HEADS] = {0};
    vt_run_model m;
    if (vt_run_model_open(&m, run, ma.ckpt, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    const vt_train_opts *o = &m.opts;
    const vt_run_heads *heads = &m.heads;

    /* The same val split as training when DIR is the training folder (flat layout). */
    vt_dataset_opts dopt = vt_run_dataset_opts(o);
    ds = vt_dataset_open(dir, &dopt, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    if (o->labels[0] && vt_dataset_load_labels(ds, o->labels, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    /* Unreadable files are reported here and left out of every split (not an error). */
    vt_dataset_probe(ds, 0, 1, NULL, NULL);
    vt_mpi_dataset_sync(ds, "the evaluation data");
    /* Which videos: the split asked for, else test, else val; said before anything runs. */
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
                goto end;
            }
        } else if (vt_dataset_split_count(ds, VT_SPLIT_TEST) > 0) {
            s = VT_SPLIT_TEST;
        } else if (vt_dataset_split_count(ds, VT_SPLIT_VAL) > 0) {
            s = VT_SPLIT_VAL;
        } else {
            fprintf(stderr, "vidtrain eval: %s has no test or val videos to evaluate (it has: %s); "
                    "pass --split train (or --split all) to evaluate on those\n", dir, have);
            goto end;
        }
        n = vt_dataset_split_indices(ds, s, &idx);
        sname = vt_split_name(s);
    }
    if (n == 0) {
        fprintf(stderr, "vidtrain eval: no labelled, readable video in the %s split of %s (it has: "
                "%s)\n", sname, dir, have);
        goto end;
    }
    printf("split: %s, %d videos (%s); %s has: %s%s\n", sname, n,
           split ? "chosen with --split" : "the default: test when there is one, else val", dir,
           have,
           !strcmp(sname, "val") && ds->val_split > 0
               ? "; val is the run's --val-split share of train, as training drew it" : "");
    fflush(stdout);

    if (!batch)
        batch = o->batch;
    m.precision = ma.precision;
    int lrc = vt_run_model_load(&m, &ma.devices, ma.tower_split, batch, err, sizeof err);
    if (lrc != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        rc = lrc == -2 ? 2 : 1;
        goto end;
    }
    if (!quiet && vt_dist_lead()) {
        char line[1024];
        vt_towers_plan_line(m.towers, line, sizeof line);
        fprintf(stderr, "towers: %s\n", line);
    }
    printf("evaluating %s on %s: %s split, %d videos, %d clips x %d crop(s) per video\n", m.ckpt,
           dir, sname, n, ma.clips_per_video, ma.crops);
    fflush(stdout);

    vt_eval_opts eo;
    memset(&eo, 0, sizeof eo);
    vt_run_model_clip(&eo.clip, &m);
    eo.clips_per_video = ma.clips_per_video;
    eo.crops = ma.crops;
    eo.batch = batch;
    eo.workers = workers;
    eo.seed = o->seed;
    eo.quiet = quiet;
    vt_eval_counts cnt;
    if (vt_run_evaluate(ep, &cnt, m.towers, ds, heads, idx, n, &eo, err, sizeof err) != 0) {
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
    vt_eval_result r[VT_MAX_HEADS];
    for (int h = 0; h < heads->n; h++)
        vt_evalproto_result(ep[h], &r[h]);
    printf("clips evaluated: %lld of %lld (decode failures %lld); videos: %lld\n",
           (long long)cnt.clips, (long long)cnt.expected, (long long)cnt.bad_clips,
           (long long)cnt.videos);
    for (int h = 0; h < heads->n; h++) {
        if (heads->n > 1)
            printf("head %s:\n", heads->cfg[h].name);
        if (r[h].loss == VT_LOSS_BCE) {
            printf("  label-wise accuracy: clip %.2f%%, video %.2f%%; mAP %.2f%%\n",
                   100 * r[h].clip_top1, 100 * r[h].video_top1, 100 * r[h].map);
            continue;
        }
        printf("  clip  top-1 %6.2f%%   top-5 %6.2f%%\n", 100 * r[h].clip_top1, 100 * r[h].clip_top5);
        printf("  video top-1 %6.2f%%   top-5 %6.2f%%\n", 100 * r[h].video_top1, 100 * r[h].video_top5);
        printf("  mean class accuracy %.2f%%\n  per class:", 100 * r[h].mean_class_acc);
        for (int k = 0; k < r[h].classes; k++) {
            if (isnan(r[h].per_class_acc[k]))
                continue;
            printf(" %s %.1f%%", heads->classes[h][k], 100 * r[h].per_class_acc[k]);
        }
        printf("\n");
        if (r[h].classes <= 30)
            vt_eval_confusion_print(&r[h], (const char *const *)heads->classes[h], stdout);
    }
    cJSON *j = vt_eval_json(r, heads, &cnt, sname, &eo);
    cJSON_AddStringToObject(j, "checkpoint", m.ckpt);
    cJSON_AddStringToObject(j, "data", dir);
    snprintf(path, sizeof path, "%s/eval.json", run);
    int wrc = vt_write_json(path, j, err, sizeof err);
    cJSON_Delete(j);
    if (wrc != 0)
        fprintf(stderr, "vidtrain eval: %s\n", err);
    else
        printf("wrote %s\n", path);
    if (r[0].loss == VT_LOSS_SOFTMAX_CE && vt_dist_lead()) {
        snprintf(path, sizeof path, "%s/confusion.csv", run);
        if (vt_eval_confusion_csv(&r[0], (const char *const *)heads->classes[0], path, err,
                                  sizeof err) != 0) {
            fprintf(stderr, "vidtrain eval: %s\n", err);
            wrc = -1;
        } else {
            printf("wrote %s\n", path);
        }
    }
    for (int h = 0; h < heads->n; h++)
        vt_eval_result_free(&r[h]);
    /* The report is derived from the files above: a failure is reported, not fatal. */
    if (vt_report_write(run, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain eval: report: %s\n", err);
    else
        printf("wrote %s/report.html\n", run);
    rc = wrc == 0 ? 0 : 1;
end:
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_evalproto_free(&ep[h]);
    free(idx);
    vt_dataset_free(&ds);
    vt_run_model_free(&m);
    return rc;
}
