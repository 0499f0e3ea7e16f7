/*
 * train_val.c: the clips a training run reads, from its options (train_val.h).
 */
#include "app/train/train_val.h"

#include <string.h>

#include "base/common.h"
#include "pipeline/data/randaug.h"

void vt_train_clip_cfg(vt_clip_cfg *c, const vt_train_opts *o) {
    vt_clip_cfg_default(c);
    c->t = o->clip_t;
    c->stride = o->stride;
    c->stride_jitter = o->stride_jitter;
    c->fps = o->clip_fps;
    c->crop = o->crop;
    c->short_side = o->short_side;
    c->jitter_min = o->jitter_min;
    c->jitter_max = o->jitter_max;
    c->flip = o->flip;
    c->contrast_min = o->contrast_min;
    c->brightness = o->brightness;
    c->erase_prob = o->random_erase; /* training clips only: the loader's train mode */
    char err[512]; /* checked when given and on load (train_ranges.c): cannot fail here */
    VT_CHECK(vt_randaug_parse(&c->randaug, o->randaug, err, sizeof err) == 0, "%s", err);
    c->ncrops = o->val_crops;
    vt_clip_set_norm(c, o->input_norm); /* resolved and checked: train_ranges.c */
}

void vt_train_val_opts(vt_eval_opts *eo, const vt_train_opts *o) {
    memset(eo, 0, sizeof *eo);
    vt_train_clip_cfg(&eo->clip, o);
    eo->clips_per_video = o->val_clips;
    eo->crops = o->val_crops;
    eo->batch = o->batch;
    eo->workers = o->workers;
    eo->seed = o->seed;
    eo->quiet = 1;
}
