/*
 * tower_impl.h: what the files of the towers (tower.c, tower_worker.c, tower_stage.c,
 * tower_buckets.c, tower_step.c, tower_plan.c, tower_world.c, tower_weights.c) share and
 * nothing outside them may use — the state of one tower and of the towers, the command
 * channel between the caller and the tower threads, and the helpers one file offers the
 * others. Other files include pipeline/parallel/towers/tower.h only; these names may change
 * with the files.
 *
 * Which thread may touch what is tower.h's thread rule: a tower's fields are its
 * thread's during a command and the caller's between commands; the plan and the
 * schedule are guarded by sched_mu (loader workers read them), a helper's fields by hmu.
 */
#ifndef VT_TOWER_IMPL_H
#define VT_TOWER_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower.h"

typedef enum tower_cmd {
    CMD_NONE,
    CMD_INIT,
    CMD_TRAIN,
    CMD_EVAL,
    CMD_SYNC,
    CMD_BNSTAT,
    CMD_RUN,
    CMD_QUIT,
    CMD_SETTLE,              /* read the last update's gate (waits for the device) */
} tower_cmd;

typedef struct tower {
    struct vt_towers *T;
    int rank;                /* index in this process */
    int g;                   /* index among the towers of every process (plan, sd) */
    pthread_t th;
    int started;
    vt_device dev;
    vt_backend *be;
    vt_net *net;
    vt_optim *opt;
    int host_mem;            /* backend memory is host memory: use the batch in place */
    /* device staging (non-host backends), sized for `stage_clips` */
    float *x_dev;                       /* (stage_clips, 3, T, H, W) */
    int32_t *label_dev[VT_MAX_HEADS];   /* (stage_clips) */
    float *target_dev[VT_MAX_HEADS];    /* (stage_clips, classes) */
    int stage_clips;
    float *cw_dev[VT_MAX_HEADS];        /* (classes) class weights (tower_weights.c) */
    float *la_dev[VT_MAX_HEADS];        /* (classes) logit adjustments (tower_weights.c) */
    /* host scratch */
    float *logits;           /* (max_batch, classes summed over the heads): head h's
                                after the heads before it; pinned on a device backend */
    float *loss_clip;        /* (max_batch) */
    int scratch_clips;
    int scratch_pinned;      /* logits and buf_chk from the backend's host_alloc */
    /* this step's job: clips [off, off + count) of the batch's rows, which sit at
     * [goff, goff + count) of the whole step's clips (dropout draws by those) */
    int off, goff, count, chunk, npass;
    /* this step's results */
    double compute, wait, loss, head_loss[VT_MAX_HEADS];
    int64_t correct[VT_MAX_HEADS];
    int passes;
    /* The gradient gate (issue 45 item 3; models/optim.h): the step is skipped on the
     * device when its loss or reduced gradient norm was not finite (no update, buffers as
     * before it; every tower the same), and its norm and skip read by the host late.
     * Issued step s's results (s: T->issued after it) sit at [s & 1]. */
    float gnorm[2];
    int gskip[2];
    int64_t gate_step;       /* the step whose gate is in flight */
    int gate_late;           /* its copy back is queued and not read yet */
    float *buf_saved;        /* (buf_saved_n) host: the buffers before this step's forward */
    int64_t buf_saved_n;
    float *buf_dev;          /* ... on a device backend instead (no host wait), made when
                                first used; NULL: it did not fit, buf_saved is used */
    int buf_dev_tried;
    float *buf_chk;          /* (buf_saved_n) pinned: the buffers after the step's last
                                forward, queued then, read after the pass's wait */
    int buf_chk_ok;          /* buf_chk holds this step's buffers */
    float flag_host;         /* the non-finite flag's reduction buffer (host memory) */
    float *flag_dev;         /* ... on a device backend (one float), made when first used */
    char err[512];
    int failed;
    /* gradient buckets (tower.h): the helper thread and what the tower tells it */
    pthread_t helper;
    int helper_started;
    pthread_mutex_t hmu;
    pthread_cond_t hcv;
    uint64_t hgen;           /* bumped to start a reduction */
    int hquit, hdone;
    int64_t ready_lo;        /* gradients at offsets >= ready_lo are final */
    int backward_done;       /* vt_tw_buckets_finish was reached */
    int nbuckets, noverlap;  /* this step: buckets, and those started before backward_done */
} tower;

/* A plan change across processes: in force from training batch (epoch, batch) on. */
#define SCHED_MAX 32
typedef struct sched_entry {
    int64_t epoch, batch;
    vt_plan plan;
} sched_entry;

struct vt_towers {
    vt_towers_cfg cfg;
    int n;                   /* towers of this process */
    tower tw[VT_MAX_DEVICES];
    vt_reducer *red;
    vt_reducer *red_grad;    /* gradient buckets' own reducer (the helpers call it) */
    int64_t bucket_floats;   /* 0: one call after backward */
    vt_memplan mp;
    int have_mp;
    vt_memplan mp_ckpt;      /* the plan with activation checkpointing (have_mp_ckpt: the
                                model has blocks to recompute and ckpt_act is not off) */
    int have_mp_ckpt;
    int ckpt[VT_MAX_DEVICES];/* this process's towers: checkpointing on (vt_tw_fill_split_devs) */
    /* Every process's towers (one process: the same as cfg.devices), in rank order. */
    int ng;
    vt_device_list gdev;
    vt_slice_dev sd[VT_MAX_DEVICES];
    int count_g[VT_MAX_DEVICES]; /* this step's clips of every tower (all processes) */
    vt_plan plan;            /* the newest plan (the one a re-plan was decided on) */
    /* ---- several processes (pipeline/parallel/mpi.h) ---- */
    int world, me;           /* processes, this one's rank */
    int g0;                  /* global index of this process's first tower */
    int rank_first[VT_MAX_DEVICES + 1]; /* global index of each rank's first tower */
    pthread_mutex_t sched_mu;/* guards plan and the schedule (loader workers read them) */
    vt_plan base;            /* plan in force before the first schedule entry */
    sched_entry sched[SCHED_MAX];
    int nsched;
    int depth;               /* the deepest prefetch a loader of this process reported */
    int lag;                 /* the deepest over every process (exchanged each step) */
    int64_t at_epoch, at_batch; /* the last training batch stepped */
    int check_replicas;      /* VT_CHECK_REPLICAS: compare replicas across ranks each step */
    int64_t nclips;          /* this step's clips over every process: the B of 1/B */
    float *cw[VT_MAX_HEADS]; /* class weights, host copies of cfg.class_weight (or NULL) */
    float *la[VT_MAX_HEADS]; /* logit adjustments, host copies of cfg.logit_adjust (or NULL) */
    float wscale[VT_MAX_HEADS]; /* this step: 1 / its clips' weight sum (tower_weights.c) */
    int64_t sync_step;       /* optimizer step count that CMD_SYNC installs */
    int64_t bn_seen;         /* clips in the running statistics of a precise-BN pass */
    vt_auto aut;
    int speed_planned;
    int mixed;               /* towers on different kinds of backend */
    int64_t step;
    int64_t issued;          /* training steps run (never reset: the gate results' index) */
    int late;                /* this training step's gate may be read late
                                (vt_towers_train_issue) */
    /* command channel */
    pthread_mutex_t mu;
    pthread_cond_t cv_go, cv_done;
    uint64_t gen;
    int done;
    tower_cmd cmd;
    /* command arguments */
    const vt_batch *batch;
    float lr;
    float **probs_out;
    float *feat_out;        /* eval: (b->n, feature dim) host, or NULL (embeddings) */
    int root;
    void (*run_fn)(void *ctx, vt_net *net, vt_optim *opt);
    void *run_ctx;
};

/* What every rank tells the others after a training step. */
typedef struct rank_fig {
    double loss, head_loss[VT_MAX_HEADS];
    int64_t correct[VT_MAX_HEADS];
    double compute[VT_MAX_DEVICES], wait[VT_MAX_DEVICES];
    int32_t passes[VT_MAX_DEVICES];
    double red_wait, red_s;
    int64_t red_bytes, wire_bytes;
    int32_t signal, depth;
} rank_fig;

/* ---- tower_worker.c: the per-device thread ---- */

/* A tower's thread: waits for each command and runs it on its own replica. */
void *vt_tw_tower_main(void *arg);
/* Wake every tower with cmd and wait until all have finished it. Every command but a
 * training step first reads a tower's last update's gate (so that what it does sees the
 * step's state and count). */
void vt_tw_run_cmd(vt_towers *T, tower_cmd cmd);

/* ---- tower_stage.c: input staging ---- */

void vt_tw_free_stage(tower *tw);
/* Device buffers for the input of `clips` clips (non-host backends only). */
void vt_tw_alloc_stage(tower *tw, int clips);
/* Start moving the inputs of clips [first, first + k) of b to the tower; returns the
 * ticket vt_tw_stage_take joins. */
uint64_t vt_tw_stage_issue(tower *tw, const vt_batch *b, int first, int k);
/* Pointers to those inputs on the tower's backend (tg: labels and targets). */
const float *vt_tw_stage_take(tower *tw, const vt_batch *b, int first, int k, uint64_t ticket,
                              vt_targets *tg);
/* Every upload from the host batch is done: the caller may hand it back to the loader. */
void vt_tw_stage_done(tower *tw);

/* ---- tower_weights.c: class-weighted losses (--balance loss) ---- */

/* T->cw from cfg.class_weight (and cfg's pointers to them); _free releases them. */
void vt_tw_weights_init(vt_towers *T);
void vt_tw_weights_free(vt_towers *T);
/* The tower's backend copies (with its staging: alloc/free_stage call these). */
void vt_tw_weights_upload(tower *tw);
void vt_tw_weights_free_dev(tower *tw);
/* T->wscale for b: 1 / (sum over the step's clips, every rank's, of cw[label]), summed
 * class by class from integer counts, so 1 tower, N towers and N ranks get the same bits.
 * A collective when several processes run and a head is weighted. */
void vt_tw_weight_scale(vt_towers *T, const vt_batch *b);
/* A training pass's targets get the weights and the step's scale. */
void vt_tw_weigh(const tower *tw, vt_targets *tg);

/* ---- tower_buckets.c: gradient buckets ---- */

/* The net's grad-ready hook: gradients at offsets >= lo are final. */
void vt_tw_grad_ready_hook(void *ctx, int64_t lo);
/* The helper thread of one tower (arg: the tower). */
void *vt_tw_helper_main(void *arg);
/* Start a reduction before backward; wait for it to end after. */
void vt_tw_buckets_start(tower *tw);
void vt_tw_buckets_finish(tower *tw);

/* ---- tower_plan.c: the plan and its schedule ---- */

/* The splitter's view of this process's towers (budgets -> clips per pass). */
void vt_tw_fill_split_devs(vt_towers *T, vt_slice_dev *sd);
/* Slices of n clips over every tower under plan p. */
void vt_tw_slices_for(const vt_towers *T, const vt_plan *p, int n, int *slice);
/* The plan in force for training batch (epoch, batch). */
void vt_tw_plan_at(vt_towers *T, int64_t epoch, int64_t batch, vt_plan *out);
/* Several processes: plan p from `lag` + 1 batches on. Called with sched_mu held. */
void vt_tw_schedule(vt_towers *T, const vt_plan *p);
/* This process's positions [lo, hi) of npos under plan p; planned gets every slice. */
void vt_tw_rank_part(const vt_towers *T, const vt_plan *p, int npos, int *planned, int *lo,
                     int *hi);

/* ---- tower_world.c: the exchanges between ranks (several processes only) ---- */

/* Every rank's ok and error after a phase of init: 0, or -1 naming the first failure. */
int vt_tw_world_status(vt_towers *T, int ok, char *err, size_t errlen, const char *phase);
/* Exchange device lists and split views; fill gdev, sd, rank_first. */
int vt_tw_world_devices(vt_towers *T, int ok, const vt_slice_dev *sd_local, char *err,
                        size_t errlen);
/* Rank q's k clips over its towers: count[g] for q's towers. */
void vt_tw_split_rank(const vt_towers *T, int q, const int *planned, int k, int *count);
/* This rank's part of b under p must be the one its loader decoded. */
void vt_tw_check_part(const vt_towers *T, const vt_batch *b, const vt_plan *p, int *planned);
/* Every rank's clip count for this batch -> count[g]; returns the step's clips. */
int vt_tw_world_counts(vt_towers *T, const vt_batch *b, const vt_plan *p, int *count);
/* Every rank's figures of a training step into st (the same on every rank). */
void vt_tw_world_figs(vt_towers *T, const rank_fig *mine, vt_step_stats *st);
/* VT_CHECK_REPLICAS (tower.c): abort when a rank's replica differs from rank 0's. */
void vt_tw_check_replicas(vt_towers *T);

#endif
