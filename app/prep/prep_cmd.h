/*
 * prep_cmd.h: what the files of `vidtrain prep` (app/prep/cmd_prep.c and app/prep/prep_*.c) share
 * and nothing else may use: the walk's entries, the manifest's rows, the run the worker
 * threads share, and the map of renamed outputs. One concern a file: cmd_prep.c (options
 * and the order of the work), prep_walk.c (the folder walk), prep_manifest.c (the CSV
 * manifest), prep_run.c (worker threads and progress), prep_files.c (renamed names, the
 * copies of list files), prep_trim.c (--trim: segments as files, their labels file).
 *
 * Like the command: never a partial file under a final name, never a write into SRC,
 * never a stop for one bad video — and never a video blamed for DST's failure: a write
 * into DST that fails (a full disk) stops the run with DST's reason, recording nothing
 * against the source.
 */
#ifndef VT_PREP_CMD_H
#define VT_PREP_CMD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/csv.h"
#include "pipeline/data/prep.h"

#define MANIFEST "prep-manifest.csv"
#define PATHS "prep-paths.csv"
#define OPTIONS "prep-options.txt"
#define SEGMENTS "prep-segments.csv"
#define LOCK ".prep-lock" /* hidden: the walk and the dataset scan skip it */
#define MAX_DEPTH 16

/* A file of SRC, or (--trim) a segment of one. */
typedef struct entry {
    char *rel;       /* relative to SRC */
    char *out;       /* relative to DST (videos: the extension may change) */
    int video;
    int64_t bytes;   /* source size (a segment: its share of it, by time) */
    double start, end; /* --trim: the segment of rel written to out (end 0: the whole file) */
    int trimmed;     /* --trim: rel is written as its segments (other entries), not whole */
} entry;

typedef struct entry_list {
    entry *e;
    int n, cap;
} entry_list;

typedef struct walk_ctx {
    entry_list *list;
    const char *src;
    dev_t dst_dev;        /* DST inside SRC is not walked into */
    ino_t dst_ino;
    dev_t anc_dev[MAX_DEPTH + 1];   /* the folders above: a link back to one is a loop */
    ino_t anc_ino[MAX_DEPTH + 1];
    int nwarn;
} walk_ctx;

/* Every file under SRC (folder rel at depth), sorted per folder, into c->list. */
void prep_walk(walk_ctx *c, const char *rel, int depth);
/* 1 when a frame folder (numbered JPEG/PNG frames) lies below a class folder of dir
 * (depth 0: SRC itself), as prep_walk finds them: --frame-rate's check. */
int prep_has_frame_dir(const char *dir, int depth);
void prep_entry_push(entry_list *l, entry e);

/* ---- the manifest: CSV rows (prep_manifest.c) ---- */

typedef struct row {
#define PREP_FIELDS 8
    char *f[PREP_FIELDS]; /* path, source, duration_s, frames, bytes, sha256, status,
                           * damage (empty for a clean source; a manifest of an earlier
                           * vidtrain has no such column: NULL) */
    int seq;     /* order in the file (reading only) */
} row;

typedef struct row_list {
    row *r;
    int n, cap;
} row_list;

void prep_rows_push(row_list *l, row r);
void prep_row_free(row *r);
void prep_rows_clear(row_list *l); /* every row freed, n = 0 */
void prep_row_put(FILE *f, const row *r);
/* The manifest's rows, the last row per path winning; sorted by path. */
void prep_manifest_read(row_list *out, const char *path);
row *prep_manifest_find(row_list *l, const char *path);
/* The manifest rewritten atomically: header + rows (sorted), leaving out the rows whose
 * path is in skip (nskip entries' out; NULL: none). 0, or -1 with err. */
int prep_manifest_write(const char *path, const row_list *rows, const entry *skip, int nskip,
                        char *err, size_t errlen);
/* One row appended to the manifest open on fd (O_APPEND), in one write; a write that
 * fails or is short is cut off again (ftruncate), so the file never holds a torn row
 * that a later row would be glued to. 0, or -1 with errno set. */
int prep_manifest_append(int fd, const row *r);
/* The copies that rows (an earlier run's manifest, sorted) list and no entry of `list`
 * writes any more (a video removed from SRC or renamed there, --trim's segments
 * changed): each removed from DST and said on stderr, its row dropped from rows. Only
 * what the manifest names is removed, and only a regular file or a link. Their number. */
int prep_manifest_drop_stale(const char *dst, row_list *rows, const entry_list *list);

/* ---- the run: worker threads (prep_run.c) ---- */

typedef struct run {
    const char *src, *dst;
    vt_prep_opts o;
    entry *jobs;          /* the videos to do */
    int njobs;
    atomic_int next;
    atomic_int stop;      /* DST failed: no worker takes another job */
    pthread_mutex_t lock; /* guards everything below */
    int manifest;         /* fd, O_APPEND: appended to as files finish */
    int dst_failed;       /* a write into DST failed (a full disk): the run stops */
    char dst_err[1280];   /* its reason, naming the file */
    row_list rows;        /* this run's rows */
    int done, ok, bad;
    int damaged;          /* written, from a source that decoded with errors or lost frames */
    int64_t bytes_done, bytes_total;
    double src_seconds, t0, last_draw;
    int tty;
    char sig_cache[4096]; /* the leak check's signature cache: prep's decode signs each
                           * copy (and its source) into it; "" when there is none */
} run;

/* Thread body: takes jobs until none is left, a signal came or DST failed. A source
 * that cannot be read is a manifest row "bad: why"; a failure to write DST (create,
 * write, finish, rename, read back the output, append the row) removes the partial
 * output, records nothing against the source, and sets dst_failed and stop. */
void *prep_worker(void *arg);

/* ---- names and files (prep_files.c) ---- */

typedef struct rename_map {
    char **old, **new_; /* parallel, sorted by old */
    int n;
} rename_map;

/* Each entry's output name (relative to DST): a video's with the extension its container
 * takes for codec (vt_prep_out_ext), every one its own, a function of the names alone;
 * the renamed videos into m (nvideo entries' room), sorted by old name. */
void prep_name_outputs(entry_list *list, int nvideo, const char *codec, rename_map *m);
/* Two sources that map to one output (a.webm beside a.mp4; a frame folder a beside
 * a.mp4; --trim's segment x_000000_000001.mp4 of x.mp4 beside a file of that name) would
 * overwrite each other's copy, and prep-paths.csv or prep-segments.csv would name the
 * survivor for both. Every output is made its own: of each set of equal names the entry
 * whose name is its source's keeps it (or a whole file among segments), the others take
 * their source's whole name (a.webm.mp4; a.gif and a.webm alone: both) or, a segment, a
 * number after its times (x_000000_000001.2.mp4), and where that is taken too (a.webm.mp4
 * is a file of SRC as well) a round number (a.webm.2.mp4), until no two are equal.
 * Entries written as their segments (trimmed) take no name. A function of the names
 * alone, so a rerun over the same SRC names the same outputs (resume). */
void prep_unique_outputs(entry_list *list, const char *codec);
/* A segment's output name: rel's folder, its stem with the times, the extension prep
 * writes for it. */
char *prep_segment_name(const char *rel, double start, double end, const char *codec);
/* vasprintf that aborts on no memory. */
char *prep_fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
/* mkdir -p of DST/rel's folder. 0, or -1 with err. */
int prep_mkdirs_for(const char *dst, const char *rel, char *err, size_t errlen);
/* Copies (or rewrites, naming renamed videos) one non-video file into DST atomically.
 * 0; -1 with err when the source cannot be read; -2 with err when DST cannot be written
 * (the caller stops: a full disk). */
int prep_copy_file(const run *r, const entry *e, const rename_map *m, int *rewritten,
                   char *err, size_t errlen);

/* Takes DST's lock (flock on DST/.prep-lock, its holder's pid written in it) for the
 * process's lifetime: two preps into one DST would rename over each other's files. The fd
 * (keep it open), or -1 after a message naming DST and the other prep's pid. */
int prep_lock_dst(const char *dst);

/* ---- --trim (prep_trim.c) ---- */

/* The rows of DST/prep-segments.csv, one per labelled sample, kept until the run ends:
 * only the samples whose output is on disk are written. */
typedef struct trim_csv {
    char *header;   /* "path,head...\n" */
    char **out;     /* each row's output, relative to DST */
    char **line;    /* each row, with its newline */
    int n, cap;
} trim_csv;

struct vt_dataset;
/* The segments of ds as jobs in *list (the files they come from no longer whole-file
 * jobs), and the rows of the labels file naming the outputs (no start or end: each output
 * is its segment) into *csv. Returns the number of segments. */
int prep_trim_entries(entry_list *list, trim_csv *csv, const struct vt_dataset *ds,
                      const char *codec);
/* DST/prep-segments.csv, atomically: the rows of csv whose output is in DST with a
 * manifest row that says ok (rows: the manifest as read at the end), so the file never
 * names a segment that was not written. *left gets the rows left out. 0, or -1 with err. */
int prep_trim_write(const trim_csv *csv, const char *dst, row_list *rows, int *left,
                    char *err, size_t errlen);
void prep_trim_csv_free(trim_csv *csv);

#endif
