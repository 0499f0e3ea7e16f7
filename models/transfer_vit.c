/*
 * transfer_vit.c: the Hugging Face names of a VideoMAE transformer's tensors
 * (transformers' VideoMAEForVideoClassification), for transfer.c, which loads a file
 * under either naming (docs/models.md has the table). vidtrain's own names are the
 * VideoMAE / VideoMAEv2 repositories' (zoo_vit.c).
 */
#include <stdio.h>
#include <string.h>

#include "models/transfer.h"

int vt_vit_hf_names(const char *name, char out[3][192]) {
    static const char *const block_map[][2] = {
        {"norm1.", "layernorm_before."},
        {"norm2.", "layernorm_after."},
        {"attn.q_bias", "attention.attention.q_bias"},
        {"attn.v_bias", "attention.attention.v_bias"},
        {"attn.proj.", "attention.output.dense."},
        {"mlp.fc1.", "intermediate.dense."},
        {"mlp.fc2.", "output.dense."},
    };
    int b, used = 0;
    if (!strncmp(name, "patch_embed.proj.", 17)) {
        snprintf(out[0], 192, "videomae.embeddings.patch_embeddings.projection.%s", name + 17);
        return 1;
    }
    if (!strncmp(name, "head.", 5)) {
        snprintf(out[0], 192, "classifier.%s", name + 5);
        return 1;
    }
    if (sscanf(name, "blocks.%d.%n", &b, &used) != 1 || used == 0)
        return 0;
    const char *rest = name + used;
    if (!strcmp(rest, "attn.qkv.weight")) {
        static const char *const qkv[3] = {"query", "key", "value"};
        for (int j = 0; j < 3; j++)
            snprintf(out[j], 192, "videomae.encoder.layer.%d.attention.attention.%s.weight", b,
                     qkv[j]);
        return 3;
    }
    for (size_t k = 0; k < sizeof block_map / sizeof *block_map; k++) {
        size_t n = strlen(block_map[k][0]);
        if (!strncmp(rest, block_map[k][0], n)) {
            snprintf(out[0], 192, "videomae.encoder.layer.%d.%s%s", b, block_map[k][1], rest + n);
            return 1;
        }
    }
    return 0;
}
