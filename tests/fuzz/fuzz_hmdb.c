/*
 * fuzz_hmdb.c: libFuzzer target for HMDB51 split files (--lists DIR, format hmdb51;
 * pipeline/data/dataset/dataset_hmdb.c). The input is two split files, ApplyEyeMakeup's and
 * Basketball's for split 1, separated by a NUL byte (a missing part is a missing file),
 * read over a fresh scan of the small dataset folder (fuzz_dataset_util.h).
 *
 * Oracles besides the sanitizers: a refusal has a reason; an accepted folder leaves every
 * video train, test or in none, never val, labels within the classes, the videos sorted
 * and unique. It must never write outside its scratch folder.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipeline/data/dataset/dataset.h"
#include "tests/fuzz/fuzz_dataset_util.h"
#include "tests/fuzz/fuzz_util.h"

static const char *data_dir;
static char splits[1100];

static const char *const names[2] = {"ApplyEyeMakeup_test_split1.txt",
                                     "Basketball_test_split1.txt"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *s = vt_fuzz_scratch("hmdb");
    data_dir = vt_fuzz_make_dataset(s);
    vt_fuzz_path(s, "splits", splits, sizeof splits);
    mkdir(splits, 0755);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!data_dir)
        LLVMFuzzerInitialize(NULL, NULL);
    char *part[2];
    vt_fuzz_split(data, size, part, 2);
    for (int i = 0; i < 2; i++) {
        char p[1200];
        vt_fuzz_path(splits, names[i], p, sizeof p);
        if (part[i])
            vt_fuzz_write(p, part[i], strlen(part[i]));
        else
            unlink(p);
        free(part[i]);
    }
    vt_dataset_opts o = {.lists_dir = splits, .list_fold = 1, .lists_format = VT_LISTS_HMDB51};
    char err[1024] = "";
    vt_dataset *ds = vt_dataset_open(data_dir, &o, err, sizeof err);
    if (!ds) {
        FUZZ_ASSERT(err[0], "split files refused without a reason");
        return 0;
    }
    vt_fuzz_check_dataset(ds);
    for (int i = 0; i < ds->nvideos; i++)
        FUZZ_ASSERT(ds->videos[i].split != VT_SPLIT_VAL, "%s: val from split files",
                    ds->videos[i].relpath);
    vt_dataset_free(&ds);
    return 0;
}
