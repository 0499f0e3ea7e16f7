/*
 * checkpoint.c: nets and optimizers as checkpoints (checkpoint.h) — the state-dict
 * mapping: which tensors a net and its optimizer write under which names, vidtrain's
 * metadata (model, clip, heads, dropout, optimizer) and the configurations read back from
 * it, and loading a file into a net after checking every name, dtype and shape against
 * it. The file format itself — header, validation, the atomic write — is
 * safetensors.c's.
 *
 * It must never abort or crash on a bad file: a checkpoint that does not fit the net
 * comes back as -1 with "path: problem" in err. Only programmer errors (a NULL net) and
 * device errors abort.
 */
#include "models/checkpoint.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/json_str.h"

/* ---- vidtrain's metadata keys (the caller's may not take them) ---- */

static const char *const reserved_keys[] = {"vidtrain_version", "model", "clip", "heads",
                                            "dropout", "optimizer", NULL};

/* ---- optimizer tensor names ---- */

static int optim_names(const vt_optim_cfg *c, const char *names[2]) {
    switch (c->kind) {
    case VT_OPT_SGD:
        names[0] = "optim.sgd.momentum_buffer";
        return c->momentum != 0 ? 1 : 0;
    case VT_OPT_RMSPROP:
        names[0] = "optim.rmsprop.square_avg";
        names[1] = "optim.rmsprop.momentum_buffer";
        return c->momentum > 0 ? 2 : 1;
    case VT_OPT_ADAMW:
        names[0] = "optim.adamw.exp_avg";
        names[1] = "optim.adamw.exp_avg_sq";
        return 2;
    }
    return 0;
}

static char *json_print_free(cJSON *j) {
    char *s = vt_json_print(j, 0);
    VT_CHECK_MEM(s != NULL, "a JSON text");
    cJSON_Delete(j);
    return s;
}

static char *heads_json(const vt_net_cfg *cfg) {
    cJSON *a = cJSON_CreateArray();
    for (int h = 0; h < cfg->nheads; h++) {
        const vt_head_cfg *hc = &cfg->head[h];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", hc->name);
        cJSON_AddNumberToObject(o, "classes", hc->classes);
        cJSON_AddStringToObject(o, "loss", hc->loss == VT_LOSS_BCE ? "bce" : "softmax");
        cJSON_AddNumberToObject(o, "weight", hc->weight);
        cJSON_AddNumberToObject(o, "smoothing", hc->smoothing);
        cJSON_AddItemToArray(a, o);
    }
    return json_print_free(a);
}

static char *optim_json(const vt_optim *opt) {
    const vt_optim_cfg *c = vt_optim_config(opt);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", vt_optim_kind_name(c->kind));
    cJSON_AddNumberToObject(o, "momentum", c->momentum);
    cJSON_AddNumberToObject(o, "dampening", c->dampening);
    cJSON_AddNumberToObject(o, "nesterov", c->nesterov);
    cJSON_AddNumberToObject(o, "wd", c->wd);
    cJSON_AddNumberToObject(o, "alpha", c->alpha);
    cJSON_AddNumberToObject(o, "beta1", c->beta1);
    cJSON_AddNumberToObject(o, "beta2", c->beta2);
    cJSON_AddNumberToObject(o, "eps", c->eps);
    cJSON_AddNumberToObject(o, "clip_norm", c->clip_norm);
    cJSON_AddNumberToObject(o, "step", (double)vt_optim_step_count(opt));
    return json_print_free(o);
}

/* ---- writing ---- */

/* The index of the first non-finite value of x (n), or -1. */
static int64_t first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return i;
    return -1;
}

/* A NaN or inf anywhere is a diverged model: refused both ways (issue 41), naming the
 * tensor, so that no non-finite model is ever written as a result or read as one. */
static int refuse_nonfinite(const char *path, const char *name, const float *x, int64_t n,
                            int saving, char *err, size_t errlen) {
    int64_t at = first_nonfinite(x, n);
    if (at < 0)
        return 0;
    vt_set_err(err, errlen, "%s: tensor '%s' holds a non-finite value (%s at element %lld): %s; "
               "train again with a lower --lr (or --clip-norm)", path, name,
               isnan(x[at]) ? "NaN" : "inf", (long long)at,
               saving ? "the model diverged, so the file is not written (what it holds stays)"
                      : "the run that wrote it diverged");
    return -1;
}

int vt_ckpt_check_var(const char *path, const char *name, const float *x, int64_t n, char *err,
                      size_t errlen) {
    size_t ln = strlen(name), ls = strlen("running_var");
    if (ln < ls || strcmp(name + ln - ls, "running_var"))
        return 0;
    for (int64_t i = 0; i < n; i++)
        if (x[i] < 0) {
            vt_set_err(err, errlen, "%s: tensor '%s' holds a negative variance (%g at element "
                       "%lld), which no training writes: a damaged file (every output of the "
                       "model would be NaN); start from another", path, name, (double)x[i],
                       (long long)i);
            return -1;
        }
    return 0;
}

int vt_ckpt_save(const char *path, vt_net *net, vt_optim *opt, const vt_ckpt_meta *extra,
                 char *err, size_t errlen) {
    VT_CHECK(path && net, "vt_ckpt_save: path %p net %p", (const void *)path, (void *)net);
    vt_backend *be = vt_net_backend(net);
    const vt_net_cfg *cfg = vt_net_config(net);
    float *hp = NULL, *hb = NULL, *ho = NULL;
    vt_ckpt_meta md = {0};

    for (int i = 0; extra && i < extra->n; i++)
        for (int r = 0; reserved_keys[r]; r++)
            if (!strcmp(extra->kv[i].key, reserved_keys[r])) {
                vt_set_err(err, errlen, "%s: metadata key '%s' is written by vidtrain itself",
                           path, extra->kv[i].key);
                return -1;
            }

    /* Host copies of the arenas. */
    const int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net);
    hp = vt_malloc((size_t)VT_MAX(np, 1) * sizeof(float));
    hb = vt_malloc((size_t)VT_MAX(nb, 1) * sizeof(float));
    vt_backend_sync(be);
    if (np)
        be->i->to_host(be, hp, vt_net_params(net), (size_t)np * sizeof(float));
    if (nb)
        be->i->to_host(be, hb, vt_net_buffers(net), (size_t)nb * sizeof(float));
    const char *onames[2] = {NULL, NULL};
    int nopt = 0;
    if (opt) {
        nopt = optim_names(vt_optim_config(opt), onames);
        VT_CHECK(vt_optim_state_len(opt) == (int64_t)nopt * np,
                 "optimizer state of %lld floats for %lld parameters",
                 (long long)vt_optim_state_len(opt), (long long)np);
        if (nopt) {
            ho = vt_malloc((size_t)nopt * (size_t)np * sizeof(float));
            be->i->to_host(be, ho, vt_optim_state(opt), (size_t)nopt * (size_t)np * sizeof(float));
        }
    }

    /* The tensor list: state_dict order, then the optimizer's. */
    const int nt = vt_net_num_tensors(net);
    vt_ckpt_out *outs = vt_calloc((size_t)(nt + 2), sizeof(*outs));
    int no = 0;
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        outs[no++] = (vt_ckpt_out){t->name, (t->is_buffer ? hb : hp) + t->offset, t->numel,
                                   t->is_int64, t->ndim, t->shape};
    }
    int64_t flat_shape[1] = {np};
    for (int k = 0; k < nopt; k++)
        outs[no++] = (vt_ckpt_out){onames[k], ho + (int64_t)k * np, np, 0, 1, flat_shape};
    for (int i = 0; i < no; i++)
        if (refuse_nonfinite(path, outs[i].name, outs[i].data, outs[i].numel, 1, err, errlen) != 0) {
            free(outs);
            free(hp);
            free(hb);
            free(ho);
            return -1;
        }

    /* Metadata: vidtrain's keys, then the caller's. */
    char buf[64], *js;
    vt_ckpt_meta_set(&md, "vidtrain_version", VT_VERSION);
    vt_ckpt_meta_set(&md, "model", cfg->model);
    snprintf(buf, sizeof buf, "%dx%dx%d", cfg->clip_t, cfg->clip_h, cfg->clip_w);
    vt_ckpt_meta_set(&md, "clip", buf);
    js = heads_json(cfg);
    vt_ckpt_meta_set(&md, "heads", js);
    free(js);
    snprintf(buf, sizeof buf, "%.9g", (double)cfg->dropout);
    vt_ckpt_meta_set(&md, "dropout", buf);
    if (opt) {
        js = optim_json(opt);
        vt_ckpt_meta_set(&md, "optimizer", js);
        free(js);
    }
    for (int i = 0; extra && i < extra->n; i++)
        vt_ckpt_meta_set(&md, extra->kv[i].key, extra->kv[i].val);
    int rc = vt_ckpt_write_file(path, &md, outs, no, err, errlen);
    vt_ckpt_meta_free(&md);
    free(outs);
    free(hp);
    free(hb);
    free(ho);
    return rc;
}

/* ---- configurations from metadata ---- */

static double jnum(const cJSON *o, const char *k, double dflt) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : dflt;
}

int vt_ckpt_net_cfg(vt_net_cfg *cfg, const vt_ckpt_info *info, char *err, size_t errlen) {
    const char *model = vt_ckpt_meta_get(&info->meta, "model");
    const char *clip = vt_ckpt_meta_get(&info->meta, "clip");
    const char *heads = vt_ckpt_meta_get(&info->meta, "heads");
    const char *drop = vt_ckpt_meta_get(&info->meta, "dropout");
    if (!model || !clip || !heads) {
        vt_set_err(err, errlen, "%s: metadata lacks '%s' (not written by vidtrain?)", info->path,
                   !model ? "model" : !clip ? "clip" : "heads");
        return -1;
    }
    int t, h, w;
    char tail;
    if (sscanf(clip, "%dx%dx%d%c", &t, &h, &w, &tail) != 3 || t < 1 || h < 1 || w < 1) {
        vt_set_err(err, errlen, "%s: metadata clip '%.32s' is not TxHxW", info->path, clip);
        return -1;
    }
    vt_net_cfg_default(cfg, model, 1, t, h, w);
    if (strlen(model) >= sizeof cfg->model) {
        vt_set_err(err, errlen, "%s: metadata model name too long", info->path);
        return -1;
    }
    cfg->dropout = drop ? strtof(drop, NULL) : 0.0f;
    cJSON *a = cJSON_Parse(heads);
    int rc = -1;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > VT_MAX_HEADS) {
        vt_set_err(err, errlen, "%s: metadata heads is not a list of 1 to %d heads", info->path,
                   VT_MAX_HEADS);
        goto end;
    }
    cfg->nheads = cJSON_GetArraySize(a);
    int i = 0;
    for (const cJSON *o = a->child; o; o = o->next, i++) {
        vt_head_cfg *hc = &cfg->head[i];
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "loss");
        double k = jnum(o, "classes", -1);
        if (!cJSON_IsString(nm) || !cJSON_IsString(ls) || !(k >= 1 && k < 1e9)) {
            vt_set_err(err, errlen, "%s: metadata head %d lacks name, loss or classes",
                       info->path, i);
            goto end;
        }
        snprintf(hc->name, sizeof hc->name, "%s", nm->valuestring);
        hc->classes = (int)k;
        hc->loss = !strcmp(ls->valuestring, "bce") ? VT_LOSS_BCE : VT_LOSS_SOFTMAX_CE;
        hc->weight = (float)jnum(o, "weight", 1.0);
        hc->smoothing = (float)jnum(o, "smoothing", 0.0);
    }
    rc = 0;
end:
    cJSON_Delete(a);
    return rc;
}

int vt_ckpt_optim_cfg(vt_optim_cfg *cfg, int64_t *step, const vt_ckpt_info *info, char *err,
                      size_t errlen) {
    const char *s = vt_ckpt_meta_get(&info->meta, "optimizer");
    if (!s) {
        vt_set_err(err, errlen, "%s: no optimizer state in this checkpoint (weights only)",
                   info->path);
        return -1;
    }
    cJSON *o = cJSON_Parse(s);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    int k = cJSON_IsString(kind) ? vt_optim_kind_parse(kind->valuestring) : -1;
    if (!cJSON_IsObject(o) || k < 0) {
        vt_set_err(err, errlen, "%s: metadata optimizer is not a known optimizer", info->path);
        cJSON_Delete(o);
        return -1;
    }
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = (vt_opt_kind)k;
    cfg->momentum = (float)jnum(o, "momentum", 0);
    cfg->dampening = (float)jnum(o, "dampening", 0);
    double nv = jnum(o, "nesterov", 0); /* a flag: (int) of a huge number is UB */
    cfg->nesterov = nv >= 1 || nv <= -1;
    cfg->wd = (float)jnum(o, "wd", 0);
    cfg->alpha = (float)jnum(o, "alpha", 0);
    cfg->beta1 = (float)jnum(o, "beta1", 0);
    cfg->beta2 = (float)jnum(o, "beta2", 0);
    cfg->eps = (float)jnum(o, "eps", 0);
    cfg->clip_norm = (float)jnum(o, "clip_norm", 0);
    double st = jnum(o, "step", 0);
    if (step)
        *step = st >= 0 && st < 9e15 ? (int64_t)st : 0;
    cJSON_Delete(o);
    return 0;
}

/* ---- loading ---- */

static int load_into(vt_net *net, vt_optim *opt, const vt_ckpt_info *info, char *err,
                     size_t errlen) {
    vt_backend *be = vt_net_backend(net);
    const int nt = vt_net_num_tensors(net);
    const int64_t np = vt_net_num_params(net);
    const char *onames[2] = {NULL, NULL};
    int nopt = 0;
    int64_t step = 0;
    if (opt) {
        vt_optim_cfg fc;
        if (vt_ckpt_optim_cfg(&fc, &step, info, err, errlen) < 0)
            return -1;
        if (fc.kind != vt_optim_config(opt)->kind ||
            vt_optim_state_per_param(&fc) != vt_optim_state_per_param(vt_optim_config(opt))) {
            vt_set_err(err, errlen, "%s: optimizer state is %s (%d floats per parameter), the "
                       "run uses %s (%d)", info->path, vt_optim_kind_name(fc.kind),
                       vt_optim_state_per_param(&fc), vt_optim_kind_name(vt_optim_config(opt)->kind),
                       vt_optim_state_per_param(vt_optim_config(opt)));
            return -1;
        }
        nopt = optim_names(vt_optim_config(opt), onames);
    }
    /* Validate every name, dtype and shape before touching the net. */
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        const vt_ckpt_tensor *c = vt_ckpt_find(info, t->name);
        if (!c) {
            vt_set_err(err, errlen, "%s: tensor '%s' of %s is missing", info->path, t->name,
                       vt_net_config(net)->model);
            return -1;
        }
        if (c->is_int64 != t->is_int64) {
            vt_set_err(err, errlen, "%s: tensor '%s' has dtype %s, expected %s", info->path,
                       t->name, c->is_int64 ? "I64" : "F32", t->is_int64 ? "I64" : "F32");
            return -1;
        }
        int same = c->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++)
            same = c->shape[d] == t->shape[d];
        if (!same) {
            char a[96] = "[", b[96] = "[";
            for (int d = 0; d < c->ndim; d++)
                snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", d ? ", " : "",
                         (long long)c->shape[d]);
            for (int d = 0; d < t->ndim; d++)
                snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", d ? ", " : "",
                         (long long)t->shape[d]);
            vt_set_err(err, errlen, "%s: tensor '%s' has shape %s], the model expects %s]",
                       info->path, t->name, a, b);
            return -1;
        }
    }
    for (int i = 0; i < info->ntensors; i++) {
        const char *nm = info->tensors[i].name;
        if (strncmp(nm, "optim.", 6) != 0 && !vt_net_find_tensor(net, nm)) {
            vt_set_err(err, errlen, "%s: unexpected tensor '%s' (not part of %s with this "
                       "configuration)", info->path, nm, vt_net_config(net)->model);
            return -1;
        }
    }
    for (int k = 0; k < nopt; k++) {
        const vt_ckpt_tensor *c = vt_ckpt_find(info, onames[k]);
        if (!c || c->is_int64 || c->ndim != 1 || c->shape[0] != np) {
            vt_set_err(err, errlen, "%s: optimizer tensor '%s' is %s (expected F32 [%lld])",
                       info->path, onames[k], c ? "the wrong dtype or shape" : "missing",
                       (long long)np);
            return -1;
        }
    }
    /* Copy. */
    int64_t maxn = 1;
    for (int i = 0; i < nt; i++)
        maxn = VT_MAX(maxn, vt_net_tensor(net, i)->numel);
    if (nopt)
        maxn = VT_MAX(maxn, np);
    float *host = vt_malloc((size_t)maxn * sizeof(float));
    int rc = -1;
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        if (vt_ckpt_read_tensor(info, vt_ckpt_find(info, t->name), host, err, errlen) < 0 ||
            refuse_nonfinite(info->path, t->name, host, t->numel, 0, err, errlen) != 0 ||
            vt_ckpt_check_var(info->path, t->name, host, t->numel, err, errlen) != 0)
            goto end;
        float *dst = (t->is_buffer ? vt_net_buffers(net) : vt_net_params(net)) + t->offset;
        if (t->numel)
            be->i->to_device(be, dst, host, (size_t)t->numel * sizeof(float));
    }
    for (int k = 0; k < nopt; k++) {
        if (vt_ckpt_read_tensor(info, vt_ckpt_find(info, onames[k]), host, err, errlen) < 0 ||
            refuse_nonfinite(info->path, onames[k], host, np, 0, err, errlen) != 0)
            goto end;
        if (np)
            be->i->to_device(be, vt_optim_state(opt) + (int64_t)k * np, host,
                             (size_t)np * sizeof(float));
    }
    if (opt)
        vt_optim_set_step_count(opt, step);
    vt_backend_sync(be);
    rc = 0;
end:
    free(host);
    return rc;
}

int vt_ckpt_load_weights(vt_net *net, const char *path, char *err, size_t errlen) {
    vt_ckpt_info info;
    if (vt_ckpt_read_info(&info, path, err, errlen) < 0)
        return -1;
    int rc = load_into(net, NULL, &info, err, errlen);
    vt_ckpt_info_free(&info);
    return rc;
}

int vt_ckpt_load_state(vt_net *net, vt_optim *opt, const char *path, vt_ckpt_meta *meta_out,
                       char *err, size_t errlen) {
    vt_ckpt_info info;
    if (vt_ckpt_read_info(&info, path, err, errlen) < 0)
        return -1;
    int rc = load_into(net, opt, &info, err, errlen);
    if (rc == 0 && meta_out) {
        vt_ckpt_meta_free(meta_out);
        *meta_out = info.meta;
        memset(&info.meta, 0, sizeof info.meta);
    }
    vt_ckpt_info_free(&info);
    return rc;
}
