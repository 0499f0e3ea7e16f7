/*
 * sample.h: where a clip comes from and how it is turned into network input — the
 * epoch order, the clip start frame, the short-side scale, the crop, the flip, the
 * contrast and brightness jitter, and the uint8 (T, H, W, 3) -> float (3, T, crop, crop)
 * transform with mean/std.
 *
 * Every random choice is a pure function of (seed, epoch, sample index) through
 * vt_hash64, never of a shared RNG consumed by threads in timing order: a sample gets
 * the same clip whichever worker decodes it, and a resumed run the same clips as an
 * uninterrupted one. This file must never decode or allocate per clip.
 */
#ifndef VT_SAMPLE_H
#define VT_SAMPLE_H

#include <stdint.h>

#include "pipeline/data/randaug.h"
#include "pipeline/data/video/video.h"

typedef struct vt_clip_cfg {
    int t;                 /* frames per clip (default 16) */
    int stride;            /* temporal stride (default 1); span = (t-1)*stride+1 */
    int stride_jitter;     /* train: each clip's stride uniform over the integers in
                              [max(1, stride - j), stride + j] (default 0: off): the
                              motion's speed jittered, as spatial scale is */
    double fps;            /* > 0: stride and stride_jitter count frames at this rate, each
                              video's scaled to its own (vt_clip_cfg_at_fps), so a clip
                              spans one time whatever the video's rate; 0 (default): each
                              video's own frames */
    int crop;              /* output H = W = crop (default 112) */
    int short_side;        /* eval: short side before the crop (default 128) */
    int jitter_min, jitter_max; /* train: short side drawn in [min, max] (default 128, 160) */
    int flip;              /* train: random horizontal flip (default 1; --no-flip for
                              direction classes: flipping turns "left" into "right") */
    float contrast_min;    /* train: contrast factor drawn log-uniform in [contrast_min, 1]
                              per clip (default 1: off; `vidtrain train` defaults 0.4) */
    float brightness;      /* train: brightness shift uniform in [-b, b] per clip, in units
                              of the [0,1] pixel range (default 0: off; train 0.1) */
    float erase_prob;      /* train: random erasing (timm's RandomErasing, mode "pixel",
                              one box) with this probability per clip: a box of 2% to 1/3
                              of the crop's area, aspect 0.3 to 3.3 (log-uniform), the SAME
                              box in every frame, filled with N(0, 1) noise in the
                              normalised values, the same noise in every frame (a still
                              occluder); 0: off (the default) */
    vt_randaug_cfg randaug; /* train: RandAugment (pipeline/data/randaug.h) on the crop, one
                              draw per clip on every frame; n 0: off (the default) */
    int ncrops;            /* eval: 1 (centre) or 3 (start/centre/end of the long side) */
    float mean[3], std[3]; /* per RGB channel on [0,1] pixels (Kinetics defaults) */
    vt_pad_policy pad;     /* clips longer than the video (default VT_PAD_LOOP) */
} vt_clip_cfg;

/* Defaults above. */
void vt_clip_cfg_default(vt_clip_cfg *c);
/* Set c's mean and std to the statistics named `name`: "kinetics" (torchvision's video
 * models; the default above), "pytorchvideo" (0.45 / 0.225 in every channel) or
 * "imagenet" (0.485, 0.456, 0.406 / 0.229, 0.224, 0.225: VideoMAE). 0, or -1 (c
 * unchanged) for another name. VT_CLIP_NORM_NAMES lists them for messages. */
int vt_clip_set_norm(vt_clip_cfg *c, const char *name);
#define VT_CLIP_NORM_NAMES "kinetics, pytorchvideo, imagenet"
/* The cfg for a video at video_fps: with c->fps > 0, stride and stride_jitter scaled by
 * video_fps / c->fps and rounded to the nearest integer (the stride at least 1: a video
 * slower than c->fps / stride cannot be sampled more finely than frame by frame); c->fps 0
 * or a rate unknown (<= 0): as it is. */
void vt_clip_cfg_at_fps(vt_clip_cfg *c, double video_fps);

/* Frames a clip spans at a stride: (t-1)*stride+1; vt_clip_span at the cfg's stride. */
static inline int vt_clip_span_at(const vt_clip_cfg *c, int stride) {
    return (c->t - 1) * stride + 1;
}
static inline int vt_clip_span(const vt_clip_cfg *c) { return vt_clip_span_at(c, c->stride); }

/* What one clip is: frames start + k*stride decoded at short_side, then crop at
 * (x0, y0) of size crop, then (flip) mirrored, then (training) each channel's values
 * moved toward the clip's mean of that channel by the factor contrast and shifted by
 * brightness (vt_clip_color). contrast 1, brightness 0: unchanged (evaluation). */
typedef struct vt_clip_params {
    int64_t start;
    int stride;            /* the cfg's stride, or (training) the jittered one */
    int short_side;
    int x0, y0;
    int flip;
    float contrast, brightness;
    int ex0, ey0, ew, eh;  /* random erasing's box in the crop (ew 0: none) */
    uint32_t erase_seed;   /* its noise */
    uint64_t ra_key;       /* RandAugment's draw (vt_randaug_draw_ops); 0: none (evaluation) */
} vt_clip_params;

/* The frames a sample's clips are drawn from: [first, first + count) of its file — a
 * segment's frames, or the whole file (0, nframes). Clip starts are drawn as if the
 * sample were a video of `count` frames, then shifted by `first`. */
typedef struct vt_frame_range {
    int64_t first, count;
} vt_frame_range;

/* The frames of v whose timestamps (seconds from the first frame, vt_video_frame_ts)
 * lie in [start, end): exact for a variable frame rate. count 0 when none do. */
vt_frame_range vt_sample_segment_frames(const vt_video *v, double start, double end);
/* The same from the frame rate alone (no open video: a frame cache's info), frame n at
 * n / fps. */
vt_frame_range vt_sample_segment_frames_fps(const vt_video_info *info, double start,
                                            double end);
/* The index positions (absolute) of a clip at start (absolute) inside range r, with the
 * pad policy applied at the end of the RANGE rather than of the file: what a segment
 * shorter than the clip span reads, so that no frame outside the segment is used. */
void vt_sample_range_positions(vt_frame_range r, int64_t start, int t, int stride,
                               vt_pad_policy pad, int64_t *pos /* (t) */);

/* The per-sample random word: vt_hash64 chain over seed, epoch, sample index. */
uint64_t vt_sample_key(uint64_t seed, int64_t epoch, int64_t index);

/* Training: stride uniform over the integers in [max(1, stride - stride_jitter), stride +
 * stride_jitter], then start uniform in [0, nframes - span] for that stride's span (0
 * when the video is shorter than the span: the pad policy fills it), short side uniform
 * in [jitter_min, jitter_max], crop position uniform, flip with probability 1/2 when
 * cfg->flip, contrast log-uniform in [contrast_min, 1], brightness uniform in
 * [-brightness, brightness], random erasing's box (cfg->erase_prob), RandAugment's key
 * (non-zero; taken whether or not cfg->randaug is on, as every draw is). Needs the decoded size, so it is two steps: the scale first,
 * then the crop for the (w, h) that scale gives. */
int vt_sample_train_scale(const vt_clip_cfg *c, uint64_t key);
void vt_sample_train_params(vt_clip_params *out, const vt_clip_cfg *c, uint64_t key,
                            int64_t nframes, int w, int h);

/* Repeated augmentation (--repeat-aug K): repeat r > 0 of a sample whose base draw is
 * `key` keeps p's frames and scale (start, stride, short side: one decode serves all K)
 * and draws its crop, flip, contrast, brightness, erasing box and RandAugment key anew
 * from (key, r). Repeat 0 is the base draw itself. */
void vt_sample_repeat_params(vt_clip_params *p, const vt_clip_cfg *c, uint64_t key, int r,
                             int w, int h);

/* --clips-per-video auto: the clips a sample of `seconds` draws per epoch, one per `every`
 * seconds rounded to the nearest, at least 1 (and at most VT_SAMPLE_MAX_AUTO_CLIPS, so
 * that a corrupt duration cannot ask for billions). Pure: every rank gets the same count
 * from the same duration. */
#define VT_SAMPLE_MAX_AUTO_CLIPS 100000
int vt_sample_auto_clips(double seconds, double every);
/* Draw k of n of one sample (auto clips): the part of r its clip is drawn in, stratum k
 * of n equal parts of the possible starts [0, count - span], so that n draws of an epoch
 * cover the whole video rather than n independent spots (a clip of the jittered stride
 * may reach past the stratum, never past r). n <= 1: r itself. */
vt_frame_range vt_sample_stratum(vt_frame_range r, int span, int k, int n);

/*
 * Evaluation, clip k of K temporal clips: start_k = round(k * (nframes - span) / (K-1))
 * for K > 1 (first clip at frame 0, last one ending on the last frame, uniform between);
 * the centre (nframes - span) / 2 for K = 1; 0 when the video is shorter than the span.
 */
int64_t vt_sample_eval_start(int64_t nframes, int span, int k, int K);
/* Spatial crop c of ncrops for a (w, h) frame: 1 = centre; 3 = start, centre, end along
 * the long side, centred on the short side. */
void vt_sample_eval_crop(int *x0, int *y0, int w, int h, int crop, int c, int ncrops);

/* out (3, t, crop, crop) = (in[t][y0+y][x0+x'][ch] / 255 - mean[ch]) / std[ch], with
 * x' = flip ? crop-1-x : x.  in: (t, h, w, 3) uint8 RGB. */
void vt_clip_transform(float *out, const uint8_t *in, int t, int h, int w, int x0, int y0,
                       int crop, int flip, const float mean[3], const float std[3]);

/* vt_clip_transform of p's crop, with RandAugment when p->ra_key is set and
 * cc->randaug.n > 0: the crop (flipped when p->flip) copied into *buf as uint8 (t, crop,
 * crop, 3), p->ra_key's draw applied to every frame (vt_randaug_clip), then normalised.
 * *buf (*cap bytes) grows to 2 * t * crop * crop * 3 on first use and is the caller's to
 * free; without RandAugment it is not touched. in: (t, h, w, 3). */
void vt_clip_transform_aug(float *out, uint8_t **buf, size_t *cap, const uint8_t *in, int h,
                           int w, const vt_clip_params *p, const vt_clip_cfg *cc);

/* Contrast and brightness of one transformed clip x (3, t, crop, crop), per channel ch:
 * x = m + (x - m) * contrast + brightness / std[ch], m the clip's mean of channel ch — in
 * pixel terms v' = m' + (v - m') * contrast + 255 * brightness, the same for every frame,
 * so the motion is untouched. Not clamped to the pixel range. Nothing when contrast is 1
 * and brightness 0. */
void vt_clip_color(float *x, int t, int crop, float contrast, float brightness,
                   const float std[3]);

/* Random erasing of one transformed clip x (3, t, crop, crop) with p's box (nothing when
 * p->ew is 0): every frame's box, each channel, the noise of (erase_seed, channel, y, x). */
void vt_clip_erase(float *x, int t, int crop, const vt_clip_params *p);

/* Fisher-Yates with a vt_rng seeded from (seed, epoch): the epoch order of n samples. */
void vt_sample_shuffle(int32_t *perm /* (n) */, int64_t n, uint64_t seed, int64_t epoch);

#endif
