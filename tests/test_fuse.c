/*
 * test_fuse.c: issue 45 step 3 — the network's fused batch-norm tails (models/net_fuse.c:
 * BN + ReLU and BN + add + ReLU through the backend's bn_apply_relu) change no bit. The
 * truth is the same network run op by one op: the backend's table copied with the fused
 * slot NULL. Both runs, same weights and clips, two training steps (forward, loss,
 * backward; the second forward reads the running statistics the first left) and an
 * evaluation forward, must give bitwise the same losses, logits, gradients and running
 * statistics. The fused slot is wrapped in a counter: R3D-18 must fuse its stem, the
 * first BN of each of its 8 blocks (BN + ReLU) and the second (BN + skip + ReLU), 17 a
 * forward, so a broken pattern match fails here rather than silently running unfused.
 * The backward's fused slots (relu_backward_skip: the residual's gradient without the
 * add's copy; bn_relu_backward_reduce: the ReLU's mask applied in the BN's reduction) are
 * counted the same way. Cases: r3d18 (2x8x8) on cpu (FP32) and on cpu-ref in BF16 (the
 * roundings of bn_apply and add in between), tiny (4x16x16) on cpu-ref (BN + ReLU only),
 * x3d_xs (4x32x32) on cpu (its bottleneck blocks: BN + ReLU, BN + skip + ReLU, and the
 * BN before SE and SiLU left alone), and r3d18 with exact sums (net_exact.c: the BN's
 * reduction stays unfused, the skip's write does not). The comparison is fuse_check.h's;
 * test_fuse_gpu runs it on cuda (its kernels against its own unfused ops).
 */
#include "tests/fuse_check.h"

int main(void) {
    /* r3d18: the stem and each block's first BN with their ReLU (9 a backward), each
     * block's BN + skip + ReLU (8) */
    vt_fuse_check("cpu", "r3d18", 2, VT_PREC_FP32, 17, 9, 8);
    vt_fuse_check("cpu-ref", "r3d18", 2, VT_PREC_BF16, 17, 9, 8);
    vt_fuse_check("cpu-ref", "tiny", 4, VT_PREC_FP32, 4, 4, 0); /* conv-BN-ReLU x 4 */
    /* x3d_xs: the stem's, each of the 26 blocks' norm_a and the head's pre_norm with their
     * ReLU (28 a backward), each block's norm_c + skip + ReLU (26); norm_b goes to SE and
     * SiLU, unfused */
    vt_fuse_check("cpu", "x3d_xs", 4, VT_PREC_FP32, 54, 28, 26);
    vt_fuse_check("cpu-ref", "x3d_xs", 4, VT_PREC_BF16, 54, 28, 26);
    g_exact = 1; /* exact sums (CPU towers' default): the skip's write alone */
    vt_fuse_check("cpu", "r3d18", 2, VT_PREC_FP32, 17, 0, 8);
    return vt_test_done("test_fuse");
}
