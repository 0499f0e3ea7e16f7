/*
 * transfer.h: weights from elsewhere into a net — `vidtrain train --init FILE` and
 * `--pretrained NAME` (docs/design.md §6, "weights move both ways"). The file is a vidtrain
 * checkpoint, any safetensors file with torchvision's state_dict names, or a PyTorch
 * checkpoint written by torch.save (models/formats/pth.h reads it without running any of it).
 *
 * Tensors are matched by name, after the prefixes that wrappers add ("module." of
 * DataParallel / DistributedDataParallel) are taken off; a VideoMAE transformer also
 * matches the Hugging Face names of its tensors (vt_vit_hf_names: query, key and value
 * concatenated into qkv) and drops the prefixes "model." and "encoder." that the VideoMAE
 * repositories' checkpoints put before theirs; MViTv1's position tables made for another
 * clip are resampled to the net's (vt_mvit_pos_resample); a vidtrain checkpoint's
 * optimizer state ("optim.*") is ignored. A classifier whose class count differs (a
 * Kinetics-400 head on a 12-class set) keeps the net's fresh initialisation with a
 * one-line message; any other difference — a missing tensor, one the net does not have,
 * one of another shape — is listed and, with strict, refused. BN running statistics and
 * num_batches_tracked come along like any other tensor.
 *
 * It must never leave a half-loaded net behind an error it returns: every check runs
 * before the first tensor is copied.
 */
#ifndef VT_TRANSFER_H
#define VT_TRANSFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "models/net.h"

typedef struct vt_init_report {
    int tensors;        /* the net's tensors */
    int loaded;         /* copied from the file */
    int missing;        /* the net's, not in the file (kept as initialised) */
    int unexpected;     /* the file's, not the net's ("optim.*" not counted) */
    int mismatched;     /* same name, other shape, not a head (kept as initialised) */
    int heads_reinit;   /* classifiers of another class count (kept as initialised) */
    int64_t values;     /* floats copied */
    char format[32];    /* "safetensors", "PyTorch checkpoint" */
    char container[32]; /* "" or the key the weights were under ("model_state" of a .pyth) */
    char skipped[160];  /* "" or the objects of the file's other entries skipped unbuilt
                           (models/formats/pth.h), e.g. "__main__.Extra" */
} vt_init_report;

/* Load what of `path` matches the net (which holds its fresh initialisation), printing
 * what was loaded, missing, unexpected, shape-mismatched and re-initialised to `log`
 * (NULL: silent). strict: any missing, unexpected, mismatched or re-initialised tensor
 * is an error; without it, only a file of which nothing matches is (surely the wrong
 * file or model). 0, or -1 with err naming the path and the problem (the net untouched).
 * rep may be NULL. */
int vt_net_load_init(vt_net *net, const char *path, int strict, FILE *log, vt_init_report *rep,
                     char *err, size_t errlen);

/* A file whose classes are known by name (a vidtrain checkpoint's configuration names
 * them): each head's classifier rows by class name. from[h] NULL: head h as above (rows
 * by position when the class counts agree, re-initialised when not); else row k of head
 * h (every classifier tensor of it: dim 0 is the class) takes the file's row from[h][k],
 * or keeps its initialisation where from[h][k] is -1 (a class the file does not have;
 * --init-strict counts such a head as re-initialised). The log says what was matched. */
typedef struct vt_head_rows {
    const int *from[VT_MAX_HEADS];
} vt_head_rows;
int vt_net_load_init_rows(vt_net *net, const char *path, int strict, const vt_head_rows *rows,
                          FILE *log, vt_init_report *rep, char *err, size_t errlen);

/* A VideoMAE transformer's tensor `name` (vidtrain's, the VideoMAE / VideoMAEv2 names)
 * under the Hugging Face names (transfer_vit.c): 1 name in out[0]; 3 for blocks.N.attn.
 * qkv.weight (query, key, value: their rows one after the other); 0 if it has no other
 * name (fc_norm.*). vt_net_load_init tries them when the file lacks the name itself. */
int vt_vit_hf_names(const char *name, char out[3][192]);

/* MViTv1's position table `name` (pos_encoding.spatial_pos or temporal_pos) of the file
 * (ndim, shape, data: a square grid of positions, or frames) resampled to the net's
 * tensor t on its token grid (T, H, W) (transfer_mvit.c): the t->numel values
 * (malloc'd) and in `how` a line saying what was done; NULL when it is not such a table
 * or cannot be resampled (`how` then says why, or is empty when it is not one). */
float *vt_mvit_pos_resample(const char *name, int ndim, const int64_t *shape, const float *data,
                            const vt_tensor_info *t, const int grid[3], char *how, size_t howlen);

#endif
