/*
 * jsonlines.h: reading the JSON lines `predict --timeline --json` (and predict --json)
 * print, for the tests that compare them (test_timeline, test_live). Header-only, like
 * testutil.h.
 */
#ifndef VT_JSONLINES_H
#define VT_JSONLINES_H

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "tests/testutil.h"

/* The file's lines, parsed (at most 99,999); a line that is not JSON fails the test.
 * Free with vt_free_lines. */
static inline cJSON **vt_read_lines(const char *path, int *n) {
    char *s = vt_test_slurp(path, NULL);
    cJSON **out = calloc(100000, sizeof *out);
    *n = 0;
    for (char *line = s ? strtok(s, "\n") : NULL; line && *n < 99999; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        TCHECK(j != NULL, "not a JSON line: %.200s", line);
        if (j)
            out[(*n)++] = j;
    }
    free(s);
    return out;
}

static inline void vt_free_lines(cJSON **l, int n) {
    for (int i = 0; i < n; i++)
        cJSON_Delete(l[i]);
    free(l);
}

/* prob of `label` in head 0's top list of a timeline line or a predict entry, -1 absent */
static inline double vt_prob_of(const cJSON *e, const char *label) {
    const cJSON *heads = cJSON_GetObjectItem(e, "heads");
    const cJSON *top = cJSON_GetObjectItem(cJSON_GetArrayItem(heads, 0), "top");
    for (const cJSON *p = top ? top->child : NULL; p; p = p->next)
        if (!strcmp(cJSON_GetObjectItem(p, "label")->valuestring, label))
            return cJSON_GetObjectItem(p, "prob")->valuedouble;
    return -1;
}

#endif
