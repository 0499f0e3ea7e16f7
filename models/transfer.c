/*
 * transfer.c: weights from elsewhere into a net (transfer.h). The file is read whole
 * into host memory as named float tensors (a state dict: safetensors through
 * safetensors.h, PyTorch through pth.h), matched against the net's tensors by name, every
 * difference sorted and reported, and only then copied onto the backend.
 *
 * It must never copy before every check has passed, and never run anything a file
 * holds: pth.h's unpickler only builds tensors from an allow-list.
 */
#include "models/transfer.h"
#include "models/zoo.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "base/common.h"
#include "models/checkpoint.h"
#include "models/formats/pth.h"
#include "models/formats/safetensors.h"

/* One tensor of the file, name without wrapper prefixes. */
typedef struct sd_tensor {
    const char *name;   /* into the owner's name (after the prefixes) */
    int ndim;
    int64_t shape[8];
    int64_t numel;
    float *data;        /* numel floats, host */
    int used;           /* matched by a tensor of the net */
} sd_tensor;

typedef struct sd_file {
    int n;
    sd_tensor *t;
    vt_pth pth;             /* PyTorch: owns names and data */
    char **st_names;        /* safetensors: the names, owned here */
    int n_optim;            /* "optim.*" tensors of a vidtrain checkpoint, ignored */
    sd_tensor *extra;       /* tensors assembled from several (a ViT's qkv from the Hugging
                               Face query, key, value), data owned here */
    int nextra;
} sd_file;

static void sd_free(sd_file *f) {
    if (f->st_names) {
        for (int i = 0; i < f->n; i++) {
            free(f->st_names[i]);
            free(f->t[i].data);
        }
        free(f->st_names);
    }
    vt_pth_free(&f->pth);
    for (int i = 0; i < f->nextra; i++)
        free(f->extra[i].data);
    free(f->extra);
    free(f->t);
    memset(f, 0, sizeof *f);
}

/* "module.module.layer1.0..." -> "layer1.0...": DataParallel and DDP wrap the model as
 * .module, and a wrapped wrapper twice. */
static const char *strip_prefixes(const char *name) {
    while (!strncmp(name, "module.", 7))
        name += 7;
    return name;
}

static int read_safetensors(sd_file *f, const char *path, char *err, size_t errlen) {
    vt_ckpt_info info;
    if (vt_ckpt_read_info(&info, path, err, errlen) < 0)
        return -1;
    int rc = -1;
    f->t = vt_calloc((size_t)(info.ntensors ? info.ntensors : 1), sizeof *f->t);
    f->st_names = vt_calloc((size_t)(info.ntensors ? info.ntensors : 1), sizeof(char *));
    for (int i = 0; i < info.ntensors; i++) {
        const vt_ckpt_tensor *c = &info.tensors[i];
        if (!strncmp(c->name, "optim.", 6)) {
            f->n_optim++;
            continue;
        }
        sd_tensor *t = &f->t[f->n];
        f->st_names[f->n] = vt_strdup(c->name);
        f->n++;
        t->name = strip_prefixes(f->st_names[f->n - 1]);
        t->ndim = c->ndim;
        memcpy(t->shape, c->shape, sizeof t->shape);
        t->numel = c->numel;
        t->data = vt_malloc((size_t)(c->numel ? c->numel : 1) * sizeof(float));
        if (vt_ckpt_read_tensor(&info, c, t->data, err, errlen) < 0)
            goto end;
    }
    rc = 0;
end:
    vt_ckpt_info_free(&info);
    return rc;
}

static int read_pth(sd_file *f, const char *path, char *err, size_t errlen) {
    if (vt_pth_read(&f->pth, path, err, errlen) < 0)
        return -1;
    f->t = vt_calloc((size_t)(f->pth.n ? f->pth.n : 1), sizeof *f->t);
    for (int i = 0; i < f->pth.n; i++) {
        const vt_pth_tensor *p = &f->pth.t[i];
        sd_tensor *t = &f->t[f->n++];
        t->name = strip_prefixes(p->name);
        t->ndim = p->ndim;
        memcpy(t->shape, p->shape, sizeof t->shape);
        t->numel = p->numel;
        t->data = p->data;
    }
    return 0;
}

static sd_tensor *sd_find(sd_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!f->t[i].used && !strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

/* A VideoMAE transformer's tensor under its other names: the repositories' prefixes
 * ("model.", "encoder.") or the Hugging Face names, whose query, key and value weights
 * are stacked into one qkv tensor (f->extra, room for one per net tensor). */
static sd_tensor *sd_find_vit(sd_file *f, const char *name) {
    static const char *const pre[] = {"model.", "encoder.", "model.encoder."};
    char alt[3][192];
    for (size_t k = 0; k < sizeof pre / sizeof *pre; k++) {
        snprintf(alt[0], sizeof alt[0], "%s%s", pre[k], name);
        sd_tensor *s = sd_find(f, alt[0]);
        if (s)
            return s;
    }
    int np = vt_vit_hf_names(name, alt);
    if (np == 1)
        return sd_find(f, alt[0]);
    if (np != 3)
        return NULL;
    sd_tensor *part[3];
    for (int j = 0; j < 3; j++)
        if (!(part[j] = sd_find(f, alt[j])) || part[j]->ndim != 2 ||
            part[j]->shape[0] != part[0]->shape[0] || part[j]->shape[1] != part[0]->shape[1])
            return NULL;
    sd_tensor *s = &f->extra[f->nextra++];
    memset(s, 0, sizeof *s);
    s->name = name;
    s->ndim = 2;
    s->shape[0] = 3 * part[0]->shape[0];
    s->shape[1] = part[0]->shape[1];
    s->numel = 3 * part[0]->numel;
    s->data = vt_malloc((size_t)s->numel * sizeof(float));
    for (int j = 0; j < 3; j++) {
        memcpy(s->data + j * part[0]->numel, part[j]->data, (size_t)part[0]->numel * sizeof(float));
        part[j]->used = 1;
    }
    return s;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    snprintf(buf, n, "[");
    for (int d = 0; d < ndim; d++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld", d ? ", " : "", (long long)shape[d]);
    snprintf(buf + strlen(buf), n - strlen(buf), "]");
}

static int same_shape(const sd_tensor *s, const vt_tensor_info *t) {
    if (s->ndim != t->ndim)
        return 0;
    for (int d = 0; d < t->ndim; d++)
        if (s->shape[d] != t->shape[d])
            return 0;
    return 1;
}

/* A head's classifier of another class count: same rank, same shape past dim 0. */
static int other_classes(const sd_tensor *s, const vt_tensor_info *t) {
    if (s->ndim != t->ndim || t->ndim < 1 || s->shape[0] == t->shape[0])
        return 0;
    for (int d = 1; d < t->ndim; d++)
        if (s->shape[d] != t->shape[d])
            return 0;
    return 1;
}

/* At most this many names per kind of difference in the log; the counts say the rest. */
#define LIST_MAX 8

/* The path is a regular file (stat only: a FIFO is never opened, so never waited on).
 * 0, or -1 with err saying what it is instead. */
static int check_regular(const char *path, char *err, size_t errlen) {
    static const char hint[] = "give a vidtrain checkpoint, a safetensors file or a PyTorch "
                               ".pth state_dict";
    struct stat sb;
    if (stat(path, &sb) != 0) {
        vt_set_err(err, errlen, "%s: %s (%s)", path, strerror(errno), hint);
        return -1;
    }
    if (S_ISDIR(sb.st_mode)) {
        vt_set_err(err, errlen, "%s: is a directory, not a weights file (%s; a run folder's "
                   "weights are RUN/best.safetensors)", path, hint);
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        vt_set_err(err, errlen, "%s: is not a regular file but a %s (%s)", path,
                   S_ISFIFO(sb.st_mode) ? "FIFO" : S_ISSOCK(sb.st_mode) ? "socket"
                   : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "device" : "special file",
                   hint);
        return -1;
    }
    return 0;
}

/* A NaN or inf in a tensor that would be loaded: the file comes from a run that diverged
 * (issue 41); a negative batch-norm variance: a damaged file (vt_ckpt_check_var). 0, or
 * -1 with err naming the first such tensor. */
static int check_finite(sd_tensor **src, const vt_net *net, const char *path, char *err,
                        size_t errlen) {
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const sd_tensor *s = src[i];
        for (int64_t k = 0; s && k < s->numel; k++)
            if (!isfinite(s->data[k])) {
                vt_set_err(err, errlen, "%s: tensor '%s' holds a non-finite value (%s at element "
                           "%lld): the run that wrote it diverged; start from another file (or "
                           "train that run again with a lower --lr)", path, s->name,
                           isnan(s->data[k]) ? "NaN" : "inf", (long long)k);
                return -1;
            }
        if (s && vt_ckpt_check_var(path, s->name, s->data, s->numel, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* A tensor of the net's name and shape holding data (malloc'd: f owns it), made for the
 * file in f->extra (room for one per net tensor). */
static sd_tensor *sd_extra(sd_file *f, const vt_tensor_info *t, float *data) {
    sd_tensor *x = &f->extra[f->nextra++];
    memset(x, 0, sizeof *x);
    x->name = t->name;
    x->ndim = t->ndim;
    memcpy(x->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    x->numel = t->numel;
    x->data = data;
    return x;
}

/* The module of a tensor name ("fc" of "fc.weight"), for the log. */
static void module_of(char *mod, size_t n, const char *name) {
    snprintf(mod, n, "%s", name);
    char *dot = strrchr(mod, '.');
    if (dot)
        *dot = 0;
}

/* Head tensor t (net tensor i) with its rows taken from s by class name (from[k]: the
 * file's row, -1: the net's own initialisation) into a new tensor of f.extra; NULL when s
 * is not a classifier of the same shape past dim 0. *kept: the rows initialised. */
static sd_tensor *rows_by_name(sd_file *f, vt_net *net, int i, const sd_tensor *s,
                               const int *from, int *kept) {
    const vt_tensor_info *t = vt_net_tensor(net, i);
    if (!same_shape(s, t) && !other_classes(s, t))
        return NULL;
    const int64_t rows = t->shape[0], row = rows ? t->numel / rows : 0;
    float *d = vt_malloc((size_t)VT_MAX(t->numel, 1) * sizeof(float));
    vt_backend *be = vt_net_backend(net);
    be->i->to_host(be, d, (t->is_buffer ? vt_net_buffers(net) : vt_net_params(net)) + t->offset,
                   (size_t)t->numel * sizeof(float)); /* the rows no class of the file fills */
    *kept = 0;
    for (int64_t k = 0; k < rows; k++) {
        if (from[k] >= 0 && from[k] < s->shape[0])
            memcpy(d + k * row, s->data + (int64_t)from[k] * row, (size_t)row * sizeof(float));
        else
            (*kept)++;
    }
    return sd_extra(f, t, d);
}

int vt_net_load_init(vt_net *net, const char *path, int strict, FILE *log, vt_init_report *rep,
                     char *err, size_t errlen) {
    return vt_net_load_init_rows(net, path, strict, NULL, log, rep, err, errlen);
}

int vt_net_load_init_rows(vt_net *net, const char *path, int strict, const vt_head_rows *rows,
                          FILE *log, vt_init_report *rep, char *err, size_t errlen) {
    vt_init_report r;
    memset(&r, 0, sizeof r);
    sd_file f;
    memset(&f, 0, sizeof f);
    const char *model = vt_net_config(net)->model;
    int rc = -1;
    if (check_regular(path, err, errlen) != 0)
        return -1;
    /* The format from the file's first bytes: a zip ("PK") or the legacy pickle is
     * PyTorch's, and its errors are a damaged .pth's (a truncated zip is not a bad
     * safetensors header); anything else is read as safetensors. */
    if (vt_pth_sniff(path)) {
        char e2[768];
        if (read_pth(&f, path, e2, sizeof e2) < 0) {
            vt_set_err(err, errlen, "%s (a PyTorch .pth file by its first bytes; a truncated or "
                       "damaged copy? copy or save it again)", e2);
            goto end;
        }
        snprintf(r.format, sizeof r.format, "PyTorch checkpoint");
        snprintf(r.container, sizeof r.container, "%s", f.pth.container);
        snprintf(r.skipped, sizeof r.skipped, "%s", f.pth.skipped);
    } else {
        char e2[512];
        if (read_safetensors(&f, path, e2, sizeof e2) < 0) {
            vt_set_err(err, errlen, "%s: neither a PyTorch checkpoint (zip or legacy pickle) nor "
                       "a readable safetensors file (%s)", path, e2);
            goto end;
        }
        snprintf(r.format, sizeof r.format, "safetensors");
    }
    const int nt = vt_net_num_tensors(net);
    r.tensors = nt;
    /* Sort every tensor of the net: loaded, head of another class count, mismatched,
     * missing. src[i] is what tensor i loads from (NULL: keeps its initialisation). */
    sd_tensor **src = vt_calloc((size_t)(nt ? nt : 1), sizeof *src);
    char lines[4][LIST_MAX][320];
    int nlines[4] = {0, 0, 0, 0}; /* missing, mismatched, unexpected, heads */
    int head_said[VT_MAX_HEADS] = {0};
    int loaded_params = 0; /* of r.loaded: weights, not buffers (BN statistics, counters) */
    const int vit = vt_zoo_is_vit(model);
    f.extra = vt_calloc((size_t)(nt ? nt : 1), sizeof *f.extra);
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        sd_tensor *s = sd_find(&f, t->name);
        if (!s && vit)
            s = sd_find_vit(&f, t->name);
        if (!s) {
            if (nlines[0] < LIST_MAX)
                snprintf(lines[0][nlines[0]++], sizeof lines[0][0], "%s", t->name);
            r.missing++;
            continue;
        }
        s->used = 1;
        const int hh = vt_net_tensor_head(net, i);
        sd_tensor *byname = NULL;
        int kept = 0;
        if (hh >= 0 && rows && rows->from[hh] &&
            (byname = rows_by_name(&f, net, i, s, rows->from[hh], &kept)) != NULL) {
            src[i] = byname; /* counted as loaded when a row of it came from the file */
            const int64_t n = t->shape[0];
            r.loaded += kept < n;
            loaded_params += !t->is_buffer && kept < n;
            r.values += n ? t->numel / n * (n - kept) : 0;
            if (!head_said[hh]) {
                char mod[128];
                module_of(mod, sizeof mod, t->name);
                if (nlines[3] < LIST_MAX && kept == n)
                    snprintf(lines[3][nlines[3]++], sizeof lines[0][0], "%s: none of the "
                             "file's %lld classes is one of these %lld (by name): "
                             "re-initialised", mod, (long long)s->shape[0], (long long)n);
                else if (nlines[3] < LIST_MAX)
                    snprintf(lines[3][nlines[3]++], sizeof lines[0][0], "%s: rows by class "
                             "name: %lld of %lld classes from the file's %lld%s%s", mod,
                             (long long)(n - kept), (long long)n, (long long)s->shape[0],
                             kept ? ", the others initialised" : "",
                             !kept && n == s->shape[0] ? " (another order)" : "");
                head_said[hh] = 1;
                r.heads_reinit += kept > 0;
            }
            continue;
        }
        if (same_shape(s, t)) {
            src[i] = s;
            r.loaded++;
            loaded_params += !t->is_buffer;
            r.values += t->numel;
            continue;
        }
        if (vt_zoo_is_mvit(model)) { /* MViTv1's positions made for another clip */
            const vt_net_cfg *nc = vt_net_config(net);
            const int grid[3] = {nc->clip_t / 2, nc->clip_h / 4, nc->clip_w / 4};
            char how[160];
            float *rs = vt_mvit_pos_resample(t->name, s->ndim, s->shape, s->data, t, grid, how,
                                             sizeof how);
            if (rs) {
                src[i] = sd_extra(&f, t, rs);
                r.loaded++;
                loaded_params++;
                r.values += t->numel;
                if (log)
                    fprintf(log, "init: %s: %s, for the clip %dx%dx%d\n", t->name, how,
                            nc->clip_t, nc->clip_h, nc->clip_w);
                continue;
            }
            if (how[0] && nlines[1] < LIST_MAX) {
                snprintf(lines[1][nlines[1]++], sizeof lines[0][0], "%s: %s", t->name, how);
                r.mismatched++;
                continue;
            }
        }
        int h = vt_net_tensor_head(net, i);
        if (h >= 0 && other_classes(s, t)) {
            if (!head_said[h]) {
                /* "fc: 400 -> 12 classes" from the weight's (or bias') first dim */
                char mod[128];
                module_of(mod, sizeof mod, t->name);
                if (nlines[3] < LIST_MAX)
                    snprintf(lines[3][nlines[3]++], sizeof lines[0][0], "%s: %lld -> %lld classes, re-initialised",
                             mod, (long long)s->shape[0], (long long)t->shape[0]);
                head_said[h] = 1;
                r.heads_reinit++;
            }
            continue;
        }
        char a[96], b[96];
        shape_str(a, sizeof a, s->ndim, s->shape);
        shape_str(b, sizeof b, t->ndim, t->shape);
        if (nlines[1] < LIST_MAX)
            snprintf(lines[1][nlines[1]++], sizeof lines[0][0], "%s: file %s, %s %s", t->name, a, model, b);
        r.mismatched++;
    }
    for (int i = 0; i < f.n; i++)
        if (!f.t[i].used) {
            if (nlines[2] < LIST_MAX)
                snprintf(lines[2][nlines[2]++], sizeof lines[0][0], "%s", f.t[i].name);
            r.unexpected++;
        }
    if (log) {
        fprintf(log, "init: %s (%s): %d of %s's %d tensors loaded (%lld values); missing %d, "
                "unexpected %d, shape-mismatched %d%s\n", path, r.format, r.loaded, model, nt,
                (long long)r.values, r.missing, r.unexpected, r.mismatched,
                f.n_optim ? "; optimizer state ignored" : "");
        if (r.container[0])
            fprintf(log, "init: %s: the weights are the file's '%s'; its other entries are "
                    "ignored\n", path, r.container);
        if (r.skipped[0])
            fprintf(log, "init: %s: skipped without building or running them (not weights): "
                    "%s\n", path, r.skipped);
        static const char *const what[4] = {"missing (kept as initialised)",
                                            "shape-mismatched (kept as initialised)",
                                            "unexpected (ignored)", NULL};
        const int count[4] = {r.missing, r.mismatched, r.unexpected, r.heads_reinit};
        for (int k = 0; k < 4; k++) {
            for (int j = 0; j < nlines[k]; j++) {
                if (what[k])
                    fprintf(log, "  %s: %s\n", what[k], lines[k][j]);
                else
                    fprintf(log, "init: %s\n", lines[k][j]);
            }
            if (count[k] > nlines[k])
                fprintf(log, "  ... and %d more\n", count[k] - nlines[k]);
        }
    }
    /* Buffers alone are no match: every BN layer of a like-named net has a
     * num_batches_tracked of shape [], so a file of another architecture (or of another
     * width) matches those and nothing that was learned. */
    if (loaded_params == 0) {
        char first[400] = "";
        if (nlines[1])
            snprintf(first, sizeof first, " (first: %s)", lines[1][0]);
        if (r.loaded)
            vt_set_err(err, errlen, "%s: none of its weights matches %s: only %d buffer(s) "
                       "(BN statistics or counters such as num_batches_tracked) do, and %d "
                       "tensor(s) have another shape%s: is it a %s checkpoint? (--model picks "
                       "the architecture)", path, model, r.loaded, r.mismatched, first, model);
        else
            vt_set_err(err, errlen, "%s: none of its %d tensors matches %s (first: '%s'): is "
                       "it a %s checkpoint? (--model picks the architecture)", path, f.n, model,
                       f.n ? f.t[0].name : "none", model);
        free(src);
        goto end;
    }
    if (check_finite(src, net, path, err, errlen) != 0) {
        free(src);
        goto end;
    }
    if (strict && (r.missing || r.unexpected || r.mismatched || r.heads_reinit)) {
        vt_set_err(err, errlen, "%s: --init-strict: %d missing, %d unexpected, %d shape-mismatched "
                   "tensors, %d classifier(s) with classes the file lacks (re-initialised)%s%s", path, r.missing,
                   r.unexpected, r.mismatched, r.heads_reinit,
                   nlines[0] ? " (first missing: " : "", nlines[0] ? lines[0][0] : "");
        if (nlines[0])
            snprintf(err + strlen(err), errlen - strlen(err), ")");
        free(src);
        goto end;
    }
    vt_backend *be = vt_net_backend(net);
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        if (!src[i] || t->numel == 0)
            continue;
        float *dst = (t->is_buffer ? vt_net_buffers(net) : vt_net_params(net)) + t->offset;
        be->i->to_device(be, dst, src[i]->data, (size_t)t->numel * sizeof(float));
    }
    vt_backend_sync(be);
    free(src);
    rc = 0;
end:
    if (rep)
        *rep = r;
    sd_free(&f);
    return rc;
}
