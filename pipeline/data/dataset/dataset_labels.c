/*
 * dataset_labels.c: multi-head labels from a CSV (--labels labels.csv; the format is in
 * dataset.h at vt_dataset_load_labels) — RFC 4180 fields, one softmax or multi-label
 * (';'-separated tags) head per column, rows naming files the scan did not list added
 * when they exist under the folder, and --val-split redone on the new first head.
 *
 * A bad line (wrong column count, empty path, unknown or duplicate path, an empty
 * single-label cell) is warned about with file:line, counted and skipped; only an
 * unreadable file, a missing header, more than VT_MAX_HEADS columns or no valid row is
 * an error. It must never abort or read outside the buffers on any file contents.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/nfc.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* ';'-separated tags of a cell, trimmed, empties dropped. */
static void split_tags(vt_ds_strv *out, const char *cell) {
    const char *p = cell;
    while (*p) {
        const char *e = strchr(p, ';');
        if (!e)
            e = p + strlen(p);
        while (p < e && isspace((unsigned char)*p))
            p++;
        const char *q = e;
        while (q > p && isspace((unsigned char)q[-1]))
            q--;
        if (q > p) {
            char *t = vt_malloc((size_t)(q - p) + 1);
            memcpy(t, p, (size_t)(q - p));
            t[q - p] = 0;
            vt_ds_strv_push(out, t);
        }
        p = *e ? e + 1 : e;
    }
}

/* A CSV path as the scan spells it: "./a//b/./c.mp4" -> "a/b/c.mp4" (empty and "."
 * components dropped, a leading '/' too: paths are relative to the folder), so one file
 * is one video whatever the spelling. -1 when a ".." component would leave the folder
 * (s untouched then); "" when nothing is left. */
static int normalize_relpath(char *s) {
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.')
            return -1;
        p += n + (e != NULL);
    }
    char *w = s;
    for (const char *p = s; *p;) {
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && !(n == 1 && p[0] == '.')) {
            if (w != s)
                *w++ = '/';
            memmove(w, p, n);
            w += n;
        }
        p += n + (e != NULL);
    }
    *w = 0;
    return 0;
}

typedef struct csv_row {
    int line;
    int video;  /* dataset index */
    int ok;
    vt_ds_strv cells; /* [0] = path, then the heads (start and end taken out) */
    double start, end; /* the segment; 0, 0: the whole file */
} csv_row;

static void strv_remove(vt_ds_strv *v, int i) {
    free(v->s[i]);
    memmove(v->s + i, v->s + i + 1, (size_t)(v->n - i - 1) * sizeof *v->s);
    v->n--;
}

/* The segment columns "start" and "end" of a header (after the path), taken out of it:
 * *cs, *ce their positions in the file (0: none). -1 when only one of them is there. */
static int take_segment_cols(vt_ds_strv *header, int *cs, int *ce) {
    *cs = *ce = 0;
    for (int c = 1; c < header->n; c++) {
        if (!strcasecmp(header->s[c], "start"))
            *cs = c;
        if (!strcasecmp(header->s[c], "end"))
            *ce = c;
    }
    if (!*cs != !*ce)
        return -1;
    if (*cs) {
        strv_remove(header, VT_MAX(*cs, *ce));
        strv_remove(header, VT_MIN(*cs, *ce));
    }
    return 0;
}

/* A row's segment cells into r->start/end, taken out of its cells: both empty = the
 * whole file. 0, or -1 (not numbers, end <= start, only one given). */
static int take_segment(csv_row *r, int cs, int ce) {
    const char *a = r->cells.s[cs], *b = r->cells.s[ce];
    int rc = 0;
    if (a[0] || b[0])
        rc = vt_ds_parse_seconds(a, &r->start) || vt_ds_parse_seconds(b, &r->end) ||
                     r->end <= r->start ? -1 : 0;
    strv_remove(&r->cells, VT_MAX(cs, ce));
    strv_remove(&r->cells, VT_MIN(cs, ce));
    return rc;
}

/* Each valid row its own entry: the first row of a path takes the scanned entry, every
 * further one (another segment of the file) a new entry. */
static void rows_to_entries(vt_dataset *ds, csv_row *rows, int nrows) {
    uint8_t *taken = vt_calloc((size_t)ds->nvideos + 1, 1);
    const int n0 = ds->nvideos;
    for (int i = 0; i < nrows; i++) {
        csv_row *r = &rows[i];
        if (!r->ok)
            continue;
        if (taken[r->video])
            r->video = vt_ds_add_video(ds, r->cells.s[0]);
        else if (r->video < n0)
            taken[r->video] = 1;
        ds->videos[r->video].seg_start = r->start;
        ds->videos[r->video].seg_end = r->end;
    }
    free(taken);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_video_rel(const void *a, const void *b) {
    return strcmp(((const vt_dataset_video *)a)->relpath, ((const vt_dataset_video *)b)->relpath);
}

/* The last `added` entries of ds->videos, files the rows named that the scan had left out
 * (loose videos above the class level), leave ds->ignored: they are samples now, and
 * train, scan and eval count what is left there as "left out" (as the Kinetics reader
 * does with the loose files its rows take). ds->ignored is sorted (vt_dataset_open) and
 * stays so. */
static void unignore(vt_dataset *ds, int added) {
    if (ds->nignored == 0)
        return;
    uint8_t *drop = vt_calloc((size_t)ds->nignored, 1);
    for (int k = ds->nvideos - added; k < ds->nvideos; k++) {
        const char *rel = ds->videos[k].relpath;
        char **hit = bsearch(&rel, ds->ignored, (size_t)ds->nignored, sizeof *ds->ignored,
                             vt_ds_cmp_str);
        if (hit)
            drop[hit - ds->ignored] = 1;
    }
    vt_ds_drop_ignored(ds, drop);
}

int vt_dataset_load_labels(vt_dataset *ds, const char *csv_path, int *nbad, char *err,
                           size_t errlen) {
    int rc = -1, bad = 0, nrows = 0, ncols = 0;
    csv_row *rows = NULL;
    vt_ds_strv header = {0};
    vt_inputs_add(csv_path); /* no output of the command may replace it (base/common.h) */
    char *text = vt_ds_read_text(csv_path, err, errlen);
    if (!text) {
        goto end;
    }
    vt_ds_csv rd = {.cur = text};
    char *line = vt_ds_csv_next(&rd, csv_path, err, errlen);
    if (rd.unclosed)
        goto end;
    if (!line || vt_ds_csv_fields(&header, line) < 2) {
        vt_set_err(err, errlen, "%s: expected a header row \"path,head1[,head2...]\"", csv_path);
        goto end;
    }
    const int ncols_file = header.n;
    int cs, ce;
    if (take_segment_cols(&header, &cs, &ce) != 0) {
        vt_set_err(err, errlen, "%s: a 'start' column needs an 'end' column and the other way "
                   "round (a segment in seconds)", csv_path);
        goto end;
    }
    ncols = header.n;
    if (ncols < 2) {
        vt_set_err(err, errlen, "%s: no label column besides path, start and end", csv_path);
        goto end;
    }
    if (ncols - 1 > VT_MAX_HEADS) {
        vt_set_err(err, errlen, "%s: %d label columns, at most %d heads", csv_path, ncols - 1,
                   VT_MAX_HEADS);
        goto end;
    }

    /* Pass 1: structure. Rows naming an unscanned file that exists are added. */
    int cap = 0;
    while ((line = vt_ds_csv_next(&rd, csv_path, err, errlen)) != NULL) {
        const int at = rd.at;
        if (nrows == cap) {
            cap = cap ? 2 * cap : 64;
            rows = vt_realloc(rows, (size_t)cap * sizeof *rows);
        }
        csv_row *r = &rows[nrows++];
        memset(r, 0, sizeof *r);
        r->line = at;
        r->video = -1;
        if (vt_ds_csv_fields(&r->cells, line) != ncols_file) {
            vt_warn("%s:%d: %d columns, the header has %d; line skipped\n", csv_path, at,
                    r->cells.n, ncols_file);
            bad++;
            continue;
        }
        if (cs && take_segment(r, cs, ce) != 0) {
            vt_warn("%s:%d: start and end must be seconds with start < end (or both empty: "
                    "the whole file); line skipped\n", csv_path, at);
            bad++;
            continue;
        }
        if (normalize_relpath(r->cells.s[0]) != 0) {
            vt_warn("%s:%d: path '%s' leaves the dataset folder (..); line skipped\n",
                    csv_path, at, r->cells.s[0]);
            bad++;
            continue;
        }
        if (!r->cells.s[0][0]) {
            vt_warn("%s:%d: empty path; line skipped\n", csv_path, at);
            bad++;
            continue;
        }
        r->ok = 1;
    }
    if (rd.unclosed)
        goto end;
    /* Add files that exist but were not scanned (e.g. a flat folder of videos). Videos
     * added here go to the end, unsorted until the qsort below: the binary search must
     * see only the sorted scan, and `dup` covers the added ones. */
    int added = 0;
    const int nscanned = ds->nvideos;
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].ok || vt_ds_find_video_in(ds->videos, nscanned, rows[i].cells.s[0]) >= 0)
            continue;
        char *abs = vt_ds_join_path(ds->dir, rows[i].cells.s[0]);
        int exists = vt_is_video_name(rows[i].cells.s[0]) && vt_file_exists(abs);
        int dup = 0;
        for (int k = ds->nvideos - added; k < ds->nvideos; k++)
            dup |= !strcmp(ds->videos[k].relpath, rows[i].cells.s[0]);
        if (exists && !dup) {
            ds->videos = vt_realloc(ds->videos, (size_t)(ds->nvideos + 1) * sizeof *ds->videos);
            vt_dataset_video *v = &ds->videos[ds->nvideos++];
            memset(v, 0, sizeof *v);
            v->relpath = vt_strdup(rows[i].cells.s[0]);
            v->path = abs;
            v->split = VT_SPLIT_TRAIN;
            added++;
        } else {
            free(abs);
        }
    }
    if (added)
        unignore(ds, added);
    if (added)
        qsort(ds->videos, (size_t)ds->nvideos, sizeof *ds->videos, cmp_video_rel);
    for (int i = 0; i < nrows; i++) {
        csv_row *r = &rows[i];
        if (!r->ok)
            continue;
        r->video = vt_ds_find_video_first(ds, r->cells.s[0]);
        if (r->video < 0) {
            vt_warn("%s:%d: %s is not a video under %s; line skipped\n", csv_path, r->line,
                    r->cells.s[0], ds->dir);
            r->ok = 0;
            bad++;
            continue;
        }
        for (int k = 0; k < i; k++)
            if (rows[k].ok && rows[k].video == r->video && rows[k].start == r->start &&
                rows[k].end == r->end) {
                vt_warn("%s:%d: second row for %s%s (first at line %d); line skipped\n",
                        csv_path, r->line, r->cells.s[0], r->end > 0 ? " and this segment" : "",
                        rows[k].line);
                r->ok = 0;
                bad++;
                break;
            }
    }

    /* Column kinds: multi-label when any valid cell holds a ';'. */
    vt_loss_kind kind[VT_MAX_HEADS];
    for (int c = 1; c < ncols; c++) {
        kind[c - 1] = VT_LOSS_SOFTMAX_CE;
        for (int i = 0; i < nrows; i++)
            if (rows[i].ok && strchr(rows[i].cells.s[c], ';'))
                kind[c - 1] = VT_LOSS_BCE;
    }
    /* Pass 2: a softmax cell must hold one non-empty class. */
    for (int i = 0; i < nrows; i++) {
        if (!rows[i].ok)
            continue;
        for (int c = 1; c < ncols; c++)
            if (kind[c - 1] == VT_LOSS_SOFTMAX_CE && !rows[i].cells.s[c][0]) {
                vt_warn("%s:%d: empty '%s' (a single-label column); line skipped\n", csv_path,
                        rows[i].line, header.s[c]);
                rows[i].ok = 0;
                bad++;
                break;
            }
    }
    int nok = 0;
    for (int i = 0; i < nrows; i++)
        nok += rows[i].ok;
    if (nok == 0) {
        vt_set_err(err, errlen, "%s: no valid rows", csv_path);
        goto end;
    }

    /* Every head needs a class: a multi-label column whose valid cells hold no tag at all
     * (only ';' and spaces) would be a head of 0 classes, which no network can have.
     * (A softmax column has one non-empty value per valid row, and there is one.) */
    for (int c = 1; c < ncols; c++) {
        if (kind[c - 1] != VT_LOSS_BCE)
            continue;
        vt_ds_strv tags = {0};
        for (int i = 0; i < nrows && tags.n == 0; i++)
            if (rows[i].ok)
                split_tags(&tags, rows[i].cells.s[c]);
        int none = tags.n == 0;
        vt_ds_strv_free(&tags);
        if (none) {
            vt_set_err(err, errlen, "%s: column '%s' is multi-label (a cell holds ';') but no "
                       "valid row has a tag in it", csv_path, header.s[c]);
            goto end;
        }
    }

    /* Label cells in Unicode NFC, as class folders are (base/nfc.h): "café" typed and
     * "café" from a Mac are one class. */
    for (int i = 0; i < nrows; i++)
        for (int c = 1; c < rows[i].cells.n; c++) {
            char *nfc = vt_nfc(rows[i].cells.s[c]);
            free(rows[i].cells.s[c]);
            rows[i].cells.s[c] = nfc;
        }
    /* Heads: classes = sorted union of values/tags over valid rows. */
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_ds_head_free(&ds->heads[h]);
    for (int i = 0; i < ds->nvideos; i++)
        vt_ds_video_free_labels(&ds->videos[i]);
    rows_to_entries(ds, rows, nrows);
    ds->nheads = ncols - 1;
    for (int c = 1; c < ncols; c++) {
        vt_dataset_head *hd = &ds->heads[c - 1];
        snprintf(hd->name, sizeof hd->name, "%s", header.s[c]);
        hd->loss = kind[c - 1];
        vt_ds_strv vals = {0};
        for (int i = 0; i < nrows; i++) {
            if (!rows[i].ok)
                continue;
            if (hd->loss == VT_LOSS_BCE)
                split_tags(&vals, rows[i].cells.s[c]);
            else
                vt_ds_strv_push(&vals, vt_strdup(rows[i].cells.s[c]));
        }
        hd->classes = vt_ds_unique_sorted(vals.s, vals.n, &hd->nclasses);
        vt_ds_strv_free(&vals);
    }
    for (int i = 0; i < nrows; i++) {
        csv_row *r = &rows[i];
        if (!r->ok)
            continue;
        vt_dataset_video *v = &ds->videos[r->video];
        v->labeled = 1;
        for (int h = 0; h < ds->nheads; h++) {
            vt_dataset_head *hd = &ds->heads[h];
            if (hd->loss == VT_LOSS_SOFTMAX_CE) {
                v->label[h] = vt_ds_find_sorted(hd->classes, hd->nclasses, r->cells.s[h + 1]);
                continue;
            }
            vt_ds_strv tags = {0};
            split_tags(&tags, r->cells.s[h + 1]);
            v->tags[h] = vt_malloc((size_t)(tags.n ? tags.n : 1) * sizeof(int32_t));
            int n = 0;
            for (int k = 0; k < tags.n; k++)
                v->tags[h][n++] = vt_ds_find_sorted(hd->classes, hd->nclasses, tags.s[k]);
            qsort(v->tags[h], (size_t)n, sizeof(int32_t), cmp_i32);
            int u = 0;
            for (int k = 0; k < n; k++)
                if (u == 0 || v->tags[h][u - 1] != v->tags[h][k])
                    v->tags[h][u++] = v->tags[h][k];
            v->ntags[h] = u;
            vt_ds_strv_free(&tags);
        }
    }
    vt_ds_sort_videos(ds);
    /* Redo --val-split on the new labels: val videos go back to train first. The split
     * hashes the path, so every segment of a file lands on the same side. */
    if (ds->val_split > 0) {
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].split == VT_SPLIT_VAL)
                ds->videos[i].split = VT_SPLIT_TRAIN;
        vt_ds_apply_val_split(ds, ds->val_split);
    }
    rc = 0;
end:
    if (nbad)
        *nbad = bad;
    for (int i = 0; i < nrows; i++)
        vt_ds_strv_free(&rows[i].cells);
    free(rows);
    vt_ds_strv_free(&header);
    free(text);
    return rc;
}
