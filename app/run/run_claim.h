/*
 * run_claim.h: a run folder belongs to one run (docs/design.md §3.8). Before any work,
 * `train` claims --out: a folder (never a file), writable, not inside the dataset, that
 * holds no other run unless --resume continues it or --force replaces it, and that no
 * other train is using (an flock on RUN/.lock, held until the process ends) nor an eval
 * (a shared flock on it, held while eval writes into the run). A start that
 * fails gives back what it made. It must never leave half of an old run beside a new one:
 * --force removes the old run's files together, before anything new is written.
 */
#ifndef VT_RUN_CLAIM_H
#define VT_RUN_CLAIM_H

#include <stddef.h>

typedef struct vt_run_claim {
    int fd;          /* RUN/.lock, flocked; -1 when none is held */
    int created;     /* the folder did not exist before the claim */
    int wrote;       /* this start may have written config.json / plan.txt */
    char out[2048];
    char *kept[3];   /* --resume: config.json, plan.txt, leaks.json as the start found them
                      * (NULL: absent), put back by a failed start (the run stays resumable) */
} vt_run_claim;

/* Claims `out` for a run (rank 0 only: the others return 0). data and val_dir (may be
 * NULL or "") are the dataset folders it must not lie in. resume: out holds the run to
 * continue; force: an old run there is removed. 0, or 1 after printing why. */
int vt_run_claim_take(vt_run_claim *c, const char *out, const char *data, const char *val_dir,
                      int resume, int force);
/* After a failed start (failed = 1): removes config.json and plan.txt when this start
 * wrote them, and the folder when the claim made it and it is empty; a failed --resume
 * puts back config.json, plan.txt and leaks.json as it found them (a start that wrote
 * another --model into config.json, then could not load the checkpoint, left a run that
 * no --resume could open). Then releases the lock. Takes a claim that holds nothing. */
void vt_run_claim_release(vt_run_claim *c, int failed);

/* For the commands that read a run (eval, predict, embed, export): declares every file of
 * the run's record (run.h's layout, tb/ and .lock) as an input of this command
 * (base/common.h vt_inputs_add), so that no output of it may replace one (export --onnx
 * RUN/metrics.jsonl, embed --out RUN/metrics.npy with its RUN/metrics.csv, predict
 * --dump-input RUN/val.json replaced them, exit 0). writes: the files of the record the
 * command writes itself (eval's eval.json, confusion.csv and report.html), NULL-terminated,
 * or NULL for none. */
void vt_run_claim_inputs(const char *run, const char *const *writes);

/* For the commands that write into a run's folder (eval): a run folder belongs to one
 * run. 1 when a train holds `run` now (RUN/.lock flocked by a live process), with its pid
 * (from the lock file; "" when unknown) in pid, and nothing held. Else 0 with *fd a shared
 * hold on RUN/.lock that keeps a train (--resume) from starting there until
 * vt_run_claim_unshare(fd) or the process ends; -1 when there is no lock file and make is
 * 0 (a folder not yet known to be a run is left as it was), or when it cannot be made. */
int vt_run_claim_share(const char *run, int make, char *pid, size_t n, int *fd);
void vt_run_claim_unshare(int *fd);
/* For a command that writes several files into a folder that belong together (eval's
 * eval.json, confusion.csv and report.html in a run; embed's FILE and FILE.csv): waits
 * for, then takes, an exclusive flock on the folder itself, so that two such commands at
 * once write their sets one after the other (interleaved, eval.json told of one split and
 * confusion.csv of the other). The fd to give vt_run_claim_unshare, or -1 when the
 * folder cannot be opened (then nothing is held and the writes go ahead). */
int vt_run_claim_writes(const char *run);

#endif
