/*
 * runclean.h: leftovers of interrupted writes in a run folder. Every file vidtrain
 * writes there goes to a temporary name beside it and is renamed over the target
 * (checkpoints: "NAME.tmp.XXXXXX" from mkstemp; small files: "NAME.tmp.PID", and
 * "NAME.PID.tmp" in older builds). A process killed between the create and the rename
 * (kill -9, power loss, OOM) leaves that temporary file behind; training removes them when
 * it starts, before it writes anything.
 *
 * It must never remove anything else: only regular files directly in the run folder
 * whose names have exactly one of those shapes, and never a PID-named file of a process
 * that is still alive (another writer).
 */
#ifndef VT_RUNCLEAN_H
#define VT_RUNCLEAN_H

#include <stddef.h>

/* 1 when name (a file name, no '/') has the shape of a temporary file of the atomic
 * writers (above); *pid gets the PID it names, or 0 for a mkstemp name. */
int vt_run_temp_name(const char *name, long *pid);

/* Removes the leftover temporary files in run_dir, each named in one info line. Returns
 * how many were removed (0 when run_dir does not exist yet), or -1 with err set when the
 * folder cannot be read or a leftover cannot be removed (the others still are). */
int vt_run_clean_temps(const char *run_dir, char *err, size_t errlen);

#endif
