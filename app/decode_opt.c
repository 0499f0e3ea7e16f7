/*
 * decode_opt.c: the shared `--decode` option (decode_opt.h).
 */
#include "app/decode_opt.h"

#include <stdio.h>

#include "base/common.h"
#include "pipeline/data/video/video.h"

static int frame_rate_given;

int vt_frame_rate_given(void) { return frame_rate_given; }

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
