/*
 * dataset_kinetics.c: Kinetics annotation CSVs (--lists FILE.csv, or a folder of them;
 * format kinetics) — a header naming the columns label, youtube_id, time_start, time_end,
 * split (label and split may be absent: Kinetics-700's test file has no label), one row
 * per clip. The video of a row is looked up anywhere under the dataset folder (class
 * folders, split folders, or loose files) by its name without extension:
 *   <youtube_id>_<time_start:06d>_<time_end:06d>  what the download scripts write, already
 *                                                 cut to the clip: the whole file is the
 *                                                 sample;
 *   <youtube_id>                                  an untrimmed download: the sample is
 *                                                 the segment [time_start, time_end).
 * Classes are the sorted labels of every row read (not only of the rows whose video is
 * there), so a partial download keeps the class ids of the full set. Splits: "train",
 * "val"/"validate", "test"; without a split column, the CSV's file name says it
 * (train.csv, validate.csv, test.csv), else train.
 *
 * A row without a youtube_id or with bad times, or a second row for the same video and
 * segment, is warned about with file:line and skipped; rows whose video is not there are
 * counted in ds->nmissing (the first few warned, then the count). Only an unreadable
 * file or a header without the three columns is an error. It must never abort or read
 * outside the buffers on any file contents.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/nfc.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* A video file under the folder by its stem: (stem, relpath, index in ds->videos, or
 * -1 - i for ds->ignored[i]: a loose file above the class level). */
typedef struct stem_ref {
    char *stem;
    const char *rel;
    int video;
    int used;             /* a row's sample is this file */
} stem_ref;

typedef struct kin_stems {
    stem_ref *s;
    int n, cap;
} kin_stems;

static int cmp_stem(const void *a, const void *b) {
    const stem_ref *x = a, *y = b;
    int c = strcmp(x->stem, y->stem);
    return c ? c : strcmp(x->rel, y->rel);
}

static void stems_push(kin_stems *s, const char *rel, int video) {
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    const char *dot = strrchr(base, '.');
    size_t k = dot ? (size_t)(dot - base) : strlen(base);
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->s = vt_realloc(s->s, (size_t)s->cap * sizeof *s->s);
    }
    char *stem = vt_malloc(k + 1);
    memcpy(stem, base, k);
    stem[k] = 0;
    s->s[s->n++] = (stem_ref){.stem = stem, .rel = rel, .video = video};
}

/* 1 when a folder of rel is named `label` (or the label with '_' for ' '). */
static int in_label_folder(const char *rel, const char *label) {
    size_t n = strlen(label);
    for (const char *p = rel; *p;) {
        const char *e = strchr(p, '/');
        if (!e)
            return 0;
        int same = (size_t)(e - p) == n;
        for (size_t i = 0; same && i < n; i++)
            same = p[i] == label[i] || (label[i] == ' ' && p[i] == '_');
        if (same)
            return 1;
        p = e + 1;
    }
    return 0;
}

/* The file for stem: when several have it (one id in two class folders), the one in a
 * folder named by the label, else the first. */
static stem_ref *find_stem(stem_ref *s, int n, const char *stem, const char *label) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(s[mid].stem, stem) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo >= n || strcmp(s[lo].stem, stem))
        return NULL;
    for (int i = lo; label[0] && i < n && !strcmp(s[i].stem, stem); i++)
        if (in_label_folder(s[i].rel, label))
            return &s[i];
    return &s[lo];
}

/* One row whose video is there, until the entries are made. */
typedef struct kin_row {
    stem_ref *file;
    double start, end;    /* the segment; 0, 0: the whole (trimmed) file */
    vt_split split;
    char *label;          /* "" : none */
    int csv, line;        /* which CSV (index into the list read) and line, for messages */
} kin_row;

typedef struct kin_ctx {
    vt_dataset *ds;
    kin_stems stems;      /* sorted by stem */
    vt_ds_strv labels;   /* every row's label, for the classes */
    kin_row *rows;
    int nrows, cap;
} kin_ctx;

/* Columns of a header: label, youtube_id, time_start, time_end, split (-1: absent). */
typedef struct kin_cols {
    int label, id, start, end, split;
} kin_cols;

static int col_of(const vt_ds_strv *h, const char *name) {
    for (int i = 0; i < h->n; i++)
        if (!strcasecmp(h->s[i], name))
            return i;
    return -1;
}

static vt_split split_of(const char *cell, const char *csv_path) {
    if (cell && *cell) {
        if (!strcasecmp(cell, "train"))
            return VT_SPLIT_TRAIN;
        if (!strncasecmp(cell, "val", 3))
            return VT_SPLIT_VAL;
        if (!strcasecmp(cell, "test"))
            return VT_SPLIT_TEST;
        return VT_SPLIT_NONE;
    }
    const char *base = strrchr(csv_path, '/');
    base = base ? base + 1 : csv_path;
    return strstr(base, "val") ? VT_SPLIT_VAL : strstr(base, "test") ? VT_SPLIT_TEST
                                                                      : VT_SPLIT_TRAIN;
}

/* One row: its label kept for the classes, its video looked up (trimmed name first). */
static void read_row(kin_ctx *k, const kin_cols *c, const vt_ds_strv *cells,
                     const char *csv_path, int csv, int lineno) {
    const char *id = cells->s[c->id];
    const char *label = c->label >= 0 ? cells->s[c->label] : "";
    double t0, t1;
    if (!id[0] || vt_ds_parse_seconds(cells->s[c->start], &t0) ||
        vt_ds_parse_seconds(cells->s[c->end], &t1) || t1 <= t0 || t1 > 1e9) {
        vt_warn("%s:%d: expected a youtube_id and time_start < time_end in seconds; line "
                "skipped\n", csv_path, lineno);
        return;
    }
    if (label[0]) /* in Unicode NFC, as class folders are (base/nfc.h) */
        vt_ds_strv_push(&k->labels, vt_nfc(label));
    char stem[1200];
    snprintf(stem, sizeof stem, "%s_%06d_%06d", id, (int)t0, (int)t1);
    stem_ref *f = find_stem(k->stems.s, k->stems.n, stem, label);
    int segment = 0;
    if (!f) {
        f = find_stem(k->stems.s, k->stems.n, id, label);
        segment = 1;
    }
    if (!f) {
        char what[1300];
        snprintf(what, sizeof what, "%s.* (or untrimmed %s.*)", stem, id);
        vt_ds_missing(k->ds, csv_path, lineno, what);
        return;
    }
    if (k->nrows == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 256;
        k->rows = vt_realloc(k->rows, (size_t)k->cap * sizeof *k->rows);
    }
    k->rows[k->nrows++] = (kin_row){
        .file = f, .start = segment ? t0 : 0, .end = segment ? t1 : 0,
        .split = split_of(c->split >= 0 ? cells->s[c->split] : NULL, csv_path),
        .label = vt_nfc(label), .csv = csv, .line = lineno};
}

/* Reads one CSV. 0, or -1 with err set (unreadable, a header without the columns). */
static int read_csv(kin_ctx *k, const char *path, int csv, char *err, size_t errlen) {
    char *text = vt_ds_read_text(path, err, errlen);
    if (!text) {
        return -1;
    }
    /* A UTF-8 byte-order mark (spreadsheet exports) would glue itself to "label". */
    vt_ds_csv rd = {.cur = strncmp(text, "\xef\xbb\xbf", 3) ? text : text + 3};
    int rc = -1;
    vt_ds_strv header = {0};
    char *line = vt_ds_csv_next(&rd, path, err, errlen);
    if (rd.unclosed)
        goto end;
    if (line)
        vt_ds_csv_fields(&header, line);
    kin_cols c = {col_of(&header, "label"), col_of(&header, "youtube_id"),
                  col_of(&header, "time_start"), col_of(&header, "time_end"),
                  col_of(&header, "split")};
    if (c.id < 0 || c.start < 0 || c.end < 0) {
        vt_set_err(err, errlen, "%s: expected a header with youtube_id, time_start, time_end "
                   "(Kinetics: label,youtube_id,time_start,time_end,split)", path);
        goto end;
    }
    while ((line = vt_ds_csv_next(&rd, path, err, errlen)) != NULL) {
        vt_ds_strv cells = {0};
        if (vt_ds_csv_fields(&cells, line) != header.n)
            vt_warn("%s:%d: %d columns, the header has %d; line skipped\n", path, rd.at,
                    cells.n, header.n);
        else
            read_row(k, &c, &cells, path, csv, rd.at);
        vt_ds_strv_free(&cells);
    }
    rc = rd.unclosed ? -1 : 0;
end:
    vt_ds_strv_free(&header);
    free(text);
    return rc;
}

/* Rows by (file, segment): equal keys are one sample named twice. */
static int cmp_row_key(const kin_row *x, const kin_row *y) {
    int c = strcmp(x->file->rel, y->file->rel);
    if (c)
        return c;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* ... then in file order: a duplicate follows its first row. */
static int cmp_row(const void *a, const void *b) {
    const kin_row *x = a, *y = b;
    int c = cmp_row_key(x, y);
    return c ? c : x->csv != y->csv ? x->csv - y->csv : x->line - y->line;
}

/* The CSVs to read: the file, or every Kinetics .csv of the folder, sorted. */
static void csv_list(vt_ds_strv *out, const char *path) {
    if (!vt_dir_exists(path)) {
        vt_ds_strv_push(out, vt_strdup(path));
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *dot = strrchr(e->d_name, '.');
        if (e->d_name[0] != '.' && dot && !strcasecmp(dot, ".csv"))
            vt_ds_strv_push(out, vt_ds_join_path(path, e->d_name));
    }
    if (d)
        closedir(d);
    if (out->n > 1)
        qsort(out->s, (size_t)out->n, sizeof *out->s, vt_ds_cmp_str);
}

/* The entries from the rows: the first row of a scanned file takes its entry, every
 * other row (another segment of an untrimmed video, a loose file) gets a new one. */
static void make_entries(kin_ctx *k, const vt_ds_strv *csvs) {
    vt_dataset *ds = k->ds;
    int nscanned = ds->nvideos;
    uint8_t *taken = vt_calloc((size_t)(nscanned ? nscanned : 1), 1);
    const vt_dataset_head *h = &ds->heads[0];
    /* first: the row that took the sample; a third copy cites it, not the skipped second. */
    for (int i = 0, first = 0; i < k->nrows; i++) {
        const kin_row *r = &k->rows[i];
        if (i > 0 && !cmp_row_key(&k->rows[first], r)) {
            vt_warn("%s:%d: another row for %s [%g-%g] (first at %s:%d); line skipped\n",
                    csvs->s[r->csv], r->line, r->file->rel, r->start, r->end,
                    csvs->s[k->rows[first].csv], k->rows[first].line);
            continue;
        }
        first = i;
        int e = r->file->video; /* < 0: a loose file, no entry yet */
        if (e < 0 || taken[e])
            e = vt_ds_add_video(ds, r->file->rel);
        else
            taken[e] = 1;
        r->file->used = 1;
        vt_dataset_video *v = &ds->videos[e];
        v->seg_start = r->start;
        v->seg_end = r->end;
        v->split = r->split;
        vt_ds_set_video_class(v, r->label[0] ? vt_ds_find_sorted(h->classes, h->nclasses,
                                                                 r->label) : -1);
    }
    free(taken);
}

/* Loose video files (above the class level) that rows made samples of leave ds->ignored. */
static void unignore_used(kin_ctx *k) {
    vt_dataset *ds = k->ds;
    uint8_t *drop = vt_calloc((size_t)ds->nignored + 1, 1);
    for (int j = 0; j < k->stems.n; j++)
        if (k->stems.s[j].video < 0 && k->stems.s[j].used)
            drop[-1 - k->stems.s[j].video] = 1;
    vt_ds_drop_ignored(ds, drop);
}

int vt_ds_apply_kinetics(vt_dataset *ds, const char *path, char *err, size_t errlen) {
    kin_ctx k = {.ds = ds};
    vt_ds_strv csvs = {0};
    int rc = -1;
    for (int i = 0; i < ds->nvideos; i++) {
        stems_push(&k.stems, ds->videos[i].relpath, i);
        ds->videos[i].split = VT_SPLIT_NONE;
        vt_ds_video_free_labels(&ds->videos[i]);
    }
    int nloose = 0;
    for (int i = 0; i < ds->nignored; i++)
        if (vt_is_video_name(ds->ignored[i])) {
            stems_push(&k.stems, ds->ignored[i], -1 - i);
            nloose++;
        }
    if (k.stems.n > 1)
        qsort(k.stems.s, (size_t)k.stems.n, sizeof *k.stems.s, cmp_stem);
    csv_list(&csvs, path);
    if (csvs.n == 0) {
        vt_set_err(err, errlen, "%s: no .csv files", path);
        goto end;
    }
    for (int i = 0; i < csvs.n; i++)
        if (read_csv(&k, csvs.s[i], i, err, errlen) != 0)
            goto end;
    if (k.labels.n == 0) {
        vt_set_err(err, errlen, "%s: no row with a label (a Kinetics CSV needs the label "
                   "column to train or evaluate)", path);
        goto end;
    }
    vt_dataset_head *h = &ds->heads[0];
    h->classes = vt_ds_unique_sorted(k.labels.s, k.labels.n, &h->nclasses);
    snprintf(h->name, sizeof h->name, "class");
    h->loss = VT_LOSS_SOFTMAX_CE;
    ds->nheads = 1;
    if (k.nrows > 1)
        qsort(k.rows, (size_t)k.nrows, sizeof *k.rows, cmp_row);
    make_entries(&k, &csvs);
    if (nloose)
        unignore_used(&k);
    rc = 0;
end:
    for (int i = 0; i < k.nrows; i++)
        free(k.rows[i].label);
    free(k.rows);
    for (int i = 0; i < k.stems.n; i++)
        free(k.stems.s[i].stem);
    free(k.stems.s);
    vt_ds_strv_free(&k.labels);
    vt_ds_strv_free(&csvs);
    return rc;
}
