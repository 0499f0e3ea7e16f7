/*
 * transfer_mvit.c: MViTv1's absolute position tables (pos_encoding.spatial_pos,
 * temporal_pos) from a file made for another clip, resampled to the net's grid on load,
 * for transfer.c. torchvision's PositionalEncoding never resamples them (its tables fix
 * the clip), so the rule is ours, chosen to match torchvision's own _interpolate of
 * MViTv2's relative tables: linear (align_corners False) along time, bilinear over the
 * (square) spatial grid of the file, exactly F.interpolate's (docs/models.md).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "models/net_graph.h"
#include "models/transfer.h"

float *vt_mvit_pos_resample(const char *name, int ndim, const int64_t *shape, const float *data,
                            const vt_tensor_info *t, const int grid[3], char *how, size_t howlen) {
    const int sp = !strcmp(name, "pos_encoding.spatial_pos");
    how[0] = 0;
    if ((!sp && strcmp(name, "pos_encoding.temporal_pos")) || ndim != 2 || t->ndim != 2 ||
        shape[1] != t->shape[1] || shape[0] < 1)
        return NULL;
    const int64_t C = t->shape[1];
    int ih = (int)shape[0], iw = 1, oh = grid[0], ow = 1; /* temporal: rows only */
    if (sp) {
        ih = iw = (int)llround(sqrt((double)shape[0]));
        oh = grid[1];
        ow = grid[2];
        if ((int64_t)ih * iw != shape[0]) {
            snprintf(how, howlen, "%lld positions are not a square grid: its height and width "
                     "are unknown", (long long)shape[0]);
            return NULL;
        }
    }
    if ((int64_t)oh * ow != t->shape[0])
        return NULL;
    float *out = vt_malloc((size_t)(t->numel) * sizeof(float));
    for (int y = 0; y < oh; y++) {
        int y0, y1, x0 = 0, x1 = 0;
        double wy0, wy1, wx0 = 1, wx1 = 0;
        vt_interp_linear_row(ih, oh, y, &y0, &y1, &wy0, &wy1);
        for (int x = 0; x < ow; x++) {
            if (sp)
                vt_interp_linear_row(iw, ow, x, &x0, &x1, &wx0, &wx1);
            const float *a = data + ((int64_t)y0 * iw + x0) * C, *b = data + ((int64_t)y0 * iw + x1) * C;
            const float *c = data + ((int64_t)y1 * iw + x0) * C, *d = data + ((int64_t)y1 * iw + x1) * C;
            float *o = out + ((int64_t)y * ow + x) * C;
            for (int64_t k = 0; k < C; k++)
                o[k] = (float)(wy0 * (wx0 * a[k] + wx1 * b[k]) + wy1 * (wx0 * c[k] + wx1 * d[k]));
        }
    }
    if (sp)
        snprintf(how, howlen, "%dx%d positions resampled to %dx%d (bilinear)", ih, iw, oh, ow);
    else
        snprintf(how, howlen, "%d frames' positions resampled to %d (linear)", ih, oh);
    return out;
}
