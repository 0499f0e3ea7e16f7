/*
 * metrics.c: RUN/metrics.jsonl and RUN/metrics.csv (metrics.h). A line is appended with
 * one write, so an interrupted run leaves at most a torn last line, which every reader
 * here skips; the CSV and a truncated jsonl are replaced atomically. It must never
 * write on a rank other than 0.
 */
#include "app/eval/metrics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app/dist.h"
#include "app/run/run_files.h"
#include "app/eval/tensorboard.h"
#include "base/common.h"
#include "base/csv.h"
#include "base/json_str.h"

int vt_metrics_epochs(cJSON ***out, const char *run_dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    *out = NULL;
    char *s = vt_file_read(path);
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
    /* the header through the one CSV writer: a head's name (a --labels column) may hold
     * a comma or a quote */
    char *hdr = NULL;
    size_t hlen = 0;
    FILE *hf = open_memstream(&hdr, &hlen);
    VT_CHECK_MEM(hf != NULL, "a text built in memory");
    for (int c = 0; c < ncol; c++)
        vt_csv_put(hf, cols[c], c == ncol - 1);
    VT_CHECK(fclose(hf) == 0, "building the metrics.csv header in memory failed");
    EMIT("%s", ncol ? hdr : "\n");
    free(hdr);
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
    int rc = vt_run_write_file(path, text, err, errlen);
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
    char *s = vt_json_print(line, 0);
    VT_CHECK_MEM(s != NULL, "a JSON text");
    /* One write of a whole line (vt_file_append): an interrupted run leaves at most a
     * torn last line, which readers skip (it does not parse); a full disk leaves none. */
    size_t n = strlen(s);
    char *l = vt_malloc(n + 2);
    memcpy(l, s, n);
    l[n] = '\n';
    l[n + 1] = 0;
    cJSON_free(s);
    int rc = vt_file_append(path, l, n + 1, err, errlen);
    free(l);
    if (rc != 0)
        return -1;
    vt_tb_metrics(run_dir, line); /* the same numbers for TensorBoard (RUN/tb/) */
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
    char *s = vt_file_read(path);
    if (!s)
        return 0;
    size_t n = strlen(s);
    char *out = vt_malloc(n + 1);
    size_t on = 0;
    int dropped = 0;
    char *save = NULL;
    for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
        if (cJSON_IsNumber(st) && (int64_t)st->valuedouble <= keep_step) {
            size_t ln = strlen(l);
            memcpy(out + on, l, ln);
            on += ln;
            out[on++] = '\n';
        } else {
            dropped++;
        }
        cJSON_Delete(j);
    }
    out[on] = 0;
    int rc = vt_run_write_file(path, out, err, errlen);
    free(out);
    free(s);
    if (rc == 0)
        rc = vt_metrics_write_csv(run_dir, err, errlen);
    return rc == 0 ? dropped : -1;
}
