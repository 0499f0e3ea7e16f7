/*
 * ortutil.h: ONNX Runtime as a test's outside truth (tests/oracle/onnx_run.js, npm's
 * onnxruntime-node in tools/onnxrt/ or $VT_ONNXRT), and the float arrays of `vidtrain
 * predict --dump-input`'s JSON that are fed to it. test_onnx checks the exporter with it,
 * test_zoo_cmds the `export` command of runs of several models.
 */
#ifndef VT_ORTUTIL_H
#define VT_ORTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/common.h"
#include "tests/apputil.h"

/* 1 when node and onnxruntime-node are there (onnx_run.js without arguments exits 3
 * when the module is missing, and sh says 127 when node is). */
static inline int vt_test_ort_here(const char *src) {
    int rc = vt_test_sh("node '%s/tests/oracle/onnx_run.js' > /dev/null 2>&1", src);
    return rc != 3 && rc != 127;
}

/* ORT on x (float32, shape) -> outdir/NAME.bin per output; the input goes to DIR/x.bin and
 * ORT's JSON line to DIR/ort.json, dir being the test's scratch folder. version (may be
 * NULL) gets ORT's version. 0, or the script's exit code. */
static inline int vt_test_ort_run(const char *src, const char *dir, const char *model,
                                  const float *x, const int shape[5], const char *outdir,
                                  char *version, size_t vlen) {
    char in[4400], res[4400];
    snprintf(in, sizeof in, "%s/x.bin", dir);
    snprintf(res, sizeof res, "%s/ort.json", dir);
    int64_t n = (int64_t)shape[0] * shape[1] * shape[2] * shape[3] * shape[4];
    FILE *f = fopen(in, "wb");
    /* The host is little-endian (x86-64, arm64): raw floats are onnx_run.js's format. */
    if (!f || fwrite(x, sizeof(float), (size_t)n, f) != (size_t)n) {
        if (f)
            fclose(f);
        return -1;
    }
    fclose(f);
    int rc = vt_test_sh("node '%s/tests/oracle/onnx_run.js' '%s' '%s' %d,%d,%d,%d,%d '%s' > '%s'",
                        src, model, in, shape[0], shape[1], shape[2], shape[3], shape[4],
                        outdir, res);
    cJSON *j = rc == 0 ? vt_test_read_json(res) : NULL;
    const cJSON *v = j ? cJSON_GetObjectItem(j, "ort") : NULL;
    if (version && cJSON_IsString(v))
        snprintf(version, vlen, "%s", v->valuestring);
    cJSON_Delete(j);
    return rc;
}

/* outdir/NAME.bin of n floats (malloc), NULL when missing or of another size. */
static inline float *vt_test_ort_output(const char *outdir, const char *name, int64_t n) {
    char p[8704]; /* a folder path of up to 4300 bytes (the tests' buffers) and a name */
    snprintf(p, sizeof p, "%s/%s.bin", outdir, name);
    long len = 0;
    char *d = vt_test_slurp(p, &len);
    if (d && len != (long)(n * 4)) {
        fprintf(stderr, "%s: %ld bytes, want %lld\n", p, len, (long long)(n * 4));
        free(d);
        return NULL;
    }
    return (float *)(void *)d;
}

/* A JSON number array (predict --dump-input's "input", a row of its "probs") into a new
 * array of *n floats. */
static inline float *vt_test_json_floats(const cJSON *a, int64_t *n) {
    *n = cJSON_GetArraySize(a);
    float *v = vt_malloc(sizeof(float) * (size_t)VT_MAX(*n, 1));
    int64_t i = 0;
    for (const cJSON *e = a ? a->child : NULL; e; e = e->next)
        v[i++] = (float)e->valuedouble;
    return v;
}

#endif
