/*
 * cmd_eval.c: `vidtrain eval RUN DIR` — the evaluation protocol: K uniformly spaced clips
 * per video x 1 or 3 crops through the towers (forward only), probabilities averaged per
 * video, then clip/video top-1/top-5, mean class accuracy, per-class accuracy and the
 * confusion matrix, printed and written to RUN/eval.json and RUN/confusion.csv.
 * Also the evaluation pass that training's validation uses (vt_run_evaluate).
 *
 * Every clip is counted once whatever the tower split: the loader hands each clip once,
 * the towers return one output per clip in batch order, and the counts are checked
 * against what was asked for. This file must never train or change a checkpoint.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/evalproto.h"
#include "app/progress.h"
#include "app/report.h"
#include "app/run.h"
#include "models/common.h"
#include "pipeline/dataset.h"
#include "pipeline/loader.h"
#include "pipeline/tower.h"

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
    float *probs[VT_MAX_HEADS] = {0};
    float *tg = NULL;
    int rc = -1, maxk = 1;
    int64_t unknown = 0;
    vt_loader *l = NULL;
    for (int h = 0; h < heads->n; h++) {
        map[h] = class_map(&ds->heads[h], heads->cfg[h].classes, heads->classes[h]);
        if (ds->heads[h].loss != heads->cfg[h].loss) {
            vt_set_err(err, errlen, "head %s: the dataset's loss kind differs from the model's",
                       heads->cfg[h].name);
            goto end;
        }
        ep[h] = vt_evalproto_init(ds->nvideos, heads->cfg[h].classes, heads->cfg[h].loss);
        maxk = VT_MAX(maxk, heads->cfg[h].classes);
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
    lc.indices = idx;
    lc.nindices = n;
    counts->expected = (int64_t)n * eo->clips_per_video * eo->crops;
    if (n == 0) {
        rc = 0;
        goto end;
    }
    l = vt_loader_init(ds, &lc, err, errlen);
    if (!l)
        goto end;
    for (int h = 0; h < heads->n; h++)
        probs[h] = vt_malloc(sizeof(float) * (size_t)eo->batch * heads->cfg[h].classes);
    tg = vt_malloc(sizeof(float) * (size_t)maxk);
    int64_t nb = vt_loader_num_batches(l);
    vt_progress *pg = eo->quiet ? NULL : vt_progress_init(stderr, "eval", nb, 0, -1, 0);
    int64_t done = 0;
    const vt_batch *b;
    double lsum = 0;
    int64_t right = 0; /* head 0 clip top-1 so far, for the progress line */
    while ((b = vt_loader_next(l)) != NULL) {
        vt_step_stats ss;
        vt_towers_eval_step(t, b, probs, &ss);
        for (int i = 0; i < b->n; i++) {
            int v = b->video[i], skip = 0;
            for (int h = 0; h < heads->n && !skip; h++) {
                const int K = heads->cfg[h].classes;
                const float *p = probs[h] + (size_t)i * K;
                if (heads->cfg[h].loss == VT_LOSS_SOFTMAX_CE) {
                    int lab = map[h][b->label[h][i]];
                    if (lab < 0) {
                        skip = 1;
                        break;
                    }
                    vt_evalproto_add(ep[h], v, lab, NULL, p);
                    if (h == 0) {
                        int top;
                        vt_topk(&top, p, K, 1);
                        right += top == lab;
                    }
                } else {
                    for (int k = 0; k < K; k++)
                        tg[k] = 0;
                    const float *dt = b->target[h] + (size_t)i * ds->heads[h].nclasses;
                    for (int c = 0; c < ds->heads[h].nclasses; c++)
                        if (map[h][c] >= 0)
                            tg[map[h][c]] = dt[c];
                    vt_evalproto_add(ep[h], v, 0, tg, p);
                }
            }
            unknown += skip;
            counts->clips += !skip;
        }
        for (int h = 0; h < heads->n; h++)
            vt_evalproto_add_loss(ep[h], ss.head_loss[h]);
        lsum += ss.loss;
        done++;
        vt_progress_update(pg, done, counts->clips, counts->clips ? lsum / counts->clips : 0,
                           counts->clips ? (double)right / counts->clips : 0, 0);
    }
    if (pg) {
        vt_progress_finish(pg, NULL);
        vt_progress_free(&pg);
    }
    vt_loader_stats ls;
    vt_loader_get_stats(l, &ls);
    counts->bad_clips = ls.bad_clips;
    for (int v = 0; v < ds->nvideos; v++)
        counts->videos += vt_evalproto_video_clips(ep[0], v) > 0;
    if (unknown)
        vt_warn("%lld clips of classes the model does not know were left out\n", (long long)unknown);
    rc = 0;
end:
    vt_loader_free(&l);
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        free(map[h]);
        free(probs[h]);
    }
    free(tg);
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

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain eval RUN DIR [options]\n\n"
        "Evaluates RUN's best checkpoint (else last) on the videos of DIR: K uniformly spaced\n"
        "clips per video x 1 or 3 crops, softmax averaged per video. Prints and writes\n"
        "RUN/eval.json (clip and video top-1/top-5, mean class accuracy, per-class accuracy,\n"
        "confusion matrix) and RUN/confusion.csv, and refreshes RUN/report.html.\n\n"
        "  --split test|val|all   which videos (default: test if DIR has test videos, else val;\n"
        "                         val of a flat folder is the run's own --val-split)\n"
        "  --clips-per-video K    (default 10)\n"
        "  --crops 1|3            centre crop, or start/centre/end of the long side (default 1)\n"
        "  --checkpoint PATH      another checkpoint than RUN/best.safetensors\n"
        "  --batch N              clips per forward batch (default: the run's batch)\n"
        "  --workers N            decode threads (default 2)\n"
        "  --tower-split POLICY   how batches split over towers (equal, memory, manual:3,1...);\n"
        "                         --split also takes a policy when its value is not a data split\n"
        "  -q, --quiet            no progress display\n"
        "%s\n"
        "top-k: the true class counts within the top k when fewer than k classes score higher\n"
        "(ties go to the lower class index). Mean class accuracy averages the per-class video\n"
        "top-1 over the classes present. Every clip is counted once across towers.\n"
        "Exit codes: 0 ok, 1 error, 2 usage.\n",
        vt_device_args_help);
}

int vt_cmd_eval(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *pos[2] = {NULL, NULL};
    int npos = 0, quiet = 0, batch = 0, workers = 2, K = 10, crops = 1;
    const char *split = NULL, *policy = NULL, *ckpt = NULL;
    vt_device_args da;
    memset(&da, 0, sizeof da);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r = vt_device_args_take(&da, argc, argv, &i);
        if (r < 0) {
            fprintf(stderr, "vidtrain eval: %s needs a value\n", a);
            return 2;
        }
        if (r == 1)
            continue;
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain eval: bad value for %s\n", a); return 2; } while (0)
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { quiet = 1; continue; }
        if (OPT("--split")) {
            if (r < 0) BAD();
            if (!strcmp(v, "test") || !strcmp(v, "val") || !strcmp(v, "all"))
                split = v;
            else
                policy = v;
            continue;
        }
        if (OPT("--tower-split")) { if (r < 0) BAD(); policy = v; continue; }
        if (OPT("--clips-per-video")) { if (r < 0 || vt_parse_int(v, 1, 1000, &K)) BAD(); continue; }
        if (OPT("--crops")) { if (r < 0 || vt_parse_int(v, 1, 3, &crops) || crops == 2) BAD(); continue; }
        if (OPT("--checkpoint")) { if (r < 0) BAD(); ckpt = v; continue; }
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
    char err[1024], path[2100], ckpath[2100];
    int rc = 1;
    vt_dataset *ds = NULL;
    vt_towers *t = NULL;
    int32_t *idx = NULL;
    vt_evalproto *ep[VT_MAX_HEADS] = {0};
    vt_run_heads heads;
    memset(&heads, 0, sizeof heads);
    vt_train_opts o;
    vt_train_opts_default(&o);

    if (ckpt)
        snprintf(ckpath, sizeof ckpath, "%s", ckpt);
    else {
        snprintf(ckpath, sizeof ckpath, "%s/best.safetensors", run);
        if (!vt_file_exists(ckpath))
            snprintf(ckpath, sizeof ckpath, "%s/last.safetensors", run);
    }
    /* The configuration: the checkpoint's own copy, else RUN/config.json. */
    cJSON *cfg = vt_run_ckpt_config(ckpath, err, sizeof err);
    if (!cfg) {
        snprintf(path, sizeof path, "%s/config.json", run);
        cfg = vt_read_json(path);
    }
    if (!cfg) {
        fprintf(stderr, "vidtrain eval: %s: %s (and no readable %s/config.json)\n", ckpath, err, run);
        return 1;
    }
    vt_train_opts_from_json(&o, cfg);
    if (vt_run_heads_from_json(&heads, cJSON_GetObjectItemCaseSensitive(cfg, "heads"), err, sizeof err)) {
        fprintf(stderr, "vidtrain eval: %s: %s\n", ckpath, err);
        cJSON_Delete(cfg);
        return 1;
    }
    cJSON_Delete(cfg);

    /* The same val split as training when DIR is the training folder (flat layout). */
    vt_dataset_opts dopt = {.val_split = o.val_dir[0] ? 0 : o.val_split};
    ds = vt_dataset_open(dir, &dopt, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    if (o.labels[0] && vt_dataset_load_labels(ds, o.labels, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s: %s\n", o.labels, err);
        goto end;
    }
    vt_dataset_probe(ds, 0, 1, NULL, NULL);
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
        if (split)
            s = !strcmp(split, "test") ? VT_SPLIT_TEST : VT_SPLIT_VAL;
        else
            s = vt_dataset_split_count(ds, VT_SPLIT_TEST) > 0 ? VT_SPLIT_TEST : VT_SPLIT_VAL;
        n = vt_dataset_split_indices(ds, s, &idx);
        sname = vt_split_name(s);
    }
    if (n == 0) {
        fprintf(stderr, "vidtrain eval: no labelled, readable video in the %s split of %s\n", sname, dir);
        goto end;
    }

    vt_towers_cfg tc;
    vt_towers_cfg_default(&tc);
    if (vt_devices_from_args(&tc.devices, &da, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        rc = 2;
        goto end;
    }
    if (vt_split_policy_parse(&tc.policy, policy ? policy : "memory", err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: split policy: %s\n", err);
        rc = 2;
        goto end;
    }
    if (!batch)
        batch = o.batch;
    tc.batch = batch;
    vt_net_cfg_default(&tc.net, o.model, heads.cfg[0].classes, o.clip_t, o.crop, o.crop);
    tc.net.nheads = heads.n;
    memcpy(tc.net.head, heads.cfg, sizeof heads.cfg);
    tc.net.dropout = o.dropout;
    /* No optimizer state is needed to evaluate: plain SGD keeps none. */
    vt_optim_cfg_default(&tc.optim, VT_OPT_SGD);
    tc.optim.momentum = 0;
    tc.seed = o.seed;
    t = vt_towers_init(&tc, err, sizeof err);
    if (!t) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    if (vt_run_load(ckpath, t, 0, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    if (!quiet) {
        char line[512];
        vt_towers_plan_line(t, line, sizeof line);
        fprintf(stderr, "towers: %s\n", line);
    }
    printf("evaluating %s on %s: %s split, %d videos, %d clips x %d crop(s) per video\n", ckpath,
           dir, sname, n, K, crops);
    fflush(stdout);

    vt_eval_opts eo;
    memset(&eo, 0, sizeof eo);
    vt_clip_cfg_default(&eo.clip);
    eo.clip.t = o.clip_t;
    eo.clip.stride = o.stride;
    eo.clip.crop = o.crop;
    eo.clip.short_side = o.short_side ? o.short_side : (o.crop * 8 + 6) / 7;
    eo.clips_per_video = K;
    eo.crops = crops;
    eo.batch = batch;
    eo.workers = workers;
    eo.seed = o.seed;
    eo.quiet = quiet;
    vt_eval_counts cnt;
    if (vt_run_evaluate(ep, &cnt, t, ds, &heads, idx, n, &eo, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain eval: %s\n", err);
        goto end;
    }
    vt_eval_result r[VT_MAX_HEADS];
    for (int h = 0; h < heads.n; h++)
        vt_evalproto_result(ep[h], &r[h]);
    printf("clips evaluated: %lld of %lld (decode failures %lld); videos: %lld\n",
           (long long)cnt.clips, (long long)cnt.expected, (long long)cnt.bad_clips,
           (long long)cnt.videos);
    for (int h = 0; h < heads.n; h++) {
        if (heads.n > 1)
            printf("head %s:\n", heads.cfg[h].name);
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
            printf(" %s %.1f%%", heads.classes[h][k], 100 * r[h].per_class_acc[k]);
        }
        printf("\n");
        if (r[h].classes <= 30)
            vt_eval_confusion_print(&r[h], (const char *const *)heads.classes[h], stdout);
    }
    cJSON *j = vt_eval_json(r, &heads, &cnt, sname, &eo);
    cJSON_AddStringToObject(j, "checkpoint", ckpath);
    cJSON_AddStringToObject(j, "data", dir);
    snprintf(path, sizeof path, "%s/eval.json", run);
    int wrc = vt_write_json(path, j, err, sizeof err);
    cJSON_Delete(j);
    if (wrc != 0)
        fprintf(stderr, "vidtrain eval: %s\n", err);
    snprintf(path, sizeof path, "%s/confusion.csv", run);
    if (r[0].loss == VT_LOSS_SOFTMAX_CE &&
        vt_eval_confusion_csv(&r[0], (const char *const *)heads.classes[0], path, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain eval: %s\n", err);
    for (int h = 0; h < heads.n; h++)
        vt_eval_result_free(&r[h]);
    if (vt_report_write(run, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain eval: report: %s\n", err);
    printf("wrote %s/eval.json, %s/confusion.csv, %s/report.html\n", run, run, run);
    rc = wrc == 0 ? 0 : 1;
end:
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_evalproto_free(&ep[h]);
    vt_towers_free(&t);
    free(idx);
    vt_dataset_free(&ds);
    vt_run_heads_free(&heads);
    return rc;
}
