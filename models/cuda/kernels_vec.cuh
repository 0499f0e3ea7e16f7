/*
 * kernels_vec.cuh: how the memory-bound kernels walk their elements (issue 45 item 2).
 * An op is a functor (kernels_vec_ops.cuh) with one(i), the element i as the scalar
 * kernel has always computed it, and vec(i), the elements i .. i+7 of one 16-byte aligned
 * group: loaded with 16-byte accesses (one uint4 of bf16, two float4 of float per array),
 * each element computed by the same per-element function one() calls, stored with 16-byte
 * accesses. Two per-thread bodies walk them: vt_scalar_body, the grid-stride loop of
 * before, and vt_vec_body, whose threads take the scalar head (to the first aligned
 * element), the groups, and the scalar tail. vt_vec_choose, on the host, says which one
 * a launch takes: the vector body only where every array the op streams reaches 16-byte
 * alignment at one common head (else the scalar kernel), and only with VT_CUDA_VEC on.
 * Everything here but the launch is __host__ __device__: tests/test_cuda_vec.cu runs the
 * bodies on the CPU over every (block, thread) of the real launch and compares them bit
 * for bit, watching each access through vt_vec_note_host (NULL, and never read, on the
 * GPU).
 * It must never change a value: the vector path differs from the scalar one only in how
 * the bytes move, never in the arithmetic or its order, so results stay bit for bit those
 * of the scalar kernels (NaN payloads and -0 included); a reduction, whose order of
 * additions would change, never walks through here.
 */
#ifndef VT_CUDA_KERNELS_VEC_CUH
#define VT_CUDA_KERNELS_VEC_CUH

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <cuda_bf16.h>
#include <vector_types.h>

#define VT_THREADS 256
/* Grid-stride loops cap the grid: enough blocks to fill any current GPU many times. */
#define VT_MAX_BLOCKS 65535
/* Elements of one vector group: 16 bytes of bf16, 32 of float. */
#define VT_VEC_W 8
/* The alignment a group's accesses need (float4, uint4). */
#define VT_VEC_ALIGN 16

#define VT_HD __host__ __device__ inline

/* The float operations the kernels spell unfused (kernels_impl.cuh's rules), and VT_DF, a
 * double rounded to float. On the host (the test): plain IEEE operations (x86-64 without
 * -march has no FMA to contract into), and a NaN result made the GPU's canonical NaN, as
 * the GPU's own arithmetic makes it: the host compiler may swap the operands of an add,
 * which changes whose NaN payload survives, and the test must not see that as a
 * difference. */
#ifdef __CUDA_ARCH__
#define VT_FADD(a, b) __fadd_rn(a, b)
#define VT_FSUB(a, b) __fsub_rn(a, b)
#define VT_FMUL(a, b) __fmul_rn(a, b)
#define VT_FDIV(a, b) __fdiv_rn(a, b)
#define VT_FSQRT(a) __fsqrt_rn(a)
#define VT_D2F(a) __double2float_rn(a)
#define VT_DF(a) ((float)(a))
#else
static inline float vt_host_nan(float v) {
    if (v == v)
        return v;
    const uint32_t u = 0x7fffffffu;
    memcpy(&v, &u, 4);
    return v;
}
#define VT_FADD(a, b) vt_host_nan((float)(a) + (float)(b))
#define VT_FSUB(a, b) vt_host_nan((float)(a) - (float)(b))
#define VT_FMUL(a, b) vt_host_nan((float)(a) * (float)(b))
#define VT_FDIV(a, b) vt_host_nan((float)(a) / (float)(b))
#define VT_FSQRT(a) vt_host_nan(sqrtf(a))
#define VT_D2F(a) vt_host_nan((float)(a))
#define VT_DF(a) vt_host_nan((float)(a))
#endif

static inline unsigned vt_blocks(int64_t n) {
    int64_t b = (n + VT_THREADS - 1) / VT_THREADS;
    if (b < 1)
        b = 1;
    return (unsigned)(b > VT_MAX_BLOCKS ? VT_MAX_BLOCKS : b);
}

/* The (rows = N*C, s) kernels' grid (kernels_impl.cuh rows_grid): x walks s, y the rows. */
static inline void vt_rows_grid(int64_t rows, int64_t s, unsigned *gx, unsigned *gy) {
    int64_t x = (s + VT_THREADS - 1) / VT_THREADS;
    if (x > 1024)
        x = 1024;
    if (x < 1)
        x = 1;
    int64_t y = rows < 65535 ? rows : 65535;
    if (y < 1)
        y = 1;
    *gx = (unsigned)x, *gy = (unsigned)y;
}

/* The test's window onto every access of the bodies below, on the host only: p, its
 * size in bytes, store (1) or load (0), a 16-byte access (1) or an element (0). */
typedef void (*vt_vec_note_fn)(const void *p, size_t bytes, int store, int vec);
inline vt_vec_note_fn vt_vec_note_host = nullptr;

VT_HD void vt_vec_note(const void *p, size_t bytes, int store, int vec) {
#ifndef __CUDA_ARCH__
    if (vt_vec_note_host)
        vt_vec_note_host(p, bytes, store, vec);
#else
    (void)p, (void)bytes, (void)store, (void)vec;
#endif
}

/* One element: float, or bf16 widened exactly / rounded to nearest even (kernels_impl.cuh
 * ld() and st(), which these are for the functors). */
VT_HD float vt_ld1(const float *p, int64_t i) {
    vt_vec_note(p + i, sizeof *p, 0, 0);
    return p[i];
}
VT_HD float vt_ld1(const __nv_bfloat16 *p, int64_t i) {
    vt_vec_note(p + i, sizeof *p, 0, 0);
    return __bfloat162float(p[i]);
}
VT_HD void vt_st1(float *p, int64_t i, float v) {
    vt_vec_note(p + i, sizeof *p, 1, 0);
    p[i] = v;
}
VT_HD void vt_st1(__nv_bfloat16 *p, int64_t i, float v) {
    vt_vec_note(p + i, sizeof *p, 1, 0);
    p[i] = __float2bfloat16_rn(v);
}
/* v as storing it in A and loading it back leaves it (float: itself). */
VT_HD float vt_as_stored(const float *, float v) { return v; }
VT_HD float vt_as_stored(const __nv_bfloat16 *, float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

/* One 16-byte access. The host copies through memcpy (no aliasing question) after the
 * note, which lets the test see that the address is aligned. */
VT_HD uint4 vt_ld16(const void *p) {
#ifdef __CUDA_ARCH__
    return *reinterpret_cast<const uint4 *>(p);
#else
    vt_vec_note(p, 16, 0, 1);
    uint4 u;
    memcpy(&u, p, 16);
    return u;
#endif
}
VT_HD void vt_st16(void *p, uint4 u) {
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4 *>(p) = u;
#else
    vt_vec_note(p, 16, 1, 1);
    memcpy(p, &u, 16);
#endif
}
VT_HD float vt_u2f(unsigned u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
VT_HD unsigned vt_f2u(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

/* The 8 elements of one group at p (16-byte aligned), as ld() would load each. Element e
 * of a uint4 is its e-th 16 bits from the low address (little-endian, host and GPU). */
VT_HD void vt_ld8(const float *p, float *v) {
    const uint4 a = vt_ld16(p), b = vt_ld16(p + 4);
    v[0] = vt_u2f(a.x), v[1] = vt_u2f(a.y), v[2] = vt_u2f(a.z), v[3] = vt_u2f(a.w);
    v[4] = vt_u2f(b.x), v[5] = vt_u2f(b.y), v[6] = vt_u2f(b.z), v[7] = vt_u2f(b.w);
}
VT_HD float vt_bf_lo(unsigned w) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w & 0xffffu))); }
VT_HD float vt_bf_hi(unsigned w) { return __bfloat162float(__ushort_as_bfloat16((unsigned short)(w >> 16))); }
VT_HD void vt_ld8(const __nv_bfloat16 *p, float *v) {
    const uint4 u = vt_ld16(p);
    v[0] = vt_bf_lo(u.x), v[1] = vt_bf_hi(u.x), v[2] = vt_bf_lo(u.y), v[3] = vt_bf_hi(u.y);
    v[4] = vt_bf_lo(u.z), v[5] = vt_bf_hi(u.z), v[6] = vt_bf_lo(u.w), v[7] = vt_bf_hi(u.w);
}
/* ... and stored as st() would store each. */
VT_HD void vt_st8(float *p, const float *v) {
    vt_st16(p, make_uint4(vt_f2u(v[0]), vt_f2u(v[1]), vt_f2u(v[2]), vt_f2u(v[3])));
    vt_st16(p + 4, make_uint4(vt_f2u(v[4]), vt_f2u(v[5]), vt_f2u(v[6]), vt_f2u(v[7])));
}
VT_HD unsigned vt_bf2(float lo, float hi) {
    return (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           (unsigned)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16;
}
VT_HD void vt_st8(__nv_bfloat16 *p, const float *v) {
    vt_st16(p, make_uint4(vt_bf2(v[0], v[1]), vt_bf2(v[2], v[3]), vt_bf2(v[4], v[5]),
                          vt_bf2(v[6], v[7])));
}

/* ------------------------------------------------------------------ the bodies */

/* The scalar kernels' thread g of G: the grid-stride loop (kernels_impl.cuh
 * VT_GRID_STRIDE). */
template <class F> VT_HD void vt_scalar_body(const F &f, int64_t g, int64_t G, int64_t n) {
    for (int64_t i = g; i < n; i += G)
        f.one(i);
}
/* The vector kernels' thread g of G (G >= VT_VEC_W, as a block is): elements [0, head)
 * one each by threads 0 .. head-1, then groups of VT_VEC_W from head on, grid-strided, then
 * the tail that does not fill a group, one each again. head (vt_vec_choose) is where
 * every streamed array is 16-byte aligned. */
template <class F>
VT_HD void vt_vec_body(const F &f, int64_t g, int64_t G, int64_t n, int head) {
    const int64_t h = head < n ? head : n;
    const int64_t ng = (n - h) / VT_VEC_W, t0 = h + ng * VT_VEC_W;
    if (g < h)
        f.one(g);
    if (g < n - t0)
        f.one(t0 + g);
    for (int64_t k = g; k < ng; k += G)
        f.vec(h + k * VT_VEC_W);
}
/* The (rows = N*C, s) kernels' scalar thread (kernels_impl.cuh VT_ROWS_LOOP and
 * rows_grid): block (bx, by) of (gx, gy), thread tx of bd. */
template <class F>
VT_HD void vt_rows_body(const F &f, int64_t bx, int64_t by, int64_t tx, int64_t gx, int64_t gy,
                        int64_t bd, int64_t rows, int64_t s) {
    for (int64_t row = by; row < rows; row += gy)
        for (int64_t j = bx * bd + tx; j < s; j += gx * bd)
            f.one_rc(row * s + j, (int)(row % f.c));
}

/* Where a group's walk over (rows, s) with channel row % c stands: element j of its row,
 * channel ci. vt_rc_at: at flat index i; vt_rc_next: one element on (true: a new row).
 * A group within one row (j + VT_VEC_W <= s) reads its channel's parameters once; one
 * across rows reads them per element, as the scalar kernel does (a single path that
 * re-read them on a new row took half again the registers). */
struct vt_rc {
    int64_t j;
    int ci;
};
/* a / b for a >= 0, b > 0: in 32 bits when both fit (a GPU divides 64-bit integers in
 * software, several times slower; a group divides twice). */
VT_HD int64_t vt_div(int64_t a, int64_t b) {
    if (((uint64_t)a | (uint64_t)b) >> 32 == 0)
        return (int64_t)((uint32_t)a / (uint32_t)b);
    return a / b;
}
VT_HD vt_rc vt_rc_at(int64_t i, int64_t s, int c) {
    const int64_t row = vt_div(i, s);
    vt_rc r;
    r.j = i - row * s;
    r.ci = (int)(row - vt_div(row, c) * c);
    return r;
}
VT_HD bool vt_rc_next(vt_rc *r, int64_t s, int c) {
    if (++r->j < s)
        return false;
    r->j = 0;
    if (++r->ci == c)
        r->ci = 0;
    return true;
}

/* ------------------------------------------------------------------ the choice */

/* Which body a launch of n elements takes (a pure function of n, on and the arrays'
 * addresses): vec 1 with head, the elements before every array is aligned, and blocks,
 * the grid; vec 0: the scalar kernel on vt_blocks(n). on: VT_CUDA_VEC (kernels.h
 * vt_cuk_vec_enabled). p[k], esz[k]: the arrays the op streams and their element sizes
 * (NULL ones, which the op does not read, left out). An array that is not aligned to its
 * element, or arrays that reach 16 bytes at no common head, take the scalar kernel. */
typedef struct vt_vec_plan {
    int vec, head;
    unsigned blocks;
} vt_vec_plan;
static inline vt_vec_plan vt_vec_choose(int64_t n, int on, const void *const *p, const int *esz,
                                        int np) {
    vt_vec_plan r = {0, 0, vt_blocks(n)};
    if (!on)
        return r;
    for (int h = 0; h < VT_VEC_W; h++) {
        int ok = 1;
        for (int k = 0; k < np && ok; k++) {
            const uintptr_t a = (uintptr_t)p[k];
            if (!a)
                continue;
            if (a % (uintptr_t)esz[k])
                return r;
            ok = (a + (uintptr_t)h * (uintptr_t)esz[k]) % VT_VEC_ALIGN == 0;
        }
        if (ok) {
            const int64_t hh = h < n ? h : n;
            r.vec = 1;
            r.head = h;
            r.blocks = vt_blocks((n - hh) / VT_VEC_W);
            return r;
        }
    }
    return r;
}
/* The plan for functor f: its arrays() names what it streams. */
template <class F> static inline vt_vec_plan vt_vec_plan_of(const F &f, int64_t n, int on) {
    const void *p[6];
    int esz[6];
    const int np = f.arrays(p, esz);
    return vt_vec_choose(n, on, p, esz, np);
}

#endif
