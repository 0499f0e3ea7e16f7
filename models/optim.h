/*
 * optim.h: optimizers (SGD with momentum/Nesterov, RMSprop, AdamW — torch.optim
 * semantics), learning-rate schedules, and clipping by global gradient norm. An
 * optimizer owns one state arena on the backend and updates a whole parameter arena
 * with one op call, so every replica applies the identical update.
 */
#ifndef VT_OPTIM_H
#define VT_OPTIM_H

#include <stdint.h>

#include "models/backend.h"

typedef enum vt_opt_kind { VT_OPT_SGD, VT_OPT_RMSPROP, VT_OPT_ADAMW } vt_opt_kind;

typedef struct vt_optim_cfg {
    vt_opt_kind kind;
    float momentum;     /* SGD, RMSprop */
    float dampening;    /* SGD */
    int nesterov;       /* SGD */
    float wd;           /* weight decay: L2 for SGD/RMSprop, decoupled for AdamW */
    float alpha;        /* RMSprop smoothing (0.99) */
    float beta1, beta2; /* AdamW (0.9, 0.999) */
    float eps;          /* RMSprop 1e-8, AdamW 1e-8 */
    float clip_norm;    /* clip gradients to this global L2 norm; 0 = off */
} vt_optim_cfg;

/* torch.optim defaults for the kind (SGD momentum 0.9 here: the usual video recipe). */
void vt_optim_cfg_default(vt_optim_cfg *cfg, vt_opt_kind kind);
/* "sgd", "rmsprop", "adamw" -> kind; -1 if unknown. */
int vt_optim_kind_parse(const char *name);
const char *vt_optim_kind_name(vt_opt_kind kind);
/* State floats per parameter: SGD 1 (0 without momentum), RMSprop 1 or 2, AdamW 2. */
int vt_optim_state_per_param(const vt_optim_cfg *cfg);

typedef struct vt_optim vt_optim;
vt_optim *vt_optim_init(const vt_optim_cfg *cfg, vt_backend *be, int64_t nparams);
void vt_optim_free(vt_optim **o);
/* Parameter groups (torch.optim's param_groups over one arena): [lo, hi) of the
 * parameter arena trains at lr * lr_mult; a range with lr_mult 0 is FROZEN — skipped
 * by the update, the clipping norm and weight decay, as torch skips a parameter with
 * requires_grad=False (its state stays as it was). Ranges are sorted, disjoint and
 * cover [0, nparams). Without groups (the default) the whole arena trains at lr. */
typedef struct vt_optim_group {
    int64_t lo, hi;     /* parameter arena offsets, in floats */
    float lr_mult;
    int no_decay;       /* 1: no weight decay for this range (timm's no-decay group: norm
                           weights, biases, position embeddings; models/finetune.h) */
} vt_optim_group;
/* Copies the groups (at most VT_OPTIM_MAX_GROUPS; adjacent ranges of one multiplier and
 * one decay are merged). n == 0: back to one group. 256: a ViT-B's layer-decay groups
 * split by decay (about 8 alternations a block) fit. */
#define VT_OPTIM_MAX_GROUPS 256
void vt_optim_set_groups(vt_optim *o, const vt_optim_group *g, int n);
/* Clip (if cfg->clip_norm > 0) then update params in place; returns the gradient's
 * global L2 norm before clipping (over the groups that train). Increments the step count
 * (steps count from 1). A non-finite norm is not skipped: the caller asked for the step.
 * The gate's path below, read at once (one wait); grads are left as they are (the
 * update reads them clipped). */
float vt_optim_step(vt_optim *o, float *params, float *grads, float lr);
/* The step decided where the gradients are (issue 45 item 3), so that the host can read
 * a step's norm and skip a step late instead of waiting for them before the update:
 *   vt_optim_gate: queues the global L2 norm over the groups that train and the decision
 *     into the optimizer's gate (backend.h vt_grad_gate): the step is skipped when `skip`
 *     (the caller's: a non-finite loss) or when skip_at > 0 and not norm < skip_at
 *     (INFINITY: a non-finite norm; the towers skip such steps: vidtrain train
 *     --skip-nonfinite); else it is clipped by clip_norm / (norm + 1e-6) where that is < 1
 *     (torch.nn.utils.clip_grad_norm_). skip_at 0: never skipped for its norm.
 *   vt_optim_apply_gated: queues the update that reads the gate: a skipped step changes
 *     nothing (parameters, state); else parameters and state move as by vt_optim_step with
 *     that norm, at step count + 1.
 *   vt_optim_gate_dev: the gate in backend memory (copy_if_skip reads it: the towers put a
 *     skipped step's BN buffers back on the device).
 *   vt_optim_gate_fetch: queues the gate's copy into host memory (no wait).
 *   vt_optim_gate_read: after a wait that covers the fetch (vt_backend_sync, or any later
 *     wait on the backend's stream), the step's norm and skip; the step count counts the
 *     step if it was taken.
 * At most one update is in flight: vt_optim_gate and vt_optim_apply_gated refuse to run
 * before the last one's gate is read, and so do vt_optim_step_count and
 * vt_optim_set_step_count. That is what keeps the step count right although the host
 * learns of a skip late: the count an update uses (Adam's bias correction, SGD's first
 * step) is the count of the steps before it, all read by then, + 1. */
void vt_optim_gate(vt_optim *o, const float *grads, int skip, double skip_at);
void vt_optim_apply_gated(vt_optim *o, float *params, const float *grads, float lr);
const vt_grad_gate *vt_optim_gate_dev(const vt_optim *o);
void vt_optim_gate_fetch(vt_optim *o);
double vt_optim_gate_read(vt_optim *o, int *skipped);
/* 1 while an update's gate is not read (vt_optim_gate_read). */
int vt_optim_in_flight(const vt_optim *o);
int64_t vt_optim_step_count(const vt_optim *o);
void vt_optim_set_step_count(vt_optim *o, int64_t step);
/* The momentum of the following steps (a schedule's cycled momentum): SGD and RMSprop
 * momentum, AdamW beta1 (as torch's OneCycleLR sets them). A no-op for an SGD/RMSprop
 * made without momentum (it has no buffer to carry one). */
void vt_optim_set_momentum(vt_optim *o, float momentum);
/* State arena (backend memory), for checkpoints: layout is the kind's buffers one after
 * another ([momentum] / [square_avg | momentum] / [exp_avg | exp_avg_sq]). */
float *vt_optim_state(vt_optim *o);
int64_t vt_optim_state_len(const vt_optim *o);
const vt_optim_cfg *vt_optim_config(const vt_optim *o);

typedef enum vt_sched_kind {
    VT_SCHED_CONST,
    VT_SCHED_STEP,
    VT_SCHED_COSINE,
    /* torch.optim.lr_scheduler.OneCycleLR with its defaults: over the first 30% of
     * total_steps the LR rises from base_lr/25 to base_lr and the momentum falls from
     * 0.95 to 0.85, both along half cosines; then the LR falls to base_lr/25/1e4 and the
     * momentum rises back to 0.95. warmup_steps and min_lr are not used. */
    VT_SCHED_ONECYCLE,
} vt_sched_kind;
typedef struct vt_sched_cfg {
    vt_sched_kind kind;
    float base_lr;          /* onecycle: the peak (torch's max_lr) */
    int64_t warmup_steps;   /* linear warm-up from base_lr/warmup to base_lr; 0 = none */
    int64_t total_steps;    /* cosine: decays to min_lr at total_steps; onecycle: its length */
    int64_t step_size;      /* step: multiply by gamma every step_size steps */
    float gamma;
    float min_lr;
    /* cosine, re-planned (--time-budget, app/train/budget.h): from anchor_step on, the cosine
     * goes on from the share anchor_frac of its decay it had covered there to the end at
     * total_steps, so a change of length bends the curve and never makes the rate jump;
     * before it, a straight line from the warm-up to the anchor. 0: none. */
    int64_t anchor_step;
    double anchor_frac;
} vt_sched_cfg;
/* LR for a 0-based step. */
float vt_sched_lr(const vt_sched_cfg *s, int64_t step);
/* The share of the cosine's decay covered at `step` (0 before and during the warm-up, 1 at
 * total_steps and after), anchor included. */
double vt_sched_cosine_frac(const vt_sched_cfg *s, int64_t step);
/* The momentum for a 0-based step: onecycle's cycled one, else `fixed`. */
float vt_sched_momentum(const vt_sched_cfg *s, int64_t step, float fixed);
/* "const", "step", "cosine", "onecycle" -> kind; -1 if unknown. */
int vt_sched_kind_parse(const char *name);

#endif
