/*
 * train_args.h: `vidtrain train`'s command line into its options (train_args.c).
 */
#ifndef VT_TRAIN_ARGS_H
#define VT_TRAIN_ARGS_H

#include <stddef.h>

#include "app/opts.h"
#include "app/train/train_opts.h"

/* Parse argv into o (defaults set by the caller): --resume RUN first loads RUN's
 * configuration into o and names RUN in resume (else ""), then the options given override
 * it, then the checks across options. quiet: -q given; cli: the options the command
 * line gave (for checks that need the data, after the parse). 0, 1 (nothing to resume),
 * or 2 (a usage error); every error is printed. */
int vt_train_parse_args(vt_train_opts *o, vt_opts_given *cli, int argc, char **argv,
                        int *quiet, char *resume, size_t resume_n);

/* --resume (train_resume_args.c): every saved value in o that the checks for options
 * given would refuse, or that acts on nothing beside what the command line gave (g) —
 * and that g does not name — is set to what leaving the option out gives, in o and in
 * *saved (a value that acts on nothing changes no number of the run, so the resume's
 * warning of changed values does not name it), with one "note:" line each on stderr. */
void vt_train_resume_unused(vt_train_opts *o, vt_train_opts *saved, const vt_opts_given *g,
                            const char *resume);

#endif
