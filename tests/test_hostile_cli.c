/*
 * test_hostile_cli.c: every command of `vidtrain --help` driven with hostile inputs, as a
 * careless or hostile user would (issue 41's hostile-input runner; docs/design.md §3.6,
 * §3.8). The inputs: file and folder names that start with '-' (after `--`), hold spaces,
 * newlines, quotes or bytes that are not UTF-8; text inputs (--labels, Kinetics CSVs, HMDB51
 * split files, UCF101 lists, config.json) with a NUL byte, invalid UTF-8, CR line ends, a
 * quoted newline, a 1 MiB line; an empty file, a folder, a FIFO and a device (/dev/null)
 * where a file is expected (and inside the dataset); a missing path; a symbolic-link loop.
 *
 * Each case is one run of the binary (argv given directly, no shell), and each must give
 * the right result or a clear error: a non-zero exit below 128 with the path (or what is
 * wrong with it) named on stderr. Never a crash (a signal), never a hang (a case is killed
 * after CASE_SECONDS), never an input changed or removed (every file under the inputs is
 * hashed before and after each case), and --json output is valid JSON (read by Python's
 * json module). At the end, every command `vidtrain --help` lists must have been run:
 * a command added later fails this test until it has cases here.
 *
 * One tiny synth set and one tiny run (trained on the hostile-named dataset, so its class
 * names hold a newline, a quote and a byte that is not UTF-8) are shared by every case.
 *
 * What it found when written (each fixed where the rule lives): a FIFO where a file is
 * expected hung scan/train/embed --labels, eval/predict/export --checkpoint and eval or
 * train --resume on a run whose config.json is a FIFO (base/common.h vt_open_regular);
 * an output path that is a link loop was replaced by the rename (export --onnx, embed
 * --out, predict --dump-input, bench decode --starts-out: vt_output_check); bench decode
 * exited 0 with no file readable and named none; prep SRC SRC/x wrote into the dataset;
 * prep's manifest wrote a newline in a file name as a space, so a rerun redid that video
 * (base/csv.h); two errors did not name their path (prep SRC SRC, embed --out NOEXT).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wformat-truncation" /* test paths are short */
#include "app/proc_env.h"
#include "tests/apputil.h"

enum { OK, ERR, ANY };             /* exit 0; non-zero with the needle on stderr; either */
enum { NOJSON, JSON_DOC, JSON_LINES }; /* stdout: anything; one JSON document; one a line */
#define CASE_SECONDS 30                /* a case this slow is a hang (each takes < 2 s) */

static const char *bin;
static char base[4096];     /* the scratch folder, the children's working directory */
static char *snap_before;   /* the inputs' listing with hashes, before every case */
static int making;          /* the fixtures are being made: they change the inputs */
static char ran[64][32];    /* the commands run (bench's as "bench step") */
static int nran;

/* ---- the inputs' fingerprint: path, type, size and FNV-1a of the bytes of every entry
 * under base but out/ (the outputs) and the files eval writes into a run by design. ---- */
typedef struct { char **v; size_t n, cap; } lines;

static void add_line(lines *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static uint64_t fnv_file(const char *path) {
    uint64_t h = 1469598103934665603ull;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    unsigned char buf[65536];
    ssize_t r;
    while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < r; i++)
            h = (h ^ buf[i]) * 1099511628211ull;
    if (fd >= 0)
        close(fd);
    return fd < 0 ? 0 : h;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int eval_product(const char *name) {
    return !strcmp(name, "eval.json") || !strcmp(name, "confusion.csv") ||
           !strcmp(name, "report.html");
}

static void walk(const char *dir, lines *l) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            (!strcmp(dir, ".") && !strcmp(e->d_name, "out")) || eval_product(e->d_name))
            continue;
        char path[4096], line[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        char kind = S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd'
                    : S_ISLNK(st.st_mode) ? 'l' : S_ISFIFO(st.st_mode) ? 'p' : '?';
        char link[1024] = "";
        if (kind == 'l') {
            ssize_t n = readlink(path, link, sizeof link - 1);
            link[n > 0 ? n : 0] = 0;
        }
        snprintf(line, sizeof line, "%s %c %lld %llx %s", path, kind,
                 kind == 'f' ? (long long)st.st_size : 0LL,
                 kind == 'f' ? (unsigned long long)fnv_file(path) : 0ULL, link);
        add_line(l, line);
        if (kind == 'd')
            walk(path, l);
    }
    if (d)
        closedir(d);
}

static char *snapshot(void) {
    lines l = {0};
    walk(".", &l);
    qsort(l.v, l.n, sizeof *l.v, by_name);
    size_t len = 1;
    for (size_t i = 0; i < l.n; i++)
        len += strlen(l.v[i]) + 1;
    char *s = malloc(len), *p = s;
    for (size_t i = 0; i < l.n; i++) {
        p += sprintf(p, "%s\n", l.v[i]);
        free(l.v[i]);
    }
    *p = 0;
    free(l.v);
    return s;
}

/* The first line where two fingerprints differ, for the message. */
static void first_diff(const char *a, const char *b, char *out, size_t cap) {
    while (*a && *a == *b)
        a++, b++;
    while (a > snap_before && a[-1] != '\n')
        a--;
    snprintf(out, cap, "%.300s", a);
}

/* ---- running one case ---- */

/* A printable copy of an argument (control and non-ASCII bytes as \xNN). */
static const char *shown(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; *s && n + 5 < cap; s++)
        n += (unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f
                 ? (size_t)snprintf(buf + n, cap - n, "\\x%02x", (unsigned char)*s)
                 : (size_t)snprintf(buf + n, cap - n, "%c", *s);
    buf[n] = 0;
    return buf;
}

static void note_command(char *const *argv) {
    char name[32];
    snprintf(name, sizeof name, "%s%s%s", argv[1], !strcmp(argv[1], "bench") && argv[2] ? " " : "",
             !strcmp(argv[1], "bench") && argv[2] ? argv[2] : "");
    for (int i = 0; i < nran; i++)
        if (!strcmp(ran[i], name))
            return;
    if (nran < 64)
        snprintf(ran[nran++], sizeof ran[0], "%s", name);
}

/* Is every line (JSON_LINES) or the whole (JSON_DOC) of path valid JSON, says Python. */
static int json_valid(const char *path, int mode) {
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    return vt_test_sh("'%s' -c 'import json,sys\nt=sys.stdin.read()\n%s' < '%s'", py,
                      mode == JSON_DOC ? "json.loads(t)"
                                       : "[json.loads(x) for x in t.splitlines() if x.strip()]",
                      path) == 0;
}

/* Runs bin with argv (argv[0] is replaced), stdin from /dev/null, in base; checks the
 * rules above. needle: for ERR and a failing ANY, a string stderr must contain. */
static void run_case(int line, int expect, const char *needle, int json, char **argv) {
    argv[0] = (char *)bin;
    note_command(argv);
    char cmdline[2048] = "", sb[600];
    for (int i = 1; argv[i]; i++)
        snprintf(cmdline + strlen(cmdline), sizeof cmdline - strlen(cmdline), " %s",
                 shown(argv[i], sb, sizeof sb));
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int in = open("/dev/null", O_RDONLY);
        int o = open("out/stdout", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open("out/stderr", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(bin, argv);
        _exit(127);
    }
    struct timespec t0, t1, nap = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = 0, hung = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid || r < 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (t1.tv_sec - t0.tv_sec > CASE_SECONDS) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            hung = 1;
            break;
        }
        nanosleep(&nap, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    char *err = vt_test_slurp("out/stderr", NULL);
    char where[64];
    snprintf(where, sizeof where, "line %d:", line);
    printf("  %-9s exit %3d %5.2fs %s\n", where, rc, secs, cmdline);
    TCHECK(!hung, "%s hangs (killed after %d s):%s", where, CASE_SECONDS, cmdline);
    TCHECK(rc < 128, "%s crashed (exit %d):%s\n%.2000s", where, rc, cmdline, err ? err : "");
    if (expect == OK)
        TCHECK(rc == 0, "%s exit %d, want 0:%s\n%.2000s", where, rc, cmdline, err ? err : "");
    if (expect == ERR)
        TCHECK(rc != 0, "%s exit 0, want an error:%s", where, cmdline);
    if (rc != 0 && rc < 128 && expect != OK)
        TCHECK(err && needle && strstr(err, needle), "%s the error should name '%s':%s\n%.2000s",
               where, shown(needle, sb, sizeof sb), cmdline, err ? err : "");
    long outlen = 0;
    free(vt_test_slurp("out/stdout", &outlen));
    if (json != NOJSON && (rc == 0 || outlen > 0))
        TCHECK(json_valid("out/stdout", json), "%s --json output is not JSON:%s", where, cmdline);
    char *after = snapshot();
    if (strcmp(after, snap_before) && !making) {
        char d[400];
        first_diff(snap_before, after, d, sizeof d);
        TCHECK(0, "%s changed or removed an input:%s\n  first difference at: %s", where, cmdline,
               shown(d, sb, sizeof sb));
        free(snap_before);
        snap_before = after;
    } else {
        free(after);
    }
    free(err);
}

#define CASE(expect, needle, json, ...) \
    run_case(__LINE__, expect, needle, json, (char *[]){"", __VA_ARGS__, NULL})

/* ---- the shared inputs ---- */

#define HDS "in/-h ds\n\"'\xff" "x"   /* a dataset folder's hostile name */
#define HCLS "-cl a\n\"q\xff" "x"     /* a class folder's */
#define HVID "-v ,\"x\n\xfe" ".mp4"   /* a video's, inside the dataset */
static char *const vids[] = {"in/-v.mp4", "in/s p.mp4", "in/n\nl.mp4", "in/q\"'.mp4",
                                   "in/b\xff" ".mp4"};

static void put(const char *path, const char *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}
#define PUT(path, lit) put(path, lit, sizeof lit - 1)

static void must(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "test_hostile_cli: cannot make the inputs: %s: %s\n", what,
                strerror(errno));
        exit(1);
    }
}

/* A text whose one field is 1 MiB long (past any line buffer): head, field, tail. */
static void put_huge(const char *path, const char *head, const char *tail) {
    size_t n = 1u << 20, hl = strlen(head), tl = strlen(tail);
    char *s = malloc(hl + n + tl);
    memcpy(s, head, hl);
    memset(s + hl, 'a', n);
    memcpy(s + hl + n, tail, tl);
    put(path, s, hl + n + tl);
    free(s);
}

/* A copy of run (a folder of plain files) at dst, its config.json replaced by n bytes. */
static void bad_run(const char *dst, const char *cfg, size_t n) {
    must(vt_test_sh("cp -r run '%s' && rm -f '%s/config.json'", dst, dst) == 0, dst);
    char p[4200];
    snprintf(p, sizeof p, "%s/config.json", dst);
    if (cfg)
        put(p, cfg, n);
}

static void make_inputs(void) {
    must(vt_test_sh("'%s' synth ds --classes 2 --train 2 --val 1 --test 1 --frames 12 "
                    "--size 32x24 --no-h264 --threads 1 > out/synth.log 2>&1", bin) == 0,
         "synth");
    must(mkdir("in", 0755) == 0, "in");
    must(vt_test_sh("cp -r ds/train in/h && cp -r ds/val in/h/val && mkdir in/h/train && "
                    "mv in/h/move_left in/h/move_right in/h/train/") == 0, "copy");
    must(rename("in/h/train/move_left", "in/h/train/" HCLS) == 0, "class");
    must(rename("in/h/val/move_left", "in/h/val/" HCLS) == 0, "class");
    must(rename("in/h/train/move_right/move_right_0000.mp4", "in/h/train/move_right/" HVID) == 0,
         "video");
    /* inside the dataset too: a FIFO video, a link loop, a FIFO beside the classes (prep
     * copies other files): listed and skipped, never waited on */
    must(mkfifo("in/h/train/move_right/f.mp4", 0644) == 0 &&
             symlink("lp.mp4", "in/h/train/move_right/lp.mp4") == 0 &&
             mkfifo("in/h/notes.txt", 0644) == 0, "specials in the dataset");
    must(rename("in/h", HDS) == 0, "dataset");
    for (size_t i = 0; i < sizeof vids / sizeof *vids; i++)
        must(vt_test_sh("cp ds/train/move_left/move_left_0000.mp4 in/tmp.mp4") == 0 &&
                 rename("in/tmp.mp4", vids[i]) == 0, vids[i]);
    PUT("in/empty", "");
    must(mkdir("in/adir", 0755) == 0 && mkfifo("in/fifo", 0644) == 0, "fifo");
    must(symlink("loop", "in/loop") == 0 && symlink("loop.npy", "in/loop.npy") == 0, "loop");
    must(mkfifo("in/fifo.npy", 0644) == 0 && mkdir("in/adir.npy", 0755) == 0, "npy");
    must(vt_test_sh("cp ds/train/move_left/move_left_0000.mp4 in/vid.npy") == 0, "vid.npy");
    /* --labels: path relative to the dataset, then a tag column. */
    PUT("in/lab_nul.csv", "path,tag\ntrain/move_left/move_left_0000.mp4,a\0b\n");
    PUT("in/lab_utf8.csv", "path,tag\ntrain/move_left/move_left_0000.mp4,a\xff" "b\n");
    PUT("in/lab_cr.csv", "path,tag\rtrain/move_left/move_left_0000.mp4,a\r"
                         "train/move_right/move_right_0000.mp4,b\r");
    PUT("in/lab_qnl.csv", "path,tag\ntrain/move_left/move_left_0000.mp4,\"a\nb\"\n"
                          "train/move_right/move_right_0000.mp4,\"c,\"\"d\"\n");
    PUT("in/lab_open.csv", "path,tag\ntrain/move_left/move_left_0000.mp4,\"a\n");
    put_huge("in/lab_huge.csv", "path,tag\ntrain/move_left/move_left_0000.mp4,", "\n");
    /* Kinetics CSVs (docs/segments.md). */
#define KH "label,youtube_id,time_start,time_end,split\n"
    PUT("in/kin_nul.csv", KH "move_left,abc,0,1,train\nmove_right,d\0ef,0,1,train\n");
    PUT("in/kin_utf8.csv", KH "move_l\xe9" "ft,abc,0,1,train\n");
    PUT("in/kin_cr.csv", "label,youtube_id,time_start,time_end,split\r\n"
                         "move_left,abc,0,1,train\r\nmove_right,def,0,1,train\r\n");
    PUT("in/kin_qnl.csv", KH "\"move\nleft\",abc,0,1,train\nmove_right,def,0,1,train\n");
    put_huge("in/kin_huge.csv", KH "move_left,", ",0,1,train\n");
    /* An HMDB51 split folder and UCF101 lists, each with a NUL. */
    must(mkdir("in/hmdb", 0755) == 0 && mkdir("in/ucf", 0755) == 0, "lists");
    PUT("in/hmdb/move_left_test_split1.txt", "move_left_0000.mp4 1\nmove_left_0001.avi 2\0\n");
    PUT("in/hmdb/move_right_test_split1.txt", "move_right_0000.mp4 1\n");
    PUT("in/ucf/classInd.txt", "1 move_left\n2 move_right\n");
    PUT("in/ucf/trainlist01.txt", "move_left/move_left_0000.mp4 1\n\0move_right/x.mp4 2\n");
    PUT("in/ucf/testlist01.txt", "move_left/move_left_0001.avi\n");
}

/* The run every model command reads, and copies of it with a hostile config.json. */
static void make_runs(void) {
    making = 1;
    CASE(OK, NULL, NOJSON, "train", "--out", "run", "--model", "tiny", "--clip", "4x32",
         "--batch", "2", "--epochs", "1", "--workers", "1", "-q", "--", HDS);
    bad_run("in/rc_nul", "{\"model\":\"ti\0ny\"}", 16);
    bad_run("in/rc_utf8", "{\"model\":\"ti\xffny\"}", 16);
    bad_run("in/rc_none", NULL, 0);
    bad_run("in/rc_huge", NULL, 0);
    put_huge("in/rc_huge/config.json", "{\"model\":\"", "\"}");
    bad_run("in/rc_fifo", NULL, 0);
    must(mkfifo("in/rc_fifo/config.json", 0644) == 0, "fifo config");
    bad_run("in/rc_loop", NULL, 0);
    must(symlink("config.json", "in/rc_loop/config.json") == 0, "loop config");
    /* --resume writes into its run: those copies are outputs. */
    must(vt_test_sh("cp -r in/rc_nul out/rs_nul && cp -r in/rc_fifo out/rs_fifo && "
                    "cp -r in/rc_none out/rs_none") == 0, "resume copies");
    making = 0;
}

/* Special inputs where a file or folder is expected, each put after the arguments (then
 * tail, when not NULL): each must be refused with its name. The arguments end with NULL.
 * output: the path is an output (which may be new or a regular file: those not tried).
 * few: the empty file, the FIFO and the loop only, for a reader another case tries in full
 * (each run costs ~0.1 s of start-up: the whole must stay well under a minute). */
static const char *const specials_list[] = {"in/empty", "in/fifo", "in/loop", "in/missing",
                                            "/dev/null"};

static void specials_at(int line, int output, int few, const char *tail, ...) {
    char *argv[40];
    int n = 0;
    argv[n++] = "";
    va_list ap;
    va_start(ap, tail);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 36;)
        argv[n++] = (char *)a;
    va_end(ap);
    for (size_t i = 0; i < sizeof specials_list / sizeof *specials_list; i++) {
        if (output && (!strcmp(specials_list[i], "in/missing") ||
                       !strcmp(specials_list[i], "in/empty")))
            continue; /* an output may be new, or replace a regular file */
        if (few && (!strcmp(specials_list[i], "in/missing") ||
                    !strcmp(specials_list[i], "/dev/null")))
            continue; /* the reader is another command's too, tried there in full */
        int k = n;
        argv[k++] = (char *)specials_list[i];
        if (tail)
            argv[k++] = (char *)tail;
        argv[k] = NULL;
        run_case(line, ERR, specials_list[i], NOJSON, argv);
    }
}
#define SPECIALS(tail, ...) specials_at(__LINE__, 0, 0, tail, __VA_ARGS__, (const char *)NULL)
#define SPECIALS_FEW(tail, ...) specials_at(__LINE__, 0, 1, tail, __VA_ARGS__, (const char *)NULL)
#define SPECIALS_OUT(tail, ...) specials_at(__LINE__, 1, 0, tail, __VA_ARGS__, (const char *)NULL)

static void cases_data(void) {
    /* scan: the hostile-named dataset, then every reader's hostile texts. */
    CASE(OK, NULL, JSON_DOC, "scan", "--json", "--threads", "1", "--", HDS);
    CASE(OK, NULL, NOJSON, "scan", "--threads", "1", "--", HDS);
    SPECIALS(NULL, "scan", "--json", "--");
    CASE(ERR, "lab_nul.csv:2", JSON_DOC, "scan", "--json", "--labels", "in/lab_nul.csv", "ds");
    CASE(ERR, "lab_utf8.csv:2", NOJSON, "scan", "--labels", "in/lab_utf8.csv", "ds");
    CASE(ANY, "lab_cr.csv", NOJSON, "scan", "--labels", "in/lab_cr.csv", "ds");
    CASE(ANY, "lab_qnl.csv", JSON_DOC, "scan", "--json", "--labels", "in/lab_qnl.csv", "ds");
    CASE(ERR, "lab_open.csv:2", NOJSON, "scan", "--labels", "in/lab_open.csv", "ds");
    CASE(ANY, "lab_huge.csv", NOJSON, "scan", "--labels", "in/lab_huge.csv", "ds");
    CASE(ERR, "in/fifo", NOJSON, "scan", "--labels", "in/fifo", "ds");
    CASE(ERR, "in/adir", NOJSON, "scan", "--labels", "in/adir", "ds");
    CASE(ERR, "in/loop", NOJSON, "scan", "--labels", "in/loop", "ds");
    CASE(ERR, "in/empty", NOJSON, "scan", "--labels", "in/empty", "ds");
    CASE(ERR, "kin_nul.csv:3", NOJSON, "scan", "--lists", "in/kin_nul.csv", "ds");
    CASE(ERR, "kin_utf8.csv:2", NOJSON, "scan", "--lists", "in/kin_utf8.csv", "ds");
    CASE(ANY, "kin_cr.csv", JSON_DOC, "scan", "--json", "--lists", "in/kin_cr.csv", "ds");
    CASE(ANY, "kin_qnl.csv", JSON_DOC, "scan", "--json", "--lists", "in/kin_qnl.csv", "ds");
    CASE(ANY, "kin_huge.csv", NOJSON, "scan", "--lists", "in/kin_huge.csv", "ds");
    CASE(ERR, "split1.txt:2", NOJSON, "scan", "--lists", "in/hmdb", "ds");
    CASE(ERR, "trainlist01.txt:2", NOJSON, "scan", "--lists", "in/ucf", "ds");
    CASE(ERR, "in/fifo", NOJSON, "scan", "--lists", "in/fifo", "ds");
    CASE(ERR, "in/loop", NOJSON, "scan", "--lists", "in/loop", "ds");

    /* synth: into a hostile name; never over a file, a special file or a dataset. */
    CASE(OK, NULL, NOJSON, "synth", "--classes", "2", "--train", "1", "--val", "0", "--test", "0",
         "--frames", "4", "--size", "32x24", "--no-h264", "--threads", "1", "--",
         "out/-s y\n\xff" "x");
    SPECIALS_OUT(NULL, "synth", "--classes", "2", "--frames", "4", "--size", "32x24", "--");
    CASE(ERR, "ds", NOJSON, "synth", "--classes", "2", "--frames", "4", "ds");

    /* prep: a hostile dataset into a hostile DST; specials as SRC and as DST; texts. */
    for (int again = 0; again < 2; again++) {
        CASE(OK, NULL, NOJSON, "prep", "--short-side", "32", "--codec", "mpeg4", "--jobs", "1",
             "--", HDS, "out/-p d\n\xff" "x");
        /* the rerun resumes: the manifest names each video as it is, newline and all (it
         * wrote a newline as a space, and the rerun redid that video) */
        char *log = again ? vt_test_slurp("out/stderr", NULL) : NULL;
        TCHECK(!again || (log && strstr(log, "(0 to do")), "prep's rerun redid videos:\n%s",
               log ? log : "");
        free(log);
    }
    SPECIALS("out/p1", "prep", "--jobs", "1", "--");
    CASE(ERR, "in/fifo", NOJSON, "prep", "--jobs", "1", "ds", "in/fifo");
    CASE(ERR, "in/empty", NOJSON, "prep", "--jobs", "1", "ds", "in/empty");
    CASE(ERR, "/dev/null", NOJSON, "prep", "--jobs", "1", "ds", "/dev/null");
    CASE(ERR, "ds", NOJSON, "prep", "--jobs", "1", "ds", "ds");
    CASE(ERR, "ds", NOJSON, "prep", "--jobs", "1", "ds", "ds/x");
    CASE(ERR, "lab_nul.csv:2", NOJSON, "prep", "--jobs", "1", "--trim", "--labels",
         "in/lab_nul.csv", "ds", "out/p2");
    CASE(ERR, "kin_nul.csv:3", NOJSON, "prep", "--jobs", "1", "--trim", "--lists",
         "in/kin_nul.csv", "ds", "out/p3");
}

static void cases_model(void) {
    /* train: specials as the dataset, as --out, as --init, --resume; texts. */
    SPECIALS_FEW(NULL, "train", "--out", "out/t1", "--model", "tiny", "--clip", "4x32", "-q", "--");
    SPECIALS_OUT("ds", "train", "--model", "tiny", "--clip", "4x32", "-q", "--out");
    SPECIALS_FEW("ds", "train", "--out", "out/t2", "--model", "tiny", "--clip", "4x32", "-q",
                 "--init");
    CASE(ERR, "in/adir", NOJSON, "train", "--out", "out/t3", "--init", "in/adir", "ds");
    SPECIALS_FEW(NULL, "train", "-q", "--resume");
    CASE(ERR, "in/adir", NOJSON, "train", "--resume", "in/adir");
    CASE(ERR, "lab_nul.csv:2", NOJSON, "train", "--out", "out/t4", "--labels", "in/lab_nul.csv",
         "ds");
    CASE(ERR, "kin_nul.csv:3", NOJSON, "train", "--out", "out/t5", "--lists", "in/kin_nul.csv",
         "ds");
    CASE(ERR, "ds", NOJSON, "train", "--out", "ds/r", "ds");
    CASE(ANY, "config.json", NOJSON, "train", "-q", "--epochs", "2", "--resume", "out/rs_nul");
    CASE(ANY, "config.json", NOJSON, "train", "-q", "--epochs", "2", "--resume", "out/rs_none");
    CASE(ERR, "config.json", NOJSON, "train", "-q", "--epochs", "2", "--resume", "out/rs_fifo");

    /* eval: the hostile dataset; specials as the data, the run, the checkpoint; bad configs. */
    CASE(OK, NULL, NOJSON, "eval", "-q", "--clips-per-video", "1", "--split", "all", "run", "--",
         HDS);
    SPECIALS_FEW(NULL, "eval", "-q", "run", "--");
    SPECIALS("ds", "eval", "-q", "--");
    SPECIALS_FEW("ds", "eval", "-q", "run", "--checkpoint");
    CASE(ERR, "in/adir", NOJSON, "eval", "-q", "in/adir", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_nul", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_utf8", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_none", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_huge", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_fifo", "ds");
    CASE(ANY, "config.json", NOJSON, "eval", "-q", "--clips-per-video", "1", "in/rc_loop", "ds");

    /* predict: hostile video names; specials as a video, the run, the checkpoint, the dump. */
    CASE(OK, NULL, JSON_DOC, "predict", "--json", "--clips-per-video", "1", "run", "--", vids[0],
         vids[1], vids[2], vids[3], vids[4]);
    CASE(OK, NULL, NOJSON, "predict", "--clips-per-video", "1", "run", "--", vids[2], vids[4]);
    CASE(OK, NULL, JSON_LINES, "predict", "--json", "--timeline", "run", "--", vids[0], vids[4]);
    SPECIALS(NULL, "predict", "--clips-per-video", "1", "run", "--");
    CASE(ERR, "in/empty", JSON_DOC, "predict", "--json", "run", "in/empty", "in/fifo", "in/loop");
    CASE(ERR, "in/adir", NOJSON, "predict", "run", "in/adir");
    SPECIALS_FEW("in/-v.mp4", "predict", "--");
    SPECIALS_FEW("in/-v.mp4", "predict", "run", "--checkpoint");
    SPECIALS_OUT("in/s p.mp4", "predict", "run", "--dump-input");
    CASE(ERR, "in/s p.mp4", NOJSON, "predict", "run", "--dump-input", "in/s p.mp4", "in/s p.mp4");
    /* (Not a FIFO with --timeline: a pipe is a stream that waits for its writer, by design
     * (docs/streams.md), and --timeout is for network streams and cameras.) */
    CASE(ANY, "config.json", JSON_DOC, "predict", "--json", "in/rc_utf8", "in/s p.mp4");
    CASE(ANY, "config.json", NOJSON, "predict", "in/rc_fifo", "in/s p.mp4");

    /* embed: hostile names in and out; specials as a video, the output; texts. */
    CASE(OK, NULL, NOJSON, "embed", "--clips-per-video", "1", "--out", "out/-e m\n\xff" "x.npy",
         "run", "--", vids[0], vids[2], vids[4]);
    CASE(OK, NULL, NOJSON, "embed", "--clips-per-video", "1", "--out", "out/e2.safetensors",
         "run", "--", HDS);
    SPECIALS_FEW(NULL, "embed", "--out", "out/e3.npy", "run", "--");
    /* --out takes its format from the extension: the specials get one */
    CASE(ERR, "in/fifo.npy", NOJSON, "embed", "--out", "in/fifo.npy", "run", "in/s p.mp4");
    CASE(ERR, "in/loop.npy", NOJSON, "embed", "--out", "in/loop.npy", "run", "in/s p.mp4");
    CASE(ERR, "in/adir.npy", NOJSON, "embed", "--out", "in/adir.npy", "run", "in/s p.mp4");
    CASE(ERR, "/dev/null", NOJSON, "embed", "--out", "/dev/null", "run", "in/s p.mp4");
    CASE(ERR, "in/vid.npy", NOJSON, "embed", "--out", "in/vid.npy", "run", "in/vid.npy");
    CASE(ERR, "best.safetensors", NOJSON, "embed", "--out", "run/best.safetensors", "run",
         "in/s p.mp4");
    CASE(ERR, "lab_nul.csv:2", NOJSON, "embed", "--out", "out/e4.npy", "--labels",
         "in/lab_nul.csv", "run", "ds");
    CASE(ERR, "kin_nul.csv:3", NOJSON, "embed", "--out", "out/e5.npy", "--lists",
         "in/kin_nul.csv", "run", "ds");

    /* export: into a hostile name; specials as the run, the checkpoint and the output. */
    CASE(OK, NULL, NOJSON, "export", "run", "--onnx", "out/-x n\n\xff" "x.onnx");
    SPECIALS_FEW(NULL, "export", "--onnx", "out/x1.onnx", "--");
    SPECIALS_FEW(NULL, "export", "run", "--onnx", "out/x2.onnx", "--checkpoint");
    SPECIALS_OUT(NULL, "export", "run", "--onnx");
    CASE(ERR, "in/adir", NOJSON, "export", "run", "--onnx", "in/adir");
    CASE(ERR, "best.safetensors", NOJSON, "export", "run", "--onnx", "run/best.safetensors");
    CASE(ANY, "config.json", NOJSON, "export", "in/rc_nul", "--onnx", "out/x3.onnx");

    /* bench: hostile video names; specials; the starts file over a video. */
    CASE(OK, NULL, NOJSON, "bench", "decode", "--mode", "clips", "--clips-per-video", "1",
         "--decode", "cpu", "--", vids[0], vids[2], vids[4], HDS);
    CASE(OK, NULL, NOJSON, "bench", "decode", "--probe", "--decode", "cpu", "--", vids[3]);
    SPECIALS(NULL, "bench", "decode", "--decode", "cpu", "--");
    CASE(ERR, "in/-v.mp4", NOJSON, "bench", "decode", "--mode", "clips", "--decode", "cpu",
         "--starts-out", "in/-v.mp4", "--", "in/-v.mp4");
    SPECIALS_OUT("in/q\"'.mp4", "bench", "decode", "--mode", "clips", "--decode", "cpu",
                 "--starts-out");
    CASE(OK, NULL, NOJSON, "bench", "step", "--model", "tiny", "--clip", "4x32", "--batch", "2",
         "--steps", "1", "--warmup", "0");
    CASE(ERR, "x\n", NOJSON, "bench", "step", "--model", "x\n\xff" "x");
    CASE(ERR, "-y", NOJSON, "bench", "step", "--", "-y");
    /* bench conv needs a GPU: here it refuses with that said (a CPU build, or no device) */
    CASE(ANY, "GPU", NOJSON, "bench", "conv", "--small");
    CASE(ERR, "x\n", NOJSON, "bench", "conv", "--clip", "x\n\xff" "x");
    CASE(ERR, "-y", NOJSON, "bench", "conv", "--", "-y");

    /* plan, devices: no file inputs; hostile values and operands. */
    CASE(OK, NULL, NOJSON, "plan", "--model", "tiny", "--clip", "4x32", "--classes", "2");
    CASE(ERR, "x\n", NOJSON, "plan", "--model", "x\n\xff" "x");
    CASE(ERR, "-y", NOJSON, "plan", "--model", "tiny", "--", "-y");
    CASE(OK, NULL, NOJSON, "devices");
    CASE(ERR, "x\n", NOJSON, "devices", "--devices", "x\n\xff" "x");
    CASE(ERR, "-y", NOJSON, "devices", "--", "-y");
}

static int was_run(const char *name) {
    int listed = 0;
    for (int i = 0; i < nran; i++)
        listed |= !strcmp(ran[i], name);
    TCHECK(listed, "'%s' (in vidtrain --help) has no hostile case here", name);
    return 1;
}

/* Every command `vidtrain --help` lists was run ("bench decode|step|conv" is three). */
static void check_coverage(void) {
    char out[4200];
    snprintf(out, sizeof out, "%s/out/help.txt", base);
    TCHECK(vt_test_sh("'%s' --help > '%s'", bin, out) == 0, "vidtrain --help");
    char *help = vt_test_slurp(out, NULL);
    int listed = 0;
    for (char *ln = help ? strtok(help, "\n") : NULL; ln; ln = strtok(NULL, "\n")) {
        char cmd[64], sub[64] = "", name[130];
        if (strncmp(ln, "  ", 2) || ln[2] == ' ' || sscanf(ln + 2, "%63s %63s", cmd, sub) < 1)
            continue;
        if (strcmp(cmd, "bench")) {
            listed += was_run(cmd);
            continue;
        }
        for (char *s = sub, *bar; s; s = bar ? bar + 1 : NULL) { /* decode|step */
            if ((bar = strchr(s, '|')) != NULL)
                *bar = 0;
            snprintf(name, sizeof name, "bench %s", s);
            listed += was_run(name);
        }
    }
    TCHECK(listed >= 12, "only %d commands found in vidtrain --help", listed);
    free(help);
}

int main(int argc, char **argv) {
    (void)argc;
    /* The environment vidtrain would set for itself and start again for (app/proc_env.c),
     * set once here: each of the ~170 runs then starts once, which halves this test. */
    vt_proc_env_apply(argv);
    bin = vt_test_bin("test_hostile_cli");
    if (!bin)
        return VT_TEST_SKIP;
    char abs[4096];
    if (bin[0] != '/' && getcwd(abs, sizeof abs)) {
        static char b[8300];
        snprintf(b, sizeof b, "%s/%s", abs, bin);
        bin = b;
    }
    snprintf(base, sizeof base, "%s", vt_test_dir("hostile_cli"));
    if (chdir(base) != 0 || mkdir("out", 0755) != 0) {
        fprintf(stderr, "cannot use %s\n", base);
        return 1;
    }
    make_inputs();
    snap_before = snapshot();
    make_runs();
    free(snap_before);
    snap_before = snapshot();
    cases_data();
    cases_model();
    check_coverage();
    free(snap_before);
    return vt_test_done("test_hostile_cli");
}
