/*
 * run.h: the run folder, and where each of its parts is handled. It only includes the
 * headers below, for code that wants all of them (tests of whole runs); app/ files
 * include the one they use. It must never declare anything itself.
 *
 * Run folder layout:
 *   config.json        resolved configuration (vt_train_opts, plus the heads; the paths
 *                      it reads as absolute paths, app/train/train.c absolute_paths):
 *                      app/train/train_opts.h, app/run/run_heads.h
 *   plan.txt           devices, slice plan and memory plan as printed before training
 *   metrics.jsonl      one JSON object per line: {"kind":"step",...} every --log-every
 *                      steps and {"kind":"epoch",...} per epoch; each has "step"
 *   metrics.csv        the epoch lines as a table (regenerated from metrics.jsonl):
 *                      app/eval/metrics.h
 *   last.safetensors   checkpoint every epoch (and every --checkpoint-every steps, and
 *                      on Ctrl-C); best.safetensors by validation video top-1 (ties:
 *                      the lower validation loss): app/run/run_ckpt.h
 *   val.json           last validation (same shape as eval.json): app/eval/evaluate.h
 *   eval.json, confusion.csv   from `vidtrain eval`
 *   report.html        app/eval/report.h
 *   leaks.json         the leak check of the run's splits: app/leaks.h
 *   tb/                TensorBoard's event files, appended: app/eval/tensorboard.h
 *   .last.safetensors.set, .eval.json.set   the commit records of the sets read together
 *                      (an epoch's last, best and val.json; eval's three): there only
 *                      while, or after a kill when, a set is half replaced: base/fileset.h
 * Every file that a reader may see half-done is written atomically (app/run/run_files.h),
 * and files read together are replaced together (base/fileset.h);
 * the logs that grow (metrics.jsonl, tb/) are appended whole or cut back (vt_file_append);
 * under mpirun only rank 0 writes the run folder (app/dist.h).
 */
#ifndef VT_RUN_H
#define VT_RUN_H

#include "app/eval/evaluate.h"
#include "app/eval/metrics.h"
#include "app/opts.h"
#include "app/run/run_ckpt.h"
#include "app/run/run_files.h"
#include "app/run/run_heads.h"
#include "app/run/run_model.h"
#include "app/signals.h"
#include "app/train/train_opts.h"

#endif
