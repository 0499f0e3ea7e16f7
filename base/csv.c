/*
 * csv.c: the CSV writer and record splitter (csv.h).
 */
#include "base/csv.h"

#include <string.h>

void vt_csv_field(FILE *f, const char *s) {
    if (!s)
        s = "";
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void vt_csv_put(FILE *f, const char *s, int last) {
    vt_csv_field(f, s);
    fputc(last ? '\n' : ',', f);
}

char *vt_csv_record(char **cursor) {
    char *p = *cursor, *q = p;
    if (!p || !*p)
        return NULL;
    int quoted = 0;
    for (; *q; q++) {
        if (*q == '"')
            quoted = !quoted; /* "" inside a quoted field toggles twice */
        else if (*q == '\n' && !quoted)
            break;
    }
    *cursor = *q ? q + 1 : q;
    *q = 0;
    if (q > p && q[-1] == '\r')
        q[-1] = 0;
    return p;
}
