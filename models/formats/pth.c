/*
 * pth.c: PyTorch checkpoints (pth.h). The container formats of torch.save around the
 * restricted unpickler of pickle.c: the zip archive (libzip, from the path or from
 * memory) and the legacy stream; the storage table the pickle's persistent ids fill;
 * finding the state_dict in what the pickle built; and reading each storage once to copy
 * its tensors out as floats (the conversion and the strided gather are pth_gather.c's).
 *
 * Every number from the file is checked before it sizes anything: a storage's declared
 * element count against its zip entry's real size (and the entry's size against the
 * archive's), each tensor's offset, sizes and strides against its storage in overflow-safe
 * int64 arithmetic, the pickle's own size against a cap. It must never abort on a bad
 * file, never run or import anything the file names, and never leave *out half filled.
 */
#include "models/formats/pth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#include "base/common.h"
#include "models/formats/pickle.h"
#include "models/formats/pth_gather.h"

/* data.pkl of r3d_18 is 26 KB; a checkpoint with a large optimizer state a few MB. */
#define PTH_MAX_PICKLE (64LL << 20)
/* deflate cannot expand more than 1032:1: a larger claimed size is a lie to allocate for */
#define PTH_MAX_RATIO 1032
/* Output elements beyond the storages' own, all tensors together: what overlapping views
 * (tensors sharing a storage, stride-0 broadcasts) add. A crafted file must not turn a
 * few bytes into gigabytes of floats by viewing one storage many times over. */
#define PTH_MAX_EXPAND (1LL << 26)
#define PTH_MAX_KEY 64

/* torch's legacy magic number 0x1950a86a20f9469cfc6c, little-endian as LONG1 holds it */
static const uint8_t legacy_magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                         0x20, 0x6a, 0xa8, 0x50, 0x19};

typedef struct storage {
    char *key;
    vt_pkl_dtype dtype;
    int64_t numel; /* as the persistent id declares it; checked against the bytes */
    zip_int64_t entry; /* zip: index of <prefix>/data/<key> */
    size_t foff;       /* legacy: file offset of its bytes */
    int have;          /* legacy: its bytes were found */
} storage;

typedef struct reader {
    const char *name;  /* the path, for messages */
    const char *where; /* "data.pkl" or "pickle" */
    zip_t *za;
    char prefix[256];
    uint64_t archive_len;
    const uint8_t *file; /* legacy: the whole file */
    size_t flen;
    int legacy;
    storage *st;
    int nst, capst;
    int *hash; /* open addressing over st by key: -1 free */
    int hcap;
} reader;

static int fail(char *err, size_t errlen, const reader *r, const char *fmt, ...)
    VT_PRINTF(4, 5);
static int fail(char *err, size_t errlen, const reader *r, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vt_set_err(err, errlen, "%s: %s", r->name, msg);
    return -1;
}

static void reader_fini(reader *r) {
    for (int i = 0; i < r->nst; i++)
        free(r->st[i].key);
    free(r->st);
    free(r->hash);
    if (r->za)
        zip_discard(r->za);
    r->za = NULL;
}

/* ---- the storage table ---- */

static int storage_find(const reader *r, const char *key, size_t len) {
    if (!r->hcap)
        return -1;
    uint64_t h = vt_fnv1a(key, len, VT_FNV_SEED);
    for (int i = (int)(h & (uint64_t)(r->hcap - 1));; i = (i + 1) & (r->hcap - 1)) {
        int s = r->hash[i];
        if (s < 0)
            return -1;
        if (strlen(r->st[s].key) == len && !memcmp(r->st[s].key, key, len))
            return s;
    }
}

static void hash_insert(reader *r, int s) {
    const char *key = r->st[s].key;
    uint64_t h = vt_fnv1a(key, strlen(key), VT_FNV_SEED);
    int i = (int)(h & (uint64_t)(r->hcap - 1));
    while (r->hash[i] >= 0)
        i = (i + 1) & (r->hcap - 1);
    r->hash[i] = s;
}

static int storage_add(reader *r, const char *key, vt_pkl_dtype dtype, int64_t numel) {
    if (r->nst == r->capst) {
        r->capst = r->capst ? 2 * r->capst : 64;
        r->st = vt_realloc(r->st, (size_t)r->capst * sizeof *r->st);
    }
    if (2 * (r->nst + 1) > r->hcap) { /* keep the table at most half full */
        r->hcap = r->hcap ? 2 * r->hcap : 128;
        r->hash = vt_realloc(r->hash, (size_t)r->hcap * sizeof *r->hash);
        memset(r->hash, 0xff, (size_t)r->hcap * sizeof *r->hash);
        for (int s = 0; s < r->nst; s++)
            hash_insert(r, s);
    }
    r->st[r->nst] = (storage){.key = vt_strdup(key), .dtype = dtype, .numel = numel, .entry = -1};
    hash_insert(r, r->nst);
    return r->nst++;
}

/* ---- zip entries ---- */

/* An entry's uncompressed size, refused when the archive cannot hold it. */
static int entry_size(reader *r, zip_int64_t idx, uint64_t *size, char *why, size_t n) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(r->za, (zip_uint64_t)idx, 0, &st) != 0 ||
        (st.valid & (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD)) !=
            (ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD)) {
        snprintf(why, n, "cannot stat zip entry %lld: %s", (long long)idx,
                 zip_strerror(r->za));
        return -1;
    }
    if (st.comp_size > r->archive_len ||
        (st.comp_method == ZIP_CM_STORE ? st.size != st.comp_size
                                        : st.size / PTH_MAX_RATIO > st.comp_size)) {
        snprintf(why, n, "zip entry '%.200s' claims %llu bytes from %llu in a %llu-byte archive",
                 st.name ? st.name : "?", (unsigned long long)st.size,
                 (unsigned long long)st.comp_size, (unsigned long long)r->archive_len);
        return -1;
    }
    *size = st.size;
    return 0;
}

/* The whole entry into buf (size bytes, as entry_size said); reading to its end makes
 * libzip check its CRC. */
static int entry_read(reader *r, zip_int64_t idx, uint8_t *buf, uint64_t size, char *why,
                      size_t n) {
    zip_file_t *zf = zip_fopen_index(r->za, (zip_uint64_t)idx, 0);
    if (!zf) {
        snprintf(why, n, "cannot open zip entry %lld: %s", (long long)idx, zip_strerror(r->za));
        return -1;
    }
    uint64_t got = 0;
    uint8_t extra;
    while (got < size) {
        zip_int64_t k = zip_fread(zf, buf + got, size - got);
        if (k <= 0)
            break;
        got += (uint64_t)k;
    }
    int rc = 0;
    if (got != size || zip_fread(zf, &extra, 1) != 0) {
        snprintf(why, n, "zip entry %s: %llu of %llu bytes read (%s)",
                 zip_get_name(r->za, (zip_uint64_t)idx, 0), (unsigned long long)got,
                 (unsigned long long)size, zip_file_strerror(zf));
        rc = -1;
    }
    zip_fclose(zf);
    return rc;
}

/* ---- persistent ids: ('storage', torch.XStorage, key, location, numel[, view]) ---- */

static int persid(void *ctx, const vt_pkl_val *pid, int *index, vt_pkl_dtype *dtype, char *why,
                  size_t n) {
    reader *r = ctx;
    if (pid->kind != VT_PKL_TUPLE || pid->n < 5 || pid->n > 6) {
        snprintf(why, n, "persistent id is a %s of %d items ('storage', type, key, location, "
                 "numel expected)", vt_pkl_kind_name(pid->kind), pid->n);
        return -1;
    }
    vt_pkl_val *const *a = pid->items;
    if (a[0]->kind != VT_PKL_STR || strcmp(a[0]->s, "storage") != 0 ||
        a[1]->kind != VT_PKL_GLOBAL || a[1]->i != VT_PKL_G_STORAGE || a[2]->kind != VT_PKL_STR ||
        a[3]->kind != VT_PKL_STR || a[4]->kind != VT_PKL_INT || a[4]->i < 0) {
        snprintf(why, n, "persistent id (%s, %s, %s, %s, %s): ('storage', torch.XStorage, "
                 "key, location, numel >= 0) expected", vt_pkl_kind_name(a[0]->kind),
                 vt_pkl_kind_name(a[1]->kind), vt_pkl_kind_name(a[2]->kind),
                 vt_pkl_kind_name(a[3]->kind), vt_pkl_kind_name(a[4]->kind));
        return -1;
    }
    if (pid->n == 6 && a[5]->kind != VT_PKL_NONE) {
        snprintf(why, n, "a storage view (legacy torch < 1.0): not supported");
        return -1;
    }
    const char *key = a[2]->s;
    if (a[2]->len == 0 || a[2]->len > PTH_MAX_KEY || strlen(key) != a[2]->len ||
        strchr(key, '/')) {
        snprintf(why, n, "storage key of %zu bytes is not a plain name", a[2]->len);
        return -1;
    }
    vt_pkl_dtype dt = a[1]->dtype;
    int64_t numel = a[4]->i, bytes;
    int s = storage_find(r, key, a[2]->len);
    if (s >= 0) { /* a storage shared by several tensors */
        if (r->st[s].dtype != dt || r->st[s].numel != numel) {
            snprintf(why, n, "storage '%s' is %s[%lld] and %s[%lld]", key,
                     vt_pkl_dtype_name(r->st[s].dtype), (long long)r->st[s].numel,
                     vt_pkl_dtype_name(dt), (long long)numel);
            return -1;
        }
        *index = s;
        *dtype = dt;
        return 0;
    }
    if (__builtin_mul_overflow(numel, (int64_t)vt_pkl_dtype_size(dt), &bytes)) {
        snprintf(why, n, "storage '%s' declares %lld %s elements (overflow)", key,
                 (long long)numel, vt_pkl_dtype_name(dt));
        return -1;
    }
    zip_int64_t entry = -1;
    if (!r->legacy) {
        char ename[400];
        uint64_t size;
        snprintf(ename, sizeof ename, "%sdata/%s", r->prefix, key);
        entry = zip_name_locate(r->za, ename, 0);
        if (entry < 0) {
            snprintf(why, n, "storage '%s': no entry %s in the archive", key, ename);
            return -1;
        }
        if (entry_size(r, entry, &size, why, n))
            return -1;
        if ((uint64_t)bytes > size) {
            snprintf(why, n, "storage '%s' declares %lld %s elements (%lld bytes); %s holds %llu",
                     key, (long long)numel, vt_pkl_dtype_name(dt), (long long)bytes, ename,
                     (unsigned long long)size);
            return -1;
        }
    }
    s = storage_add(r, key, dt, numel);
    r->st[s].entry = entry;
    *index = s;
    *dtype = dt;
    return 0;
}

/* ---- finding the state_dict ---- */

/* NULL when every value is a tensor under a str key, else the first key that is not. */
static const vt_pkl_val *not_tensor(const vt_pkl_val *d) {
    for (int i = 0; i + 1 < d->n; i += 2)
        if (d->items[i]->kind != VT_PKL_STR || d->items[i + 1]->kind != VT_PKL_TENSOR)
            return d->items[i];
    return NULL;
}

static int find_state_dict(const vt_pkl_val *top, const vt_pkl_val **sd, const char **container,
                           const reader *r, char *err, size_t errlen) {
    static const char *const nests[] = {"state_dict", "model_state_dict", "model"};
    if (top->kind != VT_PKL_DICT)
        return fail(err, errlen, r, "the pickle holds a %s, not a state_dict (a dict of tensors)",
                    vt_pkl_kind_name(top->kind));
    const vt_pkl_val *bad = not_tensor(top);
    if (!bad) {
        *sd = top;
        *container = "";
        return 0;
    }
    for (size_t k = 0; k < sizeof nests / sizeof *nests; k++) {
        const vt_pkl_val *v = vt_pkl_dict_get(top, nests[k]);
        if (v && v->kind == VT_PKL_DICT && !not_tensor(v)) {
            *sd = v;
            *container = nests[k];
            return 0;
        }
    }
    if (bad->kind == VT_PKL_STR)
        return fail(err, errlen, r, "no state_dict: '%.100s' of the top-level dict is not a "
                    "tensor, and no 'state_dict', 'model_state_dict' or 'model' dict of tensors "
                    "is there", bad->s);
    return fail(err, errlen, r, "no state_dict: the top-level dict has a %s key",
                vt_pkl_kind_name(bad->kind));
}

/* ---- tensors out of storages ---- */

static int storage_bytes(reader *r, int s, uint8_t **owned, const uint8_t **bytes, char *err,
                         size_t errlen) {
    storage *st = &r->st[s];
    char why[512];
    *owned = NULL;
    if (r->legacy) {
        if (!st->have)
            return fail(err, errlen, r, "storage '%s' has no data after the pickle", st->key);
        *bytes = r->file + st->foff;
        return 0;
    }
    uint64_t size;
    if (entry_size(r, st->entry, &size, why, sizeof why))
        return fail(err, errlen, r, "%s", why);
    *owned = vt_malloc(size ? (size_t)size : 1);
    if (entry_read(r, st->entry, *owned, size, why, sizeof why)) {
        vt_freep(owned);
        return fail(err, errlen, r, "storage '%s': %s", st->key, why);
    }
    *bytes = *owned;
    return 0;
}

static int cmp_by_storage(const void *a, const void *b, void *ctx) {
    const vt_pkl_val *const *sd = ctx;
    int x = *(const int *)a, y = *(const int *)b;
    int sx = sd[2 * x + 1]->tensor->storage, sy = sd[2 * y + 1]->tensor->storage;
    return sx != sy ? (sx < sy ? -1 : 1) : (x > y) - (x < y);
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(((const vt_pth_tensor *)a)->name, ((const vt_pth_tensor *)b)->name);
}

/* Fills out->t from the state_dict sd (every value a tensor, checked). */
static int materialize(vt_pth *out, reader *r, const vt_pkl_val *sd, char *err, size_t errlen) {
    int n = sd->n / 2, rc = -1;
    int *order = vt_malloc((size_t)(n ? n : 1) * sizeof *order);
    vt_pth_tensor *sorted = NULL;
    int64_t expand = 0; /* sum of the tensors' numel minus that of their storages */
    uint8_t *seen = vt_calloc((size_t)(r->nst ? r->nst : 1), 1);
    out->t = vt_calloc((size_t)(n ? n : 1), sizeof *out->t);
    out->n = n;
    for (int i = 0; i < n; i++) {
        const vt_pkl_val *k = sd->items[2 * i];
        const vt_pkl_tensor *t = sd->items[2 * i + 1]->tensor;
        const storage *st = &r->st[t->storage];
        vt_pth_tensor *o = &out->t[i];
        order[i] = i;
        o->name = vt_strdup(k->s);
        if (strlen(k->s) != k->len) {
            fail(err, errlen, r, "state_dict key '%s...' holds a NUL byte", k->s);
            goto end;
        }
        int64_t reach;
        if (r->legacy && !st->have) { /* its numel is unchecked: refuse before any sum */
            fail(err, errlen, r, "storage '%s' of tensor '%.200s' has no data after the pickle",
                 st->key, k->s);
            goto end;
        }
        if (!vt_pth_in_bounds(t, st->numel, &reach)) {
            fail(err, errlen, r, "tensor '%.200s' (%s offset %lld) reaches element %lld of "
                 "storage '%s', which holds %lld", k->s, r->where, (long long)t->at,
                 (long long)reach, st->key, (long long)st->numel);
            goto end;
        }
        expand += t->numel - (seen[t->storage] ? 0 : st->numel);
        seen[t->storage] = 1;
        if (expand > PTH_MAX_EXPAND) {
            fail(err, errlen, r, "tensor '%.200s': views that repeat more than %lld elements "
                 "of their storages", k->s, (long long)PTH_MAX_EXPAND);
            goto end;
        }
        o->ndim = t->ndim;
        memcpy(o->shape, t->shape, sizeof o->shape);
        o->numel = t->numel;
        o->was_int = t->dtype != VT_PKL_F32 && t->dtype != VT_PKL_F64 &&
                     t->dtype != VT_PKL_F16 && t->dtype != VT_PKL_BF16;
    }
    /* Names are unique in a real state_dict (it was a dict); a repeated one is a crafted
     * file, and which of the two the caller would get is undefined. */
    sorted = vt_malloc((size_t)(n ? n : 1) * sizeof *sorted);
    memcpy(sorted, out->t, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_names);
    for (int i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1].name, sorted[i].name)) {
            fail(err, errlen, r, "state_dict key '%.200s' appears twice", sorted[i].name);
            goto end;
        }
    /* Storage by storage, so each is read once however many tensors share it and only
     * one is in memory at a time. */
    qsort_r(order, (size_t)n, sizeof *order, cmp_by_storage, sd->items);
    for (int i = 0; i < n;) {
        int s = sd->items[2 * order[i] + 1]->tensor->storage;
        uint8_t *owned;
        const uint8_t *bytes;
        if (storage_bytes(r, s, &owned, &bytes, err, errlen))
            goto end;
        for (; i < n && sd->items[2 * order[i] + 1]->tensor->storage == s; i++) {
            const vt_pkl_tensor *t = sd->items[2 * order[i] + 1]->tensor;
            vt_pth_tensor *o = &out->t[order[i]];
            o->data = vt_malloc((size_t)(o->numel ? o->numel : 1) * sizeof(float));
            if (o->numel)
                vt_pth_gather(o->data, bytes, t);
        }
        free(owned);
    }
    rc = 0;
end:
    free(order);
    free(sorted);
    free(seen);
    return rc;
}

/* ---- the two formats ---- */

static int pickle_error(const reader *r, const char *perr, char *err, size_t errlen) {
    return fail(err, errlen, r, "%s %s", r->where, perr);
}

/* After the unpickler: the state_dict out of the result. */
static int finish(vt_pth *out, reader *r, const vt_pkl_val *top, char *err, size_t errlen) {
    const vt_pkl_val *sd = NULL;
    const char *container = "";
    if (find_state_dict(top, &sd, &container, r, err, errlen) ||
        materialize(out, r, sd, err, errlen))
        return -1;
    out->container = vt_strdup(container);
    return 0;
}

static int read_zip(vt_pth *out, reader *r, char *err, size_t errlen) {
    zip_int64_t n = zip_get_num_entries(r->za, 0), pkl = -1;
    int torchscript = 0;
    for (zip_int64_t i = 0; i < n; i++) {
        const char *nm = zip_get_name(r->za, (zip_uint64_t)i, 0);
        if (!nm)
            continue;
        const char *slash = strchr(nm, '/');
        size_t len = strlen(nm);
        /* the top folder's data.pkl (torch 1.13: the file's stem; 2.x: "archive") */
        if (pkl < 0 && len >= 8 && !strcmp(nm + len - 8, "data.pkl") &&
            (len == 8 || (slash == nm + len - 9 && len - 8 < sizeof r->prefix))) {
            pkl = i;
            memcpy(r->prefix, nm, len - 8);
            r->prefix[len - 8] = 0;
        }
        if (len >= 13 && !strcmp(nm + len - 13, "constants.pkl"))
            torchscript = 1;
    }
    if (pkl < 0)
        return fail(err, errlen, r, "a zip archive without data.pkl: not a torch.save checkpoint");
    if (torchscript)
        return fail(err, errlen, r, "a TorchScript archive (torch.jit.save): save the model's "
                    "state_dict() with torch.save instead");
    char why[512], bo[400];
    snprintf(bo, sizeof bo, "%sbyteorder", r->prefix);
    zip_int64_t boi = zip_name_locate(r->za, bo, 0);
    uint64_t size;
    if (boi >= 0) { /* absent in files of torch < 1.10: little-endian then */
        char order[16] = "";
        if (entry_size(r, boi, &size, why, sizeof why))
            return fail(err, errlen, r, "%s", why);
        if (size >= sizeof order ||
            entry_read(r, boi, (uint8_t *)order, size, why, sizeof why))
            return fail(err, errlen, r, "unreadable %s", bo);
        if (strcmp(order, "little") != 0)
            return fail(err, errlen, r, "byteorder '%.15s': only little-endian checkpoints are "
                        "read", order);
    }
    if (entry_size(r, pkl, &size, why, sizeof why))
        return fail(err, errlen, r, "%s", why);
    if (size > (uint64_t)PTH_MAX_PICKLE)
        return fail(err, errlen, r, "data.pkl of %llu bytes (at most %lld)",
                    (unsigned long long)size, PTH_MAX_PICKLE);
    uint8_t *buf = vt_malloc(size ? (size_t)size : 1);
    vt_pkl *p = vt_pkl_new(persid, r);
    vt_pkl_val *top;
    size_t used;
    char perr[600];
    int rc = -1;
    if (entry_read(r, pkl, buf, size, why, sizeof why))
        fail(err, errlen, r, "%s", why);
    else if (vt_pkl_load(p, buf, (size_t)size, 0, &top, &used, perr, sizeof perr))
        pickle_error(r, perr, err, errlen);
    else
        rc = finish(out, r, top, err, errlen);
    vt_pkl_free(&p);
    free(buf);
    return rc;
}

/* Legacy: magic, protocol version, sys_info, the object, the storage keys (five pickles),
 * then per key in that list: an int64 element count and the elements. */
static int read_legacy(vt_pth *out, reader *r, char *err, size_t errlen) {
    vt_pkl *p = vt_pkl_new(persid, r);
    vt_pkl_val *v[5];
    size_t pos = 0, used;
    char perr[600];
    int rc = -1;
    for (int k = 0; k < 5; k++) {
        if (vt_pkl_load(p, r->file + pos, r->flen - pos, pos, &v[k], &used, perr, sizeof perr)) {
            pickle_error(r, perr, err, errlen);
            goto end;
        }
        pos += used;
        if (k == 0 && (v[0]->kind != VT_PKL_BIGINT || v[0]->len != sizeof legacy_magic ||
                       memcmp(v[0]->s, legacy_magic, sizeof legacy_magic))) {
            fail(err, errlen, r, "a pickle, but not torch.save's (no magic number)");
            goto end;
        }
        if (k == 1 && (v[1]->kind != VT_PKL_INT || v[1]->i != 1001)) {
            fail(err, errlen, r, "legacy format version %lld (1001 is read)",
                 v[1]->kind == VT_PKL_INT ? (long long)v[1]->i : -1LL);
            goto end;
        }
        if (k == 2) {
            const vt_pkl_val *le = vt_pkl_dict_get(v[2], "little_endian");
            if (v[2]->kind != VT_PKL_DICT || (le && le->kind == VT_PKL_BOOL && !le->i)) {
                fail(err, errlen, r, "written big-endian or without sys_info: not read");
                goto end;
            }
        }
    }
    if (v[4]->kind != VT_PKL_LIST) {
        fail(err, errlen, r, "the storage key list is a %s", vt_pkl_kind_name(v[4]->kind));
        goto end;
    }
    for (int k = 0; k < v[4]->n; k++) {
        const vt_pkl_val *key = v[4]->items[k];
        int s = key->kind == VT_PKL_STR ? storage_find(r, key->s, key->len) : -1;
        if (s < 0) {
            fail(err, errlen, r, "storage key %d of the list is not a storage of the pickle", k);
            goto end;
        }
        storage *st = &r->st[s];
        if (8 > r->flen - pos) {
            fail(err, errlen, r, "offset %zu: storage '%s' cut off (truncated)", pos, st->key);
            goto end;
        }
        uint64_t count = 0;
        for (int b = 7; b >= 0; b--)
            count = count << 8 | r->file[pos + (size_t)b];
        pos += 8;
        if (count != (uint64_t)st->numel || st->have ||
            (uint64_t)st->numel > (r->flen - pos) / (uint64_t)vt_pkl_dtype_size(st->dtype)) {
            fail(err, errlen, r, "offset %zu: storage '%s' holds %llu elements, the pickle "
                 "declares %lld %s, %zu bytes are left", pos - 8, st->key,
                 (unsigned long long)count, (long long)st->numel, vt_pkl_dtype_name(st->dtype),
                 r->flen - pos);
            goto end;
        }
        st->foff = pos;
        st->have = 1;
        pos += (size_t)st->numel * (size_t)vt_pkl_dtype_size(st->dtype);
    }
    rc = finish(out, r, v[3], err, errlen);
end:
    vt_pkl_free(&p);
    return rc;
}

static int is_zip(const uint8_t *b, size_t n) {
    return n >= 4 && b[0] == 'P' && b[1] == 'K' &&
           ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6));
}

/* The legacy magic sits in the first pickle, right after PROTO (and a FRAME from
 * protocol 4 on). Only the first SNIFF_BYTES count, whatever the caller holds: a file is
 * sniffed from that many bytes, a buffer must be judged the same (the fuzz target found
 * a magic ending at byte 33 that the buffer saw and the file did not). */
#define SNIFF_BYTES 32
static int is_legacy(const uint8_t *b, size_t n) {
    if (n > SNIFF_BYTES)
        n = SNIFF_BYTES;
    if (n < 2 || b[0] != 0x80)
        return 0;
    for (size_t i = 2; i + sizeof legacy_magic <= n; i++)
        if (!memcmp(b + i, legacy_magic, sizeof legacy_magic))
            return 1;
    return 0;
}

static int zip_open_error(reader *r, zip_error_t *ze, char *err, size_t errlen) {
    fail(err, errlen, r, "not a readable zip archive: %s", zip_error_strerror(ze));
    zip_error_fini(ze);
    return -1;
}

static int read_any(vt_pth *out, reader *r, const char *path, const uint8_t *buf, size_t len,
                    char *err, size_t errlen) {
    int rc;
    memset(out, 0, sizeof *out);
    if (!is_zip(buf, len)) {
        if (!is_legacy(buf, len))
            return fail(err, errlen, r, "not a PyTorch checkpoint (neither a zip archive nor "
                        "torch.save's legacy pickle)");
        r->legacy = 1;
        r->where = "pickle";
        r->file = buf;
        r->flen = len;
        rc = read_legacy(out, r, err, errlen);
    } else {
        zip_error_t ze;
        zip_error_init(&ze);
        r->where = "data.pkl";
        r->archive_len = len;
        if (path) {
            int code = 0;
            r->za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
            if (!r->za) {
                zip_error_init_with_code(&ze, code);
                return zip_open_error(r, &ze, err, errlen);
            }
        } else {
            zip_source_t *src = zip_source_buffer_create(buf, len, 0, &ze);
            if (src && !(r->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze)))
                zip_source_free(src);
            if (!r->za)
                return zip_open_error(r, &ze, err, errlen);
        }
        zip_error_fini(&ze);
        rc = read_zip(out, r, err, errlen);
    }
    if (rc)
        vt_pth_free(out);
    return rc;
}

int vt_pth_read_mem(vt_pth *out, const void *buf, size_t len, const char *name, char *err,
                    size_t errlen) {
    reader r = {.name = name};
    int rc = read_any(out, &r, NULL, buf, len, err, errlen);
    reader_fini(&r);
    return rc;
}

/* The whole file when it is a legacy one (its storages follow the pickle: there is no
 * index to seek by); only the first bytes when it is a zip, which libzip reads itself. */
int vt_pth_read(vt_pth *out, const char *path, char *err, size_t errlen) {
    reader r = {.name = path};
    uint8_t head[SNIFF_BYTES], *all = NULL;
    struct stat sb;
    ssize_t k = 0;
    char oerr[600];
    int rc = -1, fd = vt_open_regular(path, oerr, sizeof oerr); /* never waits on a FIFO */
    memset(out, 0, sizeof *out);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        vt_set_err(err, errlen, "%s", oerr);
        goto end;
    }
    while ((k = pread(fd, head, sizeof head, 0)) < 0 && errno == EINTR) {
    }
    if (k < 0) {
        fail(err, errlen, &r, "%s", strerror(errno));
        goto end;
    }
    if (is_zip(head, (size_t)k)) {
        rc = read_any(out, &r, path, head, (size_t)sb.st_size, err, errlen);
        goto end;
    }
    if (!is_legacy(head, (size_t)k)) {
        rc = read_any(out, &r, NULL, head, (size_t)k, err, errlen);
        goto end;
    }
    all = vt_malloc(sb.st_size ? (size_t)sb.st_size : 1);
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t n = read(fd, all + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got != (size_t)sb.st_size) {
        fail(err, errlen, &r, "read %zu of %lld bytes", got, (long long)sb.st_size);
        goto end;
    }
    rc = read_any(out, &r, NULL, all, got, err, errlen);
end:
    if (fd >= 0)
        close(fd);
    free(all);
    reader_fini(&r);
    return rc;
}

int vt_pth_sniff(const char *path) {
    uint8_t head[SNIFF_BYTES];
    ssize_t k = -1;
    struct stat sb;
    /* O_NONBLOCK: a FIFO must not hold the caller (a regular file ignores the flag) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return 0;
    }
    while ((k = pread(fd, head, sizeof head, 0)) < 0 && errno == EINTR) {
    }
    close(fd);
    return k > 0 && (is_legacy(head, (size_t)k) || is_zip(head, (size_t)k));
}

void vt_pth_free(vt_pth *p) {
    if (!p)
        return;
    for (int i = 0; i < p->n && p->t; i++) {
        free(p->t[i].name);
        free(p->t[i].data);
    }
    free(p->t);
    free(p->container);
    memset(p, 0, sizeof *p);
}
