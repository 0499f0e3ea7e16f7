/*
 * loader_fill.c: one clip of a batch, as a loader worker fills it (loader.c runs the
 * workers and the ring of buffers): the worker's open videos (a small LRU cache), the
 * clip's frames from the frame cache or the decoder within its segment, the transform,
 * the augmentations and the targets. A video that fails is reported once and excluded
 * (vt_dataset_mark_bad); a worker never blocks on a bad file.
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/data/loader_impl.h"

/* ---- per-worker open-video cache ---- */

static vt_video *cache_get(worker *w, int video, char *err, size_t errlen) {
    vt_loader *l = w->l;
    int n = l->cfg.cache, victim = 0;
    w->tick++;
    for (int i = 0; i < n; i++) {
        if (w->cache[i].video == video) {
            w->cache[i].used = w->tick;
            return w->cache[i].v;
        }
        if (w->cache[i].used < w->cache[victim].used)
            victim = i;
    }
    vt_video *v = NULL;
    if (vt_video_open(&v, l->ds->videos[video].path, l->cfg.decode_threads, err, errlen) < 0)
        return NULL;
    if (vt_video_get_info(v)->nframes <= 0) {
        vt_set_err(err, errlen, "0 frames");
        vt_video_close(&v);
        return NULL;
    }
    if (l->frames)
        vt_frame_cache_attach(l->frames, video, v);
    vt_video_close(&w->cache[victim].v);
    w->cache[victim].video = video;
    w->cache[victim].v = v;
    w->cache[victim].used = w->tick;
    return v;
}

static void cache_drop(worker *w, int video) {
    for (int i = 0; i < w->l->cfg.cache; i++)
        if (w->cache[i].video == video) {
            vt_video_close(&w->cache[i].v);
            w->cache[i].video = -1;
            w->cache[i].used = 0;
        }
    if (w->memo_video == video)
        w->memo_video = -1;
}

static void report_bad(vt_loader *l, int video, vt_bad_kind kind, const char *reason) {
    if (l->cfg.no_marks) /* a side pass: the clip is left out, the dataset untouched */
        return;
    if (!vt_dataset_mark_bad(l->ds, video, kind, reason))
        return;
    /* training leaves the video out of later epochs; an evaluation has one pass, in which
     * the video's other clips are still scored ("excluded" read as the whole video) */
    vt_warn("%s: %s (%s)\n", l->ds->videos[video].path, reason,
            l->cfg.mode == VT_LOADER_EVAL ? "that clip left out and counted as a decode failure; "
                                            "the video's other clips are scored"
                                          : "excluded");
    pthread_mutex_lock(&l->lock);
    l->stats.bad_videos++;
    pthread_mutex_unlock(&l->lock);
}

/* ---- the sample's frames: a segment bounds its clips (docs/segments.md) ---- */

/* t frames start, start + stride, ... of `video` into out (t, fh, fw, 3): from the frame
 * cache when it holds them, else decoded (opening the video into *v when needed).
 * VT_BAD_NONE, or the kind of failure with err set. */
static vt_bad_kind read_run(worker *w, int video, vt_video **v, uint8_t *out, int64_t start,
                            int t, int stride, int short_side, char *err, size_t errlen) {
    vt_loader *l = w->l;
    vt_pad_policy pad = l->cfg.clip.pad;
    int kept = l->frames ? vt_frame_cache_read_clip(l->frames, video, w->scaler, out, start, t,
                                                     stride, short_side, pad, err, errlen)
                         : 0;
    if (kept < 0) {
        if (!err[0])
            snprintf(err, errlen, "conversion failed");
        return VT_BAD_READ;
    }
    if (kept)
        return VT_BAD_NONE;
    if (!*v && !(*v = cache_get(w, video, err, errlen))) {
        if (!err[0])
            snprintf(err, errlen, "cannot open");
        return VT_BAD_OPEN;
    }
    int64_t m0 = vt_video_get_stats(*v)->missing_frames;
    int64_t e0 = vt_video_get_stats(*v)->decode_errors;
    if (vt_video_read_clip(*v, out, start, t, stride, short_side, pad, err, errlen) < 0) {
        cache_drop(w, video); /* the decoder may be left in any state */
        *v = NULL;
        if (!err[0])
            snprintf(err, errlen, "decode failed");
        return VT_BAD_READ;
    }
    w->clip_filled += vt_video_get_stats(*v)->missing_frames - m0;
    w->clip_errors += vt_video_get_stats(*v)->decode_errors - e0;
    return VT_BAD_NONE;
}

/* The clip at p into w->scratch. One run of frames, unless it would pass the end of a
 * segment (one shorter than the clip span): then frame by frame at the positions the pad
 * policy gives inside the segment, so that no frame outside it is read. */
static vt_bad_kind read_clip_in_range(worker *w, int video, vt_video **v,
                                      const vt_clip_params *p, vt_frame_range r, int fw, int fh,
                                      char *err, size_t errlen) {
    const vt_clip_cfg *cc = &w->l->cfg.clip;
    int64_t last = p->start + (int64_t)(cc->t - 1) * p->stride;
    if (!vt_dataset_is_segment(&w->l->ds->videos[video]) || last < r.first + r.count)
        return read_run(w, video, v, w->scratch, p->start, cc->t, p->stride, p->short_side,
                        err, errlen);
    size_t frame = (size_t)fw * (size_t)fh * 3;
    int64_t prev = -1;
    for (int k = 0; k < cc->t; k++) {
        int64_t pos; /* slot k alone: its position depends on nothing else */
        vt_sample_range_positions(r, p->start + (int64_t)k * p->stride, 1, 1, cc->pad, &pos);
        uint8_t *out = w->scratch + (size_t)k * frame;
        if (pos == prev) { /* REPEAT_LAST's tail: a copy, not another decode */
            memcpy(out, out - frame, frame);
            continue;
        }
        vt_bad_kind bad = read_run(w, video, v, out, pos, 1, 1, p->short_side, err, errlen);
        if (bad != VT_BAD_NONE)
            return bad;
        prev = pos;
    }
    return VT_BAD_NONE;
}

/* Decode, transform and label sample i into row n of b. Returns 1, or 0 when the clip is
 * left out (its video is bad). */
int vt_loader_fill_clip(worker *w, vt_batch *b, int n, int64_t i) {
    vt_loader *l = w->l;
    const vt_loader_cfg *c = &l->cfg;
    vt_clip_cfg vc = c->clip; /* this video's: --clip-fps scales the stride to its rate */
    const vt_clip_cfg *cc = &vc;
    const int rep = c->repeat_aug, r = (int)(i % rep); /* --repeat-aug: repeat r of i / K */
    sample s = l->order[i / rep];
    char err[512] = "";

    if (vt_dataset_bad(l->ds, s.video) == VT_BAD_OPEN)
        return 0;
    /* A video whose frames are kept is not opened (its info is kept with them) unless a
     * frame of the clip is missing. */
    vt_video *v = NULL;
    vt_video_info info;
    if (!l->frames || !vt_frame_cache_info(l->frames, s.video, &info)) {
        v = cache_get(w, s.video, err, sizeof err);
        if (!v) {
            report_bad(l, s.video, VT_BAD_OPEN, err[0] ? err : "cannot open");
            return 0;
        }
        info = *vt_video_get_info(v);
    }
    vt_clip_cfg_at_fps(&vc, info.fps);
    vt_clip_params p = {.stride = cc->stride, .contrast = 1.0f}; /* evaluation: no jitter */
    uint64_t key = 0;
    int fw, fh;
    if (c->mode == VT_LOADER_TRAIN) {
        key = vt_sample_key(c->seed, l->epoch, i / rep);
        p.short_side = vt_sample_train_scale(cc, key);
    } else {
        p.short_side = cc->short_side;
    }
    vt_video_info_scaled_size(&info, p.short_side, &fw, &fh);
    if (fw < cc->crop || fh < cc->crop) {
        snprintf(err, sizeof err, "scaled to %dx%d, smaller than the %d crop", fw, fh, cc->crop);
        report_bad(l, s.video, VT_BAD_READ, err);
        return 0;
    }
    /* Clips are drawn inside the sample's frames (a segment's, or the whole file's). */
    vt_frame_range range = vt_dataset_sample_frames(&l->ds->videos[s.video], v, &info);
    if (range.count <= 0) {
        snprintf(err, sizeof err, "the segment lies past the end of the file (%.3f s)",
                 info.duration);
        report_bad(l, s.video, VT_BAD_READ, err);
        return 0;
    }
    if (c->mode == VT_LOADER_TRAIN) {
        vt_frame_range draw = c->video_clips ? vt_sample_stratum(range, vt_clip_span(cc), s.clip,
                                                                 l->per_video[s.video])
                                             : range; /* auto: n draws spread over it */
        vt_sample_train_params(&p, cc, key, draw.count, fw, fh);
        vt_sample_repeat_params(&p, cc, key, r, fw, fh);
        p.start += draw.first - range.first;
    } else {
        int ncrops = VT_MAX(cc->ncrops, 1);
        p.start = vt_sample_eval_start(range.count, vt_clip_span(cc), s.clip / ncrops,
                                       VT_MAX(c->clips_per_video, 1));
        vt_sample_eval_crop(&p.x0, &p.y0, fw, fh, cc->crop, s.clip % ncrops, ncrops);
    }
    p.start += range.first;
    size_t need = (size_t)cc->t * (size_t)fw * (size_t)fh * 3;
    if (need > w->scratch_cap) {
        /* Grows to the largest clip seen and stays: bounded by the widest video */
        free(w->scratch);
        w->scratch = vt_malloc(need);
        pthread_mutex_lock(&l->lock);
        l->stats.scratch_bytes += (int64_t)(need - w->scratch_cap);
        pthread_mutex_unlock(&l->lock);
        w->scratch_cap = need;
        w->memo_video = -1;
    }
    if (!(w->memo_video == s.video && w->memo_start == p.start && w->memo_ss == p.short_side &&
          w->memo_stride == p.stride)) {
        w->memo_video = -1;
        w->clip_filled = 0;
        w->clip_errors = 0;
        vt_bad_kind bad = read_clip_in_range(w, s.video, &v, &p, range, fw, fh, err, sizeof err);
        if (bad != VT_BAD_NONE) {
            report_bad(l, s.video, bad, err);
            return 0;
        }
        atomic_fetch_add(&l->decodes, 1);
        w->memo_video = s.video;
        w->memo_start = p.start;
        w->memo_ss = p.short_side;
        w->memo_stride = p.stride;
    }
    /* A damaged stream: frames it never gave, filled in, or errors the decoder met
     * (packets rejected, pictures repaired; H.264 conceals the frames that refer to a lost
     * one, unflagged). The clip is used (design.md §3.6) and its damage counted, this
     * sample's whether its decode was its own or the memo's, in the stats and on the video
     * (an evaluation lists them); the video is named once, so a count has a path. */
    if ((w->clip_filled > 0 || w->clip_errors > 0) &&
        vt_dataset_mark_damaged(l->ds, s.video, w->clip_errors, w->clip_filled)) {
        char what[256] = "";
        if (w->clip_filled)
            snprintf(what, sizeof what, "%lld frame(s) of a clip never decoded and hold "
                     "the nearest decoded frame instead", (long long)w->clip_filled);
        if (w->clip_errors)
            snprintf(what + strlen(what), sizeof what - strlen(what), "%s%lld decode "
                     "error(s) met reading a clip (frames near them may hold the decoder's "
                     "concealment)", what[0] ? "; " : "", (long long)w->clip_errors);
        vt_warn("%s: a damaged stream: %s; said once a video, its clips are used and the "
                "damage counted\n", l->ds->videos[s.video].path, what);
    }
    w->filled += w->clip_filled; /* this sample's, a decode of its own or the memo's */
    w->errors += w->clip_errors;
    const size_t ra_was = w->ra_cap; /* RandAugment's crop: counted as scratch too */
    vt_clip_transform_aug(b->x + (int64_t)n * l->clip_floats, &w->ra_buf, &w->ra_cap, w->scratch,
                          fh, fw, &p, cc); /* p.ra_key: training only */
    if (w->ra_cap != ra_was) {
        pthread_mutex_lock(&l->lock);
        l->stats.scratch_bytes += (int64_t)w->ra_cap - (int64_t)ra_was;
        pthread_mutex_unlock(&l->lock);
    }
    vt_clip_color(b->x + (int64_t)n * l->clip_floats, cc->t, cc->crop, p.contrast,
                  p.brightness, cc->std);
    vt_clip_erase(b->x + (int64_t)n * l->clip_floats, cc->t, cc->crop, &p); /* training */
    const vt_dataset_video *dv = &l->ds->videos[s.video];
    for (int h = 0; h < b->nheads; h++) {
        if (b->head_loss[h] == VT_LOSS_BCE) {
            float *t = b->target[h] + (int64_t)n * b->head_classes[h];
            memset(t, 0, (size_t)b->head_classes[h] * sizeof *t);
            for (int k = 0; k < dv->ntags[h]; k++)
                t[dv->tags[h][k]] = 1.0f;
        } else {
            b->label[h][n] = dv->label[h];
        }
    }
    b->video[n] = s.video;
    b->clip[n] = s.clip;
    b->where[n] = p;
    return 1;
}

/* Training with a frame cache: before their first batch the workers decode the split's
 * videos front to back into it, each frame once and without seeks (random clips would
 * decode each keyframe-to-clip run again, and partly cached clips would still decode),
 * until every video is in or the cache is full. A video that fails here is only
 * skipped: the batch that wants it reports it. */
void vt_loader_warm_cache(worker *w) {
    vt_loader *l = w->l;
    char err[512];
    for (;;) {
        vt_frame_cache_stats st;
        vt_frame_cache_get_stats(l->frames, &st);
        int i = atomic_fetch_add(&l->warm_next, 1);
        if (atomic_load(&l->stop) || st.full || i >= l->nindices)
            return;
        int video = l->indices[i];
        if (vt_dataset_bad(l->ds, video))
            continue;
        vt_video *v = cache_get(w, video, err, sizeof err);
        int64_t got;
        if (v && vt_video_decode_all(v, -1, NULL, NULL, &got, err, sizeof err) < 0)
            cache_drop(w, video);
    }
}
