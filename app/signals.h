/*
 * signals.h: Ctrl-C, SIGTERM and a closed terminal during training. SIGINT, SIGTERM and
 * SIGHUP (unless ignored, as nohup does) set a flag the training loop polls between steps
 * (it finishes the current step, writes a checkpoint and exits 128+signal: 130 for Ctrl-C,
 * 143 for SIGTERM, 129 for SIGHUP). A second signal exits at once
 * with the same code (the checkpoint on disk is still whole: checkpoints are written to
 * a temporary file and renamed).
 *
 * It must never do more in a handler than set the flag, write one fixed line and, on
 * the second signal, _exit: anything else is not async-signal-safe.
 */
#ifndef VT_SIGNALS_H
#define VT_SIGNALS_H

/* Installs the handlers and clears the flag. */
void vt_signals_install(void);
/* The same, for a command that stops otherwise (predict --timeline): `line` (static, with
 * its newlines) is what the first signal prints. */
void vt_signals_install_msg(const char *line);
/* 0, or the first signal received. */
int vt_signal_pending(void);
/* Restores the default handlers and clears the flag (after training, and for tests). */
void vt_signals_reset(void);

#endif
