/*
 * scan_full.c: `vidtrain scan DIR --full` (scan_full.h): each readable file of the dataset
 * decoded whole, one decoder thread a file and one file a worker, and what it met kept
 * for the report. Frames are not scaled (vt_video_decode_all with no size): the decode
 * alone is what finds damage.
 *
 * It must never change the dataset or write a file.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/scan_full.h"
#include "base/common.h"
#include "base/thread.h"
#include "pipeline/data/video/video.h"

typedef struct full_job {
    const vt_dataset *ds;
    int *files;             /* (nfiles) the first dataset entry of each readable file */
    int nfiles;
    vt_scan_damage *res;    /* (nfiles) */
    atomic_int next, done;
    int progress;
    pthread_mutex_t lock;   /* the progress line */
    double last;
} full_job;

/* One file decoded whole into *r. */
static void decode_one(const char *path, vt_scan_damage *r) {
    char err[1024] = "";
    vt_video *v = NULL;
    if (vt_video_open(&v, path, 1, err, sizeof err) != 0) { /* it opened when probed */
        r->error = vt_strdup(err);
        return;
    }
    /* the open decoded the first frame: the full decode below counts it again */
    int64_t e0 = vt_video_get_stats(v)->decode_errors;
    r->indexed = vt_video_get_info(v)->nframes;
    if (vt_video_decode_all(v, -1, NULL, NULL, &r->frames, err, sizeof err) != 0)
        r->error = vt_strdup(err);
    r->decode_errors = vt_video_get_stats(v)->decode_errors - e0;
    vt_video_close(&v);
}

static void *full_worker(void *arg) {
    full_job *j = arg;
    for (;;) {
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->nfiles)
            return NULL;
        j->res[i].video = j->files[i];
        decode_one(j->ds->videos[j->files[i]].path, &j->res[i]);
        int done = atomic_fetch_add(&j->done, 1) + 1;
        if (!j->progress)
            continue;
        pthread_mutex_lock(&j->lock);
        double now = vt_now();
        if (done == j->nfiles || now - j->last >= 0.1) {
            j->last = now;
            fprintf(stderr, "\rdecoding %d/%d videos in full%s", done, j->nfiles,
                    done == j->nfiles ? "\r\033[K" : "");
            fflush(stderr);
        }
        pthread_mutex_unlock(&j->lock);
    }
}

void vt_scan_full_run(const vt_dataset *ds, int threads, int progress, vt_scan_full *out) {
    memset(out, 0, sizeof *out);
    double t0 = vt_now();
    /* Damage is the software decoder's to see: NVDEC has no error concealment to count,
     * and the CPU is where training decodes by default. */
    vt_decode_mode was = vt_video_get_decode();
    vt_video_set_decode(VT_DECODE_CPU);
    full_job j = {.ds = ds, .progress = progress};
    j.files = vt_malloc(sizeof(int) * (size_t)(ds->nvideos ? ds->nvideos : 1));
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *dv = &ds->videos[i];
        /* segments of one file are adjacent (sorted by path): the file is decoded once */
        int same = j.nfiles && !strcmp(ds->videos[j.files[j.nfiles - 1]].path, dv->path);
        if (dv->bad == VT_BAD_NONE && !same)
            j.files[j.nfiles++] = i;
    }
    j.res = vt_calloc((size_t)(j.nfiles ? j.nfiles : 1), sizeof *j.res);
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    pthread_mutex_init(&j.lock, NULL);
    if (threads <= 0)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    threads = VT_MAX(1, VT_MIN(threads, VT_MAX(j.nfiles, 1)));
    pthread_t *tid = vt_calloc((size_t)threads, sizeof *tid);
    for (int t = 0; t < threads; t++)
        vt_thread_start(&tid[t], full_worker, &j, "scan --full's workers");
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&j.lock);
    vt_video_set_decode(was);
    out->files = j.nfiles;
    out->damaged = vt_calloc((size_t)(j.nfiles ? j.nfiles : 1), sizeof *out->damaged);
    for (int i = 0; i < j.nfiles; i++) {
        vt_scan_damage *r = &j.res[i];
        out->frames += r->frames;
        if (r->decode_errors || r->error || r->frames < r->indexed)
            out->damaged[out->ndamaged++] = *r; /* the error string moves with it */
    }
    free(j.res);
    free(j.files);
    out->seconds = vt_now() - t0;
}

void vt_scan_full_free(vt_scan_full *f) {
    for (int i = 0; i < f->ndamaged; i++)
        free(f->damaged[i].error);
    vt_freep(&f->damaged);
    f->ndamaged = 0;
}
