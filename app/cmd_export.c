/*
 * cmd_export.c: `vidtrain export RUN --onnx FILE` — a trained run's network as an ONNX
 * model for deployment (models/formats/onnx.h writes it), with what a deployment needs to feed
 * it in the model's metadata: the clip shape, stride and short side of the evaluation
 * protocol, the normalisation, the heads with their class names and output names. The
 * model is the one `vidtrain predict` runs: the same checkpoint choice (run_model.h)
 * and the same clip configuration (vt_run_model_clip).
 *
 * It must never write into the run folder (FILE is wherever the user says) nor leave a
 * partial FILE: the exporter writes atomically.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/app.h"
#include "app/run/run_model.h"
#include "app/run/run_files.h"
#include "models/checkpoint.h"
#include "base/common.h"
#include "models/formats/onnx.h"
#include "models/registry.h"
#include "pipeline/data/sample.h"
#include "base/json_str.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain export RUN --onnx FILE [options]\n\n"
        "Writes RUN's trained network as an ONNX model (float32, opset 17) for ONNX Runtime\n"
        "and other ONNX runtimes: the network as `vidtrain predict` runs it (batch norm with\n"
        "its running statistics, no dropout), from RUN's best checkpoint (else its last).\n\n"
        "  --onnx FILE          the model to write (replaced atomically; its folder must exist)\n"
        "  --softmax            outputs are probabilities (softmax; sigmoid for multi-label\n"
        "                       heads) instead of logits\n"
        "  --checkpoint C       best (the default when RUN has one, else last), last, or PATH\n"
        "  --opset N            ONNX opset, %d to %d (default %d)\n\n"
        "Input \"clip\": float32 (N, 3, T, H, W) — N clips (any N), 3 channels RGB, T frames of\n"
        "  H x W, T/H/W the run's clip shape. Feed it as predict does: decode frames `stride`\n"
        "  apart, resize so the short side is `short_side`, take the centre H x W crop, scale\n"
        "  pixels to [0, 1], then per channel (x - mean[c]) / std[c].\n"
        "Outputs: one per head, float32 (N, classes): \"logits_NAME\", or \"probs_NAME\" with\n"
        "  --softmax (NAME the head's name: \"class\" for a single-label run). A video's\n"
        "  probabilities, as predict prints them, are the mean over its clips.\n"
        "Metadata (metadata_props, strings): model, clip (\"TxHxW\"), stride, short_side,\n"
        "  normalisation ({\"mean\":[r,g,b],\"std\":[r,g,b]}), classes (JSON list of head 0's\n"
        "  class names, output order), heads (JSON: name, loss, classes, output per head),\n"
        "  outputs (\"logits\" or \"probabilities\"), checkpoint, vidtrain_version.\n"
        "  docs/export.md shows it run from Python and Node.\n\n"
        "Exit codes: 0 written, 1 failure (RUN or its checkpoint unreadable, FILE not\n"
        "writable), 2 usage.\n",
        VT_ONNX_OPSET_MIN, VT_ONNX_OPSET_MAX, VT_ONNX_OPSET_DEFAULT);
}

/* A JSON array of floats, each as the shortest decimal that reads back as the same float
 * (0.45, not 0.44999998807907104, the double cJSON would print). */
static cJSON *float_array(const float *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        char b[32];
        for (int p = 6; p <= 9; p++) {
            snprintf(b, sizeof b, "%.*g", p, (double)v[i]);
            if (strtof(b, NULL) == v[i])
                break;
        }
        cJSON_AddItemToArray(a, cJSON_CreateNumber(strtod(b, NULL)));
    }
    return a;
}

/* JSON text of an item (free()); the item is deleted. */
static char *json_take(cJSON *item) {
    char *s = vt_json_print(item, 0);
    VT_CHECK_MEM(s != NULL, "a JSON text");
    cJSON_Delete(item);
    char *out = vt_strdup(s);
    cJSON_free(s);
    return out;
}

/* ---- parse, plan (the run's model and the metadata), run (the file) ---- */

typedef struct export_args {
    const char *run, *onnx, *ckpt; /* RUN, --onnx FILE, --checkpoint */
    vt_onnx_opts oo;
} export_args;

/* Fills *ea from argv: 0, or the exit status (2) after saying what is wrong. */
static int export_parse(export_args *ea, int argc, char **argv) {
    memset(ea, 0, sizeof *ea);
    vt_onnx_opts_default(&ea->oo);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int r;
        if (!strcmp(a, "--softmax")) {
            ea->oo.softmax = 1;
        } else if ((r = vt_opt_value(argc, argv, &i, "--onnx", &v)) != 0) {
            if (r < 0)
                goto bad;
            ea->onnx = v;
        } else if ((r = vt_opt_value(argc, argv, &i, "--checkpoint", &v)) != 0) {
            if (r < 0)
                goto bad;
            ea->ckpt = v;
        } else if ((r = vt_opt_value(argc, argv, &i, "--opset", &v)) != 0) {
            if (r < 0 || vt_parse_int(v, VT_ONNX_OPSET_MIN, VT_ONNX_OPSET_MAX, &ea->oo.opset))
                goto bad;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vidtrain export: unknown option %s (see --help)\n", a);
            return 2;
        } else if (!ea->run) {
            ea->run = vt_run_path_trim(argv[i]); /* "r7/" is r7: one slash in r7/x */
        } else {
            fprintf(stderr, "vidtrain export: one RUN only (got '%s' and '%s')\n", ea->run, a);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "vidtrain export: bad or missing value for %s (see --help)\n", a);
        return 2;
    }
    if (!ea->run || !ea->onnx) {
        fprintf(stderr, "vidtrain export: %s\n", !ea->run ? "RUN missing" : "--onnx FILE missing");
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The metadata: what a deployment needs to build the input and read the outputs, as
 * keys[i] = vals[i] (owned[i] the same strings, the caller's to free); their count. */
static int export_meta(const vt_run_model *m, const vt_net_cfg *cfg, const vt_onnx_opts *oo,
                       const vt_clip_cfg *clip, const char *keys[16], const char *vals[16],
                       char *owned[16]) {
    int nmeta = 0, nowned = 0;
#define META(k, ...) do { \
        char tmp_[512]; snprintf(tmp_, sizeof tmp_, __VA_ARGS__); \
        keys[nmeta] = (k); vals[nmeta++] = owned[nowned++] = vt_strdup(tmp_); } while (0)
#define META_OWN(k, s) do { keys[nmeta] = (k); vals[nmeta++] = owned[nowned++] = (s); } while (0)
    META("vidtrain_version", "%s", VT_VERSION);
    META("model", "%s", m->opts.model);
    META("clip", "%dx%dx%d", clip->t, clip->crop, clip->crop);
    META("stride", "%d", clip->stride);
    if (clip->fps > 0) /* --clip-fps: the stride counts frames at this rate */
        META("clip_fps", "%g", clip->fps);
    META("short_side", "%d", clip->short_side);
    cJSON *norm = cJSON_CreateObject();
    cJSON_AddItemToObject(norm, "mean", float_array(clip->mean, 3));
    cJSON_AddItemToObject(norm, "std", float_array(clip->std, 3));
    META_OWN("normalisation", json_take(norm));
    cJSON *cls = cJSON_CreateStringArray((const char *const *)m->heads.classes[0],
                                         m->heads.cfg[0].classes);
    META_OWN("classes", json_take(cls));
    cJSON *hs = vt_run_heads_to_json(&m->heads);
    for (int h = 0; h < m->heads.n; h++) {
        char oname[80];
        vt_onnx_output_name(oname, sizeof oname, cfg, h, oo->softmax);
        cJSON *ho = cJSON_GetArrayItem(hs, h);
        cJSON_DeleteItemFromObject(ho, "weight");    /* training-only fields */
        cJSON_DeleteItemFromObject(ho, "smoothing");
        cJSON_AddStringToObject(ho, "output", oname);
    }
    META_OWN("heads", json_take(hs));
    META("outputs", "%s", oo->softmax ? "probabilities" : "logits");
    /* The file name only: a model goes elsewhere, and the local path would go with it. */
    const char *base = strrchr(m->ckpt, '/');
    META_OWN("checkpoint", vt_strdup(base ? base + 1 : m->ckpt));
#undef META
#undef META_OWN
    return nmeta;
}

int vt_cmd_export(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    export_args ea;
    int prc = export_parse(&ea, argc, argv);
    if (prc)
        return prc;
    const char *run = ea.run, *onnx = ea.onnx, *ckpt = ea.ckpt;
    vt_onnx_opts oo = ea.oo;

    int rc = 1;
    char err[1024], path[4200];
    vt_run_model m;
    memset(&m, 0, sizeof m);
    vt_backend *be = NULL;
    vt_net *net = NULL;
    const char *keys[16], *vals[16];
    char *owned[16] = {0};
    int nmeta = 0;

    if (!vt_dir_exists(run)) {
        fprintf(stderr, "vidtrain export: %s: no such run folder (a run is the --out folder "
                "of `vidtrain train`)\n", run);
        goto end;
    }
    if (ckpt && (!strcmp(ckpt, "best") || !strcmp(ckpt, "last"))) {
        snprintf(path, sizeof path, "%s/%s.safetensors", run, ckpt);
        ckpt = path;
    }
    /* run_model.c picks best, else last, when ckpt is NULL: export the model predict runs. */
    if (vt_run_model_open(&m, run, ckpt, NULL, err, sizeof err) != 0 || !vt_file_exists(m.ckpt)) {
        if (!vt_file_exists(m.ckpt))
            fprintf(stderr, "vidtrain export: %s: no such checkpoint (a run writes "
                    "best.safetensors and last.safetensors; --checkpoint picks another)\n",
                    m.ckpt);
        else
            fprintf(stderr, "vidtrain export: %s\n", err);
        goto end;
    }
    /* before any work: FILE is neither the run's checkpoint nor a special file, and its
     * folder is there and writable (found at the end, it cost the whole export) */
    if (vt_output_check_early(onnx, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain export: %s\n", err);
        goto end;
    }
    const vt_train_opts *o = &m.opts;
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, o->model, m.heads.cfg[0].classes, o->clip_t, o->crop, o->crop);
    cfg.nheads = m.heads.n;
    memcpy(cfg.head, m.heads.cfg, sizeof m.heads.cfg);
    cfg.dropout = o->dropout;
    /* Weights only, on the CPU: max_batch 0, no activations are allocated (nothing runs
     * forward here), so even a large model exports in little memory. */
    be = vt_backend_cpu_init(1, 0);
    net = vt_net_init(&cfg, be, 0, err, sizeof err);
    if (!net) {
        fprintf(stderr, "vidtrain export: %s: %s\n", m.ckpt, err);
        goto end;
    }
    if (vt_ckpt_load_weights(net, m.ckpt, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain export: %s\n", err);
        goto end;
    }

    vt_clip_cfg clip;
    vt_run_model_clip(&clip, &m);
    nmeta = export_meta(&m, &cfg, &oo, &clip, keys, vals, owned);
    oo.nmeta = nmeta;
    oo.meta_key = keys;
    oo.meta_value = vals;
    char doc[256];
    snprintf(doc, sizeof doc, "vidtrain %s video classifier: input clip (N, 3, %d, %d, %d) "
             "normalised as the metadata says; one output per head", o->model, clip.t,
             clip.crop, clip.crop);
    oo.doc = doc;
    if (vt_onnx_export(onnx, net, &oo, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain export: %s (is FILE's folder there, writable, with room for the model?)\n", err);
        goto end;
    }
    printf("wrote %s: %s, input clip (N, 3, %d, %d, %d), %d output%s (%s), opset %d\n", onnx,
           o->model, clip.t, clip.crop, clip.crop, m.heads.n, m.heads.n > 1 ? "s" : "",
           oo.softmax ? "probabilities" : "logits", oo.opset);
    rc = 0;
end:
    for (int i = 0; i < nmeta; i++)
        free(owned[i]);
    vt_net_free(&net);
    vt_backend_free(&be);
    vt_run_model_free(&m);
    return rc;
}
