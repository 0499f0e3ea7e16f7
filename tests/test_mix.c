/*
 * test_mix.c: mixup and CutMix (pipeline/data/mix.h) and the soft-target loss they train
 * through (backend.h softmax_xent_soft), against outside truths:
 *   1. PyTorch (tests/oracle/torch_mix.py): F.cross_entropy with probability targets,
 *      loss and gradient in float64, on cpu-ref and cpu; timm's mixup_target with label
 *      smoothing equal to PyTorch's own label_smoothing on the mixed one-hot targets;
 *   2. timm's mixing re-implemented in the oracle on fixed batches and draws (mixup in
 *      float32, CutMix's box from rand_bbox with the centre given, lam corrected to the
 *      box's area, the box the same in every frame and channel), and the mixed targets;
 *   3. finite differences of the soft loss (cpu-ref);
 *   4. the draws themselves: Beta(a, a)'s mean and variance over many steps (a down to
 *      0.002, where Beta's draws sit at 0 or 1), a pure function of (seed, step),
 *      CutMix's lam always its box's area.
 * Without torch in $VT_PYTHON, 3 and 4 still run and the PyTorch part is reported skipped.
 *
 * Tolerances. The loss is computed in double and rounded once: against float64 PyTorch
 * NMSE ~ u^2 = 4e-15; 1e-12. Mixed clips: float32 products and one float32 add each, as
 * torch does them (the weights rounded to float32 the same way): 1e-6 absolute on values
 * ~|3| allows one rounding of difference, a wrong partner or weight is O(1). Targets are
 * formed in double and rounded once: 1e-7. Finite differences: central, e = 1e-2 on
 * logits ~|3|, the summed float32 losses: 5e-4 relative (argued at the check).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/backend.h"
#include "models/registry.h"
#include "pipeline/data/mix.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

static vt_test_recs g_recs;

static const float *rget(const char *fmt, int i, int64_t *n) {
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    const vt_test_rec *r = vt_test_recs_find(&g_recs, name);
    if (!r)
        VT_DIE("record %s missing from the torch file", name);
    if (n)
        *n = r->n;
    return r->v;
}

static void xent_cases(vt_backend *be) {
    const char *bn = be->i->name;
    int count = (int)rget("xent.count", 0, NULL)[0];
    for (int i = 0; i < count; i++) {
        const float *g = rget("xent%d.geo", i, NULL);
        int n = (int)g[0], k = (int)g[1];
        float gs = g[2];
        float *loss = vt_calloc((size_t)n, 4), *dz = vt_calloc((size_t)n * k, 4);
        VT_OP(be, softmax_xent_soft, loss, dz, rget("xent%d.z", i, NULL), rget("xent%d.t", i, NULL),
              n, k, gs);
        double el = vt_nmse(loss, rget("xent%d.loss", i, NULL), n);
        double ed = vt_nmse(dz, rget("xent%d.dz", i, NULL), (int64_t)n * k);
        printf("  %-8s soft xent %d: loss nmse %.2e, dlogits nmse %.2e\n", bn, i, el, ed);
        TCHECK(el <= 1e-12 && ed <= 1e-12, "%s case %d: loss %.3g, dlogits %.3g", bn, i, el, ed);
        char alt[64];
        snprintf(alt, sizeof alt, "xent%d.alt", i);
        if (vt_test_recs_find(&g_recs, alt)) { /* timm's smoothing inside = torch's own */
            double ea = vt_nmse(loss, rget("xent%d.alt", i, NULL), n);
            TCHECK(ea <= 1e-12, "%s: mixup_target's smoothing vs label_smoothing: %.3g", bn, ea);
        }
        free(loss), free(dz);
    }
}

static void mix_cases(void) {
    int count = (int)rget("mix.count", 0, NULL)[0];
    for (int i = 0; i < count; i++) {
        const float *g = rget("mix%d.geo", i, NULL);
        int n = (int)g[0], t = (int)g[1], h = (int)g[2], w = (int)g[3], kind = (int)g[4];
        double lam = g[5];
        int cy = (int)g[6], cx = (int)g[7], k = (int)g[8];
        float eps = g[9];
        vt_batch b;
        memset(&b, 0, sizeof b);
        b.n = b.capacity = n;
        b.t = t, b.h = h, b.w = w;
        b.nheads = 1;
        b.head_classes[0] = k;
        b.head_loss[0] = VT_LOSS_SOFTMAX_CE;
        int64_t nx;
        const float *x0 = rget("mix%d.x", i, &nx);
        b.x = vt_malloc((size_t)nx * 4);
        memcpy(b.x, x0, (size_t)nx * 4);
        int32_t *lab = vt_malloc((size_t)n * 4), *lab0 = vt_malloc((size_t)n * 4);
        for (int j = 0; j < n; j++)
            lab[j] = lab0[j] = (int32_t)rget("mix%d.y", i, NULL)[j];
        b.label[0] = lab;
        vt_mix_draw d = {.kind = kind, .lam = lam};
        if (kind == VT_MIX_CUTMIX)
            vt_mix_box(lam, cy, cx, h, w, &d);
        const float *box = rget("mix%d.box", i, NULL);
        if (kind == VT_MIX_CUTMIX)
            TCHECK(d.y0 == (int)box[0] && d.y1 == (int)box[1] && d.x0 == (int)box[2] &&
                       d.x1 == (int)box[3], "mix %d: box [%d,%d)x[%d,%d), timm's [%g,%g)x[%g,%g)",
                   i, d.y0, d.y1, d.x0, d.x1, box[0], box[1], box[2], box[3]);
        double want_lam = rget("mix%d.lam", i, NULL)[0];
        TCHECK(fabs(d.lam - want_lam) < 1e-6, "mix %d: lam %.9g, timm's %.9g", i, d.lam, want_lam);
        float *soft[VT_MAX_HEADS] = {vt_calloc((size_t)n * k, 4)};
        float sm[VT_MAX_HEADS] = {eps};
        vt_mix_apply(&d, &b, soft, sm);
        double ex = vt_max_abs_diff(b.x, rget("mix%d.xm", i, NULL), nx);
        double et = vt_max_abs_diff(soft[0], rget("mix%d.target", i, NULL), (int64_t)n * k);
        printf("  mix %d (%s, lam %.4f): clips max |d| %.2e, targets max |d| %.2e\n", i,
               kind == VT_MIX_MIXUP ? "mixup" : "cutmix", d.lam, ex, et);
        TCHECK(ex <= 1e-6 && et <= 1e-7, "mix %d: clips %.3g, targets %.3g", i, ex, et);
        int dom = 1; /* the dominant label: own when lam >= 0.5, else the partner's */
        for (int j = 0; j < n; j++)
            dom &= lab[j] == (d.lam >= 0.5 ? lab0[j] : lab0[n - 1 - j]);
        TCHECK(dom, "mix %d: labels are not the dominant ones", i);
        free(b.x), free(lab), free(lab0), free(soft[0]);
    }
}

/* Central differences of cpu-ref's loss against its dlogits. */
static void fd_case(void) {
    vt_backend *be = vt_backend_init("cpu-ref", 0, 1, 0);
    enum { N = 3, K = 6 };
    float z[N * K], t[N * K], dz[N * K], l[N];
    vt_rng r = {42};
    for (int i = 0; i < N * K; i++) {
        z[i] = (float)(3 * vt_rng_normal(&r));
        t[i] = (float)vt_rng_uniform(&r);
    }
    VT_OP(be, softmax_xent_soft, l, dz, z, t, N, K, 1.0f);
    double worst = 0;
    for (int i = 0; i < N * K; i++) {
        double lp = 0, lm = 0;
        float keep = z[i], e = 1e-2f;
        z[i] = keep + e;
        VT_OP(be, softmax_xent_soft, l, NULL, z, t, N, K, 1.0f);
        for (int j = 0; j < N; j++)
            lp += l[j];
        z[i] = keep - e;
        VT_OP(be, softmax_xent_soft, l, NULL, z, t, N, K, 1.0f);
        for (int j = 0; j < N; j++)
            lm += l[j];
        z[i] = keep;
        double h = (double)(keep + e) - (double)(keep - e); /* the step as float32 took it */
        worst = fmax(worst, fabs((lp - lm) / h - dz[i]) / fmax(fabs(dz[i]), 1e-2));
    }
    printf("  cpu-ref  soft xent vs finite differences: max relative %.2e\n", worst);
    /* the loss is rounded to float32 (u ~ 6e-8 of sums ~10) before the difference: the
     * quotient carries ~10 * 6e-8 / 2e-2 ~ 3e-5 of rounding, and the central difference's
     * own error is ~e^2 |L'''| / 6 ~ 2e-5; a wrong term (p instead of p sum t) is O(0.1) */
    TCHECK(worst < 5e-4, "finite differences: %.3g", worst);
    vt_backend_free(&be);
}

static void draw_cases(void) {
    /* 0.002: Gamma(a)'s U^(1/a) underflows to 0 (both draws a quarter of the time), and
     * a 0 / 0 taken as 0.5 put a quarter of the draws where Beta(a, a) has none */
    const double as[] = {0.002, 0.01, 0.2, 0.8, 1.0};
    for (size_t a = 0; a < VT_ARRAY_LEN(as); a++) {
        vt_mix_cfg c = {.mixup = (float)as[a], .seed = 7};
        double s = 0, s2 = 0;
        const int n = 20000;
        int mid = 0;
        for (int i = 0; i < n; i++) {
            vt_mix_draw d;
            vt_mix_decide(&c, i, 8, 8, &d);
            s += d.lam;
            s2 += d.lam * d.lam;
            mid += d.lam > 0.01 && d.lam < 0.99;
        }
        /* Beta(0.002, 0.002) has 0.0091 of its mass in (0.01, 0.99) (its density
         * integrated numerically); 0.02 is 16 standard errors above */
        if (as[a] == 0.002)
            TCHECK((double)mid / n < 0.02, "Beta(0.002): %.4f of the draws in (0.01, 0.99), "
                   "want 0.0091", (double)mid / n);
        double m = s / n, v = s2 / n - m * m, want = 1.0 / (4 * (2 * (double)c.mixup + 1));
        printf("  Beta(%g, %g) over %d steps: mean %.4f (0.5), variance %.4f (%.4f)\n",
               as[a], as[a], n, m, v, want);
        /* the mean's standard error is sqrt(v / n) <= 0.0035; the variance's ~1.5% of it */
        TCHECK(fabs(m - 0.5) < 0.012 && fabs(v - want) < 0.06 * want, "Beta(%g): mean %g var %g",
               as[a], m, v);
    }
    vt_mix_cfg c = {.mixup = 0.8f, .cutmix = 1.0f, .switch_prob = 0.5f, .seed = 3};
    int cut = 0, same = 1, diff = 0, area = 1;
    for (int i = 0; i < 2000; i++) {
        vt_mix_draw d, e;
        vt_mix_decide(&c, i, 16, 12, &d);
        vt_mix_decide(&c, i, 16, 12, &e);
        same &= !memcmp(&d, &e, sizeof d);
        cut += d.kind == VT_MIX_CUTMIX;
        if (d.kind == VT_MIX_CUTMIX)
            area &= fabs(d.lam - (1 - (d.y1 - d.y0) * (d.x1 - d.x0) / 192.0)) < 1e-12 &&
                    d.y0 >= 0 && d.y1 <= 16 && d.x0 >= 0 && d.x1 <= 12;
        c.seed = 4;
        vt_mix_decide(&c, i, 16, 12, &e);
        diff += memcmp(&d, &e, sizeof d) != 0;
        c.seed = 3;
    }
    printf("  switch 0.5: %d of 2000 batches CutMix; another seed differs in %d\n", cut, diff);
    TCHECK(same, "the draw is not a function of (seed, step)");
    TCHECK(area, "a CutMix lam is not its box's area");
    TCHECK(cut > 900 && cut < 1100, "CutMix in %d of 2000 batches at switch 0.5", cut); /* 4.5 sd */
    TCHECK(diff > 1990, "another seed gives the same draws (%d differ)", diff);
}

int main(void) {
    fd_case();
    draw_cases();
    if (vt_test_oracle_recs("test_mix", "torch_mix", "torch", &g_recs) <= 0) {
        printf("test_mix: the PyTorch part not run\n");
        return vt_test_done("test_mix");
    }
    vt_backend *ref = vt_backend_init("cpu-ref", 0, 1, 0), *cpu = vt_backend_init("cpu", 0, 2, 0);
    xent_cases(ref);
    xent_cases(cpu);
    vt_backend_free(&ref);
    vt_backend_free(&cpu);
    mix_cases();
    vt_test_recs_free(&g_recs);
    return vt_test_done("test_mix");
}
