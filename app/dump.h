/*
 * dump.h: `vidtrain train --dump DIR` — what a PyTorch twin needs to replay a training run
 * step by step (tests/oracle/torch_twin.py parity): the state before the first step and after
 * every step, every batch exactly as the towers received it with the learning rate and
 * momentum of its step, and the last validation's inputs with vidtrain's outputs.
 *
 *   DIR/dump.json            model, clip, heads, optimizer and schedule as resolved
 *                            (warm-up and total length in steps)
 *   DIR/state_%06d.safetensors  the state (weights, BN buffers, optimizer) after that
 *                            many steps (000000: before the first), a vidtrain checkpoint
 *   DIR/train.jsonl          per step: "step" (1-based), "file", "shape" (N,3,T,H,W),
 *                            "labels" (head 0), "lr", "momentum", "loss" (mean over the
 *                            batch), "drop_seed" (vt_towers_dropout_base, a decimal
 *                            string: clip i's dropout and drop path draw from it + i),
 *                            "mix" (with --mixup/--cutmix: [kind 1 mixup 2 CutMix, lam,
 *                            y0, y1, x0, x1]; the batch is the mixed one, "labels" each
 *                            clip's dominant label: its partner's when lam < 0.5),
 *                            "videos", "where" ([start, short side, x0, y0, flip,
 *                            stride] per clip), "color" ([contrast, brightness])
 *   DIR/train_%06d.f32       the batch's normalised input, float32, (N, 3, T, H, W)
 *   DIR/eval.jsonl           per batch of the last validation: "file", "shape", "labels",
 *                            "probs" (the file of vidtrain's softmax outputs, (N, classes))
 *   DIR/eval_%06d.f32, DIR/eval_%06d.probs.f32
 *
 * A debugging and testing aid: it writes every batch (a 16x112x112 clip is 2.4 MB) and
 * every state (three floats a parameter with SGD), so use it on small runs. It must never change what training computes; under mpirun only
 * rank 0 writes (its batches are its own part).
 */
#ifndef VT_DUMP_H
#define VT_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/batch.h"
#include "pipeline/data/mix.h"

typedef struct vt_dump vt_dump;

/* Creates DIR (mkdir -p) and writes DIR/dump.json from info (a JSON object, not taken).
 * NULL with err on failure. */
vt_dump *vt_dump_open(const char *dir, const char *info_json, char *err, size_t errlen);
void vt_dump_close(vt_dump **d);
const char *vt_dump_dir(const vt_dump *d);
/* One training step's batch (before or after the step: it only reads b). 0 or -1+err. */
int vt_dump_train(vt_dump *d, const vt_batch *b, long long step, double lr, double momentum,
                  double loss, uint64_t drop_seed, const vt_mix_draw *mix, char *err,
                  size_t errlen);
/* One evaluation batch with head 0's probabilities (b->n, classes). 0 or -1 + err. */
int vt_dump_eval(vt_dump *d, const vt_batch *b, const float *probs, int classes, char *err,
                 size_t errlen);

#endif
