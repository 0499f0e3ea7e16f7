/*
 * synth_layout.h: vt_synth_layout, what one synthetic video looks like on disk (size,
 * frame rate, length, format, quality, keyframes) — the one type both synth.c and the
 * motion renderer (synth_motion.h) need.
 *
 * A header of its own so that synth_motion.h need not include synth.h: synth.c wraps
 * the motion renderer, so synth.h from there would make an include circle
 * (tests/check_house.py fails on one).
 */
#ifndef VT_SYNTH_LAYOUT_H
#define VT_SYNTH_LAYOUT_H

/* What one video looks like on disk. A function of the options, the split and the index
 * within the class ONLY (never of the class), so every class gets the same formats. */
typedef struct vt_synth_layout {
    int width, height, fps, frames;
    int format;              /* index for vt_synth_format_name */
    int quality;             /* 0 (best) .. 99: encoder quality drawn per video (motion) */
    int gop;                 /* frames between keyframes */
} vt_synth_layout;

#endif
