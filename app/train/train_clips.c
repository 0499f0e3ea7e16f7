/*
 * train_clips.c: how many clips each training video gives an epoch — --clips-per-video
 * N (every video N), or auto (one per --seconds-per-clip of the video or segment, at
 * least 1: a 1-hour video is drawn from 360 times an epoch at the default 10 s, a
 * 5-second clip once).
 *
 * The epoch's sample list is built on every rank from these counts and the seed, so the
 * counts must be the same everywhere: they come from the probed durations, and under
 * mpirun every rank takes rank 0's (a copy of a file that differs on one machine would
 * otherwise give that rank another epoch length, and the ranks would part ways). It must
 * never open a video: probing did.
 */
#include <stdio.h>

#include "app/train/train.h"
#include "base/common.h"
#include "pipeline/parallel/mpi.h"

int vt_train_count_clips(vt_train *t) {
    const vt_train_opts *o = &t->o;
    free(t->video_clips);
    t->video_clips = NULL;
    if (!(o->seconds_per_clip > 0)) {
        t->epoch_clips = (int64_t)t->ntrain * VT_MAX(o->clips_per_video, 1) *
                         VT_MAX(o->repeat_aug, 1); /* --repeat-aug: K clips a draw */
        return 0;
    }
    vt_dataset *ds = t->ds;
    t->video_clips = vt_malloc(sizeof(int32_t) * (size_t)VT_MAX(ds->nvideos, 1));
    vt_loader_auto_clips(t->video_clips, ds, o->seconds_per_clip, NULL, -1);
    if (vt_mpi_size() > 1 && ds->nvideos > 0)
        vt_mpi_bcast(t->video_clips, sizeof(int32_t) * (size_t)ds->nvideos, 0,
                     "the clips per video (--clips-per-video auto)");
    int64_t sum = 0;
    int lo = 0, hi = 0;
    for (int i = 0; i < t->ntrain; i++) {
        int n = t->video_clips[t->train_idx[i]];
        sum += n;
        lo = i ? VT_MIN(lo, n) : n;
        hi = VT_MAX(hi, n);
    }
    t->epoch_clips = sum * VT_MAX(o->repeat_aug, 1); /* --repeat-aug: K clips a draw */
    fprintf(t->out, "clips per video: auto, one per %g s: %lld clips an epoch from %d videos "
                    "(%d to %d a video)\n",
            (double)o->seconds_per_clip, (long long)sum, t->ntrain, lo, hi);
    return 0;
}
