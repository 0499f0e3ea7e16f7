/*
 * metrics.h: the run's metrics files. RUN/metrics.jsonl holds one JSON object per line:
 * {"kind":"step",...} every --log-every steps and {"kind":"epoch",...} per epoch, each
 * with its global "step"; RUN/metrics.csv is the epoch lines as a table, regenerated
 * from metrics.jsonl whenever an epoch line is added.
 *
 * It must never rewrite a line it did not drop: lines are appended whole, and a resume
 * only cuts the lines past the checkpoint's step. Under mpirun only rank 0 writes.
 */
#ifndef VT_METRICS_H
#define VT_METRICS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Appends one line to RUN/metrics.jsonl; an {"kind":"epoch"} line also regenerates
 * RUN/metrics.csv (columns = the numeric keys of the epoch lines, first-seen order). */
int vt_metrics_append(const char *run_dir, const cJSON *line, char *err, size_t errlen);
/* Resume: keep only lines whose "step" <= keep_step (what the checkpoint had seen), so
 * a resumed run does not log the same steps twice; regenerates metrics.csv. The number of
 * lines dropped (for the resume to say), or -1 with err. */
int vt_metrics_truncate(const char *run_dir, int64_t keep_step, char *err, size_t errlen);
int vt_metrics_write_csv(const char *run_dir, char *err, size_t errlen);
/* The {"kind":"epoch"} lines of RUN/metrics.jsonl in file order, as cJSON objects into
 * *out (lines that are not JSON are skipped). Returns their count, 0 when the file is
 * absent; free with vt_metrics_epochs_free. */
int vt_metrics_epochs(cJSON ***out, const char *run_dir);
void vt_metrics_epochs_free(cJSON **lines, int n);

#endif
