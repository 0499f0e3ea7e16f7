/*
 * prep_walk.c: the files under SRC for `vidtrain prep` — every regular file, sorted per
 * folder, links followed, hidden names skipped (ours, the temporary files, and the
 * user's), DST skipped when it lies inside SRC, links back to a folder above and paths
 * too long for the temporary names reported and skipped. It never fails: what cannot be
 * read is warned about and counted. And whether SRC holds a frame folder (--frame-rate's
 * check, prep_has_frame_dir).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/prep/prep_cmd.h"
#include "base/common.h"
#include <sys/stat.h>

#include "pipeline/data/dataset/dataset.h"

/* Paths are checked once, at the walk, to leave room under 4 KiB for DST and the
 * temporary names; GCC cannot see that and warns on every later snprintf. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

void prep_entry_push(entry_list *l, entry e) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->e = vt_realloc(l->e, (size_t)l->cap * sizeof *l->e);
    }
    l->e[l->n++] = e;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}
void prep_walk(walk_ctx *c, const char *rel, int depth) {
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
        /* SRC is itself a prep's DST (a copy prepped again, smaller): its records describe
         * it, not the new DST, and copied they would overwrite the new DST's own (its
         * options, then refused on resume). prep-segments.csv is a labels file: copied. */
        if (!*rel && (!strcmp(de->d_name, OPTIONS) || !strcmp(de->d_name, MANIFEST) ||
                      !strcmp(de->d_name, PATHS)))
            continue;
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
        } else if (S_ISDIR(st.st_mode) && strchr(sub, '/') && vt_video_is_frame_dir(subabs)) {
            /* numbered JPEG/PNG frames below a class folder: one video, re-encoded to a
             * file named after the folder (pipeline/data/video/video.h) */
            prep_entry_push(c->list, (entry){.rel = vt_strdup(sub), .video = 1, .bytes = 0});
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
                prep_walk(c, sub, depth + 1);
            }
        } else if (S_ISREG(st.st_mode)) {
            prep_entry_push(c->list, (entry){.rel = vt_strdup(sub),
                                             .video = vt_is_video_name(names[i]),
                                             .bytes = st.st_size});
        } else {
            fprintf(stderr, "vidtrain prep: %s: not a regular file (skipped)\n", subabs);
            c->nwarn++;
        }
        free(names[i]);
    }
    free(names);
}

/* Whether a frame folder (numbered JPEG/PNG frames) lies below a class folder of SRC, as
 * prep_walk finds them (links followed, MAX_DEPTH folders deep): --frame-rate's check,
 * run before DST is made so that a refusal leaves nothing behind. */
int prep_has_frame_dir(const char *dir, int depth) {
    DIR *d = depth <= MAX_DEPTH ? opendir(dir) : NULL;
    if (!d)
        return 0;
    int found = 0;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char sub[4096];
        struct stat st;
        if (snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) >= (int)sizeof sub ||
            stat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        found = (depth > 0 && vt_video_is_frame_dir(sub)) || prep_has_frame_dir(sub, depth + 1);
    }
    closedir(d);
    return found;
}
