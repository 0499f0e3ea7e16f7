/*
 * embed_out.c: the embeddings and their CSV on disk (embed_out.h). The .npy is NumPy's
 * format 1.0 ('<f4', C order, header padded to 64 bytes), what numpy.load reads with no
 * options; the safetensors file goes through models/formats/safetensors.h, the writer
 * of the checkpoints, so one reader opens both.
 */
#include "app/stream/embed_out.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/csv.h"
#include "base/fileset.h"

static const char *ext_of(const char *path) {
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    return dot && (!slash || dot > slash) ? dot : NULL;
}

int vt_embed_format_of(const char *out) {
    const char *e = ext_of(out);
    if (e && !strcasecmp(e, ".npy"))
        return VT_EMBED_NPY;
    if (e && !strcasecmp(e, ".safetensors"))
        return VT_EMBED_SAFETENSORS;
    return -1;
}

const char *vt_embed_csv_path(const char *out, char *buf, size_t n) {
    const char *e = ext_of(out);
    int stem = e ? (int)(e - out) : (int)strlen(out);
    snprintf(buf, n, "%.*s.csv", stem, out);
    return buf;
}

vt_embed_row *vt_embed_add(vt_embed_set *s, const float *feat, const char *path) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->x = vt_realloc(s->x, sizeof(float) * (size_t)s->cap * (size_t)s->dim);
        s->rows = vt_realloc(s->rows, sizeof *s->rows * (size_t)s->cap);
    }
    memcpy(s->x + (size_t)s->n * s->dim, feat, sizeof(float) * (size_t)s->dim);
    vt_embed_row *r = &s->rows[s->n++];
    memset(r, 0, sizeof *r);
    r->path = vt_strdup(path);
    r->clip = r->crop = -1;
    return r;
}

void vt_embed_set_free(vt_embed_set *s) {
    for (int64_t i = 0; i < s->n; i++)
        free(s->rows[i].path);
    vt_freep(&s->x);
    vt_freep(&s->rows);
    s->n = s->cap = 0;
}

typedef struct npy_fill { const vt_embed_set *s; } npy_fill;

/* Magic, version 1.0, header length, then the header dict padded with spaces to a
 * multiple of 64 bytes and ended by a newline, then the data (little-endian hosts). */
static int write_npy(void *ctx, int fd) {
    const vt_embed_set *s = ((npy_fill *)ctx)->s;
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': "
                       "(%lld, %d), }", (long long)s->n, s->dim);
    int total = 10 + len + 1, pad = (64 - total % 64) % 64;
    memset(dict + len, ' ', (size_t)pad);
    dict[len + pad] = '\n';
    int hlen = len + pad + 1;
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                              (unsigned char)(hlen >> 8)};
    if (vt_fd_write_all(fd, head, sizeof head) || vt_fd_write_all(fd, dict, (size_t)hlen))
        return -1;
    return vt_fd_write_all(fd, s->x, sizeof(float) * (size_t)s->n * (size_t)s->dim);
}

/* The .csv of s, written atomically (into the open set: vt_embed_write). 0, or -1. */
static int write_csv(const vt_embed_set *s, const char *path, const vt_run_heads *heads,
                       char *err, size_t errlen) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    int per_clip = s->n > 0 && s->rows[0].clip >= 0;
    fputs(per_clip ? "index,path,start,end,clip,crop" : "index,path,start,end", f);
    for (int h = 0; h < heads->n; h++) {
        if (heads->n == 1) {
            fputs(",label,prob", f);
        } else {
            fprintf(f, ",label_%s,prob_%s", heads->cfg[h].name, heads->cfg[h].name);
        }
    }
    fputs(",decode_errors,filled_frames\n", f);
    for (int64_t i = 0; i < s->n; i++) {
        const vt_embed_row *r = &s->rows[i];
        fprintf(f, "%lld,", (long long)i);
        vt_csv_field(f, r->path);
        if (r->end > 0)
            fprintf(f, ",%.6f,%.6f", r->start, r->end);
        else
            fputs(",,", f);
        if (per_clip)
            fprintf(f, ",%d,%d", r->clip, r->crop);
        for (int h = 0; h < heads->n; h++) {
            fputc(',', f);
            if (r->label[h] == -2) { /* a tie: no class, the shared score */
                fprintf(f, ",%.9g", (double)r->prob[h]);
                continue;
            }
            if (r->label[h] < 0) { /* no answer: NaN scores name no class */
                fputc(',', f);
                continue;
            }
            vt_csv_field(f, heads->classes[h][r->label[h]]);
            fprintf(f, ",%.9g", (double)r->prob[h]);
        }
        fprintf(f, ",%lld,%lld\n", (long long)r->decode_errors, (long long)r->filled_frames);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        vt_out_of_memory(0, "a file built in memory");
    int rc = vt_file_write_atomic(path, text, len, err, errlen);
    free(text);
    return rc;
}

int vt_embed_write(const vt_embed_set *s, const char *out, const vt_ckpt_meta *meta,
                   const vt_run_heads *heads, char *err, size_t errlen) {
    /* The .csv names the output's rows: the two are a set (base/fileset.h), staged whole
     * and renamed behind a record (DIR/.OUT.set) that says, until the last rename, that
     * they may be mixed: a kill between the two renames left a new output beside the old
     * names (a re-embed with another checkpoint kept the old labels, row for row). */
    char csv[4200];
    vt_embed_csv_path(out, csv, sizeof csv);
    vt_fileset *set = vt_fileset_begin(out, VT_FILESET_DROP);
    vt_fileset_add(set, csv, VT_FILESET_DROP);
    int rc = write_csv(s, csv, heads, err, errlen);
    if (rc == 0 && vt_embed_format_of(out) == VT_EMBED_NPY) {
        npy_fill nf = {s};
        rc = vt_file_write_atomic_fill(out, write_npy, &nf, err, errlen);
    } else if (rc == 0) {
        const int64_t shape[2] = {s->n, s->dim};
        vt_ckpt_out t = {.name = "embeddings", .data = s->x, .numel = s->n * s->dim, .ndim = 2,
                         .shape = shape};
        rc = vt_ckpt_write_file(out, meta, &t, 1, err, errlen);
    }
    if (rc == 0)
        rc = vt_fileset_commit(&set, err, errlen);
    vt_fileset_free(&set); /* not committed: the old pair stays */
    return rc;
}
