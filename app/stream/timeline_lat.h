/*
 * timeline_lat.h: `predict --timeline --stats` — the latency of each window (from its last
 * frame's arrival to its line going out) gathered in bounded memory for a median and a
 * maximum at the end, however long a live stream runs.
 *
 * It must never grow with the number of windows: a histogram of 1 ms bins up to 60 s
 * (the median to within 1 ms), the maximum kept exactly.
 */
#ifndef VT_TIMELINE_LAT_H
#define VT_TIMELINE_LAT_H

#include <stdint.h>

#define VT_LAT_BINS 60000

typedef struct vt_lat {
    int64_t n;
    double max, sum;
    uint32_t *bins;         /* (VT_LAT_BINS) windows per ms of latency; the last: beyond */
} vt_lat;

void vt_lat_init(vt_lat *l);
void vt_lat_free(vt_lat *l);
void vt_lat_add(vt_lat *l, double seconds);
/* The median in seconds (the middle bin's centre, to 1 ms; 0 when empty). */
double vt_lat_median(const vt_lat *l);

#endif
