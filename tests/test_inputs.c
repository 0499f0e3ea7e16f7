/*
 * test_inputs.c: every text file the dataset reads (labels.csv, UCF101 lists, HMDB51
 * split files, Kinetics CSVs) is read in full or refused. A NUL byte or bytes that are
 * not UTF-8 are an error naming the file and the line (they used to end the text at the
 * NUL, silently dropping every row after it, and a class could vanish).
 *
 * CSVs are RFC 4180: a quoted field may hold commas, "" and newlines (a quoted newline in
 * a Kinetics label used to make a class named 'line"'), an unclosed quote is refused with
 * file:line, and warnings cite the line a row starts on; a third copy of a row cites the
 * first, not the skipped second.
 *
 * A class folder that cannot be listed is an error naming it (it used to be dropped with
 * exit 0, shifting every later class id); as root, where chmod 000 stops nothing, the scan
 * runs as nobody (setpriv), or the case is skipped with a message. A one-class dataset is
 * refused by train with a hint (it used to train to "100%").
 *
 * `--` ends the options of every command (main.c): a folder named -d is scanned.
 *
 * scan's class table lines up for class names of any characters ("café", "走る"), by
 * terminal columns as Python's unicodedata counts them.
 *
 * Files are empty videos: only names and the list texts matter here.
 */
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/textwidth.h"
#include "pipeline/data/dataset/dataset.h"
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

/* stderr into $VT_TMP/inputs_stderr.txt while a call runs (testutil.h), so that warnings
 * can be checked in captured. */
static char *captured, cap_path[4096];
static void capture_begin(void) {
    snprintf(cap_path, sizeof cap_path, "%s/inputs_stderr.txt",
             vt_test_env("VT_TMP", "/tmp/vidtrain-tests"));
    vt_test_capture_begin(cap_path);
}
static void capture_end(void) {
    free(captured);
    captured = vt_test_capture_end(cap_path);
}

static void test_kinetics_csv(void) {
    const char *d = vt_test_dir("inputs_kinetics");
    char dir[4096], csv[4200], err[512];
    snprintf(dir, sizeof dir, "%s/k", d);
    mkdir(dir, 0755);
    mk(dir, "abseiling");
    write_bytes(dir, "abseiling/AAA_000002_000006.mp4", "", 0);
    write_bytes(dir, "BBB.mp4", "", 0); /* untrimmed: rows name segments of it */
    snprintf(csv, sizeof csv, "%s/k.csv", d);
    static const char quoted[] = "label,youtube_id,time_start,time_end,split\n" /* 1 */
                                 "abseiling,AAA,2,6,train\n"                   /* 2 */
                                 "\"two\nline, \"\"quoted\"\"\",CCC,0,5,train\n" /* 3-4 */
                                 "abseiling,BBB,4,9,train\n"                   /* 5 */
                                 "abseiling,BBB,4,9,train\n"                   /* 6 */
                                 "abseiling,BBB,4,9,train\n";                  /* 7 */
    write_bytes(d, "k.csv", quoted, sizeof quoted - 1);
    vt_dataset_opts o = {.lists_dir = csv};
    capture_begin();
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    capture_end();
    TCHECK(ds != NULL, "open: %s", err);
    if (ds) {
        int two = 0;
        for (int c = 0; c < ds->heads[0].nclasses; c++) {
            two += !strcmp(ds->heads[0].classes[c], "two\nline, \"quoted\"");
            TCHECK(!strstr(ds->heads[0].classes[c], "line\""), "class '%s'",
                   ds->heads[0].classes[c]);
        }
        TCHECK(ds->heads[0].nclasses == 2 && two == 1, "%d classes, the quoted one %d times",
               ds->heads[0].nclasses, two);
        TCHECK(strstr(captured, "k.csv:6: ") && strstr(captured, "k.csv:7: ") &&
                   !strstr(captured, "k.csv:6)"),
               "duplicate rows cite lines 6 and 7, both against line 5: %s", captured);
        char want[4300];
        snprintf(want, sizeof want, "first at %s:5)", csv);
        const char *w = strstr(captured, want);
        TCHECK(w && strstr(w + 1, want), "both duplicates cite line 5: %s", captured);
    }
    vt_dataset_free(&ds);

    static const char unclosed[] = "label,youtube_id,time_start,time_end,split\n"
                                   "abseiling,AAA,2,6,train\n"
                                   "\"open,CCC,0,5,train\n"
                                   "abseiling,BBB,4,9,train\n";
    write_bytes(d, "k.csv", unclosed, sizeof unclosed - 1);
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "k.csv:3:") && strstr(err, "not closed"), "unclosed: %s",
           err);
    vt_dataset_free(&ds);

    static const char nul[] = "label,youtube_id,time_start,time_end,split\n"
                              "abseiling,AAA,2,6,train\n"
                              "zumba,CCC,0,5,tr\0ain\n";
    write_bytes(d, "k.csv", nul, sizeof nul - 1);
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "k.csv:3:") && strstr(err, "NUL"), "NUL: %s", err);
    vt_dataset_free(&ds);
}

/* HMDB51: a split file with bytes that are not UTF-8 is refused with its line. */
static void test_hmdb_split(void) {
    const char *d = vt_test_dir("inputs_hmdb");
    char dir[4096], splits[4200], err[512];
    snprintf(dir, sizeof dir, "%s/videos", d);
    snprintf(splits, sizeof splits, "%s/splits", d);
    mkdir(dir, 0755);
    mkdir(splits, 0755);
    mk(dir, "run");
    mk(dir, "walk");
    write_bytes(dir, "run/r1.avi", "", 0);
    write_bytes(dir, "walk/w1.avi", "", 0);
    static const char run[] = "r1.avi 1 \n";
    write_bytes(splits, "run_test_split1.txt", run, sizeof run - 1);
    static const char walk[] = "w0.avi 1 \n\0w1.avi 2 \n";
    write_bytes(splits, "walk_test_split1.txt", walk, sizeof walk - 1);
    vt_dataset_opts o = {.lists_dir = splits};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "walk_test_split1.txt:2:") && strstr(err, "NUL"),
           "NUL in an HMDB split: %s", err);
    vt_dataset_free(&ds);
}

static const char *bin(void) { return vt_test_env("VT_BIN", "build/vidtrain"); }

static void test_unreadable_class(void) {
    const char *d = vt_test_dir("inputs_unreadable");
    char dir[4096], log[4200];
    snprintf(dir, sizeof dir, "%s/data", d);
    snprintf(log, sizeof log, "%s/scan.log", d);
    mkdir(dir, 0755);
    mk(dir, "a");
    mk(dir, "b");
    mk(dir, "c");
    write_bytes(dir, "a/1.mp4", "", 0);
    write_bytes(dir, "b/2.mp4", "", 0);
    write_bytes(dir, "c/3.mp4", "", 0);
    char b[4200];
    snprintf(b, sizeof b, "%s/b", dir);
    chmod(b, 0);
    const char *as = "";
    if (geteuid() == 0) {
        if (vt_test_sh("setpriv --reuid=65534 --regid=65534 --clear-groups true") != 0) {
            printf("SKIP unreadable class folder: running as root, where chmod 000 does not "
                   "stop reads, and setpriv cannot switch to nobody\n");
            chmod(b, 0755);
            return;
        }
        as = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
    int rc = vt_test_sh("%s'%s' scan '%s' > '%s' 2>&1", as, bin(), dir, log);
    chmod(b, 0755);
    char *out = vt_test_slurp(log, NULL);
    TCHECK(rc == 1 && out && strstr(out, "/data/b: cannot list this class folder") &&
               strstr(out, "Permission denied") && strstr(out, "chmod"),
           "an unreadable class folder: exit %d, %s", rc, out ? out : "(no log)");
    free(out);
}

static void test_one_class(void) {
    const char *d = vt_test_dir("inputs_one_class");
    char log[4200];
    snprintf(log, sizeof log, "%s/train.log", d);
    char data[4200];
    snprintf(data, sizeof data, "%s/data", d);
    mkdir(data, 0755);
    mk(data, "walk"); /* the check comes before any video is decoded: empty files do */
    write_bytes(data, "walk/1.mp4", "", 0);
    write_bytes(data, "walk/2.mp4", "", 0);
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' --model tiny --epochs 1 "
                        "--clip 4x32 --batch 2 -q > '%s' 2>&1", bin(), d, d, log);
    char *out = vt_test_slurp(log, NULL);
    TCHECK(rc == 1 && out && strstr(out, "has 1 class") && strstr(out, "at least 2"),
           "one class: exit %d, %s", rc, out ? out : "(no log)");
    free(out);
}

static void test_double_dash(void) {
    const char *d = vt_test_dir("inputs_dashdash");
    char data[4200], log[4200];
    snprintf(data, sizeof data, "%s/-d", d);
    snprintf(log, sizeof log, "%s/scan.log", d);
    mkdir(data, 0755);
    mk(data, "a");
    mk(data, "b");
    write_bytes(data, "a/1.mp4", "", 0);
    write_bytes(data, "b/2.mp4", "", 0);
    char b[4200];
    snprintf(b, sizeof b, "%s", bin());
    if (b[0] != '/') { /* relative to the test's folder, which the command leaves */
        char cwd[2048];
        snprintf(b, sizeof b, "%s/%s", getcwd(cwd, sizeof cwd) ? cwd : ".", bin());
    }
    int rc = vt_test_sh("cd '%s' && '%s' scan -- -d > '%s' 2>&1", d, b, log);
    char *out = vt_test_slurp(log, NULL);
    TCHECK(rc == 0 && out && strstr(out, "-d: class folders, 2 videos"), "scan -- -d: exit %d, %s",
           rc, out ? out : "(no log)");
    free(out);
    rc = vt_test_sh("cd '%s' && '%s' scan -d > '%s' 2>&1", d, b, log);
    TCHECK(rc == 2, "scan -d is still an unknown option: exit %d", rc);
}

/* Option errors say what the option takes (issue 41's wording defects): the range, not a
 * rule the value met ("positive", ">= 1"), and not another option's unit. */
static void test_wording(void) {
    const char *d = vt_test_dir("inputs_wording");
    char log[4200];
    snprintf(log, sizeof log, "%s/err.log", d);
    struct {
        const char *args, *want;
    } cases[] = {
        {"bench step --threads 100000 --steps 1", "from 1 to 4096"},
        {"plan --model tiny --classes 1e8", "from 1 to"},
        {"synth x --size 99999x99999", "up to 65536"},
        {"predict nowhere v.mp4 --timeline --batch 0", "--batch: expected a whole number from 1"},
        {"predict nowhere -", "with --timeline only"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int rc = vt_test_sh("cd '%s' && '%s' %s > '%s' 2>&1", d, bin(), cases[k].args, log);
        char *out = vt_test_slurp(log, NULL);
        TCHECK((rc == 1 || rc == 2) && out && strstr(out, cases[k].want), "%s: exit %d, wanted '%s' in: %s",
               cases[k].args, rc, cases[k].want, out ? out : "(no log)");
        TCHECK(!out || !strstr(out, "seconds: 2, 2s"), "%s: another option's unit", cases[k].args);
        free(out);
    }
}

/* JSON output is valid whatever the bytes of a file name (base/json_str.h): a class
 * folder and a video named in Latin-1 (0xe9, not UTF-8) give scan --json that Python's
 * json module reads, with the name as its Latin-1 reading. */
static void test_json_bytes(void) {
    const char *d = vt_test_dir("inputs_json");
    char data[4200];
    snprintf(data, sizeof data, "%s/data", d);
    mkdir(data, 0755);
    mk(data, "caf\xe9");
    mk(data, "plain");
    write_bytes(data, "caf\xe9/v\xe9.mp4", "not a video", 11);
    write_bytes(data, "plain/v.mp4", "not a video", 11);
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    int rc = vt_test_sh("cd '%s' && '%s' scan data --json > scan.json 2> scan.err; %s -c '"
                        "import json; j = json.load(open(\"scan.json\", encoding=\"utf-8\")); "
                        "assert \"caf\\u00e9\" in j[\"heads\"][0][\"classes\"], j'", d, bin(), py);
    TCHECK(rc == 0, "scan --json with a Latin-1 class name is valid JSON naming it (exit %d)", rc);
    char *c = vt_utf8_clean("a\xe9\xff\xc3\xa9z");
    TCHECK(c && !strcmp(c, "a\xc3\xa9\xc3\xbf\xc3\xa9z"), "vt_utf8_clean: %s", c ? c : "NULL");
    free(c);
}

/* scan's class table lines up whatever the class names' characters: printf padded by
 * bytes, so "café" (5 bytes) and "走る" (6) pulled or pushed their row's counts. The
 * truth is Python's unicodedata (East Asian Width W/F two columns, combining marks none):
 * every row of the table, header and total included, is as wide. */
static void test_scan_columns(void) {
    const char *d = vt_test_dir("inputs_columns");
    char data[4200];
    snprintf(data, sizeof data, "%s/data", d);
    mkdir(data, 0755);
    const char *names[] = {"caf\xc3\xa9", "\xe8\xb5\xb0\xe3\x82\x8b", "plain",
                           "e\xcc\x81x" /* e + a combining acute accent */};
    for (int i = 0; i < 4; i++) {
        char rel[64];
        vt_test_sh("mkdir -p '%s/%s'", data, names[i]);
        snprintf(rel, sizeof rel, "%s/v.mp4", names[i]);
        write_bytes(data, rel, "not a video", 11);
    }
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    int rc = vt_test_sh(
        "cd '%s' && '%s' scan data > scan.txt 2> scan.err; %s -c '\n"
        "import unicodedata as u\n"
        "def cols(s): return sum(0 if u.combining(c) else 2 if u.east_asian_width(c) in \"WF\" "
        "else 1 for c in s)\n"
        "t = open(\"scan.txt\", encoding=\"utf-8\").read().split(\"\\n\")\n"
        "a = next(i for i, l in enumerate(t) if l.startswith(\"  id \"))\n"
        "b = next(i for i, l in enumerate(t) if i > a and \" total \" in l)\n"
        "w = [cols(l) for l in t[a:b + 1]]\n"
        "assert b - a == 5 and len(set(w)) == 1, (w, t[a:b + 1])\n'",
        d, bin(), py);
    char log[4300];
    snprintf(log, sizeof log, "%s/scan.txt", d);
    char *out = vt_test_slurp(log, NULL);
    TCHECK(rc == 0, "scan's class table is out of line (exit %d):\n%s", rc, out ? out : "");
    free(out);

    /* the padding itself: never half a character, a bad byte one column */
    TCHECK(vt_text_cols("caf\xc3\xa9") == 4 && vt_text_cols("\xe8\xb5\xb0\xe3\x82\x8b") == 4 &&
               vt_text_cols("e\xcc\x81") == 1 && vt_text_cols("a\xe9") == 2 && vt_text_cols(NULL) == 0,
           "vt_text_cols");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    vt_text_pad(f, "\xe8\xb5\xb0\xe3\x82\x8b", 3);
    vt_text_pad(f, "|caf\xc3\xa9", 6);
    vt_text_pad(f, "|e\xcc\x81", 2);
    fclose(f);
    TCHECK(buf && !strcmp(buf, "\xe8\xb5\xb0 |caf\xc3\xa9 |e\xcc\x81"), "vt_text_pad: '%s'",
           buf ? buf : "");
    free(buf);
}

int main(void) {
    test_double_dash();
    test_wording();
    test_json_bytes();
    test_scan_columns();
    test_unreadable_class();
    test_one_class();
    test_kinetics_csv();
    test_hmdb_split();
    test_labels_csv();
    test_ucf_lists();
    return vt_test_done("test_inputs");
}
