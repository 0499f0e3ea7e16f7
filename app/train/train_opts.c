/*
 * train_opts.c: the training configuration (train_opts.h): defaults, the resolved
 * machine- and data-dependent defaults, and config.json's form. It must never read the
 * command line or a file; JSON written before an option existed reads as the behaviour
 * of that time (see vt_train_opts_from_json).
 */
#include "app/train/train_opts.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "models/finetune.h"

const char *vt_train_optim_default(const char *model) {
    return vt_finetune_nlayers(model) > 0 ? "adamw" : "sgd";
}

const char *vt_train_opts_optim(const vt_train_opts *o) {
    return o->optim[0] ? o->optim : vt_train_optim_default(o->model);
}

void vt_train_opts_default(vt_train_opts *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "tiny");
    o->flip = 1;
    o->contrast_min = 0.4f;
    o->brightness = 0.1f;
    o->precise_bn = -1;
    o->freeze = -2;
    o->freeze_bn = -1;
    o->sync_bn = 1; /* several towers equal one device with batch norm too (docs/design.md §3.1) */
    o->optim[0] = '\0'; /* "", wd, smoothing, drop_path < 0: resolve (the recipe) */
    o->momentum = 0.9f;
    o->nesterov = 1;
    o->wd = -1;
    o->smoothing = -1;
    o->drop_path = -1;
    snprintf(o->sched, sizeof o->sched, "cosine");
    o->warmup_epochs = -1;
    o->patience = -1;
    o->min_clips = -1;
    o->step_epochs = 10;
    o->gamma = 0.1f;
    o->workers = 2;
    o->queue = 2;
    snprintf(o->tower_split, sizeof o->tower_split, "memory");
    snprintf(o->precision, sizeof o->precision, "fp32");
    snprintf(o->checkpoint_act, sizeof o->checkpoint_act, "auto");
    snprintf(o->input_norm, sizeof o->input_norm, "auto");
    o->val_split = 0.1f;
    o->frame_rate = 30.0f;
    snprintf(o->group, sizeof o->group, "auto");
    o->fold = 1;
    o->val_clips = 3;
    o->val_crops = 1;
    o->clips_per_video = 1;
    snprintf(o->balance, sizeof o->balance, "auto");
    o->log_every = 50;
    o->mix_switch = 0.5f;
    o->repeat_aug = 1;
    snprintf(o->wd_exempt, sizeof o->wd_exempt, "auto");
    snprintf(o->randaug, sizeof o->randaug, "off");
}

void vt_train_clip_default(const char *model, int gpu, int *t, int *crop, int *stride) {
    /* A model's own clip, on any device; 0: the device's below.
     * S3D's average pool needs features of 2x7x7: clips of at least 13x209x209; its own
     * input is 16x224 (torchvision's Kinetics weights), stride 1.
     * C3D's pool5 needs 16 frames (the CPU's 8 leave it none): 16 frames at the device's
     * crop and stride.
     * X3D: pytorchvideo's clip per member (hub/x3d.py; frames, crop) and the sampling
     * stride of its Kinetics recipe. */
    static const struct { const char *m; int t, crop, stride; } own[] = {
        {"s3d", 16, 224, 1}, {"c3d", 16, 0, 0},
        {"x3d_xs", 4, 160, 12}, {"x3d_s", 13, 160, 6}, {"x3d_m", 16, 224, 5},
        {"x3d_l", 16, 312, 5},
        /* and the transformers': MViT's torchvision's (16 frames at 7.5 fps), VideoMAE's
         * its Kinetics fine-tuning clip (--num_frames 16 --sampling_rate 4 at 224): the
         * generic 16x112 stride 1 gave weights learnt on 14x14 patches a grid of 7x7 and a
         * quarter of the time span, without a word */
        {"mvit_v2_s", 16, 224, 4}, {"mvit_v1_b", 16, 224, 4},
        {"videomae_vit_s", 16, 224, 4}, {"videomae_vit_b", 16, 224, 4}};
    *t = gpu ? 16 : 8;
    *crop = gpu ? 112 : 64;
    *stride = gpu ? 1 : 3;
    for (size_t i = 0; i < VT_ARRAY_LEN(own); i++)
        if (model && !strcmp(model, own[i].m)) {
            *t = own[i].t;
            *crop = own[i].crop ? own[i].crop : *crop;
            *stride = own[i].stride ? own[i].stride : *stride;
        }
}

void vt_train_opts_resolve(vt_train_opts *o, int64_t epoch_clips, int gpu) {
    /* the model's clip (vt_train_clip_default) for what --clip left out; a clip given
     * without a stride: stride 1 */
    int dt, dcrop, dstride;
    vt_train_clip_default(o->model, gpu, &dt, &dcrop, &dstride);
    if (!o->clip_t) {
        o->clip_t = dt;
        if (!o->crop)
            o->crop = dcrop;
        if (!o->stride)
            o->stride = dstride;
    }
    if (!o->batch)
        o->batch = gpu ? 32 : 8;
    if (!o->crop)
        o->crop = dcrop;
    if (!o->stride)
        o->stride = 1;
    if (!o->short_side)
        o->short_side = (o->crop * 8 + 6) / 7;
    if (!o->jitter_min)
        o->jitter_min = o->short_side;
    if (!o->jitter_max)
        o->jitter_max = VT_MAX(o->jitter_min, (o->crop * 10 + 6) / 7);
    const int ft = vt_train_opts_finetune(o);
    /* A transformer takes VideoMAE's fine-tuning recipe (docs/finetune.md): AdamW, wd
     * 0.05, drop path 0.1, label smoothing 0.1, and the weight-decay exemptions below
     * (layer decay 0.75 only when it fine-tunes); every part overridable. Other models:
     * SGD, 1e-4, none, none. */
    const int vit_ft = vt_finetune_nlayers(o->model) > 0;
    if (!o->optim[0])
        snprintf(o->optim, sizeof o->optim, "%s", vt_train_opts_optim(o));
    if (o->wd < 0)
        o->wd = vit_ft ? 0.05f : 1e-4f;
    if (o->drop_path < 0)
        o->drop_path = vit_ft ? 0.1f : 0.0f;
    if (o->smoothing < 0)
        o->smoothing = vit_ft ? 0.1f : 0.0f;
    if (!(o->lr > 0)) {
        double b = o->batch / 32.0;
        /* tiny, from scratch on small sets, wants twice the resnets' rate (measured) */
        double sgd = !strcmp(o->model, "tiny") || !strcmp(o->model, "tiny_nobn") ? 0.2 : 0.1;
        o->lr = (float)(!strcmp(o->optim, "adamw")     ? 0.001 * sqrt(b)
                        : !strcmp(o->optim, "rmsprop") ? 0.001 * b
                                                       : sgd * b);
        if (ft) /* pretrained features are not to be thrown about: a tenth */
            o->lr *= 0.1f;
    }
    if (!(o->head_lr_mult > 0))
        o->head_lr_mult = ft ? 10.0f : 1.0f;
    if (!(o->layer_decay > 0)) /* VideoMAE's fine-tuning value for ViT-S/B */
        o->layer_decay = ft && vt_finetune_nlayers(o->model) > 0 ? 0.75f : 1.0f;
    /* The statistics the family's published weights were trained with: fine-tuning feeds
     * them what they learned on, and from scratch any fixed choice is as good. */
    if (!strcmp(o->input_norm, "auto") || !o->input_norm[0])
        snprintf(o->input_norm, sizeof o->input_norm, "%s", vt_zoo_input_norm(o->model));
    if (strcmp(o->wd_exempt, "on") && strcmp(o->wd_exempt, "off")) /* timm's rule for ViTs */
        snprintf(o->wd_exempt, sizeof o->wd_exempt, "%s",
                 vt_finetune_nlayers(o->model) > 0 ? "on" : "off");
    if (o->freeze < -1)
        o->freeze = -1;
    if (o->freeze_bn < 0)
        o->freeze_bn = ft;
    /* The length follows validation only when nothing else fixes it (train_length.c);
     * fine-tuning keeps its measured fixed rule. */
    if (o->patience < 0)
        o->patience = !o->epochs && !(o->time_budget > 0) && !ft && !strcmp(o->sched, "cosine")
                          ? VT_TRAIN_PATIENCE : 0;
    int64_t per = VT_MAX(epoch_clips, 1);
    const int fixed = o->epochs ? o->epochs
                      : (int)(ft ? VT_MAX(10, (2000 + per - 1) / per) : VT_MAX(30, (8000 + per - 1) / per));
    if (!o->epochs)
        o->epochs = o->patience > 0 ? VT_TRAIN_CAP * fixed : fixed;
    /* The default length never ends before the fixed rule would have (issue 40: on a
     * held-out set of 128 videos whose validation split held 13, three noisy validations
     * decayed it at a third of the fixed rule's length, 14.6% video top-1 against 22.9%). */
    if (o->min_clips < 0)
        o->min_clips = o->patience > 0 ? (int)VT_MIN((int64_t)fixed * per, 1000000000) : 0;
    if (o->warmup_epochs < 0)
        o->warmup_epochs = strcmp(o->sched, "cosine") && strcmp(o->sched, "step")
                               ? 0 : (float)fixed / 5;
    if (!o->eval_every)
        o->eval_every = VT_MAX(1, fixed / 10);
    if (o->precise_bn < 0)
        o->precise_bn = !o->freeze_bn && (o->contrast_min < 1 || o->brightness > 0) ? 4 : 0;
}

const char *vt_train_opts_recipe(const vt_train_opts *o) {
    return vt_finetune_nlayers(o->model) <= 0 ? "default"
           : vt_train_opts_finetune(o)        ? "transformer-finetune" : "transformer";
}

#define J_STR(f) cJSON_AddStringToObject(j, #f, o->f)
#define J_NUM(f) cJSON_AddNumberToObject(j, #f, (double)o->f)

cJSON *vt_train_opts_to_json(const vt_train_opts *o) {
    cJSON *j = cJSON_CreateObject();
    J_STR(data);
    J_STR(out);
    J_STR(model);
    J_NUM(clip_t);
    J_NUM(crop);
    J_NUM(stride);
    J_NUM(stride_jitter);
    J_NUM(clip_fps);
    J_NUM(short_side);
    J_NUM(jitter_min);
    J_NUM(jitter_max);
    cJSON_AddBoolToObject(j, "flip", o->flip);
    J_NUM(contrast_min);
    J_NUM(brightness);
    J_NUM(epochs);
    J_NUM(batch);
    J_STR(optim);
    J_NUM(lr);
    J_NUM(momentum);
    cJSON_AddBoolToObject(j, "nesterov", o->nesterov);
    J_NUM(wd);
    J_NUM(clip_norm);
    J_STR(sched);
    J_NUM(warmup_epochs);
    J_NUM(time_budget);
    J_NUM(budget_once);
    J_NUM(patience);
    J_NUM(min_clips);
    J_NUM(step_epochs);
    J_NUM(gamma);
    J_NUM(smoothing);
    J_NUM(dropout);
    J_NUM(precise_bn);
    J_STR(init);
    cJSON_AddBoolToObject(j, "init_strict", o->init_strict);
    cJSON_AddBoolToObject(j, "skip_nonfinite", o->skip_nonfinite);
    J_STR(pretrained);
    if (o->init[0] && vt_finetune_weights_licence(o->model))
        cJSON_AddStringToObject(j, "weights_licence", vt_finetune_weights_licence(o->model));
    J_NUM(head_lr_mult);
    J_NUM(layer_decay);
    J_NUM(drop_path);
    J_NUM(mixup);
    J_NUM(cutmix);
    J_NUM(mix_switch);
    J_NUM(repeat_aug);
    J_NUM(random_erase);
    J_STR(randaug);
    J_STR(wd_exempt);
    cJSON_AddStringToObject(j, "recipe", vt_train_opts_recipe(o)); /* what resolve chose by */
    J_NUM(freeze);
    cJSON_AddBoolToObject(j, "freeze_bn", o->freeze_bn > 0);
    J_NUM(workers);
    J_NUM(queue);
    J_STR(frame_cache);
#define J_DEV(f) J_STR(f);
    VT_TRAIN_DEVICE_STRINGS(J_DEV)
#undef J_DEV
    J_NUM(threads);
    J_STR(tower_split);
    cJSON_AddBoolToObject(j, "sync_bn", o->sync_bn);
    J_STR(precision);
    J_STR(checkpoint_act);
    J_STR(input_norm);
    /* A 64-bit seed does not fit a JSON number exactly: kept as a decimal string. */
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(j, "seed", seed);
    J_NUM(val_split);
    J_NUM(frame_rate);
    J_STR(group);
    J_STR(val_dir);
    J_STR(lists);
    J_NUM(fold);
    J_STR(list_format);
    J_NUM(eval_every);
    J_NUM(val_clips);
    J_NUM(val_crops);
    J_STR(labels);
    cJSON *w = cJSON_AddArrayToObject(j, "loss_weights");
    for (int i = 0; i < o->nweights; i++)
        cJSON_AddItemToArray(w, cJSON_CreateNumber(o->loss_weights[i]));
    J_NUM(clips_per_video);
    J_NUM(seconds_per_clip);
    J_STR(balance);
    J_STR(class_weights);
    J_NUM(log_every);
    J_NUM(checkpoint_every);
    J_NUM(max_steps);
    return j;
}

/* A key of the wrong type is noted (the first one) and leaves the field as it was. */
static void mistyped(const cJSON *v, const char *k, char *bad) {
    if (v && !cJSON_IsNull(v) && !bad[0])
        snprintf(bad, 64, "%s", k);
}
static void get_str(const cJSON *j, const char *k, char *dst, size_t n, char *bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsString(v) && strlen(v->valuestring) < n)
        snprintf(dst, n, "%s", v->valuestring);
    else /* a string too long for its field is as unusable: cut, it names another file */
        mistyped(v, k, bad);
}
static void get_int(const cJSON *j, const char *k, int *dst, char *bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsNumber(v))
        *dst = v->valueint; /* cJSON's, saturated to int: (int) of 1e300 is UB */
    else if (cJSON_IsBool(v))
        *dst = cJSON_IsTrue(v);
    else
        mistyped(v, k, bad);
}
static void get_float(const cJSON *j, const char *k, float *dst, char *bad) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsNumber(v))
        *dst = (float)v->valuedouble;
    else
        mistyped(v, k, bad);
}
#define G_STR(f) get_str(j, #f, o->f, sizeof o->f, o->json_bad)
#define G_INT(f) get_int(j, #f, &o->f, o->json_bad)
#define G_FLT(f) get_float(j, #f, &o->f, o->json_bad)
/* An option that configurations written before it existed lack: those runs trained
 * without it, so their value is `before`, not today's default. */
#define G_INT_SINCE(f, before) \
    do { if (!cJSON_GetObjectItemCaseSensitive(j, #f)) o->f = (before); else G_INT(f); } while (0)
#define G_FLT_SINCE(f, before) \
    do { if (!cJSON_GetObjectItemCaseSensitive(j, #f)) o->f = (before); else G_FLT(f); } while (0)

void vt_train_opts_from_json(vt_train_opts *o, const cJSON *j) {
    o->json_bad[0] = 0;
    G_STR(data);
    G_STR(out);
    G_STR(model);
    G_INT(clip_t);
    G_INT(crop);
    G_INT(stride);
    G_INT_SINCE(stride_jitter, 0);
    G_FLT_SINCE(clip_fps, 0.0f); /* runs before it: each video's own frames */
    G_INT(short_side);
    G_INT(jitter_min);
    G_INT(jitter_max);
    G_INT(flip);
    G_FLT_SINCE(contrast_min, 1.0f); /* 1 and 0: no colour jitter */
    G_FLT_SINCE(brightness, 0.0f);
    G_INT(epochs);
    G_INT(batch);
    G_STR(optim);
    G_FLT(lr);
    G_FLT(momentum);
    G_INT_SINCE(nesterov, 0);
    G_FLT(wd);
    G_FLT(clip_norm);
    G_STR(sched);
    G_FLT_SINCE(warmup_epochs, 0);
    G_FLT(time_budget);
    G_INT_SINCE(budget_once, 0);
    G_INT_SINCE(patience, 0); /* runs before it: the fixed rule */
    G_INT_SINCE(min_clips, 0); /* runs before it: no floor */
    G_INT(step_epochs);
    G_FLT(gamma);
    G_FLT(smoothing);
    G_FLT(dropout);
    G_INT_SINCE(precise_bn, 0);
    G_STR(init);
    G_INT(init_strict);
    G_INT(skip_nonfinite);
    G_STR(pretrained);
    G_FLT_SINCE(head_lr_mult, 1.0f); /* runs before fine-tuning: plain training */
    G_FLT_SINCE(layer_decay, 1.0f);  /* runs before it: off */
    G_FLT_SINCE(drop_path, 0.0f);
    G_FLT_SINCE(mixup, 0.0f); /* runs before them: no mixing */
    G_FLT_SINCE(cutmix, 0.0f);
    G_FLT_SINCE(mix_switch, 0.5f);
    G_INT_SINCE(repeat_aug, 1);
    G_FLT_SINCE(random_erase, 0.0f);
    if (!cJSON_GetObjectItemCaseSensitive(j, "randaug")) /* runs before it: none */
        snprintf(o->randaug, sizeof o->randaug, "off");
    G_STR(randaug);
    if (!cJSON_GetObjectItemCaseSensitive(j, "wd_exempt")) /* before it: every one decays */
        snprintf(o->wd_exempt, sizeof o->wd_exempt, "off");
    G_STR(wd_exempt);
    G_INT_SINCE(freeze, -1);
    G_INT_SINCE(freeze_bn, 0);
    G_INT(workers);
    G_INT(queue);
    G_STR(frame_cache);
#define G_DEV(f) G_STR(f);
    VT_TRAIN_DEVICE_STRINGS(G_DEV)
#undef G_DEV
    G_INT(threads);
    get_str(j, "split", o->tower_split, sizeof o->tower_split, o->json_bad); /* the old key */
    G_STR(tower_split);
    G_INT(sync_bn);
    G_STR(precision);
    G_STR(checkpoint_act); /* runs before it: auto, which changes no number */
    /* runs before it trained every model on Kinetics' statistics */
    snprintf(o->input_norm, sizeof o->input_norm, "kinetics");
    G_STR(input_norm);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seed");
    if (cJSON_IsString(s))
        vt_parse_u64(s->valuestring, &o->seed);
    G_FLT(val_split);
    G_FLT_SINCE(frame_rate, 30.0f);
    if (!cJSON_GetObjectItemCaseSensitive(j, "group")) /* before --group: path by path */
        snprintf(o->group, sizeof o->group, "none");
    G_STR(group);
    G_STR(val_dir);
    G_STR(lists);
    G_INT(fold);
    G_STR(list_format);
    G_INT(eval_every);
    G_INT(val_clips);
    G_INT(val_crops);
    G_STR(labels);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "loss_weights");
    if (cJSON_IsArray(w)) {
        o->nweights = 0;
        for (const cJSON *e = w->child; e && o->nweights < VT_MAX_HEADS; e = e->next)
            if (cJSON_IsNumber(e))
                o->loss_weights[o->nweights++] = (float)e->valuedouble;
    }
    G_INT(clips_per_video);
    G_FLT_SINCE(seconds_per_clip, 0.0f); /* before auto: a fixed count */
    if (!cJSON_GetObjectItemCaseSensitive(j, "balance")) /* before --balance: none */
        snprintf(o->balance, sizeof o->balance, "none");
    G_STR(balance);
    G_STR(class_weights);
    G_INT(log_every);
    G_INT(checkpoint_every);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "max_steps");
    if (cJSON_IsNumber(m))
        o->max_steps = m->valuedouble >= 0 && m->valuedouble < 9e18 /* else UB */
                           ? (int64_t)m->valuedouble : 0;
    /* A key that nothing here writes: a newer vidtrain's option (its run read by this one
     * would silently lose its effect: clips made otherwise, labels read otherwise) or a
     * misspelt edit ("clip_T"), which changes nothing while it seems to. The keys are the
     * ones to_json writes, and the config's other parts: its heads (run_heads.h), each
     * rank's devices (app/dist.c), the old name of tower_split, the training videos' frame
     * rates (train.c write_config). */
    static const char *const others[] = {"heads", "ranks", "split", "weights_licence",
                                         "train_fps"};
    o->json_unknown[0] = 0;
    cJSON *mine = vt_train_opts_to_json(o);
    for (const cJSON *e = j ? j->child : NULL; e && !o->json_unknown[0]; e = e->next) {
        int known = !e->string || cJSON_GetObjectItemCaseSensitive(mine, e->string) != NULL;
        for (size_t i = 0; i < VT_ARRAY_LEN(others) && !known; i++)
            known = !strcmp(e->string, others[i]);
        if (!known)
            snprintf(o->json_unknown, sizeof o->json_unknown, "%s", e->string);
    }
    cJSON_Delete(mine);
}

void vt_train_opts_device_args(const vt_train_opts *o, vt_device_args *a) {
    memset(a, 0, sizeof *a);
#define NZ(f) a->f = o->f[0] ? o->f : NULL;
    VT_TRAIN_DEVICE_STRINGS(NZ)
#undef NZ
    a->threads = o->threads;
}

/* The option a device field of vt_device_args holds. */
static const char *device_opt(const char *field) {
    return !strcmp(field, "gpu_mem") ? "--gpu-mem" : !strcmp(field, "emulate") ? "--emulate-slowdown"
         : !strcmp(field, "devices") ? "--devices" : !strcmp(field, "gpus") ? "--gpus"
         : !strcmp(field, "mem") ? "--mem" : !strcmp(field, "backend") ? "--backend" : "--speeds";
}

int vt_train_opts_take_device_args(vt_train_opts *o, const vt_device_args *a, char *err,
                                   size_t errlen) {
    /* a value cut to its field would name other devices or budgets */
#define FITS(f)                                                                              \
    if (a->f && strlen(a->f) >= sizeof o->f) {                                               \
        vt_set_err(err, errlen, "%s: '%.48s...' is %zu bytes, more than the %zu it holds", \
                   device_opt(#f), a->f, strlen(a->f), sizeof o->f - 1);                     \
        return -1;                                                                           \
    }
    VT_TRAIN_DEVICE_STRINGS(FITS)
#undef FITS
#define CP(f) if (a->f) snprintf(o->f, sizeof o->f, "%s", a->f);
    VT_TRAIN_DEVICE_STRINGS(CP)
#undef CP
    if (a->threads)
        o->threads = a->threads;
    return 0;
}

vt_dataset_opts vt_run_dataset_opts(const vt_train_opts *o) {
    return (vt_dataset_opts){.val_split = o->val_dir[0] ? 0 : o->val_split,
                             .lists_dir = o->lists[0] ? o->lists : NULL,
                             .list_fold = o->fold,
                             .group = o->group,
                             .labels = o->labels[0] ? o->labels : NULL,
                             .lists_format = (vt_lists_format)VT_MAX(
                                 vt_lists_format_parse(o->list_format), 0)};
}

vt_dataset *vt_run_dataset_open(const vt_train_opts *o, const char *dir, const char *labels,
                                const char *lists, char *err, size_t errlen) {
    vt_dataset_opts dopt = vt_run_dataset_opts(o);
    if (lists) {
        dopt.lists_dir = lists;
        dopt.lists_format = VT_LISTS_AUTO;
    }
    /* the run's own files named relative to the folder train ran in (runs of a vidtrain
     * that recorded them as given; train.c records real paths now): read from here, which
     * is right only when this is that folder, so said */
    static int said; /* once a process: eval opens the run's dataset twice */
    const char *rel[2] = {!lists && o->lists[0] != '/' ? o->lists : "",
                          !labels && o->labels[0] != '/' ? o->labels : ""};
    for (int i = 0; i < 2 && !said; i++)
        if (rel[i][0]) {
            vt_warn("the run's %s '%s' is a path relative to the folder it trained in (an "
                    "earlier vidtrain's run), read from this folder: run from that folder%s\n",
                    i ? "labels file" : "lists", rel[i], i ? ", or give --labels" : "");
            said = 1;
        }
    if (!labels && o->labels[0])
        labels = o->labels;
    dopt.labels = labels;
    vt_dataset *ds = vt_dataset_open(dir, &dopt, err, errlen);
    if (ds && labels && vt_dataset_load_labels(ds, labels, NULL, err, errlen) != 0)
        vt_dataset_free(&ds);
    return ds;
}
