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

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Checkpoints RUN_A and RUN_B: 0 when bit for bit the same (every tensor), else the
 * distance (-1: not comparable). */
static double diff(const char *dir, const char *a, const char *b, vt_test_ckpt_cmp *c) {
    char p[4300], q[4300];
    snprintf(p, sizeof p, "%s/%s/last.safetensors", dir, a);
    snprintf(q, sizeof q, "%s/%s/last.safetensors", dir, b);
    return vt_test_ckpt_diff(q, p, "", c);
}

/* config.json's "randaug" of run `run` into out ("" when missing). */
static void cfg_randaug(const char *dir, const char *run, char *out, size_t n) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/config.json", dir, run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, "randaug") : NULL;
    snprintf(out, n, "%s", v && cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(c);
}

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
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/one' %s %s --devices cpu:1 > "
                        "'%s/one.log' 2>&1", bin, dir, dir, common, ra, dir);
    TCHECK(rc == 0, "1 tower exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/two' %s %s --devices cpu:2 --tower-split "
                    "manual:3,1 > '%s/two.log' 2>&1", bin, dir, dir, common, ra, dir);
    TCHECK(rc == 0, "2 towers exit %d", rc);
    vt_test_ckpt_cmp c;
    double d = diff(dir, "one", "two", &c);
    printf("RandAugment, 1 tower vs 2 towers (3:1): max relative difference %.3g over %d "
           "tensors, %s\n", d, c.ntensors, c.exact ? "bit for bit" : "NOT bitwise");
    TCHECK(d == 0 && c.exact && c.ntensors > 5, "1 vs 2 towers: %g over %d tensors", d,
           c.ntensors);

    rc = vt_test_sh("'%s' train '%s/data' --out '%s/plain' %s --devices cpu:1 > '%s/plain.log' "
                    "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "run without --randaug exit %d", rc);
    d = diff(dir, "one", "plain", &c);
    printf("with and without RandAugment: max relative difference %.3g\n", d);
    TCHECK(d > 1e-4, "--randaug changed nothing: %g", d); /* a step's update is ~1e-2 */

    /* stopped after step 5 (mid-epoch 2), resumed with no options */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/cut' %s %s --devices cpu:1 --max-steps 5 "
                    "> '%s/cut.log' 2>&1 && '%s' train --resume '%s/cut' -q > '%s/cut2.log' 2>&1",
                    bin, dir, dir, common, ra, dir, bin, dir, dir);
    TCHECK(rc == 0, "stop and resume exit %d", rc);
    d = diff(dir, "one", "cut", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > 5, "resumed run differs from the whole one: %g", d);

    char spec[128];
    cfg_randaug(dir, "one", spec, sizeof spec);
    TCHECK(!strcmp(spec, "rand-m9-n4-mstd0.5-mmax10-inc1"), "config.json randaug '%s'", spec);
    cfg_randaug(dir, "cut", spec, sizeof spec);
    TCHECK(!strcmp(spec, "rand-m9-n4-mstd0.5-mmax10-inc1"), "resumed config.json randaug '%s'",
           spec);
    cfg_randaug(dir, "plain", spec, sizeof spec);
    TCHECK(!strcmp(spec, "off"), "config.json randaug without the option '%s'", spec);

    refused(bin, dir, "--randaug rand-m7-q3", "q3");
    refused(bin, dir, "--randaug rand-m12", "mmax12");
    refused(bin, dir, "--randaug rand-m7 --dump x", "--randaug");
    return vt_test_done("test_randaug_cli");
}
