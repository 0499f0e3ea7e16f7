/*
 * synth_motion.h: the `motion` preset's renderer, private to pipeline/data/synth/synth.c (which
 * wraps it in vt_synth_scene). See synth_motion.c for what a video looks like.
 */
#ifndef VT_SYNTH_MOTION_H
#define VT_SYNTH_MOTION_H

#include <stdint.h>

#include "pipeline/data/synth/synth_layout.h" /* not synth.h: synth.c wraps this (no circle) */

#define VT_MOTION_CLASSES 8

/* pan_left, pan_right, pan_up, pan_down, zoom_in, zoom_out, rotate_cw, rotate_ccw */
extern const char *const vt_motion_class_names[VT_MOTION_CLASSES];

typedef struct vt_motion_scene vt_motion_scene;

/* Draws the video's appearance and camera path from video_seed (the class only picks
 * the camera motion) and pre-renders the world the camera sees. */
vt_motion_scene *vt_motion_scene_init(const vt_synth_layout *l, int cls, uint64_t video_seed);
/* Frame `frame` into rgb (l->height, l->width, 3). */
void vt_motion_scene_render(vt_motion_scene *s, uint8_t *rgb, int frame);
void vt_motion_scene_free(vt_motion_scene **s);

/* HSV (h wraps: any real; s, v in [0,1]) to RGB in [0,255], the one copy both presets
 * colour with. */
void vt_synth_hsv_to_rgb(float *rgb, float h, float s, float v);

#endif
