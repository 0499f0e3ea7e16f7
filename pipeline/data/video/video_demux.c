/*
 * video_demux.c: the container under a vt_video (video_impl.h): opening it (a file, or a
 * frame folder through video_frames.c), keeping only the video stream's packets, and
 * opening it again for a seek the demuxer cannot do. video_open.c opens through it and
 * video_seek.c reopens through it, so neither calls the other back.
 *
 * Never prints: an error is a negative AVERROR-style code plus a reason in err.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <libavformat/avformat.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

int vt_vid_open_input(vt_video *v, int probe, char *err, size_t errlen) {
    vt_vid_last_msg[0] = 0;
    struct stat st;
    int ret;
    if (stat(v->path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((ret = vt_vid_open_frames(&v->fmt, v->path, err, errlen)) < 0)
            return ret;
    } else if ((ret = vt_vid_open_file(&v->fmt, v->path, err, errlen)) < 0) {
        return ret;
    }
    /* Refuse absurd headers before find_stream_info reads (and allocates) a frame. */
    for (unsigned i = 0; i < v->fmt->nb_streams; i++) {
        const AVCodecParameters *p = v->fmt->streams[i]->codecpar;
        if (p->codec_type != AVMEDIA_TYPE_VIDEO)
            continue;
        if (p->width > VT_VIDEO_MAX_SIDE || p->height > VT_VIDEO_MAX_SIDE ||
            (int64_t)p->width * p->height > VT_VIDEO_MAX_PIXELS) {
            vt_set_err(err, errlen,
                       "dimensions %dx%d exceed the limit (%d per side, %lld Mpixel): "
                       "corrupt header or not a training video",
                       p->width, p->height, VT_VIDEO_MAX_SIDE, VT_VIDEO_MAX_PIXELS >> 20);
            return AVERROR(ERANGE);
        }
    }
    return probe ? vt_vid_probe(v, err, errlen) : 0;
}

int vt_vid_probe(vt_video *v, char *err, size_t errlen) {
    vt_vid_last_msg[0] = 0;
    int ret = avformat_find_stream_info(v->fmt, NULL);
    if (ret < 0) {
        vt_vid_set_av_err(err, errlen, "cannot find stream parameters", ret);
        return ret;
    }
    return 0;
}

void vt_vid_discard_others(vt_video *v) {
    for (unsigned i = 0; i < v->fmt->nb_streams; i++)
        v->fmt->streams[i]->discard = (int)i == v->sidx ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
}

int vt_vid_reopen(vt_video *v, char *err, size_t errlen) {
    avformat_close_input(&v->fmt);
    int ret = vt_vid_open_input(v, 1, err, errlen);
    if (ret < 0)
        return ret;
    if (v->sidx >= (int)v->fmt->nb_streams) {
        vt_set_err(err, errlen, "stream layout changed on vt_vid_reopen");
        return AVERROR_INVALIDDATA;
    }
    vt_vid_discard_others(v);
    return 0;
}
