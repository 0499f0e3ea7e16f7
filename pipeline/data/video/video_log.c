/*
 * video_log.c: FFmpeg's own log, captured for the video reader (video.h). The last error
 * line FFmpeg writes on this thread is kept so that a data error can say more than its
 * AVERROR code; nothing reaches stderr unless VT_FFMPEG_LOG=1 is set for debugging. The
 * log is also how a decoder's error concealment is counted (vt_vid_dec_damage): the one
 * sign of it that survives frame threads. The reader's errors pass here too, which is where
 * a refusal of the system (too many open files) is noted for vt_video_system_failed.
 * It must never print on its own: FFmpeg logs from inside the library, mid-read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>

#include "base/common.h"
#include "base/host_mem.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

/* ---- FFmpeg logging: captured, never printed ---- */

_Thread_local char vt_vid_last_msg[VT_VID_MSG_LEN];
static int av_log_forward;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

/* The decoder a line is about, when it is one the reader tapped (vt_vid_dec_tap): avcl is
 * an AVCodecContext (a frame thread's copy has the same opaque) whose opaque is ours.
 * Other decoders in the process (signature.c) leave opaque NULL. */
static vt_hw_dec *tapped_decoder(void *avcl) {
    if (!avcl || *(const AVClass **)avcl != avcodec_get_class())
        return NULL;
    vt_hw_dec *h = ((AVCodecContext *)avcl)->opaque;
    return h && h->magic == VT_DEC_MAGIC ? h : NULL;
}

static void log_cb(void *avcl, int level, const char *fmt, va_list vl) {
    if (av_log_forward) {
        va_list copy;
        va_copy(copy, vl);
        av_log_default_callback(avcl, level, fmt, copy);
        va_end(copy);
    }
    /* libavcodec's error concealment (error_resilience.c, ff_er_frame_end) says this once
     * per picture it repaired, at AV_LOG_INFO, from the thread that decoded the picture */
    if (!strncmp(fmt, "concealing ", 11)) {
        vt_hw_dec *h = tapped_decoder(avcl);
        if (h)
            atomic_fetch_add(&h->concealed, 1);
    }
    if (level > AV_LOG_ERROR)
        return;
    char line[256];
    int prefix = 0;
    av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' '))
        line[--n] = 0;
    if (n)
        snprintf(vt_vid_last_msg, sizeof vt_vid_last_msg, "%s", line);
}

static void log_init(void) {
    const char *e = getenv("VT_FFMPEG_LOG");
    av_log_forward = e && *e && strcmp(e, "0") != 0;
    av_log_set_level(av_log_forward ? AV_LOG_INFO : AV_LOG_ERROR);
    av_log_set_callback(log_cb);
}

void vt_ffmpeg_log_init(void) { pthread_once(&log_once, log_init); }

void vt_vid_dec_tap(vt_hw_dec *h, AVCodecContext *dec) {
    vt_ffmpeg_log_init();
    h->magic = VT_DEC_MAGIC;
    dec->opaque = h;
}

int64_t vt_vid_dec_damage(vt_hw_dec *h, const AVCodecContext *dec, const AVFrame *f) {
    int64_t all = atomic_load(&h->concealed), n = 0;
    if (all > h->concealed_taken && h->pending == 0)
        h->pending_age = 0;
    h->pending += all - h->concealed_taken;
    h->concealed_taken = all;
    if (!f) { /* drained: no frame is coming for what waits */
        n = h->pending;
        h->pending = 0;
        return n;
    }
    if ((f->flags & AV_FRAME_FLAG_CORRUPT) || f->decode_error_flags) {
        n = 1;
        if ((f->decode_error_flags & FF_DECODE_ERROR_CONCEALMENT_ACTIVE) && h->pending > 0)
            h->pending--; /* the log line was this frame's */
    }
    /* Frames handed out between a picture's log line and the picture: those shown before
     * it that were decoded before it but still held for reordering, and those decoded
     * after it but shown before it (B-frames), up to has_b_frames each; and threads - 1
     * frames in flight in other frame threads. One more for slack. A picture's mark that
     * a frame thread lost is counted when this many frames have passed. */
    int delay = 2 * dec->has_b_frames + VT_MAX(dec->thread_count, 1);
    if (h->pending > 0 && ++h->pending_age > delay) {
        n += h->pending;
        h->pending = 0;
    }
    return n;
}

/* ---- the system's refusals (video.h: vt_video_system_failed) ---- */

/* ENOMEM is the system's when the memory the process may still take (base/host_mem.h) is
 * below this after the refusal: the largest frame a video may have (VT_VIDEO_MAX_PIXELS
 * at 4:2:0, 96 MiB) and as much again for its decoder's buffers beside it. A damaged
 * header that asks for gigabytes is refused with more than this left: the video's. */
#define SYS_ENOMEM_ROOM ((int64_t)256 << 20)

static atomic_int sys_failed; /* 0, or the errno of the first refusal: EMFILE, ENOMEM */
static char sys_why[800]; /* the first one's reason, written once before sys_failed is set */
static pthread_mutex_t sys_lock = PTHREAD_MUTEX_INITIALIZER;

void vt_vid_note_system(int code, const char *what, const char *reason) {
    char why[800];
    if (code == AVERROR(ENOMEM)) {
        vt_host_mem m;
        vt_host_mem_get(&m);
        if (m.available >= SYS_ENOMEM_ROOM)
            return;
        char said[700], a[32];
        snprintf(why, sizeof why, "%.200s%s%.100s, with %s left under %.300s", what,
                 reason[0] ? ": " : "", reason, vt_fmt_bytes(a, sizeof a, m.available),
                 vt_host_mem_said(&m, said, sizeof said));
    } else if (code == AVERROR(EMFILE) || code == AVERROR(ENFILE)) {
        snprintf(why, sizeof why, "%s: %s", what, reason);
    } else {
        return;
    }
    pthread_mutex_lock(&sys_lock);
    if (!atomic_load(&sys_failed)) {
        snprintf(sys_why, sizeof sys_why, "%s", why);
        atomic_store(&sys_failed, code == AVERROR(ENOMEM) ? ENOMEM : EMFILE);
    }
    pthread_mutex_unlock(&sys_lock);
}

int vt_video_failed_short(const char *what) {
    if (!atomic_load(&sys_failed))
        vt_vid_note_system(AVERROR(ENOMEM), what, "");
    return atomic_load(&sys_failed) != 0;
}

int vt_video_system_failed(char *msg, size_t n) {
    int e = atomic_load(&sys_failed);
    if (!e)
        return 0;
    if (e == ENOMEM)
        vt_set_err(msg, n, "the process ran out of memory while reading the videos (%s): that "
                   "is no fault of theirs, and none is recorded as bad for it; raise that "
                   "limit, or ask for less: a smaller --batch or --clip, fewer --workers or "
                   "--threads, a smaller --frame-cache", sys_why);
    else
        vt_set_err(msg, n, "the system refused to open more files while reading the videos "
                   "(%s): that is no fault of theirs, and none is recorded as bad for it; raise "
                   "the limit on open files (ulimit -n) and run again", sys_why);
    return 1;
}

/* "cannot read the container: moov atom not found (Invalid data found when processing
 * input)": FFmpeg's own last error line says more than the AVERROR code, so it goes first. */
void vt_vid_set_av_err(char *err, size_t errlen, const char *what, int code) {
    char buf[128];
    av_strerror(code, buf, sizeof buf);
    vt_vid_note_system(code, what, buf);
    if (vt_vid_last_msg[0])
        vt_set_err(err, errlen, "%s: %s (%s)", what, vt_vid_last_msg, buf);
    else
        vt_set_err(err, errlen, "%s: %s", what, buf);
}
