/*
 * test_e2e.c: the commands a user runs, end to end, on a small synthetic set
 * (`vidtrain synth`: two classes, shapes moving left or right, real encoded videos):
 * train (validating every epoch, writing metrics, checkpoints, config and report), eval
 * on the held-out test split, predict on test videos plus an unreadable file.
 * The outside truth is the labels synth wrote: the model must be clearly above chance
 * (50%) on test videos it never saw, and predict must name the right class for most.
 */
#include <dirent.h>
#include <unistd.h>

#include "app/run/run.h"
#include "models/checkpoint.h"
#include "tests/apputil.h"

/* Paths here are short scratch paths; GCC cannot know that and warns that 4 KiB of
 * folder plus a file name may not fit in 4 KiB. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The k-th file (sorted by name) of a folder, as a full path into out: synth names files
 * by index but their extensions depend on which encoders this FFmpeg has. */
static void nth_file(char *out, size_t n, const char *dir, int k) {
    DIR *d = opendir(dir);
    char *names[256];
    int cnt = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL && cnt < 256)
        if (e->d_name[0] != '.')
            names[cnt++] = strdup(e->d_name);
    if (d)
        closedir(d);
    qsort(names, (size_t)cnt, sizeof names[0], cmp_str);
    snprintf(out, n, "%s/%s", dir, k < cnt ? names[k] : "missing");
    for (int i = 0; i < cnt; i++)
        free(names[i]);
}

static int exists(const char *dir, const char *name) {
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

int main(void) {
    const char *bin = vt_test_bin("test_e2e");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], rd[4200], p[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("e2e"));
    snprintf(rd, sizeof rd, "%s/run", dir);
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 16 --val 2 --test 6 --frames 24") == 0,
           "synth");

    /* Sizes picked for speed: 32 training videos, 8x32x32 clips two frames apart, batch
     * 8, 8 epochs = 32 steps (256 clips); AdamW at 0.005 separates left from right
     * motion in about 16 steps on this set (measured: validation at 100% by epoch 4). */
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s' --clip 8x32 --stride 2 --batch 8 --epochs 8 "
                 "--optim adamw --lr 0.005 --no-flip --val-clips 1 --workers 2 --seed 3 "
                 "> '%s/train.log' 2>&1", bin, dir, rd, dir);
    TCHECK(rc == 0, "train exit %d (see %s/train.log)", rc, dir);
    const char *files[] = {"config.json", "plan.txt", "metrics.csv", "metrics.jsonl",
                           "last.safetensors", "best.safetensors", "val.json", "report.html"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        TCHECK(exists(rd, files[i]), "RUN/%s written", files[i]);
    snprintf(p, sizeof p, "%s/metrics.csv", rd);
    char *csv = vt_test_slurp(p, NULL);
    int lines = 0;
    for (char *c = csv; c && *c; c++)
        lines += *c == '\n';
    TCHECK(lines == 9, "metrics.csv: header + 8 epochs, got %d lines", lines);
    TCHECK(csv && strstr(csv, "val_acc") && strstr(csv, "train_loss"), "metrics.csv columns");
    free(csv);
    snprintf(p, sizeof p, "%s/train.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(log && strstr(log, "dataset") && strstr(log, "cpu0") && strstr(log, "Bytes per clip"),
           "the summary, device list and memory plan are printed before training");
    free(log);

    /* best.safetensors: among the epochs before the last, the best validation video
     * top-1 and, among epochs tied there (4 validation videos tie at 100% from epoch 2
     * on), the lowest validation loss — not the first epoch to reach the top (which was
     * 58% on test); then the last epoch replaces it unless that one beat the last by
     * more than the noise of 4 videos (it never can: the last is best). */
    cJSON **ep = NULL;
    int nep = vt_metrics_epochs(&ep, rd), want_best = 0;
    double ba = -1, bl = 0, la = -1;
    for (int i = 0; i < nep; i++) {
        double a = cJSON_GetObjectItem(ep[i], "val_acc")->valuedouble;
        double l = cJSON_GetObjectItem(ep[i], "val_loss")->valuedouble;
        if (i == nep - 1) {
            la = a;
            if (!vt_ckpt_keep_earlier_best(ba, la, 4))
                want_best = (int)cJSON_GetObjectItem(ep[i], "epoch")->valuedouble;
        } else if (a > ba || (a == ba && l < bl)) {
            ba = a;
            bl = l;
            want_best = (int)cJSON_GetObjectItem(ep[i], "epoch")->valuedouble;
        }
    }
    TCHECK(nep == 8 && want_best == 8, "4 validation videos: the last epoch is best (want %d)",
           want_best);
    /* The rule itself: two standard errors of a difference of accuracies. */
    TCHECK(!vt_ckpt_keep_earlier_best(0.933, 0.867, 15), "15 videos: 1 video is noise");
    TCHECK(!vt_ckpt_keep_earlier_best(0.933, 0.733, 15), "15 videos: 3 videos are noise");
    TCHECK(vt_ckpt_keep_earlier_best(0.933, 0.60, 15), "15 videos: 5 videos are not");
    TCHECK(vt_ckpt_keep_earlier_best(0.95, 0.90, 1000), "1000 videos: 5 points are not noise");
    TCHECK(!vt_ckpt_keep_earlier_best(0.91, 0.90, 1000), "1000 videos: 1 point is noise");
    TCHECK(!vt_ckpt_keep_earlier_best(-1, 0.5, 15), "no earlier best: the last");
    vt_metrics_epochs_free(ep, nep);
    vt_ckpt_info info;
    char err[512];
    snprintf(p, sizeof p, "%s/best.safetensors", rd);
    TCHECK(vt_ckpt_read_info(&info, p, err, sizeof err) == 0, "%s", err);
    const char *be = vt_ckpt_meta_get(&info.meta, "epoch");
    TCHECK(be && atoi(be) == want_best, "best.safetensors is epoch %s, want %d (earlier best "
           "top-1 %.3f with loss %.4f, last %.3f)", be ? be : "?", want_best, ba, bl, la);
    vt_ckpt_info_free(&info);

    /* Evaluation agrees with training: `eval --split val` with validation's protocol (1
     * clip a video) on the last weights gives the last validation's figures (it ran
     * after the last epoch): the same videos, clips, weights and numbers. */
    rc = vt_test_sh("'%s' eval '%s' '%s/data' --split val --clips-per-video 1 --checkpoint "
                    "'%s/last.safetensors' -q > '%s/evalval.log' 2>&1", bin, rd, dir, rd, dir);
    TCHECK(rc == 0, "eval --split val exit %d", rc);
    snprintf(p, sizeof p, "%s/val.json", rd);
    cJSON *vj = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/eval.json", rd);
    cJSON *ej = vt_test_read_json(p);
    TCHECK(vj && ej, "val.json and eval.json parse");
    if (vj && ej) {
        static const char *const keys[] = {"videos", "clips", "video_top1", "clip_top1",
                                           "mean_class_acc"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            const cJSON *a = cJSON_GetObjectItem(vj, keys[k]), *b = cJSON_GetObjectItem(ej, keys[k]);
            TCHECK(a && b && a->valuedouble == b->valuedouble, "%s: validation %g, eval %g",
                   keys[k], a ? a->valuedouble : NAN, b ? b->valuedouble : NAN);
        }
        /* the mean loss: the same clips through the same weights; sums over batches of
         * another size may round differently (float32 logits, double sums: 1e-6) */
        const cJSON *hv = cJSON_GetArrayItem(cJSON_GetObjectItem(vj, "heads"), 0);
        const cJSON *he = cJSON_GetArrayItem(cJSON_GetObjectItem(ej, "heads"), 0);
        double lv = cJSON_GetObjectItem(hv, "loss_mean")->valuedouble;
        double le = cJSON_GetObjectItem(he, "loss_mean")->valuedouble;
        TCHECK(fabs(lv - le) <= 1e-6 * fabs(lv), "loss: validation %.9g, eval %.9g", lv, le);
        const cJSON *cv = cJSON_GetObjectItem(hv, "confusion"), *ce = cJSON_GetObjectItem(he, "confusion");
        char *sv = cJSON_PrintUnformatted(cv), *se = cJSON_PrintUnformatted(ce);
        TCHECK(sv && se && !strcmp(sv, se), "confusion: validation %s, eval %s", sv, se);
        free(sv);
        free(se);
    }
    cJSON_Delete(vj);
    cJSON_Delete(ej);

    rc = vt_test_sh("'%s' eval '%s' '%s/data' --clips-per-video 4 -q > '%s/eval.log' 2>&1", bin, rd, dir, dir);
    TCHECK(rc == 0, "eval exit %d", rc);
    snprintf(p, sizeof p, "%s/eval.json", rd);
    cJSON *j = vt_test_read_json(p);
    TCHECK(j != NULL, "eval.json parses");
    if (j) {
        const cJSON *s = cJSON_GetObjectItem(j, "split");
        double v1 = cJSON_GetObjectItem(j, "video_top1")->valuedouble;
        double c1 = cJSON_GetObjectItem(j, "clip_top1")->valuedouble;
        double nv = cJSON_GetObjectItem(j, "videos")->valuedouble;
        printf("test split: video top-1 %.1f%%, clip top-1 %.1f%% over %g videos\n", 100 * v1,
               100 * c1, nv);
        TCHECK(cJSON_IsString(s) && !strcmp(s->valuestring, "test"), "default split is test");
        TCHECK(nv == 12, "12 test videos, got %g", nv);
        /* Chance is 50%: 10 or more of 12 right happens by chance with p = 79/4096 = 1.9%,
         * so >= 10/12 is "clearly above chance" (the run is deterministic for a seed). */
        TCHECK(v1 >= 10.0 / 12 - 1e-9, "video top-1 %.3f is not clearly above chance", v1);
        cJSON_Delete(j);
    }
    TCHECK(exists(rd, "confusion.csv"), "confusion.csv");

    /* predict: two real videos and one unreadable file; the rest go on; JSON output. */
    snprintf(p, sizeof p, "%s/junk.mp4", dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs("not a video", f);
        fclose(f);
    }
    char v[4][4200], cd[4200];
    for (int i = 0; i < 4; i++) {
        snprintf(cd, sizeof cd, "%s/data/test/%s", dir, i % 2 ? "move_right" : "move_left");
        nth_file(v[i], sizeof v[i], cd, i);
    }
    rc = vt_test_sh("'%s' predict '%s' '%s' '%s/junk.mp4' '%s' '%s' '%s' --json --top 2 > '%s/pred.json' "
             "2> '%s/pred.err'", bin, rd, v[0], dir, v[1], v[2], v[3], dir, dir);
    TCHECK(rc == 0, "predict exit %d with one bad file of three", rc);
    snprintf(p, sizeof p, "%s/pred.json", dir);
    cJSON *pa = vt_test_read_json(p);
    TCHECK(cJSON_GetArraySize(pa) == 5, "5 entries");
    /* entries in argument order: v[0] left, junk, v[1] right, v[2] left, v[3] right */
    const char *want[5] = {"move_left", NULL, "move_right", "move_left", "move_right"};
    int right = 0;
    for (int i = 0; i < 5 && pa; i++) {
        const cJSON *e = cJSON_GetArrayItem(pa, i);
        if (!want[i]) {
            TCHECK(cJSON_GetObjectItem(e, "error") != NULL, "the junk file has an error entry");
            continue;
        }
        const cJSON *top = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "heads"), 0), "top");
        TCHECK(cJSON_GetArraySize(top) == 2, "top 2");
        const cJSON *t0 = cJSON_GetArrayItem(top, 0), *t1 = cJSON_GetArrayItem(top, 1);
        double p0 = cJSON_GetObjectItem(t0, "prob")->valuedouble;
        double p1 = cJSON_GetObjectItem(t1, "prob")->valuedouble;
        /* two classes: the probabilities are a softmax, so they sum to 1 (float rounding) */
        TCHECK(fabs(p0 + p1 - 1) < 1e-5 && p0 >= p1, "probabilities %g %g", p0, p1);
        right += !strcmp(cJSON_GetObjectItem(t0, "label")->valuestring, want[i]);
    }
    /* the model is right on >= 10 of 12 test videos: at least 3 of these 4 */
    TCHECK(right >= 3, "predict named %d of 4 test videos right", right);
    cJSON_Delete(pa);
    rc = vt_test_sh("'%s' predict '%s' '%s/junk.mp4' > /dev/null 2>&1", bin, rd, dir);
    TCHECK(rc == 1, "predict exits 1 when every file fails, got %d", rc);
    return vt_test_done("test_e2e");
}
