/*
 * run_model.c: a trained model for eval and predict (run_model.h). The configuration
 * comes from the checkpoint's own copy first (the run folder's config.json may be newer
 * than the checkpoint asked for), and under mpirun from rank 0's reading. It must never
 * load optimizer state or write a file.
 */
#include "app/run/run_model.h"

#include <stdio.h>
#include <string.h>

#include "app/decode_opt.h"
#include "app/dist.h"
#include "app/run/run_ckpt.h"
#include "app/run/run_claim.h"
#include "app/run/run_files.h"
#include "app/train/train_ranges.h"
#include "base/common.h"
#include "models/optim.h"
#include "pipeline/parallel/slices.h"

void vt_model_args_default(vt_model_args *a) {
    memset(a, 0, sizeof *a);
    a->clips_per_video = 10;
    a->crops = 1;
}

int vt_model_args_take(vt_model_args *a, int argc, char **argv, int *i, const char *cmd) {
    const char *opt = argv[*i], *v = NULL;
    int r = vt_device_args_take(&a->devices, argc, argv, i);
    if (r < 0)
        fprintf(stderr, "vidtrain %s: %s needs a value\n", cmd, opt);
    if (r != 0)
        return r;
    int bad = 0;
    if ((r = vt_opt_value(argc, argv, i, "--clips-per-video", &v)) != 0)
        bad = r < 0 || vt_parse_int(v, 1, 1000, &a->clips_per_video);
    else if ((r = vt_opt_value(argc, argv, i, "--crops", &v)) != 0)
        bad = r < 0 || vt_parse_int(v, 1, 3, &a->crops) || a->crops == 2;
    else if ((r = vt_opt_value(argc, argv, i, "--precision", &v)) != 0) {
        int p = r < 0 ? -1 : vt_precision_parse(v);
        bad = p < 0;
        if (!bad)
            a->precision = (vt_precision)p;
    }
    else if ((r = vt_opt_value(argc, argv, i, "--checkpoint", &v)) != 0) {
        bad = r < 0;
        if (!bad)
            a->ckpt = v;
    } else if ((r = vt_opt_value(argc, argv, i, "--tower-split", &v)) != 0) {
        vt_slice_policy pol;
        char perr[256];
        if (r > 0 && vt_slice_policy_parse(&pol, v, perr, sizeof perr) != 0) {
            fprintf(stderr, "vidtrain %s: %s\n", cmd, perr);
            return -1;
        }
        bad = r < 0;
        if (!bad)
            a->tower_split = v;
    } else
        return 0;
    if (bad) {
        fprintf(stderr, "vidtrain %s: bad value for %s\n", cmd, opt);
        return -1;
    }
    return 1;
}

int vt_run_model_open(vt_run_model *m, const char *run, const char *ckpt,
                      const char *const *writes, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    vt_train_opts_default(&m->opts);
    if (ckpt)
        snprintf(m->ckpt, sizeof m->ckpt, "%s", ckpt);
    else {
        snprintf(m->ckpt, sizeof m->ckpt, "%s/best.safetensors", run);
        if (!vt_file_exists(m->ckpt))
            snprintf(m->ckpt, sizeof m->ckpt, "%s/last.safetensors", run);
    }
    char cerr[1024], path[4200];
    /* what no output of this command may replace (base/common.h's output rule) */
    vt_inputs_add(m->ckpt);
    vt_run_claim_inputs(run, writes);
    const char *src = m->ckpt; /* where the configuration came from, for messages */
    cJSON *cfg = vt_run_ckpt_config(m->ckpt, cerr, sizeof cerr);
    if (!cfg) {
        snprintf(path, sizeof path, "%s/config.json", run);
        cfg = vt_dist_read_json(path); /* rank 0's copy, under mpirun */
        src = path;
    }
    if (!cfg) {
        vt_set_err(err, errlen, "%s (and no readable %s/config.json)", cerr, run);
        return -1;
    }
    vt_train_opts_from_json(&m->opts, cfg);
    /* the run's labels file and list files, which eval and embed read back: no output of
     * this command may replace them either (embed --out LABELS.npy wrote its CSV over the
     * run's labels, exit 0), and they are declared now, before any output is checked */
    if (m->opts.labels[0])
        vt_inputs_add(m->opts.labels);
    if (m->opts.lists[0])
        vt_inputs_add(m->opts.lists);
    if (m->opts.json_bad[0]) { /* the default would stand in for the run's value */
        vt_set_err(err, errlen, "%s: \"%s\" has the wrong type for that key: a damaged or "
                   "hand-edited configuration, which cannot say how the run trained; fix the "
                   "value", src, m->opts.json_bad);
        cJSON_Delete(cfg);
        return -1;
    }
    vt_clip_cfg probe; /* statistics this build cannot name were read as Kinetics' */
    if (vt_clip_set_norm(&probe, m->opts.input_norm) != 0) {
        vt_set_err(err, errlen, "%s: input_norm '%s' is not statistics this vidtrain knows "
                   "(kinetics, pytorchvideo, imagenet): a run from a newer vidtrain, or a "
                   "damaged configuration; its clips cannot be normalised as it trained",
                   src, m->opts.input_norm);
        cJSON_Delete(cfg);
        return -1;
    }
    /* the command line's own ranges and choices, as --resume checks them (train_ranges.h):
     * a checkpoint whose configuration says crop 1e9 printed a negative byte count, and
     * a short side of -5 ran at another scale than the run's, exit 0 */
    char rerr[1024];
    if (vt_train_opts_check(&m->opts, src, rerr, sizeof rerr) != 0) {
        vt_set_err(err, errlen, "%s", rerr);
        cJSON_Delete(cfg);
        return -1;
    }
    /* frame folders at the rate the run trained with, unless --frame-rate says otherwise */
    if (!vt_frame_rate_given() && m->opts.frame_rate > 0)
        vt_video_set_frame_rate(m->opts.frame_rate);
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(cfg, "train_fps");
    if (cJSON_GetArraySize(fr) == 2 && cJSON_IsNumber(cJSON_GetArrayItem(fr, 0)) &&
        cJSON_IsNumber(cJSON_GetArrayItem(fr, 1))) { /* else none: no check */
        const double lo = cJSON_GetArrayItem(fr, 0)->valuedouble;
        const double hi = cJSON_GetArrayItem(fr, 1)->valuedouble;
        if (lo > 0 && lo <= hi && hi < 1e6) {
            m->train_fps[0] = lo;
            m->train_fps[1] = hi;
        }
    }
    char herr[1024];
    int rc = vt_run_heads_from_json(&m->heads, cJSON_GetObjectItemCaseSensitive(cfg, "heads"),
                                    herr, sizeof herr);
    cJSON_Delete(cfg);
    if (rc != 0) {
        vt_set_err(err, errlen, "%s: %s", src, herr);
        return -1;
    }
    return 0;
}

void vt_run_model_clip(vt_clip_cfg *clip, const vt_run_model *m) {
    const vt_train_opts *o = &m->opts;
    vt_clip_cfg_default(clip);
    clip->t = o->clip_t;
    clip->stride = o->stride;
    clip->fps = o->clip_fps; /* each video's stride scaled to its rate, as training's */
    clip->crop = o->crop;
    /* Runs record the short side they resolved; the fallback is train's default (in 64
     * bits: a corrupt configuration's crop must not overflow, which is UB). */
    clip->short_side = o->short_side ? o->short_side
                                     : (int)VT_MIN(((int64_t)o->crop * 8 + 6) / 7, INT32_MAX);
    clip->ncrops = 1;
    clip->flip = 0;
    /* as the run trained: its config's (Kinetics' for runs before --input-norm) */
    vt_clip_set_norm(clip, o->input_norm);
}

int vt_run_model_load(vt_run_model *m, const vt_device_args *da, const char *policy, int batch,
                      char *err, size_t errlen) {
    const vt_train_opts *o = &m->opts;
    const vt_run_heads *h = &m->heads;
    vt_towers_cfg tc;
    vt_towers_cfg_default(&tc);
    if (vt_devices_from_args(&tc.devices, da, err, errlen) != 0 ||
        vt_devices_check_precision(&tc.devices, m->precision, err, errlen) != 0)
        return -2;
    char perr[1024];
    if (vt_slice_policy_parse(&tc.policy, policy ? policy : "memory", perr, sizeof perr) != 0) {
        vt_set_err(err, errlen, "%s", perr);
        return -2;
    }
    tc.batch = batch;
    vt_net_cfg_default(&tc.net, o->model, h->cfg[0].classes, o->clip_t, o->crop, o->crop);
    tc.net.nheads = h->n;
    memcpy(tc.net.head, h->cfg, sizeof h->cfg);
    tc.net.dropout = o->dropout;
    tc.net.precision = m->precision;
    /* No optimizer state is needed to run the model forward: plain SGD keeps none. */
    vt_optim_cfg_default(&tc.optim, VT_OPT_SGD);
    tc.optim.momentum = 0;
    /* Nor exact sums: they are the sums over a batch's clips of training (gradients, BN
     * statistics), which a forward in eval mode has none of; on CPU towers their
     * accumulators are 16 bytes a parameter (r3d18: 506 MiB) that eval, predict and embed
     * allocated and zeroed for nothing. */
    tc.exact_off = 1;
    tc.seed = o->seed;
    m->towers = vt_towers_init(&tc, err, errlen);
    if (!m->towers)
        return -1;
    /* docs/style.md §17: a policy given where nothing splits is refused, not ignored (the
     * towers of every process count: under mpirun a rank may hold one) */
    if (vt_tower_split_check(policy, vt_towers_count_all(m->towers), err, errlen) != 0)
        return -2;
    return vt_run_load(m->ckpt, m->towers, 0, NULL, err, errlen);
}

void vt_run_model_free(vt_run_model *m) {
    if (!m)
        return;
    vt_towers_free(&m->towers);
    vt_run_heads_free(&m->heads);
}

/* The rates whose clips at the run's stride span what training's clips spanned: its
 * videos' rates, widened by --stride-jitter J (training drew strides max(1, S - J) to
 * S + J, so a clip at stride S of a video at S / (S + J) of the lowest rate spans what a
 * training clip at stride S + J did). */
static void fps_span(const vt_run_model *m, double *lo, double *hi) {
    const int s = VT_MAX(m->opts.stride, 1), j = VT_MAX(m->opts.stride_jitter, 0);
    *lo = m->train_fps[0] * s / (s + j);
    *hi = m->train_fps[1] * s / VT_MAX(1, s - j);
}

/* With --clip-fps F: a clip's time between frames at fps (the stride scaled to it) over
 * the run's, stride / F; 1 without it or for an unknown rate. */
static double clip_fps_ratio(const vt_run_model *m, double fps) {
    if (!(m->opts.clip_fps > 0) || !(fps > 0))
        return 1;
    vt_clip_cfg c;
    vt_clip_cfg_default(&c);
    c.stride = VT_MAX(m->opts.stride, 1);
    c.fps = m->opts.clip_fps;
    vt_clip_cfg_at_fps(&c, fps);
    return (c.stride / fps) / (VT_MAX(m->opts.stride, 1) / (double)m->opts.clip_fps);
}

int vt_run_fps_outside(const vt_run_model *m, double fps) {
    if (m->opts.clip_fps > 0) { /* clips span one time at every rate it can follow */
        const double r = clip_fps_ratio(m, fps);
        return r > 1.25 || r * 1.25 < 1;
    }
    double lo, hi;
    fps_span(m, &lo, &hi);
    return fps > 0 && m->train_fps[1] > 0 && (fps > hi * 1.25 || fps * 1.25 < lo);
}

void vt_run_fps_warn(const char *cmd, const char *what, const vt_run_model *m, int n, int total,
                     const char *first, double first_fps) {
    if (n <= 0)
        return;
    if (m->opts.clip_fps > 0) {
        const double r = clip_fps_ratio(m, first_fps);
        fprintf(stderr, "vidtrain %s: warning: %d of %d %s%s %s at a frame rate the run's "
                "--clip-fps %g cannot follow at stride %d (%s: %.3g fps): a %d-frame clip of "
                "it spans %.1fx %s time than in training, so motion looks %s to the model; "
                "re-encode at the training rate (vidtrain prep SRC DST --fps %g)\n", cmd, n,
                total, what, total == 1 ? "" : "s", n == 1 ? "is" : "are",
                (double)m->opts.clip_fps, VT_MAX(m->opts.stride, 1), first, first_fps,
                m->opts.clip_t, r > 1 ? r : 1 / r, r > 1 ? "more" : "less",
                r > 1 ? "faster" : "slower", (double)m->opts.clip_fps);
        return;
    }
    const double lo = m->train_fps[0], hi = m->train_fps[1];
    double elo, ehi; /* the ratio is to the nearest span training's clips had */
    fps_span(m, &elo, &ehi);
    const double r = first_fps > ehi ? first_fps / ehi : elo / first_fps;
    char span[64], jit[128] = "";
    if (lo == hi || (int)(lo + 0.5) == (int)(hi + 0.5))
        snprintf(span, sizeof span, "%.3g fps", hi);
    else
        snprintf(span, sizeof span, "%.3g-%.3g fps", lo, hi);
    if (elo != lo || ehi != hi)
        snprintf(jit, sizeof jit, ", its stride jitter %d making clips as of %.3g-%.3g fps",
                 m->opts.stride_jitter, elo, ehi);
    fprintf(stderr, "vidtrain %s: warning: %d of %d %s%s %s at a frame rate outside the %s "
            "the run trained on%s (%s: %.3g fps): a %d-frame clip at stride %d spans %.1fx %s "
            "time than in training, so motion looks %s to the model; re-encode at the "
            "training rate (vidtrain prep SRC DST --fps %.3g)\n", cmd, n, total, what,
            total == 1 ? "" : "s", n == 1 ? "is" : "are", span, jit, first, first_fps,
            m->opts.clip_t,
            m->opts.stride, r, first_fps > ehi ? "less" : "more",
            first_fps > ehi ? "slower" : "faster", first_fps > ehi ? hi : lo);
}

void vt_fps_tally_add(vt_fps_tally *t, const vt_run_model *m, const char *path, double fps) {
    t->total++;
    if (vt_run_fps_outside(m, fps) && t->n++ == 0) {
        snprintf(t->first, sizeof t->first, "%s", path);
        t->first_fps = fps;
    }
}

void vt_fps_tally_warn(const vt_fps_tally *t, const char *cmd, const vt_run_model *m) {
    vt_run_fps_warn(cmd, "video", m, t->n, t->total, t->first, t->first_fps);
}

/* The first difference between two head lists (a: the checkpoint's, b: the run's), into
 * err; 0 when the same. */
static int heads_differ(const vt_run_heads *a, const vt_run_heads *b, char *err, size_t errlen) {
    if (a->n != b->n) {
        vt_set_err(err, errlen, "%d head(s) in the checkpoint, %d in the run", a->n, b->n);
        return 1;
    }
    for (int h = 0; h < a->n; h++) {
        const vt_head_cfg *x = &a->cfg[h], *y = &b->cfg[h];
        if (strcmp(x->name, y->name) || x->loss != y->loss || x->classes != y->classes) {
            vt_set_err(err, errlen, "head %d: '%s' with %d classes in the checkpoint, '%s' with "
                       "%d in the run", h, x->name, x->classes, y->name, y->classes);
            return 1;
        }
        for (int k = 0; k < x->classes; k++)
            if (strcmp(a->classes[h][k], b->classes[h][k])) {
                vt_set_err(err, errlen, "head '%s' class %d: '%s' in the checkpoint, '%s' in the "
                           "run", x->name, k, a->classes[h][k], b->classes[h][k]);
                return 1;
            }
    }
    return 0;
}

int vt_run_model_of_run(const vt_run_model *m, const char *run, char *err, size_t errlen) {
    char path[4200], why[1024] = "";
    snprintf(path, sizeof path, "%s/config.json", run);
    cJSON *cfg = vt_dist_read_json(path);
    if (!cfg)
        return 0; /* nothing to compare with: RUN's own files are the checkpoint's */
    vt_train_opts o;
    vt_train_opts_default(&o);
    vt_train_opts_from_json(&o, cfg);
    vt_run_heads h;
    /* a config.json without readable heads: the rest is compared */
    if (vt_run_heads_from_json(&h, cJSON_GetObjectItemCaseSensitive(cfg, "heads"), why,
                               sizeof why) != 0 || !heads_differ(&m->heads, &h, why, sizeof why))
        why[0] = 0;
    vt_run_heads_free(&h);
    cJSON_Delete(cfg);
    const vt_train_opts *c = &m->opts;
    if (why[0])
        ;
    else if (strcmp(c->model, o.model))
        snprintf(why, sizeof why, "model %s in the checkpoint, %s in the run", c->model, o.model);
    else if (c->clip_t != o.clip_t || c->crop != o.crop || c->stride != o.stride)
        snprintf(why, sizeof why, "clip %dx%d stride %d in the checkpoint, %dx%d stride %d in "
                 "the run", c->clip_t, c->crop, c->stride, o.clip_t, o.crop, o.stride);
    else if (strcmp(c->input_norm, o.input_norm))
        snprintf(why, sizeof why, "input statistics %s in the checkpoint, %s in the run",
                 c->input_norm, o.input_norm);
    else
        return 0;
    vt_set_err(err, errlen, "%s is not a checkpoint of the run in %s (%s): its figures would "
               "be filed there as the run's; evaluate it as its own run (eval ITS_RUN DIR), or "
               "give a checkpoint of %s", m->ckpt, run, why, run);
    return -1;
}
