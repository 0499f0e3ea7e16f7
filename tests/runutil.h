/*
 * runutil.h: what the tests that train with a data option and compare the runs share
 * (test_randaug_cli.c, test_mix_cli.c) — two runs' checkpoints compared, a run's
 * config.json read, and the checks docs/design.md §3.1 asks of an option that changes the
 * batch (RandAugment, mixing): the same run on one tower and on two split 3:1 ends BIT FOR
 * BIT, the run without the option ends elsewhere, and a run stopped mid-way and resumed
 * ends bit for bit where the whole run does. Header-only (static inline), like apputil.h.
 *
 * A run named NAME lives in DIR/NAME (its log DIR/NAME.log); the data set is DIR/data
 * (vt_test_synth).
 */
#ifndef VT_RUNUTIL_H
#define VT_RUNUTIL_H

#include <stdio.h>
#include <string.h>

#include "tests/apputil.h"

/* Checkpoints of runs a and b: 0 when bit for bit the same (every tensor), else the
 * distance (-1: not comparable); c says how many tensors and whether all were exact. */
static inline double vt_test_run_diff(const char *dir, const char *a, const char *b,
                                      vt_test_ckpt_cmp *c) {
    char p[4300], q[4300];
    snprintf(p, sizeof p, "%s/%s/last.safetensors", dir, a);
    snprintf(q, sizeof q, "%s/%s/last.safetensors", dir, b);
    return vt_test_ckpt_diff(q, p, "", c);
}

/* Run `run`'s config.json value `key`: as a number (-1 when missing or not a number). */
static inline double vt_test_run_num(const char *dir, const char *run, const char *key) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/config.json", dir, run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    double r = v && cJSON_IsNumber(v) ? v->valuedouble : -1;
    cJSON_Delete(c);
    return r;
}

/* The same as a string, into out ("" when missing or not a string). */
static inline void vt_test_run_str(const char *dir, const char *run, const char *key, char *out,
                                   size_t n) {
    char p[4300];
    snprintf(p, sizeof p, "%s/%s/config.json", dir, run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    snprintf(out, n, "%s", v && cJSON_IsString(v) ? v->valuestring : "");
    cJSON_Delete(c);
}

/* §3.1's checks for training option `opt` (what: its name in the messages), every run
 * `train DIR/data ... common`: runs one (opt, cpu:1) and two (opt, cpu:2 split 3:1) the
 * same bits, more than min_tensors tensors; plain (without opt) more than 1e-4 from one (a
 * step's update is ~1e-2); cut (opt, stopped after cut_steps steps, resumed with no
 * options) the same bits as one. The runs stay for the test's own further checks. */
static inline void vt_test_split_runs(const char *bin, const char *dir, const char *what,
                                      const char *common, const char *opt, int cut_steps,
                                      int min_tensors) {
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/one' %s %s --devices cpu:1 > "
                        "'%s/one.log' 2>&1", bin, dir, dir, common, opt, dir);
    TCHECK(rc == 0, "%s: 1 tower exit %d", what, rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/two' %s %s --devices cpu:2 --tower-split "
                    "manual:3,1 > '%s/two.log' 2>&1", bin, dir, dir, common, opt, dir);
    TCHECK(rc == 0, "%s: 2 towers exit %d", what, rc);
    vt_test_ckpt_cmp c;
    double d = vt_test_run_diff(dir, "one", "two", &c);
    printf("%s, 1 tower vs 2 towers (3:1): max relative difference %.3g over %d tensors, %s\n",
           what, d, c.ntensors, c.exact ? "bit for bit" : "NOT bitwise");
    TCHECK(d == 0 && c.exact && c.ntensors > min_tensors, "%s: 1 vs 2 towers: %g over %d tensors",
           what, d, c.ntensors);

    rc = vt_test_sh("'%s' train '%s/data' --out '%s/plain' %s --devices cpu:1 > '%s/plain.log' "
                    "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "%s: the run without it exit %d", what, rc);
    d = vt_test_run_diff(dir, "one", "plain", &c);
    printf("with and without %s: max relative difference %.3g\n", what, d);
    TCHECK(d > 1e-4, "%s changed nothing: %g", what, d);

    rc = vt_test_sh("'%s' train '%s/data' --out '%s/cut' %s %s --devices cpu:1 --max-steps %d "
                    "> '%s/cut.log' 2>&1 && '%s' train --resume '%s/cut' -q > '%s/cut2.log' 2>&1",
                    bin, dir, dir, common, opt, cut_steps, dir, bin, dir, dir);
    TCHECK(rc == 0, "%s: stop and resume exit %d", what, rc);
    d = vt_test_run_diff(dir, "one", "cut", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > min_tensors,
           "%s: the resumed run differs from the whole one: %g", what, d);
}

#endif
