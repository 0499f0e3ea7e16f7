/*
 * dataset_segments.c: samples that share a file — a labels row or a Kinetics row with a
 * start and an end names a segment of a longer video, and each segment is its own entry
 * of ds->videos (own labels, own split, own clips). Here: adding entries, keeping them
 * sorted by (relpath, start, end), finding the first entry of a path, reading seconds,
 * a sample's duration and printable name, and the warnings for list lines that name
 * files that are not there (the first few one by one, then a count: a Kinetics CSV of
 * 240,000 rows over a partial download would otherwise print 240,000 lines).
 *
 * Like the rest of the dataset it depends only on names and contents, never decodes and
 * never aborts on bad data.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset_impl.h"

int vt_ds_add_video(vt_dataset *ds, const char *relpath) {
    /* Sized to the next power of two: a Kinetics CSV adds 10^5 entries one by one, and
     * glibc's realloc to the size a block already has returns at once. */
    size_t cap = 16;
    while (cap < (size_t)ds->nvideos + 1)
        cap *= 2;
    ds->videos = vt_realloc(ds->videos, cap * sizeof *ds->videos);
    vt_dataset_video *v = &ds->videos[ds->nvideos];
    memset(v, 0, sizeof *v);
    v->relpath = vt_strdup(relpath);
    v->path = vt_ds_join_path(ds->dir, relpath);
    v->split = VT_SPLIT_TRAIN;
    vt_ds_video_free_labels(v);
    return ds->nvideos++;
}

static int cmp_sample(const void *a, const void *b) {
    const vt_dataset_video *x = a, *y = b;
    int c = strcmp(x->relpath, y->relpath);
    if (c)
        return c;
    if (x->seg_start != y->seg_start)
        return x->seg_start < y->seg_start ? -1 : 1;
    return (x->seg_end > y->seg_end) - (x->seg_end < y->seg_end);
}

void vt_ds_sort_videos(vt_dataset *ds) {
    if (ds->nvideos > 1)
        qsort(ds->videos, (size_t)ds->nvideos, sizeof *ds->videos, cmp_sample);
    ds->nsegments = 0;
    for (int i = 0; i < ds->nvideos; i++)
        ds->nsegments += vt_dataset_is_segment(&ds->videos[i]);
}

int vt_ds_find_video_first(const vt_dataset *ds, const char *relpath) {
    int lo = 0, hi = ds->nvideos; /* first entry whose relpath is >= relpath */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (strcmp(ds->videos[mid].relpath, relpath) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ds->nvideos && !strcmp(ds->videos[lo].relpath, relpath) ? lo : -1;
}

int vt_ds_parse_seconds(const char *s, double *out) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    while (*end == ' ' || *end == '\t')
        end++;
    if (end == s || *end || errno || !isfinite(x) || x < 0)
        return -1;
    *out = x;
    return 0;
}

double vt_dataset_sample_duration(const vt_dataset_video *v) {
    double file = v->probed ? v->info.duration : 0;
    if (!vt_dataset_is_segment(v))
        return file;
    double end = v->probed && file > 0 ? VT_MIN(v->seg_end, file) : v->seg_end;
    return VT_MAX(end - v->seg_start, 0.0);
}

vt_frame_range vt_dataset_sample_frames(const vt_dataset_video *v, const vt_video *vid,
                                        const vt_video_info *info) {
    if (!vt_dataset_is_segment(v))
        return (vt_frame_range){.first = 0, .count = info->nframes};
    if (v->probed && v->seg_frames > 0)
        return (vt_frame_range){.first = v->seg_first, .count = v->seg_frames};
    return vid ? vt_sample_segment_frames(vid, v->seg_start, v->seg_end)
               : vt_sample_segment_frames_fps(info, v->seg_start, v->seg_end);
}

const char *vt_dataset_sample_name(const vt_dataset_video *v, char *buf, size_t n) {
    if (vt_dataset_is_segment(v))
        snprintf(buf, n, "%s [%.3f-%.3f]", v->relpath, v->seg_start, v->seg_end);
    else
        snprintf(buf, n, "%s", v->relpath);
    return buf;
}

void vt_ds_missing(vt_dataset *ds, const char *file, int line, const char *name) {
    if (ds->nmissing++ < VT_DS_WARN_SHOWN)
        vt_warn("%s:%d: %s not found under %s; line skipped\n", file, line, name, ds->dir);
}

void vt_ds_missing_summary(const vt_dataset *ds, const char *lists) {
    if (ds->nmissing > VT_DS_WARN_SHOWN)
        vt_warn("%s: %d lines in all name videos that are not under %s (the first %d are "
                "above); those lines are skipped, the rest kept\n", lists, ds->nmissing,
                ds->dir, VT_DS_WARN_SHOWN);
}
