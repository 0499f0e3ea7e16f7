/*
 * thread.h: starting a thread. A thread the system refuses (EAGAIN: the limit on
 * processes, ulimit -u, or on memory, ulimit -v) is the environment's failure, not a
 * program error: the command stops with the reason and the limit to raise, exit 1, where
 * VT_CHECK's abort said only "check failed: pthread_create(...) == 0" and dumped core.
 * Nothing safe is lost: every file vidtrain keeps is written whole or not at all.
 *
 * It must never return without the thread started.
 */
#ifndef VT_THREAD_H
#define VT_THREAD_H

#include <pthread.h>

/* pthread_create(t, NULL, fn, arg); on failure says so, naming `what` (the loader's
 * workers, the towers), and exits 1. */
void vt_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *what);

#endif
