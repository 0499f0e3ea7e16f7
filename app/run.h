/*
 * run.h: the run folder and what train, eval and predict share — option parsing helpers,
 * the resolved training configuration (RUN/config.json, cJSON), the metrics files
 * (RUN/metrics.jsonl, RUN/metrics.csv), Ctrl-C handling, and small file helpers.
 *
 * It must never train or decode: it reads and writes the run folder's small text files,
 * parses strings, and glues the run state to models/checkpoint.h (through the towers'
 * replica 0). Every write that a reader may see half-done goes through a temporary file
 * and a rename. The evaluation pass shared by train (validation) and eval is declared
 * here and lives in app/cmd_eval.c.
 *
 * Run folder layout:
 *   config.json        resolved configuration (vt_train_opts, plus dataset classes)
 *   plan.txt           devices, slice plan and memory plan as printed before training
 *   metrics.jsonl      one JSON object per line: {"kind":"step",...} every --log-every
 *                      steps and {"kind":"epoch",...} per epoch; each has "step"
 *   metrics.csv        the epoch lines as a table (regenerated from metrics.jsonl)
 *   last.safetensors   checkpoint every epoch (and every --checkpoint-every steps, and
 *                      on Ctrl-C); best.safetensors by validation video top-1 (ties:
 *                      the lower validation loss)
 *   val.json           last validation (same shape as eval.json)
 *   eval.json, confusion.csv   from `vidtrain eval`
 *   report.html        app/report.c
 */
#ifndef VT_RUN_H
#define VT_RUN_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "app/evalproto.h"
#include "models/common.h"
#include "models/net.h"
#include "pipeline/data/dataset.h"
#include "pipeline/parallel/device.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/tower.h"

/* ---- option parsing ---- */

/* vt_opt_value (models/common.h) matches "--name V" / "--name=V". */
/* Strict parsers: the whole string, within [lo, hi]. Return 0 or -1. */
int vt_parse_int(const char *s, long lo, long hi, int *out);
int vt_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
int vt_parse_float(const char *s, double lo, double hi, float *out);
int vt_parse_u64(const char *s, uint64_t *out);
/* "16x112" (T x crop) or "16x112x112" (T x H x W, H must equal W: square crops). */
int vt_parse_clip(const char *s, int *t, int *crop);
/* "1,0.5" -> weights (up to max); returns the count or -1. */
int vt_parse_floats(const char *s, float *out, int max);

/* ---- training configuration ---- */
typedef struct vt_train_opts {
    char data[1024];       /* dataset folder */
    char out[1024];        /* run folder */
    char model[32];
    /* 0 = resolved by vt_train_opts_resolve (config.json holds the resolved values) */
    int clip_t, crop, stride, short_side, jitter_min, jitter_max;
    int flip;              /* random horizontal flip in training (default on) */
    int epochs, batch;
    char optim[16];        /* sgd, rmsprop, adamw */
    float lr, momentum, wd, clip_norm;  /* lr 0: scaled with the batch (resolve) */
    int nesterov;          /* SGD: Nesterov momentum (default on) */
    char sched[16];        /* const, step, cosine, onecycle */
    float warmup_epochs;   /* linear warm-up length in epochs (may be fractional);
                              < 0: a fifth of the epochs (resolve) */
    float time_budget;     /* seconds for the whole job: the epochs that fit (0 = none) */
    int step_epochs;       /* step schedule: decay every this many epochs */
    float gamma;           /* step schedule factor */
    float smoothing;       /* label smoothing (softmax heads) */
    float dropout;
    int workers, queue;
    /* devices, as given on the command line (empty = not given) */
    char devices[256], gpus[64], mem[256], gpu_mem[256], backend[16], emulate[64], speeds[128];
    int threads;
    char tower_split[64];  /* --tower-split: how a batch splits over the towers (config.json
                              "tower_split"; runs before the rename wrote it as "split") */
    int sync_bn;
    char precision[8];     /* fp32, tf32, bf16 (models/backend.h) */
    uint64_t seed;
    float val_split;       /* fraction of train videos for validation when the dataset
                              has no val folder */
    char val_dir[1024];    /* a separate validation dataset folder (optional) */
    char lists[1024];      /* UCF101-style classInd/trainlist/testlist folder (optional) */
    int fold;              /* which trainlist0F/testlist0F (1..9) */
    int eval_every;        /* validate every N epochs (and after the last) */
    int val_clips;         /* K clips per video in validation */
    int val_crops;
    char labels[1024];     /* labels.csv (multi-head) or empty */
    int nweights;
    float loss_weights[VT_MAX_HEADS];
    int clips_per_video;   /* training clips drawn per video per epoch */
    int log_every;         /* steps between step lines (metrics.jsonl, non-tty log) */
    int checkpoint_every;  /* steps between mid-epoch checkpoints (0 = epoch ends only) */
    int64_t max_steps;     /* stop (with a checkpoint) after this global step; 0 = none */
    char dump[1024];       /* --dump DIR (app/dump.h); this invocation only, not saved */
} vt_train_opts;

void vt_train_opts_default(vt_train_opts *o);
/* The defaults that depend on the machine and the data, for options left at 0 (or < 0):
 *   clip      GPUs: 16x112, stride 1 (the video models' usual input); CPU: 8x64, stride 2
 *             (the same 15-frame span at a cost a laptop trains in minutes); a clip given
 *             without a stride: stride 1
 *   short side crop * 8/7, jittered in training up to crop * 10/7
 *   lr        scaled with the batch: SGD 0.1 * B / 32 (torchvision's video recipe is
 *             0.64 for 192 clips), RMSprop 0.001 * B / 32, AdamW 0.001 * sqrt(B / 32)
 *   epochs    enough to see 8000 clips (at least 30): small sets need more passes
 *   warm-up   a fifth of the epochs (sched cosine or step)
 *   eval_every  about ten validations a run: max(1, epochs / 10)
 * `ntrain`: training videos; `gpu`: a GPU tower trains (on any rank). */
void vt_train_opts_resolve(vt_train_opts *o, int ntrain, int gpu);
/* "300", "300s", "5m", "1.5h" -> seconds; -1 if not a duration. */
double vt_parse_duration(const char *s);
/* To/from JSON (the run's config.json). from_json leaves fields absent in j unchanged. */
cJSON *vt_train_opts_to_json(const vt_train_opts *o);
void vt_train_opts_from_json(vt_train_opts *o, const cJSON *j);
/* Device args view of the options (pointers into o). */
void vt_train_opts_device_args(const vt_train_opts *o, vt_device_args *a);

/* ---- the model's heads (config.json "heads", checkpoint metadata) ---- */
typedef struct vt_run_heads {
    int n;
    vt_head_cfg cfg[VT_MAX_HEADS];
    char **classes[VT_MAX_HEADS];  /* (cfg[h].classes) class names, owned */
} vt_run_heads;

/* [{"name":..,"loss":"softmax"|"bce","weight":..,"smoothing":..,"classes":[..]}] */
cJSON *vt_run_heads_to_json(const vt_run_heads *h);
int vt_run_heads_from_json(vt_run_heads *h, const cJSON *arr, char *err, size_t errlen);
void vt_run_heads_free(vt_run_heads *h);

/* ---- files ---- */

/* mkdir -p. Returns 0 or -1 with err set. */
int vt_mkdirs(const char *path, char *err, size_t errlen);
int vt_file_exists(const char *path);
int vt_dir_exists(const char *path);
/* Whole file as a NUL-terminated string (free()), NULL if unreadable. */
char *vt_read_file(const char *path);
/* Atomic: write to a temp file in the same folder, fsync, rename. 0 or -1. */
int vt_write_file_atomic(const char *path, const char *text, char *err, size_t errlen);
/* JSON file read/write (write is atomic, formatted). */
cJSON *vt_read_json(const char *path);
int vt_write_json(const char *path, const cJSON *j, char *err, size_t errlen);

/* ---- metrics ---- */

/* Appends one line to RUN/metrics.jsonl; an {"kind":"epoch"} line also regenerates
 * RUN/metrics.csv (columns = the numeric keys of the epoch lines, first-seen order). */
int vt_metrics_append(const char *run_dir, const cJSON *line, char *err, size_t errlen);
/* Resume: keep only lines whose "step" <= keep_step (what the checkpoint had seen), so
 * a resumed run does not log the same steps twice; regenerates metrics.csv. */
int vt_metrics_truncate(const char *run_dir, int64_t keep_step, char *err, size_t errlen);
int vt_metrics_write_csv(const char *run_dir, char *err, size_t errlen);
/* The {"kind":"epoch"} lines of RUN/metrics.jsonl in file order, as cJSON objects into
 * *out (lines that are not JSON are skipped). Returns their count, 0 when the file is
 * absent; free with vt_metrics_epochs_free. */
int vt_metrics_epochs(cJSON ***out, const char *run_dir);
void vt_metrics_epochs_free(cJSON **lines, int n);

/* ---- run state in checkpoints ---- */

/* Sums over the epoch in progress, kept in the checkpoint so that a resumed epoch
 * reports the same training loss/accuracy as an uninterrupted one. */
typedef struct vt_run_sums {
    double loss;                        /* sum over clips of the weighted loss */
    int64_t clips;
    int64_t correct[VT_MAX_HEADS];
    double head_loss[VT_MAX_HEADS];
    double seconds, wait_s;             /* timing only (not part of exactness) */
} vt_run_sums;

typedef struct vt_run_state {
    int64_t epoch;      /* epoch in progress, 0-based */
    int64_t cursor;     /* next batch of that epoch (the loader's start_batch) */
    int64_t step;       /* optimizer steps done (global) */
    double best;        /* best validation video top-1 so far; -1 = none */
    double best_loss;   /* its validation loss: a tie in top-1 goes to the lower loss */
    int best_epoch;     /* 1-based */
    vt_run_sums sums;
} vt_run_state;

/* Save replica 0 (weights, buffers, optimizer) with metadata: the vidtrain keys of
 * checkpoint.h plus "classes", "normalisation", "epoch", "step", "cursor", "seed",
 * "vidtrain_state" (JSON of vt_run_state) and "vidtrain_config" (config_json).
 * Atomic (checkpoint.c). 0, or -1 with err. */
int vt_run_save(const char *path, vt_towers *t, const vt_run_state *st, const char *config_json,
                char *err, size_t errlen);
/* Load into replica 0 — full state (with_optim) or weights only — then copy it to every
 * replica. st (may be NULL) gets the run state. 0, or -1 with err. */
int vt_run_load(const char *path, vt_towers *t, int with_optim, vt_run_state *st, char *err,
                size_t errlen);
/* The "vidtrain_config" JSON stored in a checkpoint (cJSON_Delete it), NULL + err if
 * absent or unreadable. Reads the header only. */
cJSON *vt_run_ckpt_config(const char *path, char *err, size_t errlen);

/* ---- a trained model, as eval and predict load it ---- */

/* The options of the commands that run a trained model (eval, predict). */
typedef struct vt_model_args {
    const char *ckpt;       /* --checkpoint PATH (NULL: RUN's best, else last) */
    const char *tower_split; /* --tower-split POLICY (NULL: memory) */
    vt_precision precision; /* --precision (default fp32, whatever the run trained with:
                               the checkpoint holds float32 weights) */
    int clips_per_video;    /* --clips-per-video K, 1..1000 (default 10) */
    int crops;              /* --crops 1|3 (default 1) */
    vt_device_args devices; /* the device options (pipeline/parallel/device.h) */
} vt_model_args;

void vt_model_args_default(vt_model_args *a);
/* If argv[*i] is one of these options: takes it and its value (advancing *i), returns 1.
 * Returns 0 for another argument, and -1 after printing "vidtrain CMD: ..." to stderr
 * when the value is missing or bad (a usage error). */
int vt_model_args_take(vt_model_args *a, int argc, char **argv, int *i, const char *cmd);

typedef struct vt_run_model {
    char ckpt[4200];        /* the checkpoint: the one asked for, else RUN/best, else RUN/last */
    vt_train_opts opts;     /* the configuration it was trained with */
    vt_run_heads heads;
    vt_towers *towers;      /* forward-only towers holding its weights (vt_run_model_load) */
    vt_precision precision; /* what vt_run_model_load runs it at (FP32 unless set) */
} vt_run_model;

/* Picks the checkpoint (ckpt, or RUN/best.safetensors when it exists, else
 * RUN/last.safetensors) and reads the configuration and heads it was trained with: the
 * checkpoint's own copy, else RUN/config.json. 0, or -1 with err naming the file. m is
 * always initialised: vt_run_model_free it either way. */
int vt_run_model_open(vt_run_model *m, const char *run, const char *ckpt, char *err,
                      size_t errlen);
/* The evaluation protocol's clip for this model: its clip length, stride and crop; the
 * short side it was trained at (crop * 8/7 when the configuration has none); 1 crop, no
 * flip. */
void vt_run_model_clip(vt_clip_cfg *clip, const vt_run_model *m);
/* How a run's dataset is split (val fraction, UCF101 lists): train and eval must open a
 * folder the same way, or eval's "val" would not be the run's validation videos. The
 * returned opts point into o. */
vt_dataset_opts vt_run_dataset_opts(const vt_train_opts *o);
/* Builds forward-only towers for `batch` clips a step on the devices of da, split by
 * policy (NULL: "memory"), and loads the checkpoint's weights into them. 0; -2 with err
 * when the device arguments or the policy are bad (a usage error); -1 with err
 * otherwise. */
int vt_run_model_load(vt_run_model *m, const vt_device_args *da, const char *policy, int batch,
                      char *err, size_t errlen);
void vt_run_model_free(vt_run_model *m);

/* ---- the evaluation pass (app/cmd_eval.c) ---- */
typedef struct vt_eval_opts {
    vt_clip_cfg clip;       /* t, stride, crop, short_side, mean/std; ncrops = crops */
    int clips_per_video;    /* K */
    int crops;              /* 1 or 3 */
    int batch, workers;
    uint64_t seed;
    int quiet;              /* no progress display */
    struct vt_dump *dump;   /* write the inputs and head 0's probabilities (NULL: no) */
} vt_eval_opts;

typedef struct vt_eval_counts {
    int64_t clips;          /* clips evaluated (each once) */
    int64_t videos;         /* videos with at least one clip */
    int64_t expected;       /* videos x K x crops requested */
    int64_t bad_clips;      /* left out because their decode failed */
    int64_t unknown_videos; /* left out: labelled with a class the model does not know */
} vt_eval_counts;

/* Runs every clip of the videos idx (n) of ds through the towers (forward only) and
 * feeds head h's probabilities and losses to ep[h] (created here: vt_evalproto_free
 * them). Labels of ds are mapped to the model's classes by name before anything uses
 * them, so metrics and loss are right whatever the dataset's class order. Videos with a
 * class (softmax) or tag (BCE) the model does not know are left out before loading,
 * named in a warning and counted in counts->unknown_videos; counts->expected covers the
 * videos kept. 0, or -1 with err (heads or loss kinds that differ from the model's). */
int vt_run_evaluate(vt_evalproto *ep[VT_MAX_HEADS], vt_eval_counts *counts, vt_towers *t,
                    vt_dataset *ds, const vt_run_heads *heads, const int32_t *idx, int n,
                    const vt_eval_opts *eo, char *err, size_t errlen);
/* eval.json / val.json: {"split","clips","videos","clips_per_video","crops","heads":[...]}
 * with head 0's figures also at the top level. */
cJSON *vt_eval_json(const vt_eval_result *r, const vt_run_heads *heads,
                    const vt_eval_counts *counts, const char *split, const vt_eval_opts *eo);

/* ---- signals ---- */

/* SIGINT and SIGTERM set a flag the training loop polls between steps (it finishes the
 * current step, writes a checkpoint and exits 128+signal: 130 for Ctrl-C, 143 for
 * SIGTERM). A second signal exits at once with the same code (the checkpoint on disk is
 * still whole: checkpoints are written to a temporary file and renamed). */
void vt_signals_install(void);
/* 0, or the first signal received. */
int vt_signal_pending(void);
/* Restores default handlers (for tests and at exit). */
void vt_signals_reset(void);

#endif
