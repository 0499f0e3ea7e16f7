/*
 * test_eval_counts.c: DESIGN.md invariant 4 through `vidtrain eval` — with two towers and
 * an uneven split (manual 3:1), a batch size that divides nothing (7, so the last batch
 * is partial and slices round unevenly) and 3 crops, the clips and videos evaluated are
 * exactly the dataset's: videos = the files on disk (counted here with opendir, not with
 * vidtrain's scanner), clips = videos x K x crops, every confusion-matrix row sums to
 * that class's videos, and one tower gives the same counts.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdarg.h>
#include <sys/wait.h>

#include "tests/testutil.h"

static const char *bin;

static int run(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc != 0)
        fprintf(stderr, "command exited %d: %s\n", rc, cmd);
    return rc;
}

/* Files in dir/<class>/ for every class folder; per-class counts in sorted class order
 * are not needed: the total and the number of classes are. */
static int count_files(const char *dir, int *nclasses) {
    DIR *d = opendir(dir);
    int n = 0;
    *nclasses = 0;
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char sub[4400];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *s = opendir(sub);
        if (!s)
            continue;
        (*nclasses)++;
        struct dirent *f;
        while ((f = readdir(s)) != NULL)
            n += f->d_name[0] != '.';
        closedir(s);
    }
    closedir(d);
    return n;
}

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return cJSON_Parse(buf);
}

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static void check_eval(const char *run_dir, int videos, int K, int crops, const char *what,
                       double *acc_out) {
    char p[4200];
    snprintf(p, sizeof p, "%s/eval.json", run_dir);
    cJSON *j = read_json(p);
    TCHECK(j != NULL, "%s: eval.json", what);
    if (!j)
        return;
    TCHECK(num(j, "videos") == videos, "%s: videos %g, on disk %d", what, num(j, "videos"), videos);
    TCHECK(num(j, "clips") == (double)videos * K * crops, "%s: clips %g, want %d", what,
           num(j, "clips"), videos * K * crops);
    TCHECK(num(j, "expected_clips") == num(j, "clips"), "%s: expected %g", what,
           num(j, "expected_clips"));
    const cJSON *h = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "heads"), 0);
    const cJSON *cm = cJSON_GetObjectItem(h, "confusion");
    const cJSON *pv = cJSON_GetObjectItem(h, "per_class_videos");
    double total = 0;
    int r = 0;
    for (const cJSON *row = cm ? cm->child : NULL; row; row = row->next, r++) {
        double rs = 0;
        for (const cJSON *c = row->child; c; c = c->next)
            rs += c->valuedouble;
        TCHECK(rs == cJSON_GetArrayItem(pv, r)->valuedouble, "%s: confusion row %d sums to %g", what,
               r, rs);
        total += rs;
    }
    TCHECK(total == videos, "%s: confusion holds %g videos", what, total);
    if (acc_out)
        *acc_out = num(j, "video_top1");
    cJSON_Delete(j);
}

int main(void) {
    bin = getenv("VT_BIN");
    if (!bin) {
        fprintf(stderr, "test_eval_counts: VT_BIN not set (run through ctest)\n");
        return VT_TEST_SKIP;
    }
    char dir[4096], p[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("eval_counts"));
    TCHECK(run("'%s' synth '%s/data' --classes 3 --train 3 --val 2 --test 3 --frames 12 "
               "--size 40x32 > '%s/synth.log' 2>&1", bin, dir, dir) == 0, "synth");
    /* A briefly trained model: the counts do not depend on how good it is. */
    TCHECK(run("'%s' train '%s/data' --out '%s/run' --clip 4x32 --batch 4 --epochs 1 "
               "--max-steps 2 -q --workers 1 > '%s/train.log' 2>&1", bin, dir, dir, dir) == 0,
           "train");
    int nc = 0, ntest, nall = 0;
    snprintf(p, sizeof p, "%s/data/test", dir);
    ntest = count_files(p, &nc);
    TCHECK(ntest == 9 && nc == 3, "test files %d classes %d", ntest, nc);
    const char *splits[3] = {"train", "val", "test"};
    for (int s = 0; s < 3; s++) {
        snprintf(p, sizeof p, "%s/data/%s", dir, splits[s]);
        nall += count_files(p, &nc);
    }

    double acc2 = -1, acc1 = -2;
    snprintf(p, sizeof p, "%s/run", dir);
    /* two towers 3:1, batch 7 (63 test views of 9 videos: 9 batches, slices 5+2 / 6+1..) */
    TCHECK(run("'%s' eval '%s/run' '%s/data' --devices cpu:2 --split manual:3,1 --batch 7 "
               "--clips-per-video 7 --crops 3 -q --workers 2 > '%s/eval2.log' 2>&1", bin, dir, dir,
               dir) == 0, "eval on 2 towers");
    check_eval(p, ntest, 7, 3, "2 towers 3:1, test", &acc2);
    TCHECK(run("'%s' eval '%s/run' '%s/data' --devices cpu:1 --batch 7 --clips-per-video 7 "
               "--crops 3 -q > '%s/eval1.log' 2>&1", bin, dir, dir, dir) == 0, "eval on 1 tower");
    check_eval(p, ntest, 7, 3, "1 tower, test", &acc1);
    /* The same clips through the same weights: the same video decisions (the towers'
     * equal-to-one-device promise; a float tie flipping is not plausible at 9 videos). */
    TCHECK(acc1 == acc2, "video top-1: 1 tower %g, 2 towers %g", acc1, acc2);
    TCHECK(run("'%s' eval '%s/run' '%s/data' --devices cpu:2 --split all --tower-split manual:1,3 "
               "--batch 5 --clips-per-video 2 --crops 1 -q > '%s/evalall.log' 2>&1", bin, dir, dir,
               dir) == 0, "eval --split all");
    check_eval(p, nall, 2, 1, "2 towers 1:3, all", NULL);
    return vt_test_done("test_eval_counts");
}
