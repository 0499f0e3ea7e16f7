/*
 * fuzz_kinetics.c: libFuzzer target for Kinetics annotation CSVs (--lists FILE.csv,
 * format kinetics; pipeline/data/dataset/dataset_kinetics.c): the input is the CSV, read over a
 * fresh scan of the small dataset folder (fuzz_dataset_util.h), whose loose.mp4 is an
 * "untrimmed" video for rows with youtube_id "loose" and whose class-folder videos are
 * found by name for rows whose id and times spell them.
 *
 * Oracles besides the sanitizers: a refusal has a reason; an accepted CSV leaves a
 * dataset sorted and unique by (path, segment), labels within the classes, every
 * segment with start < end, nsegments equal to the entries that are segments. It must
 * never write outside its scratch folder.
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
    const char *s = vt_fuzz_scratch("kinetics");
    data_dir = vt_fuzz_make_dataset(s);
    vt_fuzz_path(s, "k.csv", csv, sizeof csv);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!data_dir)
        LLVMFuzzerInitialize(NULL, NULL);
    vt_fuzz_write(csv, data, size);
    vt_dataset_opts o = {.lists_dir = csv, .lists_format = VT_LISTS_KINETICS,
                         .val_split = size % 3 == 0 ? 0.3 : 0};
    char err[1024] = "";
    vt_dataset *ds = vt_dataset_open(data_dir, &o, err, sizeof err);
    if (!ds) {
        FUZZ_ASSERT(err[0], "kinetics CSV refused without a reason");
        return 0;
    }
    vt_fuzz_check_dataset(ds);
    int nseg = 0;
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        nseg += vt_dataset_is_segment(v);
        FUZZ_ASSERT(!vt_dataset_is_segment(v) || v->seg_start < v->seg_end,
                    "%s: segment %g-%g", v->relpath, v->seg_start, v->seg_end);
    }
    FUZZ_ASSERT(nseg == ds->nsegments, "nsegments %d, counted %d", ds->nsegments, nseg);
    vt_dataset_free(&ds);
    return 0;
}
