/*
 * test_nfc.c: a class name spelt two ways by Unicode is one class (base/nfc.h). vt_nfc
 * against Python's unicodedata.normalize('NFC') (composition, the canonical order of
 * marks, Hangul, a singleton, a composition exclusion, text that is not UTF-8), then the
 * places a class name comes from: split folders made on a Mac (NFD) and on Linux (NFC),
 * a labels file, a UCF101 classInd list, and a run's config (vt_run_heads_from_json: an
 * older run keeps a name twice as it was). And names alike to a reader (case, spaces, '_',
 * '-': vt_dataset_like_classes), which scan and train name. Files are empty: names only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/run/run_heads.h"
#include "base/common.h"
#include "base/nfc.h"
#include "pipeline/data/dataset/dataset.h"
#include "tests/apputil.h"

#define CAFE_NFC "caf\xc3\xa9"   /* U+00E9 */
#define CAFE_NFD "cafe\xcc\x81"  /* e + U+0301 */

/* vt_nfc of each string against Python's NFC of the same bytes (hex in, hex out). */
static void against_python(void) {
    static const char *const cases[] = {
        "plain ascii", CAFE_NFD, CAFE_NFC,
        "e\xcc\xa3\xcc\x82",               /* e, dot below, circumflex: U+1EC7 */
        "e\xcc\x82\xcc\xa3",               /* the marks the other way round: the same */
        "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8", /* Hangul jamo: U+AC01 */
        "\xe2\x84\xab",                    /* ANGSTROM SIGN: a singleton, U+00C5 */
        "\xe0\xa4\x95\xe0\xa4\xbc",        /* KA + NUKTA: U+0958 is excluded from composing */
        "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", /* CJK, unchanged */
        "Apply Eye Makeup",
    };
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    for (size_t i = 0; i < VT_ARRAY_LEN(cases); i++) {
        char hex[256] = {0}, want[512] = {0};
        for (size_t k = 0; cases[i][k]; k++)
            snprintf(hex + 2 * k, sizeof hex - 2 * k, "%02x", (unsigned char)cases[i][k]);
        int rc = vt_test_sh_line(want, sizeof want,
                                 "'%s' -c 'import sys,unicodedata; print(unicodedata.normalize("
                                 "\"NFC\", bytes.fromhex(sys.argv[1]).decode()).encode().hex())' %s",
                                 py, hex);
        TCHECK(rc == 0 && want[0], "python's NFC of %s", hex);
        char *got = vt_nfc(cases[i]), ghex[512] = {0};
        for (size_t k = 0; got[k]; k++)
            snprintf(ghex + 2 * k, sizeof ghex - 2 * k, "%02x", (unsigned char)got[k]);
        TCHECK(!strcmp(ghex, want), "NFC of %s: %s, python %s", hex, ghex, want);
        free(got);
    }
    char *bad = vt_nfc("a\xff" "e\xcc\x81"); /* not UTF-8: no other spelling, as it is */
    TCHECK(!strcmp(bad, "a\xff" "e\xcc\x81"), "bytes that are not UTF-8 kept");
    free(bad);
    TCHECK(vt_nfc(NULL) == NULL, "NULL");
}

/* The class of rel in ds, or NULL. */
static const char *class_of(const vt_dataset *ds, const char *rel) {
    for (int i = 0; i < ds->nvideos; i++)
        if (!strcmp(ds->videos[i].relpath, rel))
            return ds->heads[0].classes[ds->videos[i].label[0]];
    return NULL;
}

static void folders_and_files(void) {
    const char *dir = vt_test_dir("nfc_folders");
    TCHECK(vt_test_sh("rm -rf '%s' && mkdir -p '%s'", dir, dir) == 0, "clean %s", dir);
    vt_test_touch(dir, "train/" CAFE_NFC "/1.mp4");
    vt_test_touch(dir, "train/tea/2.mp4");
    vt_test_touch(dir, "val/" CAFE_NFD "/3.mp4"); /* copied from a Mac */
    vt_test_touch(dir, "val/tea/4.mp4");
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    /* before: 3 classes, "café" twice, val's never trained and always wrong */
    TCHECK(ds->heads[0].nclasses == 2, "classes: %d, want café and tea", ds->heads[0].nclasses);
    const char *a = class_of(ds, "train/" CAFE_NFC "/1.mp4"), *b = class_of(ds, "val/" CAFE_NFD "/3.mp4");
    TCHECK(a && b && a == b && !strcmp(a, CAFE_NFC), "train's and val's café: one class, in NFC");
    vt_dataset_free(&ds);

    /* a labels file that spells it the other way round: the folder's class */
    const char *d2 = vt_test_dir("nfc_labels");
    TCHECK(vt_test_sh("rm -rf '%s' && mkdir -p '%s'", d2, d2) == 0, "clean %s", d2);
    vt_test_touch(d2, CAFE_NFD "/1.mp4");
    vt_test_touch(d2, "tea/2.mp4");
    vt_test_touch(d2, "x/3.mp4");
    vt_test_write_file(d2, "labels.csv", "path,class\n" CAFE_NFD "/1.mp4," CAFE_NFD
                                         "\ntea/2.mp4,tea\nx/3.mp4," CAFE_NFC "\n");
    char csv[4200];
    snprintf(csv, sizeof csv, "%s/labels.csv", d2);
    ds = vt_dataset_open(d2, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    int nbad = -1;
    TCHECK(vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err) == 0 && nbad == 0,
           "labels: %s", err);
    TCHECK(ds->heads[0].nclasses == 2, "labels' classes: %d, want 2", ds->heads[0].nclasses);
    a = class_of(ds, CAFE_NFD "/1.mp4");
    b = class_of(ds, "x/3.mp4");
    TCHECK(a && a == b && !strcmp(a, CAFE_NFC), "a labels file's two spellings: one class");
    vt_dataset_free(&ds);

    /* UCF101 lists: classInd typed (NFC), the class folder from a Mac (NFD) */
    const char *d3 = vt_test_dir("nfc_lists");
    char vids[4200], lists[4200];
    snprintf(vids, sizeof vids, "%s/videos", d3);
    snprintf(lists, sizeof lists, "%s/lists", d3);
    TCHECK(vt_test_sh("rm -rf '%s' && mkdir -p '%s' '%s'", d3, vids, lists) == 0, "clean");
    vt_test_touch(vids, CAFE_NFD "/v1.avi");
    vt_test_touch(vids, "tea/v2.avi");
    vt_test_write_file(lists, "classInd.txt", "1 " CAFE_NFC "\n2 tea\n");
    vt_test_write_file(lists, "trainlist01.txt", CAFE_NFD "/v1.avi 1\n");
    vt_test_write_file(lists, "testlist01.txt", "tea/v2.avi\n");
    vt_dataset_opts o = {.lists_dir = lists};
    ds = vt_dataset_open(vids, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    a = class_of(ds, CAFE_NFD "/v1.avi");
    TCHECK(ds->heads[0].nclasses == 2 && a && !strcmp(a, CAFE_NFC) &&
               vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 1,
           "classInd's café is the Mac folder's (%d classes, train %d)", ds->heads[0].nclasses,
           vt_dataset_split_count(ds, VT_SPLIT_TRAIN));
    vt_dataset_free(&ds);
}

/* A run's classes read in NFC; a run that learnt both spellings keeps them. */
static void run_heads(void) {
    char err[256];
    cJSON *j = cJSON_Parse("[{\"name\": \"class\", \"loss\": \"softmax\", \"classes\": [\"" CAFE_NFD
                           "\", \"tea\"]}]");
    vt_run_heads h = {0};
    TCHECK(vt_run_heads_from_json(&h, j, err, sizeof err) == 0, "heads: %s", err);
    TCHECK(h.n == 1 && !strcmp(h.classes[0][0], CAFE_NFC), "a run's café in NFC");
    vt_run_heads_free(&h);
    cJSON_Delete(j);
    j = cJSON_Parse("[{\"name\": \"class\", \"loss\": \"softmax\", \"classes\": [\"" CAFE_NFC
                    "\", \"" CAFE_NFD "\", \"tea\"]}]");
    TCHECK(vt_run_heads_from_json(&h, j, err, sizeof err) == 0, "heads: %s", err);
    TCHECK(h.n == 1 && !strcmp(h.classes[0][0], CAFE_NFC) && !strcmp(h.classes[0][1], CAFE_NFD),
           "both spellings kept as they were (one output each)");
    vt_run_heads_free(&h);
    cJSON_Delete(j);
}

/* Class names alike to a reader (case, spaces, '_', '-') are named as pairs; a name that
 * only begins like another is not one of them. */
static void alike(void) {
    const char *dir = vt_test_dir("nfc_alike");
    TCHECK(vt_test_sh("rm -rf '%s' && mkdir -p '%s'", dir, dir) == 0, "clean %s", dir);
    static const char *const names[] = {"Walk", "walk", "eye_makeup", "Eye  Makeup ", "t-shirt",
                                        "run", "running"};
    for (size_t i = 0; i < VT_ARRAY_LEN(names); i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "%s/1.mp4", names[i]);
        vt_test_touch(dir, rel);
    }
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    vt_like_classes *l = NULL;
    int n = vt_dataset_like_classes(ds, &l);
    char got[512] = {0};
    for (int i = 0; i < n; i++) {
        size_t at = strlen(got);
        snprintf(got + at, sizeof got - at, "[%s|%s]", ds->heads[0].classes[l[i].a],
                 ds->heads[0].classes[l[i].b]);
    }
    /* sorted class order: "Eye  Makeup ", "Walk", "eye_makeup", "run", "running", "t-shirt",
     * "walk" */
    TCHECK(!strcmp(got, "[Eye  Makeup |eye_makeup][Walk|walk]"), "alike: %s", got);
    free(l);
    vt_dataset_free(&ds);
}

int main(void) {
    against_python();
    folders_and_files();
    run_heads();
    alike();
    return vt_test_done("test_nfc");
}
