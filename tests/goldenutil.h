/*
 * goldenutil.h: reading a PyTorch oracle's golden safetensors file into a test of a zoo
 * model (test_zoo_s3d, test_zoo_x3d, test_zoo_vit): one tensor, one NMSE check, the
 * whole state dict into a net by name and shape, one training step checked, a model's
 * eval and training step against the file (vt_test_zoo_run), the exact mode's pass
 * invariance (vt_test_exact_passes), an initialisation's statistics; and the "VTT1" record files the op oracles write (tests/oracle/torch_ops.py,
 * torch_attn.py), and raw float32 files. Header-only: each test is one executable.
 */
#ifndef VT_TESTS_GOLDENUTIL_H
#define VT_TESTS_GOLDENUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/net.h"
#include "models/formats/safetensors.h"
#include "models/registry.h"
#include "tests/testutil.h"

/* Tensor `name` of the golden file as floats (malloc'd; exits when it is missing or
 * unreadable); its element count in *numel when numel is given. */
static inline float *vt_test_gread(const vt_ckpt_info *info, const char *name,
                                   int64_t *numel) {
    const vt_ckpt_tensor *t = vt_ckpt_find(info, name);
    VT_CHECK(t, "golden file lacks '%s'", name);
    float *h = vt_malloc((size_t)VT_MAX(t->numel, 1) * sizeof(float));
    char err[512];
    VT_CHECK(vt_ckpt_read_tensor(info, t, h, err, sizeof err) == 0, "%s", err);
    if (numel)
        *numel = t->numel;
    return h;
}

/* NMSE of mine against ref over n values, checked (TCHECK) to be finite and <= tol. */
static inline double vt_test_nmse_check(const char *what, const char *name, const float *mine,
                                        const float *ref, int64_t n, double tol) {
    double e = vt_nmse(mine, ref, n);
    TCHECK(e <= tol && e == e, "%s: %s NMSE %.3g > %.1g (max abs diff %.3g)", what, name, e, tol,
           vt_max_abs_diff(mine, ref, n));
    return e;
}

/* Tolerances of a golden training step: logits and gradients (NMSE), BN buffers after it,
 * and the factor over PyTorch float32's own distance from a float64 truth for a gradient
 * the file gives one for ("torch32_nmse.NAME"). */
typedef struct vt_test_step_tol {
    double train, stats, vs_torch;
} vt_test_step_tol;

/* One training step of the 2 clips x (on the net's backend) with the golden file's labels
 * ("label.0"), cross entropy's mean: its logits against "logits.0", then every gradient
 * ("grad.NAME") and buffer after the step ("after.NAME") the file has, each checked
 * (TCHECK). Returns the worst NMSE; the counts compared and the largest PyTorch float32
 * distance seen in *ngrads, *nbufs, *torch32. */
static inline double vt_test_golden_step(vt_net *net, const vt_ckpt_info *info, const float *x,
                                         int classes, const char *what, vt_test_step_tol tol,
                                         int *ngrads, int *nbufs, double *torch32) {
    vt_backend *be = vt_net_backend(net);
    float *lf = vt_test_gread(info, "label.0", NULL);
    int32_t lab[2] = {(int32_t)lf[0], (int32_t)lf[1]};
    free(lf);
    int32_t *dlab = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, dlab, lab, sizeof lab);
    vt_targets tg;
    memset(&tg, 0, sizeof tg);
    tg.label[0] = dlab;
    vt_net_zero_grad(net);
    vt_net_forward(net, x, 2, 1);
    vt_net_loss(net, NULL, NULL, &tg, 0.5f); /* cross_entropy's mean over 2 clips */
    vt_net_backward(net);
    vt_backend_sync(be);
    float *mine = vt_malloc((size_t)2 * classes * sizeof(float));
    be->i->to_host(be, mine, vt_net_logits(net, 0), (size_t)2 * classes * sizeof(float));
    float *ref = vt_test_gread(info, "logits.0", NULL);
    double worst = vt_test_nmse_check(what, "logits.0", mine, ref, 2LL * classes, tol.train);
    free(ref);
    free(mine);
    const int64_t np = vt_net_num_params(net), nb = vt_net_num_buffers(net);
    float *hg = vt_malloc((size_t)np * sizeof(float)), *hb = vt_malloc((size_t)VT_MAX(nb, 1) * 4);
    be->i->to_host(be, hg, vt_net_grads(net), (size_t)np * sizeof(float));
    be->i->to_host(be, hb, vt_net_buffers(net), (size_t)nb * sizeof(float));
    *ngrads = *nbufs = 0;
    *torch32 = 0;
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *ti = vt_net_tensor(net, i);
        char name[192];
        snprintf(name, sizeof name, "%s.%s", ti->is_buffer ? "after" : "grad", ti->name);
        if (!vt_ckpt_find(info, name))
            continue;
        ref = vt_test_gread(info, name, NULL);
        double t = ti->is_buffer ? tol.stats : tol.train;
        char yard[192];
        snprintf(yard, sizeof yard, "torch32_nmse.%s", ti->name);
        if (!ti->is_buffer && vt_ckpt_find(info, yard)) { /* a float64 truth */
            float *t32 = vt_test_gread(info, yard, NULL);
            t = t > tol.vs_torch * t32[0] ? t : tol.vs_torch * t32[0];
            *torch32 = *torch32 > t32[0] ? *torch32 : t32[0];
            free(t32);
        }
        const double e = vt_test_nmse_check(what, name, (ti->is_buffer ? hb : hg) + ti->offset,
                                            ref, ti->numel, t);
        worst = worst > e ? worst : e;
        free(ref);
        *ngrads += !ti->is_buffer;
        *nbufs += ti->is_buffer;
    }
    TCHECK(*ngrads > 0 && *nbufs > 0, "%s: no gradient or buffer compared", what);
    free(hg);
    free(hb);
    vt_backend_free_ptr(be, dlab);
    return worst;
}

/* The net's state dict from the golden file, by name and shape (PyTorch's layout). */
static inline void vt_test_load_state(vt_net *net, const vt_ckpt_info *info, const char *what) {
    vt_backend *be = vt_net_backend(net);
    for (int i = 0; i < vt_net_num_tensors(net); i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        const vt_ckpt_tensor *ft = vt_ckpt_find(info, t->name);
        TCHECK(ft != NULL, "%s: torch's state dict lacks '%s'", what, t->name);
        if (!ft)
            continue;
        /* num_batches_tracked (shape []) comes as [1]: save_st's np.ascontiguousarray
         * makes 0-d arrays 1-d. test_zoo.c checks the shapes of torch's own listing. */
        int same = ft->is_int64 == t->is_int64 && ft->numel == t->numel &&
                   (t->ndim == 0 || ft->ndim == t->ndim);
        for (int d = 0; same && d < t->ndim; d++)
            same = ft->shape[d] == t->shape[d];
        TCHECK(same, "%s: '%s' has another shape or dtype in torch", what, t->name);
        float *h = vt_test_gread(info, t->name, NULL);
        float *dst = (t->is_buffer ? vt_net_buffers(net) : vt_net_params(net)) + t->offset;
        be->i->to_device(be, dst, h, (size_t)t->numel * sizeof(float));
        free(h);
    }
}

/* What vt_test_zoo_run holds a model to: eval logits within NMSE eval; with vs_f64 > 0
 * the file's eval truth is float64 and the bound is the larger of eval and vs_f64 times
 * PyTorch float32's own distance from it ("torch32_nmse.eval_logits.0"); the training
 * step within step (vt_test_golden_step). */
typedef struct vt_test_zoo_tol {
    double eval, vs_f64;
    vt_test_step_tol step;
} vt_test_zoo_tol;

/* model (classes, clips t x hw x hw) on backend bename with the golden file's state: eval
 * logits of the file's first n_eval clips ("x") against "eval_logits.0" — whose two clips
 * must differ, so the features matter and not the bias alone —; then, if train, one
 * training step (vt_test_golden_step: logits, the gradients and buffers the file has).
 * Every check is a TCHECK; a line of NMSEs and times is printed; the backend must end
 * with nothing allocated. */
static inline void vt_test_zoo_run(const char *model, int classes, int t, int hw,
                                   const vt_ckpt_info *info, const char *bename, int n_eval,
                                   int train, const vt_test_zoo_tol *tol) {
    char what[64], err[512];
    snprintf(what, sizeof what, "%s/%s", model, bename);
    vt_backend *be = vt_backend_init(bename, 0, 0, 0);
    VT_CHECK(be, "backend %s", bename);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, classes, t, hw, hw);
    vt_net *net = vt_net_init(&cfg, be, 2, err, sizeof err);
    VT_CHECK(net, "%s: %s", what, err);
    vt_test_load_state(net, info, what);
    int64_t xn;
    float *hx = vt_test_gread(info, "x", &xn);
    VT_CHECK(xn == 2 * 3LL * t * hw * hw, "%s: x has %lld floats", what, (long long)xn);
    float *x = vt_backend_alloc_x(be, (size_t)xn * sizeof(float), "input");
    be->i->to_device(be, x, hx, (size_t)xn * sizeof(float));
    float *mine = vt_malloc((size_t)2 * classes * sizeof(float));
    double worst = 0, torch32 = 0, y32 = 0, t0 = vt_now();

    vt_net_forward(net, x, n_eval, 0);
    be->i->to_host(be, mine, vt_net_logits(net, 0), (size_t)n_eval * classes * sizeof(float));
    float *ref = vt_test_gread(info, "eval_logits.0", NULL);
    double bound = tol->eval;
    if (tol->vs_f64 > 0) { /* a float64 truth */
        float *t32 = vt_test_gread(info, "torch32_nmse.eval_logits.0", NULL);
        y32 = t32[0];
        bound = fmax(tol->eval, tol->vs_f64 * y32);
        free(t32);
    }
    const double eval = vt_test_nmse_check(what, "eval_logits.0", mine, ref,
                                           (int64_t)n_eval * classes, bound);
    TCHECK(vt_nmse(ref, ref + classes, classes) > 1e-4, "%s: torch's logits of the two clips "
           "are alike", what);
    free(ref);
    double t1 = vt_now();
    int ngrads = 0, nbufs = 0;
    if (train)
        worst = vt_test_golden_step(net, info, x, classes, what, tol->step, &ngrads, &nbufs,
                                    &torch32);
    printf("%-9s %-8s eval %d clip%s %.1fs: NMSE %.2g", model, bename, n_eval,
           n_eval == 1 ? "" : "s", t1 - t0, eval);
    if (tol->vs_f64 > 0)
        printf(" (PyTorch float32's own %.2g)", y32);
    if (train)
        printf("; train step of 2 %.1fs, logits, %d gradients, %d buffers: worst NMSE %.2g "
               "(PyTorch float32's own: %.2g)", vt_now() - t1, ngrads, nbufs, worst, torch32);
    printf("\n");
    free(mine);
    free(hx);
    vt_backend_free_ptr(be, x);
    vt_net_free(&net);
    TCHECK(be->in_use == 0, "%s: %lld bytes left allocated", what, (long long)be->in_use);
    vt_backend_free(&be);
}

/* cfg.exact (what towers train with): model (5 classes, clips t x h x w) on cpu with 2
 * threads and the golden file's state (what: the name its load reports), 4 clips of
 * U(-1, 1) (seed 3), labels 0, 3, 1, 4, cross entropy's mean: the gradients (rounded from
 * the exact sums) and logits of one pass of 4 clips and of two passes of 2. Returns
 * whether both have the same bits; the gradient's sum of squares in *ss (0: no gradient,
 * the comparison then says nothing). The backend must end with nothing allocated. */
static inline int vt_test_exact_passes(const vt_ckpt_info *info, const char *model,
                                       const char *what, int t, int h, int w, double *ss) {
    char err[512];
    vt_backend *be = vt_backend_init("cpu", 0, 2, 0);
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, model, 5, t, h, w);
    cfg.exact = 1;
    vt_net *net = vt_net_init(&cfg, be, 4, err, sizeof err);
    VT_CHECK(net, "%s", err);
    vt_test_load_state(net, info, what);
    const int64_t per = 3LL * t * h * w, np = vt_net_num_params(net);
    float *hx = vt_malloc((size_t)(4 * per) * 4);
    vt_rng r;
    vt_rng_seed(&r, 3);
    for (int64_t i = 0; i < 4 * per; i++)
        hx[i] = (float)(2 * vt_rng_uniform(&r) - 1);
    float *x = vt_backend_alloc_x(be, (size_t)(4 * per) * 4, "input");
    be->i->to_device(be, x, hx, (size_t)(4 * per) * 4);
    int32_t lab[4] = {0, 3, 1, 4}, *dlab = vt_backend_alloc_x(be, sizeof lab, "labels");
    be->i->to_device(be, dlab, lab, sizeof lab);
    float *g[2], lg[2][20];
    for (int k = 0; k < 2; k++) {
        vt_net_zero_grad(net);
        for (int p0 = 0; p0 < 4; p0 += k ? 2 : 4) {
            const int n = k ? 2 : 4;
            vt_targets tg;
            memset(&tg, 0, sizeof tg);
            tg.label[0] = dlab + p0;
            vt_net_forward(net, x + p0 * per, n, 1);
            vt_net_loss(net, NULL, NULL, &tg, 0.25f);
            vt_net_backward(net);
            be->i->to_host(be, lg[k] + p0 * 5, vt_net_logits(net, 0), (size_t)n * 5 * 4);
        }
        vt_net_round_grads(net);
        g[k] = vt_malloc((size_t)np * 4);
        be->i->to_host(be, g[k], vt_net_grads(net), (size_t)np * 4);
    }
    const int same = !memcmp(g[0], g[1], (size_t)np * 4) && !memcmp(lg[0], lg[1], sizeof lg[0]);
    *ss = 0;
    for (int64_t i = 0; i < np; i++)
        *ss += (double)g[0][i] * g[0][i];
    free(g[0]), free(g[1]), free(hx);
    vt_backend_free_ptr(be, dlab);
    vt_backend_free_ptr(be, x);
    vt_net_free(&net);
    TCHECK(be->in_use == 0, "%lld bytes left allocated", (long long)be->in_use);
    vt_backend_free(&be);
    return same;
}

/* The mean, standard deviation (over n, not n - 1) and largest |value| of x[0..n): an
 * initialisation's statistics. */
static inline void vt_test_stats(const float *x, int64_t n, double *mean, double *std,
                                 double *amax) {
    double s = 0, q = 0;
    *amax = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        q += (double)x[i] * x[i];
        *amax = fmax(*amax, fabs(x[i]));
    }
    *mean = s / (double)n;
    *std = sqrt(q / (double)n - *mean * *mean);
}

/* n float32s from the raw file `path` (malloc'd), or NULL when it cannot be read or
 * holds fewer. */
static inline float *vt_test_read_floats(const char *path, int64_t n) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    float *x = vt_malloc((size_t)n * sizeof(float));
    size_t got = fread(x, sizeof(float), (size_t)n, f);
    fclose(f);
    if ((int64_t)got != n) {
        free(x);
        return NULL;
    }
    return x;
}

/* A VTT1 file: "VTT1", then records of (u32 name length, name, u32 count, count
 * float32s), read whole. */
typedef struct vt_test_rec { char name[64]; float *v; int64_t n; } vt_test_rec;
typedef struct vt_test_recs { vt_test_rec *r; int n; } vt_test_recs;

/* Every record of `path` into rs (appended); 0, or -1 when the file is missing or not
 * VTT1. A truncated file or an over-long name exits. */
static inline int vt_test_recs_load(vt_test_recs *rs, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    char magic[4];
    if (fread(magic, 1, 4, f) != 4 || memcmp(magic, "VTT1", 4)) {
        fclose(f);
        return -1;
    }
    uint32_t len, cnt;
    while (fread(&len, 4, 1, f) == 1) {
        VT_CHECK(len < 64, "record name too long");
        rs->r = vt_realloc(rs->r, (size_t)(rs->n + 1) * sizeof *rs->r);
        vt_test_rec *r = &rs->r[rs->n++];
        memset(r->name, 0, sizeof r->name);
        VT_CHECK(fread(r->name, 1, len, f) == len && fread(&cnt, 4, 1, f) == 1, "truncated");
        r->n = cnt;
        r->v = vt_malloc((size_t)VT_MAX(cnt, 1) * 4);
        VT_CHECK(fread(r->v, 4, cnt, f) == cnt, "truncated %s", r->name);
    }
    fclose(f);
    return 0;
}

/* The record named `name`, or NULL. */
static inline const vt_test_rec *vt_test_recs_find(const vt_test_recs *rs, const char *name) {
    for (int k = 0; k < rs->n; k++)
        if (!strcmp(rs->r[k].name, name))
            return &rs->r[k];
    return NULL;
}

static inline void vt_test_recs_free(vt_test_recs *rs) {
    for (int k = 0; k < rs->n; k++)
        free(rs->r[k].v);
    free(rs->r);
    rs->r = NULL;
    rs->n = 0;
}

/* The record file of oracle tests/oracle/SCRIPT.py (run by $VT_PYTHON with the file,
 * $VT_TMP/<test without "test_">/SCRIPT.bin, as its argument) loaded into rs, once that
 * Python imports `modules` (an import list: "torch", "PIL, numpy"). Returns 1 with rs
 * loaded; 0 when the modules are missing (a line says so; nothing checked, the caller
 * skips what needs them); -1 when the oracle failed or its file cannot be read (both
 * failed checks). */
static inline int vt_test_oracle_recs(const char *test, const char *script, const char *modules,
                                      vt_test_recs *rs) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", py, modules);
    if (system(cmd) != 0) {
        printf("%s: %s cannot import %s\n", test, py, modules);
        return 0;
    }
    const char *dir = vt_test_dir(strncmp(test, "test_", 5) ? test : test + 5);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.bin", dir, script);
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/%s.py' '%s'", py, src, script, path);
    int rc = system(cmd);
    TCHECK(rc == 0, "%s failed (%d)", cmd, rc);
    if (rc != 0 || vt_test_recs_load(rs, path) != 0) {
        TCHECK(0, "cannot read %s", path);
        return -1;
    }
    return 1;
}
#endif
