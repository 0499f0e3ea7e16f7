/*
 * safetensors.c: the safetensors file format (safetensors.h) — writing a file from named
 * host tensors and string metadata, and reading one back: the header parsed with cJSON
 * and validated as a whole before anything of it is used, then tensors one at a time.
 * What the tensors and the metadata mean for a net is checkpoint.c's.
 *
 * It must never abort or crash on a bad file (truncated, garbage, hostile offsets): all
 * such problems come back as -1 with "path: problem" in err, and every number taken from
 * a file is checked before it is used as a size or an offset. Only programmer errors and
 * out-of-memory abort.
 */
#include "models/formats/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/json_str.h"

#define CK_MAX_HEADER (100LL << 20) /* 100 MiB: far above any real header */
#define CK_MAX_DIM (1LL << 40)

/* ---- metadata ---- */

void vt_ckpt_meta_set(vt_ckpt_meta *m, const char *key, const char *val) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->kv[i].key, key)) {
            free(m->kv[i].val);
            m->kv[i].val = vt_strdup(val);
            return;
        }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 16;
        m->kv = vt_realloc(m->kv, (size_t)m->cap * sizeof(*m->kv));
    }
    m->kv[m->n].key = vt_strdup(key);
    m->kv[m->n].val = vt_strdup(val);
    m->n++;
}

const char *vt_ckpt_meta_get(const vt_ckpt_meta *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->kv[i].key, key))
            return m->kv[i].val;
    return NULL;
}

void vt_ckpt_meta_free(vt_ckpt_meta *m) {
    if (!m)
        return;
    for (int i = 0; i < m->n; i++) {
        free(m->kv[i].key);
        free(m->kv[i].val);
    }
    free(m->kv);
    memset(m, 0, sizeof *m);
}

/* ---- writing ---- */

/* What the file holds after the 8-byte length: the header padded to 8 bytes, then the
 * tensors' data in header order (I64 tensors are stored as floats in the net). */
typedef struct fill_job {
    const char *hdr;
    size_t hlen, padded;
    const vt_ckpt_out *outs;
    int nouts;
} fill_job;

static int fill(void *ctx, int fd) {
    const fill_job *j = ctx;
    uint8_t len8[8];
    for (int b = 0; b < 8; b++)
        len8[b] = (uint8_t)((uint64_t)j->padded >> (8 * b));
    int bad = vt_fd_write_all(fd, len8, 8) || vt_fd_write_all(fd, j->hdr, j->hlen);
    for (size_t k = j->hlen; k < j->padded && !bad; k++)
        bad = vt_fd_write_all(fd, " ", 1);
    for (int i = 0; i < j->nouts && !bad; i++) {
        const vt_ckpt_out *o = &j->outs[i];
        if (o->is_int64) {
            int64_t *v = vt_malloc((size_t)VT_MAX(o->numel, 1) * sizeof(int64_t));
            for (int64_t e = 0; e < o->numel; e++)
                v[e] = llroundf(o->data[e]);
            bad = vt_fd_write_all(fd, v, (size_t)o->numel * 8);
            free(v);
        } else {
            bad = vt_fd_write_all(fd, o->data, (size_t)o->numel * 4);
        }
    }
    return bad ? -1 : 0;
}

int vt_ckpt_write_file(const char *path, const vt_ckpt_meta *meta, const vt_ckpt_out *outs,
                       int nouts, char *err, size_t errlen) {
    VT_CHECK(path && (outs || nouts == 0), "vt_ckpt_write_file: path %p tensors %p",
             (const void *)path, (const void *)outs);
    /* Header: the metadata first, then the tensors with contiguous data offsets. */
    cJSON *root = cJSON_CreateObject();
    cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
    for (int i = 0; meta && i < meta->n; i++)
        cJSON_AddStringToObject(md, meta->kv[i].key, meta->kv[i].val);
    int64_t off = 0;
    for (int i = 0; i < nouts; i++) {
        cJSON *o = cJSON_AddObjectToObject(root, outs[i].name);
        cJSON_AddStringToObject(o, "dtype", outs[i].is_int64 ? "I64" : "F32");
        cJSON *sh = cJSON_AddArrayToObject(o, "shape");
        for (int d = 0; d < outs[i].ndim; d++)
            cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)outs[i].shape[d]));
        int64_t bytes = outs[i].numel * (outs[i].is_int64 ? 8 : 4);
        cJSON *of = cJSON_AddArrayToObject(o, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + bytes)));
        off += bytes;
    }
    char *hdr = vt_json_print(root, 0);
    VT_CHECK_MEM(hdr != NULL, "a JSON text");
    fill_job j = {.hdr = hdr, .hlen = strlen(hdr), .outs = outs, .nouts = nouts};
    j.padded = (j.hlen + 7) & ~(size_t)7; /* data 8-byte aligned, as safetensors pads */
    /* A temporary file beside it, fsynced, renamed over it, the folder fsynced: a crash
     * leaves the old checkpoint or the new one (base/common.h). */
    int rc = vt_file_write_atomic_fill(path, fill, &j, err, errlen);
    cJSON_Delete(root);
    free(hdr);
    return rc;
}

/* ---- reading ---- */

/* A JSON number that is an integer in [0, 2^53]: the only kind we take as a size. */
static int json_uint(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j))
        return -1;
    double v = j->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != floor(v))
        return -1;
    *out = (int64_t)v;
    return 0;
}

static int cmp_begin(const void *a, const void *b) {
    const vt_ckpt_tensor *x = *(vt_ckpt_tensor *const *)a, *y = *(vt_ckpt_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(vt_ckpt_tensor *const *)a)->name, (*(vt_ckpt_tensor *const *)b)->name);
}

void vt_ckpt_info_free(vt_ckpt_info *info) {
    if (!info)
        return;
    for (int i = 0; i < info->ntensors; i++)
        free(info->tensors[i].name);
    free(info->tensors);
    free(info->path);
    vt_ckpt_meta_free(&info->meta);
    memset(info, 0, sizeof *info);
}

int vt_ckpt_read_info(vt_ckpt_info *info, const char *path, char *err, size_t errlen) {
    memset(info, 0, sizeof *info);
    info->path = vt_strdup(path);
    int rc = -1;
    FILE *f = NULL;
    char *hdr = NULL;
    cJSON *root = NULL;
    vt_ckpt_tensor **sorted = NULL;
#define FAIL(...)                                                       \
    do {                                                                \
        char m_[400];                                                   \
        snprintf(m_, sizeof m_, __VA_ARGS__);                           \
        vt_set_err(err, errlen, "%s: %s", path, m_);                    \
        goto end;                                                       \
    } while (0)

    char oerr[600];
    f = vt_fopen_regular(path, oerr, sizeof oerr); /* a FIFO is refused, never waited on */
    if (!f) {
        vt_set_err(err, errlen, "%s", oerr);
        goto end;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
        FAIL("not a regular file");
    info->file_size = (int64_t)st.st_size;
    if (info->file_size < 8)
        FAIL("truncated: %lld bytes, a safetensors file has at least 8", (long long)st.st_size);
    uint8_t len8[8];
    if (fread(len8, 1, 8, f) != 8)
        FAIL("cannot read the header length");
    uint64_t hl = 0;
    for (int b = 0; b < 8; b++)
        hl |= (uint64_t)len8[b] << (8 * b);
    if (hl < 2 || hl > (uint64_t)CK_MAX_HEADER)
        FAIL("header length %llu is not sane (expected 2 .. %lld bytes): not a safetensors file "
             "or corrupt", (unsigned long long)hl, CK_MAX_HEADER);
    if ((int64_t)hl > info->file_size - 8)
        FAIL("truncated: header of %llu bytes but only %lld bytes follow the length",
             (unsigned long long)hl, (long long)(info->file_size - 8));
    hdr = vt_malloc((size_t)hl + 1);
    if (fread(hdr, 1, (size_t)hl, f) != (size_t)hl)
        FAIL("cannot read the %llu-byte header", (unsigned long long)hl);
    hdr[hl] = 0;
    info->data_start = 8 + (int64_t)hl;
    const int64_t data_size = info->file_size - info->data_start;
    const char *endp = NULL;
    root = cJSON_ParseWithLengthOpts(hdr, (size_t)hl, &endp, 0);
    if (!root)
        FAIL("header is not valid JSON (near byte %lld of the header)",
             (long long)(cJSON_GetErrorPtr() && cJSON_GetErrorPtr() >= hdr
                             ? cJSON_GetErrorPtr() - hdr : 0));
    for (const char *p = endp; p && p < hdr + hl; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != 0)
            FAIL("header has bytes after its JSON object");
    if (!cJSON_IsObject(root))
        FAIL("header is JSON but not an object");
    int n = cJSON_GetArraySize(root);
    info->tensors = vt_calloc((size_t)VT_MAX(n, 1), sizeof(*info->tensors));
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!it->string)
            FAIL("header entry without a name");
        if (!strcmp(it->string, "__metadata__")) {
            if (!cJSON_IsObject(it))
                FAIL("__metadata__ is not an object");
            for (const cJSON *m = it->child; m; m = m->next) {
                if (!m->string || !cJSON_IsString(m))
                    FAIL("__metadata__ value of '%s' is not a string",
                         m->string ? m->string : "?");
                vt_ckpt_meta_set(&info->meta, m->string, m->valuestring);
            }
            continue;
        }
        const char *nm = it->string;
        if (!cJSON_IsObject(it))
            FAIL("tensor '%s': entry is not an object", nm);
        vt_ckpt_tensor *t = &info->tensors[info->ntensors];
        t->name = vt_strdup(nm);
        info->ntensors++;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *of = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt))
            FAIL("tensor '%s': no dtype string", nm);
        if (!strcmp(dt->valuestring, "F32"))
            t->is_int64 = 0;
        else if (!strcmp(dt->valuestring, "I64"))
            t->is_int64 = 1;
        else
            FAIL("tensor '%s': dtype %.16s is not supported (vidtrain reads F32 and I64)", nm,
                 dt->valuestring);
        if (!cJSON_IsArray(sh))
            FAIL("tensor '%s': no shape list", nm);
        t->ndim = cJSON_GetArraySize(sh);
        if (t->ndim > 8)
            FAIL("tensor '%s': %d dimensions (at most 8)", nm, t->ndim);
        t->numel = 1;
        int d = 0;
        for (const cJSON *x = sh->child; x; x = x->next, d++) {
            int64_t v;
            if (json_uint(x, &v) < 0 || v > CK_MAX_DIM)
                FAIL("tensor '%s': shape entry %d is not a sane non-negative integer", nm, d);
            t->shape[d] = v;
            if (v && t->numel > (INT64_MAX / 16) / v)
                FAIL("tensor '%s': shape too large", nm);
            t->numel *= v;
        }
        if (!cJSON_IsArray(of) || cJSON_GetArraySize(of) != 2 ||
            json_uint(of->child, &t->begin) < 0 || json_uint(of->child->next, &t->end) < 0)
            FAIL("tensor '%s': data_offsets is not a list of two non-negative integers", nm);
        if (t->end < t->begin)
            FAIL("tensor '%s': data_offsets [%lld, %lld) end before they begin", nm,
                 (long long)t->begin, (long long)t->end);
        if (t->end > data_size)
            FAIL("tensor '%s': data_offsets [%lld, %lld) past the end of the data (%lld bytes; "
                 "file truncated?)", nm, (long long)t->begin, (long long)t->end,
                 (long long)data_size);
        int64_t want = t->numel * (t->is_int64 ? 8 : 4);
        if (t->end - t->begin != want)
            FAIL("tensor '%s': %lld data bytes for shape of %lld %s elements (%lld bytes)", nm,
                 (long long)(t->end - t->begin), (long long)t->numel, t->is_int64 ? "I64" : "F32",
                 (long long)want);
    }
    /* Names unique; offsets cover the data exactly, without overlaps or holes. */
    sorted = vt_malloc((size_t)VT_MAX(info->ntensors, 1) * sizeof(*sorted));
    for (int i = 0; i < info->ntensors; i++)
        sorted[i] = &info->tensors[i];
    qsort(sorted, (size_t)info->ntensors, sizeof(*sorted), cmp_name);
    for (int i = 1; i < info->ntensors; i++)
        if (!strcmp(sorted[i]->name, sorted[i - 1]->name))
            FAIL("tensor '%s' appears twice in the header", sorted[i]->name);
    qsort(sorted, (size_t)info->ntensors, sizeof(*sorted), cmp_begin);
    int64_t pos = 0;
    for (int i = 0; i < info->ntensors; i++) {
        const vt_ckpt_tensor *t = sorted[i];
        if (t->begin < pos)
            FAIL("tensor '%s': data_offsets [%lld, %lld) overlap tensor '%s'", t->name,
                 (long long)t->begin, (long long)t->end, sorted[i - 1]->name);
        if (t->begin > pos)
            FAIL("tensor '%s': a hole of %lld bytes before its data", t->name,
                 (long long)(t->begin - pos));
        pos = t->end;
    }
    if (pos != data_size)
        FAIL("%lld bytes of data after the last tensor (expected none)",
             (long long)(data_size - pos));
    rc = 0;
end:
#undef FAIL
    if (f)
        fclose(f);
    free(hdr);
    free(sorted);
    cJSON_Delete(root);
    if (rc < 0) {
        vt_ckpt_info_free(info);
    }
    return rc;
}

const vt_ckpt_tensor *vt_ckpt_find(const vt_ckpt_info *info, const char *name) {
    for (int i = 0; i < info->ntensors; i++)
        if (!strcmp(info->tensors[i].name, name))
            return &info->tensors[i];
    return NULL;
}

int vt_ckpt_read_tensor(const vt_ckpt_info *info, const vt_ckpt_tensor *t, float *host_out,
                        char *err, size_t errlen) {
    FILE *f = vt_fopen_regular(info->path, err, errlen);
    if (!f)
        return -1;
    int rc = -1;
    if (fseeko(f, (off_t)(info->data_start + t->begin), SEEK_SET) != 0)
        goto end;
    if (t->is_int64) {
        int64_t v;
        int64_t i = 0;
        for (; i < t->numel; i++) {
            if (fread(&v, 8, 1, f) != 1)
                break;
            host_out[i] = (float)v;
        }
        if (i != t->numel)
            goto end;
    } else if (fread(host_out, 4, (size_t)t->numel, f) != (size_t)t->numel) {
        goto end;
    }
    rc = 0;
end:
    if (rc < 0)
        vt_set_err(err, errlen, "%s: tensor '%s': cannot read its data (file changed or "
                   "truncated since its header was read)", info->path, t->name);
    fclose(f);
    return rc;
}
