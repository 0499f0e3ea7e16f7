/*
 * prep_manifest.c: DST/prep-manifest.csv — path,source,duration_s,frames,bytes,sha256,
 * status,damage, one row per output (a manifest of an earlier vidtrain, without the damage
 * column, is read as well), appended to as files finish and rewritten whole and
 * sorted at the start and end of a run. Reading keeps the last row of a path (a file
 * redone after a kill has a later row) and ignores a malformed line (the torn last line
 * of a killed run). It must never write the manifest in place, and never leave a torn
 * row that the next append would be glued to (a full disk cuts a row short).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/prep/prep_cmd.h"
#include "base/common.h"

void prep_rows_push(row_list *l, row r) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->r = vt_realloc(l->r, (size_t)l->cap * sizeof *l->r);
    }
    l->r[l->n++] = r;
}

void prep_row_free(row *r) {
    for (int i = 0; i < PREP_FIELDS; i++)
        vt_freep(&r->f[i]);
}

void prep_rows_clear(row_list *l) {
    for (int i = 0; i < l->n; i++)
        prep_row_free(&l->r[i]);
    l->n = 0;
}

void prep_row_put(FILE *f, const row *r) {
    for (int i = 0; i < PREP_FIELDS; i++)
        vt_csv_put(f, r->f[i] ? r->f[i] : "", i == PREP_FIELDS - 1);
}

/* Parses one CSV line into PREP_FIELDS fields, or one fewer (an earlier vidtrain's row,
 * without the damage column); 0, or -1 for a malformed line (a torn last line of a killed
 * run, say), which the caller ignores. */
static int row_parse(row *r, const char *line) {
    memset(r, 0, sizeof *r);
    const char *p = line;
    int k = 0;
    for (;;) {
        size_t cap = strlen(p) + 1, n = 0;
        char *s = vt_malloc(cap);
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) { /* unterminated quote */
                    free(s);
                    prep_row_free(r);
                    return -1;
                }
                if (*p == '"' && p[1] == '"') {
                    s[n++] = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    s[n++] = *p++;
                }
            }
        }
        while (*p && *p != ',')
            s[n++] = *p++;
        s[n] = 0;
        if (k == PREP_FIELDS) {
            free(s);
            prep_row_free(r);
            return -1;
        }
        r->f[k++] = s;
        if (!*p)
            break;
        p++;
    }
    if (k < PREP_FIELDS - 1) {
        prep_row_free(r);
        return -1;
    }
    return 0;
}

static int cmp_row(const void *a, const void *b) {
    return strcmp(((const row *)a)->f[0], ((const row *)b)->f[0]);
}

static int cmp_row_seq(const void *a, const void *b) {
    int c = cmp_row(a, b);
    return c ? c : ((const row *)a)->seq - ((const row *)b)->seq;
}

/* The manifest's rows, the last row per path winning (rows are appended as files finish,
 * so a path redone after a kill has a later row). Sorted by path. */
void prep_manifest_read(row_list *out, const char *path) {
    char *text = vt_file_read(path);
    if (!text)
        return;
    char *cur = text;
    int first = 1;
    /* records, not lines: a quoted path may hold a newline (base/csv.h) */
    for (char *line; (line = vt_csv_record(&cur)) != NULL;) {
        if (!*line)
            continue;
        row r;
        if (first) { /* the header */
            first = 0;
            if (!strncmp(line, "path,", 5))
                continue;
        }
        if (row_parse(&r, line) == 0)
            prep_rows_push(out, r);
    }
    free(text);
    for (int i = 0; i < out->n; i++)
        out->r[i].seq = i;
    if (out->n > 1)
        qsort(out->r, (size_t)out->n, sizeof *out->r, cmp_row_seq);
    int m = 0;
    for (int i = 0; i < out->n; i++) {
        if (i + 1 < out->n && !strcmp(out->r[i].f[0], out->r[i + 1].f[0])) {
            prep_row_free(&out->r[i]); /* an earlier row of the same path */
            continue;
        }
        out->r[m++] = out->r[i];
    }
    out->n = m;
}

row *prep_manifest_find(row_list *l, const char *path) {
    row key = {.f = {(char *)path}};
    return l->n ? bsearch(&key, l->r, (size_t)l->n, sizeof *l->r, cmp_row) : NULL;
}


int prep_manifest_write(const char *path, const row_list *rows, const entry *skip, int nskip,
                        char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    fputs("path,source,duration_s,frames,bytes,sha256,status,damage\n", f);
    for (int i = 0; i < rows->n; i++) {
        int pending = 0;
        for (int k = 0; k < nskip && !pending; k++)
            pending = !strcmp(skip[k].out, rows->r[i].f[0]);
        if (!pending)
            prep_row_put(f, &rows->r[i]);
    }
    VT_CHECK(fclose(f) == 0, "building the manifest in memory failed");
    int rc = vt_file_write_atomic(path, text, len, err, errlen);
    free(text);
    return rc;
}

int prep_manifest_append(int fd, const row *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    prep_row_put(f, r);
    VT_CHECK(fclose(f) == 0, "building a manifest row in memory failed");
    struct stat st;
    int rc = fstat(fd, &st);
    ssize_t w = rc == 0 ? write(fd, text, len) : -1;
    if (rc == 0 && w != (ssize_t)len) {
        int e = w < 0 ? errno : ENOSPC; /* a short write: the disk filled mid-row */
        if (w > 0 && ftruncate(fd, st.st_size) != 0) {
            /* cannot cut it: the row ends here, torn, and is ignored when read */
        }
        errno = e;
        rc = -1;
    }
    free(text);
    return rc;
}

int prep_manifest_drop_stale(const char *dst, row_list *rows, const entry_list *list) {
    if (rows->n == 0)
        return 0;
    char *keep = vt_calloc((size_t)rows->n, 1);
    for (int i = 0; i < list->n; i++) {
        const entry *e = &list->e[i];
        row *w = e->video && !e->trimmed ? prep_manifest_find(rows, e->out) : NULL;
        if (w)
            keep[w - rows->r] = 1;
    }
    int n = 0, removed = 0;
    for (int i = 0; i < rows->n; i++) {
        row *w = &rows->r[i];
        if (keep[i]) {
            rows->r[n++] = *w;
            continue;
        }
        char path[4200];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dst, w->f[0]);
        if (!strstr(w->f[0], "..") && lstat(path, &st) == 0 &&
            (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
            if (unlink(path) == 0) {
                fprintf(stderr, "vidtrain prep: removed %s: the copy of %s, which SRC no longer "
                        "has\n", path, w->f[1]);
                removed++;
            } else {
                fprintf(stderr, "vidtrain prep: cannot remove %s, the copy of %s, which SRC no "
                        "longer has: %s (remove it by hand)\n", path, w->f[1], strerror(errno));
            }
        }
        prep_row_free(w);
    }
    rows->n = n;
    free(keep);
    return removed;
}
