/*
 * cmd_train.c: `vidtrain train DIR --out RUN` — the training loop: dataset summary,
 * device list and slice/memory plan, then per epoch the loader's batches through the
 * towers with the LR schedule, a progress bar, validation (video-level, K clips per
 * video), metrics files, checkpoints (last every epoch, best by validation video top-1)
 * and the HTML report. Ctrl-C finishes the step, checkpoints and exits 130.
 *
 * Resume is exact: the checkpoint holds the weights, optimizer state and step count, and
 * the data cursor (epoch, next batch) plus the epoch's partial sums; every random
 * choice of the data comes from (seed, epoch, sample index) and dropout from the step,
 * so a resumed run feeds the same batches to the same state. Under mpirun every rank
 * runs this loop in step (app/dist.h): each decodes its towers' part of every batch,
 * rank 0 writes the run folder, and all stop after the same step. This file must never
 * decode, split batches or touch a backend directly: the loader and the towers do.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "app/dist.h"
#include "app/dump.h"
#include "app/evalproto.h"
#include "app/progress.h"
#include "app/report.h"
#include "app/run.h"
#include "models/common.h"
#include "models/optim.h"
#include "pipeline/data/dataset.h"
#include "pipeline/data/loader.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/tower.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain train DIR --out RUN [options]\n"
        "       vidtrain train --resume RUN [options to override]\n\n"
        "Trains a 3D-CNN on the videos in DIR (DIR/<class>/<video>, or DIR/train[, DIR/val]\n"
        "[, DIR/test] laid out that way; symbolic links are followed), validating about ten\n"
        "times a run, checkpointing to RUN/last.safetensors and RUN/best.safetensors, and\n"
        "writing RUN/metrics.csv, RUN/metrics.jsonl, RUN/config.json and RUN/report.html.\n"
        "The defaults are a recipe that learns without tuning: SGD with Nesterov momentum,\n"
        "a learning rate scaled with the batch, a linear warm-up over the first fifth of the\n"
        "epochs then a cosine decay, a clip sized for the device. config.json records every\n"
        "value resolved.\n\n"
        "model and clips:\n"
        "  --model NAME          tiny (default), c3d, r3d18, mc3_18, r2plus1d18\n"
        "  --clip TxS            frames x crop size, e.g. 16x112 or 8x64x64 (default: 16x112\n"
        "                        when a GPU trains, 8x64 on the CPU)\n"
        "  --stride N            temporal stride between frames (default 1; 2 for the CPU's\n"
        "                        8-frame default clip: the same 15-frame span)\n"
        "  --short-side N        short side before cropping (default crop*8/7); training\n"
        "                        jitters it in [short, crop*10/7]\n"
        "  --no-flip             no random horizontal flip. Flip is ON by default, which suits\n"
        "                        most datasets; turn it off when left/right matters (the demo's\n"
        "                        classes are motion directions, so the demo passes --no-flip)\n"
        "  --dropout P           dropout before the classifier (default 0)\n"
        "optimisation:\n"
        "  --epochs N            (default: enough to see 8000 clips, at least 30)\n"
        "  --time-budget T       instead of --epochs: the epochs that fit T (300, 300s, 5m,\n"
        "                        1h) for the whole job, from a timing of the first steps\n"
        "                        (decode included; the run is the same as with those epochs)\n"
        "  --batch B             global batch (default 16)\n"
        "  --optim NAME          sgd (momentum 0.9, default), rmsprop, adamw\n"
        "  --lr X                base learning rate (default scaled with the batch: SGD\n"
        "                        0.1*B/32, RMSprop 0.001*B/32, AdamW 0.001*sqrt(B/32))\n"
        "  --momentum X          (default 0.9)     --wd X     weight decay (default 1e-4)\n"
        "  --no-nesterov         plain SGD momentum (Nesterov is the default)\n"
        "  --sched NAME          cosine (default), step, const, onecycle (torch's OneCycleLR:\n"
        "                        30%% rise from lr/25 to lr, then down to lr/25e4; momentum\n"
        "                        (AdamW: beta1) cycled 0.95-0.85-0.95; --warmup unused)\n"
        "  --warmup E            linear warm-up over E epochs (may be fractional; default a\n"
        "                        fifth of the epochs)\n"
        "  --step-epochs N --gamma G   step schedule: x G every N epochs (10, 0.1)\n"
        "  --label-smoothing X   softmax heads (default 0)\n"
        "  --clip-norm X         clip gradients to this global L2 norm (default off)\n"
        "  --seed N              (default 0): same seed, same data, same devices -> same run\n"
        "data:\n"
        "  --workers N           decode threads (default 2)\n"
        "  --clips-per-video N   training clips drawn per video per epoch (default 1)\n"
        "  --val-split F         fraction of train videos used for validation when DIR has\n"
        "                        no val folder (default 0.1; 0 = no validation)\n"
        "  --val-dir DIR2        validate on another dataset folder (same classes)\n"
        "  --lists DIR           UCF101-style split files: classInd.txt, trainlist0F.txt,\n"
        "                        testlist0F.txt (testlist videos become the test split)\n"
        "  --fold F              which trainlist/testlist pair (1..9, default 1)\n"
        "  --eval-every N        validate every N epochs and after the last (default\n"
        "                        epochs/10, at least 1)\n"
        "  --val-clips K         clips per video in validation, averaged (default 3)\n"
        "  --val-crops 1|3       spatial crops per clip in validation (default 1)\n"
        "  --labels FILE.csv     several outputs: a path column, then one column per head;\n"
        "                        cells with ';'-separated tags make a multi-label (BCE) head\n"
        "  --loss-weights W,...  one weight per head (default 1 each)\n"
        "devices:\n"
        "  --tower-split POLICY  how each batch splits over the towers: equal, memory\n"
        "                        (default), speed, auto, manual:W,W,...\n"
        "  --sync-bn             batch-norm statistics over all towers\n"
        "  --precision P         fp32 (default); tf32: CUDA TF32 tensor cores; bf16: mixed\n"
        "                        precision, bf16 activations (about half the memory per clip)\n"
        "                        with float32 weights, BN, losses, optimizer (CUDA; cpu-ref)\n"
        "%s"
        "run:\n"
        "  --out RUN             run folder (required unless --resume)\n"
        "  --resume RUN          continue RUN exactly where it stopped (options given with it\n"
        "                        override the saved ones; change data, model, batch or seed\n"
        "                        and the continuation is no longer exact)\n"
        "  --log-every N         steps between log lines / metrics.jsonl step lines (50)\n"
        "  --checkpoint-every N  also checkpoint RUN/last.safetensors every N steps\n"
        "  --max-steps N         stop (with a checkpoint) after global step N (this run only)\n"
        "  --dump DIR            write what a PyTorch twin needs to replay the run step by\n"
        "                        step: initial and final state, every batch with its LR,\n"
        "                        the last validation's inputs and outputs (small runs only;\n"
        "                        scripts/torch_twin.py parity DIR checks them)\n"
        "  -q, --quiet           no progress display\n\n"
        "Ctrl-C (SIGINT) or SIGTERM: the current step finishes, RUN/last.safetensors is\n"
        "written (resumable with --resume) and vidtrain exits with 130 (SIGINT) or 143\n"
        "(SIGTERM). A second Ctrl-C exits at once; the last checkpoint on disk stays whole.\n"
        "Exit codes: 0 done (or --max-steps reached), 1 error, 2 usage, 130/143 interrupted.\n"
        "%s",
        vt_device_args_help, vt_mpi_help);
}

/* ---- option parsing ---- */

static int parse_args(vt_train_opts *o, int argc, char **argv, int *quiet, char *resume,
                      size_t resume_n) {
    const char *pos = NULL;
    char err[256];
    int epochs_given = 0;
    /* Pass 1: --resume loads the saved configuration, which the rest then overrides. */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (vt_opt_value(argc, argv, &i, "--resume", &v) == 1) {
            snprintf(resume, resume_n, "%s", v);
            char path[2048];
            snprintf(path, sizeof path, "%s/config.json", v);
            cJSON *j = vt_dist_read_json(path); /* rank 0's copy under mpirun */
            if (!j) {
                fprintf(stderr, "vidtrain train: cannot read %s: nothing to resume\n", path);
                return 1;
            }
            vt_train_opts_from_json(o, j);
            vt_dist_resume_devices(o, j);
            cJSON_Delete(j);
            /* --max-steps is a stop for one invocation, never inherited: a plain --resume
             * continues to the end. */
            o->max_steps = 0;
            snprintf(o->out, sizeof o->out, "%s", v);
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        vt_device_args da;
        memset(&da, 0, sizeof da);
        int di = i;
        int dr = vt_device_args_take(&da, argc, argv, &di);
        if (dr < 0) {
            fprintf(stderr, "vidtrain train: %s needs a value\n", a);
            return 2;
        }
        if (dr == 1) {
#define CP(f) if (da.f) snprintf(o->f, sizeof o->f, "%s", da.f)
            CP(devices);
            CP(gpus);
            CP(mem);
            CP(gpu_mem);
            CP(backend);
            CP(emulate);
            CP(speeds);
#undef CP
            if (da.threads)
                o->threads = da.threads;
            i = di;
            continue;
        }
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain train: bad value for %s: '%s'\n", a, v ? v : ""); return 2; } while (0)
        if (!strcmp(a, "--no-flip")) {
            o->flip = 0;
            continue;
        }
        if (!strcmp(a, "--flip")) {
            o->flip = 1;
            continue;
        }
        if (!strcmp(a, "--nesterov")) {
            o->nesterov = 1;
            continue;
        }
        if (!strcmp(a, "--no-nesterov")) {
            o->nesterov = 0;
            continue;
        }
        if (!strcmp(a, "--sync-bn")) {
            o->sync_bn = 1;
            continue;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            *quiet = 1;
            continue;
        }
        if (OPT("--resume")) {
            if (r < 0) BAD();
            continue;
        }
        if (OPT("--out")) { if (r < 0) BAD(); snprintf(o->out, sizeof o->out, "%s", v); continue; }
        if (OPT("--model")) { if (r < 0) BAD(); snprintf(o->model, sizeof o->model, "%s", v); continue; }
        if (OPT("--clip")) { if (r < 0 || vt_parse_clip(v, &o->clip_t, &o->crop)) BAD(); continue; }
        if (OPT("--stride")) { if (r < 0 || vt_parse_int(v, 1, 64, &o->stride)) BAD(); continue; }
        if (OPT("--short-side")) { if (r < 0 || vt_parse_int(v, 1, 8192, &o->short_side)) BAD(); o->jitter_min = o->jitter_max = 0; continue; }
        if (OPT("--precision")) { if (r < 0 || vt_precision_parse(v) < 0) BAD(); snprintf(o->precision, sizeof o->precision, "%s", v); continue; }
        if (OPT("--dropout")) { if (r < 0 || vt_parse_float(v, 0, 0.99, &o->dropout)) BAD(); continue; }
        if (OPT("--epochs")) { if (r < 0 || vt_parse_int(v, 1, 100000, &o->epochs)) BAD(); epochs_given = 1; continue; }
        if (OPT("--time-budget")) { if (r < 0 || (o->time_budget = (float)vt_parse_duration(v)) <= 0) BAD(); continue; }
        if (OPT("--batch")) { if (r < 0 || vt_parse_int(v, 1, 65536, &o->batch)) BAD(); continue; }
        if (OPT("--optim")) { if (r < 0 || vt_optim_kind_parse(v) < 0) BAD(); snprintf(o->optim, sizeof o->optim, "%s", v); continue; }
        if (OPT("--lr")) { if (r < 0 || vt_parse_float(v, 0, 100, &o->lr)) BAD(); continue; }
        if (OPT("--momentum")) { if (r < 0 || vt_parse_float(v, 0, 1, &o->momentum)) BAD(); continue; }
        if (OPT("--wd")) { if (r < 0 || vt_parse_float(v, 0, 10, &o->wd)) BAD(); continue; }
        if (OPT("--sched")) { if (r < 0 || vt_sched_kind_parse(v) < 0) BAD(); snprintf(o->sched, sizeof o->sched, "%s", v); continue; }
        if (OPT("--warmup")) { if (r < 0 || vt_parse_float(v, 0, 1e6, &o->warmup_epochs)) BAD(); continue; }
        if (OPT("--step-epochs")) { if (r < 0 || vt_parse_int(v, 1, 1000000, &o->step_epochs)) BAD(); continue; }
        if (OPT("--gamma")) { if (r < 0 || vt_parse_float(v, 0, 1, &o->gamma)) BAD(); continue; }
        if (OPT("--label-smoothing")) { if (r < 0 || vt_parse_float(v, 0, 0.99, &o->smoothing)) BAD(); continue; }
        if (OPT("--clip-norm")) { if (r < 0 || vt_parse_float(v, 0, 1e9, &o->clip_norm)) BAD(); continue; }
        if (OPT("--seed")) { if (r < 0 || vt_parse_u64(v, &o->seed)) BAD(); continue; }
        if (OPT("--workers")) { if (r < 0 || vt_parse_int(v, 0, 256, &o->workers)) BAD(); continue; }
        if (OPT("--queue")) { if (r < 0 || vt_parse_int(v, 1, 64, &o->queue)) BAD(); continue; }
        if (OPT("--clips-per-video")) { if (r < 0 || vt_parse_int(v, 1, 1000, &o->clips_per_video)) BAD(); continue; }
        if (OPT("--val-split")) { if (r < 0 || vt_parse_float(v, 0, 0.9, &o->val_split)) BAD(); continue; }
        if (OPT("--val-dir")) { if (r < 0) BAD(); snprintf(o->val_dir, sizeof o->val_dir, "%s", v); continue; }
        if (OPT("--lists")) { if (r < 0) BAD(); snprintf(o->lists, sizeof o->lists, "%s", v); continue; }
        if (OPT("--fold")) { if (r < 0 || vt_parse_int(v, 1, 9, &o->fold)) BAD(); continue; }
        if (OPT("--eval-every")) { if (r < 0 || vt_parse_int(v, 1, 100000, &o->eval_every)) BAD(); continue; }
        if (OPT("--val-clips")) { if (r < 0 || vt_parse_int(v, 1, 1000, &o->val_clips)) BAD(); continue; }
        if (OPT("--val-crops")) { if (r < 0 || vt_parse_int(v, 1, 3, &o->val_crops) || o->val_crops == 2) BAD(); continue; }
        if (OPT("--labels")) { if (r < 0) BAD(); snprintf(o->labels, sizeof o->labels, "%s", v); continue; }
        if (OPT("--loss-weights")) { if (r < 0 || (o->nweights = vt_parse_floats(v, o->loss_weights, VT_MAX_HEADS)) < 1) BAD(); continue; }
        if (OPT("--tower-split")) {
            vt_slice_policy pol;
            if (r < 0 || vt_slice_policy_parse(&pol, v, err, sizeof err)) {
                fprintf(stderr, "vidtrain train: %s\n",
                        r < 0 ? "--tower-split needs a value" : err);
                return 2;
            }
            snprintf(o->tower_split, sizeof o->tower_split, "%s", v);
            continue;
        }
        if (OPT("--split")) {
            /* Train has no data split option: it trains on the train split. The tower
             * policy was --split before it became --tower-split. */
            if (r > 0 && vt_slice_policy_like(v)) {
                vt_slice_policy_moved(err, sizeof err, v);
                fprintf(stderr, "vidtrain train: %s\n", err);
            } else {
                fprintf(stderr, "vidtrain train: train has no --split: it trains on DIR's train "
                        "videos and validates on its val videos (or --val-split F of train, or "
                        "--val-dir); the tower policy is --tower-split POLICY\n");
            }
            return 2;
        }
        if (OPT("--log-every")) { if (r < 0 || vt_parse_int(v, 1, 1000000000, &o->log_every)) BAD(); continue; }
        if (OPT("--checkpoint-every")) { if (r < 0 || vt_parse_int(v, 0, 1000000000, &o->checkpoint_every)) BAD(); continue; }
        if (OPT("--dump")) { if (r < 0) BAD(); snprintf(o->dump, sizeof o->dump, "%s", v); continue; }
        if (OPT("--max-steps")) { if (r < 0 || vt_parse_i64(v, 0, INT64_MAX, &o->max_steps)) BAD(); continue; }
#undef OPT
#undef BAD
        if (a[0] == '-') {
            fprintf(stderr, "vidtrain train: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (pos) {
            fprintf(stderr, "vidtrain train: one dataset folder only ('%s' and '%s')\n", pos, a);
            return 2;
        }
        pos = a;
    }
    if (resume[0] && o->dump[0]) {
        fprintf(stderr, "vidtrain train: --dump replays a run from its first step: not with "
                        "--resume\n");
        return 2;
    }
    if (pos)
        snprintf(o->data, sizeof o->data, "%s", pos);
    if (!o->data[0] || !o->out[0]) {
        fprintf(stderr, "vidtrain train: need DIR and --out RUN (or --resume RUN)\n");
        return 2;
    }
    if (o->time_budget > 0 && epochs_given && !resume[0]) {
        fprintf(stderr, "vidtrain train: --time-budget picks the number of epochs: not with "
                        "--epochs\n");
        return 2;
    }
    return 0;
}

/* ---- helpers ---- */

static void clip_cfg_from_opts(vt_clip_cfg *c, const vt_train_opts *o) {
    vt_clip_cfg_default(c);
    c->t = o->clip_t;
    c->stride = o->stride;
    c->crop = o->crop;
    c->short_side = o->short_side;
    c->jitter_min = o->jitter_min;
    c->jitter_max = o->jitter_max;
    c->flip = o->flip;
    c->ncrops = o->val_crops;
}

static void print_dataset(const vt_dataset *ds, vt_dataset *mut, FILE *f) {
    fprintf(f, "dataset %s: %d videos, %d head(s)\n", ds->dir, ds->nvideos, ds->nheads);
    for (int h = 0; h < ds->nheads; h++) {
        fprintf(f, "  head %-10s %s, %d classes:", ds->heads[h].name,
                ds->heads[h].loss == VT_LOSS_BCE ? "multi-label (BCE)" : "softmax",
                ds->heads[h].nclasses);
        for (int c = 0; c < ds->heads[h].nclasses && c < 12; c++)
            fprintf(f, " %s", ds->heads[h].classes[c]);
        fprintf(f, "%s\n", ds->heads[h].nclasses > 12 ? " ..." : "");
    }
    fprintf(f, "  splits: train %d, val %d, test %d; unreadable %d; non-video files %d\n",
            vt_dataset_split_count(mut, VT_SPLIT_TRAIN), vt_dataset_split_count(mut, VT_SPLIT_VAL),
            vt_dataset_split_count(mut, VT_SPLIT_TEST), vt_dataset_count_bad(mut), ds->nignored);
    if (ds->nbroken)
        fprintf(f, "  not followed: %d (dangling links, link loops...: see the warnings)\n",
                ds->nbroken);
}

/* What a checkpoint's metadata carries besides tensors (see run.h vt_run_state). */
typedef struct train_ctx {
    vt_train_opts o;
    vt_train_opts given;   /* the options before vt_train_opts_resolve (--time-budget
                              resolves them again for the epochs it picks) */
    char config_json[1 << 16];
    vt_towers *towers;
    double t_start;        /* when the command started: --time-budget counts from here */
} train_ctx;

/* config.json: the resolved options plus the heads (eval and predict read it); its text
 * also goes into every checkpoint. */
static void write_config(train_ctx *c, const vt_run_heads *heads) {
    char err[512];
    cJSON *j = vt_train_opts_to_json(&c->o);
    cJSON_AddItemToObject(j, "heads", vt_run_heads_to_json(heads));
    vt_dist_add_rank_devices(j, &c->o);
    char path[2100];
    snprintf(path, sizeof path, "%s/config.json", c->o.out);
    char *s = cJSON_PrintUnformatted(j);
    snprintf(c->config_json, sizeof c->config_json, "%s", s);
    cJSON_free(s);
    if (vt_write_json(path, j, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    cJSON_Delete(j);
}

/* The validation pass's options. */
static void val_opts(vt_eval_opts *eo, const vt_train_opts *o) {
    memset(eo, 0, sizeof *eo);
    clip_cfg_from_opts(&eo->clip, o);
    eo->clips_per_video = o->val_clips;
    eo->crops = o->val_crops;
    eo->batch = o->batch;
    eo->workers = o->workers;
    eo->seed = o->seed;
    eo->quiet = 1;
}

static int save_ckpt_in(train_ctx *c, const char *dir, const char *name, const vt_run_state *st) {
    char path[2100], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (vt_run_save(path, c->towers, st, c->config_json, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: checkpoint %s: %s\n", path, err);
        return -1;
    }
    return 0;
}

static int save_ckpt(train_ctx *c, const char *name, const vt_run_state *st) {
    return save_ckpt_in(c, c->o.out, name, st);
}

/* The momentum a step uses when no schedule cycles it: SGD/RMSprop's, AdamW's beta1. */
static float step_momentum(const vt_optim_cfg *oc) {
    return oc->kind == VT_OPT_ADAMW ? oc->beta1 : oc->momentum;
}

/* --time-budget: the number of epochs that fits the budget. The first steps of epoch 0
 * are timed on real batches (decode included; learning rate 0) and the validation on a
 * few videos, then the state before them is loaded back and the loader restarts at
 * epoch 0, batch 0: the run that follows is bit for bit the one `--epochs E` gives.
 * Sets c->o (epochs, and whatever the defaults derive from them). 0, or -1. */
static int fit_budget(train_ctx *c, vt_loader *loader, int ntrain, int gpu,
                      const vt_run_heads *heads, vt_dataset *val_ds, const int32_t *val_idx,
                      int nval, FILE *out) {
    vt_train_opts *o = &c->o;
    char path[2100], err[1024];
    snprintf(path, sizeof path, "%s/.budget.safetensors", o->out);
    vt_run_state st0;
    memset(&st0, 0, sizeof st0);
    st0.best = -1;
    double t0 = vt_now();
    if (vt_run_save(path, c->towers, &st0, c->config_json, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --time-budget: %s: %s\n", path, err);
        return -1;
    }
    double t_save = vt_now() - t0;
    /* Steps: the first one pays for start-up (threads, allocation, algorithm choice) and
     * is not counted; then up to 8 more or 3 seconds. */
    int64_t spe = vt_loader_num_batches(loader), steps = 0, clips = 0, clips_first = 0;
    double t_steps = 0, t_first = 0, tb = vt_now();
    const vt_batch *b;
    while (steps < VT_MIN(spe, 9) && (b = vt_loader_next(loader)) != NULL) {
        vt_step_stats ss;
        vt_towers_train_step(c->towers, b, 0.0f, &ss);
        double now = vt_now();
        if (steps++ == 0) {
            t_first = now - tb;
            clips_first = b->n;
        } else {
            t_steps += now - tb;
            clips += b->n;
        }
        tb = now;
        if (t_steps > 3)
            break;
    }
    /* per clip: an epoch's last batch may be short */
    double per_clip = clips > 0 ? t_steps / (double)clips : t_first / (double)VT_MAX(clips_first, 1);
    int64_t nclips = vt_loader_num_samples(loader);
    /* Validation: a few videos, scaled to all of them. */
    double t_val = 0;
    if (nval > 0) {
        int sub = VT_MIN(nval, 4);
        vt_eval_opts eo;
        val_opts(&eo, o);
        vt_evalproto *ep[VT_MAX_HEADS] = {0};
        vt_eval_counts cnt;
        double tv = vt_now();
        int rc = vt_run_evaluate(ep, &cnt, c->towers, val_ds, heads, val_idx, sub, &eo, err,
                                 sizeof err);
        t_val = (vt_now() - tv) * nval / sub;
        for (int h = 0; h < VT_MAX_HEADS; h++)
            vt_evalproto_free(&ep[h]);
        if (rc != 0) {
            fprintf(stderr, "vidtrain train: validation: %s\n", err);
            return -1;
        }
    }
    vt_run_state back;
    if (vt_run_load(path, c->towers, 1, &back, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --time-budget: %s: %s\n", path, err);
        return -1;
    }
    unlink(path);
    vt_loader_start_epoch(loader, 0, 0);

    /* The largest E whose epochs (steps, a checkpoint each), validations and best
     * checkpoints fit what is left, with the defaults E implies (eval_every...). */
    double left = o->time_budget - (vt_now() - c->t_start);
    double epoch_s = (double)nclips * per_clip + t_save;
    int best = 1;
    vt_train_opts r = c->given;
    for (int e = 1; e <= 100000; e++) {
        r = c->given;
        r.epochs = e;
        vt_train_opts_resolve(&r, ntrain, gpu);
        int nv = nval > 0 ? (e + r.eval_every - 1) / r.eval_every : 0;
        if (e * epoch_s + nv * (t_val + t_save) > left)
            break;
        best = e;
    }
    r = c->given;
    r.epochs = best;
    vt_train_opts_resolve(&r, ntrain, gpu);
    snprintf(r.dump, sizeof r.dump, "%s", o->dump);
    *o = r;
    fprintf(out, "time budget %.0f s: %.0f s used so far; training %.1f clips/s (decode "
                 "included, %lld steps timed): an epoch %.1f s, validation %.1f s, a checkpoint "
                 "%.2f s: %d epochs\n",
            (double)o->time_budget, vt_now() - c->t_start, 1.0 / per_clip,
            (long long)VT_MAX(steps - 1, 1), epoch_s, t_val, t_save, o->epochs);
    if (left < epoch_s)
        fprintf(out, "  (one epoch does not fit the budget: it trains one anyway)\n");
    return 0;
}

/* --dump: DIR/dump.json (what the twin must rebuild: model, optimizer, schedule in
 * steps) and DIR/state_000000.safetensors, the state before the first step. */
static vt_dump *open_dump(train_ctx *c, const vt_towers_cfg *tc, const vt_sched_cfg *sc,
                          char *err, size_t errlen) {
    const vt_train_opts *o = &c->o;
    const vt_optim_cfg *oc = &tc->optim;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", o->model);
    cJSON_AddNumberToObject(j, "classes", tc->net.head[0].classes);
    cJSON_AddNumberToObject(j, "heads", tc->net.nheads);
    cJSON_AddNumberToObject(j, "smoothing", tc->net.head[0].smoothing);
    cJSON_AddNumberToObject(j, "dropout", tc->net.dropout);
    cJSON_AddNumberToObject(j, "clip_t", o->clip_t);
    cJSON_AddNumberToObject(j, "crop", o->crop);
    cJSON_AddNumberToObject(j, "batch", o->batch);
    cJSON_AddNumberToObject(j, "towers", vt_towers_count_all(c->towers));
    cJSON_AddBoolToObject(j, "sync_bn", o->sync_bn);
    cJSON_AddStringToObject(j, "precision", o->precision);
    cJSON_AddStringToObject(j, "optim", vt_optim_kind_name(oc->kind));
    cJSON_AddNumberToObject(j, "momentum", oc->momentum);
    cJSON_AddNumberToObject(j, "dampening", oc->dampening);
    cJSON_AddBoolToObject(j, "nesterov", oc->nesterov);
    cJSON_AddNumberToObject(j, "wd", oc->wd);
    cJSON_AddNumberToObject(j, "alpha", oc->alpha);
    cJSON_AddNumberToObject(j, "beta1", oc->beta1);
    cJSON_AddNumberToObject(j, "beta2", oc->beta2);
    cJSON_AddNumberToObject(j, "eps", oc->eps);
    cJSON_AddNumberToObject(j, "clip_norm", oc->clip_norm);
    cJSON_AddStringToObject(j, "sched", o->sched);
    cJSON_AddNumberToObject(j, "base_lr", sc->base_lr);
    cJSON_AddNumberToObject(j, "warmup_steps", (double)sc->warmup_steps);
    cJSON_AddNumberToObject(j, "total_steps", (double)sc->total_steps);
    cJSON_AddNumberToObject(j, "step_size", (double)sc->step_size);
    cJSON_AddNumberToObject(j, "gamma", sc->gamma);
    cJSON_AddNumberToObject(j, "min_lr", sc->min_lr);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    vt_dump *d = vt_dump_open(o->dump, s, err, errlen);
    cJSON_free(s);
    vt_run_state st0;
    memset(&st0, 0, sizeof st0);
    st0.best = -1;
    if (d && save_ckpt_in(c, o->dump, "state_000000.safetensors", &st0) != 0) {
        vt_set_err(err, errlen, "cannot write state_000000.safetensors");
        vt_dump_close(&d);
    }
    return d;
}

/* --dump after step st->step: the batch it took and the state it left. */
static int dump_step(train_ctx *c, vt_dump *d, const vt_batch *b, const vt_run_state *st,
                     float lr, float momentum, double loss) {
    char err[512], name[64];
    if (vt_dump_train(d, b, (long long)st->step, lr, momentum, loss, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --dump: %s\n", err);
        return -1;
    }
    snprintf(name, sizeof name, "state_%06lld.safetensors", (long long)st->step);
    return save_ckpt_in(c, vt_dump_dir(d), name, st);
}

int vt_cmd_train(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    train_ctx *c = vt_calloc(1, sizeof *c);
    vt_train_opts *o = &c->o;
    vt_train_opts_default(o);
    c->t_start = vt_now();
    int quiet = 0, rc = 1;
    char resume[1024] = "", err[1024] = "";
    vt_dataset *ds = NULL, *vds = NULL;
    vt_loader *loader = NULL;
    vt_dump *dump = NULL;
    vt_evalproto *ep[VT_MAX_HEADS] = {0};
    int32_t *train_idx = NULL, *val_idx = NULL;
    vt_run_heads heads;
    memset(&heads, 0, sizeof heads);
    FILE *out = stdout;

    int prc = parse_args(o, argc, argv, &quiet, resume, sizeof resume);
    if (prc == 0 && o->time_budget > 0 && vt_mpi_size() > 1) {
        fprintf(stderr, "vidtrain train: --time-budget times one process: under mpirun give "
                        "--epochs\n");
        prc = 2;
    }
    if (prc == 0 && vt_dist_check_opts(o, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        prc = 2;
    }
    if (prc) {
        free(c);
        return prc;
    }

    /* ---- dataset ---- */
    vt_dataset_opts dopt = vt_run_dataset_opts(o);
    ds = vt_dataset_open(o->data, &dopt, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        goto end;
    }
    if (o->labels[0]) {
        int nbad = 0;
        if (vt_dataset_load_labels(ds, o->labels, &nbad, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain train: %s: %s\n", o->labels, err);
            goto end;
        }
    }
    vt_dataset_probe(ds, 0, 1, NULL, NULL);
    vt_mpi_dataset_sync(ds, "the training data");
    print_dataset(ds, ds, out);
    if (o->nweights && o->nweights != ds->nheads) {
        fprintf(stderr, "vidtrain train: --loss-weights has %d values for %d heads\n", o->nweights,
                ds->nheads);
        rc = 2;
        goto end;
    }
    int ntrain = vt_dataset_split_indices(ds, VT_SPLIT_TRAIN, &train_idx);
    int nval = 0;
    vt_dataset *val_ds = ds;
    if (o->val_dir[0]) {
        vds = vt_dataset_open(o->val_dir, NULL, err, sizeof err);
        if (!vds) {
            fprintf(stderr, "vidtrain train: --val-dir: %s\n", err);
            goto end;
        }
        if (o->labels[0]) {
            fprintf(stderr, "vidtrain train: --val-dir with --labels is not supported: put the "
                            "validation videos in the labels file and use --val-split\n");
            rc = 2;
            goto end;
        }
        int same = vds->heads[0].nclasses == ds->heads[0].nclasses;
        for (int k = 0; same && k < ds->heads[0].nclasses; k++)
            same = !strcmp(vds->heads[0].classes[k], ds->heads[0].classes[k]);
        if (!same) {
            fprintf(stderr, "vidtrain train: --val-dir %s has other classes than %s\n", o->val_dir,
                    o->data);
            goto end;
        }
        vt_dataset_probe(vds, 0, 1, NULL, NULL);
        /* every labelled video of the other folder, whatever its split */
        int n = 0;
        val_idx = vt_malloc(sizeof(int32_t) * (size_t)(vds->nvideos ? vds->nvideos : 1));
        for (int i = 0; i < vds->nvideos; i++)
            if (vds->videos[i].labeled && !vt_dataset_bad(vds, i))
                val_idx[n++] = i;
        nval = n;
        val_ds = vds;
        fprintf(out, "validation: %s, %d videos\n", o->val_dir, nval);
    } else {
        nval = vt_dataset_split_indices(ds, vt_dataset_eval_split(ds), &val_idx);
        if (nval)
            fprintf(out, "validation: %s split, %d videos\n", vt_split_name(vt_dataset_eval_split(ds)), nval);
        else
            fprintf(out, "validation: none (no val folder and --val-split 0)\n");
    }
    if (ntrain == 0) {
        fprintf(stderr, "vidtrain train: no training video in %s\n", o->data);
        goto end;
    }

    /* the run folder only once there is something to train */
    if (vt_mkdirs(o->out, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        goto end;
    }

    /* ---- heads, devices, towers ---- */
    heads.n = ds->nheads;
    vt_dataset_head_cfgs(ds, heads.cfg);
    for (int h = 0; h < heads.n; h++) {
        heads.cfg[h].weight = o->nweights ? o->loss_weights[h] : 1.0f;
        heads.cfg[h].smoothing = heads.cfg[h].loss == VT_LOSS_SOFTMAX_CE ? o->smoothing : 0;
        heads.classes[h] = vt_calloc((size_t)heads.cfg[h].classes, sizeof(char *));
        for (int k = 0; k < heads.cfg[h].classes; k++)
            heads.classes[h][k] = vt_strdup(ds->heads[h].classes[k]);
    }
    vt_towers_cfg tc;
    vt_towers_cfg_default(&tc);
    vt_device_args da;
    vt_train_opts_device_args(o, &da);
    if (vt_devices_from_args(&tc.devices, &da, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        rc = 2;
        goto end;
    }
    if (vt_slice_policy_parse(&tc.policy, o->tower_split, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        rc = 2;
        goto end;
    }
    /* Defaults that depend on the machine: a GPU tower on any rank means GPU clips. */
    double gpus = 0;
    for (int i = 0; i < tc.devices.n; i++)
        gpus += !strcmp(tc.devices.dev[i].backend, "cuda");
    if (vt_mpi_size() > 1)
        vt_mpi_sum_f64(&gpus, 1, "the default clip (does any rank have a GPU)");
    c->given = *o;
    vt_train_opts_resolve(o, ntrain, gpus > 0);
    tc.batch = o->batch;
    vt_net_cfg_default(&tc.net, o->model, heads.cfg[0].classes, o->clip_t, o->crop, o->crop);
    tc.net.nheads = heads.n;
    memcpy(tc.net.head, heads.cfg, sizeof heads.cfg);
    tc.net.dropout = o->dropout;
    if (vt_precision_parse(o->precision) < 0) { /* a hand-edited config.json */
        fprintf(stderr, "vidtrain train: precision '%s': fp32, tf32 or bf16\n", o->precision);
        rc = 2;
        goto end;
    }
    tc.net.precision = (vt_precision)vt_precision_parse(o->precision);
    vt_optim_cfg_default(&tc.optim, (vt_opt_kind)vt_optim_kind_parse(o->optim));
    if (tc.optim.kind != VT_OPT_ADAMW)
        tc.optim.momentum = o->momentum;
    /* Nesterov is SGD's (torch refuses it without momentum): other optimizers ignore it. */
    tc.optim.nesterov = o->nesterov && tc.optim.kind == VT_OPT_SGD && o->momentum > 0;
    tc.optim.wd = o->wd;
    tc.optim.clip_norm = o->clip_norm;
    tc.seed = o->seed;
    tc.sync_bn = o->sync_bn;
    tc.verbose = 1;
    c->towers = vt_towers_init(&tc, err, sizeof err);
    if (!c->towers) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        goto end;
    }

    write_config(c, &heads);
    /* plan.txt: devices, slice plan, memory plan — printed and kept for the report */
    {
        char *buf = NULL;
        size_t blen = 0;
        FILE *m = open_memstream(&buf, &blen);
        vt_towers_print_plan(c->towers, m);
        vt_memplan_print(vt_towers_memplan(c->towers), &tc.net, m);
        fclose(m);
        fputs(buf, out);
        char path[2100];
        snprintf(path, sizeof path, "%s/plan.txt", o->out);
        if (vt_write_file_atomic(path, buf, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: %s\n", err);
        free(buf);
    }

    /* ---- state: fresh or resumed ---- */
    vt_run_state st;
    memset(&st, 0, sizeof st);
    st.best = -1;
    if (resume[0]) {
        char path[2100];
        snprintf(path, sizeof path, "%s/last.safetensors", resume);
        if (vt_run_load(path, c->towers, 1, &st, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain train: --resume: %s: %s\n", path, err);
            goto end;
        }
        if (vt_metrics_truncate(o->out, st.step, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: %s\n", err);
        fprintf(out, "resumed from %s: epoch %lld, batch %lld, step %lld\n", path,
                (long long)st.epoch + 1, (long long)st.cursor, (long long)st.step);
    } else if (vt_dist_lead()) {
        char path[2100];
        snprintf(path, sizeof path, "%s/metrics.jsonl", o->out);
        unlink(path);
        snprintf(path, sizeof path, "%s/metrics.csv", o->out);
        unlink(path);
        snprintf(path, sizeof path, "%s/eval.json", o->out);
        unlink(path);
    }
    fflush(out);

    /* ---- loader ---- */
    vt_loader_cfg lc;
    vt_loader_cfg_default(&lc);
    lc.mode = VT_LOADER_TRAIN;
    lc.batch = o->batch;
    lc.workers = o->workers;
    lc.queue = o->queue;
    lc.seed = o->seed;
    lc.epoch = st.epoch;
    lc.start_batch = st.cursor;
    lc.clips_per_video = o->clips_per_video;
    clip_cfg_from_opts(&lc.clip, o);
    lc.indices = train_idx;
    lc.nindices = ntrain;
    vt_towers_host_hook(c->towers, &lc.host_alloc, &lc.host_free, &lc.host_ctx); /* pinned */
    if (vt_mpi_size() > 1) { /* each rank decodes only its towers' part of every batch */
        lc.part = vt_towers_part_train;
        lc.part_ctx = c->towers;
    }
    loader = vt_loader_init(ds, &lc, err, sizeof err);
    if (!loader) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        goto end;
    }
    if (o->time_budget > 0 && !resume[0]) {
        if (fit_budget(c, loader, ntrain, gpus > 0, &heads, val_ds, val_idx, nval, out) != 0)
            goto end;
        write_config(c, &heads);
    }
    int64_t spe = vt_loader_num_batches(loader);
    vt_sched_cfg sc;
    memset(&sc, 0, sizeof sc);
    sc.kind = (vt_sched_kind)vt_sched_kind_parse(o->sched);
    sc.base_lr = o->lr;
    sc.warmup_steps = (int64_t)llround(o->warmup_epochs * (double)spe);
    sc.total_steps = spe * o->epochs;
    sc.step_size = spe * o->step_epochs;
    sc.gamma = o->gamma;
    fprintf(out, "training: %d videos, %lld batches of %d per epoch, %d epochs, %s lr %g (%s)\n",
            ntrain, (long long)spe, o->batch, o->epochs, o->optim, o->lr, o->sched);
    fflush(out);

    if (o->dump[0] && vt_dist_lead()) {
        dump = open_dump(c, &tc, &sc, err, sizeof err);
        if (!dump) {
            fprintf(stderr, "vidtrain train: --dump %s: %s\n", o->dump, err);
            goto end;
        }
    }

    vt_signals_install();
    int stopped = 0;
    int nh = heads.n;
    const int64_t first_epoch = st.epoch;
    for (int64_t epoch = first_epoch; epoch < o->epochs && !stopped; epoch++) {
        /* The loader starts on (st.epoch, st.cursor); later epochs from batch 0. st holds
         * (epoch, 0, zero sums) there already: the previous epoch's end set it. */
        if (epoch != first_epoch) {
            vt_mpi_dataset_sync(ds, "the next epoch's order");
            vt_loader_start_epoch(loader, epoch, 0);
        }
        char title[64];
        snprintf(title, sizeof title, "epoch %lld/%d", (long long)epoch + 1, o->epochs);
        vt_progress *pg = vt_progress_init(stderr, title, spe, st.cursor, quiet ? 0 : -1,
                                           quiet ? 0 : o->log_every);
        double t0 = vt_now(), compute = 0, waited = 0;
        int64_t clips_now = 0;
        vt_loader_stats ls;
        vt_loader_get_stats(loader, &ls);
        double wait0 = ls.wait_s;
        const vt_batch *b;
        while ((b = vt_loader_next(loader)) != NULL) {
            vt_loader_get_stats(loader, &ls);
            double w = ls.wait_s - wait0;
            wait0 = ls.wait_s;
            float lr = vt_sched_lr(&sc, st.step);
            if (sc.kind == VT_SCHED_ONECYCLE)
                vt_towers_set_momentum(c->towers, vt_sched_momentum(&sc, st.step, 0));
            vt_step_stats ss;
            vt_towers_train_step(c->towers, b, lr, &ss);
            st.step++;
            if (dump && dump_step(c, dump, b, &st, lr,
                                  vt_sched_momentum(&sc, st.step - 1, step_momentum(&tc.optim)),
                                  ss.n ? ss.loss / ss.n : 0) != 0)
                goto end_epoch_fail;
            st.cursor = b->index + 1;
            st.sums.loss += ss.loss;
            st.sums.clips += ss.n;
            for (int h = 0; h < nh; h++) {
                st.sums.head_loss[h] += ss.head_loss[h];
                st.sums.correct[h] += ss.head_correct[h];
            }
            clips_now += ss.n;
            compute += ss.step_s;
            waited += w;
            st.sums.seconds += ss.step_s + w;
            st.sums.wait_s += w;
            double share = compute + waited > 0 ? waited / (compute + waited) : 0;
            double mloss = st.sums.clips ? st.sums.loss / (double)st.sums.clips : 0;
            double macc = st.sums.clips ? (double)st.sums.correct[0] / (double)st.sums.clips : 0;
            vt_progress_update(pg, st.cursor, clips_now, mloss, macc, share);
            if (o->log_every && st.step % o->log_every == 0) {
                cJSON *j = cJSON_CreateObject();
                cJSON_AddStringToObject(j, "kind", "step");
                cJSON_AddNumberToObject(j, "step", (double)st.step);
                cJSON_AddNumberToObject(j, "epoch", (double)epoch + 1);
                cJSON_AddNumberToObject(j, "batch", (double)st.cursor);
                cJSON_AddNumberToObject(j, "lr", lr);
                cJSON_AddNumberToObject(j, "loss", ss.n ? ss.loss / ss.n : 0);
                cJSON_AddNumberToObject(j, "acc", ss.n ? (double)ss.head_correct[0] / ss.n : 0);
                cJSON_AddNumberToObject(j, "grad_norm", ss.grad_norm);
                cJSON_AddNumberToObject(j, "clips_per_s", ss.step_s + w > 0 ? ss.n / (ss.step_s + w) : 0);
                cJSON_AddNumberToObject(j, "data_wait", ss.step_s + w > 0 ? w / (ss.step_s + w) : 0);
                if (vt_metrics_append(o->out, j, err, sizeof err) != 0)
                    fprintf(stderr, "vidtrain train: %s\n", err);
                cJSON_Delete(j);
            }
            /* Under mpirun every rank stops after the same step: the towers agreed on it. */
            int sig = vt_mpi_size() > 1 ? ss.signal : vt_signal_pending();
            int at_max = o->max_steps && st.step >= o->max_steps;
            if (sig || at_max || (o->checkpoint_every && st.step % o->checkpoint_every == 0)) {
                if (save_ckpt(c, "last.safetensors", &st) != 0)
                    goto end_epoch_fail;
            }
            if (sig || at_max) {
                vt_progress_finish(pg, sig ? "interrupted" : "max steps reached");
                vt_progress_free(&pg);
                fprintf(out, "%s at step %lld: checkpoint %s/last.safetensors (resume with "
                             "vidtrain train --resume %s)\n", sig ? "interrupted" : "stopped",
                        (long long)st.step, o->out, o->out);
                stopped = sig ? 128 + sig : -1;
                break;
            }
        }
        if (stopped)
            break;

        /* ---- epoch end: validation, metrics, checkpoints, report ---- */
        double tr_loss = st.sums.clips ? st.sums.loss / (double)st.sums.clips : NAN;
        double tr_acc = st.sums.clips ? (double)st.sums.correct[0] / (double)st.sums.clips : NAN;
        cJSON *line = cJSON_CreateObject();
        cJSON_AddStringToObject(line, "kind", "epoch");
        cJSON_AddNumberToObject(line, "epoch", (double)epoch + 1);
        cJSON_AddNumberToObject(line, "step", (double)st.step);
        cJSON_AddNumberToObject(line, "lr", vt_sched_lr(&sc, st.step > 0 ? st.step - 1 : 0));
        cJSON_AddNumberToObject(line, "train_loss", tr_loss);
        cJSON_AddNumberToObject(line, "train_acc", tr_acc);
        char extra[1024] = "";
        int do_val = nval > 0 && ((epoch + 1) % o->eval_every == 0 || epoch + 1 == o->epochs);
        double vacc = NAN, vloss = NAN;
        if (do_val) {
            vt_progress_finish(pg, NULL);
            vt_progress_free(&pg);
            vt_eval_opts eo;
            val_opts(&eo, o);
            eo.dump = epoch + 1 == o->epochs ? dump : NULL; /* the twin checks the last */
            vt_eval_counts cnt;
            if (vt_run_evaluate(ep, &cnt, c->towers, val_ds, &heads, val_idx, nval, &eo, err,
                                sizeof err) != 0) {
                fprintf(stderr, "vidtrain train: validation: %s\n", err);
                cJSON_Delete(line);
                goto end;
            }
            vt_eval_result r[VT_MAX_HEADS];
            for (int h = 0; h < nh; h++)
                vt_evalproto_result(ep[h], &r[h]);
            vacc = r[0].video_top1;
            vloss = r[0].clips ? r[0].loss_sum / (double)r[0].clips : INFINITY;
            cJSON_AddNumberToObject(line, "val_loss", r[0].clips ? r[0].loss_sum / (double)r[0].clips : NAN);
            cJSON_AddNumberToObject(line, "val_acc", r[0].video_top1);
            cJSON_AddNumberToObject(line, "val_top5", r[0].video_top5);
            cJSON_AddNumberToObject(line, "val_clip_acc", r[0].clip_top1);
            cJSON_AddNumberToObject(line, "val_mean_class_acc", r[0].mean_class_acc);
            for (int h = 1; h < nh; h++) {
                char k[96];
                snprintf(k, sizeof k, "%s_val_acc", heads.cfg[h].name);
                cJSON_AddNumberToObject(line, k, r[h].video_top1);
                snprintf(k, sizeof k, "%s_train_acc", heads.cfg[h].name);
                cJSON_AddNumberToObject(line, k, st.sums.clips ? (double)st.sums.correct[h] / (double)st.sums.clips : 0);
            }
            cJSON *vj = vt_eval_json(r, &heads, &cnt, vt_split_name(vds ? VT_SPLIT_VAL : vt_dataset_eval_split(ds)), &eo);
            char path[2100];
            snprintf(path, sizeof path, "%s/val.json", o->out);
            if (vt_write_json(path, vj, err, sizeof err) != 0)
                fprintf(stderr, "vidtrain train: %s\n", err);
            cJSON_Delete(vj);
            snprintf(extra, sizeof extra, "val: video top-1 %.1f%%, clip top-1 %.1f%%, loss %.4f (%lld videos)",
                     100 * r[0].video_top1, 100 * r[0].clip_top1,
                     r[0].clips ? r[0].loss_sum / (double)r[0].clips : 0, (long long)r[0].videos);
            for (int h = 1; h < nh; h++) {
                size_t el = strlen(extra);
                snprintf(extra + el, sizeof extra - el, "; head %s: video %s %.1f%%",
                         heads.cfg[h].name, r[h].loss == VT_LOSS_BCE ? "label-wise acc" : "top-1",
                         100 * r[h].video_top1);
            }
            for (int h = 0; h < nh; h++) {
                vt_eval_result_free(&r[h]);
                vt_evalproto_free(&ep[h]);
            }
            fprintf(out, "epoch %lld/%d: train loss %.4f acc %.1f%%; %s\n", (long long)epoch + 1,
                    o->epochs, tr_loss, 100 * tr_acc, extra);
        } else {
            vt_progress_finish(pg, NULL);
            vt_progress_free(&pg);
            fprintf(out, "epoch %lld/%d: train loss %.4f acc %.1f%%\n", (long long)epoch + 1,
                    o->epochs, tr_loss, 100 * tr_acc);
        }
        double el = vt_now() - t0;
        cJSON_AddNumberToObject(line, "clips_per_s", compute + waited > 0 ? (double)clips_now / (compute + waited) : 0);
        cJSON_AddNumberToObject(line, "data_wait", compute + waited > 0 ? waited / (compute + waited) : 0);
        cJSON_AddNumberToObject(line, "seconds", el);
        char plan[512];
        vt_towers_plan_line(c->towers, plan, sizeof plan);
        cJSON_AddStringToObject(line, "plan", plan);
        if (vt_metrics_append(o->out, line, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: %s\n", err);
        cJSON_Delete(line);
        fflush(out);

        /* The next epoch starts at batch 0 with fresh sums: that is what last holds. */
        vt_run_state next = st;
        next.epoch = epoch + 1;
        next.cursor = 0;
        memset(&next.sums, 0, sizeof next.sums);
        /* best.safetensors: chosen once the warm-up is over (a model still on its way up
         * the learning rate is no candidate, and a small validation set can rank one
         * first by luck); a small validation set ties often (every video right, or the
         * same count): the later epoch with the lower loss is the better model then, not
         * the first one to get there. */
        int candidate = epoch + 1 >= o->warmup_epochs || epoch + 1 == o->epochs;
        int better = do_val && candidate &&
                     (vacc > st.best || (vacc == st.best && vloss < st.best_loss));
        if (better) {
            next.best = vacc;
            next.best_loss = vloss;
            next.best_epoch = (int)epoch + 1;
        }
        if (save_ckpt(c, "last.safetensors", &next) != 0)
            goto end;
        if (better && save_ckpt(c, "best.safetensors", &next) != 0)
            goto end;
        st = next;
        if (vt_report_write(o->out, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: report: %s\n", err);
        continue;
    end_epoch_fail:
        vt_progress_free(&pg);
        goto end;
    }
    vt_signals_reset();
    /* Under mpirun a stop by signal exits non-zero, which ends every rank (MPI_Abort):
     * not before rank 0 has written its checkpoint. */
    vt_mpi_barrier("the end of training");
    if (stopped > 0) {
        rc = stopped;
    } else {
        if (!stopped) {
            if (st.best >= 0)
                fprintf(out, "done: best validation video top-1 %.1f%% (epoch %d); %s/best.safetensors\n",
                        100 * st.best, st.best_epoch, o->out);
            else
                fprintf(out, "done: %s/last.safetensors\n", o->out);
        }
        if (vt_report_write(o->out, err, sizeof err) != 0)
            fprintf(stderr, "vidtrain train: report: %s\n", err);
        rc = 0;
    }
end:
    vt_dump_close(&dump);
    for (int h = 0; h < VT_MAX_HEADS; h++)
        vt_evalproto_free(&ep[h]);
    vt_loader_free(&loader);
    vt_towers_free(&c->towers);
    vt_run_heads_free(&heads);
    free(train_idx);
    free(val_idx);
    vt_dataset_free(&vds);
    vt_dataset_free(&ds);
    free(c);
    return rc;
}
