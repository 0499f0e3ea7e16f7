/*
 * test_mvit_emu.c: the CUDA backend's MViT attention (models/cuda/cuda_mvit.c and the
 * kernels of kernels_mvit.cu) checked on a machine without a GPU: runs
 * tests/oracle/cuda_mvit_emu.py, which replays every cuBLAS strided-batched GEMM call of
 * cuda_mvit.c (m, n, k, offsets, leading dimensions, strides, both walks over clips and
 * heads, several query blocks) and the kernels' own index arithmetic in numpy, and
 * compares out, lse, dq, dk, dv and the three relative tables' gradients with
 * torchvision's _add_rel_pos and MultiscaleAttention arithmetic under PyTorch's autograd
 * in float64, and the pooling kernels' index arithmetic (q, k, v pooling with dw's chunks;
 * the token max pool's gathering backward) against torch's conv3d and max_pool3d. Bound 1e-12 absolute (float64 throughout: sums of <= 40 products of O(1)
 * terms, error ~1e-15; a wrong stride, offset, block or table row is O(0.1), and an
 * element never written is NaN). Skips (77) when $VT_PYTHON cannot import torchvision.
 * The GPU itself runs the same code in test_mvit_gpu.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tests/testutil.h"

int main(void) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch, torchvision' >/dev/null 2>&1", py);
    if (system(cmd) != 0) {
        printf("test_mvit_emu: %s cannot import torch and torchvision: skipping\n", py);
        return VT_TEST_SKIP;
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/cuda_mvit_emu.py'", py, src);
    const int rc = system(cmd);
    TCHECK(rc == 0, "%s failed (%d): cuda_mvit.c's GEMM arguments or kernels_mvit.cu's "
           "indexing disagree with torchvision (see the BAD lines above)", cmd, rc);
    return vt_test_done("test_mvit_emu");
}
