/*
 * prep_trim.c: `vidtrain prep --trim` — each segment the dataset names (a labels row
 * with start/end, a Kinetics row over an untrimmed video) becomes a job that writes only
 * that segment, to <folder>/<stem>_<start>_<end>.<ext> beside where the whole file would
 * go (times as %06d when whole seconds — the names Kinetics' download scripts give, so
 * the same Kinetics CSV reads DST — else with milliseconds; a name SRC's own files take
 * gets a number: prep_files.c); the source file itself is then not written whole. DST/prep-segments.csv is a labels file over DST naming every
 * labelled sample's output (path, then the heads; no start or end: each file is its
 * segment), so `--labels DST/prep-segments.csv` trains on the trimmed copy.
 *
 * It must never write the labels file in place, never name an output that is not on
 * disk (the file is written at the end of the run, from the manifest: a segment that
 * failed or was not reached is left out and counted), and never drop a sample silently:
 * a segment whose source file is not under SRC is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/prep/prep_cmd.h"
#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"

/* Paths are checked once, at the walk (prep_walk.c). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static int cmp_entry_rel(const void *a, const void *b) {
    const entry *const *x = a, *const *y = b;
    return strcmp((*x)->rel, (*y)->rel);
}

/* The walk's entry for relpath (by a sorted index of pointers), or NULL. */
static entry *find_entry(entry **idx, int n, const char *rel) {
    entry key = {.rel = (char *)rel}, *k = &key;
    entry **p = n ? bsearch(&k, idx, (size_t)n, sizeof *idx, cmp_entry_rel) : NULL;
    return p ? *p : NULL;
}

/* One row of the labels file: out, then each head's class (tags joined by ';'). */
static void put_row_to(FILE *f, const vt_dataset *ds, const vt_dataset_video *v,
                       const char *out) {
    vt_csv_put(f, out, 0);
    for (int h = 0; h < ds->nheads; h++) {
        const vt_dataset_head *hd = &ds->heads[h];
        char cell[4096] = "";
        if (hd->loss == VT_LOSS_SOFTMAX_CE) {
            snprintf(cell, sizeof cell, "%s", hd->classes[v->label[h]]);
        } else {
            size_t k = 0;
            for (int t = 0; t < v->ntags[h] && k < sizeof cell; t++)
                k += (size_t)snprintf(cell + k, sizeof cell - k, "%s%s", t ? ";" : "",
                                      hd->classes[v->tags[h][t]]);
        }
        vt_csv_put(f, cell, h == ds->nheads - 1);
    }
}

/* The row of v (output out) kept in csv. */
static void put_row(trim_csv *csv, const vt_dataset *ds, const vt_dataset_video *v,
                    const char *out) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    put_row_to(f, ds, v, out);
    VT_CHECK(fclose(f) == 0, "building %s in memory failed", SEGMENTS);
    if (csv->n == csv->cap) {
        csv->cap = csv->cap ? 2 * csv->cap : 64;
        csv->out = vt_realloc(csv->out, (size_t)csv->cap * sizeof *csv->out);
        csv->line = vt_realloc(csv->line, (size_t)csv->cap * sizeof *csv->line);
    }
    csv->out[csv->n] = vt_strdup(out);
    csv->line[csv->n++] = text;
}

int prep_trim_entries(entry_list *list, trim_csv *csv, const vt_dataset *ds,
                      const char *codec) {
    const int n0 = list->n;
    entry **idx = vt_malloc((size_t)(n0 ? n0 : 1) * sizeof *idx);
    int *nper = vt_calloc((size_t)(n0 ? n0 : 1), sizeof *nper); /* segments per source */
    int total = 0;
    for (int i = 0; i < n0; i++)
        idx[i] = &list->e[i];
    if (n0 > 1)
        qsort(idx, (size_t)n0, sizeof *idx, cmp_entry_rel);
    for (int i = 0; i < ds->nvideos; i++) {
        entry *src = find_entry(idx, n0, ds->videos[i].relpath);
        if (src && src->video && vt_dataset_is_segment(&ds->videos[i])) {
            nper[src - list->e]++;
            total++;
        }
    }
    /* Room for every segment now: list->e must not move while idx points into it. */
    if (list->n + total > list->cap) {
        list->cap = list->n + total;
        list->e = vt_realloc(list->e, (size_t)list->cap * sizeof *list->e);
        for (int i = 0; i < n0; i++)
            idx[i] = &list->e[i];
        if (n0 > 1)
            qsort(idx, (size_t)n0, sizeof *idx, cmp_entry_rel);
    }
    int nseg = 0, nlost = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    fputs("path", f);
    for (int h = 0; h < ds->nheads; h++) {
        fputc(',', f);
        vt_csv_put(f, ds->heads[h].name, h == ds->nheads - 1);
    }
    VT_CHECK(fclose(f) == 0, "building %s in memory failed", SEGMENTS);
    csv->header = text;
    /* each sample's entry (a whole file's, or its segment's), for the rows: written once
     * every output has a name of its own (prep_unique_outputs) */
    int *of = vt_malloc((size_t)(ds->nvideos ? ds->nvideos : 1) * sizeof *of);
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        entry *src = find_entry(idx, n0, v->relpath);
        of[i] = -1;
        if (!src || !src->video) {
            nlost += vt_dataset_is_segment(v) && v->labeled;
            continue;
        }
        if (!vt_dataset_is_segment(v)) {
            of[i] = (int)(src - list->e);
            continue;
        }
        src->trimmed = 1; /* written as its segments, not whole */
        entry e = {.rel = vt_strdup(v->relpath),
                   .out = prep_segment_name(v->relpath, v->seg_start, v->seg_end, codec),
                   .video = 1, .bytes = src->bytes / VT_MAX(nper[src - list->e], 1),
                   .start = v->seg_start, .end = v->seg_end};
        of[i] = list->n;
        prep_entry_push(list, e); /* within the room made above: nothing moves */
        nseg++;
    }
    prep_unique_outputs(list, codec);
    for (int i = 0; i < ds->nvideos; i++)
        if (of[i] >= 0 && ds->videos[i].labeled)
            put_row(csv, ds, &ds->videos[i], list->e[of[i]].out);
    free(of);
    free(nper);
    free(idx);
    if (nlost)
        fprintf(stderr, "vidtrain prep: %d segments name files that are not videos under SRC "
                "(not written)\n", nlost);
    return nseg;
}

int prep_trim_write(const trim_csv *csv, const char *dst, row_list *rows, int *left,
                    char *err, size_t errlen) {
    char *text = NULL, path[4200];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    fputs(csv->header ? csv->header : "path\n", f);
    *left = 0;
    for (int i = 0; i < csv->n; i++) {
        /* on disk: the manifest's last row for it says ok and the file is there (a failed
         * redo keeps an older copy, whose row then says bad: left out too) */
        const row *w = prep_manifest_find(rows, csv->out[i]);
        snprintf(path, sizeof path, "%s/%s", dst, csv->out[i]);
        if (w && !strcmp(w->f[6], "ok") && access(path, F_OK) == 0)
            fputs(csv->line[i], f);
        else
            (*left)++;
    }
    VT_CHECK(fclose(f) == 0, "building %s in memory failed", SEGMENTS);
    snprintf(path, sizeof path, "%s/" SEGMENTS, dst);
    int rc = vt_file_write_atomic(path, text, len, err, errlen);
    free(text);
    return rc < 0 ? -1 : 0;
}

void prep_trim_csv_free(trim_csv *csv) {
    for (int i = 0; i < csv->n; i++) {
        free(csv->out[i]);
        free(csv->line[i]);
    }
    free(csv->out);
    free(csv->line);
    free(csv->header);
    memset(csv, 0, sizeof *csv);
}
