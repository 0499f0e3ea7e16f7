/*
 * sha256.h: SHA-256 (FIPS 180-4), for the checksums of downloaded weights (torchvision
 * names its files after a prefix of their SHA-256) and of re-encoded videos. It lives in
 * models/ beside common.c because every folder links models/; it knows nothing of files
 * beyond a helper that hashes one.
 *
 * It must never allocate: a context is a plain struct on the caller's stack.
 */
#ifndef VT_SHA256_H
#define VT_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct vt_sha256 {
    uint32_t h[8];
    uint64_t bytes;      /* message length so far */
    uint8_t buf[64];
    size_t nbuf;
} vt_sha256;

void vt_sha256_init(vt_sha256 *s);
void vt_sha256_update(vt_sha256 *s, const void *data, size_t n);
/* The digest as 64 lowercase hex digits and a NUL. */
void vt_sha256_hex(vt_sha256 *s, char hex[65]);
/* The file's digest in hex. 0, or -1 when it cannot be read. */
int vt_sha256_file(const char *path, char hex[65]);

#endif
