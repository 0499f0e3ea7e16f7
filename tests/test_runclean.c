/*
 * test_runclean.c: vt_run_clean_temps (app/run/runclean.h) on a run folder holding every
 * shape of leftover temporary file the atomic writers make (mkstemp's six characters, a
 * dead process's PID in both spellings) next to files that must survive: the run's real
 * files, look-alikes (wrong suffix length, empty base, a folder, a link), and the
 * temporary file of a live process. Then a real one: `vidtrain train` killed with SIGKILL
 * while it writes is not needed here (scripts/soak-kill.sh does that); the names below
 * are the writers' own (models/checkpoint.c or models/formats/safetensors.c, base/common.c).
 *
 * It must never depend on timing: the dead PID is one this test forked and reaped.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/run/runclean.h"
#include "tests/apputil.h"
#include "tests/testutil.h"

static char dir[4096];

static int exists(const char *name) {
    char p[8300];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "%s", vt_test_dir("runclean"));
    /* A PID that is certainly dead: a child that exited and was reaped. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    long dead = (long)child, live = (long)getpid();

    char name[256];
    const char *gone[8];
    int ngone = 0;
    static char names[8][256];
    snprintf(names[ngone], 256, "last.safetensors.tmp.Ab3xYz");
    gone[ngone] = names[ngone], ngone++;
    snprintf(names[ngone], 256, "best.safetensors.tmp.000aZ9");
    gone[ngone] = names[ngone], ngone++;
    snprintf(names[ngone], 256, "config.json.tmp.%ld", dead);
    gone[ngone] = names[ngone], ngone++;
    snprintf(names[ngone], 256, "metrics.csv.%ld.tmp", dead);
    gone[ngone] = names[ngone], ngone++;
    for (int i = 0; i < ngone; i++)
        vt_test_write_file(dir, gone[i], "partial");

    static const char *const kept[] = {
        "last.safetensors", "config.json", "metrics.jsonl", "notes.tmp", "x.tmp.abc",
        "x.tmp.Ab3xYz7", ".tmp.Ab3xYz", "a.tmp.Ab-xYz", "tmp.123", "report.html",
    };
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        vt_test_write_file(dir, kept[i], "keep");
    snprintf(name, sizeof name, "val.json.tmp.%ld", live); /* a live writer's */
    vt_test_write_file(dir, name, "in use");
    TCHECK(vt_test_sh("mkdir '%s/sub.tmp.Ab3xYz' && ln -s last.safetensors '%s/lnk.tmp.Qw3xYz'",
                      dir, dir) == 0, "setup");

    /* The name classifier alone. */
    long pid = -1;
    TCHECK(vt_run_temp_name("last.safetensors.tmp.Ab3xYz", &pid) == 1 && pid == 0, "mkstemp");
    TCHECK(vt_run_temp_name("config.json.tmp.4242", &pid) == 1 && pid == 4242, "tmp.PID");
    TCHECK(vt_run_temp_name("plan.txt.4242.tmp", &pid) == 1 && pid == 4242, "PID.tmp");
    TCHECK(!vt_run_temp_name("last.safetensors", &pid) && !vt_run_temp_name("a.tmp", &pid) &&
               !vt_run_temp_name(".tmp.Ab3xYz", &pid) && !vt_run_temp_name("x.tmp.ab", &pid) &&
               !vt_run_temp_name("d/x.tmp.Ab3xYz", &pid) && !vt_run_temp_name(".4242.tmp", &pid),
           "look-alikes are not temporary names");

    char err[512] = "";
    int n = vt_run_clean_temps(dir, err, sizeof err);
    TCHECK(n == ngone, "removed %d, want %d (%s)", n, ngone, err);
    for (int i = 0; i < ngone; i++)
        TCHECK(!exists(gone[i]), "%s left behind", gone[i]);
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        TCHECK(exists(kept[i]), "%s removed", kept[i]);
    TCHECK(exists(name), "%s (a live process's) removed", name);
    TCHECK(exists("sub.tmp.Ab3xYz") && exists("lnk.tmp.Qw3xYz"), "a folder or a link removed");
    TCHECK(vt_run_clean_temps(dir, err, sizeof err) == 0, "second pass removed more");

    char missing[4200];
    snprintf(missing, sizeof missing, "%s/not-there", dir);
    TCHECK(vt_run_clean_temps(missing, err, sizeof err) == 0, "a new run folder: %s", err);
    return vt_test_done("test_runclean");
}
