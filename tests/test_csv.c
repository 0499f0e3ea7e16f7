/*
 * test_csv.c: the one CSV writer (base/csv.h) against Python's csv module, the outside
 * truth: rows of hostile fields (commas, quotes, CR, LF, CRLF, a lone quote, spaces at the
 * ends, an empty field, bytes that are not UTF-8, a field of only quotes) are written with
 * vt_csv_put and must read back from Python byte for byte, row for row. The two writers
 * this replaced failed it: one left a CR unquoted (Python ends the field there), one wrote
 * a newline as a space (the prep manifest then named another file).
 *
 * The record splitter vt_csv_record must cut the text back into the same records (a
 * quoted newline is data), with a CRLF line end dropped.
 */
#include <unistd.h>

#include "base/csv.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *const rows[][3] = {
    {"plain", "a,b", "say \"hi\""},
    {"line\nbreak", "cr\ronly", "crlf\r\nend"},
    {"\"", "\"\"", ""},
    {" spaces ", "caf\xc3\xa9", "lat\xe9n\xff"},
    {"-dash", "tab\there", "\"quoted\",\nall"},
};
#define NROWS (int)(sizeof rows / sizeof *rows)

int main(void) {
    const char *dir = vt_test_dir("csv");
    char csv[4200], want[4200];
    snprintf(csv, sizeof csv, "%s/hostile.csv", dir);
    snprintf(want, sizeof want, "%s/want.txt", dir);
    FILE *f = fopen(csv, "wb"), *w = fopen(want, "w");
    TCHECK(f && w, "cannot write %s", dir);
    if (!f || !w)
        return vt_test_done("test_csv");
    for (int r = 0; r < NROWS; r++)
        for (int c = 0; c < 3; c++) {
            vt_csv_put(f, rows[r][c], c == 2);
            for (const unsigned char *p = (const unsigned char *)rows[r][c]; *p; p++)
                fprintf(w, "%02x", *p);
            fputc(c == 2 ? '\n' : ' ', w);
        }
    TCHECK(fclose(f) == 0 && fclose(w) == 0, "closing");
    /* Python reads the file as bytes (latin-1 maps each byte to one character) */
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    int rc = vt_test_sh(
        "'%s' -c '\nimport csv, sys\n"
        "got = list(csv.reader(open(sys.argv[1], newline=\"\", encoding=\"latin-1\")))\n"
        "want = [[bytes.fromhex(x).decode(\"latin-1\") for x in l.split(\" \")]\n"
        "        for l in open(sys.argv[2]).read().split(\"\\n\") if l]\n"
        "sys.exit(0 if got == want else print(repr(got), repr(want), sep=\"\\n\") or 1)\n' "
        "'%s' '%s'", py, csv, want);
    TCHECK(rc == 0, "Python's csv module reads back other rows than were written (above)");

    /* vt_csv_record: the same records, a CRLF end dropped */
    char *text = vt_test_slurp(csv, NULL);
    TCHECK(text != NULL, "read %s", csv);
    int n = 0;
    for (char *cur = text, *rec; text && (rec = vt_csv_record(&cur)) != NULL; n++) {
        char line[512] = "";
        FILE *m = fmemopen(line, sizeof line, "w");
        for (int c = 0; m && n < NROWS && c < 3; c++)
            vt_csv_put(m, rows[n][c], c == 2);
        if (m)
            fclose(m);
        line[strlen(line) - 1] = 0; /* the '\n' vt_csv_put ended the row with */
        TCHECK(n < NROWS && !strcmp(rec, line), "record %d: '%s', want '%s'", n, rec, line);
    }
    TCHECK(n == NROWS, "%d records, want %d", n, NROWS);
    free(text);
    char crlf[] = "a,\"b\r\nc\"\r\nd\r\n", *cur = crlf;
    char *r1 = vt_csv_record(&cur), *r2 = vt_csv_record(&cur), *r3 = vt_csv_record(&cur);
    TCHECK(r1 && !strcmp(r1, "a,\"b\r\nc\"") && r2 && !strcmp(r2, "d") && !r3,
           "CRLF records: '%s' '%s' %p", r1 ? r1 : "(null)", r2 ? r2 : "(null)", (void *)r3);
    return vt_test_done("test_csv");
}
