/*
 * thread.c: vt_thread_start (thread.h).
 */
#include "base/thread.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes_text.h"
#include "base/host_mem.h"

void vt_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *what) {
    int e = pthread_create(t, NULL, fn, arg);
    if (e == 0)
        return;
    vt_host_mem m; /* which memory limit, and what it leaves (a new stack needs one) */
    vt_host_mem_get(&m);
    char said[700], left[32];
    fflush(stdout);
    fprintf(stderr, "vidtrain: cannot start a thread for %s: %s: the limit on processes "
            "(ulimit -u) or on memory (%s left under %s) is reached; raise it, or give fewer "
            "--workers, --threads or --jobs\n", what, strerror(e),
            vt_bytes_text(left, sizeof left, m.available),
            vt_host_mem_said(&m, said, sizeof said));
    _exit(1); /* other threads hold locks: no atexit handler may run after this */
}
