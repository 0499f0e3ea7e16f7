/*
 * evaluate.c: the evaluation pass (evaluate.h). Labels are mapped from the dataset's
 * classes to the model's by name before anything uses them, so metrics and loss are
 * right whatever the dataset's class order; a video of a class the model does not know
 * is left out, named and counted, never scored. It must never train or write a file
 * other than through the --dump hook it is given.
 */
#include "app/eval/evaluate.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "app/dist.h"
#include "app/dump.h"
#include "app/progress.h"
#include "base/common.h"
#include "pipeline/data/loader.h"
#include "pipeline/data/video/video.h"
#include "pipeline/parallel/mpi.h"

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

void vt_eval_loader_cfg(vt_loader_cfg *lc, const vt_eval_opts *eo) {
    vt_loader_cfg_default(lc);
    lc->mode = VT_LOADER_EVAL;
    lc->batch = eo->batch;
    lc->workers = eo->workers;
    lc->seed = eo->seed;
    lc->clips_per_video = eo->clips_per_video;
    lc->clip = eo->clip;
    lc->clip.ncrops = eo->crops;
    lc->clip.flip = 0;
}

/* The damage counts of the videos idx (n) from 0: what this evaluation's loader adds is
 * this evaluation's (vt_dataset_mark_damaged). Under the lock: a training loader may be
 * reading other videos of the same dataset meanwhile. */
static void damage_reset(vt_dataset *ds, const int32_t *idx, int n) {
    pthread_mutex_lock(&ds->lock);
    for (int i = 0; i < n; i++)
        ds->videos[idx[i]].damage_errors = ds->videos[idx[i]].damage_filled = 0;
    pthread_mutex_unlock(&ds->lock);
}

/* Under mpirun: each rank read its part of the clips; every rank gets the sums. */
static void damage_merge(vt_dataset *ds, const int32_t *keep, int nkeep) {
    double *d = vt_malloc(sizeof(double) * 2 * (size_t)(nkeep ? nkeep : 1));
    for (int i = 0; i < nkeep; i++) {
        d[2 * i] = (double)ds->videos[keep[i]].damage_errors;
        d[2 * i + 1] = (double)ds->videos[keep[i]].damage_filled;
    }
    vt_mpi_sum_f64(d, 2 * (int64_t)nkeep, "merging the ranks' damaged-video counts");
    for (int i = 0; i < nkeep; i++) {
        ds->videos[keep[i]].damage_errors = (int64_t)d[2 * i];
        ds->videos[keep[i]].damage_filled = (int64_t)d[2 * i + 1];
    }
    free(d);
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
    vt_dist_dataset_sync(ds, "the evaluation data");
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
    damage_reset(ds, idx, n);
    if (nkeep == 0) {
        rc = 0;
        goto end;
    }
    vt_loader_cfg lc;
    vt_eval_loader_cfg(&lc, eo);
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
    counts->filled_frames = ls.filled_frames;
    counts->decode_errors = ls.decode_errors;
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
        double cb[4] = {(double)counts->clips, (double)counts->bad_clips,
                        (double)counts->filled_frames, (double)counts->decode_errors};
        vt_mpi_sum_f64(cb, 4, "merging the ranks' clip counts");
        counts->clips = (int64_t)cb[0];
        counts->bad_clips = (int64_t)cb[1];
        counts->filled_frames = (int64_t)cb[2];
        counts->decode_errors = (int64_t)cb[3];
        damage_merge(ds, keep, nkeep);
    }
    for (int i = 0; i < nkeep; i++) {
        const vt_dataset_video *dv = &ds->videos[keep[i]];
        counts->damaged_videos += dv->damage_errors > 0 || dv->damage_filled > 0;
    }
    for (int v = 0; v < ds->nvideos; v++)
        counts->videos += vt_evalproto_video_clips(ep[0], v) > 0;
    /* clips the system refused to open left out: figures of part of the videos, no result */
    if (vt_video_system_failed(err, errlen))
        goto end;
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

/* {"path", ["start", "end",] "decode_errors", "filled_frames"} of each video of idx (n)
 * whose clips met damage, in dataset order. */
static cJSON *damaged_json(const vt_dataset *ds, const int32_t *idx, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        const vt_dataset_video *dv = &ds->videos[idx[i]];
        if (dv->damage_errors <= 0 && dv->damage_filled <= 0)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "path", dv->relpath);
        if (vt_dataset_is_segment(dv)) {
            cJSON_AddNumberToObject(o, "start", dv->seg_start);
            cJSON_AddNumberToObject(o, "end", dv->seg_end);
        }
        cJSON_AddNumberToObject(o, "decode_errors", (double)dv->damage_errors);
        cJSON_AddNumberToObject(o, "filled_frames", (double)dv->damage_filled);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

cJSON *vt_eval_json(const vt_eval_result *r, const vt_run_heads *heads, const vt_eval_counts *counts,
                    const char *split, const vt_eval_opts *eo, const vt_dataset *ds,
                    const int32_t *idx, int n) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "split", split);
    cJSON_AddNumberToObject(j, "clips", (double)counts->clips);
    cJSON_AddNumberToObject(j, "videos", (double)counts->videos);
    cJSON_AddNumberToObject(j, "expected_clips", (double)counts->expected);
    cJSON_AddNumberToObject(j, "bad_clips", (double)counts->bad_clips);
    cJSON_AddNumberToObject(j, "filled_frames", (double)counts->filled_frames);
    cJSON_AddNumberToObject(j, "decode_errors", (double)counts->decode_errors);
    cJSON_AddItemToObject(j, "damaged_videos", damaged_json(ds, idx, n));
    cJSON_AddNumberToObject(j, "unknown_videos", (double)counts->unknown_videos);
    cJSON_AddNumberToObject(j, "clips_per_video", eo->clips_per_video);
    cJSON_AddNumberToObject(j, "crops", eo->crops);
    cJSON_AddNumberToObject(j, "nonfinite_clips", (double)r[0].nonfinite);
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
        cJSON_AddNumberToObject(o, "nonfinite_clips", (double)x->nonfinite);
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
