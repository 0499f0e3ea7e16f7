/*
 * mpi.c: the processes of a run (mpi.h) — MPI start and end, every rank's host and pid,
 * and the collectives vidtrain needs, each built from non-blocking point-to-point
 * messages that a polling loop waits for with a timeout, so that a rank that died,
 * hangs or was stopped is named instead of waited for.
 *
 * Sums: rank k owns elements [n*k/P, n*(k+1)/P); every rank sends each owner its part of
 * those elements, the owner adds the P parts in rank order, and every owner sends its
 * summed chunk to every rank. Each element is added once, in one order, by one rank:
 * every rank gets the same bits, and they equal the host reducer's rank-order sum. Data
 * on the wire per rank: 2 (P-1)/P n elements, as a ring allreduce.
 *
 * It must never use an MPI reduction (implementation-chosen order), never block in an
 * MPI call that cannot time out, and never be called by two threads at once.
 */
#include "pipeline/parallel/mpi.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#ifdef VT_HAVE_MPI
#include <mpi.h>
#endif

const char vt_mpi_help[] =
    "\nseveral processes or machines (README \"Beyond one machine\"):\n"
    "  mpirun -np N [--host a:1,b:1] vidtrain ...   (or srun): one rank per process, each with\n"
    "                      its own devices; the batch is planned over every rank's towers;\n"
    "                      rank 0 writes the run folder. Every rank needs the dataset.\n"
    "  VT_MPI_TIMEOUT=S    seconds a rank waits for a silent peer before ending the job (600)\n";

typedef struct peer_info {
    char host[64];
    int32_t pid;
    int32_t pad;
} peer_info;

static int g_rank = 0, g_size = 1, g_inited = 0;
static double g_timeout = 600;
static peer_info *g_peers;        /* (g_size) */
static int (*g_sigcheck)(void);
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_ctx[160];

/* The environment variable that says a launcher started us, and the world size it
 * announces (0 when it does not say). */
static const char *launcher_env(int *size) {
    static const char *const vars[][2] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"}, /* Open MPI's mpirun */
        {"PMIX_RANK", "PMIX_SIZE"},                       /* PMIx: srun --mpi=pmix, Open MPI 5 */
        {"PMI_RANK", "PMI_SIZE"},                         /* PMI-1/2: MPICH hydra, srun --mpi=pmi2 */
        {"PMI_SIZE", "PMI_SIZE"},
    };
    for (size_t i = 0; i < VT_ARRAY_LEN(vars); i++) {
        if (!getenv(vars[i][0]))
            continue;
        const char *s = getenv(vars[i][1]);
        if (!s && !strcmp(vars[i][0], "PMIX_RANK"))
            s = getenv("SLURM_NTASKS");
        *size = s ? atoi(s) : 0;
        return vars[i][0];
    }
    *size = 1;
    return NULL;
}

int vt_mpi_rank(void) { return g_rank; }
int vt_mpi_size(void) { return g_size; }
double vt_mpi_timeout(void) { return g_timeout; }
const char *vt_mpi_host(int rank) {
    return g_peers && rank >= 0 && rank < g_size ? g_peers[rank].host : "?";
}
int vt_mpi_pid(int rank) { return g_peers && rank >= 0 && rank < g_size ? g_peers[rank].pid : 0; }

void vt_mpi_set_signal_check(int (*pending)(void)) { g_sigcheck = pending; }
int vt_mpi_signal_pending(void) { return g_sigcheck ? g_sigcheck() : 0; }

void vt_mpi_set_context(const char *fmt, ...) {
    pthread_mutex_lock(&g_ctx_lock);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_ctx, sizeof g_ctx, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&g_ctx_lock);
}

void vt_mpi_abort(int code, const char *fmt, ...) {
    fflush(stdout);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vidtrain: rank %d (host %s, pid %d): %s\n", g_rank, vt_mpi_host(g_rank),
            (int)getpid(), msg);
    fflush(stderr);
#ifdef VT_HAVE_MPI
    if (g_inited)
        MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)g_inited;
#endif
    exit(code);
}

#ifdef VT_HAVE_MPI

static MPI_Comm g_comm = MPI_COMM_NULL;

/* Where the run is, for the messages about a late peer. */
static void context(char *buf, size_t n) {
    pthread_mutex_lock(&g_ctx_lock);
    snprintf(buf, n, "%s", g_ctx[0] ? g_ctx : "start-up");
    pthread_mutex_unlock(&g_ctx_lock);
}

/* One tag per kind of message: collectives of one kind follow each other in the same
 * order on every rank, and MPI keeps messages between two ranks with one tag in order. */
enum { TAG_GATHER = 101, TAG_BCAST, TAG_SCATTER, TAG_COLLECT };

/* Request scratch for one collective at a time (2 per peer). */
static MPI_Request *g_req;
static int *g_reqpeer, *g_idx;
static MPI_Status *g_st;

static void peers_str(char *buf, size_t n, const int *peer, const MPI_Request *req, int nreq) {
    size_t o = 0;
    int said[1024] = {0};
    buf[0] = 0;
    for (int k = 0; k < nreq && o < n; k++) {
        if (req[k] == MPI_REQUEST_NULL)
            continue;
        int p = peer[k];
        if (p < 1024 && said[p])
            continue;
        if (p < 1024)
            said[p] = 1;
        o += (size_t)snprintf(buf + o, n - o, "%srank %d (host %s, pid %d)", o ? ", " : "", p,
                              vt_mpi_host(p), vt_mpi_pid(p));
    }
}

/* Wait for reqs[0..n) — peer[k] is the rank request k talks to — while polling: an MPI
 * error names its peer, silence longer than the timeout names every peer still owing,
 * a pending signal is reported once with the same names. spin: the messages are known
 * to be under way (yield between polls, so big transfers progress); else sleep between
 * polls, growing to 1 ms (a peer still computing). */
static void wait_all(MPI_Request *req, const int *peer, int n, const char *what, int spin) {
    static int sig_said; /* a signal is reported once per process */
    double last = vt_now();
    int left = n, nap_us = 0;
    char ctx[160], who[1024];
    while (left > 0) {
        int out = 0;
        int rc = MPI_Testsome(n, req, &out, g_idx, g_st);
        if (rc != MPI_SUCCESS) {
            int culprit = -1, e = rc;
            if (rc == MPI_ERR_IN_STATUS)
                for (int j = 0; j < out && out != MPI_UNDEFINED; j++)
                    if (g_st[j].MPI_ERROR != MPI_SUCCESS) {
                        culprit = peer[g_idx[j]];
                        e = g_st[j].MPI_ERROR;
                        break;
                    }
            char es[MPI_MAX_ERROR_STRING] = "";
            int el = 0;
            MPI_Error_string(e, es, &el);
            context(ctx, sizeof ctx);
            if (culprit >= 0)
                vt_mpi_abort(1, "lost rank %d (host %s, pid %d) in %s (%s): %s; it died or its "
                             "machine is unreachable. Ending every rank", culprit,
                             vt_mpi_host(culprit), vt_mpi_pid(culprit), what, ctx, es);
            peers_str(who, sizeof who, peer, req, n);
            vt_mpi_abort(1, "MPI failed in %s (%s) while waiting for %s: %s. Ending every rank",
                         what, ctx, who[0] ? who : "its peers", es);
        }
        if (out == MPI_UNDEFINED)
            break;
        double now = vt_now();
        if (out > 0) {
            left -= out;
            last = now;
            nap_us = 0;
            continue;
        }
        if (now - last > g_timeout) {
            peers_str(who, sizeof who, peer, req, n);
            context(ctx, sizeof ctx);
            vt_mpi_abort(1, "no word from %s for %.0f s in %s (%s): it stopped, hangs or died. "
                         "Ending every rank (VT_MPI_TIMEOUT=%g s sets this limit)", who,
                         now - last, what, ctx, g_timeout);
        }
        int sig = g_sigcheck && !sig_said ? g_sigcheck() : 0;
        if (sig) {
            peers_str(who, sizeof who, peer, req, n);
            context(ctx, sizeof ctx);
            fflush(stdout);
            fprintf(stderr, "vidtrain: rank %d (host %s, pid %d): signal %d while waiting for %s "
                    "in %s (%s); if the launcher is ending the job, a rank died\n", g_rank,
                    vt_mpi_host(g_rank), (int)getpid(), sig, who, what, ctx);
            fflush(stderr);
            sig_said = 1;
        }
        if (spin && now - last < 1.0) {
            sched_yield();
        } else {
            nap_us = VT_MIN(2 * nap_us + 10, 1000);
            struct timespec ts = {0, nap_us * 1000L};
            nanosleep(&ts, NULL);
        }
    }
}

static void check_count(size_t count, const char *what) {
    if (count > (size_t)INT_MAX)
        vt_mpi_abort(1, "%s: %zu elements in one message (the MPI limit is %d)", what, count,
                     INT_MAX);
}

/* Requests for the current collective: grow the scratch to the world's size. */
static void scratch_init(void) {
    int m = 2 * g_size + 2;
    g_req = vt_calloc((size_t)m, sizeof *g_req);
    g_reqpeer = vt_calloc((size_t)m, sizeof *g_reqpeer);
    g_idx = vt_calloc((size_t)m, sizeof *g_idx);
    g_st = vt_calloc((size_t)m, sizeof *g_st);
}

static void mpi_check(int rc, const char *call, const char *what) {
    if (rc == MPI_SUCCESS)
        return;
    char es[MPI_MAX_ERROR_STRING] = "";
    int el = 0;
    MPI_Error_string(rc, es, &el);
    vt_mpi_abort(1, "%s failed in %s: %s", call, what, es);
}

static int post_recv(int k, void *buf, size_t count, MPI_Datatype t, int peer, int tag,
                     const char *what) {
    check_count(count, what);
    g_reqpeer[k] = peer;
    mpi_check(MPI_Irecv(buf, (int)count, t, peer, tag, g_comm, &g_req[k]), "MPI_Irecv", what);
    return k + 1;
}

static int post_send(int k, const void *buf, size_t count, MPI_Datatype t, int peer, int tag,
                     const char *what) {
    check_count(count, what);
    g_reqpeer[k] = peer;
    mpi_check(MPI_Isend(buf, (int)count, t, peer, tag, g_comm, &g_req[k]), "MPI_Isend", what);
    return k + 1;
}

static void allgather_raw(const void *mine, void *all, size_t bytes, const char *what) {
    memmove((char *)all + (size_t)g_rank * bytes, mine, bytes);
    if (g_size == 1 || bytes == 0)
        return;
    int k = 0;
    for (int q = 0; q < g_size; q++) {
        if (q == g_rank)
            continue;
        k = post_recv(k, (char *)all + (size_t)q * bytes, bytes, MPI_BYTE, q, TAG_GATHER, what);
        k = post_send(k, (char *)all + (size_t)g_rank * bytes, bytes, MPI_BYTE, q, TAG_GATHER,
                      what);
    }
    wait_all(g_req, g_reqpeer, k, what, 0);
}

int vt_mpi_init(int *argc, char ***argv, char *err, size_t errlen) {
    const char *t = getenv("VT_MPI_TIMEOUT");
    if (t && *t && atof(t) > 0)
        g_timeout = atof(t);
    int env_size = 1;
    if (!launcher_env(&env_size))
        return 0;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        vt_set_err(err, errlen, "MPI_Init_thread failed");
        return -1;
    }
    g_inited = 1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (provided < MPI_THREAD_SERIALIZED && g_size > 1) {
        vt_set_err(err, errlen, "the MPI library serves only the main thread (thread level %d); "
                   "vidtrain calls it from tower threads too and needs MPI_THREAD_SERIALIZED",
                   provided);
        return -1;
    }
    /* Our own communicator: nothing else's messages can match ours. */
    mpi_check(MPI_Comm_dup(MPI_COMM_WORLD, &g_comm), "MPI_Comm_dup", "start-up");
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    scratch_init();
    g_peers = vt_calloc((size_t)g_size, sizeof *g_peers);
    peer_info me;
    memset(&me, 0, sizeof me);
    if (gethostname(me.host, sizeof me.host - 1) != 0)
        snprintf(me.host, sizeof me.host, "?");
    me.pid = (int32_t)getpid();
    allgather_raw(&me, g_peers, sizeof me, "start-up (host names)");
    return 0;
}

int vt_mpi_finalize(int rc) {
    if (!g_inited)
        return rc;
    fflush(stdout);
    fflush(stderr);
    /* A failing rank may leave others waiting for it in a collective: end them too (the
     * launcher reports every rank's exit); MPI_Finalize would wait for them. */
    if (rc != 0 && g_size > 1)
        MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Comm_free(&g_comm);
    MPI_Finalize();
    g_inited = 0;
    return rc;
}

void vt_mpi_allgather(const void *mine, void *all, size_t bytes, const char *what) {
    allgather_raw(mine, all, bytes, what);
}

void vt_mpi_bcast(void *buf, size_t bytes, int root, const char *what) {
    if (g_size == 1 || bytes == 0)
        return;
    VT_CHECK(root >= 0 && root < g_size, "bcast root %d of %d ranks", root, g_size);
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += piece) {
        size_t len = VT_MIN(piece, bytes - off);
        int k = 0;
        if (g_rank == root) {
            for (int q = 0; q < g_size; q++)
                if (q != root)
                    k = post_send(k, (char *)buf + off, len, MPI_BYTE, q, TAG_BCAST, what);
        } else {
            k = post_recv(k, (char *)buf + off, len, MPI_BYTE, root, TAG_BCAST, what);
        }
        wait_all(g_req, g_reqpeer, k, what, 1);
    }
}

void vt_mpi_barrier(const char *what) {
    if (g_size == 1)
        return;
    char mine = 1, *all = vt_malloc((size_t)g_size);
    allgather_raw(&mine, all, 1, what);
    free(all);
}

/* The fixed-order sum of n elements of size es (4: float, 8: double; 16: int64, whose
 * elements are 8 bytes: es below is set back to 8). */
static void sum_fixed(void *buf, int64_t n, int es, const char *what, vt_mpi_sum_stats *st) {
    static void *scratch[3];
    static size_t scratch_cap[3];
    const int i64 = es == 16;
    if (i64)
        es = 8;
    const int P = g_size, me = g_rank, d = i64 ? 2 : es == 8;
    double t0 = vt_now();
    /* Arrival: every rank says how many elements it sums (disagreeing is a bug, and a
     * clear message beats a garbled sum). The wait here is the ranks' load imbalance. */
    int64_t *ns = vt_malloc(sizeof(int64_t) * (size_t)P);
    allgather_raw(&n, ns, sizeof n, what);
    for (int q = 0; q < P; q++)
        if (ns[q] != n)
            vt_mpi_abort(1, "%s: rank %d sums %lld values, rank %d %lld: the ranks are out of "
                         "step (a bug)", what, q, (long long)ns[q], me, (long long)n);
    free(ns);
    double t1 = vt_now();
    if (st)
        st->wait_s += t1 - t0;
    if (n == 0)
        return;
    const MPI_Datatype type = i64 ? MPI_INT64_T : d ? MPI_DOUBLE : MPI_FLOAT;
#define LO(k) (n * (int64_t)(k) / P)
    const int64_t cmax = n / P + 1, mlo = LO(me), m = LO(me + 1) - mlo;
    size_t need = (size_t)P * (size_t)cmax * (size_t)es;
    if (scratch_cap[d] < need) {
        free(scratch[d]);
        scratch[d] = vt_malloc(need);
        scratch_cap[d] = need;
    }
    char *rows = scratch[d], *b = buf;
    /* Reduce-scatter as data movement: my chunk from every rank into row q. */
    int k = 0;
    for (int q = 0; q < P; q++) {
        if (q == me)
            continue;
        k = post_recv(k, rows + (size_t)q * cmax * es, (size_t)m, type, q, TAG_SCATTER, what);
        k = post_send(k, b + (size_t)LO(q) * es, (size_t)(LO(q + 1) - LO(q)), type, q, TAG_SCATTER,
                      what);
    }
    wait_all(g_req, g_reqpeer, k, what, 1);
    /* Sum in rank order into my own (unused) row, then back into buf. */
#define RANK_ORDER_SUM(T)                                                                   \
    do {                                                                                    \
        T *acc = (T *)(void *)(rows + (size_t)me * cmax * es);                              \
        const T *mine = (const T *)(const void *)(b + (size_t)mlo * es);                    \
        for (int q = 0; q < P; q++) {                                                       \
            const T *part =                                                                 \
                q == me ? mine : (const T *)(const void *)(rows + (size_t)q * cmax * es);   \
            if (q == 0)                                                                     \
                memcpy(acc, part, (size_t)m * sizeof *acc);                                 \
            else                                                                            \
                for (int64_t e = 0; e < m; e++)                                             \
                    acc[e] += part[e];                                                      \
        }                                                                                   \
        memcpy((void *)mine, acc, (size_t)m * sizeof *acc);                                 \
    } while (0)
    if (i64)
        RANK_ORDER_SUM(int64_t);
    else if (d)
        RANK_ORDER_SUM(double);
    else
        RANK_ORDER_SUM(float);
#undef RANK_ORDER_SUM
    /* All-gather: every owner's summed chunk to every rank. */
    k = 0;
    for (int q = 0; q < P; q++) {
        if (q == me)
            continue;
        k = post_recv(k, b + (size_t)LO(q) * es, (size_t)(LO(q + 1) - LO(q)), type, q, TAG_COLLECT,
                      what);
        k = post_send(k, b + (size_t)mlo * es, (size_t)m, type, q, TAG_COLLECT, what);
    }
    wait_all(g_req, g_reqpeer, k, what, 1);
#undef LO
    if (st) {
        st->reduce_s += vt_now() - t1;
        st->wire_bytes += (n - m + (int64_t)(P - 1) * m) * es;
    }
}

void vt_mpi_sum_f32(float *buf, int64_t n, const char *what, vt_mpi_sum_stats *st) {
    if (g_size > 1)
        sum_fixed(buf, n, 4, what, st);
}

void vt_mpi_sum_f64(double *buf, int64_t n, const char *what) {
    if (g_size > 1)
        sum_fixed(buf, n, 8, what, NULL);
}

void vt_mpi_sum_i64(int64_t *buf, int64_t n, const char *what, vt_mpi_sum_stats *st) {
    if (g_size > 1)
        sum_fixed(buf, n, 16, what, st);
}

#else /* !VT_HAVE_MPI: one process; a launcher asking for several is refused */

int vt_mpi_init(int *argc, char ***argv, char *err, size_t errlen) {
    (void)argc;
    (void)argv;
    const char *t = getenv("VT_MPI_TIMEOUT");
    if (t && *t && atof(t) > 0)
        g_timeout = atof(t);
    int size = 1;
    const char *var = launcher_env(&size);
    if (var && size != 1) {
        vt_set_err(err, errlen, "started by an MPI launcher (%s is set) as one of %d processes, "
                   "but this vidtrain was built without MPI: each process would train alone "
                   "and write the same run folder. Install libopenmpi-dev and rebuild (cmake "
                   "prints \"MPI found\"), or run vidtrain without mpirun/srun", var, size);
        return -1;
    }
    return 0;
}

int vt_mpi_finalize(int rc) { return rc; }

void vt_mpi_allgather(const void *mine, void *all, size_t bytes, const char *what) {
    (void)what;
    memmove(all, mine, bytes);
}

void vt_mpi_bcast(void *buf, size_t bytes, int root, const char *what) {
    (void)buf;
    (void)bytes;
    (void)root;
    (void)what;
}

void vt_mpi_barrier(const char *what) { (void)what; }

void vt_mpi_sum_f32(float *buf, int64_t n, const char *what, vt_mpi_sum_stats *st) {
    (void)buf;
    (void)n;
    (void)what;
    (void)st;
}

void vt_mpi_sum_f64(double *buf, int64_t n, const char *what) {
    (void)buf;
    (void)n;
    (void)what;
}

void vt_mpi_sum_i64(int64_t *buf, int64_t n, const char *what, vt_mpi_sum_stats *st) {
    (void)buf;
    (void)n;
    (void)what;
    (void)st;
}

#endif
