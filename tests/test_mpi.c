/*
 * test_mpi.c: training and evaluation across processes — `mpirun -np 2` with 1 or 2 CPU
 * towers per rank (MPMD: each rank its own --devices and --mem, so budgets are uneven),
 * on real encoded videos through the real command. The outside truth is one process:
 *
 * 1. Equal to one device (docs/design.md §3.1) across ranks: parameters after 3 steps
 *    equal one process with one tower to 1e-5 relative — without batch norm (tiny_nobn,
 *    with dropout, whose masks follow the GLOBAL clip position, and a rank-0 tower so
 *    small that its slice runs as 3 micro-batches) and with batch norm under --sync-bn.
 * 2. Determinism across ranks (docs/design.md §3.5): tiny with per-tower batch norm on ranks
 *    (2 towers | 1 tower) is bitwise the same run as one process with those 3 towers
 *    and budgets (the MPI reducer sums in the host reducer's order when every rank after
 *    the first has one tower) — trained 2 steps, then resumed with --resume (each rank
 *    gets its own devices back from config.json) to 5, against 5 uninterrupted steps.
 *    VT_CHECK_REPLICAS=1 makes every step compare the ranks' replicas by hash. Each epoch
 *    end validates and runs the precise-BN pass (rank 0 computes, the sync sends).
 * 3. Every clip counted once (docs/design.md §3.4): eval with batch 7, 2 clips x 3 crops per
 *    video and a 3:1:2 split, so most videos have clips on both ranks; clips and videos
 *    equal the files on disk (opendir), and the metrics equal one process's.
 * 4. Failure: a rank killed (SIGKILL) mid-run, and a rank stopped (SIGSTOP: it neither
 *    dies nor answers), make the other exit non-zero within a bound, with a message
 *    naming rank 1; SIGTERM to rank 1 alone stops every rank after the same step with
 *    rank 0's checkpoint written (exit 143); ranks started with different options, or
 *    one that cannot build its towers, make every rank exit non-zero with a message
 *    naming the rank.
 * Skips (77) when vidtrain was built without MPI.
 */
#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "models/checkpoint.h"
#include "base/common.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/slices.h"
#include "tests/apputil.h"

static const char *g_bin, *g_mpirun, *g_dir;
static char g_mpienv[1200]; /* environment for the processes mpirun starts */

/* Budget that holds exactly `clips` per pass of model (3 classes, 4x32x32, SGD momentum)
 * as train plans it: fixed bytes + clips per-clip bytes + half a clip of slack. */
static long long budget_for(const char *model, int clips) {
    vt_net_cfg nc;
    vt_net_cfg_default(&nc, model, 3, 4, 32, 32);
    vt_optim_cfg oc;
    vt_optim_cfg_default(&oc, VT_OPT_SGD);
    vt_memplan mp;
    char err[256];
    nc.exact = 1; /* CPU towers sum exactly (tower.h) */
    VT_CHECK(vt_memplan_build(&mp, &nc, vt_optim_state_per_param(&oc), err, sizeof err) == 0, "%s",
             err);
    long long b = mp.fixed_bytes + clips * mp.bytes_per_clip + mp.bytes_per_clip / 2;
    vt_memplan_free(&mp);
    return b;
}

/* mpirun with two ranks: rank 0 runs `a`, rank 1 runs `b` (vidtrain arguments). */
static int mpi2(const char *env, const char *a, const char *b, const char *log) {
    return vt_test_sh("%s %s '%s' --oversubscribe --bind-to none -np 1 '%s' %s : -np 1 '%s' %s "
                      "> '%s/%s' 2>&1", g_mpienv, env, g_mpirun, g_bin, a, g_bin, b, g_dir, log);
}

static int vt_file_readable(const char *p) { return access(p, R_OK) == 0; }

static int log_has(const char *log, const char *needle) {
    return vt_test_file_has_in(g_dir, log, needle);
}

/* ---- 1 and 2: training ---- */

static void train_equal(void) {
    const char *common = "--clip 4x32 --batch 8 --epochs 2 --lr 0.05 --no-flip --seed 3 "
                         "--workers 1 --threads 1 --max-steps 3 -q --eval-every 100";
    const char *env = "VT_CHECK_REPLICAS=1";
    char a[2048], b[2048], p1[4200], p2[4200];

    /* No batch norm, dropout, equal split of 8 over towers that fit 3, 1 | 2 per pass:
     * slices 3, 3, 2, the middle one as 3 micro-batches of 1. */
    long long f3 = budget_for("tiny_nobn", 3), f1 = budget_for("tiny_nobn", 1),
              f2 = budget_for("tiny_nobn", 2);
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/one_nobn' %s --model tiny_nobn --dropout 0.3 "
                      "--devices cpu:1 > '%s/one_nobn.log' 2>&1", g_bin, g_dir, g_dir, common,
                      g_dir) == 0, "one process, tiny_nobn");
    snprintf(a, sizeof a, "train '%s/data' --out '%s/mpi_nobn' %s --model tiny_nobn --dropout 0.3 "
             "--tower-split equal --devices cpu:2 --mem cpu0=%lld,cpu1=%lld", g_dir, g_dir, common, f3, f1);
    snprintf(b, sizeof b, "train '%s/data' --out '%s/mpi_nobn' %s --model tiny_nobn --dropout 0.3 "
             "--tower-split equal --devices cpu:1 --mem %lld", g_dir, g_dir, common, f2);
    TCHECK(mpi2(env, a, b, "mpi_nobn.log") == 0, "mpirun -np 2, tiny_nobn");
    TCHECK(log_has("mpi_nobn.log", "r0.cpu1") && log_has("mpi_nobn.log", "3 x 1"),
           "the plan shows rank 1's towers and rank 0's tower in 3 micro-batches of 1");
    snprintf(p1, sizeof p1, "%s/one_nobn/last.safetensors", g_dir);
    snprintf(p2, sizeof p2, "%s/mpi_nobn/last.safetensors", g_dir);
    double d = vt_test_ckpt_diff(p2, p1, "", NULL);
    /* 1e-5: the same sums in another order (towers, micro-batches, ranks) through 3 SGD
     * steps; float rounding gives ~1e-7 (measured 1.4e-7). A wrong scale (1/B of one
     * rank), a dropout mask by local position or a missing clip is > 1e-3. */
    TCHECK(d >= 0 && d <= 1e-5, "tiny_nobn: 2 ranks vs one tower, max rel diff %g", d);
    printf("tiny_nobn, dropout 0.3, ranks (3|1 micro-batched) + (2): max rel diff %.3g\n", d);

    /* Batch norm with --sync-bn: memory split over towers fitting 4, 2 | 3 (slices 3, 2,
     * 3, one pass each: sync-BN equals one device per pass). */
    long long g4 = budget_for("tiny", 4), g2 = budget_for("tiny", 2), g3 = budget_for("tiny", 3);
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/one_bn' %s --model tiny --sync-bn "
                      "--devices cpu:1 > '%s/one_bn.log' 2>&1", g_bin, g_dir, g_dir, common,
                      g_dir) == 0, "one process, tiny --sync-bn");
    snprintf(a, sizeof a, "train '%s/data' --out '%s/mpi_bn' %s --model tiny --sync-bn --tower-split "
             "memory --devices cpu:2 --mem cpu0=%lld,cpu1=%lld", g_dir, g_dir, common, g4, g2);
    snprintf(b, sizeof b, "train '%s/data' --out '%s/mpi_bn' %s --model tiny --sync-bn --tower-split "
             "memory --devices cpu:1 --mem %lld", g_dir, g_dir, common, g3);
    TCHECK(mpi2(env, a, b, "mpi_bn.log") == 0, "mpirun -np 2, tiny --sync-bn");
    snprintf(p1, sizeof p1, "%s/one_bn/last.safetensors", g_dir);
    snprintf(p2, sizeof p2, "%s/mpi_bn/last.safetensors", g_dir);
    d = vt_test_ckpt_diff(p2, p1, "", NULL);
    /* 1e-5: as above; sync-BN statistics are summed in another order (measured 3.7e-7).
     * Per-rank statistics instead of synced ones differ by > 1e-2. */
    TCHECK(d >= 0 && d <= 1e-5, "tiny --sync-bn: 2 ranks vs one tower, max rel diff %g", d);
    printf("tiny --sync-bn, ranks (3|2) + (3): max rel diff %.3g\n", d);
}

static void train_bitwise_resume(void) {
    /* A validation at every epoch end, and with it a precise-BN pass (the colour jitter is
     * on): under mpirun rank 0's replica 0 alone computes the statistics, the other rank
     * decodes nothing and receives them; they must be those of one process, and every
     * replica's (VT_CHECK_REPLICAS) the same at the next step. */
    const char *common = "--model tiny --clip 4x32 --batch 8 --epochs 3 --lr 0.05 --no-flip "
                         "--seed 3 --workers 1 --threads 1 -q --tower-split memory --eval-every 1";
    long long g4 = budget_for("tiny", 4), g2 = budget_for("tiny", 2), g3 = budget_for("tiny", 3);
    char a[2048], b[2048], p1[4200], p2[4200];
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/one3' %s --devices cpu:3 --mem "
                      "cpu0=%lld,cpu1=%lld,cpu2=%lld --max-steps 5 > '%s/one3.log' 2>&1", g_bin,
                      g_dir, g_dir, common, g4, g2, g3, g_dir) == 0, "one process, 3 towers");
    snprintf(a, sizeof a, "train '%s/data' --out '%s/mpi3' %s --max-steps 2 --devices cpu:2 "
             "--mem cpu0=%lld,cpu1=%lld", g_dir, g_dir, common, g4, g2);
    snprintf(b, sizeof b, "train '%s/data' --out '%s/mpi3' %s --max-steps 2 --devices cpu:1 "
             "--mem %lld", g_dir, g_dir, common, g3);
    TCHECK(mpi2("VT_CHECK_REPLICAS=1", a, b, "mpi3.log") == 0, "mpirun -np 2, 2 steps");
    /* The same command on both ranks: each gets its devices back from config.json. */
    TCHECK(vt_test_sh("%s VT_CHECK_REPLICAS=1 '%s' --oversubscribe --bind-to none -np 2 '%s' "
                      "train --resume '%s/mpi3' --max-steps 5 > '%s/mpi3_resume.log' 2>&1",
                      g_mpienv, g_mpirun, g_bin, g_dir, g_dir) == 0,
           "mpirun -np 2 --resume to step 5");
    TCHECK(log_has("mpi3_resume.log", "r1.cpu0") && log_has("mpi3_resume.log", "resumed from"),
           "the resumed run has rank 1's tower");
    snprintf(p1, sizeof p1, "%s/one3/last.safetensors", g_dir);
    snprintf(p2, sizeof p2, "%s/mpi3/last.safetensors", g_dir);
    vt_test_ckpt_cmp cmp;
    double d = vt_test_ckpt_diff(p2, p1, "", &cmp);
    int same = d >= 0 && cmp.bitwise;
    TCHECK(same, "2 ranks (2 + 1 towers), 2 steps + resume to 5, vs one process with the same "
           "3 towers: not bitwise the same (max rel diff %g)", d);
    printf("tiny, per-tower BN, ranks (2 towers) + (1), 2 + 3 resumed steps: %s one process\n",
           same ? "bitwise" : "NOT bitwise");
}

/* ---- 3: evaluation ---- */

static double jnum(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* Videos whose clips fall on both ranks: positions of a batch of 7 split 3:1:2 over
 * (r0.cpu0, r0.cpu1 | r1.cpu0) as the towers split it, 6 samples per video in order. */
static int straddling_videos(int videos, int per_video, int batch) {
    vt_slice_policy pol;
    char err[256];
    VT_CHECK(vt_slice_policy_parse(&pol, "manual:3,1,2", err, sizeof err) == 0, "%s", err);
    vt_slice_dev sd[3];
    memset(sd, 0, sizeof sd);
    for (int i = 0; i < 3; i++)
        sd[i].max_clips = VT_SLICE_UNLIMITED;
    vt_plan plan;
    VT_CHECK(vt_slice_plan(&plan, &pol, batch, 3, sd, err, sizeof err) == 0, "%s", err);
    int total = videos * per_video, n = 0;
    int *rank_of = calloc((size_t)total, sizeof(int));
    for (int b0 = 0; b0 < total; b0 += batch) {
        int npos = VT_MIN(batch, total - b0), s[3];
        if (npos == batch) {
            memcpy(s, plan.slice, sizeof s);
        } else {
            double w[3] = {plan.slice[0], plan.slice[1], plan.slice[2]};
            vt_slice_round(s, npos, w, 3);
        }
        for (int p = 0; p < npos; p++)
            rank_of[b0 + p] = p >= s[0] + s[1];
    }
    for (int v = 0; v < videos; v++) {
        int r0 = 0, r1 = 0;
        for (int c = 0; c < per_video; c++) {
            if (rank_of[v * per_video + c])
                r1++;
            else
                r0++;
        }
        n += r0 && r1;
    }
    free(rank_of);
    return n;
}

static void eval_counts(void) {
    /* A model that tells the classes apart a little (one process, 36 steps), so that the
     * metrics compared below are not all one class. */
    TCHECK(vt_test_sh("'%s' train '%s/data' --out '%s/model' --model tiny --clip 4x32 --batch 6 "
                      "--epochs 12 --lr 0.1 --no-flip --seed 3 --workers 1 --threads 1 -q "
                      "--eval-every 100 --devices cpu:1 > '%s/model.log' 2>&1", g_bin, g_dir,
                      g_dir, g_dir) == 0, "train the model to evaluate");
    const char *e = "--split test --batch 7 --crops 3 --clips-per-video 2 --workers 1 --threads 1 -q";
    char a[2048], b[2048], p[4200];
    TCHECK(vt_test_sh("'%s' eval '%s/model' '%s/data' %s --devices cpu:1 > '%s/eval1.log' 2>&1 && "
                      "cp '%s/model/eval.json' '%s/eval1.json'", g_bin, g_dir, g_dir, e, g_dir,
                      g_dir, g_dir) == 0, "eval in one process");
    snprintf(a, sizeof a, "eval '%s/model' '%s/data' %s --devices cpu:2 --tower-split manual:3,1,2",
             g_dir, g_dir, e);
    snprintf(b, sizeof b, "eval '%s/model' '%s/data' %s --devices cpu:1 --tower-split manual:3,1,2",
             g_dir, g_dir, e);
    TCHECK(mpi2("", a, b, "eval2.log") == 0, "eval under mpirun -np 2");
    snprintf(p, sizeof p, "%s/data/test", g_dir);
    int videos = vt_test_count_class_files(p, NULL);
    int straddle = straddling_videos(videos, 6, 7);
    TCHECK(straddle >= videos / 2, "only %d of %d videos have clips on both ranks", straddle, videos);
    snprintf(p, sizeof p, "%s/eval1.json", g_dir);
    cJSON *one = vt_test_read_json(p);
    snprintf(p, sizeof p, "%s/model/eval.json", g_dir);
    cJSON *two = vt_test_read_json(p);
    TCHECK(one && two, "both eval.json files");
    if (one && two) {
        TCHECK(jnum(two, "videos") == videos, "videos %g, on disk %d", jnum(two, "videos"), videos);
        TCHECK(jnum(two, "clips") == videos * 6.0 && jnum(two, "expected_clips") == videos * 6.0,
               "clips %g (expected %g), want %d", jnum(two, "clips"), jnum(two, "expected_clips"),
               videos * 6);
        const char *keys[] = {"clip_top1", "clip_top5", "video_top1", "video_top5", "mean_class_acc"};
        for (size_t k = 0; k < VT_ARRAY_LEN(keys); k++)
            TCHECK(jnum(one, keys[k]) == jnum(two, keys[k]), "%s: %g on 2 ranks, %g in one process",
                   keys[k], jnum(two, keys[k]), jnum(one, keys[k]));
        const cJSON *h1 = cJSON_GetArrayItem(cJSON_GetObjectItem(one, "heads"), 0);
        const cJSON *h2 = cJSON_GetArrayItem(cJSON_GetObjectItem(two, "heads"), 0);
        TCHECK(cJSON_Compare(cJSON_GetObjectItem(h1, "confusion"), cJSON_GetObjectItem(h2, "confusion"), 1),
               "the confusion matrices differ");
        double l1 = jnum(h1, "loss_mean"), l2 = jnum(h2, "loss_mean");
        /* 1e-6: the same per-clip losses (double) summed per rank, then over ranks. */
        TCHECK(fabs(l1 - l2) <= 1e-6 * fabs(l1), "loss_mean %.9g vs %.9g", l2, l1);
        printf("eval on 2 ranks: %g clips, %g videos (%d of them split between ranks), video "
               "top-1 %g (one process %g)\n", jnum(two, "clips"), jnum(two, "videos"), straddle,
               jnum(two, "video_top1"), jnum(one, "video_top1"));
    }
    cJSON_Delete(one);
    cJSON_Delete(two);
}

/* ---- 4: failures ---- */

/* Runs mpirun -np 2 training into DIR/name (log DIR/name.log) in the background; once step
 * 2 is logged, sends sig to rank 1 (its pid from the printed plan). Returns mpirun's exit
 * code (-1: no exit within `bound` seconds after the signal, after which it is killed)
 * and the seconds it took. */
static int run_and_signal(int sig, const char *timeout, const char *name, double bound,
                          double *took) {
    char cmd[8192], log[256];
    snprintf(log, sizeof log, "%s.log", name);
    snprintf(cmd, sizeof cmd, "%s VT_MPI_TIMEOUT=%s exec '%s' --oversubscribe --bind-to none -np 2 "
             "'%s' train '%s/data' --out '%s/%s' --model tiny --clip 4x32 --batch 8 --epochs "
             "200 --lr 0.05 --no-flip --seed 3 --workers 1 --threads 1 --log-every 1 --eval-every "
             "1000 --devices cpu:1 > '%s/%s' 2>&1", g_mpienv, timeout, g_mpirun, g_bin, g_dir, g_dir, name,
             g_dir, log);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    *took = -1;
    int rank1 = 0, st = 0;
    for (int i = 0; i < 1200 && !rank1; i++) { /* up to 120 s to start and log step 2 */
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", g_dir, log);
        char *s = vt_test_slurp(p, NULL);
        const char *r = s ? strstr(s, "rank 1: host ") : NULL;
        if (r && strstr(s, "epoch 1/200 2/3")) {
            r = strstr(r, "pid ");
            rank1 = r ? atoi(r + 4) : 0;
        }
        free(s);
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "mpirun ended before the signal\n");
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        if (!rank1)
            usleep(100000);
    }
    TCHECK(rank1 > 0, "rank 1's pid in %s", log);
    if (rank1 <= 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    double t0 = vt_now();
    kill(rank1, sig);
    int rc = -1;
    while (vt_now() - t0 < bound) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        usleep(50000);
    }
    *took = vt_now() - t0;
    if (rc < 0) { /* a hang: end what this test started */
        kill(-pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    kill(rank1, SIGKILL); /* a stopped rank that outlived mpirun */
    return rc;
}

static void failures(void) {
    double took;
    /* A killed rank: Open MPI ends the job; rank 0 says whom it was waiting for. Bound:
     * the 20 s timeout plus start-up and abort slack on a loaded 2-core machine. */
    int rc = run_and_signal(SIGKILL, "20", "killed", 50, &took);
    TCHECK(rc > 0, "a killed rank: mpirun exit %d after %.1f s (want non-zero, no hang)", rc, took);
    TCHECK(log_has("killed.log", "rank 1"), "a killed rank: the output names rank 1");
    printf("rank 1 killed: mpirun exited %d after %.1f s\n", rc, took);

    /* A stopped rank never answers and never dies: rank 0's own timeout (5 s) must name
     * it and end the job. */
    rc = run_and_signal(SIGSTOP, "5", "stopped", 45, &took);
    TCHECK(rc > 0, "a stopped rank: mpirun exit %d after %.1f s (want non-zero, no hang)", rc, took);
    TCHECK(took >= 4.0, "a stopped rank: ended after %.1f s, before rank 0's 5 s timeout", took);
    TCHECK(log_has("stopped.log", "no word from rank 1 (host"),
           "a stopped rank: rank 0 names rank 1 when its timeout fires");
    printf("rank 1 stopped: mpirun exited %d after %.1f s (VT_MPI_TIMEOUT=5)\n", rc, took);

    /* SIGTERM to rank 1 only: the ranks agree to stop after the same step, rank 0 writes
     * a checkpoint, and every rank exits 143 (not a hang, not a half-written file). */
    rc = run_and_signal(SIGTERM, "60", "termed", 60, &took);
    TCHECK(rc == 143, "SIGTERM to rank 1: mpirun exit %d after %.1f s, want 143", rc, took);
    TCHECK(log_has("termed.log", "interrupted at step"), "SIGTERM to rank 1: rank 0 stops too");
    char p[4200];
    snprintf(p, sizeof p, "%s/termed/last.safetensors", g_dir);
    TCHECK(vt_file_readable(p), "SIGTERM to rank 1: rank 0 wrote %s", p);

    /* Different options: every rank refuses, naming the rank and the option. */
    char a[2048], b[2048];
    const char *common = "--model tiny --clip 4x32 --batch 8 --epochs 1 --no-flip --workers 1 "
                         "--threads 1 -q --devices cpu:1";
    snprintf(a, sizeof a, "train '%s/data' --out '%s/bad_opts' %s --lr 0.05", g_dir, g_dir, common);
    snprintf(b, sizeof b, "train '%s/data' --out '%s/bad_opts' %s --lr 0.5", g_dir, g_dir, common);
    rc = mpi2("VT_MPI_TIMEOUT=60", a, b, "bad_opts.log");
    TCHECK(rc != 0, "ranks with different --lr: exit %d", rc);
    TCHECK(log_has("bad_opts.log", "rank 1 (host") && log_has("bad_opts.log", "lr is"),
           "ranks with different --lr: the message names rank 1 and the option");

    /* A rank whose towers cannot be built: every rank fails with its message. */
    snprintf(a, sizeof a, "train '%s/data' --out '%s/bad_mem' %s", g_dir, g_dir, common);
    snprintf(b, sizeof b, "train '%s/data' --out '%s/bad_mem' %s --mem 1M", g_dir, g_dir, common);
    rc = mpi2("VT_MPI_TIMEOUT=60", a, b, "bad_mem.log");
    TCHECK(rc != 0, "a rank without room for one clip: exit %d", rc);
    TCHECK(log_has("bad_mem.log", "rank 1 (host") && log_has("bad_mem.log", "cannot hold one clip"),
           "a rank without room for one clip: named, with the reason");
}

int main(void) {
    g_bin = vt_test_bin("test_mpi");
    if (!g_bin)
        return VT_TEST_SKIP;
#ifndef VT_HAVE_MPI
    fprintf(stderr, "test_mpi: vidtrain was built without MPI: skipped\n");
    return VT_TEST_SKIP;
#endif
    g_mpirun = vt_test_env("VT_MPIRUN", "mpirun");
    /* CI runs as root in a container: Open MPI wants both to be said. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    /* Sanitizer runs (scripts/test.sh): Open MPI's own process-lifetime allocations are
     * suppressed by library name (tests/lsan.supp), which needs whole stacks — Open MPI
     * is built without frame pointers — and its components kept loaded so that their
     * frames have names. */
    const char *asan = getenv("ASAN_OPTIONS");
    snprintf(g_mpienv, sizeof g_mpienv, "OMPI_MCA_mca_base_component_disable_dlclose=1%s%s%s",
             asan ? " ASAN_OPTIONS='" : "", asan ? asan : "", asan ? ":fast_unwind_on_malloc=0'" : "");
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("mpi"));
    g_dir = dir;
    TCHECK(vt_test_synth(g_bin, g_dir, "--classes 3 --train 6 --val 2 --test 2 --frames 12 "
                                       "--size 40x32") == 0, "synth");
    train_equal();
    train_bitwise_resume();
    eval_counts();
    failures();
    return vt_test_done("test_mpi");
}
