/*
 * randaug.h: RandAugment on training clips (--randaug SPEC), timm's rand_augment_transform
 * as VideoMAE fine-tunes with it ("rand-m7-n4-mstd0.5-inc1"), applied the way VideoMAE's
 * create_random_augment applies it to a clip: ONE draw of ops, magnitudes and signs per
 * clip, the same op with the same argument on every frame.
 *
 * The ops work on uint8 RGB frames and are PIL's (the library timm calls): ImageOps
 * autocontrast / equalize / invert / posterize / solarize, ImageEnhance Color / Contrast /
 * Brightness / Sharpness, and Image.transform / Image.rotate with an affine matrix. Each
 * is written from PIL's arithmetic (integer luma, float blends that truncate, the 3x3
 * SMOOTH kernel in float, bilinear sampling at pixel centres in double) so that the
 * pointwise ops give PIL's bytes exactly (tests/test_randaug.c checks them against PIL on
 * this machine). Two choices differ from timm's defaults, both documented in
 * docs/finetune.md: geometric ops always sample bilinearly (timm draws bilinear or bicubic
 * per call unless told; VideoMAE says bicubic) so that a clip's frames cannot get
 * different filters, and frames outside the source are filled with grey 128 (timm's and
 * VideoMAE's _FILL). Statistics ops (AutoContrast, Equalize, Contrast) use each frame's
 * own histogram, as PIL applied to each frame does in VideoMAE.
 *
 * Every random choice is a pure function of a 64-bit clip key (pipeline/data/sample.h:
 * the clip's draws), never of an RNG stream: the same clip whichever worker makes it, on
 * resume as in an uninterrupted run. It must never allocate per clip or read anything but
 * its arguments.
 */
#ifndef VT_RANDAUG_H
#define VT_RANDAUG_H

#include <stddef.h>
#include <stdint.h>

/* The pixel ops. The "Increasing" variants of timm are the same ops with another
 * magnitude -> argument map (vt_randaug_draw). */
typedef enum vt_ra_kind {
    VT_RA_AUTOCONTRAST, /* arg unused */
    VT_RA_EQUALIZE,     /* arg unused */
    VT_RA_INVERT,       /* arg unused */
    VT_RA_ROTATE,       /* degrees, counter-clockwise (Image.rotate) */
    VT_RA_POSTERIZE,    /* bits kept, 0..8 (8: unchanged) */
    VT_RA_SOLARIZE,     /* threshold 0..256: values >= it inverted */
    VT_RA_SOLARIZE_ADD, /* add to values below 128, saturating */
    VT_RA_COLOR,        /* ImageEnhance factor (1: unchanged) */
    VT_RA_CONTRAST,
    VT_RA_BRIGHTNESS,
    VT_RA_SHARPNESS,
    VT_RA_SHEAR_X,      /* affine (1, f, 0, 0, 1, 0): x_in = x + f * y */
    VT_RA_SHEAR_Y,      /* affine (1, 0, 0, f, 1, 0) */
    VT_RA_TRANSLATE_X,  /* fraction of the width: x_in = x + arg * w */
    VT_RA_TRANSLATE_Y,  /* fraction of the height */
    VT_RA_NKINDS
} vt_ra_kind;

/* The lowercase name of a kind ("autocontrast", "shear_x", ...: what the test oracle
 * calls), or "?" */
const char *vt_randaug_kind_name(int kind);

/* Grey of the pixels a geometric op brings in from outside the frame (timm's _FILL). */
#define VT_RANDAUG_FILL 128

/* One op on one frame in place. img: (h, w, 3) uint8 RGB, rows of w; tmp: h * w * 3 bytes
 * of scratch (the geometric ops and Sharpness read the original from it). */
void vt_randaug_op(uint8_t *img, int h, int w, int kind, double arg, uint8_t *tmp);
/* The op on t frames (t, h, w, 3) alike: the bytes of t vt_randaug_op calls, with the
 * enhance ops' blends tabulated and the geometric ops' sample points computed once for
 * all of them. tmp: t * h * w * 3 bytes. */
void vt_randaug_op_frames(uint8_t *frames, int t, int h, int w, int kind, double arg,
                          uint8_t *tmp);

/* ---- the policy ---- */

#define VT_RANDAUG_MAX_N 16

/* A parsed --randaug spec: timm's config string "rand-m9-n2-mstd0.5-mmax10-inc1". */
typedef struct vt_randaug_cfg {
    int n;        /* ops drawn per clip, with replacement (timm's num_layers; 0: off) */
    int m;        /* magnitude, 0..mmax (timm: 10 unless given) */
    double mstd;  /* magnitude noise: m + mstd * N(0, 1) per op, clamped to [0, mmax];
                     > 100: uniform in [0, m] (timm's "inf"); 0: exactly m */
    int mmax;     /* upper clamp of the magnitude (10: the level scale's full range) */
    int inc;      /* 1: _RAND_INCREASING_TRANSFORMS (severity grows with m), 0: timm's
                     _RAND_TRANSFORMS */
} vt_randaug_cfg;

/* "off" (n = 0) or "rand-..." with sections m<int>, n<int>, mstd<number>, mmax<int>,
 * inc<0|1> in any order, each at most once; unset ones take timm's defaults (m10 n2
 * mstd0 mmax10 inc0). Stricter than timm's parser where timm is silently surprising:
 * inc0 means off (timm's bool("0") is on), m above mmax is an error (timm clamps every
 * draw), a section without a number or timm's op weights (w0) are errors (timm skips
 * or applies them). 0, or -1 with err naming the bad section and a hint. */
int vt_randaug_parse(vt_randaug_cfg *c, const char *spec, char *err, size_t errlen);
/* The canonical spec of c ("off", or every section: "rand-m7-n4-mstd0.5-mmax10-inc1"),
 * which vt_randaug_parse reads back to c. */
void vt_randaug_format(const vt_randaug_cfg *c, char *buf, size_t n);

/* timm's LEVEL_TO_ARG: the argument of op `kind` at magnitude mag (0..mmax), inc 1 for
 * the _RAND_INCREASING_TRANSFORMS variant (PosterizeIncreasing, SolarizeIncreasing,
 * *Increasing enhancements), the sign of the signed ones (rotate, shear, translate, the
 * increasing enhancements) negative when `negative`. The kinds are in the order of timm's
 * _RAND_TRANSFORMS (and _RAND_INCREASING_TRANSFORMS). */
double vt_randaug_level(int kind, int inc, double mag, int negative);

/* One clip's draw: the ops that fired, in order, with their arguments. */
typedef struct vt_randaug_draw {
    int n;
    int kind[VT_RANDAUG_MAX_N];
    double arg[VT_RANDAUG_MAX_N];
} vt_randaug_draw;

/* timm's RandAugment.__call__ for one clip from key: c->n ops chosen uniformly from the
 * 15 of the set (with replacement), each applied with probability 1/2 (AugmentOp's prob),
 * its magnitude noised and clamped, mapped to the op's argument by timm's level functions
 * (signs of rotate, shear, translate and the increasing enhancements drawn with
 * probability 1/2). Pure in (c, key). */
void vt_randaug_draw_ops(vt_randaug_draw *d, const vt_randaug_cfg *c, uint64_t key);

/* Applies d to every frame of clip (t, h, w, 3) in place; tmp: t * h * w * 3 bytes. */
void vt_randaug_clip(uint8_t *clip, int t, int h, int w, const vt_randaug_draw *d,
                     uint8_t *tmp);

#endif
