/*
 * test_pool_nan.c: maxpool3d and ReLU with NaN (and +-inf) inputs on cpu-ref and cpu (1
 * and 2 threads) against PyTorch's F.max_pool3d and torch.relu (tests/oracle/
 * torch_pool_nan.py; ReLU: run_relu below). Max pool: a NaN anywhere
 * in a window is its maximum (first tap, in the middle, last, several NaNs, next to the
 * padding), ties keep the first maximum, and of several NaNs the last takes the gradient
 * (models/max_rule.h, aten's `val > maxval || isnan(val)`). The geometries take both of
 * cpu's code paths: windows wholly inside the input (vectorised rows, one of more than 64
 * outputs, stride 2 and 1) and clipped ones (padding, ceil_mode).
 *
 * Exact comparison, no tolerance: x holds small integers and +-inf, dy small integers, so
 * every output is one input and every gradient an exact float sum in any order; a NaN
 * output must be NaN. The rule before (a NaN won only as a window's first tap) got most
 * NaN windows' outputs and gradients wrong. Skips (77) when $VT_PYTHON cannot import torch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/backend.h"
#include "models/registry.h"
#include "tests/goldenutil.h"
#include "tests/testutil.h"

static vt_test_recs g_recs;

static const vt_test_rec *rec_named(const char *name) {
    const vt_test_rec *r = vt_test_recs_find(&g_recs, name);
    if (!r)
        VT_DIE("record %s missing from the torch file", name);
    return r;
}

static const vt_test_rec *rec(const char *what, int i) {
    char name[64];
    snprintf(name, sizeof name, "p%d.%s", i, what);
    return rec_named(name);
}

/* ours against PyTorch's: equal, or both NaN. Returns the count that differ. */
static int64_t count_bad(const float *ours, const float *want, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += isnan(want[i]) ? !isnan(ours[i]) : ours[i] != want[i];
    return bad;
}

static void run_case(vt_backend *be, const char *label, int i) {
    const vt_test_rec *g = rec("geo", i), *x = rec("x", i), *dy = rec("dy", i);
    const vt_test_rec *y = rec("y", i), *dx = rec("dx", i);
    const float *q = g->v;
    const int n = (int)q[0], c = (int)q[1], thw[3] = {(int)q[2], (int)q[3], (int)q[4]};
    const vt_pool3d_p p = {{(int)q[5], (int)q[6], (int)q[7]}, {(int)q[8], (int)q[9], (int)q[10]},
                           {(int)q[11], (int)q[12], (int)q[13]}, (int)q[14]};
    float *bx = vt_backend_alloc_x(be, (size_t)x->n * 4, "x");
    float *bdy = vt_backend_alloc_x(be, (size_t)dy->n * 4, "dy");
    float *by = vt_backend_alloc_x(be, (size_t)y->n * 4, "y");
    float *bdx = vt_backend_alloc_x(be, (size_t)dx->n * 4, "dx");
    memcpy(bx, x->v, (size_t)x->n * 4);
    memcpy(bdy, dy->v, (size_t)dy->n * 4);
    VT_OP(be, maxpool3d_forward, by, bx, n, c, thw, &p);
    VT_OP(be, maxpool3d_backward, bdx, bdy, bx, n, c, thw, &p);
    int64_t nans = 0;
    for (int64_t j = 0; j < y->n; j++)
        nans += isnan(y->v[j]) != 0;
    const int64_t bad_y = count_bad(by, y->v, y->n), bad_dx = count_bad(bdx, dx->v, dx->n);
    printf("  %-12s case %d k%d%d%d s%d%d%d p%d%d%d%s: %lld of %lld outputs (%lld NaN), %lld of "
           "%lld gradients differ\n", label, i, p.k[0], p.k[1], p.k[2], p.s[0], p.s[1], p.s[2],
           p.p[0], p.p[1], p.p[2], p.ceil_mode ? " ceil" : "", (long long)bad_y,
           (long long)y->n, (long long)nans, (long long)bad_dx, (long long)dx->n);
    TCHECK(nans > 0, "%s case %d: PyTorch's output holds no NaN (the case checks nothing)", label,
           i);
    TCHECK(bad_y == 0, "%s case %d: maxpool3d forward: %lld outputs differ from PyTorch's (a "
           "NaN anywhere in a window must propagate)", label, i, (long long)bad_y);
    TCHECK(bad_dx == 0, "%s case %d: maxpool3d backward: %lld gradients differ from PyTorch's "
           "(the first maximum, the last of several NaNs)", label, i, (long long)bad_dx);
    vt_backend_free_ptr(be, bx), vt_backend_free_ptr(be, bdy);
    vt_backend_free_ptr(be, by), vt_backend_free_ptr(be, bdx);
}

/* ReLU (relu_forward, relu_backward) and the BN + ReLU tail (bn_apply_relu: cpu-ref and
 * cpu compose it from bn_apply and relu_forward; cuda fuses it, test_pool_gpu) against
 * torch.relu: a NaN passes the forward (it used to become 0, hiding a diverged activation
 * from the loss), and the backward passes a NaN output's gradient (threshold_backward:
 * out <= 0 ? 0 : grad; it used to give 0). The tail runs with an identity batch norm
 * (mean 0, invstd 1, no affine), so its output is relu(x). */
static void run_relu(vt_backend *be, const char *label) {
    const vt_test_rec *x = rec_named("relu.x"), *dy = rec_named("relu.dy");
    const vt_test_rec *y = rec_named("relu.y"), *dx = rec_named("relu.dx");
    const int64_t n = x->n;
    float *bx = vt_backend_alloc_x(be, (size_t)n * 4, "x");
    float *bdy = vt_backend_alloc_x(be, (size_t)n * 4, "dy");
    float *by = vt_backend_alloc_x(be, (size_t)n * 4, "y");
    float *bdx = vt_backend_alloc_x(be, (size_t)n * 4, "dx");
    float *bt = vt_backend_alloc_x(be, (size_t)n * 4, "tail");
    float *mean = vt_backend_alloc_x(be, 4, "mean"), *invstd = vt_backend_alloc_x(be, 4, "invstd");
    memcpy(bx, x->v, (size_t)n * 4);
    memcpy(bdy, dy->v, (size_t)n * 4);
    mean[0] = 0.0f;
    invstd[0] = 1.0f;
    VT_OP(be, relu_forward, by, bx, n);
    VT_OP(be, relu_backward, bdx, bdy, by, n);
    VT_OP(be, bn_apply_relu, bt, bx, NULL, mean, invstd, NULL, NULL, NULL, 1, 1, n);
    const int64_t bad_y = count_bad(by, y->v, n), bad_dx = count_bad(bdx, dx->v, n);
    const int64_t bad_t = count_bad(bt, y->v, n);
    printf("  %-12s relu: %lld of %lld outputs, %lld gradients, %lld BN+ReLU outputs differ\n",
           label, (long long)bad_y, (long long)n, (long long)bad_dx, (long long)bad_t);
    TCHECK(bad_y == 0, "%s: relu forward: %lld outputs differ from torch.relu's (a NaN must "
           "pass)", label, (long long)bad_y);
    TCHECK(bad_dx == 0, "%s: relu backward: %lld gradients differ from PyTorch's", label,
           (long long)bad_dx);
    TCHECK(bad_t == 0, "%s: bn_apply_relu: %lld outputs differ from relu(x)", label,
           (long long)bad_t);
    float *bufs[] = {bx, bdy, by, bdx, bt, mean, invstd};
    for (int i = 0; i < 7; i++)
        vt_backend_free_ptr(be, bufs[i]);
}

int main(void) {
    const int oracle = vt_test_oracle_recs("test_pool_nan", "torch_pool_nan", "torch", &g_recs);
    if (oracle == 0) {
        printf("test_pool_nan: SKIP (install python3-torch)\n");
        return VT_TEST_SKIP;
    }
    if (oracle < 0)
        return vt_test_done("test_pool_nan");
    const int count = (int)vt_test_recs_find(&g_recs, "count")->v[0];
    const char *bes[3] = {"cpu-ref", "cpu", "cpu"};
    for (int b = 0; b < 3; b++) {
        vt_backend *be = vt_backend_init(bes[b], 0, b == 2 ? 2 : 1, 0);
        const char *label = b == 0 ? "cpu-ref" : b == 1 ? "cpu 1 thr" : "cpu 2 thr";
        for (int i = 0; i < count; i++)
            run_case(be, label, i);
        run_relu(be, label);
        TCHECK(be->in_use == 0, "%s: leaked backend memory", label);
        vt_backend_free(&be);
    }
    vt_test_recs_free(&g_recs);
    return vt_test_done("test_pool_nan");
}
