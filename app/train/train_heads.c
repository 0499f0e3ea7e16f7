/*
 * train_heads.c: a resumed run trains the outputs it learnt. Its checkpoint's classifier
 * rows are indexed by the run's class names (config "heads", in the checkpoint's own copy
 * of the configuration); the dataset names its classes afresh from the folders or the
 * labels file. A class folder renamed, added or removed since moves every later class to
 * another index: with the count unchanged the tensors still fit, and the resumed run went
 * on training output k on another class than it had learnt, and recorded the new names
 * as if they were the run's. So --resume requires the run's heads exactly: the same
 * heads, losses and class names in the same order.
 *
 * --init from a vidtrain checkpoint is a new run, free to have other classes: there its
 * classifier rows go by class name (vt_net_load_init_rows). Rows by position gave a
 * renamed or reordered class another's row, and a file of the same count but other
 * classes passed its rows to unrelated ones; now a class the file has keeps its row, and
 * one it lacks starts initialised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/run_ckpt.h"
#include "app/run/run_heads.h"
#include "app/train/train.h"
#include "models/transfer.h"
#include "base/common.h"

/* Up to 6 names of `a` that `b` lacks, as " x y ..." into buf. The count. */
static int names_missing(char *buf, size_t n, char *const *a, int na, char *const *b, int nb) {
    int k = 0;
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < na; i++) {
        int found = 0;
        for (int j = 0; j < nb && !found; j++)
            found = !strcmp(a[i], b[j]);
        if (found)
            continue;
        if (k < 6 && len < n)
            len += (size_t)snprintf(buf + len, n - len, " %s", a[i]);
        else if (k == 6 && len < n)
            len += (size_t)snprintf(buf + len, n - len, " ...");
        k++;
    }
    return k;
}

int vt_train_resume_heads(const vt_train *t) {
    if (!t->resume[0])
        return 0;
    char ck[2100], err[1024];
    snprintf(ck, sizeof ck, "%s/last.safetensors", t->resume);
    cJSON *cfg = vt_run_ckpt_config(ck, err, sizeof err);
    if (!cfg) /* no checkpoint to resume: loading it says so */
        return 0;
    vt_run_heads run;
    const int rc = vt_run_heads_from_json(&run, cJSON_GetObjectItemCaseSensitive(cfg, "heads"),
                                          err, sizeof err);
    cJSON_Delete(cfg);
    if (rc != 0) { /* a checkpoint without heads: its tensors' shapes are the check */
        vt_run_heads_free(&run);
        return 0;
    }
    const vt_dataset *ds = t->ds;
    const char *data = t->o.data;
    int bad = run.n != ds->nheads;
    if (bad)
        fprintf(stderr, "vidtrain train: --resume %s: the run has %d head(s), %s %d\n",
                t->resume, run.n, data, ds->nheads);
    for (int h = 0; !bad && h < run.n; h++) {
        const vt_dataset_head *dh = &ds->heads[h];
        const vt_head_cfg *rh = &run.cfg[h];
        int same = !strcmp(rh->name, dh->name) && rh->loss == dh->loss &&
                   rh->classes == dh->nclasses;
        for (int k = 0; same && k < rh->classes; k++)
            same = !strcmp(run.classes[h][k], dh->classes[k]);
        if (same)
            continue;
        bad = 1;
        char gone[512], added[512];
        const int ng = names_missing(gone, sizeof gone, run.classes[h], rh->classes,
                                     dh->classes, dh->nclasses);
        const int na = names_missing(added, sizeof added, dh->classes, dh->nclasses,
                                     run.classes[h], rh->classes);
        fprintf(stderr, "vidtrain train: --resume %s: head '%s' learnt %d classes, %s's head "
                "'%s' has %d: %s%s%s%s%s\n", t->resume, rh->name, rh->classes, data, dh->name,
                dh->nclasses, ng ? "not there now:" : "", gone, ng && na ? "; " : "",
                na ? "new:" : "", na ? added
                : ng ? ""
                : strcmp(rh->name, dh->name) || rh->loss != dh->loss
                    ? "another head (its name or its loss, softmax or multi-label, differs)"
                    : "the same names in another order");
    }
    vt_run_heads_free(&run);
    if (!bad)
        return 0;
    fprintf(stderr, "  the checkpoint's outputs are indexed by the run's classes, so a resumed "
            "run keeps them: put the class folders (or --labels) back as they were, or start "
            "a new run from its weights: vidtrain train %s --out NEW --init %s\n", data, ck);
    return 1;
}

int vt_train_init_rows(const vt_train *t, vt_head_rows *rows, int **store) {
    memset(rows, 0, sizeof *rows);
    *store = NULL;
    char err[1024];
    cJSON *cfg = vt_run_ckpt_config(t->o.init, err, sizeof err);
    if (!cfg) /* not a vidtrain checkpoint: its classes have no names */
        return 0;
    vt_run_heads file;
    const int rc = vt_run_heads_from_json(&file, cJSON_GetObjectItemCaseSensitive(cfg, "heads"),
                                          err, sizeof err);
    cJSON_Delete(cfg);
    const vt_dataset *ds = t->ds;
    int total = 0;
    for (int h = 0; h < ds->nheads; h++)
        total += ds->heads[h].nclasses;
    int *from = *store = vt_malloc(sizeof(int) * (size_t)(total ? total : 1));
    int by_name = 0;
    for (int h = 0, at = 0; rc == 0 && h < ds->nheads; at += ds->heads[h].nclasses, h++) {
        const vt_dataset_head *dh = &ds->heads[h];
        int fh = -1; /* the file's head of that name and loss */
        for (int k = 0; k < file.n && fh < 0; k++)
            if (!strcmp(file.cfg[k].name, dh->name) && file.cfg[k].loss == dh->loss)
                fh = k;
        if (fh < 0)
            continue;
        int same = file.cfg[fh].classes == dh->nclasses;
        for (int c = 0; c < dh->nclasses; c++) {
            from[at + c] = -1;
            for (int k = 0; k < file.cfg[fh].classes && from[at + c] < 0; k++)
                if (!strcmp(file.classes[fh][k], dh->classes[c]))
                    from[at + c] = k;
            same &= from[at + c] == c;
        }
        if (!same) { /* the plain load's rows by position would be right as they are */
            rows->from[h] = from + at;
            by_name = 1;
        }
    }
    vt_run_heads_free(&file);
    if (!by_name) {
        free(*store);
        *store = NULL;
    }
    return by_name;
}
