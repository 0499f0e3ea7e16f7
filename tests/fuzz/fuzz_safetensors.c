/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors reader (models/checkpoint.h):
 * the input is a whole checkpoint file. vt_ckpt_read_info parses and validates it; when
 * it accepts the file, every tensor is read back (vt_ckpt_read_tensor), looked up by name,
 * and the net and optimizer configurations are taken from the metadata
 * (vt_ckpt_net_cfg, vt_ckpt_optim_cfg), as `vidtrain eval` and `train --resume` do;
 * then the run's own reading of it (app/run/run.h vt_run_model_open: the "vidtrain_config"
 * and heads it was trained with, and the evaluation clip derived from them).
 *
 * Oracles besides the sanitizers: a refusal comes with a reason naming the path; an
 * accepted file's tensors tile its data section exactly and each reads back. It must
 * never load into a real net (a tiny one is 1.2 MB of weights: too slow per input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/run.h"
#include "models/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

/* Bytes of tensor data read back per input; what is past it is checked by the header
 * validation alone (keeps a 100 MB header claim from costing 100 MB per run). */
#define READ_CAP (4 << 20)

static char path[1100];
static const char *scratch;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    scratch = vt_fuzz_scratch("safetensors");
    vt_fuzz_path(scratch, "x.safetensors", path, sizeof path);
    return 0;
}

/* What eval and predict read from a run's checkpoint (the folder has no config.json, so
 * the checkpoint's own copy is all there is). */
static void run_model(void) {
    vt_run_model m;
    char err[1024] = "";
    if (vt_run_model_open(&m, scratch, path, NULL, err, sizeof err) == 0) {
        FUZZ_ASSERT(m.heads.n >= 1 && m.heads.n <= VT_MAX_HEADS, "%d heads", m.heads.n);
        vt_clip_cfg clip;
        vt_run_model_clip(&clip, &m);
        vt_dataset_opts dso = vt_run_dataset_opts(&m.opts);
        (void)dso;
    } else {
        FUZZ_ASSERT(err[0], "run checkpoint refused without a reason");
    }
    vt_run_model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    vt_fuzz_write(path, data, size);
    vt_ckpt_info info;
    char err[512] = "";
    if (vt_ckpt_read_info(&info, path, err, sizeof err) != 0) {
        FUZZ_ASSERT(strstr(err, path) == err, "refusal without the path: '%s'", err);
        FUZZ_ASSERT(info.ntensors == 0 && info.tensors == NULL && info.path == NULL,
                    "a refused file left state behind");
        return 0;
    }
    FUZZ_ASSERT(info.data_start >= 10 && info.data_start <= (int64_t)size,
                "data starts at %lld of %zu bytes", (long long)info.data_start, size);
    int64_t covered = 0, read = 0;
    for (int i = 0; i < info.ntensors; i++) {
        const vt_ckpt_tensor *t = &info.tensors[i];
        FUZZ_ASSERT(t->begin >= 0 && t->end >= t->begin &&
                        info.data_start + t->end <= (int64_t)size,
                    "tensor %s at [%lld, %lld) outside the file", t->name, (long long)t->begin,
                    (long long)t->end);
        FUZZ_ASSERT(t->end - t->begin == t->numel * (t->is_int64 ? 8 : 4),
                    "tensor %s: %lld bytes for %lld elements", t->name,
                    (long long)(t->end - t->begin), (long long)t->numel);
        FUZZ_ASSERT(t->ndim >= 0 && t->ndim <= 8, "tensor %s: ndim %d", t->name, t->ndim);
        covered += t->end - t->begin;
        FUZZ_ASSERT(vt_ckpt_find(&info, t->name) != NULL, "tensor %s not found by name",
                    t->name);
        if (read + t->numel * 4 > READ_CAP)
            continue;
        float *buf = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
        FUZZ_ASSERT(vt_ckpt_read_tensor(&info, t, buf, err, sizeof err) == 0,
                    "tensor %s of an accepted file does not read back: %s", t->name, err);
        free(buf);
        read += t->numel * 4;
    }
    FUZZ_ASSERT(covered == info.file_size - info.data_start, "tensors cover %lld of %lld bytes",
                (long long)covered, (long long)(info.file_size - info.data_start));

    vt_net_cfg cfg;
    err[0] = 0;
    if (vt_ckpt_net_cfg(&cfg, &info, err, sizeof err) == 0) {
        FUZZ_ASSERT(cfg.nheads >= 1 && cfg.nheads <= VT_MAX_HEADS, "%d heads", cfg.nheads);
        for (int h = 0; h < cfg.nheads; h++)
            FUZZ_ASSERT(cfg.head[h].classes >= 1, "head %d: %d classes", h, cfg.head[h].classes);
        FUZZ_ASSERT(cfg.clip_t >= 1 && cfg.clip_h >= 1 && cfg.clip_w >= 1, "clip %dx%dx%d",
                    cfg.clip_t, cfg.clip_h, cfg.clip_w);
        FUZZ_ASSERT(memchr(cfg.model, 0, sizeof cfg.model) != NULL, "model name unterminated");
    } else {
        FUZZ_ASSERT(err[0], "net configuration refused without a reason");
    }
    vt_optim_cfg oc;
    int64_t step = -1;
    err[0] = 0;
    if (vt_ckpt_optim_cfg(&oc, &step, &info, err, sizeof err) == 0)
        FUZZ_ASSERT(step >= 0, "step %lld", (long long)step);
    else
        FUZZ_ASSERT(err[0], "optimizer configuration refused without a reason");
    vt_ckpt_info_free(&info);
    run_model();
    return 0;
}
