/*
 * tensorboard.h: RUN/tb/, TensorBoard's event files (docs/tensorboard.md), so that
 * `tensorboard --logdir RUN` shows a run: every number of every metrics.jsonl line as a
 * scalar ("step/loss", "epoch/val_acc", "epoch/lr", "epoch/clips_per_s",
 * "epoch/data_wait", ...) at the line's step, and each validation's confusion matrix as
 * an image ("confusion/<head>", a PNG made by FFmpeg's png encoder).
 *
 * The format: a file of TFRecords (uint64 length, its masked CRC32C, the bytes, their
 * masked CRC32C; little-endian), each an Event protocol buffer (wall_time 1, step 2,
 * file_version 3, summary 5; Summary.value 1: tag 1, simple_value 2, image 4; Image:
 * height 1, width 2, colorspace 3, encoded_image_string 4), written with our own
 * protobuf writer (models/formats/protobuf.h). Each process start opens a new file
 * events.out.tfevents.<seconds>.<host>.<pid>.vidtrain whose first record says the
 * version ("brain.Event:2"); records are appended whole with vt_file_append (the output
 * rule, one write each). Under mpirun only rank 0 writes.
 *
 * It must never stop a run: a file that cannot be written is said once, and the run
 * goes on with metrics.jsonl, which stays the record.
 */
#ifndef VT_TENSORBOARD_H
#define VT_TENSORBOARD_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* The numbers of one metrics.jsonl line ({"kind":K,"step":S,...}) as scalars K/key at S. */
void vt_tb_metrics(const char *run_dir, const cJSON *line);
/* The confusion matrices of an eval JSON (app/eval/evaluate.h: heads[].confusion) as
 * images "confusion/<head>" at step. */
void vt_tb_confusion(const char *run_dir, int64_t step, const cJSON *eval_json);
/* One RGB24 image (w x h, packed) as tag at step. */
void vt_tb_image(const char *run_dir, int64_t step, const char *tag, const uint8_t *rgb, int w,
                 int h);

/* The first n clips of a training batch as images "clips/<k>" at step: each a strip
 * of its T frames, left to right, undone from the normalisation (the clip transform's
 * mean and std named `norm`, pipeline/data/sample.h vt_clip_set_norm), as the network
 * saw them (crop, flip, jitter). */
struct vt_batch;
void vt_tb_clips(const char *run_dir, int64_t step, const struct vt_batch *b, int n,
                 const char *norm);

/* CRC32C (Castagnoli, reflected 0x82F63B78) of n bytes, and TFRecord's mask of it. */
uint32_t vt_crc32c(const void *p, size_t n);
static inline uint32_t vt_crc32c_mask(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

#endif
