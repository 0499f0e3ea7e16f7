/*
 * fileset.c: files read together, replaced together (fileset.h), and the atomic writer's
 * last step, which hands a member's staged file to the open set instead of renaming it.
 *
 * The record is text, one line a fact, names percent-encoded (a member's name is any
 * byte but '/' and NUL):
 *     vidtrain file set 1
 *     pid 4242
 *     put eval.json eval.json.tmp.4242 2049 1837261
 *     drop confusion.csv
 * "put NAME STAGED DEV INO": NAME's new content is the file staged as STAGED, whose
 * device and inode are DEV and INO (after its rename NAME has them); "drop NAME": NAME is
 * removed. It is outside bytes to its reader (a user may edit it): parsed whole, checked,
 * never trusted to name a path outside its folder.
 *
 * It must never rename or remove a file a record names outside the record's own folder,
 * nor one whose inode is not the one the record gives.
 */
#include "base/fileset.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

#define MAX_MEMBERS 8

typedef struct member {
    char *path, *name; /* as the writer spells it; its base name */
    vt_fileset_keep keep;
    char *tmp;         /* staged: its temporary file, else NULL */
    unsigned long long dev, ino;
} member;

struct vt_fileset {
    char *dir, *record;
    member m[MAX_MEMBERS];
    int n;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static vt_fileset *g_open; /* the process's open set, NULL when none */

static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return vt_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = vt_malloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = vt_malloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *vt_fileset_record(const char *lead) {
    char *dir = dir_of(lead), stem[256];
    vt_tmp_stem(stem, sizeof stem, base_of(lead), 1); /* ".", then ".set": within NAME_MAX */
    size_t n = strlen(dir) + strlen(stem) + 8;
    char *r = vt_malloc(n);
    snprintf(r, n, "%s/.%s.set", dir, stem);
    free(dir);
    return r;
}

vt_fileset *vt_fileset_begin(const char *lead, vt_fileset_keep keep_lead) {
    vt_fileset *s = vt_calloc(1, sizeof *s);
    s->dir = dir_of(lead);
    s->record = vt_fileset_record(lead);
    pthread_mutex_lock(&g_mu);
    VT_CHECK(g_open == NULL, "vt_fileset_begin(%s): another set is open", lead);
    g_open = s;
    pthread_mutex_unlock(&g_mu);
    vt_fileset_add(s, lead, keep_lead);
    return s;
}

void vt_fileset_add(vt_fileset *s, const char *path, vt_fileset_keep keep) {
    char *dir = dir_of(path);
    VT_CHECK(s->n < MAX_MEMBERS && !strcmp(dir, s->dir),
             "vt_fileset_add(%s): more than %d members, or not in %s", path, MAX_MEMBERS, s->dir);
    free(dir);
    member *m = &s->m[s->n++];
    memset(m, 0, sizeof *m);
    m->path = vt_strdup(path);
    m->name = vt_strdup(base_of(path));
    m->keep = keep;
}

/* The atomic writer's last step for a file staged as *tmp: 1 when it is a member of the
 * open set, which then holds it (*tmp NULL), else 0. */
static int take(const char *path, char **tmp) {
    int took = 0;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; g_open && i < g_open->n && !took; i++) {
        member *m = &g_open->m[i];
        if (strcmp(m->path, path))
            continue;
        struct stat st;
        VT_CHECK(stat(*tmp, &st) == 0, "stat %s: %s", *tmp, strerror(errno));
        vt_file_unstage(&m->tmp); /* written twice: the later content is the set's */
        m->tmp = *tmp;
        *tmp = NULL;
        m->dev = (unsigned long long)st.st_dev;
        m->ino = (unsigned long long)st.st_ino;
        took = 1;
    }
    pthread_mutex_unlock(&g_mu);
    return took;
}

int vt_file_write_atomic_fill(const char *path, vt_file_fill_fn fill, void *ctx, char *err,
                              size_t errlen) {
    char *tmp = vt_file_stage_fill(path, fill, ctx, err, errlen);
    if (!tmp)
        return -1;
    return take(path, &tmp) ? 0 : vt_file_commit(path, &tmp, err, errlen);
}

typedef struct buf_fill { const void *data; size_t len; } buf_fill;

static int fill_buf(void *ctx, int fd) {
    const buf_fill *b = ctx;
    return vt_fd_write_all(fd, b->data, b->len);
}

int vt_file_write_atomic(const char *path, const void *data, size_t len, char *err,
                         size_t errlen) {
    buf_fill b = {data, len};
    return vt_file_write_atomic_fill(path, fill_buf, &b, err, errlen);
}

char *vt_file_stage(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    buf_fill b = {data, len};
    return vt_file_stage_fill(path, fill_buf, &b, err, errlen);
}

/* ---- the record ---- */

static int plain(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._~+,=@-", c) != NULL;
}

static void put_name(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fprintf(f, plain(*p) ? "%c" : "%%%02X", *p);
}

/* A percent-encoded name back (malloc'd), NULL when it is not one or not a plain file
 * name of the folder ("", ".", "..", a '/'). */
static char *get_name(const char *s) {
    size_t n = strlen(s), k = 0;
    char *o = vt_malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            o[k++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else if (plain((unsigned char)s[i])) {
            o[k++] = s[i];
        } else {
            free(o);
            return NULL;
        }
    }
    o[k] = 0;
    if (!k || !strcmp(o, ".") || !strcmp(o, "..") || strchr(o, '/')) {
        free(o);
        return NULL;
    }
    return o;
}

typedef struct rec_ent {
    int drop;
    char *name, *tmp;
    unsigned long long dev, ino;
} rec_ent;

typedef struct rec {
    long pid;
    rec_ent e[MAX_MEMBERS];
    int n;
} rec;

static void rec_free(rec *r) {
    for (int i = 0; i < r->n; i++) {
        free(r->e[i].name);
        free(r->e[i].tmp);
    }
    r->n = 0;
}

/* Parses the record's text whole. 0, or -1 when it is not one this code wrote. */
static int rec_parse(char *text, rec *r) {
    memset(r, 0, sizeof *r);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    if (!line || strcmp(line, "vidtrain file set 1"))
        return -1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char a[1024], b[1024], c[1024]; /* a 255-byte name, every byte encoded: 765 */
        unsigned long long dev, ino;
        long pid;
        int used = 0;
        if (sscanf(line, "pid %ld%n", &pid, &used) == 1 && !line[used] && pid > 0) {
            r->pid = pid;
            continue;
        }
        if (r->n == MAX_MEMBERS)
            goto bad;
        rec_ent *e = &r->e[r->n];
        memset(e, 0, sizeof *e);
        if (sscanf(line, "put %1023s %1023s %llu %llu%n", a, b, &dev, &ino, &used) == 4 &&
            !line[used]) {
            e->name = get_name(a);
            e->tmp = get_name(b);
            e->dev = dev;
            e->ino = ino;
        } else if (sscanf(line, "drop %1023s%n", c, &used) == 1 && !line[used]) {
            e->name = get_name(c);
            e->drop = 1;
        } else {
            goto bad;
        }
        r->n++;
        if (!e->name || (!e->drop && !e->tmp))
            goto bad;
    }
    if (r->pid <= 0 || r->n == 0)
        goto bad;
    return 0;
bad:
    rec_free(r);
    return -1;
}

/* Reads the record of lead. 1 read, 0 none there, -1 unreadable (err says why). */
static int rec_read(const char *record, rec *r, char *err, size_t errlen) {
    struct stat st;
    if (lstat(record, &st) != 0 && errno == ENOENT)
        return 0;
    char *text = vt_file_read(record);
    int rc = text ? rec_parse(text, r) : -1;
    free(text);
    if (rc != 0) {
        vt_set_err(err, errlen, "%s is a record of files replaced together that vidtrain cannot "
                   "read: the files it names may be of two different sets", record);
        return -1;
    }
    return 1;
}

/* 1 when entry e is in place in dir: a member with the inode its record names, a dropped
 * member gone. */
static int in_place(const char *dir, const rec_ent *e) {
    char *p = join(dir, e->name);
    struct stat st;
    int there = lstat(p, &st) == 0;
    free(p);
    if (e->drop)
        return !there;
    return there && (unsigned long long)st.st_dev == e->dev &&
           (unsigned long long)st.st_ino == e->ino;
}

/* The members' names, for messages: "a, b and c". */
static void names(char *out, size_t n, const rec *r) {
    out[0] = 0;
    for (int i = 0; i < r->n; i++) {
        size_t l = strlen(out);
        snprintf(out + l, n - l, "%s%s", i == 0 ? "" : i + 1 == r->n ? " and " : ", ",
                 r->e[i].name);
    }
}

static int alive(long pid) {
    return pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

int vt_fileset_check(const char *lead, char *err, size_t errlen) {
    char *record = vt_fileset_record(lead), *dir = dir_of(lead);
    rec r;
    int got = rec_read(record, &r, err, errlen), rc = got < 0 ? -1 : 0;
    if (got == 1) {
        int whole = 1;
        for (int i = 0; i < r.n; i++)
            whole &= in_place(dir, &r.e[i]);
        char who[1024];
        names(who, sizeof who, &r);
        if (!whole) { /* (whole: stopped after its last rename, nothing mixed) */
            vt_set_err(err, errlen, "%s in %s were being replaced together by vidtrain (pid %ld%s) "
                       "when it stopped between one and the next: they may be of two different "
                       "sets (%s says so)", who, dir, r.pid, alive(r.pid) ? ", still running" : "",
                       record);
            rc = -1;
        }
        rec_free(&r);
    }
    free(record);
    free(dir);
    return rc;
}

int vt_fileset_finish(const char *lead, char *err, size_t errlen) {
    char *record = vt_fileset_record(lead), *dir = dir_of(lead);
    rec r;
    int got = rec_read(record, &r, err, errlen), rc = got;
    for (int i = 0; got == 1 && rc == 1 && i < r.n; i++) { /* everything there first */
        rec_ent *e = &r.e[i];
        if (e->drop || in_place(dir, e))
            continue;
        char *t = join(dir, e->tmp);
        struct stat st;
        if (lstat(t, &st) != 0 || (unsigned long long)st.st_dev != e->dev ||
            (unsigned long long)st.st_ino != e->ino) {
            vt_set_err(err, errlen, "%s: %s/%s's new content, %s, is gone: the set cannot be "
                       "finished, and %s may be of two different sets", record, dir, e->name, t,
                       e->name);
            rc = -1;
        }
        free(t);
    }
    for (int i = 0; got == 1 && rc == 1 && i < r.n; i++) {
        rec_ent *e = &r.e[i];
        if (in_place(dir, e))
            continue;
        char *p = join(dir, e->name), *t = e->drop ? NULL : join(dir, e->tmp);
        if (e->drop ? unlink(p) != 0 && errno != ENOENT : rename(t, p) != 0) {
            vt_set_err(err, errlen, "%s: cannot finish %s: %s", record, p, strerror(errno));
            rc = -1;
        }
        free(p);
        free(t);
    }
    if (rc == 1 && (vt_file_sync_folder(record) != 0 || unlink(record) != 0 ||
                    vt_file_sync_folder(record) != 0)) {
        vt_set_err(err, errlen, "%s: the set is finished but its record cannot be removed: %s",
                   record, strerror(errno));
        rc = -1;
    } else if (rc == 1) {
        char who[1024];
        names(who, sizeof who, &r);
        vt_set_err(err, errlen, "finished replacing %s in %s, which vidtrain (pid %ld) left "
                   "half done when it stopped", who, dir, r.pid);
    }
    if (got == 1)
        rec_free(&r);
    free(record);
    free(dir);
    return rc;
}

/* ---- commit ---- */

static void close_set(vt_fileset *s) {
    pthread_mutex_lock(&g_mu);
    if (g_open == s)
        g_open = NULL;
    pthread_mutex_unlock(&g_mu);
}

void vt_fileset_free(vt_fileset **sp) {
    vt_fileset *s = sp ? *sp : NULL;
    if (!s)
        return;
    close_set(s);
    for (int i = 0; i < s->n; i++) {
        vt_file_unstage(&s->m[i].tmp);
        free(s->m[i].path);
        free(s->m[i].name);
    }
    free(s->dir);
    free(s->record);
    free(s);
    *sp = NULL;
}

/* VT_FILESET_KILL=N: SIGKILL after the Nth rename or removal of a commit (fileset.h). */
static void maybe_die(int changed) {
    const char *e = getenv("VT_FILESET_KILL");
    int n;
    if (e && vt_parse_int(e, 1, 1000, &n) == 0 && n == changed)
        raise(SIGKILL);
}

int vt_fileset_commit(vt_fileset **sp, char *err, size_t errlen) {
    vt_fileset *s = *sp;
    if (!s) /* a rank that writes nothing */
        return 0;
    close_set(s); /* the record below is written, not staged */
    int staged = 0, rc = 0;
    for (int i = 0; i < s->n; i++)
        staged += s->m[i].tmp != NULL;
    if (!staged) {
        vt_fileset_free(sp);
        return 0;
    }
    /* a member to remove goes through the output rule too (never an input of the
     * command's), checked before anything changes */
    for (int i = 0; i < s->n; i++) {
        const member *m = &s->m[i];
        if (!m->tmp && m->keep == VT_FILESET_DROP && access(m->path, F_OK) == 0 &&
            vt_output_check(m->path, err, errlen) != 0) {
            vt_fileset_free(sp);
            return -1;
        }
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK(f != NULL, "open_memstream: out of memory");
    fprintf(f, "vidtrain file set 1\npid %ld\n", (long)getpid());
    for (int i = 0; i < s->n; i++) {
        const member *m = &s->m[i];
        if (m->tmp) {
            fputs("put ", f);
            put_name(f, m->name);
            fputc(' ', f);
            put_name(f, base_of(m->tmp));
            fprintf(f, " %llu %llu\n", m->dev, m->ino);
        } else if (m->keep == VT_FILESET_DROP) {
            fputs("drop ", f);
            put_name(f, m->name);
            fputc('\n', f);
        }
    }
    int bad = ferror(f);
    VT_CHECK(fclose(f) == 0 && !bad, "building %s in memory failed (out of memory)", s->record);
    if (vt_file_write_atomic(s->record, text, len, err, errlen) != 0) {
        free(text);
        vt_fileset_free(sp); /* nothing renamed: the old set stays */
        return -1;
    }
    free(text);
    int changed = 0;
    for (int i = 0; i < s->n && rc == 0; i++) {
        member *m = &s->m[i];
        if (m->tmp) {
            rc = vt_file_commit(m->path, &m->tmp, err, errlen);
        } else if (m->keep == VT_FILESET_DROP && unlink(m->path) != 0 && errno != ENOENT) {
            vt_set_err(err, errlen, "cannot remove %s: %s", m->path, strerror(errno));
            rc = -1;
        } else if (m->keep != VT_FILESET_DROP) {
            continue;
        }
        maybe_die(++changed);
    }
    if (rc == 0 && (unlink(s->record) != 0 || vt_file_sync_folder(s->record) != 0)) {
        vt_set_err(err, errlen, "%s: cannot remove it once its set was written: %s", s->record,
                   strerror(errno));
        rc = -1;
    } else if (rc != 0) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " (%s stays, saying the set may be mixed)", s->record);
    }
    vt_fileset_free(sp);
    return rc;
}
