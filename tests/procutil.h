/*
 * procutil.h: waiting on a process a test started in the background (test_live.c,
 * test_prep_safety.c: a vidtrain run to signal or to watch while it works) — its exit
 * code within a deadline, and the moment a file it writes has reached some number of
 * lines. Header-only (static inline), like apputil.h; polling every 10 ms.
 *
 * It must never hide a failure: a process past its deadline is killed and reported as
 * -1, never as an exit code.
 */
#ifndef VT_PROCUTIL_H
#define VT_PROCUTIL_H

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "base/common.h" /* vt_now */

static inline void vt_test_nap(void) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Waits for pid up to `seconds`: its exit code as a shell reports it (128+N for signal
 * N), or -1 after killing it at the deadline. */
static inline int vt_test_reap(pid_t pid, double seconds) {
    int st;
    for (double end = vt_now() + seconds; vt_now() < end; vt_test_nap())
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* The newlines in file path (0 when it cannot be read). */
static inline int vt_test_count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

/* Waits until path has n lines while pid runs (at most 120 s): 1 when it has. A pid that
 * ended stays for vt_test_reap (WNOWAIT). */
static inline int vt_test_wait_lines(const char *path, int n, pid_t pid) {
    for (double end = vt_now() + 120; vt_now() < end; vt_test_nap()) {
        if (vt_test_count_lines(path) >= n)
            return 1;
        siginfo_t si;
        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
            return vt_test_count_lines(path) >= n;
    }
    return 0;
}

#endif
