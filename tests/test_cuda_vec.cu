/*
 * test_cuda_vec.cu: the vectorised CUDA kernels (models/cuda/kernels_vec.cuh, issue 45
 * item 2) give bit for bit what the scalar ones give, checked on the CPU: nvcc compiles
 * this file as host code (no CUDA runtime call, no GPU), and it runs each op's functor
 * (kernels_vec_ops.cuh) through both kernels' per-thread bodies for every (block, thread)
 * of the launch the launcher makes (vt_vec_plan_of; vt_blocks; vt_rows_grid for the (rows,
 * s) ops), and once more on a grid of one and of two blocks so the grid-stride walk is taken.
 * Each op, float and bf16 where it has both, for n = 0 .. 80, primes, multiples of 8 plus
 * or minus 1 and a few large n, every array offset 0 .. 7 elements from 16-byte alignment
 * (all alike: the vector body with a head, which the choice must take; and mixed: mostly
 * the scalar kernel), inputs drawn with NaNs carrying payloads, infinities, -0,
 * subnormals and bf16 rounding ties. It checks: the arrays after both bodies are equal
 * byte for byte; every element of each output is stored exactly once and no other one
 * (each access is watched through vt_vec_note_host); nothing outside [0, n) is read or
 * written (guard zones around every array, which must also keep their bytes); every
 * 16-byte access is 16-byte aligned. The truth outside the code under test is the
 * scalar body, the kernels of before (test_cuda_ops_gpu holds those to cpu-ref on a GPU).
 * And vt_block_sum's warp-shuffle levels against the shared-memory tree they replaced
 * (block_sum_order: a restatement of both orders, the device code cannot run here).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_bf16.h>
#include <vector_types.h>

#include "models/cuda/kernels_vec.cuh"
#include "models/cuda/kernels_vec_ops.cuh"

static int failures;
#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            if (failures++ < 20) {                                                            \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                          \
                fprintf(stderr, __VA_ARGS__);                                                 \
                fprintf(stderr, "\n");                                                        \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* ------------------------------------------------------------------ arrays and the watch */

#define GUARD 64 /* bytes before and after each array */
enum { ROLE_IN = 0, ROLE_OUT = 1 }; /* OUT: every element stored exactly once */
typedef struct arr {
    unsigned char *mem; /* GUARD + 16 alignment + data + GUARD */
    unsigned char *p;   /* the array: 16-byte aligned + off * esz */
    int esz;
    int64_t n;
    int role;
    int *stores; /* per element, this run */
} arr;
#define MAXARR 12
static arr arrs[MAXARR];
static int narr;
static const char *cur_case;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* A float input: a third special (NaN payloads, infinities, -0, subnormals, a bf16 tie
 * and its neighbours), the rest ordinary values of both signs. */
static uint32_t draw_f32(void) {
    static const uint32_t sp[] = {0x7fc00001u, 0xffc12345u, 0x7f800001u, 0x7fbfffffu,
                                  0x7f800000u, 0xff800000u, 0x80000000u, 0x00000000u,
                                  0x00000001u, 0x807fffffu, 0x00400000u, 0x3f808000u,
                                  0x3f818000u, 0xbf808000u, 0x3f808001u, 0x3f807fffu,
                                  0x7f7fffffu, 0x7f7f8000u, 0xff7fffffu, 0x3f800000u};
    const uint64_t r = rnd();
    if (r % 3 == 0)
        return sp[(r >> 8) % (sizeof sp / sizeof sp[0])];
    const float v = (float)((double)(int64_t)(r >> 11) / (double)(1ull << 52) * 2.0 - 1.0) *
                    (float)(1 << ((r >> 3) % 8));
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}
static uint16_t draw_bf16(void) {
    static const uint16_t sp[] = {0x7fc1, 0xff81, 0x7f81, 0x7f80, 0xff80, 0x8000, 0x0000,
                                  0x0001, 0x807f, 0x3f80, 0x7f7f, 0xff7f};
    const uint64_t r = rnd();
    if (r % 3 == 0)
        return sp[(r >> 8) % (sizeof sp / sizeof sp[0])];
    return (uint16_t)(draw_f32() >> 16);
}

/* An array of n elements of esz bytes at off elements past 16-byte alignment, filled with
 * drawn values (pos: positive finite ones, for invstd), its guards with a pattern. */
static void *mk(int esz, int64_t n, int off, int role, int pos = 0) {
    arr *a = &arrs[narr++];
    const size_t bytes = (size_t)n * esz;
    a->mem = (unsigned char *)malloc(GUARD + 16 + 7 * 4 + bytes + GUARD);
    const uintptr_t base = ((uintptr_t)a->mem + GUARD + 15) & ~(uintptr_t)15;
    a->p = (unsigned char *)base + (size_t)off * esz;
    a->esz = esz, a->n = n, a->role = role;
    a->stores = (int *)calloc((size_t)n + 1, sizeof(int));
    memset(a->mem, 0xA5, GUARD + 16 + 7 * 4 + bytes + GUARD);
    for (int64_t i = 0; i < n; i++) {
        if (esz == 2) {
            const uint16_t u = draw_bf16();
            memcpy(a->p + i * 2, &u, 2);
        } else {
            uint32_t u = draw_f32();
            if (pos)
                u = 0x3c000000u + (uint32_t)(rnd() % 0x4000000u);
            memcpy(a->p + i * 4, &u, 4);
        }
    }
    return a->p;
}
static size_t span(const arr *a) { return GUARD + 16 + 7 * 4 + (size_t)a->n * a->esz + GUARD; }
static void free_all(void) {
    for (int k = 0; k < narr; k++)
        free(arrs[k].mem), free(arrs[k].stores);
    narr = 0;
}

/* Every access of the bodies: inside one array's [0, n), a store only to an output, a
 * 16-byte access aligned. */
static void note(const void *p, size_t bytes, int store, int vec) {
    const unsigned char *q = (const unsigned char *)p;
    if (vec)
        CHECK((uintptr_t)q % 16 == 0, "%s: 16-byte access at %p", cur_case, p);
    for (int k = 0; k < narr; k++) {
        arr *a = &arrs[k];
        if (q < a->mem || q >= a->mem + span(a))
            continue;
        const int64_t off = q - a->p;
        const int ok = off >= 0 && off % a->esz == 0 && off + (int64_t)bytes <= a->n * a->esz;
        CHECK(ok, "%s: %s of %zu bytes at element %lld of array %d (n %lld)", cur_case,
              store ? "store" : "load", bytes, (long long)(off / a->esz), k, (long long)a->n);
        if (!ok)
            return;
        if (store) {
            CHECK(a->role == ROLE_OUT, "%s: store into input array %d", cur_case, k);
            for (size_t e = 0; e < bytes / a->esz; e++)
                a->stores[off / a->esz + e]++;
        }
        return;
    }
    CHECK(0, "%s: %s at %p, in no array", cur_case, store ? "store" : "load", p);
}

/* ------------------------------------------------------------------ one case */

static unsigned char *snap(void) {
    size_t t = 0;
    for (int k = 0; k < narr; k++)
        t += span(&arrs[k]);
    unsigned char *s = (unsigned char *)malloc(t ? t : 1), *w = s;
    for (int k = 0; k < narr; k++)
        memcpy(w, arrs[k].mem, span(&arrs[k])), w += span(&arrs[k]);
    return s;
}
static void restore(const unsigned char *s) {
    for (int k = 0; k < narr; k++)
        memcpy(arrs[k].mem, s, span(&arrs[k])), s += span(&arrs[k]);
}
static size_t snap_size(void) {
    size_t t = 0;
    for (int k = 0; k < narr; k++)
        t += span(&arrs[k]);
    return t;
}
/* Each output element stored once this run, and the counts cleared for the next. */
static void check_stores(const char *run) {
    for (int k = 0; k < narr; k++) {
        arr *a = &arrs[k];
        int bad = 0;
        for (int64_t i = 0; i < a->n && !bad; i++)
            if (a->stores[i] != (a->role == ROLE_OUT ? 1 : 0)) {
                CHECK(0, "%s (%s): array %d element %lld stored %d times", cur_case, run, k,
                      (long long)i, a->stores[i]);
                bad = 1;
            }
        memset(a->stores, 0, sizeof(int) * (size_t)(a->n + 1));
    }
}
static void check_guards(const unsigned char *before, const char *run) {
    for (int k = 0; k < narr; k++) {
        const arr *a = &arrs[k];
        const unsigned char *b = before;
        for (int j = 0; j < k; j++)
            b += span(&arrs[j]);
        const size_t lo = (size_t)(a->p - a->mem), hi = lo + (size_t)a->n * a->esz;
        CHECK(!memcmp(a->mem, b, lo) && !memcmp(a->mem + hi, b + hi, span(a) - hi),
              "%s (%s): guard zone of array %d changed", cur_case, run, k);
    }
}

static int64_t n_vec, n_scalar; /* cases that took each kernel */
static int n_order_differs;

/* Run f over n elements by the scalar kernel's bodies (rows > 0: the (rows, s) kernel's),
 * then by the vector kernel's at the launcher's geometry and at one and two blocks; the
 * arrays must come out equal. want_vec: the choice must take the vector kernel. */
template <int ROWS, class F>
static void run_case(const char *name, const F &f, int64_t n, int64_t rows, int64_t s,
                     int want_vec) {
    cur_case = name;
    vt_vec_note_host = note;
    unsigned char *s0 = snap();
    const size_t sz = snap_size();
    /* the scalar kernel, every (block, thread) of its launch */
    F t = f;
    if (t.take_gate()) {
        if constexpr (ROWS) {
            unsigned gx, gy;
            vt_rows_grid(rows, s, &gx, &gy);
            for (int64_t by = 0; by < gy; by++)
                for (int64_t bx = 0; bx < gx; bx++)
                    for (int64_t tx = 0; tx < VT_THREADS; tx++)
                        vt_rows_body(t, bx, by, tx, gx, gy, VT_THREADS, rows, s);
        } else {
            const int64_t G = (int64_t)vt_blocks(n) * VT_THREADS;
            for (int64_t g = 0; g < G; g++)
                vt_scalar_body(t, g, G, n);
        }
    }
    check_stores("scalar");
    check_guards(s0, "scalar");
    unsigned char *s1 = snap();
    const vt_vec_plan pl = vt_vec_plan_of(f, n, 1);
    const vt_vec_plan off = vt_vec_plan_of(f, n, 0);
    CHECK(!off.vec, "%s: VT_CUDA_VEC=0 took the vector kernel", name);
    CHECK(!want_vec || pl.vec, "%s: aligned alike, yet the scalar kernel", name);
    (pl.vec ? n_vec : n_scalar)++;
    if (pl.vec) {
        const int64_t grids[3] = {(int64_t)pl.blocks * VT_THREADS, VT_THREADS, 2 * VT_THREADS};
        for (int gi = 0; gi < 3; gi++) {
            restore(s0);
            const int64_t G = grids[gi];
            F u = f;
            if (u.take_gate())
                for (int64_t g = 0; g < G; g++)
                    vt_vec_body(u, g, G, n, pl.head);
            check_stores(gi ? "vector, small grid" : "vector");
            check_guards(s0, "vector");
            unsigned char *s2 = snap();
            CHECK(!memcmp(s1, s2, sz), "%s: vector (grid %lld) and scalar differ", name,
                  (long long)G);
            free(s2);
        }
    }
    vt_vec_note_host = nullptr;
    free(s0), free(s1);
}

/* ------------------------------------------------------------------ the ops */

/* offs[k]: array k's offset in elements; alike: all the same (the vector kernel must be
 * taken where the op streams arrays of one element size, or the offset allows both). */
template <typename A> static int esz_of() { return (int)sizeof(A); }

template <typename A> static void elementwise(int64_t n, const int *o, int alike) {
    const int ea = esz_of<A>();
    char name[96];
    /* a float-only op, or one whose arrays share A, reaches alignment at a common head
     * whenever the offsets are alike; a float/bf16 pair only at offsets 0 and 4 (float
     * needs head % 4 == (4 - off) % 4, bf16 head == (8 - off) % 8) */
    const int mixed_ok = alike && (ea == 4 || o[0] % 4 == 0);
    {
        vt_op_fill f{};
        f.x = (float *)mk(4, n, o[0], ROLE_OUT), f.v = u2f(0x7fc01234u);
        snprintf(name, sizeof name, "fill n=%lld off=%d", (long long)n, o[0]);
        if (ea == 4)
            run_case<0>(name, f, n, 0, 0, alike);
        free_all();
    }
    if (ea == 4) {
        vt_op_scale f{};
        f.x = (float *)mk(4, n, o[0], ROLE_OUT), f.a = -0.7f;
        snprintf(name, sizeof name, "scale n=%lld off=%d", (long long)n, o[0]);
        run_case<0>(name, f, n, 0, 0, alike);
        free_all();
        vt_op_axpy g{};
        g.y = (float *)mk(4, n, o[0], ROLE_OUT), g.x = (const float *)mk(4, n, o[1], ROLE_IN);
        g.a = 1.5f;
        snprintf(name, sizeof name, "axpy n=%lld off=%d,%d", (long long)n, o[0], o[1]);
        run_case<0>(name, g, n, 0, 0, alike);
        free_all();
        vt_op_add_bias_rows h{};
        int fdim = 1; /* the widest row of these that n holds whole */
        for (int cand = 2; cand <= 9; cand++)
            if (n % cand == 0)
                fdim = cand;
        h.out = (float *)mk(4, n, o[0], ROLE_OUT), h.b = (const float *)mk(4, fdim, 0, ROLE_IN);
        h.f = fdim;
        snprintf(name, sizeof name, "add_bias_rows n=%lld f=%d off=%d", (long long)n, fdim, o[0]);
        run_case<0>(name, h, n, 0, 0, alike);
        free_all();
    }
    const char *t = ea == 2 ? "bf16" : "f32";
    {
        vt_op_add<A> f{};
        f.out = (A *)mk(ea, n, o[0], ROLE_OUT), f.a = (const A *)mk(ea, n, o[1], ROLE_IN);
        f.b = (const A *)mk(ea, n, o[2], ROLE_IN);
        snprintf(name, sizeof name, "add %s n=%lld off=%d,%d,%d", t, (long long)n, o[0], o[1], o[2]);
        run_case<0>(name, f, n, 0, 0, alike);
        free_all();
    }
    {
        vt_op_convert<A, float> f{};
        f.dst = (A *)mk(ea, n, o[0], ROLE_OUT), f.src = (const float *)mk(4, n, o[1], ROLE_IN);
        snprintf(name, sizeof name, "to_act %s n=%lld off=%d,%d", t, (long long)n, o[0], o[1]);
        run_case<0>(name, f, n, 0, 0, mixed_ok);
        free_all();
        vt_op_convert<float, A> g{};
        g.dst = (float *)mk(4, n, o[0], ROLE_OUT), g.src = (const A *)mk(ea, n, o[1], ROLE_IN);
        snprintf(name, sizeof name, "from_act %s n=%lld off=%d,%d", t, (long long)n, o[0], o[1]);
        run_case<0>(name, g, n, 0, 0, mixed_ok);
        free_all();
        vt_op_acc_from<A> h{};
        h.dst = (float *)mk(4, n, o[0], ROLE_OUT), h.src = (const A *)mk(ea, n, o[1], ROLE_IN);
        snprintf(name, sizeof name, "acc_from %s n=%lld off=%d,%d", t, (long long)n, o[0], o[1]);
        run_case<0>(name, h, n, 0, 0, mixed_ok);
        free_all();
    }
    {
        vt_op_relu_fwd<A> f{};
        f.out = (A *)mk(ea, n, o[0], ROLE_OUT), f.in = (const A *)mk(ea, n, o[1], ROLE_IN);
        snprintf(name, sizeof name, "relu_fwd %s n=%lld off=%d,%d", t, (long long)n, o[0], o[1]);
        run_case<0>(name, f, n, 0, 0, alike);
        free_all();
        for (int sk = 0; sk < 2; sk++) {
            vt_op_relu_bwd<A> g{};
            g.din = (A *)mk(ea, n, o[0], ROLE_OUT);
            g.skip = sk ? (A *)mk(ea, n, o[3], ROLE_OUT) : NULL;
            g.dout = (const A *)mk(ea, n, o[1], ROLE_IN), g.out = (const A *)mk(ea, n, o[2], ROLE_IN);
            snprintf(name, sizeof name, "relu_bwd%s %s n=%lld off=%d,%d,%d,%d", sk ? "_skip" : "",
                     t, (long long)n, o[0], o[1], o[2], o[3]);
            run_case<0>(name, g, n, 0, 0, alike);
            free_all();
        }
    }
}

static void optimizers(int64_t n, const int *o, int alike) {
    char name[96];
    vt_grad_gate gates[3] = {{0, 0, 1.0, 0, 0}, {0, 0, 0.37, 0, 0}, {0, 0, 0.5, 1, 0}};
    for (int gi = -1; gi < 3; gi++) {
        const vt_grad_gate *gate = gi < 0 ? NULL : &gates[gi];
        const int skip = gate && gate->skip; /* nothing stored */
        const int out = skip ? ROLE_IN : ROLE_OUT;
        for (int v = 0; v < 4; v++) { /* momentum, first step, nesterov, weight decay */
            vt_op_sgd f{};
            f.gate = gate;
            f.momentum = v ? 0.9f : 0.0f, f.first_step = v == 1, f.nesterov = v == 3;
            f.dampening = v == 2 ? 0.1f : 0.0f, f.wd = v >= 2 ? 1e-4f : 0.0f, f.lr = 0.01f;
            f.p = (float *)mk(4, n, o[0], out), f.g = (const float *)mk(4, n, o[1], ROLE_IN);
            f.buf = v ? (float *)mk(4, n, o[2], out) : NULL;
            snprintf(name, sizeof name, "sgd v%d gate%d n=%lld off=%d,%d,%d", v, gi,
                     (long long)n, o[0], o[1], o[2]);
            run_case<0>(name, f, n, 0, 0, alike);
            free_all();
        }
        for (int v = 0; v < 2; v++) {
            vt_op_rmsprop f{};
            f.gate = gate, f.lr = 0.01f, f.alpha = 0.99f, f.eps = 1e-8f;
            f.wd = v ? 1e-4f : 0.0f, f.momentum = v ? 0.9f : 0.0f;
            f.p = (float *)mk(4, n, o[0], out), f.g = (const float *)mk(4, n, o[1], ROLE_IN);
            f.sq = (float *)mk(4, n, o[2], out), f.buf = v ? (float *)mk(4, n, o[3], out) : NULL;
            snprintf(name, sizeof name, "rmsprop v%d gate%d n=%lld off=%d", v, gi, (long long)n,
                     o[0]);
            run_case<0>(name, f, n, 0, 0, alike);
            free_all();
        }
        vt_op_adamw f{};
        f.gate = gate, f.decay = 0.999f, f.beta1 = 0.9f, f.beta2 = 0.999f, f.eps = 1e-8f;
        f.step_size = 1e-3f, f.bc2_sqrt = 0.31f;
        f.p = (float *)mk(4, n, o[0], out), f.g = (const float *)mk(4, n, o[1], ROLE_IN);
        f.m = (float *)mk(4, n, o[2], out), f.v = (float *)mk(4, n, o[3], out);
        snprintf(name, sizeof name, "adamw gate%d n=%lld off=%d", gi, (long long)n, o[0]);
        run_case<0>(name, f, n, 0, 0, alike);
        free_all();
    }
}

/* The (rows = N*C, s) ops: batch-norm apply (with and without k, gamma, beta), its fused
 * ReLU tail (with and without the residual), its backward apply, the bias fill. */
template <typename A> static void rows_ops(int nb, int c, int64_t s, const int *o, int alike) {
    const int ea = esz_of<A>();
    const int64_t rows = (int64_t)nb * c, n = rows * s;
    const char *t = ea == 2 ? "bf16" : "f32";
    char name[128];
    for (int v = 0; v < 2; v++) {
        vt_op_bn_apply<A> f{};
        f.out = (A *)mk(ea, n, o[0], ROLE_OUT), f.x = (const A *)mk(ea, n, o[1], ROLE_IN);
        f.k = v ? (const float *)mk(4, c, 0, ROLE_IN) : NULL;
        f.mean = (const float *)mk(4, c, 0, ROLE_IN);
        f.invstd = (const float *)mk(4, c, 0, ROLE_IN, 1);
        f.gamma = v ? (const float *)mk(4, c, 0, ROLE_IN) : NULL;
        f.beta = v ? (const float *)mk(4, c, 0, ROLE_IN) : NULL;
        f.c = c, f.s = s;
        snprintf(name, sizeof name, "bn_apply%d %s %dx%dx%lld off=%d,%d", v, t, nb, c,
                 (long long)s, o[0], o[1]);
        run_case<1>(name, f, n, rows, s, alike);
        free_all();
        vt_op_bn_apply_relu<A> g{};
        g.out = (A *)mk(ea, n, o[0], ROLE_OUT), g.x = (const A *)mk(ea, n, o[1], ROLE_IN);
        g.res = v ? (const A *)mk(ea, n, o[2], ROLE_IN) : NULL;
        g.k = (const float *)mk(4, c, 0, ROLE_IN), g.mean = (const float *)mk(4, c, 0, ROLE_IN);
        g.invstd = (const float *)mk(4, c, 0, ROLE_IN, 1);
        g.gamma = (const float *)mk(4, c, 0, ROLE_IN), g.beta = (const float *)mk(4, c, 0, ROLE_IN);
        g.c = c, g.s = s;
        snprintf(name, sizeof name, "bn_apply_relu%d %s %dx%dx%lld off=%d,%d,%d", v, t, nb, c,
                 (long long)s, o[0], o[1], o[2]);
        run_case<1>(name, g, n, rows, s, alike);
        free_all();
        vt_op_bn_bwd_apply<A> h{};
        h.din = (A *)mk(ea, n, o[0], ROLE_OUT), h.dy = (const A *)mk(ea, n, o[1], ROLE_IN);
        h.x = (const A *)mk(ea, n, o[2], ROLE_IN);
        h.k = v ? (const float *)mk(4, c, 0, ROLE_IN) : NULL;
        h.mean = (const float *)mk(4, c, 0, ROLE_IN);
        h.invstd = (const float *)mk(4, c, 0, ROLE_IN, 1);
        h.gamma = v ? (const float *)mk(4, c, 0, ROLE_IN) : NULL;
        h.sum_dy = (const float *)mk(4, c, 0, ROLE_IN);
        h.sum_dy_xhat = (const float *)mk(4, c, 0, ROLE_IN);
        h.count = nb * s, h.c = c, h.s = s;
        snprintf(name, sizeof name, "bn_bwd_apply%d %s %dx%dx%lld off=%d,%d,%d", v, t, nb, c,
                 (long long)s, o[0], o[1], o[2]);
        run_case<1>(name, h, n, rows, s, alike);
        free_all();
    }
    vt_op_fill_bias<A> f{};
    f.out = (A *)mk(ea, n, o[0], ROLE_OUT), f.b = (const float *)mk(4, c, 0, ROLE_IN);
    f.c = c, f.s = s;
    snprintf(name, sizeof name, "fill_bias %s %dx%dx%lld off=%d", t, nb, c, (long long)s, o[0]);
    run_case<1>(name, f, n, rows, s, alike);
    free_all();
}

/* vt_vec_choose on addresses made up: an array off its element's alignment, or a float
 * and a bf16 array at no common head, take the scalar kernel; the head is the least. */
static void choice(void) {
    const void *p[2];
    int e[2] = {4, 2};
    p[0] = (const void *)(uintptr_t)0x1000, p[1] = (const void *)(uintptr_t)0x2000;
    vt_vec_plan r = vt_vec_choose(100, 1, p, e, 2);
    CHECK(r.vec && r.head == 0 && r.blocks == vt_blocks(100 / 8), "aligned pair");
    p[0] = (const void *)(uintptr_t)0x1004, p[1] = (const void *)(uintptr_t)0x2008;
    r = vt_vec_choose(100, 1, p, e, 2); /* float needs head 3, bf16 head 4 */
    CHECK(!r.vec, "pair at no common head: vec %d head %d", r.vec, r.head);
    p[0] = (const void *)(uintptr_t)0x1008, p[1] = (const void *)(uintptr_t)0x2008;
    r = vt_vec_choose(100, 1, p, e, 2); /* float head 2 or 6, bf16 head 4 */
    CHECK(!r.vec, "float at 8, bf16 at 8: vec %d head %d", r.vec, r.head);
    p[0] = (const void *)(uintptr_t)0x1008, p[1] = (const void *)(uintptr_t)0x200c;
    r = vt_vec_choose(100, 1, p, e, 2); /* float head 2 or 6, bf16 head 2 */
    CHECK(r.vec && r.head == 2 && r.blocks == vt_blocks(98 / 8), "common head 2: %d", r.head);
    p[0] = (const void *)(uintptr_t)0x1002;
    r = vt_vec_choose(100, 1, p, e, 2);
    CHECK(!r.vec, "float off its alignment");
    e[0] = 2, p[0] = (const void *)(uintptr_t)0x1001;
    r = vt_vec_choose(100, 1, p, e, 2);
    CHECK(!r.vec, "bf16 at an odd address");
    p[0] = NULL, p[1] = (const void *)(uintptr_t)0x200e;
    r = vt_vec_choose(5, 1, p, e, 2);
    CHECK(r.vec && r.head == 1 && r.blocks == 1, "NULL left out, n below a group: %d", r.head);
    r = vt_vec_choose(100, 0, p, e, 2);
    CHECK(!r.vec && r.blocks == vt_blocks(100), "off");
}

/* kernels_impl.cuh vt_block_sum's order, restated: the all-shared-memory tree of before
 * and the one whose last five levels are warp shuffles (__shfl_down_sync: lane t reads
 * lane t+w, or its own value past lane 31) give the same bits for 256 doubles of mixed
 * magnitudes, where a different pairing would not (the sums are not associative here). */
static void block_sum_order(void) {
    double v[VT_THREADS], sh[VT_THREADS], lane[32], next[32];
    for (int rep = 0; rep < 200; rep++) {
        for (int t = 0; t < VT_THREADS; t++)
            v[t] = ldexp((double)(int64_t)(rnd() >> 11) - (double)(1ll << 52), (int)(rnd() % 80) - 40);
        memcpy(sh, v, sizeof sh);
        for (int w = VT_THREADS / 2; w > 0; w >>= 1)
            for (int t = 0; t < w; t++)
                sh[t] += sh[t + w];
        const double before = sh[0];
        memcpy(sh, v, sizeof sh);
        for (int w = VT_THREADS / 2; w >= 32; w >>= 1)
            for (int t = 0; t < w; t++)
                sh[t] += sh[t + w];
        memcpy(lane, sh, sizeof lane);
        for (int w = 16; w > 0; w >>= 1) {
            for (int t = 0; t < 32; t++)
                next[t] = lane[t] + (t + w < 32 ? lane[t + w] : lane[t]);
            memcpy(lane, next, sizeof lane);
        }
        CHECK(!memcmp(&before, &lane[0], sizeof before), "block sum: shuffles %.17g, tree %.17g",
              lane[0], before);
        /* and the order matters: summing left to right differs somewhere in 200 draws */
        double seq = 0;
        for (int t = 0; t < VT_THREADS; t++)
            seq += v[t];
        if (memcmp(&seq, &before, sizeof seq))
            n_order_differs++;
    }
    CHECK(n_order_differs > 0, "block sum: no draw where the order mattered");
}

static void offsets(int k, int alike, int *o) {
    for (int j = 0; j < 4; j++)
        o[j] = alike ? k : (k + 3 * j + j * j) % 8;
}

int main(void) {
    choice();
    block_sum_order();
    int64_t ns[160];
    int nn = 0;
    for (int64_t n = 0; n <= 80; n++)
        ns[nn++] = n;
    const int64_t more[] = {97, 101, 127, 131, 255, 256, 257, 263, 1023, 1024, 1025, 2047,
                            4099, 65537};
    for (size_t j = 0; j < sizeof more / sizeof more[0]; j++)
        ns[nn++] = more[j];
    int o[4];
    for (int j = 0; j < nn; j++) {
        const int64_t n = ns[j];
        for (int k = 0; k < 8; k++)
            for (int alike = 1; alike >= 0; alike--) {
                if (n > 300 && !alike && k)
                    continue; /* the large n: every offset alike, one mixed */
                offsets(k, alike, o);
                elementwise<float>(n, o, alike);
                elementwise<__nv_bfloat16>(n, o, alike);
                optimizers(n, o, alike);
            }
    }
    /* one large n: a grid of thousands of blocks */
    offsets(3, 1, o);
    elementwise<__nv_bfloat16>(65536 * 8 + 13, o, 1);
    static const int cs[] = {1, 3, 5};
    static const int64_t ss[] = {1, 2, 3, 7, 8, 9, 16, 17, 98, 300};
    for (int nb = 1; nb <= 3; nb++)
        for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++)
            for (size_t si = 0; si < sizeof ss / sizeof ss[0]; si++)
                for (int k = 0; k < 8; k++)
                    for (int alike = 1; alike >= 0; alike--) {
                        offsets(k, alike, o);
                        rows_ops<float>(nb, cs[ci], ss[si], o, alike);
                        rows_ops<__nv_bfloat16>(nb, cs[ci], ss[si], o, alike);
                    }
    offsets(5, 1, o);
    rows_ops<__nv_bfloat16>(4, 64, 98, o, 1); /* r3d18's last stage at 112: 2x7x7 */
    rows_ops<float>(2, 3, 70000, o, 1);       /* rows longer than a grid row of blocks */
    printf("test_cuda_vec: %lld cases on the vector kernel, %lld on the scalar one, %d failures\n",
           (long long)n_vec, (long long)n_scalar, failures);
    return failures ? 1 : 0;
}
