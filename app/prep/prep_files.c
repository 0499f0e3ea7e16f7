/*
 * prep_files.c: the names `vidtrain prep` writes — outputs whose container cannot hold
 * the codec become .mp4 (DST/prep-paths.csv maps old to new), each source its own output
 * name, and the copies of .txt,
 * .csv, .tsv and .lst files are rewritten to name the new files — and the atomic copy of
 * every non-video file — and DST's lock. It must never write in place or into SRC.
 */
#include <stdarg.h>
#include <strings.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "app/prep/prep_cmd.h"
#include "base/common.h"

#include "app/run/run_files.h"

/* Paths are checked once, at the walk, to leave room under 4 KiB for DST and the
 * temporary names; GCC cannot see that and warns on every later snprintf. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

char *prep_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
char *prep_fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    VT_CHECK_MEM(s != NULL, "a formatted string");
    return s;
}

/* The times of a segment in a file name: %06d both when both are whole seconds (the
 * names Kinetics' download scripts give), else both with milliseconds. */
static void fmt_times(char *a, char *b, size_t n, double t0, double t1) {
    if (t0 == (double)(int64_t)t0 && t1 == (double)(int64_t)t1 && t1 < 1e6) {
        snprintf(a, n, "%06lld", (long long)t0);
        snprintf(b, n, "%06lld", (long long)t1);
    } else {
        snprintf(a, n, "%.3f", t0);
        snprintf(b, n, "%.3f", t1);
    }
}

char *prep_segment_name(const char *rel, double start, double end, const char *codec) {
    char ext[32], a[32], b[32];
    vt_prep_out_ext(ext, sizeof ext, rel, codec);
    fmt_times(a, b, sizeof a, start, end);
    const char *dot = strrchr(rel, '.'), *slash = strrchr(rel, '/');
    int stem = dot && (!slash || dot > slash) ? (int)(dot - rel) : (int)strlen(rel);
    return prep_fmt("%.*s_%s_%s.%s", stem, rel, a, b, ext);
}

/* A segment's entry (--trim): a part of its source, its name made of the times. */
static int is_segment(const entry *e) { return e->end > 0; }

/* Output names in order: equal names together, and of those first the entry whose name
 * is its source's, then whole files before segments, then by source name. */
static int cmp_out(const void *pa, const void *pb) {
    const entry *x = *(entry *const *)pa, *y = *(entry *const *)pb;
    int c = strcmp(x->out, y->out);
    if (c)
        return c;
    int kx = strcmp(x->out, x->rel) != 0, ky = strcmp(y->out, y->rel) != 0;
    if (kx != ky)
        return kx - ky;
    if (is_segment(x) != is_segment(y))
        return is_segment(x) - is_segment(y);
    c = strcmp(x->rel, y->rel);
    return c ? c : (x->start > y->start) - (x->start < y->start);
}

void prep_unique_outputs(entry_list *list, const char *codec) {
    entry **by = vt_malloc((size_t)(list->n ? list->n : 1) * sizeof *by);
    for (int round = 1;; round++) {
        int n = 0;
        for (int i = 0; i < list->n; i++)
            if (!list->e[i].trimmed) /* written as its segments: its own name is free */
                by[n++] = &list->e[i];
        if (n > 1)
            qsort(by, (size_t)n, sizeof *by, cmp_out);
        int renamed = 0;
        for (int g = 0, g1; g < n; g = g1) {
            for (g1 = g + 1; g1 < n && !strcmp(by[g1]->out, by[g]->out);)
                g1++;
            if (g1 - g == 1)
                continue;
            /* the set's keeper: the file named as its source is; else a whole file
             * among segments (whole files are each their own by then); else, a set of
             * segments only (x.ts and x.m2ts cut at the same times: both x_1_2.mp4), the
             * first by source name. Renaming them all gave them all one new name
             * (x_1_2.2.mp4), round after round: prep never ended. */
            const int keep = !strcmp(by[g]->out, by[g]->rel) || is_segment(by[g + 1]);
            for (int i = g + keep; i < g1; i++) {
                entry *e = by[i];
                char ext[32], *o;
                vt_prep_out_ext(ext, sizeof ext, e->rel, codec);
                if (is_segment(e)) { /* its times' name, numbered: x_000000_000010.2.mp4 */
                    char *base = prep_segment_name(e->rel, e->start, e->end, codec);
                    const char *dot = strrchr(base, '.');
                    o = prep_fmt("%.*s.%d.%s", (int)(dot - base), base, round + 1, ext);
                    free(base);
                } else {
                    o = round == 1 ? prep_fmt("%s.%s", e->rel, ext)
                                   : prep_fmt("%s.%d.%s", e->rel, round, ext);
                }
                free(e->out);
                e->out = o;
                renamed++;
            }
        }
        if (!renamed)
            break;
    }
    free(by);
}

void prep_name_outputs(entry_list *list, int nvideo, const char *codec, rename_map *m) {
    m->old = vt_calloc((size_t)nvideo, sizeof(char *));
    m->new_ = vt_calloc((size_t)nvideo, sizeof(char *));
    for (int i = 0; i < list->n; i++) {
        entry *e = &list->e[i];
        if (!e->video) {
            e->out = vt_strdup(e->rel);
            continue;
        }
        char ext[32];
        vt_prep_out_ext(ext, sizeof ext, e->rel, codec);
        const char *dot = strrchr(e->rel, '.'), *slash = strrchr(e->rel, '/');
        if (!dot || (slash && dot < slash)) /* a frame folder: its name, no extension */
            dot = e->rel + strlen(e->rel);
        e->out = prep_fmt("%.*s.%s", (int)(dot - e->rel), e->rel, ext);
    }
    prep_unique_outputs(list, codec);
    for (int i = 0; i < list->n; i++)
        if (list->e[i].video && strcmp(list->e[i].out, list->e[i].rel)) {
            m->old[m->n] = list->e[i].rel;
            m->new_[m->n] = list->e[i].out;
            m->n++;
        }
    /* Sort the map by old name (parallel arrays: a simple insertion sort; renames are
     * few, or a whole dataset of one extension already in walk order = sorted). */
    for (int i = 1; i < m->n; i++)
        for (int k = i; k > 0 && strcmp(m->old[k - 1], m->old[k]) > 0; k--) {
            char *t = m->old[k];
            m->old[k] = m->old[k - 1];
            m->old[k - 1] = t;
            t = m->new_[k];
            m->new_[k] = m->new_[k - 1];
            m->new_[k - 1] = t;
        }
}

int prep_mkdirs_for(const char *dst, const char *rel, char *err, size_t errlen) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", dst, rel);
    *strrchr(dir, '/') = 0;
    return vt_run_mkdirs(dir, err, errlen);
}

static int rename_find(const rename_map *m, const char *old, size_t len) {
    int lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strncmp(m->old[mid], old, len);
        if (c == 0 && m->old[mid][len])
            c = 1;
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* text with every token that is a renamed path ("./" allowed in front) replaced by the
 * new one. A token is what lies between separators: whitespace, ',', ';', '"', '\''. */
static char *rewrite_text(const char *text, const rename_map *m, int *changed) {
    size_t cap = strlen(text) + 1024, n = 0;
    char *out = vt_malloc(cap);
    const char *p = text;
    *changed = 0;
    while (*p) {
        size_t tok = strcspn(p, " \t\r\n,;\"'");
        const char *t = p;
        size_t tl = tok;
        if (tl > 2 && t[0] == '.' && t[1] == '/') {
            t += 2;
            tl -= 2;
        }
        int k = tok ? rename_find(m, t, tl) : -1;
        const char *put = k >= 0 ? m->new_[k] : p;
        size_t pl = k >= 0 ? strlen(m->new_[k]) : tok;
        if (k >= 0)
            *changed = 1;
        size_t sep = tok < strlen(p) ? 1 : 0;
        if (n + pl + sep + (size_t)(t - p) + 1 > cap) {
            cap = 2 * (n + pl + 16) + cap;
            out = vt_realloc(out, cap);
        }
        if (k >= 0) { /* keep a leading "./" as written */
            memcpy(out + n, p, (size_t)(t - p));
            n += (size_t)(t - p);
        }
        memcpy(out + n, put, pl);
        n += pl;
        p += tok;
        if (sep)
            out[n++] = *p++;
    }
    out[n] = 0;
    return out;
}

static int is_text_list(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".txt") || !strcasecmp(dot, ".csv") ||
                   !strcasecmp(dot, ".tsv") || !strcasecmp(dot, ".lst"));
}

/* Copies (or rewrites) one non-video file into DST atomically: 0, -1 (SRC unreadable) or
 * -2 (DST unwritable) with err. */
int prep_copy_file(const run *r, const entry *e, const rename_map *m, int *rewritten,
                     char *err, size_t errlen) {
    char src[4096], out[4096];
    snprintf(src, sizeof src, "%s/%s", r->src, e->rel);
    snprintf(out, sizeof out, "%s/%s", r->dst, e->rel);
    *rewritten = 0;
    if (prep_mkdirs_for(r->dst, e->rel, err, errlen) != 0)
        return -2;
    FILE *f = vt_fopen_regular(src, err, errlen);
    if (!f)
        return -1;
    size_t n;
    char *buf = vt_fread_all(f, &n);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        vt_set_err(err, errlen, "cannot read %s", src);
        return -1;
    }
    char *data = buf;
    if (m->n && is_text_list(e->rel) && memchr(buf, 0, n) == NULL) {
        data = rewrite_text(buf, m, rewritten);
        n = strlen(data);
    }
    int rc = vt_file_write_atomic(out, data, n, err, errlen) != 0 ? -2 : 0;
    if (data != buf)
        free(data);
    free(buf);
    return rc;
}

int prep_lock_dst(const char *dst) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK, dst);
    char err[1024];
    if (vt_output_check(path, err, sizeof err) != 0) { /* a link into SRC, a FIFO */
        fprintf(stderr, "vidtrain prep: the lock: %s\n", err);
        return -1;
    }
    int fd = vt_open_lock(path, 1, err, sizeof err);
    if (fd < 0) {
        if (errno == EEXIST || errno == ELOOP)
            fprintf(stderr, "vidtrain prep: the lock: %s\n", err);
        else
            fprintf(stderr, "vidtrain prep: cannot create the lock %s: %s (is %s writable?)\n",
                    path, strerror(errno), dst);
        return -1;
    }
    /* flock, not a file that exists: the kernel drops the lock when the holder dies, so a
     * killed prep never leaves DST locked. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int en = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        if (en == EWOULDBLOCK)
            fprintf(stderr, "vidtrain prep: %s is being written by another prep (pid %s): two "
                    "preps into one DST would replace each other's files. Wait for it to end "
                    "(run the same command again then to resume), or choose another DST\n",
                    dst, pid[0] ? pid : "unknown");
        else
            fprintf(stderr, "vidtrain prep: cannot lock %s: %s\n", path, strerror(en));
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* the pid is for the other prep's message only: a full disk that refuses it is found
     * by the next write, with its own message */
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    }
    return fd;
}
