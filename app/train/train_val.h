/*
 * train_val.h: the clips a training run reads, from its options — the training clip
 * configuration and the validation pass's options (which precise BN and --time-budget's
 * timing read too). It sits below the rest of train*.c: train.c, train_bn.c,
 * train_budget.c and train_epoch.c all call it and it calls none of them, which keeps
 * those files free of a call circle.
 *
 * It must never open a dataset or touch the towers: it converts options.
 */
#ifndef VT_TRAIN_VAL_H
#define VT_TRAIN_VAL_H

#include "app/eval/evaluate.h"
#include "app/train/train_opts.h"
#include "pipeline/data/sample.h"

/* The training clip (crop, scale jitter, flip, colour jitter...) from resolved options. */
void vt_train_clip_cfg(vt_clip_cfg *c, const vt_train_opts *o);
/* The validation pass's options. */
void vt_train_val_opts(vt_eval_opts *eo, const vt_train_opts *o);

#endif
