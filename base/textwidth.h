/*
 * textwidth.h: how many terminal columns a text takes, for the tables the commands print
 * (scan's class table, eval's confusion matrix, predict's top classes). printf's "%-*s"
 * pads by bytes: a class named "café" (5 bytes, 4 columns) or "走る" (6 bytes, 4 columns)
 * pushed or pulled every count on its row out of line, and "%.*s" could cut a name inside
 * a character.
 *
 * A character is one column, but East Asian wide and fullwidth characters (CJK, Hangul,
 * fullwidth forms, emoji; Unicode's East Asian Width W and F) are two and the common
 * combining marks and zero-width characters none, as a terminal draws them; a byte that
 * is not UTF-8 is one (a terminal shows one replacement mark for it). It must never cut a
 * character in two or read past the string's end on any bytes.
 */
#ifndef VT_TEXTWIDTH_H
#define VT_TEXTWIDTH_H

#include <stdio.h>

/* Terminal columns of s (NULL: 0). */
int vt_text_cols(const char *s);
/* Writes s to f in exactly w columns: s up to the last whole character that fits in w,
 * then spaces to w. */
void vt_text_pad(FILE *f, const char *s, int w);

#endif
