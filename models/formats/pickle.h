/*
 * pickle.h: the restricted unpickler behind models/pth.h — Python pickle protocols 2 to 5,
 * only the opcodes a torch.save(state_dict) pickle uses, and only the globals such a
 * pickle names (collections.OrderedDict, torch._utils._rebuild_tensor_v2 and its kin, the
 * torch.*Storage types). It builds an inert value graph (ints, floats, strings, tuples,
 * lists, dicts, storages, tensors) and never runs anything: a REDUCE is evaluated here, by
 * C code, only for the allow-listed callables, into a dict or a tensor description.
 * Any other global becomes an OPAQUE value that only carries its name: calling it
 * (REDUCE, NEWOBJ), giving it state (BUILD) or items makes another OPAQUE, nothing else
 * (a PySlowFast .pyth may hold a config object or a numpy scalar beside its weights).
 * Whoever reads the result refuses an OPAQUE where it needs a value (pth.c: in the
 * state_dict, or as the whole pickle) and may skip it elsewhere (vt_pkl_skipped).
 *
 * It must never look up a name outside the allow-list, never allocate more than the
 * input can justify (every length is checked against the bytes left, the memo, stack,
 * nesting and value counts are capped), and never abort on bad input: every refusal is
 * -1 with "offset N: reason" (the byte offset of the opcode in the pickle).
 */
#ifndef VT_PICKLE_H
#define VT_PICKLE_H

#include <stddef.h>
#include <stdint.h>

/* The element types of the torch.*Storage globals (what a tensor's bytes are). */
typedef enum vt_pkl_dtype {
    VT_PKL_F32, VT_PKL_F64, VT_PKL_F16, VT_PKL_BF16, VT_PKL_I64, VT_PKL_I32, VT_PKL_I16,
    VT_PKL_I8, VT_PKL_U8, VT_PKL_BOOL8, VT_PKL_NDTYPES
} vt_pkl_dtype;
int vt_pkl_dtype_size(vt_pkl_dtype d);
const char *vt_pkl_dtype_name(vt_pkl_dtype d);

/* The allow-list: each global a state_dict pickle may name. */
typedef enum vt_pkl_global {
    VT_PKL_G_ORDEREDDICT,
    VT_PKL_G_REBUILD_TENSOR_V2,
    VT_PKL_G_REBUILD_TENSOR,
    VT_PKL_G_REBUILD_PARAMETER,
    VT_PKL_G_REBUILD_PARAMETER_WITH_STATE,
    VT_PKL_G_STORAGE /* torch.<X>Storage: the value's dtype says which */
} vt_pkl_global;

typedef enum vt_pkl_kind {
    VT_PKL_NONE, VT_PKL_BOOL, VT_PKL_INT, VT_PKL_BIGINT, VT_PKL_FLOAT, VT_PKL_STR,
    VT_PKL_BYTES, VT_PKL_TUPLE, VT_PKL_LIST, VT_PKL_DICT, VT_PKL_GLOBAL, VT_PKL_STORAGE,
    VT_PKL_TENSOR,
    VT_PKL_OPAQUE /* a global outside the allow-list, or what calling it would make: s is
                     its "module.name", at the offset of the GLOBAL; never built or run */
} vt_pkl_kind;

/* What _rebuild_tensor(_v2) was called with, checked for shape only: whether it lies
 * within its storage is the caller's to check (the storage's size may come later). */
typedef struct vt_pkl_tensor {
    int storage;            /* index the persistent-load callback returned */
    vt_pkl_dtype dtype;     /* the storage's */
    int64_t offset;         /* in elements */
    int ndim;
    int64_t shape[8], stride[8];
    int64_t numel;          /* product of shape, checked for overflow */
    int64_t at;             /* pickle offset of the REDUCE that made it */
} vt_pkl_tensor;

/* One value. Containers hold pointers to values owned by the vt_pkl that made them (the
 * graph may share and even cycle through the memo, so nothing is freed one by one). */
typedef struct vt_pkl_val vt_pkl_val;
struct vt_pkl_val {
    vt_pkl_kind kind;
    int64_t i;             /* BOOL, INT; GLOBAL: vt_pkl_global; STORAGE: callback's index */
    int64_t at;            /* pickle offset of the opcode that made it (for messages) */
    double f;              /* FLOAT */
    char *s;               /* STR, BYTES, BIGINT (little-endian bytes): len bytes + NUL */
    size_t len;
    vt_pkl_val **items;    /* TUPLE, LIST: n items; DICT: n pairs as key, value, key, ... */
    int n, cap;
    vt_pkl_dtype dtype;    /* GLOBAL VT_PKL_G_STORAGE, STORAGE */
    vt_pkl_tensor *tensor; /* TENSOR */
};

/* The persistent-load hook (BINPERSID): pid is the value the pickler's persistent_id
 * returned; 0 with *index and *dtype set (a STORAGE value carrying them is pushed), or -1
 * with a reason in err (the unpickler adds the offset). */
typedef int (*vt_pkl_persid_fn)(void *ctx, const vt_pkl_val *pid, int *index,
                                vt_pkl_dtype *dtype, char *err, size_t errlen);

typedef struct vt_pkl vt_pkl;

/* A fresh unpickler; its values live until vt_pkl_free, across several vt_pkl_load calls
 * (the legacy format is five pickles back to back). */
vt_pkl *vt_pkl_new(vt_pkl_persid_fn persid, void *ctx);
void vt_pkl_free(vt_pkl **p);

/* Unpickles one pickle from buf[0, len) up to its STOP. 0 with *out the result and
 * *used the bytes it took, or -1 with err = "offset N: reason" (N counted from
 * buf + base, so a pickle inside a bigger file reports file offsets). */
int vt_pkl_load(vt_pkl *p, const uint8_t *buf, size_t len, size_t base, vt_pkl_val **out,
                size_t *used, char *err, size_t errlen);

/* "int", "dict", ...: what a value is, for messages. */
const char *vt_pkl_kind_name(vt_pkl_kind k);

/* The distinct "module.name"s that became OPAQUE values so far, ", "-separated, in order
 * of first use (a malloc'd string, "" when none). */
char *vt_pkl_skipped(const vt_pkl *p);

/* A dict's value under the string key (the last one when it repeats), or NULL. */
vt_pkl_val *vt_pkl_dict_get(const vt_pkl_val *dict, const char *key);

#endif
