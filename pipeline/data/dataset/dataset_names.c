/*
 * dataset_names.c: class names that are one name to a reader (dataset.h,
 * vt_dataset_like_classes). "Walk" and "walk", "eye_makeup" and "eye makeup", "t-shirt"
 * and "t shirt ", from two sources merged into one dataset, are two classes to vidtrain
 * (folder names are what they are; Unicode's two spellings of one name are one already,
 * base/nfc.h): the network is asked to tell apart two piles of the same thing, each
 * learns half of it, and scan's table shows them as two near-identical rows that are easy
 * to read past. Said, never refused: two classes may differ only so on purpose.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"

/* name folded: ASCII letters in lower case, '_' and '-' as spaces, runs of spaces as one,
 * none at either end (malloc'd). */
static char *fold(const char *name) {
    char *k = vt_malloc(strlen(name) + 1);
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        unsigned char c = *p == '_' || *p == '-' || isspace(*p) ? ' ' : (unsigned char)tolower(*p);
        if (c == ' ' && (n == 0 || k[n - 1] == ' '))
            continue;
        k[n++] = (char)c;
    }
    while (n && k[n - 1] == ' ')
        n--;
    k[n] = 0;
    return k;
}

int vt_dataset_like_classes(const vt_dataset *ds, vt_like_classes **out) {
    int n = 0, cap = 0;
    *out = NULL;
    for (int h = 0; h < ds->nheads; h++) {
        const vt_dataset_head *hd = &ds->heads[h];
        char **key = vt_malloc((size_t)(hd->nclasses ? hd->nclasses : 1) * sizeof *key);
        for (int c = 0; c < hd->nclasses; c++)
            key[c] = fold(hd->classes[c]);
        for (int b = 0; b < hd->nclasses; b++)
            for (int a = 0; a < b; a++) {
                if (strcmp(key[a], key[b]))
                    continue;
                if (n == cap) {
                    cap = cap ? 2 * cap : 8;
                    *out = vt_realloc(*out, (size_t)cap * sizeof **out);
                }
                (*out)[n++] = (vt_like_classes){.head = h, .a = a, .b = b};
                break; /* b is named once, with the first it is like */
            }
        for (int c = 0; c < hd->nclasses; c++)
            free(key[c]);
        free(key);
    }
    return n;
}

void vt_dataset_like_classes_print(FILE *f, const char *prefix, const vt_dataset *ds,
                                   const vt_like_classes *l, int n) {
    if (n == 0)
        return;
    fprintf(f, "%s%d pair%s of classes whose names differ only in case, spaces, '_' or '-' "
            "(two folders of one class, from two sources?):\n", prefix, n, n == 1 ? "" : "s");
    for (int i = 0; i < n && i < 10; i++)
        fprintf(f, "  '%s' and '%s'%s%s%s\n", ds->heads[l[i].head].classes[l[i].a],
                ds->heads[l[i].head].classes[l[i].b], ds->nheads > 1 ? " (head '" : "",
                ds->nheads > 1 ? ds->heads[l[i].head].name : "", ds->nheads > 1 ? "')" : "");
    if (n > 10)
        fprintf(f, "  ... and %d more\n", n - 10);
    fprintf(f, "  hint: one class under two names is two half-classes the network is asked to "
            "tell apart: move one folder's videos into the other (or fix the labels); leave "
            "them if they are different classes\n");
}
