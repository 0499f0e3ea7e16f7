/*
 * checkpoint.h: safetensors checkpoints (docs/design.md §6). One file holds
 *   - every tensor of the net under its PyTorch state_dict name (F32; BN
 *     num_batches_tracked as I64 with shape []), so torchvision's load_state_dict
 *     (strict=True) takes the file once the optim.* tensors are dropped;
 *   - the optimizer state, when one is passed, as flat F32 tensors over the parameter
 *     arena (parameters() order, the concatenation of the state_dict's parameters):
 *       "optim.sgd.momentum_buffer"                          SGD with momentum
 *       "optim.rmsprop.square_avg", "optim.rmsprop.momentum_buffer" (momentum > 0)
 *       "optim.adamw.exp_avg", "optim.adamw.exp_avg_sq";
 *   - string -> string metadata in "__metadata__". vidtrain writes these itself:
 *       "vidtrain_version"  VT_VERSION
 *       "model"             "r3d18"
 *       "clip"              "16x112x112" (T x H x W, 3 channels)
 *       "heads"             JSON list [{"name","classes","loss":"softmax"|"bce","weight",
 *                           "smoothing"}]
 *       "dropout"           "0.5"
 *       "optimizer"         JSON {"kind","momentum","dampening","nesterov","wd","alpha",
 *                           "beta1","beta2","eps","clip_norm","step"} (only with an optimizer)
 *     and the caller adds its own through `extra` (any keys but those above): train's
 *     (app/run/run_ckpt.c) are "epoch", "step", "cursor" (the data cursor), "seed",
 *     "classes" (JSON list of class names), "vidtrain_config", "normalisation" (JSON
 *     {"mean": [..], "std": [..]}) and "vidtrain_state" (the run's state).
 * The file layer — metadata, reading and validating a header, reading a tensor, the
 * atomic write — is models/formats/safetensors.h; this header adds the mapping of a net (and an
 * optimizer) onto it. Loading checks every name, dtype and shape against the net before
 * touching it and refuses a bad file with a message naming the path and the problem: a
 * corrupt checkpoint is a data error and must never crash or abort the program.
 */
#ifndef VT_CHECKPOINT_H
#define VT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "models/net.h"
#include "models/optim.h"
#include "models/formats/safetensors.h"

/* Writes net (+ opt if not NULL) and metadata to path atomically. 0, or -1 with err; a
 * tensor holding a NaN or inf (a diverged model) is refused, naming it, and the file
 * at path is left as it was. Every load below refuses such a tensor the same way. */
int vt_ckpt_save(const char *path, vt_net *net, vt_optim *opt, const vt_ckpt_meta *extra,
                 char *err, size_t errlen);

/* A batch-norm running variance (a tensor named *running_var) read from path: -1 with err
 * naming the tensor and the first negative value, which no training writes (both
 * backends clamp a batch's variance at 0) and which makes every output NaN, a damaged
 * file; else 0. Every load below, and --init (models/transfer.h), checks it. */
int vt_ckpt_check_var(const char *path, const char *name, const float *x, int64_t n, char *err,
                      size_t errlen);

/* The net configuration ("model", "clip", "heads", "dropout") from the metadata. */
int vt_ckpt_net_cfg(vt_net_cfg *cfg, const vt_ckpt_info *info, char *err, size_t errlen);
/* The optimizer configuration and step count from the metadata; -1 + err if absent. */
int vt_ckpt_optim_cfg(vt_optim_cfg *cfg, int64_t *step, const vt_ckpt_info *info, char *err,
                      size_t errlen);

/* Weights only (eval, predict, fine-tuning): parameters and buffers; optim.* ignored.
 * Every tensor of the net must be present with its dtype and shape, and no other
 * non-optim tensor may be (PyTorch strict=True). 0, or -1 with err; on error the net
 * may hold a mix, so callers stop. */
int vt_ckpt_load_weights(vt_net *net, const char *path, char *err, size_t errlen);
/* Full state (resume): weights, the optimizer state and step count (opt's kind must
 * match the file's), and the metadata into meta_out (may be NULL; its old contents are
 * freed and replaced; the caller frees it with vt_ckpt_meta_free). */
int vt_ckpt_load_state(vt_net *net, vt_optim *opt, const char *path, vt_ckpt_meta *meta_out,
                       char *err, size_t errlen);

#endif
