/*
 * fuzz_lists.c: libFuzzer target for UCF101-style list files (the dataset's --lists
 * folder: classInd.txt, trainlist01.txt, testlist01.txt; pipeline/data/dataset/dataset.h). The
 * input is the three files in that order separated by NUL bytes (a missing part is a
 * missing file, as on disk); vt_dataset_open scans a small dataset folder
 * (fuzz_dataset_util.h) with them.
 *
 * Oracles besides the sanitizers: a refusal has a reason; an accepted set leaves every
 * video train, test or in no list, labelled exactly when it is in a list, with a class of
 * classInd.txt. It must never write outside its scratch folder.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/data/dataset/dataset.h"
#include "tests/fuzz/fuzz_dataset_util.h"
#include "tests/fuzz/fuzz_util.h"

static const char *data_dir;
static char lists[1100];

static const char *const names[3] = {"classInd.txt", "trainlist01.txt", "testlist01.txt"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *s = vt_fuzz_scratch("lists");
    data_dir = vt_fuzz_make_dataset(s);
    vt_fuzz_path(s, "lists", lists, sizeof lists);
    mkdir(lists, 0755);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!data_dir)
        LLVMFuzzerInitialize(NULL, NULL);
    char *part[3];
    vt_fuzz_split(data, size, part, 3);
    for (int i = 0; i < 3; i++) {
        char p[1200];
        vt_fuzz_path(lists, names[i], p, sizeof p);
        if (part[i])
            vt_fuzz_write(p, part[i], strlen(part[i]));
        else
            unlink(p);
        free(part[i]);
    }
    vt_dataset_opts o = {.lists_dir = lists, .list_fold = 1};
    char err[1024] = "";
    vt_dataset *ds = vt_dataset_open(data_dir, &o, err, sizeof err);
    if (!ds) {
        FUZZ_ASSERT(err[0], "lists refused without a reason");
        return 0;
    }
    FUZZ_ASSERT(ds->layout == VT_LAYOUT_LISTS, "layout %d", (int)ds->layout);
    vt_fuzz_check_dataset(ds);
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        FUZZ_ASSERT(v->split != VT_SPLIT_VAL, "%s: val from list files", v->relpath);
        FUZZ_ASSERT(v->labeled == (v->split != VT_SPLIT_NONE),
                    "%s: labeled %d but split %s", v->relpath, v->labeled,
                    vt_split_name(v->split));
    }
    vt_dataset_free(&ds);
    return 0;
}
