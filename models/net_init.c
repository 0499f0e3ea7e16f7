/*
 * net_init.c: torchvision's initialisation of a network's parameters and buffers
 * (vt_net_init_weights, net.h): kaiming_normal_ for convs, N(0, 0.01) for the video
 * resnets' classifiers, PyTorch's defaults where the model's port keeps them, BN weight 1
 * and bias 0 — drawn on the host from vt_rng and copied to the backend once.
 *
 * It must never draw in another order than the tensors' (the same seed must give the
 * same weights on every backend, tower and process).
 */
#include <math.h>
#include <string.h>

#include "base/common.h"
#include "models/net_impl.h"

/* n draws of N(0, std): Box-Muller using both of its outputs (vt_rng_normal keeps one),
 * which halves the cost of initialising r3d18's 33M weights. */
static void fill_normal(float *dst, int64_t n, double std, vt_rng *rng) {
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = vt_rng_uniform(rng), u2 = vt_rng_uniform(rng);
        if (u1 < 1e-300)
            u1 = 1e-300;
        double r = std * sqrt(-2.0 * log(u1)), a = 6.283185307179586 * u2;
        dst[i] = (float)(r * cos(a));
        if (i + 1 < n)
            dst[i + 1] = (float)(r * sin(a));
    }
}

void vt_net_init_weights(vt_net *net, uint64_t seed) {
    const vt_graph *g = &net->g;
    vt_rng rng;
    vt_rng_seed(&rng, seed);
    float *hp = vt_calloc((size_t)VT_MAX(g->nparams, 1), sizeof(float));
    float *hb = vt_calloc((size_t)VT_MAX(g->nbuffers, 1), sizeof(float));
    for (int ti = 0; ti < g->ntensors; ti++) {
        const vt_tensor_info *t = &g->tensors[ti];
        const vt_node *nd = &g->nodes[g->aux[ti].node];
        float *dst = (t->is_buffer ? hb : hp) + t->offset;
        /* fan_in / fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
        int64_t kvol = nd->kind == VT_NODE_CONV
                           ? (int64_t)nd->conv.k[0] * nd->conv.k[1] * nd->conv.k[2] : 1;
        /* a grouped conv's weight is (Cout, Cin/groups, k...): fan_in counts one group */
        int64_t fan_in = (int64_t)nd->ic * kvol, fan_out = (int64_t)nd->c * kvol;
        if (nd->kind == VT_NODE_CONV)
            fan_in /= vt_conv_groups(&nd->conv);
        double std = 0, bound = 0;
        switch (g->aux[ti].role) {
        case VT_ROLE_WEIGHT:
            if (g->init == VT_INIT_MVIT && t->ndim == 5) { /* a conv: kaiming_uniform_(a=sqrt(5)) */
                int64_t fi = 1;
                for (int d = 1; d < t->ndim; d++)
                    fi *= t->shape[d];
                bound = 1.0 / sqrt((double)fi);
                for (int64_t i = 0; i < t->numel; i++)
                    dst[i] = (float)((2.0 * vt_rng_uniform(&rng) - 1.0) * bound);
            } else if (g->init == VT_INIT_MVIT) {
                fill_normal(dst, t->numel, 0.02, &rng);
            } else if (g->init == VT_INIT_VIT && nd->kind != VT_NODE_CONV) {
                fill_normal(dst, t->numel, nd->head >= 0 ? 0.02 * 0.001 : 0.02, &rng);
            } else if (nd->kind == VT_NODE_CONV && g->init != VT_INIT_PYTORCH &&
                       g->init != VT_INIT_VIT) {
                /* kaiming_normal_(relu): gain sqrt(2); torchvision fan_out, the C3D port
                 * the default fan_in. */
                std = sqrt(2.0 / (double)(g->init == VT_INIT_C3D ? fan_in : fan_out));
                fill_normal(dst, t->numel, std, &rng);
            } else if (g->init == VT_INIT_TORCHVISION || g->init == VT_INIT_PYVIDEO) {
                fill_normal(dst, t->numel, 0.01, &rng);
            } else {
                /* nn.Linear's and nn.Conv3d's default: kaiming_uniform_(a=sqrt(5)) =
                 * U(-1/sqrt(fan_in), +) (the C3D port's linears, every S3D weight). */
                bound = 1.0 / sqrt((double)fan_in);
                for (int64_t i = 0; i < t->numel; i++)
                    dst[i] = (float)((2.0 * vt_rng_uniform(&rng) - 1.0) * bound);
            }
            break;
        case VT_ROLE_BIAS:
            if (g->init != VT_INIT_TORCHVISION && g->init != VT_INIT_PYVIDEO &&
                ((g->init != VT_INIT_VIT && g->init != VT_INIT_MVIT) ||
                 nd->kind == VT_NODE_CONV)) {
                /* PyTorch's default: U(+-1/sqrt(fan_in)) */
                bound = 1.0 / sqrt((double)fan_in);
                for (int64_t i = 0; i < t->numel; i++)
                    dst[i] = (float)((2.0 * vt_rng_uniform(&rng) - 1.0) * bound);
            }
            break;
        case VT_ROLE_GAMMA: {
            /* pytorchvideo zeroes each bottleneck's last BN (block_final_bn): every
             * residual block starts as the identity */
            size_t len = strlen(nd->name);
            float v = g->init == VT_INIT_PYVIDEO && len >= 7 &&
                      !strcmp(nd->name + len - 7, ".norm_c") ? 0.0f : 1.0f;
            for (int64_t i = 0; i < t->numel; i++)
                dst[i] = v;
            break;
        }
        case VT_ROLE_RUNNING_VAR:
            for (int64_t i = 0; i < t->numel; i++)
                dst[i] = 1.0f;
            break;
        case VT_ROLE_BETA:
        case VT_ROLE_RUNNING_MEAN:
        case VT_ROLE_NUM_BATCHES:
            break;
        }
    }
    if (g->nparams)
        net->be->i->to_device(net->be, net->params, hp, (size_t)g->nparams * sizeof(float));
    if (g->nbuffers)
        net->be->i->to_device(net->be, net->buffers, hb, (size_t)g->nbuffers * sizeof(float));
    free(hp);
    free(hb);
}
