/*
 * test_onnx.c: the ONNX export (models/formats/onnx.h, `vidtrain export`) against two outside
 * truths: the ONNX project's checker with strict shape inference (Debian's python3-onnx,
 * tests/oracle/onnx_check.py) must accept every exported model, and ONNX Runtime (npm's
 * onnxruntime-node, tests/oracle/onnx_run.js) must compute what vidtrain computes.
 *   1. Every zoo model (X3D: x3d_xs, whose pieces x3d_s, _m and _l repeat) on the cpu
 *      backend, seeded random weights and random BN gammas, betas and running statistics (so eval-mode BN is exercised, not the identity of
 *      fresh statistics), dropout on in the configuration (the export must leave it
 *      out), a small clip: vidtrain's eval forward on 2 random clips vs ORT, per output.
 *      slowfast_r50 brings the frame Gather and the pathways' concats.
 *      vit_test stands for videomae_vit_s/b (their pieces at 2 blocks of dim 48),
 *      mvit_test and mvit_v1_test for mvit_v2_s and mvit_v1_b (their pieces at 4 blocks).
 *      tiny runs with two heads (softmax and multi-label) and is exported twice (logits;
 *      --softmax-like probabilities against vt_net_outputs).
 *   2. The command end to end: a tiny run trained 1 epoch on a synthetic set, `vidtrain
 *      export --softmax`, then ORT on the exact normalised clips `vidtrain predict
 *      --dump-input` fed its model must give predict's probabilities; and the errors
 *      (missing run, unwritable FILE, bad opset) name the path.
 * Skips (77) only when ONNX Runtime or python3-onnx is not installed (scripts/setup.sh
 * installs both).
 */
#include <unistd.h>

#include "base/common.h"
#include "models/net.h"
#include "models/formats/onnx.h"
#include "models/registry.h"
#include "tests/apputil.h"
#include "tests/ortutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* fp32 results of the same network computed in another summation order (ORT's MLAS
 * convolutions vs vidtrain's vol2col + OpenBLAS GEMM) differ by ~1e-7 relative per
 * operation, growing to ~1e-6 through 18 layers: an NMSE of ~1e-12. 1e-10 leaves room
 * for that and still fails any real mistake (a wrong epsilon, a transposed weight, a
 * dropout scale, a missing bias all give 1e-8 or far more). */
#define ONNX_NMSE_TOL 1e-10

static const char *g_src, *g_py, *g_dir;

/* tests/oracle/onnx_check.py on a model: 0 when it passes; its JSON line into out (may be NULL). */
static int onnx_check(const char *model, cJSON **out) {
    char log[4300];
    snprintf(log, sizeof log, "%s/check.json", g_dir);
    int rc = vt_test_sh("'%s' '%s/tests/oracle/onnx_check.py' '%s' > '%s'", g_py, g_src, model, log);
    if (out)
        *out = rc == 0 ? vt_test_read_json(log) : NULL;
    return rc;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* BN gammas, betas and running statistics drawn at random (the cpu backend's arenas are
 * host memory). Running variances in [0.05, 1.5]: small enough that an epsilon other than
 * the net's would show, far enough from 0 to keep the net's scale. */
static void randomise_bn(vt_net *net, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    float *P = vt_net_params(net), *B = vt_net_buffers(net);
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *rm = vt_net_tensor(net, i);
        if (!ends_with(rm->name, ".running_mean"))
            continue;
        char base[128], nm[160];
        snprintf(base, sizeof base, "%.*s", (int)(strlen(rm->name) - strlen(".running_mean")),
                 rm->name);
        snprintf(nm, sizeof nm, "%s.running_var", base);
        const vt_tensor_info *rv = vt_net_find_tensor(net, nm);
        snprintf(nm, sizeof nm, "%s.weight", base);
        const vt_tensor_info *ga = vt_net_find_tensor(net, nm);
        snprintf(nm, sizeof nm, "%s.bias", base);
        const vt_tensor_info *be = vt_net_find_tensor(net, nm);
        VT_CHECK(rv && ga && be, "BN %s: tensors missing", base);
        for (int64_t c = 0; c < rm->numel; c++) {
            B[rm->offset + c] = (float)(0.4 * (vt_rng_uniform(&r) - 0.5));
            B[rv->offset + c] = (float)(0.05 + 1.45 * vt_rng_uniform(&r));
            P[ga->offset + c] = (float)(0.5 + vt_rng_uniform(&r));
            P[be->offset + c] = (float)(0.4 * (vt_rng_uniform(&r) - 0.5));
        }
    }
}

typedef struct zoo_case {
    const char *model;
    int t, h, w;
    int heads;      /* 2: a softmax head and a multi-label one */
    float dropout;
} zoo_case;

/* One zoo model: export (logits, and probabilities when `probs`), check, run in ORT,
 * compare with the net's eval forward. */
static void zoo_one(vt_backend *be, const zoo_case *zc, int probs, char *ort_version) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, zc->model, 7, zc->t, zc->h, zc->w);
    cfg.dropout = zc->dropout;
    if (zc->heads == 2) {
        cfg.nheads = 2;
        snprintf(cfg.head[1].name, sizeof cfg.head[1].name, "tags");
        cfg.head[1].classes = 4;
        cfg.head[1].loss = VT_LOSS_BCE;
        cfg.head[1].weight = 1;
    }
    char err[512];
    vt_net *net = vt_net_init(&cfg, be, 2, err, sizeof err);
    TCHECK(net != NULL, "%s: %s", zc->model, err);
    if (!net)
        return;
    vt_net_init_weights(net, 11);
    randomise_bn(net, 12);
    const int N = 2, shape[5] = {N, 3, zc->t, zc->h, zc->w};
    int64_t nx = (int64_t)N * 3 * zc->t * zc->h * zc->w;
    float *x = vt_malloc(sizeof(float) * (size_t)nx);
    vt_rng r;
    vt_rng_seed(&r, 13);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)vt_rng_normal(&r);
    vt_net_forward(net, x, N, 0);
    float *want[VT_MAX_HEADS] = {0};
    for (int h = 0; h < cfg.nheads; h++) {
        want[h] = vt_malloc(sizeof(float) * (size_t)N * cfg.head[h].classes);
        if (probs)
            continue;
        memcpy(want[h], vt_net_logits(net, h), sizeof(float) * (size_t)N * cfg.head[h].classes);
    }
    if (probs)
        vt_net_outputs(net, want, NULL, NULL, NULL);

    char model[4300], outdir[4300];
    snprintf(model, sizeof model, "%s/%s%s.onnx", g_dir, zc->model, probs ? "_probs" : "");
    snprintf(outdir, sizeof outdir, "%s/out_%s%s", g_dir, zc->model, probs ? "_probs" : "");
    mkdir(outdir, 0755);
    vt_onnx_opts oo;
    vt_onnx_opts_default(&oo);
    oo.softmax = probs;
    TCHECK(vt_onnx_export(model, net, &oo, err, sizeof err) == 0, "%s: export: %s", zc->model,
           err);
    cJSON *chk = NULL;
    TCHECK(onnx_check(model, &chk) == 0, "%s: onnx checker", zc->model);
    cJSON_Delete(chk);
    TCHECK(vt_test_ort_run(g_src, g_dir, model, x, shape, outdir, ort_version, 32) == 0,
           "%s: ORT run", zc->model);
    for (int h = 0; h < cfg.nheads; h++) {
        char name[80];
        vt_onnx_output_name(name, sizeof name, &cfg, h, probs);
        int64_t n = (int64_t)N * cfg.head[h].classes;
        float *got = vt_test_ort_output(outdir, name, n);
        TCHECK(got != NULL, "%s: output %s", zc->model, name);
        if (got) {
            double e = vt_nmse(got, want[h], n);
            printf("  %-11s %dx%dx%d %-12s NMSE %.3g (max |diff| %.3g)\n", zc->model, zc->t,
                   zc->h, zc->w, name, e, vt_max_abs_diff(got, want[h], n));
            TCHECK(e <= ONNX_NMSE_TOL, "%s %s: NMSE %.3g > %g", zc->model, name, e,
                   ONNX_NMSE_TOL);
        }
        free(got);
        free(want[h]);
    }
    free(x);
    vt_net_free(&net);
}

static void e2e(const char *bin, char *ort_version) {
    char dir[4300], rd[4300], p[4300], video[4300];
    snprintf(dir, sizeof dir, "%s/e2e", g_dir);
    mkdir(dir, 0755);
    snprintf(rd, sizeof rd, "%s/run", dir);
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 3 --val 1 --test 1 --frames 24") == 0,
           "synth");
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s' --model tiny --clip 8x32 --stride 2 "
                        "--batch 4 --epochs 1 --val-clips 1 --workers 1 --seed 5 > '%s/train.log' "
                        "2>&1", bin, dir, rd, dir);
    TCHECK(rc == 0, "train exit %d (see %s/train.log)", rc, dir);

    /* Errors: exit 1 with the path in the message; usage errors exit 2. */
    rc = vt_test_sh("'%s' export '%s/nope' --onnx '%s/x.onnx' 2> '%s/err1.txt'", bin, dir, dir, dir);
    snprintf(p, sizeof p, "%s/err1.txt", dir);
    char *msg = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && msg && strstr(msg, "/nope") && strstr(msg, "vidtrain train"),
           "missing run: exit %d, message %s", rc, msg ? msg : "(none)");
    free(msg);
    rc = vt_test_sh("'%s' export '%s' --onnx '%s/no/such/dir/x.onnx' 2> '%s/err2.txt'", bin, rd,
                    dir, dir);
    snprintf(p, sizeof p, "%s/err2.txt", dir);
    msg = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && msg && strstr(msg, "/no/such/dir/x.onnx") && strstr(msg, "make it first"),
           "FILE in a missing folder: exit %d, message %s", rc, msg ? msg : "(none)");
    free(msg);
    TCHECK(vt_test_sh("'%s' export '%s' --onnx '%s/x.onnx' --opset 9 2> /dev/null", bin, rd,
                      dir) == 2, "--opset 9 is a usage error");
    TCHECK(vt_test_sh("'%s' export --help | grep -q 'probs_NAME'", bin) == 0, "--help");

    char model[4300];
    snprintf(model, sizeof model, "%s/run.onnx", dir);
    rc = vt_test_sh("'%s' export '%s' --onnx '%s' --softmax > '%s/export.log' 2>&1", bin, rd,
                    model, dir);
    TCHECK(rc == 0, "export exit %d (see %s/export.log)", rc, dir);
    cJSON *chk = NULL;
    TCHECK(onnx_check(model, &chk) == 0, "run.onnx: onnx checker");
    const cJSON *meta = cJSON_GetObjectItem(chk, "metadata");
    const char *keys[] = {"model", "clip", "stride", "short_side", "normalisation", "classes",
                          "heads", "outputs"};
    for (size_t k = 0; k < VT_ARRAY_LEN(keys); k++)
        TCHECK(cJSON_GetObjectItem(meta, keys[k]) != NULL, "metadata %s", keys[k]);
    const cJSON *clip = cJSON_GetObjectItem(meta, "clip");
    TCHECK(cJSON_IsString(clip) && !strcmp(clip->valuestring, "8x32x32"), "metadata clip %s",
           cJSON_IsString(clip) ? clip->valuestring : "?");
    const cJSON *st = cJSON_GetObjectItem(meta, "stride");
    TCHECK(cJSON_IsString(st) && !strcmp(st->valuestring, "2"), "metadata stride");
    const cJSON *prod = cJSON_GetObjectItem(chk, "producer");
    TCHECK(cJSON_IsString(prod) && !strncmp(prod->valuestring, "vidtrain ", 9), "producer");

    /* ORT on the clips predict fed must give predict's per-clip probabilities. */
    snprintf(p, sizeof p, "%s/data/test", dir);
    TCHECK(vt_test_sh("ls '%s'/*/* > '%s/videos.txt'", p, dir) == 0, "test videos");
    snprintf(p, sizeof p, "%s/videos.txt", dir);
    char *list = vt_test_slurp(p, NULL);
    snprintf(video, sizeof video, "%s", list ? list : "missing");
    video[strcspn(video, "\n")] = 0;
    free(list);
    rc = vt_test_sh("'%s' predict '%s' '%s' --clips-per-video 3 --crops 3 --dump-input "
                    "'%s/dump.json' > '%s/predict.log' 2>&1", bin, rd, video, dir, dir);
    TCHECK(rc == 0, "predict exit %d", rc);
    snprintf(p, sizeof p, "%s/dump.json", dir);
    cJSON *dump = vt_test_read_json(p);
    const cJSON *v0 = cJSON_GetArrayItem(dump, 0);
    const cJSON *shp = cJSON_GetObjectItem(v0, "shape");
    TCHECK(cJSON_GetArraySize(shp) == 5, "dump shape");
    if (cJSON_GetArraySize(shp) == 5) {
        int shape[5];
        for (int d = 0; d < 5; d++)
            shape[d] = cJSON_GetArrayItem(shp, d)->valueint;
        TCHECK(shape[0] == 9 && shape[2] == 8 && shape[3] == 32, "dump shape %dx3x%dx%dx%d",
               shape[0], shape[2], shape[3], shape[4]);
        int64_t nx = 0, np = 0;
        float *x = vt_test_json_floats(cJSON_GetObjectItem(v0, "input"), &nx);
        TCHECK(nx == (int64_t)shape[0] * 3 * shape[2] * shape[3] * shape[4], "dump input size");
        const cJSON *h0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v0, "heads"), 0);
        const cJSON *pr = cJSON_GetObjectItem(h0, "probs");
        int K = cJSON_GetArraySize(cJSON_GetArrayItem(pr, 0));
        float *want = vt_malloc(sizeof(float) * (size_t)shape[0] * (size_t)VT_MAX(K, 1));
        for (int i = 0; i < shape[0] && i < cJSON_GetArraySize(pr); i++) {
            float *row = vt_test_json_floats(cJSON_GetArrayItem(pr, i), &np);
            memcpy(want + (size_t)i * K, row, sizeof(float) * (size_t)K);
            free(row);
        }
        char outdir[4300];
        snprintf(outdir, sizeof outdir, "%s/out", dir);
        mkdir(outdir, 0755);
        TCHECK(K == 2 && vt_test_ort_run(g_src, g_dir, model, x, shape, outdir, ort_version,
                                         32) == 0, "ORT on run.onnx");
        float *got = K == 2 ? vt_test_ort_output(outdir, "probs_class", (int64_t)shape[0] * K) : NULL;
        TCHECK(got != NULL, "probs_class output");
        if (got) {
            double e = vt_nmse(got, want, (int64_t)shape[0] * K);
            printf("  e2e tiny run --softmax, predict's 9 clips: NMSE %.3g (max |diff| %.3g)\n", e,
                   vt_max_abs_diff(got, want, (int64_t)shape[0] * K));
            TCHECK(e <= ONNX_NMSE_TOL, "ORT vs predict: NMSE %.3g", e);
        }
        free(got);
        free(want);
        free(x);
    }
    cJSON_Delete(dump);
    cJSON_Delete(chk);
}

int main(void) {
    const char *bin = vt_test_bin("test_onnx");
    if (!bin)
        return VT_TEST_SKIP;
    g_src = vt_test_env("VT_SRC", ".");
    g_py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("onnx"));
    g_dir = dir;
    /* The truths must be there; only their absence skips (exit 3 from either script). */
    int rc = vt_test_sh("'%s' -c 'import onnx' 2> /dev/null", g_py);
    if (rc != 0) {
        fprintf(stderr, "test_onnx: SKIP: %s cannot import onnx (apt-get install python3-onnx; "
                "scripts/setup.sh does)\n", g_py);
        return VT_TEST_SKIP;
    }
    if (!vt_test_ort_here(g_src)) {
        fprintf(stderr, "test_onnx: SKIP: ONNX Runtime for Node is not installed (node, and "
                "npm's onnxruntime-node in tools/onnxrt: bash scripts/setup.sh --no-demo)\n");
        return VT_TEST_SKIP;
    }

    char ort_version[32] = "?";
    vt_backend *be = vt_backend_cpu_init(0, 0);
    /* Small clips where the model allows: tiny needs T >= 4 and H, W >= 8; c3d's pool5
     * needs T >= 16, and its fc6 then takes 512 * 1 * 1 * 1 features at 16x16x16; the
     * resnets run at 4x24x24 (24 -> 12 -> 12 -> 6 -> 3 -> 2). */
    static const zoo_case cases[] = {
        {"tiny", 4, 16, 16, 2, 0.3f},
        {"tiny_nobn", 4, 16, 16, 1, 0.0f},
        {"c3d", 16, 16, 16, 1, 0.5f},
        {"r3d18", 4, 24, 24, 1, 0.0f},
        {"mc3_18", 4, 24, 24, 1, 0.2f},
        {"r2plus1d18", 4, 24, 24, 1, 0.0f},
        /* S3D's concat, avgpool window, BN eps 1e-3 and 5-D classifier weight: the
         * smallest clip it takes */
        {"s3d", 13, 209, 209, 1, 0.2f},
        /* X3D: depthwise Conv (group), squeeze-excitation (GlobalAveragePool, Conv,
         * Sigmoid, Mul broadcast), SiLU as Sigmoid + Mul, the head's conv on the pool */
        {"x3d_xs", 4, 32, 32, 1, 0.5f},
        /* pytorchvideo's bottlenecks, SlowFast's frame Gather (the slow pathway's 2 of the
         * 8 frames), lateral convs and concats: its smallest sensible clip */
        {"slowfast_r50", 8, 32, 32, 1, 0.5f},
        /* the slow pathway alone (temporal kernels only from res stage 3 on), and with
         * i3d_r50's temporal MaxPool between its first two stages */
        {"slow_r50", 4, 32, 32, 1, 0.5f},
        {"i3d_r50", 4, 32, 32, 1, 0.0f},
        /* the (2+1)D pair with its inner BN, a 1x1x1 shortcut strided in time; the
         * depthwise 3x3x3 strided in time and space (csn_r101's 101 layers) */
        {"r2plus1d_r50", 4, 32, 32, 1, 0.5f},
        {"csn_r101", 4, 32, 32, 1, 0.0f},
        /* the VideoMAE transformers' nodes (LayerNormalization, erf GELU, MatMul, Softmax,
         * the sin-cos table) in the test model of videomae_vit_s's pieces, non-square */
        {"vit_test", 4, 32, 48, 1, 0.0f},
        /* MViT's nodes (pooled attention with grouped Convs, relative tables by Gather and
         * batched MatMul, MaxPool of the grid, the class token) in mvit_v2_s's test model */
        {"mvit_test", 8, 32, 32, 1, 0.0f},
        /* a clip it was not built for (8x32x32): the tables interpolated by a MatMul */
        {"mvit_test", 6, 48, 40, 1, 0.0f},
        {"mvit_v1_test", 8, 32, 32, 1, 0.0f}, /* and mvit_v1_b's absolute positions */
    };
    for (size_t i = 0; i < VT_ARRAY_LEN(cases); i++)
        zoo_one(be, &cases[i], 0, ort_version);
    zoo_one(be, &cases[0], 1, ort_version); /* probabilities: softmax and sigmoid heads */
    vt_backend_free(&be);

    e2e(bin, ort_version);
    printf("ONNX Runtime %s (onnxruntime-node)\n", ort_version);
    return vt_test_done("test_onnx");
}
