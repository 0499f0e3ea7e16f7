/*
 * synth_record.h: the list of the videos a synth writes into DIR (DIR/.vidtrain-synth),
 * private to pipeline/data/synth/synth.c. A synth into a folder an earlier synth wrote
 * (--force) removes that one's videos first: overwriting only the names it writes itself
 * left the others, so `synth --classes 2 --force` over a 3-class set gave 3 classes and
 * the old counts. It must never remove a file that a synth did not record: the names are
 * taken from the record only, relative, without "..".
 */
#ifndef VT_SYNTH_RECORD_H
#define VT_SYNTH_RECORD_H

#include <stddef.h>

#define VT_SYNTH_RECORD ".vidtrain-synth"

/* Removes the videos dir's record names (and the class and split folders that leaves
 * empty), then records `list` (the paths, relative to dir, one a line, that this synth
 * writes: before it writes any, so that a killed synth's videos are recorded too). 0, or
 * -1 with err naming the record. */
int vt_synth_record_replace(const char *dir, const char *list, size_t len, char *err,
                            size_t errlen);
/* The videos in dir's split/class folders (video names, not hidden) beyond the `wrote`
 * this synth wrote: a dataset that was there before, not by a synth. */
int vt_synth_count_foreign(const char *dir, int wrote);

#endif
