/*
 * leaks.c: near-copies across splits (leaks.h) — signatures for every used video, the
 * train x (val, test) comparison, and its JSON and text forms.
 *
 * Threads take videos by an atomic counter, but every result lands in the slot of its
 * video and pairs are sorted afterwards, so the output never depends on timing. It must
 * never change a split: it only reports.
 */
#include "app/leaks.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/run/pretrained.h"
#include "app/run/run_files.h"
#include "base/common.h"
#include "pipeline/data/signature.h"

/* The videos compared: ds's, then (when there is one) the other folder's, in one index
 * space [0, ds->nvideos + ods->nvideos). */
typedef struct pool {
    const vt_dataset *ds, *ods;
    int n0, n;
    vt_split *role; /* TRAIN, VAL or TEST: compared as that; NONE: not compared */
} pool;

static const vt_dataset_video *video(const pool *p, int i) {
    return i < p->n0 ? &p->ds->videos[i] : &p->ods->videos[i - p->n0];
}

/* The first entry of i's file (segments share a file): signatures are per file. */
static int file_of(const pool *p, int i) {
    int first = i < p->n0 ? 0 : p->n0;
    while (i > first && !strcmp(video(p, i - 1)->relpath, video(p, i)->relpath))
        i--;
    return i;
}

const char *vt_leaks_cache_dir(char *buf, size_t n) {
    char err[1024], probe[4200];
    if (n < 32)
        return NULL;
    vt_pretrained_cache_dir(buf, n - 16);
    if (!buf[0])
        return NULL;
    strcat(buf, "/signatures");
    /* the output rule, before any folder is made: a cache inside an input folder (a
     * dataset, prep's SRC) is not kept (its files would land among the videos) */
    snprintf(probe, sizeof probe, "%s/x", buf);
    if (vt_output_check(probe, err, sizeof err) != 0)
        return NULL;
    return vt_run_mkdirs(buf, err, sizeof err) == 0 ? buf : NULL;
}

static int cmp_pair(const void *x, const void *y) {
    const vt_leak_pair *a = x, *b = y;
    if (a->other != b->other)
        return a->other < b->other ? -1 : 1;
    if (a->sim != b->sim)
        return a->sim > b->sim ? -1 : 1;
    return (a->train > b->train) - (a->train < b->train);
}

static int find(pool *pl, int threads, int progress, vt_leaks *out) {
    double t0 = vt_now();
    int n = pl->n;
    out->ods = pl->ods;
    out->n0 = pl->n0;
    if (threads <= 0)
        threads = omp_get_num_procs();
    char dir[4096];
    const char *cache = vt_leaks_cache_dir(dir, sizeof dir);

    vt_sig *sig = vt_calloc((size_t)(n ? n : 1), sizeof *sig);
    int *ok = vt_calloc((size_t)(n ? n : 1), sizeof *ok);
    int ndone = 0, nwork = 0, nhit = 0, nfail = 0, nsparse = 0;
    for (int i = 0; i < n; i++)
        nwork += pl->role[i] != VT_SPLIT_NONE && file_of(pl, i) == i;
    int tty = progress && isatty(2);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) reduction(+ : nhit, nfail, nsparse)
    for (int i = 0; i < n; i++) {
        if (pl->role[i] == VT_SPLIT_NONE || file_of(pl, i) != i)
            continue;
        char e[1024];
        int hit = 0;
        if (vt_sig_cached(video(pl, i)->path, cache, &sig[i], &hit, e, sizeof e) == 0) {
            ok[i] = 1;
            nsparse += sig[i].sparse;
        } else {
            nfail++;
        }
        nhit += hit;
        if (tty) {
#pragma omp critical(leaks_progress)
            fprintf(stderr, "\rsignatures %d/%d", ++ndone, nwork);
        }
    }
    if (tty)
        fprintf(stderr, "\r\033[K");
    out->nsig = nwork;
    out->ncached = nhit;
    out->nfailed = nfail;
    out->nsparse = nsparse;
    for (int i = 0; i < n; i++) { /* in index order: the same names whatever the threads */
        if (pl->role[i] == VT_SPLIT_NONE || file_of(pl, i) != i || (ok[i] && sig[i].n > 0))
            continue;
        out->nblank += ok[i];
        if (out->nunchecked < (int)(sizeof out->unchecked / sizeof *out->unchecked))
            out->unchecked[out->nunchecked] = i;
        out->nunchecked++;
    }

    /* train x (val, test), one other video per iteration: its pairs in its own list */
    int32_t *tr = vt_malloc((size_t)(n ? n : 1) * sizeof *tr);
    int ntr = 0;
    for (int i = 0; i < n; i++)
        if (pl->role[i] == VT_SPLIT_TRAIN)
            tr[ntr++] = i;
    for (int i = 0; i < n; i++)
        if (pl->role[i] != VT_SPLIT_NONE)
            out->total[pl->role[i]]++;
    vt_leak_pair **found = vt_calloc((size_t)(n ? n : 1), sizeof *found);
    int *nfound = vt_calloc((size_t)(n ? n : 1), sizeof *nfound);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int j = 0; j < n; j++) {
        if (pl->role[j] != VT_SPLIT_VAL && pl->role[j] != VT_SPLIT_TEST)
            continue;
        int fj = file_of(pl, j), cap = 0;
        for (int k = 0; k < ntr; k++) {
            int i = tr[k], fi = file_of(pl, i);
            double sim = 0;
            int near = 0;
            if (fi == fj) {
                near = 1, sim = 1; /* one file on both sides: a segment of it */
            } else if (ok[fi] && ok[fj]) {
                near = vt_sig_near(&sig[fi], &sig[fj], VT_LEAK_SHARE, &sim);
            }
            if (!near)
                continue;
            if (nfound[j] == cap) {
                cap = cap ? 2 * cap : 4;
                found[j] = vt_realloc(found[j], (size_t)cap * sizeof *found[j]);
            }
            found[j][nfound[j]++] = (vt_leak_pair){.train = i, .other = j, .sim = sim,
                                                   .split = pl->role[j]};
        }
    }
    for (int j = 0; j < n; j++) {
        if (!nfound[j])
            continue;
        out->copied[pl->role[j]]++;
        out->pairs = vt_realloc(out->pairs, (size_t)(out->npairs + nfound[j]) * sizeof *out->pairs);
        memcpy(out->pairs + out->npairs, found[j], (size_t)nfound[j] * sizeof *found[j]);
        out->npairs += nfound[j];
        free(found[j]);
    }
    if (out->npairs > 1)
        qsort(out->pairs, (size_t)out->npairs, sizeof *out->pairs, cmp_pair);
    for (int i = 0; i < n; i++)
        vt_sig_free(&sig[i]);
    free(sig);
    free(ok);
    free(tr);
    free(found);
    free(nfound);
    out->seconds = vt_now() - t0;
    return 0;
}

int vt_leaks_find_with(vt_dataset *ds, int own, vt_dataset *ods, const int32_t *oidx, int on,
                       vt_split as, int threads, int progress, vt_leaks *out) {
    memset(out, 0, sizeof *out);
    pool pl = {.ds = ds, .ods = ods, .n0 = ds->nvideos,
               .n = ds->nvideos + (ods ? ods->nvideos : 0)};
    pl.role = vt_malloc((size_t)(pl.n ? pl.n : 1) * sizeof *pl.role);
    for (int i = 0; i < pl.n; i++)
        pl.role[i] = VT_SPLIT_NONE;
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        if (v->split != VT_SPLIT_NONE && v->bad == VT_BAD_NONE &&
            (v->split == VT_SPLIT_TRAIN || own))
            pl.role[i] = v->split;
    }
    for (int k = 0; ods && k < on; k++)
        if (oidx[k] >= 0 && oidx[k] < ods->nvideos)
            pl.role[pl.n0 + oidx[k]] = as;
    int rc = find(&pl, threads, progress, out);
    free(pl.role);
    return rc;
}

int vt_leaks_find(vt_dataset *ds, int threads, int progress, vt_leaks *out) {
    return vt_leaks_find_with(ds, 1, NULL, NULL, 0, VT_SPLIT_NONE, threads, progress, out);
}

/* The video of a pair's index (ds's, or the other folder's past ds->nvideos). */
static const vt_dataset_video *pair_video(const vt_dataset *ds, const vt_leaks *l, int i) {
    return i < l->n0 || !l->ods ? &ds->videos[i] : &l->ods->videos[i - l->n0];
}

/* How a pair's video is named on a terminal: its path in its folder, with the folder in
 * front when it is the other one (--val-dir's, eval's DIR). */
static const char *pair_name(const vt_dataset *ds, const vt_leaks *l, int i, char *buf, size_t n) {
    if (i < l->n0 || !l->ods)
        return ds->videos[i].relpath;
    snprintf(buf, n, "%s/%s", l->ods->dir, l->ods->videos[i - l->n0].relpath);
    return buf;
}

void vt_leaks_free(vt_leaks *l) {
    if (!l)
        return;
    vt_freep(&l->pairs);
    memset(l, 0, sizeof *l);
}

cJSON *vt_leaks_json(const vt_dataset *ds, const vt_leaks *l) {
    cJSON *o = cJSON_CreateObject();
    cJSON *pa = cJSON_AddArrayToObject(o, "pairs");
    for (int k = 0; k < l->npairs; k++) {
        const vt_leak_pair *p = &l->pairs[k];
        cJSON *e = cJSON_CreateObject();
        char *a = vt_utf8_clean(ds->videos[p->train].relpath);
        char *b = vt_utf8_clean(pair_video(ds, l, p->other)->relpath);
        cJSON_AddStringToObject(e, "train", a);
        cJSON_AddStringToObject(e, "other", b);
        cJSON_AddStringToObject(e, "split", vt_split_name(p->split));
        if (l->ods && p->other >= l->n0) { /* a video of the other folder */
            char *d = vt_utf8_clean(l->ods->dir);
            cJSON_AddStringToObject(e, "folder", d);
            free(d);
        }
        cJSON_AddNumberToObject(e, "similarity", p->sim);
        cJSON_AddItemToArray(pa, e);
        free(a);
        free(b);
    }
    for (int s = VT_SPLIT_VAL; s <= VT_SPLIT_TEST; s++) {
        if (!l->total[s])
            continue;
        cJSON *so = cJSON_AddObjectToObject(o, vt_split_name((vt_split)s));
        cJSON_AddNumberToObject(so, "videos", l->total[s]);
        cJSON_AddNumberToObject(so, "with_copy_in_train", l->copied[s]);
    }
    cJSON *sg = cJSON_AddObjectToObject(o, "signatures");
    cJSON_AddNumberToObject(sg, "files", l->nsig);
    cJSON_AddNumberToObject(sg, "cached", l->ncached);
    cJSON_AddNumberToObject(sg, "unreadable", l->nfailed);
    cJSON_AddNumberToObject(sg, "keyframes_only", l->nsparse);
    cJSON_AddNumberToObject(sg, "flat_only", l->nblank);
    cJSON_AddNumberToObject(sg, "seconds", l->seconds);
    return o;
}

const char *vt_leaks_line(const vt_leaks *l, char *buf, size_t n) {
    buf[0] = 0;
    size_t at = 0;
    for (int s = VT_SPLIT_VAL; s <= VT_SPLIT_TEST; s++)
        if (l->copied[s] && at < n)
            at += (size_t)snprintf(buf + at, n - at, "%s%s %d of %d", at ? ", " : "",
                                   vt_split_name((vt_split)s), l->copied[s], l->total[s]);
    if (at && at < n)
        snprintf(buf + at, n - at, " videos have a near-copy in train");
    return buf;
}

/* Notes on what the check could not see: signatures that are a long-GOP file's keyframes
 * alone (signature.h), and videos it could not compare at all (only flat frames, or no
 * signature), named: a copy of one of them is missed, which must not pass for "none". */
static void notes(FILE *f, const vt_dataset *ds, const vt_leaks *l) {
    if (l->nsparse)
        fprintf(f, "  note: %d signature%s of long-GOP files too large to decode whole %s "
                "keyframes alone:\n        a trim or a short clip of such a file is found only "
                "where it meets one (docs/splits.md)\n", l->nsparse, l->nsparse == 1 ? "" : "s",
                l->nsparse == 1 ? "is" : "are");
    if (!l->nunchecked)
        return;
    fprintf(f, "  note: %d video%s not checked (%d with only flat frames: black, white or one "
            "colour; %d without a signature): a copy of %s is not found:\n        ",
            l->nunchecked, l->nunchecked == 1 ? "" : "s", l->nblank, l->nunchecked - l->nblank,
            l->nunchecked == 1 ? "it" : "them");
    int shown = VT_MIN(l->nunchecked, (int)(sizeof l->unchecked / sizeof *l->unchecked));
    for (int k = 0; k < shown; k++) {
        char nb[4400];
        fprintf(f, "%s%s", k ? ", " : "", pair_name(ds, l, l->unchecked[k], nb, sizeof nb));
    }
    fprintf(f, "%s\n", shown < l->nunchecked ? ", ..." : "");
}

void vt_leaks_print(FILE *f, const vt_dataset *ds, const vt_leaks *l, int max_pairs) {
    char line[256];
    if (!vt_leaks_line(l, line, sizeof line)[0]) {
        fprintf(f, "leaks: none (%d signatures, %d from the cache, %.1f s)\n", l->nsig, l->ncached,
                l->seconds);
        notes(f, ds, l);
        return;
    }
    fprintf(f, "leaks: %s (%d pairs; %d signatures, %d from the cache, %.1f s)\n", line,
            l->npairs, l->nsig, l->ncached, l->seconds);
    int shown = l->npairs < max_pairs ? l->npairs : max_pairs;
    for (int k = 0; k < shown; k++) {
        const vt_leak_pair *p = &l->pairs[k];
        char nb[4400];
        fprintf(f, "  %.2f  %s: %s  ~  train: %s\n", p->sim, vt_split_name(p->split),
                pair_name(ds, l, p->other, nb, sizeof nb), ds->videos[p->train].relpath);
    }
    if (shown < l->npairs)
        fprintf(f, "  ... and %d more pairs (--json lists all)\n", l->npairs - shown);
    notes(f, ds, l);
}

int vt_leaks_train_check(vt_dataset *ds, vt_dataset *vds, const char *run_dir, int strict,
                         int progress, FILE *out) {
    vt_leaks lk;
    int32_t *vidx = NULL, nv = 0; /* --val-dir: its labelled, readable videos, as val */
    if (vds) {
        vidx = vt_malloc(sizeof *vidx * (size_t)(vds->nvideos ? vds->nvideos : 1));
        for (int i = 0; i < vds->nvideos; i++)
            if (vds->videos[i].labeled && !vt_dataset_bad(vds, i))
                vidx[nv++] = i;
    }
    vt_leaks_find_with(ds, 1, vds, vidx, nv, VT_SPLIT_VAL, 0, progress, &lk);
    free(vidx);
    char line[256], path[2100], err[1024];
    vt_leaks_line(&lk, line, sizeof line);
    snprintf(path, sizeof path, "%s/leaks.json", run_dir);
    cJSON *j = vt_leaks_json(ds, &lk);
    if (vt_run_write_json(path, j, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    cJSON_Delete(j);
    int rc = 0;
    if (!line[0]) {
        fprintf(out, "leaks: none between train and %s (%d signatures, %.1f s)\n",
                lk.total[VT_SPLIT_VAL] && lk.total[VT_SPLIT_TEST] ? "val, test"
                : lk.total[VT_SPLIT_VAL] ? "val" : "test", lk.nsig, lk.seconds);
    } else {
        fflush(out);
        if (strict) /* the start fails and takes leaks.json with it: the pairs are here */
            fprintf(stderr, "vidtrain train: --strict-splits: %s; scores on them would count "
                    "scenes training has seen. Move each copy to the side of its original, or "
                    "--group the recordings (`vidtrain scan %s` lists every pair):\n", line,
                    ds->dir);
        else
            fprintf(stderr, "warning: %s: their scores count scenes training has seen (pairs "
                    "in %s; --strict-splits makes this an error)\n", line, path);
        char nb[4400];
        for (int k = 0; k < lk.npairs && k < 5; k++)
            fprintf(stderr, "  %.2f  %s  ~  train: %s\n", lk.pairs[k].sim,
                    pair_name(ds, &lk, lk.pairs[k].other, nb, sizeof nb),
                    ds->videos[lk.pairs[k].train].relpath);
        if (lk.npairs > 5)
            fprintf(stderr, "  ... and %d more pairs\n", lk.npairs - 5);
        rc = strict;
    }
    notes(line[0] ? stderr : out, ds, &lk);
    vt_leaks_free(&lk);
    return rc;
}
