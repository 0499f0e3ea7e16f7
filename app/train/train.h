/*
 * train.h: one `vidtrain train` run, in the steps cmd_train.c calls in order — set up
 * (dataset, towers, run folder, resumed state, loader, schedule), run one epoch of
 * steps, end the epoch (validation, metrics, checkpoints, report), finish — around one
 * context that owns everything the run holds.
 *
 * Resume is exact: the checkpoint holds the weights, optimizer state and step count, and
 * the data cursor (epoch, next batch) plus the epoch's partial sums; every random
 * choice of the data comes from (seed, epoch, sample index) and dropout from the step,
 * so a resumed run feeds the same batches to the same state. Under mpirun every rank
 * runs these steps in step (app/dist.h): each decodes its towers' part of every batch,
 * rank 0 writes the run folder, and all stop after the same step. None of this may
 * decode, split batches or touch a backend directly: the loader and the towers do.
 */
#ifndef VT_TRAIN_H
#define VT_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "app/train/budget.h"
#include "app/dump.h"
#include "app/eval/evalproto.h"
#include "app/eval/evaluate.h"
#include "app/opts.h"
#include "app/progress.h"
#include "app/run/run_ckpt.h"
#include "app/run/run_claim.h"
#include "app/run/run_heads.h"
#include "app/train/train_opts.h"
#include "app/train/train_val.h"
#include "models/optim.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/loader.h"
#include "pipeline/parallel/towers/tower.h"

typedef struct vt_train {
    /* ---- set by the command line (cmd_train.c) ---- */
    vt_train_opts o;
    vt_train_opts given;   /* the options before vt_train_opts_resolve (--time-budget
                              resolves them again for the epochs it picks) */
    vt_opts_given cli;     /* the options the command line gave (app/opts.h) */
    char resume[1024];     /* --resume RUN, or "" */
    int quiet;             /* no progress display */
    double t_start;        /* when the command started: --time-budget counts from here */
    FILE *out;             /* where the run's lines go (stdout) */
    vt_run_claim claim;    /* --out, this run's alone (app/run/run_claim.h) */

    /* ---- set up by vt_train_setup, freed by vt_train_free ---- */
    vt_dataset *ds, *vds;  /* the training folder; the --val-dir folder (or NULL) */
    vt_dataset *val_ds;    /* the one validation reads: vds, else ds */
    int32_t *train_idx, *val_idx;
    int ntrain, nval;
    double train_fps[2];   /* the training videos' lowest and highest frame rate (config
                              "train_fps": eval, predict and embed warn outside them) */
    char train_set[40], val_set[40]; /* what they are, "N HASH" (vt_run_state's) */
    int32_t *video_clips;  /* (ds->nvideos) --clips-per-video auto's counts, or NULL */
    int64_t epoch_clips;   /* training clips an epoch draws (vt_train_count_clips) */
    float *class_weight;   /* (head 0's classes) --balance loss's weights, or NULL */
    float *logit_adjust;   /* (head 0's classes) --balance logit's log priors, or NULL */
    int val_by_class;      /* best.safetensors on mean class accuracy: the validation
                              classes are imbalanced (vt_train_balance) */
    int balance_auto;      /* --balance auto met an imbalanced training split */
    vt_run_heads heads;
    vt_towers_cfg tc;      /* what the towers were built from */
    double gpus;           /* GPU towers over every rank (the machine's defaults) */
    vt_towers *towers;
    char config_json[1 << 16]; /* config.json's text: also in every checkpoint */
    vt_loader *loader;
    vt_sched_cfg sc;
    int64_t spe;           /* steps (batches) per epoch */
    vt_budget bud;         /* --time-budget's measurements (budget 0: no budget to keep) */
    vt_dump *dump;         /* --dump (rank 0 only), or NULL */
    vt_evalproto *ep[VT_MAX_HEADS];
    float *mix_soft[VT_MAX_HEADS]; /* --mixup/--cutmix: softmax heads' mixed targets of a
                              batch (capacity x classes; train_mix.c), or NULL */

    /* ---- the run's progress ---- */
    vt_run_state st;       /* what last.safetensors holds once an epoch ends */
    int64_t first_epoch;   /* the epoch this invocation starts in (st.epoch at setup) */
    int stopped;           /* 128+signal when a signal stopped it, -1 at --max-steps */
} vt_train;

/* One epoch's timings, from vt_train_epoch to vt_train_epoch_end. */
typedef struct vt_train_epoch_stats {
    double t0;             /* when the epoch started */
    double compute, waited;/* seconds in steps, and waiting for the loader */
    int64_t clips;         /* clips trained in this invocation */
} vt_train_epoch_stats;

/* t->epoch_clips and (--clips-per-video auto) t->video_clips, from the probed dataset;
 * under mpirun rank 0's counts on every rank (app/train/train_clips.c). 0. */
int vt_train_count_clips(vt_train *t);
/* The training folder (with --labels), what validation reads (--val-dir, else the
 * folder's val split or --val-split share), printed (train_data.c). 0, or the exit code. */
int vt_train_open_data(vt_train *t);
/* Training samples with fewer frames than one clip (t->o resolved) spans: their clips
 * repeat frames (the clip's pad policy), and one of a frame or two is a still, whatever
 * its class says. Counted on one line with the shortest named (they trained in silence:
 * a folder of thumbnails or cut-off downloads looked like any other) (train_data.c). */
void vt_train_short_samples(const vt_train *t);
/* Bytes the training and validation loaders will hold beside the towers, kept out of the
 * CPU towers' default budgets (device.h: vt_device_list_keep_host): their batch buffers,
 * queue + workers of them each; a --frame-cache of a given size (auto takes a quarter of what the
 * towers leave, so it fits by itself); and the workers' thread stacks where the limit
 * counts mappings (ulimit -v, -d: a stack is mapped whole). The decoders' frames are not
 * in it: they depend on each video's size (train_data.c). After the clip is resolved. */
int64_t vt_train_host_reserve(const vt_train *t);
/* A warning of the validation videos (the val split, or --val-dir's) at a frame rate
 * outside the training videos', as eval would give of them (app/run/run_model.h):
 * best.safetensors is chosen on clips that span another time than training's. Once the
 * clip is resolved (its stride is in the warning), on rank 0 (train_data.c). */
void vt_train_val_fps_warn(const vt_train *t);
/* --resume (train_heads.c): 0 when the dataset's heads are the run's (its checkpoint's
 * configuration: the same heads, losses and class names in the same order), else 1
 * after printing what differs. Reads nothing but the checkpoint's header. */
int vt_train_resume_heads(const vt_train *t);
/* --init FILE (train_heads.c): 1 when FILE is a vidtrain checkpoint whose classes (by
 * name) are not the dataset's in the same order, with rows->from the class rows to load
 * by name (vt_net_load_init_rows) in *store (free it); else 0 and nothing to free. */
struct vt_head_rows;
int vt_train_init_rows(const vt_train *t, struct vt_head_rows *rows, int **store);
/* --balance (app/train/train_balance.c): prints the training class counts, resolves auto into
 * t->o.balance, sets t->class_weight (loss) and t->val_by_class. 0, or 2 (printed). */
int vt_train_balance(vt_train *t);
/* Fills everything vt_train_setup sets up, from t->o (parsed) and t->resume; prints the
 * dataset, the validation set, the plan and the "training:" line, and writes
 * config.json and plan.txt. 0, or the exit code after printing why (1 error, 2 usage). */
int vt_train_setup(vt_train *t);
/* Runs the batches of `epoch` from t->st's cursor, with checkpoints every
 * --checkpoint-every steps and at a signal or --max-steps (which set t->stopped). 0
 * when the epoch's batches are done or it stopped, -1 on a failure (printed). *pg is
 * the epoch's progress display, left open for vt_train_epoch_end; *es its timings. */
int vt_train_epoch(vt_train *t, int64_t epoch, vt_progress **pg, vt_train_epoch_stats *es);
/* The end of an epoch: validation when due, the epoch line (printed and in the metrics
 * files), last.safetensors (and best.safetensors when the validation is the best after
 * the warm-up) for the next epoch's start, and the report. Closes *pg. 0, or -1 on a
 * failure (printed). */
int vt_train_epoch_end(vt_train *t, int64_t epoch, vt_progress **pg,
                       const vt_train_epoch_stats *es);
/* After the last epoch or a stop: waits for every rank, prints the outcome and writes
 * the report. Returns the exit code (0, or 128+signal). */
int vt_train_finish(vt_train *t);
/* Frees what vt_train_setup set up, and t; takes NULL and a pointer to NULL. */
void vt_train_free(vt_train **t);

/* Writes DIR/NAME: the towers' state with st as its run state and config.json's text
 * (vt_run_save). 0, or -1 after printing why. */
int vt_train_save(vt_train *t, const char *dir, const char *name, const vt_run_state *st);
/* --time-budget (train_budget.c): sets t->o's epochs (and what the defaults derive from
 * them) to what fits the budget, from timed first steps; leaves the towers and the
 * loader as they were. 0, or -1 (printed). */
int vt_train_fit_budget(vt_train *t);
/* --time-budget, at the start of an epoch's end (before it decides on validation): the
 * epochs that fit what is left of the budget from what the run has measured so far
 * (app/train/budget.h), into t->o.epochs and the schedule's cosine anchor, printed when they
 * change. Nothing without a budget, with --budget-once, on a resumed run (its budget's
 * clock is gone) or for a run stopped by a signal. */
void vt_train_budget_epoch_end(vt_train *t, int64_t epoch, const vt_train_epoch_stats *es);
/* The state the timing above puts back, in RUN while it times (training removes one a
 * killed run left). */
#define VT_TRAIN_BUDGET_STATE ".budget.safetensors"
/* Precise BN (train_bn.c): the towers' BN running statistics recomputed from
 * --precise-bn K clean, evaluation-style clips of each training video (at most 2048
 * clips: a large set takes every j-th video) with the current weights; parameters
 * untouched. Nothing when K is 0. 0, or -1 (printed). */
int vt_train_precise_bn(vt_train *t);
/* The validation pass's options: vt_train_val_opts (app/train/train_val.h). */

/* --mixup, --cutmix (train_mix.c, pipeline/data/mix.h). vt_train_mix_heads, before the
 * towers are built: marks t->tc.net's softmax heads as trained on soft targets, or
 * refuses (printed, returns 2) what mixing cannot go with: several processes (each holds
 * only its towers' part of a batch, and a clip's partner is in the whole batch),
 * --balance loss (class weights of a mixed target), --dump (the twin takes labels).
 * vt_train_mix_batch mixes b in place with 0-based `step`'s draw and points its softmax
 * heads' targets at the mixed ones; vt_train_mix_done gives b back as the loader made it
 * (its targets; the clips stay mixed: the loader refills them). Nothing when off. */
int vt_train_mix_heads(vt_train *t);
void vt_train_mix_batch(vt_train *t, vt_batch *b, int64_t step);
void vt_train_mix_done(vt_train *t, vt_batch *b);
void vt_train_mix_free(vt_train *t);
/* The draw of 0-based `step` for h x w clips into *d: 1 when the run mixes, else 0 (d
 * untouched). --dump writes it beside the batch. */
struct vt_mix_draw;
int vt_train_mix_draw(const vt_train *t, int64_t step, int h, int w, struct vt_mix_draw *d);

/* --wd-exempt on (train_recipe.c): one line saying which parameters go without weight
 * decay (their tensors and share of the parameters). */
void vt_train_print_no_decay(const vt_train *t);
/* The recipe's one line ("recipe: ..."), for a transformer or a run that mixes or repeats
 * clips (other runs: nothing beyond the "training:" line). */
void vt_train_print_recipe(const vt_train *t);

/* The default length that follows validation (train_length.c has the rule and why). */
/* At set-up, once the state is loaded and before the schedule: a resumed run's epochs
 * from its decay, and the line that says what the length follows. Without a
 * validation set the fixed rule instead (t->o changed: returns 1, config.json is to be
 * written again); 0 otherwise. */
int vt_train_length_start(vt_train *t);
/* At the end of a run of the default length: one line saying why it ended there. */
void vt_train_length_finish(const vt_train *t);
/* The learning rate of 0-based step `step`: t->sc's, or in the decay phase the cosine
 * that starts at the decay's first step. */
float vt_train_lr(const vt_train *t, int64_t step);
/* At the end of 0-based `epoch`, with its validation figures when do_val: next's length
 * fields brought up to date, and when the decay begins, next->decay_epoch and t->o.epochs
 * set (printed). Nothing for a run of fixed length. */
void vt_train_length_epoch_end(vt_train *t, int64_t epoch, int do_val, double vacc,
                               double vloss, vt_run_state *next);

#endif
