/*
 * onnx.h: a network written as an ONNX model for deployment (docs/design.md §6: weights move
 * out as safetensors and ONNX) — fp32, one input "clip" of shape (N, 3, T, H, W) with N
 * dynamic ("batch"), one output per head: logits, or probabilities (softmax heads:
 * Softmax; multi-label heads: Sigmoid). The model is the eval-mode network: batch norm
 * with its running statistics, dropout left out. The caller's string metadata goes into
 * the model's metadata_props.
 *
 * It must never change the net (it reads its weights and buffers) nor write a partial
 * file: the model goes through the atomic writer (base/common.h).
 */
#ifndef VT_ONNX_H
#define VT_ONNX_H

#include <stddef.h>

#include "models/net.h"

/* Opsets the exporter writes (every op it emits has the same meaning in these). */
#define VT_ONNX_OPSET_MIN 13
#define VT_ONNX_OPSET_MAX 17
#define VT_ONNX_OPSET_DEFAULT 17

typedef struct vt_onnx_opts {
    int softmax;        /* 1: outputs are probabilities; 0: logits */
    int opset;          /* VT_ONNX_OPSET_MIN..MAX (vt_onnx_opts_default: 17) */
    const char *doc;    /* the model's doc_string; NULL: none */
    int nmeta;          /* metadata_props: meta_key[i] -> meta_value[i] */
    const char *const *meta_key;
    const char *const *meta_value;
} vt_onnx_opts;

void vt_onnx_opts_default(vt_onnx_opts *o);
/* The ONNX name of head h's output: "logits_NAME" or "probs_NAME" (NAME: the head's). */
void vt_onnx_output_name(char *out, size_t n, const vt_net_cfg *cfg, int h, int softmax);
/* Writes net (its configuration's graph with its present weights and buffers) to path
 * as an ONNX model, atomically. 0, or -1 with err: a layer kind with no ONNX form yet, an
 * opset out of range, a model past protobuf's 2 GiB, or the file (naming the path). */
int vt_onnx_export(const char *path, vt_net *net, const vt_onnx_opts *o, char *err,
                   size_t errlen);

#endif
