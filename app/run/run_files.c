/*
 * run_files.c: the run folder's small files (run_files.h). Only rank 0 writes them under
 * mpirun; every write is vt_file_write_atomic's. It must never leave a half-written
 * file where a reader could see it.
 */
#include "app/run/run_files.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "base/common.h"
#include "pipeline/parallel/mpi.h"
#include "base/json_str.h"

/* The rank is mpi.h's, asked directly: app/dist.c builds on this file, not the reverse. */
int vt_run_lead(void) { return vt_mpi_rank() == 0; }

char *vt_run_path_trim(char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = 0;
    return path;
}

int vt_run_mkdirs(const char *path, char *err, size_t errlen) {
    if (!vt_run_lead()) /* several processes: rank 0 owns the run folder */
        return 0;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            vt_set_err(err, errlen, "cannot create %s: %s", buf, strerror(errno));
            return -1;
        }
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
        vt_set_err(err, errlen, "cannot create %s: %s", buf, strerror(errno));
        return -1;
    }
    return 0;
}

cJSON *vt_file_read_json(const char *path) {
    char *s = vt_file_read(path);
    if (!s)
        return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

int vt_run_write_file(const char *path, const char *text, char *err, size_t errlen) {
    if (!vt_run_lead()) /* several processes: rank 0 owns the run folder */
        return 0;
    return vt_file_write_atomic(path, text, strlen(text), err, errlen);
}

int vt_run_write_json(const char *path, const cJSON *j, char *err, size_t errlen) {
    char *s = vt_json_print(j, 1);
    VT_CHECK_MEM(s != NULL, "a JSON text");
    size_t n = strlen(s);
    char *t = vt_malloc(n + 2);
    memcpy(t, s, n);
    t[n] = '\n';
    t[n + 1] = 0;
    cJSON_free(s);
    int rc = vt_run_write_file(path, t, err, errlen);
    free(t);
    return rc;
}
