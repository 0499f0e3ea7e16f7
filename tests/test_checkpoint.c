/*
 * test_checkpoint.c: safetensors checkpoints.
 *   1. Round trip: a trained-one-step tiny (two heads, dropout) with AdamW state saves
 *      and loads into a fresh net + optimizer bitwise equal (params, buffers, optimizer
 *      state, step count), with the metadata back (ours and the caller's), and the net
 *      configuration rebuilt from the metadata alone; weights-only loading too.
 *   2. Outside truth: an r3d18 file written by vidtrain (with SGD state) loads into
 *      torchvision's r3d_18 with load_state_dict(strict=True) and gives the same eval
 *      logits (tests/oracle/torch_ckpt.py, its own json+numpy reader).
 *   3. Bad files — truncated, oversized header, wrong/unsupported dtype, wrong shape,
 *      overlapping offsets, garbage JSON, and random header corruption — are refused
 *      with a message naming the path and the problem, never a crash (ASan in CI).
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "models/checkpoint.h"
#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"
#include "tests/testutil.h"

static char g_dir[4096];

static void host_of(vt_backend *be, float *dst, const float *src, int64_t n) {
    if (n)
        be->i->to_host(be, dst, src, (size_t)n * sizeof(float));
}

static int arenas_equal(vt_net *a, vt_net *b) {
    vt_backend *be = vt_net_backend(a);
    int64_t np = vt_net_num_params(a), nb = vt_net_num_buffers(a);
    float *x = vt_malloc((size_t)(np + nb) * 4), *y = vt_malloc((size_t)(np + nb) * 4);
    host_of(be, x, vt_net_params(a), np);
    host_of(be, x + np, vt_net_buffers(a), nb);
    host_of(be, y, vt_net_params(b), np);
    host_of(be, y + np, vt_net_buffers(b), nb);
    int eq = !memcmp(x, y, (size_t)(np + nb) * 4);
    free(x);
    free(y);
    return eq;
}

/* One training step on random data so BN buffers and optimizer state are non-trivial. */
static void train_step(vt_net *net, vt_optim *opt, int n, uint64_t seed) {
    vt_backend *be = vt_net_backend(net);
    const vt_net_cfg *cfg = vt_net_config(net);
    int64_t xf = (int64_t)n * 3 * cfg->clip_t * cfg->clip_h * cfg->clip_w;
    float *hx = vt_malloc((size_t)xf * 4);
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < xf; i++)
        hx[i] = (float)vt_rng_normal(&r);
    float *x = vt_backend_alloc_x(be, (size_t)xf * 4, "x");
    be->i->to_device(be, x, hx, (size_t)xf * 4);
    vt_targets t;
    memset(&t, 0, sizeof t);
    void *bufs[VT_MAX_HEADS] = {0};
    for (int h = 0; h < cfg->nheads; h++) {
        int k = cfg->head[h].classes;
        if (cfg->head[h].loss == VT_LOSS_SOFTMAX_CE) {
            int32_t lab[64];
            for (int j = 0; j < n; j++)
                lab[j] = (int32_t)vt_rng_below(&r, (uint32_t)k);
            bufs[h] = vt_backend_alloc_x(be, (size_t)n * 4, "labels");
            be->i->to_device(be, bufs[h], lab, (size_t)n * 4);
            t.label[h] = bufs[h];
        } else {
            float tg[64 * 16];
            for (int j = 0; j < n * k; j++)
                tg[j] = (float)vt_rng_below(&r, 2);
            bufs[h] = vt_backend_alloc_x(be, (size_t)n * k * 4, "targets");
            be->i->to_device(be, bufs[h], tg, (size_t)n * k * 4);
            t.target[h] = bufs[h];
        }
    }
    vt_net_zero_grad(net);
    vt_net_set_dropout_seed(net, seed);
    vt_net_forward(net, x, n, 1);
    vt_net_loss(net, NULL, NULL, &t, 1.0f / (float)n);
    vt_net_backward(net);
    if (opt)
        vt_optim_step(opt, vt_net_params(net), vt_net_grads(net), 0.01f);
    for (int h = 0; h < cfg->nheads; h++)
        vt_backend_free_ptr(be, bufs[h]);
    vt_backend_free_ptr(be, x);
    free(hx);
}

static void round_trip(vt_backend *be) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "tiny", 6, 4, 16, 16);
    cfg.nheads = 2;
    cfg.head[0].smoothing = 0.1f;
    cfg.head[1] = (vt_head_cfg){"tags", 3, VT_LOSS_BCE, 0.25f, 0.0f};
    cfg.dropout = 0.3f;
    char err[512], path[4200];
    vt_net *a = vt_net_init(&cfg, be, 4, err, sizeof err);
    VT_CHECK(a, "%s", err);
    vt_net_init_weights(a, 11);
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_ADAMW);
    vt_optim *oa = vt_optim_init(&oc, be, vt_net_num_params(a));
    train_step(a, oa, 4, 1);
    train_step(a, oa, 4, 2);

    vt_ckpt_meta extra = {0};
    vt_ckpt_meta_set(&extra, "classes", "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\"]");
    vt_ckpt_meta_set(&extra, "epoch", "3");
    vt_ckpt_meta_set(&extra, "rng", "18446744073709551615");
    vt_ckpt_meta_set(&extra, "note", "unicode é and \"quotes\"");
    snprintf(path, sizeof path, "%s/tiny.safetensors", g_dir);
    TCHECK(vt_ckpt_save(path, a, oa, &extra, err, sizeof err) == 0, "save: %s", err);
    /* Reserved keys are refused. */
    vt_ckpt_meta bad = {0};
    vt_ckpt_meta_set(&bad, "model", "x");
    TCHECK(vt_ckpt_save(path, a, oa, &bad, err, sizeof err) < 0 && strstr(err, "model"),
           "reserved key accepted");
    vt_ckpt_meta_free(&bad);

    /* Metadata + tensor list without a net, and the configuration from it. */
    vt_ckpt_info info;
    TCHECK(vt_ckpt_read_info(&info, path, err, sizeof err) == 0, "info: %s", err);
    vt_net_cfg back;
    TCHECK(vt_ckpt_net_cfg(&back, &info, err, sizeof err) == 0, "cfg: %s", err);
    TCHECK(!strcmp(back.model, "tiny") && back.clip_t == 4 && back.clip_h == 16 &&
               back.nheads == 2 && back.head[1].loss == VT_LOSS_BCE &&
               back.head[1].weight == 0.25f && back.head[0].smoothing == 0.1f &&
               back.head[1].classes == 3 && back.dropout == 0.3f &&
               !strcmp(back.head[1].name, "tags"),
           "configuration from metadata differs");
    vt_optim_cfg ob;
    int64_t step = -1;
    TCHECK(vt_ckpt_optim_cfg(&ob, &step, &info, err, sizeof err) == 0 && step == 2 &&
               ob.kind == VT_OPT_ADAMW && ob.beta2 == oc.beta2 && ob.wd == oc.wd,
           "optimizer from metadata: %s", err);
    TCHECK(vt_ckpt_find(&info, "optim.adamw.exp_avg_sq") != NULL, "no exp_avg_sq");
    const vt_ckpt_tensor *nbt = vt_ckpt_find(&info, "bn1.num_batches_tracked");
    TCHECK(nbt && nbt->is_int64 && nbt->ndim == 0, "num_batches_tracked not I64 []");
    TCHECK(!strcmp(vt_ckpt_meta_get(&info.meta, "vidtrain_version"), VT_VERSION), "version");
    vt_ckpt_info_free(&info);

    /* Full state into a fresh net + optimizer. */
    vt_net *b = vt_net_init(&back, be, 4, err, sizeof err);
    vt_optim *ob2 = vt_optim_init(&oc, be, vt_net_num_params(b));
    vt_ckpt_meta meta = {0};
    TCHECK(vt_ckpt_load_state(b, ob2, path, &meta, err, sizeof err) == 0, "load: %s", err);
    TCHECK(arenas_equal(a, b), "params/buffers differ after the round trip");
    int64_t ns = vt_optim_state_len(oa);
    float *sa = vt_malloc((size_t)ns * 4), *sb = vt_malloc((size_t)ns * 4);
    host_of(be, sa, vt_optim_state(oa), ns);
    host_of(be, sb, vt_optim_state(ob2), ns);
    TCHECK(!memcmp(sa, sb, (size_t)ns * 4), "optimizer state differs after the round trip");
    TCHECK(vt_optim_step_count(ob2) == 2, "step count %lld", (long long)vt_optim_step_count(ob2));
    for (int i = 0; i < extra.n; i++) {
        const char *v = vt_ckpt_meta_get(&meta, extra.kv[i].key);
        TCHECK(v && !strcmp(v, extra.kv[i].val), "metadata %s lost", extra.kv[i].key);
    }
    /* A step after resume equals a step without the interruption. */
    train_step(a, oa, 4, 3);
    train_step(b, ob2, 4, 3);
    TCHECK(arenas_equal(a, b), "resumed training diverges");
    free(sa);
    free(sb);
    vt_ckpt_meta_free(&meta);

    /* Weights only, into a net without an optimizer; mismatched optimizer refused. */
    vt_net *c = vt_net_init(&back, be, 1, err, sizeof err);
    TCHECK(vt_ckpt_load_weights(c, path, err, sizeof err) == 0, "weights: %s", err);
    vt_optim_cfg sgd;
    vt_optim_cfg_default(&sgd, VT_OPT_SGD);
    vt_optim *os = vt_optim_init(&sgd, be, vt_net_num_params(c));
    TCHECK(vt_ckpt_load_state(c, os, path, NULL, err, sizeof err) < 0 && strstr(err, "adamw"),
           "SGD resume from an AdamW file: %s", err);
    printf("refused: %s\n", err);
    /* Another model's file is refused by name. */
    vt_net_cfg other = back;
    other.head[0].classes = 7;
    vt_net *d = vt_net_init(&other, be, 1, err, sizeof err);
    TCHECK(vt_ckpt_load_weights(d, path, err, sizeof err) < 0 && strstr(err, "fc.weight") &&
               strstr(err, "shape"), "7-class net took a 6-class file: %s", err);
    printf("refused: %s\n", err);
    vt_net_free(&d);
    vt_optim_free(&os);
    vt_net_free(&c);
    vt_ckpt_meta_free(&extra);
    vt_optim_free(&ob2);
    vt_net_free(&b);
    vt_optim_free(&oa);
    vt_net_free(&a);
}

/* ---- bad files ---- */

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    VT_CHECK(f, "open %s", path);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = vt_malloc(*n);
    VT_CHECK(fread(b, 1, *n, f) == *n, "read %s", path);
    fclose(f);
    return b;
}

static void spit(const char *path, const void *a, size_t na, const void *b, size_t nb) {
    FILE *f = fopen(path, "wb");
    VT_CHECK(f, "create %s", path);
    VT_CHECK(fwrite(a, 1, na, f) == na && (nb == 0 || fwrite(b, 1, nb, f) == nb), "write");
    fclose(f);
}

/* Writes a file with the good file's data and a header edited by fn (through cJSON). */
static void with_header(const char *out, const unsigned char *good, size_t n,
                        void (*fn)(cJSON *), size_t trim) {
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)good[i] << (8 * i);
    cJSON *root = cJSON_ParseWithLength((const char *)good + 8, (size_t)hl);
    VT_CHECK(root, "good header does not parse");
    fn(root);
    char *js = cJSON_PrintUnformatted(root);
    size_t l = strlen(js);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)l >> (8 * i));
    FILE *f = fopen(out, "wb");
    VT_CHECK(f && fwrite(len8, 1, 8, f) == 8 && fwrite(js, 1, l, f) == l &&
                 fwrite(good + 8 + hl, 1, n - 8 - hl - trim, f) == n - 8 - hl - trim,
             "write %s", out);
    fclose(f);
    free(js);
    cJSON_Delete(root);
}

static void set_dtype_f32_nbt(cJSON *r) {
    /* 8 bytes of I64 [] become F32 [2]: consistent in itself, wrong for the model. */
    cJSON *t = cJSON_GetObjectItem(r, "bn1.num_batches_tracked");
    cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("F32"));
    cJSON_ReplaceItemInObject(t, "shape", cJSON_CreateIntArray((const int[]){2}, 1));
}
static void set_dtype_bf16(cJSON *r) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "conv1.weight"), "dtype",
                              cJSON_CreateString("BF16"));
}
static void set_shape(cJSON *r) {
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "conv1.weight"), "shape",
                              cJSON_CreateIntArray((const int[]){48, 3, 3, 3, 1}, 5));
}
static void set_overlap(cJSON *r) {
    cJSON *w = cJSON_GetObjectItem(r, "bn1.weight"), *b = cJSON_GetObjectItem(r, "bn1.bias");
    cJSON_ReplaceItemInObject(b, "data_offsets",
                              cJSON_Duplicate(cJSON_GetObjectItem(w, "data_offsets"), 1));
}
static void set_negative(cJSON *r) {
    cJSON *o = cJSON_CreateArray();
    cJSON_AddItemToArray(o, cJSON_CreateNumber(-8));
    cJSON_AddItemToArray(o, cJSON_CreateNumber(56));
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(r, "bn1.bias"), "data_offsets", o);
}
static void drop_fc_bias(cJSON *r) { cJSON_DeleteItemFromObject(r, "fc.bias"); }

static void expect_refused(vt_net *net, const char *path, const char *what, const char *needle) {
    char err[512] = "";
    int rc = vt_ckpt_load_weights(net, path, err, sizeof err);
    TCHECK(rc < 0, "%s: accepted", what);
    TCHECK(strstr(err, path) && strstr(err, needle), "%s: message '%s' lacks '%s'", what, err,
           needle);
    printf("  %-18s -> %s\n", what, err + strlen(path) + 2);
}

static void bad_files(vt_backend *be) {
    char err[512], good[4200], path[4300];
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "tiny", 4, 4, 16, 16);
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    vt_net_init_weights(net, 5);
    snprintf(good, sizeof good, "%s/good.safetensors", g_dir);
    VT_CHECK(vt_ckpt_save(good, net, NULL, NULL, err, sizeof err) == 0, "%s", err);
    TCHECK(vt_ckpt_load_weights(net, good, err, sizeof err) == 0, "good file refused: %s", err);
    size_t n;
    unsigned char *b = slurp(good, &n);
    snprintf(path, sizeof path, "%s/bad.safetensors", g_dir);
    printf("bad files refused:\n");

    spit(path, b, 4, NULL, 0);
    expect_refused(net, path, "4 bytes", "truncated");
    spit(path, b, n - 100, NULL, 0);
    expect_refused(net, path, "data cut short", "truncated");
    spit(path, b, 8 + 20, NULL, 0);
    expect_refused(net, path, "header cut short", "truncated");
    unsigned char huge[8] = {0, 0, 0, 0, 0, 1, 0, 0}; /* 2^40 */
    spit(path, huge, 8, b + 8, n - 8);
    expect_refused(net, path, "oversized header", "not sane");
    const char garbage[] = "{\"conv1.weight\": {\"dtype\": \"F32\", \"shape\": [16, 3";
    unsigned char len8[8] = {(unsigned char)(sizeof garbage - 1)};
    spit(path, len8, 8, garbage, sizeof garbage - 1);
    expect_refused(net, path, "garbage JSON", "not valid JSON");
    const char array[] = "[1, 2, 3]";
    len8[0] = (unsigned char)(sizeof array - 1);
    spit(path, len8, 8, array, sizeof array - 1);
    expect_refused(net, path, "JSON not an object", "not an object");
    with_header(path, b, n, set_dtype_f32_nbt, 0);
    expect_refused(net, path, "wrong dtype", "expected I64");
    with_header(path, b, n, set_dtype_bf16, 0);
    expect_refused(net, path, "unsupported dtype", "not supported");
    with_header(path, b, n, set_shape, 0);
    expect_refused(net, path, "wrong shape", "the model expects [16, 3, 3, 3, 3]");
    with_header(path, b, n, set_overlap, 0);
    expect_refused(net, path, "overlapping", "overlap");
    with_header(path, b, n, set_negative, 0);
    expect_refused(net, path, "negative offset", "data_offsets");
    with_header(path, b, n, drop_fc_bias, 4 * 4); /* and its 4 floats */
    expect_refused(net, path, "missing tensor", "fc.bias");
    snprintf(path, sizeof path, "%s/does-not-exist.safetensors", g_dir);
    expect_refused(net, path, "no file", "cannot open");

    /* Random corruption of the header: refused or (if harmless) accepted, never a crash. */
    snprintf(path, sizeof path, "%s/fuzz.safetensors", g_dir);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++)
        hl |= (uint64_t)b[i] << (8 * i);
    vt_rng r;
    vt_rng_seed(&r, 99);
    int refused = 0;
    unsigned char *m = vt_malloc(n);
    for (int it = 0; it < 200; it++) {
        memcpy(m, b, n);
        int flips = 1 + (int)vt_rng_below(&r, 4);
        for (int k = 0; k < flips; k++)
            m[vt_rng_below(&r, (uint32_t)(8 + hl))] = (unsigned char)vt_rng_below(&r, 256);
        spit(path, m, n, NULL, 0);
        refused += vt_ckpt_load_weights(net, path, err, sizeof err) < 0;
    }
    printf("  random header corruption: %d of 200 refused, none crashed\n", refused);
    TCHECK(refused > 100, "only %d of 200 corrupted headers refused", refused);
    free(m);
    free(b);
    vt_net_free(&net);
}

/* ---- torchvision ---- */

static void torchvision_load(void) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[17000], path[4200], xin[4200], lin[4200], err[512];
    vt_backend *be = vt_backend_init("cpu", 0, 0, 0);
    const int n = 2, k = 4;
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "r3d18", k, 2, 24, 24);
    vt_net *net = vt_net_init(&cfg, be, n, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_net_init_weights(net, 21);
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);
    vt_optim *opt = vt_optim_init(&oc, be, vt_net_num_params(net));
    int64_t xf = (int64_t)n * 3 * 2 * 24 * 24;
    float *hx = vt_malloc((size_t)xf * 4), logits[2 * 4];
    vt_rng r;
    vt_rng_seed(&r, 77);
    for (int64_t i = 0; i < xf; i++)
        hx[i] = (float)vt_rng_normal(&r);
    float *x = vt_backend_alloc_x(be, (size_t)xf * 4, "x");
    be->i->to_device(be, x, hx, (size_t)xf * 4);
    /* A training forward moves the running statistics (and num_batches_tracked) away from
     * their initial 0/1, so eval mode below uses non-trivial buffers from the file. */
    vt_net_forward(net, x, n, 1);
    VT_OP(be, scale, x, 0.5f, xf);
    be->i->to_host(be, hx, x, (size_t)xf * 4);
    vt_net_forward(net, x, n, 0);
    be->i->to_host(be, logits, vt_net_logits(net, 0), sizeof logits);
    snprintf(path, sizeof path, "%s/r3d18.safetensors", g_dir);
    snprintf(xin, sizeof xin, "%s/x.f32", g_dir);
    snprintf(lin, sizeof lin, "%s/logits.f32", g_dir);
    spit(xin, hx, (size_t)xf * 4, NULL, 0);
    spit(lin, logits, sizeof logits, NULL, 0);
    vt_ckpt_meta extra = {0};
    vt_ckpt_meta_set(&extra, "classes", "[\"w\", \"x\", \"y\", \"z\"]");
    /* With the optimizer: its optim.* tensors must not upset strict loading. */
    TCHECK(vt_ckpt_save(path, net, opt, &extra, err, sizeof err) == 0, "%s", err);
    snprintf(cmd, sizeof cmd, "%s -W ignore '%s/tests/oracle/torch_ckpt.py' '%s' '%s' '%s' %d 2 24 24",
             py, src, path, xin, lin, n);
    fflush(stdout);
    int rc = system(cmd);
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == VT_TEST_SKIP)
        printf("torchvision check skipped: %s cannot import torch and torchvision\n", py);
    else
        TCHECK(rc == 0, "torchvision does not load vidtrain's r3d18 or disagrees: %s", cmd);
    vt_ckpt_meta_free(&extra);
    vt_backend_free_ptr(be, x);
    free(hx);
    vt_optim_free(&opt);
    vt_net_free(&net);
    vt_backend_free(&be);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("checkpoint"));
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    round_trip(be);
    bad_files(be);
    /* No temporary files left behind by the atomic writes. */
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -q '\\.tmp\\.'", g_dir);
    TCHECK(system(cmd) != 0, "temporary files left in %s", g_dir);
    TCHECK(be->in_use == 0, "%lld bytes left allocated", (long long)be->in_use);
    vt_backend_free(&be);
    torchvision_load();
    return vt_test_done("test_checkpoint");
}
