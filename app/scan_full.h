/*
 * scan_full.h: `vidtrain scan DIR --full` — every frame of every readable video decoded
 * once, front to back, to find the damage a plain scan cannot see: a plain scan opens
 * each file and decodes its first frame, so a file whose middle is corrupt scans fine.
 * Damage is what the training loader would meet: packets the decoder rejects, pictures
 * it repairs (error concealment), indexed frames that never decode, a decode that stops
 * midway (vt_video_stats; the ffmpeg command's `ffmpeg -v error -i F -f null -` says the
 * same of the same file, docs/decode.md).
 *
 * It must never change the dataset or write a file: it reads and reports.
 */
#ifndef VT_SCAN_FULL_H
#define VT_SCAN_FULL_H

#include <stdint.h>

#include "pipeline/data/dataset/dataset.h"

/* What a full decode of one file found. */
typedef struct vt_scan_damage {
    int video;              /* the dataset entry (the first, when segments share the file) */
    int64_t frames;         /* frames decoded */
    int64_t indexed;        /* frames the index lists */
    int64_t decode_errors;  /* packets rejected, pictures repaired (vt_video_stats) */
    char *error;            /* the decode stopped: why (NULL when it ran to the end) */
} vt_scan_damage;

typedef struct vt_scan_full {
    int files;              /* distinct readable files decoded */
    int64_t frames;         /* frames decoded in all */
    double seconds;
    vt_scan_damage *damaged; /* (ndamaged) files with decode errors, missing frames or an
                                error, in dataset order */
    int ndamaged;
} vt_scan_full;

/* Decodes every readable video of ds (each file once, on `threads` threads; 0: cores) on
 * the CPU, with a progress line on stderr when progress is set, into *out. */
void vt_scan_full_run(const vt_dataset *ds, int threads, int progress, vt_scan_full *out);
void vt_scan_full_free(vt_scan_full *f);

#endif
