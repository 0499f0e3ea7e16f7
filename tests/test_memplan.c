/*
 * test_memplan.c: the memory plan is what gets allocated. For tiny and r3d18 (small clip),
 * with a budget of exactly fixed_bytes + mb * bytes_per_clip, a tower's worth of
 * allocations — vt_net_init(mb), vt_optim_init, the input clips and targets — and a full
 * training step (forward, loss, backward, optimizer step) fit; the allocator's high-water
 * mark (measured by vt_backend_alloc, backend.c) is at most the plan; one clip more does
 * not fit the budget and is refused cleanly; vt_memplan_max_clips agrees.
 * On cpu-ref (no op scratch) the high-water mark is within 1% of the plan less its
 * scratch_bytes and forward/backward allocate nothing. On cpu the ops' conv scratch goes
 * through the allocator too (the high-water mark rises during the first step, by at most
 * scratch_bytes, and every op frees it before returning), including a clip large enough
 * that the scratch cap cuts convs into bands of rows.
 * BF16 (activations stored as 2-byte bf16, models/net_graph.h): the same exactness on
 * cpu-ref, which stores them as the cuda backend does; and the 12 GB + 6 GB plan of the
 * README (r3d18, 16x112x112) holds about twice the clips per pass. s3d (concat nodes) at
 * 13x209x209 and its small test model s3d_block hold the same contract.
 * videomae_vit_s (attention, its blocked scratch) on both CPU backends, and with
 * activation checkpointing on cpu (test_ckpt.c checks its numbers).
 * CUDA towers (vt_slice_fits): the backend's reserve comes off the budget, and no pass
 * passes cuDNN's 2^31-element tensor limit (C3D BF16 on 80 GB: 167 clips, not ~800).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"
#include "pipeline/parallel/slices.h"
#include "tests/testutil.h"

static int ckpt_on; /* check(): with activation checkpointing (cfg.ckpt) */

static void check(const char *bename, const char *model, int t, int h, int w, int mb,
                  vt_opt_kind ok, int run_n, vt_precision prec) {
    const int ref = !strcmp(bename, "cpu-ref");
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, 5, t, h, w);
    cfg.precision = prec;
    cfg.ckpt = ckpt_on;
    cfg.nheads = 2;
    cfg.head[1] = (vt_head_cfg){"tags", 3, VT_LOSS_BCE, 1.0f, 0.0f};
    cfg.dropout = 0.2f;
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, ok);
    char err[512];
    vt_memplan mp;
    TCHECK(vt_memplan_build(&mp, &cfg, vt_optim_state_per_param(&oc), err, sizeof err) == 0,
           "%s: %s", model, err);
    if (!strcmp(model, "tiny") && ref && prec == VT_PREC_FP32)
        vt_memplan_print(&mp, &cfg, stdout);
    const int64_t plan = mp.fixed_bytes + (int64_t)mb * mp.bytes_per_clip;
    TCHECK(mp.fixed_bytes == mp.param_bytes + mp.grad_bytes + mp.buffer_bytes + mp.optim_bytes +
                                 mp.workspace_bytes, "fixed bytes are not the sum of their parts");
    int64_t rows = 0;
    for (int i = 0; i < mp.nrows; i++)
        rows += mp.rows[i].act_bytes;
    TCHECK(rows == mp.bytes_per_clip, "%s: rows sum to %lld bytes/clip, plan says %lld", model,
           (long long)rows, (long long)mp.bytes_per_clip);

    TCHECK(mp.scratch_bytes > 0 && mp.scratch_bytes <= mp.workspace_bytes,
           "%s: scratch %lld bytes outside the workspace %lld", model,
           (long long)mp.scratch_bytes, (long long)mp.workspace_bytes);
    vt_backend *be = vt_backend_init(bename, 0, 2, plan);
    vt_net *net = vt_net_init(&cfg, be, mb, err, sizeof err);
    TCHECK(net != NULL, "%s: %s", model, err);
    if (!net) {
        vt_backend_free(&be);
        vt_memplan_free(&mp);
        return;
    }
    TCHECK(vt_net_num_params(net) == mp.params, "params %lld vs plan %lld",
           (long long)vt_net_num_params(net), (long long)mp.params);
    if (strcmp(model, "r3d18")) /* r3d18's 33M draws cost seconds and change no byte count */
        vt_net_init_weights(net, 1);
    vt_optim *opt = vt_optim_init(&oc, be, vt_net_num_params(net));
    /* What the tower holds beside the net: the input clips and each head's targets. */
    const int64_t clip = (int64_t)3 * t * h * w;
    float *x = vt_backend_alloc(be, (size_t)(mb * clip) * sizeof(float));
    int32_t *lab = vt_backend_alloc(be, (size_t)mb * sizeof(int32_t));
    float *tg = vt_backend_alloc(be, (size_t)mb * 3 * sizeof(float));
    TCHECK(x && lab && tg, "%s: the tower's inputs do not fit the planned budget", model);
    if (x && lab && tg) {
        VT_OP(be, fill, x, 0.5f, mb * clip);
        VT_OP(be, fill, tg, 1.0f, mb * 3);
        int32_t hl[64] = {0};
        be->i->to_device(be, lab, hl, (size_t)mb * sizeof(int32_t));
        const int64_t before = be->high_water, held = be->in_use;
        vt_targets tt = {.label = {lab}, .target = {NULL, tg}};
        int64_t first = 0;
        for (int step = 0; step < (ref ? 1 : 2); step++) {
            vt_net_zero_grad(net);
            vt_net_forward(net, x, run_n, 1);
            vt_net_loss(net, NULL, NULL, &tt, 1.0f / (float)run_n);
            vt_net_backward(net);
            vt_optim_step(opt, vt_net_params(net), vt_net_grads(net), 0.01f);
            vt_net_forward(net, x, run_n, 0);
            TCHECK(be->in_use == held, "%s %s: ops hold %lld bytes after they return", bename,
                   model, (long long)(be->in_use - held));
            if (step == 0)
                first = be->high_water;
        }
        if (ref) {
            TCHECK(be->high_water == before, "%s: a training step allocated %lld bytes", model,
                   (long long)(be->high_water - before));
        } else {
            /* the scratch is counted (it exists: every model here has a vol2col conv), it
             * stays within the plan's share, and a second step needs no more */
            TCHECK(be->high_water > before && be->high_water - before <= mp.scratch_bytes,
                   "%s %s: op scratch raised the high water by %lld bytes, plan allows %lld",
                   bename, model, (long long)(be->high_water - before),
                   (long long)mp.scratch_bytes);
            TCHECK(be->high_water == first, "%s %s: a second step allocated more", bename, model);
        }
    }
    char a[32], b[32];
    printf("%-7s %-6s%s %s clip %dx%dx%d, %d clips, %s: plan %s (fixed %s + %d x %s), high water %s "
           "(%.3f%% of plan)\n", bename, model, ckpt_on ? " (checkpointing)" : "",
           vt_precision_name(prec), t, h, w, mb,
           vt_optim_kind_name(ok),
           vt_fmt_bytes(a, sizeof a, plan), vt_fmt_bytes(b, sizeof b, mp.fixed_bytes), mb,
           vt_fmt_bytes((char[32]){0}, 32, mp.bytes_per_clip),
           vt_fmt_bytes((char[32]){0}, 32, be->high_water), 100.0 * (double)be->high_water / (double)plan);
    TCHECK(be->high_water <= plan, "%s: allocated %lld bytes, plan %lld", model,
           (long long)be->high_water, (long long)plan);
    /* Tight: the plan less the scratch share (the bound for any n; a cpu op at this n may
     * use less, cpu-ref none) is within 1% of what was held. */
    const int64_t tight = plan - mp.scratch_bytes;
    TCHECK(be->high_water >= tight - tight / 100,
           "%s %s: plan %lld (less scratch %lld) overestimates %lld by > 1%%", bename, model,
           (long long)plan, (long long)mp.scratch_bytes, (long long)be->high_water);
    vt_backend_free_ptr(be, x);
    vt_backend_free_ptr(be, lab);
    vt_backend_free_ptr(be, tg);
    vt_optim_free(&opt);
    vt_net_free(&net);
    TCHECK(be->in_use == 0, "%s: %lld bytes left", model, (long long)be->in_use);

    /* One clip more than planned does not fit: refused with a message, nothing held. With
     * the optimizer's share taken first, as the tower does, and the op scratch share, which
     * a step holds at its peak. */
    void *optshare = vt_backend_alloc(be, (size_t)(mp.optim_bytes + mp.scratch_bytes));
    vt_net *big = vt_net_init(&cfg, be, mb + 1, err, sizeof err);
    if (big) {
        /* The net alone may fit (its share excludes the input); the input then cannot. */
        void *xx = vt_backend_alloc(be, (size_t)((mb + 1) * clip) * sizeof(float));
        TCHECK(xx == NULL, "%s: %d clips fit a budget planned for %d", model, mb + 1, mb);
        vt_backend_free_ptr(be, xx);
        vt_net_free(&big);
    } else {
        TCHECK(strstr(err, "cannot allocate") != NULL, "%s: refusal says '%s'", model, err);
    }
    vt_backend_free_ptr(be, optshare);
    TCHECK(be->in_use == 0, "%s: refusal left %lld bytes", model, (long long)be->in_use);

    TCHECK(vt_memplan_max_clips(&mp, plan) == mb, "max_clips(plan) = %d, not %d",
           vt_memplan_max_clips(&mp, plan), mb);
    TCHECK(vt_memplan_max_clips(&mp, plan - 1) == mb - 1, "max_clips(plan - 1)");
    TCHECK(vt_memplan_max_clips(&mp, mp.fixed_bytes - 1) == 0, "max_clips below fixed");
    vt_backend_free(&be);
    vt_memplan_free(&mp);
}

/* The README's workstation: r3d18 at 16x112x112 on 12 GB + 6 GB, FP32 and BF16. BF16
 * halves the activation bytes; the input clip, targets, masks, losses and every fixed
 * byte stay float32, so a little under twice the clips fit. */
static void workstation(void) {
    int fits[2][2];
    int64_t per[2];
    const int64_t budgets[2] = {12LL << 30, 6LL << 30};
    for (int b = 0; b < 2; b++) {
        vt_net_cfg cfg;
        vt_net_cfg_default(&cfg, "r3d18", 400, 16, 112, 112);
        cfg.precision = b ? VT_PREC_BF16 : VT_PREC_FP32;
        vt_memplan mp;
        char err[256];
        TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0, "%s", err);
        per[b] = mp.bytes_per_clip;
        for (int d = 0; d < 2; d++)
            fits[b][d] = vt_memplan_max_clips(&mp, budgets[d]);
        vt_memplan_free(&mp);
    }
    printf("r3d18 16x112x112 on 12 GB + 6 GB: fp32 %d + %d clips per pass (%.1f MiB a clip), "
           "bf16 %d + %d (%.1f MiB)\n", fits[0][0], fits[0][1], per[0] / 1048576.0, fits[1][0],
           fits[1][1], per[1] / 1048576.0);
    /* docs/distributed.md's figures (fp32: 58 + 28) */
    TCHECK(fits[0][0] == 58 && fits[0][1] == 28, "fp32 plan moved: %d + %d", fits[0][0],
           fits[0][1]);
    for (int d = 0; d < 2; d++)
        TCHECK(fits[1][d] >= 19 * fits[0][d] / 10 && fits[1][d] <= 2 * fits[0][d] + 1,
               "bf16 fits %d clips where fp32 fits %d: not about twice", fits[1][d], fits[0][d]);
    TCHECK(per[1] < per[0] * 52 / 100 && per[1] > per[0] * 48 / 100,
           "bf16 bytes per clip %lld vs fp32 %lld", (long long)per[1], (long long)per[0]);
    /* slowfast_r50 at its Kinetics clip, 32x224x224 (1.2 GiB a clip in fp32, 944 MiB
     * fixed): 9 + 4 clips a pass, so a batch of 8 or 16 runs in micro-batches */
    for (int b = 0; b < 2; b++) {
        vt_net_cfg cfg;
        vt_net_cfg_default(&cfg, "slowfast_r50", 400, 32, 224, 224);
        cfg.precision = b ? VT_PREC_BF16 : VT_PREC_FP32;
        vt_memplan mp;
        char err[256];
        TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0, "%s", err);
        for (int d = 0; d < 2; d++)
            fits[b][d] = vt_memplan_max_clips(&mp, budgets[d]);
        per[b] = mp.bytes_per_clip;
        vt_memplan_free(&mp);
    }
    printf("slowfast_r50 32x224x224 on 12 GB + 6 GB: fp32 %d + %d clips per pass (%.1f MiB a "
           "clip), bf16 %d + %d (%.1f MiB)\n", fits[0][0], fits[0][1], per[0] / 1048576.0,
           fits[1][0], fits[1][1], per[1] / 1048576.0);
    TCHECK(fits[0][0] == 9 && fits[0][1] == 4 && fits[1][1] >= 2 * fits[0][1],
           "slowfast_r50 plan: fp32 %d + %d, bf16 %d + %d", fits[0][0], fits[0][1], fits[1][0],
           fits[1][1]);
}

/* CUDA towers (vt_slice_fits): the 12 GB + 6 GB workstation still holds its clips with the
 * backend's reserve (cuBLAS + cuDNN workspace + search scratch) taken out — the reserve
 * costs whole clips, never the plan; and C3D in BF16 on an 80 GB card, where memory
 * alone would pass about 800 clips, passes at most 167: conv1's output is 64x16x112x112
 * = 12,845,056 elements a clip, and 168 of them pass cuDNN's 2^31 - 1 elements. */
static void cuda_towers(void) {
    vt_net_cfg cfg;
    vt_memplan mp;
    char err[256];
    unsetenv("VT_CUDA_WORKSPACE"); /* the default cap, 1 GiB */
    vt_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "cuda");
    vt_net_cfg_default(&cfg, "r3d18", 400, 16, 112, 112);
    TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0, "%s", err);
    const int64_t reserve = vt_memplan_cuda_reserve(&mp);
    /* 32 MiB cuBLAS + 16/15 GiB cuDNN + the largest conv's float weights (layer4's 3x3x3
     * 512->512: 7,077,888 floats) */
    const int64_t want = (32LL << 20) + (1LL << 30) / 15 * 16 + 7077888LL * 4;
    TCHECK(reserve == want, "cuda reserve %lld, expected %lld", (long long)reserve,
           (long long)want);
    d.budget = 12LL << 30;
    const int f12 = vt_slice_fits(&mp, &d);
    d.budget = 6LL << 30;
    const int f6 = vt_slice_fits(&mp, &d);
    printf("r3d18 16x112x112 fp32 on cuda 12 GB + 6 GB with the %.0f MiB reserve: %d + %d "
           "clips per pass\n", reserve / 1048576.0, f12, f6);
    /* each tower loses about reserve / bytes_per_clip clips (+1 for the rounding), no more */
    const int lost = (int)(reserve / mp.bytes_per_clip) + 1;
    TCHECK(f12 >= 58 - lost && f12 < 58 && f6 >= 28 - lost && f6 < 28 && f6 >= 20,
           "cuda fits %d + %d (cpu 58 + 28, reserve %d clips)", f12, f6, lost);
    TCHECK(vt_memplan_cudnn_clip_cap(&mp) > 58, "r3d18 cap %d", vt_memplan_cudnn_clip_cap(&mp));
    vt_memplan_free(&mp);

    vt_net_cfg_default(&cfg, "c3d", 101, 16, 112, 112);
    cfg.precision = VT_PREC_BF16;
    TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0, "%s", err);
    TCHECK(mp.max_tensor_elems == 64LL * 16 * 112 * 112, "c3d largest tensor %lld",
           (long long)mp.max_tensor_elems);
    const int64_t g80 = 80LL * 1000 * 1000 * 1000;
    const int by_memory = vt_memplan_max_clips(&mp, g80);
    d.budget = g80;
    const int fits = vt_slice_fits(&mp, &d);
    printf("c3d bf16 on 80 GB: memory holds %d clips a pass, cuDNN's limit allows %d\n",
           by_memory, fits);
    TCHECK(by_memory >= 600, "c3d bf16 80 GB by memory: %d (the cap would not show)", by_memory);
    TCHECK(fits == 167, "c3d bf16 cuda fits %d, not 167", fits);
    TCHECK(168LL * mp.max_tensor_elems > INT32_MAX && 167LL * mp.max_tensor_elems <= INT32_MAX,
           "cap arithmetic");
    /* the same device as a cpu tower is not capped: the limit is cuDNN's */
    snprintf(d.backend, sizeof d.backend, "cpu");
    TCHECK(vt_slice_fits(&mp, &d) == by_memory, "cpu tower capped: %d", vt_slice_fits(&mp, &d));
    /* the splitter with a batch of 800 on that card: 5 passes, none of 168 or more */
    snprintf(d.backend, sizeof d.backend, "cuda");
    vt_slice_dev sd;
    memset(&sd, 0, sizeof sd);
    snprintf(sd.name, sizeof sd.name, "cuda0");
    sd.budget = g80;
    sd.max_clips = vt_slice_fits(&mp, &d);
    vt_slice_policy pol = {.kind = VT_SLICE_MEMORY};
    vt_plan plan;
    TCHECK(vt_slice_plan(&plan, &pol, 800, 1, &sd, err, sizeof err) == 0, "%s", err);
    TCHECK(plan.mb[0] <= 167 && plan.nmb[0] == 5 && plan.slice[0] == 800,
           "c3d 800 clips: %d passes of %d", plan.nmb[0], plan.mb[0]);
    /* unlimited budget: still capped */
    d.budget = 0;
    TCHECK(vt_slice_fits(&mp, &d) == 167, "unlimited cuda tower: %d", vt_slice_fits(&mp, &d));
    vt_memplan_free(&mp);
}

/* MViT on a cuda tower: the backend's per-pass scratch (cuda_mvit.c) grows with the
 * clips, beside the arenas. mvit_v2_s at 16x224: token max-pool's backward keeps an int per
 * output value, largest at blocks.1's skip pool (192 channels x (1 + 8x28x28) tokens =
 * 4,817,664 bytes a clip); the relative positions' row sums of blocks.0 take 1 head x
 * (1 + 8x56x56) queries x (8+7+7) key coordinates x 4 = 2,207,832, less. A tower's clips
 * are what its budget holds at bytes_per_clip + that; a CNN has none. */
static void cuda_mvit_scratch(void) {
    vt_net_cfg cfg;
    vt_memplan mp;
    char err[256];
    vt_net_cfg_default(&cfg, "mvit_v2_s", 400, 16, 224, 224);
    TCHECK(vt_memplan_build(&mp, &cfg, 2, err, sizeof err) == 0, "%s", err);
    TCHECK(mp.cuda_clip_bytes == 192LL * (1 + 8 * 28 * 28) * 4,
           "mvit_v2_s cuda scratch %lld bytes a clip", (long long)mp.cuda_clip_bytes);
    vt_device d;
    memset(&d, 0, sizeof d);
    snprintf(d.backend, sizeof d.backend, "cuda");
    d.budget = 80LL << 30;
    const int64_t left = d.budget - vt_memplan_cuda_reserve(&mp) - mp.fixed_bytes;
    const int want = (int)(left / (mp.bytes_per_clip + mp.cuda_clip_bytes));
    printf("mvit_v2_s 16x224 on an 80 GiB cuda tower: %d clips a pass (%lld bytes a clip "
           "+ %lld of cuda scratch)\n", vt_slice_fits(&mp, &d), (long long)mp.bytes_per_clip,
           (long long)mp.cuda_clip_bytes);
    TCHECK(vt_slice_fits(&mp, &d) == want, "mvit_v2_s cuda fits %d, expected %d",
           vt_slice_fits(&mp, &d), want);
    vt_memplan_free(&mp);
    vt_net_cfg_default(&cfg, "r3d18", 400, 16, 112, 112);
    TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0, "%s", err);
    TCHECK(mp.cuda_clip_bytes == 0, "r3d18 cuda scratch %lld", (long long)mp.cuda_clip_bytes);
    vt_memplan_free(&mp);
}

int main(void) {
    check("cpu-ref", "tiny", 4, 32, 32, 3, VT_OPT_SGD, 3, VT_PREC_FP32);
    check("cpu-ref", "r3d18", 2, 16, 16, 2, VT_OPT_ADAMW, 1, VT_PREC_FP32);
    check("cpu", "tiny", 4, 32, 32, 3, VT_OPT_SGD, 3, VT_PREC_FP32);
    check("cpu", "r3d18", 2, 16, 16, 2, VT_OPT_ADAMW, 2, VT_PREC_FP32);
    /* conv1's vol2col at 8x64x64 (81 x 32768 floats, 10.6 MB) passes the scratch cap:
     * the cpu backend cuts it into bands of rows and stays inside the plan */
    check("cpu", "tiny", 8, 64, 64, 2, VT_OPT_SGD, 2, VT_PREC_FP32);
    /* BF16 storage, on the backend that has it on the CPU; 3 clips of tiny: odd sizes */
    check("cpu-ref", "tiny", 4, 32, 32, 3, VT_OPT_SGD, 3, VT_PREC_BF16);
    check("cpu-ref", "r3d18", 2, 16, 16, 2, VT_OPT_ADAMW, 1, VT_PREC_BF16);
    /* Concat nodes (their gradient slots, the BF16 byte offsets of the slices): s3d's test
     * model on cpu-ref in both precisions, s3d itself at its smallest clip on cpu. */
    check("cpu-ref", "s3d_block", 4, 8, 8, 3, VT_OPT_SGD, 3, VT_PREC_FP32);
    check("cpu-ref", "s3d_block", 4, 8, 8, 3, VT_OPT_SGD, 3, VT_PREC_BF16);
    check("cpu", "s3d", 13, 209, 209, 1, VT_OPT_SGD, 1, VT_PREC_FP32);
    /* slowfast_r50: the frame gather (its output planned, no gradient slot), two pathways,
     * lateral convs and concats; bf16 on cpu-ref, its smallest clip (slow pathway 1 frame) */
    check("cpu", "slowfast_r50", 8, 32, 32, 2, VT_OPT_SGD, 2, VT_PREC_FP32);
    check("cpu-ref", "slowfast_r50", 4, 32, 32, 1, VT_OPT_SGD, 1, VT_PREC_BF16);
    /* Transformers (attention keeps q, k, v, its output and a log-sum-exp per row and
     * head; the cpu backend's blocked attention scratch goes through the allocator): ViT-S
     * at 64 tokens (8x64x64, so a head's 64 query rows are one block), and with
     * activation checkpointing (a block's insides in one shared region). */
    check("cpu-ref", "videomae_vit_s", 8, 64, 64, 2, VT_OPT_ADAMW, 2, VT_PREC_FP32);
    check("cpu", "videomae_vit_s", 8, 64, 64, 2, VT_OPT_ADAMW, 2, VT_PREC_FP32);
    ckpt_on = 1;
    check("cpu", "videomae_vit_s", 8, 64, 64, 2, VT_OPT_ADAMW, 2, VT_PREC_FP32);
    ckpt_on = 0;
    workstation();
    cuda_towers();
    cuda_mvit_scratch();
    /* A plan for a model that does not exist, or a clip too small, is an error, not a crash. */
    vt_net_cfg cfg;
    vt_memplan mp;
    char err[256];
    vt_net_cfg_default(&cfg, "c3d", 10, 2, 16, 16);
    TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) < 0 && strstr(err, "too small"),
           "c3d at 2x16x16: %s", err);
    /* C3D at its usual clip: the classic numbers (78.4M parameters with 101 classes). */
    vt_net_cfg_default(&cfg, "c3d", 101, 16, 112, 112);
    TCHECK(vt_memplan_build(&mp, &cfg, 1, err, sizeof err) == 0 && mp.params == 78409573,
           "c3d plan: %s", err);
    vt_memplan_free(&mp);
    return vt_test_done("test_memplan");
}
