/*
 * test_inputs.c: every text file the dataset reads (labels.csv, UCF101 lists, HMDB51
 * split files, Kinetics CSVs) is read in full or refused. A NUL byte or bytes that are
 * not UTF-8 are an error naming the file and the line (they used to end the text at the
 * NUL, silently dropping every row after it, and a class could vanish).
 *
 * Files are empty videos: only names and the list texts matter here.
 */
#include <sys/stat.h>

#include "models/common.h"
#include "pipeline/data/dataset.h"
#include "tests/apputil.h"

/* root/rel holding n bytes of data (NULs included). */
static void write_bytes(const char *root, const char *rel, const char *data, size_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void mk(const char *root, const char *rel) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    mkdir(path, 0755);
}

/* A labels.csv with a NUL in row 3, then one with a lone 0xff in row 2. */
static void test_labels_csv(void) {
    const char *d = vt_test_dir("inputs_labels");
    char dir[4096], csv[4200], err[512];
    snprintf(dir, sizeof dir, "%s", d);
    mk(dir, "A");
    mk(dir, "B");
    write_bytes(dir, "A/1.mp4", "", 0);
    write_bytes(dir, "B/2.mp4", "", 0);
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    snprintf(csv, sizeof csv, "%s/labels.csv", dir);
    static const char nul[] = "path,action\nA/1.mp4,run\nB/2.mp4,w\0alk\n";
    write_bytes(dir, "labels.csv", nul, sizeof nul - 1);
    int rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "labels.csv:3:") && strstr(err, "NUL"), "NUL: %s", err);
    static const char bad[] = "path,action\nA/1.mp4,r\xffun\nB/2.mp4,walk\n";
    write_bytes(dir, "labels.csv", bad, sizeof bad - 1);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "labels.csv:2:") && strstr(err, "UTF-8"), "0xff: %s", err);
    /* Overlong '/' and a UTF-16 surrogate are not UTF-8 either; real UTF-8 is fine. */
    static const char over[] = "path,action\nA/1.mp4,\xc0\xaf\n";
    write_bytes(dir, "labels.csv", over, sizeof over - 1);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "labels.csv:2:"), "overlong: %s", err);
    static const char sur[] = "path,action\nA/1.mp4,\xed\xa0\x80\n";
    write_bytes(dir, "labels.csv", sur, sizeof sur - 1);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "labels.csv:2:"), "surrogate: %s", err);
    static const char good[] = "\xef\xbb\xbfpath,action\nA/1.mp4,caf\xc3\xa9\nB/2.mp4,\xf0\x9f\x8f\x83\n";
    write_bytes(dir, "labels.csv", good, sizeof good - 1);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc == 0, "UTF-8 labels: %s", err);
    /* A folder given as the CSV is a read error, not an empty file. */
    rc = vt_dataset_load_labels(ds, dir, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "cannot read"), "folder as csv: %s", err);
    vt_dataset_free(&ds);
}

/* UCF101 lists: a NUL in trainlist01.txt used to drop the rows after it (a class gone). */
static void test_ucf_lists(void) {
    const char *d = vt_test_dir("inputs_lists");
    char dir[4096], lists[4200], err[512];
    snprintf(dir, sizeof dir, "%s/videos", d);
    snprintf(lists, sizeof lists, "%s/lists", d);
    mkdir(dir, 0755);
    mkdir(lists, 0755);
    mk(dir, "A");
    mk(dir, "B");
    write_bytes(dir, "A/a1.avi", "", 0);
    write_bytes(dir, "B/b1.avi", "", 0);
    static const char ind[] = "1 A\n2 B\n";
    write_bytes(lists, "classInd.txt", ind, sizeof ind - 1);
    static const char train[] = "A/a1.avi 1\n\0B/b1.avi 2\n";
    write_bytes(lists, "trainlist01.txt", train, sizeof train - 1);
    static const char test[] = "A/a1.avi\n";
    write_bytes(lists, "testlist01.txt", test, sizeof test - 1);
    vt_dataset_opts o = {.lists_dir = lists};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "trainlist01.txt:2:") && strstr(err, "NUL"),
           "NUL in trainlist: %s", err);
    vt_dataset_free(&ds);
    static const char ind2[] = "1 A\n2 \xe9t\xe9\n";
    write_bytes(lists, "classInd.txt", ind2, sizeof ind2 - 1);
    write_bytes(lists, "trainlist01.txt", "A/a1.avi 1\n", 11);
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "classInd.txt:2:") && strstr(err, "UTF-8"),
           "Latin-1 classInd: %s", err);
    vt_dataset_free(&ds);
}

int main(void) {
    test_labels_csv();
    test_ucf_lists();
    return vt_test_done("test_inputs");
}
