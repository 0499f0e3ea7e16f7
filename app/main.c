/*
 * main.c: the vidtrain command — dispatches to one subcommand per file (docs/design.md §7).
 * Under mpirun/srun it also starts and ends the MPI world (pipeline/parallel/mpi.h): only rank 0
 * prints to stdout, and only the commands that span processes may run there. It must
 * never do work itself: parsing and behaviour belong to the subcommands.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "app/proc_env.h"
#include "app/signals.h"
#include "base/common.h"
#include "pipeline/data/video/video.h"
#include "pipeline/parallel/mpi.h"

typedef struct vt_cmd {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
    const char *what;
} vt_cmd;

static const vt_cmd cmds[] = {
    {"devices", vt_cmd_devices, "devices", "list GPUs (name, memory, capability) or the CPU"},
    {"synth", vt_cmd_synth, "synth DIR", "write a demo dataset of real encoded videos"},
    {"scan", vt_cmd_scan, "scan DIR", "classes, counts, codecs, durations, unreadable files"},
    {"plan", vt_cmd_plan, "plan --model M --clip TxHxW", "model summary, memory per clip, slice plan"},
    {"train", vt_cmd_train, "train DIR --out RUN", "train, validate, checkpoint, report"},
    {"eval", vt_cmd_eval, "eval RUN [DIR]", "clip/video top-1/top-5, per-class accuracy, confusion"},
    {"predict", vt_cmd_predict, "predict RUN VIDEO...", "top-k labels per video"},
    {"embed", vt_cmd_embed, "embed RUN VIDEO...|DIR --out F", "feature vectors per video (.safetensors/.npy)"},
    {"export", vt_cmd_export, "export RUN --onnx FILE", "the trained network as an ONNX model"},
    {"prep", vt_cmd_prep, "prep SRC DST", "re-encode a dataset to training size (HD, long videos)"},
    {"bench", vt_cmd_bench, "bench decode|step|conv", "throughput figures"},
};

int vt_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "vidtrain %s: train video classifiers (3D CNNs, video transformers) on the GPUs you have (or the CPU)\n\n"
               "usage: vidtrain COMMAND [options]   (vidtrain COMMAND --help for its options)\n\n",
            VT_VERSION);
    for (size_t i = 0; i < VT_ARRAY_LEN(cmds); i++)
        fprintf(f, "  %-30s %s\n", cmds[i].usage, cmds[i].what);
    fprintf(f, "\nA dataset is a folder with one subfolder per class (DIR/<class>/<video>),\n"
               "or DIR/train + DIR/val (+ DIR/test) each laid out that way.\n"
               "`--` ends the options of any command: vidtrain predict RUN -- -clip.mp4\n"
               "Quick start: vidtrain synth demo && vidtrain train demo --out runs/demo\n");
}

/* Commands that span several processes; the others run in one. */
static int spans_processes(int argc, char **argv) {
    return argc >= 2 && (!strcmp(argv[1], "train") || !strcmp(argv[1], "eval") ||
                         (!strcmp(argv[1], "bench") && argc >= 3 && !strcmp(argv[2], "step")));
}

/* `--` ends the options, for every command at once: it is removed, and each later
 * argument that starts with '-' (a file named -x.mp4) becomes ./-x.mp4, the same file,
 * which no command's loop takes for an option. A lone "-" stays standard input.
 * Returns the strings it made (free them with free_operands), NULL when none. */
static char **end_options(int *argc, char **argv) {
    int k = 2;
    while (k < *argc && strcmp(argv[k], "--"))
        k++;
    if (k >= *argc)
        return NULL;
    char **made = calloc((size_t)*argc, sizeof *made);
    int n = 0;
    for (int i = k + 1; i < *argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] && made) {
            size_t len = strlen(a) + 3;
            if ((made[n] = malloc(len)) != NULL) {
                snprintf(made[n], len, "./%s", a);
                a = made[n++];
            }
        }
        argv[i - 1] = (char *)a;
    }
    argv[--*argc] = NULL;
    return made;
}

static void free_operands(char **made) {
    for (int i = 0; made && made[i]; i++)
        free(made[i]);
    free(made);
}

/* Standard output is a writer too: it is what predict, scan and plan make, and `predict
 * --json > FILE` on a full disk exited 0 with FILE cut short. A write it refused (a full
 * disk, /dev/full, a pipe closed with SIGPIPE ignored) fails the command, whatever it is,
 * with the reason when the last flush still has it. */
static int stdout_check(const char *cmd, int rc) {
    int e = fflush(stdout) != 0 ? errno : 0;
    if (!e && !ferror(stdout))
        return rc;
    fprintf(stderr, "vidtrain%s%s: cannot write to standard output%s%s: what it holds is "
            "incomplete\n", cmd ? " " : "", cmd ? cmd : "", e ? ": " : "", e ? strerror(e) : "");
    return rc ? rc : 1;
}

static int dispatch(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("vidtrain %s\n", VT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < VT_ARRAY_LEN(cmds); i++)
        if (!strcmp(argv[1], cmds[i].name)) {
            char **made = end_options(&argc, argv);
            int rc = cmds[i].fn(argc - 1, argv + 1);
            free_operands(made);
            return rc;
        }
    fprintf(stderr, "vidtrain: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

/* Standard input, output and error each hold a descriptor before any file is opened. One
 * started closed (`>&-`, a daemon's launcher) gave its number to the next file opened:
 * train's progress lines and warnings went into RUN/.lock over the pid a second train names,
 * and could as well have gone into a checkpoint's temporary file. Each is given /dev/null
 * opened the other way round (gnulib's stdopen), so a write to a closed stdout still fails
 * (EBADF: stdout_check's exit 1) instead of vanishing. 0, or -1 without /dev/null. */
static int std_fds_hold(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        /* the lowest free number, which is fd: those below it are open by now */
        if (open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY) != fd)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (std_fds_hold() != 0)
        return 2; /* no /dev/null: nothing to say it with either, if stderr was the one */
    vt_proc_env_apply(argv); /* may start the program again, before anything else runs */
    /* A file size limit (ulimit -f) is a full disk by another name: ignored, its signal
     * turns the write past it into EFBIG, which every writer reports with the path and
     * undoes. Its default action killed the process mid-write, leaving a cut-short
     * temporary file, a torn metrics line and no word of which file. */
    signal(SIGXFSZ, SIG_IGN);
    char err[1024];
    if (vt_mpi_init(&argc, &argv, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain: %s\n", err);
        return vt_mpi_finalize(2);
    }
    if (vt_mpi_size() > 1) {
        /* Every rank runs the same command; rank 0 speaks for them (errors go to stderr
         * from every rank). */
        if (vt_mpi_rank() != 0 && !freopen("/dev/null", "w", stdout))
            fprintf(stderr, "vidtrain: rank %d: cannot silence stdout\n", vt_mpi_rank());
        vt_mpi_set_signal_check(vt_signal_pending);
        if (argc >= 2 && !spans_processes(argc, argv) && strcmp(argv[1], "--version") &&
            !vt_wants_help(argc, argv)) {
            if (vt_mpi_rank() == 0)
                fprintf(stderr, "vidtrain %s: runs in one process; under mpirun/srun (%d "
                        "processes) use train, eval or bench step\n", argv[1], vt_mpi_size());
            return vt_mpi_finalize(2);
        }
    }
    int rc = dispatch(argc, argv);
    char why[640];
    if (rc == 0 && vt_video_system_failed(why, sizeof why)) {
        /* the commands stop on it where it matters; none may end as a success after it */
        fprintf(stderr, "vidtrain%s%s: %s\n", argc >= 2 ? " " : "", argc >= 2 ? argv[1] : "",
                why);
        rc = 1;
    }
    return vt_mpi_finalize(stdout_check(argc >= 2 && argv[1][0] != '-' ? argv[1] : NULL, rc));
}
