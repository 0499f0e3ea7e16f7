/*
 * thread.c: vt_thread_start (thread.h).
 */
#include "base/thread.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void vt_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *what) {
    int e = pthread_create(t, NULL, fn, arg);
    if (e == 0)
        return;
    fflush(stdout);
    fprintf(stderr, "vidtrain: cannot start a thread for %s: %s: the limit on processes "
            "(ulimit -u) or on memory (ulimit -v) is reached; raise it, or give fewer "
            "--workers, --threads or --jobs\n", what, strerror(e));
    _exit(1); /* other threads hold locks: no atexit handler may run after this */
}
