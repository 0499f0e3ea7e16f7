/*
 * run.c: the run folder's small files, option parsing and Ctrl-C handling shared by
 * train, eval and predict (see run.h). It must never train or decode, and never leave a
 * half-written file where a reader (the report, a resumed run) could see it. Under
 * mpirun only rank 0 writes the run folder (the writers below return 0 elsewhere) and
 * only rank 0 reads checkpoints: the others get what it read (app/dist.h).
 */
#include "app/run.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/dist.h"
#include "models/checkpoint.h"
#include "models/common.h"
#include "pipeline/parallel/mpi.h"

/* ---- option parsing ---- */

int vt_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s)
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_int(const char *s, long lo, long hi, int *out) {
    int64_t v;
    if (vt_parse_i64(s, lo, hi, &v) != 0)
        return -1;
    *out = (int)v;
    return 0;
}

int vt_parse_u64(const char *s, uint64_t *out) {
    /* strtoull skips white space and then negates "-1" to 2^64-1: refuse both. */
    if (!s || !*s || *s == '-' || isspace((unsigned char)*s))
        return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

int vt_parse_float(const char *s, double lo, double hi, float *out) {
    if (!s || !*s)
        return -1;
    char *end = NULL;
    double v = strtod(s, &end);
    if (*end || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = (float)v;
    return 0;
}

int vt_parse_clip(const char *s, int *t, int *crop) {
    int a = 0, b = 0, c = 0;
    char tail;
    int n = sscanf(s, "%dx%dx%d%c", &a, &b, &c, &tail);
    if (n == 3 && a > 0 && b > 0 && b == c && a <= 1024 && b <= 4096) {
        *t = a;
        *crop = b;
        return 0;
    }
    n = sscanf(s, "%dx%d%c", &a, &b, &tail);
    if (n == 2 && a > 0 && b > 0 && a <= 1024 && b <= 4096) {
        *t = a;
        *crop = b;
        return 0;
    }
    return -1;
}

int vt_parse_floats(const char *s, float *out, int max) {
    int n = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= max || vt_parse_float(tok, 0, 1e6, &out[n]) != 0)
            return -1;
        n++;
    }
    return n;
}

/* ---- training configuration ---- */

void vt_train_opts_default(vt_train_opts *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->model, sizeof o->model, "tiny");
    o->flip = 1;
    o->batch = 16;
    snprintf(o->optim, sizeof o->optim, "sgd");
    o->momentum = 0.9f;
    o->nesterov = 1;
    o->wd = 1e-4f;
    snprintf(o->sched, sizeof o->sched, "cosine");
    o->warmup_epochs = -1;
    o->step_epochs = 10;
    o->gamma = 0.1f;
    o->workers = 2;
    o->queue = 2;
    snprintf(o->tower_split, sizeof o->tower_split, "memory");
    snprintf(o->precision, sizeof o->precision, "fp32");
    o->val_split = 0.1f;
    o->fold = 1;
    o->val_clips = 3;
    o->val_crops = 1;
    o->clips_per_video = 1;
    o->log_every = 50;
}

void vt_train_opts_resolve(vt_train_opts *o, int ntrain, int gpu) {
    if (!o->clip_t) {
        o->clip_t = gpu ? 16 : 8;
        if (!o->stride)
            o->stride = gpu ? 1 : 2;
    }
    if (!o->crop)
        o->crop = gpu ? 112 : 64;
    if (!o->stride)
        o->stride = 1;
    if (!o->short_side)
        o->short_side = (o->crop * 8 + 6) / 7;
    if (!o->jitter_min)
        o->jitter_min = o->short_side;
    if (!o->jitter_max)
        o->jitter_max = VT_MAX(o->jitter_min, (o->crop * 10 + 6) / 7);
    if (!(o->lr > 0)) {
        double b = o->batch / 32.0;
        o->lr = (float)(!strcmp(o->optim, "adamw")     ? 0.001 * sqrt(b)
                        : !strcmp(o->optim, "rmsprop") ? 0.001 * b
                                                       : 0.1 * b);
    }
    if (!o->epochs) {
        int per = VT_MAX(ntrain, 1) * VT_MAX(o->clips_per_video, 1);
        o->epochs = VT_MAX(30, (8000 + per - 1) / per);
    }
    if (o->warmup_epochs < 0)
        o->warmup_epochs = strcmp(o->sched, "cosine") && strcmp(o->sched, "step")
                               ? 0 : (float)o->epochs / 5;
    if (!o->eval_every)
        o->eval_every = VT_MAX(1, o->epochs / 10);
}

double vt_parse_duration(const char *s) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0) || !isfinite(v))
        return -1;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        return v;
    if (!strcmp(end, "m") || !strcmp(end, "min"))
        return 60 * v;
    if (!strcmp(end, "h"))
        return 3600 * v;
    return -1;
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
    J_NUM(short_side);
    J_NUM(jitter_min);
    J_NUM(jitter_max);
    cJSON_AddBoolToObject(j, "flip", o->flip);
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
    J_NUM(step_epochs);
    J_NUM(gamma);
    J_NUM(smoothing);
    J_NUM(dropout);
    J_NUM(workers);
    J_NUM(queue);
    J_STR(devices);
    J_STR(gpus);
    J_STR(mem);
    J_STR(gpu_mem);
    J_STR(backend);
    J_STR(emulate);
    J_STR(speeds);
    J_NUM(threads);
    J_STR(tower_split);
    cJSON_AddBoolToObject(j, "sync_bn", o->sync_bn);
    J_STR(precision);
    /* A 64-bit seed does not fit a JSON number exactly: kept as a decimal string. */
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    cJSON_AddStringToObject(j, "seed", seed);
    J_NUM(val_split);
    J_STR(val_dir);
    J_STR(lists);
    J_NUM(fold);
    J_NUM(eval_every);
    J_NUM(val_clips);
    J_NUM(val_crops);
    J_STR(labels);
    cJSON *w = cJSON_AddArrayToObject(j, "loss_weights");
    for (int i = 0; i < o->nweights; i++)
        cJSON_AddItemToArray(w, cJSON_CreateNumber(o->loss_weights[i]));
    J_NUM(clips_per_video);
    J_NUM(log_every);
    J_NUM(checkpoint_every);
    J_NUM(max_steps);
    return j;
}

static void get_str(const cJSON *j, const char *k, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsString(v))
        snprintf(dst, n, "%s", v->valuestring);
}
static void get_int(const cJSON *j, const char *k, int *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsNumber(v))
        *dst = (int)v->valuedouble;
    else if (cJSON_IsBool(v))
        *dst = cJSON_IsTrue(v);
}
static void get_float(const cJSON *j, const char *k, float *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsNumber(v))
        *dst = (float)v->valuedouble;
}
#define G_STR(f) get_str(j, #f, o->f, sizeof o->f)
#define G_INT(f) get_int(j, #f, &o->f)
#define G_FLT(f) get_float(j, #f, &o->f)

void vt_train_opts_from_json(vt_train_opts *o, const cJSON *j) {
    G_STR(data);
    G_STR(out);
    G_STR(model);
    G_INT(clip_t);
    G_INT(crop);
    G_INT(stride);
    G_INT(short_side);
    G_INT(jitter_min);
    G_INT(jitter_max);
    G_INT(flip);
    G_INT(epochs);
    G_INT(batch);
    G_STR(optim);
    G_FLT(lr);
    G_FLT(momentum);
    /* Configurations written before these options existed trained without them. */
    if (!cJSON_GetObjectItemCaseSensitive(j, "nesterov"))
        o->nesterov = 0;
    if (!cJSON_GetObjectItemCaseSensitive(j, "warmup_epochs"))
        o->warmup_epochs = 0;
    G_INT(nesterov);
    G_FLT(wd);
    G_FLT(clip_norm);
    G_STR(sched);
    G_FLT(warmup_epochs);
    G_FLT(time_budget);
    G_INT(step_epochs);
    G_FLT(gamma);
    G_FLT(smoothing);
    G_FLT(dropout);
    G_INT(workers);
    G_INT(queue);
    G_STR(devices);
    G_STR(gpus);
    G_STR(mem);
    G_STR(gpu_mem);
    G_STR(backend);
    G_STR(emulate);
    G_STR(speeds);
    G_INT(threads);
    get_str(j, "split", o->tower_split, sizeof o->tower_split); /* the old key */
    G_STR(tower_split);
    G_INT(sync_bn);
    G_STR(precision);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seed");
    if (cJSON_IsString(s))
        vt_parse_u64(s->valuestring, &o->seed);
    G_FLT(val_split);
    G_STR(val_dir);
    G_STR(lists);
    G_INT(fold);
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
    G_INT(log_every);
    G_INT(checkpoint_every);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "max_steps");
    if (cJSON_IsNumber(m))
        o->max_steps = (int64_t)m->valuedouble;
}

void vt_train_opts_device_args(const vt_train_opts *o, vt_device_args *a) {
    memset(a, 0, sizeof *a);
#define NZ(s) ((s)[0] ? (s) : NULL)
    a->devices = NZ(o->devices);
    a->gpus = NZ(o->gpus);
    a->mem = NZ(o->mem);
    a->gpu_mem = NZ(o->gpu_mem);
    a->emulate = NZ(o->emulate);
    a->backend = NZ(o->backend);
    a->speeds = NZ(o->speeds);
#undef NZ
    a->threads = o->threads;
}

/* ---- heads ---- */

cJSON *vt_run_heads_to_json(const vt_run_heads *h) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < h->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", h->cfg[i].name);
        cJSON_AddStringToObject(o, "loss", h->cfg[i].loss == VT_LOSS_BCE ? "bce" : "softmax");
        cJSON_AddNumberToObject(o, "weight", h->cfg[i].weight);
        cJSON_AddNumberToObject(o, "smoothing", h->cfg[i].smoothing);
        cJSON *c = cJSON_AddArrayToObject(o, "classes");
        for (int k = 0; k < h->cfg[i].classes; k++)
            cJSON_AddItemToArray(c, cJSON_CreateString(h->classes[i][k]));
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

int vt_run_heads_from_json(vt_run_heads *h, const cJSON *arr, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
        cJSON_GetArraySize(arr) > VT_MAX_HEADS) {
        vt_set_err(err, errlen, "no valid \"heads\" list");
        return -1;
    }
    for (const cJSON *o = arr->child; o; o = o->next) {
        int i = h->n;
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *ls = cJSON_GetObjectItemCaseSensitive(o, "loss");
        const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "classes");
        int k = cJSON_GetArraySize(cl);
        if (!cJSON_IsString(nm) || !cJSON_IsString(ls) || !cJSON_IsArray(cl) || k < 1) {
            vt_set_err(err, errlen, "head %d: name, loss and classes are required", i);
            vt_run_heads_free(h);
            return -1;
        }
        snprintf(h->cfg[i].name, sizeof h->cfg[i].name, "%s", nm->valuestring);
        h->cfg[i].loss = !strcmp(ls->valuestring, "bce") ? VT_LOSS_BCE : VT_LOSS_SOFTMAX_CE;
        h->cfg[i].classes = k;
        h->cfg[i].weight = 1;
        get_float(o, "weight", &h->cfg[i].weight);
        get_float(o, "smoothing", &h->cfg[i].smoothing);
        h->classes[i] = vt_calloc((size_t)k, sizeof(char *));
        h->n++;
        int c = 0;
        for (const cJSON *e = cl->child; e; e = e->next, c++)
            h->classes[i][c] = vt_strdup(cJSON_IsString(e) ? e->valuestring : "?");
    }
    return 0;
}

void vt_run_heads_free(vt_run_heads *h) {
    if (!h)
        return;
    for (int i = 0; i < h->n; i++) {
        for (int c = 0; c < h->cfg[i].classes && h->classes[i]; c++)
            free(h->classes[i][c]);
        vt_freep(&h->classes[i]);
    }
    h->n = 0;
}

/* ---- files ---- */

int vt_mkdirs(const char *path, char *err, size_t errlen) {
    if (!vt_dist_lead()) /* several processes: rank 0 owns the run folder */
        return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            vt_set_err(err, errlen, "cannot create %s: %s", buf, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
        vt_set_err(err, errlen, "cannot create %s: %s", buf, strerror(errno));
        return -1;
    }
    return 0;
}

int vt_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int vt_dir_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *vt_read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, r;
    char *buf = vt_malloc(cap);
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            cap *= 2;
            buf = vt_realloc(buf, cap);
        }
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

int vt_write_file_atomic(const char *path, const char *text, char *err, size_t errlen) {
    if (!vt_dist_lead()) /* several processes: rank 0 owns the run folder */
        return 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        vt_set_err(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            vt_set_err(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    /* fsync before rename: after a crash the name points at the old or the new whole
     * file, never at an empty one. */
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        vt_set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

cJSON *vt_read_json(const char *path) {
    char *s = vt_read_file(path);
    if (!s)
        return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

int vt_write_json(const char *path, const cJSON *j, char *err, size_t errlen) {
    char *s = cJSON_Print(j);
    VT_CHECK(s != NULL, "cJSON_Print failed (out of memory)");
    size_t n = strlen(s);
    char *t = vt_malloc(n + 2);
    memcpy(t, s, n);
    t[n] = '\n';
    t[n + 1] = 0;
    cJSON_free(s);
    int rc = vt_write_file_atomic(path, t, err, errlen);
    free(t);
    return rc;
}

/* ---- metrics ---- */

int vt_metrics_epochs(cJSON ***out, const char *run_dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    *out = NULL;
    char *s = vt_read_file(path);
    if (!s)
        return 0;
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *k = j ? cJSON_GetObjectItemCaseSensitive(j, "kind") : NULL;
        if (!cJSON_IsString(k) || strcmp(k->valuestring, "epoch") != 0) {
            cJSON_Delete(j);
            continue;
        }
        *out = vt_realloc(*out, (size_t)(n + 1) * sizeof **out);
        (*out)[n++] = j;
    }
    free(s);
    return n;
}

void vt_metrics_epochs_free(cJSON **lines, int n) {
    for (int i = 0; i < n; i++)
        cJSON_Delete(lines[i]);
    free(lines);
}

int vt_metrics_write_csv(const char *run_dir, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    if (!vt_file_exists(path))
        return 0;
    cJSON **lines = NULL;
    int nlines = vt_metrics_epochs(&lines, run_dir);
    /* Columns: numeric keys of epoch lines in first-seen order. */
    int ncol = 0, cap = 0;
    char **cols = NULL;
    for (int i = 0; i < nlines; i++) {
        const cJSON *j = lines[i];
        for (const cJSON *e = j->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || !e->string)
                continue;
            int have = 0;
            for (int c = 0; c < ncol && !have; c++)
                have = !strcmp(cols[c], e->string);
            if (!have) {
                if (ncol == cap) {
                    cap = cap ? cap * 2 : 32;
                    cols = vt_realloc(cols, (size_t)cap * sizeof *cols);
                }
                cols[ncol++] = vt_strdup(e->string);
            }
        }
    }
    size_t tcap = 4096, tn = 0;
    char *text = vt_malloc(tcap);
    text[0] = 0;
#define EMIT(...)                                                                  \
    do {                                                                           \
        int need_ = snprintf(NULL, 0, __VA_ARGS__);                                \
        while (tn + (size_t)need_ + 1 >= tcap) {                                   \
            tcap *= 2;                                                             \
            text = vt_realloc(text, tcap);                                         \
        }                                                                          \
        tn += (size_t)snprintf(text + tn, tcap - tn, __VA_ARGS__);                 \
    } while (0)
    for (int c = 0; c < ncol; c++)
        EMIT("%s%s", c ? "," : "", cols[c]);
    EMIT("\n");
    for (int i = 0; i < nlines; i++) {
        for (int c = 0; c < ncol; c++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(lines[i], cols[c]);
            if (c)
                EMIT(",");
            if (cJSON_IsNumber(v))
                EMIT("%.8g", v->valuedouble);
        }
        EMIT("\n");
    }
#undef EMIT
    snprintf(path, sizeof path, "%s/metrics.csv", run_dir);
    int rc = vt_write_file_atomic(path, text, err, errlen);
    free(text);
    for (int c = 0; c < ncol; c++)
        free(cols[c]);
    free(cols);
    vt_metrics_epochs_free(lines, nlines);
    return rc;
}

int vt_metrics_append(const char *run_dir, const cJSON *line, char *err, size_t errlen) {
    if (!vt_dist_lead())
        return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    char *s = cJSON_PrintUnformatted(line);
    VT_CHECK(s != NULL, "cJSON_PrintUnformatted failed (out of memory)");
    FILE *f = fopen(path, "a");
    if (!f) {
        vt_set_err(err, errlen, "cannot append to %s: %s", path, strerror(errno));
        cJSON_free(s);
        return -1;
    }
    /* One fputs of a whole line: an interrupted run leaves at most a torn last line,
     * which readers skip (it does not parse). */
    fprintf(f, "%s\n", s);
    cJSON_free(s);
    if (fclose(f) != 0) {
        vt_set_err(err, errlen, "cannot append to %s", path);
        return -1;
    }
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(line, "kind");
    if (cJSON_IsString(k) && !strcmp(k->valuestring, "epoch"))
        return vt_metrics_write_csv(run_dir, err, errlen);
    return 0;
}

int vt_metrics_truncate(const char *run_dir, int64_t keep_step, char *err, size_t errlen) {
    if (!vt_dist_lead())
        return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    char *s = vt_read_file(path);
    if (!s)
        return 0;
    size_t n = strlen(s);
    char *out = vt_malloc(n + 1);
    size_t on = 0;
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
        if (cJSON_IsNumber(st) && (int64_t)st->valuedouble <= keep_step) {
            size_t ln = strlen(l);
            memcpy(out + on, l, ln);
            on += ln;
            out[on++] = '\n';
        }
        cJSON_Delete(j);
    }
    out[on] = 0;
    int rc = vt_write_file_atomic(path, out, err, errlen);
    free(out);
    free(s);
    if (rc == 0)
        rc = vt_metrics_write_csv(run_dir, err, errlen);
    return rc;
}

/* ---- run state in checkpoints ---- */

static char *state_json(const vt_run_state *st) {
    /* %.17g round-trips a double exactly: the resumed epoch's sums continue bit for bit. */
    char buf[4096];
    int n = snprintf(buf, sizeof buf,
                     "{\"epoch\":%lld,\"cursor\":%lld,\"step\":%lld,\"best\":%.17g,"
                     "\"best_loss\":%.17g,\"best_epoch\":%d,\"loss\":%.17g,\"clips\":%lld,"
                     "\"seconds\":%.17g,\"wait_s\":%.17g,\"correct\":[",
                     (long long)st->epoch, (long long)st->cursor, (long long)st->step, st->best,
                     st->best_loss, st->best_epoch, st->sums.loss, (long long)st->sums.clips, st->sums.seconds,
                     st->sums.wait_s);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", h ? "," : "",
                      (long long)st->sums.correct[h]);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "],\"head_loss\":[");
    for (int h = 0; h < VT_MAX_HEADS; h++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%.17g", h ? "," : "", st->sums.head_loss[h]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]}");
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
#undef NUM
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
    if (cfg) {
        const cJSON *seed = cJSON_GetObjectItemCaseSensitive(cfg, "seed");
        if (cJSON_IsString(seed))
            vt_ckpt_meta_set(&m, "seed", seed->valuestring);
        const cJSON *heads = cJSON_GetObjectItemCaseSensitive(cfg, "heads");
        const cJSON *h0 = cJSON_GetArrayItem(heads, 0);
        const cJSON *cl = h0 ? cJSON_GetObjectItemCaseSensitive(h0, "classes") : NULL;
        if (cl) {
            char *s = cJSON_PrintUnformatted(cl);
            vt_ckpt_meta_set(&m, "classes", s);
            cJSON_free(s);
        }
        cJSON_Delete(cfg);
        vt_ckpt_meta_set(&m, "vidtrain_config", config_json);
    }
    vt_clip_cfg cc;
    vt_clip_cfg_default(&cc);
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
    char *text = vt_dist_lead() ? cJSON_PrintUnformatted(j) : NULL;
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

/* ---- a trained model, as eval and predict load it ---- */

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

int vt_run_model_open(vt_run_model *m, const char *run, const char *ckpt, char *err,
                      size_t errlen) {
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

vt_dataset_opts vt_run_dataset_opts(const vt_train_opts *o) {
    return (vt_dataset_opts){.val_split = o->val_dir[0] ? 0 : o->val_split,
                             .lists_dir = o->lists[0] ? o->lists : NULL,
                             .list_fold = o->fold};
}

void vt_run_model_clip(vt_clip_cfg *clip, const vt_run_model *m) {
    const vt_train_opts *o = &m->opts;
    vt_clip_cfg_default(clip);
    clip->t = o->clip_t;
    clip->stride = o->stride;
    clip->crop = o->crop;
    /* Runs record the short side they resolved; the fallback is train's default. */
    clip->short_side = o->short_side ? o->short_side : (o->crop * 8 + 6) / 7;
    clip->ncrops = 1;
    clip->flip = 0;
}

int vt_run_model_load(vt_run_model *m, const vt_device_args *da, const char *policy, int batch,
                      char *err, size_t errlen) {
    const vt_train_opts *o = &m->opts;
    const vt_run_heads *h = &m->heads;
    vt_towers_cfg tc;
    vt_towers_cfg_default(&tc);
    if (vt_devices_from_args(&tc.devices, da, err, errlen) != 0)
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
    tc.seed = o->seed;
    m->towers = vt_towers_init(&tc, err, errlen);
    if (!m->towers)
        return -1;
    return vt_run_load(m->ckpt, m->towers, 0, NULL, err, errlen);
}

void vt_run_model_free(vt_run_model *m) {
    if (!m)
        return;
    vt_towers_free(&m->towers);
    vt_run_heads_free(&m->heads);
}

/* ---- signals ---- */

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    if (g_signal) {
        /* Second signal: the user insists. The checkpoint on disk is whole (written by
         * rename), so leaving now is safe. */
        _exit(128 + sig);
    }
    g_signal = sig;
    static const char msg[] =
        "\nvidtrain: stopping after this step and writing a checkpoint (again to quit now)\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

void vt_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    g_signal = 0;
}

int vt_signal_pending(void) { return g_signal; }

void vt_signals_reset(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    g_signal = 0;
}
