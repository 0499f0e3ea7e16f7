/*
 * test_length.c: the default training length that follows validation
 * (app/train/train_length.c), as a user runs it, on a small synthetic set:
 *   - the schedule: warm-up, the base lr held, then once validation stalls for
 *     --patience evaluations a cosine decay over a quarter as many epochs, after which
 *     the run ends. The outside truth is the formulas of torch's LinearLR warm-up and
 *     CosineAnnealingLR (eta_min 0), checked on every step's lr in metrics.jsonl;
 *   - docs/design.md §3.1 with the new default: the same run on one tower and on two
 *     split 3:1 (sync-BN, the colour jitter and every other default on) takes the same
 *     decision at the same epoch, ends after the same steps and with one tower's weights;
 *   - --resume across the decision: a run stopped by --max-steps inside the decay and
 *     resumed ends bit for bit where the uninterrupted run does;
 *   - the floor (--min-clips, issue 40): no decay before that many clips, however early
 *     validation stalls; a validation split under 50 videos doubles --patience; the
 *     end says why the run ended; the default floor is the fixed rule's length;
 *   - --epochs and --time-budget keep the fixed length (patience 0 in config.json), and
 *     --patience with either is a usage error; no validation set: the fixed rule.
 * The lr is tiny (1e-4) so that validation stalls at once and the run stays a few epochs
 * long: the decision then depends on the figures, not on a long training.
 */
#include <unistd.h>

#include "models/formats/safetensors.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* Every "step" line's lr of RUN/metrics.jsonl into lr[step - 1]; the number of steps. */
static int read_lrs(const char *run, double *lr, int cap) {
    char p[4300];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    char *s = vt_test_slurp(p, NULL);
    int n = 0;
    for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *k = j ? cJSON_GetObjectItem(j, "kind") : NULL;
        if (k && cJSON_IsString(k) && !strcmp(k->valuestring, "step")) {
            int step = cJSON_GetObjectItem(j, "step")->valueint;
            if (step >= 1 && step <= cap) {
                lr[step - 1] = cJSON_GetObjectItem(j, "lr")->valuedouble;
                n = step > n ? step : n;
            }
        }
        cJSON_Delete(j);
    }
    free(s);
    return n;
}

/* The "length: ... decays over epochs A-B" line of a log, or "" */
static void decay_line(const char *log, char *out, size_t n) {
    out[0] = 0;
    const char *s = log ? strstr(log, "the learning rate decays over epochs") : NULL;
    if (s) {
        const char *e = strchr(s, '\n');
        snprintf(out, n, "%.*s", (int)(e ? e - s : (long)strlen(s)), s);
    }
}

static int config_int(const char *run, const char *key) {
    char p[4300];
    snprintf(p, sizeof p, "%s/config.json", run);
    cJSON *c = vt_test_read_json(p);
    const cJSON *v = c ? cJSON_GetObjectItem(c, key) : NULL;
    int r = v && cJSON_IsNumber(v) ? v->valueint : -999;
    cJSON_Delete(c);
    return r;
}

int main(void) {
    const char *bin = vt_test_bin("test_length");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], p[4300], q[4300];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("length"));
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 6 --val 2 --test 1 --frames 24") == 0,
           "synth");
    /* 12 training videos, batch 4: 3 steps an epoch; warm-up 1 epoch; a validation every
     * epoch; 4 validation videos (under 50: --patience 1 counts as 2); no decay before 48
     * clips (4 epochs), so with validation stalled from the start it begins after epoch 4 */
    const char *common = "--clip 4x32 --stride 2 --batch 4 --val-clips 1 --workers 1 --sync-bn "
                         "--seed 3 --lr 1e-4 --warmup 1 --eval-every 1 --patience 1 "
                         "--min-clips 48 --log-every 1 -q";
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/one' %s --devices cpu:1 > '%s/one.log' "
                        "2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "1 tower exit %d", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/two' %s --devices cpu:2 --tower-split "
                    "manual:3,1 > '%s/two.log' 2>&1", bin, dir, dir, common, dir);
    TCHECK(rc == 0, "2 towers exit %d", rc);

    /* the decision: the same line, at the same epoch, in both */
    snprintf(p, sizeof p, "%s/one.log", dir);
    char *log1 = vt_test_slurp(p, NULL);
    snprintf(p, sizeof p, "%s/two.log", dir);
    char *log2 = vt_test_slurp(p, NULL);
    char d1[512], d2[512];
    decay_line(log1, d1, sizeof d1);
    decay_line(log2, d2, sizeof d2);
    printf("1 tower: %s\n2 towers: %s\n", d1, d2);
    TCHECK(d1[0] && !strcmp(d1, d2), "decisions differ: '%s' vs '%s'", d1, d2);
    TCHECK(log1 && strstr(log1, "length: follows validation"), "no length line:\n%s",
           log1 ? log1 : "");
    TCHECK(log1 && strstr(log1, "no decay before 48 training clips (epoch 4") &&
               strstr(log1, "the validation split holds 4 videos") &&
               strstr(log1, "so the rate holds for 2 validations, not 1"),
           "the floor's and the small split's lines:\n%s", log1 ? log1 : "");
    TCHECK(log1 && strstr(log1, "length: ended at epoch"), "no line on why it ended:\n%s",
           log1 ? log1 : "");
    int a = 0, b = 0;
    TCHECK(sscanf(d1, "the learning rate decays over epochs %d-%d", &a, &b) == 2 && a == 5 &&
               b >= a, "decay epochs '%s' (want from epoch 5: the floor)", d1);
    free(log1);
    free(log2);

    /* the schedule, step by step: warm-up (torch LinearLR, start factor 1/3 over the first
     * epoch's 3 steps), the base lr, then from the decay's first step a cosine to 0 over
     * its (b - a + 1) * 3 steps (torch CosineAnnealingLR, eta_min 0). float lrs: 1e-6
     * relative is rounding, a schedule off by one step is ~10% off. */
    double lr1[256], lr2[256];
    snprintf(p, sizeof p, "%s/one", dir);
    snprintf(q, sizeof q, "%s/two", dir);
    int n1 = read_lrs(p, lr1, 256), n2 = read_lrs(q, lr2, 256);
    const int spe = 3, s0 = (a - 1) * spe, len = (b - a + 1) * spe;
    TCHECK(n1 == b * spe && n2 == n1, "steps: %d and %d, want %d", n1, n2, b * spe);
    const double base = 1e-4, pi = 3.14159265358979323846;
    int bad = 0;
    for (int s = 0; s < n1 && s < 256; s++) {
        double want = s < spe ? base * (s + 1) / spe
                      : s < s0 ? base : base * (1 + cos(pi * (s - s0) / len)) / 2;
        if (fabs(lr1[s] - want) > 1e-6 * base || lr2[s] != lr1[s]) {
            if (bad++ < 5)
                fprintf(stderr, "step %d: lr %.9g (2 towers %.9g), want %.9g\n", s + 1, lr1[s],
                        lr2[s], want);
        }
    }
    TCHECK(bad == 0, "%d steps off the schedule", bad);
    TCHECK(config_int(p, "patience") == 1, "patience in config.json");
    TCHECK(config_int(p, "min_clips") == 48, "min_clips in config.json");

    /* docs/design.md §3.1: two towers end where one does. With sync-BN every pass normalises over
     * the whole batch as one tower does; gradients are summed in another order (~1e-7 per
     * step), which the few steps here carry to ~1e-6: 1e-4 fails a clip counted twice or
     * missing, or a tower left out of the statistics (~1e-2). */
    vt_test_ckpt_cmp c;
    snprintf(p, sizeof p, "%s/one/last.safetensors", dir);
    snprintf(q, sizeof q, "%s/two/last.safetensors", dir);
    double d = vt_test_ckpt_diff(q, p, "", &c);
    printf("default length, 1 tower vs 2 towers (3:1): max relative difference %.3g over %d "
           "tensors\n", d, c.ntensors);
    TCHECK(d >= 0 && d <= 1e-4 && c.ntensors > 10, "1 vs 2 towers: %g over %d tensors", d,
           c.ntensors);

    /* --resume across the decision: stopped one step into the decay, resumed */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/cut' %s --devices cpu:1 --max-steps %d "
                    "> '%s/cut.log' 2>&1 && '%s' train --resume '%s/cut' -q > '%s/cut2.log' "
                    "2>&1", bin, dir, dir, common, s0 + 1, dir, bin, dir, dir);
    TCHECK(rc == 0, "stop and resume exit %d", rc);
    snprintf(q, sizeof q, "%s/cut/last.safetensors", dir);
    d = vt_test_ckpt_diff(q, p, "", &c);
    TCHECK(d == 0 && c.exact && c.ntensors > 10, "resumed run differs from the whole one: %g", d);

    /* A length given keeps its meaning: patience 0, exactly those epochs */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/fixed' --clip 4x32 --batch 4 --workers 1 "
                    "--epochs 2 -q > '%s/fixed.log' 2>&1", bin, dir, dir, dir);
    snprintf(p, sizeof p, "%s/fixed", dir);
    TCHECK(rc == 0 && config_int(p, "patience") == 0 && config_int(p, "epochs") == 2,
           "--epochs 2: exit %d, patience %d, epochs %d", rc, config_int(p, "patience"),
           config_int(p, "epochs"));
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bad' --epochs 2 --patience 2 > '%s/bad.log' "
                    "2>&1", bin, dir, dir, dir);
    TCHECK(rc == 2, "--patience with --epochs: exit %d, want 2", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bad' --time-budget 60 --patience 2 "
                    "> '%s/bad.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 2, "--patience with --time-budget: exit %d, want 2", rc);
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/bad' --epochs 2 --min-clips 50 "
                    "> '%s/bad.log' 2>&1", bin, dir, dir, dir);
    TCHECK(rc == 2, "--min-clips with --epochs: exit %d, want 2", rc);

    /* The default floor: the fixed rule's length, 667 epochs of 12 clips */
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/floor' --clip 4x32 --batch 4 --workers 1 "
                    "--max-steps 1 -q > '%s/floor.log' 2>&1", bin, dir, dir, dir);
    snprintf(p, sizeof p, "%s/floor", dir);
    TCHECK(rc == 0 && config_int(p, "min_clips") == 667 * 12 && config_int(p, "epochs") == 4 * 667,
           "default floor: exit %d, min_clips %d, epochs %d", rc, config_int(p, "min_clips"),
           config_int(p, "epochs"));

    /* No validation set: nothing to follow, the fixed rule (8000 clips / 12 = 667) */
    rc = vt_test_sh("'%s' train '%s/data/train' --out '%s/noval' --clip 4x32 --batch 4 "
                    "--workers 1 --val-split 0 --max-steps 1 -q > '%s/noval.log' 2>&1", bin, dir,
                    dir, dir);
    snprintf(p, sizeof p, "%s/noval", dir);
    TCHECK(rc == 0 && config_int(p, "patience") == 0 && config_int(p, "epochs") == 667,
           "no validation: exit %d, patience %d, epochs %d", rc, config_int(p, "patience"),
           config_int(p, "epochs"));
    return vt_test_done("test_length");
}
