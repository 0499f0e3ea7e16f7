/*
 * protobuf.h: a writer of the protocol-buffers wire format, just enough to emit an ONNX
 * model (models/formats/onnx.c) and TensorBoard's events (app/eval/tensorboard.c):
 * varints, 32- and 64-bit floats, length-delimited fields (strings, bytes,
 * nested messages) into growable byte buffers. Nested messages are built bottom-up: the
 * inner message goes into a buffer of its own, whose length is then known, and is
 * appended to its parent as one length-delimited field.
 *
 * Why our own and not a library: libprotobuf with an onnx.pb generated from onnx.proto
 * is C++ only and adds a code-generation step to the build; protobuf-c needs the .proto
 * compiled at build time too (protoc-c). Writing the format is about a hundred lines,
 * and ONNX's schema is stable (field numbers never change), so the few field numbers
 * onnx.c needs are written there as constants.
 *
 * It only writes: it must never parse outside bytes (a reader would need a fuzz target,
 * docs/design.md §3.7) and never know about ONNX itself.
 */
#ifndef VT_PROTOBUF_H
#define VT_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer; all zeros is an empty one. */
typedef struct vt_pb {
    uint8_t *data;
    size_t len, cap;
} vt_pb;

/* Frees the bytes and leaves an empty buffer; takes NULL. */
void vt_pb_free(vt_pb *b);
/* Appends raw bytes (no tag): the payload of a field whose header vt_pb_len_header wrote. */
void vt_pb_raw(vt_pb *b, const void *p, size_t n);
/* Appends float32 values little-endian whatever the host's byte order (ONNX raw_data). */
void vt_pb_raw_f32le(vt_pb *b, const float *v, size_t n);
/* Bytes a varint of v takes (1 to 10). */
int vt_pb_varint_size(uint64_t v);

/* Fields. `field` is the field number of the .proto. */
void vt_pb_uint(vt_pb *b, int field, uint64_t v);     /* wire type 0: uint64, enum, int32 >= 0 */
void vt_pb_int(vt_pb *b, int field, int64_t v);       /* wire type 0: int64, int32 (two's complement) */
void vt_pb_float(vt_pb *b, int field, float v);       /* wire type 5 */
void vt_pb_double(vt_pb *b, int field, double v);     /* wire type 1, little-endian */
void vt_pb_bytes(vt_pb *b, int field, const void *p, size_t n); /* wire type 2 */
void vt_pb_string(vt_pb *b, int field, const char *s);
void vt_pb_msg(vt_pb *b, int field, const vt_pb *sub); /* a nested message, sub's bytes */
/* The tag and length of a length-delimited field whose n payload bytes the caller
 * appends next (large tensors go in without being built in a buffer of their own). */
void vt_pb_len_header(vt_pb *b, int field, uint64_t n);
/* Bytes that vt_pb_len_header(field, n) followed by n payload bytes take. */
uint64_t vt_pb_len_field_size(int field, uint64_t n);

#endif
