/*
 * synth.c: the synthetic datasets (synth.h), rendered in RGB and encoded with
 * libavcodec/libavformat into real files, so that `vidtrain train` exercises the same
 * decode path as on user videos. The demo preset's renderer lives here; the motion
 * preset's in synth_motion.c; formats, layouts, encoding and the dataset loop are shared.
 *
 * Appearance is drawn from the video seed with the same random calls in every class
 * (the class only chooses how the shapes or the camera move), and the demo's polar
 * classes (rotate, zoom) move shapes in ways that keep them uniform over the frame area,
 * so a single frame carries no class information. Formats are a function of the split
 * and index only. This file must never print (the command does) and never depend on
 * wall-clock time or thread timing: same seed, same bytes (BITEXACT muxing, one encoder
 * thread per video; videos are written in parallel but each file is one thread's work).
 */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/data/synth/synth.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/synth/synth_motion.h"
#include "pipeline/data/synth/synth_record.h"
#include "pipeline/data/video/video.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char *class_names[VT_SYNTH_MAX_CLASSES] = {
    "move_left", "move_right", "move_up",  "move_down",
    "rotate_cw", "rotate_ccw", "zoom_in", "zoom_out",
};

#define FOR_DEMO (1 << VT_SYNTH_DEMO)
#define FOR_MOTION (1 << VT_SYNTH_MOTION)

typedef struct fmt_def {
    const char *name, *encoder, *ext;
    int presets; /* FOR_* mask */
} fmt_def;

/* In rotation order per preset: the demo's order must never change (its files would). */
static const fmt_def all_formats[] = {
    {"mpeg4/mp4", "mpeg4", "mp4", FOR_DEMO | FOR_MOTION},
    {"mpeg4/avi", "mpeg4", "avi", FOR_DEMO | FOR_MOTION},
    {"mjpeg/mkv", "mjpeg", "mkv", FOR_DEMO | FOR_MOTION},
    {"ffv1/mkv", "ffv1", "mkv", FOR_DEMO},
    {"h264/mp4", "libx264", "mp4", FOR_DEMO | FOR_MOTION},
    {"mjpeg/avi", "mjpeg", "avi", FOR_MOTION},
};

void vt_synth_defaults(vt_synth_opts *o) {
    memset(o, 0, sizeof *o);
    o->classes = 4;
    o->train = 24;
    o->val = 8;
    o->test = 8;
    o->frames = 40;
    o->width = 96;
    o->height = 72;
    o->fps = 25;
    o->seed = 1;
}

int vt_synth_preset_defaults(vt_synth_opts *o, const char *name) {
    if (!strcmp(name, "demo")) {
        vt_synth_defaults(o);
        return 0;
    }
    if (!strcmp(name, "motion")) {
        memset(o, 0, sizeof *o);
        o->preset = VT_SYNTH_MOTION;
        o->classes = VT_MOTION_CLASSES;
        o->train = 16;
        o->val = 0;
        o->test = 6;
        o->seed = 1; /* frames, size, fps 0: drawn per video */
        return 0;
    }
    return -1;
}

const char *vt_synth_preset_name(int preset) {
    return preset == VT_SYNTH_DEMO ? "demo" : preset == VT_SYNTH_MOTION ? "motion" : "?";
}

const char *vt_synth_class_name(int cls) {
    return cls >= 0 && cls < VT_SYNTH_MAX_CLASSES ? class_names[cls] : "?";
}

const char *vt_synth_preset_class_name(const vt_synth_opts *o, int cls) {
    if (o->preset == VT_SYNTH_MOTION)
        return cls >= 0 && cls < VT_MOTION_CLASSES ? vt_motion_class_names[cls] : "?";
    return vt_synth_class_name(cls);
}

static int format_ok(const vt_synth_opts *o, const fmt_def *f) {
    if (!(f->presets & (1 << o->preset)))
        return 0;
    if (o->no_h264 && !strcmp(f->encoder, "libx264"))
        return 0;
    char name[16];
    snprintf(name, sizeof name, "x.%s", f->ext);
    return avcodec_find_encoder_by_name(f->encoder) && av_guess_format(NULL, name, NULL);
}

int vt_synth_format_count(const vt_synth_opts *o) {
    int n = 0;
    for (size_t i = 0; i < VT_ARRAY_LEN(all_formats); i++)
        n += format_ok(o, &all_formats[i]);
    return n;
}

static const fmt_def *format_at(const vt_synth_opts *o, int k) {
    for (size_t i = 0; i < VT_ARRAY_LEN(all_formats); i++)
        if (format_ok(o, &all_formats[i]) && k-- == 0)
            return &all_formats[i];
    return NULL;
}

const char *vt_synth_format_name(const vt_synth_opts *o, int i) {
    const fmt_def *f = format_at(o, i);
    return f ? f->name : "?";
}

/* The frame rate an encoder can store: codecs that list their rates (MPEG-1/2 do, the
 * ones used here do not) get the nearest listed one; MPEG-4 part 2 stores the time base
 * in 16 bits (FFmpeg refuses a denominator above 65535), so its rate is capped there. */
static int valid_fps(const fmt_def *fd, int fps) {
    const AVCodec *codec = fd ? avcodec_find_encoder_by_name(fd->encoder) : NULL;
    if (!codec)
        return fps;
    const AVRational *rates = NULL;
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
    int n = 0;
    avcodec_get_supported_config(NULL, codec, AV_CODEC_CONFIG_FRAME_RATE, 0, (const void **)&rates, &n);
#else
    rates = codec->supported_framerates;
#endif
    if (rates) {
        int k = av_find_nearest_q_idx((AVRational){fps, 1}, rates);
        fps = VT_MAX(1, (int)lrint(av_q2d(rates[k])));
    }
    if (codec->id == AV_CODEC_ID_MPEG4 && fps > 65535)
        fps = 65535;
    return fps;
}

void vt_synth_video_layout(vt_synth_layout *l, const vt_synth_opts *o, const char *split,
                           int idx) {
    memset(l, 0, sizeof *l);
    /* Number videos across the splits of a class and rotate formats on that: every class
     * gets the same mix (the codec says nothing about the class) and even a tiny set uses
     * every format. */
    int k = idx + (!strcmp(split, "val") ? o->train : !strcmp(split, "test") ? o->train + o->val : 0);
    int nf = vt_synth_format_count(o);
    l->format = nf > 0 ? k % nf : 0;
    l->width = o->width;
    l->height = o->height;
    l->fps = o->fps;
    l->frames = o->frames;
    l->gop = 12;
    if (o->preset != VT_SYNTH_MOTION)
        return;
    /* Drawn from (seed, split, idx), never the class; overrides replace a draw after it is
     * made, so they change nothing else. Size and rate are stratified: each run of 15
     * indices (15k .. 15k+14) holds every (size, rate) pair once, in a shuffled order, so
     * that even the 6 test videos of a class spread over the sizes and rates. */
    static const int sizes[5][2] = {{160, 120}, {192, 144}, {240, 180}, {256, 192}, {320, 240}};
    static const int rates[3] = {15, 25, 30};
    uint64_t h = vt_hash64(vt_fnv1a(split, strlen(split), VT_FNV_SEED) ^ 0x6c61796f7574ull);
    vt_rng r;
    vt_rng_seed(&r, vt_hash64(o->seed ^ h ^ (uint64_t)(idx / 15) * 0x9E3779B97F4A7C15ull));
    int perm[15];
    for (int i = 0; i < 15; i++)
        perm[i] = i;
    for (int i = 14; i > 0; i--) { /* Fisher-Yates */
        int j = (int)vt_rng_below(&r, (uint32_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int si = perm[idx % 15] % 5, fps = rates[perm[idx % 15] / 5];
    vt_rng_seed(&r, vt_hash64(o->seed ^ vt_hash64(h + 1 + (uint64_t)idx)));
    int portrait = vt_rng_below(&r, 8) == 0;
    double seconds = 2.0 + 3.0 * vt_rng_uniform(&r);
    l->quality = (int)vt_rng_below(&r, 100);
    l->width = sizes[si][portrait];
    l->height = sizes[si][!portrait];
    if (o->width > 0) {
        l->width = o->width;
        l->height = o->height;
    }
    l->fps = valid_fps(format_at(o, l->format), o->fps > 0 ? o->fps : fps);
    l->frames = o->frames > 0 ? o->frames : (int)lround(seconds * l->fps);
    l->gop = 2 * l->fps; /* a keyframe every 2 s, as cameras and phones do */
}

uint64_t vt_synth_video_seed(const vt_synth_opts *o, const char *split, int cls, int idx) {
    uint64_t h = vt_fnv1a(split, strlen(split), VT_FNV_SEED);
    return vt_hash64(o->seed ^ vt_hash64(h + 1000003ull * (uint64_t)cls + (uint64_t)idx));
}

/* ---- rendering ---- */

#define MAX_SHAPES 12

typedef struct shape {
    int square;
    float col[3];
    float size, speed;
    float x0, y0;       /* translation classes */
    float s0, a0;       /* polar classes: squared radius and angle */
} shape;

typedef struct scene {
    float base[3], tint[3], amp;
    float fx[3], fy[3], ph[3];
    uint64_t noise_seed;
    int n;
    shape s[MAX_SHAPES];
} scene;

/* Same random calls whatever the class: appearance cannot depend on the class. */
static void make_scene(scene *sc, const vt_synth_opts *o, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    float scale = (float)VT_MIN(o->width, o->height) / 72.0f;
    for (int c = 0; c < 3; c++) {
        sc->base[c] = 55.0f + 50.0f * (float)vt_rng_uniform(&r);
        sc->tint[c] = 0.6f + 0.8f * (float)vt_rng_uniform(&r);
    }
    sc->amp = 15.0f + 20.0f * (float)vt_rng_uniform(&r);
    for (int k = 0; k < 3; k++) {
        float a = 2.0f * (float)M_PI * (float)vt_rng_uniform(&r);
        float f = (0.04f + 0.12f * (float)vt_rng_uniform(&r)) / scale;
        sc->fx[k] = f * cosf(a);
        sc->fy[k] = f * sinf(a);
        sc->ph[k] = 2.0f * (float)M_PI * (float)vt_rng_uniform(&r);
    }
    sc->noise_seed = vt_rng_u64(&r);
    sc->n = 3 + (int)vt_rng_below(&r, 3);
    for (int i = 0; i < MAX_SHAPES; i++) {
        shape *s = &sc->s[i];
        s->square = (int)vt_rng_below(&r, 2);
        vt_synth_hsv_to_rgb(s->col, (float)vt_rng_uniform(&r),
                            0.5f + 0.5f * (float)vt_rng_uniform(&r),
                            0.85f + 0.15f * (float)vt_rng_uniform(&r));
        s->size = scale * (3.5f + 4.0f * (float)vt_rng_uniform(&r));
        s->speed = scale * (1.0f + 1.5f * (float)vt_rng_uniform(&r));
        s->x0 = (float)o->width * (float)vt_rng_uniform(&r);
        s->y0 = (float)o->height * (float)vt_rng_uniform(&r);
        s->s0 = (float)vt_rng_uniform(&r); /* fraction of R^2: uniform over the disc area */
        s->a0 = 2.0f * (float)M_PI * (float)vt_rng_uniform(&r);
    }
}

static void draw_shape(float *img, int w, int h, const shape *s, float cx, float cy) {
    int x0 = (int)floorf(cx - s->size), x1 = (int)ceilf(cx + s->size);
    int y0 = (int)floorf(cy - s->size), y1 = (int)ceilf(cy + s->size);
    float r2 = s->size * s->size;
    for (int y = VT_MAX(y0, 0); y <= VT_MIN(y1, h - 1); y++)
        for (int x = VT_MAX(x0, 0); x <= VT_MIN(x1, w - 1); x++) {
            float dx = (float)x + 0.5f - cx, dy = (float)y + 0.5f - cy;
            int in = s->square ? (fabsf(dx) <= s->size && fabsf(dy) <= s->size)
                               : (dx * dx + dy * dy <= r2);
            if (in)
                for (int c = 0; c < 3; c++)
                    img[((size_t)y * w + x) * 3 + c] = s->col[c];
        }
}

void vt_synth_render(uint8_t *rgb, const vt_synth_opts *o, int cls, uint64_t video_seed,
                     int frame) {
    scene sc;
    make_scene(&sc, o, video_seed);
    int w = o->width, h = o->height;
    float *img = vt_malloc((size_t)w * h * 3 * sizeof(float)); /* (h, w, 3) */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float t = 0;
            for (int k = 0; k < 3; k++)
                t += sinf(sc.fx[k] * (float)x + sc.fy[k] * (float)y + sc.ph[k]);
            uint64_t hv = vt_hash64(sc.noise_seed ^ ((uint64_t)y << 32 | (uint64_t)x));
            float noise = (float)(hv & 0xff) / 255.0f * 24.0f - 12.0f; /* static grain */
            for (int c = 0; c < 3; c++)
                img[((size_t)y * w + x) * 3 + c] = sc.base[c] + sc.tint[c] * (sc.amp * t / 3.0f) + noise;
        }
    float cx = 0.5f * (float)w, cy = 0.5f * (float)h;
    float R = 0.5f * sqrtf((float)(w * w + h * h)); /* disc covering the frame */
    int polar = cls >= 4;
    /* A disc of radius R shows only w*h/(pi R^2) of its shapes: draw more in the polar
     * classes so that the expected number of visible shapes is the same as for the
     * translation classes. */
    int n = polar ? (int)lroundf((float)sc.n * (float)M_PI * R * R / (float)(w * h)) : sc.n;
    n = VT_MIN(n, MAX_SHAPES);
    float f = (float)frame;
    for (int i = 0; i < n; i++) {
        const shape *s = &sc.s[i];
        float px, py;
        if (!polar) {
            float dx = cls == 0 ? -1.0f : cls == 1 ? 1.0f : 0.0f;
            float dy = cls == 2 ? -1.0f : cls == 3 ? 1.0f : 0.0f;
            px = fmodf(s->x0 + dx * s->speed * f, (float)w);
            py = fmodf(s->y0 + dy * s->speed * f, (float)h);
            if (px < 0)
                px += (float)w;
            if (py < 0)
                py += (float)h;
            /* Wrap around the edges: draw the copies that overlap the frame. */
            for (int ky = -1; ky <= 1; ky++)
                for (int kx = -1; kx <= 1; kx++)
                    draw_shape(img, w, h, s, px + (float)(kx * w), py + (float)(ky * h));
            continue;
        }
        float r0 = R * sqrtf(s->s0), a = s->a0, r = r0;
        if (cls == 4 || cls == 5) {
            /* Rotation keeps the area-uniform layout; linear speed ~ speed except near
             * the centre, where the angular speed is capped. */
            float omega = s->speed / VT_MAX(r0, 0.25f * R);
            a += (cls == 4 ? 1.0f : -1.0f) * omega * f; /* y points down: + is clockwise */
        } else {
            /* Radial flow with d(r^2)/dt constant keeps the area-uniform layout too
             * (speed = s->speed at r = R/2); wraps from the rim to the centre. */
            float k = R * s->speed / (R * R);
            float q = fmodf(s->s0 + (cls == 6 ? 1.0f : -1.0f) * k * f, 1.0f);
            if (q < 0)
                q += 1.0f;
            r = R * sqrtf(q);
        }
        px = cx + r * cosf(a);
        py = cy + r * sinf(a);
        draw_shape(img, w, h, s, px, py);
    }
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        float v = img[i];
        rgb[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : lrintf(v));
    }
    free(img);
}

/* ---- one video, any preset ---- */

struct vt_synth_scene {
    vt_synth_opts o;           /* demo: the options, at the layout's size */
    int cls;
    uint64_t seed;
    vt_motion_scene *motion;   /* motion preset */
};

vt_synth_scene *vt_synth_scene_init(const vt_synth_opts *o, const vt_synth_layout *l, int cls,
                                    uint64_t video_seed) {
    vt_synth_scene *s = vt_calloc(1, sizeof *s);
    s->o = *o;
    s->o.width = l->width;
    s->o.height = l->height;
    s->o.fps = l->fps;
    s->o.frames = l->frames;
    s->cls = cls;
    s->seed = video_seed;
    if (o->preset == VT_SYNTH_MOTION)
        s->motion = vt_motion_scene_init(l, cls, video_seed);
    return s;
}

void vt_synth_scene_render(vt_synth_scene *s, uint8_t *rgb, int frame) {
    if (s->motion)
        vt_motion_scene_render(s->motion, rgb, frame);
    else
        vt_synth_render(rgb, &s->o, s->cls, s->seed, frame);
}

void vt_synth_scene_free(vt_synth_scene **sp) {
    if (!*sp)
        return;
    vt_motion_scene_free(&(*sp)->motion);
    free(*sp);
    *sp = NULL;
}

/* ---- encoding ---- */

static void set_av_err(char *err, size_t errlen, const char *what, int code) {
    char buf[128];
    av_strerror(code, buf, sizeof buf);
    vt_set_err(err, errlen, "%s: %s", what, buf);
}

static enum AVPixelFormat pick_pix_fmt(const AVCodec *codec) {
    const enum AVPixelFormat *fmts = NULL;
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
    int n = 0;
    avcodec_get_supported_config(NULL, codec, AV_CODEC_CONFIG_PIX_FORMAT, 0, (const void **)&fmts, &n);
#else
    fmts = codec->pix_fmts;
#endif
    /* MJPEG is full range: yuvj420p is its native 4:2:0 (FFmpeg 5.1 wants it). */
    enum AVPixelFormat pref[2] = {AV_PIX_FMT_YUV420P, AV_PIX_FMT_YUVJ420P};
    if (codec->id == AV_CODEC_ID_MJPEG) {
        pref[0] = AV_PIX_FMT_YUVJ420P;
        pref[1] = AV_PIX_FMT_YUV420P;
    }
    if (!fmts)
        return pref[0];
    for (int k = 0; k < 2; k++)
        for (int i = 0; fmts[i] != AV_PIX_FMT_NONE; i++)
            if (fmts[i] == pref[k])
                return pref[k];
    return fmts[0];
}

static int encode_one(AVCodecContext *enc, AVFormatContext *oc, AVStream *st, AVFrame *frame,
                      AVPacket *pkt, char *err, size_t errlen) {
    int ret = avcodec_send_frame(enc, frame);
    if (ret < 0) {
        set_av_err(err, errlen, "encoder refused a frame", ret);
        return ret;
    }
    for (;;) {
        ret = avcodec_receive_packet(enc, pkt);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return 0;
        if (ret < 0) {
            set_av_err(err, errlen, "encoding failed", ret);
            return ret;
        }
        av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
        pkt->stream_index = st->index;
        ret = av_interleaved_write_frame(oc, pkt); /* takes the reference */
        if (ret < 0) {
            set_av_err(err, errlen, "writing a packet failed", ret);
            return ret;
        }
    }
}

int vt_synth_write_video(const char *path, const vt_synth_opts *o, const vt_synth_layout *l,
                         int cls, uint64_t video_seed, char *err, size_t errlen) {
    vt_ffmpeg_log_init(); /* x264 and swscale talk at info/warning level */
    const fmt_def *fd = format_at(o, l->format);
    if (!fd) {
        vt_set_err(err, errlen, "format %d not available in this FFmpeg build", l->format);
        return AVERROR(EINVAL);
    }
    if (valid_fps(fd, l->fps) != l->fps) {
        vt_set_err(err, errlen, "%s cannot store %d fps", fd->name, l->fps);
        return AVERROR(EINVAL);
    }
    vt_synth_scene *scene = NULL;
    AVFormatContext *oc = NULL;
    AVCodecContext *enc = NULL;
    AVFrame *frame = NULL;
    AVPacket *pkt = NULL;
    struct SwsContext *sws = NULL;
    uint8_t *rgb = NULL;
    char tmp[4200];
    int ret, header = 0;
    /* hidden (.NAME.synth-part), so that a killed synth's part is no sample of a scan */
    const char *base = strrchr(path, '/');
    snprintf(tmp, sizeof tmp, "%.*s.%s.synth-part", base ? (int)(base + 1 - path) : 0, path,
             base ? base + 1 : path);
    /* the output rule (base/common.h): never over a special file, the name or its temp */
    if (vt_output_check(path, err, errlen) != 0 || vt_output_check(tmp, err, errlen) != 0)
        return AVERROR(EEXIST);

    char guess[16];
    snprintf(guess, sizeof guess, "x.%s", fd->ext);
    const AVOutputFormat *ofmt = av_guess_format(NULL, guess, NULL);
    ret = avformat_alloc_output_context2(&oc, ofmt, NULL, tmp);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot create the container", ret);
        goto end;
    }
    oc->flags |= AVFMT_FLAG_BITEXACT; /* no random UIDs or dates: same seed, same bytes */
    const AVCodec *codec = avcodec_find_encoder_by_name(fd->encoder);
    enc = avcodec_alloc_context3(codec);
    VT_CHECK_MEM(enc != NULL, "the encoder's FFmpeg state");
    enc->width = l->width;
    enc->height = l->height;
    enc->pix_fmt = pick_pix_fmt(codec);
    enc->time_base = (AVRational){1, l->fps};
    enc->framerate = (AVRational){l->fps, 1};
    enc->gop_size = l->gop;
    enc->thread_count = 1; /* determinism */
    enc->flags |= AV_CODEC_FLAG_BITEXACT;
    if (codec->id == AV_CODEC_ID_MJPEG)
        enc->color_range = AVCOL_RANGE_JPEG;
    /* demo: fixed quality. motion: drawn per video (l->quality), from near-transparent to
     * visibly blocky, as user footage is: qscale 2..6, CRF 18..27. */
    int motion = o->preset == VT_SYNTH_MOTION;
    if (codec->id == AV_CODEC_ID_MPEG4 || codec->id == AV_CODEC_ID_MJPEG) {
        enc->flags |= AV_CODEC_FLAG_QSCALE;
        enc->global_quality = FF_QP2LAMBDA * (motion ? 2 + l->quality * 5 / 100 : 3);
    }
    if (codec->id == AV_CODEC_ID_H264) {
        char crf[16];
        snprintf(crf, sizeof crf, "%d", motion ? 18 + l->quality / 10 : 20);
        av_opt_set(enc->priv_data, "preset", "veryfast", 0);
        av_opt_set(enc->priv_data, "crf", crf, 0);
    }
    if (oc->oformat->flags & AVFMT_GLOBALHEADER)
        enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    ret = avcodec_open2(enc, codec, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot open the encoder", ret);
        goto end;
    }
    AVStream *st = avformat_new_stream(oc, NULL);
    VT_CHECK_MEM(st != NULL, "the encoder's FFmpeg state");
    st->time_base = enc->time_base;
    st->avg_frame_rate = enc->framerate;
    ret = avcodec_parameters_from_context(st->codecpar, enc);
    if (ret < 0) {
        set_av_err(err, errlen, "codec parameters", ret);
        goto end;
    }
    ret = avio_open(&oc->pb, tmp, AVIO_FLAG_WRITE);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot create the file", ret);
        goto end;
    }
    ret = avformat_write_header(oc, NULL);
    if (ret < 0) {
        set_av_err(err, errlen, "cannot write the header", ret);
        goto end;
    }
    header = 1;

    frame = av_frame_alloc();
    pkt = av_packet_alloc();
    VT_CHECK_MEM(frame && pkt, "the encoder's FFmpeg state");
    frame->format = enc->pix_fmt;
    frame->width = enc->width;
    frame->height = enc->height;
    frame->color_range = enc->color_range;
    ret = av_frame_get_buffer(frame, 0);
    VT_CHECK_MEM(ret >= 0, "a frame");
    sws = sws_getContext(l->width, l->height, AV_PIX_FMT_RGB24, l->width, l->height, enc->pix_fmt,
                         SWS_BILINEAR, NULL, NULL, NULL);
    VT_CHECK(sws != NULL, "swscale cannot convert rgb24 to %d", (int)enc->pix_fmt);
    rgb = vt_calloc((size_t)l->width * l->height * 3 + VT_RGB_PAD, 1); /* swscale reads on */
    scene = vt_synth_scene_init(o, l, cls, video_seed);
    for (int f = 0; f < l->frames; f++) {
        vt_synth_scene_render(scene, rgb, f);
        ret = av_frame_make_writable(frame);
        VT_CHECK_MEM(ret >= 0, "the encoder's FFmpeg state");
        const uint8_t *src[1] = {rgb};
        int src_stride[1] = {l->width * 3};
        sws_scale(sws, src, src_stride, 0, l->height, frame->data, frame->linesize);
        frame->pts = f;
        frame->quality = enc->global_quality;
        ret = encode_one(enc, oc, st, frame, pkt, err, errlen);
        if (ret < 0)
            goto end;
    }
    ret = encode_one(enc, oc, st, NULL, pkt, err, errlen); /* flush */
    if (ret < 0)
        goto end;
    ret = av_write_trailer(oc);
    header = 0;
    if (ret < 0) {
        set_av_err(err, errlen, "cannot finish the file", ret);
        goto end;
    }
    ret = avio_closep(&oc->pb);
    if (ret < 0) {
        set_av_err(err, errlen, "closing the file", ret);
        goto end;
    }
    /* Not synced (prep's copies are): an fsync per video doubled synth's time, and a
     * demo video that a crash of the machine empties is reported unreadable by the scan,
     * not taken in silence. */
    if (rename(tmp, path) != 0) {
        vt_set_err(err, errlen, "cannot rename %s: %s", tmp, strerror(errno));
        ret = AVERROR(errno);
        goto end;
    }
    ret = 0;
end:
    if (header)
        av_write_trailer(oc);
    if (oc && oc->pb)
        avio_closep(&oc->pb);
    if (ret < 0)
        remove(tmp);
    avformat_free_context(oc);
    avcodec_free_context(&enc);
    av_frame_free(&frame);
    av_packet_free(&pkt);
    sws_freeContext(sws);
    free(rgb);
    vt_synth_scene_free(&scene);
    return ret;
}

static int mkdir_p(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* The dataset's videos as jobs, handed out in order to worker threads. Each file is one
 * thread's work from start to end, so the bytes never depend on the thread count; the
 * error reported is the failing job that comes first in order. */
typedef struct synth_job {
    int sp, cls, idx;
} synth_job;

typedef struct synth_pool {
    const char *dir;
    const vt_synth_opts *o;
    const synth_job *jobs;
    int njobs, next, done, failed_job;
    vt_synth_progress_fn progress;
    void *user;
    vt_synth_summary sum;
    int fail_ret;
    char fail_err[512];
    pthread_mutex_t lock;
} synth_pool;

static const char *split_names[3] = {"train", "val", "test"};

char *vt_synth_video_path(char *buf, size_t n, const char *dir, const vt_synth_opts *o, int sp,
                          int cls, int idx) {
    const char *cname = vt_synth_preset_class_name(o, cls);
    vt_synth_layout l;
    vt_synth_video_layout(&l, o, split_names[sp], idx);
    snprintf(buf, n, "%s%s%s/%s/%s_%04d.%s", dir ? dir : "", dir ? "/" : "", split_names[sp],
             cname, cname, idx, format_at(o, l.format)->ext);
    return buf;
}

static void *synth_worker(void *arg) {
    synth_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        int j = p->failed_job < p->njobs ? p->njobs : p->next++;
        pthread_mutex_unlock(&p->lock);
        if (j >= p->njobs)
            return NULL;
        const synth_job *jb = &p->jobs[j];
        vt_synth_layout l;
        vt_synth_video_layout(&l, p->o, split_names[jb->sp], jb->idx);
        char path[4400], e2[256];
        vt_synth_video_path(path, sizeof path, p->dir, p->o, jb->sp, jb->cls, jb->idx);
        uint64_t seed = vt_synth_video_seed(p->o, split_names[jb->sp], jb->cls, jb->idx);
        int ret = vt_synth_write_video(path, p->o, &l, jb->cls, seed, e2, sizeof e2);
        struct stat sb;
        int64_t bytes = ret == 0 && stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
        pthread_mutex_lock(&p->lock);
        if (ret < 0) {
            if (j < p->failed_job) {
                p->failed_job = j;
                p->fail_ret = ret;
                vt_set_err(p->fail_err, sizeof p->fail_err, "%s: %s", path, e2);
            }
        } else {
            p->sum.bytes += bytes;
            p->sum.per_format[l.format]++;
            p->sum.videos++;
            p->done++;
            if (p->progress)
                p->progress(p->user, p->done, p->njobs, path);
        }
        pthread_mutex_unlock(&p->lock);
    }
}

/* The videos o writes into dir, recorded (synth_record.h) once an earlier synth's are
 * gone. 0, or -1 with err. */
static int record(const char *dir, const vt_synth_opts *o, char *err, size_t errlen) {
    int counts[3] = {o->train, o->val, o->test};
    char *text = NULL, p[4400];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "open_memstream");
    for (int sp = 0; sp < 3; sp++)
        for (int c = 0; c < o->classes; c++)
            for (int i = 0; i < counts[sp]; i++)
                fprintf(f, "%s\n", vt_synth_video_path(p, sizeof p, NULL, o, sp, c, i));
    VT_CHECK(fclose(f) == 0, "building the record of %s in memory failed", dir);
    int rc = vt_synth_record_replace(dir, text, len, err, errlen);
    free(text);
    return rc;
}

int vt_synth_dataset(const char *dir, const vt_synth_opts *o, vt_synth_progress_fn progress,
                     void *user, vt_synth_summary *summary, char *err, size_t errlen) {
    int motion = o->preset == VT_SYNTH_MOTION;
    int maxcls = motion ? VT_MOTION_CLASSES : VT_SYNTH_MAX_CLASSES;
    /* motion: 0 means drawn per video; a size override is capped because the world the
     * camera roams is several times the frame. */
    int minv = motion ? 0 : 1, maxside = motion ? 640 : 4096;
    if (o->preset < VT_SYNTH_DEMO || o->preset > VT_SYNTH_MOTION || o->classes < 2 ||
        o->classes > maxcls || o->frames < minv || o->fps < minv || o->fps > 65535 ||
        (motion && (o->width == 0) != (o->height == 0)) ||
        (!(motion && o->width == 0) && (o->width < 16 || o->height < 16)) || (o->width & 1) ||
        (o->height & 1) || o->width > maxside || o->height > maxside || o->train < 0 ||
        o->val < 0 || o->test < 0) {
        vt_set_err(err, errlen, "bad options for the %s preset: classes 2..%d, frames >= 1, "
                   "fps 1..65535, even size 16..%d", vt_synth_preset_name(o->preset), maxcls,
                   maxside);
        return AVERROR(EINVAL);
    }
    int nformats = vt_synth_format_count(o);
    if (nformats == 0) {
        vt_set_err(err, errlen, "this FFmpeg build has none of the encoders mpeg4, mjpeg%s",
                   motion ? "" : ", ffv1");
        return AVERROR_ENCODER_NOT_FOUND;
    }
    /* Unfinished (pipeline/data/dataset/dataset.h) until the last video is written: a
     * killed synth's DIR is refused by train, eval and scan, never taken as whole (it
     * was: fewer videos, a class missing, and nothing said). */
    char how[4400];
    snprintf(how, sizeof how, "`vidtrain synth %s` has not written every video (it is "
             "running, or it was stopped); run it again with --force to write it whole", dir);
    if (mkdir_p(dir) != 0) {
        vt_set_err(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return AVERROR(errno);
    }
    /* and the videos an earlier synth into dir wrote go: --force used to leave them, a
     * dataset of its classes and counts beside the new one's */
    if (vt_dataset_mark_unfinished(dir, how, err, errlen) != 0 || record(dir, o, err, errlen))
        return AVERROR(EIO);
    int counts[3] = {o->train, o->val, o->test};
    int total = o->classes * (o->train + o->val + o->test);
    synth_job *jobs = vt_calloc((size_t)VT_MAX(total, 1), sizeof *jobs);
    int n = 0;
    for (int sp = 0; sp < 3; sp++)
        for (int c = 0; c < o->classes; c++) {
            if (counts[sp] == 0)
                continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s/%s", dir, split_names[sp],
                     vt_synth_preset_class_name(o, c));
            if (mkdir_p(sub) != 0) {
                vt_set_err(err, errlen, "cannot create %s: %s", sub, strerror(errno));
                free(jobs);
                return AVERROR(errno);
            }
            for (int i = 0; i < counts[sp]; i++)
                jobs[n++] = (synth_job){sp, c, i};
        }
    synth_pool p = {.dir = dir, .o = o, .jobs = jobs, .njobs = n, .failed_job = n,
                    .progress = progress, .user = user};
    p.sum.nformats = nformats;
    pthread_mutex_init(&p.lock, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nthreads = o->threads > 0 ? o->threads : (int)VT_MIN(VT_MAX(ncpu, 1), 8);
    nthreads = VT_MAX(1, VT_MIN(nthreads, n));
    pthread_t *tid = vt_calloc((size_t)nthreads, sizeof *tid);
    int started = 0;
    for (int t = 1; t < nthreads; t++)
        started += pthread_create(&tid[started], NULL, synth_worker, &p) == 0;
    synth_worker(&p); /* this thread works too: one thread means no thread at all */
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    pthread_mutex_destroy(&p.lock);
    free(tid);
    free(jobs);
    if (p.failed_job < n) {
        vt_set_err(err, errlen, "%s", p.fail_err);
        return p.fail_ret;
    }
    p.sum.foreign = vt_synth_count_foreign(dir, n);
    if (vt_dataset_mark_finished(dir, err, errlen) != 0)
        return AVERROR(EIO);
    if (summary)
        *summary = p.sum;
    return 0;
}
