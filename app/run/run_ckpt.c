/*
 * run_ckpt.c: the run state in checkpoints (run_ckpt.h). The state goes into the
 * checkpoint's metadata as JSON with every double printed to round-trip exactly, so a
 * resumed epoch's sums continue bit for bit. It must never read a checkpoint on a rank
 * other than 0: the others get rank 0's answer.
 */
#include "app/run/run_ckpt.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/dist.h"
#include "models/checkpoint.h"
#include "base/common.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/mpi.h"
#include "base/json_str.h"

static char *state_json(const vt_run_state *st) {
    /* %.17g round-trips a double exactly: the resumed epoch's sums continue bit for bit. */
    char buf[4096];
    int n = snprintf(buf, sizeof buf,
                     "{\"epoch\":%lld,\"cursor\":%lld,\"step\":%lld,\"best\":%.17g,"
                     "\"best_loss\":%.17g,\"best_epoch\":%d,\"loss\":%.17g,\"clips\":%lld,"
                     "\"seconds\":%.17g,\"wait_s\":%.17g,\"decay_epoch\":%d,\"decay_why\":%d,\"stall\":%d,"
                     "\"len_acc\":%.17g,\"len_loss\":%.17g,\"plan_epochs\":%d,"
                     "\"plan_step\":%lld,\"plan_frac\":%.17g,\"skipped\":%lld,"
                     "\"skipped_total\":%lld,\"correct\":[",
                     (long long)st->epoch, (long long)st->cursor, (long long)st->step, st->best,
                     st->best_loss, st->best_epoch, st->sums.loss, (long long)st->sums.clips, st->sums.seconds,
                     st->sums.wait_s, st->decay_epoch, st->decay_why, st->stall, st->len_acc, st->len_loss,
                     st->plan_epochs, (long long)st->plan_step, st->plan_frac,
                     (long long)st->sums.skipped, (long long)st->skipped_total);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", h ? "," : "",
                      (long long)st->sums.correct[h]);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "],\"head_loss\":[");
    for (int h = 0; h < VT_MAX_HEADS; h++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%.17g", h ? "," : "", st->sums.head_loss[h]);
    /* digits, hex and a space (set_id in train_data.c): nothing to escape */
    snprintf(buf + n, sizeof buf - (size_t)n, "],\"train_set\":\"%s\",\"val_set\":\"%s\"}",
             st->train_set, st->val_set);
    return vt_strdup(buf);
}

static int state_parse(vt_run_state *st, const char *s) {
    cJSON *j = cJSON_Parse(s);
    if (!j)
        return -1;
    memset(st, 0, sizeof *st);
    /* Integers up to 2^53 are exact as JSON numbers; steps and cursors never get there. */
    const cJSON *v;
#define NUM(k) ((v = cJSON_GetObjectItemCaseSensitive(j, k)) && cJSON_IsNumber(v) ? v->valuedouble : 0)
    st->epoch = (int64_t)NUM("epoch");
    st->cursor = (int64_t)NUM("cursor");
    st->step = (int64_t)NUM("step");
    st->best = NUM("best");
    st->best_loss = NUM("best_loss");
    st->best_epoch = (int)NUM("best_epoch");
    st->sums.loss = NUM("loss");
    st->sums.clips = (int64_t)NUM("clips");
    st->sums.seconds = NUM("seconds");
    st->sums.wait_s = NUM("wait_s");
    st->decay_epoch = (int)NUM("decay_epoch");
    st->stall = (int)NUM("stall");
    st->decay_why = (int)NUM("decay_why");
    st->len_acc = NUM("len_acc");
    st->len_loss = NUM("len_loss");
    st->plan_epochs = (int)NUM("plan_epochs");
    st->plan_step = (int64_t)NUM("plan_step");
    st->plan_frac = NUM("plan_frac");
    st->sums.skipped = (int64_t)NUM("skipped");
    st->skipped_total = (int64_t)NUM("skipped_total");
#undef NUM
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(j, "train_set");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(j, "val_set");
    if (cJSON_IsString(ts))
        snprintf(st->train_set, sizeof st->train_set, "%s", ts->valuestring);
    if (cJSON_IsString(vs))
        snprintf(st->val_set, sizeof st->val_set, "%s", vs->valuestring);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "correct");
    const cJSON *hl = cJSON_GetObjectItemCaseSensitive(j, "head_loss");
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        const cJSON *e = cJSON_GetArrayItem(c, h), *f = cJSON_GetArrayItem(hl, h);
        st->sums.correct[h] = cJSON_IsNumber(e) ? (int64_t)e->valuedouble : 0;
        st->sums.head_loss[h] = cJSON_IsNumber(f) ? f->valuedouble : 0;
    }
    cJSON_Delete(j);
    return 0;
}

typedef struct ckpt_job {
    const char *path;
    vt_ckpt_meta *meta;
    int with_optim, rc;
    char *err;
    size_t errlen;
} ckpt_job;

static void save_on_tower(void *ctx, vt_net *net, vt_optim *opt) {
    ckpt_job *j = ctx;
    j->rc = vt_ckpt_save(j->path, net, opt, j->meta, j->err, j->errlen);
}

static void load_on_tower(void *ctx, vt_net *net, vt_optim *opt) {
    ckpt_job *j = ctx;
    if (j->with_optim)
        j->rc = vt_ckpt_load_state(net, opt, j->path, j->meta, j->err, j->errlen);
    else
        j->rc = vt_ckpt_load_weights(net, j->path, j->err, j->errlen);
}

int vt_run_save(const char *path, vt_towers *t, const vt_run_state *st, const char *config_json,
                char *err, size_t errlen) {
    if (!vt_dist_lead()) /* every replica is the same: rank 0's is the checkpoint */
        return 0;
    vt_ckpt_meta m = {0};
    char num[64];
    snprintf(num, sizeof num, "%lld", (long long)st->epoch);
    vt_ckpt_meta_set(&m, "epoch", num);
    snprintf(num, sizeof num, "%lld", (long long)st->step);
    vt_ckpt_meta_set(&m, "step", num);
    snprintf(num, sizeof num, "%lld", (long long)st->cursor);
    vt_ckpt_meta_set(&m, "cursor", num);
    cJSON *cfg = config_json ? cJSON_Parse(config_json) : NULL;
    vt_clip_cfg cc;
    vt_clip_cfg_default(&cc); /* runs before --input-norm: Kinetics' */
    if (cfg) {
        const cJSON *nn = cJSON_GetObjectItemCaseSensitive(cfg, "input_norm");
        if (cJSON_IsString(nn))
            vt_clip_set_norm(&cc, nn->valuestring);
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(cfg, "seed");
        if (cJSON_IsString(seed))
            vt_ckpt_meta_set(&m, "seed", seed->valuestring);
        const cJSON *heads = cJSON_GetObjectItemCaseSensitive(cfg, "heads");
        const cJSON *h0 = cJSON_GetArrayItem(heads, 0);
        const cJSON *cl = h0 ? cJSON_GetObjectItemCaseSensitive(h0, "classes") : NULL;
        if (cl) {
            char *s = vt_json_print(cl, 0);
            vt_ckpt_meta_set(&m, "classes", s);
            cJSON_free(s);
        }
        cJSON_Delete(cfg);
        vt_ckpt_meta_set(&m, "vidtrain_config", config_json);
    }
    char norm[256];
    snprintf(norm, sizeof norm, "{\"mean\":[%.9g,%.9g,%.9g],\"std\":[%.9g,%.9g,%.9g]}", cc.mean[0],
             cc.mean[1], cc.mean[2], cc.std[0], cc.std[1], cc.std[2]);
    vt_ckpt_meta_set(&m, "normalisation", norm);
    char *sj = state_json(st);
    vt_ckpt_meta_set(&m, "vidtrain_state", sj);
    free(sj);
    ckpt_job j = {.path = path, .meta = &m, .with_optim = 1, .rc = -1, .err = err, .errlen = errlen};
    vt_towers_run_on(t, 0, save_on_tower, &j);
    vt_ckpt_meta_free(&m);
    return j.rc;
}

int vt_run_load(const char *path, vt_towers *t, int with_optim, vt_run_state *st, char *err,
                size_t errlen) {
    vt_ckpt_meta m = {0};
    ckpt_job j = {.path = path, .meta = &m, .with_optim = with_optim, .rc = -1, .err = err,
                  .errlen = errlen};
    /* Several processes: rank 0 reads the file, every replica everywhere gets its state. */
    if (vt_dist_lead())
        vt_towers_run_on(t, 0, load_on_tower, &j);
    j.rc = vt_dist_share_result(vt_dist_lead() ? j.rc : 0, err, errlen);
    if (j.rc == 0) {
        vt_towers_sync_from(t, 0);
        if (st && with_optim) {
            int rc = 0;
            if (vt_dist_lead()) {
                const char *s = vt_ckpt_meta_get(&m, "vidtrain_state");
                if (!s || state_parse(st, s) != 0) {
                    vt_set_err(err, errlen, "%s has no vidtrain_state metadata: not a vidtrain "
                               "training checkpoint", path);
                    rc = -1;
                }
            }
            j.rc = vt_dist_share_result(rc, err, errlen);
            if (j.rc == 0)
                vt_mpi_bcast(st, sizeof *st, 0, "the run state of a checkpoint");
        }
    }
    vt_ckpt_meta_free(&m);
    return j.rc;
}

cJSON *vt_run_ckpt_config(const char *path, char *err, size_t errlen) {
    vt_ckpt_info info;
    cJSON *j = NULL;
    int rc = 0;
    if (vt_dist_lead()) {
        rc = vt_ckpt_read_info(&info, path, err, errlen);
        if (rc == 0) {
            const char *s = vt_ckpt_meta_get(&info.meta, "vidtrain_config");
            j = s ? cJSON_Parse(s) : NULL;
            if (!j)
                vt_set_err(err, errlen, "%s: no vidtrain_config metadata", path);
            vt_ckpt_info_free(&info);
            rc = j ? 0 : -1;
        }
    }
    /* Several processes: rank 0's answer on every rank. */
    if (vt_dist_share_result(rc, err, errlen) != 0 || vt_mpi_size() == 1)
        return j;
    char *text = vt_dist_lead() ? vt_json_print(j, 0) : NULL;
    int64_t len = text ? (int64_t)strlen(text) : 0;
    vt_mpi_bcast(&len, sizeof len, 0, "a checkpoint's configuration");
    char *s = vt_malloc((size_t)len + 1);
    if (text)
        memcpy(s, text, (size_t)len);
    vt_mpi_bcast(s, (size_t)len, 0, "a checkpoint's configuration");
    s[len] = 0;
    if (!vt_dist_lead())
        j = cJSON_Parse(s);
    free(s);
    cJSON_free(text);
    return j;
}

int vt_run_ckpt_norm(const char *path, char *name, size_t n) {
    static const char *const names[] = {"kinetics", "pytorchvideo", "imagenet"};
    struct { int rc; char name[200]; } a = {0, ""};
    vt_ckpt_info info;
    char err[1024];
    if (vt_dist_lead() && vt_ckpt_read_info(&info, path, err, sizeof err) == 0) {
        const char *s = vt_ckpt_meta_get(&info.meta, "normalisation");
        cJSON *j = s ? cJSON_Parse(s) : NULL;
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "mean");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "std");
        if (cJSON_GetArraySize(m) == 3 && cJSON_GetArraySize(d) == 3) {
            a.rc = -1;
            snprintf(a.name, sizeof a.name, "%s", s);
            for (size_t i = 0; i < VT_ARRAY_LEN(names) && a.rc < 0; i++) {
                vt_clip_cfg c;
                vt_clip_set_norm(&c, names[i]);
                int same = 1; /* written %.9g from these floats: they read back exactly */
                for (int k = 0; k < 3; k++)
                    same &= (float)cJSON_GetArrayItem(m, k)->valuedouble == c.mean[k] &&
                            (float)cJSON_GetArrayItem(d, k)->valuedouble == c.std[k];
                if (same) {
                    a.rc = 1;
                    snprintf(a.name, sizeof a.name, "%s", names[i]);
                }
            }
        }
        cJSON_Delete(j);
        vt_ckpt_info_free(&info);
    }
    vt_mpi_bcast(&a, sizeof a, 0, "a checkpoint's normalisation");
    snprintf(name, n, "%s", a.name);
    return a.rc;
}

int vt_ckpt_keep_earlier_best(double best_acc, double last_acc, int64_t nval) {
    if (!(best_acc >= 0) || nval <= 0)
        return 0;
    double n = (double)nval;
    double p = (best_acc * n + 1.0) / (n + 2.0);
    double noise = 2.0 * sqrt(2.0 * p * (1.0 - p) / n);
    return best_acc - last_acc > noise;
}
