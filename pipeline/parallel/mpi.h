/*
 * mpi.h: the processes of a run (docs/design.md §5.3: several processes or machines under
 * `mpirun` or `srun`; nothing home-made). Each process is one rank and holds its own
 * towers; the towers (tower.c), the MPI reducer (reduce_mpi.c) and the commands meet
 * through the few collectives below.
 *
 * Without a launcher in the environment (none of OMPI_COMM_WORLD_SIZE, PMIX_RANK,
 * PMI_RANK, PMI_SIZE) MPI is never initialised and vidtrain is the one-process program:
 * rank 0 of 1, every collective a copy. A build without MPI refuses to run as one of
 * several ranks (each would train alone and write the same run folder).
 *
 * No rank waits forever. Collectives are point-to-point messages that this file polls:
 * when a peer sends nothing for vt_mpi_timeout() seconds (VT_MPI_TIMEOUT, default 600)
 * or MPI reports an error about it, the rank prints which rank it was waiting for, in
 * what and on which host, and ends the whole job with MPI_Abort, so every rank exits
 * non-zero. A signal that arrives while a rank waits (the launcher stopping the job after
 * a peer died) is reported the same way, naming the ranks not heard from.
 *
 * Sums are taken in rank order by one owner per element (a reduce-scatter then an
 * all-gather, each plain data movement), so every rank gets bitwise the same result and
 * that result does not depend on the MPI library's choices: never MPI_Allreduce, whose
 * order the implementation picks (docs/design.md §3.1, §3.5).
 *
 * Threads: MPI is called by one thread at a time — the main thread between steps, one
 * tower thread per process inside a step — and every rank calls the collectives in the
 * same order. This file must never decide what to train: it moves bytes and names
 * who is late.
 */
#ifndef VT_MPI_H
#define VT_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

/* What one fixed-order sum cost this rank (accumulated by vt_mpi_sum_f32). */
typedef struct vt_mpi_sum_stats {
    double wait_s;          /* until every rank had arrived */
    double reduce_s;        /* exchanging and summing after that */
    int64_t wire_bytes;     /* bytes this rank sent to other ranks */
} vt_mpi_sum_stats;

/* Help text for the commands that span processes (train, eval, bench step). */
extern const char vt_mpi_help[];

/* Initialises MPI when a launcher started this process (MPI_Init_thread: MPI calls
 * come from tower threads too), learns every rank's host and pid, reads VT_MPI_TIMEOUT.
 * 0; -1 with err set when launched as one of several ranks by a vidtrain without MPI
 * or when the MPI library cannot serve several threads. */
int vt_mpi_init(int *argc, char ***argv, char *err, size_t errlen);
/* At exit with the command's code: MPI_Finalize, or MPI_Abort when rc != 0 and there are
 * other ranks (they may wait for this one in a collective). Returns rc. */
int vt_mpi_finalize(int rc);

int vt_mpi_rank(void);          /* 0 without MPI */
int vt_mpi_size(void);          /* 1 without MPI */
const char *vt_mpi_host(int rank);
int vt_mpi_pid(int rank);
double vt_mpi_timeout(void);    /* seconds a collective waits for a silent peer */

/* The signal check of the command (app/signals.c vt_signal_pending): polled while waiting. */
void vt_mpi_set_signal_check(int (*pending)(void));
int vt_mpi_signal_pending(void);
/* Where the run is ("training step 12"), for the messages of a late peer. */
void vt_mpi_set_context(const char *fmt, ...) VT_PRINTF(1, 2);

/* Prints "vidtrain: rank R (host H, pid P): MESSAGE" and ends every rank (MPI_Abort with
 * code; exit(code) without MPI). */
VT_NORETURN void vt_mpi_abort(int code, const char *fmt, ...) VT_PRINTF(2, 3);

/* ---- collectives (every rank, same order; `what` names them in messages) ---- */

/* all (size * bytes) = every rank's `mine` (bytes) in rank order. */
void vt_mpi_allgather(const void *mine, void *all, size_t bytes, const char *what);
/* root's buf (bytes) into every rank's buf. */
void vt_mpi_bcast(void *buf, size_t bytes, int root, const char *what);
void vt_mpi_barrier(const char *what);
/* In place: buf (n) = the sum over ranks of buf, element by element in rank order
 * ((b0 + b1) + b2 ...), bitwise the same on every rank. st (may be NULL) accumulates its
 * cost. Every rank must pass the same n. */
void vt_mpi_sum_f32(float *buf, int64_t n, const char *what, vt_mpi_sum_stats *st);
void vt_mpi_sum_f64(double *buf, int64_t n, const char *what);
/* The same for int64 (an integer sum: exact, the exact sums of models/xsum.h). */
void vt_mpi_sum_i64(int64_t *buf, int64_t n, const char *what, vt_mpi_sum_stats *st);

#endif
