/*
 * nfc.h: one spelling for a name that Unicode writes two ways. "café" is 'e' + U+0301
 * (NFD) in a folder made on a Mac (HFS+ and APFS file names as macOS's tools write them)
 * and U+00E9 (NFC) typed on Linux or Windows: the same name to anyone who reads it, two
 * byte strings to strcmp. A class named so in train/ and val/ (or in a folder and a
 * labels file, a run and the folder it evaluates) was two classes, one never trained.
 * Class names are compared in NFC, Unicode's composed form (libunistring's u8_normalize).
 */
#ifndef VT_NFC_H
#define VT_NFC_H

/* s in Unicode NFC, malloc'd (never NULL for s not NULL; NULL for NULL). Bytes that are
 * not UTF-8 come back as they are: such a name has no other spelling. */
char *vt_nfc(const char *s);

#endif
