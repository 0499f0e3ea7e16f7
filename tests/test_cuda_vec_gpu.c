/*
 * test_cuda_vec_gpu.c: on a GPU, the vectorised kernels (models/cuda/kernels_vec.cuh,
 * issue 45 item 2) leave the same bytes as the scalar ones: every launcher that has both
 * (kernels.h: element-wise, batch-norm apply and its fused ReLU tail and backward apply,
 * bias add and fill, SGD, RMSprop, AdamW with and without a clipping gate), float and
 * bf16, at n from 0 to a few hundred thousand (odd, prime, multiples of 8 plus or minus 1),
 * every array at each offset 0 .. 7 elements from 16-byte alignment (all alike: the
 * vector kernel with a scalar head; and mixed, which mostly takes the scalar kernel),
 * inputs of random bits (NaN payloads, infinities, -0, subnormals among them). Each case
 * runs once with vt_cuk_vec_set(0) and once with 1 from the same inputs, and every
 * array's whole slot (the bytes around [0, n) included) must come back equal.
 * tests/test_cuda_vec.cu checks the same on the CPU; test_cuda_ops_gpu holds the kernels
 * to cpu-ref (scripts/gpu-check.sh runs it under VT_CUDA_VEC=0 and 1).
 * First, without a device (so CI's CUDA build checks it): VT_CUDA_VEC as a fresh process
 * reads it, unset or empty 1, 0 and 1 as given, any other value a stop.
 * Exits 77 (skipped) without CUDA or a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"
#include "tests/testutil.h"

#ifndef VT_HAVE_CUDA
int main(void) {
    printf("test_cuda_vec_gpu: built without CUDA: skipping\n");
    return VT_TEST_SKIP;
}
#else

#include <cuda_runtime_api.h>

#include "models/cuda/cuda_info.h"
#include "models/cuda/kernels.h"

#define NARR 4     /* streamed arrays a case uploads */
#define NPAR 6     /* per-channel parameter arrays */
#define SLOT_PAD 64 /* bytes before and after each array, compared too */

/* The ops, and what each streamed array holds: 'A' the activation type, 'F' float. */
typedef struct op_desc {
    const char *name, *kinds;
    int rows; /* a (rows, s) op */
} op_desc;
static const op_desc ops[] = {
    {"fill", "F", 0},          {"scale", "F", 0},          {"axpy", "FF", 0},
    {"add", "AAA", 0},         {"to_act", "AF", 0},        {"from_act", "FA", 0},
    {"acc_from_act", "FA", 0}, {"relu_forward", "AA", 0},  {"relu_backward", "AAA", 0},
    {"relu_backward_skip", "AAAA", 0},                     {"bn_apply", "AA", 1},
    {"bn_apply_relu", "AAA", 1},                           {"bn_backward_apply", "AAA", 1},
    {"fill_bias", "A", 1},     {"add_bias_rows", "F", 1},  {"sgd", "FFF", 0},
    {"rmsprop", "FFFF", 0},    {"adamw", "FFFF", 0},
};

static unsigned char *dslot[NARR], *hslot[NARR], *res0[NARR];
static float *dpar[NPAR];
static vt_grad_gate *dgate;
static size_t slot_bytes;
static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (uint32_t)(rs >> 16);
}

static void launch(int op, vt_cuk_dt dt, void **a, float **p, int64_t n, int nb, int c,
                   int64_t s, int v) {
    float *f0 = a[0], *f1 = a[1], *f2 = a[2], *f3 = a[3];
    const vt_grad_gate *gate = v ? dgate : NULL;
    switch (op) {
    case 0: vt_cuk_fill(0, f0, -0.0f, n); break;
    case 1: vt_cuk_scale(0, f0, 0.3f, n); break;
    case 2: vt_cuk_axpy(0, f0, -1.7f, f1, n); break;
    case 3: vt_cuk_add(0, dt, a[0], a[1], a[2], n); break;
    case 4: vt_cuk_to_act(0, dt, a[0], f1, n); break;
    case 5: vt_cuk_from_act(0, dt, f0, a[1], n); break;
    case 6: vt_cuk_acc_from_act(0, dt, f0, a[1], n); break;
    case 7: vt_cuk_relu_forward(0, dt, a[0], a[1], n); break;
    case 8: vt_cuk_relu_backward(0, dt, a[0], a[1], a[2], n); break;
    case 9: vt_cuk_relu_backward_skip(0, dt, a[0], a[3], a[1], a[2], n); break;
    case 10:
        vt_cuk_bn_apply(0, dt, a[0], a[1], v ? p[0] : NULL, p[1], p[2], v ? p[3] : NULL,
                        v ? p[4] : NULL, nb, c, s);
        break;
    case 11:
        vt_cuk_bn_apply_relu(0, dt, a[0], a[1], v ? a[2] : NULL, p[0], p[1], p[2], p[3], p[4],
                             nb, c, s);
        break;
    case 12:
        vt_cuk_bn_backward_apply(0, dt, a[0], a[1], a[2], p[0], p[1], p[2], v ? p[3] : NULL,
                                 p[4], p[5], (int64_t)nb * s, nb, c, s);
        break;
    case 13: vt_cuk_fill_bias(0, dt, a[0], p[0], (int64_t)nb * c, c, s); break;
    case 14: vt_cuk_add_bias_rows(0, f0, p[0], nb * (int)s, c); break;
    case 15:
        vt_cuk_sgd(0, f0, f1, v ? f2 : NULL, n, 0.01f, v ? 0.9f : 0.0f, 0.1f, 1e-4f, 1, 0, gate);
        break;
    case 16: vt_cuk_rmsprop(0, f0, f1, f2, f3, n, 0.01f, 0.99f, 1e-8f, 1e-4f, v ? 0.9f : 0.0f, gate); break;
    case 17: vt_cuk_adamw(0, f0, f1, f2, f3, n, 0.999f, 0.9f, 0.999f, 1e-8f, 1e-3f, 0.3f, gate); break;
    }
}

/* One case: random slots, offsets off[k] elements, run scalar then vector, compare. */
static void one(int op, vt_cuk_dt dt, int64_t n, int nb, int c, int64_t s, const int *off,
                int v) {
    const op_desc *d = &ops[op];
    const int na = (int)strlen(d->kinds);
    const size_t bytes = ((size_t)n * 4 + 2 * SLOT_PAD + 32 + 3) & ~(size_t)3;
    void *a[NARR] = {0};
    for (int k = 0; k < na; k++) {
        const int esz = d->kinds[k] == 'A' && dt == VT_CUK_BF16 ? 2 : 4;
        for (size_t b = 0; b < bytes; b += 4) {
            const uint32_t r = rnd();
            memcpy(hslot[k] + b, &r, 4);
        }
        a[k] = dslot[k] + SLOT_PAD + (size_t)off[k] * esz;
    }
    for (int run = 0; run < 2; run++) {
        for (int k = 0; k < na; k++)
            TCHECK(cudaMemcpy(dslot[k], hslot[k], bytes, cudaMemcpyHostToDevice) == 0, "up");
        vt_cuk_vec_set(run);
        TCHECK(vt_cuk_vec_enabled() == run, "vt_cuk_vec_set(%d) not taken", run);
        launch(op, dt, a, dpar, n, nb, c, s, v);
        TCHECK(cudaDeviceSynchronize() == 0, "%s: %s", d->name,
               cudaGetErrorString(cudaGetLastError()));
        for (int k = 0; k < na; k++) {
            unsigned char *dst = run ? hslot[k] : res0[k];
            TCHECK(cudaMemcpy(dst, dslot[k], bytes, cudaMemcpyDeviceToHost) == 0, "down");
        }
    }
    for (int k = 0; k < na; k++)
        TCHECK(!memcmp(res0[k], hslot[k], bytes),
               "%s %s v%d n=%lld (%dx%dx%lld) offsets %d,%d,%d,%d: array %d differs between "
               "VT_CUDA_VEC=0 and 1",
               d->name, dt == VT_CUK_BF16 ? "bf16" : "f32", v, (long long)n, nb, c,
               (long long)s, off[0], off[1], off[2], off[3], k);
    vt_cuk_vec_set(-1);
}

/* VT_CUDA_VEC as a fresh process reads it (once: a child each): the exit status of
 * vt_cuk_vec_enabled() there, or -1 when it stopped (a value other than 0 or 1). */
static int vec_env(const char *val) {
    fflush(stdout), fflush(stderr);
    const pid_t pid = fork();
    if (pid == 0) {
        if (val)
            setenv("VT_CUDA_VEC", val, 1);
        else
            unsetenv("VT_CUDA_VEC");
        freopen("/dev/null", "w", stderr);
        _exit(vt_cuk_vec_enabled());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) <= 1 ? WEXITSTATUS(st) : -1;
}

int main(void) {
    /* the switch needs no device: checked before the skip */
    TCHECK(vec_env(NULL) == 1 && vec_env("") == 1, "VT_CUDA_VEC unset: the vector kernels");
    TCHECK(vec_env("1") == 1 && vec_env("0") == 0, "VT_CUDA_VEC=1 / 0");
    TCHECK(vec_env("2") == -1 && vec_env("yes") == -1 && vec_env("01") == -1,
           "VT_CUDA_VEC other than 0 or 1: refused");
    if (vt_test_failures) /* a failure above must not hide behind the skip */
        return 1;
    if (vt_cuda_device_count() == 0) {
        printf("test_cuda_vec_gpu: VT_CUDA_VEC read right; no CUDA device: skipping the rest\n");
        return VT_TEST_SKIP;
    }
    const int64_t nmax = 3 * 5 * 40000 + 16;
    slot_bytes = (size_t)nmax * 4 + 2 * SLOT_PAD;
    for (int k = 0; k < NARR; k++) {
        TCHECK(cudaMalloc((void **)&dslot[k], slot_bytes) == 0, "cudaMalloc");
        hslot[k] = vt_malloc(slot_bytes), res0[k] = vt_malloc(slot_bytes);
    }
    float hp[64];
    for (int k = 0; k < NPAR; k++) {
        for (int j = 0; j < 64; j++)
            hp[j] = (float)(rnd() % 2000) / 1000.0f - (k == 2 ? -0.1f : 1.0f);
        TCHECK(cudaMalloc((void **)&dpar[k], sizeof hp) == 0, "cudaMalloc");
        TCHECK(cudaMemcpy(dpar[k], hp, sizeof hp, cudaMemcpyHostToDevice) == 0, "up");
    }
    const vt_grad_gate g = {.sumsq = 4.0, .norm = 2.0, .coef = 0.37, .skip = 0};
    TCHECK(cudaMalloc((void **)&dgate, sizeof g) == 0, "cudaMalloc");
    TCHECK(cudaMemcpy(dgate, &g, sizeof g, cudaMemcpyHostToDevice) == 0, "up");

    static const int64_t ns[] = {0, 1, 5, 7, 8, 9, 15, 16, 17, 31, 63, 64, 65, 97, 255, 257,
                                 1023, 4099, 65537, 600001};
    static const int64_t ss[] = {1, 3, 8, 9, 98, 40000};
    int64_t cases = 0;
    for (size_t op = 0; op < VT_ARRAY_LEN(ops); op++)
        for (int dt = 0; dt < 2; dt++) {
            if (dt && !strchr(ops[op].kinds, 'A'))
                continue;
            for (int k = 0; k < 8; k++)
                for (int alike = 1; alike >= 0; alike--) {
                    int off[NARR];
                    for (int j = 0; j < NARR; j++)
                        off[j] = alike ? k : (k + 3 * j + j * j) % 8;
                    /* the large n at three offsets only: the transfers */
                    const int few = alike ? k == 0 || k == 3 : k == 1;
                    for (int v = 0; v < 2; v++) {
                        if (ops[op].rows) {
                            for (size_t si = 0; si < VT_ARRAY_LEN(ss); si++)
                                for (int c = 1; c <= 5; c += 4) {
                                    if (ss[si] > 1000 && !few)
                                        continue;
                                    const int nb = ss[si] > 1000 ? 3 : 2;
                                    one((int)op, (vt_cuk_dt)dt, (int64_t)nb * c * ss[si], nb, c,
                                        ss[si], off, v);
                                    cases++;
                                }
                        } else {
                            for (size_t ni = 0; ni < VT_ARRAY_LEN(ns); ni++) {
                                if (ns[ni] > nmax - 8 || (ns[ni] > 5000 && !few))
                                    continue;
                                one((int)op, (vt_cuk_dt)dt, ns[ni], 0, 0, 0, off, v);
                                cases++;
                            }
                        }
                    }
                }
        }
    printf("test_cuda_vec_gpu: %lld cases\n", (long long)cases);
    for (int k = 0; k < NARR; k++)
        cudaFree(dslot[k]), free(hslot[k]), free(res0[k]);
    for (int k = 0; k < NPAR; k++)
        cudaFree(dpar[k]);
    cudaFree(dgate);
    return vt_test_done("test_cuda_vec_gpu");
}
#endif
