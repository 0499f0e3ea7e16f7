/*
 * loader_clips.c: how many samples each video gives an epoch (loader.h) — a fixed count
 * per video, or one clip per N seconds of the sample (--clips-per-video auto), so that a
 * 1-hour video is not seen as often as a 5-second one.
 *
 * Counts are pure functions of the dataset's probed durations and the config: every
 * rank and every tower builds the same epoch list from them (the caller makes ranks
 * share one rank's counts when their files might differ). It must never open a video.
 */

#include "base/common.h"
#include "pipeline/data/loader.h"

int64_t vt_loader_auto_clips(int32_t *out, const vt_dataset *ds, double every,
                             const int32_t *indices, int n) {
    for (int v = 0; v < ds->nvideos; v++)
        out[v] = vt_sample_auto_clips(vt_dataset_sample_duration(&ds->videos[v]), every);
    int64_t sum = 0;
    int count = n < 0 ? ds->nvideos : n;
    for (int i = 0; i < count; i++)
        sum += out[indices && n >= 0 ? indices[i] : i];
    return sum;
}

int32_t *vt_loader_clip_counts(const vt_dataset *ds, const vt_loader_cfg *c) {
    int32_t *per = vt_malloc((size_t)VT_MAX(ds->nvideos, 1) * sizeof *per);
    int fixed = c->mode == VT_LOADER_EVAL
                    ? VT_MAX(c->clips_per_video, 1) * VT_MAX(c->clip.ncrops, 1)
                    : VT_MAX(c->clips_per_video, 1);
    for (int v = 0; v < ds->nvideos; v++)
        per[v] = c->mode == VT_LOADER_TRAIN && c->video_clips ? VT_MAX(c->video_clips[v], 1)
                                                              : fixed;
    return per;
}
