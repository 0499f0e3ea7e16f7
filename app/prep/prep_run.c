/*
 * prep_run.c: the worker threads of `vidtrain prep` — each takes the next job, writes
 * its output under a hidden temporary name, renames it when whole, checksums it, and
 * appends its manifest row (after the rename: a kill between them redoes the file) —
 * and the progress line (files, seconds of video per second, ETA by bytes).
 *
 * It must never leave a partial file under a final name and never stop for one bad
 * video: that is a manifest row with FFmpeg's reason. A write into DST that fails is no
 * bad video: the source is not recorded, the partial output is removed, and the run
 * stops (the next file would meet the same full disk); nor is a source the system refused
 * to open (too many open files: vt_video_system_failed).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/prep/prep_cmd.h"
#include "base/common.h"
#include <sys/stat.h>
#include <unistd.h>

#include "app/signals.h"
#include "base/sha256.h"
#include "pipeline/data/video/video.h"

/* Paths are checked once, at the walk, to leave room under 4 KiB for DST and the
 * temporary names; GCC cannot see that and warns on every later snprintf. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

static void fmt_eta(char *buf, size_t n, double s) {
    if (s < 0 || s > 1e7)
        snprintf(buf, n, "?");
    else if (s >= 3600)
        snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else
        snprintf(buf, n, "%ds", (int)s);
}

/* The progress figures: files done/total, source seconds per wall second, ETA by bytes
 * (sources' sizes are known before they are read; their durations are not). */
static void progress_text(run *r, char *buf, size_t n) {
    double dt = vt_now() - r->t0, eta = -1;
    if (r->bytes_done > 0 && dt > 0)
        eta = (double)(r->bytes_total - r->bytes_done) * dt / (double)r->bytes_done;
    char e[32];
    fmt_eta(e, sizeof e, eta);
    snprintf(buf, n, "prep %d/%d files (%d bad), %.1f s of video per s, ETA %s", r->done,
             r->njobs, r->bad, dt > 0 ? r->src_seconds / dt : 0.0, e);
}

/* A source that decoded with errors is copied as it decoded (the decoder's concealment,
 * a gap where frames never came): its copy reads clean, so this is the last place the
 * damage can be said. Into buf: empty, or the sentence. */
static void damage_text(const vt_prep_result *res, char *buf, size_t n) {
    buf[0] = 0;
    if (res->decode_errors || res->frames_missing || res->frames_disordered) {
        char dis[96] = "";
        if (res->frames_disordered)
            snprintf(dis, sizeof dis, ", %lld decoded out of order and left out",
                     (long long)res->frames_disordered);
        snprintf(buf, n, "damaged source (%lld decode error(s), %lld of %lld frames never "
                 "decoded%s): copied as it decoded; check it with ffmpeg -v error -i SRC -f "
                 "null -", (long long)res->decode_errors, (long long)res->frames_missing,
                 (long long)res->src_frames, dis);
    }
}

/* Called under the lock when a file finishes. */
static void report(run *r, const entry *e, const vt_prep_result *res, int64_t bytes,
                   const char *why, double secs) {
    char line[512], dmg[256] = "";
    progress_text(r, line, sizeof line);
    if (!why)
        damage_text(res, dmg, sizeof dmg);
    r->damaged += dmg[0] != 0;
    if (r->tty) {
        if (why)
            fprintf(stderr, "\r\033[Kvidtrain prep: bad video %s/%s: %s\n", r->src, e->rel, why);
        if (dmg[0])
            fprintf(stderr, "\r\033[Kvidtrain prep: %s/%s: %s\n", r->src, e->rel, dmg);
        double now = vt_now();
        if (now - r->last_draw >= 0.1 || r->done == r->njobs) {
            fprintf(stderr, "\r\033[K%s", line);
            r->last_draw = now;
        }
    } else if (why) {
        fprintf(stderr, "%s | bad video %s/%s: %s\n", line, r->src, e->rel, why);
    } else {
        char b[32];
        fprintf(stderr, "%s | %s: %.1f s, %lld frames, %dx%d%s, %s, %.1f s/s%s%s\n", line,
                e->out, res->src_duration, (long long)res->frames_written, res->out_width,
                res->out_height, res->size_kept == 1   ? " (source size, not upscaled)"
                : res->size_kept == 2 ? " (source size to even sides, not upscaled)"
                                      : "",
                vt_fmt_bytes(b, sizeof b, bytes), secs > 0 ? res->src_duration / secs : 0.0,
                dmg[0] ? "; " : "", dmg);
    }
    fflush(stderr);
}

/* DST/dir/.name.prep-part: hidden (the scan and our walk skip it), same folder as the
 * final name (the rename cannot cross file systems); a name too long for that, shortened
 * (vt_tmp_stem). */
static void tmp_name(char *buf, size_t n, const char *dst, const char *rel) {
    const char *slash = strrchr(rel, '/');
    char stem[256];
    vt_tmp_stem(stem, sizeof stem, slash ? slash + 1 : rel, 1);
    if (slash)
        snprintf(buf, n, "%s/%.*s/.%s.prep-part", dst, (int)(slash - rel), rel, stem);
    else
        snprintf(buf, n, "%s/.%s.prep-part", dst, stem);
}

/* DST failed on entry e: the first failure is kept for the command's message, every
 * worker stops taking jobs. Called without the lock. */
static void dst_failed(run *r, const entry *e, const char *why) {
    pthread_mutex_lock(&r->lock);
    if (!r->dst_failed) {
        r->dst_failed = 1;
        snprintf(r->dst_err, sizeof r->dst_err, "%s (writing %s)", why, e->out);
    }
    atomic_store(&r->stop, 1);
    pthread_mutex_unlock(&r->lock);
}

void *prep_worker(void *arg) {
    run *r = arg;
    for (;;) {
        if (vt_signal_pending() || atomic_load(&r->stop))
            break;
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->njobs)
            break;
        entry *e = &r->jobs[i];
        char src[4096], out[4096], tmp[4096], err[1024] = "", hex[65] = "";
        snprintf(src, sizeof src, "%s/%s", r->src, e->rel);
        snprintf(out, sizeof out, "%s/%s", r->dst, e->out);
        tmp_name(tmp, sizeof tmp, r->dst, e->out);
        const char *dot = strrchr(e->out, '.');
        vt_prep_result res;
        memset(&res, 0, sizeof res);
        double t0 = vt_now();
        int dst_bad = 0; /* the failure is DST's, not the source's */
        int rc = prep_mkdirs_for(r->dst, e->out, err, sizeof err);
        /* The output rule for the final name (a link there into SRC, a FIFO, a folder),
         * and a temporary name that is always new: FFmpeg's avio_open follows a link
         * planted at it and truncates what it points at. */
        if (rc == 0)
            rc = vt_output_check(out, err, sizeof err);
        if (rc == 0 && unlink(tmp) != 0 && errno != ENOENT) {
            vt_set_err(err, sizeof err, "cannot remove %s: %s", tmp, strerror(errno));
            rc = -1;
        }
        dst_bad = rc != 0;
        if (rc == 0) {
            rc = e->end > 0 ? vt_prep_segment(&res, src, tmp, dot + 1, &r->o, e->start, e->end,
                                              err, sizeof err)
                            : vt_prep_file(&res, src, tmp, dot + 1, &r->o, err, sizeof err);
            dst_bad = rc != 0 && res.dst_failed;
        }
        struct stat st;
        /* synced before the rename and the manifest's "ok": a crash of the machine must
         * not leave an empty file under the final name that a rerun takes as done */
        if (rc == 0 && vt_file_sync(tmp) != 0) {
            vt_set_err(err, sizeof err, "cannot sync %s: %s", tmp, strerror(errno));
            rc = -1;
            dst_bad = 1;
        }
        if (rc == 0 && rename(tmp, out) != 0) {
            vt_set_err(err, sizeof err, "cannot rename %s to %s: %s", tmp, out, strerror(errno));
            rc = -1;
            dst_bad = 1;
        }
        if (rc != 0)
            unlink(tmp);
        if (rc == 0 && (stat(out, &st) != 0 || vt_sha256_file(out, hex) != 0)) {
            vt_set_err(err, sizeof err, "cannot read back %s: %s", out, strerror(errno));
            rc = -1;
            dst_bad = 1;
        }
        if (rc == 0 && res.sig.n && r->sig_cache[0]) {
            /* the leak check's signature of the copy, from this decode; and of the source,
             * whose frames they are, unless rotated (the copy is upright, a signature of
             * the source is not) or cut (a segment is not the whole file) */
            vt_sig_store(out, r->sig_cache, &res.sig);
            if (e->end <= 0 && res.rotation == 0)
                vt_sig_store(src, r->sig_cache, &res.sig);
        }
        vt_sig_free(&res.sig);
        if (dst_bad) {
            dst_failed(r, e, err);
            break;
        }
        if (rc != 0 && vt_video_failed_short(src)) {
            /* the source is not bad: the system refused to open a file, or memory
             * (cmd_prep.c says so); no row, every worker stops */
            atomic_store(&r->stop, 1);
            break;
        }
        double secs = vt_now() - t0;
        /* the damage column: what the line says of a damaged source, for a script that
         * reads only the manifest (the copy itself reads clean) */
        const int dmg = rc == 0 && (res.decode_errors || res.frames_missing ||
                                    res.frames_disordered);
        row w = {.f = {vt_strdup(e->out), vt_strdup(src), prep_fmt("%.3f", res.src_duration),
                  prep_fmt("%lld", (long long)res.frames_written),
                  prep_fmt("%lld", rc == 0 ? (long long)st.st_size : 0LL), vt_strdup(hex),
                  rc == 0 ? vt_strdup("ok") : prep_fmt("bad: %s", err),
                  dmg ? prep_fmt("%lld decode errors; %lld of %lld frames never decoded; %lld "
                                 "out of order (left out)", (long long)res.decode_errors,
                                 (long long)res.frames_missing, (long long)res.src_frames,
                                 (long long)res.frames_disordered)
                      : vt_strdup("")}};
        pthread_mutex_lock(&r->lock);
        /* The row goes out after the rename: a kill between them redoes the file, and so
         * does a row the full disk refused (the run stops there). */
        if (prep_manifest_append(r->manifest, &w) != 0) {
            int en = errno;
            if (!r->dst_failed) {
                r->dst_failed = 1;
                snprintf(r->dst_err, sizeof r->dst_err, "cannot append to %s/" MANIFEST ": %s",
                         r->dst, strerror(en));
            }
            atomic_store(&r->stop, 1);
            prep_row_free(&w);
            pthread_mutex_unlock(&r->lock);
            break;
        }
        prep_rows_push(&r->rows, w);
        r->done++;
        r->ok += rc == 0;
        r->bad += rc != 0;
        r->bytes_done += e->bytes;
        r->src_seconds += res.src_duration;
        report(r, e, &res, rc == 0 ? st.st_size : 0, rc == 0 ? NULL : err, secs);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}
