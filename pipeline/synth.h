/*
 * synth.h: a demo dataset of REAL encoded videos whose classes differ by motion only
 * (`vidtrain synth`). Each video is a static textured background with a few bright
 * shapes that all move the same way: left, right, up, down, clockwise, counter-clockwise,
 * outwards (zoom_in) or inwards (zoom_out). Positions, colours, sizes and speeds are
 * random per video with the same distribution in every class, so one frame cannot tell
 * the classes apart while two frames can. Everything is deterministic given the seed.
 * Containers/codecs rotate over pairs that both Debian's FFmpeg and a minimal static
 * FFmpeg (encoders mpeg4, mjpeg, ffv1; muxers mp4, avi, matroska) have: mpeg4/.mp4,
 * mpeg4/.avi, mjpeg/.mkv, ffv1/.mkv, plus h264/.mp4 when libx264 is there.
 */
#ifndef VT_SYNTH_H
#define VT_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#define VT_SYNTH_MAX_CLASSES 8

typedef struct vt_synth_opts {
    int classes;             /* 2..VT_SYNTH_MAX_CLASSES */
    int train, val, test;    /* videos per class in each split */
    int frames;              /* frames per video */
    int width, height;       /* even, >= 16 */
    int fps;
    uint64_t seed;
    int no_h264;             /* 1: never use libx264 even when present (portable sets) */
} vt_synth_opts;

typedef struct vt_synth_summary {
    int videos;
    int64_t bytes;
    int per_format[8];       /* videos written per format, in vt_synth_format_name order */
    int nformats;
} vt_synth_summary;

/* 4 classes, 24/8/8 videos per class, 40 frames of 96x72 at 25 fps, seed 1. */
void vt_synth_defaults(vt_synth_opts *o);
const char *vt_synth_class_name(int cls);
/* Formats available in this FFmpeg build, in the order videos rotate over them. */
int vt_synth_format_count(const vt_synth_opts *o);
const char *vt_synth_format_name(const vt_synth_opts *o, int i); /* "mpeg4/mp4" ... */

/* Frame `frame` of the video (cls, video_seed) into rgb (height, width, 3). */
void vt_synth_render(uint8_t *rgb, const vt_synth_opts *o, int cls, uint64_t video_seed,
                     int frame);

/* The seed of video idx of class cls in split ("train", "val", "test"). */
uint64_t vt_synth_video_seed(const vt_synth_opts *o, const char *split, int cls, int idx);

/* Encode one video to path with format i (vt_synth_format_name). Returns 0 or a negative
 * code with err set. */
int vt_synth_write_video(const char *path, const vt_synth_opts *o, int format, int cls,
                         uint64_t video_seed, char *err, size_t errlen);

/* progress(user, done, total, path) after each video; may be NULL. */
typedef void (*vt_synth_progress_fn)(void *user, int done, int total, const char *path);

/* The whole dataset: dir/{train,val,test}/<class>/<class>_<idx>.<ext>. Returns 0 or a
 * negative code with err set. */
int vt_synth_dataset(const char *dir, const vt_synth_opts *o, vt_synth_progress_fn progress,
                     void *user, vt_synth_summary *summary, char *err, size_t errlen);

#endif
