/*
 * prep.h: the re-encoder behind `vidtrain prep` — one video file in, one training-ready
 * file out: decoded by video_*.c (so rotation, VFR and corruption are handled exactly as
 * the loader handles them), scaled so the displayed short side is S with even sides,
 * rotation applied to the pixels, audio and every other stream dropped, a short
 * keyframe interval so that any clip seeks cheaply, the source timestamps kept (or a
 * constant --fps resampled to), written by libavformat/libavcodec.
 *
 * It knows one file and its options, never a dataset: walking folders, jobs, resume
 * and the manifest belong to app/prep/cmd_prep.c. A bad source is a data error: functions
 * return a negative code with the reason in err, never print and never abort.
 */
#ifndef VT_PREP_H
#define VT_PREP_H

#include <stddef.h>
#include <stdint.h>

#include "pipeline/data/signature.h"

/* What prep writes by default (docs/prep.md has the measurements behind them). */
#define VT_PREP_SHORT_SIDE 128  /* a 112 crop (the default 16x112 clip) is 7/8 of it */
#define VT_PREP_CODEC "h264"
#define VT_PREP_GOP 8
/* libx264's CRF. 18, not x264's 23: the copy nearer the source. On one held-out synth
 * draw copies at CRF 23 trained to ~2 points below the original (8 seeds) and CRF 18 within
 * noise of it; on a second draw neither lost accuracy beyond the recipe's late starts
 * (docs/prep.md). It costs 1.85x the bytes and 1.4-1.6x the loader's CPU a clip. */
#define VT_PREP_CRF 18

typedef struct vt_prep_opts {
    int short_side;      /* displayed short side in pixels (even: rounded up to one) */
    double fps;          /* > 0: constant frame rate, resampled; 0: keep the timestamps */
    int gop;             /* keyframe interval in frames (1: every frame a keyframe) */
    const char *codec;   /* "h264" (libx264), "mpeg4" (MPEG-4 part 2), "mjpeg" */
    int quality;         /* h264: CRF 0-51; mpeg4, mjpeg: qscale 1-31; < 0: the default
                          * (VT_PREP_CRF; qscale 4 for mpeg4, 3 for mjpeg) */
    int threads;         /* decoder and encoder threads (1 when files run in parallel) */
    int signature;       /* 1: also the perceptual signature of the frames decoded, into
                          * res->sig (signature.h; the leak check's, made for free) */
} vt_prep_opts;

/* The defaults above; quality < 0, fps 0, threads 1. */
void vt_prep_opts_default(vt_prep_opts *o);

typedef struct vt_prep_result {
    double src_duration;    /* seconds, from the source's frame index */
    int64_t src_frames;     /* frames in the source's index */
    int64_t frames_decoded; /* source frames that decoded */
    int64_t frames_written; /* frames in the output */
    int64_t decode_errors;  /* packets the decoder rejected or frames it flagged corrupt
                             * (vt_video_stats): a damaged source, copied as it decoded */
    int64_t frames_missing; /* frames of the source's index (of the segment's) that never
                             * decoded: a segment holds the nearest decoded frame in their
                             * place, as the loader's clips do; a whole file leaves them
                             * out (its timestamps keep the gap) */
    int64_t frames_disordered; /* frames the decoder handed out after a later one (a damaged
                             * stream's: their place in the copy was written already), left
                             * out of the copy */
    int src_width, src_height, rotation; /* coded size and the rotation that was applied */
    int out_width, out_height;
    int size_kept;          /* the source's short side was S or less, not upscaled: 1 its
                               size kept, 2 an odd side resampled to the even one */
    int vfr;                /* the source has a variable frame rate */
    char src_codec[32];
    int dst_failed;         /* the failure was writing dst (a full disk, a write error),
                             * not reading the source: the source is not to blame */
    vt_sig sig;             /* opts->signature, on success: the frames' signature (upright,
                             * timed from the first frame written); the caller frees it */
} vt_prep_result;

/* Is the codec name known and its encoder in this FFmpeg? 1 yes, 0 no. */
int vt_prep_codec_available(const char *codec);

/* The extension (no dot) for the output of a source named `name`: the source's own when
 * its container can hold `codec` (so list files and labels CSVs keep matching: its muxer
 * lists the codec and takes it when set up), "mp4" otherwise (a .webm, .gif, .y4m, .ts or
 * .mpg source; an .flv with mpeg4). Written into ext (n bytes). */
void vt_prep_out_ext(char *ext, size_t n, const char *name, const char *codec);

/* Re-encode src into dst with the muxer for extension `ext` (vt_prep_out_ext's; dst
 * itself may be named anything, such as a temporary name). dst is created or truncated;
 * on failure it may hold a partial file, which the caller removes. Returns 0, or a
 * negative code with err set: the source cannot be read ("no video stream", "0 decodable
 * frames", FFmpeg's reason) or the output cannot be written (then res->dst_failed is 1:
 * every write, the trailer and the final flush are checked). */
int vt_prep_file(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                 const vt_prep_opts *o, char *err, size_t errlen);

/* The same for a segment of src (prep --trim): only the frames whose timestamps lie in
 * [start, end) seconds from the first frame (the frames a loader draws that segment's
 * clips from, sample.h), timestamps moved so the output starts at 0. The decoder seeks
 * to the segment: a segment near the end of a long video does not decode all before it.
 * res->src_duration is the segment's length; a segment with no frame is an error. */
int vt_prep_segment(vt_prep_result *res, const char *src, const char *dst, const char *ext,
                    const vt_prep_opts *o, double start, double end, char *err,
                    size_t errlen);

#endif
