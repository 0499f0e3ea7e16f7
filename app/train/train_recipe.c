/*
 * train_recipe.c: what a run's training recipe says about itself — which parameters go
 * without weight decay (--wd-exempt). It must never change a number: the choices are
 * made in train_opts.c (resolve) and applied by apply_finetune (train.c).
 */
#include <stdio.h>

#include "app/train/train.h"
#include "models/finetune.h"

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
