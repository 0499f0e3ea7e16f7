/*
 * video_frames.c: a folder of numbered JPEG or PNG frames read as one video (video.h) —
 * what it takes to be one, and its opening through FFmpeg's image2 demuxer, so that the
 * index, seeking, decoding, clips and the frame cache are the video reader's own.
 *
 * A frame folder holds nothing but files <prefix><number>.<ext> with one prefix and one
 * extension (jpg, jpeg or png, any case; hidden files aside), numbered without a gap from
 * its lowest number. Frame n is the n-th number; its time is n / the frame rate
 * (vt_video_set_frame_rate, --frame-rate, default 30). Like the rest of the reader it
 * must never print or abort on a bad folder: a gap or a mix of names is a data error.
 * And the opening of a file's container beside it (vt_vid_open_file: the file protocol
 * alone, no demuxer that reads a list of other inputs), for both kinds go through here.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <libavformat/avformat.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/data/video/video_impl.h"

static _Atomic double frame_rate = 30.0;

void vt_video_set_frame_rate(double fps) { atomic_store(&frame_rate, fps); }
double vt_video_get_frame_rate(void) { return atomic_load(&frame_rate); }

static int image_ext(const char *e) {
    return !strcasecmp(e, "jpg") || !strcasecmp(e, "jpeg") || !strcasecmp(e, "png");
}

typedef struct frames_scan {
    char prefix[256], ext[16];
    int64_t lo, hi;     /* lowest and highest number */
    int64_t n;          /* frames */
    int padded;         /* 1: numbers with leading zeros, all `width` digits */
    int width;
    int mixed;          /* names that do not share the pattern, or widths that differ */
} frames_scan;

/* Splits name into prefix, number (the last run of digits before the extension) and
 * extension. 0, or -1 when it is not a numbered image. */
static int split_name(const char *name, char *prefix, size_t pn, int64_t *num, int *width,
                      char *ext, size_t en) {
    const char *dot = strrchr(name, '.');
    if (!dot || !image_ext(dot + 1) || strlen(dot + 1) >= en)
        return -1;
    const char *d = dot;
    while (d > name && isdigit((unsigned char)d[-1]))
        d--;
    int w = (int)(dot - d);
    if (w == 0 || w > 12 || (size_t)(d - name) >= pn)
        return -1;
    memcpy(prefix, name, (size_t)(d - name));
    prefix[d - name] = 0;
    snprintf(ext, en, "%s", dot + 1);
    *num = 0;
    for (const char *p = d; p < dot; p++)
        *num = *num * 10 + (*p - '0');
    *width = w;
    return 0;
}

/* Reads dir: 1 (a frame folder, *fs filled), 0 (not one: something else in it, or no
 * numbered image), -1 (cannot be listed). */
static int scan_frames(const char *dir, frames_scan *fs) {
    memset(fs, 0, sizeof *fs);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    int other = 0;
    while ((e = readdir(d)) != NULL && !other) {
        if (e->d_name[0] == '.')
            continue;
        char prefix[256], ext[16];
        int64_t num;
        int w;
        if (split_name(e->d_name, prefix, sizeof prefix, &num, &w, ext, sizeof ext) < 0) {
            other = 1;
            break;
        }
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            other = 1;
            break;
        }
        int pad = w > 1 && e->d_name[strlen(prefix)] == '0';
        if (fs->n == 0) {
            snprintf(fs->prefix, sizeof fs->prefix, "%s", prefix);
            snprintf(fs->ext, sizeof fs->ext, "%s", ext);
            fs->lo = fs->hi = num;
            fs->width = w;
        } else if (strcmp(prefix, fs->prefix) || strcmp(ext, fs->ext)) {
            fs->mixed = 1;
        }
        fs->padded |= pad;
        if (w != fs->width)
            fs->width = -1; /* widths differ: only unpadded numbers may */
        fs->lo = num < fs->lo ? num : fs->lo;
        fs->hi = num > fs->hi ? num : fs->hi;
        fs->n++;
    }
    closedir(d);
    if (fs->padded && fs->width < 0)
        fs->mixed = 1;
    return !other && fs->n > 0;
}

int vt_video_is_frame_dir(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    frames_scan fs;
    int r = scan_frames(path, &fs);
    if (r < 0) /* too many open files: the folder may be one (video.h) */
        vt_vid_note_system(AVERROR(errno), "cannot list the frame folder", strerror(errno));
    return r == 1;
}

/* Demuxers that read a list of other inputs rather than a video: a file of one of these
 * kinds under a video's name (an ffconcat script named x.mp4, a playlist) would be read as
 * the files or URLs it names, which are not the file the dataset lists. */
static int names_other_inputs(const AVInputFormat *f) {
    static const char *const lists[] = {"concat", "hls", "dash", "ffmetadata", "tedcaptions"};
    for (size_t i = 0; f && i < VT_ARRAY_LEN(lists); i++)
        if (!strcmp(f->name, lists[i]))
            return 1;
    return 0;
}

int vt_vid_open_file(AVFormatContext **fmt, const char *path, char *err, size_t errlen) {
    /* the local file protocol only: a path that looks like a URL ("http://...", "pipe:0")
     * is no file of a dataset; streams and cameras go through stream.c */
    AVDictionary *o = NULL;
    av_dict_set(&o, "protocol_whitelist", "file", 0);
    int ret = avformat_open_input(fmt, path, NULL, &o);
    av_dict_free(&o);
    if (ret < 0) {
        vt_vid_set_av_err(err, errlen, "cannot read the container", ret);
        return ret;
    }
    if (names_other_inputs((*fmt)->iformat)) {
        vt_set_err(err, errlen, "a %s list of other files or URLs, not a video (FFmpeg would "
                   "read what it names)", (*fmt)->iformat->name);
        avformat_close_input(fmt);
        return AVERROR_INVALIDDATA;
    }
    return 0;
}

int vt_video_open_input(AVFormatContext **fmt, const char *path, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return vt_vid_open_frames(fmt, path, err, errlen);
    return vt_vid_open_file(fmt, path, err, errlen);
}

int vt_vid_open_frames(AVFormatContext **fmt, const char *dir, char *err, size_t errlen) {
    frames_scan fs;
    int r = scan_frames(dir, &fs);
    if (r < 0) { /* too many open files is no fault of the folder (video.h) */
        int e = errno ? errno : EIO;
        vt_set_err(err, errlen, "cannot list the frame folder: %s", strerror(e));
        vt_vid_note_system(AVERROR(e), "cannot list the frame folder", strerror(e));
        return AVERROR(e);
    }
    if (r == 0) {
        vt_set_err(err, errlen, "not a frame folder (only numbered .jpg/.jpeg/.png files)");
        return AVERROR_INVALIDDATA;
    }
    if (fs.mixed) {
        vt_set_err(err, errlen, "frame folder with mixed names (one prefix, one extension "
                   "and one number width for all its frames, such as 000001.jpg)");
        return AVERROR_INVALIDDATA;
    }
    if (fs.hi - fs.lo + 1 != fs.n) {
        vt_set_err(err, errlen, "frame folder with a gap: %lld frames numbered %lld to %lld "
                   "(frames must be numbered without a gap)", (long long)fs.n,
                   (long long)fs.lo, (long long)fs.hi);
        return AVERROR_INVALIDDATA;
    }
    /* the pattern image2 expands: '%' in the names doubled, the number as printf's */
    char pat[4400];
    size_t k = 0;
    for (const char *parts[2] = {dir, fs.prefix}, **p = parts; p < parts + 2; p++) {
        for (const char *c = *p; *c && k + 3 < sizeof pat; c++) {
            if (*c == '%')
                pat[k++] = '%';
            pat[k++] = *c;
        }
        if (p == parts && k + 1 < sizeof pat)
            pat[k++] = '/';
    }
    pat[k] = 0;
    char num[16];
    if (fs.padded)
        snprintf(num, sizeof num, "%%0%dd", fs.width);
    else
        snprintf(num, sizeof num, "%%d");
    snprintf(pat + k, sizeof pat - k, "%s.%s", num, fs.ext);
    AVDictionary *o = NULL;
    char v[64];
    av_dict_set(&o, "pattern_type", "sequence", 0);
    snprintf(v, sizeof v, "%lld", (long long)fs.lo);
    av_dict_set(&o, "start_number", v, 0);
    snprintf(v, sizeof v, "%.17g", vt_video_get_frame_rate());
    av_dict_set(&o, "framerate", v, 0);
    const AVInputFormat *img = av_find_input_format("image2");
    int ret = img ? avformat_open_input(fmt, pat, img, &o) : AVERROR_DEMUXER_NOT_FOUND;
    av_dict_free(&o);
    if (ret < 0)
        vt_vid_set_av_err(err, errlen, "cannot read the frame folder", ret);
    return ret;
}
