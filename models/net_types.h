/*
 * net_types.h: the model's configuration (vt_net_cfg and its heads), its state-dict
 * tensors (vt_tensor_info) and the names of the zoo: the plain data that net.h's API
 * takes and that net_graph.h and zoo.h describe a graph with.
 *
 * A header of its own so that models/net_graph and models/zoo need not include net.h:
 * net.c runs the graph they build, so net.h from them would make an include circle
 * (tests/check_house.py fails on one). No code here, and none of the net's functions.
 */
#ifndef VT_NET_TYPES_H
#define VT_NET_TYPES_H

#include <stdint.h>

#include "models/backend.h"

#define VT_MAX_HEADS 8

typedef enum vt_loss_kind {
    VT_LOSS_SOFTMAX_CE, /* one class per clip, int32 label */
    VT_LOSS_BCE,        /* multi-label, float {0,1} target per class */
} vt_loss_kind;

typedef struct vt_head_cfg {
    char name[32];      /* for metrics and multi-head parameter names */
    int classes;
    vt_loss_kind loss;
    float weight;       /* loss weight (default 1) */
    float smoothing;    /* label smoothing, softmax heads only */
} vt_head_cfg;

typedef struct vt_net_cfg {
    char model[32];     /* "tiny", "c3d", "r3d18", "mc3_18", "r2plus1d18" */
    int clip_t, clip_h, clip_w; /* input clip shape (T, H, W); 3 channels */
    int nheads;         /* >= 1 */
    vt_head_cfg head[VT_MAX_HEADS];
    float dropout;      /* dropout probability before the classifier(s); 0 = none */
    float drop_path;    /* transformers: stochastic depth rate, block b's residual branches
                           dropped per clip with p = rate * b / (depth - 1) (VideoMAE's
                           linspace); 0 = none. Not stored in checkpoints: training only */
    vt_precision precision; /* backend.h: FP32 (default), TF32, BF16 (activations stored
                               as bf16: halves the bytes per clip of the memory plan) */
    int soft_targets;   /* the softmax heads train on mixed targets (--mixup, --cutmix): a
                           distribution per clip, (N, classes) float, staged beside the
                           labels (vt_targets.target); 0: labels only */
    int exact;          /* sums over clips exact (models/xsum.h): weight gradients and BN
                           statistics clip by clip into fixed-point accumulators, so any
                           split into towers and micro-batches gives the same bits as one
                           device (docs/design.md §3.1). Needs a backend with the xsum
                           ops (cpu, cpu-ref, cuda); costs 16 bytes a parameter (memplan.c) */
    int ckpt;           /* activation checkpointing: each checkpoint segment of the graph (a
                           transformer block, net_graph.h) keeps only its input and output
                           in forward and is recomputed, bit for bit, in backward; its
                           insides share one block-sized region (memplan.c counts it) */
} vt_net_cfg;

/* Names of the zoo, NULL-terminated (defined in zoo.c, public through net.h). */
extern const char *const vt_zoo_names[];
/* The input statistics the published weights of `model`'s family were trained with, by
 * name (pipeline/data/sample.h vt_clip_set_norm): "imagenet" for the VideoMAE
 * transformers (VideoMAE's datasets normalise with ImageNet's mean and std),
 * "pytorchvideo" for pytorchvideo's X3D and R50 family (mean 0.45, std 0.225 in every
 * channel: its hub transforms and PySlowFast's DATA.MEAN/STD), "kinetics" for
 * torchvision's video models (VideoClassification's Kinetics statistics; MViT too) and
 * every other model. */
const char *vt_zoo_input_norm(const char *model);

/* A named tensor of the model, in PyTorch state_dict order and naming
 * ("layer1.0.conv1.0.weight", "fc.weight", "layer1.0.bn1.running_mean", ...). */
typedef struct vt_tensor_info {
    const char *name;
    int ndim;
    int64_t shape[5];
    int64_t numel;
    int is_buffer;      /* 0: parameter (params/grads arenas), 1: buffer arena */
    int is_int64;       /* num_batches_tracked: kept as float in the arena, int64 on disk */
    int64_t offset;     /* in floats, into the params or the buffers arena */
} vt_tensor_info;

#endif
