/*
 * run_heads.c: the heads' JSON form (run_heads.h). It must never keep a half-read list:
 * a bad entry frees what was read and returns an error naming the head.
 */
#include "app/run/run_heads.h"

#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "base/nfc.h"

static void read_float(const cJSON *j, const char *k, float *dst) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    if (cJSON_IsNumber(v))
        *dst = (float)v->valuedouble;
}

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

/* A run's class names (k) in Unicode NFC, as a dataset's are (base/nfc.h), so a run from
 * before names were composed still meets its folders. Not where two of them would become
 * one (a run that learnt "café" twice, from a Mac's folder and a typed one): its outputs
 * keep their names as they were. */
static void nfc_names(char **names, int k) {
    char **c = vt_malloc((size_t)(k ? k : 1) * sizeof *c);
    int twice = 0;
    for (int i = 0; i < k; i++) {
        c[i] = vt_nfc(names[i]);
        for (int j = 0; j < i && !twice; j++)
            twice = !strcmp(c[i], c[j]);
    }
    for (int i = 0; i < k; i++) {
        if (twice) {
            free(c[i]);
            continue;
        }
        free(names[i]);
        names[i] = c[i];
    }
    free(c);
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
        /* a loss this vidtrain does not know was read as softmax, a class name that is not
         * a string as "?", a name twice as two classes (eval put every video of it under
         * the first): a damaged or hand-edited list, or a newer vidtrain's */
        char twice[256];
        const char *why = strcmp(ls->valuestring, "bce") && strcmp(ls->valuestring, "softmax")
                              ? "its loss is neither softmax nor bce" : NULL;
        for (int k2 = 0; k2 < i && !why; k2++)
            if (!strcmp(h->cfg[k2].name, nm->valuestring))
                why = "another head has its name";
        for (const cJSON *e = cl->child; e && !why; e = e->next) {
            if (!cJSON_IsString(e))
                why = "a class name is not a string";
            for (const cJSON *d = cl->child; d != e && !why; d = d->next)
                if (!strcmp(d->valuestring, e->valuestring)) {
                    snprintf(twice, sizeof twice, "class '%.200s' is there twice", d->valuestring);
                    why = twice;
                }
        }
        if (why) {
            vt_set_err(err, errlen, "head %d ('%s'): %s: a damaged or hand-edited list, or one "
                       "from another vidtrain", i, nm->valuestring, why);
            vt_run_heads_free(h);
            return -1;
        }
        snprintf(h->cfg[i].name, sizeof h->cfg[i].name, "%s", nm->valuestring);
        h->cfg[i].loss = !strcmp(ls->valuestring, "bce") ? VT_LOSS_BCE : VT_LOSS_SOFTMAX_CE;
        h->cfg[i].classes = k;
        h->cfg[i].weight = 1;
        read_float(o, "weight", &h->cfg[i].weight);
        read_float(o, "smoothing", &h->cfg[i].smoothing);
        h->classes[i] = vt_calloc((size_t)k, sizeof(char *));
        h->n++;
        int c = 0;
        for (const cJSON *e = cl->child; e; e = e->next, c++)
            h->classes[i][c] = vt_strdup(e->valuestring);
        nfc_names(h->classes[i], k);
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
