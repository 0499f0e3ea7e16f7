/*
 * test_fuse_cmds.c: the fused batch-norm tails (models/net_fuse.c, issue 45 step 3)
 * through `vidtrain train` and its switch, VT_FUSE, on a small synthetic set (2 classes),
 * 2 steps of 4 clips, every tensor of the final checkpoint (parameters, BN buffers,
 * momentum) compared bit for bit:
 *   - r3d18 (clips 4x32) with float sums (VT_EXACT_SUMS=0), one CPU tower: VT_FUSE=1
 *     (forward BN + ReLU and BN + skip + ReLU, the backward's skip write and its BN + ReLU
 *     reduction) leaves the state of VT_FUSE=0;
 *   - x3d_xs (clips 4x64) with the CPU towers' exact sums: two towers split 3:1 with
 *     fusion leave the state of one tower without it — equal to one device still holds
 *     with the fused ops in (the outside truth is one unfused device).
 * test_fuse checks which nodes fuse and counts the fused calls; this test the switch and
 * the whole training step around it.
 */
#include <string.h>

#include "base/common.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin, *g_dir;

static int train(const char *env, const char *out, const char *model, const char *clip,
                 const char *extra) {
    return vt_test_sh("%s '%s' train '%s/data' --out '%s/%s' --model %s --clip %s --batch 4 "
                      "--max-steps 2 --seed 3 --workers 1 -q %s > '%s/%s.log' 2>&1",
                      env, g_bin, g_dir, g_dir, out, model, clip, extra, g_dir, out);
}

int main(void) {
    g_bin = vt_test_bin("test_fuse_cmds");
    if (!g_bin)
        return VT_TEST_SKIP;
    g_dir = vt_test_dir("fuse_cmds");
    VT_CHECK(vt_test_synth(g_bin, g_dir, "--classes 2 --train 4 --val 2 --test 2") == 0,
             "synth");

    TCHECK(train("VT_FUSE=0 VT_EXACT_SUMS=0", "r0", "r3d18", "4x32", "--devices cpu:1") == 0,
           "r3d18 unfused");
    TCHECK(train("VT_FUSE=1 VT_EXACT_SUMS=0", "r1", "r3d18", "4x32", "--devices cpu:1") == 0,
           "r3d18 fused");
    vt_test_last_same(g_dir, "r0", "r1", "r3d18, float sums: VT_FUSE=1 = VT_FUSE=0", 60);

    TCHECK(train("VT_FUSE=0", "x0", "x3d_xs", "4x64", "--devices cpu:1") == 0,
           "x3d_xs unfused, one tower");
    TCHECK(train("VT_FUSE=1", "x2", "x3d_xs", "4x64",
                 "--devices cpu:2 --tower-split manual:3,1") == 0,
           "x3d_xs fused, two towers");
    vt_test_last_same(g_dir, "x0", "x2", "x3d_xs, exact sums: 2 towers fused = 1 tower unfused",
                      300);
    return vt_test_done("test_fuse_cmds");
}
