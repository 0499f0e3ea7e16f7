/*
 * test_wd_exempt.c: weight-decay exemptions (--wd-exempt, models/finetune.h
 * vt_finetune_no_decay and vt_finetune_groups_wd) against timm's and VideoMAE's rule
 * applied by tests/oracle/torch_wd.py to the PyTorch VideoMAE ViT's named_parameters:
 *   - vit_test (the test transformer) and videomae_vit_b's names: every parameter on the
 *     same side (decay / no decay) as timm puts it; ViT-B's groups with layer decay fit
 *     VT_OPTIM_MAX_GROUPS;
 *   - the optimizer applies them: one AdamW step with zero gradients leaves every exempt
 *     tensor bit for bit as it was and multiplies every other by (1 - lr wd) — torch's
 *     AdamW with zero gradients and zero state (its Adam step is 0 / (0 + eps) = 0), in
 *     float as the update op rounds it;
 *   - off (vt_finetune_groups): every parameter decays, as before.
 * Without torch in $VT_PYTHON the PyTorch part is reported skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/finetune.h"
#include "models/net.h"
#include "models/optim.h"
#include "models/registry.h"
#include "tests/testutil.h"

/* Each line "NAME NDIM decay|no_decay" of the oracle for this ViT shape checked against
 * vt_finetune_no_decay; *groups gets the contiguous groups layer decay 0.75 and the
 * exemptions make over model's stages. Returns the parameters compared (0: none). */
static int against_timm(const char *py, const char *src, const char *model, const char *shape,
                        int *groups) {
    char cmd[8400], line[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_wd.py' %s", py, src, shape);
    FILE *f = popen(cmd, "r");
    TCHECK(f != NULL, "cannot run %s", cmd);
    if (!f)
        return 0;
    int n = 0, bad = 0, ng = 0, depth = vt_finetune_nlayers(model);
    float last_mult = -1;
    int last_nd = -1;
    while (fgets(line, sizeof line, f)) {
        char name[256], side[16];
        int ndim;
        if (sscanf(line, "%255s %d %15s", name, &ndim, side) != 3)
            continue;
        vt_tensor_info t = {.name = name, .ndim = ndim};
        int ours = vt_finetune_no_decay(&t), timm = !strcmp(side, "no_decay");
        if (ours != timm && bad++ < 5)
            fprintf(stderr, "%s %s: %s, timm %s\n", model, name, ours ? "no decay" : "decay",
                    side);
        int st = vt_finetune_stage(model, name);
        float mult = st >= 0 ? (float)pow(0.75, depth + 1 - st) : 1.0f;
        ng += mult != last_mult || ours != last_nd;
        last_mult = mult;
        last_nd = ours;
        n++;
    }
    TCHECK(pclose(f) == 0, "%s failed", cmd);
    printf("  %s: %d parameters, %d on the other side of timm's rule; %d groups with layer "
           "decay\n", model, n, bad, ng);
    TCHECK(bad == 0, "%s: %d parameters decay otherwise than timm says", model, bad);
    *groups = ng;
    return n;
}

/* One AdamW step with zero gradients over vit_test's groups (exempt on or off). */
static void step_check(int exempt) {
    vt_backend *be = vt_backend_init("cpu", 0, 1, 0);
    vt_net_cfg cfg;
    char err[512];
    vt_net_cfg_default(&cfg, "vit_test", 5, 4, 32, 48);
    vt_net *net = vt_net_init(&cfg, be, 1, err, sizeof err);
    TCHECK(net != NULL, "vit_test: %s", err);
    if (!net) {
        vt_backend_free(&be);
        return;
    }
    vt_net_init_weights(net, 3);
    vt_optim_group g[VT_OPTIM_MAX_GROUPS];
    int ng = exempt ? vt_finetune_groups_wd(g, VT_OPTIM_MAX_GROUPS, net, -1, 1.0f, 0.75f, 1)
                    : vt_finetune_groups(g, VT_OPTIM_MAX_GROUPS, net, -1, 1.0f, 0.75f);
    int64_t np = vt_net_num_params(net);
    float *p = vt_net_params(net), *grad = vt_net_grads(net), *p0 = vt_malloc((size_t)np * 4);
    memcpy(p0, p, (size_t)np * 4);
    memset(grad, 0, (size_t)np * 4);
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_ADAMW);
    oc.wd = 0.05f; /* VideoMAE's fine-tuning weight decay */
    vt_optim *opt = vt_optim_init(&oc, be, np);
    vt_optim_set_groups(opt, g, ng);
    const float lr = 1e-3f;
    vt_optim_step(opt, p, grad, lr);
    int same = 0, decayed = 0, bad = 0, nt = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        if (t->is_buffer)
            continue;
        nt++;
        /* the group's lr: layer decay scales lr, and with it the decay lr * wd */
        float glr = lr;
        for (int k = 0; k < ng; k++)
            if (t->offset >= g[k].lo && t->offset < g[k].hi)
                glr = lr * g[k].lr_mult;
        int ex = exempt && vt_finetune_no_decay(t), ok = 1;
        for (int64_t e = t->offset; e < t->offset + t->numel; e++) {
            float want = ex ? p0[e] : p0[e] * (1.0f - glr * oc.wd);
            ok &= p[e] == want || (!ex && fabsf(p[e] - want) <= 1e-7f * fabsf(want));
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s: not %s\n", t->name, ex ? "left alone" : "decayed");
        same += ex;
        decayed += !ex;
    }
    printf("  exemptions %s: %d groups; %d tensors untouched, %d decayed by (1 - lr wd)\n",
           exempt ? "on" : "off", ng, same, decayed);
    TCHECK(bad == 0, "exempt %d: %d tensors off the AdamW step", exempt, bad);
    TCHECK(exempt ? same > 0 && decayed > 0 : same == 0 && decayed == nt,
           "exempt %d: %d untouched, %d decayed", exempt, same, decayed);
    vt_optim_free(&opt);
    free(p0);
    vt_net_free(&net);
    vt_backend_free(&be);
}

int main(void) {
    step_check(1);
    step_check(0);
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    if (system(cmd) != 0) {
        printf("test_wd_exempt: SKIP the PyTorch part: %s cannot import torch\n", py);
        return vt_test_done("test_wd_exempt");
    }
    int ng = 0;
    TCHECK(against_timm(py, src, "vit_test", "48 2 2 5", &ng) > 20, "vit_test: nothing compared");
    TCHECK(against_timm(py, src, "videomae_vit_b", "768 12 12 400", &ng) > 150,
           "videomae_vit_b: nothing compared");
    TCHECK(ng > 12 && ng <= VT_OPTIM_MAX_GROUPS, "ViT-B: %d groups, room for %d", ng,
           VT_OPTIM_MAX_GROUPS);
    return vt_test_done("test_wd_exempt");
}
