/*
 * signals.c: the SIGINT/SIGTERM/SIGHUP flag of signals.h. The handler only sets the flag and
 * writes a fixed line; it must never call anything that is not async-signal-safe.
 */
#include "app/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_signal;
static const char *g_msg; /* another command's line (vt_signals_install_msg), or NULL */
static size_t g_msg_len;

static void on_signal(int sig) {
    if (g_signal) {
        /* Second signal: the user insists. The checkpoint on disk is whole (written by
         * rename), so leaving now is safe. */
        _exit(128 + sig);
    }
    g_signal = sig;
    static const char msg[] =
        "\nvidtrain: stopping after this step and writing a checkpoint (again to quit now)\n";
    ssize_t w = g_msg ? write(STDERR_FILENO, g_msg, g_msg_len)
                      : write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
}

void vt_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A closed terminal (SIGHUP) is a stop like SIGTERM: its default action killed the run
     * with the steps since the last checkpoint. Not under nohup, which ignores it: that
     * choice is the user's and stays. */
    struct sigaction old;
    if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(SIGHUP, &sa, NULL);
    g_signal = 0;
    g_msg = NULL;
}

void vt_signals_install_msg(const char *line) {
    vt_signals_install();
    g_msg_len = strlen(line);
    g_msg = line;
}

int vt_signal_pending(void) { return g_signal; }

void vt_signals_reset(void) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    struct sigaction old;
    if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        signal(SIGHUP, SIG_DFL);
    g_signal = 0;
}
