/*
 * mix.h: mixup and CutMix on a batch of clips (Zhang et al. 2018, Yun et al. 2019), the
 * way timm's Mixup (mode "batch") does it for DeiT and VideoMAE's fine-tuning: one
 * lambda ~ Beta(a, a) per batch, clip i mixed with clip n-1-i (the batch reversed), and
 * the targets mixed with the same lambda into a distribution per clip that the loss
 * takes (backend.h softmax_xent_soft). CutMix's box is the same for every frame of a
 * clip (a clip is one picture moving) and lambda is corrected to the box's true area.
 *
 * Equal to one device (docs/design.md §3.1): the draw is a pure function of (seed,
 * step), and the batch is mixed whole before the towers slice it, so every split sees
 * the same clips and targets. A resumed run draws the same (the step is in the
 * checkpoint). It must never mix a part of a batch (one process of several holds only
 * its towers' clips: the caller refuses that), and never read a shared RNG.
 */
#ifndef VT_MIX_H
#define VT_MIX_H

#include <stdint.h>

#include "pipeline/data/batch.h"

typedef struct vt_mix_cfg {
    float mixup;        /* mixup's Beta(a, a); 0: off */
    float cutmix;       /* CutMix's Beta(a, a); 0: off */
    float switch_prob;  /* both on: CutMix for a batch with this probability, else mixup
                           (timm's switch_prob, 0.5) */
    uint64_t seed;      /* the run's seed */
} vt_mix_cfg;

enum { VT_MIX_NONE = 0, VT_MIX_MIXUP = 1, VT_MIX_CUTMIX = 2 };

/* One step's draw. */
typedef struct vt_mix_draw {
    int kind;           /* VT_MIX_* */
    double lam;         /* the weight of a clip's own target: Beta's draw, for CutMix then
                           1 - (box area) / (h w) */
    int y0, y1, x0, x1; /* CutMix: rows [y0, y1) and columns [x0, x1) come from the partner */
} vt_mix_draw;

/* Whether c mixes at all. */
static inline int vt_mix_on(const vt_mix_cfg *c) { return c->mixup > 0 || c->cutmix > 0; }

/* A Beta(a, a) draw from the splitmix64 state *state (two Gamma(a) draws, Marsaglia and
 * Tsang's method), which it advances; a > 0. */
double vt_mix_beta(uint64_t *state, double a);

/* The draw of 0-based training step `step` for clips of h x w pixels: a pure function of
 * (c->seed, step, h, w). timm's rand_bbox: a box of sqrt(1 - lam) times each side,
 * centred on a uniform pixel, clipped to the clip. */
void vt_mix_decide(const vt_mix_cfg *c, int64_t step, int h, int w, vt_mix_draw *d);

/* CutMix's box for Beta's draw lam centred on pixel (cy, cx) of an h x w clip (timm's
 * rand_bbox without margin), and lam corrected to its area (cutmix_bbox_and_lam). */
void vt_mix_box(double lam, int cy, int cx, int h, int w, vt_mix_draw *d);

/* Mixes b in place with draw d: clip i with clip n-1-i, every clip of b->x (normalised,
 * as timm mixes) by mixup (x_i = lam x_i + (1 - lam) x_j, in float) or CutMix (d's box
 * of every frame and channel taken from x_j). For each softmax head h with soft[h] !=
 * NULL: soft[h] (n, classes) = lam t(y_i) + (1 - lam) t(y_j), t(y) = (1 - eps) onehot(y)
 * + eps / classes with eps = smoothing[h] (timm's mixup_target: label smoothing inside
 * the mixed target), and b->label[h][i] becomes the DOMINANT label (y_i when lam >= 0.5,
 * else y_j): training accuracy counts against it. BCE heads' targets are mixed in place
 * with the same lambda. Nothing for kind VT_MIX_NONE, except soft[h] written unmixed. */
void vt_mix_apply(const vt_mix_draw *d, vt_batch *b, float *const soft[VT_MAX_HEADS],
                  const float smoothing[VT_MAX_HEADS]);

#endif
