/*
 * signature.h: a compact perceptual signature of a video, to find near-copies of one
 * recording across train, val and test (docs/splits.md): the same file re-encoded,
 * rescaled, cropped, trimmed, sped up or cut into clips.
 *
 * A signature is a list of frames, each its time and three 64-bit DCT hashes (pHash:
 * grey 32x32, the 8x8 lowest frequencies but DC, each bit "above the median"): of the
 * whole frame, of its central 80% and of its central 64%, so a copy cropped by up to
 * about a fifth a side still meets one of them at the same scale. Frames are the
 * keyframes (decoded alone: no inter frame is decoded), spaced by duration /
 * VT_SIG_MIN_FRAMES clamped to [VT_SIG_GAP, VT_SIG_KEY_GAP] seconds (a long video costs
 * one keyframe every 2.5 s); a video that gives fewer than VT_SIG_MIN_FRAMES that way
 * (short clips with one keyframe, long GOPs) is decoded whole once — without the loop
 * filter and the frames nothing refers to, which a 32x32 hash cannot see — and sampled
 * every VT_SIG_DENSE_GAP seconds, but only when that decode is cheap: at most
 * VT_SIG_DENSE_PIXELS (width x height x frames, from the header; about 65 s of 320x240
 * at 25 fps, 2 s of 1080p30). A larger file with few keyframes (HD with x264's default
 * GOP of 250) keeps its keyframes alone, a "sparse" signature: it finds the file
 * re-encoded, rescaled or cropped, but a trim or a clip of it only where their frames
 * meet its keyframes' (slow scenes; x264's keyframes at scene cuts). That keeps the
 * signature of such footage at a few percent of one decode instead of ~70%
 * (docs/splits.md, "Measured"). Flat frames (a fade to black) carry no content and
 * are left out.
 *
 * Two signatures are compared as SETS of frames, never by time: a trimmed copy, a clip
 * cut from a recording and a sped-up copy all share frames at other times. A frame of b
 * matches when some frame of a is within VT_SIG_HAMMING bits (whole against whole, or
 * one's crop against the other's whole).
 *
 * A reader of outside bytes: a file that FFmpeg cannot read is a data error (err set),
 * never an abort. It must never depend on decoder threads or timing: the same file gives
 * the same signature bytes.
 */
#ifndef VT_SIGNATURE_H
#define VT_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

#define VT_SIG_KEY_GAP 2.5     /* seconds between sampled keyframes, at most this... */
#define VT_SIG_GAP 0.5         /* ...and at least this (duration / VT_SIG_MIN_FRAMES between) */
#define VT_SIG_DENSE_GAP 0.2   /* seconds between the frames sampled from a whole decode */
#define VT_SIG_MIN_FRAMES 8    /* fewer keyframes than this: sample a whole decode */
#define VT_SIG_MAX_FRAMES 512  /* a long video's frames are thinned to this many */
#define VT_SIG_HAMMING 10      /* bits of 63 within which two frames match */
#define VT_SIG_DENSE_PIXELS 128e6 /* a whole decode of more pixels than this is never done */
#define VT_SIG_VERSION 4       /* in the cache key: a change of the hashes or sampling bumps it */

typedef struct vt_sig_frame {
    float t;                   /* seconds from the first frame */
    uint64_t h[3];             /* pHash of the whole frame, central 80%, central 64% */
} vt_sig_frame;

typedef struct vt_sig {
    int n;                     /* frames (0: nothing but flat frames) */
    vt_sig_frame *f;
    double duration;           /* seconds, from the container */
    int full_decode;           /* 1: sampled from a whole decode (too few keyframes) */
    int sparse;                /* 1: too few keyframes, and a whole decode too costly */
} vt_sig;

/* The signature of the video at path. 0, or a negative code with err set. */
int vt_sig_compute(const char *path, vt_sig *out, char *err, size_t errlen);
void vt_sig_free(vt_sig *s);

/* The 64-bit pHash of a grey image (w x h, stride bytes a row), and whether it is flat
 * (standard deviation under 2 levels): 1 flat, 0 not. */
int vt_sig_phash(const uint8_t *grey, int w, int h, int stride, uint64_t *out);

/* Similarity of b to a: the share of b's frames that match one of a's (see above), in
 * [0, 1]; *nmatch gets the count (may be NULL). 0 when b has no frame. */
double vt_sig_share(const vt_sig *a, const vt_sig *b, int *nmatch);

/* a and b are copies of one recording: the larger share of the two ways is >= `share`
 * with at least 2 frames matched (1 when the shorter signature has 1 frame, and then
 * within half the bits). *sim gets that larger share (may be NULL). */
int vt_sig_near(const vt_sig *a, const vt_sig *b, double share, double *sim);

/* The signature of path from cache_dir (a folder that exists; NULL: no cache), computed and
 * stored there when absent or stale. The key is the file's real path, size and
 * modification time and VT_SIG_VERSION, like the frame cache's a property of the file,
 * not of a dataset. *hit (may be NULL) is 1 when it came from the cache. A cache that
 * cannot be written is not an error (the signature is still returned). 0, or < 0 with
 * err set when the video cannot be read. */
int vt_sig_cached(const char *path, const char *cache_dir, vt_sig *out, int *hit, char *err,
                  size_t errlen);

/* Store s as path's signature in cache_dir (under the key vt_sig_cached reads: the file
 * as it is now), e.g. one made during a decode that happens anyway. 0, or -1 (no
 * cache_dir, path gone, or the file not written: nothing else changes). */
int vt_sig_store(const char *path, const char *cache_dir, const vt_sig *s);

/* A signature from frames decoded elsewhere (`prep`'s whole decode: no decode of its
 * own): add each frame in order with its time in seconds (any origin); the same
 * sampling and hashes as a whole decode here (a frame every VT_SIG_DENSE_GAP seconds,
 * flat ones left out, thinned to VT_SIG_MAX_FRAMES), so full_decode is 1. The frames
 * are RGB24, w x h, rows 3w bytes. finish hands the signature over and frees *a. */
typedef struct vt_sig_acc vt_sig_acc;
vt_sig_acc *vt_sig_acc_new(void);
void vt_sig_acc_add_rgb(vt_sig_acc *a, const uint8_t *rgb, int w, int h, double t);
void vt_sig_acc_finish(vt_sig_acc **a, double duration, vt_sig *out);
void vt_sig_acc_free(vt_sig_acc **a);

#endif
