/*
 * test_fuzz_regress.c: what the fuzz targets of tests/fuzz/ found, pinned as behaviour
 * (one block per finding, each naming its input in tests/fuzz/regress/). The replays
 * (ctest fuzz_regress_*) run those inputs through the targets, which proves "no crash,
 * no sanitizer report" under build-asan; this file proves the right answer in every
 * build, so each check fails before its fix even where no sanitizer looks.
 *
 * It must never depend on the machine: only parsers and files it writes itself.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <limits.h>

#include "app/run/run_model.h"
#include "app/train/train_opts.h"
#include "models/checkpoint.h"
#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "tests/apputil.h"
#include "tests/testutil.h"

/* options/parse-bytes-nan: vt_parse_bytes converted NaN, infinity and sizes past
 * int64_t to int64_t (UB; INT64_MIN on x86, which --mem then reported as "not a size"
 * only by luck). Each must be refused with -1, and the largest sizes still parse. */
static void parse_bytes_limits(void) {
    TCHECK(vt_parse_bytes("nan") == -1, "nan -> %lld", (long long)vt_parse_bytes("nan"));
    TCHECK(vt_parse_bytes("NaNG") == -1, "NaNG -> %lld", (long long)vt_parse_bytes("NaNG"));
    TCHECK(vt_parse_bytes("inf") == -1, "inf -> %lld", (long long)vt_parse_bytes("inf"));
    TCHECK(vt_parse_bytes("1e300T") == -1, "1e300T -> %lld",
           (long long)vt_parse_bytes("1e300T"));
    TCHECK(vt_parse_bytes("8388608T") == -1, "2^63 bytes -> %lld",
           (long long)vt_parse_bytes("8388608T"));
    /* 2^62 is exact in a double: the largest power of two that fits. */
    TCHECK(vt_parse_bytes("4194304T") == (int64_t)1 << 62, "2^62 bytes -> %lld",
           (long long)vt_parse_bytes("4194304T"));
    TCHECK(vt_parse_bytes("0") == 0 && vt_parse_bytes("2G") == (int64_t)2 << 30, "plain sizes");
}

/* A safetensors file with no tensor and this optimizer JSON (escaped) as metadata. */
static void write_ckpt_optim(const char *path, const char *optim_json) {
    char hdr[1024];
    int n = snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"optimizer\":\"%s\"}}", optim_json);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    for (int b = 0; b < 8; b++)
        fputc((int)(((uint64_t)n >> (8 * b)) & 255), f);
    fwrite(hdr, 1, (size_t)n, f);
    fclose(f);
}

/* safetensors/optim-nesterov-huge: vt_ckpt_optim_cfg converted the metadata's "nesterov"
 * with (int), UB for 1e300 (INT_MIN on x86: "on" by luck). It is a flag: any value of
 * magnitude >= 1 is on (as (int) was, where it was defined), smaller is off. */
static void optim_nesterov_flag(const char *dir) {
    static const struct { const char *v; int want; } cases[] = {
        {"1e300", 1}, {"-1e300", 1}, {"1099511627776", 1}, {"1", 1}, {"0", 0}, {"0.5", 0},
    };
    char path[4200], json[256], err[512];
    snprintf(path, sizeof path, "%s/nesterov.safetensors", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(json, sizeof json, "{\\\"kind\\\":\\\"sgd\\\",\\\"nesterov\\\":%s}",
                 cases[i].v);
        write_ckpt_optim(path, json);
        vt_ckpt_info info;
        int rc = vt_ckpt_read_info(&info, path, err, sizeof err);
        TCHECK(rc == 0, "nesterov %s: header refused: %s", cases[i].v, err);
        if (rc != 0)
            continue;
        vt_optim_cfg oc;
        int64_t step = -1;
        rc = vt_ckpt_optim_cfg(&oc, &step, &info, err, sizeof err);
        TCHECK(rc == 0 && oc.nesterov == cases[i].want, "nesterov %s: rc %d, flag %d (want %d)",
               cases[i].v, rc, rc == 0 ? oc.nesterov : -1, cases[i].want);
        vt_ckpt_info_free(&info);
    }
}

/* labels/bce-column-no-tags: a labels.csv column made multi-label by a ';' cell, with no
 * tag in any valid row, became a head of 0 classes (after memcpy from a NULL list, UB).
 * It must be refused, naming the column; a column with one tag still loads. */
static void labels_bce_without_tags(const char *dir) {
    char data[4200], err[1024];
    snprintf(data, sizeof data, "%s/labels", dir);
    if (vt_test_sh("mkdir -p '%s/A' && touch '%s/A/x.mp4' '%s/A/y.mp4'", data, data, data) != 0)
        exit(1);
    vt_test_write_file(dir, "none.csv", "path,tags\nA/x.mp4,;\nA/y.mp4, ; ;\n");
    vt_test_write_file(dir, "one.csv", "path,tags\nA/x.mp4,;\nA/y.mp4,walk;\n");
    char csv[4300];
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open %s: %s", data, err);
    if (!ds)
        return;
    snprintf(csv, sizeof csv, "%s/none.csv", dir);
    int nbad = -1;
    err[0] = 0;
    int rc = vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "'tags'") && strstr(err, "no valid row has a tag"),
           "no tags: rc %d, heads %d, classes %d, err '%s'", rc, ds->nheads,
           ds->heads[0].nclasses, err);
    vt_dataset_free(&ds);
    ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open %s: %s", data, err);
    if (!ds)
        return;
    snprintf(csv, sizeof csv, "%s/one.csv", dir);
    rc = vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err);
    TCHECK(rc == 0 && ds->nheads == 1 && ds->heads[0].loss == VT_LOSS_BCE &&
               ds->heads[0].nclasses == 1 && nbad == 0,
           "one tag: rc %d (%s), %d heads, %d classes, %d bad", rc, err, ds->nheads,
           ds->heads[0].nclasses, nbad);
    vt_dataset_free(&ds);
}

/* lists/classind-duplicate-name: classInd.txt "1 A" then "2A" (or "2 A") gave two classes
 * named A; every video of folder A took id 2 and class 1 was never trained. The open
 * must fail naming the file, the line and the class; distinct names still open. "2A"
 * is no longer "N Name" at all (a name is the rest of the line after the number's
 * whitespace, so that it may hold spaces): refused as such, with its line. */
static void classind_duplicate(const char *dir) {
    char data[4200], lists[4200], err[1024] = "";
    snprintf(data, sizeof data, "%s/lists-data", dir);
    snprintf(lists, sizeof lists, "%s/lists", dir);
    if (vt_test_sh("mkdir -p '%s/A' '%s/B' '%s' && touch '%s/A/a1.avi' '%s/B/b1.avi'", data,
                   data, lists, data, data) != 0)
        exit(1);
    vt_test_write_file(lists, "trainlist01.txt", "A/a1.avi 1\nB/b1.avi 2\n");
    vt_test_write_file(lists, "testlist01.txt", "");
    vt_dataset_opts o = {.lists_dir = lists, .list_fold = 1};
    static const char *const dups[] = {"1 A\n2 A\n", "1 A\n2 B\n3 A\n"};
    for (int i = 0; i < 2; i++) {
        vt_test_write_file(lists, "classInd.txt", dups[i]);
        err[0] = 0;
        vt_dataset *ds = vt_dataset_open(data, &o, err, sizeof err);
        TCHECK(ds == NULL && strstr(err, "classInd.txt:") && strstr(err, "'A' is listed twice"),
               "duplicate %d: opened (%d classes) or wrong reason '%s'", i,
               ds ? ds->heads[0].nclasses : -1, err);
        vt_dataset_free(&ds);
    }
    vt_test_write_file(lists, "classInd.txt", "1 A\n2A\n");
    vt_dataset *ds = vt_dataset_open(data, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "classInd.txt:2: expected \"2 ClassName\""),
           "\"2A\": opened or wrong reason '%s'", err);
    vt_dataset_free(&ds);
    vt_test_write_file(lists, "classInd.txt", "1 A\n2 B\n");
    ds = vt_dataset_open(data, &o, err, sizeof err);
    TCHECK(ds != NULL && ds->heads[0].nclasses == 2, "distinct names: %s", ds ? "" : err);
    vt_dataset_free(&ds);
}

/* safetensors/config-int-huge: a checkpoint's "vidtrain_config" (and RUN/config.json) with
 * an integer option of 9007199254740993 or 1e300: vt_train_opts_from_json converted it
 * with (int), UB (INT_MIN on x86, so a huge crop read as a negative one). Out-of-range
 * numbers now saturate (cJSON's valueint); max_steps out of int64_t reads as 0 (none). */
static void config_huge_numbers(void) {
    cJSON *j = cJSON_Parse("{\"crop\":1e300,\"clip_t\":-1e300,\"batch\":9007199254740993,"
                           "\"epochs\":12,\"max_steps\":1e300}");
    vt_train_opts o;
    vt_train_opts_default(&o);
    vt_train_opts_from_json(&o, j);
    TCHECK(o.crop == INT_MAX && o.clip_t == INT_MIN && o.batch == INT_MAX,
           "saturated: crop %d, clip_t %d, batch %d", o.crop, o.clip_t, o.batch);
    TCHECK(o.epochs == 12 && o.max_steps == 0, "epochs %d, max_steps %lld", o.epochs,
           (long long)o.max_steps);
    cJSON_Delete(j);
}

/* labels/added-rows-duplicate-video: rows that add unscanned files (appended, unsorted,
 * to the sorted videos) made the binary search for later rows miss scanned videos, which
 * were then added a second time: one file, two entries, trained twice an epoch. And
 * "A//0.mp4" or "A/./0.mp4" named a scanned file under a second spelling (another
 * duplicate), "../" a file outside the folder. Now: one entry per file, sorted; a path
 * is normalised; ".." is a bad line. */
static void labels_added_rows(const char *dir) {
    char data[4200], csv[4300], err[1024] = "";
    snprintf(data, sizeof data, "%s/added", dir);
    if (vt_test_sh("mkdir -p '%s/A' && touch '%s/A/0.mp4' '%s/00.mp4' '%s/01.mp4'", data, data,
                   data, data) != 0)
        exit(1);
    vt_test_write_file(dir, "added.csv",
                       "path,class\n00.mp4,x\n01.mp4,y\nA/0.mp4,x\n./A//./0.mp4,y\n"
                       "../added/A/0.mp4,z\n");
    snprintf(csv, sizeof csv, "%s/added.csv", dir);
    vt_dataset *ds = vt_dataset_open(data, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open %s: %s", data, err);
    if (!ds)
        return;
    int nbad = -1;
    int rc = vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err);
    TCHECK(rc == 0, "load: %s", err);
    int same = 0, sorted = 1;
    for (int i = 0; i < ds->nvideos; i++) {
        same += !strcmp(ds->videos[i].relpath, "A/0.mp4");
        sorted &= i == 0 || strcmp(ds->videos[i - 1].relpath, ds->videos[i].relpath) < 0;
    }
    TCHECK(ds->nvideos == 3 && same == 1 && sorted, "%d videos, A/0.mp4 %d times, sorted %d",
           ds->nvideos, same, sorted);
    /* The second spelling is the same video's second row; ".." leaves the folder. */
    TCHECK(nbad == 2, "%d bad lines, want 2 (a second row for A/0.mp4, a path with ..)", nbad);
    vt_dataset_free(&ds);
}

/* safetensors/config-crop-overflow: with a saturated crop (a configuration of crop 1e300)
 * vt_run_model_clip computed the default short side as crop * 8 / 7 in int, a signed
 * overflow (UB; negative in practice). It is computed in 64 bits and clamped. */
static void model_clip_overflow(void) {
    vt_run_model m;
    memset(&m, 0, sizeof m);
    vt_train_opts_default(&m.opts);
    m.opts.clip_t = 16;
    m.opts.crop = 112;
    vt_clip_cfg clip;
    vt_run_model_clip(&clip, &m);
    TCHECK(clip.short_side == 128, "crop 112: short side %d, want 128 (x 8/7)", clip.short_side);
    m.opts.crop = INT_MAX;
    vt_run_model_clip(&clip, &m);
    TCHECK(clip.short_side == INT32_MAX, "crop INT_MAX: short side %d, want INT32_MAX (clamped)",
           clip.short_side);
}

int main(void) {
    const char *dir = vt_test_dir("fuzz_regress");
    parse_bytes_limits();
    optim_nesterov_flag(dir);
    labels_bce_without_tags(dir);
    classind_duplicate(dir);
    config_huge_numbers();
    labels_added_rows(dir);
    model_clip_overflow();
    return vt_test_done("test_fuzz_regress");
}
