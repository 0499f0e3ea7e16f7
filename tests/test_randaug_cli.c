/*
 * test_randaug_cli.c: `vidtrain train --randaug SPEC` as a user runs it, on a small
 * synthetic set (real encoded videos), tiny model and clips:
 *   - docs/design.md §3.1 with RandAugment on: the loader augments each clip from its own
 *     key before the towers slice the batch, so two CPU towers split 3:1 end with one
 *     tower's weights BIT FOR BIT (with --repeat-aug 2: each repeat draws its own ops);
 *   - RandAugment is really on: the same run without it ends elsewhere;
 *   - a run stopped mid-epoch (step 5 of 4 an epoch) and resumed ends bit for bit where
 *     the whole run does (the draws come from (seed, epoch, sample), no RNG stream);
 *   - config.json holds the canonical spec, a resumed run keeps it; a bad spec exits 2
 *     naming the bad section; --dump (whose twin cannot replay the ops) is refused.
 */
#include <unistd.h>

#include "tests/runutil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Exit status of `train` with `args` whose stderr (and stdout) must hold `want`. */
static void refused(const char *bin, const char *dir, const char *args, const char *want) {
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/bad' --model tiny %s > '%s/bad.log' 2>&1",
                        bin, dir, dir, args, dir);
    char p[4300];
    snprintf(p, sizeof p, "%s/bad.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(rc == 2 && log && strstr(log, want), "%s: exit %d, want 2 and \"%s\":\n%s", args, rc,
           want, log ? log : "");
    free(log);
}

int main(void) {
    const char *bin = vt_test_bin("test_randaug_cli");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("randaug_cli"));
    TCHECK(vt_test_synth(bin, dir, "--classes 3 --train 4 --val 1 --test 1 --frames 16") == 0,
           "synth");
    /* 12 training videos twice an epoch (--repeat-aug 2), batch 6: 4 steps an epoch */
    const char *common = "--model tiny --clip 4x32 --stride 2 --batch 6 --val-clips 1 --workers 2 "
                         "--epochs 2 --seed 7 --repeat-aug 2 -q";
    const char *ra = "--randaug rand-m9-n4-mstd0.5-inc1";
    vt_test_split_runs(bin, dir, "RandAugment", common, ra, 5, 5); /* stopped mid-epoch 2 */

    char spec[128];
    vt_test_run_str(dir, "one", "randaug", spec, sizeof spec);
    TCHECK(!strcmp(spec, "rand-m9-n4-mstd0.5-mmax10-inc1"), "config.json randaug '%s'", spec);
    vt_test_run_str(dir, "cut", "randaug", spec, sizeof spec);
    TCHECK(!strcmp(spec, "rand-m9-n4-mstd0.5-mmax10-inc1"), "resumed config.json randaug '%s'",
           spec);
    vt_test_run_str(dir, "plain", "randaug", spec, sizeof spec);
    TCHECK(!strcmp(spec, "off"), "config.json randaug without the option '%s'", spec);

    refused(bin, dir, "--randaug rand-m7-q3", "q3");
    refused(bin, dir, "--randaug rand-m12", "mmax12");
    return vt_test_done("test_randaug_cli");
}
