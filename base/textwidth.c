/*
 * textwidth.c: terminal columns of UTF-8 text (textwidth.h).
 */
#include "base/textwidth.h"

#include <stdint.h>
#include <string.h>

#include "base/common.h"

/* Code point of the k-byte UTF-8 sequence at p (k from vt_utf8_len, so valid). */
static uint32_t decode(const unsigned char *p, size_t k) {
    if (k == 1)
        return p[0];
    uint32_t c = p[0] & (0x7f >> k);
    for (size_t i = 1; i < k; i++)
        c = c << 6 | (p[i] & 0x3f);
    return c;
}

/* Columns of code point c: the wide ranges are Markus Kuhn's wcwidth (East Asian Width
 * W and F) plus the emoji blocks; the zero-width ones the combining blocks a name is
 * likely to hold (a decomposed "é" is e + U+0301), zero-width spaces and joiners, and
 * variation selectors. A rarer mark counts as one column: its row is one off, no more. */
static int cols_of(uint32_t c) {
    if ((c >= 0x0300 && c <= 0x036f) || (c >= 0x1ab0 && c <= 0x1aff) ||
        (c >= 0x1dc0 && c <= 0x1dff) || (c >= 0x200b && c <= 0x200f) ||
        (c >= 0x20d0 && c <= 0x20ff) || (c >= 0xfe00 && c <= 0xfe0f) ||
        (c >= 0xfe20 && c <= 0xfe2f))
        return 0;
    if (c >= 0x1100 &&
        (c <= 0x115f || c == 0x2329 || c == 0x232a || (c >= 0x2e80 && c <= 0xa4cf && c != 0x303f) ||
         (c >= 0xac00 && c <= 0xd7a3) || (c >= 0xf900 && c <= 0xfaff) ||
         (c >= 0xfe10 && c <= 0xfe19) || (c >= 0xfe30 && c <= 0xfe6f) ||
         (c >= 0xff00 && c <= 0xff60) || (c >= 0xffe0 && c <= 0xffe6) ||
         (c >= 0x1f300 && c <= 0x1f64f) || (c >= 0x1f900 && c <= 0x1f9ff) ||
         (c >= 0x20000 && c <= 0x2fffd) || (c >= 0x30000 && c <= 0x3fffd)))
        return 2;
    return 1;
}

/* Bytes and columns of the character at p (n >= 1 bytes left): a byte that is not
 * UTF-8 is one of each. */
static size_t next_char(const unsigned char *p, size_t n, int *cols) {
    size_t k = vt_utf8_len(p, n);
    if (!k) {
        *cols = 1;
        return 1;
    }
    *cols = cols_of(decode(p, k));
    return k;
}

int vt_text_cols(const char *s) {
    if (!s)
        return 0;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    int w = 0;
    for (size_t i = 0; i < n;) {
        int c;
        i += next_char(u + i, n - i, &c);
        w += c;
    }
    return w;
}

void vt_text_pad(FILE *f, const char *s, int w) {
    const unsigned char *u = (const unsigned char *)(s ? s : "");
    size_t n = strlen((const char *)u), i = 0;
    int used = 0;
    while (i < n) {
        int c;
        size_t k = next_char(u + i, n - i, &c);
        if (used + c > w)
            break;
        used += c;
        i += k;
    }
    fwrite(u, 1, i, f);
    for (; used < w; used++)
        fputc(' ', f);
}
