/*
 * fileset.h: files that are read together, replaced together (docs/design.md §3.8, "Files
 * read together"). Each file of vidtrain's goes through the atomic writer (common.h), so
 * each is whole; but a set of them (eval's eval.json, confusion.csv and report.html;
 * embed's FILE and FILE.csv; a checkpoint's last.safetensors, best.safetensors and the
 * val.json of its epoch) cannot be renamed into place in one step. A kill, a power loss
 * or a failed rename between two renames left a new file beside its old partner, each
 * whole, together wrong, and nothing said so.
 *
 * The set's commit record says when that can be: DIR/.LEAD.set, beside the set's lead
 * member DIR/LEAD (LEAD cut and hashed when the name would pass NAME_MAX: vt_tmp_stem),
 * written (synced) after every member is staged whole and before the
 * first rename, removed (the folder synced) after the last. It names each member and the
 * inode its new content has, so whoever finds it can tell a set that is whole (every
 * member the record's: a kill after the last rename) from one that may be mixed, and a
 * writer can finish a set whose staged files are all still there (vt_fileset_finish).
 * The rule for every reader, vidtrain's and a user's: while DIR/.LEAD.set is there, the
 * members are not to be read together.
 *
 * While a set is open, the atomic writer (vt_file_write_atomic, vt_file_write_atomic_fill
 * and every writer built on them: checkpoints, JSON, reports) stages a write to one of its
 * members into the set instead of renaming it, so the code that writes a member needs no
 * change. One set is open at a time in a process; writes from any thread join it.
 *
 * It must never rename a member before the record of the whole set is durable, nor remove
 * the record before every member is in place: a set is old or new, or a record says it
 * may be neither.
 */
#ifndef VT_FILESET_H
#define VT_FILESET_H

#include <stddef.h>

typedef struct vt_fileset vt_fileset;

/* What a commit does with a member that was not written while the set was open. */
typedef enum vt_fileset_keep {
    VT_FILESET_KEEP, /* left as it is: it still belongs with the new set (best.safetensors
                        when the epoch was not better) */
    VT_FILESET_DROP, /* removed: it describes the old set (eval's confusion.csv after an
                        eval of multi-label heads only, its report when that failed) */
} vt_fileset_keep;

/* Opens the set whose lead member is `lead` (its record DIR/.LEAD.set). Aborts (VT_CHECK)
 * when a set is already open: that is a programmer's error. */
vt_fileset *vt_fileset_begin(const char *lead, vt_fileset_keep keep_lead);
/* Another member, in the lead's folder (the same path spelling as its writer uses). */
void vt_fileset_add(vt_fileset *s, const char *path, vt_fileset_keep keep);
/* Makes the staged members current: the record, then each rename, the members to drop
 * removed, then the record removed. Closes and frees the set (*s NULL) whatever the
 * result. 0, or -1 with err naming the file; after a failed rename the record stays and
 * says the set may be mixed. Nothing staged, or no set (*s NULL): nothing changes, 0. */
int vt_fileset_commit(vt_fileset **s, char *err, size_t errlen);
/* Closes the set without committing: its staged files are removed, the old set stays
 * (NULL and a pointer to NULL are fine). */
void vt_fileset_free(vt_fileset **s);

/* For a reader of the set led by `lead` (it changes nothing): 0 when no record is there,
 * or the record's set is whole (its writer stopped after the last rename); -1 when the members
 * may be of two sets, with err naming the record, the members and the writer's pid (the
 * caller adds what to run). */
int vt_fileset_check(const char *lead, char *err, size_t errlen);
/* For a writer of the set's folder that holds what keeps every other writer of the set
 * out (train's RUN/.lock), before it cleans temporary files: finishes a set a killed
 * writer left (renames what it staged, removes what it dropped). 0 when there was
 * nothing to do, 1 when it finished one (said in err), -1 when it cannot (a staged file
 * is gone: err says which). */
int vt_fileset_finish(const char *lead, char *err, size_t errlen);

/* The record's path for `lead` (malloc'd). */
char *vt_fileset_record(const char *lead);

/* Fault injection for the tests (tests/test_fileset.c, docs/testing.md): with
 * VT_FILESET_KILL=N in the environment a commit kills its own process (SIGKILL) after its
 * Nth rename or removal of a member, as a power loss there would stop it. */

#endif
