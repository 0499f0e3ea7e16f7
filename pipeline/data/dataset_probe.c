/*
 * dataset_probe.c: open every video of a dataset once with FFmpeg on a few threads
 * (vt_dataset_probe) to record its size, frame count, codec and container, and the
 * record of bad videos (vt_dataset_mark_bad, vt_dataset_bad, vt_dataset_count_bad) that
 * probing and the loaders share under the dataset's lock.
 *
 * It must never read clips (vt_video_open indexes the file and decodes its first frame
 * to prove it; nothing more) and never abort on a bad file: one that does not open is
 * marked VT_BAD_OPEN with FFmpeg's reason, reported once when asked, and excluded. The
 * result does not depend on which thread probed which file.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "models/common.h"
#include "pipeline/data/dataset.h"

typedef struct probe_ctx {
    vt_dataset *ds;
    int next, done, warn, nbad;
    vt_probe_progress_fn progress;
    void *pctx;
    pthread_mutex_t lock;
} probe_ctx;

static void *probe_worker(void *arg) {
    probe_ctx *p = arg;
    char err[512];
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next < p->ds->nvideos ? p->next++ : -1;
        pthread_mutex_unlock(&p->lock);
        if (i < 0)
            break;
        vt_dataset_video *v = &p->ds->videos[i];
        vt_video *vid = NULL;
        err[0] = 0;
        int rc = vt_video_open(&vid, v->path, 1, err, sizeof err);
        if (rc == 0) {
            v->info = *vt_video_get_info(vid);
            vt_video_close(&vid);
        }
        v->probed = 1;
        int newly = rc < 0 && vt_dataset_mark_bad(p->ds, i, VT_BAD_OPEN, err[0] ? err : "cannot open");
        pthread_mutex_lock(&p->lock);
        if (newly) {
            p->nbad++;
            if (p->warn)
                vt_warn("%s: %s (excluded)\n", v->path, err[0] ? err : "cannot open");
        }
        p->done++;
        if (p->progress)
            p->progress(p->pctx, p->done, p->ds->nvideos);
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

int vt_dataset_probe(vt_dataset *ds, int threads, int warn, vt_probe_progress_fn progress,
                     void *ctx) {
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = VT_MAX(1, VT_MIN(threads, VT_MAX(ds->nvideos, 1)));
    probe_ctx p = {.ds = ds, .warn = warn, .progress = progress, .pctx = ctx};
    pthread_mutex_init(&p.lock, NULL);
    pthread_t *tid = vt_calloc((size_t)threads, sizeof *tid);
    for (int t = 0; t < threads; t++)
        VT_CHECK(pthread_create(&tid[t], NULL, probe_worker, &p) == 0, "pthread_create");
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&p.lock);
    return vt_dataset_count_bad(ds);
}

int vt_dataset_mark_bad(vt_dataset *ds, int i, vt_bad_kind kind, const char *reason) {
    VT_CHECK(i >= 0 && i < ds->nvideos, "video %d of %d", i, ds->nvideos);
    pthread_mutex_lock(&ds->lock);
    vt_dataset_video *v = &ds->videos[i];
    int newly = v->bad == VT_BAD_NONE;
    if (newly) {
        v->bad = kind;
        v->reason = vt_strdup(reason ? reason : "unreadable");
    }
    pthread_mutex_unlock(&ds->lock);
    return newly;
}

vt_bad_kind vt_dataset_bad(vt_dataset *ds, int i) {
    pthread_mutex_lock(&ds->lock);
    vt_bad_kind k = ds->videos[i].bad;
    pthread_mutex_unlock(&ds->lock);
    return k;
}

int vt_dataset_count_bad(vt_dataset *ds) {
    int n = 0;
    pthread_mutex_lock(&ds->lock);
    for (int i = 0; i < ds->nvideos; i++)
        n += ds->videos[i].bad != VT_BAD_NONE;
    pthread_mutex_unlock(&ds->lock);
    return n;
}
