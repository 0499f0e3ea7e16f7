/*
 * decode_opt.c: the shared `--decode` option (decode_opt.h).
 */
#include "app/decode_opt.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/video/video.h"

static int frame_rate_given;

int vt_frame_rate_given(void) { return frame_rate_given; }

int vt_frame_rate_check(const char *cmd, const char *why_none, const char *const *paths,
                        int n) {
    if (!frame_rate_given)
        return 0;
    for (int i = 0; i < n; i++)
        if (paths[i] && vt_video_is_frame_dir(paths[i]))
            return 0;
    fprintf(stderr, "vidtrain %s: --frame-rate %g times the frames of frame folders (numbered "
            "JPEG/PNG files read as one video), and %s: a video file's frames carry "
            "their own timestamps, so it would change nothing; leave it out\n", cmd,
            vt_video_get_frame_rate(), why_none);
    return 2;
}

int vt_frame_rate_check_data(const char *cmd, const vt_dataset *ds, const vt_dataset *ds2) {
    if (!frame_rate_given)
        return 0;
    const int n = ds->nvideos + (ds2 ? ds2->nvideos : 0);
    const char **paths = vt_malloc(sizeof *paths * (size_t)(n ? n : 1));
    for (int i = 0; i < ds->nvideos; i++)
        paths[i] = ds->videos[i].path;
    for (int i = 0; ds2 && i < ds2->nvideos; i++)
        paths[ds->nvideos + i] = ds2->videos[i].path;
    char what[2100];
    if (ds2)
        snprintf(what, sizeof what, "neither %s nor --val-dir %s holds one", ds->dir, ds2->dir);
    else
        snprintf(what, sizeof what, "%s holds none", ds->dir);
    int rc = vt_frame_rate_check(cmd, what, paths, n);
    free(paths);
    return rc;
}

int vt_decode_opt_take(const char *cmd, int argc, char **argv, int *i) {
    const char *v = NULL;
    int r = vt_opt_value(argc, argv, i, "--frame-rate", &v);
    if (r != 0) {
        double fps;
        if (r < 0 || vt_parse_f64(v, 0.001, 10000, &fps) != 0) {
            fprintf(stderr, "vidtrain %s: --frame-rate takes frames per second of frame "
                    "folders (0.001 to 10000), got '%s'\n", cmd, r < 0 ? "" : v);
            return -1;
        }
        vt_video_set_frame_rate(fps);
        frame_rate_given = 1;
        return 1;
    }
    r = vt_opt_value(argc, argv, i, "--decode", &v);
    if (r == 0)
        return 0;
    int m = r > 0 ? vt_decode_mode_parse(v) : -1;
    if (m < 0) {
        if (r < 0)
            fprintf(stderr, "vidtrain %s: --decode needs a value: cpu, nvdec or auto\n", cmd);
        else
            fprintf(stderr, "vidtrain %s: --decode '%s': expected cpu, nvdec or auto (see "
                    "docs/decode.md)\n", cmd, v);
        return -1;
    }
    vt_video_set_decode((vt_decode_mode)m);
    return 1;
}
