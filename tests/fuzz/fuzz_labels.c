/*
 * fuzz_labels.c: libFuzzer target for labels.csv (vt_dataset_load_labels,
 * pipeline/data/dataset/dataset.h): the input is the CSV file, loaded onto a fresh scan of a
 * small dataset folder (fuzz_dataset_util.h), with --val-split on for one input in three
 * (by length) so the stratified re-split runs on the new heads too.
 *
 * Oracles besides the sanitizers: a refusal has a reason; an accepted file leaves a
 * dataset whose labels and tags are within their heads' classes, tags sorted and unique,
 * videos sorted and unique, the bad-line count non-negative. It must never write outside
 * its scratch folder.
 */
#include <stdint.h>
#include <string.h>

#include "pipeline/data/dataset/dataset.h"
#include "tests/fuzz/fuzz_dataset_util.h"
#include "tests/fuzz/fuzz_util.h"

static const char *data_dir;
static char csv[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *s = vt_fuzz_scratch("labels");
    data_dir = vt_fuzz_make_dataset(s);
    vt_fuzz_path(s, "labels.csv", csv, sizeof csv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!data_dir)
        LLVMFuzzerInitialize(NULL, NULL);
    vt_fuzz_write(csv, data, size);
    vt_dataset_opts o = {.val_split = size % 3 == 0 ? 0.3 : 0};
    char err[1024] = "";
    vt_dataset *ds = vt_dataset_open(data_dir, &o, err, sizeof err);
    FUZZ_ASSERT(ds != NULL, "the fixed dataset does not open: %s (harness)", err);
    int nbad = -1;
    err[0] = 0;
    if (vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err) == 0)
        vt_fuzz_check_dataset(ds);
    else
        FUZZ_ASSERT(err[0], "labels refused without a reason");
    FUZZ_ASSERT(nbad >= 0, "nbad %d", nbad);
    vt_dataset_free(&ds);
    return 0;
}
