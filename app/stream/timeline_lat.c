/*
 * timeline_lat.c: latencies of `--stats` (timeline_lat.h) — a histogram of 1 ms bins.
 */
#include "app/stream/timeline_lat.h"

#include <stdlib.h>

#include "base/common.h"

void vt_lat_init(vt_lat *l) {
    l->n = 0;
    l->max = l->sum = 0;
    l->bins = vt_calloc(VT_LAT_BINS, sizeof *l->bins);
}

void vt_lat_free(vt_lat *l) {
    free(l->bins);
    l->bins = NULL;
}

void vt_lat_add(vt_lat *l, double seconds) {
    if (seconds < 0)
        seconds = 0; /* clocks of one process: only rounding can make it negative */
    int64_t b = (int64_t)(seconds * 1000);
    l->bins[b < VT_LAT_BINS ? b : VT_LAT_BINS - 1]++;
    l->max = l->n ? VT_MAX(l->max, seconds) : seconds;
    l->sum += seconds;
    l->n++;
}

double vt_lat_median(const vt_lat *l) {
    if (l->n == 0)
        return 0;
    int64_t want = (l->n + 1) / 2, seen = 0;
    for (int b = 0; b < VT_LAT_BINS; b++) {
        seen += l->bins[b];
        if (seen >= want)
            return b == VT_LAT_BINS - 1 ? l->max : (b + 0.5) / 1000.0;
    }
    return l->max;
}
