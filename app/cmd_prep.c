/*
 * cmd_prep.c: `vidtrain prep SRC DST` — a training-ready mirror of a dataset folder:
 * every video under SRC re-encoded (pipeline/data/prep.h) to the same relative path
 * under DST, every other file (list files, labels CSVs) copied, in parallel over files,
 * with a progress line, a manifest (DST/prep-manifest.csv) and resume. A video whose
 * container cannot hold the codec changes extension; then DST/prep-paths.csv maps old
 * names to new and the copied .txt/.csv/.tsv files are rewritten to name the new files.
 *
 * It must never leave a partial file under a final name (outputs are written under a
 * hidden temporary name in the same folder — the dataset scan skips hidden names — and
 * renamed when whole), never write into SRC, and never stop for one bad video: that is
 * reported with its path and FFmpeg's reason, counted and written to the manifest.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "app/opts.h"
#include "app/run_files.h"
#include "app/signals.h"
#include "models/common.h"
#include "models/sha256.h"
#include "pipeline/data/dataset.h"
#include "pipeline/data/prep.h"

#define MANIFEST "prep-manifest.csv"
#define PATHS "prep-paths.csv"
#define OPTIONS "prep-options.txt"
#define MAX_DEPTH 16

/* Paths are checked once, at the walk, to leave room under 4 KiB for DST and the
 * temporary names; GCC cannot see that and warns on every later snprintf. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain prep SRC DST [--short-side S] [--fps F] [--gop G] [--codec C]\n"
        "                             [--crf Q] [--jobs N] [--force]\n"
        "  Re-encode every video under SRC to training size, into the same relative path\n"
        "  under DST; copy every other file (list files, labels CSVs). Any layout vidtrain\n"
        "  reads works: class folders, train/val/test folders, UCF101 list files, labels\n"
        "  CSVs. HD footage decodes 10-40x slower than a training-size copy, so do this\n"
        "  once before training on 720p/1080p/4K video. Each output is scaled so that its\n"
        "  short side is S (aspect kept, even sides), turned upright (rotation metadata\n"
        "  applied to the pixels), video only (audio and other streams dropped), with a\n"
        "  keyframe every G frames so that any clip seeks cheaply.\n"
        "\n"
        "  --short-side S  short side in pixels (default %d). Choose S = crop * 8/7: the\n"
        "                  default clip 16x112 crops 112 from 128; a 16x160 clip wants 183\n"
        "                  -> 184; 8x32 works from anything >= 32. Train with the same\n"
        "                  --short-side S (or smaller) and nothing is scaled up.\n"
        "  --fps F         constant frame rate F, resampled (frames repeated or dropped by\n"
        "                  time); default: keep every frame and its timestamp (VFR stays VFR)\n"
        "  --gop G         keyframe interval in frames (default %d): a clip read seeks to the\n"
        "                  keyframe before it and decodes on, so G bounds the wasted frames\n"
        "  --codec C       h264 (libx264, tuned for fast decoding: the default), mpeg4,\n"
        "                  mjpeg (all-intra; --gop ignored). Measured on 1080p footage at\n"
        "                  S=128 (scripts/bench-prep-codecs.sh, docs/prep.md): h264 G=%d\n"
        "                  reads at ~450 clips/s per core in 1.3 MiB per minute of video;\n"
        "                  mpeg4 G=16 as fast but 3x larger, mjpeg 9x larger; the HD\n"
        "                  source itself: 2.3 clips/s per core\n"
        "  --crf Q         quality: h264 CRF 0-51 (default 23; lower = better, larger);\n"
        "                  mpeg4/mjpeg qscale 1-31 (default 4 / 3)\n"
        "  --jobs N        files at once, one core each (default: the cores, %ld here)\n"
        "  --force         redo every file, and accept other options than DST was made with\n"
        "\n"
        "  Output names keep the file name and extension when that container holds the\n"
        "  codec (.mp4 .mov .m4v .mkv .avi .flv); others (.webm .gif .y4m .ts .mpg .ogv)\n"
        "  become .mp4, listed in DST/" PATHS " (old,new), and the copies of .txt, .csv\n"
        "  and .tsv files are rewritten to name the new files.\n"
        "  DST/" MANIFEST ": path,source,duration_s,frames,bytes,sha256,status — one row\n"
        "  per video, status \"ok\" or \"bad: FFmpeg's reason\" (unreadable, truncated, no\n"
        "  video stream, 0 decodable frames). Bad videos are skipped and counted.\n"
        "  Resume: run the same command again. A video whose output exists and whose row\n"
        "  says ok is skipped; an interrupted one is redone (outputs are written under a\n"
        "  hidden temporary name and renamed when whole). DST/" OPTIONS " records the\n"
        "  options; a rerun with others is refused unless --force.\n"
        "  Exit: 0 when every readable video is in DST (bad ones are listed), 1 when no\n"
        "  video could be written, 2 on a usage error. Segments (--trim) are not done yet.\n",
        VT_PREP_SHORT_SIDE, VT_PREP_GOP, VT_PREP_GOP, sysconf(_SC_NPROCESSORS_ONLN));
}

/* ---- the walk ---- */

typedef struct entry {
    char *rel;       /* relative to SRC */
    char *out;       /* relative to DST (videos: the extension may change) */
    int video;
    int64_t bytes;   /* source size */
} entry;

typedef struct entry_list {
    entry *e;
    int n, cap;
} entry_list;

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

typedef struct walk_ctx {
    entry_list *list;
    const char *src;
    dev_t dst_dev;        /* DST inside SRC is not walked into */
    ino_t dst_ino;
    dev_t anc_dev[MAX_DEPTH + 1];   /* the folders above: a link back to one is a loop */
    ino_t anc_ino[MAX_DEPTH + 1];
    int nwarn;
} walk_ctx;

static void walk(walk_ctx *c, const char *rel, int depth) {
    char abs[4096];
    snprintf(abs, sizeof abs, "%s%s%s", c->src, *rel ? "/" : "", rel);
    DIR *d = opendir(abs);
    if (!d) {
        fprintf(stderr, "vidtrain prep: cannot read the folder %s: %s (skipped)\n", abs,
                strerror(errno));
        c->nwarn++;
        return;
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue; /* hidden: ours (temporary files) or the user's, never data */
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = vt_realloc(names, (size_t)cap * sizeof *names);
        }
        names[n++] = vt_strdup(de->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i++) {
        char sub[4096], subabs[4096];
        int l1 = snprintf(sub, sizeof sub, "%s%s%s", rel, *rel ? "/" : "", names[i]);
        int l2 = snprintf(subabs, sizeof subabs, "%s/%s", c->src, sub);
        struct stat st;
        if (l1 >= (int)sizeof sub - 64 || l2 >= (int)sizeof subabs - 64) {
            /* Every later path (DST/x, temporary names) must fit 4 KiB too. */
            fprintf(stderr, "vidtrain prep: %s...: path too long (skipped)\n", subabs);
            c->nwarn++;
        } else if (stat(subabs, &st) != 0) {
            fprintf(stderr, "vidtrain prep: %s: %s (skipped)\n", subabs, strerror(errno));
            c->nwarn++;
        } else if (S_ISDIR(st.st_mode)) {
            int loop = st.st_dev == c->dst_dev && st.st_ino == c->dst_ino;
            for (int k = 0; k <= depth && !loop; k++)
                loop = st.st_dev == c->anc_dev[k] && st.st_ino == c->anc_ino[k];
            if (loop || depth + 1 > MAX_DEPTH) {
                if (!(st.st_dev == c->dst_dev && st.st_ino == c->dst_ino)) {
                    fprintf(stderr, "vidtrain prep: %s: a link back to a folder above it or "
                            "deeper than %d folders (skipped)\n", subabs, MAX_DEPTH);
                    c->nwarn++;
                }
            } else {
                c->anc_dev[depth + 1] = st.st_dev;
                c->anc_ino[depth + 1] = st.st_ino;
                walk(c, sub, depth + 1);
            }
        } else if (S_ISREG(st.st_mode)) {
            entry_list *l = c->list;
            if (l->n == l->cap) {
                l->cap = l->cap ? 2 * l->cap : 256;
                l->e = vt_realloc(l->e, (size_t)l->cap * sizeof *l->e);
            }
            l->e[l->n++] = (entry){.rel = vt_strdup(sub), .video = vt_is_video_name(names[i]),
                                   .bytes = st.st_size};
        } else {
            fprintf(stderr, "vidtrain prep: %s: not a regular file (skipped)\n", subabs);
            c->nwarn++;
        }
        free(names[i]);
    }
    free(names);
}

/* ---- the manifest: CSV rows ---- */

typedef struct row {
    char *f[7];  /* path, source, duration_s, frames, bytes, sha256, status */
    int seq;     /* order in the file (reading only) */
} row;

typedef struct row_list {
    row *r;
    int n, cap;
} row_list;

static void rows_push(row_list *l, row r) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->r = vt_realloc(l->r, (size_t)l->cap * sizeof *l->r);
    }
    l->r[l->n++] = r;
}

static void row_free(row *r) {
    for (int i = 0; i < 7; i++)
        vt_freep(&r->f[i]);
}

/* One CSV field, quoted when it must be (RFC 4180). */
static void csv_put(FILE *f, const char *s, int last) {
    if (strpbrk(s, ",\"\n\r")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void row_put(FILE *f, const row *r) {
    for (int i = 0; i < 7; i++)
        csv_put(f, r->f[i] ? r->f[i] : "", i == 6);
}

/* Parses one CSV line into exactly 7 fields; 0, or -1 for a malformed line (a torn last
 * line of a killed run, say), which the caller ignores. */
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
                    row_free(r);
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
        if (k == 7) {
            free(s);
            row_free(r);
            return -1;
        }
        r->f[k++] = s;
        if (!*p)
            break;
        p++;
    }
    if (k != 7) {
        row_free(r);
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
static void manifest_read(row_list *out, const char *path) {
    char *text = vt_file_read(path);
    if (!text)
        return;
    char *save = NULL;
    int first = 1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[len - 1] = 0;
        row r;
        if (first) { /* the header */
            first = 0;
            if (!strncmp(line, "path,", 5))
                continue;
        }
        if (row_parse(&r, line) == 0)
            rows_push(out, r);
    }
    free(text);
    for (int i = 0; i < out->n; i++)
        out->r[i].seq = i;
    if (out->n > 1)
        qsort(out->r, (size_t)out->n, sizeof *out->r, cmp_row_seq);
    int m = 0;
    for (int i = 0; i < out->n; i++) {
        if (i + 1 < out->n && !strcmp(out->r[i].f[0], out->r[i + 1].f[0])) {
            row_free(&out->r[i]); /* an earlier row of the same path */
            continue;
        }
        out->r[m++] = out->r[i];
    }
    out->n = m;
}

static row *manifest_find(row_list *l, const char *path) {
    row key = {.f = {(char *)path}};
    return l->n ? bsearch(&key, l->r, (size_t)l->n, sizeof *l->r, cmp_row) : NULL;
}

/* ---- the run ---- */

typedef struct run {
    const char *src, *dst;
    vt_prep_opts o;
    entry *jobs;          /* the videos to do */
    int njobs;
    atomic_int next;
    pthread_mutex_t lock; /* guards everything below */
    FILE *manifest;       /* appended to as files finish */
    row_list rows;        /* this run's rows */
    int done, ok, bad;
    int64_t bytes_done, bytes_total;
    double src_seconds, t0, last_draw;
    int tty;
} run;

static void fmt_eta(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e7)
        snprintf(buf, n, "?");
    else if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, n, "%ds", (int)s);
}

/* The progress figures: files done/total, source seconds per wall second, ETA by bytes
 * (sources' sizes are known before they are read; their durations are not). */
static void progress_text(run *r, char *buf, size_t n) {
    double dt = vt_now() - r->t0, eta = -1;
    if (r->bytes_done > 0 && dt > 0)
        eta = (double)(r->bytes_total - r->bytes_done) * dt / (double)r->bytes_done;
    char e[32];
    fmt_eta(e, sizeof e, eta);
    snprintf(buf, n, "prep %d/%d files (%d bad), %.1f s of video per s, ETA %s", r->done,
             r->njobs, r->bad, dt > 0 ? r->src_seconds / dt : 0.0, e);
}

/* Called under the lock when a file finishes. */
static void report(run *r, const entry *e, const vt_prep_result *res, int64_t bytes,
                   const char *why, double secs) {
    char line[512];
    progress_text(r, line, sizeof line);
    if (r->tty) {
        if (why)
            fprintf(stderr, "\r\033[Kvidtrain prep: bad video %s/%s: %s\n", r->src, e->rel, why);
        double now = vt_now();
        if (now - r->last_draw >= 0.1 || r->done == r->njobs) {
            fprintf(stderr, "\r\033[K%s", line);
            r->last_draw = now;
        }
    } else if (why) {
        fprintf(stderr, "%s | bad video %s/%s: %s\n", line, r->src, e->rel, why);
    } else {
        char b[32];
        fprintf(stderr, "%s | %s: %.1f s, %lld frames, %dx%d, %s, %.1f s/s\n", line, e->out,
                res->src_duration, (long long)res->frames_written, res->out_width,
                res->out_height, vt_fmt_bytes(b, sizeof b, bytes),
                secs > 0 ? res->src_duration / secs : 0.0);
    }
    fflush(stderr);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    char *s = NULL;
    if (vasprintf(&s, f, ap) < 0)
        s = NULL;
    va_end(ap);
    VT_CHECK(s != NULL, "out of memory");
    return s;
}

/* DST/dir/.name.prep-part: hidden (the scan and our walk skip it), same folder as the
 * final name (the rename cannot cross file systems). */
static void tmp_name(char *buf, size_t n, const char *dst, const char *rel) {
    const char *slash = strrchr(rel, '/');
    if (slash)
        snprintf(buf, n, "%s/%.*s/.%s.prep-part", dst, (int)(slash - rel), rel, slash + 1);
    else
        snprintf(buf, n, "%s/.%s.prep-part", dst, rel);
}

static int mkdirs_for(const char *dst, const char *rel, char *err, size_t errlen) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", dst, rel);
    *strrchr(dir, '/') = 0;
    return vt_run_mkdirs(dir, err, errlen);
}

static void *worker(void *arg) {
    run *r = arg;
    for (;;) {
        if (vt_signal_pending())
            break;
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->njobs)
            break;
        entry *e = &r->jobs[i];
        char src[4096], out[4096], tmp[4096], err[1024] = "", hex[65] = "";
        snprintf(src, sizeof src, "%s/%s", r->src, e->rel);
        snprintf(out, sizeof out, "%s/%s", r->dst, e->out);
        tmp_name(tmp, sizeof tmp, r->dst, e->out);
        const char *dot = strrchr(e->out, '.');
        vt_prep_result res;
        memset(&res, 0, sizeof res);
        double t0 = vt_now();
        int rc = mkdirs_for(r->dst, e->out, err, sizeof err);
        if (rc == 0)
            rc = vt_prep_file(&res, src, tmp, dot + 1, &r->o, err, sizeof err);
        struct stat st;
        if (rc == 0 && rename(tmp, out) != 0) {
            vt_set_err(err, sizeof err, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
            rc = -1;
        }
        if (rc != 0)
            unlink(tmp);
        if (rc == 0 && (stat(out, &st) != 0 || vt_sha256_file(out, hex) != 0)) {
            vt_set_err(err, sizeof err, "cannot read back %s: %s", out, strerror(errno));
            rc = -1;
        }
        double secs = vt_now() - t0;
        row w = {.f = {vt_strdup(e->out), vt_strdup(src), fmt("%.3f", res.src_duration),
                  fmt("%lld", (long long)res.frames_written),
                  fmt("%lld", rc == 0 ? (long long)st.st_size : 0LL), vt_strdup(hex),
                  rc == 0 ? vt_strdup("ok") : fmt("bad: %s", err)}};
        pthread_mutex_lock(&r->lock);
        /* The row goes out after the rename: a kill between them redoes the file. */
        row_put(r->manifest, &w);
        fflush(r->manifest);
        rows_push(&r->rows, w);
        r->done++;
        r->ok += rc == 0;
        r->bad += rc != 0;
        r->bytes_done += e->bytes;
        r->src_seconds += res.src_duration;
        report(r, e, &res, rc == 0 ? st.st_size : 0, rc == 0 ? NULL : err, secs);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

/* ---- names that change, and the text files that mention them ---- */

typedef struct rename_map {
    char **old, **new_; /* parallel, sorted by old */
    int n;
} rename_map;

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

/* Copies (or rewrites) one non-video file into DST atomically. 0 or -1 with err. */
static int copy_file(const run *r, const entry *e, const rename_map *m, int *rewritten,
                     char *err, size_t errlen) {
    char src[4096], out[4096];
    snprintf(src, sizeof src, "%s/%s", r->src, e->rel);
    snprintf(out, sizeof out, "%s/%s", r->dst, e->rel);
    *rewritten = 0;
    if (mkdirs_for(r->dst, e->rel, err, errlen) != 0)
        return -1;
    FILE *f = fopen(src, "rb");
    if (!f) {
        vt_set_err(err, errlen, "cannot read %s: %s", src, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *buf = vt_malloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = vt_realloc(buf, cap + 1);
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        vt_set_err(err, errlen, "cannot read %s", src);
        return -1;
    }
    buf[n] = 0;
    char *data = buf;
    if (m->n && is_text_list(e->rel) && memchr(buf, 0, n) == NULL) {
        data = rewrite_text(buf, m, rewritten);
        n = strlen(data);
    }
    int rc = vt_file_write_atomic(out, data, n, err, errlen);
    if (data != buf)
        free(data);
    free(buf);
    return rc;
}

/* ---- options recorded in DST ---- */

static char *options_text(const vt_prep_opts *o) {
    return fmt("short_side=%d\nfps=%g\ngop=%d\ncodec=%s\nquality=%d\n", o->short_side, o->fps,
               o->gop, o->codec, o->quality);
}

/* ---- the command ---- */

int vt_cmd_prep(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_prep_opts o;
    vt_prep_opts_default(&o);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = ncpu > 0 ? (int)ncpu : 1, force = 0, rc = 2;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    entry_list list = {0};
    row_list old = {0};
    rename_map m = {0};
    run r = {0};
    char *opt_text = NULL, *recorded = NULL;
    char err[1024], path[4200];
    pthread_t *th = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--short-side")) {
            if (vt_opt_int("prep", a, v, 2, VT_CLIP_MAX_SIDE, &o.short_side) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--gop")) {
            if (vt_opt_int("prep", a, v, 1, 1000, &o.gop) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--crf")) {
            if (vt_opt_int("prep", a, v, 0, 51, &o.quality) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--jobs")) {
            if (vt_opt_int("prep", a, v, 1, 256, &jobs) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--fps")) {
            if (vt_opt_f64("prep", a, v, 0.1, 1000, &o.fps) != 0)
                goto end;
            i++;
        } else if (!strcmp(a, "--codec")) {
            if (!v) {
                fprintf(stderr, "vidtrain prep: --codec needs a value\n");
                goto end;
            }
            o.codec = v;
            i++;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "vidtrain prep: unknown option %s (see --help)\n", a);
            goto end;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "vidtrain prep: one SRC and one DST (see --help)\n");
            goto end;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "usage: vidtrain prep SRC DST [options] (see --help)\n");
        goto end;
    }
    if (strcmp(o.codec, "h264") && strcmp(o.codec, "mpeg4") && strcmp(o.codec, "mjpeg")) {
        fprintf(stderr, "vidtrain prep: --codec %s: expected h264, mpeg4 or mjpeg\n", o.codec);
        goto end;
    }
    if (!vt_prep_codec_available(o.codec)) {
        if (strcmp(o.codec, "h264") || !vt_prep_codec_available("mpeg4")) {
            fprintf(stderr, "vidtrain prep: this FFmpeg has no %s encoder\n", o.codec);
            rc = 1;
            goto end;
        }
        fprintf(stderr, "vidtrain prep: this FFmpeg has no libx264: writing mpeg4 instead\n");
        o.codec = "mpeg4";
    }
    if (!strcmp(o.codec, "mjpeg"))
        o.gop = 1; /* every JPEG frame is a keyframe */
    if (o.short_side & 1) {
        o.short_side++;
        fprintf(stderr, "vidtrain prep: --short-side rounded up to %d (4:2:0 needs even sides)\n",
                o.short_side);
    }
    if (o.quality > 31 && strcmp(o.codec, "h264")) {
        fprintf(stderr, "vidtrain prep: --crf for %s is a qscale from 1 to 31\n", o.codec);
        goto end;
    }
    r.src = pos[0];
    r.dst = pos[1];
    r.o = o;
    struct stat ss, ds;
    if (stat(r.src, &ss) != 0 || !S_ISDIR(ss.st_mode)) {
        fprintf(stderr, "vidtrain prep: %s is not a folder\n", r.src);
        rc = 1;
        goto end;
    }
    if (vt_run_mkdirs(r.dst, err, sizeof err) != 0 || stat(r.dst, &ds) != 0) {
        fprintf(stderr, "vidtrain prep: %s\n", err);
        rc = 1;
        goto end;
    }
    if (ss.st_dev == ds.st_dev && ss.st_ino == ds.st_ino) {
        fprintf(stderr, "vidtrain prep: SRC and DST are the same folder\n");
        goto end;
    }

    /* Options: a DST made with others would mix two sizes; refuse unless --force. */
    opt_text = options_text(&o);
    snprintf(path, sizeof path, "%s/" OPTIONS, r.dst);
    recorded = vt_file_read(path);
    if (recorded && strcmp(recorded, opt_text) && !force) {
        fprintf(stderr, "vidtrain prep: %s was made with other options:\n%s"
                "now:\n%sRerun with the same options to resume, or --force to redo it all.\n",
                r.dst, recorded, opt_text);
        goto end;
    }
    if (vt_file_write_atomic(path, opt_text, strlen(opt_text), err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain prep: %s\n", err);
        rc = 1;
        goto end;
    }

    walk_ctx wc = {.list = &list, .src = r.src, .dst_dev = ds.st_dev, .dst_ino = ds.st_ino};
    wc.anc_dev[0] = ss.st_dev;
    wc.anc_ino[0] = ss.st_ino;
    walk(&wc, "", 0);
    int nvideo = 0;
    for (int i = 0; i < list.n; i++)
        nvideo += list.e[i].video;
    if (nvideo == 0) {
        fprintf(stderr, "vidtrain prep: no video under %s (videos are recognised by their "
                "extension: mp4 avi mkv webm mov m4v mpg mpeg gif y4m ogv flv ts)\n", r.src);
        rc = 1;
        goto end;
    }

    /* Output names, and the renamed ones. */
    m.old = vt_calloc((size_t)nvideo, sizeof(char *));
    m.new_ = vt_calloc((size_t)nvideo, sizeof(char *));
    for (int i = 0; i < list.n; i++) {
        entry *e = &list.e[i];
        if (!e->video) {
            e->out = vt_strdup(e->rel);
            continue;
        }
        char ext[32];
        vt_prep_out_ext(ext, sizeof ext, e->rel, o.codec);
        const char *dot = strrchr(e->rel, '.');
        e->out = fmt("%.*s.%s", (int)(dot - e->rel), e->rel, ext);
        if (strcmp(e->out, e->rel)) {
            m.old[m.n] = e->rel;
            m.new_[m.n] = e->out;
            m.n++;
        }
    }
    /* Two sources that map to one output (a.webm and a.gif beside a.mp4) would overwrite
     * each other: the later ones keep their extension in the name (a.webm.mp4). */
    for (int i = 0; i < list.n; i++) {
        for (int k = 0; list.e[i].video && k < list.n; k++) {
            if (k != i && list.e[k].video && !strcmp(list.e[i].out, list.e[k].out) &&
                strcmp(list.e[i].out, list.e[i].rel)) {
                char ext[32];
                vt_prep_out_ext(ext, sizeof ext, list.e[i].rel, o.codec);
                free(list.e[i].out);
                list.e[i].out = fmt("%s.%s", list.e[i].rel, ext);
                for (int j = 0; j < m.n; j++)
                    if (m.old[j] == list.e[i].rel)
                        m.new_[j] = list.e[i].out;
            }
        }
        if (list.n > 2000) /* the quadratic check is for ordinary folders only */
            break;
    }
    /* Sort the map by old name (parallel arrays: a simple insertion sort; renames are
     * few, or a whole dataset of one extension already in walk order = sorted). */
    for (int i = 1; i < m.n; i++)
        for (int k = i; k > 0 && strcmp(m.old[k - 1], m.old[k]) > 0; k--) {
            char *t = m.old[k];
            m.old[k] = m.old[k - 1];
            m.old[k - 1] = t;
            t = m.new_[k];
            m.new_[k] = m.new_[k - 1];
            m.new_[k - 1] = t;
        }

    /* Resume: a video whose output exists and whose last row says ok is done. */
    snprintf(path, sizeof path, "%s/" MANIFEST, r.dst);
    if (!force)
        manifest_read(&old, path);
    r.jobs = vt_calloc((size_t)nvideo, sizeof(entry));
    int skipped = 0;
    for (int i = 0; i < list.n; i++) {
        entry *e = &list.e[i];
        if (!e->video)
            continue;
        row *w = manifest_find(&old, e->out);
        char out[4200];
        snprintf(out, sizeof out, "%s/%s", r.dst, e->out);
        if (w && !strcmp(w->f[6], "ok") && vt_file_exists(out)) {
            skipped++;
            continue;
        }
        r.jobs[r.njobs++] = *e;
        r.bytes_total += e->bytes;
    }
    /* The manifest is rewritten with the rows kept, then appended to as files finish. */
    {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK(f != NULL, "open_memstream: out of memory");
        fputs("path,source,duration_s,frames,bytes,sha256,status\n", f);
        for (int i = 0; i < old.n; i++) {
            int pending = 0;
            for (int k = 0; k < r.njobs && !pending; k++)
                pending = !strcmp(r.jobs[k].out, old.r[i].f[0]);
            if (!pending)
                row_put(f, &old.r[i]);
        }
        VT_CHECK(fclose(f) == 0, "building the manifest in memory failed");
        int wrc = vt_file_write_atomic(path, text, len, err, sizeof err);
        free(text);
        if (wrc != 0) {
            fprintf(stderr, "vidtrain prep: %s\n", err);
            rc = 1;
            goto end;
        }
    }
    r.manifest = fopen(path, "a");
    if (!r.manifest) {
        fprintf(stderr, "vidtrain prep: cannot append to %s: %s\n", path, strerror(errno));
        rc = 1;
        goto end;
    }

    /* Non-video files first: they are small, and list files are then in place. */
    int copied = 0, rewritten = 0;
    for (int i = 0; i < list.n; i++) {
        if (list.e[i].video)
            continue;
        int rw = 0;
        if (copy_file(&r, &list.e[i], &m, &rw, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain prep: %s (not copied)\n", err);
        else
            copied++;
        rewritten += rw;
    }
    if (m.n) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK(f != NULL, "open_memstream: out of memory");
        fputs("old,new\n", f);
        for (int i = 0; i < m.n; i++) {
            csv_put(f, m.old[i], 0);
            csv_put(f, m.new_[i], 1);
        }
        VT_CHECK(fclose(f) == 0, "building %s in memory failed", PATHS);
        snprintf(path, sizeof path, "%s/" PATHS, r.dst);
        int wrc = vt_file_write_atomic(path, text, len, err, sizeof err);
        free(text);
        if (wrc != 0)
            fprintf(stderr, "vidtrain prep: %s\n", err);
    }

    fprintf(stderr, "vidtrain prep: %s -> %s: %d videos (%d to do, %d done before), %d other "
            "files; short side %d, %s, keyframe every %d frames, %s; %d jobs\n",
            r.src, r.dst, nvideo, r.njobs, skipped, list.n - nvideo, o.short_side, o.codec,
            o.gop, o.fps > 0 ? "constant fps" : "timestamps kept", jobs);
    r.tty = isatty(fileno(stderr));
    r.t0 = vt_now();
    atomic_init(&r.next, 0);
    pthread_mutex_init(&r.lock, NULL);
    vt_signals_install();
    int nth = VT_MIN(jobs, VT_MAX(r.njobs, 1));
    th = vt_malloc((size_t)nth * sizeof *th);
    for (int t = 0; t < nth; t++)
        VT_CHECK(pthread_create(&th[t], NULL, worker, &r) == 0, "pthread_create");
    for (int t = 0; t < nth; t++)
        pthread_join(th[t], NULL);
    int sig = vt_signal_pending();
    vt_signals_reset();
    pthread_mutex_destroy(&r.lock);
    fclose(r.manifest);
    r.manifest = NULL;
    if (r.tty && r.njobs)
        fputc('\n', stderr);

    /* The manifest once more, whole and sorted: the kept rows and this run's. */
    {
        row_list all = {0};
        snprintf(path, sizeof path, "%s/" MANIFEST, r.dst);
        manifest_read(&all, path);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK(f != NULL, "open_memstream: out of memory");
        fputs("path,source,duration_s,frames,bytes,sha256,status\n", f);
        for (int i = 0; i < all.n; i++)
            row_put(f, &all.r[i]);
        VT_CHECK(fclose(f) == 0, "building the manifest in memory failed");
        if (vt_file_write_atomic(path, text, len, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain prep: %s\n", err);
        free(text);
        for (int i = 0; i < all.n; i++)
            row_free(&all.r[i]);
        free(all.r);
    }

    double dt = vt_now() - r.t0;
    char b1[32], b2[32];
    int64_t out_bytes = 0, in_bytes = 0;
    for (int i = 0; i < r.rows.n; i++)
        if (!strcmp(r.rows.r[i].f[6], "ok"))
            out_bytes += strtoll(r.rows.r[i].f[4], NULL, 10);
    for (int i = 0; i < r.njobs; i++)
        in_bytes += r.jobs[i].bytes;
    printf("prep: %d written, %d done before, %d bad, %d not reached; %d other files copied "
           "(%d rewritten for renamed videos%s)\n", r.ok, skipped, r.bad,
           r.njobs - r.done, copied, rewritten, m.n ? ", see " PATHS : "");
    printf("prep: %.1f s of video in %.1f s = %.2f s/s (%.2f per job); %s read, %s written; "
           "manifest %s/" MANIFEST "\n", r.src_seconds, dt, dt > 0 ? r.src_seconds / dt : 0.0,
           dt > 0 ? r.src_seconds / dt / nth : 0.0, vt_fmt_bytes(b1, sizeof b1, in_bytes),
           vt_fmt_bytes(b2, sizeof b2, out_bytes), r.dst);
    if (r.bad) {
        printf("prep: bad videos (not in DST):\n");
        for (int i = 0; i < r.rows.n; i++)
            if (strcmp(r.rows.r[i].f[6], "ok"))
                printf("  %s: %s\n", r.rows.r[i].f[1], r.rows.r[i].f[6] + 5);
    }
    if (sig) {
        printf("prep: interrupted; run the same command again to resume\n");
        rc = 128 + sig;
    } else {
        rc = r.ok + skipped > 0 ? 0 : 1;
    }

end:
    for (int i = 0; i < list.n; i++) {
        free(list.e[i].rel);
        free(list.e[i].out);
    }
    free(list.e);
    for (int i = 0; i < old.n; i++)
        row_free(&old.r[i]);
    free(old.r);
    for (int i = 0; i < r.rows.n; i++)
        row_free(&r.rows.r[i]);
    free(r.rows.r);
    free(r.jobs);
    free(m.old);
    free(m.new_);
    free(th);
    free(opt_text);
    free(recorded);
    return rc;
}
