/*
 * dataset_copies.c: the same file's bytes under two names (a `cp` into a second class
 * folder, a video downloaded twice). A link is the same file and is found by its inode
 * (dataset.c); a copy has an inode of its own. Under two labels one of them is wrong,
 * and training is asked to answer both; under one label it counts twice.
 *
 * Only files whose byte size another file shares are read (distinct videos of one size to
 * the byte are rare), each once, in 1 MiB pieces: a 64-bit FNV-1a of the bytes groups them
 * and a byte-by-byte comparison with the group's first file decides, so a hash collision
 * never reports a copy. Segments are left out: samples that share a file do so on purpose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"

typedef struct ent {
    int i;         /* sample */
    off_t size;
    dev_t dev;
    ino_t ino;
    uint64_t hash;
} ent;

static int by_size_ino(const void *x, const void *y) {
    const ent *a = x, *b = y;
    if (a->size != b->size)
        return a->size < b->size ? -1 : 1;
    if (a->dev != b->dev)
        return a->dev < b->dev ? -1 : 1;
    if (a->ino != b->ino)
        return a->ino < b->ino ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

static int by_hash(const void *x, const void *y) {
    const ent *a = x, *b = y;
    if (a->hash != b->hash)
        return a->hash < b->hash ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

enum { PIECE = 1 << 20 };

/* FNV-1a of the file's bytes; 0 with *ok = 0 when it cannot be read whole. */
static uint64_t file_hash(const char *path, uint8_t *buf, int *ok) {
    uint64_t h = 1469598103934665603ull;
    FILE *f = fopen(path, "rb");
    *ok = f != NULL;
    size_t n;
    while (f && (n = fread(buf, 1, PIECE, f)) > 0)
        for (size_t k = 0; k < n; k++)
            h = (h ^ buf[k]) * 1099511628211ull;
    if (f && ferror(f))
        *ok = 0;
    if (f)
        fclose(f);
    return h;
}

/* 1 when the two files hold the same bytes (read whole; equal sizes known). */
static int same_bytes(const char *a, const char *b, uint8_t *ba, uint8_t *bb) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        size_t na = fread(ba, 1, PIECE, fa), nb = fread(bb, 1, PIECE, fb);
        if (na != nb || memcmp(ba, bb, na)) {
            same = 0;
            break;
        }
        if (na == 0) {
            same = !ferror(fa) && !ferror(fb);
            break;
        }
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

int vt_dataset_copies(vt_dataset *ds, vt_dataset_copy **out) {
    *out = NULL;
    ent *e = vt_malloc(sizeof *e * (size_t)(ds->nvideos ? ds->nvideos : 1));
    int n = 0;
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        struct stat st;
        if (!v->labeled || v->split == VT_SPLIT_NONE || v->seg_end > 0 ||
            vt_dataset_bad(ds, i) != VT_BAD_NONE || stat(v->path, &st) != 0 ||
            !S_ISREG(st.st_mode) || st.st_size == 0)
            continue;
        e[n++] = (ent){.i = i, .size = st.st_size, .dev = st.st_dev, .ino = st.st_ino};
    }
    qsort(e, (size_t)n, sizeof *e, by_size_ino);
    uint8_t *ba = vt_malloc(PIECE), *bb = vt_malloc(PIECE);
    vt_dataset_copy *res = NULL;
    int nres = 0;
    for (int a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && e[b].size == e[a].size; b++) {
        }
        /* one size: the distinct files (a second name of one inode is the same file, which
         * dataset.c names), hashed */
        int m = 0;
        for (int k = a; k < b; k++) {
            if (k > a && e[k].dev == e[k - 1].dev && e[k].ino == e[k - 1].ino)
                continue;
            e[a + m] = e[k];
            m++;
        }
        if (m < 2)
            continue;
        for (int k = a; k < a + m; k++) {
            int ok;
            e[k].hash = file_hash(ds->videos[e[k].i].path, ba, &ok);
            if (!ok) /* unreadable now: no hash matches it */
                e[k].hash = (uint64_t)k;
        }
        qsort(e + a, (size_t)m, sizeof *e, by_hash);
        for (int g = a, h; g < a + m; g = h) {
            for (h = g + 1; h < a + m && e[h].hash == e[g].hash; h++) {
            }
            for (int k = g + 1; k < h; k++)
                if (same_bytes(ds->videos[e[g].i].path, ds->videos[e[k].i].path, ba, bb)) {
                    res = vt_realloc(res, sizeof *res * (size_t)(nres + 1));
                    res[nres++] = (vt_dataset_copy){e[g].i, e[k].i};
                }
        }
    }
    free(ba);
    free(bb);
    free(e);
    *out = res;
    return nres;
}

int vt_dataset_same_labels(const vt_dataset *ds, int a, int b) {
    const vt_dataset_video *x = &ds->videos[a], *y = &ds->videos[b];
    for (int h = 0; h < ds->nheads; h++) {
        if (ds->heads[h].loss == VT_LOSS_SOFTMAX_CE) {
            if (x->label[h] != y->label[h])
                return 0;
        } else if (x->ntags[h] != y->ntags[h] ||
                   (x->ntags[h] && memcmp(x->tags[h], y->tags[h],
                                          sizeof *x->tags[h] * (size_t)x->ntags[h]))) {
            return 0;
        }
    }
    return 1;
}

void vt_dataset_copies_print(FILE *f, const char *prefix, const vt_dataset *ds,
                             const vt_dataset_copy *c, int n) {
    int other = 0;
    for (int k = 0; k < n; k++)
        other += !vt_dataset_same_labels(ds, c[k].a, c[k].b);
    if (!n)
        return;
    fprintf(f, "%s%d file%s %s another's bytes under a second name%s:\n", prefix, n,
            n == 1 ? "" : "s", n == 1 ? "holds" : "hold", other ? " (one of two labels is "
            "wrong where they differ, and training is asked to answer both)" : " (each counts "
            "twice)");
    for (int k = 0; k < n && k < 10; k++) {
        const vt_dataset_video *a = &ds->videos[c[k].a], *b = &ds->videos[c[k].b];
        fprintf(f, "  %s = %s (%s%s%s)\n", b->relpath, a->relpath,
                vt_dataset_same_labels(ds, c[k].a, c[k].b) ? "the same label" : "other labels",
                a->split != b->split ? ", " : "", a->split != b->split ? "in two splits" : "");
    }
    if (n > 10)
        fprintf(f, "  ... and %d more\n", n - 10);
    fprintf(f, "  hint: keep one of each (under its right class) and delete the other; `cmp A B` "
            "confirms\n");
}
