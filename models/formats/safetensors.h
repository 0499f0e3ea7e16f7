/*
 * safetensors.h: the safetensors file format as vidtrain reads and writes it — an 8-byte
 * little-endian header length, a JSON header ("__metadata__": string -> string, then one
 * entry per tensor: dtype F32 or I64, shape, data_offsets), padding to 8 bytes, then the
 * tensors' data back to back. It knows files, names, dtypes and shapes, and nothing of
 * nets: checkpoint.h maps a net and its optimizer onto it. The names keep the vt_ckpt_
 * prefix of the checkpoint API they have always been part of.
 *
 * Writing goes to a temporary file in the same folder, fsynced, renamed over the target,
 * and the folder fsynced, so a crash leaves the old file or the new one. Reading
 * validates the whole header before using any of it (size, header length, JSON, every
 * tensor's dtype/shape/offsets, offsets within the data and neither overlapping nor
 * leaving holes) and refuses a bad file with a message naming the path and the problem.
 * It must never crash or abort on a bad file: that is a data error (docs/design.md §8).
 */
#ifndef VT_SAFETENSORS_H
#define VT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* String -> string metadata, in insertion order. */
typedef struct vt_ckpt_kv { char *key, *val; } vt_ckpt_kv;
typedef struct vt_ckpt_meta {
    int n, cap;
    vt_ckpt_kv *kv;
} vt_ckpt_meta;

/* Sets (or replaces) key. */
void vt_ckpt_meta_set(vt_ckpt_meta *m, const char *key, const char *val);
const char *vt_ckpt_meta_get(const vt_ckpt_meta *m, const char *key); /* NULL if absent */
void vt_ckpt_meta_free(vt_ckpt_meta *m);

/* One tensor of a file, as its header describes it. */
typedef struct vt_ckpt_tensor {
    char *name;
    int is_int64;       /* dtype I64 (else F32) */
    int ndim;
    int64_t shape[8];
    int64_t numel;
    int64_t begin, end; /* byte offsets into the data section */
} vt_ckpt_tensor;

/* What vt_ckpt_read_info learns without a net: enough to build one. */
typedef struct vt_ckpt_info {
    char *path;
    vt_ckpt_meta meta;
    int ntensors;
    vt_ckpt_tensor *tensors; /* header order */
    int64_t data_start;      /* file offset of the data section */
    int64_t file_size;
} vt_ckpt_info;

/* One tensor to write: numel floats of host memory; an I64 tensor is written as those
 * floats rounded to integers (num_batches_tracked is kept as a float). */
typedef struct vt_ckpt_out {
    const char *name;
    const float *data;
    int64_t numel;
    int is_int64;
    int ndim;
    const int64_t *shape;   /* (ndim); ndim 0: a scalar */
} vt_ckpt_out;

/* Writes meta (may be NULL) and the nouts tensors, in that order, to path atomically
 * (see the top of this file). 0, or -1 with err naming the path. */
int vt_ckpt_write_file(const char *path, const vt_ckpt_meta *meta, const vt_ckpt_out *outs,
                       int nouts, char *err, size_t errlen);

/* Reads and validates the header only (+ file layout). 0, or -1 with err. */
int vt_ckpt_read_info(vt_ckpt_info *info, const char *path, char *err, size_t errlen);
void vt_ckpt_info_free(vt_ckpt_info *info);
const vt_ckpt_tensor *vt_ckpt_find(const vt_ckpt_info *info, const char *name);
/* Reads one tensor's data into host memory as floats (I64 converted). 0 or -1 + err. */
int vt_ckpt_read_tensor(const vt_ckpt_info *info, const vt_ckpt_tensor *t, float *host_out,
                        char *err, size_t errlen);

#endif
