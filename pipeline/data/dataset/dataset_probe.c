/*
 * dataset_probe.c: open every video of a dataset once with FFmpeg on a few threads
 * (vt_dataset_probe) to record its size, frame count, codec and container, and the
 * record of bad videos (vt_dataset_mark_bad, vt_dataset_bad, vt_dataset_count_bad) that
 * probing and the loaders share under the dataset's lock.
 *
 * It must never read clips (vt_video_open indexes the file and decodes its first frame
 * to prove it; nothing more) and never abort on a bad file: one that does not open is
 * marked VT_BAD_OPEN with FFmpeg's reason, reported once when asked, and excluded. The
 * result does not depend on which thread probed which file. Entries that share a file
 * (segments) are probed with one open, and each gets its frames (seg_first, seg_frames).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"
#include "base/thread.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/sample.h"

typedef struct probe_ctx {
    vt_dataset *ds;
    int next, done, warn, nbad;
    vt_probe_progress_fn progress;
    void *pctx;
    pthread_mutex_t lock;
} probe_ctx;

/* The sample's frames once the file is open: a segment's (bad when none of its frames
 * is in the file), or the whole file's. 0, or -1 with err set. */
static int probe_range(vt_dataset_video *v, const vt_video *vid, char *err, size_t errlen) {
    if (!vt_dataset_is_segment(v)) {
        v->seg_first = 0;
        v->seg_frames = v->info.nframes;
        return 0;
    }
    vt_frame_range r = vt_sample_segment_frames(vid, v->seg_start, v->seg_end);
    v->seg_first = r.first;
    v->seg_frames = r.count;
    if (r.count > 0)
        return 0;
    vt_set_err(err, errlen, "segment %.3f-%.3f s has no frame: the file is %.3f s long",
               v->seg_start, v->seg_end, v->info.duration);
    return -1;
}

/* Probes entries [i, j), which share one file (segments of it): opened once. */
static int probe_file(probe_ctx *p, int i, int j) {
    char err[512] = "";
    vt_video *vid = NULL;
    int rc = vt_video_open(&vid, p->ds->videos[i].path, 1, err, sizeof err), nbad = 0;
    for (int k = i; k < j; k++) {
        vt_dataset_video *v = &p->ds->videos[k];
        char why[512];
        snprintf(why, sizeof why, "%s", err[0] ? err : "cannot open");
        int bad = rc < 0;
        if (!bad) {
            v->info = *vt_video_get_info(vid);
            bad = probe_range(v, vid, why, sizeof why) < 0;
        }
        v->probed = 1;
        if (bad && vt_dataset_mark_bad(p->ds, k, VT_BAD_OPEN, why)) {
            nbad++;
            /* A file that does not open is one message, not one per segment. */
            if (p->warn && (rc == 0 || k == i)) {
                char name[1200];
                vt_warn("%s: %s (excluded%s)\n", rc == 0 ? vt_dataset_sample_name(v, name,
                        sizeof name) : v->path, why, rc < 0 && j - i > 1 ? ": every segment"
                        : "");
            }
        }
    }
    vt_video_close(&vid);
    return nbad;
}

static void *probe_worker(void *arg) {
    probe_ctx *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int i = p->next < p->ds->nvideos ? p->next : -1, j = i + 1;
        while (i >= 0 && j < p->ds->nvideos && !strcmp(p->ds->videos[j].path, p->ds->videos[i].path))
            j++;
        if (i >= 0)
            p->next = j;
        pthread_mutex_unlock(&p->lock);
        if (i < 0)
            break;
        int nbad = probe_file(p, i, j);
        pthread_mutex_lock(&p->lock);
        p->nbad += nbad;
        p->done += j - i;
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
        vt_thread_start(&tid[t], probe_worker, &p, "the probing of the videos");
    for (int t = 0; t < threads; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&p.lock);
    return vt_video_system_failed(NULL, 0) ? -1 : vt_dataset_count_bad(ds);
}

int vt_dataset_mark_bad(vt_dataset *ds, int i, vt_bad_kind kind, const char *reason) {
    VT_CHECK(i >= 0 && i < ds->nvideos, "video %d of %d", i, ds->nvideos);
    /* after the system refused to open a file, or with the process at its memory limit,
     * a failure says nothing of the video: the command stops on vt_video_system_failed
     * instead (video.h) */
    char what[1200];
    snprintf(what, sizeof what, "%.900s: %.250s", ds->videos[i].path, reason ? reason : "unreadable");
    if (vt_video_failed_short(what))
        return 0;
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

int vt_dataset_mark_damaged(vt_dataset *ds, int i, int64_t errors, int64_t filled) {
    VT_CHECK(i >= 0 && i < ds->nvideos, "video %d of %d", i, ds->nvideos);
    /* decode errors with the process at its memory limit are the limit's: the video is
     * not damaged, nor named so (the command stops on vt_video_system_failed) */
    char what[1000];
    snprintf(what, sizeof what, "%.900s: decode errors", ds->videos[i].path);
    if (vt_video_failed_short(what))
        return 0;
    pthread_mutex_lock(&ds->lock);
    int newly = !ds->videos[i].damaged;
    ds->videos[i].damaged = 1;
    ds->videos[i].damage_errors += errors;
    ds->videos[i].damage_filled += filled;
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
