/*
 * run_ckpt.h: a training run in a checkpoint — the glue between the towers (replica 0
 * holds the weights, buffers and optimizer state) and models/checkpoint.h, with the run
 * state that makes a resume exact: the data cursor (epoch, next batch), the step count,
 * the best validation so far and the partial sums of the epoch in progress.
 *
 * It must never write a checkpoint in place (models/formats/safetensors.c writes a temporary
 * file and renames it) nor on a rank other than 0; under mpirun rank 0 reads checkpoints and
 * every rank gets what it read (app/dist.h).
 */
#ifndef VT_RUN_CKPT_H
#define VT_RUN_CKPT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "models/net.h"
#include "pipeline/parallel/towers/tower.h"

/* Sums over the epoch in progress, kept in the checkpoint so that a resumed epoch
 * reports the same training loss/accuracy as an uninterrupted one. */
typedef struct vt_run_sums {
    double loss;                        /* sum over clips of the weighted loss */
    int64_t clips;
    int64_t correct[VT_MAX_HEADS];
    double head_loss[VT_MAX_HEADS];
    double seconds, wait_s;             /* timing only (not part of exactness) */
    int64_t skipped;                    /* steps skipped as non-finite (--skip-nonfinite) */
} vt_run_sums;

typedef struct vt_run_state {
    int64_t epoch;      /* epoch in progress, 0-based */
    int64_t cursor;     /* next batch of that epoch (the loader's start_batch) */
    int64_t step;       /* optimizer steps done (global) */
    double best;        /* best validation video top-1 so far; -1 = none */
    double best_loss;   /* its validation loss: a tie in top-1 goes to the lower loss */
    int best_epoch;     /* 1-based */
    /* the length that follows validation (app/train/train_length.c) */
    int decay_epoch;    /* epochs done when the decay began; 0 = not yet */
    int stall;          /* validations since the last improvement */
    int decay_why;      /* why the decay began: 1 validation stalled, 2 the cap; 0 none */
    double len_acc, len_loss; /* the best validation top-1 and loss so far (loss 0: none) */
    /* --time-budget's last re-plan (app/train/train_budget.c): the epochs in force and the
     * learning rate's cosine anchor (models/optim.h); plan_epochs 0 = never re-planned */
    int plan_epochs;
    int64_t plan_step;
    double plan_frac;
    int64_t skipped_total;  /* non-finite steps skipped over the whole run */
    /* the samples trained and validated on when it was saved ("N HASH": their count and
     * a hash of their names, segments and labels; app/train/train_data.c), so that a
     * --resume on another set says so; "" in a checkpoint older than them */
    char train_set[40], val_set[40];
    vt_run_sums sums;
} vt_run_state;

/* Save replica 0 (weights, buffers, optimizer) with metadata: the vidtrain keys of
 * checkpoint.h plus "classes", "normalisation", "epoch", "step", "cursor", "seed",
 * "vidtrain_state" (JSON of vt_run_state) and "vidtrain_config" (config_json).
 * Atomic (models/formats/safetensors.c). 0, or -1 with err. */
int vt_run_save(const char *path, vt_towers *t, const vt_run_state *st, const char *config_json,
                char *err, size_t errlen);
/* Load into replica 0 — full state (with_optim) or weights only — then copy it to every
 * replica. st (may be NULL) gets the run state. 0, or -1 with err. */
int vt_run_load(const char *path, vt_towers *t, int with_optim, vt_run_state *st, char *err,
                size_t errlen);
/* The "vidtrain_config" JSON stored in a checkpoint (cJSON_Delete it), NULL + err if
 * absent or unreadable. Reads the header only. */
cJSON *vt_run_ckpt_config(const char *path, char *err, size_t errlen);

/* The statistics a vidtrain checkpoint's clips were normalised with: its "normalisation"
 * metadata ({"mean":[r,g,b],"std":[r,g,b]}, vt_run_save) as the name vt_clip_set_norm
 * gives them ("kinetics", ...), into name. 1 named, 0 the file says nothing (not a
 * safetensors file, none of that metadata, unreadable: --init reports the file itself),
 * -1 statistics that no name has (name gets the metadata). Rank 0 reads the header; every
 * rank gets its answer. */
int vt_run_ckpt_norm(const char *path, char *name, size_t n);

/* best.safetensors at the end of training: the last epoch (the end of the schedule) is
 * the model to beat, and an earlier epoch stays best only when its validation video
 * top-1 (best_acc) beats the last's (last_acc) by more than the noise of nval videos —
 * two standard errors of a difference of two accuracies, with the accuracy smoothed as
 * (k + 1) / (n + 2) so that 100% has noise too. On 15 videos that is 24 points (4
 * videos): with so few, the earlier "best" is luck (in 6 runs of bench-learn.sh the last
 * weights scored 0 to +4.2 points above the one picked, +1.0 on average); on 1000 videos
 * at 90% it is 2.7 points. Returns 1 to keep the earlier one. */
int vt_ckpt_keep_earlier_best(double best_acc, double last_acc, int64_t nval);

#endif
