/*
 * json_str.h: every JSON text vidtrain writes is printed through vt_json_print, so it is
 * valid UTF-8 whatever the bytes of a file name in it (--json, eval.json, metrics.jsonl,
 * config.json, a checkpoint's metadata). cJSON copies a string's or a key's bytes as they
 * are; a name in another encoding would make the whole text invalid JSON. After printing,
 * every byte that is not part of a UTF-8 sequence becomes the character of its Latin-1
 * reading (base/common.h vt_utf8_clean): ASCII, and so the JSON structure, is untouched,
 * and the name stays identifiable.
 */
#ifndef VT_JSON_STR_H
#define VT_JSON_STR_H

#include <cjson/cJSON.h>
#include <stdlib.h>

#include "base/common.h"

/* cJSON_Print (formatted) or cJSON_PrintUnformatted, as valid UTF-8; free() it (or
 * cJSON_free, the same allocator); NULL when cJSON fails (out of memory). */
static inline char *vt_json_print(const cJSON *j, int formatted) {
    char *raw = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!raw)
        return NULL;
    char *clean = vt_utf8_clean(raw);
    cJSON_free(raw);
    return clean;
}

#endif
