/*
 * dist.c: train and eval across several processes (dist.h) — rank 0's view of the run
 * folder sent to every rank, the agreement of the run-defining options, and each rank's
 * device options kept in config.json for --resume. It must never write a file on a rank
 * other than 0, and never let one rank decide alone what every rank must do.
 */
#include "app/dist.h"

#include <string.h>

#include "app/run/run_files.h"
#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "base/json_str.h"
#include "pipeline/data/dataset/dataset.h"

int vt_dist_lead(void) { return vt_run_lead(); }

/* Rank 0's string (NULL allowed) on every rank; free() the result. */
static char *share_string(const char *mine, const char *what) {
    int64_t len = vt_dist_lead() ? (mine ? (int64_t)strlen(mine) : -1) : 0;
    vt_mpi_bcast(&len, sizeof len, 0, what);
    if (len < 0)
        return NULL;
    char *s = vt_malloc((size_t)len + 1);
    if (vt_dist_lead())
        memcpy(s, mine, (size_t)len);
    vt_mpi_bcast(s, (size_t)len, 0, what);
    s[len] = 0;
    return s;
}

cJSON *vt_dist_read_json(const char *path) {
    if (vt_mpi_size() == 1)
        return vt_file_read_json(path);
    char *text = vt_dist_lead() ? vt_file_read(path) : NULL;
    char *s = share_string(text, "reading a run file on rank 0");
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(text);
    free(s);
    return j;
}

int vt_dist_share_result(int rc, char *err, size_t errlen) {
    if (vt_mpi_size() == 1)
        return rc;
    int32_t r = rc;
    vt_mpi_bcast(&r, sizeof r, 0, "rank 0's result");
    if (r != 0) {
        char *s = share_string(vt_dist_lead() ? err : "", "rank 0's error");
        if (!vt_dist_lead())
            vt_set_err(err, errlen, "on rank 0 (host %s): %s", vt_mpi_host(0), s);
        free(s);
    }
    return r;
}

/* Options that may differ between ranks: devices (each machine has its own), paths (each
 * machine may mount the data elsewhere; the dataset itself is checked by
 * vt_dist_dataset_sync), and decode threads. */
static const char *const local_keys[] = {
    "data", "out", "devices", "gpus", "mem", "gpu_mem", "backend", "emulate", "speeds",
    "threads", "workers", "queue", "val_dir", "lists", "labels", "ranks",
};

int vt_dist_check_opts(const vt_train_opts *o, char *err, size_t errlen) {
    if (vt_mpi_size() == 1)
        return 0;
    cJSON *mine = vt_train_opts_to_json(o);
    for (size_t k = 0; k < VT_ARRAY_LEN(local_keys); k++)
        cJSON_DeleteItemFromObjectCaseSensitive(mine, local_keys[k]);
    char *text = vt_json_print(mine, 0);
    char *s0 = share_string(text, "comparing the ranks' options");
    cJSON *ref = cJSON_Parse(s0);
    /* The first key (in rank 0's order) whose value differs here, or "". */
    char diff[400] = "";
    for (const cJSON *e = ref ? ref->child : NULL; e && !diff[0]; e = e->next) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(mine, e->string);
        if (m && cJSON_Compare(e, m, 1))
            continue;
        char *a = vt_json_print(e, 0), *b = m ? vt_json_print(m, 0) : NULL;
        snprintf(diff, sizeof diff, "%s is %.120s here, %.120s on rank 0", e->string,
                 b ? b : "absent", a);
        cJSON_free(a);
        cJSON_free(b);
    }
    typedef struct verdict { int32_t bad; char why[400]; } verdict;
    verdict me, *all = vt_calloc((size_t)vt_mpi_size(), sizeof *all);
    memset(&me, 0, sizeof me);
    me.bad = diff[0] != 0;
    snprintf(me.why, sizeof me.why, "%s", diff);
    vt_mpi_allgather(&me, all, sizeof me, "comparing the ranks' options");
    int rc = 0;
    for (int q = 0; q < vt_mpi_size() && !rc; q++)
        if (all[q].bad) {
            vt_set_err(err, errlen, "rank %d (host %s) was started with other options than rank "
                       "0: %s. Every rank must train the same run (only device options, paths "
                       "and --workers may differ)", q, vt_mpi_host(q), all[q].why);
            rc = -1;
        }
    free(all);
    cJSON_Delete(ref);
    cJSON_Delete(mine);
    free(s0);
    cJSON_free(text);
    return rc;
}

/* One rank's device options as config.json keeps them. */
typedef struct rank_dev_opts {
#define F(f) char f[sizeof(((vt_train_opts *)0)->f)];
    VT_TRAIN_DEVICE_STRINGS(F)
#undef F
    int32_t threads;
} rank_dev_opts;

void vt_dist_add_rank_devices(cJSON *config, const vt_train_opts *o) {
    int P = vt_mpi_size();
    if (P == 1)
        return;
    rank_dev_opts me, *all = vt_calloc((size_t)P, sizeof *all);
    memset(&me, 0, sizeof me);
#define CP(f) snprintf(me.f, sizeof me.f, "%s", o->f);
    VT_TRAIN_DEVICE_STRINGS(CP)
#undef CP
    me.threads = o->threads;
    vt_mpi_allgather(&me, all, sizeof me, "every rank's device options");
    cJSON *arr = cJSON_AddArrayToObject(config, "ranks");
    for (int q = 0; q < P; q++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "rank", q);
        cJSON_AddStringToObject(e, "host", vt_mpi_host(q));
#define J(f) cJSON_AddStringToObject(e, #f, all[q].f);
        VT_TRAIN_DEVICE_STRINGS(J)
#undef J
        cJSON_AddNumberToObject(e, "threads", all[q].threads);
        cJSON_AddItemToArray(arr, e);
    }
    free(all);
}

void vt_dist_resume_devices(vt_train_opts *o, const cJSON *config) {
    if (vt_mpi_size() == 1)
        return;
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(config, "ranks"),
                                        vt_mpi_rank());
    if (!cJSON_IsObject(e))
        return;
#define G(f)                                                                    \
    do {                                                                        \
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, #f);               \
        if (cJSON_IsString(v))                                                  \
            snprintf(o->f, sizeof o->f, "%s", v->valuestring);                  \
    } while (0);
    VT_TRAIN_DEVICE_STRINGS(G)
#undef G
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "threads");
    if (cJSON_IsNumber(t))
        o->threads = (int)t->valuedouble;
}

/* ---- the dataset on every rank ---- */

typedef struct ds_digest {
    uint64_t hash;
    int32_t nvideos, nlabeled;
} ds_digest;

void vt_dist_dataset_sync(vt_dataset *ds, const char *what) {
    const int g_size = vt_mpi_size();
    if (g_size == 1)
        return;
    /* 1. Same videos, labels and splits: a hash of what decides the epoch order. */
    ds_digest me = {VT_FNV_SEED, ds->nvideos, 0};
    uint64_t h = VT_FNV_SEED;
    h = vt_fnv1a(&ds->nheads, sizeof ds->nheads, h);
    for (int k = 0; k < ds->nheads; k++) {
        h = vt_fnv1a(&ds->heads[k].loss, sizeof ds->heads[k].loss, h);
        for (int c = 0; c < ds->heads[k].nclasses; c++)
            h = vt_fnv1a(ds->heads[k].classes[c], strlen(ds->heads[k].classes[c]) + 1, h);
    }
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        me.nlabeled += v->labeled != 0;
        h = vt_fnv1a(v->relpath, strlen(v->relpath) + 1, h);
        int32_t meta[2] = {v->labeled, (int32_t)v->split};
        h = vt_fnv1a(meta, sizeof meta, h);
        for (int k = 0; k < ds->nheads && v->labeled; k++) {
            if (ds->heads[k].loss == VT_LOSS_SOFTMAX_CE)
                h = vt_fnv1a(&v->label[k], sizeof v->label[k], h);
            else if (v->ntags[k])
                h = vt_fnv1a(v->tags[k], sizeof(int32_t) * (size_t)v->ntags[k], h);
        }
    }
    me.hash = h;
    ds_digest *all = vt_malloc(sizeof *all * (size_t)g_size);
    char w[256];
    snprintf(w, sizeof w, "%s (dataset check)", what);
    vt_mpi_allgather(&me, all, sizeof me, w);
    for (int q = 0; q < g_size; q++)
        if (all[q].hash != all[0].hash)
            vt_mpi_abort(1, "%s: the dataset %s on rank %d (host %s: %d videos, %d labelled) "
                         "differs from rank 0's (host %s: %d videos, %d labelled) in its files, "
                         "labels or splits. Every rank needs the same dataset (a shared folder "
                         "or identical copies at the path given to it)", what, ds->dir, q,
                         vt_mpi_host(q), all[q].nvideos, all[q].nlabeled, vt_mpi_host(0),
                         all[0].nvideos, all[0].nlabeled);
    free(all);
    /* 2. Bad marks: one rank's unreadable video is left out everywhere. */
    int nv = ds->nvideos;
    if (nv == 0)
        return;
    uint8_t *mine = vt_malloc((size_t)nv), *bad = vt_malloc((size_t)nv * (size_t)g_size);
    for (int i = 0; i < nv; i++)
        mine[i] = (uint8_t)vt_dataset_bad(ds, i);
    snprintf(w, sizeof w, "%s (unreadable videos)", what);
    vt_mpi_allgather(mine, bad, (size_t)nv, w);
    for (int q = 0; q < g_size; q++)
        for (int i = 0; i < nv; i++) {
            uint8_t k = bad[(size_t)q * nv + i];
            if (k != VT_BAD_NONE && vt_dataset_bad(ds, i) == VT_BAD_NONE) {
                char why[160];
                snprintf(why, sizeof why, "unreadable on rank %d (host %s), which reported why", q,
                         vt_mpi_host(q));
                vt_dataset_mark_bad(ds, i, (vt_bad_kind)k, why);
            }
        }
    free(mine);
    free(bad);
}
