/*
 * run_files.h: the run folder's small files — create the folder, read a JSON file, and
 * write one atomically (reading a whole file is base/common.h's vt_file_read). Under
 * mpirun only rank 0 writes the run folder (the writers here return 0 on the other
 * ranks, which may have no copy of it).
 *
 * It must never write in place: every write goes through vt_file_write_atomic
 * (base/common.h), so a reader (the report, a resumed run) never sees half a file.
 */
#ifndef VT_RUN_FILES_H
#define VT_RUN_FILES_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/common.h"

/* 1 on the process that owns the run folder and alone writes it: rank 0 under mpirun,
 * or the only process (app/dist.h's vt_dist_lead is this). */
int vt_run_lead(void);
/* mkdir -p (rank 0 only). 0, or -1 with err naming the folder that cannot be made. */
int vt_run_mkdirs(const char *path, char *err, size_t errlen);
/* A run folder's path as the command line gave it, less its trailing slashes, in place
 * ("./r7/" -> "./r7"; "/" stays): every path built from it ("%s/best.safetensors") then
 * has one slash, where "./r7//best.safetensors" was printed and kept in config.json.
 * Each command calls it once, where it takes the path (--out, --resume, RUN). path. */
char *vt_run_path_trim(char *path);
/* A JSON file (cJSON_Delete it), NULL when absent, unreadable or not JSON. */
cJSON *vt_file_read_json(const char *path);
/* text to path atomically (rank 0 only; vt_file_write_atomic). 0, or -1 with err. */
int vt_run_write_file(const char *path, const char *text, char *err, size_t errlen);
/* j, formatted and with a final newline, to path as vt_run_write_file does. */
int vt_run_write_json(const char *path, const cJSON *j, char *err, size_t errlen);

#endif
