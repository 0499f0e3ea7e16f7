/*
 * finetune.h: what fine-tuning changes about a net and its optimizer — which stage each
 * tensor belongs to (for --freeze: the stem and the first N stages stop learning, as
 * mmaction's frozen_stages), the optimizer groups that follow from it (frozen stages at
 * lr 0, the classifiers at --head-lr-mult), and the BN layers that go to eval mode
 * (--freeze-bn, and the frozen stages' own).
 *
 * It must never change the numbers of a run that does not fine-tune: every function here
 * is a no-op for freeze < 0, head multiplier 1 and no frozen BN.
 */
#ifndef VT_FINETUNE_H
#define VT_FINETUNE_H

#include "models/net.h"
#include "models/optim.h"

/* The stage of a state_dict tensor of `model`: 0 the stem, k >= 1 the k-th stage after it
 * (resnets: layerK; tiny: conv/bn K+1; c3d: conv2..conv5, then fc6/fc7 as stage 5; s3d:
 * the blocks between its max pools; x3d: blocks.K, 5 its head's projected pool;
 * pytorchvideo's ResNet-50s: blocks.0 to blocks.4, the pathways together), -1 for the
 * classifiers and what has no stage. */
int vt_finetune_stage(const char *model, const char *tensor_name);
/* The highest stage number of `model` (what --freeze may name). */
int vt_finetune_nstages(const char *model);

/* A transformer's depth D (its blocks; 0 for the other models): the VideoMAE ViTs and
 * torchvision's MViTs, which train with the transformers' recipe (app/train/train_opts.c).
 * Its stages for --freeze are the patch embedding (0, the stem; MViT's conv_proj and
 * pos_encoding) and blocks.N (N+1); layer-wise lr decay gives
 * stage s the multiplier F^(D+1-s) and fc_norm and the head F^0 = 1 (VideoMAE's
 * LayerDecayValueAssigner with get_num_layer_for_vit). */
int vt_finetune_nlayers(const char *model);
/* The licence of the published weights a model of this kind starts from, for the run's
 * config and log: the VideoMAE / VideoMAEv2 release weights' for the transformers
 * ("CC-BY-NC 4.0 ..."), NULL for the others (torchvision's registry says its own). */
const char *vt_finetune_weights_licence(const char *model);

/* Optimizer groups over net's parameter arena (at most maxg, adjacent equal multipliers
 * merged): tensors of stages <= freeze at 0 (freeze < 0: none), the classifiers' at
 * head_mult, the rest at 1; a transformer's then times its layer_decay multiplier (1:
 * none). Returns the count, or -1 when maxg is too small. */
int vt_finetune_groups(vt_optim_group *g, int maxg, const vt_net *net, int freeze,
                       float head_mult, float layer_decay);
/* Whether a parameter goes without weight decay under timm's and VideoMAE's rule
 * (optim_factory.get_parameter_groups): a 1-D tensor (norm weights and biases, the
 * q/v biases), a name ending in ".bias", or a position embedding or class token
 * (no_weight_decay(): pos_embed, cls_token; torchvision MViT's pos_encoding and
 * class_token, and relative positions rel_pos_*). */
int vt_finetune_no_decay(const vt_tensor_info *t);
/* vt_finetune_groups with, when no_decay_rule, each parameter that vt_finetune_no_decay
 * names in a group without weight decay (adjacent equal groups merged). */
int vt_finetune_groups_wd(vt_optim_group *g, int maxg, const vt_net *net, int freeze,
                          float head_mult, float layer_decay, int no_decay_rule);
/* BN layers of net put in eval mode for training (running statistics used and kept,
 * vt_net_set_bn_frozen): every one with all_bn, else those of stages <= freeze. Returns
 * how many. */
int vt_finetune_freeze_bn(vt_net *net, int freeze, int all_bn);

#endif
