/*
 * protobuf.c: the wire-format writer of protobuf.h (varints, fixed32 floats,
 * length-delimited fields). Buffers grow by doubling through vt_realloc, which aborts on
 * out-of-memory like every host allocation here. It must never read outside bytes.
 */
#include "models/formats/protobuf.h"

#include <string.h>

#include "base/common.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

void vt_pb_free(vt_pb *b) {
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void pb_reserve(vt_pb *b, size_t n) {
    if (b->len + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n)
        cap *= 2;
    b->data = vt_realloc(b->data, cap);
    b->cap = cap;
}

void vt_pb_raw(vt_pb *b, const void *p, size_t n) {
    if (n == 0)
        return;
    pb_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void vt_pb_raw_f32le(vt_pb *b, const float *v, size_t n) {
    pb_reserve(b, 4 * n);
    uint8_t *o = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        o[4 * i + 0] = (uint8_t)u;
        o[4 * i + 1] = (uint8_t)(u >> 8);
        o[4 * i + 2] = (uint8_t)(u >> 16);
        o[4 * i + 3] = (uint8_t)(u >> 24);
    }
    b->len += 4 * n;
}

int vt_pb_varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static void pb_varint(vt_pb *b, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    vt_pb_raw(b, tmp, (size_t)n);
}

static void pb_tag(vt_pb *b, int field, int wire) {
    VT_CHECK(field > 0 && field < (1 << 29), "protobuf field number %d", field);
    pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

void vt_pb_uint(vt_pb *b, int field, uint64_t v) {
    pb_tag(b, field, WIRE_VARINT);
    pb_varint(b, v);
}

/* int32 and int64 are both sent as the 64-bit two's complement (a negative int32 takes
 * ten bytes): that is what protobuf's own encoders write, and parsers of either type
 * accept it. */
void vt_pb_int(vt_pb *b, int field, int64_t v) {
    pb_tag(b, field, WIRE_VARINT);
    pb_varint(b, (uint64_t)v);
}

void vt_pb_float(vt_pb *b, int field, float v) {
    pb_tag(b, field, WIRE_FIXED32);
    vt_pb_raw_f32le(b, &v, 1);
}

void vt_pb_double(vt_pb *b, int field, double v) {
    pb_tag(b, field, WIRE_FIXED64);
    uint64_t u;
    memcpy(&u, &v, 8);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(u >> (8 * i));
    vt_pb_raw(b, le, 8);
}

void vt_pb_len_header(vt_pb *b, int field, uint64_t n) {
    pb_tag(b, field, WIRE_LEN);
    pb_varint(b, n);
}

uint64_t vt_pb_len_field_size(int field, uint64_t n) {
    return (uint64_t)vt_pb_varint_size(((uint64_t)field << 3) | WIRE_LEN) +
           (uint64_t)vt_pb_varint_size(n) + n;
}

void vt_pb_bytes(vt_pb *b, int field, const void *p, size_t n) {
    vt_pb_len_header(b, field, n);
    vt_pb_raw(b, p, n);
}

void vt_pb_string(vt_pb *b, int field, const char *s) { vt_pb_bytes(b, field, s, strlen(s)); }

void vt_pb_msg(vt_pb *b, int field, const vt_pb *sub) { vt_pb_bytes(b, field, sub->data, sub->len); }
