/*
 * cudnn_policy.c: cuDNN version decisions (cudnn_policy.h). Built in every configuration
 * (no CUDA header), so that the CPU tests reach it; the CUDA backend calls it when a
 * backend is set to BF16 (backend_cuda.c cu_set_precision).
 *
 * Why a warning and not a refusal: the bug needs large inputs, a user who asked for bf16
 * asked for it knowingly, and a refusal would stop runs that are correct (small clips);
 * the warning says how to be safe (cuDNN >= 9.13, or --precision tf32).
 */
#include "models/cudnn_policy.h"

#include <stdio.h>

int vt_cudnn_bf16_conv3d_bug(int v) { return v >= 90800 && v < 91300; }

int vt_cudnn_bf16_warning(int v, char *msg, size_t len) {
    if (!vt_cudnn_bf16_conv3d_bug(v))
        return 0;
    snprintf(msg, len, "cuDNN %d.%d.%d computes some bf16 3-D convolutions on large inputs "
             "wrongly (cuDNN 9.8 to 9.12; fixed in 9.13): --precision bf16 may train on wrong "
             "activations\n  hint: put cuDNN 9.13 or newer first on LD_LIBRARY_PATH, or use "
             "--precision tf32", v / 10000, v / 100 % 100, v % 100);
    return 1;
}
