/*
 * alloc.c: the allocations of common.h that never return NULL (vt_malloc, vt_calloc,
 * vt_realloc, vt_strdup, vt_freep), and what a refused one does: vt_out_of_memory names
 * the process's memory limit that refused it (host_mem.h) and what asks for less, and
 * exits 1. Out of memory is the environment's failure, neither a program error (VT_CHECK
 * aborted with a core and named nothing) nor a data error.
 *
 * It must never call back into common.c: common.c allocates through it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes_text.h"
#include "base/common.h"
#include "base/host_mem.h"

void vt_out_of_memory(size_t bytes, const char *what) {
    vt_host_mem m;
    vt_host_mem_get(&m);
    char said[700], a[32], b[32];
    fflush(stdout);
    if (bytes)
        vt_bytes_text(a, sizeof a, (int64_t)VT_MIN(bytes, (size_t)INT64_MAX));
    fprintf(stderr, "vidtrain: out of memory: %s%s%s was refused, with %s left under %s. Raise "
            "that limit, or ask for less: a smaller --batch or --clip, fewer --workers or "
            "--threads, a smaller --frame-cache (docs/design.md 3.8)\n", bytes ? a : "",
            bytes ? " for " : "memory for ", what, vt_bytes_text(b, sizeof b, m.available),
            vt_host_mem_said(&m, said, sizeof said));
    _exit(1); /* other threads hold locks: no atexit handler may run after this */
}

void *vt_malloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p)
        vt_out_of_memory(bytes, "vidtrain's own use");
    return p;
}

void *vt_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        vt_out_of_memory(n > 0 && size > SIZE_MAX / n ? SIZE_MAX : n * size,
                         "vidtrain's own use");
    return p;
}

void *vt_realloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        vt_out_of_memory(bytes, "vidtrain's own use");
    return q;
}

char *vt_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = vt_malloc(n);
    memcpy(d, s, n);
    return d;
}

void vt_freep(void *pp) {
    void **p = (void **)pp;
    if (p && *p) {
        free(*p);
        *p = NULL;
    }
}
