/*
 * test_zoo.c: every zoo model has exactly its PyTorch twin's state dict — names, order,
 * dtypes, shapes and parameter count — against tests/oracle/torch_zoo.py (torchvision's own
 * r3d_18, mc3_18, r2plus1d_18, s3d; the script's tiny, tiny_nobn and C3D; pytorchvideo's
 * X3D as tests/oracle/torch_x3d.py writes it), r3d_18 and s3d
 * with 400 classes have torchvision's published 33,371,472 and 8,320,048 parameters
 * (s3d's forward and gradients: test_zoo_s3d.c), the initialisation follows
 * torchvision's formulas, and bad configurations are refused with a message. Every name in
 * vt_zoo_names has a twin here (a new zoo entry without one fails; the VideoMAE
 * transformers' are in test_zoo_vit.c, MViT's in test_zoo_mvit.c), and the memory plan
 * of each agrees with the built net; tiny_nobn (the BN-free test model) has no buffers.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "base/common.h"
#include "models/net.h"
#include "models/registry.h"
#include "tests/testutil.h"

typedef struct { const char *model; int classes, t, h, w; } spec;
static const spec specs[] = {
    {"tiny", 10, 8, 64, 64},
    {"tiny_nobn", 10, 8, 64, 64},
    {"c3d", 101, 16, 112, 112},
    {"r3d18", 400, 16, 112, 112},
    {"mc3_18", 400, 16, 112, 112},
    {"r2plus1d18", 400, 16, 112, 112},
    {"s3d", 400, 16, 224, 224},
    {"x3d_xs", 400, 4, 160, 160},
    {"x3d_s", 400, 13, 160, 160},
    {"x3d_m", 400, 16, 224, 224},
    {"x3d_l", 400, 16, 312, 312},
};

/* Reads the script's listing for spec s from f (already positioned past "model ..."),
 * compares it with net's tensors. */
static void compare_listing(FILE *f, vt_net *net, const char *model) {
    char line[512];
    int i = 0, n = vt_net_num_tensors(net);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        long long params;
        if (sscanf(line, "params %lld", &params) == 1) {
            TCHECK(params == vt_net_num_params(net), "%s: torch %lld params, vidtrain %lld",
                   model, params, (long long)vt_net_num_params(net));
            break;
        }
        char name[256], dt[8], shape[128] = "";
        int k = sscanf(line, "%255s %7s %127s", name, dt, shape);
        TCHECK(k >= 2, "%s: bad listing line '%s'", model, line);
        if (k < 2)
            continue;
        const vt_tensor_info *t = vt_net_tensor(net, i);
        TCHECK(t != NULL, "%s: torch has '%s' beyond vidtrain's %d tensors", model, name, n);
        if (!t)
            continue;
        TCHECK(!strcmp(t->name, name), "%s: tensor %d is '%s' in torch, '%s' in vidtrain", model,
               i, name, t->name);
        TCHECK(t->is_int64 == !strcmp(dt, "I64"), "%s: '%s' dtype %s", model, name, dt);
        char mine[128] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(mine + strlen(mine), sizeof mine - strlen(mine), "%s%lld", d ? "," : "",
                     (long long)t->shape[d]);
        TCHECK(!strcmp(mine, shape), "%s: '%s' shape torch [%s] vidtrain [%s]", model, name,
               shape, mine);
        i++;
    }
    TCHECK(i == n, "%s: torch lists %d tensors, vidtrain has %d", model, i, n);
}

/* The memory plan (pure arithmetic) sizes what vt_net_init built: same parameter count,
 * buffers only where the model has batch norm. */
static void check_plan(vt_net *net, const vt_net_cfg *cfg, const char *model) {
    vt_memplan mp;
    char err[256];
    TCHECK(vt_memplan_build(&mp, cfg, 1, err, sizeof err) == 0, "%s: memplan: %s", model, err);
    TCHECK(mp.params == vt_net_num_params(net), "%s: plan %lld params, net %lld", model,
           (long long)mp.params, (long long)vt_net_num_params(net));
    TCHECK(mp.buffer_bytes == vt_net_num_buffers(net) * (int64_t)sizeof(float),
           "%s: plan %lld buffer bytes, net %lld floats", model, (long long)mp.buffer_bytes,
           (long long)vt_net_num_buffers(net));
    TCHECK(mp.bytes_per_clip > 0 && mp.nrows > 0, "%s: empty plan", model);
    if (!strcmp(model, "tiny_nobn")) {
        TCHECK(vt_net_num_buffers(net) == 0 && mp.buffer_bytes == 0, "tiny_nobn has buffers");
        for (int i = 0; i < mp.nrows; i++)
            TCHECK(strcmp(mp.rows[i].kind, "bn") != 0, "tiny_nobn plan has a bn row %s",
                   mp.rows[i].name);
    }
    vt_memplan_free(&mp);
}

static void stats(const float *x, int64_t n, double *mean, double *std) {
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        q += (double)x[i] * x[i];
    }
    *mean = s / (double)n;
    *std = sqrt(q / (double)n - *mean * *mean);
}

static void check_init(vt_backend *be) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "r3d18", 400, 4, 32, 32);
    char err[256];
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net != NULL, "r3d18: %s", err);
    if (!net)
        return;
    vt_net_init_weights(net, 7);
    const float *p = vt_net_params(net), *b = vt_net_buffers(net);
    double m, s;
    /* kaiming_normal_(fan_out, relu): std = sqrt(2 / (64*27)) = 0.0340. With 110,592
     * draws the sample std is within 3/sqrt(2n) = 0.6% of it (3 sigma): allow 2%. */
    const vt_tensor_info *t = vt_net_find_tensor(net, "layer1.0.conv1.0.weight");
    stats(p + t->offset, t->numel, &m, &s);
    TCHECK(fabs(s / sqrt(2.0 / (64 * 27)) - 1) < 0.02 && fabs(m) < 0.001,
           "layer1 conv std %g mean %g", s, m);
    t = vt_net_find_tensor(net, "stem.0.weight"); /* fan_out = 64*3*7*7 */
    stats(p + t->offset, t->numel, &m, &s);
    TCHECK(fabs(s / sqrt(2.0 / (64 * 147)) - 1) < 0.03, "stem std %g", s);
    /* fc: N(0, 0.01) over 204,800 draws: std within 2%. */
    t = vt_net_find_tensor(net, "fc.weight");
    stats(p + t->offset, t->numel, &m, &s);
    TCHECK(fabs(s / 0.01 - 1) < 0.02, "fc std %g", s);
    t = vt_net_find_tensor(net, "fc.bias");
    stats(p + t->offset, t->numel, &m, &s);
    TCHECK(m == 0 && s == 0, "fc bias not zero");
    t = vt_net_find_tensor(net, "layer3.1.conv2.1.weight");
    TCHECK(p[t->offset] == 1.0f && p[t->offset + t->numel - 1] == 1.0f, "bn weight not 1");
    t = vt_net_find_tensor(net, "layer3.1.conv2.1.running_var");
    TCHECK(b[t->offset] == 1.0f, "running_var not 1");
    t = vt_net_find_tensor(net, "layer3.1.conv2.1.num_batches_tracked");
    TCHECK(t->is_int64 && t->ndim == 0 && b[t->offset] == 0.0f, "num_batches_tracked");
    vt_net_free(&net);
    /* Same seed, same weights; another seed, others (on tiny: cheap). */
    vt_net_cfg_default(&cfg, "tiny", 10, 4, 16, 16);
    net = vt_net_init(&cfg, be, 0, err, sizeof err);
    vt_net *net2 = vt_net_init(&cfg, be, 0, err, sizeof err);
    vt_net_init_weights(net, 7);
    vt_net_init_weights(net2, 7);
    TCHECK(!memcmp(vt_net_params(net), vt_net_params(net2),
                   (size_t)vt_net_num_params(net) * sizeof(float)), "init not deterministic");
    vt_net_init_weights(net2, 8);
    TCHECK(memcmp(vt_net_params(net), vt_net_params(net2),
                  (size_t)vt_net_num_params(net) * sizeof(float)), "seed ignored");
    vt_net_free(&net2);
    vt_net_free(&net);
    /* tiny_nobn: conv biases start at 0 (torchvision's rule for conv biases), conv weights
     * kaiming fan_out: conv2 std sqrt(2 / (32*27)) = 0.048 over 13,824 draws, within 3/
     * sqrt(2n) = 1.8% (3 sigma): allow 4%. */
    vt_net_cfg_default(&cfg, "tiny_nobn", 10, 4, 16, 16);
    net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net != NULL, "tiny_nobn: %s", err);
    if (!net)
        return;
    vt_net_init_weights(net, 7);
    p = vt_net_params(net);
    t = vt_net_find_tensor(net, "conv2.bias");
    TCHECK(t && t->numel == 32, "tiny_nobn conv2.bias");
    if (t) {
        stats(p + t->offset, t->numel, &m, &s);
        TCHECK(m == 0 && s == 0, "tiny_nobn conv bias not zero");
    }
    t = vt_net_find_tensor(net, "conv2.weight");
    stats(p + t->offset, t->numel, &m, &s);
    TCHECK(fabs(s / sqrt(2.0 / (32 * 27)) - 1) < 0.04, "tiny_nobn conv2 std %g", s);
    vt_net_free(&net);
}

int main(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    VT_CHECK(be, "no cpu-ref backend");
    char err[256];

    /* Refusals with a reason. */
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "resnet50", 10, 16, 112, 112);
    TCHECK(!vt_net_init(&cfg, be, 1, err, sizeof err) && strstr(err, "unknown model"), "%s", err);
    vt_net_cfg_default(&cfg, "c3d", 10, 4, 16, 16);
    TCHECK(!vt_net_init(&cfg, be, 1, err, sizeof err) && strstr(err, "too small"), "%s", err);
    printf("refused: %s\n", err);
    TCHECK(be->in_use == 0, "a refused net left %lld bytes allocated", (long long)be->in_use);
    vt_net_cfg_default(&cfg, "tiny", 10, 8, 64, 64);
    be->budget = 1000; /* bytes: far too small for tiny */
    TCHECK(!vt_net_init(&cfg, be, 1, err, sizeof err) && strstr(err, "cannot allocate"), "%s",
           err);
    TCHECK(be->in_use == 0, "a refused net left %lld bytes allocated", (long long)be->in_use);
    be->budget = 0;

    /* The twins' listings, one python process for all. */
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[2048];
    int off = snprintf(cmd, sizeof cmd, "%s '%s/tests/oracle/torch_zoo.py'", py, src);
    for (size_t i = 0; i < VT_ARRAY_LEN(specs); i++)
        off += snprintf(cmd + off, sizeof cmd - (size_t)off, " %s:%d:%d:%d:%d", specs[i].model,
                        specs[i].classes, specs[i].t, specs[i].h, specs[i].w);
    snprintf(cmd + off, sizeof cmd - (size_t)off, " 2>&1");
    FILE *f = popen(cmd, "r");
    VT_CHECK(f, "popen %s", cmd);
    char line[512];
    size_t seen = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model ", 6) != 0) {
            fputs(line, stderr);
            continue;
        }
        char model[32];
        int classes, t, h, w;
        if (sscanf(line, "model %31[^:]:%d:%d:%d:%d", model, &classes, &t, &h, &w) != 5)
            continue;
        vt_net_cfg_default(&cfg, model, classes, t, h, w);
        vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
        TCHECK(net != NULL, "%s: %s", model, err);
        if (!net)
            continue;
        compare_listing(f, net, model);
        check_plan(net, &cfg, model);
        printf("%-11s %3d classes, clip %dx%dx%d: %lld params, %d tensors\n", model, classes, t,
               h, w, (long long)vt_net_num_params(net), vt_net_num_tensors(net));
        if (!strcmp(model, "r3d18"))
            TCHECK(vt_net_num_params(net) == 33371472LL, "r3d18/400 has %lld params",
                   (long long)vt_net_num_params(net));
        if (!strcmp(model, "s3d"))
            TCHECK(vt_net_num_params(net) == 8320048LL, "s3d/400 has %lld params",
                   (long long)vt_net_num_params(net));
        /* pytorchvideo's X3D-XS/S/M (one architecture, other clips) and X3D-L: 3.79M and
         * 6.15M, its model zoo's figures */
        if (!strncmp(model, "x3d_", 4))
            TCHECK(vt_net_num_params(net) == (!strcmp(model, "x3d_l") ? 6153384LL : 3794274LL),
                   "%s/400 has %lld params", model, (long long)vt_net_num_params(net));
        vt_net_free(&net);
        seen++;
    }
    int st = pclose(f);
    if (WIFEXITED(st) && WEXITSTATUS(st) == VT_TEST_SKIP) {
        fprintf(stderr, "SKIP: %s cannot import torch and torchvision\n", py);
        vt_backend_free(&be);
        return VT_TEST_SKIP;
    }
    TCHECK(st == 0 && seen == VT_ARRAY_LEN(specs), "torch_zoo.py: status %d, %zu of %zu models",
           st, seen, VT_ARRAY_LEN(specs));

    /* Every zoo name was listed above (and nothing else), or has its twin elsewhere: the
     * VideoMAE ViTs in test_zoo_vit.c, pytorchvideo's ResNet-50s in
     * tests/oracle/torch_pyvideo.py, whose names, shapes and order test_pyvideo.c checks
     * (pytorchvideo does not install here: its twins are written out in plain torch). */
    static const char *const pyvideo[] = {"slow_r50", "slowfast_r50", "i3d_r50", "r2plus1d_r50",
                                          "csn_r101"};
    size_t nzoo = 0, nvit = 0;
    for (; vt_zoo_names[nzoo]; nzoo++) {
        if (!strncmp(vt_zoo_names[nzoo], "videomae_", 9) || /* twins: test_zoo_vit.c */
            !strncmp(vt_zoo_names[nzoo], "mvit_", 5)) {     /* and test_zoo_mvit.c */
            nvit++;
            continue;
        }
        int found = 0;
        for (size_t i = 0; i < VT_ARRAY_LEN(specs); i++)
            found |= !strcmp(specs[i].model, vt_zoo_names[nzoo]);
        for (size_t i = 0; i < VT_ARRAY_LEN(pyvideo); i++)
            found |= !strcmp(pyvideo[i], vt_zoo_names[nzoo]);
        TCHECK(found, "zoo model '%s' has no twin in this test", vt_zoo_names[nzoo]);
    }
    TCHECK(nzoo - nvit == VT_ARRAY_LEN(specs) + VT_ARRAY_LEN(pyvideo), "zoo lists %zu models, "
           "the tests %zu", nzoo - nvit, VT_ARRAY_LEN(specs) + VT_ARRAY_LEN(pyvideo));

    /* Extra heads and dropout: names and the parameter count they add. */
    vt_net_cfg_default(&cfg, "r3d18", 400, 16, 112, 112);
    cfg.nheads = 3;
    cfg.head[1] = (vt_head_cfg){"verb", 5, VT_LOSS_SOFTMAX_CE, 1.0f, 0.0f};
    cfg.head[2] = (vt_head_cfg){"tags", 7, VT_LOSS_BCE, 0.5f, 0.0f};
    cfg.dropout = 0.5f;
    vt_net *net = vt_net_init(&cfg, be, 0, err, sizeof err);
    TCHECK(net && vt_net_find_tensor(net, "heads.1.weight") &&
               vt_net_find_tensor(net, "heads.2.bias") &&
               vt_net_num_params(net) == 33371472LL + 512 * 5 + 5 + 512 * 7 + 7,
           "multi-head r3d18");
    vt_net_free(&net);

    check_init(be);
    TCHECK(be->in_use == 0, "%lld bytes still allocated", (long long)be->in_use);
    vt_backend_free(&be);
    return vt_test_done("test_zoo");
}
