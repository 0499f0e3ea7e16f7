/*
 * csv.h: the one CSV writer (RFC 4180) every CSV the program writes goes through
 * (confusion.csv, embed's FILE.csv, prep's manifest, prep-paths.csv and prep-segments.csv),
 * and the record splitter that reads our own CSVs back.
 *
 * A field is written as is unless it holds a comma, a double quote, a CR or a LF; then it
 * is quoted and each quote doubled. Bytes are never changed or dropped: a file or class
 * name with a newline or a byte that is not UTF-8 reads back as it was (Python's csv
 * module, spreadsheets). The writers that held their own copy had drifted: one did not
 * quote a CR (a reader took it for a line end), one wrote a newline as a space (the prep
 * manifest then named another file).
 */
#ifndef VT_CSV_H
#define VT_CSV_H

#include <stdio.h>

/* Writes s (NULL: empty) as one CSV field, quoted when it must be. */
void vt_csv_field(FILE *f, const char *s);
/* vt_csv_field, then ',' or, for the row's last field, '\n'. */
void vt_csv_put(FILE *f, const char *s, int last);
/* The next record of the text at *cursor, NUL-terminated in place (a newline inside a
 * quoted field is data, not the record's end; a CR before the end is dropped), *cursor
 * moved past it. NULL at the end of the text. The fields still hold their quotes. */
char *vt_csv_record(char **cursor);

#endif
