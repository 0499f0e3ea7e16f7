/*
 * train.c: setting up a training run (train.h) — the dataset (train_data.c) and then
 * the heads, devices and towers, config.json and plan.txt, the fresh or resumed state,
 * the loader, the learning-rate schedule and the --dump files — and freeing it all.
 * It must never run a step itself (train_epoch.c does) and never write the run folder
 * before there is something to train.
 */
#include "app/train/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/dist.h"
#include "app/leaks.h"
#include "app/eval/metrics.h"
#include "app/run/pretrained.h"
#include "app/run/run_ckpt.h"
#include "app/run/run_files.h"
#include "app/run/runclean.h"
#include "app/train/train_val.h"
#include "base/common.h"
#include "base/fileset.h"
#include "models/finetune.h"
#include "models/net_types.h"
#include "models/transfer.h"
#include "pipeline/parallel/device.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/slices.h"
#include "base/json_str.h"

/* The paths the run reads, in its configuration j, as absolute paths: relative ones were
 * relative to the folder train ran in, which nothing records, so eval, predict and
 * --resume run from another folder read whatever file had that name there (the run's
 * labels file: another labels.csv, its labels taken as the run's, exit 0). The folder
 * train ran in is put before them, links left as they are (a resolved link would name
 * one machine's mount point where the user named a path every machine of an MPI run may
 * see). A path that would not fit the field stays as it is. */
static void absolute_paths(cJSON *j) {
    static const char *const keys[] = {"data", "val_dir", "labels", "lists", "init"};
    char cwd[1024], abs[2100];
    if (!getcwd(cwd, sizeof cwd))
        return;
    for (size_t i = 0; i < VT_ARRAY_LEN(keys); i++) {
        cJSON *v = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
        if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '/')
            continue;
        const char *rel = v->valuestring;
        while (rel[0] == '.' && rel[1] == '/') /* "./x" is x */
            for (rel += 2; *rel == '/'; rel++)
                ;
        int len = snprintf(abs, sizeof abs, "%s/%s", strcmp(cwd, "/") ? cwd : "", rel);
        if (len > 0 && len < 1024) /* the field's size (train_opts.h) */
            cJSON_SetValuestring(v, abs);
    }
}

/* config.json: the resolved options plus the heads (eval and predict read it); its text
 * also goes into every checkpoint. 0, or -1 with err. */
static int write_config(vt_train *t, char *err, size_t errlen) {
    cJSON *j = vt_train_opts_to_json(&t->o);
    absolute_paths(j);
    cJSON_AddItemToObject(j, "heads", vt_run_heads_to_json(&t->heads));
    if (t->train_fps[1] > 0) /* eval, predict and embed compare their videos' rates */
        cJSON_AddItemToObject(j, "train_fps", cJSON_CreateDoubleArray(t->train_fps, 2));
    vt_dist_add_rank_devices(j, &t->o);
    char path[2100];
    snprintf(path, sizeof path, "%s/config.json", t->o.out);
    char *s = vt_json_print(j, 0);
    snprintf(t->config_json, sizeof t->config_json, "%s", s);
    cJSON_free(s);
    int rc = vt_run_write_json(path, j, err, errlen);
    cJSON_Delete(j);
    return rc;
}

/* write_config later in the start (the length it planned): its failure is said, and the
 * checkpoints, which hold the same text, go on. */
static void rewrite_config(vt_train *t) {
    char err[1024];
    if (write_config(t, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
}

/* Fine-tuning's optimizer groups (frozen stages at lr 0, the classifiers at
 * --head-lr-mult) and frozen BN layers on every replica: the same on every tower and
 * rank, so the towers still take identical steps. A no-op for a plain run. 0, or 1. */
static int apply_finetune(vt_train *t) {
    const vt_train_opts *o = &t->o;
    const int exempt = !strcmp(o->wd_exempt, "on"); /* --wd-exempt (resolved) */
    const int ft = !(o->freeze < 0 && !o->freeze_bn && o->head_lr_mult == 1.0f &&
                     o->layer_decay == 1.0f);
    if (!ft && !exempt)
        return 0;
    int nbn = 0, ng = 0;
    for (int r = 0; r < vt_towers_count(t->towers); r++) {
        vt_net *net = vt_towers_net(t->towers, r);
        vt_optim_group g[VT_OPTIM_MAX_GROUPS];
        ng = vt_finetune_groups_wd(g, VT_OPTIM_MAX_GROUPS, net, o->freeze, o->head_lr_mult,
                                   o->layer_decay, exempt);
        if (ng < 0) {
            fprintf(stderr, "vidtrain train: more than %d optimizer groups\n", VT_OPTIM_MAX_GROUPS);
            return 1;
        }
        vt_optim_set_groups(vt_towers_optim(t->towers, r), g, ng);
        nbn = vt_finetune_freeze_bn(net, o->freeze, o->freeze_bn > 0);
    }
    if (exempt)
        vt_train_print_no_decay(t);
    if (!ft)
        return 0;
    char what[64];
    if (o->freeze < 0)
        snprintf(what, sizeof what, "nothing");
    else if (o->freeze == 0)
        snprintf(what, sizeof what, "the stem");
    else
        snprintf(what, sizeof what, "the stem and stages 1..%d", o->freeze);
    fprintf(t->out, "fine-tuning: %s frozen, classifier lr x%g, %d BN layer(s) in eval mode",
            what, (double)o->head_lr_mult, nbn);
    if (o->layer_decay != 1.0f)
        fprintf(t->out, ", layer decay %g (%d optimizer groups)", (double)o->layer_decay, ng);
    fprintf(t->out, "\n");
    return 0;
}

/* --pretrained: the cached file (downloaded the first time) becomes --init. 0, or 1. */
static int fetch_pretrained(vt_train *t) {
    vt_train_opts *o = &t->o;
    if (!o->pretrained[0] || t->resume[0])
        return 0;
    const vt_pretrained *p = vt_pretrained_find(o->pretrained);
    char err[2048], path[1024];
    int rc = 0;
    if (vt_dist_lead())
        rc = vt_pretrained_fetch(p, path, sizeof path, t->quiet, err, sizeof err);
    if (vt_dist_share_result(rc, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --pretrained %s: %s\n", p->name, err);
        return 1;
    }
    /* rank 0 reads the file: the path is only its own */
    if (vt_dist_lead())
        snprintf(o->init, sizeof o->init, "%s", path);
    fprintf(t->out, "pretrained: %s on Kinetics-400 (%s, top-1 %s%%), %s\n", p->name,
            p->base ? "pytorchvideo" : "torchvision", p->top1,
            vt_dist_lead() ? path : "read by rank 0");
    return 0;
}

/* --init: the file into replica 0 (rank 0 reads it), then every replica a copy. */
typedef struct init_job {
    const vt_train_opts *o;
    const vt_head_rows *rows; /* a vidtrain checkpoint's classifier rows by class name */
    FILE *log;
    int rc;
    char err[1024];
} init_job;

static void init_on_tower(void *ctx, vt_net *net, vt_optim *opt) {
    (void)opt;
    init_job *j = ctx;
    j->rc = vt_net_load_init_rows(net, j->o->init, j->o->init_strict, j->rows, j->log, NULL,
                                  j->err, sizeof j->err);
}

static int load_init(vt_train *t) {
    vt_head_rows rows;
    int *store = NULL;
    init_job j = {.o = &t->o, .log = t->out, .rc = 0};
    if (vt_dist_lead()) {
        j.rows = vt_train_init_rows(t, &rows, &store) ? &rows : NULL;
        vt_towers_run_on(t->towers, 0, init_on_tower, &j);
        free(store);
    }
    if (vt_dist_share_result(j.rc, j.err, sizeof j.err) != 0) {
        fprintf(stderr, "vidtrain train: --init: %s\n", j.err);
        return 1;
    }
    if (vt_finetune_weights_licence(t->o.model))
        fprintf(t->out, "init: weights licence: %s\n", vt_finetune_weights_licence(t->o.model));
    vt_towers_sync_from(t->towers, 0);
    return 0;
}

/* --init FILE from a vidtrain checkpoint: its weights learnt on clips normalised with the
 * statistics its metadata names, which --input-norm auto keeps (the model's family could
 * name others: a child of an --input-norm imagenet run, of a run before the option, of
 * one whose model's family has changed since). An --input-norm given that differs is
 * the user's choice, said in a warning. */
static void init_norm(vt_train *t) {
    vt_train_opts *o = &t->o;
    if (!o->init[0] || o->pretrained[0] || t->resume[0])
        return;
    char name[200];
    int rc = vt_run_ckpt_norm(o->init, name, sizeof name);
    const int given = strcmp(o->input_norm, "auto") && o->input_norm[0];
    if (rc > 0 && !given) {
        snprintf(o->input_norm, sizeof o->input_norm, "%.15s", name); /* a short name */
        fprintf(t->out, "input: %s's weights learnt on clips normalised with %s's statistics: "
                "this run uses them too (--input-norm to change)\n", o->init, name);
    } else if (rc > 0 && strcmp(o->input_norm, name)) {
        fprintf(stderr, "vidtrain train: warning: --input-norm %s, but %s's weights learnt on "
                "clips normalised with %s's statistics (its normalisation metadata): leave "
                "--input-norm out to keep them\n", o->input_norm, o->init, name);
    } else if (rc < 0 && !given) {
        fprintf(stderr, "vidtrain train: warning: %s's weights learnt on clips normalised with "
                "%s, which no --input-norm names: training with %s's (%s); give --input-norm "
                "to choose\n", o->init, name, o->model, vt_zoo_input_norm(o->model));
    }
}

/* --init from a vidtrain checkpoint with no --clip given: a note when the clip resolved
 * differs from the one its weights learnt on (its configuration's), which the default
 * clip took the place of without a word. Rank 0 reads and says; nothing changes. */
static void init_clip_note(const vt_train *t) {
    const vt_train_opts *o = &t->o;
    if (!o->init[0] || o->pretrained[0] || t->resume[0])
        return;
    const vt_pretrained *zoo = vt_pretrained_find_file(o->init);
    if (zoo && strcmp(zoo->model, o->model) && vt_dist_lead()) /* its load will fail: why */
        fprintf(stderr, "vidtrain train: note: %s is --pretrained %s's file, the weights of a "
                "%s; this run builds a %s: give --model %s (or --pretrained %s)\n", o->init,
                zoo->name, zoo->model, o->model, zoo->model, zoo->name);
    if (t->given.clip_t)
        return;
    char err[1024];
    cJSON *j = vt_run_ckpt_config(o->init, err, sizeof err); /* every rank: rank 0's */
    if (!j) {
        /* not a vidtrain checkpoint (load_init says what it is); a zoo file by its name
         * (X3D_M.pyth downloaded by hand) learnt on the input --pretrained would give */
        const vt_pretrained *p = zoo;
        int st = p && p->stride ? p->stride : o->stride;
        if (vt_dist_lead() && p && !strcmp(p->model, o->model) &&
            (p->clip_t != o->clip_t || p->crop != o->crop || st != o->stride))
            fprintf(stderr, "vidtrain train: note: %s is --pretrained %s's file, whose weights "
                    "learnt on %dx%d clips at stride %d; this run takes %dx%d at stride %d (the "
                    "default): give --clip %dx%d --stride %d to match (--pretrained %s does)\n",
                    o->init, p->name, p->clip_t, p->crop, st, o->clip_t, o->crop, o->stride,
                    p->clip_t, p->crop, st, p->name);
        return;
    }
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "clip_t");
    const cJSON *cr = cJSON_GetObjectItemCaseSensitive(j, "crop");
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(j, "stride");
    if (vt_dist_lead() && cJSON_IsNumber(ct) && cJSON_IsNumber(cr) && cJSON_IsNumber(sd) &&
        (ct->valueint != o->clip_t || cr->valueint != o->crop || sd->valueint != o->stride))
        fprintf(stderr, "vidtrain train: note: %s's weights learnt on %dx%d clips at stride %d; "
                "this run takes %dx%d at stride %d (the default): give --clip %dx%d --stride %d "
                "to match\n", o->init, ct->valueint, cr->valueint, sd->valueint, o->clip_t,
                o->crop, o->stride, ct->valueint, cr->valueint, sd->valueint);
    cJSON_Delete(j);
}

/* 1 when net has a batch-norm layer (its running statistics are buffers), else 0. */
static int has_bn(const vt_net *net) {
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const char *n = vt_net_tensor(net, i)->name;
        size_t len = strlen(n);
        if (len >= 12 && !strcmp(n + len - 12, "running_mean"))
            return 1;
    }
    return 0;
}

/* The heads from the dataset, the devices and the towers, with the options resolved for
 * the machine (t->given keeps them as given). 0, or the exit code. */
static int build_towers(vt_train *t) {
    vt_train_opts *o = &t->o;
    vt_run_heads *heads = &t->heads;
    vt_towers_cfg *tc = &t->tc;
    char err[1024];
    heads->n = t->ds->nheads;
    vt_dataset_head_cfgs(t->ds, heads->cfg);
    for (int h = 0; h < heads->n; h++) {
        heads->cfg[h].weight = o->nweights ? o->loss_weights[h] : 1.0f;
        heads->classes[h] = vt_calloc((size_t)heads->cfg[h].classes, sizeof(char *));
        for (int k = 0; k < heads->cfg[h].classes; k++)
            heads->classes[h][k] = vt_strdup(t->ds->heads[h].classes[k]);
    }
    vt_towers_cfg_default(tc);
    tc->class_weight[0] = t->class_weight; /* --balance loss (train_balance.c) */
    tc->logit_adjust[0] = t->logit_adjust; /* --balance logit */
    vt_device_args da;
    vt_train_opts_device_args(o, &da);
    /* TF32 on CPU towers only is fp32 in silence: refused for a new run (a resumed GPU run
     * may go on on a CPU, which computes it as fp32) */
    if (vt_devices_from_args(&tc->devices, &da, err, sizeof err) != 0 ||
        (!t->resume[0] &&
         vt_devices_check_precision(&tc->devices, (vt_precision)vt_precision_parse(o->precision),
                                    err, sizeof err) != 0)) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 2;
    }
    if (vt_slice_policy_parse(&tc->policy, o->tower_split, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 2;
    }
    /* Defaults that depend on the machine: a GPU tower on any rank means GPU clips. */
    t->gpus = 0;
    for (int i = 0; i < tc->devices.n; i++)
        t->gpus += !strcmp(tc->devices.dev[i].backend, "cuda");
    if (vt_mpi_size() > 1)
        vt_mpi_sum_f64(&t->gpus, 1, "the default clip (does any rank have a GPU)");
    t->given = *o;
    init_norm(t);
    vt_train_opts_resolve(o, t->epoch_clips, t->gpus > 0);
    init_clip_note(t);
    vt_train_short_samples(t);
    /* what the loader will hold beside the towers, now that the clip is known */
    vt_device_list_keep_host(&tc->devices, vt_train_host_reserve(t));
    int nsoft = 0;
    for (int h = 0; h < heads->n; h++) { /* resolved: a transformer's fine-tuning smooths */
        heads->cfg[h].smoothing = heads->cfg[h].loss == VT_LOSS_SOFTMAX_CE ? o->smoothing : 0;
        nsoft += heads->cfg[h].loss == VT_LOSS_SOFTMAX_CE;
    }
    /* smoothing is the softmax heads': with none, config.json and the recipe line named a
     * smoothing nothing applied (--label-smoothing given, or the transformers' 0.1) */
    if (!nsoft && o->smoothing > 0) {
        if (t->given.smoothing > 0 && !t->resume[0])
            fprintf(stderr, "vidtrain train: warning: --label-smoothing %g: every head of %s "
                    "is multi-label (BCE), which it does not smooth: off\n",
                    (double)t->given.smoothing, o->data);
        o->smoothing = 0;
    }
    tc->batch = o->batch;
    vt_net_cfg_default(&tc->net, o->model, heads->cfg[0].classes, o->clip_t, o->crop, o->crop);
    tc->net.nheads = heads->n;
    memcpy(tc->net.head, heads->cfg, sizeof heads->cfg);
    tc->net.dropout = o->dropout;
    tc->net.drop_path = o->drop_path;
    const int ckm = vt_ckpt_mode_parse(o->checkpoint_act); /* a hand-edited config: auto */
    tc->ckpt_act = ckm > 0 ? (vt_ckpt_mode)ckm : VT_CKPT_AUTO;
    if (vt_precision_parse(o->precision) < 0) { /* a hand-edited config.json */
        fprintf(stderr, "vidtrain train: precision '%s': fp32, tf32 or bf16\n", o->precision);
        return 2;
    }
    tc->net.precision = (vt_precision)vt_precision_parse(o->precision);
    vt_optim_cfg_default(&tc->optim, (vt_opt_kind)vt_optim_kind_parse(o->optim));
    if (tc->optim.kind != VT_OPT_ADAMW) /* given beside AdamW: refused (train_args.c) */
        tc->optim.momentum = o->momentum;
    /* Nesterov is SGD's (torch refuses it without momentum): other optimizers ignore the
     * default; --nesterov given with them is refused (train_args.c). */
    tc->optim.nesterov = o->nesterov && tc->optim.kind == VT_OPT_SGD && o->momentum > 0;
    tc->optim.wd = o->wd;
    tc->optim.clip_norm = o->clip_norm;
    tc->seed = o->seed;
    tc->sync_bn = o->sync_bn;
    tc->verbose = 1;
    int mrc = vt_train_mix_heads(t); /* --mixup/--cutmix: soft targets (train_mix.c) */
    if (mrc)
        return mrc;
    t->towers = vt_towers_init(tc, err, sizeof err);
    if (!t->towers) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 1;
    }
    /* frozen batch norm (--freeze-bn, fine-tuning's default) normalises with its running
     * statistics and never updates them, in precise BN's pass too (tower_worker.c): it
     * forwarded up to 2048 clips a validation and recomputed nothing */
    if (vt_opts_given_has(&t->cli, "--precise-bn") && o->freeze_bn > 0) {
        fprintf(stderr, "vidtrain train: --precise-bn %d: batch norm is frozen (%s), so it keeps "
                "its statistics and precise BN recomputes none; leave it out, or give "
                "--no-freeze-bn\n", o->precise_bn, vt_opts_given_has(&t->cli, "--freeze-bn")
                ? "--freeze-bn" : "fine-tuning's default");
        return 2;
    }
    /* Precise BN recomputes batch-norm statistics: a net without batch norm (the
     * transformers, tiny_nobn) has none, and forwarded up to 2048 clips a validation for
     * nothing (and --time-budget counted them). */
    if (o->precise_bn > 0 && !has_bn(vt_towers_net(t->towers, 0))) {
        if (t->given.precise_bn > 0 && !t->resume[0])
            fprintf(stderr, "vidtrain train: warning: --precise-bn %d: %s has no batch norm "
                    "for it to recompute: off\n", t->given.precise_bn, o->model);
        o->precise_bn = 0;
    }
    /* activation checkpointing recomputes transformer blocks: a model without them has
     * nothing for any of its modes to act on (the one message: the towers say nothing) */
    if (vt_opts_given_has(&t->cli, "--checkpoint-act") &&
        vt_towers_memplan(t->towers)->ckpt_segments == 0) {
        fprintf(stderr, "vidtrain train: --checkpoint-act %s: %s has no transformer blocks to "
                "recompute (ViT and MViT have); leave it out\n", o->checkpoint_act, o->model);
        return 2;
    }
    /* how a batch splits over towers, given for one tower (of every process): nothing to
     * split */
    char serr[512];
    if (vt_tower_split_check(vt_opts_given_has(&t->cli, "--tower-split") ? o->tower_split : NULL,
                             vt_towers_count_all(t->towers), serr, sizeof serr) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", serr);
        return 2;
    }
    /* the batch-norm switches given to a net without batch norm switch nothing */
    static const char *const bn_opts[] = {"--sync-bn", "--no-sync-bn", "--freeze-bn",
                                          "--no-freeze-bn", NULL};
    const char *bo = vt_opts_given_any(&t->cli, bn_opts);
    if (bo && !has_bn(vt_towers_net(t->towers, 0))) {
        fprintf(stderr, "vidtrain train: %s: %s has no batch norm for it to act on; leave "
                "it out\n", bo, o->model);
        return 2;
    }
    return apply_finetune(t);
}

/* plan.txt: devices, slice plan, memory plan — printed and kept for the report. 0, or -1
 * with err. */
static int write_plan(vt_train *t, char *err, size_t errlen) {
    char *buf = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&buf, &blen);
    vt_towers_print_plan(t->towers, m);
    vt_memplan_print(vt_towers_memplan(t->towers), &t->tc.net, m);
    fclose(m);
    fputs(buf, t->out);
    char path[2100];
    snprintf(path, sizeof path, "%s/plan.txt", t->o.out);
    int rc = vt_run_write_file(path, buf, err, errlen);
    free(buf);
    return rc;
}

/* --resume on other samples than the checkpoint's (t->st, as loaded): videos added,
 * removed or relabelled in DIR, its labels or list files edited, another --val-split,
 * --fold or --val-dir. Options are warned about when they change (train_args.c), the
 * classes refused (train_heads.c); the samples themselves changed in silence, while the
 * run claimed to continue exactly, its epoch cursor ran past the new epoch's end, and
 * best.safetensors' score was beaten or kept against another validation set. Said here
 * (rank 0), and the new sets recorded for the checkpoints to come. A checkpoint older
 * than the record ("") has nothing to compare. */
static void resume_sets(vt_train *t) {
    const char *const what[2] = {"training", "validation"};
    const char *was[2] = {t->st.train_set, t->st.val_set};
    const char *now[2] = {t->train_set, t->val_set};
    for (int k = 0; k < 2 && vt_dist_lead(); k++) {
        if (!was[k][0] || !strcmp(was[k], now[k]))
            continue;
        fprintf(stderr, "vidtrain train: warning: --resume %s: the %s set is not the one the "
                "checkpoint was trained with (%d samples then, %d now, or the same count with "
                "other videos, segments or labels: files added, removed or renamed in %s, its "
                "--labels or --lists edited, or another --val-split, --fold or --val-dir): the "
                "continuation is not the run's", t->resume, what[k], atoi(was[k]),
                atoi(now[k]), k ? (t->o.val_dir[0] ? t->o.val_dir : t->o.data) : t->o.data);
        if (k == 0)
            fprintf(stderr, "; epoch %lld goes on from batch %lld of the new set's order\n",
                    (long long)t->st.epoch + 1, (long long)t->st.cursor);
        else if (t->st.best >= 0)
            fprintf(stderr, "; best.safetensors' %.1f%% (epoch %d) was measured on the other "
                    "set, and the coming validations are compared with it\n",
                    100 * t->st.best, t->st.best_epoch);
        else
            fprintf(stderr, "\n");
    }
    snprintf(t->st.train_set, sizeof t->st.train_set, "%s", t->train_set);
    snprintf(t->st.val_set, sizeof t->st.val_set, "%s", t->val_set);
}

/* t->st: RUN/last.safetensors' state with --resume (its metrics lines past it dropped),
 * else a fresh start (the metrics and eval files of an earlier run removed). 0, or 1. */
static int start_state(vt_train *t) {
    const vt_train_opts *o = &t->o;
    char err[1024];
    memset(&t->st, 0, sizeof t->st);
    t->st.best = -1;
    if (t->resume[0]) {
        char path[2100];
        snprintf(path, sizeof path, "%s/last.safetensors", t->resume);
        /* never a state beside the best checkpoint of another epoch (base/fileset.h) */
        int cut = vt_dist_lead() ? vt_fileset_check(path, err, sizeof err) : 0;
        if (vt_dist_share_result(cut, err, sizeof err) != 0) {
            char *rec = vt_fileset_record(path);
            fprintf(stderr, "vidtrain train: --resume: %s. last.safetensors, best.safetensors "
                    "and val.json may be of different epochs: to resume from last.safetensors "
                    "as it is, remove %s (and best.safetensors when its epoch is later than "
                    "last's), or start again with --force\n", err, rec);
            free(rec);
            return 1;
        }
        if (vt_run_load(path, t->towers, 1, &t->st, err, sizeof err) != 0) {
            /* the loader's reasons name the file already */
            fprintf(stderr, "vidtrain train: --resume: %s%s%s\n",
                    strstr(err, path) ? "" : path, strstr(err, path) ? "" : ": ", err);
            return 1;
        }
        int dropped = vt_metrics_truncate(o->out, t->st.step, err, sizeof err);
        if (dropped < 0)
            fprintf(stderr, "vidtrain train: %s\n", err);
        fprintf(t->out, "resumed from %s: epoch %lld, batch %lld, step %lld", path,
                (long long)t->st.epoch + 1, (long long)t->st.cursor, (long long)t->st.step);
        /* the steps after the checkpoint run again: their lines would be there twice */
        if (dropped > 0)
            fprintf(t->out, "; %d line%s of metrics.jsonl logged after it dropped", dropped,
                    dropped > 1 ? "s" : "");
        fprintf(t->out, "\n");
    } else if (vt_dist_lead()) {
        char path[2100];
        snprintf(path, sizeof path, "%s/metrics.jsonl", o->out);
        unlink(path);
        snprintf(path, sizeof path, "%s/metrics.csv", o->out);
        unlink(path);
        snprintf(path, sizeof path, "%s/eval.json", o->out);
        unlink(path);
    }
    resume_sets(t);
    if (!t->resume[0] && (o->init[0] || o->pretrained[0]) && load_init(t) != 0)
        return 1;
    fflush(t->out);
    t->first_epoch = t->st.epoch;
    return 0;
}

/* --frame-cache in bytes: auto is a quarter of the memory free now, once the towers hold
 * theirs (under the process's tightest limit: base/host_mem.h), at most 4 GiB; a size
 * given was kept out of the CPU towers' budgets (vt_train_host_reserve). */
static int64_t frame_cache_bytes(const vt_train_opts *o) {
    if (o->frame_cache[0] && strcmp(o->frame_cache, "auto"))
        return VT_MAX(vt_parse_bytes(o->frame_cache), 0);
    vt_cpu_info ci;
    vt_cpu_info_get(&ci);
    return VT_MIN(VT_MAX(ci.ram_available, 0) / 4, (int64_t)4 << 30);
}

/* The training loader, starting where t->st says (each rank decodes only its towers'
 * part of every batch under mpirun). 0, or 1. */
static int open_loader(vt_train *t) {
    const vt_train_opts *o = &t->o;
    char err[1024];
    vt_loader_cfg lc;
    vt_loader_cfg_default(&lc);
    lc.mode = VT_LOADER_TRAIN;
    lc.batch = o->batch;
    lc.workers = o->workers;
    lc.queue = o->queue;
    lc.seed = o->seed;
    lc.epoch = t->st.epoch;
    lc.start_batch = t->st.cursor;
    lc.clips_per_video = o->clips_per_video;
    lc.repeat_aug = o->repeat_aug;
    lc.video_clips = t->video_clips; /* auto: per-video counts */
    lc.balance = !strcmp(o->balance, "sampler"); /* train_balance.c resolved it */
    lc.frame_cache = frame_cache_bytes(o);
    vt_train_clip_cfg(&lc.clip, o);
    lc.indices = t->train_idx;
    lc.nindices = t->ntrain;
    vt_towers_host_hook(t->towers, &lc.host_alloc, &lc.host_free, &lc.host_ctx); /* pinned */
    if (vt_mpi_size() > 1) {
        lc.part = vt_towers_part_train;
        lc.part_ctx = t->towers;
    }
    t->loader = vt_loader_init(t->ds, &lc, err, sizeof err);
    if (!t->loader) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 1;
    }
    return 0;
}

/* The schedule in steps, from the epochs (after --time-budget picked them). */
static void start_schedule(vt_train *t) {
    const vt_train_opts *o = &t->o;
    t->spe = vt_loader_num_batches(t->loader);
    memset(&t->sc, 0, sizeof t->sc);
    t->sc.kind = (vt_sched_kind)vt_sched_kind_parse(o->sched);
    t->sc.base_lr = o->lr;
    t->sc.warmup_steps = (int64_t)llround(o->warmup_epochs * (double)t->spe);
    t->sc.total_steps = t->spe * o->epochs;
    t->sc.step_size = t->spe * o->step_epochs;
    t->sc.gamma = o->gamma;
    t->sc.anchor_step = t->st.plan_step; /* a resumed --time-budget run's last re-plan */
    t->sc.anchor_frac = t->st.plan_frac;
    if (o->patience > 0) /* the length follows validation: train_length.c decays it */
        t->sc.kind = VT_SCHED_CONST;
}

/* --dump: DIR/dump.json (what the twin must rebuild: model, optimizer, schedule in
 * steps) and DIR/state_000000.safetensors, the state before the first step. */
static vt_dump *open_dump(vt_train *t, char *err, size_t errlen) {
    const vt_train_opts *o = &t->o;
    const vt_towers_cfg *tc = &t->tc;
    const vt_optim_cfg *oc = &tc->optim;
    const vt_sched_cfg *sc = &t->sc;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddNumberToObject(j, "classes", tc->net.head[0].classes);
    cJSON_AddNumberToObject(j, "heads", tc->net.nheads);
    cJSON_AddNumberToObject(j, "smoothing", tc->net.head[0].smoothing);
    cJSON_AddNumberToObject(j, "dropout", tc->net.dropout);
    cJSON_AddNumberToObject(j, "clip_t", o->clip_t);
    cJSON_AddNumberToObject(j, "crop", o->crop);
    cJSON_AddNumberToObject(j, "batch", o->batch);
    cJSON_AddNumberToObject(j, "towers", vt_towers_count_all(t->towers));
    cJSON_AddBoolToObject(j, "sync_bn", o->sync_bn);
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddStringToObject(j, "optim", vt_optim_kind_name(oc->kind));
    cJSON_AddNumberToObject(j, "momentum", oc->momentum);
    cJSON_AddNumberToObject(j, "dampening", oc->dampening);
    cJSON_AddBoolToObject(j, "nesterov", oc->nesterov);
    cJSON_AddNumberToObject(j, "wd", oc->wd);
    cJSON_AddNumberToObject(j, "alpha", oc->alpha);
    cJSON_AddNumberToObject(j, "beta1", oc->beta1);
    cJSON_AddNumberToObject(j, "beta2", oc->beta2);
    cJSON_AddNumberToObject(j, "eps", oc->eps);
    cJSON_AddNumberToObject(j, "clip_norm", oc->clip_norm);
    cJSON_AddStringToObject(j, "sched", o->sched);
    cJSON_AddNumberToObject(j, "base_lr", sc->base_lr);
    cJSON_AddNumberToObject(j, "warmup_steps", (double)sc->warmup_steps);
    cJSON_AddNumberToObject(j, "total_steps", (double)sc->total_steps);
    cJSON_AddNumberToObject(j, "step_size", (double)sc->step_size);
    cJSON_AddNumberToObject(j, "gamma", sc->gamma);
    cJSON_AddNumberToObject(j, "min_lr", sc->min_lr);
    /* --balance loss / logit (head 0): the twin's cross-entropy takes the same weights and
     * adds the same log priors to the logits (null: none) */
    const int k = tc->net.head[0].classes;
    cJSON_AddItemToObject(j, "class_weight", t->class_weight
                          ? cJSON_CreateFloatArray(t->class_weight, k) : cJSON_CreateNull());
    cJSON_AddItemToObject(j, "logit_adjust", t->logit_adjust
                          ? cJSON_CreateFloatArray(t->logit_adjust, k) : cJSON_CreateNull());
    char *s = vt_json_print(j, 1);
    cJSON_Delete(j);
    vt_dump *d = vt_dump_open(o->dump, s, err, errlen);
    cJSON_free(s);
    vt_run_state st0;
    memset(&st0, 0, sizeof st0);
    st0.best = -1;
    if (d && vt_train_save(t, o->dump, "state_000000.safetensors", &st0) != 0) {
        vt_set_err(err, errlen, "cannot write state_000000.safetensors");
        vt_dump_close(&d);
    }
    return d;
}

int vt_train_save(vt_train *t, const char *dir, const char *name, const vt_run_state *st) {
    char path[2100], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (vt_run_save(path, t->towers, st, t->config_json, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: checkpoint %s: %s\n", path, err);
        return -1;
    }
    return 0;
}

int vt_train_setup(vt_train *t) {
    vt_train_opts *o = &t->o;
    char err[1024];
    int rc = vt_train_open_data(t);
    if (rc || (rc = vt_train_count_clips(t)) != 0 || (rc = vt_train_balance(t)) != 0)
        return rc;
    /* the run folder only once there is something to train */
    if (vt_run_mkdirs(o->out, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 1;
    }
    /* what a killed run left half-written (rank 0 owns the folder): first a checkpoint's
     * set cut short between two renames, finished from its staged files (base/fileset.h),
     * which the cleaning below would remove */
    char lead[2100];
    snprintf(lead, sizeof lead, "%s/last.safetensors", o->out);
    if (vt_dist_lead() && t->resume[0] && vt_fileset_finish(lead, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    if (vt_dist_lead() && vt_run_clean_temps(o->out, err, sizeof err) < 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    if (vt_dist_lead()) { /* --time-budget's state, when it was killed while timing */
        char path[2100];
        snprintf(path, sizeof path, "%s/" VT_TRAIN_BUDGET_STATE, o->out);
        unlink(path);
    }
    /* near-copies of training videos in val and test, before any training (rank 0) */
    if (!o->no_leak_check && t->ntrain && (t->vds || vt_dataset_split_count(t->ds, VT_SPLIT_VAL) ||
                                           vt_dataset_split_count(t->ds, VT_SPLIT_TEST))) {
        rc = vt_dist_lead() ? vt_leaks_train_check(t->ds, t->vds, o->out, o->strict_splits,
                                                   !t->quiet, t->out)
                            : 0;
        snprintf(err, sizeof err, "--strict-splits: a leak (rank 0 said why)");
        if (vt_dist_share_result(rc, err, sizeof err) != 0)
            return 1;
    }
    if (fetch_pretrained(t) != 0)
        return 1;
    if ((rc = build_towers(t)) != 0)
        return rc;
    if (vt_dist_lead())
        vt_train_val_fps_warn(t);
    /* the run's first files: one that cannot be written stops the start here, not at the
     * first checkpoint after the training (rank 0's answer on every rank) */
    rc = write_config(t, err, sizeof err);
    if (rc == 0)
        rc = write_plan(t, err, sizeof err);
    if (vt_dist_share_result(rc, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return 1;
    }
    if (start_state(t) != 0 || open_loader(t) != 0)
        return 1;
    if (o->time_budget > 0 && !t->resume[0]) {
        if (vt_train_fit_budget(t) != 0)
            return 1;
        rewrite_config(t);
    } else if (o->time_budget > 0 && t->st.plan_epochs > 0) {
        o->epochs = t->st.plan_epochs; /* the epochs its budget last planned */
    }
    if (vt_train_length_start(t))
        rewrite_config(t);
    start_schedule(t);
    fprintf(t->out, "training: %d videos, %lld batches of %d per epoch, %s%d epochs, %s lr %g (%s)\n",
            t->ntrain, (long long)t->spe, o->batch, o->patience > 0 ? "at most " : "", o->epochs,
            o->optim, o->lr, o->patience > 0 ? "warm-up, constant, cosine decay" : o->sched);
    vt_train_print_recipe(t);
    fflush(t->out);
    if (o->dump[0] && vt_dist_lead()) {
        t->dump = open_dump(t, err, sizeof err);
        if (!t->dump) {
            fprintf(stderr, "vidtrain train: --dump %s: %s\n", o->dump, err);
            return 1;
        }
    }
    return 0;
}

void vt_train_free(vt_train **tp) {
    if (!tp || !*tp)
        return;
    vt_train *t = *tp;
    vt_dump_close(&t->dump);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_evalproto_free(&t->ep[h]);
    vt_loader_free(&t->loader);
    vt_towers_free(&t->towers);
    vt_run_heads_free(&t->heads);
    free(t->train_idx);
    free(t->video_clips);
    free(t->class_weight);
    free(t->logit_adjust);
    vt_train_mix_free(t);
    free(t->val_idx);
    vt_dataset_free(&t->vds);
    vt_dataset_free(&t->ds);
    vt_freep(tp);
}
