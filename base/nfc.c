/*
 * nfc.c: names in Unicode NFC (nfc.h).
 */
#include "base/nfc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <unistr.h>
#include <uninorm.h>

#include "base/common.h"

char *vt_nfc(const char *s) {
    if (!s)
        return NULL;
    const size_t n = strlen(s);
    int ascii = 1;
    for (size_t i = 0; i < n && ascii; i++)
        ascii = (unsigned char)s[i] < 0x80;
    if (ascii || u8_check((const uint8_t *)s, n) != NULL)
        return vt_strdup(s);
    size_t m = 0;
    uint8_t *u = u8_normalize(UNINORM_NFC, (const uint8_t *)s, n, NULL, &m);
    if (!u) /* out of memory: the one failure u8_normalize has on valid UTF-8 */
        VT_CHECK(0, "out of memory");
    char *out = vt_malloc(m + 1);
    memcpy(out, u, m);
    out[m] = 0;
    free(u);
    return out;
}
