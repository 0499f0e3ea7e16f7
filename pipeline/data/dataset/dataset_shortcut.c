/*
 * dataset_shortcut.c: the properties of a file that are not its content — frame rate,
 * size, codec, pixel format — when they give a class away. A network learns whatever
 * tells the classes apart most cheaply: if every "fall" video was filmed at 60 fps and
 * every other at 30, its clips span half the time and move twice as far per frame, and the
 * classifier can score well on a test split made the same way and fail on the next
 * camera. Nothing else in a run would say so.
 *
 * The rule, per property and class (head 0, softmax): a sample's value "gives its class
 * away" when samples of that class in at least two files have the value and no sample of
 * another class has it (so values that every file has alone, as exact durations or odd
 * sizes would, never count, however many segments of the file the class has); a class of
 * at least 3 samples whose samples give it away in 80% or more is reported, with up to
 * three such values.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"

enum { NPROPS = 4, KEYLEN = 48 };

static const char *const prop_names[NPROPS] = {"frame rate", "size", "codec", "pixel format"};
static const char *const prop_at[NPROPS] = {"at", "at", "in", "in"};

/* A frame rate to the nearest frame a second (29.97 and 30 make clips of one span); the
 * size as training sees it, upright. 0 when the file does not say (no frame rate, an
 * unnamed codec): an unknown value is nothing a network sees, and "0 fps" shared by a
 * class named no shortcut. */
static int prop_value(const vt_video_info *in, int p, char *buf, size_t n) {
    switch (p) {
    case 0:
        if (!(in->fps >= 0.5 && in->fps < 1e6))
            return 0;
        snprintf(buf, n, "%.0f fps", round(in->fps));
        break;
    case 1: snprintf(buf, n, "%dx%d", in->disp_width, in->disp_height); break;
    case 2: snprintf(buf, n, "%s", in->codec); break;
    default: snprintf(buf, n, "%s", in->pix_fmt); break;
    }
    return buf[0] && strcmp(buf, "none") && strcmp(buf, "?") && strcmp(buf, "0x0");
}

typedef struct item {
    char key[KEYLEN];
    int cls;
    const char *file; /* segments of one file share it */
} item;

static int by_key(const void *a, const void *b) {
    const item *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (!c)
        c = (x->cls > y->cls) - (x->cls < y->cls);
    return c ? c : strcmp(x->file, y->file);
}

const char *vt_shortcut_property_name(int property) {
    return property >= 0 && property < NPROPS ? prop_names[property] : "?";
}

int vt_dataset_shortcuts(vt_dataset *ds, int split, vt_shortcut **out) {
    *out = NULL;
    if (ds->nheads < 1 || ds->heads[0].loss != VT_LOSS_SOFTMAX_CE || ds->heads[0].nclasses < 2)
        return 0;
    const int nc = ds->heads[0].nclasses;
    item *it = vt_malloc(sizeof *it * (size_t)(ds->nvideos ? ds->nvideos : 1));
    int *total = vt_calloc((size_t)nc, sizeof *total);
    int *given = vt_malloc(sizeof *given * (size_t)nc);
    char (*vals)[128] = vt_malloc(sizeof *vals * (size_t)nc);
    int *nvals = vt_malloc(sizeof *nvals * (size_t)nc);
    vt_shortcut *res = NULL;
    int nres = 0, classes_seen = 0;
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        if (v->labeled && (split < 0 || (int)v->split == split) && v->probed &&
            vt_dataset_bad(ds, i) == VT_BAD_NONE)
            classes_seen += total[v->label[0]]++ == 0;
    }
    for (int p = 0; p < NPROPS && classes_seen >= 2; p++) {
        int n = 0;
        for (int i = 0; i < ds->nvideos; i++) {
            const vt_dataset_video *v = &ds->videos[i];
            if (!(v->labeled && (split < 0 || (int)v->split == split) && v->probed &&
                  vt_dataset_bad(ds, i) == VT_BAD_NONE))
                continue;
            if (!prop_value(&v->info, p, it[n].key, KEYLEN))
                continue;
            it[n].file = v->path;
            it[n++].cls = v->label[0];
        }
        qsort(it, (size_t)n, sizeof *it, by_key);
        memset(given, 0, sizeof *given * (size_t)nc);
        memset(nvals, 0, sizeof *nvals * (size_t)nc);
        for (int a = 0, b; a < n; a = b) {
            int one = 1, files = 1; /* sorted by class, then file, within a key */
            for (b = a + 1; b < n && !strcmp(it[b].key, it[a].key); b++) {
                one &= it[b].cls == it[a].cls;
                files += strcmp(it[b].file, it[b - 1].file) != 0;
            }
            if (!one || files < 2) /* a file's segments alone are one file's value */
                continue;
            const int c = it[a].cls;
            given[c] += b - a;
            if (nvals[c] < 3) {
                size_t l = nvals[c] ? strlen(vals[c]) : 0;
                snprintf(vals[c] + l, sizeof vals[c] - l, "%s%s", nvals[c] ? ", " : "", it[a].key);
            } else if (nvals[c] == 3) {
                size_t l = strlen(vals[c]);
                snprintf(vals[c] + l, sizeof vals[c] - l, ", ...");
            }
            nvals[c]++;
        }
        for (int c = 0; c < nc; c++)
            if (total[c] >= 3 && given[c] * 5 >= total[c] * 4) {
                res = vt_realloc(res, sizeof *res * (size_t)(nres + 1));
                vt_shortcut *s = &res[nres++];
                s->property = p;
                s->cls = c;
                s->given = given[c];
                s->total = total[c];
                snprintf(s->values, sizeof s->values, "%s", vals[c]);
            }
    }
    free(it);
    free(total);
    free(given);
    free(vals);
    free(nvals);
    *out = res;
    return nres;
}

void vt_dataset_shortcuts_print(FILE *f, const char *prefix, const vt_dataset *ds,
                                const vt_shortcut *s, int n, const char *what) {
    for (int k = 0; k < n;) {
        const int p = s[k].property;
        int e = k;
        while (e < n && s[e].property == p)
            e++;
        fprintf(f, "%sthe %s alone tells %s apart (a network can learn it instead of the "
                "content, and fail on videos filmed otherwise):\n", prefix, prop_names[p],
                e - k == 1 ? "a class" : "these classes");
        for (int j = k; j < e && j < k + 8; j++)
            fprintf(f, "  class '%s': %d of its %d %s %s %s, as no other class's video is\n",
                    ds->heads[0].classes[s[j].cls], s[j].given, s[j].total, what, prop_at[p],
                    s[j].values);
        if (e - k > 8)
            fprintf(f, "  ... and %d more classes\n", e - k - 8);
        k = e;
    }
    if (n)
        fprintf(f, "  hint: film or gather each class's videos as the others' are; `vidtrain "
                "prep SRC DST --fps F` re-encodes every video to one codec, frame rate and "
                "short side (docs/splits.md#shortcuts)\n");
}
