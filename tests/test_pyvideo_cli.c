/*
 * test_pyvideo_cli.c: slowfast_r50 through the commands a user runs (issue 43 item 5),
 * on a small synthetic set of real encoded videos and its smallest sensible clip (8
 * frames of 32x32: the slow pathway takes 2 of them):
 *   - docs/design.md §3.1 with the defaults: training on two CPU towers (3:1) ends with
 *     the checkpoint of one tower, bit for bit (exact sums on the CPU by default; sync-BN
 *     over the pathways' BN layers; the frame gather per clip);
 *   - fine-tuning from that checkpoint with --freeze 1: blocks.0 (both stems, the first
 *     fusion) and blocks.1 stay as loaded, blocks.2 trains; and the same run on a tower
 *     whose budget (--mem, from the run's plan) holds 2 of the 4 clips a pass ends where
 *     the one-pass run does, bit for bit (BN frozen, fine-tuning's default: a clip's
 *     gradient is its own. With BN training, statistics are a pass's, so micro-batches
 *     of a BN model are another computation: tests/test_towers.c);
 *   - eval, predict --timeline, embed (2304 features: 2048 slow + 256 fast) and export
 *     (an ONNX file) take the run like any other: the two pathways are one input;
 *   - `plan` on 2 CPU towers for the family's other members (slow_r50, i3d_r50,
 *     r2plus1d_r50, csn_r101) at 8x224: the layers that make each one (i3d's temporal
 *     pool, the (2+1)D pair, csn's 23-block stage 3) and a split of the batch. (Their
 *     numerics: test_pyvideo.c; their ONNX export: test_onnx.c. They train, eval,
 *     predict, embed and export through the same code paths as slowfast_r50, one input
 *     and no tgather: i3d_r50 through them in test_zoo_cmds.c.)
 */
#include <unistd.h>

#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* max |a - b| over the tensors of two checkpoints whose names start with `prefix`
 * (optimizer state included when prefix is ""); -1 when they cannot be compared. */
static double ckpt_diff(const char *a, const char *b, const char *prefix, int *ntensors) {
    vt_ckpt_info ia, ib;
    char err[512];
    if (vt_ckpt_read_info(&ia, a, err, sizeof err) < 0)
        return -1;
    if (vt_ckpt_read_info(&ib, b, err, sizeof err) < 0) {
        vt_ckpt_info_free(&ia);
        return -1;
    }
    double worst = 0;
    int n = 0;
    for (int i = 0; i < ia.ntensors && worst >= 0; i++) {
        const vt_ckpt_tensor *ta = &ia.tensors[i];
        if (strncmp(ta->name, prefix, strlen(prefix)))
            continue;
        const vt_ckpt_tensor *tb = vt_ckpt_find(&ib, ta->name);
        if (!tb || tb->numel != ta->numel) {
            worst = -1;
            break;
        }
        float *x = malloc((size_t)(ta->numel + 1) * 4), *y = malloc((size_t)(ta->numel + 1) * 4);
        vt_ckpt_read_tensor(&ia, ta, x, err, sizeof err);
        vt_ckpt_read_tensor(&ib, tb, y, err, sizeof err);
        for (int64_t k = 0; k < ta->numel; k++)
            worst = fmax(worst, fabs((double)x[k] - y[k]));
        n++;
        free(x);
        free(y);
    }
    vt_ckpt_info_free(&ia);
    vt_ckpt_info_free(&ib);
    if (ntensors)
        *ntensors = n;
    return worst;
}

int main(void) {
    const char *bin = vt_test_bin("test_pyvideo_cli");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], p[4300], q[4300];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("pyvideo_cli"));
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 4 --val 2 --test 2 --frames 24") == 0,
           "synth");
    const char *common = "--model slowfast_r50 --clip 8x32 --stride 2 --batch 4 --epochs 1 "
                         "--val-clips 1 --workers 1 --seed 3 -q";
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/one' %s --devices cpu:1 > '%s/one.log' "
                        "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "one tower: exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/two' %s --devices cpu:2 --tower-split "
                    "manual:3,1 > '%s/two.log' 2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "two towers: exit %d", rc);
    int nt = 0;
    snprintf(p, sizeof p, "%s/one/last.safetensors", dir);
    snprintf(q, sizeof q, "%s/two/last.safetensors", dir);
    double d = ckpt_diff(p, q, "", &nt);
    printf("slowfast_r50: 1 tower vs 2 towers (3:1): max |difference| %g over %d tensors\n", d,
           nt);
    TCHECK(d == 0 && nt > 600, "1 vs 2 towers: %g over %d tensors", d, nt);

    /* micro-batches: a budget of the one-tower run's fixed bytes + 2.5 clips (its plan.txt:
     * "N MiB fixed per tower + M MiB per clip"), so that passes of 2 clips run */
    snprintf(p, sizeof p, "%s/one/plan.txt", dir);
    char *plan = vt_test_slurp(p, NULL);
    double fixed_mib = 0, clip_mib = 0;
    const char *f = plan ? strstr(plan, "fp32: ") : NULL;
    TCHECK(f && sscanf(f, "fp32: %lf MiB fixed per tower + %lf MiB per clip", &fixed_mib,
                       &clip_mib) == 2, "one/plan.txt: %.300s", plan ? plan : "");
    free(plan);
    /* fine-tuning from that checkpoint with --freeze 1 (BN frozen: fine-tuning's default,
     * so every clip's gradient is its own), in one pass and in passes of 2 clips */
    const char *ft = "--freeze 1 --devices cpu:1 --init";
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/fz' %s %s '%s/one/last.safetensors' > "
                    "'%s/fz.log' 2>&1", bin, dir, dir, common, ft, dir, dir);
    TCHECK(rc == 0, "--freeze 1: exit %d", rc);
    snprintf(p, sizeof p, "%s/fz/last.safetensors", dir);
    snprintf(q, sizeof q, "%s/one/last.safetensors", dir);
    TCHECK(ckpt_diff(p, q, "blocks.0.", &nt) == 0 && nt > 10, "blocks.0 moved under --freeze 1");
    TCHECK(ckpt_diff(p, q, "blocks.1.", &nt) == 0 && nt > 100, "blocks.1 moved under --freeze 1");
    TCHECK(ckpt_diff(p, q, "blocks.2.", &nt) > 0, "blocks.2 did not train under --freeze 1");
    if (fixed_mib > 0 && clip_mib > 0) {
        char mem[64];
        snprintf(mem, sizeof mem, "%dM", (int)(fixed_mib + 2.5 * clip_mib));
        rc = vt_test_sh("'%s' train '%s/data' --out '%s/mb' %s %s '%s/one/last.safetensors' "
                        "--mem %s > '%s/mb.log' 2>&1", bin, dir, dir, common, ft, dir, mem, dir);
        TCHECK(rc == 0, "micro-batches (--mem %s): exit %d", mem, rc);
        snprintf(p, sizeof p, "%s/mb/plan.txt", dir);
        plan = vt_test_slurp(p, NULL);
        TCHECK(plan && strstr(plan, "2 x 2"), "--mem %s: not in passes of 2 clips:\n%.600s", mem,
               plan ? plan : "");
        free(plan);
        snprintf(q, sizeof q, "%s/mb/last.safetensors", dir);
        snprintf(p, sizeof p, "%s/fz/last.safetensors", dir);
        d = ckpt_diff(p, q, "", &nt);
        printf("slowfast_r50 fine-tuning: one pass vs micro-batches of 2 (--mem %s): max "
               "|difference| %g\n", mem, d);
        TCHECK(d == 0 && nt > 600, "micro-batches: %g over %d tensors", d, nt);
    }

    /* the other commands */
    rc = vt_test_sh("'%s' eval '%s/one' '%s/data' --split test > '%s/eval.log' 2>&1", bin, dir,
                    dir, dir);
    TCHECK(rc == 0, "eval: exit %d", rc);
    rc = vt_test_sh("'%s' predict '%s/one' \"$(ls -d '%s'/data/test/*/* | head -1)\" --timeline "
                    "--window 1s --hop 1s > '%s/tl.txt' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 0, "predict --timeline: exit %d", rc);
    rc = vt_test_sh("'%s' embed '%s/one' '%s/data/test' --out '%s/emb.npy' --clips-per-video 2 "
                    "> '%s/emb.log' 2>&1", bin, dir, dir, dir, dir);
    snprintf(p, sizeof p, "%s/emb.npy", dir);
    char *npy = vt_test_slurp(p, NULL);
    TCHECK(rc == 0 && npy && strstr(npy + 10, "(4, 2304)"), "embed: exit %d, header '%.80s'", rc,
           npy ? npy + 10 : "");
    free(npy);
    rc = vt_test_sh("'%s' export '%s/one' --onnx '%s/sf.onnx' > '%s/export.log' 2>&1", bin, dir,
                    dir, dir);
    snprintf(p, sizeof p, "%s/sf.onnx", dir);
    TCHECK(rc == 0 && access(p, F_OK) == 0, "export: exit %d", rc);

    /* plan for the other members: a layer only that model has, its classifier (i3d's
     * temporal pool is blocks.2, so its head is blocks.6) and the batch's split */
    static const char *const members[4][3] = {
        {"slow_r50", "blocks.4.res_blocks.2.branch2.conv_a", "blocks.5.proj"},
        {"i3d_r50", "blocks.2 ", "blocks.6.proj"},
        {"r2plus1d_r50", "blocks.4.res_blocks.0.branch2.conv_b.conv_t", "blocks.5.proj"},
        {"csn_r101", "blocks.3.res_blocks.22.branch2.conv_b", "blocks.5.proj"}};
    for (int k = 0; k < 4; k++) {
        rc = vt_test_sh("'%s' plan --model %s --clip 8x224 --batch 8 --devices cpu:2 > "
                        "'%s/plan_%s.txt' 2>&1", bin, members[k][0], dir, members[k][0]);
        snprintf(p, sizeof p, "%s/plan_%s.txt", dir, members[k][0]);
        plan = vt_test_slurp(p, NULL);
        TCHECK(rc == 0 && plan && strstr(plan, members[k][1]) && strstr(plan, members[k][2]) &&
                   strstr(plan, "split plan"),
               "plan --model %s: exit %d\n%.400s", members[k][0], rc, plan ? plan : "");
        free(plan);
    }
    return vt_test_done("test_pyvideo_cli");
}
