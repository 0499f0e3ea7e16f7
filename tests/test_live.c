/*
 * test_live.c: `predict RUN URL --timeline` on live sources (app/stream/timeline_source.c,
 * pipeline/data/video/stream.c), without a camera: an `ffmpeg -re` process plays a 6 s file at
 * its own pace as MPEG-TS (`-c copy`: the very packets, so the very frames and times) and
 * vidtrain reads it as it comes.
 *
 * 1. Loopback TCP (ffmpeg listens, vidtrain connects — its reconnect tries cover ffmpeg
 *    not listening yet) and a pipe: every window of the file, the same start, end and
 *    frame count, the same probabilities as `predict --timeline` on the file itself;
 *    each window out while the stream still runs (--stats latencies, with a batch that
 *    would otherwise hold every window to the end).
 * 2. A stream that stalls (the server stopped with SIGSTOP): after --timeout, the
 *    reconnect tries with a line each, then exit 1, the windows before the stall out.
 *    A server that sends bytes but never a frame (one byte every 0.3 s; random bytes)
 *    stalls too: --timeout 1s --reconnect 1 ends with exit 1 and a "stalled" line well
 *    within 10 s (the bound is 2 x 1 s + the 1 s pause; before, each byte reset the
 *    clock and it never ended).
 *    A model slower than the stream: windows skipped to catch up (--max-behind), and
 *    every window printed whole (the file's frame count).
 * 3. Ctrl-C (SIGINT) during a stream: exit 130, the windows completed by then out, the
 *    end-of-run line printed.
 * 4. A camera in a build without libavdevice: the error names the missing piece; with it,
 *    a camera that is not there ends with exit 1 and its path.
 *
 * Timing: nothing is checked against a speed but one latency bound in 1, which has 8 times
 * the margin a loaded 2-core machine needs (see there); ports are ones the kernel just
 * gave out; every wait has a deadline far beyond its need. Skips without ffmpeg.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app/stream/timeline.h"
#include "pipeline/data/video/video.h"
#include "tests/apputil.h"
#include "tests/jsonlines.h"
#include "tests/procutil.h"
#include "tests/testutil.h"

static const char *g_bin, *g_dir;
static char g_src[4300], g_long[4300], g_run[4300];

#define SECONDS 6.0 /* the stream: long enough for 11 windows, short enough to wait for */
#define WINDOW "1s"
#define HOP "0.5s"
#define K 3

/* ---- processes ---- */

/* A port on 127.0.0.1 free a moment ago (the kernel's pick for port 0). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Starts argv with stdout and stderr to files (NULL: /dev/null). */
static pid_t spawn(char *const argv[], const char *out, const char *err) {
    fflush(stdout); /* else the child's freopen writes our buffered lines once more */
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(out ? out : "/dev/null", "w", stdout) ||
            !freopen(err ? err : "/dev/null", "w", stderr))
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* ffmpeg playing file live over TCP, listening on port (for one client, 120 s). */
static pid_t serve(int port, const char *file) {
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d?listen=1&listen_timeout=120000", port);
    char *argv[] = {"ffmpeg", "-v", "error", "-nostdin", "-re", "-i", (char *)file, "-c", "copy",
                    "-f", "mpegts", url, NULL};
    return spawn(argv, NULL, NULL);
}

/* vidtrain predict --timeline on url, with extra options (NULL-terminated). */
static pid_t predict(const char *url, const char *out, const char *err, const char *const *extra) {
    char *argv[40];
    int n = 0;
    char *base[] = {(char *)g_bin, "predict", g_run, (char *)url, "--timeline", "--window", WINDOW,
                    "--hop", HOP, "--json", "--top", "2", "--clips-per-video", "3", "--stats"};
    for (size_t i = 0; i < sizeof base / sizeof *base; i++)
        argv[n++] = base[i];
    for (int i = 0; extra && extra[i] && n < 39; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return spawn(argv, out, err);
}

/* ---- windows ---- */

static double num(const cJSON *e, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(e, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Window i of a live run against window i of the file's: the same stretch, frames and
 * probabilities. Returns the largest probability difference. */
static double same_window(const char *what, int i, const cJSON *a, const cJSON *b) {
    TCHECK(num(a, "window") == num(b, "window") && fabs(num(a, "start") - num(b, "start")) < 1e-9 &&
               fabs(num(a, "end") - num(b, "end")) < 1e-6 && num(a, "frames") == num(b, "frames"),
           "%s window %d: [%g, %g) %g frames, the file's [%g, %g) %g frames", what, i,
           num(a, "start"), num(a, "end"), num(a, "frames"), num(b, "start"), num(b, "end"),
           num(b, "frames"));
    double worst = 0;
    const char *labels[] = {"move_left", "move_right"};
    for (int k = 0; k < 2; k++) {
        double pa = vt_prob_of(a, labels[k]), pb = vt_prob_of(b, labels[k]);
        worst = fmax(worst, fabs(pa - pb));
        /* The same clips of the same pixels (MPEG-TS copy keeps the packets, the decoder
         * is bit-exact) through the same model; only the model calls differ — one window
         * a call live, batches of 8 clips for the file — so GEMM blocking rounds apart in
         * float: 1e-6 is ~10 float ulps of a probability below 1 (test_timeline measures
         * this difference at 1.5e-8) */
        TCHECK(pa >= 0 && fabs(pa - pb) <= 1e-6, "%s window %d %s: %.9f, the file's %.9f",
               what, i, labels[k], pa, pb);
    }
    return worst;
}

/* The "latency URL: ... median X s, max Y s" line of stderr, printed for the log. */
static int latency_line(const char *errpath, double *median, double *max) {
    char *s = vt_test_slurp(errpath, NULL);
    const char *l = s ? strstr(s, "\nlatency ") : NULL;
    int ok = l && (l = strstr(l, "median ")) && sscanf(l, "median %lf s, max %lf s", median, max) == 2;
    if (ok) {
        const char *e = strchr(l, '\n');
        printf("  %.*s\n", e ? (int)(e - l) : 80, l);
    }
    free(s);
    return ok;
}

/* ---- the tests ---- */

static cJSON **g_ref;
static int g_nref;

/* A live run's windows against the file's: all of them (n == the file's) or the first n. */
static void check_windows(const char *what, const char *out, int all) {
    int n;
    cJSON **l = vt_read_lines(out, &n);
    if (all)
        TCHECK(n == g_nref, "%s: %d windows, the file gives %d", what, n, g_nref);
    double worst = 0;
    for (int i = 0; i < n && i < g_nref; i++) {
        if (!all && i == n - 1 && cJSON_IsTrue(cJSON_GetObjectItem(l[i], "partial")))
            break; /* a stream cut short ends in a partial window the file has not */
        worst = fmax(worst, same_window(what, i, l[i], g_ref[i]));
        /* with --stats every line has its latency */
        TCHECK(num(l[i], "latency") >= 0, "%s window %d: no latency", what, i);
    }
    printf("  %s: %d windows, largest probability difference from the file's %.3g\n", what, n,
           worst);
    vt_free_lines(l, n);
}

/* 1. TCP and a pipe: every window, the file's numbers, each out while the stream runs. */
static void live_tests(void) {
    char out[4400], err[4400], port_s[16];
    int port = free_port();
    TCHECK(port > 0, "no free port");
    snprintf(port_s, sizeof port_s, "%d", port);
    snprintf(out, sizeof out, "%s/tcp.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/tcp.err", g_dir);
    char url[128];
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    pid_t srv = serve(port, g_src);
    /* --batch 64: 64 clips would hold all 11 windows (33 clips) to the end of the stream,
     * were a live source not run window by window */
    const char *extra[] = {"--batch", "64", "--reconnect", "20", NULL};
    pid_t p = predict(url, out, err, extra);
    int rc = vt_test_reap(p, 300);
    vt_test_reap(srv, 30);
    TCHECK(rc == 0, "tcp: exit %d (see %s)", rc, err);
    check_windows("tcp", out, 1);
    double med, max;
    TCHECK(latency_line(err, &med, &max), "tcp: no latency line in %s", err);
    /* Each window out as soon as it is complete: held to the end of the 6 s stream (the
     * batch of 64), window 2 (complete at 2 s) would wait 4 s; its 3 clips of 8x32x32
     * through the tiny model take ~0.1 s on a loaded core, plus 3 or 4 frame intervals
     * for the frame that closes it to be read and decoded (measured 0.25 s in all), so
     * 2 s is 8 times that and half the 4 s of a window held back. (Window 2, not 0: the
     * frames FFmpeg reads while it probes the stream count as arriving after the probe) */
    int n;
    cJSON **l = vt_read_lines(out, &n);
    TCHECK(n > 2 && num(l[2], "latency") < 2.0, "tcp: window 2 came %.3f s after its last "
           "frame: windows held back?", n > 2 ? num(l[2], "latency") : -1);
    vt_free_lines(l, n);

    /* the pipe: ffmpeg -re into vidtrain's standard input */
    snprintf(out, sizeof out, "%s/pipe.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/pipe.err", g_dir);
    rc = vt_test_sh("ffmpeg -v error -nostdin -re -i '%s' -c copy -f mpegts - | timeout 300 '%s' "
                    "predict '%s' - --timeline --window %s --hop %s --json --top 2 "
                    "--clips-per-video %d --stats --batch 64 > '%s' 2> '%s'",
                    g_src, g_bin, g_run, WINDOW, HOP, K, out, err);
    TCHECK(rc == 0, "pipe: exit %d (see %s)", rc, err);
    check_windows("pipe", out, 1);
    TCHECK(latency_line(err, &med, &max), "pipe: no latency line in %s", err);
}

/* 2. The server stops sending: timeout, reconnect tries with a line each, exit 1. */
static void stall_test(void) {
    char out[4400], err[4400], url[128];
    int port = free_port();
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    snprintf(out, sizeof out, "%s/stall.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/stall.err", g_dir);
    /* the long file: the stall comes long before its end however slow the machine */
    pid_t srv = serve(port, g_long);
    /* 3 tries: 1 + 2 + 4 s for ffmpeg to start listening, and after the stall three
     * refusals (ffmpeg listens for one client) before it gives up */
    const char *extra[] = {"--timeout", "2s", "--reconnect", "3", NULL};
    pid_t p = predict(url, out, err, extra);
    int got = vt_test_wait_lines(out, 3, p);
    TCHECK(got, "stall: no 3 windows before the stall (see %s)", err);
    kill(srv, SIGSTOP); /* the connection stays open, nothing more comes */
    int rc = vt_test_reap(p, 120);
    kill(srv, SIGKILL);
    kill(srv, SIGCONT);
    vt_test_reap(srv, 30);
    char *e = vt_test_slurp(err, NULL);
    int tries = 0;
    for (const char *s = e; s && (s = strstr(s, "trying again in")); s++)
        tries++;
    TCHECK(rc == 1, "stall: exit %d, 1 expected (see %s)", rc, err);
    TCHECK(e && strstr(e, "no data for 2 s"), "stall: no timeout message in %s", err);
    TCHECK(e && strstr(e, "gave up after 3 tries"), "stall: no give-up message in %s", err);
    /* the first connection may itself have needed tries: at least the stall's 3 */
    TCHECK(tries >= 3, "stall: %d 'trying again' lines", tries);
    free(e);
    check_windows("stall", out, 0);
}

/* A server on 127.0.0.1 that is no video (or stops being one): it listens on a port the
 * kernel gives (*port), and for each client in turn sends `prefix` bytes of `file` at once
 * (0: none), then one byte every 0.3 s (junk 0) or 4 KiB of random bytes every 0.1 s
 * (junk 1) until the client goes; it ends by itself after 20 s. */
static pid_t junk_server(int junk, const char *file, long prefix, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    *port = -1;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0) {
        close(fd); /* listening already: the client cannot come too early */
        return pid;
    }
    alarm(20); /* the bound, whatever happens to the test */
    unsigned seed = 41;
    long have = 0;
    char *head = prefix > 0 ? vt_test_slurp(file, &have) : NULL;
    for (;;) {
        int c = accept(fd, NULL, NULL);
        if (c < 0)
            _exit(0);
        char buf[4096];
        if (head && send(c, head, (size_t)(have < prefix ? have : prefix), MSG_NOSIGNAL) < 0) {
            close(c);
            continue;
        }
        for (;;) {
            size_t n = junk ? sizeof buf : 1;
            for (size_t i = 0; i < n; i++)
                buf[i] = junk ? (char)rand_r(&seed) : 'x';
            if (send(c, buf, n, MSG_NOSIGNAL) < 0)
                break;
            struct timespec ts = {0, (junk ? 100 : 300) * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        close(c);
    }
}

/* 2c. Bytes but never a frame: stalled after --timeout, counted from the open. */
static void junk_test(int junk) {
    const char *what = junk ? "random bytes" : "a byte every 0.3 s";
    char out[4400], err[4400], url[128];
    int port;
    pid_t srv = junk_server(junk, NULL, 0, &port);
    TCHECK(srv > 0, "%s: cannot start the server", what);
    if (srv <= 0)
        return;
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    snprintf(out, sizeof out, "%s/junk%d.jsonl", g_dir, junk);
    snprintf(err, sizeof err, "%s/junk%d.err", g_dir, junk);
    const char *extra[] = {"--timeout", "1s", "--reconnect", "1", NULL};
    double t0 = vt_now();
    pid_t p = predict(url, out, err, extra);
    /* 2 connections x 1 s + the 1 s pause, and the model's load: about 3.5 s; 10 s is the
     * margin a loaded machine needs, far below "never" */
    int rc = vt_test_reap(p, 10);
    double dt = vt_now() - t0;
    kill(srv, SIGKILL);
    vt_test_reap(srv, 30);
    char *e = vt_test_slurp(err, NULL);
    printf("  %s: exit %d after %.1f s\n", what, rc, dt);
    TCHECK(rc == 1, "%s: exit %d after %.1f s, 1 within 10 s expected (see %s)", what, rc, dt,
           err);
    TCHECK(e && strstr(e, "stalled: no frame decoded for 1 s") && strstr(e, "gave up after 1 try"),
           "%s: no stall message in %s", what, err);
    free(e);
}

/* 2d. Frames, then a trickle: the read stalls after --timeout from the last frame (the
 * bytes that keep coming do not reset it). The stream's first 48 KiB at once (a second or
 * so of video: frames), then a byte every 0.3 s; --reconnect 0, as every connection would
 * give frames again and a frame starts the tries again. */
static void trickle_after_frames_test(void) {
    char ts[4400], out[4400], err[4400], url[128];
    snprintf(ts, sizeof ts, "%s/src.ts", g_dir);
    int rc = vt_test_sh("ffmpeg -v error -y -i '%s' -c copy -f mpegts '%s'", g_src, ts);
    TCHECK(rc == 0, "frames then a trickle: ffmpeg");
    int port;
    pid_t srv = rc ? -1 : junk_server(0, ts, 48 * 1024, &port);
    if (srv <= 0)
        return;
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    snprintf(out, sizeof out, "%s/trickle.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/trickle.err", g_dir);
    const char *extra[] = {"--timeout", "1s", "--reconnect", "0", NULL};
    double t0 = vt_now();
    pid_t p = predict(url, out, err, extra);
    rc = vt_test_reap(p, 10);
    double dt = vt_now() - t0;
    kill(srv, SIGKILL);
    vt_test_reap(srv, 30);
    char *e = vt_test_slurp(err, NULL);
    printf("  frames then a trickle: exit %d after %.1f s\n", rc, dt);
    TCHECK(rc == 1, "frames then a trickle: exit %d after %.1f s, 1 within 10 s expected (see "
           "%s)", rc, dt, err);
    TCHECK(e && strstr(e, "read failed: stalled: no frame decoded for 1 s"),
           "frames then a trickle: no read stall in %s", err);
    TCHECK(e && strstr(e, "\ntimeline "), "frames then a trickle: frames came first (the "
           "end-of-run line): see %s", err);
    free(e);
}

/* 3. Ctrl-C: the completed windows out, exit 130. */
static void sigint_test(void) {
    char out[4400], err[4400], url[128];
    int port = free_port();
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    snprintf(out, sizeof out, "%s/int.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/int.err", g_dir);
    pid_t srv = serve(port, g_long); /* the signal comes long before its end */
    const char *extra[] = {"--reconnect", "20", NULL};
    pid_t p = predict(url, out, err, extra);
    int got = vt_test_wait_lines(out, 3, p);
    TCHECK(got, "sigint: no 3 windows (see %s)", err);
    kill(p, SIGINT);
    int rc = vt_test_reap(p, 60);
    kill(srv, SIGKILL);
    vt_test_reap(srv, 30);
    TCHECK(rc == 130, "sigint: exit %d, 130 expected (see %s)", rc, err);
    char *e = vt_test_slurp(err, NULL);
    TCHECK(e && strstr(e, "stopped by a signal") && strstr(e, "\ntimeline "),
           "sigint: no stop message or end-of-run line in %s", err);
    free(e);
    int n = vt_test_count_lines(out);
    TCHECK(n >= 3 && n < g_nref, "sigint: %d windows (3 before the signal, fewer than %d)", n,
           g_nref);
    check_windows("sigint", out, 0);
}

/* 2b. A model slower than the stream: windows skipped to keep up (--max-behind), never a
 * window printed with frames missing. */
static void behind_test(void) {
    char out[4400], err[4400], ref[4400], url[128];
    /* the file's windows of 1 s every 0.01 s, one clip each: their start, end and frame
     * count */
    snprintf(ref, sizeof ref, "%s/every.jsonl", g_dir);
    int rc = vt_test_sh("'%s' predict '%s' '%s' --timeline --window 1s --hop 0.01s --json "
                        "--clips-per-video 1 > '%s' 2> '%s.err'", g_bin, g_run, g_src, ref, ref);
    int nref;
    cJSON **r = vt_read_lines(ref, &nref);
    /* about 500: the count rule's half-frame slack at the end (0.02 s) passes a few more
     * windows than vt_timeline_expected_windows when the hop is under half a frame */
    TCHECK(rc == 0 && nref >= vt_timeline_expected_windows(SECONDS, 1, 0.01),
           "hop 0.01 s: exit %d, %d windows", rc, nref);
    int port = free_port();
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    snprintf(out, sizeof out, "%s/behind.jsonl", g_dir);
    snprintf(err, sizeof err, "%s/behind.err", g_dir);
    pid_t srv = serve(port, g_src);
    /* 16 clips x 3 crops a window, a window every 0.01 s (4 a frame, each its own
     * stretch): 4800 clips a second of stream, 24 times what this machine's loaded cores
     * gave with the tiny model (~200 a second), so it falls behind on any CPU; 1 s behind
     * starts a catch-up */
    const char *extra[] = {"--hop", "0.01s", "--clips-per-video", "16", "--crops", "3",
                           "--max-behind", "1s", "--reconnect", "20", NULL};
    pid_t p = predict(url, out, err, extra);
    rc = vt_test_reap(p, 300);
    vt_test_reap(srv, 30);
    char *e = vt_test_slurp(err, NULL);
    TCHECK(rc == 0 && e && strstr(e, "catching up") && strstr(e, "skipped to keep up"),
           "behind: exit %d, no catch-up in %s", rc, err);
    free(e);
    int n;
    cJSON **l = vt_read_lines(out, &n);
    TCHECK(n > 0 && n < nref, "behind: %d windows of %d", n, nref);
    for (int i = 0; i < n; i++) {
        int k = (int)num(l[i], "window");
        if (cJSON_IsTrue(cJSON_GetObjectItem(l[i], "partial")) && i == n - 1)
            break; /* the stream may end during a catch-up: a partial tail */
        TCHECK(k >= 0 && k < nref && num(l[i], "frames") == num(r[k], "frames") &&
                   fabs(num(l[i], "end") - num(r[k], "end")) < 1e-6,
               "behind: window %d: %g frames to %g s, the file's %g frames to %g s", k,
               num(l[i], "frames"), num(l[i], "end"), k < nref ? num(r[k], "frames") : -1,
               k < nref ? num(r[k], "end") : -1);
    }
    printf("  behind: %d windows of %d printed, the others skipped\n", n, nref);
    vt_free_lines(l, n);
    vt_free_lines(r, nref);
}

/* 4. A camera: opened through libavdevice, or an error that says how to get it. */
static void camera_test(void) {
    char err[4400];
    snprintf(err, sizeof err, "%s/cam.err", g_dir);
    if (vt_stream_have_devices()) {
        /* A camera needs hardware this test cannot count on; a device path that does not
         * exist must still end with exit 1 and the path in the message. */
        int rc = vt_test_sh("'%s' predict '%s' /dev/video97 --timeline 2> '%s'",
                            g_bin, g_run, err);
        char *e = vt_test_slurp(err, NULL);
        TCHECK(rc == 1 && e && strstr(e, "/dev/video97"), "missing camera: exit %d, %s", rc,
               e ? e : "(no message)");
        free(e);
        return;
    }
    int rc = vt_test_sh("'%s' predict '%s' /dev/video0 --timeline 2> '%s'", g_bin, g_run, err);
    char *e = vt_test_slurp(err, NULL);
    TCHECK(rc == 1 && e && strstr(e, "libavdevice") && strstr(e, "libavdevice-dev") &&
               strstr(e, "ffmpeg -f v4l2 -i /dev/video0"),
           "camera without libavdevice: exit %d, %s", rc, e ? e : "(no message)");
    free(e);
}

int main(void) {
    g_bin = vt_test_bin("test_live");
    if (!g_bin)
        return VT_TEST_SKIP;
    if (system("command -v ffmpeg > /dev/null") != 0) {
        fprintf(stderr, "test_live: needs the ffmpeg command\n");
        return VT_TEST_SKIP;
    }
    signal(SIGPIPE, SIG_IGN);
    static char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("live"));
    g_dir = dir;
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 3 --val 1 --test 1 --frames 24");
    TCHECK(rc == 0, "synth");
    snprintf(g_run, sizeof g_run, "%s/run", g_dir);
    rc = rc ? rc : vt_test_sh("'%s' train '%s/data' --out '%s' --model tiny --clip 8x32 --stride 2 "
                              "--batch 4 --epochs 1 --val-clips 1 --workers 1 --seed 5 > "
                              "'%s/train.log' 2>&1", g_bin, g_dir, g_run, g_dir);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    snprintf(g_src, sizeof g_src, "%s/src.mp4", g_dir);
    /* x264's default B-frames: frames decode out of order, as from most cameras' encoders */
    rc = rc ? rc : vt_test_sh("ffmpeg -v error -y -f lavfi -i testsrc2=size=320x180:rate=25 -t %g "
                              "-c:v libx264 -pix_fmt yuv420p -g 25 '%s'", SECONDS, g_src);
    /* the same packets four times over (24 s), for the tests that cut a stream short:
     * its first 6 s are the file's, so its first windows are the file's */
    snprintf(g_long, sizeof g_long, "%s/long.mp4", g_dir);
    rc = rc ? rc : vt_test_sh("ffmpeg -v error -y -stream_loop 3 -i '%s' -c copy '%s'", g_src,
                              g_long);
    TCHECK(rc == 0, "ffmpeg source");
    if (rc)
        return vt_test_done("test_live");
    /* the truth: the file itself, read at full speed in batches */
    char ref[4400];
    snprintf(ref, sizeof ref, "%s/file.jsonl", g_dir);
    rc = vt_test_sh("'%s' predict '%s' '%s' --timeline --window %s --hop %s --json --top 2 "
                    "--clips-per-video %d > '%s' 2> '%s.err'", g_bin, g_run, g_src, WINDOW, HOP,
                    K, ref, ref);
    g_ref = vt_read_lines(ref, &g_nref);
    TCHECK(rc == 0 && g_nref == vt_timeline_expected_windows(SECONDS, 1, 0.5),
           "file: exit %d, %d windows (%lld expected)", rc, g_nref,
           (long long)vt_timeline_expected_windows(SECONDS, 1, 0.5));
    live_tests();
    stall_test();
    junk_test(0);
    junk_test(1);
    trickle_after_frames_test();
    behind_test();
    sigint_test();
    camera_test();
    vt_free_lines(g_ref, g_nref);
    return vt_test_done("test_live");
}
