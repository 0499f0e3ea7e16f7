/*
 * test_resume.c: docs/design.md §3.5 through the command — train k steps, stop, resume
 * to 2k steps, and the checkpoint equals that of 2k steps uninterrupted BYTE FOR BYTE
 * (every tensor: weights, BN buffers, optimizer state; the CPU backend is deterministic),
 * with 1 decode worker and with several. k is chosen so the stop lands in the middle of
 * an epoch (the loader resumes at the next batch) and the resumed run crosses an epoch
 * end, with its validation and precise-BN pass. The uninterrupted run is the outside
 * truth. Precise BN itself changes no step: without it, the weights and optimizer state
 * are the same bytes and only the running statistics differ.
 *
 * A run stopped at an epoch's last step resumes into that epoch's end: its progress line
 * shows the epoch's figures, not zeros.
 *
 * The same promise for --time-budget T --budget-once: its timing steps (several epochs of
 * them, at learning rate 0, with 2 decode workers) leave no trace, so the run equals
 * `--epochs E` with the E it chose (config.json), byte for byte. (Without --budget-once
 * the epochs are planned again at every epoch's end, from the speed the machine shows
 * then: test_budget checks that arithmetic on a fake clock.)
 */
#include "models/checkpoint.h"
#include "base/common.h"
#include "tests/apputil.h"

/* Same tensors (names, dtypes, shapes, offsets) and the same data bytes. */
static void same_checkpoint(const char *a, const char *b, const char *what) {
    vt_ckpt_info ia, ib;
    char err[512];
    int ra = vt_ckpt_read_info(&ia, a, err, sizeof err);
    TCHECK(ra == 0, "%s: %s", a, err);
    int rb = vt_ckpt_read_info(&ib, b, err, sizeof err);
    TCHECK(rb == 0, "%s: %s", b, err);
    if (ra || rb) {
        if (!ra) vt_ckpt_info_free(&ia);
        if (!rb) vt_ckpt_info_free(&ib);
        return;
    }
    TCHECK(ia.ntensors == ib.ntensors && ia.ntensors > 0, "%s: tensor counts %d vs %d", what,
           ia.ntensors, ib.ntensors);
    int nopt = 0;
    for (int i = 0; i < ia.ntensors && i < ib.ntensors; i++) {
        const vt_ckpt_tensor *x = &ia.tensors[i], *y = vt_ckpt_find(&ib, ia.tensors[i].name);
        TCHECK(y != NULL, "%s: %s missing", what, x->name);
        if (!y)
            continue;
        nopt += !strncmp(x->name, "optim.", 6);
        TCHECK(x->end - x->begin == y->end - y->begin && x->is_int64 == y->is_int64,
               "%s: %s layout", what, x->name);
    }
    TCHECK(nopt > 0, "%s: the optimizer state is in the checkpoint", what);
    long la = 0, lb = 0;
    char *da = vt_test_slurp(a, &la), *db = vt_test_slurp(b, &lb);
    /* The data sections hold every tensor back to back: equal bytes = equal state. The
     * headers may differ only in metadata (timings), so they are not compared. */
    long na = la - (long)ia.data_start, nb = lb - (long)ib.data_start;
    TCHECK(da && db && na == nb && na > 0, "%s: data sizes %ld vs %ld", what, na, nb);
    if (da && db && na == nb && na > 0) {
        long diff = 0;
        for (long i = 0; i < na; i++)
            diff += da[ia.data_start + i] != db[ib.data_start + i];
        TCHECK(diff == 0, "%s: %ld of %ld data bytes differ", what, diff, na);
    }
    const char *sa = vt_ckpt_meta_get(&ia.meta, "step"), *sb = vt_ckpt_meta_get(&ib.meta, "step");
    const char *ca = vt_ckpt_meta_get(&ia.meta, "cursor"), *cb = vt_ckpt_meta_get(&ib.meta, "cursor");
    TCHECK(sa && sb && !strcmp(sa, sb), "%s: step %s vs %s", what, sa ? sa : "-", sb ? sb : "-");
    TCHECK(ca && cb && !strcmp(ca, cb), "%s: cursor %s vs %s", what, ca ? ca : "-", cb ? cb : "-");
    free(da);
    free(db);
    vt_ckpt_info_free(&ia);
    vt_ckpt_info_free(&ib);
}

/* Precise BN changes no training step: b (the same run with --precise-bn 0) holds every
 * weight and optimizer byte of a, and running statistics that differ from a's. */
static void same_steps_other_stats(const char *a, const char *b, const char *what) {
    vt_ckpt_info ia, ib;
    char err[512];
    if (vt_ckpt_read_info(&ia, a, err, sizeof err) != 0) {
        TCHECK(0, "%s: %s", a, err);
        return;
    }
    if (vt_ckpt_read_info(&ib, b, err, sizeof err) != 0) {
        TCHECK(0, "%s: %s", b, err);
        vt_ckpt_info_free(&ia);
        return;
    }
    char *da = vt_test_slurp(a, NULL), *db = vt_test_slurp(b, NULL);
    long stats = 0, other = 0;
    for (int i = 0; da && db && i < ia.ntensors; i++) {
        const vt_ckpt_tensor *x = &ia.tensors[i], *y = vt_ckpt_find(&ib, x->name);
        TCHECK(y && y->end - y->begin == x->end - x->begin, "%s: %s layout", what, x->name);
        if (!y || y->end - y->begin != x->end - x->begin)
            continue;
        long d = 0;
        for (int64_t k = 0; k < x->end - x->begin; k++)
            d += da[ia.data_start + x->begin + k] != db[ib.data_start + y->begin + k];
        if (strstr(x->name, "running_"))
            stats += d;
        else
            other += d;
    }
    TCHECK(da && db && other == 0, "%s: %ld weight/optimizer bytes differ", what, other);
    TCHECK(stats > 0, "%s: the running statistics are the same with and without it", what);
    free(da);
    free(db);
    vt_ckpt_info_free(&ia);
    vt_ckpt_info_free(&ib);
}

/* The "train_loss" of epoch `epoch` in RUN/metrics.jsonl, as printed text (exactness). */
static int epoch_loss(const char *run_dir, int epoch, char *out, size_t n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/metrics.jsonl", run_dir);
    char *s = vt_test_slurp(p, NULL);
    int found = 0;
    for (char *l = s ? strtok(s, "\n") : NULL; l; l = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(l);
        const cJSON *k = cJSON_GetObjectItem(j, "kind"), *e = cJSON_GetObjectItem(j, "epoch");
        if (cJSON_IsString(k) && !strcmp(k->valuestring, "epoch") && cJSON_IsNumber(e) &&
            (int)e->valuedouble == epoch) {
            snprintf(out, n, "%.17g", cJSON_GetObjectItem(j, "train_loss")->valuedouble);
            found++;
        }
        cJSON_Delete(j);
    }
    free(s);
    return found;
}

int main(void) {
    const char *bin = vt_test_bin("test_resume");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("resume"));
    /* 2 classes x 6 train videos = 12 samples, batch 4: 3 batches per epoch. k = 4 stops
     * one batch into epoch 2; 2k = 8 ends two batches into epoch 3, so the resumed run
     * crosses the end of epoch 2 (its metrics line must match too). */
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 6 --val 1 --test 1 --frames 12 "
                                   "--size 40x32") == 0, "synth");
    /* dropout: its masks follow the step count, which a resumed run must pick up; a
     * validation at every epoch end, and with it a precise-BN pass (the colour jitter is
     * on), which the resumed run must repeat exactly at the end of epoch 2; each clip's
     * stride jittered (1..3), which the resumed run must draw again the same */
    const char *common = "--clip 4x32 --stride 2 --stride-jitter 1 --batch 4 --epochs 5 "
                         "--lr 0.05 --eval-every 1 --dropout 0.3 --no-flip --seed 7 -q "
                         "--log-every 1";

    /* The truth: 8 steps in one go, 1 worker. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/full' %s --workers 1 --max-steps 8 > '%s/full.log' 2>&1",
               bin, dir, dir, common, dir) == 0, "uninterrupted run");

    const int workers[2] = {1, 3};
    for (int w = 0; w < 2; w++) {
        char name[64], what[128];
        snprintf(name, sizeof name, "split%d", workers[w]);
        snprintf(what, sizeof what, "4+4 steps, %d worker(s)", workers[w]);
        TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/%s' %s --workers %d --max-steps 4 > '%s/%s.log' 2>&1",
                   bin, dir, dir, name, common, workers[w], dir, name) == 0, "first half");
        TCHECK(vt_test_sh("'%s' train --resume '%s/%s' --max-steps 8 --workers %d >> '%s/%s.log' 2>&1",
                   bin, dir, name, workers[w], dir, name) == 0, "resumed half");
        char a[4200], b[4200];
        snprintf(a, sizeof a, "%s/full/last.safetensors", dir);
        snprintf(b, sizeof b, "%s/%s/last.safetensors", dir, name);
        same_checkpoint(a, b, what);
        char la[64] = "", lb[64] = "", rd[4200];
        snprintf(rd, sizeof rd, "%s/full", dir);
        int fa = epoch_loss(rd, 2, la, sizeof la);
        snprintf(rd, sizeof rd, "%s/%s", dir, name);
        int fb = epoch_loss(rd, 2, lb, sizeof lb);
        TCHECK(fa == 1 && fb == 1, "%s: epoch 2 logged once (%d, %d)", what, fa, fb);
        TCHECK(!strcmp(la, lb), "%s: epoch 2 train loss %s vs %s", what, la, lb);
    }

    /* Stopped at an epoch's last step (3 of 3), resumed: the epoch's end runs with no step,
     * and its progress line showed "loss 0.0000  acc 0.0%" as if the epoch had learnt
     * nothing; it must show the epoch's figures (what its summary line says). */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/endcut' --clip 4x32 --batch 4 --epochs 2 "
                      "--seed 7 --workers 1 --max-steps 3 > '%s/endcut.log' 2>&1 && '%s' train "
                      "--resume '%s/endcut' > '%s/endcut2.log' 2>&1", bin, dir, dir, dir, bin, dir,
                      dir) == 0, "stop at the epoch's end and resume");
    {
        char p[4200];
        snprintf(p, sizeof p, "%s/endcut2.log", dir);
        char *log = vt_test_slurp(p, NULL);
        TCHECK(log && strstr(log, "epoch 1/2 3/3") && !strstr(log, "loss 0.0000"),
               "resumed at an epoch's end: a progress line of zeros:\n%s", log ? log : "");
        free(log);
    }

    /* Precise BN only replaces running statistics: without it, the same steps. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/nopbn' %s --workers 1 --max-steps 8 "
                      "--precise-bn 0 > '%s/nopbn.log' 2>&1", bin, dir, dir, common, dir) == 0,
           "run without precise BN");
    {
        char a[4200], b[4200];
        snprintf(a, sizeof a, "%s/full/last.safetensors", dir);
        snprintf(b, sizeof b, "%s/nopbn/last.safetensors", dir);
        same_steps_other_stats(a, b, "--precise-bn 0 against the default 4");
    }

    /* --time-budget 5: 3 s of timing steps (the shortest window), then the epochs that fit
     * what is left (at least one). */
    const char *tb = "--clip 4x32 --batch 4 --lr 0.05 --eval-every 100 --dropout 0.3 "
                     "--no-flip --seed 7 -q --workers 2";
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/budget' %s --time-budget 5 --budget-once > '%s/budget.log' 2>&1",
               bin, dir, dir, tb, dir) == 0, "--time-budget run");
    char cfgp[4200];
    snprintf(cfgp, sizeof cfgp, "%s/budget/config.json", dir);
    cJSON *cfg = vt_test_read_json(cfgp);
    const cJSON *ep = cJSON_GetObjectItem(cfg, "epochs");
    int epochs = cJSON_IsNumber(ep) ? (int)ep->valuedouble : 0;
    TCHECK(epochs >= 1, "%s: epochs %d", cfgp, epochs);
    cJSON_Delete(cfg);
    if (epochs >= 1) {
        TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/epochs' %s --epochs %d > '%s/epochs.log' 2>&1",
                   bin, dir, dir, tb, epochs, dir) == 0, "--epochs run");
        char a[4200], b[4200], what[128];
        snprintf(a, sizeof a, "%s/epochs/last.safetensors", dir);
        snprintf(b, sizeof b, "%s/budget/last.safetensors", dir);
        snprintf(what, sizeof what, "--time-budget 5 vs --epochs %d", epochs);
        same_checkpoint(a, b, what);
    }
    return vt_test_done("test_resume");
}
