/*
 * dist.h: what train and eval do differently when several processes run them (mpirun,
 * srun; pipeline/parallel/mpi.h). Every rank runs the same command; rank 0 alone reads and writes
 * the run folder (the others may have no copy of it), so what a command reads from the
 * run folder reaches the other ranks from rank 0, and the options that define the run
 * must agree (device options may differ: each machine has its own devices).
 *
 * Every function here is a collective when there are several processes (all ranks call
 * it at the same point) and a plain local action in a one-process run. It must never
 * write a file on a rank other than 0.
 */
#ifndef VT_DIST_H
#define VT_DIST_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "app/train/train_opts.h"
#include "pipeline/data/dataset/dataset.h"

/* 1 on the rank that owns the run folder (rank 0, or the only process): run_files.h's
 * vt_run_lead, which this file builds on (the run folder's files never depend on it). */
int vt_dist_lead(void);

/* The options that define the run (all but device, path and decode-thread options) are
 * rank 0's on every rank: 0, or -1 with err naming the first rank and option that
 * differ (the same answer on every rank). */
int vt_dist_check_opts(const vt_train_opts *o, char *err, size_t errlen);

/* Rank 0's copy of a JSON file (NULL when rank 0 cannot read it), on every rank. */
cJSON *vt_dist_read_json(const char *path);

/* Rank 0's (rc, err) on every rank: for a step only rank 0 does (reading a checkpoint). */
int vt_dist_share_result(int rc, char *err, size_t errlen);

/* config.json "ranks": every rank's device options, so that `--resume` gives each rank
 * its own devices back (vt_dist_resume_devices); nothing is added in a one-process run. */
void vt_dist_add_rank_devices(cJSON *config, const vt_train_opts *o);
/* Resume: this rank's saved device options from config "ranks", when it has an entry
 * (options given on the command line still override them afterwards). */
void vt_dist_resume_devices(vt_train_opts *o, const cJSON *config);

/* The dataset is the same on every rank (videos, labels, splits; ends the job naming the
 * rank that differs, since training on different data is meaningless) and a video any
 * rank found unreadable is excluded on every rank, so that epoch orders agree. Call
 * before building an epoch order (a loader, vt_loader_start_epoch). */
void vt_dist_dataset_sync(vt_dataset *ds, const char *what);

#endif
