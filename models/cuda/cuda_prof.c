/*
 * cuda_prof.c: the per-op GPU timer of the CUDA backend (VT_CUDA_PROF=1, issue 45 step
 * 1; docs/cuda.md "Per-op GPU profile"). When the variable is set as a backend is made,
 * the backend gets a copy of its op table whose compute slots are wrappers: each records
 * a cudaEvent pair on the backend's stream around the real op and files the pair under
 * the op's name (convolutions also under their shape). Pairs are read back in batches
 * (when the ring is full, and at the end), so timing never syncs the stream per op; the
 * table printed when the backend is destroyed gives, sorted by GPU time, each op's
 * calls, total ms, mean µs and share of the timed GPU time.
 *
 * Zero cost when off: the backend keeps its own table and nothing here runs. The events
 * measure stream time between the op's first and last launch, so an op that waits on
 * the copy stream (an upload join) is charged the wait: that is where the step waits.
 * Slots not listed below (memory, uploads, ops added to backend.h later) pass through
 * untimed. The host's waits through the table (to_host, synchronize, sumsq, upload_wait)
 * are counted, and the report gives them per optimizer update (issue 45 step 3). Nested
 * calls (an op calling another through the table) count once, outermost.
 *
 * It must never change what an op computes, nor synchronise the stream except to read
 * back a full ring (1 in CU_PROF_RING ops) and at the report.
 */
#include "models/cuda/cuda_prof.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "models/cuda/backend_cuda_impl.h"
#include "models/cuda/cuda_check.h"

#define CU_PROF_RING 4096 /* event pairs in flight before a read-back */
#define CU_PROF_KEYS 512  /* distinct names (ops and conv shapes) */

typedef struct prof_key {
    char name[96];
    int64_t calls;
    double ms;
} prof_key;

struct cu_prof {
    cudaEvent_t ev0[CU_PROF_RING], ev1[CU_PROF_RING];
    int key[CU_PROF_RING], key2[CU_PROF_RING]; /* each pending pair's keys (key2: -1 or a
                                                * conv shape's) */
    int pending, depth, open_slot;
    prof_key keys[CU_PROF_KEYS];
    int nkeys;
    double ms_all;
    /* host waits through the table (issue 45 step 3): to_host, synchronize, sumsq,
     * upload_wait; counted, not timed apart (to_host and sumsq are timed ops too) */
    int64_t waits[4];
};
static const char *const wait_names[4] = {"to_host", "synchronize", "sumsq", "upload_wait"};

static const vt_backend_i *real_i; /* the backend's own table (one for every GPU) */
static vt_backend_i prof_i;        /* the wrapping copy */

int vt_cuda_prof_enabled(void) {
    const char *e = getenv("VT_CUDA_PROF");
    return e && *e && strcmp(e, "0") != 0;
}

static int key_of(cu_prof *p, const char *name) {
    for (int i = 0; i < p->nkeys; i++)
        if (!strcmp(p->keys[i].name, name))
            return i;
    if (p->nkeys == CU_PROF_KEYS)
        return CU_PROF_KEYS - 1; /* the last one collects the rest (never reached by r3d18) */
    snprintf(p->keys[p->nkeys].name, sizeof p->keys[0].name, "%s", name);
    return p->nkeys++;
}

/* Every pending pair's time, into its key (syncs on the last end event). */
static void harvest(cu_prof *p) {
    if (!p->pending)
        return;
    CUDA_CHECK(cudaEventSynchronize(p->ev1[p->pending - 1]));
    for (int i = 0; i < p->pending; i++) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev0[i], p->ev1[i]));
        p->keys[p->key[i]].ms += ms;
        p->keys[p->key[i]].calls++;
        if (p->key2[i] >= 0) {
            p->keys[p->key2[i]].ms += ms;
            p->keys[p->key2[i]].calls++;
        }
        p->ms_all += ms;
    }
    p->pending = 0;
}

/* Opens a pair under name (and name2 when not NULL); returns 1 when this call is the
 * outermost (it must close). */
static int begin2(vt_backend *be, const char *name, const char *name2) {
    cu_ctx *c = vt_cuda_enter(be);
    cu_prof *p = c->prof;
    if (p->depth++)
        return 0;
    if (p->pending == CU_PROF_RING)
        harvest(p);
    p->open_slot = p->pending;
    p->key[p->open_slot] = key_of(p, name);
    p->key2[p->open_slot] = name2 ? key_of(p, name2) : -1;
    CUDA_CHECK(cudaEventRecord(p->ev0[p->open_slot], c->stream));
    return 1;
}
static int begin(vt_backend *be, const char *name) { return begin2(be, name, NULL); }
static void end(vt_backend *be, int outer) {
    cu_ctx *c = vt_cuda_ctx(be);
    cu_prof *p = c->prof;
    p->depth--;
    if (!outer)
        return;
    CUDA_CHECK(cudaEventRecord(p->ev1[p->open_slot], c->stream));
    p->pending = p->open_slot + 1;
}

/* A wrapper per timed slot: W(op, (params), (args)). */
#define W(op, params, args)                                                                    \
    static void pw_##op params {                                                              \
        int o_ = begin(be, #op);                                                              \
        real_i->op args;                                                                      \
        end(be, o_);                                                                          \
    }

W(to_device, (vt_backend *be, void *dst, const void *src, size_t bytes), (be, dst, src, bytes))
W(to_host_async, (vt_backend *be, void *dst, const void *src, size_t bytes),
  (be, dst, src, bytes))
static void count_wait(vt_backend *be, int w) { vt_cuda_ctx(be)->prof->waits[w]++; }
static void pw_to_host(vt_backend *be, void *dst, const void *src, size_t bytes) {
    int o_ = begin(be, "to_host");
    real_i->to_host(be, dst, src, bytes);
    end(be, o_);
    count_wait(be, 0);
}
static void pw_synchronize(vt_backend *be) {
    real_i->synchronize(be);
    count_wait(be, 1);
}
static void pw_upload_wait(vt_backend *be) {
    real_i->upload_wait(be);
    count_wait(be, 3);
}
W(copy, (vt_backend *be, void *dst, const void *src, size_t bytes), (be, dst, src, bytes))
W(fill, (vt_backend *be, float *x, float v, int64_t n), (be, x, v, n))
W(scale, (vt_backend *be, float *x, float a, int64_t n), (be, x, a, n))
W(axpy, (vt_backend *be, float *y, float a, const float *x, int64_t n), (be, y, a, x, n))
W(round_even, (vt_backend *be, float *x, int64_t n), (be, x, n))
W(add, (vt_backend *be, float *out, const float *a, const float *b, int64_t n), (be, out, a, b, n))
W(act_from_f32, (vt_backend *be, float *dst, const float *src, int64_t n), (be, dst, src, n))
W(act_to_f32, (vt_backend *be, float *dst, const float *src, int64_t n), (be, dst, src, n))
W(bn_stats, (vt_backend *be, float *sum, float *sumsq, const float *x, const float *k, int n,
             int c, int64_t s), (be, sum, sumsq, x, k, n, c, s))
W(bn_finalize, (vt_backend *be, float *mean, float *invstd, float *rm, float *rv,
                const float *sum, const float *sumsq, const float *k, int64_t count, int c,
                float momentum, float eps), (be, mean, invstd, rm, rv, sum, sumsq, k, count, c,
                                            momentum, eps))
W(bn_apply, (vt_backend *be, float *out, const float *x, const float *k, const float *mean,
             const float *invstd, const float *gamma, const float *beta, int n, int c,
             int64_t s), (be, out, x, k, mean, invstd, gamma, beta, n, c, s))
W(bn_apply_relu, (vt_backend *be, float *out, const float *x, const float *k,
                  const float *mean, const float *invstd, const float *gamma,
                  const float *beta, const float *res, int n, int c, int64_t s),
  (be, out, x, k, mean, invstd, gamma, beta, res, n, c, s))
W(bn_backward_reduce, (vt_backend *be, float *sdy, float *sdyx, const float *dy, const float *x,
                       const float *k, const float *mean, const float *invstd, int n, int c,
                       int64_t s), (be, sdy, sdyx, dy, x, k, mean, invstd, n, c, s))
W(bn_backward_apply, (vt_backend *be, float *din, const float *dy, const float *x,
                      const float *k, const float *mean, const float *invstd,
                      const float *gamma, const float *sdy, const float *sdyx, int64_t count,
                      int n, int c, int64_t s),
  (be, din, dy, x, k, mean, invstd, gamma, sdy, sdyx, count, n, c, s))
W(relu_backward_skip, (vt_backend *be, float *din, float *skip, const float *dout,
                       const float *out, int64_t n), (be, din, skip, dout, out, n))
W(bn_relu_backward_reduce, (vt_backend *be, float *sdy, float *sdyx, float *dy,
                            const float *dout, const float *y, const float *x, const float *k,
                            const float *mean, const float *invstd, int n, int c, int64_t s),
  (be, sdy, sdyx, dy, dout, y, x, k, mean, invstd, n, c, s))
W(relu_forward, (vt_backend *be, float *out, const float *in, int64_t n), (be, out, in, n))
W(relu_backward, (vt_backend *be, float *din, const float *dout, const float *out, int64_t n),
  (be, din, dout, out, n))
W(maxpool3d_forward, (vt_backend *be, float *out, const float *in, int n, int c,
                      const int thw[3], const vt_pool3d_p *p), (be, out, in, n, c, thw, p))
W(maxpool3d_backward, (vt_backend *be, float *din, const float *dout, const float *in, int n,
                       int c, const int thw[3], const vt_pool3d_p *p),
  (be, din, dout, in, n, c, thw, p))
W(avgpool3d_forward, (vt_backend *be, float *out, const float *in, int n, int c,
                      const int thw[3], const vt_pool3d_p *p), (be, out, in, n, c, thw, p))
W(avgpool3d_backward, (vt_backend *be, float *din, const float *dout, int n, int c,
                       const int thw[3], const vt_pool3d_p *p), (be, din, dout, n, c, thw, p))
W(gap_forward, (vt_backend *be, float *out, const float *in, int n, int c, int64_t s),
  (be, out, in, n, c, s))
W(gap_backward, (vt_backend *be, float *din, const float *dout, int n, int c, int64_t s),
  (be, din, dout, n, c, s))
W(linear_forward, (vt_backend *be, float *out, const float *in, const float *w, const float *b,
                   int n, int in_f, int out_f), (be, out, in, w, b, n, in_f, out_f))
W(linear_backward, (vt_backend *be, float *din, float *dw, float *db, const float *dout,
                    const float *in, const float *w, int n, int in_f, int out_f),
  (be, din, dw, db, dout, in, w, n, in_f, out_f))
W(dropout_forward, (vt_backend *be, float *out, float *mask, const float *in, int64_t n,
                    float p, uint64_t seed), (be, out, mask, in, n, p, seed))
W(dropout_backward, (vt_backend *be, float *din, const float *dout, const float *mask,
                     int64_t n), (be, din, dout, mask, n))
W(softmax_xent, (vt_backend *be, float *loss, float *dl, float *prob, const float *logits,
                 const int32_t *label, int n, int k, float sm, float gs),
  (be, loss, dl, prob, logits, label, n, k, sm, gs))
W(softmax_xent_w, (vt_backend *be, float *loss, float *dl, float *prob, const float *logits,
                   const int32_t *label, const float *cw, int n, int k, float sm, float gs),
  (be, loss, dl, prob, logits, label, cw, n, k, sm, gs))
W(softmax_xent_soft, (vt_backend *be, float *loss, float *dl, const float *logits,
                      const float *target, int n, int k, float gs),
  (be, loss, dl, logits, target, n, k, gs))
W(bce_logits, (vt_backend *be, float *loss, float *dl, float *prob, const float *logits,
               const float *target, int n, int k, float gs), (be, loss, dl, prob, logits, target,
                                                              n, k, gs))
W(sgd_update, (vt_backend *be, float *p, const float *g, float *buf, int64_t n, float lr,
               float mom, float damp, float wd, int nesterov, int64_t step,
               const vt_grad_gate *gate),
  (be, p, g, buf, n, lr, mom, damp, wd, nesterov, step, gate))
W(rmsprop_update, (vt_backend *be, float *p, const float *g, float *sq, float *buf, int64_t n,
                   float lr, float alpha, float eps, float wd, float mom,
                   const vt_grad_gate *gate),
  (be, p, g, sq, buf, n, lr, alpha, eps, wd, mom, gate))
W(adamw_update, (vt_backend *be, float *p, const float *g, float *m, float *v, int64_t n,
                 float lr, float b1, float b2, float eps, float wd, int64_t step,
                 const vt_grad_gate *gate),
  (be, p, g, m, v, n, lr, b1, b2, eps, wd, step, gate))
W(grad_sumsq, (vt_backend *be, vt_grad_gate *gate, const float *x, int64_t n, int add),
  (be, gate, x, n, add))
W(grad_gate, (vt_backend *be, vt_grad_gate *gate, float clip, double skip_at, int skip),
  (be, gate, clip, skip_at, skip))
W(copy_if_skip, (vt_backend *be, void *dst, const void *src, size_t bytes,
                 const vt_grad_gate *gate), (be, dst, src, bytes, gate))
W(xsum_fold, (vt_backend *be, int64_t *acc, const float *x, int64_t n, int init, int e0), (be, acc, x, n, init, e0))
W(xsum_round, (vt_backend *be, float *out, const int64_t *acc, int64_t n, int e0),
  (be, out, acc, n, e0))

W(layernorm_forward, (vt_backend *be, float *out, float *mean, float *invstd, const float *x,
                      const float *g, const float *b, int64_t rows, int c, float eps),
  (be, out, mean, invstd, x, g, b, rows, c, eps))
W(layernorm_backward, (vt_backend *be, float *din, float *dg, float *db, const float *dout,
                       const float *x, const float *mean, const float *invstd, const float *g,
                       int64_t rows, int c), (be, din, dg, db, dout, x, mean, invstd, g, rows, c))
W(gelu_forward, (vt_backend *be, float *out, const float *in, int64_t n), (be, out, in, n))
W(gelu_backward, (vt_backend *be, float *din, const float *dout, const float *in, int64_t n),
  (be, din, dout, in, n))
W(attention_forward, (vt_backend *be, float *out, float *lse, const float *qkv, int n, int l,
                      int h, int d), (be, out, lse, qkv, n, l, h, d))
W(attention_backward, (vt_backend *be, float *dqkv, const float *dout, const float *qkv,
                       const float *out, const float *lse, int n, int l, int h, int d),
  (be, dqkv, dout, qkv, out, lse, n, l, h, d))
W(transpose, (vt_backend *be, float *out, const float *in, int n, int a, int b),
  (be, out, in, n, a, b))
W(token_mean_forward, (vt_backend *be, float *out, const float *in, int n, int l, int c),
  (be, out, in, n, l, c))
W(token_mean_backward, (vt_backend *be, float *din, const float *dout, int n, int l, int c),
  (be, din, dout, n, l, c))
W(add_bcast, (vt_backend *be, float *out, const float *in, const float *pos, int n, int64_t per),
  (be, out, in, pos, n, per))
W(add_bcast_backward, (vt_backend *be, float *dpos, const float *dout, int n, int64_t per),
  (be, dpos, dout, n, per))
W(scale_rows, (vt_backend *be, float *out, const float *in, const float *sc, int n, int64_t per),
  (be, out, in, sc, n, per))

/* sumsq returns a value (and syncs): its own wrapper. */
static double pw_sumsq(vt_backend *be, const float *x, int64_t n) {
    int o = begin(be, "sumsq");
    double r = real_i->sumsq(be, x, n);
    end(be, o);
    count_wait(be, 2);
    return r;
}

/* Convolutions: filed under the op and, apart, under their shape ("conv fwd 64->64
 * k3x3x3 s1x1x1 in 16x56x56"), so the table shows which layers cost the most. */
static void conv_name(char *buf, size_t len, const char *dir, const int thw[3],
                      const vt_conv3d_p *p) {
    snprintf(buf, len, "  conv %s %d->%d k%dx%dx%d s%dx%dx%d in %dx%dx%d", dir, p->cin, p->cout,
             p->k[0], p->k[1], p->k[2], p->s[0], p->s[1], p->s[2], thw[0], thw[1], thw[2]);
}
static void pw_conv3d_forward(vt_backend *be, float *out, const float *in, const float *w,
                              const float *b, int n, const int thw[3], const vt_conv3d_p *p) {
    char nm[96];
    conv_name(nm, sizeof nm, "fwd", thw, p);
    int o = begin2(be, "conv3d_forward", nm);
    real_i->conv3d_forward(be, out, in, w, b, n, thw, p);
    end(be, o);
}
static void pw_conv3d_backward(vt_backend *be, float *din, float *dw, float *db,
                               const float *dout, const float *in, const float *w, int n,
                               const int thw[3], const vt_conv3d_p *p) {
    char nm[96];
    conv_name(nm, sizeof nm, "bwd", thw, p);
    int o = begin2(be, "conv3d_backward", nm);
    real_i->conv3d_backward(be, din, dw, db, dout, in, w, n, thw, p);
    end(be, o);
}

const vt_backend_i *vt_cuda_prof_wrap(const vt_backend_i *real) {
    /* towers may make their backends on their own threads at once */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    if (real_i) {
        VT_CHECK(real_i == real, "VT_CUDA_PROF: a second op table to wrap");
        pthread_mutex_unlock(&mu);
        return &prof_i;
    }
    real_i = real;
    prof_i = *real;
#define S(op) prof_i.op = real->op ? pw_##op : NULL
    S(to_device); S(to_host); S(copy); S(fill); S(scale); S(axpy); S(round_even); S(add);
    S(sumsq); S(act_from_f32); S(act_to_f32); S(conv3d_forward); S(conv3d_backward);
    S(bn_stats); S(bn_finalize); S(bn_apply); S(bn_apply_relu); S(bn_backward_reduce); S(bn_backward_apply);
    S(relu_forward); S(relu_backward); S(maxpool3d_forward); S(maxpool3d_backward);
    S(avgpool3d_forward); S(avgpool3d_backward); S(gap_forward); S(gap_backward);
    S(linear_forward); S(linear_backward); S(dropout_forward); S(dropout_backward);
    S(softmax_xent); S(softmax_xent_w); S(softmax_xent_soft); S(bce_logits); S(sgd_update); S(rmsprop_update);
    S(adamw_update); S(xsum_fold); S(xsum_round); S(grad_sumsq); S(grad_gate); S(copy_if_skip);
    S(to_host_async); S(synchronize); S(upload_wait); S(relu_backward_skip);
    S(bn_relu_backward_reduce);
    S(layernorm_forward); S(layernorm_backward); S(gelu_forward); S(gelu_backward);
    S(attention_forward); S(attention_backward); S(transpose); S(token_mean_forward);
    S(token_mean_backward); S(add_bcast); S(add_bcast_backward); S(scale_rows);
#undef S
    pthread_mutex_unlock(&mu);
    return &prof_i;
}

cu_prof *vt_cuda_prof_new(void) {
    cu_prof *p = vt_calloc(1, sizeof *p);
    for (int i = 0; i < CU_PROF_RING; i++) {
        CUDA_CHECK(cudaEventCreate(&p->ev0[i]));
        CUDA_CHECK(cudaEventCreate(&p->ev1[i]));
    }
    return p;
}

void vt_cuda_prof_reset(cu_prof *p) {
    if (!p)
        return;
    harvest(p);
    memset(p->keys, 0, sizeof p->keys);
    memset(p->waits, 0, sizeof p->waits);
    p->nkeys = 0;
    p->ms_all = 0;
}

static int by_ms(const void *a, const void *b) {
    const prof_key *x = a, *y = b;
    return (x->ms < y->ms) - (x->ms > y->ms);
}

void vt_cuda_prof_report(cu_prof *p, int device, FILE *f) {
    if (!p)
        return;
    harvest(p);
    /* The op rows first (their shares add up to 100%), then the conv shapes. */
    qsort(p->keys, (size_t)p->nkeys, sizeof p->keys[0], by_ms);
    double conv_ms = 0;
    for (int i = 0; i < p->nkeys; i++)
        if (p->keys[i].name[0] == ' ')
            conv_ms += p->keys[i].ms;
    fprintf(f, "VT_CUDA_PROF cuda%d: GPU time of each op (stream time between its first and "
               "last launch), %.1f ms in all\n", device, p->ms_all);
    fprintf(f, "  %-44s %8s %11s %10s %7s\n", "op", "calls", "total ms", "mean us", "share");
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && conv_ms > 0)
            fprintf(f, "  convolutions by shape (share of all ops' time):\n");
        for (int i = 0; i < p->nkeys; i++) {
            const prof_key *k = &p->keys[i];
            if ((k->name[0] == ' ') != pass || !k->calls)
                continue;
            fprintf(f, "  %-44s %8lld %11.2f %10.1f %6.1f%%\n", k->name, (long long)k->calls,
                    k->ms, 1000.0 * k->ms / (double)k->calls,
                    100.0 * k->ms / VT_MAX(p->ms_all, 1e-9));
        }
    }
    /* Host waits per optimizer update (one a step without parameter groups): what the
     * host stops for, so what a CUDA graph of the step would have to lose. */
    int64_t updates = 0, all = 0;
    for (int i = 0; i < p->nkeys; i++)
        if (strstr(p->keys[i].name, "_update") && p->keys[i].name[0] != ' ')
            updates += p->keys[i].calls;
    fprintf(f, "  host waits through the op table:");
    for (int w = 0; w < 4; w++) {
        fprintf(f, " %s %lld,", wait_names[w], (long long)p->waits[w]);
        all += p->waits[w];
    }
    fprintf(f, " %lld in all", (long long)all);
    if (updates > 0)
        fprintf(f, ", %.2f per optimizer update (%lld updates)", (double)all / (double)updates,
                (long long)updates);
    fprintf(f, "\n");
    fflush(f);
}

void vt_cuda_prof_free(cu_prof *p) {
    if (!p)
        return;
    for (int i = 0; i < CU_PROF_RING; i++) {
        CUDA_CHECK(cudaEventDestroy(p->ev0[i]));
        CUDA_CHECK(cudaEventDestroy(p->ev1[i]));
    }
    free(p);
}
