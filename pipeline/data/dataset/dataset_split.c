/*
 * dataset_split.c: --val-split and --group — which training videos are held out for
 * validation, one recording at a time (dataset.h).
 *
 * A video's side is a hash of its GROUP's key, not of its path: every video of one
 * recording (UCF101's v_X_g08_c01..c07, HMDB51's clips of one source video, the files a
 * --group regex names alike, the segments of one file) lands on the same side, so
 * validation never scores a scene training has seen. Where no rule names a group, the key
 * is the relpath itself and the split is the per-path hash it always was.
 *
 * It must never put one group on both sides, and never depend on anything but names: not
 * on readdir order, timing or which other files exist (beyond the tiny-class repairs
 * below), so a video keeps its side when others are added.
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset_impl.h"

/* UCF101: v_<Class>_g<NN>_c<NN>.<ext>; the group is the gNN its lists split by. */
static const char ucf_re[] = "^v_.+_(g[0-9]+)_c[0-9]+\\.[A-Za-z0-9]+$";
/* HMDB51: <source>_<class>_<body>_<camera>_<people>_<view>_<quality>_<clip>.<ext>
 * (body f h l u, camera cm nm, people np1..3, view fr ba le ri, quality bad med goo). */
static const char hmdb_re[] = "^(.+)_[fhlu]_(cm|nm)_np[0-9]+_(fr|ba|le|ri)_(bad|med|goo)_"
                              "[0-9]+\\.[A-Za-z0-9]+$";

typedef struct rules {
    int mode; /* 0 auto, 1 none, 2 regex */
    regex_t ucf, hmdb, user;
} rules;

static int is_none(const char *g) { return g && !strcmp(g, "none"); }
static int is_auto(const char *g) { return !g || !g[0] || !strcmp(g, "auto"); }

static int rules_init(rules *r, const char *group, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->mode = is_auto(group) ? 0 : is_none(group) ? 1 : 2;
    if (r->mode == 0) {
        VT_CHECK(regcomp(&r->ucf, ucf_re, REG_EXTENDED) == 0, "UCF101 pattern");
        VT_CHECK(regcomp(&r->hmdb, hmdb_re, REG_EXTENDED) == 0, "HMDB51 pattern");
    } else if (r->mode == 2) {
        int rc = regcomp(&r->user, group, REG_EXTENDED);
        if (rc != 0) {
            char why[256];
            regerror(rc, &r->user, why, sizeof why);
            vt_set_err(err, errlen, "--group '%s': %s (a POSIX extended regex; its first "
                       "capture group names the recording, e.g. '_(g[0-9]+)_c')", group, why);
            return -1;
        }
        if (r->user.re_nsub < 1) {
            regfree(&r->user);
            vt_set_err(err, errlen, "--group '%s' has no capture group: put the part of the "
                       "path that names the recording in ( ), e.g. '^([^/]+/[^_]+)_'", group);
            return -1;
        }
    }
    return 0;
}

static void rules_free(rules *r) {
    if (r->mode == 0) {
        regfree(&r->ucf);
        regfree(&r->hmdb);
    } else if (r->mode == 2) {
        regfree(&r->user);
    }
}

static void copy_span(char *out, size_t n, const char *s, regmatch_t m) {
    size_t len = (size_t)(m.rm_eo - m.rm_so);
    if (len >= n)
        len = n - 1;
    memcpy(out, s + m.rm_so, len);
    out[len] = 0;
}

/* The key of relpath under r (see vt_dataset_group_key). */
static int key_of(const rules *r, const char *relpath, char *out, size_t n) {
    regmatch_t m[2];
    if (r->mode == 2) {
        if (regexec(&r->user, relpath, 2, m, 0) == 0 && m[1].rm_so >= 0 &&
            m[1].rm_eo > m[1].rm_so) {
            copy_span(out, n, relpath, m[1]);
            return 3;
        }
    } else if (r->mode == 0) {
        const char *base = strrchr(relpath, '/');
        base = base ? base + 1 : relpath;
        if (regexec(&r->ucf, base, 2, m, 0) == 0) {
            copy_span(out, n, base, m[1]);
            return 1;
        }
        if (regexec(&r->hmdb, base, 2, m, 0) == 0) {
            copy_span(out, n, base, m[1]);
            /* the class sits between the source's name and the tags: the source is
             * the group, whichever classes its clips went to */
            const char *slash = strrchr(relpath, '/');
            if (slash) {
                const char *cls = slash;
                while (cls > relpath && cls[-1] != '/')
                    cls--;
                size_t cl = (size_t)(slash - cls), ol = strlen(out);
                if (cl > 0 && ol > cl + 1 && out[ol - cl - 1] == '_' &&
                    !strncmp(out + ol - cl, cls, cl))
                    out[ol - cl - 1] = 0;
            }
            return 2;
        }
    }
    snprintf(out, n, "%s", relpath);
    return 0;
}

int vt_dataset_group_check(const char *group, char *err, size_t errlen) {
    rules r;
    if (rules_init(&r, group, err, errlen) < 0)
        return -1;
    rules_free(&r);
    return 0;
}

int vt_dataset_group_key(const char *group, const char *relpath, char *out, size_t n) {
    rules r;
    char err[8];
    if (rules_init(&r, group, err, sizeof err) < 0) {
        snprintf(out, n, "%s", relpath);
        return 0;
    }
    int k = key_of(&r, relpath, out, n);
    rules_free(&r);
    return k;
}

/* Uniform in [0,1) from a key: stable across scans and machines. For a video that is
 * its own group the key is its relpath, so this is the per-path hash --val-split always
 * drew. */
static double key_unit(const char *key) {
    uint64_t h = vt_hash64(vt_fnv1a(key, strlen(key), VT_FNV_SEED));
    return (double)(h >> 32) * (1.0 / 4294967296.0);
}

typedef struct member {
    int video;
    char *key;
} member;

static int cmp_member(const void *a, const void *b) {
    const member *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->video > y->video) - (x->video < y->video);
}

/*
 * --val-split: per class, a group's train videos move to val iff the hash of its key <
 * fraction. A group's side is one bit for all its videos, whatever their class. The
 * documented approximation for small classes: a class whose videos span >= 2 groups,
 * none of them hashed to val, sends its lowest-hash group to val, and one whose groups
 * all hashed to val (a single group included) keeps its highest-hash group in train; the
 * classes are repaired in order and a later repair may move a group an earlier one
 * moved. With --group none every entry is its own group (the split of runs before
 * --group, segments of one file included); otherwise the segments of one file share its
 * relpath, hence a group.
 */
void vt_ds_apply_val_split(vt_dataset *ds, double fraction) {
    memset(&ds->groups, 0, sizeof ds->groups);
    if (fraction <= 0)
        return;
    rules r;
    char err[512];
    if (rules_init(&r, ds->group, err, sizeof err) < 0) /* checked at open: not here */
        VT_DIE("%s", err);
    snprintf(ds->groups.mode, sizeof ds->groups.mode, "%s",
             r.mode == 0 ? "auto" : r.mode == 1 ? "none" : "regex");
    int by_class = ds->heads[0].loss == VT_LOSS_SOFTMAX_CE;
    int nc = by_class ? ds->heads[0].nclasses : 1;

    /* The candidates and their keys, sorted by key: a group is a run of equal keys. */
    member *m = vt_malloc((size_t)(ds->nvideos ? ds->nvideos : 1) * sizeof *m);
    int nm = 0;
    char key[1024];
    for (int i = 0; i < ds->nvideos; i++) {
        vt_dataset_video *v = &ds->videos[i];
        if (v->split != VT_SPLIT_TRAIN || !v->labeled)
            continue;
        int k = 0;
        if (r.mode == 1)
            snprintf(key, sizeof key, "%s", v->relpath);
        else
            k = key_of(&r, v->relpath, key, sizeof key);
        ds->groups.nucf += k == 1;
        ds->groups.nhmdb += k == 2;
        ds->groups.nregex += k == 3;
        m[nm].video = i;
        m[nm].key = vt_strdup(key);
        nm++;
    }
    qsort(m, (size_t)nm, sizeof *m, cmp_member);
    int *gid = vt_malloc((size_t)(ds->nvideos ? ds->nvideos : 1) * sizeof *gid);
    double *u = vt_malloc((size_t)(nm ? nm : 1) * sizeof *u);
    int *size = vt_calloc((size_t)(nm ? nm : 1), sizeof *size);
    int ng = 0;
    for (int j = 0; j < nm; j++) {
        /* --group none: every entry a group of its own, even entries sharing a path */
        if (j == 0 || r.mode == 1 || strcmp(m[j].key, m[j - 1].key)) {
            u[ng] = key_unit(m[j].key);
            ng++;
        }
        gid[m[j].video] = ng - 1;
        size[ng - 1]++;
    }
    vt_split *side = vt_malloc((size_t)(ng ? ng : 1) * sizeof *side);
    for (int g = 0; g < ng; g++)
        side[g] = u[g] < fraction ? VT_SPLIT_VAL : VT_SPLIT_TRAIN;

    /* Tiny classes: at least one group in val and one in train where the class spans two
     * (stamp[g] == c + 1: group g already counted for class c). */
    int *stamp = vt_calloc((size_t)(ng ? ng : 1), sizeof *stamp);
    for (int c = 0; c < nc; c++) {
        int ngc = 0, nval = 0, lo = -1, hi = -1;
        for (int j = 0; j < nm; j++) {
            const vt_dataset_video *v = &ds->videos[m[j].video];
            int g = gid[m[j].video];
            if ((by_class && v->label[0] != c) || stamp[g] == c + 1)
                continue;
            stamp[g] = c + 1;
            ngc++;
            nval += side[g] == VT_SPLIT_VAL;
            if (lo < 0 || u[g] < u[lo]) lo = g;
            if (hi < 0 || u[g] > u[hi]) hi = g;
        }
        if (ngc >= 2 && nval == 0)
            side[lo] = VT_SPLIT_VAL;
        if (ngc >= 1 && nval == ngc)
            side[hi] = VT_SPLIT_TRAIN;
    }
    for (int j = 0; j < nm; j++)
        ds->videos[m[j].video].split = side[gid[m[j].video]];
    for (int g = 0; g < ng; g++) {
        ds->groups.ngroups[side[g]]++;
        if (size[g] > 1)
            ds->groups.nvideos_grouped += size[g];
    }
    for (int j = 0; j < nm; j++)
        free(m[j].key);
    free(m);
    free(gid);
    free(u);
    free(size);
    free(side);
    free(stamp);
    rules_free(&r);
}

const char *vt_dataset_groups_line(const vt_dataset *ds, char *buf, size_t n) {
    const vt_dataset_groups *g = &ds->groups;
    buf[0] = 0;
    if (!g->nvideos_grouped)
        return buf;
    const char *how = g->nregex ? "--group" : g->nucf && g->nhmdb ? "UCF101 and HMDB51 names"
                      : g->nucf ? "UCF101 names" : g->nhmdb ? "HMDB51 names" : "segments of one file";
    snprintf(buf, n, "groups (%s): %d in train, %d in val, %d videos share theirs", how,
             g->ngroups[VT_SPLIT_TRAIN], g->ngroups[VT_SPLIT_VAL], g->nvideos_grouped);
    return buf;
}
