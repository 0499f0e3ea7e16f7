/*
 * bytes_text.h: a byte count as people read it ("1.50 GiB", "512.0 MiB", "3 B"), the one
 * look of every figure vidtrain prints. A header of its own, with nothing to include, so
 * that base/host_mem.c and base/alloc.c, which common.c's allocation calls, write the same
 * figures as common.h's vt_fmt_bytes without calling back into common.c.
 */
#ifndef VT_BYTES_TEXT_H
#define VT_BYTES_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* bytes -> buf (n bytes); returns buf. */
static inline const char *vt_bytes_text(char *buf, size_t n, int64_t bytes) {
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0)
        snprintf(buf, n, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, n, "%lld B", (long long)bytes);
    return buf;
}

#endif
