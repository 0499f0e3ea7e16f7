/*
 * synth.h: synthetic datasets of REAL encoded videos whose classes differ by motion only
 * (`vidtrain synth`), in two presets.
 *
 * demo (the default): each video is a static textured background with a few bright
 * shapes that all move the same way: left, right, up, down, clockwise, counter-clockwise,
 * outwards (zoom_in) or inwards (zoom_out). Positions, colours, sizes and speeds are
 * random per video with the same distribution in every class, so one frame cannot tell
 * the classes apart while two frames can. One size, frame rate and length for all videos.
 * Containers/codecs rotate over pairs that both Debian's FFmpeg and a minimal static
 * FFmpeg (encoders mpeg4, mjpeg, ffv1; muxers mp4, avi, matroska) have: mpeg4/.mp4,
 * mpeg4/.avi, mjpeg/.mkv, ffv1/.mkv, plus h264/.mp4 when libx264 is there.
 *
 * motion (hard, real-looking; see synth_motion.c): the CAMERA moves over an animated,
 * procedurally generated world — pan_left, pan_right, pan_up, pan_down, zoom_in,
 * zoom_out, rotate_cw, rotate_ccw — with independently moving objects, shake, lighting
 * drift, flicker and sensor grain common to every class. Size, frame rate, length,
 * codec and container vary per video as a function of (seed, split, index) only, never
 * of the class: video i of every class has the same format.
 *
 * Everything is deterministic given the seed: same options, same bytes.
 */
#ifndef VT_SYNTH_H
#define VT_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/synth/synth_layout.h" /* vt_synth_layout */

#define VT_SYNTH_MAX_CLASSES 8
#define VT_SYNTH_MAX_FORMATS 8

typedef enum vt_synth_preset {
    VT_SYNTH_DEMO = 0,
    VT_SYNTH_MOTION = 1,
} vt_synth_preset;

typedef struct vt_synth_opts {
    int classes;             /* 2..VT_SYNTH_MAX_CLASSES: the first N classes of the preset */
    int train, val, test;    /* videos per class in each split */
    int frames;              /* frames per video (motion: 0 = drawn per video, 2-5 s) */
    int width, height;       /* even, >= 16 (motion: 0 = drawn per video) */
    int fps;                 /* motion: 0 = drawn per video */
    uint64_t seed;
    int no_h264;             /* 1: never use libx264 even when present (portable sets) */
    int preset;              /* vt_synth_preset */
    int threads;             /* videos encoded at once (0: 2); the files never depend on it */
} vt_synth_opts;

typedef struct vt_synth_summary {
    int videos;
    int64_t bytes;
    int per_format[VT_SYNTH_MAX_FORMATS]; /* videos per format, in vt_synth_format_name order */
    int nformats;
    int foreign; /* videos in DIR's split/class folders that this synth did not write */
} vt_synth_summary;

/* demo: 4 classes, 24/8/8 videos per class, 40 frames of 96x72 at 25 fps, seed 1. */
void vt_synth_defaults(vt_synth_opts *o);
/* The defaults of a preset by name ("demo", "motion"): motion is 8 classes, 16/0/6
 * videos per class, size, frame rate and length drawn per video, seed 1. Returns 0, or
 * -1 for an unknown name (o untouched). */
int vt_synth_preset_defaults(vt_synth_opts *o, const char *name);
const char *vt_synth_preset_name(int preset);
/* Class names of the demo preset (move_left ...). */
const char *vt_synth_class_name(int cls);
/* Class names of o's preset (pan_left ... for motion). */
const char *vt_synth_preset_class_name(const vt_synth_opts *o, int cls);
/* Formats available in this FFmpeg build for o's preset, in the order videos rotate over
 * them. */
int vt_synth_format_count(const vt_synth_opts *o);
const char *vt_synth_format_name(const vt_synth_opts *o, int i); /* "mpeg4/mp4" ... */

/* Layout of video idx (of any class) in split ("train", "val", "test"). Motion: size from
 * {160x120, 192x144, 240x180, 256x192, 320x240} (one in 8 portrait) and fps from
 * {15, 25, 30}, stratified (indices 15k .. 15k+14 hold each of the 15 pairs once, order
 * drawn), 2-5 s and encoder quality drawn, all from (seed, split, idx);
 * --size/--fps/--frames in o override. The format rotates over vt_synth_format_name by
 * the video's number within its class across the splits. */
void vt_synth_video_layout(vt_synth_layout *l, const vt_synth_opts *o, const char *split,
                           int idx);

/* The seed of video idx of class cls in split ("train", "val", "test"). */
uint64_t vt_synth_video_seed(const vt_synth_opts *o, const char *split, int cls, int idx);

/* demo only: frame `frame` of the video (cls, video_seed) into rgb (height, width, 3). */
void vt_synth_render(uint8_t *rgb, const vt_synth_opts *o, int cls, uint64_t video_seed,
                     int frame);

/* One video being rendered, any preset: for motion it holds the pre-rendered world, so
 * frames are cheap after init. */
typedef struct vt_synth_scene vt_synth_scene;
vt_synth_scene *vt_synth_scene_init(const vt_synth_opts *o, const vt_synth_layout *l, int cls,
                                    uint64_t video_seed);
/* Frame `frame` (0 .. l->frames-1) into rgb (l->height, l->width, 3). */
void vt_synth_scene_render(vt_synth_scene *s, uint8_t *rgb, int frame);
void vt_synth_scene_free(vt_synth_scene **s);

/* Encode one video with layout l to path. Returns 0 or a negative code with err set. */
int vt_synth_write_video(const char *path, const vt_synth_opts *o, const vt_synth_layout *l,
                         int cls, uint64_t video_seed, char *err, size_t errlen);

/* progress(user, done, total, path) after each video, from one thread at a time; may be
 * NULL. */
typedef void (*vt_synth_progress_fn)(void *user, int done, int total, const char *path);

/* The path of video idx of class cls in split sp (0 train, 1 val, 2 test) of a dataset
 * o writes: DIR/<split>/<class>/<class>_<idx>.<ext>, or without "DIR/" when dir is NULL
 * (into buf, n bytes; returns buf). */
char *vt_synth_video_path(char *buf, size_t n, const char *dir, const vt_synth_opts *o, int sp,
                          int cls, int idx);
/* The whole dataset: dir/{train,val,test}/<class>/<class>_<idx>.<ext>, after removing the
 * videos an earlier synth into dir wrote (synth_record.h). Returns 0 or a negative code
 * with err set. */
int vt_synth_dataset(const char *dir, const vt_synth_opts *o, vt_synth_progress_fn progress,
                     void *user, vt_synth_summary *summary, char *err, size_t errlen);

#endif
