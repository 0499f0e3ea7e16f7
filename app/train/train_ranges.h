/*
 * train_ranges.h: the one table of train's numeric options and their ranges. The command
 * line parses through it, and --resume (config.json) and the commands that run a trained
 * model (eval, predict, embed, export: the checkpoint's copy, vt_run_model_open) check a
 * saved configuration against the same table, so it can never hold what the command line
 * refuses (issue 41:
 * workers=100000 used to abort in pthread_create 45 s in, lr=-1e308 trained, crop=1e9
 * printed a negative byte count). It must never accept a value the command line refuses.
 */
#ifndef VT_TRAIN_RANGES_H
#define VT_TRAIN_RANGES_H

#include <stddef.h>

#include "app/train/train_opts.h"

/* Parses v for the numeric option `opt` ("--lr") into its field of o, within the
 * option's range. 0, or -1 (field untouched). `opt` must be in the table (else abort). */
int vt_train_range_parse(vt_train_opts *o, const char *opt, const char *v);
/* What opt takes, for its refusal: "an integer from 1 to 64", "a number from 0.01 to 1". */
const char *vt_train_range_text(const char *opt, char *buf, size_t n);

/* Checks every numeric field of o against the table (the option's range, or the value
 * the option spells as a word, as --freeze none), and the named choices (model, optim,
 * sched, precision, balance, list format, tower split, frame cache) against their
 * parsers. For the options a resumed run takes from `src` (its config.json): 0, or -1
 * with err naming src, the key, its value, the option's range and a hint. */
int vt_train_opts_check(const vt_train_opts *o, const char *src, char *err, size_t errlen);

#endif
