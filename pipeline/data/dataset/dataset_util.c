/*
 * dataset_util.c: what the files of the dataset share — names of videos and splits
 * (dataset.h), the growable string list, path joining, line splitting, sorted lookups,
 * class names of relative paths, the label bookkeeping of a video. (The hashed
 * --val-split, which both the folder/list assembly (dataset.c) and labels.csv
 * (dataset_labels.c) apply, is dataset_split.c.) It calls nothing of the other dataset files, so they depend
 * on it and not on each other (dataset.c calls dataset_scan.c, which calls only this).
 *
 * Like the rest of the dataset: names and contents only, never readdir order, timing or
 * a shared RNG; never decodes, never aborts on bad data.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/nfc.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* ---- names (dataset.h) ---- */

/* The containers FFmpeg reads that people's footage comes in: phones and cameras (mp4, mov,
 * 3gp, mts/m2ts: AVCHD camcorders, mxf, dv), the web (webm, mkv, flv, gif), discs and
 * broadcast (mpg, vob, ts), Windows and the DivX era (avi, wmv, asf, divx, rm), and raw
 * streams (IP cameras' h264/hevc, m2v, mjpeg: no timestamps; frames are counted). A file
 * of another kind under one of these names is reported unreadable, never skipped. */
static const char *const video_exts[] = {
    "mp4", "avi", "mkv",  "webm", "mov",  "m4v",  "mpg",  "mpeg",  "gif",  "y4m",
    "ogv", "flv", "ts",   "mts",  "m2ts", "m2t",  "wmv",  "asf",   "3gp",  "3g2",
    "vob", "mxf", "dv",   "divx", "rm",   "rmvb", "m2v",  "h264",  "264",  "h265",
    "hevc", "265", "mjpeg", "mjpg", "f4v", "qt"};

static char exts_text[256];
static pthread_once_t exts_once = PTHREAD_ONCE_INIT;

static void exts_make(void) {
    size_t l = 0;
    for (size_t i = 0; i < VT_ARRAY_LEN(video_exts) && l < sizeof exts_text; i++)
        l += (size_t)snprintf(exts_text + l, sizeof exts_text - l, "%s%s", i ? " " : "",
                              video_exts[i]);
}

const char *vt_video_exts_text(void) {
    pthread_once(&exts_once, exts_make);
    return exts_text;
}

int vt_is_video_name(const char *name) {
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name)
        return 0;
    for (size_t i = 0; i < VT_ARRAY_LEN(video_exts); i++)
        if (!strcasecmp(dot + 1, video_exts[i]))
            return 1;
    return 0;
}

const char *vt_split_name(vt_split s) {
    switch (s) {
    case VT_SPLIT_TRAIN: return "train";
    case VT_SPLIT_VAL: return "val";
    case VT_SPLIT_TEST: return "test";
    default: return "none";
    }
}

int vt_split_parse(const char *name) {
    for (int s = VT_SPLIT_TRAIN; s <= VT_SPLIT_TEST; s++)
        if (name && !strcmp(name, vt_split_name((vt_split)s)))
            return s;
    return -1;
}

/* ---- shared helpers (dataset_impl.h) ---- */

void vt_ds_strv_push(vt_ds_strv *v, char *s /* owned */) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->s = vt_realloc(v->s, (size_t)v->cap * sizeof *v->s);
    }
    v->s[v->n++] = s;
}

void vt_ds_strv_free(vt_ds_strv *v) {
    for (int i = 0; i < v->n; i++)
        free(v->s[i]);
    free(v->s);
    v->s = NULL;
    v->n = v->cap = 0;
}

int vt_ds_cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *vt_ds_join_path(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = vt_malloc(na + nb + 2);
    memcpy(s, a, na);
    size_t k = na;
    if (na && a[na - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, b, nb + 1);
    return s;
}

char *vt_ds_read_text(const char *path, char *err, size_t errlen) {
    FILE *f = vt_fopen_regular(path, err, errlen); /* never waits on a FIFO */
    if (!f)
        return NULL;
    size_t n;
    char *buf = vt_fread_all(f, &n);
    /* A directory opens for reading on Linux and reads as an error, not as empty. */
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad) {
        vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(e ? e : EIO));
        free(buf);
        return NULL;
    }
    const unsigned char *u = (const unsigned char *)buf;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < n; col++) {
        size_t k = u[i] ? vt_utf8_len(u + i, n - i) : 0;
        if (!k) {
            vt_set_err(err, errlen, "%s:%zu: %s at column %zu; a text file in UTF-8 was "
                       "expected (re-save it as UTF-8 text)", path, line,
                       u[i] ? "a byte that is not UTF-8" : "a NUL byte", col);
            free(buf);
            return NULL;
        }
        if (u[i] == '\n') {
            line++;
            col = 0;
        }
        i += k;
    }
    return buf;
}

char *vt_ds_next_line(char **cursor) {
    char *p = *cursor;
    if (!p || !*p)
        return NULL;
    char *e = strchr(p, '\n');
    if (e) {
        *e = 0;
        *cursor = e + 1;
    } else {
        *cursor = p + strlen(p);
    }
    size_t n = strlen(p);
    while (n && (p[n - 1] == '\r' || isspace((unsigned char)p[n - 1])))
        p[--n] = 0;
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

/* The digits of an int (an optional sign, then 1..9 digits, so it cannot overflow):
 * their count from s, 0 when s does not start with one. */
static size_t int_len(const char *s) {
    size_t k = *s == '-' || *s == '+', d = 0;
    while (isdigit((unsigned char)s[k + d]))
        d++;
    return d >= 1 && d <= 9 ? k + d : 0;
}

int vt_ds_cut_last_int(char *line, int *n) {
    size_t len = strlen(line), b = len;
    while (b && !isspace((unsigned char)line[b - 1]))
        b--;
    if (b == 0 || b == len || int_len(line + b) != len - b)
        return 0;
    *n = atoi(line + b);
    while (b && isspace((unsigned char)line[b - 1]))
        b--;
    line[b] = 0;
    return 1;
}

void vt_ds_drop_ignored(vt_dataset *ds, uint8_t *drop) {
    int m = 0;
    for (int i = 0; i < ds->nignored; i++) {
        if (drop[i]) /* the entry holds its own copy of the name */
            free(ds->ignored[i]);
        else
            ds->ignored[m++] = ds->ignored[i];
    }
    ds->nignored = m;
    free(drop);
}

int vt_ds_cut_first_int(char *line, int *n, char **rest) {
    size_t k = int_len(line);
    if (!k || !isspace((unsigned char)line[k]))
        return 0;
    *n = atoi(line);
    char *r = line + k;
    while (isspace((unsigned char)*r))
        r++;
    *rest = r;
    return 1;
}

char *vt_ds_next_record(char **cursor, int *lines, int *open_quote) {
    char *p = *cursor, *q = p;
    *lines = 0;
    *open_quote = 0;
    if (!p || !*p)
        return NULL;
    /* RFC 4180: a '"' opens a quoted field only where the field starts; inside one,
     * "" is a quote and a newline is data. A stray quote in an unquoted field is data. */
    int quoted = 0, field_start = 1;
    *lines = 1;
    for (; *q; q++) {
        if (quoted) {
            if (*q == '"' && q[1] == '"')
                q++;
            else if (*q == '"')
                quoted = 0;
            else if (*q == '\n')
                ++*lines;
            continue;
        }
        if (*q == '\n')
            break;
        if (*q == '"' && field_start)
            quoted = 1;
        if (*q == ',')
            field_start = 1;
        else if (*q != ' ' && *q != '\t')
            field_start = 0;
    }
    *open_quote = quoted;
    if (*q) {
        *q = 0;
        *cursor = q + 1;
    } else {
        *cursor = q;
    }
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        p[--n] = 0;
    while (*p && isspace((unsigned char)*p))
        p++;
    return p;
}

char *vt_ds_csv_next(vt_ds_csv *c, const char *path, char *err, size_t errlen) {
    char *line;
    int nl, open_quote;
    while ((line = vt_ds_next_record(&c->cur, &nl, &open_quote)) != NULL) {
        c->at = c->lineno + 1;
        c->lineno += nl;
        if (open_quote) {
            c->unclosed = 1;
            vt_set_err(err, errlen, "%s:%d: a quoted field is not closed before the end of "
                       "the file (close it with '\"'; a quote inside one is written \"\")",
                       path, c->at);
            return NULL;
        }
        if (*line)
            return line;
    }
    return NULL;
}

/* Split one CSV line into fields (RFC 4180 quotes, "" inside quotes), trimmed. */
int vt_ds_csv_fields(vt_ds_strv *out, const char *line) {
    const char *p = line;
    for (;;) {
        size_t cap = strlen(p) + 1, n = 0;
        char *f = vt_malloc(cap);
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '"') {
            p++;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    f[n++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    f[n++] = *p++;
                }
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                f[n++] = *p++;
        }
        while (n && isspace((unsigned char)f[n - 1]))
            n--;
        f[n] = 0;
        vt_ds_strv_push(out, f);
        if (*p != ',')
            break;
        p++;
    }
    return out->n;
}

static int cmp_name_key(const void *key, const void *elem) {
    return strcmp(key, *(char *const *)elem);
}

static int cmp_video_key(const void *key, const void *elem) {
    return strcmp(key, ((const vt_dataset_video *)elem)->relpath);
}

int vt_ds_find_sorted(char **names, int n, const char *name) {
    char **p = n > 0 ? bsearch(name, names, (size_t)n, sizeof *names, cmp_name_key) : NULL;
    return p ? (int)(p - names) : -1;
}

int vt_ds_find_video(const vt_dataset *ds, const char *relpath) {
    return vt_ds_find_video_in(ds->videos, ds->nvideos, relpath);
}

int vt_ds_find_video_in(const vt_dataset_video *videos, int n, const char *relpath) {
    const vt_dataset_video *v =
        n > 0 ? bsearch(relpath, videos, (size_t)n, sizeof *videos, cmp_video_key) : NULL;
    return v ? (int)(v - videos) : -1;
}

char **vt_ds_unique_sorted(char **names, int n, int *out_n) {
    char **c = vt_malloc((size_t)(n ? n : 1) * sizeof *c);
    if (n > 0) { /* names is NULL for an empty list: memcpy and qsort must not see it */
        memcpy(c, names, (size_t)n * sizeof *c);
        qsort(c, (size_t)n, sizeof *c, vt_ds_cmp_str);
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (k == 0 || strcmp(c[k - 1], c[i]))
            c[k++] = c[i];
    for (int i = 0; i < k; i++)
        c[i] = vt_strdup(c[i]);
    *out_n = k;
    return c;
}

char *vt_ds_class_of(const char *relpath, int skip) {
    const char *p = relpath;
    for (int i = 0; i < skip; i++) {
        p = strchr(p, '/');
        if (!p)
            return NULL;
        p++;
    }
    const char *e = strchr(p, '/');
    if (!e)
        return NULL;
    size_t n = (size_t)(e - p);
    char *s = vt_malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    char *c = vt_nfc(s); /* a Mac's folder "café" is another string than a typed one */
    free(s);
    return c;
}

void vt_ds_head_free(vt_dataset_head *h) {
    for (int i = 0; i < h->nclasses; i++)
        free(h->classes[i]);
    free(h->classes);
    memset(h, 0, sizeof *h);
}

void vt_ds_video_free_labels(vt_dataset_video *v) {
    for (int h = 0; h < VT_MAX_HEADS; h++) {
        vt_freep(&v->tags[h]);
        v->ntags[h] = 0;
        v->label[h] = -1;
    }
    v->labeled = 0;
}

void vt_ds_set_video_class(vt_dataset_video *v, int c) {
    vt_ds_video_free_labels(v);
    if (c >= 0) {
        v->labeled = 1;
        v->label[0] = c;
    }
}
