/*
 * video_log.c: FFmpeg's own log, captured for the video reader (video.h). The last error
 * line FFmpeg writes on this thread is kept so that a data error can say more than its
 * AVERROR code; nothing reaches stderr unless VT_FFMPEG_LOG=1 is set for debugging.
 * It must never print on its own: FFmpeg logs from inside the library, mid-read.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavutil/error.h>
#include <libavutil/log.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

/* ---- FFmpeg logging: captured, never printed ---- */

_Thread_local char vt_vid_last_msg[VT_VID_MSG_LEN];
static int av_log_forward;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_cb(void *avcl, int level, const char *fmt, va_list vl) {
    if (av_log_forward) {
        va_list copy;
        va_copy(copy, vl);
        av_log_default_callback(avcl, level, fmt, copy);
        va_end(copy);
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

/* "cannot read the container: moov atom not found (Invalid data found when processing
 * input)": FFmpeg's own last error line says more than the AVERROR code, so it goes first. */
void vt_vid_set_av_err(char *err, size_t errlen, const char *what, int code) {
    char buf[128];
    av_strerror(code, buf, sizeof buf);
    if (vt_vid_last_msg[0])
        vt_set_err(err, errlen, "%s: %s (%s)", what, vt_vid_last_msg, buf);
    else
        vt_set_err(err, errlen, "%s: %s", what, buf);
}
