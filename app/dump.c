/*
 * dump.c: the training dump for the PyTorch twin (dump.h). Plain files, written as the
 * run goes: float32 arrays in native (little-endian) order and one JSON line per batch.
 * It must never change what training computes: it only reads batches and outputs.
 */
#include "app/dump.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/run_files.h"
#include "base/common.h"
#include "base/json_str.h"

struct vt_dump {
    char dir[2048];
    int ntrain, neval;
};

/* Plain writes, not vt_file_write_atomic: a dump is read after the run, and a sync per
 * batch would slow down the very run it records. */
static int write_f32(const char *path, const float *x, size_t n, char *err, size_t errlen) {
    if (vt_output_check(path, err, errlen) != 0) /* the output rule (base/common.h) */
        return -1;
    FILE *f = fopen(path, "wb");
    if (!f) {
        vt_set_err(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t w = fwrite(x, sizeof(float), n, f);
    int rc = fclose(f);
    if (w != n || rc != 0) {
        vt_set_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        remove(path); /* no cut-short array under its name (the line naming it is not
                       * written either) */
        return -1;
    }
    return 0;
}

static int append_line(const vt_dump *d, const char *name, cJSON *j, char *err, size_t errlen) {
    char path[2200];
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    char *s = vt_json_print(j, 0);
    VT_CHECK_MEM(s != NULL, "a JSON text");
    size_t n = strlen(s);
    char *l = vt_malloc(n + 2);
    memcpy(l, s, n);
    l[n] = '\n';
    cJSON_free(s);
    int rc = vt_file_append(path, l, n + 1, err, errlen);
    free(l);
    return rc;
}

static cJSON *shape_json(const vt_batch *b) {
    int s[5] = {b->n, 3, b->t, b->h, b->w};
    return cJSON_CreateIntArray(s, 5);
}

static cJSON *labels_json(const vt_batch *b) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < b->n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(b->label[0] ? b->label[0][i] : -1));
    return a;
}

vt_dump *vt_dump_open(const char *dir, const char *info_json, char *err, size_t errlen) {
    char path[2200];
    snprintf(path, sizeof path, "%s/dump.json", dir);
    /* the output rule before any folder is made: DIR inside the dataset is refused, not
     * left behind there as an empty class folder */
    if (vt_output_check(path, err, errlen) != 0 || vt_run_mkdirs(dir, err, errlen) != 0)
        return NULL;
    vt_dump *d = vt_calloc(1, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    static const char *const stale[] = {"train.jsonl", "eval.jsonl"};
    for (size_t i = 0; i < VT_ARRAY_LEN(stale); i++) { /* lines are appended: start empty */
        snprintf(path, sizeof path, "%s/%s", dir, stale[i]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/dump.json", dir);
    if (vt_run_write_file(path, info_json, err, errlen) != 0) {
        free(d);
        return NULL;
    }
    return d;
}

void vt_dump_close(vt_dump **d) {
    if (!d || !*d)
        return;
    free(*d);
    *d = NULL;
}

const char *vt_dump_dir(const vt_dump *d) { return d->dir; }

int vt_dump_train(vt_dump *d, const vt_batch *b, long long step, double lr, double momentum,
                  double loss, uint64_t drop_seed, const vt_mix_draw *mix, char *err,
                  size_t errlen) {
    char name[64], path[2200];
    snprintf(name, sizeof name, "train_%06d.f32", ++d->ntrain);
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    if (write_f32(path, b->x, (size_t)(b->n * vt_batch_clip_floats(b)), err, errlen) != 0)
        return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "step", (double)step);
    cJSON_AddStringToObject(j, "file", name);
    cJSON_AddItemToObject(j, "shape", shape_json(b));
    cJSON_AddItemToObject(j, "labels", labels_json(b));
    cJSON_AddNumberToObject(j, "lr", lr);
    cJSON_AddNumberToObject(j, "momentum", momentum);
    cJSON_AddNumberToObject(j, "loss", loss);
    char ds[32]; /* 64 bits: a JSON number (a double) would round it */
    snprintf(ds, sizeof ds, "%llu", (unsigned long long)drop_seed);
    cJSON_AddStringToObject(j, "drop_seed", ds);
    if (mix) {
        double m[6] = {mix->kind, mix->lam, mix->y0, mix->y1, mix->x0, mix->x1};
        cJSON_AddItemToObject(j, "mix", cJSON_CreateDoubleArray(m, 6));
    }
    cJSON_AddItemToObject(j, "videos", cJSON_CreateIntArray(b->video, b->n));
    cJSON *w = cJSON_AddArrayToObject(j, "where");
    for (int i = 0; i < b->n; i++) {
        const vt_clip_params *p = &b->where[i];
        int v[6] = {(int)p->start, p->short_side, p->x0, p->y0, p->flip, p->stride};
        cJSON_AddItemToArray(w, cJSON_CreateIntArray(v, 6));
    }
    cJSON *col = cJSON_AddArrayToObject(j, "color"); /* [contrast, brightness] per clip */
    for (int i = 0; i < b->n; i++) {
        float cb[2] = {b->where[i].contrast, b->where[i].brightness};
        cJSON_AddItemToArray(col, cJSON_CreateFloatArray(cb, 2));
    }
    int rc = append_line(d, "train.jsonl", j, err, errlen);
    cJSON_Delete(j);
    return rc;
}

int vt_dump_eval(vt_dump *d, const vt_batch *b, const float *probs, int classes, char *err,
                 size_t errlen) {
    char name[64], pname[64], path[2200];
    snprintf(name, sizeof name, "eval_%06d.f32", ++d->neval);
    snprintf(pname, sizeof pname, "eval_%06d.probs.f32", d->neval);
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    if (write_f32(path, b->x, (size_t)(b->n * vt_batch_clip_floats(b)), err, errlen) != 0)
        return -1;
    snprintf(path, sizeof path, "%s/%s", d->dir, pname);
    if (write_f32(path, probs, (size_t)b->n * (size_t)classes, err, errlen) != 0)
        return -1;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "file", name);
    cJSON_AddStringToObject(j, "probs", pname);
    cJSON_AddItemToObject(j, "shape", shape_json(b));
    cJSON_AddItemToObject(j, "labels", labels_json(b));
    cJSON_AddNumberToObject(j, "classes", classes);
    int rc = append_line(d, "eval.jsonl", j, err, errlen);
    cJSON_Delete(j);
    return rc;
}
