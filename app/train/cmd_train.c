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
#include "app/train/train_args.h"
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
        "Trains a video classifier on the videos in DIR (DIR/<class>/<video>, or DIR/train\n"
        "[, DIR/val][, DIR/test] laid out that way; symbolic links are followed), validating\n"
        "about ten times a run, checkpointing to RUN/last.safetensors and\n"
        "RUN/best.safetensors, and writing RUN/metrics.csv, RUN/metrics.jsonl,\n"
        "RUN/config.json and RUN/report.html.\n"
        "The defaults are a recipe that learns without tuning: SGD with Nesterov momentum,\n"
        "a learning rate scaled with the batch, a linear warm-up, the rate held while\n"
        "validation improves and a cosine decay once it stalls (--patience; --epochs and\n"
        "--time-budget fix the length instead: warm-up, then cosine), a clip sized for the\n"
        "device. config.json records every value resolved.\n\n"
        "model and clips:\n"
        "  --model NAME          tiny (default), c3d (16 frames by default: its least),\n"
        "                        r3d18, mc3_18, r2plus1d18, s3d (its clip: 16x224 by\n"
        "                        default, at least 13x209), x3d_xs, x3d_s,\n"
        "                        x3d_m, x3d_l (pytorchvideo's X3D; default clips 4x160,\n"
        "                        13x160, 16x224, 16x312, strides 12, 6, 5, 5), pytorchvideo's\n"
        "                        slow_r50, i3d_r50, slowfast_r50 (one clip of the fast\n"
        "                        pathway's frames, a multiple of 4: docs/models.md),\n"
        "                        r2plus1d_r50, csn_r101,\n"
        "                        mvit_v2_s, mvit_v1_b (torchvision's MViTs: 16x224 stride 4,\n"
        "                        other clips interpolate their position tables; bf16 on CUDA),\n"
        "                        videomae_vit_s, videomae_vit_b (VideoMAE's ViT-S/B: 16x224\n"
        "                        stride 4, VideoMAE's Kinetics fine-tuning clip; other clips\n"
        "                        take the sin-cos table at their size; weights by --init\n"
        "                        FILE: docs/models.md), tiny_nobn (tiny without batch norm)\n"
        "  --clip TxS            frames x crop size, e.g. 16x112 or 8x64x64 (default: 16x112\n"
        "                        when a GPU trains, 8x64 on the CPU; the models above\n"
        "                        their own; a clip too small is refused with the least)\n"
        "  --stride N            temporal stride between frames (default 1; 3 for the CPU's\n"
        "                        default clip: 8 frames span 22)\n"
        "  --stride-jitter J     per training clip, the stride drawn from [stride-J, stride+J]\n"
        "                        (at least 1): the motion's speed jittered, as the scale is;\n"
        "                        evaluation keeps --stride (default 0 = off: on the hard\n"
        "                        motion set J = 1 scored the same as 0, docs/training-defaults.md)\n"
        "  --clip-fps F          --stride (and --stride-jitter) count frames at F a second:\n"
        "                        a video at another rate takes the stride scaled to its own,\n"
        "                        rounded (at least 1), so every clip spans about one time\n"
        "                        (a 60 fps video stride 2 where a 30 fps one takes 1, with F\n"
        "                        30); eval, predict, embed and --timeline follow the run's.\n"
        "                        Default 0: each video's own frames (a clip of a 60 fps\n"
        "                        video spans half the time; they are warned about)\n"
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
        "                        training clips' statistics misjudge clean ones; off for a\n"
        "                        model without batch norm (transformers, tiny_nobn)\n"
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
        "                        (torchvision's CNNs), pytorchvideo (0.45/0.225: X3D, the\n"
        "                        R50 family, MViT), imagenet (VideoMAE); default auto: the\n"
        "                        model family's, what its published weights were trained\n"
        "                        with (--init from a vidtrain checkpoint: what it was)\n"
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
        "                        for a transformer; a CNN refuses it)\n"
        "  --layer-decay F       transformers: block i of D learns at F^(D+1-i) x the lr,\n"
        "                        the patch embedding at F^(D+1) (default 0.75 when a\n"
        "                        transformer fine-tunes, else 1: off; a CNN refuses it)\n"
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
        "                        speeds up still ends on time; the cosine bends to fit).\n"
        "                        Not on --resume, which keeps the budget's last plan\n"
        "                        (--epochs N given then replaces the budget)\n"
        "  --budget-once         plan --time-budget's epochs once, from the first steps: the\n"
        "                        run is then the one --epochs E gives, bit for bit, and may\n"
        "                        miss the budget if the machine's speed changes\n"
        "  --batch B             global batch (default 32 when a GPU trains, 8 on the CPU)\n"
        "  --optim NAME          sgd (momentum 0.9, default), rmsprop, adamw (the default\n"
        "                        for a transformer)\n"
        "  --lr X                base learning rate (default scaled with the batch: SGD\n"
        "                        0.1*B/32, tiny 0.2*B/32; RMSprop 0.001*B/32, AdamW\n"
        "                        0.001*sqrt(B/32))\n"
        "  --momentum X          (default 0.9; SGD, RMSprop: AdamW refuses it)\n"
        "  --wd X                weight decay (default 1e-4; 0.05 for a transformer)\n"
        "  --wd-exempt on|off|auto  on: no weight decay for norm weights, biases, position\n"
        "                        embeddings, class tokens (timm/VideoMAE); off: all decay\n"
        "                        (torchvision's video recipe); auto (default): on for a ViT\n"
        "  --no-nesterov         plain SGD momentum (Nesterov is the default)\n"
        "  --sched NAME          cosine (default), step, const, onecycle (torch's OneCycleLR:\n"
        "                        30%% rise from lr/25 to lr, then down to lr/25e4; momentum\n"
        "                        (AdamW: beta1) cycled 0.95-0.85-0.95: not with --warmup\n"
        "                        or --momentum)\n"
        "  --warmup E            linear warm-up over E epochs (may be fractional; default a\n"
        "                        fifth of the epochs)\n"
        "  --step-epochs N --gamma G   --sched step's: x G every N epochs (10, 0.1)\n"
        "  --label-smoothing X   softmax heads (default 0; 0.1 for a transformer); a set of\n"
        "                        multi-label heads only: off, with a warning when given\n"
        "  --mixup A             mixup: each batch's clips and targets blended with the batch\n"
        "                        reversed, weight ~ Beta(A, A) (timm/VideoMAE: 0.8; default 0\n"
        "                        = off). Regularises fine-tuning of large models on few videos\n"
        "  --cutmix A            CutMix: a box (the same in every frame) pasted from the\n"
        "                        partner clip, targets by its area (VideoMAE: 1.0; default off)\n"
        "  --mixup-switch-prob P both on: CutMix for a batch with probability P (default 0.5;\n"
        "                        needs both --mixup and --cutmix)\n"
        "  --repeat-aug K        repeated augmentation: each training clip decoded once gives\n"
        "                        K clips (own crop, flip, colour; same frames and scale), every\n"
        "                        video K times an epoch (VideoMAE fine-tunes with 2; default 1)\n"
        "  --random-erase P      random erasing: with probability P a box (2%%-33%% of the crop,\n"
        "                        the same in every frame) is filled with noise (VideoMAE: 0.25;\n"
        "                        default 0 = off)\n"
        "  --randaug SPEC        RandAugment (timm's spec): N ops of 15 (colour, contrast,\n"
        "                        equalize, solarize, rotate, shear, translate...) drawn per\n"
        "                        clip at magnitude M, the same on every frame; VideoMAE's is\n"
        "                        rand-m7-n4-mstd0.5-inc1 (docs/finetune.md; default off)\n"
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
        "                        off; default auto: a quarter of the memory free once the\n"
        "                        towers hold theirs, at most 4G; a SIZE given is kept out of\n"
        "                        the CPU towers' budgets).\n"
        "                        The training videos are decoded once, front to back, before\n"
        "                        the first batch; clips whose frames are kept skip decoding\n"
        "                        (same pixels). Pays off when the set fits: a small set's\n"
        "                        later epochs then cost only the network\n"
        "  --clips-per-video N|auto  training clips drawn per video per epoch (default 1);\n"
        "                        auto: one per --seconds-per-clip of the video (or segment),\n"
        "                        at least 1, each from its own stretch (docs/timeline.md)\n"
        "  --seconds-per-clip S  auto's spacing in seconds (default 10; implies auto, so not\n"
        "                        with --clips-per-video N)\n"
        "  --val-split F         fraction of train videos used for validation when DIR has\n"
        "                        no val folder (default 0.1). 0: none drawn; validation then\n"
        "                        reads DIR's test split if it has one (UCF101 lists do), and\n"
        "                        best.safetensors is chosen on those test videos; else none\n"
        "  --group REGEX|auto|none  --val-split keeps each recording's videos on one side:\n"
        "                        the first ( ) of REGEX (POSIX ERE, on the path in DIR)\n"
        "                        names the recording; auto (default): UCF101 v_X_g08_c01\n"
        "                        and HMDB51 names; none: path by path (docs/splits.md);\n"
        "                        refused where nothing is drawn (--val-split 0, a val/\n"
        "                        folder of DIR's, --val-dir)\n"
        "  --tb-clips N          also the first N clips of each epoch's first batch as\n"
        "                        images in RUN/tb/ (TensorBoard: scalars and confusion\n"
        "                        matrices are always there; docs/tensorboard.md)\n"
        "  --strict-splits       a val or test video (or --val-dir's) that is a near-copy\n"
        "                        of a training video (re-encoded, rescaled, cropped,\n"
        "                        trimmed, a clip of it) is an error; by default a warning\n"
        "                        before training, RUN/leaks.json, and a count in the\n"
        "                        report and eval.json\n"
        "  --no-leak-check       skip that check (it decodes keyframes once per video;\n"
        "                        signatures are cached: docs/splits.md); not with\n"
        "                        --strict-splits, and neither where DIR has no val or test\n"
        "                        video\n"
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
        "                        (these three, --patience and --min-clips: refused where\n"
        "                        there is no validation set)\n"
        "  --labels FILE.csv     several outputs: a path column, then one column per head;\n"
        "                        cells with ';'-separated tags make a multi-label (BCE) head;\n"
        "                        columns start,end (seconds) make each row a segment sample\n"
        "  --loss-weights W,...  one weight per head (default 1 each)\n"
        "devices:\n"
        "  --tower-split POLICY  how each batch splits over the towers: equal, memory\n"
        "                        (default), speed, auto, manual:W,W,... (several towers)\n"
        "  --no-sync-bn          batch-norm statistics per tower (Keras, DDP) instead of\n"
        "                        over all towers (the default: several towers then train\n"
        "                        exactly as one device, at a small collective per BN layer;\n"
        "                        the BN options are refused for a model without batch norm)\n"
        "  --precision P         fp32 (default); tf32: CUDA TF32 tensor cores; bf16: mixed\n"
        "                        precision, bf16 activations (about half the memory per clip)\n"
        "                        with float32 weights, BN, losses, optimizer (CUDA; cpu-ref)\n"
        "  --checkpoint-act auto|on|off  activation checkpointing: a transformer block (ViT,\n"
        "                        MViT) keeps its input and output, recomputed in backward\n"
        "                        (the same bits; a third more compute, most of its memory a\n"
        "                        clip saved); auto (default): on for a tower only where not\n"
        "                        one clip fits a pass without it (docs/distributed.md);\n"
        "                        refused for a model without transformer blocks\n"
        "%s"
        "run:\n"
        "  --out RUN             run folder (required unless --resume, which continues in\n"
        "                        its own: another --out is refused): one run's alone;\n"
        "                        a folder that holds a run is refused (--resume continues\n"
        "                        it), and so is one inside the dataset or in use by another\n"
        "                        train\n"
        "  --force               replace the run in --out: its files are removed first\n"
        "  --resume RUN          continue RUN exactly where it stopped (options given with it\n"
        "                        override the saved ones, each change named in a warning,\n"
        "                        as is a training or validation set whose videos, segments\n"
        "                        or labels changed since; the continuation is then no\n"
        "                        longer exact; the classes, --model,\n"
        "                        --input-norm, --init and --pretrained cannot change);\n"
        "                        config.json's values pass the command line's checks, or\n"
        "                        it is refused\n"
        "  --log-every N         steps between log lines / metrics.jsonl step lines (50)\n"
        "  --checkpoint-every N  also checkpoint RUN/last.safetensors every N steps\n"
        "  --max-steps N         stop (with a checkpoint) after global step N (this run only)\n"
        "  --dump DIR            write what a PyTorch twin needs to replay the run step by\n"
        "                        step: initial and final state, every batch with its LR,\n"
        "                        the last validation's inputs and outputs (small runs only;\n"
        "                        tests/oracle/torch_twin.py parity DIR checks them). Precise BN\n"
        "                        is not part of the replay: --dump turns it off\n"
        "  -q, --quiet           no progress display\n\n"
        "Ctrl-C (SIGINT), SIGTERM or a closed terminal (SIGHUP, unless nohup ignores it):\n"
        "the current step finishes, RUN/last.safetensors is written (resumable with\n"
        "--resume) and vidtrain exits with 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP). A\n"
        "second Ctrl-C exits at once; the last checkpoint on disk stays whole.\n"
        "Exit codes: 0 done (or --max-steps reached), 1 error, 2 usage, 129/130/143\n"
        "interrupted.\n"
        "%s",
        auto_help(), vt_device_args_help, vt_mpi_help);
}

/* ---- option parsing ---- */

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
    int rc = vt_train_parse_args(&t->o, &t->cli, argc, argv, &t->quiet, t->resume,
                                 sizeof t->resume);
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
