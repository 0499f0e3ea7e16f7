/*
 * finetune.c: stages, optimizer groups and frozen BN for fine-tuning (finetune.h). The
 * stages follow each model's own module names, so they are the ones a user reads in
 * `vidtrain plan` and in torchvision's source.
 *
 * It must never touch weights: freezing is an optimizer multiplier of 0 and BN in eval
 * mode, both undone by not asking for them.
 */
#include "models/finetune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/zoo.h"

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* The number after `prefix` in "prefixN." (N >= 0), or -1. */
static int index_after(const char *s, const char *prefix) {
    if (!starts(s, prefix))
        return -1;
    s += strlen(prefix);
    if (*s < '0' || *s > '9')
        return -1;
    return atoi(s);
}

static int is_resnet(const char *m) {
    return !strcmp(m, "r3d18") || !strcmp(m, "mc3_18") || !strcmp(m, "r2plus1d18");
}

int vt_finetune_nlayers(const char *model) {
    if (!strcmp(model, "mvit_v2_s") || !strcmp(model, "mvit_v1_b"))
        return 16;
    if (!strcmp(model, "mvit_test") || !strcmp(model, "mvit_v1_test"))
        return 4;
    return vt_zoo_vit_depth(model);
}

const char *vt_finetune_weights_licence(const char *model) {
    return vt_zoo_is_vit(model) /* VideoMAE's; torchvision's MViT weights are its registry's */
               ? "CC-BY-NC 4.0 if these are the VideoMAE / VideoMAEv2 release weights "
                 "(non-commercial use only)"
               : NULL;
}

static int is_pyvideo(const char *m) {
    return !strcmp(m, "slow_r50") || !strcmp(m, "slowfast_r50") || !strcmp(m, "i3d_r50") ||
           !strcmp(m, "r2plus1d_r50") || !strcmp(m, "csn_r101");
}

int vt_finetune_stage(const char *model, const char *name) {
    if (vt_zoo_is_mvit(model)) { /* torchvision's MViT: the patch embedding and class
                                    token, then each of blocks.N a stage */
        if (starts(name, "conv_proj.") || starts(name, "pos_encoding."))
            return 0;
        int k = index_after(name, "blocks.");
        return k >= 0 ? k + 1 : -1;
    }
    if (vt_finetune_nlayers(model) > 0) {
        if (starts(name, "patch_embed."))
            return 0;
        int k = index_after(name, "blocks.");
        return k >= 0 ? k + 1 : -1;
    }
    if (is_resnet(model)) {
        if (starts(name, "stem."))
            return 0;
        int k = index_after(name, "layer");
        return k >= 1 && k <= 4 ? k : -1;
    }
    if (!strcmp(model, "tiny") || !strcmp(model, "tiny_nobn")) {
        int k = index_after(name, "conv");
        if (k < 0)
            k = index_after(name, "bn");
        return k >= 1 && k <= 4 ? k - 1 : -1;
    }
    if (!strcmp(model, "c3d")) {
        if (starts(name, "fc6.") || starts(name, "fc7."))
            return 5;
        int k = index_after(name, "conv");
        return k >= 1 && k <= 5 ? k - 1 : -1;
    }
    if (is_pyvideo(model)) {
        /* pytorchvideo's blocks.N: 0 the stem(s) (SlowFast: both pathways' and their first
         * fusion), 1-4 the res stages (with the fusion after each); i3d_r50's blocks.2 is
         * its parameter-free temporal pool, so its stages are blocks 1, 3, 4, 5; the head
         * (blocks.5 or .6 .proj) has no stage. */
        int k = index_after(name, "blocks.");
        if (k >= 2 && !strcmp(model, "i3d_r50"))
            k--;
        return k >= 0 && k <= 4 ? k : -1;
    }
    if (!strcmp(model, "s3d")) {
        /* features.N: 0 the stem (separable 7x7x7), 2-3 the second conv block, 5-6
         * Mixed_3b/3c, 8-12 Mixed_4b..4f, 14-15 Mixed_5b/5c (the max pools between). */
        int k = index_after(name, "features.");
        if (k < 0)
            return -1;
        return k <= 1 ? 0 : k <= 4 ? 1 : k <= 7 ? 2 : k <= 13 ? 3 : 4;
    }
    if (!strncmp(model, "x3d_", 4)) {
        /* pytorchvideo's blocks.N: 0 the stem, 1-4 the res stages, 5 the head's projected
         * pool (pre_conv, pre_norm, post_conv: 2048 features); blocks.5.proj is the
         * classifier */
        int k = index_after(name, "blocks.");
        if (k < 0 || k > 5 || starts(name, "blocks.5.proj."))
            return -1;
        return k;
    }
    return -1;
}

int vt_finetune_nstages(const char *model) {
    if (vt_finetune_nlayers(model) > 0)
        return vt_finetune_nlayers(model);
    if (!strncmp(model, "x3d_", 4))
        return 5;
    if (is_resnet(model) || is_pyvideo(model) || !strcmp(model, "s3d"))
        return 4;
    if (!strcmp(model, "tiny") || !strcmp(model, "tiny_nobn"))
        return 3;
    if (!strcmp(model, "c3d"))
        return 5;
    return 0;
}

int vt_finetune_no_decay(const vt_tensor_info *t) {
    static const char *const names[] = {"pos_embed", "cls_token", "class_token", "pos_encoding",
                                        "rel_pos_"};
    size_t len = strlen(t->name);
    if (t->ndim <= 1 || (len >= 5 && !strcmp(t->name + len - 5, ".bias")))
        return 1;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++)
        if (strstr(t->name, names[k]))
            return 1;
    return 0;
}

int vt_finetune_groups(vt_optim_group *g, int maxg, const vt_net *net, int freeze,
                       float head_mult, float layer_decay) {
    return vt_finetune_groups_wd(g, maxg, net, freeze, head_mult, layer_decay, 0);
}

int vt_finetune_groups_wd(vt_optim_group *g, int maxg, const vt_net *net, int freeze,
                          float head_mult, float layer_decay, int no_decay_rule) {
    const int depth = vt_finetune_nlayers(vt_net_config(net)->model);
    const char *model = vt_net_config(net)->model;
    int n = 0;
    int64_t at = 0;
    /* Parameters sit in the arena in state_dict order, back to back. */
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        if (t->is_buffer || t->numel == 0)
            continue;
        VT_CHECK(t->offset == at, "parameter %s at %lld, expected %lld", t->name,
                 (long long)t->offset, (long long)at);
        float mult = 1.0f;
        int st = vt_finetune_stage(model, t->name);
        if (vt_net_tensor_head(net, i) >= 0)
            mult = head_mult;
        else if (freeze >= 0 && st >= 0 && st <= freeze)
            mult = 0.0f;
        if (depth > 0 && layer_decay != 1.0f)
            mult *= (float)pow(layer_decay, st >= 0 ? depth + 1 - st : 0);
        int nd = no_decay_rule && vt_finetune_no_decay(t);
        if (n && g[n - 1].lr_mult == mult && g[n - 1].no_decay == nd) {
            g[n - 1].hi += t->numel;
        } else {
            if (n == maxg)
                return -1;
            g[n++] = (vt_optim_group){.lo = at, .hi = at + t->numel, .lr_mult = mult,
                                      .no_decay = nd};
        }
        at += t->numel;
    }
    return n;
}

int vt_finetune_freeze_bn(vt_net *net, int freeze, int all_bn) {
    const char *model = vt_net_config(net)->model;
    int n = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        const char *dot = strrchr(t->name, '.');
        if (!dot || strcmp(dot, ".running_mean"))
            continue;
        int st = vt_finetune_stage(model, t->name);
        if (!all_bn && !(freeze >= 0 && st >= 0 && st <= freeze))
            continue;
        char mod[128];
        snprintf(mod, sizeof mod, "%.*s", (int)(dot - t->name), t->name);
        n += vt_net_set_bn_frozen(net, mod, 1);
    }
    return n;
}
