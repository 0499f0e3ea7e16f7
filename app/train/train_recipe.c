/*
 * train_recipe.c: what a run's training recipe says about itself — the one line naming
 * the recipe a transformer (or a run that mixes) trains with, and which parameters go
 * without weight decay (--wd-exempt). It must never change a number: the choices are
 * made in train_opts.c (resolve) and applied by train.c and train_mix.c.
 */
#include <stdio.h>
#include <string.h>

#include "app/train/train.h"
#include "models/finetune.h"
#include "models/net_types.h"

void vt_train_print_no_decay(const vt_train *t) {
    const vt_net *net = vt_towers_net(t->towers, 0);
    int nt = 0, nd = 0;
    int64_t all = 0, free_ = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        if (ti->is_buffer || ti->numel == 0)
            continue;
        nt++;
        all += ti->numel;
        if (vt_finetune_no_decay(ti)) {
            nd++;
            free_ += ti->numel;
        }
    }
    fprintf(t->out, "weight decay: none on %d of %d parameter tensors (%.2f%% of the "
            "parameters: norm weights, biases, position embeddings, class tokens; "
            "--wd-exempt off decays them too)\n", nd, nt,
            all ? 100.0 * (double)free_ / (double)all : 0);
}

void vt_train_print_recipe(const vt_train *t) {
    const vt_train_opts *o = &t->o;
    /* Kinetics' is every other model's: no news. Not the family's: given, or --init's
     * checkpoint's (train.c said so). */
    if (strcmp(o->input_norm, "kinetics") && !strcmp(o->input_norm, vt_zoo_input_norm(o->model)))
        fprintf(t->out, "input: clips normalised with %s's mean and std, as %s's published "
                "weights were trained (--input-norm)\n", o->input_norm, o->model);
    else if (strcmp(o->input_norm, vt_zoo_input_norm(o->model)))
        fprintf(t->out, "input: clips normalised with %s's mean and std, not %s's family's "
                "(%s)\n", o->input_norm, o->model, vt_zoo_input_norm(o->model));
    const int vit = vt_finetune_nlayers(o->model) > 0;
    if (!vit && !(o->mixup > 0) && !(o->cutmix > 0) && o->repeat_aug <= 1 &&
        !(o->random_erase > 0) && !strcmp(o->randaug, "off"))
        return; /* the CNNs' recipe is the "training:" line */
    char mix[128] = "mixup off, CutMix off";
    if (o->mixup > 0 || o->cutmix > 0)
        snprintf(mix, sizeof mix, "mixup %g, CutMix %g (switch %g)", (double)o->mixup,
                 (double)o->cutmix, (double)o->mix_switch);
    char lr_part[512];
    snprintf(lr_part, sizeof lr_part, "%s lr %g, wd %g%s, warm-up %g epochs then %s", o->optim,
             (double)o->lr, (double)o->wd,
             !strcmp(o->wd_exempt, "on") ? " (not on norms, biases, position embeddings)" : "",
             (double)o->warmup_epochs,
             o->patience > 0 ? "a constant rate while validation improves, then cosine" : o->sched);
    if (!vit) {
        /* A CNN's recipe is the CNN defaults plus what the user added: never VideoMAE's
         * (layer decay and drop path are refused for CNNs, so they are not named). */
        fprintf(t->out, "recipe: the CNN defaults (%s) with label smoothing %g, %s, repeat-aug "
                "%d, random erasing %g, RandAugment %s\n", lr_part, (double)o->smoothing, mix, o->repeat_aug, (double)o->random_erase,
                o->randaug);
        return;
    }
    fprintf(t->out, "recipe: %s (VideoMAE's): %s, layer decay %g, drop path %g, label smoothing "
            "%g, %s, repeat-aug %d, random erasing %g, RandAugment %s%s\n",
            vt_train_opts_recipe(o), lr_part, (double)o->layer_decay, (double)o->drop_path,
            (double)o->smoothing, mix, o->repeat_aug, (double)o->random_erase, o->randaug,
            !(o->mixup > 0) && !(o->cutmix > 0) && o->repeat_aug <= 1
                ? " (VideoMAE adds --mixup 0.8 --cutmix 1 --repeat-aug 2 --random-erase 0.25 "
                  "--randaug rand-m7-n4-mstd0.5-inc1: each cost points on the held-out "
                  "family, so off; docs/finetune.md)" : "");
}
