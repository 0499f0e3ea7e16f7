/*
 * run_model.h: a trained model as eval and predict load it — their shared options
 * (--checkpoint, --tower-split, --precision, --clips-per-video, --crops and the device
 * options), the checkpoint they pick (the one asked for, else RUN's best, else its
 * last), the configuration and heads it was trained with, and forward-only towers that
 * hold its weights.
 *
 * It must never write into the run folder or load optimizer state: a model run forward
 * needs weights only.
 */
#ifndef VT_RUN_MODEL_H
#define VT_RUN_MODEL_H

#include <stddef.h>

#include "app/device_opts.h"
#include "app/run/run_heads.h"
#include "app/train/train_opts.h"
#include "models/backend.h"
#include "pipeline/data/sample.h"
#include "pipeline/parallel/towers/tower.h"

/* The options of the commands that run a trained model (eval, predict). */
typedef struct vt_model_args {
    const char *ckpt;       /* --checkpoint PATH (NULL: RUN's best, else last) */
    const char *tower_split; /* --tower-split POLICY (NULL: memory) */
    vt_precision precision; /* --precision (default fp32, whatever the run trained with:
                               the checkpoint holds float32 weights) */
    int clips_per_video;    /* --clips-per-video K, 1..1000 (default 10) */
    int crops;              /* --crops 1|3 (default 1) */
    vt_device_args devices; /* the device options (app/device_opts.h) */
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
    double train_fps[2];    /* the lowest and highest frame rate of the videos it trained
                               on (config "train_fps"); 0, 0 when the run did not say */
} vt_run_model;

/* Picks the checkpoint (ckpt, or RUN/best.safetensors when it exists, else
 * RUN/last.safetensors) and reads the configuration and heads it was trained with: the
 * checkpoint's own copy, else RUN/config.json. The checkpoint and every file of RUN but
 * `writes` (the ones the command writes there itself, NULL-terminated, or NULL) become
 * inputs no output may replace (app/run/run_claim.h vt_run_claim_inputs). 0, or -1 with
 * err naming the file. m is always initialised: vt_run_model_free it either way. */
int vt_run_model_open(vt_run_model *m, const char *run, const char *ckpt,
                      const char *const *writes, char *err, size_t errlen);
/* The evaluation protocol's clip for this model: its clip length, stride and crop; the
 * short side it was trained at (crop * 8/7 when the configuration has none); 1 crop, no
 * flip. */
void vt_run_model_clip(vt_clip_cfg *clip, const vt_run_model *m);
/* Whether m (its checkpoint's own configuration) is a model of the run in folder `run`:
 * the same model, clip (frames, crop, stride), input statistics and heads (names, losses,
 * classes in order) as RUN/config.json. 0 when so, or when RUN has no readable
 * config.json to compare with; -1 with err naming the first difference. For a command
 * that files results in RUN (eval): another run's checkpoint given by --checkpoint would
 * have its figures written there as RUN's. */
int vt_run_model_of_run(const vt_run_model *m, const char *run, char *err, size_t errlen);
/* Builds forward-only towers for `batch` clips a step on the devices of da, split by
 * policy (NULL: "memory"), without optimizer state or exact sums (training's), and loads
 * the checkpoint's weights into them. 0; -2 with err
 * when the device arguments or the policy are bad (a policy given for one tower: nothing
 * to split), or m->precision is one no tower
 * computes (tf32 on CPU towers only: vt_devices_check_precision) (a usage error); -1 with err
 * otherwise. */
int vt_run_model_load(vt_run_model *m, const vt_device_args *da, const char *policy, int batch,
                      char *err, size_t errlen);
void vt_run_model_free(vt_run_model *m);

/* 1 when a video at `fps` is outside the frame rates m's training videos spanned by more
 * than 1.25x either way (24 against 30 fps is within; 15 or 60 is not): a clip of it spans
 * another length of time than training's clips did, so its motion looks slower or faster
 * to the model, and nothing else says so; a run trained with --stride-jitter saw clips at
 * several strides, and the range widens to match. 0 inside, when the run recorded no rates (an
 * older run), or for fps <= 0 (a live stream's unknown rate). */
int vt_run_fps_outside(const vt_run_model *m, double fps);
/* "vidtrain CMD: warning: ..." on stderr for n of `total` videos outside (first: one of
 * them, at first_fps), with the way out; `what` names one ("video", "validation video").
 * Nothing when n is 0. */
void vt_run_fps_warn(const char *cmd, const char *what, const vt_run_model *m, int n, int total,
                     const char *first, double first_fps);
/* The same over videos met one at a time (predict, embed, --timeline): add each video
 * once its clips are read (one that opens and then fails is in neither count), then warn
 * once at the end. */
typedef struct vt_fps_tally {
    int n, total;
    char first[512];
    double first_fps;
} vt_fps_tally;
void vt_fps_tally_add(vt_fps_tally *t, const vt_run_model *m, const char *path, double fps);
void vt_fps_tally_warn(const vt_fps_tally *t, const char *cmd, const vt_run_model *m);

#endif
