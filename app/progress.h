/*
 * progress.h: the per-epoch progress display — clips/s, loss, accuracy, ETA and the
 * data-wait share (how much of the step time the towers spent waiting for the loader).
 *
 * On a terminal it redraws one line in place (at most 10 times a second). Anywhere else
 * (a pipe, a log file, CI) it is quiet and prints a plain log line every `log_every`
 * steps and once at the end, so logs stay readable. It must never decide anything about
 * training: it only displays what it is given.
 */
#ifndef VT_PROGRESS_H
#define VT_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct vt_progress vt_progress;

/* f: where to draw (stderr usually). title: "epoch 3/10". total: steps in this epoch;
 * first: the step it starts at (non-zero after a mid-epoch resume, so the ETA only uses
 * steps run now). tty: 1 on a terminal, 0 for log lines, -1 = isatty(fileno(f)).
 * log_every: steps between log lines when not on a terminal (0 = only the end). */
vt_progress *vt_progress_init(FILE *f, const char *title, int64_t total, int64_t first, int tty,
                              int log_every);
/* done: steps finished in this epoch (counting `first`); clips: clips run since init;
 * loss, acc: running means over the epoch; wait_share: data wait / step time in [0, 1]. */
void vt_progress_update(vt_progress *p, int64_t done, int64_t clips, double loss, double acc,
                        double wait_share);
/* Ends the line (terminal) or prints the last log line; `extra` (may be NULL) is
 * appended, e.g. the validation figures. */
void vt_progress_finish(vt_progress *p, const char *extra);
void vt_progress_free(vt_progress **p);

/* Formats the line the display would show (for tests and log lines). */
void vt_progress_format(char *buf, size_t n, const char *title, int64_t done, int64_t total,
                        double clips_per_s, double loss, double acc, double wait_share,
                        double eta_s, int bar_width);

#endif
