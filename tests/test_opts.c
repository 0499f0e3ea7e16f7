/*
 * test_opts.c: the command line's one integer parser, one clip-shape parser and the one
 * atomic file writer (base/common.h, app/opts.h), and that every command reads them
 * the same way:
 *   1. numbers: the whole string or nothing ("3x", "", "1e9" are refused), inside range;
 *   2. clips: TxS and TxHxW both parse, with the same ranges, and `plan` and
 *      `bench step` plan the same step for 8x16 as for 8x16x16 (they took only TxHxW);
 *      train refuses a non-square crop;
 *   3. the writer: contents replaced whole, nothing left beside it, and on every failure
 *      an error naming the path, no temporary file left and no descriptor leaked;
 *   4. strict values where atoi read "4x" as 4: bench decode, bench step, devices exit 2;
 *   5. a run's config.json written before Nesterov and warm-up were defaults reads as
 *      what that run did (neither), and today's defaults round-trip through config.json;
 *   6. every model of the zoo builds at train's default clip on the CPU and on a GPU
 *      (vt_train_clip_default; c3d took 8 frames on the CPU, where its pool5 has none, and
 *      plan 16x112 for s3d, which needs 13x209), `plan --model M` without --clip plans
 *      that GPU clip and train's optimizer (AdamW for a transformer; it planned SGD), and a
 *      clip too small is refused with the least the model takes (graph building is
 *      arithmetic: the 20 models' plans take about 2 s).
 * It must never depend on the machine beyond the scratch folder and the CPU.
 */
#include <dirent.h>
#include <math.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/opts.h"
#include "app/train/train_opts.h"
#include "app/train/train_ranges.h"
#include "base/common.h"
#include "models/net.h"
#include "pipeline/data/sample.h"
#include "tests/apputil.h"

/* Entries of a folder (without . and ..), -1 when it cannot be read. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void numbers(void) {
    int i = 7;
    TCHECK(vt_parse_int("42", 0, 100, &i) == 0 && i == 42, "42");
    TCHECK(vt_parse_int("-5", -5, 5, &i) == 0 && i == -5, "-5 in [-5, 5]");
    i = 7;
    TCHECK(vt_parse_int("3x", 0, 100, &i) == -1 && i == 7, "3x refused, out untouched");
    TCHECK(vt_parse_int("", 0, 100, &i) == -1, "empty refused");
    TCHECK(vt_parse_int(NULL, 0, 100, &i) == -1, "NULL refused");
    TCHECK(vt_parse_int("1e9", 0, 1 << 30, &i) == -1, "1e9 is no integer");
    TCHECK(vt_parse_int("101", 0, 100, &i) == -1, "past hi");
    TCHECK(vt_parse_int("99999999999999999999", 0, 100, &i) == -1, "overflow refused");
    int64_t l = 0;
    TCHECK(vt_parse_i64("9223372036854775807", 0, INT64_MAX, &l) == 0 && l == INT64_MAX,
           "INT64_MAX");
    uint64_t u = 0;
    TCHECK(vt_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "UINT64_MAX");
    TCHECK(vt_parse_u64("-1", &u) == -1, "-1 is no u64");
    double d = 0;
    TCHECK(vt_parse_f64("0.25", 0, 1, &d) == 0 && d == 0.25, "0.25");
    TCHECK(vt_parse_f64("nan", -1e9, 1e9, &d) == -1, "nan refused");
    TCHECK(vt_parse_f64("inf", -1e9, INFINITY, &d) == -1, "inf refused");
}

static void clips(void) {
    vt_clip_shape c = {0, 0, 0};
    TCHECK(vt_parse_clip("8x32", &c) == 0 && c.t == 8 && c.h == 32 && c.w == 32, "8x32");
    TCHECK(vt_parse_clip("16x112x96", &c) == 0 && c.t == 16 && c.h == 112 && c.w == 96,
           "16x112x96");
    c = (vt_clip_shape){1, 2, 3};
    const char *bad[] = {"8", "8x", "8x32x", "x32", "0x32", "8x0", "8x32x0", "1025x32",
                         "8x4097", "8x32x32x3", "8x32junk", "8X32", ""};
    for (size_t k = 0; k < VT_ARRAY_LEN(bad); k++)
        TCHECK(vt_parse_clip(bad[k], &c) == -1, "'%s' is no clip", bad[k]);
    TCHECK(c.t == 1 && c.h == 2 && c.w == 3, "a refused clip leaves the shape");
    TCHECK(vt_parse_clip("1024x4096x1", &c) == 0, "the largest T and H");
}

static int fd_count(void) { return count_entries("/proc/self/fd"); }

static int fill_fails(void *ctx, int fd) {
    (void)ctx;
    (void)!write(fd, "part", 4);
    errno = ENOSPC;
    return -1;
}

static void writer(const char *dir) {
    char path[4200], err[8400];
    snprintf(path, sizeof path, "%s/w/file.txt", dir);
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/w", dir);
    TCHECK(mkdir(sub, 0755) == 0, "mkdir %s", sub);
    int fds = fd_count();
    TCHECK(vt_file_write_atomic(path, "first", 5, err, sizeof err) == 0, "write: %s", err);
    TCHECK(vt_file_write_atomic(path, "second!", 7, err, sizeof err) == 0, "replace: %s", err);
    char *s = vt_file_read(path);
    TCHECK(s && !strcmp(s, "second!"), "replaced whole: '%s'", s ? s : "(null)");
    free(s);
    TCHECK(count_entries(sub) == 1, "only the file in its folder (%d entries)",
           count_entries(sub));

    /* Folder missing: the temporary file cannot be made. */
    char missing[4300];
    snprintf(missing, sizeof missing, "%s/none/file.txt", dir);
    err[0] = 0;
    TCHECK(vt_file_write_atomic(missing, "x", 1, err, sizeof err) == -1 &&
               strstr(err, missing),
           "missing folder: error names the path: %s", err);

    /* Rename fails (the path is a folder): the temporary file goes, no descriptor stays. */
    char asdir[4300];
    snprintf(asdir, sizeof asdir, "%s/w/adir", dir);
    TCHECK(mkdir(asdir, 0755) == 0, "mkdir %s", asdir);
    err[0] = 0;
    TCHECK(vt_file_write_atomic(asdir, "x", 1, err, sizeof err) == -1 && strstr(err, asdir),
           "rename over a folder: error names the path: %s", err);
    TCHECK(count_entries(sub) == 2, "no temporary file left after a failed rename (%d)",
           count_entries(sub));

    /* The content cannot be written: the old file stays whole. */
    err[0] = 0;
    TCHECK(vt_file_write_atomic_fill(path, fill_fails, NULL, err, sizeof err) == -1 &&
               strstr(err, path),
           "failed fill: error names the path: %s", err);
    s = vt_file_read(path);
    TCHECK(s && !strcmp(s, "second!"), "a failed write leaves the old file: '%s'",
           s ? s : "(null)");
    free(s);
    TCHECK(count_entries(sub) == 2, "no temporary file left after a failed fill (%d)",
           count_entries(sub));
    TCHECK(fd_count() == fds, "descriptors: %d before, %d after", fds, fd_count());
}

/* The plan printed for one --clip spelling, NULL when plan failed. */
static char *plan_for(const char *bin, const char *dir, const char *clip) {
    if (vt_test_sh("'%s' plan --model tiny --clip %s --batch 4 --classes 3 --devices cpu "
                   "--mem 1G > '%s/plan.txt' 2>&1", bin, clip, dir) != 0)
        return NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/plan.txt", dir);
    return vt_test_slurp(path, NULL);
}

static void commands(const char *bin, const char *dir) {
    char *a = plan_for(bin, dir, "8x16"), *b = plan_for(bin, dir, "8x16x16");
    TCHECK(a && b && !strcmp(a, b), "plan: 8x16 and 8x16x16 plan the same step");
    free(a);
    free(b);
    TCHECK(vt_test_sh("'%s' bench step --model tiny --clip 4x16 --batch 2 --devices cpu "
                      "--steps 1 --warmup 0 > /dev/null 2>&1", bin) == 0,
           "bench step takes TxS");
    /* usage errors: 2, with the option named */
    TCHECK(vt_test_sh("'%s' plan --clip 8x16x16x2 2> '%s/err.txt'", bin, dir) == 2,
           "plan refuses a bad clip");
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s/run' --clip 8x32x24 2> '%s/err.txt'", bin,
                      dir, dir, dir) == 2,
           "train refuses a non-square crop");
    TCHECK(vt_test_sh("'%s' bench decode '%s' --workers 4x 2> '%s/err.txt'", bin, dir, dir) == 2,
           "bench decode --workers 4x");
    char path[4200];
    snprintf(path, sizeof path, "%s/err.txt", dir);
    char *e = vt_test_slurp(path, NULL);
    TCHECK(e && strstr(e, "--workers") && strstr(e, "4x"), "the error names option and value: %s",
           e ? e : "(none)");
    free(e);
    /* a value out of a numeric option's range says what the option takes */
    TCHECK(vt_test_sh("'%s' train '%s' --out '%s/run' --stride 100 2> '%s/err.txt'", bin, dir,
                      dir, dir) == 2, "train --stride 100");
    e = vt_test_slurp(path, NULL);
    TCHECK(e && strstr(e, "bad value for --stride: '100' (an integer from 1 to 64)"),
           "train --stride 100: %s", e ? e : "(none)");
    free(e);
    TCHECK(vt_test_sh("'%s' bench step --steps 2x 2> /dev/null", bin) == 2, "bench step --steps 2x");
    TCHECK(vt_test_sh("'%s' devices --threads 2x > /dev/null 2>&1", bin) == 1,
           "devices --threads 2x is refused");
    TCHECK(vt_test_sh("'%s' devices --devices cpu:2x > /dev/null 2>&1", bin) == 1,
           "devices --devices cpu:2x is refused");
}

static void old_configs(void) {
    vt_train_opts o;
    vt_train_opts_default(&o);
    cJSON *j = cJSON_Parse("{\"model\":\"tiny\",\"epochs\":12}");
    vt_train_opts_from_json(&o, j);
    cJSON_Delete(j);
    TCHECK(!o.nesterov && o.warmup_epochs == 0 && o.epochs == 12,
           "an old config: nesterov %d, warm-up %g", o.nesterov, (double)o.warmup_epochs);
    /* a run from before --input-norm was normalised with Kinetics' statistics whatever its
     * model: evaluating it with its family's (X3D: 0.45/0.225) would feed it other inputs */
    vt_train_opts_default(&o);
    j = cJSON_Parse("{\"model\":\"x3d_xs\",\"epochs\":12}");
    vt_train_opts_from_json(&o, j);
    cJSON_Delete(j);
    TCHECK(!strcmp(o.input_norm, "kinetics"), "an old X3D config: input_norm '%s'", o.input_norm);
    /* a new run takes its family's: the statistics its published weights were trained with */
    static const char *const fam[][2] = {{"x3d_xs", "pytorchvideo"}, {"slowfast_r50", "pytorchvideo"},
                                         {"videomae_vit_s", "imagenet"}, {"r3d18", "kinetics"},
                                         {"mvit_v2_s", "pytorchvideo"}, {"tiny", "kinetics"}};
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++) {
        vt_train_opts_default(&o);
        snprintf(o.model, sizeof o.model, "%s", fam[i][0]);
        vt_train_opts_resolve(&o, 64, 0);
        TCHECK(!strcmp(o.input_norm, fam[i][1]), "%s: input_norm '%s', want %s", fam[i][0],
               o.input_norm, fam[i][1]);
    }
    vt_clip_cfg c;
    vt_clip_cfg_default(&c);
    TCHECK(vt_clip_set_norm(&c, "imagenet") == 0 && c.mean[0] == 0.485f && c.std[2] == 0.225f &&
               vt_clip_set_norm(&c, "bogus") == -1 && c.mean[0] == 0.485f,
           "vt_clip_set_norm: imagenet's, and a bogus name refused with c unchanged");
    vt_train_opts d, back;
    vt_train_opts_default(&d);
    vt_train_opts_default(&back);
    back.nesterov = 0, back.wd = 0, back.smoothing = 1, back.warmup_epochs = 7;
    j = vt_train_opts_to_json(&d);
    vt_train_opts_from_json(&back, j);
    cJSON_Delete(j);
    TCHECK(back.nesterov == d.nesterov && back.wd == d.wd && back.smoothing == d.smoothing &&
               back.warmup_epochs == d.warmup_epochs,
           "today's defaults read back: nesterov %d, wd %g, smoothing %g, warm-up %g",
           back.nesterov, (double)back.wd, (double)back.smoothing, (double)back.warmup_epochs);
    TCHECK(!back.json_bad[0], "today's config.json read back names a mistyped key: %s", back.json_bad);
    /* A key there with the wrong type kept the default in its place, silently (a clip of
     * "16" frames trained or evaluated at the default's): now named, and refused. null is
     * what cJSON writes for a non-finite number: taken as absent, as before. */
    static const char *const typed[][2] = {{"{\"clip_t\":\"16\"}", "clip_t"},
                                           {"{\"input_norm\":3}", "input_norm"},
                                           {"{\"lr\":\"0.1\",\"model\":7}", "model"}, /* the first read */
                                           {"{\"lr\":null,\"flip\":true}", ""}};
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        vt_train_opts_default(&o);
        j = cJSON_Parse(typed[i][0]);
        vt_train_opts_from_json(&o, j);
        cJSON_Delete(j);
        char err[512] = "";
        int r = vt_train_opts_check(&o, "run/config.json", err, sizeof err);
        TCHECK(!strcmp(o.json_bad, typed[i][1]) && (typed[i][1][0] ? r != 0 && strstr(err, typed[i][1]) &&
                                                                        strstr(err, "run/config.json")
                                                                  : !strstr(err, "wrong type")),
               "%s: mistyped key '%s' (want '%s'), check %d: %s", typed[i][0], o.json_bad,
               typed[i][1], r, err);
    }
}

/* The bytes in one of the plan's units (vt_fmt_bytes': B, KiB, MiB, GiB). */
static double unit_scale(const char *u) {
    return !strcmp(u, "GiB")   ? 1 << 30
           : !strcmp(u, "MiB") ? 1 << 20
           : !strcmp(u, "KiB") ? 1 << 10
                               : 1;
}

/* 6. (file comment) */
static void model_clips(const char *bin, const char *dir) {
    char p[4200];
    for (int i = 0; vt_zoo_names[i]; i++) {
        const char *m = vt_zoo_names[i];
        for (int gpu = 0; gpu < 2; gpu++) {
            vt_train_opts o;
            vt_train_opts_default(&o);
            snprintf(o.model, sizeof o.model, "%s", m);
            vt_train_opts_resolve(&o, 64, gpu);
            vt_net_cfg cfg;
            vt_net_cfg_default(&cfg, m, 3, o.clip_t, o.crop, o.crop);
            vt_memplan mp;
            char err[1024];
            const int rc = vt_memplan_build(&mp, &cfg, 1, err, sizeof err);
            TCHECK(rc == 0, "train --model %s without --clip on %s: %dx%d: %s", m,
                   gpu ? "a GPU" : "the CPU", o.clip_t, o.crop, rc ? err : "");
            if (rc == 0)
                vt_memplan_free(&mp);
        }
        if (!bin)
            continue;
        int t, crop, stride;
        vt_train_clip_default(m, 1, &t, &crop, &stride);
        TCHECK(vt_test_sh("'%s' plan --model %s > '%s/plan_m.txt' 2>&1", bin, m, dir) == 0,
               "plan --model %s without --clip (see %s/plan_m.txt)", m, dir);
        snprintf(p, sizeof p, "Model: %s, clip 3x%dx%dx%d,", m, t, crop, crop);
        TCHECK(vt_test_file_has_in(dir, "plan_m.txt", p), "plan --model %s: not '%s'", m, p);
        /* and train's optimizer: AdamW's two floats a parameter for a transformer, SGD's
         * momentum one (it planned SGD for all); 3 digits printed: within 1% */
        snprintf(p, sizeof p, "%s/plan_m.txt", dir);
        char *plan = vt_test_slurp(p, NULL);
        const char *f = plan ? strstr(plan, "Fixed bytes: ") : NULL;
        double par = 0, opt = 0;
        char up[8] = "", uo[8] = "";
        const int want = !strcmp(vt_train_optim_default(m), "adamw") ? 2 : 1;
        if (f && sscanf(f, "Fixed bytes: %*s %*s (params %lf %7[^,], grads %*s %*s buffers %*s "
                        "%*s optimizer %lf %7[^,]", &par, up, &opt, uo) == 4)
            opt *= unit_scale(uo) / unit_scale(up);
        TCHECK(fabs(opt / (par > 0 ? par : 1) - want) < 0.01 * want,
               "plan --model %s: optimizer state %g x the parameters, want %d (train's %s)", m,
               opt / (par > 0 ? par : 1), want, vt_train_optim_default(m));
        free(plan);
    }
    if (!bin)
        return;
    /* c3d at the CPU's generic 8x64 (pool5 gets no frame): the least clip, worked out from
     * the model (pool1 keeps T, pool2..pool5 halve it: 16 frames; H and W halve four times
     * before pool5's padded window: 16) */
    TCHECK(vt_test_sh("'%s' plan --model c3d --clip 8x64 > /dev/null 2> '%s/err.txt'", bin,
                      dir) == 1, "plan --model c3d --clip 8x64 planned");
    TCHECK(vt_test_file_has_in(dir, "err.txt", "the least clip c3d takes is 16x16x16 (--clip "
                               "16x16)"), "c3d 8x64: the refusal does not name the least clip");
    printf("every model: train's default clip builds on the CPU and a GPU, plan plans it; "
           "c3d 8x64 refused with the least, 16x16x16\n");
}

int main(void) {
    const char *dir = vt_test_dir("test_opts");
    old_configs();
    numbers();
    clips();
    writer(dir);
    const char *bin = vt_test_bin("test_opts");
    if (bin)
        commands(bin, dir);
    model_clips(bin, dir);
    return vt_test_done("test_opts");
}
