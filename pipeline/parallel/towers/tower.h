/*
 * tower.h: towers — one replica (vt_net + vt_optim on its own backend) per device, one
 * persistent thread each, woken per step (docs/design.md §1, §3, §4). A training step scatters
 * the slices of a host vt_batch, runs forward/backward in micro-batches with the loss
 * gradient scaled by 1/B (B = the batch's clip count), SUMS gradients over towers with
 * a reducer (one call over the whole gradient arena), and applies the same optimizer
 * update on every replica, so replicas stay bitwise identical and the step equals one
 * device with the whole batch (docs/design.md §3.1, §3.2).
 *
 * Batch-norm statistics. Without sync-BN each tower normalises with its own micro-batch
 * statistics (as Keras/DDP do) and, after every training step, the running statistics
 * of all replicas are replaced by their clip-weighted average (sum_i n_i/B * buffers_i,
 * num_batches_tracked rounded to an integer), so every replica holds ONE identical set
 * and evaluation is the same whichever tower runs a clip. Those statistics approximate
 * one device's: only a BN layer whose input does not depend on earlier normalisation
 * (the first) gets one device's running_mean (from the same weights) exactly; deeper
 * layers see inputs normalised per tower, and running_var also misses the spread between
 * the towers' means (tests/test_towers.c measures both). With sync_bn every BN layer
 * sums (sum, sumsq, count) and the backward sums over all towers through the reducer, so
 * statistics are those of the whole pass: one tower with the whole batch and N towers
 * give the same result PER PASS. Under sync-BN all towers run the same number of passes
 * (the most any tower needs; short towers run empty passes), and pass p of every tower
 * is normalised together; with micro-batches that is not the one-device batch statistic
 * (PyTorch gradient accumulation computes statistics per micro-batch too).
 *
 * Gradient buckets. With the host reducer and cfg.bucket_mb > 0, each tower has a helper
 * thread that sums the gradient arena in buckets of that size, from its end (the last
 * layers, whose backward finishes first) to its start, each as soon as the tower's last
 * pass has made it final (vt_net_set_grad_ready) — so the reduction runs while backward
 * goes on, and the tower waits only for what is left (step stats wait_s). Buckets are the
 * same on every tower and summed in the same rank order as one call, so the result is
 * bitwise the same. By default they are used when a tower is on a GPU (its thread mostly
 * waits on the device, so the host has time to sum); with CPU towers only, the helpers
 * would take cores from the towers' compute — and skew the timing the auto and speed
 * policies plan from — so one call is the default there (bench step --bucket-mb and
 * bench/bench-overlap.sh measure both). The GPU reducers (nccl, local) reduce in one
 * call after backward.
 *
 * Every tower, even one with 0 clips, takes part in every collective. Evaluation is
 * forward only, outputs written back in batch order, each clip exactly once.
 *
 * Several processes (mpirun; pipeline/parallel/mpi.h). When this process is one of several ranks
 * the towers span them all: at init the ranks exchange their device lists and budgets,
 * and every rank plans the GLOBAL batch over every tower of every rank (the same pure
 * function of the same numbers, so the same plan everywhere). A rank's towers are a
 * contiguous run of the global towers, so each rank owns a contiguous part of every
 * batch: its loader decodes only that part (vt_towers_part_train/_eval give it), and
 * vt_towers_train_step gets a batch holding just those clips (b->npos, part_lo/hi say
 * where they sit). Each step the ranks first exchange how many clips they really have
 * (a clip whose decode failed leaves a hole) so that B, the loss scale and the dropout
 * positions are the global ones, then the reducer sums over every tower of every rank
 * (reduce_mpi.c, or one NCCL communicator over every GPU), then they exchange the step's
 * figures so that vt_step_stats, the auto policy's measurements and its decisions are the
 * same on every rank. A re-plan decided after a step takes effect `depth` batches later
 * (the loaders' prefetch depth), so batches already being decoded keep their parts.
 * Evaluation needs no exchange per batch: each rank evaluates its part, and the caller
 * merges the results (vt_step_stats of eval_step are this rank's). Checkpoints come from
 * process 0: vt_towers_sync_from copies process 0's replica into every replica of every
 * rank. In a one-process run none of this happens and nothing changes.
 *
 * Thread rule: nets, optimizers and backends belong to their tower threads; the caller
 * may touch them (vt_towers_net, ...) only between steps, and for device backends should
 * prefer vt_towers_run_on, which runs a function on the tower's own thread.
 */
#ifndef VT_TOWER_H
#define VT_TOWER_H

#include <stdint.h>
#include <stdio.h>

#include "models/net.h"
#include "models/optim.h"
#include "pipeline/data/batch.h"
#include "pipeline/parallel/device.h"
#include "pipeline/parallel/slices.h"

typedef struct vt_towers_cfg {
    vt_device_list devices;     /* one tower per entry (budget, threads, slowdown) */
    vt_slice_policy policy;
    int batch;                  /* global batch B the plan is made for */
    vt_net_cfg net;
    vt_optim_cfg optim;
    uint64_t seed;              /* weights (every replica the same) and dropout */
    int sync_bn;
    const char *reducer;        /* NULL or "auto", "host", "nccl", "local"; several
                                   processes: "mpi" (= "host") or "nccl" */
    int speed_warmup;           /* speed policy with unknown speeds: steps measured first (2) */
    double bucket_mb;           /* gradient reduction in buckets of this many MiB, each
                                   started as soon as backward has made it final (host
                                   reducer); 0 = one call after backward; < 0 (default)
                                   = 25 when a tower is on a GPU, else 0 (see below) */
    int verbose;                /* print plan changes to stderr */
    vt_ckpt_mode ckpt_act;      /* activation checkpointing per tower (slices.h
                                   vt_ckpt_choose; default auto: where no clip fits
                                   without it); net.ckpt is ignored */
    int exact_off;              /* 1: float sums over clips even where exact ones are
                                   possible. 0 (default): exact sums (models/xsum.h,
                                   vt_net_cfg.exact) whenever every tower of every process
                                   is a CPU backend, so a step is the same bits on any
                                   split; GPU towers sum in float (equal to rounding)
                                   unless VT_EXACT_SUMS=1 asks for exact sums there too
                                   (their cost on a GPU is not measured yet).
                                   VT_EXACT_SUMS=0 in the environment sets it too */
    const float *logit_adjust[VT_MAX_HEADS]; /* softmax heads' logit adjustments (host,
                                   (classes), copied; NULL: none): --balance logit, the
                                   loss on logits + these (models/net.h vt_targets) */
    const float *class_weight[VT_MAX_HEADS]; /* softmax heads' class weights (host,
                                   (classes), copied; NULL: unweighted): --balance loss.
                                   A step's weighted mean divides by the weight sum of
                                   the WHOLE step's clips, every rank's (models/net.h
                                   vt_targets), so any split equals one device */
} vt_towers_cfg;

void vt_towers_cfg_default(vt_towers_cfg *cfg);

typedef struct vt_step_stats {
    int n;                              /* clips in the batch */
    double loss;                        /* sum over clips of sum_h weight_h * loss_h */
    double head_loss[VT_MAX_HEADS];     /* sum over clips, per head (unweighted) */
    int64_t head_correct[VT_MAX_HEADS]; /* softmax: top-1 right; BCE: every label right */
    float grad_norm;                    /* global L2 norm before clipping (train) */
    int skipped;                        /* train: the loss (any tower's) or the reduced
                                           gradient norm was not finite, so no replica
                                           took the update (weights, optimizer state and
                                           step count, BN buffers all as before); the
                                           same on every tower and rank */
    int late;                           /* vt_towers_train_issue: grad_norm and skipped
                                           are not known yet (vt_towers_train_read) */
    int64_t id;                         /* train: the step's number among the towers'
                                           training steps (vt_towers_train_read) */
    int ntowers;
    int slice[VT_MAX_DEVICES];          /* clips per tower this step */
    int passes[VT_MAX_DEVICES];         /* forward passes per tower */
    double compute_s[VT_MAX_DEVICES];   /* forward+backward (+ emulated slowdown) */
    double wait_s[VT_MAX_DEVICES];      /* in collectives after the passes: waiting for others
                                           + reducing (the EXPOSED reduction with buckets) */
    double step_s;                      /* wall time of the whole step */
    int replanned;                      /* the plan changed after this step (auto/speed) */
    int buckets;                        /* gradient buckets reduced (0: one call) */
    int buckets_overlapped;             /* of them, started while backward still ran
                                           (tower 0) */
    /* The reducer this step (train; reduce.h vt_reduce_stats; several processes: the
     * largest time over the ranks, the bytes of rank 0). */
    double reduce_wait_s;               /* waiting for the other towers / ranks to arrive */
    double reduce_s;                    /* summing after all arrived: the exposed reduction */
    int64_t reduce_bytes;               /* bytes of the buffers summed */
    int64_t wire_bytes;                 /* bytes sent to other processes */
    int signal;                         /* several processes: the first rank's pending
                                           signal (vt_mpi_signal_pending), the same on every
                                           rank, so all stop after the same step; else 0 */
} vt_step_stats;

typedef struct vt_towers vt_towers;
/* 1 when the towers sum over clips exactly (vt_towers_cfg.exact_off, models/xsum.h). */
int vt_towers_exact(const vt_towers *t);
/* Whether towers on these devices would sum exactly (the rule of vt_towers_cfg.exact_off:
 * not turned off, VT_EXACT_SUMS not 0, and every device a CPU backend or VT_EXACT_SUMS=1):
 * for memory plans made outside the towers (vidtrain plan, tests' budgets), whose
 * vt_net_cfg.exact it sets. */
int vt_towers_exact_for(const vt_device_list *devices, int exact_off);

/* Builds the plan (memory plan per budget, then the split), one thread per tower, a
 * backend with the tower's budget, a replica sized for its micro-batch and its
 * optimizer; all replicas get the same weights (cfg->seed). Returns NULL with err set:
 * a tower whose budget cannot hold one clip (naming it, its budget and what one clip
 * needs), a bad model/clip, a manual split that does not match, a backend not built in. */
vt_towers *vt_towers_init(const vt_towers_cfg *cfg, char *err, size_t errlen);
void vt_towers_free(vt_towers **t);

/* The dropout and drop-path seed of global clip 0 of training step `step` (1-based) of a
 * run seeded `seed`; clip i of the step draws with this + i, whichever tower, pass or
 * process runs it (models/net.h vt_net_set_dropout_seed). --dump writes it per step. */
uint64_t vt_towers_dropout_base(uint64_t seed, long long step);

/* Towers of this process (replica indices below). */
int vt_towers_count(const vt_towers *t);
/* Towers of every process (the plan's and vt_step_stats' indices) and their devices, named
 * "r1.cpu0" (rank 1's cpu0) when there are several processes. */
int vt_towers_count_all(const vt_towers *t);
const vt_device_list *vt_towers_devices(const vt_towers *t);
const vt_plan *vt_towers_plan(const vt_towers *t);
const vt_memplan *vt_towers_memplan(const vt_towers *t);
/* The printed plan (device list + split table) and a one-line form for logs. */
void vt_towers_print_plan(const vt_towers *t, FILE *f);
void vt_towers_plan_line(const vt_towers *t, char *buf, size_t n);

/* One training step on b (b->n clips; B = b->n for the 1/B scale; b->n may differ from
 * cfg->batch, e.g. an epoch's last batch: then the plan's slices are rescaled). Device
 * towers upload their slice pass by pass on their backend's copy stream, the next pass
 * while the current one computes; when this call (or eval_step) returns, no copy reads
 * b any more: it may go back to the loader. */
void vt_towers_train_step(vt_towers *t, const vt_batch *b, float lr, vt_step_stats *out);
/* vt_towers_train_step without the wait for the step's gradient norm (issue 45 item 3):
 * the norm, the clip and the skip are decided on the devices (models/optim.h's gate) and
 * the host reads them after the next step's first pass, whose wait covers them. out is
 * train_step's, except that out->late = 1 may say grad_norm and skipped are not known yet:
 * vt_towers_train_read fills them in (waiting for the devices only if no later step has
 * read them), at the latest after the next vt_towers_train_issue. The replicas' state is
 * the step's whatever it decided, and every other call (evaluation, checkpoints through
 * vt_towers_run_on, sync_from, precise BN) reads the gate first, so it sees the step's
 * state and step count. Where something after the update must know the skip at once (the
 * towers' average of the running statistics without sync-BN, mixed backends), out->late
 * is 0, as from train_step. */
void vt_towers_train_issue(vt_towers *t, const vt_batch *b, float lr, vt_step_stats *out);
/* st (from vt_towers_train_issue, with late = 1): its grad_norm and skipped, late = 0.
 * It must be the last step issued or the one before it; st->late = 0: nothing to do. */
void vt_towers_train_read(vt_towers *t, vt_step_stats *st);
/* The optimizer momentum (AdamW: beta1) of the following steps on every replica, for
 * schedules that cycle it (vt_sched_momentum). Call between steps. */
void vt_towers_set_momentum(vt_towers *t, float momentum);
/* Forward only. probs_out[h] (b->n, classes) host, batch order: softmax probabilities
 * for softmax heads, sigmoids for BCE heads (NULL or NULL entries: not wanted).
 * out (may be NULL): loss and correct counts over the merged batch when b has targets. */
void vt_towers_eval_step(vt_towers *t, const vt_batch *b, float *probs_out[VT_MAX_HEADS],
                         vt_step_stats *out);
/* eval_step that also writes feat_out (b->n, vt_net_feature_dim) host, batch order: the
 * pooled features each clip's heads were applied to (vidtrain embed). */
void vt_towers_eval_features(vt_towers *t, const vt_batch *b, float *probs_out[VT_MAX_HEADS],
                             float *feat_out);
/* Which positions [lo, hi) of a batch of npos samples this process decodes (all of them in
 * a one-process run), as vt_loader_cfg.part wants it (towers = the vt_towers). _train:
 * training batch `batch` of `epoch` under the plan in force for it; depth = how many
 * batches the caller's loader may have claimed ahead (re-plans wait that long). _eval:
 * the current plan. Thread-safe. */
void vt_towers_part_train(void *towers, int64_t epoch, int64_t batch, int npos, int depth,
                          int *lo, int *hi);
void vt_towers_part_eval(void *towers, int64_t epoch, int64_t batch, int npos, int depth,
                         int *lo, int *hi);
/* Precise BN statistics (PySlowFast's "precise BN"), one batch at a time: replica 0
 * (of process 0) forwards every clip of b in training mode (micro-batches of what its
 * device fits) and its BN running statistics become the clip-weighted average of those
 * forwards' batch statistics over every batch since the last call with fresh = 1;
 * parameters and the other replicas are untouched. After the last batch,
 * vt_towers_sync_from(t, 0) gives every replica (of every process) replica 0's
 * statistics. Several processes: other ranks need not call it (their calls do nothing;
 * vidtrain train's pass calls it on rank 0 alone); the sync is the
 * collective every rank must reach. */
void vt_towers_bn_stats(vt_towers *t, const vt_batch *b, int fresh);
/* Re-plan now with another policy (speeds measured so far are kept). Several processes:
 * every rank calls it at the same point, with no loader running. */
int vt_towers_replan(vt_towers *t, const vt_slice_policy *pol, char *err, size_t errlen);

/* The loader's batch-buffer hook for these towers (loader.h host_alloc/host_free/
 * host_ctx): page-locked memory from the first tower whose backend has it (CUDA:
 * cudaHostAlloc, portable to every GPU), so uploads are true asynchronous DMA. Returns 0
 * and leaves the hook NULL (malloc) when no tower has it. The towers must outlive the
 * buffers (free the loader first). */
int vt_towers_host_hook(vt_towers *t, void *(**alloc)(void *ctx, size_t bytes),
                        void (**free_fn)(void *ctx, void *p), void **ctx);
/* Replica access (between steps only; see the thread rule above). */
vt_net *vt_towers_net(vt_towers *t, int rank);
vt_optim *vt_towers_optim(vt_towers *t, int rank);
vt_backend *vt_towers_backend(vt_towers *t, int rank);
/* Run fn on tower rank's thread and wait for it. */
void vt_towers_run_on(vt_towers *t, int rank, void (*fn)(void *ctx, vt_net *net, vt_optim *opt),
                      void *ctx);
/* Copy parameters, buffers, optimizer state and step count of replica `root` into every
 * replica (after loading a checkpoint into one). Several processes: replica `root` of
 * process 0, into every replica of every process (a collective). */
void vt_towers_sync_from(vt_towers *t, int root);

#endif
