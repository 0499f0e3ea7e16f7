/*
 * checkpoint.c: safetensors writing and reading for nets and optimizers
 * (checkpoint.h). The header is built and parsed with cJSON only; every number taken
 * from a file is checked before it is used as a size or an offset.
 *
 * It must never abort or crash on a bad file (truncated, garbage, hostile offsets): all
 * such problems come back as -1 with "path: problem" in err. Only programmer errors
 * (a NULL net) and device errors abort.
 */
#include "models/checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/common.h"

#define CK_MAX_HEADER (100LL << 20) /* 100 MiB: far above any real header */
#define CK_MAX_DIM (1LL << 40)

/* ---- metadata ---- */

void vt_ckpt_meta_set(vt_ckpt_meta *m, const char *key, const char *val) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->kv[i].key, key)) {
            free(m->kv[i].val);
            m->kv[i].val = vt_strdup(val);
            return;
        }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->kv = vt_realloc(m->kv, (size_t)m->cap * sizeof(*m->kv));
    }
    m->kv[m->n].key = vt_strdup(key);
    m->kv[m->n].val = vt_strdup(val);
    m->n++;
}

const char *vt_ckpt_meta_get(const vt_ckpt_meta *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->kv[i].key, key))
            return m->kv[i].val;
    return NULL;
}

void vt_ckpt_meta_free(vt_ckpt_meta *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n; i++) {
        free(m->kv[i].key);
        free(m->kv[i].val);
    }
    free(m->kv);
    memset(m, 0, sizeof *m);
}

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
    char *s = cJSON_PrintUnformatted(j);
    VT_CHECK(s != NULL, "cJSON_PrintUnformatted failed (out of memory)");
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

typedef struct ck_out { const char *name; const float *data; int64_t numel; int is_int64;
                        int ndim; const int64_t *shape; } ck_out;

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int vt_ckpt_save(const char *path, vt_net *net, vt_optim *opt, const vt_ckpt_meta *extra,
                 char *err, size_t errlen) {
    VT_CHECK(path && net, "vt_ckpt_save: path %p net %p", (const void *)path, (void *)net);
    vt_backend *be = vt_net_backend(net);
    const vt_net_cfg *cfg = vt_net_config(net);
    int rc = -1, fd = -1;
    char *tmp = NULL, *hdr = NULL;
    float *hp = NULL, *hb = NULL, *ho = NULL;
    ck_out *outs = NULL;
    cJSON *root = NULL;

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
    outs = vt_calloc((size_t)(nt + 2), sizeof(*outs));
    int no = 0;
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        outs[no++] = (ck_out){t->name, (t->is_buffer ? hb : hp) + t->offset, t->numel,
                              t->is_int64, t->ndim, t->shape};
    }
    int64_t flat_shape[1] = {np};
    for (int k = 0; k < nopt; k++)
        outs[no++] = (ck_out){onames[k], ho + (int64_t)k * np, np, 0, 1, flat_shape};

    /* Header. */
    root = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
    char buf[64], *js;
    cJSON_AddStringToObject(md, "vidtrain_version", VT_VERSION);
    cJSON_AddStringToObject(md, "model", cfg->model);
    snprintf(buf, sizeof buf, "%dx%dx%d", cfg->clip_t, cfg->clip_h, cfg->clip_w);
    cJSON_AddStringToObject(md, "clip", buf);
    js = heads_json(cfg);
    cJSON_AddStringToObject(md, "heads", js);
    free(js);
    snprintf(buf, sizeof buf, "%.9g", (double)cfg->dropout);
    cJSON_AddStringToObject(md, "dropout", buf);
    if (opt) {
        js = optim_json(opt);
        cJSON_AddStringToObject(md, "optimizer", js);
        free(js);
    }
    for (int i = 0; extra && i < extra->n; i++)
        cJSON_AddStringToObject(md, extra->kv[i].key, extra->kv[i].val);
    int64_t off = 0;
    for (int i = 0; i < no; i++) {
        cJSON *o = cJSON_AddObjectToObject(root, outs[i].name);
        cJSON_AddStringToObject(o, "dtype", outs[i].is_int64 ? "I64" : "F32");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < outs[i].ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)outs[i].shape[d]));
        int64_t bytes = outs[i].numel * (outs[i].is_int64 ? 8 : 4);
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + bytes)));
        off += bytes;
    }
    hdr = cJSON_PrintUnformatted(root);
    VT_CHECK(hdr != NULL, "cJSON_PrintUnformatted failed (out of memory)");
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) & ~(size_t)7; /* data 8-byte aligned, as safetensors pads */

    /* Temporary file in the same folder, then rename. */
    size_t pl = strlen(path);
    tmp = vt_malloc(pl + 16);
    snprintf(tmp, pl + 16, "%s.tmp.XXXXXX", path);
    fd = mkstemp(tmp);
    if (fd < 0) {
        vt_set_err(err, errlen, "%s: cannot create a temporary file beside it: %s", path,
                   strerror(errno));
        goto end;
    }
    uint8_t len8[8];
    for (int b = 0; b < 8; b++)
        len8[b] = (uint8_t)((uint64_t)padded >> (8 * b));
    int bad = write_all(fd, len8, 8) || write_all(fd, hdr, hlen);
    for (size_t k = hlen; k < padded && !bad; k++)
        bad = write_all(fd, " ", 1);
    for (int i = 0; i < no && !bad; i++) {
        if (outs[i].is_int64) {
            int64_t *v = vt_malloc((size_t)VT_MAX(outs[i].numel, 1) * sizeof(int64_t));
            for (int64_t e = 0; e < outs[i].numel; e++)
                v[e] = llroundf(outs[i].data[e]);
            bad = write_all(fd, v, (size_t)outs[i].numel * 8);
            free(v);
        } else {
            bad = write_all(fd, outs[i].data, (size_t)outs[i].numel * 4);
        }
    }
    if (bad || fsync(fd) != 0) {
        vt_set_err(err, errlen, "%s: cannot write %s: %s", path, tmp, strerror(errno));
        goto end;
    }
    if (close(fd) != 0) {
        fd = -1;
        vt_set_err(err, errlen, "%s: cannot close %s: %s", path, tmp, strerror(errno));
        goto end;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        vt_set_err(err, errlen, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        goto end;
    }
    free(tmp);
    tmp = NULL;
    /* The rename is durable once the folder is synced. */
    char *dir = vt_strdup(path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = 0;
    int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    rc = 0;
end:
    if (fd >= 0)
        close(fd);
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    cJSON_Delete(root);
    free(hdr);
    free(outs);
    free(hp);
    free(hb);
    free(ho);
    return rc;
}

/* ---- reading ---- */

/* A JSON number that is an integer in [0, 2^53]: the only kind we take as a size. */
static int json_uint(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j))
        return -1;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v))
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const vt_ckpt_tensor *x = *(vt_ckpt_tensor *const *)a, *y = *(vt_ckpt_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(vt_ckpt_tensor *const *)a)->name, (*(vt_ckpt_tensor *const *)b)->name);
}

void vt_ckpt_info_free(vt_ckpt_info *info) {
    if (!info)
        return;
    for (int i = 0; i < info->ntensors; i++)
        free(info->tensors[i].name);
    free(info->tensors);
    free(info->path);
    vt_ckpt_meta_free(&info->meta);
    memset(info, 0, sizeof *info);
}

int vt_ckpt_read_info(vt_ckpt_info *info, const char *path, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    info->path = vt_strdup(path);
    int rc = -1;
    FILE *f = NULL;
    char *hdr = NULL;
    cJSON *root = NULL;
    vt_ckpt_tensor **sorted = NULL;
#define FAIL(...)                                                       \
    do {                                                                \
        char m_[400];                                                   \
        snprintf(m_, sizeof m_, __VA_ARGS__);                           \
        vt_set_err(err, errlen, "%s: %s", path, m_);                    \
        goto end;                                                       \
    } while (0)

    f = fopen(path, "rb");
    if (!f)
        FAIL("cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        FAIL("not a regular file");
    info->file_size = (int64_t)st.st_size;
    if (info->file_size < 8)
        FAIL("truncated: %lld bytes, a safetensors file has at least 8", (long long)st.st_size);
    uint8_t len8[8];
    if (fread(len8, 1, 8, f) != 8)
        FAIL("cannot read the header length");
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++)
        hl |= (uint64_t)len8[b] << (8 * b);
    if (hl < 2 || hl > (uint64_t)CK_MAX_HEADER)
        FAIL("header length %llu is not sane (expected 2 .. %lld bytes): not a safetensors file "
             "or corrupt", (unsigned long long)hl, CK_MAX_HEADER);
    if ((int64_t)hl > info->file_size - 8)
        FAIL("truncated: header of %llu bytes but only %lld bytes follow the length",
             (unsigned long long)hl, (long long)(info->file_size - 8));
    hdr = vt_malloc((size_t)hl + 1);
    if (fread(hdr, 1, (size_t)hl, f) != (size_t)hl)
        FAIL("cannot read the %llu-byte header", (unsigned long long)hl);
    hdr[hl] = 0;
    info->data_start = 8 + (int64_t)hl;
    const int64_t data_size = info->file_size - info->data_start;
    const char *endp = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, (size_t)hl, &endp, 0);
    if (!root)
        FAIL("header is not valid JSON (near byte %lld of the header)",
             (long long)(cJSON_GetErrorPtr() && cJSON_GetErrorPtr() >= hdr
                             ? cJSON_GetErrorPtr() - hdr : 0));
    for (const char *p = endp; p && p < hdr + hl; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != 0)
            FAIL("header has bytes after its JSON object");
    if (!cJSON_IsObject(root))
        FAIL("header is JSON but not an object");
    int n = cJSON_GetArraySize(root);
    info->tensors = vt_calloc((size_t)VT_MAX(n, 1), sizeof(*info->tensors));
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!it->string)
            FAIL("header entry without a name");
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it))
                FAIL("__metadata__ is not an object");
            for (const cJSON *m = it->child; m; m = m->next) {
                if (!m->string || !cJSON_IsString(m))
                    FAIL("__metadata__ value of '%s' is not a string",
                         m->string ? m->string : "?");
                vt_ckpt_meta_set(&info->meta, m->string, m->valuestring);
            }
            continue;
        }
        const char *nm = it->string;
        if (!cJSON_IsObject(it))
            FAIL("tensor '%s': entry is not an object", nm);
        vt_ckpt_tensor *t = &info->tensors[info->ntensors];
        t->name = vt_strdup(nm);
        info->ntensors++;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt))
            FAIL("tensor '%s': no dtype string", nm);
        if (!strcmp(dt->valuestring, "F32"))
            t->is_int64 = 0;
        else if (!strcmp(dt->valuestring, "I64"))
            t->is_int64 = 1;
        else
            FAIL("tensor '%s': dtype %.16s is not supported (vidtrain reads F32 and I64)", nm,
                 dt->valuestring);
        if (!cJSON_IsArray(sh))
            FAIL("tensor '%s': no shape list", nm);
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > 8)
            FAIL("tensor '%s': %d dimensions (at most 8)", nm, t->ndim);
        t->numel = 1;
        int d = 0;
        for (const cJSON *x = sh->child; x; x = x->next, d++) {
            int64_t v;
            if (json_uint(x, &v) < 0 || v > CK_MAX_DIM)
                FAIL("tensor '%s': shape entry %d is not a sane non-negative integer", nm, d);
            t->shape[d] = v;
            if (v && t->numel > (INT64_MAX / 16) / v)
                FAIL("tensor '%s': shape too large", nm);
            t->numel *= v;
        }
        if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
            json_uint(of->child, &t->begin) < 0 || json_uint(of->child->next, &t->end) < 0)
            FAIL("tensor '%s': data_offsets is not a list of two non-negative integers", nm);
        if (t->end < t->begin)
            FAIL("tensor '%s': data_offsets [%lld, %lld) end before they begin", nm,
                 (long long)t->begin, (long long)t->end);
        if (t->end > data_size)
            FAIL("tensor '%s': data_offsets [%lld, %lld) past the end of the data (%lld bytes; "
                 "file truncated?)", nm, (long long)t->begin, (long long)t->end,
                 (long long)data_size);
        int64_t want = t->numel * (t->is_int64 ? 8 : 4);
        if (t->end - t->begin != want)
            FAIL("tensor '%s': %lld data bytes for shape of %lld %s elements (%lld bytes)", nm,
                 (long long)(t->end - t->begin), (long long)t->numel, t->is_int64 ? "I64" : "F32",
                 (long long)want);
    }
    /* Names unique; offsets cover the data exactly, without overlaps or holes. */
    sorted = vt_malloc((size_t)VT_MAX(info->ntensors, 1) * sizeof(*sorted));
    for (int i = 0; i < info->ntensors; i++)
        sorted[i] = &info->tensors[i];
    qsort(sorted, (size_t)info->ntensors, sizeof(*sorted), cmp_name);
    for (int i = 1; i < info->ntensors; i++)
        if (!strcmp(sorted[i]->name, sorted[i - 1]->name))
            FAIL("tensor '%s' appears twice in the header", sorted[i]->name);
    qsort(sorted, (size_t)info->ntensors, sizeof(*sorted), cmp_begin);
    int64_t pos = 0;
    for (int i = 0; i < info->ntensors; i++) {
        const vt_ckpt_tensor *t = sorted[i];
        if (t->begin < pos)
            FAIL("tensor '%s': data_offsets [%lld, %lld) overlap tensor '%s'", t->name,
                 (long long)t->begin, (long long)t->end, sorted[i - 1]->name);
        if (t->begin > pos)
            FAIL("tensor '%s': a hole of %lld bytes before its data", t->name,
                 (long long)(t->begin - pos));
        pos = t->end;
    }
    if (pos != data_size)
        FAIL("%lld bytes of data after the last tensor (expected none)",
             (long long)(data_size - pos));
    rc = 0;
end:
#undef FAIL
    if (f)
        fclose(f);
    free(hdr);
    free(sorted);
    cJSON_Delete(root);
    if (rc < 0) {
        vt_ckpt_info_free(info);
    }
    return rc;
}

const vt_ckpt_tensor *vt_ckpt_find(const vt_ckpt_info *info, const char *name) {
    for (int i = 0; i < info->ntensors; i++)
        if (!strcmp(info->tensors[i].name, name))
            return &info->tensors[i];
    return NULL;
}

int vt_ckpt_read_tensor(const vt_ckpt_info *info, const vt_ckpt_tensor *t, float *host_out,
                        char *err, size_t errlen) {
    FILE *f = fopen(info->path, "rb");
    if (!f) {
        vt_set_err(err, errlen, "%s: cannot open: %s", info->path, strerror(errno));
        return -1;
    }
    int rc = -1;
    if (fseeko(f, (off_t)(info->data_start + t->begin), SEEK_SET) != 0)
        goto end;
    if (t->is_int64) {
        int64_t v;
        int64_t i = 0;
        for (; i < t->numel; i++) {
            if (fread(&v, 8, 1, f) != 1)
                break;
            host_out[i] = (float)v;
        }
        if (i != t->numel)
            goto end;
    } else if (fread(host_out, 4, (size_t)t->numel, f) != (size_t)t->numel) {
        goto end;
    }
    rc = 0;
end:
    if (rc < 0)
        vt_set_err(err, errlen, "%s: tensor '%s': cannot read its data (file changed or "
                   "truncated since its header was read)", info->path, t->name);
    fclose(f);
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
    cfg->nesterov = (int)jnum(o, "nesterov", 0);
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
        if (vt_ckpt_read_tensor(info, vt_ckpt_find(info, t->name), host, err, errlen) < 0)
            goto end;
        float *dst = (t->is_buffer ? vt_net_buffers(net) : vt_net_params(net)) + t->offset;
        if (t->numel)
            be->i->to_device(be, dst, host, (size_t)t->numel * sizeof(float));
    }
    for (int k = 0; k < nopt; k++) {
        if (vt_ckpt_read_tensor(info, vt_ckpt_find(info, onames[k]), host, err, errlen) < 0)
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
