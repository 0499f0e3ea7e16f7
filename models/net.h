/*
 * net.h: a 3D-CNN as a graph of layers on one backend — the zoo (tiny, c3d, r3d18,
 * mc3_18, r2plus1d18, torchvision-compatible), forward/backward, heads with their losses
 * and outputs, and the three arenas (parameters, gradients, buffers) carved into named
 * views.
 *
 * One vt_net is one replica. It knows nothing about towers or devices lists: the
 * towers own several nets and combine them through the arenas and the allreduce hooks
 * (sync-BN, the merge of BN buffers); every number about the model itself is made here.
 */
#ifndef VT_NET_H
#define VT_NET_H

#include <stdint.h>
#include <stdio.h>

#include "models/backend.h"
#include "models/net_types.h" /* vt_net_cfg, vt_tensor_info, vt_zoo_names */

/* Fill cfg with a model name, clip shape and a single softmax head of `classes`. */
void vt_net_cfg_default(vt_net_cfg *cfg, const char *model, int classes, int t, int h, int w);

/* Targets of a (micro-)batch, backend memory, one array per head:
 * label[h] (N) int32 for softmax heads, target[h] (N, classes) float for BCE heads and
 * for softmax heads trained on mixed targets (vt_net_cfg.soft_targets: the loss then
 * takes target, a distribution per clip, and label only counts accuracy). */
typedef struct vt_targets {
    const int32_t *label[VT_MAX_HEADS];
    const float *target[VT_MAX_HEADS];
    /* Class-weighted softmax heads (--balance loss, docs/balance.md): class_weight[h]
     * (classes) float in backend memory, NULL: unweighted; a weighted head's gradient is
     * then scaled by weight_scale[h] * weight_h instead of grad_scale * weight_h, with
     * weight_scale[h] = 1 / (sum over the GLOBAL batch of class_weight[h][label]): PyTorch's
     * weighted mean, the same whatever the towers. loss_clip and head_loss hold the weighted
     * losses x weight_scale / grad_scale: their batch mean (sum / batch, as the callers
     * take it) is PyTorch's weighted mean, the loss the gradient follows. */
    const float *class_weight[VT_MAX_HEADS];
    float weight_scale[VT_MAX_HEADS];
    /* Logit-adjusted softmax heads (--balance logit, docs/balance.md): logit_adjust[h]
     * (classes) float in backend memory, NULL: none. The loss and its gradient are taken
     * on logits + logit_adjust[h] (log class priors: the logit-adjusted loss of Menon et
     * al., 2021), so the logits themselves learn to predict as if the classes were
     * balanced; vt_net_logits still gives the unadjusted logits (to float rounding). */
    const float *logit_adjust[VT_MAX_HEADS];
} vt_targets;

typedef struct vt_net vt_net;

/* Build the model on `be`, with room for micro-batches of up to max_batch clips, and set
 * the backend's precision to cfg->precision (nets sharing a backend share a precision).
 * Returns NULL with err set for an unknown model, a clip too small for it, a precision
 * the backend does not have, or a budget too small (nothing is left allocated). Weights
 * are zero until vt_net_init_weights. */
vt_net *vt_net_init(const vt_net_cfg *cfg, vt_backend *be, int max_batch, char *err,
                    size_t errlen);
void vt_net_free(vt_net **net);
const vt_net_cfg *vt_net_config(const vt_net *net);
vt_backend *vt_net_backend(const vt_net *net);
int vt_net_max_batch(const vt_net *net);

/* torchvision's initialisation (kaiming_normal_ fan_out for convs, BN weight 1 bias 0,
 * linear N(0, 0.01) bias 0 for the video resnets; PyTorch defaults where torchvision
 * leaves them), drawn from vt_rng seeded with `seed`: same seed, same weights. */
void vt_net_init_weights(vt_net *net, uint64_t seed);

/* Arenas: backend memory, one allocation each (docs/style.md §10). */
int64_t vt_net_num_params(const vt_net *net);   /* trainable floats */
float *vt_net_params(vt_net *net);              /* (num_params) */
float *vt_net_grads(vt_net *net);               /* (num_params) */
int64_t vt_net_num_buffers(const vt_net *net);
float *vt_net_buffers(vt_net *net);             /* BN running stats, num_batches_tracked */
int vt_net_num_tensors(const vt_net *net);
const vt_tensor_info *vt_net_tensor(const vt_net *net, int i);
const vt_tensor_info *vt_net_find_tensor(const vt_net *net, const char *name);
/* The head whose classifier tensor i is (its weight or bias), or -1 for every other. */
int vt_net_tensor_head(const vt_net *net, int i);

void vt_net_zero_grad(vt_net *net);
/* x: (n, 3, T, H, W) in backend memory, 0 <= n <= max_batch. train=1: batch statistics,
 * dropout on, activations kept for backward; train=0: running statistics. */
void vt_net_forward(vt_net *net, const float *x, int n, int train);
/* Logits of a head after forward: (n, classes) float32, backend memory (under BF16 the
 * float32 copy of the head's bf16 output that the loss reads). */
const float *vt_net_logits(const vt_net *net, int head);
/* The pooled features the heads are applied to (the input of every classifier: after
 * the global pool, and after the dropout when the model has one, which eval forwards
 * leave as it is): feature_dim floats per clip. vt_net_features copies those of the
 * first n clips of the last forward to host (n, feature_dim) float32 (embeddings). */
int vt_net_feature_dim(const vt_net *net);
void vt_net_features(const vt_net *net, float *host, int n);
/* Loss of the last forward. Writes (host) loss_clip[i] = sum_h weight_h * loss_h(clip i)
 * and head_loss[h] = sum over clips of loss_h (either may be NULL), and seeds the
 * heads' gradients with grad_scale * weight_h * dloss_h/dlogits. grad_scale is 1/B for
 * the GLOBAL batch B (docs/design.md §3.2). */
void vt_net_loss(vt_net *net, float *loss_clip, float *head_loss, const vt_targets *t,
                 float grad_scale);
/* vt_net_loss in two halves, so that no host wait comes between forward and backward
 * (issue 45 step 3): vt_net_loss_issue queues what vt_net_loss computes and the copy of
 * the per-clip losses to the host without waiting for it (vt_net_backward may follow);
 * vt_net_loss_collect, after a vt_backend_sync that followed the issue, writes loss_clip
 * and head_loss as vt_net_loss would. vt_net_loss is issue, sync, collect. */
void vt_net_loss_issue(vt_net *net, const vt_targets *t, float grad_scale);
void vt_net_loss_collect(vt_net *net, float *loss_clip, float *head_loss);
/* Outputs of the last forward for evaluation, made by the loss ops without gradients:
 * prob[h] (host, (n, classes)): head h's softmax probabilities (softmax heads) or sigmoids
 * (BCE heads); prob NULL or a NULL entry: not wanted. loss_clip and head_loss (host, may
 * be NULL) as vt_net_loss writes them, over the heads whose targets t holds (t NULL or a
 * NULL entry: that head counts 0). The heads' gradient storage holds the probabilities
 * on the backend meanwhile, so vt_net_backward may not follow (call vt_net_loss first). */
void vt_net_outputs(vt_net *net, float *const prob[VT_MAX_HEADS], float *loss_clip,
                    float *head_loss, const vt_targets *t);
/* 1 when backward reads the forward's input x (the first conv's weight gradient), so x
 * must stay unchanged until vt_net_backward has been issued; 0 when forward copies x into
 * the net's own storage (BF16: its bf16 copy) and x may be refilled once forward and
 * loss are issued. */
int vt_net_reads_input_in_backward(const vt_net *net);
/* Gradient readiness, for reductions that overlap backward: during vt_net_backward,
 * after each layer with parameters, fn(ctx, lo) says that every parameter gradient at
 * arena offset >= lo is final for this backward (issued on the backend: device work may
 * still be queued). Layers run in reverse arena order, so lo only decreases, and the
 * first layer ends with lo = 0. NULL = no calls (the default). */
typedef void (*vt_grad_ready_fn)(void *ctx, int64_t lo);
void vt_net_set_grad_ready(vt_net *net, vt_grad_ready_fn fn, void *ctx);
/* Backward of the last training forward: ACCUMULATES parameter gradients. */
void vt_net_backward(vt_net *net);
/* Dropout draws from a counter: call before each training forward with a value that is
 * the same on every tower for the same global clip (e.g. step * 2^20 + first clip). */
void vt_net_set_dropout_seed(vt_net *net, uint64_t seed);

/* Sync-BN: when set, every BN layer in training forward calls fn(ctx, buf, 2C+1) with
 * buf = [sum (C) | sumsq (C) | count (1)] and in backward fn(ctx, buf, 2C) with
 * buf = [sum_dy (C) | sum_dy_xhat (C)]; fn must replace buf by its sum over all towers
 * (backend memory). Every tower calls it the same number of times, in the same order,
 * even with n == 0. NULL = per-tower statistics (the default). */
typedef void (*vt_allreduce_fn)(void *ctx, float *buf, int64_t n);
void vt_net_set_bn_sync(vt_net *net, vt_allreduce_fn fn, void *ctx);
/* Sync-BN with float sums: the clips of the coming passes over every tower, when the
 * caller knows them (the towers' plan): the forward then sums [sum (C)] alone and takes
 * the count from here, with no copy of it to the host (a stream sync per BN on a GPU);
 * the same bits while a channel's count is below 2^24, exact beyond. -1 (the default):
 * the count travels with the sums. Every tower must set it alike (the collective's size
 * follows it). */
void vt_net_set_bn_pass_clips(vt_net *net, int64_t clips);
/* Sync-BN of a network built with cfg.exact: fn(ctx, buf, n) must replace the n int64
 * of buf (xsum.h accumulators and a count: backend memory) by their sum over all towers,
 * an integer sum, exact in any order. Called where the float hook would be; set both
 * (vt_net_set_bn_sync's fn is then unused). NULL = per-tower statistics. */
typedef void (*vt_allreduce_i64_fn)(void *ctx, int64_t *buf, int64_t n);
void vt_net_set_bn_sync_exact(vt_net *net, vt_allreduce_i64_fn fn, void *ctx);
/* cfg.exact: the gradients' accumulators, 2 * num_params int64 of backend memory
 * (xsum.h), which backward folds every clip's gradients into (NULL without cfg.exact);
 * vt_net_grads is not written by backward then: the caller rounds the accumulators into
 * it with vt_net_round_grads once they are final (every pass done, summed over towers). */
int64_t *vt_net_xgrads(vt_net *net);
void vt_net_round_grads(vt_net *net);
/* The weight m of a training forward's batch statistics in the running ones:
 * running = (1 - m) * running + m * batch (PyTorch's BN momentum). 0: the default, 0.1.
 * A precise-statistics pass sets m = n / (clips so far + n) for each forward of n clips,
 * which leaves the clip-weighted average of the passes' statistics; while m > 0 is set,
 * training forwards are not counted in num_batches_tracked (they train nothing). */
void vt_net_set_bn_momentum(vt_net *net, float m);
/* Fine-tuning's frozen BN: the BN layer whose module name is `name` ("layer1.0.conv1.1")
 * normalises with its running statistics in training forwards too and never updates
 * them (PyTorch's bn.eval() inside a model in train mode); gamma and beta still learn
 * unless their stage is frozen. A frozen BN's output depends on its clip alone, so any
 * tower split equals one device without sync-BN. Returns 1, or 0 when no BN has that
 * name. */
int vt_net_set_bn_frozen(vt_net *net, const char *name, int on);
/* The BN layers of net; *frozen (may be NULL) gets how many of them are frozen. */
int vt_net_num_bn(const vt_net *net, int *frozen);
/* Replicas' buffers (BN running statistics) made one, for towers without sync-BN: every
 * replica calls it after a step, with weight = its share of the step's clips and `sum` a
 * hook as above (buffers are backend memory). Afterwards every replica holds
 * sum_i weight_i * buffers_i, num_batches_tracked rounded to an integer. */
void vt_net_merge_buffers(vt_net *net, float weight, vt_allreduce_fn sum, void *ctx);

/* ---- memory plan (models/memplan.c) ----
 * Contract: vt_net_init(cfg, be, mb) followed by vt_optim_init(kind) on the same
 * backend allocate at most fixed_bytes + mb * bytes_per_clip through vt_backend_alloc,
 * where bytes_per_clip counts the input clip and targets too. The splitter plans from
 * these numbers, and tests check them against the allocator's high-water mark.
 * That bound also holds while training runs: workspace_bytes includes scratch_bytes, the
 * most that one op (forward, backward or update of any layer, at any n <= mb) allocates
 * through vt_backend_alloc for its own duration and frees before it returns (the cpu
 * backend's conv tiles, models/cpu/cpu_conv.h). */
typedef struct vt_memplan_row {
    char name[64];      /* "layer1.0.conv1.0" */
    char kind[16];      /* "conv3d", "bn", "relu", "maxpool", ... */
    int64_t out[4];     /* per-clip output shape (C, T, H, W); unused dims 1 */
    int64_t params;
    int64_t act_bytes;  /* bytes per clip this layer holds for forward+backward */
} vt_memplan_row;

typedef struct vt_memplan {
    int nrows;
    vt_memplan_row *rows;
    int64_t params;             /* trainable floats */
    int64_t param_bytes, grad_bytes, buffer_bytes, optim_bytes, workspace_bytes;
    int64_t fixed_bytes;        /* sum of the above */
    int64_t bytes_per_clip;     /* activations + their gradients + input + targets */
    int64_t scratch_bytes;      /* part of workspace_bytes: the largest op scratch */
    int64_t max_tensor_elems;   /* per clip: the largest tensor one op sees (cuDNN cap) */
    int64_t search_filter_bytes;/* FP32/TF32: the largest conv's float weights (the cuda
                                   backend's scratch filter for a timed bwd-filter search) */
    int64_t cuda_attn_bytes;    /* the cuda backend's attention scratch (S and dP; BF16 P, dS,
                                   models/cuda/cuda_attn.h), held beside the arenas */
    int64_t cuda_clip_bytes;    /* the cuda backend's scratch a clip of a pass adds beside the
                                   arenas (MViT: the relative positions' row sums, heads x
                                   Lq x (Kt+Kh+Kw) floats, and token max-pool's argmax ints;
                                   models/cuda/cuda_mvit.c), the largest of one op's */
    int ckpt_segments;          /* checkpoint segments of the model (a transformer's blocks):
                                   0 = activation checkpointing (cfg.ckpt) changes nothing */
} vt_memplan;

/* optim_floats_per_param: 0 (none), 1 (SGD momentum), 2 (AdamW, RMSprop w/ momentum). */
int vt_memplan_build(vt_memplan *mp, const vt_net_cfg *cfg, int optim_floats_per_param,
                     char *err, size_t errlen);
/* Keras model.summary()-like table. */
void vt_memplan_print(const vt_memplan *mp, const vt_net_cfg *cfg, FILE *f);
void vt_memplan_free(vt_memplan *mp);
/* BF16 staging the cuda backend holds while one conv or linear layer of `weights`
 * weights runs: a bf16 copy of the weights and a bf16 weight gradient (2 x 2 bytes each). */
static inline int64_t vt_memplan_bf16_stage_bytes(int64_t weights) { return 4 * weights; }
/* How many clips fit in `budget` bytes in one pass (0 if not even one). */
int vt_memplan_max_clips(const vt_memplan *mp, int64_t budget);
/* CUDA towers (models/memplan.c explains each figure): the most convolution workspace
 * one cuDNN algorithm may use (VT_CUDA_WORKSPACE, default 1 GiB); the bytes a cuda
 * backend holds outside the arenas (cuBLAS workspace, cuDNN workspace, timed-search
 * scratch); the clips per pass cuDNN's 2^31-element tensor limit allows; and the clips
 * per pass of a cuda tower with `budget` bytes (0 = unlimited): all three applied. */
int64_t vt_memplan_cuda_ws_cap(void);
int64_t vt_memplan_cuda_reserve(const vt_memplan *mp);
int vt_memplan_cudnn_clip_cap(const vt_memplan *mp);
int vt_memplan_max_clips_cuda(const vt_memplan *mp, int64_t budget);

#endif
