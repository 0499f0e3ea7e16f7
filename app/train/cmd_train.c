/*
 * cmd_train.c: `vidtrain train DIR --out RUN` — the command: its help, its options (with
 * --resume, the saved configuration that the options given then override), and the run
 * in its steps (app/train/train.h): set up, then per epoch the steps and the epoch's end, then
 * the finish. Ctrl-C finishes the step, checkpoints and exits 130; the handlers are
 * installed for the epochs only and restored before the run finishes, however it ends.
 * This file must never decode, split batches or touch a backend directly: the loader
 * and the towers do.
 */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/device_opts.h"
#include "app/dist.h"
#include "app/opts.h"
#include "app/run/pretrained.h"
#include "app/run/run_ckpt.h"
#include "app/signals.h"
#include "app/train/train.h"
#include "app/train/train_opts.h"
#include "app/train/train_ranges.h"
#include "models/backend.h"
#include "base/common.h"
#include "models/finetune.h"
#include "models/optim.h"
#include "pipeline/data/balance.h"
#include "pipeline/parallel/mpi.h"
#include "pipeline/parallel/slices.h"

/* What --balance auto picks on an imbalanced set (VT_BALANCE_DEFAULT), for the help. */
static const char *auto_help(void) {
    switch (VT_BALANCE_DEFAULT) {
    case VT_BALANCE_SAMPLER: return "sampler (it beat none and loss in docs/balance.md)";
    case VT_BALANCE_LOSS: return "loss (it beat none and sampler in docs/balance.md)";
    case VT_BALANCE_LOGIT: return "logit (it beat none, sampler and loss in docs/balance.md)";
    default: return "also none for now (no mode has yet beaten it in a measurement)";
    }
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain train DIR --out RUN [options]\n"
        "       vidtrain train --resume RUN [options to override]\n\n"
        "Trains a 3D-CNN on the videos in DIR (DIR/<class>/<video>, or DIR/train[, DIR/val]\n"
        "[, DIR/test] laid out that way; symbolic links are followed), validating about ten\n"
        "times a run, checkpointing to RUN/last.safetensors and RUN/best.safetensors, and\n"
        "writing RUN/metrics.csv, RUN/metrics.jsonl, RUN/config.json and RUN/report.html.\n"
        "The defaults are a recipe that learns without tuning: SGD with Nesterov momentum,\n"
        "a learning rate scaled with the batch, a linear warm-up, the rate held while\n"
        "validation improves and a cosine decay once it stalls (--patience; --epochs and\n"
        "--time-budget fix the length instead: warm-up, then cosine), a clip sized for the\n"
        "device. config.json records every value resolved.\n\n"
        "model and clips:\n"
        "  --model NAME          tiny (default), c3d, r3d18, mc3_18, r2plus1d18, s3d (its\n"
        "                        clip: 16x224 by default, at least 13x209), x3d_xs, x3d_s,\n"
        "                        x3d_m, x3d_l (pytorchvideo's X3D; default clips 4x160,\n"
        "                        13x160, 16x224, 16x312, strides 12, 6, 5, 5), pytorchvideo's\n"
        "                        slow_r50, i3d_r50, slowfast_r50 (one clip of the fast\n"
        "                        pathway's frames, a multiple of 4: docs/models.md),\n"
        "                        r2plus1d_r50, csn_r101,\n"
        "                        mvit_v2_s, mvit_v1_b (torchvision's MViTs: 16x224 stride 4;\n"
        "                        CPU only)\n"
        "  --clip TxS            frames x crop size, e.g. 16x112 or 8x64x64 (default: 16x112\n"
        "                        when a GPU trains, 8x64 on the CPU)\n"
        "  --stride N            temporal stride between frames (default 1; 3 for the CPU's\n"
        "                        8-frame default clip: a 22-frame span)\n"
        "  --stride-jitter J     per training clip, the stride drawn from [stride-J, stride+J]\n"
        "                        (at least 1): the motion's speed jittered, as the scale is;\n"
        "                        evaluation keeps --stride (default 0 = off: on the hard\n"
        "                        motion set J = 1 scored the same as 0, docs/training-defaults.md)\n"
        "  --short-side N        short side before cropping (default crop*8/7); training\n"
        "                        jitters it in [short, crop*10/7]\n"
        "  --no-flip             no random horizontal flip. Flip is ON by default, which suits\n"
        "                        most datasets; turn it off when left/right matters (the demo's\n"
        "                        classes are motion directions, so the demo passes --no-flip)\n"
        "  --contrast LO         per training clip, each colour channel's contrast about the\n"
        "                        clip's mean scaled by a factor log-uniform in [LO, 1]\n"
        "                        (default 0.4; 1 = off): faint, low-contrast footage\n"
        "  --brightness B        per training clip, brightness shifted by up to +-B of the\n"
        "                        pixel range (default 0.1; 0 = off). The same for every frame\n"
        "                        of a clip, so motion is untouched; evaluation never jitters\n"
        "  --dropout P           dropout before the classifier (default 0)\n"
        "  --precise-bn K        before each validation and after the last epoch, batch-norm\n"
        "                        statistics recomputed from K clean clips (centre crop, no\n"
        "                        jitter) per training video, at most 2048 clips (default 4\n"
        "                        with the colour jitter on, else 0 = off): the jittered\n"
        "                        training clips' statistics misjudge clean ones\n"
        "fine-tuning (start from trained weights instead of random ones):\n"
        "  --pretrained NAME     Kinetics-400 weights: torchvision's r3d18, mc3_18, r2plus1d18,\n"
        "                        s3d, pytorchvideo's slow_r50, slowfast_r50, i3d_r50,\n"
        "                        x3d_xs, x3d_s, x3d_m, x3d_l, r2plus1d_r50, csn_r101;\n"
        "                        torchvision's mvit_v2_s, mvit_v1_b;\n"
        "                        downloaded once into $XDG_CACHE_HOME/vidtrain (or\n"
        "                        $VIDTRAIN_CACHE; $VIDTRAIN_WEIGHTS_URL names a mirror or a\n"
        "                        file:// folder), SHA-256 checked. Sets --model and the clip\n"
        "                        to the weights' own (16x112; s3d 16x224; slow_r50 8x224\n"
        "                        stride 8; slowfast_r50 32x224 stride 2) unless given.\n"
        "                        Licences: torchvision's weights as torchvision's;\n"
        "                        pytorchvideo's (its repository's) Apache-2.0; VideoMAE\n"
        "                        (videomae_vit_s/b, not in this registry: --init FILE)\n"
        "                        CC-BY-NC 4.0, non-commercial\n"
        "  --input-norm N        the mean and std clips are normalised with: kinetics\n"
        "                        (torchvision's models), pytorchvideo (0.45/0.225: X3D, the\n"
        "                        R50 family), imagenet (VideoMAE); default auto: the model\n"
        "                        family's, what its published weights were trained with\n"
        "  --init FILE           start from FILE: a vidtrain checkpoint, a safetensors file\n"
        "                        with torchvision's names, or a PyTorch .pth state_dict\n"
        "                        (also PySlowFast/pytorchvideo .pyth: model_state)\n"
        "                        (torch.save; read without running any of its pickle code;\n"
        "                        nested under 'state_dict'/'model' and 'module.' prefixes\n"
        "                        are fine). Tensors match by name; a classifier of another\n"
        "                        class count is re-initialised; the rest is listed\n"
        "  --init-strict         any missing, unexpected or mismatched tensor is an error\n"
        "  --freeze N            the stem and stages 1..N learn nothing (0: the stem only;\n"
        "                        resnets have 4 stages, x3d 5: its stages and, 5, the\n"
        "                        head's 2048-wide projection; default: none)\n"
        "  --freeze-bn, --no-freeze-bn   batch norm in eval mode while training: the\n"
        "                        pretrained statistics, whatever the per-tower batch\n"
        "                        (default: on when fine-tuning)\n"
        "  --head-lr-mult M      the classifier's lr is M x --lr (default 10 when\n"
        "                        fine-tuning, else 1)\n"
        "  --drop-path R         transformers: stochastic depth, block b of D drops its\n"
        "                        residual branches per clip with p = R b/(D-1) (default 0.1\n"
        "                        for a transformer, else 0)\n"
        "  --layer-decay F       transformers: block i of D learns at F^(D+1-i) x the lr,\n"
        "                        the patch embedding at F^(D+1) (default 0.75 when a\n"
        "                        transformer fine-tunes, else 1: off)\n"
        "  Fine-tuning's defaults: lr a tenth of the rule below, epochs enough to see 2000\n"
        "  clips (at least 10), no precise BN (the statistics are frozen). A transformer\n"
        "  trains with VideoMAE's fine-tuning recipe (docs/finetune.md): AdamW, wd 0.05\n"
        "  (not on norms, biases, position embeddings), warm-up then cosine, drop path 0.1,\n"
        "  label smoothing 0.1, layer decay 0.75 when fine-tuning; mixup, CutMix and\n"
        "  --repeat-aug stay off (not measured here yet). Each part has its own option\n"
        "optimisation:\n"
        "  (no length given: warm-up, then a constant lr while validation improves, then a\n"
        "  cosine decay over a quarter as many epochs; at most 4 x the fixed rule below;\n"
        "  docs/training-defaults.md)\n"
        "  --patience N          validations without improvement before that decay (default\n"
        "                        3; 0: the fixed rule: enough to see 8000 clips, at least 30)\n"
        "  --min-clips N         no decay before N training clips (default: the fixed rule's\n"
        "                        length; a validation split under 50 videos also doubles\n"
        "                        --patience: its top-1 moves in steps of 2+ points)\n"
        "  --epochs N            exactly N epochs, cosine over them\n"
        "  --time-budget T       instead of --epochs: the epochs that fit T (300, 300s, 5m,\n"
        "                        1h) for the whole job, from a timing of the first steps\n"
        "                        (decode included), planned again at every epoch's end from\n"
        "                        the speed measured so far (a machine that slows down or\n"
        "                        speeds up still ends on time; the cosine bends to fit)\n"
        "  --budget-once         plan --time-budget's epochs once, from the first steps: the\n"
        "                        run is then the one --epochs E gives, bit for bit, and may\n"
        "                        miss the budget if the machine's speed changes\n"
        "  --batch B             global batch (default 32 when a GPU trains, 8 on the CPU)\n"
        "  --optim NAME          sgd (momentum 0.9, default), rmsprop, adamw (the default\n"
        "                        for a transformer)\n"
        "  --lr X                base learning rate (default scaled with the batch: SGD\n"
        "                        0.1*B/32, tiny 0.2*B/32; RMSprop 0.001*B/32, AdamW\n"
        "                        0.001*sqrt(B/32))\n"
        "  --momentum X          (default 0.9)     --wd X     weight decay (default 1e-4;\n"
        "                        0.05 for a transformer)\n"
        "  --wd-exempt on|off|auto  on: no weight decay for norm weights, biases, position\n"
        "                        embeddings, class tokens (timm/VideoMAE); off: all decay\n"
        "                        (torchvision's video recipe); auto (default): on for a ViT\n"
        "  --no-nesterov         plain SGD momentum (Nesterov is the default)\n"
        "  --sched NAME          cosine (default), step, const, onecycle (torch's OneCycleLR:\n"
        "                        30%% rise from lr/25 to lr, then down to lr/25e4; momentum\n"
        "                        (AdamW: beta1) cycled 0.95-0.85-0.95; --warmup unused)\n"
        "  --warmup E            linear warm-up over E epochs (may be fractional; default a\n"
        "                        fifth of the epochs)\n"
        "  --step-epochs N --gamma G   step schedule: x G every N epochs (10, 0.1)\n"
        "  --label-smoothing X   softmax heads (default 0; 0.1 for a transformer)\n"
        "  --mixup A             mixup: each batch's clips and targets blended with the batch\n"
        "                        reversed, weight ~ Beta(A, A) (timm/VideoMAE: 0.8; default 0\n"
        "                        = off). Regularises fine-tuning of large models on few videos\n"
        "  --cutmix A            CutMix: a box (the same in every frame) pasted from the\n"
        "                        partner clip, targets by its area (VideoMAE: 1.0; default off)\n"
        "  --mixup-switch-prob P both on: CutMix for a batch with probability P (default 0.5)\n"
        "  --repeat-aug K        repeated augmentation: each training clip decoded once gives\n"
        "                        K clips (own crop, flip, colour; same frames and scale), every\n"
        "                        video K times an epoch (VideoMAE fine-tunes with 2; default 1)\n"
        "  --random-erase P      random erasing: with probability P a box (2%%-33%% of the crop,\n"
        "                        the same in every frame) is filled with noise (VideoMAE: 0.25;\n"
        "                        default 0 = off)\n"
        "  --balance MODE        class imbalance (docs/balance.md; the log warns above x2\n"
        "                        between the largest and smallest training class): none,\n"
        "                        sampler (every class drawn about equally often each epoch),\n"
        "                        loss (cross-entropy weighted by inverse class frequency),\n"
        "                        logit (the loss on logits + log class shares, so the model\n"
        "                        predicts as if the classes were balanced), or\n"
        "                        auto (default): none on a balanced set; on an imbalanced one\n"
        "                        %s\n"
        "  --class-weights W,... head 0's loss weights by hand, one per class in class\n"
        "                        order (implies --balance loss)\n"
        "  --clip-norm X         clip gradients to this global L2 norm (default off)\n"
        "  --skip-nonfinite      a step whose loss or gradient norm is NaN or inf is skipped\n"
        "                        (no update) and counted, as AMP does; without it training\n"
        "                        stops there with an error, keeping the last checkpoint\n"
        "  --seed N              (default 0): same seed, same data, same devices -> same run\n"
        "data:\n"
        "  --workers N           decode threads (default 2)\n"
        VT_DECODE_OPT_HELP
        "  --frame-cache SIZE    keep decoded frames in RAM across epochs (\"2G\", \"512M\"; 0 =\n"
        "                        off; default auto: a quarter of the free RAM, at most 4G).\n"
        "                        The training videos are decoded once, front to back, before\n"
        "                        the first batch; clips whose frames are kept skip decoding\n"
        "                        (same pixels). Pays off when the set fits: a small set's\n"
        "                        later epochs then cost only the network\n"
        "  --clips-per-video N|auto  training clips drawn per video per epoch (default 1);\n"
        "                        auto: one per --seconds-per-clip of the video (or segment),\n"
        "                        at least 1, each from its own stretch (docs/timeline.md)\n"
        "  --seconds-per-clip S  auto's spacing in seconds (default 10; implies auto)\n"
        "  --val-split F         fraction of train videos used for validation when DIR has\n"
        "                        no val folder (default 0.1). 0: none drawn; validation then\n"
        "                        reads DIR's test split if it has one (UCF101 lists do), and\n"
        "                        best.safetensors is chosen on those test videos; else none\n"
        "  --group REGEX|auto|none  --val-split keeps each recording's videos on one side:\n"
        "                        the first ( ) of REGEX (POSIX ERE, on the path in DIR)\n"
        "                        names the recording; auto (default): UCF101 v_X_g08_c01\n"
        "                        and HMDB51 names; none: path by path (docs/splits.md)\n"
        "  --tb-clips N          also the first N clips of each epoch's first batch as\n"
        "                        images in RUN/tb/ (TensorBoard: scalars and confusion\n"
        "                        matrices are always there; docs/tensorboard.md)\n"
        "  --strict-splits       a val or test video (or --val-dir's) that is a near-copy\n"
        "                        of a training video (re-encoded, rescaled, cropped,\n"
        "                        trimmed, a clip of it) is an error; by default a warning\n"
        "                        before training, RUN/leaks.json, and a count in the\n"
        "                        report and eval.json\n"
        "  --no-leak-check       skip that check (it decodes keyframes once per video;\n"
        "                        signatures are cached: docs/splits.md)\n"
        "  --val-dir DIR2        validate on another dataset folder (same classes)\n"
        "  --lists PATH          list files, format detected (docs/segments.md): UCF101\n"
        "                        (classInd.txt, trainlist0F.txt, testlist0F.txt: testlist\n"
        "                        videos become the test split), HMDB51 (a folder of\n"
        "                        <class>_test_splitF.txt), Kinetics (a CSV label,youtube_id,\n"
        "                        time_start,time_end,split, or a folder of them; untrimmed\n"
        "                        videos are cut to the row's segment)\n"
        "  --list-format F       ucf101, hmdb51 or kinetics instead of detecting it\n"
        "  --fold F              which trainlist/testlist pair, or HMDB51 split (default 1)\n"
        "  --eval-every N        validate every N epochs and after the last (default\n"
        "                        epochs/10, at least 1)\n"
        "  --val-clips K         clips per video in validation, averaged (default 3)\n"
        "  --val-crops 1|3       spatial crops per clip in validation (default 1)\n"
        "  --labels FILE.csv     several outputs: a path column, then one column per head;\n"
        "                        cells with ';'-separated tags make a multi-label (BCE) head;\n"
        "                        columns start,end (seconds) make each row a segment sample\n"
        "  --loss-weights W,...  one weight per head (default 1 each)\n"
        "devices:\n"
        "  --tower-split POLICY  how each batch splits over the towers: equal, memory\n"
        "                        (default), speed, auto, manual:W,W,...\n"
        "  --no-sync-bn          batch-norm statistics per tower (Keras, DDP) instead of\n"
        "                        over all towers (the default: several towers then train\n"
        "                        exactly as one device, at a small collective per BN layer)\n"
        "  --precision P         fp32 (default); tf32: CUDA TF32 tensor cores; bf16: mixed\n"
        "                        precision, bf16 activations (about half the memory per clip)\n"
        "                        with float32 weights, BN, losses, optimizer (CUDA; cpu-ref)\n"
        "  --checkpoint-act auto|on|off  activation checkpointing: a transformer block keeps\n"
        "                        its input and output, recomputed in backward (the same\n"
        "                        bits; a third more compute, most of its memory a clip\n"
        "                        saved); auto (default): on for a tower only where not one\n"
        "                        clip fits a pass without it (docs/distributed.md)\n"
        "%s"
        "run:\n"
        "  --out RUN             run folder (required unless --resume): one run's alone;\n"
        "                        a folder that holds a run is refused (--resume continues\n"
        "                        it), and so is one inside the dataset or in use by another\n"
        "                        train\n"
        "  --force               replace the run in --out: its files are removed first\n"
        "  --resume RUN          continue RUN exactly where it stopped (options given with it\n"
        "                        override the saved ones; change data, model, batch or seed\n"
        "                        and the continuation is no longer exact); config.json's\n"
        "                        values pass the command line's checks, or it is refused\n"
        "  --log-every N         steps between log lines / metrics.jsonl step lines (50)\n"
        "  --checkpoint-every N  also checkpoint RUN/last.safetensors every N steps\n"
        "  --max-steps N         stop (with a checkpoint) after global step N (this run only)\n"
        "  --dump DIR            write what a PyTorch twin needs to replay the run step by\n"
        "                        step: initial and final state, every batch with its LR,\n"
        "                        the last validation's inputs and outputs (small runs only;\n"
        "                        tests/oracle/torch_twin.py parity DIR checks them). Precise BN\n"
        "                        is not part of the replay: --dump turns it off\n"
        "  -q, --quiet           no progress display\n\n"
        "Ctrl-C (SIGINT) or SIGTERM: the current step finishes, RUN/last.safetensors is\n"
        "written (resumable with --resume) and vidtrain exits with 130 (SIGINT) or 143\n"
        "(SIGTERM). A second Ctrl-C exits at once; the last checkpoint on disk stays whole.\n"
        "Exit codes: 0 done (or --max-steps reached), 1 error, 2 usage, 130/143 interrupted.\n"
        "%s",
        auto_help(), vt_device_args_help, vt_mpi_help);
}

/* ---- option parsing ---- */

static int parse_args(vt_train_opts *o, int argc, char **argv, int *quiet, char *resume,
                      size_t resume_n) {
    const char *pos = NULL;
    char err[256];
    int epochs_given = 0, model_given = 0, patience_given = 0, min_clips_given = 0;
    char cfg_src[2200] = ""; /* where the resumed configuration came from, for messages */
    /* Pass 1: --resume loads the saved configuration, which the rest then overrides. */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        if (vt_opt_value(argc, argv, &i, "--resume", &v) == 1) {
            snprintf(resume, resume_n, "%s", v);
            char path[2048];
            snprintf(path, sizeof path, "%s/config.json", v);
            cJSON *j = vt_dist_read_json(path); /* rank 0's copy under mpirun */
            snprintf(cfg_src, sizeof cfg_src, "%s", path);
            if (!j) { /* every checkpoint holds the configuration too */
                char ck[2100], cerr[1024];
                snprintf(ck, sizeof ck, "%s/last.safetensors", v);
                j = vt_run_ckpt_config(ck, cerr, sizeof cerr);
                if (!j) {
                    fprintf(stderr, "vidtrain train: --resume %s: %s is missing or not JSON, and "
                                    "%s: nothing to resume\n", v, path, cerr);
                    return 1;
                }
                fprintf(stderr, "vidtrain train: --resume: %s is missing or not JSON: the "
                                "configuration comes from %s (its own copy)\n", path, ck);
                snprintf(cfg_src, sizeof cfg_src, "%s's configuration", ck);
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
            vt_train_opts_take_device_args(o, &da);
            i = di;
            continue;
        }
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
#define BAD() do { fprintf(stderr, "vidtrain train: bad value for %s: '%s'\n", a, v ? v : ""); return 2; } while (0)
        if (!strcmp(a, "--no-flip")) {
            o->flip = 0;
            continue;
        }
        if (!strcmp(a, "--strict-splits")) {
            o->strict_splits = 1;
            continue;
        }
        if (OPT("--tb-clips")) { if (r < 0 || vt_parse_int(v, 0, 64, &o->tb_clips) != 0) BAD(); continue; }
        if (!strcmp(a, "--no-leak-check")) {
            o->no_leak_check = 1;
            continue;
        }
        if (!strcmp(a, "--force")) {
            o->force = 1;
            continue;
        }
        if (!strcmp(a, "--budget-once")) {
            o->budget_once = 1;
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
        if (!strcmp(a, "--skip-nonfinite")) {
            o->skip_nonfinite = 1;
            continue;
        }
        if (!strcmp(a, "--init-strict")) {
            o->init_strict = 1;
            continue;
        }
        if (!strcmp(a, "--freeze-bn") || !strcmp(a, "--no-freeze-bn")) {
            o->freeze_bn = a[2] == 'f';
            continue;
        }
        if (!strcmp(a, "--sync-bn") || !strcmp(a, "--no-sync-bn")) {
            o->sync_bn = a[2] == 's';
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
        if (OPT("--model")) { if (r < 0) BAD(); snprintf(o->model, sizeof o->model, "%s", v); model_given = 1; continue; }
        if (OPT("--clip")) {
            vt_clip_shape cs; /* training crops are square: TxS, or TxHxW with H = W */
            if (r < 0 || vt_parse_clip(v, &cs) || cs.h != cs.w) BAD();
            o->clip_t = cs.t;
            o->crop = cs.h;
            continue;
        }
        if (OPT("--stride")) { if (r < 0 || vt_train_range_parse(o, "--stride", v)) BAD(); continue; }
        if (OPT("--stride-jitter")) { if (r < 0 || vt_train_range_parse(o, "--stride-jitter", v)) BAD(); continue; }
        if (OPT("--short-side")) { if (r < 0 || vt_train_range_parse(o, "--short-side", v)) BAD(); o->jitter_min = o->jitter_max = 0; continue; }
        if (OPT("--input-norm")) { if (r < 0) BAD(); snprintf(o->input_norm, sizeof o->input_norm, "%s", v); continue; }
        if (OPT("--checkpoint-act")) { if (r < 0 || vt_ckpt_mode_parse(v) < 0) BAD(); snprintf(o->checkpoint_act, sizeof o->checkpoint_act, "%s", v); continue; }
        if (OPT("--precision")) { if (r < 0 || vt_precision_parse(v) < 0) BAD(); snprintf(o->precision, sizeof o->precision, "%s", v); continue; }
        if (OPT("--contrast")) { if (r < 0 || vt_train_range_parse(o, "--contrast", v)) BAD(); continue; }
        if (OPT("--brightness")) { if (r < 0 || vt_train_range_parse(o, "--brightness", v)) BAD(); continue; }
        if (OPT("--precise-bn")) { if (r < 0 || vt_train_range_parse(o, "--precise-bn", v)) BAD(); continue; }
        if (OPT("--init")) { if (r < 0 || !v[0]) BAD(); snprintf(o->init, sizeof o->init, "%s", v); continue; }
        if (OPT("--pretrained")) {
            if (r < 0 || !vt_pretrained_find(v)) {
                fprintf(stderr, "vidtrain train: --pretrained '%s': one of %s\n", v ? v : "",
                        vt_pretrained_names());
                if (v && !strncmp(v, "videomae", 8))
                    fprintf(stderr, "  VideoMAE weights are not in the registry (no URL and "
                            "SHA-256 checkable offline): download them yourself (licence "
                            "CC-BY-NC 4.0: non-commercial) and pass --init FILE "
                            "(docs/models.md)\n");
                return 2;
            }
            snprintf(o->pretrained, sizeof o->pretrained, "%s", vt_pretrained_find(v)->name);
            continue;
        }
        if (OPT("--freeze")) {
            if (r > 0 && !strcmp(v, "none")) { o->freeze = -1; continue; }
            if (r < 0 || vt_parse_int(v, 0, 16, &o->freeze)) BAD();
            continue;
        }
        if (OPT("--head-lr-mult")) { if (r < 0 || vt_train_range_parse(o, "--head-lr-mult", v)) BAD(); continue; }
        if (OPT("--mixup")) { if (r < 0 || vt_train_range_parse(o, "--mixup", v)) BAD(); continue; }
        if (OPT("--cutmix")) { if (r < 0 || vt_train_range_parse(o, "--cutmix", v)) BAD(); continue; }
        if (OPT("--wd-exempt")) { if (r < 0 || (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto"))) BAD(); snprintf(o->wd_exempt, sizeof o->wd_exempt, "%s", v); continue; }
        if (OPT("--random-erase")) { if (r < 0 || vt_train_range_parse(o, "--random-erase", v)) BAD(); continue; }
        if (OPT("--repeat-aug")) { if (r < 0 || vt_train_range_parse(o, "--repeat-aug", v)) BAD(); continue; }
        if (OPT("--mixup-switch-prob")) { if (r < 0 || vt_train_range_parse(o, "--mixup-switch-prob", v)) BAD(); continue; }
        if (OPT("--drop-path")) { if (r < 0 || vt_train_range_parse(o, "--drop-path", v)) BAD(); continue; }
        if (OPT("--layer-decay")) { if (r < 0 || vt_train_range_parse(o, "--layer-decay", v)) BAD(); continue; }
        if (OPT("--dropout")) { if (r < 0 || vt_train_range_parse(o, "--dropout", v)) BAD(); continue; }
        if (OPT("--patience")) { if (r < 0 || vt_train_range_parse(o, "--patience", v)) BAD(); patience_given = 1; continue; }
        if (OPT("--min-clips")) { if (r < 0 || vt_train_range_parse(o, "--min-clips", v)) BAD(); min_clips_given = 1; continue; }
        if (OPT("--epochs")) { if (r < 0 || vt_train_range_parse(o, "--epochs", v)) BAD(); epochs_given = 1; continue; }
        if (OPT("--time-budget")) { if (r < 0 || (o->time_budget = (float)vt_parse_duration(v)) <= 0) BAD(); continue; }
        if (OPT("--batch")) { if (r < 0 || vt_train_range_parse(o, "--batch", v)) BAD(); continue; }
        if (OPT("--optim")) { if (r < 0 || vt_optim_kind_parse(v) < 0) BAD(); snprintf(o->optim, sizeof o->optim, "%s", v); continue; }
        if (OPT("--lr")) { if (r < 0 || vt_train_range_parse(o, "--lr", v)) BAD(); continue; }
        if (OPT("--momentum")) { if (r < 0 || vt_train_range_parse(o, "--momentum", v)) BAD(); continue; }
        if (OPT("--wd")) { if (r < 0 || vt_train_range_parse(o, "--wd", v)) BAD(); continue; }
        if (OPT("--sched")) { if (r < 0 || vt_sched_kind_parse(v) < 0) BAD(); snprintf(o->sched, sizeof o->sched, "%s", v); continue; }
        if (OPT("--warmup")) { if (r < 0 || vt_train_range_parse(o, "--warmup", v)) BAD(); continue; }
        if (OPT("--step-epochs")) { if (r < 0 || vt_train_range_parse(o, "--step-epochs", v)) BAD(); continue; }
        if (OPT("--gamma")) { if (r < 0 || vt_train_range_parse(o, "--gamma", v)) BAD(); continue; }
        if (OPT("--balance")) { if (r < 0 || vt_balance_parse(v) < 0) BAD(); snprintf(o->balance, sizeof o->balance, "%s", v); continue; }
        if (OPT("--class-weights")) { if (r < 0 || strlen(v) >= sizeof o->class_weights) BAD(); snprintf(o->class_weights, sizeof o->class_weights, "%s", v); continue; }
        if (OPT("--label-smoothing")) { if (r < 0 || vt_train_range_parse(o, "--label-smoothing", v)) BAD(); continue; }
        if (OPT("--clip-norm")) { if (r < 0 || vt_train_range_parse(o, "--clip-norm", v)) BAD(); continue; }
        if (OPT("--seed")) { if (r < 0 || vt_parse_u64(v, &o->seed)) BAD(); continue; }
        if (OPT("--workers")) { if (r < 0 || vt_train_range_parse(o, "--workers", v)) BAD(); continue; }
        if ((r = vt_decode_opt_take("train", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if (OPT("--frame-cache")) { if (r < 0 || (strcmp(v, "auto") && vt_parse_bytes(v) < 0)) BAD(); snprintf(o->frame_cache, sizeof o->frame_cache, "%s", v); continue; }
        if (OPT("--queue")) { if (r < 0 || vt_train_range_parse(o, "--queue", v)) BAD(); continue; }
        if (OPT("--clips-per-video")) {
            if (r > 0 && !strcmp(v, "auto")) { /* one per N seconds (train_opts.h) */
                o->seconds_per_clip = o->seconds_per_clip > 0 ? o->seconds_per_clip : VT_AUTO_CLIP_SECONDS;
                continue;
            }
            if (r < 0 || vt_parse_int(v, 1, 1000, &o->clips_per_video)) BAD();
            o->seconds_per_clip = 0;
            continue;
        }
        if (OPT("--seconds-per-clip")) { if (r < 0 || vt_train_range_parse(o, "--seconds-per-clip", v)) BAD(); continue; }
        if (OPT("--val-split")) { if (r < 0 || vt_train_range_parse(o, "--val-split", v)) BAD(); continue; }
        if (OPT("--group")) {
            char gerr[512];
            if (r < 0 || strlen(v) >= sizeof o->group) BAD();
            if (vt_dataset_group_check(v, gerr, sizeof gerr) < 0) {
                fprintf(stderr, "vidtrain train: %s\n", gerr);
                return 2;
            }
            snprintf(o->group, sizeof o->group, "%s", v);
            continue;
        }
        if (OPT("--val-dir")) { if (r < 0) BAD(); snprintf(o->val_dir, sizeof o->val_dir, "%s", v); continue; }
        if (OPT("--lists")) { if (r < 0) BAD(); snprintf(o->lists, sizeof o->lists, "%s", v); continue; }
        if (OPT("--list-format")) { if (r < 0 || vt_lists_format_parse(v) < 0) BAD(); snprintf(o->list_format, sizeof o->list_format, "%s", v); continue; }
        if (OPT("--fold")) { if (r < 0 || vt_train_range_parse(o, "--fold", v)) BAD(); continue; }
        if (OPT("--eval-every")) { if (r < 0 || vt_train_range_parse(o, "--eval-every", v)) BAD(); continue; }
        if (OPT("--val-clips")) { if (r < 0 || vt_train_range_parse(o, "--val-clips", v)) BAD(); continue; }
        if (OPT("--val-crops")) { if (r < 0 || vt_train_range_parse(o, "--val-crops", v) || o->val_crops == 2) BAD(); continue; }
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
        if (OPT("--log-every")) { if (r < 0 || vt_train_range_parse(o, "--log-every", v)) BAD(); continue; }
        if (OPT("--checkpoint-every")) { if (r < 0 || vt_train_range_parse(o, "--checkpoint-every", v)) BAD(); continue; }
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
    if (resume[0]) { /* config.json passes the command line's checks too (train_ranges.h) */
        char cerr[1024];
        if (vt_train_opts_check(o, cfg_src, cerr, sizeof cerr) != 0) {
            fprintf(stderr, "vidtrain train: --resume %s: %s\n", resume, cerr);
            return 1;
        }
    }
    if (resume[0] && o->dump[0]) {
        fprintf(stderr, "vidtrain train: --dump replays a run from its first step: not with "
                        "--resume\n");
        return 2;
    }
    /* The twin replays training steps; a precise-BN pass between them would change the
     * running statistics it checks step by step. */
    if (o->dump[0] && o->precise_bn > 0) {
        fprintf(stderr, "vidtrain train: --dump replays training steps, which precise BN is "
                        "not part of: not with --precise-bn %d (0, or leave it out)\n",
                o->precise_bn);
        return 2;
    }
    if (o->dump[0] && o->random_erase > 0) { /* the twin draws no boxes */
        fprintf(stderr, "vidtrain train: --dump replays training steps without random "
                        "erasing: not with --random-erase\n");
        return 2;
    }
    if (o->dump[0])
        o->precise_bn = 0;
    if (o->pretrained[0] && !resume[0]) {
        const vt_pretrained *p = vt_pretrained_find(o->pretrained);
        if (model_given && strcmp(o->model, p->model)) {
            fprintf(stderr, "vidtrain train: --pretrained %s is a %s: not with --model %s\n",
                    p->name, p->model, o->model);
            return 2;
        }
        if (o->init[0]) {
            fprintf(stderr, "vidtrain train: --pretrained and --init both name the starting "
                            "weights: give one\n");
            return 2;
        }
        snprintf(o->model, sizeof o->model, "%s", p->model);
        if (!o->clip_t) { /* the input the weights were trained on */
            o->clip_t = p->clip_t;
            if (!o->crop)
                o->crop = p->crop;
        }
        if (!o->stride && p->stride) /* pytorchvideo's 8x8: every 8th frame */
            o->stride = p->stride;
    }
    if (o->freeze >= 0 && o->freeze > vt_finetune_nstages(o->model)) {
        fprintf(stderr, "vidtrain train: --freeze %d: %s has the stem and %d stages (0..%d)\n",
                o->freeze, o->model, vt_finetune_nstages(o->model), vt_finetune_nstages(o->model));
        return 2;
    }
    if (pos)
        snprintf(o->data, sizeof o->data, "%s", pos);
    if (!o->data[0] || !o->out[0]) {
        fprintf(stderr, "vidtrain train: need DIR and --out RUN (or --resume RUN)\n");
        return 2;
    }
    if (o->budget_once && !(o->time_budget > 0) && !resume[0]) {
        fprintf(stderr, "vidtrain train: --budget-once plans --time-budget's epochs once: give "
                        "--time-budget T too\n");
        return 2;
    }
    if (o->time_budget > 0 && epochs_given && !resume[0]) {
        fprintf(stderr, "vidtrain train: --time-budget picks the number of epochs: not with "
                        "--epochs\n");
        return 2;
    }
    /* --patience sets when the default length decays (app/train/train_length.c): a length
     * given, or a schedule other than its own, leaves it nothing to decide. */
    if (patience_given && o->patience > 0 &&
        (epochs_given || o->time_budget > 0 || strcmp(o->sched, "cosine") || o->dump[0])) {
        fprintf(stderr, "vidtrain train: --patience decides the default length: not with %s\n",
                epochs_given ? "--epochs" : o->time_budget > 0 ? "--time-budget"
                : o->dump[0] ? "--dump (the twin replays a schedule fixed in advance)"
                             : "--sched other than cosine");
        return 2;
    }
    if (!patience_given && (epochs_given || o->dump[0]))
        o->patience = 0; /* --epochs means exactly that many; the twin replays a fixed one */
    if (min_clips_given && (o->patience == 0 || epochs_given || o->time_budget > 0 || o->dump[0] ||
                            strcmp(o->sched, "cosine"))) {
        fprintf(stderr, "vidtrain train: --min-clips belongs to the default length (it holds "
                        "off its decay): not with a length given (--epochs, --time-budget, "
                        "--patience 0, --dump or another --sched)\n");
        return 2;
    }
    /* frame folders' rate: given now, or the resumed run's (config.json), or 30 */
    if (vt_frame_rate_given())
        o->frame_rate = (float)vt_video_get_frame_rate();
    else if (o->frame_rate > 0)
        vt_video_set_frame_rate(o->frame_rate);
    return 0;
}

/* The epochs from where the state stands to the last, or to a stop (t->stopped). 0, or
 * 1 when an epoch failed (printed). */
static int run_epochs(vt_train *t) {
    for (int64_t epoch = t->first_epoch; epoch < t->o.epochs; epoch++) {
        vt_progress *pg = NULL;
        vt_train_epoch_stats es;
        if (vt_train_epoch(t, epoch, &pg, &es) != 0)
            return 1;
        if (t->stopped)
            return 0;
        if (vt_train_epoch_end(t, epoch, &pg, &es) != 0)
            return 1;
    }
    return 0;
}

int vt_cmd_train(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_train *t = vt_calloc(1, sizeof *t);
    vt_train_opts_default(&t->o);
    t->t_start = vt_now();
    t->out = stdout;
    char err[1024] = "";
    int rc = parse_args(&t->o, argc, argv, &t->quiet, t->resume, sizeof t->resume);
    if (rc == 0 && t->o.time_budget > 0 && vt_mpi_size() > 1) {
        fprintf(stderr, "vidtrain train: --time-budget times one process: under mpirun give "
                        "--epochs\n");
        rc = 2;
    }
    if (rc == 0 && vt_dist_check_opts(&t->o, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        rc = 2;
    }
    t->claim.fd = -1;
    if (rc == 0 && !t->resume[0]) { /* what the start reads: the output rule keeps it */
        vt_inputs_add(t->o.init);
        vt_inputs_add(t->o.labels);
        vt_inputs_add(t->o.lists);
    }
    if (rc == 0)
        rc = vt_run_claim_take(&t->claim, t->o.out, t->o.data, t->o.val_dir, t->resume[0] != 0,
                               t->o.force);
    if (rc == 0 && (rc = vt_train_setup(t)) != 0)
        vt_run_claim_release(&t->claim, 1); /* a failed start gives back what it made */
    if (rc == 0) {
        vt_signals_install();
        rc = run_epochs(t);
        vt_signals_reset();
        if (rc == 0)
            rc = vt_train_finish(t);
    }
    vt_run_claim_release(&t->claim, 0);
    vt_train_free(&t);
    return rc;
}
