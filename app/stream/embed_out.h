/*
 * embed_out.h: what `vidtrain embed` writes — the embeddings (N, D) float32 as a
 * safetensors file (one tensor "embeddings" plus string metadata) or a NumPy .npy, as
 * the --out extension says, and beside it a CSV naming each row: index, path, start and
 * end (seconds; empty for a whole file), clip and crop (--per-clip), then per head the
 * predicted label and its probability (predict's top-1 for the same clips), and last the
 * damage its frames met (decode_errors, filled_frames: 0 and 0 for a clean read).
 *
 * Rows are kept in memory until the end (D floats and a path each: a million videos at
 * D = 512 is 2 GB) and written atomically, so a reader never sees half a file. It knows
 * nothing of models or videos.
 */
#ifndef VT_EMBED_OUT_H
#define VT_EMBED_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "app/run/run_heads.h"
#include "models/formats/safetensors.h"

typedef enum vt_embed_format { VT_EMBED_NPY, VT_EMBED_SAFETENSORS } vt_embed_format;

typedef struct vt_embed_row {
    char *path;                  /* owned */
    double start, end;           /* seconds; end <= 0: the whole file (empty cells) */
    int clip, crop;              /* --per-clip: which clip and crop; -1 otherwise */
    int label[VT_MAX_HEADS];     /* top-1 class per head; -1: the head's scores are not
                                    finite (a diverged model), its two cells empty; -2:
                                    the top score is shared (a tie), no class named, its
                                    label cell empty and prob the shared score */
    float prob[VT_MAX_HEADS];    /* its probability (sigmoid for BCE heads) */
    int64_t decode_errors;       /* a damaged stream: decode errors the row's frames met
                                    (packets rejected, pictures the decoder repaired) */
    int64_t filled_frames;       /* frames of its clips the stream never delivered, filled
                                    with the nearest decoded frame (0 for a window) */
} vt_embed_row;

typedef struct vt_embed_set {
    int dim;                     /* D */
    int64_t n, cap;
    float *x;                    /* (n, dim) */
    vt_embed_row *rows;          /* (n) */
} vt_embed_set;

/* The format for an --out path (.npy, .safetensors, any case), or -1 for another. */
int vt_embed_format_of(const char *out);
/* The CSV beside out: its extension replaced by .csv (into buf, n bytes; returns buf). */
const char *vt_embed_csv_path(const char *out, char *buf, size_t n);

/* A new row with features feat (dim, copied) and path (copied); the rest -1 / 0 for the
 * caller to fill. The pointer is valid until the next add. */
vt_embed_row *vt_embed_add(vt_embed_set *s, const float *feat, const char *path);
void vt_embed_set_free(vt_embed_set *s);

/* Writes the embeddings to out (meta: safetensors only, may be NULL) and the CSV beside
 * it, each atomically and both as one set (base/fileset.h: the record .OUT.set beside
 * them while they are replaced). 0, or -1 with err naming the file. */
int vt_embed_write(const vt_embed_set *s, const char *out, const vt_ckpt_meta *meta,
                   const vt_run_heads *heads, char *err, size_t errlen);

#endif
