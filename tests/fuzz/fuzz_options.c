/*
 * fuzz_options.c: libFuzzer target for the command line's value parsers — the input is
 * one option value (bytes up to the first NUL), given to every parser in turn:
 * vt_parse_int, vt_parse_i64, vt_parse_u64, vt_parse_float, vt_parse_clip,
 * vt_parse_floats, vt_parse_duration (app/opts.h; the numbers' parsers and
 * vt_parse_bytes, the sizes of --mem and --gpu-mem, are base/common.h's) and
 * vt_slice_policy_parse (--tower-split, pipeline/parallel/slices.h).
 *
 * Oracles besides the sanitizers: what a parser accepts is inside the range it was given
 * and finite; a refused policy has a reason. It must stay small and call public headers
 * only (the option code is being split into several files).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/opts.h"
#include "base/common.h"
#include "models/net.h"
#include "pipeline/parallel/slices.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s[1];
    vt_fuzz_split(data, size, s, 1);

    int i = 0;
    if (vt_parse_int(s[0], -5, 1 << 20, &i) == 0)
        FUZZ_ASSERT(i >= -5 && i <= 1 << 20, "int %d outside [-5, 2^20]", i);
    if (vt_parse_int(s[0], 1, 1, &i) == 0)
        FUZZ_ASSERT(i == 1, "int %d outside [1, 1]", i);
    int64_t l = 0;
    if (vt_parse_i64(s[0], INT64_MIN, INT64_MAX, &l) == 0)
        (void)l;
    if (vt_parse_i64(s[0], 0, 1000, &l) == 0)
        FUZZ_ASSERT(l >= 0 && l <= 1000, "i64 %lld outside [0, 1000]", (long long)l);
    uint64_t u = 0;
    if (vt_parse_u64(s[0], &u) == 0)
        FUZZ_ASSERT(s[0][0] != '-', "u64 took a negative '%s'", s[0]);
    float f = 0;
    if (vt_parse_float(s[0], 0, 1, &f) == 0)
        FUZZ_ASSERT(f >= 0 && f <= 1, "float %g outside [0, 1]", (double)f);
    if (vt_parse_float(s[0], -1e30, 1e30, &f) == 0)
        FUZZ_ASSERT(isfinite(f), "float %g not finite", (double)f);
    vt_clip_shape c = {0, 0, 0};
    if (vt_parse_clip(s[0], &c) == 0)
        FUZZ_ASSERT(c.t >= 1 && c.t <= 1024 && c.h >= 1 && c.h <= 4096 && c.w >= 1 && c.w <= 4096,
                    "clip %dx%dx%d", c.t, c.h, c.w);
    float w[VT_MAX_HEADS];
    int n = vt_parse_floats(s[0], w, VT_MAX_HEADS);
    FUZZ_ASSERT(n >= -1 && n <= VT_MAX_HEADS, "%d floats", n);
    for (int k = 0; k < n; k++)
        FUZZ_ASSERT(w[k] >= 0 && w[k] <= 1e6, "weight %g", (double)w[k]);
    double d = vt_parse_duration(s[0]);
    FUZZ_ASSERT(d == -1 || (d > 0 && !isnan(d)), "duration %g", d);
    int64_t b = vt_parse_bytes(s[0]);
    FUZZ_ASSERT(b >= -1, "bytes %lld", (long long)b);

    vt_slice_policy pol;
    char err[512] = "";
    if (vt_slice_policy_parse(&pol, s[0], err, sizeof err) == 0) {
        if (pol.kind == VT_SLICE_MANUAL) {
            double sum = 0;
            FUZZ_ASSERT(pol.nweights >= 1 && pol.nweights <= VT_MAX_DEVICES, "%d weights",
                        pol.nweights);
            for (int k = 0; k < pol.nweights; k++) {
                FUZZ_ASSERT(pol.weight[k] >= 0 && isfinite(pol.weight[k]), "weight %g",
                            pol.weight[k]);
                sum += pol.weight[k];
            }
            FUZZ_ASSERT(sum > 0, "weights sum to %g", sum);
        }
    } else {
        FUZZ_ASSERT(err[0], "policy refused without a reason");
    }
    (void)vt_slice_policy_like(s[0]);
    free(s[0]);
    return 0;
}
