/*
 * train_opts.h: the training configuration — every option of `vidtrain train`, its
 * defaults, the defaults that depend on the machine and the data (resolve), and its
 * JSON form (RUN/config.json, and the copy inside every checkpoint).
 *
 * It must never read the command line (cmd_train.c does) or touch a file: it holds,
 * resolves and converts values. config.json holds the resolved values, so a run can be
 * resumed, evaluated and reported with exactly what it trained with.
 */
#ifndef VT_TRAIN_OPTS_H
#define VT_TRAIN_OPTS_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "app/device_opts.h"
#include "models/net.h"
#include "pipeline/data/dataset/dataset.h"

typedef struct vt_train_opts {
    char data[1024];       /* dataset folder */
    char out[1024];        /* run folder */
    char model[32];
    /* 0 = resolved by vt_train_opts_resolve (config.json holds the resolved values) */
    int clip_t, crop, stride, short_side, jitter_min, jitter_max;
    int stride_jitter;     /* training: each clip's stride in [max(1, stride - j),
                              stride + j] (default 0: off) */
    float clip_fps;        /* --clip-fps F: the stride counts frames at F a second, each
                              video's scaled to its rate (0, the default: its own frames) */
    int flip;              /* random horizontal flip in training (default on) */
    float contrast_min;    /* training: contrast log-uniform in [contrast_min, 1] per clip
                              (default 0.4; 1 = off) */
    float brightness;      /* training: brightness shift in [-b, b] of the pixel range per
                              clip (default 0.1; 0 = off) */
    int epochs, batch;
    char optim[16];        /* sgd, rmsprop, adamw */
    float lr, momentum, wd, clip_norm;  /* lr 0: scaled with the batch (resolve) */
    int nesterov;          /* SGD: Nesterov momentum (default on) */
    char sched[16];        /* const, step, cosine, onecycle */
    float warmup_epochs;   /* linear warm-up length in epochs (may be fractional);
                              < 0: a fifth of the epochs (resolve) */
    float time_budget;     /* seconds for the whole job: the epochs that fit (0 = none) */
    int budget_once;       /* plan the budget's epochs once, never again (app/train/budget.h) */
    int force;             /* --force: replace a run in --out (this invocation only; not in
                              config.json) */
    int patience;          /* the default length (app/train/train_length.c): the learning rate
                              decays, then training ends, once validation has not improved
                              for this many evaluations (0 = off: the fixed rule; < 0:
                              resolve: 3 when no length is given) */
    int min_clips;         /* the default length: no decay before this many training clips
                              have been drawn (0 = none; < 0: resolve: the fixed rule's
                              length, 8000 clips and at least 30 epochs) */
    int step_epochs;       /* step schedule: decay every this many epochs */
    float gamma;           /* step schedule factor */
    float smoothing;       /* label smoothing (softmax heads) */
    float dropout;
    /* fine-tuning (models/transfer.h, models/finetune.h) */
    char init[1024];       /* --init FILE: start from these weights ("" = random) */
    int init_strict;       /* --init-strict: any tensor not matched is an error */
    int skip_nonfinite;    /* --skip-nonfinite: a step with a non-finite loss or gradient
                              norm is skipped and counted (0: training stops there) */
    char pretrained[32];   /* --pretrained NAME: torchvision's Kinetics-400 weights (sets
                              init to the cached file, model and clip to its own) */
    float head_lr_mult;    /* the classifiers' lr multiplier (0: resolve: 10 when
                              fine-tuning, else 1) */
    int freeze;            /* the stem and stages 1..N frozen (-1: none; -2: resolve) */
    float drop_path;       /* --drop-path R: transformers' stochastic depth rate (0: none) */
    float layer_decay;     /* --layer-decay F: a transformer's block i (1..depth) learns at
                              lr F^(depth+1-i), its patch embedding at F^(depth+1), fc_norm
                              and head at 1 (VideoMAE's; 0: resolve: 0.75 when a
                              transformer fine-tunes, else 1 = off) */
    float mixup, cutmix;   /* --mixup A, --cutmix A: Beta(A, A) mixing of the batch's clips
                              and targets (pipeline/data/mix.h; 0: off, the default) */
    char wd_exempt[8];     /* --wd-exempt: "on" no weight decay for 1-D parameters,
                              biases, position embeddings and class tokens (timm's and
                              VideoMAE's groups, models/finetune.h vt_finetune_no_decay),
                              "off" every parameter decays (torchvision's video recipe);
                              "auto" (default) resolves to on for a transformer, else off.
                              Runs before it: off */
    float random_erase;    /* --random-erase P: timm's random erasing per training clip with
                              probability P, the same box and noise in every frame
                              (pipeline/data/sample.h erase_prob; 0: off, the default) */
    char randaug[64];      /* --randaug SPEC: RandAugment on training clips, one draw per
                              clip on every frame (pipeline/data/randaug.h); the canonical
                              spec (vt_randaug_format) or "off" (the default) */
    int repeat_aug;        /* --repeat-aug K: K differently augmented clips from each
                              decoded training clip, every video K times an epoch
                              (pipeline/data/loader.h repeat_aug; 1: off, the default) */
    float mix_switch;      /* --mixup-switch-prob P: both on, CutMix for a batch with this
                              probability, else mixup (default 0.5, timm's) */
    int freeze_bn;         /* every BN in eval mode while training (-1: resolve: on when
                              fine-tuning) */
    int precise_bn;        /* clean clips per training video that BN's running statistics
                              are recomputed from before validation and at the end (0 =
                              off; < 0: resolve) */
    int workers, queue;
    char frame_cache[32];  /* --frame-cache: "" or "auto", "0", or a size ("2G") */
    /* devices, as given on the command line (empty = not given); the string ones are
       VT_TRAIN_DEVICE_STRINGS below */
    char devices[256], gpus[64], mem[256], gpu_mem[256], backend[16], emulate[64], speeds[128];
    int threads;
    char tower_split[64];  /* --tower-split: how a batch splits over the towers (config.json
                              "tower_split"; runs before the rename wrote it as "split") */
    int sync_bn;
    char precision[8];     /* fp32, tf32, bf16 (models/backend.h) */
    char checkpoint_act[8];/* --checkpoint-act auto | on | off (slices.h vt_ckpt_mode) */
    char input_norm[16];   /* --input-norm: the mean and std clips are normalised with, by
                              name (sample.h vt_clip_set_norm); "auto" resolves to the
                              model family's (net_types.h vt_zoo_input_norm) */
    uint64_t seed;
    float val_split;       /* fraction of train videos for validation when the dataset
                              has no val folder */
    char group[256];       /* --group: "auto" (UCF101 and HMDB51 names), "none", or a regex
                              whose first capture group names the recording; --val-split
                              keeps a group on one side (pipeline/data/dataset.h). Runs
                              before it: "none" */
    char val_dir[1024];    /* a separate validation dataset folder (optional) */
    char lists[1024];      /* UCF101-style classInd/trainlist/testlist folder (optional) */
    int fold;              /* which trainlist0F/testlist0F, or HMDB51 split (1..9) */
    char list_format[16];  /* --list-format: "" or auto (detected), ucf101, hmdb51, kinetics */
    int eval_every;        /* validate every N epochs (and after the last) */
    int val_clips;         /* K clips per video in validation */
    int val_crops;
    char labels[1024];     /* labels.csv (multi-head) or empty */
    int nweights;
    float loss_weights[VT_MAX_HEADS];
    int clips_per_video;   /* training clips drawn per video per epoch */
    float seconds_per_clip;/* > 0: --clips-per-video auto, one clip per this many seconds
                              of each video (or segment), at least 1; clips_per_video is
                              then unused. 0: off (configs before it: off) */
    char balance[12];      /* --balance: auto (the default: none on a balanced training
                              split, else pipeline/data/balance.h VT_BALANCE_DEFAULT),
                              none, sampler, loss; config.json holds the resolved mode */
    char class_weights[512]; /* --class-weights W,...: head 0's loss weights by hand, one
                              per class in class order ("" = inverse frequency) */
    int log_every;         /* steps between step lines (metrics.jsonl, non-tty log) */
    int checkpoint_every;  /* steps between mid-epoch checkpoints (0 = epoch ends only) */
    int64_t max_steps;     /* stop (with a checkpoint) after this global step; 0 = none */
    char dump[1024];       /* --dump DIR (app/dump.h); this invocation only, not saved */
    int strict_splits;     /* --strict-splits: a near-copy of a training video in val or
                              test stops the start (app/leaks.h); this invocation only */
    int no_leak_check;     /* --no-leak-check: skip that check; this invocation only */
    float frame_rate;      /* --frame-rate: frame folders' frames per second (default 30;
                              eval, predict and embed take the run's unless given) */
    int tb_clips;          /* --tb-clips N: the first N clips of each epoch's first batch
                              as TensorBoard images (app/eval/tensorboard.h); this
                              invocation only */
    char json_bad[64];     /* from_json: the first key that was there with the wrong type
                              ("" none); the loaders refuse such a configuration rather
                              than run on the default in its place */
    char json_unknown[64]; /* from_json: the first key that no part of this vidtrain writes
                              ("" none): a newer vidtrain's option, or a misspelt edit,
                              whose effect this one would silently leave out */
} vt_train_opts;

/* The recipe o resolves to (config.json "recipe"): "transformer-finetune" for a
 * transformer started from other weights (VideoMAE's recipe: vt_train_opts_resolve),
 * "transformer" for one from scratch (the same but layer decay), else "default". */
const char *vt_train_opts_recipe(const vt_train_opts *o);

/* --clips-per-video auto's spacing when --seconds-per-clip is not given: a Kinetics
 * clip's length, so a set of 10-second clips draws what it drew at 1 per video. */
#define VT_AUTO_CLIP_SECONDS 10.0f

void vt_train_opts_default(vt_train_opts *o);
/* The optimizer o resolves to: --optim's, else vt_train_optim_default's for its model. */
const char *vt_train_opts_optim(const vt_train_opts *o);
/* A model's optimizer when none is named (train's, and plan's): AdamW for a transformer
 * (the recipe), SGD for the rest. */
const char *vt_train_optim_default(const char *model);
/* A run that starts from other weights (--init or --pretrained). */
static inline int vt_train_opts_finetune(const vt_train_opts *o) {
    return o->init[0] || o->pretrained[0];
}
/* The defaults that depend on the machine and the data, for options left at 0 (or < 0):
 *   clip      vt_train_clip_default's: a clip given without a stride: stride 1
 *   batch     GPUs 32, CPU 8 (more steps per epoch: on the motion set 8 beat 16 by ~10)
 *   short side crop * 8/7, jittered in training up to crop * 10/7
 *   lr        scaled with the batch: SGD 0.1 * B / 32 for the resnets and c3d
 *             (torchvision's video recipe is 0.64 for 192 clips), 0.2 * B / 32 for tiny
 *             (0.05 at 8: measured best of 0.025-0.1), RMSprop 0.001 * B / 32, AdamW
 *             0.001 * sqrt(B / 32)
 *   epochs    the FIXED RULE: enough to see 8000 clips (at least 30): small sets need
 *             more passes. With no --epochs, --time-budget or --patience 0, the cosine
 *             schedule (the default) and no fine-tuning, patience is 3 and the length
 *             follows validation instead (app/train/train_length.c): epochs is then the cap,
 *             4 x the fixed rule, and the run decays and ends before it when validation
 *             stops improving
 *   warm-up   a fifth of the fixed rule's epochs (sched cosine or step)
 *   eval_every  about ten validations over the fixed rule's epochs: max(1, fixed / 10)
 *   precise_bn  4 clips per video when the colour jitter is on (the running statistics
 *             of jittered clips misjudge clean ones: on the motion set, recomputing them
 *             from clean clips was worth +1.0 point of test top-1 over 12 runs of the
 *             twin's recipe, nothing without the jitter); else 0; 0 with every BN frozen
 * Fine-tuning (--init, --pretrained) changes these defaults (docs/finetune.md, with
 * the transfer benchmark's figures): lr a tenth of the rule above, the classifiers at 10x
 * (head_lr_mult), every BN frozen (freeze_bn: the pretrained statistics, and no batch
 * statistics from small per-tower batches), no stage frozen, and epochs enough to see
 * 2000 clips (at least 10).
 * `epoch_clips`: the training clips an epoch draws (videos x --clips-per-video, or the
 * auto counts' sum: vt_train_count_clips); `gpu`: a GPU tower trains (on any rank). */
/* The clip `model` trains on when --clip is not given (train's default, and plan's with
 * gpu 1), a pure function of the two: frames *t, crop side *crop, sampling stride *stride.
 *   s3d: 16x224 stride 1 (the least it takes is 13x209); X3D, MViT and VideoMAE's ViTs
 *   their published clips (train_opts.c's table: x3d_m 16x224 stride 5, the transformers
 *   16x224 stride 4), on any device; c3d: 16 frames (pool5 needs 16) at the device's crop
 *   and stride; else
 *   GPUs: 16x112, stride 1 (the video models' usual input); CPU: 8x64, stride 3 (a
 *   22-frame span at a cost a laptop trains in minutes; on the hard motion set stride 3
 *   beat 1 and 2 by 9 to 40 points of top-1).
 * Each is a clip the model builds at (tests/test_opts.c walks the zoo). */
void vt_train_clip_default(const char *model, int gpu, int *t, int *crop, int *stride);
/* The default length's patience (evaluations), and its cap: VT_TRAIN_CAP x the fixed
 * rule's epochs (app/train/train_length.c has the figures behind both). */
#define VT_TRAIN_PATIENCE 3
#define VT_TRAIN_CAP 4
void vt_train_opts_resolve(vt_train_opts *o, int64_t epoch_clips, int gpu);
/* To/from JSON (the run's config.json). from_json leaves fields absent in j unchanged,
 * and names in o->json_bad the first key there with the wrong type (a string for a number,
 * a number for a name; null is taken as absent), and in o->json_unknown the first key no
 * part of this vidtrain writes: whoever reads a run refuses either (train_ranges.h). */
cJSON *vt_train_opts_to_json(const vt_train_opts *o);
void vt_train_opts_from_json(vt_train_opts *o, const cJSON *j);
/* The device options that are strings (app/device_opts.h), in one list, X(field) each:
 * the command line, config.json and each rank's copy under MPI (app/dist.c) go through
 * it, so an eighth option is added here once. threads is the one number beside them. */
#define VT_TRAIN_DEVICE_STRINGS(X) X(devices) X(gpus) X(mem) X(gpu_mem) X(backend) X(emulate) X(speeds)
/* Device args view of the options (pointers into o). */
void vt_train_opts_device_args(const vt_train_opts *o, vt_device_args *a);
/* The device options given in a (vt_device_args_take's) copied into o; those not given
 * are left as they are. 0, or -1 with err (nothing copied) when one is longer than its
 * field. */
int vt_train_opts_take_device_args(vt_train_opts *o, const vt_device_args *a, char *err,
                                   size_t errlen);
/* How a run's dataset is split (val fraction, UCF101 lists): train and eval must open a
 * folder the same way, or eval's "val" would not be the run's validation videos. The
 * returned opts point into o. */
vt_dataset_opts vt_run_dataset_opts(const vt_train_opts *o);
/* Folder dir opened as the run reads its data (vt_run_dataset_opts, then its labels file),
 * with labels and lists in place of the run's --labels and --lists where not NULL: the
 * data of embed DIR and eval (their --labels; embed's --lists). Not probed. The dataset,
 * or NULL with err. */
vt_dataset *vt_run_dataset_open(const vt_train_opts *o, const char *dir, const char *labels,
                                const char *lists, char *err, size_t errlen);

#endif
