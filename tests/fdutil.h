/*
 * fdutil.h: central finite differences, the outside truth an op test holds a backward
 * against (test_gradcheck.c, test_ops_attn.c, test_ops_mvit.c): the uniform inputs, the
 * scalar L = sum(y * r) in double, and the driver that moves each input both ways and
 * compares. Step sizes and tolerances are the tests' own (test_gradcheck.c's opening
 * says why e = 1e-2 and NMSE < 1e-6). Header-only (static inline), like testutil.h.
 *
 * It must never take the step as 2 eps: x0 + eps and x0 - eps round to floats, and the
 * step is the difference of those two.
 */
#ifndef VT_FDUTIL_H
#define VT_FDUTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "base/common.h"

/* x[0..n) uniform in [lo, hi), drawn from r. */
static inline void vt_test_urand(vt_rng *r, float *x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)vt_rng_uniform(r);
}

/* sum a[i] b[i] in double: L = sum(y * r) with y an op's output and r fixed. */
static inline double vt_test_dot(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

typedef double (*vt_test_loss_fn)(void *ctx);

/* What vt_test_fd found, d = numeric - analytic per element: nmse = sum d^2 / sa (sum d^2
 * when sa is 0), sa = sum numeric^2, worst = max |d|, bad = elements with
 * |d| > atol + rtol |analytic|. */
typedef struct vt_test_fd {
    double nmse, sa, worst;
    int64_t bad;
} vt_test_fd;

/* Central differences of loss(ctx) over x[0..n), each x[i] moved by +-eps in place and
 * put back, against ana. The first 3 bad elements are printed on stderr as
 * "  WHAT[i]: numeric .. analytic ..". */
static inline vt_test_fd vt_test_fd_run(float *x, int64_t n, const float *ana,
                                        vt_test_loss_fn loss, void *ctx, float eps,
                                        double atol, double rtol, const char *what) {
    vt_test_fd f = {0, 0, 0, 0};
    double se = 0;
    for (int64_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + eps;
        double lp = loss(ctx);
        x[i] = x0 - eps;
        double lm = loss(ctx);
        x[i] = x0;
        double num = (lp - lm) / ((double)(x0 + eps) - (double)(x0 - eps));
        double d = num - ana[i];
        se += d * d;
        f.sa += num * num;
        if (fabs(d) > atol + rtol * fabs(ana[i])) {
            if (f.bad < 3)
                fprintf(stderr, "  %s[%lld]: numeric %.6g analytic %.6g\n", what, (long long)i,
                        num, ana[i]);
            f.bad++;
        }
        if (fabs(d) > f.worst)
            f.worst = fabs(d);
    }
    f.nmse = f.sa > 0 ? se / f.sa : se;
    return f;
}

#endif
