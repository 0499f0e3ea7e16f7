/*
 * slices.h: the splitter (docs/design.md §4) — how many clips of a global batch B each tower
 * takes, in how many micro-batches, and how long the step should take. Pure logic: it
 * sees numbers (clips that fit per pass, clips/s), never backends or nets, so every
 * policy is tested on tables of made-up devices (tests/test_slices.c).
 *
 * Policies:
 *   equal      same share for every tower that can hold a clip
 *   memory     shares proportional to the clips that fit in one pass (a tower without a
 *              budget counts as fitting VT_SLICE_UNLIMITED: it takes nearly everything)
 *   speed      shares proportional to clips/s (micro-batches where memory is short),
 *              then refined one clip at a time to lower the predicted step time
 *   manual:W,… shares proportional to the given weights (one per tower)
 *   auto       starts as memory; the towers measure each tower's clips/s (an
 *              exponential moving average of clips / compute time) and re-plan with the
 *              speed rule when the predicted step time improves by more than 3%
 * Every plan: slices sum to B exactly (largest-remainder rounding; ties go to the lower
 * tower index), a tower may get 0, a tower that cannot hold one clip gets 0, and a
 * slice larger than what fits runs as ceil(slice / fits) micro-batches of at most
 * `fits` clips with gradient accumulation.
 * Predicted step time = max over towers of slice/speed + micro-batches * overhead.
 */
#ifndef VT_SLICES_H
#define VT_SLICES_H

#include <stdint.h>
#include <stdio.h>

#include "models/net.h"
#include "pipeline/parallel/device.h"

typedef enum vt_slice_kind {
    VT_SLICE_EQUAL,
    VT_SLICE_MEMORY,
    VT_SLICE_SPEED,
    VT_SLICE_MANUAL,
    VT_SLICE_AUTO,
} vt_slice_kind;

typedef struct vt_slice_policy {
    vt_slice_kind kind;
    int nweights;                   /* manual only */
    double weight[VT_MAX_DEVICES];  /* manual only */
} vt_slice_policy;

/* "equal", "memory", "speed", "auto", "manual:3,1" -> 0, or -1 with err set (err may be
 * NULL). The commands take it as --tower-split POLICY. */
int vt_slice_policy_parse(vt_slice_policy *out, const char *s, char *err, size_t errlen);
/* 1 when s reads as a tower policy (parses, or starts with "manual"): the commands use it
 * to answer a policy given to --split, which names a data split in every command, with
 * vt_slice_policy_moved's hint instead of "no such split". */
int vt_slice_policy_like(const char *s);
/* err = "--split V: the tower policy option is --tower-split: use --tower-split V ..." */
void vt_slice_policy_moved(char *err, size_t errlen, const char *value);
const char *vt_slice_kind_name(vt_slice_kind kind);

/* What the splitter knows about one tower. */
typedef struct vt_slice_dev {
    char name[32];      /* for the printed plan */
    int64_t budget;     /* for the printed plan; 0 = unlimited */
    int max_clips;      /* clips that fit in one pass (vt_memplan_max_clips); 0 = none fit;
                           use VT_SLICE_UNLIMITED when there is no budget */
    double speed;       /* clips/s; 0 = unknown */
    double overhead;    /* seconds per micro-batch (0 = not modelled) */
} vt_slice_dev;

#define VT_SLICE_UNLIMITED (1 << 30)

typedef struct vt_plan {
    vt_slice_kind kind;
    int n;                          /* towers */
    int batch;                      /* B */
    int slice[VT_MAX_DEVICES];      /* clips per tower; sums to B */
    int mb[VT_MAX_DEVICES];         /* micro-batch size (clips per pass), 0 if slice 0 */
    int nmb[VT_MAX_DEVICES];        /* micro-batches = ceil(slice / mb) */
    int fits[VT_MAX_DEVICES];       /* copy of max_clips */
    double speed[VT_MAX_DEVICES];   /* speeds used (0 = unknown) */
    double time[VT_MAX_DEVICES];    /* predicted seconds per tower (0 if speed unknown) */
    double predicted;               /* max of time[]; 0 if unknown */
    double ideal;                   /* B / sum of speeds of towers that can hold a clip */
    char note[160];                 /* e.g. "speeds unknown: used memory shares" */
} vt_plan;

/* Plan B clips over n towers. Returns 0, or -1 with err set (no tower holds a clip
 * while B > 0, manual weights count wrong or all zero, manual weight on a tower that
 * holds nothing). */
int vt_slice_plan(vt_plan *out, const vt_slice_policy *pol, int batch, int n,
                  const vt_slice_dev *devs, char *err, size_t errlen);

/* Clips one pass of device d holds under memory plan mp: what its budget holds
 * (VT_SLICE_UNLIMITED without a budget); a cuda tower keeps the backend's own reserve out
 * of the budget and passes no more clips than cuDNN's 2^31-element tensor limit allows
 * (vt_memplan_max_clips_cuda). What every plan of towers starts from. */
int vt_slice_fits(const vt_memplan *mp, const vt_device *d);

/* Activation checkpointing (vt_net_cfg.ckpt: a transformer block recomputed in backward)
 * per tower: --checkpoint-act auto (default) | off | on. */
typedef enum vt_ckpt_mode { VT_CKPT_AUTO, VT_CKPT_OFF, VT_CKPT_ON } vt_ckpt_mode;
/* "auto", "off", "on" -> the mode; -1 for anything else. */
int vt_ckpt_mode_parse(const char *s);
const char *vt_ckpt_mode_name(vt_ckpt_mode m);
/* Whether device d checkpoints under mode, from the memory plans without (mp_off) and with
 * it (mp_on; NULL when the model has no checkpoint segments: then never). OFF and ON as
 * said; AUTO: on only when one pass of d cannot hold a single clip without it and can
 * with it. Recomputing costs about one more forward of the blocks (a third more compute a
 * step), while micro-batches cost only their per-pass overhead (a transformer has no
 * batch norm, so their size changes no number): smaller passes are cheaper wherever a
 * clip fits. *fits: clips a pass of d under the choice (vt_slice_fits). */
int vt_ckpt_choose(vt_ckpt_mode mode, const vt_memplan *mp_off, const vt_memplan *mp_on,
                   const vt_device *d, int *fits);

/* Predicted seconds for `clips` on a tower: clips/speed + micro-batches * overhead;
 * 0 if the speed is unknown. */
double vt_slice_time(const vt_slice_dev *d, int clips);

/* Largest-remainder rounding: out[i] >= 0, sum out = total, proportional to w (w >= 0,
 * sum > 0). Ties in the remainder go to the lower index. */
void vt_slice_round(int *out, int total, const double *w, int n);

/* Table: tower, budget, fits/pass, speed, slice, micro-batches, predicted time. */
void vt_plan_print(const vt_plan *p, const vt_slice_dev *devs, FILE *f);
/* One line for logs: "speed B=24: cpu0 16 (1x16) 0.41s | cpu1 8 (1x8) 0.40s". */
void vt_plan_format(const vt_plan *p, const vt_slice_dev *devs, char *buf, size_t n);

/* ---- the auto policy's controller (pure, so test_auto can drive it with made-up times) ---- */
typedef struct vt_auto {
    int n;
    double alpha;       /* EMA weight of the newest measurement (0.5) */
    double min_gain;    /* re-plan when predicted time improves by more than this (0.03) */
    int warmup;         /* steps ignored at the start (first-touch, caches): 1 */
    int every;          /* re-check every this many steps (1) */
    int steps;          /* steps observed */
    int replans;
    double rate[VT_MAX_DEVICES]; /* EMA of clips/s; 0 = not measured yet */
} vt_auto;

void vt_auto_init(vt_auto *a, int n);
/* Feed one step: clips[i] and compute_s[i] (seconds of compute, emulated slowdown
 * included) per tower. Writes the measured rates into devs[i].speed (where known) and,
 * if a re-plan predicts a step more than min_gain faster, replaces *plan and returns 1. */
int vt_auto_observe(vt_auto *a, vt_plan *plan, vt_slice_dev *devs, const int *clips,
                    const double *compute_s);

#endif
