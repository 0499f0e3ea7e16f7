/*
 * runclean.c: removes the temporary files that interrupted atomic writes left in a run
 * folder (runclean.h), so a run killed with SIGKILL during a checkpoint write does not
 * leave a 2 MB "last.safetensors.tmp.Ab3xYz" behind for every kill.
 *
 * It must never remove a file that is not one of those temporaries: names are matched
 * exactly (a base name, then ".tmp." and six mkstemp characters or a PID, or "." PID
 * ".tmp"), only regular files directly in the folder are considered (no recursion, links
 * not followed), and a PID-named file whose process is alive is left alone.
 */
#include "app/run/runclean.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

/* s[0..n) is a process id: 1 to 9 digits (Linux pids are below 2^22), no sign. */
static int parse_pid(const char *s, size_t n, long *pid) {
    if (n == 0 || n > 9)
        return 0;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v <= 0)
        return 0;
    *pid = v;
    return 1;
}

int vt_run_temp_name(const char *name, long *pid) {
    size_t n = strlen(name);
    long p = 0;
    const char *t;
    if (strchr(name, '/'))
        return 0;
    /* "BASE.tmp.SUFFIX": SUFFIX is mkstemp's six letters/digits, or a PID. */
    t = n > 5 ? strstr(name, ".tmp.") : NULL;
    while (t && strstr(t + 1, ".tmp."))
        t = strstr(t + 1, ".tmp.");
    if (t && t > name) {
        const char *sfx = t + 5;
        size_t k = strlen(sfx);
        if (parse_pid(sfx, k, &p)) {
            *pid = p;
            return 1;
        }
        int alnum = k == 6;
        for (size_t i = 0; alnum && i < k; i++)
            alnum = isalnum((unsigned char)sfx[i]) != 0;
        if (alnum) {
            *pid = 0;
            return 1;
        }
    }
    /* "BASE.PID.tmp" (vt_write_file_atomic before the run files moved to base/common). */
    if (n > 4 && !strcmp(name + n - 4, ".tmp")) {
        const char *end = name + n - 4;
        const char *dot = end;
        while (dot > name && dot[-1] != '.')
            dot--;
        if (dot > name + 1 && parse_pid(dot, (size_t)(end - dot), &p)) {
            *pid = p;
            return 1;
        }
    }
    return 0;
}

/* A PID-named temporary file belongs to a live writer when that process exists. */
static int pid_alive(long pid) {
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

int vt_run_clean_temps(const char *run_dir, char *err, size_t errlen) {
    DIR *d = opendir(run_dir);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* a new run: nothing to clean */
        vt_set_err(err, errlen, "cannot read the run folder %s: %s", run_dir, strerror(errno));
        return -1;
    }
    int removed = 0, failed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        long pid = 0;
        if (!vt_run_temp_name(e->d_name, &pid))
            continue;
        if (pid > 0 && pid_alive(pid))
            continue;
        size_t len = strlen(run_dir) + strlen(e->d_name) + 2;
        char *path = vt_malloc(len);
        snprintf(path, len, "%s/%s", run_dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (unlink(path) == 0) {
                removed++;
                vt_info("removed %s: a temporary file left by an interrupted write\n", path);
            } else if (errno != ENOENT) {
                if (!failed)
                    vt_set_err(err, errlen, "cannot remove the leftover %s: %s", path,
                               strerror(errno));
                failed++;
            }
        }
        free(path);
    }
    closedir(d);
    return failed ? -1 : removed;
}
