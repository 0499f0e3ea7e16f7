/*
 * tensorboard.c: TensorBoard event files in RUN/tb/ (tensorboard.h) — Event protocol
 * buffers through models/formats/protobuf.h, TFRecord framing with masked CRC32C, and
 * PNG images through FFmpeg's png encoder.
 *
 * It must never stop a run or change metrics.jsonl: a failure is said once on stderr and
 * later events are dropped.
 */
#include "app/eval/tensorboard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>

#include "app/dist.h"
#include "app/run/run_files.h"
#include "base/common.h"
#include "models/formats/protobuf.h"
#include "pipeline/data/batch.h"
#include "pipeline/data/sample.h"

/* ---- CRC32C ---- */

uint32_t vt_crc32c(const void *p, size_t n) {
    static uint32_t table[256];
    static int init;
    if (!init) { /* the same values whichever thread fills them first */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        init = 1;
    }
    const uint8_t *b = p;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ b[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

/* ---- the file ---- */

static char g_path[4400];   /* this process's events file, once made */
static char g_run[4096];    /* for which run folder */
static int g_failed;

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

/* One TFRecord holding ev, appended whole. */
static int append_record(const vt_pb *ev) {
    size_t n = 12 + ev->len + 4;
    uint8_t *r = vt_malloc(n);
    uint64_t len = ev->len;
    for (int i = 0; i < 8; i++)
        r[i] = (uint8_t)(len >> (8 * i));
    uint32_t c = vt_crc32c_mask(vt_crc32c(r, 8));
    for (int i = 0; i < 4; i++)
        r[8 + i] = (uint8_t)(c >> (8 * i));
    memcpy(r + 12, ev->data, ev->len);
    c = vt_crc32c_mask(vt_crc32c(ev->data, ev->len));
    for (int i = 0; i < 4; i++)
        r[12 + ev->len + i] = (uint8_t)(c >> (8 * i));
    char err[1200];
    int rc = vt_file_append(g_path, r, n, err, sizeof err);
    free(r);
    if (rc != 0 && !g_failed) {
        fprintf(stderr, "warning: TensorBoard events: %s (metrics.jsonl still has everything; no "
                "more events this run)\n", err);
        g_failed = 1;
    }
    return rc;
}

/* The file of this process for run_dir (RUN/tb/ made), its version record first. 0 ok. */
static int open_file(const char *run_dir) {
    if (g_failed || !vt_dist_lead())
        return -1;
    if (g_path[0] && !strcmp(g_run, run_dir))
        return 0;
    char dir[4200], err[1200], host[256] = "localhost";
    snprintf(dir, sizeof dir, "%s/tb", run_dir);
    if (vt_run_mkdirs(dir, err, sizeof err) != 0) {
        fprintf(stderr, "warning: TensorBoard events: %s (no events this run)\n", err);
        g_failed = 1;
        return -1;
    }
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    for (char *h = host; *h; h++)
        if (*h == '/')
            *h = '_';
    double now = wall_now();
    snprintf(g_path, sizeof g_path, "%s/events.out.tfevents.%lld.%s.%d.vidtrain", dir,
             (long long)now, host, (int)getpid());
    snprintf(g_run, sizeof g_run, "%s", run_dir);
    vt_pb ev = {0};
    vt_pb_double(&ev, 1, now);
    vt_pb_int(&ev, 2, 0);
    vt_pb_string(&ev, 3, "brain.Event:2");
    int rc = append_record(&ev);
    vt_pb_free(&ev);
    return rc;
}

/* An Event at step holding one Summary (summary's bytes). */
static void write_summary(int64_t step, const vt_pb *summary) {
    vt_pb ev = {0};
    vt_pb_double(&ev, 1, wall_now());
    vt_pb_int(&ev, 2, step);
    vt_pb_msg(&ev, 5, summary);
    append_record(&ev);
    vt_pb_free(&ev);
}

void vt_tb_metrics(const char *run_dir, const cJSON *line) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(line, "kind");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(line, "step");
    if (!cJSON_IsString(k) || !cJSON_IsNumber(s) || open_file(run_dir) != 0)
        return;
    vt_pb sum = {0};
    for (const cJSON *e = line->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || !strcmp(e->string, "step") || !isfinite(e->valuedouble))
            continue;
        char tag[256];
        snprintf(tag, sizeof tag, "%s/%s", k->valuestring, e->string);
        vt_pb v = {0};
        vt_pb_string(&v, 1, tag);
        vt_pb_float(&v, 2, (float)e->valuedouble);
        vt_pb_msg(&sum, 1, &v);
        vt_pb_free(&v);
    }
    if (sum.len)
        write_summary((int64_t)s->valuedouble, &sum);
    vt_pb_free(&sum);
}

/* ---- images ---- */

/* rgb (w x h) as PNG bytes into out. 0, or -1. */
static int encode_png(const uint8_t *rgb, int w, int h, vt_pb *out) {
    const AVCodec *codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!codec)
        return -1;
    AVCodecContext *c = avcodec_alloc_context3(codec);
    AVFrame *f = av_frame_alloc();
    AVPacket *pkt = av_packet_alloc();
    int rc = -1;
    c->width = w;
    c->height = h;
    c->pix_fmt = AV_PIX_FMT_RGB24;
    c->time_base = (AVRational){1, 1};
    f->format = AV_PIX_FMT_RGB24;
    f->width = w;
    f->height = h;
    if (avcodec_open2(c, codec, NULL) < 0 || av_frame_get_buffer(f, 0) < 0)
        goto end;
    for (int y = 0; y < h; y++)
        memcpy(f->data[0] + (size_t)y * f->linesize[0], rgb + (size_t)y * w * 3, (size_t)w * 3);
    if (avcodec_send_frame(c, f) < 0 || avcodec_send_frame(c, NULL) < 0)
        goto end;
    if (avcodec_receive_packet(c, pkt) == 0) {
        vt_pb_raw(out, pkt->data, (size_t)pkt->size);
        rc = 0;
    }
end:
    av_packet_free(&pkt);
    av_frame_free(&f);
    avcodec_free_context(&c);
    return rc;
}

void vt_tb_image(const char *run_dir, int64_t step, const char *tag, const uint8_t *rgb, int w,
                 int h) {
    if (open_file(run_dir) != 0)
        return;
    vt_pb png = {0};
    if (encode_png(rgb, w, h, &png) != 0) {
        vt_pb_free(&png);
        return;
    }
    vt_pb img = {0}, v = {0}, sum = {0};
    vt_pb_int(&img, 1, h);
    vt_pb_int(&img, 2, w);
    vt_pb_int(&img, 3, 3); /* RGB */
    vt_pb_bytes(&img, 4, png.data, png.len);
    vt_pb_string(&v, 1, tag);
    vt_pb_msg(&v, 4, &img);
    vt_pb_msg(&sum, 1, &v);
    write_summary(step, &sum);
    vt_pb_free(&png);
    vt_pb_free(&img);
    vt_pb_free(&v);
    vt_pb_free(&sum);
}

/* The matrix (rows: true class) as a heat map, each row's share from white to dark
 * blue, a cell `cell` pixels a side: what report.html's heat map shows. */
static void confusion_image(const cJSON *conf, int n, int cell, uint8_t *rgb) {
    int side = n * cell;
    int r = 0;
    for (const cJSON *row = conf->child; row && r < n; row = row->next, r++) {
        double tot = 0;
        for (const cJSON *x = row->child; x; x = x->next)
            tot += cJSON_IsNumber(x) ? x->valuedouble : 0;
        int c = 0;
        for (const cJSON *x = row->child; x && c < n; x = x->next, c++) {
            double v = tot > 0 && cJSON_IsNumber(x) ? x->valuedouble / tot : 0;
            uint8_t px[3] = {(uint8_t)lround(255 - 247 * v), (uint8_t)lround(255 - 207 * v),
                             (uint8_t)lround(255 - 148 * v)};
            for (int y = 0; y < cell; y++)
                for (int xx = 0; xx < cell; xx++) {
                    /* a one-pixel grey grid between cells */
                    int edge = y == cell - 1 || xx == cell - 1;
                    uint8_t *o = rgb + ((size_t)(r * cell + y) * side + (size_t)(c * cell + xx)) * 3;
                    o[0] = edge ? 200 : px[0];
                    o[1] = edge ? 200 : px[1];
                    o[2] = edge ? 200 : px[2];
                }
        }
    }
}

void vt_tb_clips(const char *run_dir, int64_t step, const vt_batch *b, int n, const char *norm) {
    vt_clip_cfg cfg;
    vt_clip_cfg_default(&cfg);
    vt_clip_set_norm(&cfg, norm); /* the mean and std the clips were normalised with */
    int T = b->t, H = b->h, W = b->w, sw = W * T;
    uint8_t *rgb = vt_malloc((size_t)sw * H * 3);
    for (int k = 0; k < n && k < b->n; k++) {
        const float *x = b->x + (size_t)k * (size_t)vt_batch_clip_floats(b);
        for (int c = 0; c < 3; c++)
            for (int t = 0; t < T; t++)
                for (int y = 0; y < H; y++)
                    for (int xx = 0; xx < W; xx++) {
                        float v = x[(((size_t)c * T + t) * H + y) * W + xx];
                        double p = (v * cfg.std[c] + cfg.mean[c]) * 255.0;
                        rgb[((size_t)y * sw + (size_t)t * W + xx) * 3 + c] =
                            (uint8_t)(p < 0 ? 0 : p > 255 ? 255 : lround(p));
                    }
        char tag[64];
        snprintf(tag, sizeof tag, "clips/%d", k);
        vt_tb_image(run_dir, step, tag, rgb, sw, H);
    }
    free(rgb);
}

void vt_tb_confusion(const char *run_dir, int64_t step, const cJSON *eval_json) {
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(eval_json, "heads");
    for (const cJSON *h = heads ? heads->child : NULL; h; h = h->next) {
        const cJSON *conf = cJSON_GetObjectItemCaseSensitive(h, "confusion");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(h, "name");
        int n = cJSON_GetArraySize(conf);
        if (!cJSON_IsArray(conf) || n < 1 || n > 1000)
            continue;
        int cell = VT_MAX(2, VT_MIN(32, 512 / n)), side = n * cell;
        uint8_t *rgb = vt_calloc((size_t)side * side * 3, 1);
        confusion_image(conf, n, cell, rgb);
        char tag[128];
        snprintf(tag, sizeof tag, "confusion/%s", cJSON_IsString(name) ? name->valuestring : "head");
        vt_tb_image(run_dir, step, tag, rgb, side, side);
        free(rgb);
    }
}
