/*
 * test_recipe.c: the training recipe vt_train_opts_resolve chooses (app/train/train_opts.h),
 * against VideoMAE's published fine-tuning settings (run_class_finetuning.py and its
 * scripts: AdamW, weight decay 0.05, drop path 0.1, label smoothing 0.1, layer decay 0.75,
 * no decay on 1-D parameters, biases and position embeddings) and against the CNNs'
 * defaults it must leave as they were:
 *   - a transformer fine-tuning (--init): that recipe, recipe "transformer-finetune";
 *     from scratch: the same but no layer decay ("transformer");
 *   - each part overridden by its own option (--optim, --wd, --drop-path,
 *     --label-smoothing, --layer-decay, --wd-exempt) stays as given;
 *   - a CNN, fine-tuning or not: SGD, 1e-4, no drop path, no smoothing, every parameter
 *     decays, no mixing, no repeats ("default");
 *   - config.json: the new keys round-trip, and a configuration written before them
 *     reads as the behaviour of its time (wd_exempt off, repeat_aug 1, no mixing).
 */
#include <string.h>

#include "app/train/train_opts.h"
#include "models/finetune.h"
#include "base/common.h"
#include "tests/testutil.h"

static void resolved(vt_train_opts *o, const char *model, int ft) {
    vt_train_opts_default(o);
    snprintf(o->model, sizeof o->model, "%s", model);
    if (ft)
        snprintf(o->init, sizeof o->init, "weights.pth");
}

int main(void) {
    vt_train_opts o;
    resolved(&o, "videomae_vit_s", 1);
    vt_train_opts_resolve(&o, 200, 0);
    printf("videomae_vit_s fine-tuning: %s wd %g drop path %g smoothing %g layer decay %g "
           "wd_exempt %s mixup %g cutmix %g repeat %d (%s)\n", o.optim, (double)o.wd,
           (double)o.drop_path, (double)o.smoothing, (double)o.layer_decay, o.wd_exempt,
           (double)o.mixup, (double)o.cutmix, o.repeat_aug, vt_train_opts_recipe(&o));
    TCHECK(!strcmp(o.optim, "adamw") && o.wd == 0.05f && o.drop_path == 0.1f &&
               o.smoothing == 0.1f && o.layer_decay == 0.75f && !strcmp(o.wd_exempt, "on"),
           "the transformer's fine-tuning recipe");
    TCHECK(o.mixup == 0 && o.cutmix == 0 && o.repeat_aug == 1, "augmentations off (unmeasured)");
    TCHECK(!strcmp(o.sched, "cosine") && o.warmup_epochs > 0, "warm-up then cosine: %s %g",
           o.sched, (double)o.warmup_epochs);
    TCHECK(!strcmp(vt_train_opts_recipe(&o), "transformer-finetune"), "recipe name");
    /* AdamW's lr rule, a tenth for fine-tuning: 0.001 sqrt(8 / 32) / 10 */
    TCHECK(o.batch == 8 && fabs(o.lr - 5e-5) < 1e-9, "lr %g at batch %d", (double)o.lr, o.batch);

    resolved(&o, "videomae_vit_b", 0);
    vt_train_opts_resolve(&o, 200, 0);
    /* VideoMAE's own clip on any device (the generic 8x64 stride 3 on a CPU, 16x112 stride
     * 1 on a GPU, gave its 224-pixel weights a quarter of their patch grid); the test ViT
     * keeps the generic one */
    TCHECK(o.clip_t == 16 && o.crop == 224 && o.stride == 4, "videomae_vit_b's clip %dx%d "
           "stride %d", o.clip_t, o.crop, o.stride);
    vt_train_opts p;
    resolved(&p, "vit_test", 0);
    vt_train_opts_resolve(&p, 200, 1);
    TCHECK(p.clip_t == 16 && p.crop == 112 && p.stride == 1, "vit_test on a GPU: %dx%d stride "
           "%d", p.clip_t, p.crop, p.stride);
    TCHECK(!strcmp(o.optim, "adamw") && o.wd == 0.05f && o.drop_path == 0.1f &&
               o.smoothing == 0.1f && o.layer_decay == 1.0f && !strcmp(o.wd_exempt, "on") &&
               !strcmp(vt_train_opts_recipe(&o), "transformer"),
           "a transformer from scratch: %s %g %g %g %g %s", o.optim, (double)o.wd,
           (double)o.drop_path, (double)o.smoothing, (double)o.layer_decay, o.wd_exempt);

    /* torchvision's MViT is a transformer too: the same recipe (an SGD at the CNNs' lr 0.1
     * is no start for it), layer decay over its 16 blocks when it fine-tunes */
    resolved(&o, "mvit_v2_s", 1);
    vt_train_opts_resolve(&o, 200, 0);
    TCHECK(!strcmp(o.optim, "adamw") && o.wd == 0.05f && o.drop_path == 0.1f &&
               o.smoothing == 0.1f && o.layer_decay == 0.75f && !strcmp(o.wd_exempt, "on") &&
               !strcmp(vt_train_opts_recipe(&o), "transformer-finetune"),
           "mvit_v2_s fine-tuning: %s %g %g %g %g %s", o.optim, (double)o.wd,
           (double)o.drop_path, (double)o.smoothing, (double)o.layer_decay, o.wd_exempt);
    TCHECK(vt_finetune_nlayers("mvit_v2_s") == 16 && vt_finetune_stage("mvit_v2_s", "conv_proj.weight") == 0 &&
               vt_finetune_stage("mvit_v2_s", "blocks.15.attn.qkv.weight") == 16 &&
               vt_finetune_stage("mvit_v2_s", "head.1.weight") == -1 &&
               !vt_finetune_weights_licence("mvit_v2_s") && vt_finetune_weights_licence("videomae_vit_s"),
           "MViT's depth, stages and licence (torchvision's, not VideoMAE's)");

    resolved(&o, "videomae_vit_s", 1); /* every part given */
    snprintf(o.optim, sizeof o.optim, "sgd");
    o.wd = 0;
    o.drop_path = 0;
    o.smoothing = 0;
    o.layer_decay = 1;
    snprintf(o.wd_exempt, sizeof o.wd_exempt, "off");
    vt_train_opts_resolve(&o, 200, 0);
    TCHECK(!strcmp(o.optim, "sgd") && o.wd == 0 && o.drop_path == 0 && o.smoothing == 0 &&
               o.layer_decay == 1 && !strcmp(o.wd_exempt, "off"), "overrides kept");

    const char *cnns[] = {"tiny", "r3d18"};
    for (int m = 0; m < 2; m++)
        for (int ft = 0; ft < 2; ft++) {
            resolved(&o, cnns[m], ft);
            vt_train_opts_resolve(&o, 200, 0);
            TCHECK(!strcmp(o.optim, "sgd") && o.wd == 1e-4f && o.drop_path == 0 &&
                       o.smoothing == 0 && o.layer_decay == 1 && !strcmp(o.wd_exempt, "off") &&
                       o.mixup == 0 && o.cutmix == 0 && o.repeat_aug == 1 &&
                       !strcmp(vt_train_opts_recipe(&o), "default"),
                   "%s (fine-tuning %d): %s %g %g %g %s", cnns[m], ft, o.optim, (double)o.wd,
                   (double)o.drop_path, (double)o.smoothing, o.wd_exempt);
        }

    /* config.json: round trip, and a configuration from before these keys */
    resolved(&o, "videomae_vit_s", 1);
    o.mixup = 0.8f;
    o.cutmix = 1.0f;
    o.mix_switch = 0.25f;
    o.repeat_aug = 2;
    vt_train_opts_resolve(&o, 200, 0);
    cJSON *j = vt_train_opts_to_json(&o);
    const cJSON *r = cJSON_GetObjectItem(j, "recipe");
    TCHECK(cJSON_IsString(r) && !strcmp(r->valuestring, "transformer-finetune"), "recipe key");
    vt_train_opts back;
    vt_train_opts_default(&back);
    vt_train_opts_from_json(&back, j);
    TCHECK(back.mixup == 0.8f && back.cutmix == 1.0f && back.mix_switch == 0.25f &&
               back.repeat_aug == 2 && !strcmp(back.wd_exempt, "on") && back.wd == 0.05f &&
               !strcmp(back.optim, "adamw") && back.drop_path == 0.1f && back.smoothing == 0.1f,
           "round trip");
    const char *keys[] = {"mixup", "cutmix", "mix_switch", "repeat_aug", "wd_exempt"};
    for (size_t k = 0; k < VT_ARRAY_LEN(keys); k++)
        cJSON_DeleteItemFromObject(j, keys[k]);
    vt_train_opts_default(&back);
    vt_train_opts_from_json(&back, j);
    TCHECK(back.mixup == 0 && back.cutmix == 0 && back.repeat_aug == 1 &&
               !strcmp(back.wd_exempt, "off"), "an older configuration: mixup %g repeat %d wd_exempt %s",
           (double)back.mixup, back.repeat_aug, back.wd_exempt);
    cJSON_Delete(j);
    return vt_test_done("test_recipe");
}
