/*
 * pickle.c: the restricted unpickler (pickle.h). A loop over opcodes, a value stack, a
 * mark stack and a memo, as CPython's Unpickler has them, but with an allow-list where
 * CPython has find_class: GLOBAL and STACK_GLOBAL resolve only the names a state_dict
 * needs, and REDUCE calls only those, by C code that builds a dict or a tensor
 * description. Everything else a pickle can do (import any module, call any callable,
 * INST/OBJ/EXT, NEWOBJ of arbitrary classes, BUILD on an object) is refused.
 *
 * It must never execute, import or look up anything named by the input beyond the table
 * `allowed` below, never trust a length before comparing it with the bytes left, never
 * recurse over the value graph (it may be deep or cyclic), and never abort on bad input.
 */
#include "models/formats/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

/* Caps far above what torch.save writes (a state_dict pickle of r3d_18 holds about 3000
 * values, a stack a few dozen deep, 1000-item APPENDS batches) and low enough that a
 * hostile pickle cannot make us allocate more than a few hundred MB. */
#define PKL_MAX_VALUES (1 << 22)
#define PKL_MAX_STACK (1 << 16)
#define PKL_MAX_MARKS 1024  /* nesting of MARKs: CPython's own recursion limit is 1000 */
#define PKL_MAX_NAME 256    /* a GLOBAL's module or name */
#define PKL_MAX_BIGINT 16   /* LONG1/LONG4 bytes kept (the legacy format's magic is 10) */

struct vt_pkl {
    vt_pkl_persid_fn persid;
    void *ctx;
    vt_pkl_val **all; /* every value made, for vt_pkl_free */
    int nall, capall;
    vt_pkl_val **stack;
    int sp, capstack;
    int marks[PKL_MAX_MARKS];
    int nmarks;
    vt_pkl_val **memo;
    int nmemo, capmemo;
    /* the pickle being read */
    const uint8_t *buf;
    size_t len, pos, base, op;
    char *err;
    size_t errlen;
};

static const struct {
    const char *module, *name;
    vt_pkl_global g;
    vt_pkl_dtype dtype;
} allowed[] = {
    {"collections", "OrderedDict", VT_PKL_G_ORDEREDDICT, 0},
    {"torch._utils", "_rebuild_tensor_v2", VT_PKL_G_REBUILD_TENSOR_V2, 0},
    {"torch._utils", "_rebuild_tensor", VT_PKL_G_REBUILD_TENSOR, 0},
    {"torch._utils", "_rebuild_parameter", VT_PKL_G_REBUILD_PARAMETER, 0},
    {"torch._utils", "_rebuild_parameter_with_state", VT_PKL_G_REBUILD_PARAMETER_WITH_STATE, 0},
    {"torch", "FloatStorage", VT_PKL_G_STORAGE, VT_PKL_F32},
    {"torch", "DoubleStorage", VT_PKL_G_STORAGE, VT_PKL_F64},
    {"torch", "HalfStorage", VT_PKL_G_STORAGE, VT_PKL_F16},
    {"torch", "BFloat16Storage", VT_PKL_G_STORAGE, VT_PKL_BF16},
    {"torch", "LongStorage", VT_PKL_G_STORAGE, VT_PKL_I64},
    {"torch", "IntStorage", VT_PKL_G_STORAGE, VT_PKL_I32},
    {"torch", "ShortStorage", VT_PKL_G_STORAGE, VT_PKL_I16},
    {"torch", "CharStorage", VT_PKL_G_STORAGE, VT_PKL_I8},
    {"torch", "ByteStorage", VT_PKL_G_STORAGE, VT_PKL_U8},
    {"torch", "BoolStorage", VT_PKL_G_STORAGE, VT_PKL_BOOL8},
};

static const char *const global_names[] = {
    "collections.OrderedDict", "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor", "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state", "torch.*Storage"};

int vt_pkl_dtype_size(vt_pkl_dtype d) {
    static const int size[VT_PKL_NDTYPES] = {4, 8, 2, 2, 8, 4, 2, 1, 1, 1};
    return d >= 0 && d < VT_PKL_NDTYPES ? size[d] : 0;
}

const char *vt_pkl_dtype_name(vt_pkl_dtype d) {
    static const char *const name[VT_PKL_NDTYPES] = {
        "float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
        "uint8", "bool"};
    return d >= 0 && d < VT_PKL_NDTYPES ? name[d] : "?";
}

const char *vt_pkl_kind_name(vt_pkl_kind k) {
    static const char *const name[] = {"None", "bool", "int", "int", "float", "str",
                                       "bytes", "tuple", "list", "dict", "global",
                                       "storage", "tensor"};
    return k >= 0 && k <= VT_PKL_TENSOR ? name[k] : "?";
}

/* ---- values ---- */

vt_pkl *vt_pkl_new(vt_pkl_persid_fn persid, void *ctx) {
    vt_pkl *p = vt_calloc(1, sizeof *p);
    p->persid = persid;
    p->ctx = ctx;
    return p;
}

void vt_pkl_free(vt_pkl **pp) {
    if (!pp || !*pp)
        return;
    vt_pkl *p = *pp;
    for (int i = 0; i < p->nall; i++) {
        free(p->all[i]->s);
        free(p->all[i]->items);
        free(p->all[i]->tensor);
        free(p->all[i]);
    }
    free(p->all);
    free(p->stack);
    free(p->memo);
    free(p);
    *pp = NULL;
}

/* The refusal: "offset N: reason", N the opcode's offset. Always -1. */
static int bad(vt_pkl *p, const char *fmt, ...) VT_PRINTF(2, 3);
static int bad(vt_pkl *p, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vt_set_err(p->err, p->errlen, "offset %zu: %s", p->base + p->op, msg);
    return -1;
}

static vt_pkl_val *val_new(vt_pkl *p, vt_pkl_kind kind) {
    if (p->nall >= PKL_MAX_VALUES) {
        bad(p, "more than %d values (no state_dict is that big)", PKL_MAX_VALUES);
        return NULL;
    }
    if (p->nall == p->capall) {
        p->capall = p->capall ? 2 * p->capall : 256;
        p->all = vt_realloc(p->all, (size_t)p->capall * sizeof *p->all);
    }
    vt_pkl_val *v = vt_calloc(1, sizeof *v);
    v->kind = kind;
    v->at = (int64_t)(p->base + p->op);
    p->all[p->nall++] = v;
    return v;
}

/* Appends to a container. The item count is bounded by the input: each item was pushed
 * by at least one byte of it. */
static void val_add(vt_pkl_val *c, vt_pkl_val *item) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 4;
        c->items = vt_realloc(c->items, (size_t)c->cap * sizeof *c->items);
    }
    c->items[c->n++] = item;
}

vt_pkl_val *vt_pkl_dict_get(const vt_pkl_val *dict, const char *key) {
    vt_pkl_val *found = NULL;
    if (!dict || dict->kind != VT_PKL_DICT)
        return NULL;
    size_t klen = strlen(key);
    for (int i = 0; i + 1 < dict->n; i += 2) {
        const vt_pkl_val *k = dict->items[i];
        if (k->kind == VT_PKL_STR && k->len == klen && !memcmp(k->s, key, klen))
            found = dict->items[i + 1];
    }
    return found;
}

/* ---- the stack ---- */

static int push(vt_pkl *p, vt_pkl_val *v) {
    if (!v)
        return -1;
    if (p->sp >= PKL_MAX_STACK)
        return bad(p, "stack deeper than %d (nested too deeply for a state_dict)", PKL_MAX_STACK);
    if (p->sp == p->capstack) {
        p->capstack = p->capstack ? 2 * p->capstack : 64;
        p->stack = vt_realloc(p->stack, (size_t)p->capstack * sizeof *p->stack);
    }
    p->stack[p->sp++] = v;
    return 0;
}

/* The bottom of the current mark's frame: a value below it cannot be popped. */
static int frame_floor(const vt_pkl *p) { return p->nmarks ? p->marks[p->nmarks - 1] : 0; }

static vt_pkl_val *pop(vt_pkl *p, const char *what) {
    if (p->sp <= frame_floor(p)) {
        bad(p, "%s on an empty stack", what);
        return NULL;
    }
    return p->stack[--p->sp];
}

static vt_pkl_val *top(vt_pkl *p, const char *what) {
    if (p->sp <= frame_floor(p)) {
        bad(p, "%s on an empty stack", what);
        return NULL;
    }
    return p->stack[p->sp - 1];
}

/* Pops the last MARK: *k is where its items start on the stack (they are stack[*k, sp)). */
static int pop_mark(vt_pkl *p, const char *what, int *k) {
    if (!p->nmarks)
        return bad(p, "%s without a MARK", what);
    *k = p->marks[--p->nmarks];
    return 0;
}

/* ---- reading ---- */

static int need(vt_pkl *p, size_t n, const char *what) {
    if (n > p->len - p->pos)
        return bad(p, "%s needs %zu bytes, %zu left (truncated)", what, n, p->len - p->pos);
    return 0;
}

static uint64_t le(const uint8_t *b, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* n bytes at pos as a string value (STR, BYTES or BIGINT), n already checked. */
static vt_pkl_val *bytes_val(vt_pkl *p, vt_pkl_kind kind, size_t n) {
    vt_pkl_val *v = val_new(p, kind);
    if (!v)
        return NULL;
    v->s = vt_malloc(n + 1);
    memcpy(v->s, p->buf + p->pos, n);
    v->s[n] = 0;
    v->len = n;
    p->pos += n;
    return v;
}

/* A length of lenbytes bytes, then that many bytes: BINUNICODE, BINBYTES, ... */
static int op_string(vt_pkl *p, vt_pkl_kind kind, int lenbytes, int is_signed, const char *what) {
    if (need(p, (size_t)lenbytes, what))
        return -1;
    uint64_t n = le(p->buf + p->pos, lenbytes);
    if (is_signed && (n & 0x80000000u))
        return bad(p, "%s of negative length", what);
    p->pos += (size_t)lenbytes;
    if (n > p->len - p->pos)
        return bad(p, "%s of %llu bytes, %zu left (truncated or corrupt)", what,
                   (unsigned long long)n, p->len - p->pos);
    return push(p, bytes_val(p, kind, (size_t)n));
}

/* LONG1/LONG4: two's complement little-endian. Up to 8 bytes it is an int; up to 16 a
 * BIGINT kept as bytes (only ever compared: the legacy magic number). */
static int op_long(vt_pkl *p, int lenbytes) {
    if (need(p, (size_t)lenbytes, "LONG"))
        return -1;
    uint64_t n = le(p->buf + p->pos, lenbytes);
    p->pos += (size_t)lenbytes;
    if (n > PKL_MAX_BIGINT)
        return bad(p, "integer of %llu bytes (at most %d are read)", (unsigned long long)n,
                   PKL_MAX_BIGINT);
    if (need(p, (size_t)n, "LONG"))
        return -1;
    if (n > 8)
        return push(p, bytes_val(p, VT_PKL_BIGINT, (size_t)n));
    uint64_t u = le(p->buf + p->pos, (int)n);
    if (n > 0 && n < 8 && (p->buf[p->pos + n - 1] & 0x80))
        u |= ~(uint64_t)0 << (8 * n); /* sign-extend */
    p->pos += (size_t)n;
    vt_pkl_val *v = val_new(p, VT_PKL_INT);
    if (v)
        memcpy(&v->i, &u, sizeof u);
    return push(p, v);
}

static int op_int(vt_pkl *p, int nbytes, int is_signed) {
    if (need(p, (size_t)nbytes, "BININT"))
        return -1;
    uint64_t u = le(p->buf + p->pos, nbytes);
    p->pos += (size_t)nbytes;
    vt_pkl_val *v = val_new(p, VT_PKL_INT);
    if (v)
        v->i = is_signed ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
    return push(p, v);
}

/* The printable form of a module.name from the file, for messages. */
static void name_for_msg(char *out, size_t n, const char *mod, size_t mlen, const char *name,
                         size_t nlen) {
    size_t o = 0;
    for (size_t i = 0; i < mlen + 1 + nlen && o + 1 < n && i < 120; i++) {
        char c = i < mlen ? mod[i] : i == mlen ? '.' : name[i - mlen - 1];
        out[o++] = c >= 0x20 && c < 0x7f && c != '\'' ? c : '?';
    }
    out[o] = 0;
}

/* The allow-list lookup: a GLOBAL value, or a refusal naming what was asked for. */
static int resolve(vt_pkl *p, const char *mod, size_t mlen, const char *name, size_t nlen) {
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
        if (strlen(allowed[i].module) == mlen && !memcmp(allowed[i].module, mod, mlen) &&
            strlen(allowed[i].name) == nlen && !memcmp(allowed[i].name, name, nlen)) {
            vt_pkl_val *v = val_new(p, VT_PKL_GLOBAL);
            if (v) {
                v->i = allowed[i].g;
                v->dtype = allowed[i].dtype;
            }
            return push(p, v);
        }
    char shown[128];
    name_for_msg(shown, sizeof shown, mod, mlen, name, nlen);
    return bad(p, "global '%s' is not allowed (a checkpoint may only hold tensors)", shown);
}

/* GLOBAL: "module\nname\n". */
static int op_global(vt_pkl *p) {
    const char *part[2];
    size_t plen[2];
    for (int k = 0; k < 2; k++) {
        const uint8_t *s = p->buf + p->pos;
        size_t left = p->len - p->pos, lim = left < PKL_MAX_NAME + 1 ? left : PKL_MAX_NAME + 1;
        const uint8_t *nl = memchr(s, '\n', lim);
        if (!nl)
            return bad(p, "GLOBAL without a newline in %d bytes (truncated or corrupt)",
                       PKL_MAX_NAME);
        part[k] = (const char *)s;
        plen[k] = (size_t)(nl - s);
        p->pos += plen[k] + 1;
    }
    return resolve(p, part[0], plen[0], part[1], plen[1]);
}

static int op_stack_global(vt_pkl *p) {
    vt_pkl_val *name = pop(p, "STACK_GLOBAL"), *mod = name ? pop(p, "STACK_GLOBAL") : NULL;
    if (!mod)
        return -1;
    if (mod->kind != VT_PKL_STR || name->kind != VT_PKL_STR)
        return bad(p, "STACK_GLOBAL of a %s and a %s (two str expected)",
                   vt_pkl_kind_name(mod->kind), vt_pkl_kind_name(name->kind));
    return resolve(p, mod->s, mod->len, name->s, name->len);
}

static int memo_put(vt_pkl *p, uint64_t idx) {
    vt_pkl_val *v = top(p, "PUT");
    if (!v)
        return -1;
    /* Python's pickler numbers its memo 0, 1, 2, ...: an index past the next one only
     * ever comes from a crafted file, and would make us allocate for it. */
    if (idx > (uint64_t)p->nmemo)
        return bad(p, "memo index %llu out of sequence (next is %d)", (unsigned long long)idx,
                   p->nmemo);
    if (idx == (uint64_t)p->nmemo) {
        if (p->nmemo == p->capmemo) {
            p->capmemo = p->capmemo ? 2 * p->capmemo : 256;
            p->memo = vt_realloc(p->memo, (size_t)p->capmemo * sizeof *p->memo);
        }
        p->nmemo++;
    }
    p->memo[idx] = v;
    return 0;
}

static int memo_get(vt_pkl *p, uint64_t idx) {
    if (idx >= (uint64_t)p->nmemo)
        return bad(p, "memo index %llu was never stored", (unsigned long long)idx);
    return push(p, p->memo[idx]);
}

/* ---- REDUCE of the allow-listed callables ---- */

static int int_tuple(vt_pkl *p, const vt_pkl_val *t, int64_t *out, int *n, const char *what) {
    if (t->kind != VT_PKL_TUPLE && t->kind != VT_PKL_LIST)
        return bad(p, "tensor %s is a %s (a tuple of ints expected)", what,
                   vt_pkl_kind_name(t->kind));
    if (t->n > 8)
        return bad(p, "tensor of %d dimensions (at most 8 are read)", t->n);
    for (int i = 0; i < t->n; i++) {
        if (t->items[i]->kind != VT_PKL_INT || t->items[i]->i < 0)
            return bad(p, "tensor %s[%d] is not an int >= 0", what, i);
        out[i] = t->items[i]->i;
    }
    *n = t->n;
    return 0;
}

/* _rebuild_tensor(storage, offset, size, stride) and _v2(..., requires_grad, hooks[,
 * metadata]): a tensor description; whether it fits its storage is the caller's check. */
static vt_pkl_val *rebuild_tensor(vt_pkl *p, const vt_pkl_val *args, int v2) {
    if (v2 ? args->n != 6 && args->n != 7 : args->n != 4) {
        bad(p, "_rebuild_tensor%s with %d arguments", v2 ? "_v2" : "", args->n);
        return NULL;
    }
    vt_pkl_val *const *a = args->items;
    if (a[0]->kind != VT_PKL_STORAGE || a[1]->kind != VT_PKL_INT || a[1]->i < 0) {
        bad(p, "_rebuild_tensor of a %s at offset %s (a storage and an int >= 0 expected)",
            vt_pkl_kind_name(a[0]->kind), vt_pkl_kind_name(a[1]->kind));
        return NULL;
    }
    if (v2 && ((a[4]->kind != VT_PKL_BOOL && a[4]->kind != VT_PKL_INT) ||
               (a[5]->kind != VT_PKL_DICT && a[5]->kind != VT_PKL_NONE))) {
        bad(p, "_rebuild_tensor_v2 with requires_grad a %s and hooks a %s",
            vt_pkl_kind_name(a[4]->kind), vt_pkl_kind_name(a[5]->kind));
        return NULL;
    }
    vt_pkl_tensor t = {.storage = (int)a[0]->i, .dtype = a[0]->dtype, .offset = a[1]->i,
                       .at = (int64_t)(p->base + p->op)};
    int ns = 0, nst = 0;
    if (int_tuple(p, a[2], t.shape, &ns, "size") || int_tuple(p, a[3], t.stride, &nst, "stride"))
        return NULL;
    if (ns != nst) {
        bad(p, "tensor of %d sizes and %d strides", ns, nst);
        return NULL;
    }
    t.ndim = ns;
    t.numel = 1;
    for (int d = 0; d < ns; d++)
        if (__builtin_mul_overflow(t.numel, t.shape[d], &t.numel) || t.numel > (1LL << 62)) {
            bad(p, "tensor of more than 2^62 elements");
            return NULL;
        }
    vt_pkl_val *v = val_new(p, VT_PKL_TENSOR);
    if (v) {
        v->tensor = vt_malloc(sizeof t);
        *v->tensor = t;
    }
    return v;
}

static int op_reduce(vt_pkl *p) {
    vt_pkl_val *args = pop(p, "REDUCE"), *fn = args ? pop(p, "REDUCE") : NULL;
    if (!fn)
        return -1;
    if (fn->kind != VT_PKL_GLOBAL)
        return bad(p, "REDUCE calls a %s (only allow-listed globals are called)",
                   vt_pkl_kind_name(fn->kind));
    if (args->kind != VT_PKL_TUPLE)
        return bad(p, "REDUCE of %s with a %s as arguments", global_names[fn->i],
                   vt_pkl_kind_name(args->kind));
    switch ((vt_pkl_global)fn->i) {
    case VT_PKL_G_ORDEREDDICT:
        /* OrderedDict.__reduce__ passes no arguments; the items come by SETITEMS. */
        if (args->n != 0)
            return bad(p, "OrderedDict called with %d arguments (0 expected)", args->n);
        return push(p, val_new(p, VT_PKL_DICT));
    case VT_PKL_G_REBUILD_TENSOR_V2:
    case VT_PKL_G_REBUILD_TENSOR: {
        vt_pkl_val *t = rebuild_tensor(p, args, fn->i == VT_PKL_G_REBUILD_TENSOR_V2);
        return t ? push(p, t) : -1;
    }
    case VT_PKL_G_REBUILD_PARAMETER:
    case VT_PKL_G_REBUILD_PARAMETER_WITH_STATE: {
        /* (data, requires_grad, backward_hooks[, state]): a Parameter is its data here. */
        int want = fn->i == VT_PKL_G_REBUILD_PARAMETER ? 3 : 4;
        if (args->n != want || args->items[0]->kind != VT_PKL_TENSOR)
            return bad(p, "%s with %d arguments, the first a %s", global_names[fn->i], args->n,
                       args->n ? vt_pkl_kind_name(args->items[0]->kind) : "none");
        return push(p, args->items[0]);
    }
    case VT_PKL_G_STORAGE:
        break;
    }
    const char *storage_name = "?";
    for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
        if (allowed[i].g == VT_PKL_G_STORAGE && allowed[i].dtype == fn->dtype)
            storage_name = allowed[i].name;
    return bad(p, "global torch.%s is not callable here (storages come by persistent id)",
               storage_name);
}

/* ---- the opcode loop ---- */

/* Opcodes that exist but that no state_dict pickle uses: refused by name. */
static const char *refused_name(int op) {
    switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x82: case 0x83: case 0x84: return "EXT";
    case 'P': return "PERSID";
    case 0x92: return "NEWOBJ_EX";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'F': return "FLOAT";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '2': return "DUP";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return NULL;
    }
}

/* Builds a tuple, list or dict from the items above the last MARK. */
static int op_from_mark(vt_pkl *p, vt_pkl_kind kind, const char *what) {
    int k = 0;
    if (pop_mark(p, what, &k))
        return -1;
    if (kind == VT_PKL_DICT && (p->sp - k) % 2)
        return bad(p, "DICT of an odd number of items");
    vt_pkl_val *v = val_new(p, kind);
    if (!v)
        return -1;
    for (int i = k; i < p->sp; i++)
        val_add(v, p->stack[i]);
    p->sp = k;
    return push(p, v);
}

static int op_tuple_n(vt_pkl *p, int n) {
    if (p->sp - frame_floor(p) < n)
        return bad(p, "TUPLE%d on a stack of %d", n, p->sp - frame_floor(p));
    vt_pkl_val *v = val_new(p, VT_PKL_TUPLE);
    if (!v)
        return -1;
    for (int i = p->sp - n; i < p->sp; i++)
        val_add(v, p->stack[i]);
    p->sp -= n;
    return push(p, v);
}

/* SETITEMS / APPENDS: the items above the MARK go into the container below it. */
static int op_add_items(vt_pkl *p, vt_pkl_kind kind, const char *what) {
    int k = 0;
    if (pop_mark(p, what, &k))
        return -1;
    if (k <= frame_floor(p))
        return bad(p, "%s with nothing to add to", what);
    vt_pkl_val *c = p->stack[k - 1];
    if (c->kind != kind)
        return bad(p, "%s on a %s", what, vt_pkl_kind_name(c->kind));
    if (kind == VT_PKL_DICT && (p->sp - k) % 2)
        return bad(p, "%s of an odd number of items", what);
    for (int i = k; i < p->sp; i++)
        val_add(c, p->stack[i]);
    p->sp = k;
    return 0;
}

static int step(vt_pkl *p, int op, vt_pkl_val **out) {
    vt_pkl_val *v, *w, *c;
    switch (op) {
    case 0x80: /* PROTO */
        if (need(p, 1, "PROTO"))
            return -1;
        if (p->buf[p->pos] < 2 || p->buf[p->pos] > 5)
            return bad(p, "pickle protocol %d (2 to 5 are read)", p->buf[p->pos]);
        p->pos++;
        return 0;
    case 0x95: /* FRAME: a length hint; the bytes follow as usual */
        if (need(p, 8, "FRAME"))
            return -1;
        if (le(p->buf + p->pos, 8) > p->len - p->pos - 8)
            return bad(p, "FRAME longer than the pickle (truncated)");
        p->pos += 8;
        return 0;
    case 'c': return op_global(p);
    case 0x93: return op_stack_global(p);
    case 'q': return need(p, 1, "BINPUT") ? -1 : memo_put(p, p->buf[p->pos++]);
    case 'r':
        if (need(p, 4, "LONG_BINPUT"))
            return -1;
        p->pos += 4;
        return memo_put(p, le(p->buf + p->pos - 4, 4));
    case 0x94: return memo_put(p, (uint64_t)p->nmemo); /* MEMOIZE */
    case 'h': return need(p, 1, "BINGET") ? -1 : memo_get(p, p->buf[p->pos++]);
    case 'j':
        if (need(p, 4, "LONG_BINGET"))
            return -1;
        p->pos += 4;
        return memo_get(p, le(p->buf + p->pos - 4, 4));
    case '}': return push(p, val_new(p, VT_PKL_DICT));
    case ']': return push(p, val_new(p, VT_PKL_LIST));
    case ')': return push(p, val_new(p, VT_PKL_TUPLE));
    case 'd': return op_from_mark(p, VT_PKL_DICT, "DICT");
    case 'l': return op_from_mark(p, VT_PKL_LIST, "LIST");
    case 't': return op_from_mark(p, VT_PKL_TUPLE, "TUPLE");
    case 0x85: return op_tuple_n(p, 1);
    case 0x86: return op_tuple_n(p, 2);
    case 0x87: return op_tuple_n(p, 3);
    case '(':
        if (p->nmarks >= PKL_MAX_MARKS)
            return bad(p, "MARKs nested deeper than %d", PKL_MAX_MARKS);
        p->marks[p->nmarks++] = p->sp;
        return 0;
    case '0': return pop(p, "POP") ? 0 : -1;
    case '1': { /* POP_MARK */
        int k = 0;
        if (pop_mark(p, "POP_MARK", &k))
            return -1;
        p->sp = k;
        return 0;
    }
    case 's': /* SETITEM */
        if (!(v = pop(p, "SETITEM")) || !(w = pop(p, "SETITEM")) || !(c = top(p, "SETITEM")))
            return -1;
        if (c->kind != VT_PKL_DICT)
            return bad(p, "SETITEM on a %s", vt_pkl_kind_name(c->kind));
        val_add(c, w);
        val_add(c, v);
        return 0;
    case 'u': return op_add_items(p, VT_PKL_DICT, "SETITEMS");
    case 'a': /* APPEND */
        if (!(v = pop(p, "APPEND")) || !(c = top(p, "APPEND")))
            return -1;
        if (c->kind != VT_PKL_LIST)
            return bad(p, "APPEND to a %s", vt_pkl_kind_name(c->kind));
        val_add(c, v);
        return 0;
    case 'e': return op_add_items(p, VT_PKL_LIST, "APPENDS");
    case 'J': return op_int(p, 4, 1);
    case 'K': return op_int(p, 1, 0);
    case 'M': return op_int(p, 2, 0);
    case 0x8a: return op_long(p, 1);
    case 0x8b: return op_long(p, 4);
    case 'G': { /* BINFLOAT: big-endian double */
        if (need(p, 8, "BINFLOAT"))
            return -1;
        uint64_t u = 0;
        for (int b = 0; b < 8; b++)
            u = u << 8 | p->buf[p->pos + (size_t)b];
        p->pos += 8;
        if ((v = val_new(p, VT_PKL_FLOAT)))
            memcpy(&v->f, &u, sizeof u);
        return push(p, v);
    }
    case 'X': return op_string(p, VT_PKL_STR, 4, 0, "BINUNICODE");
    case 0x8c: return op_string(p, VT_PKL_STR, 1, 0, "SHORT_BINUNICODE");
    case 0x8d: return op_string(p, VT_PKL_STR, 8, 0, "BINUNICODE8");
    case 'T': return op_string(p, VT_PKL_STR, 4, 1, "BINSTRING");
    case 'U': return op_string(p, VT_PKL_STR, 1, 0, "SHORT_BINSTRING");
    case 'B': return op_string(p, VT_PKL_BYTES, 4, 0, "BINBYTES");
    case 'C': return op_string(p, VT_PKL_BYTES, 1, 0, "SHORT_BINBYTES");
    case 0x8e: return op_string(p, VT_PKL_BYTES, 8, 0, "BINBYTES8");
    case 'N': return push(p, val_new(p, VT_PKL_NONE));
    case 0x88:
    case 0x89:
        if ((v = val_new(p, VT_PKL_BOOL)))
            v->i = op == 0x88;
        return push(p, v);
    case 'R': return op_reduce(p);
    case 0x81: /* NEWOBJ: cls.__new__(cls, *args), for OrderedDict only */
        if (!(v = pop(p, "NEWOBJ")) || !(w = pop(p, "NEWOBJ")))
            return -1;
        if (w->kind != VT_PKL_GLOBAL || w->i != VT_PKL_G_ORDEREDDICT || v->kind != VT_PKL_TUPLE ||
            v->n != 0)
            return bad(p, "NEWOBJ of a %s%s (only an empty OrderedDict is made so)",
                       vt_pkl_kind_name(w->kind),
                       w->kind == VT_PKL_GLOBAL ? " other than OrderedDict" : "");
        return push(p, val_new(p, VT_PKL_DICT));
    case 'b': /* BUILD: the state of the object below; an OrderedDict's is its attributes
               * (a state_dict's _metadata: layer versions), which we do not need. */
        if (!(v = pop(p, "BUILD")) || !(c = top(p, "BUILD")))
            return -1;
        if (c->kind != VT_PKL_DICT)
            return bad(p, "BUILD on a %s (only an OrderedDict's attributes are accepted)",
                       vt_pkl_kind_name(c->kind));
        return 0;
    case 'Q': { /* BINPERSID: a storage */
        int index = 0;
        vt_pkl_dtype dtype = VT_PKL_F32;
        char why[384] = "";
        if (!(v = pop(p, "BINPERSID")))
            return -1;
        if (!p->persid || p->persid(p->ctx, v, &index, &dtype, why, sizeof why))
            return bad(p, "%s", why[0] ? why : "a persistent id, and no storages are read here");
        if ((w = val_new(p, VT_PKL_STORAGE))) {
            w->i = index;
            w->dtype = dtype;
        }
        return push(p, w);
    }
    case '.': /* STOP */
        if (!(*out = top(p, "STOP")))
            return -1;
        return 1;
    default: {
        const char *name = refused_name(op);
        if (name)
            return bad(p, "opcode %s (0x%02x) is not allowed (torch.save never writes it)", name,
                       op);
        return bad(p, "unknown opcode 0x%02x", op);
    }
    }
}

int vt_pkl_load(vt_pkl *p, const uint8_t *buf, size_t len, size_t base, vt_pkl_val **out,
                size_t *used, char *err, size_t errlen) {
    p->buf = buf;
    p->len = len;
    p->pos = 0;
    p->base = base;
    p->err = err;
    p->errlen = errlen;
    p->sp = p->nmarks = p->nmemo = 0; /* each pickle has its own stack and memo */
    *out = NULL;
    while (p->pos < p->len) {
        p->op = p->pos;
        int rc = step(p, p->buf[p->pos++], out);
        if (rc < 0) {
            *out = NULL;
            return -1;
        }
        if (rc == 1) {
            *used = p->pos;
            return 0;
        }
    }
    p->op = p->pos;
    return bad(p, "the pickle ends without STOP (truncated)");
}
