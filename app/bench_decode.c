/*
 * bench_decode.c: `vidtrain bench decode` — decode throughput of pipeline/data/video/video_*.c
 * on a folder of videos: (a) sequential decode + scale of every frame (frames/s, the figure
 * bench/bench-decode.sh sets against the ffmpeg command) and (b) random clip sampling
 * the way the training loader reads (clips/s, set against PyAV). --probe instead reports,
 * per file, whether it opens and decodes and why not (scripts/robustness.sh); --list prints
 * each file's output size and rotation so that scripts can give a peer the same work.
 * Times are wall clock and process CPU (all threads), and split into open (probe + index)
 * and decode, because the peers account differently (ffmpeg -benchmark leaves opening
 * out). Clip mode can run W decode workers over different videos, as the loader does.
 *
 * It must never assert a speed: it prints figures; comparisons live in the scripts.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/opts.h"
#include "base/common.h"
#include "base/thread.h"
#include "pipeline/data/video/video.h"

int vt_bench_decode(int argc, char **argv);

typedef struct file_list {
    char **path;
    int n, cap;
} file_list;

static void list_add(file_list *l, const char *p) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->path = vt_realloc(l->path, (size_t)l->cap * sizeof(char *));
    }
    l->path[l->n++] = vt_strdup(p);
}

static int skip_name(const char *name) {
    static const char *skip[] = {".txt", ".tsv", ".csv", ".json", ".md", ".log", ".html"};
    if (name[0] == '.')
        return 1;
    size_t n = strlen(name);
    for (size_t i = 0; i < VT_ARRAY_LEN(skip); i++) {
        size_t k = strlen(skip[i]);
        if (n >= k && !strcmp(name + n - k, skip[i]))
            return 1;
    }
    return 0;
}

/* Every regular file under path (or path itself), recursively; a frame folder is one
 * video, as in a dataset (its images one by one had FFmpeg's 25 fps each, and
 * --frame-rate nothing to time). */
static void list_files(file_list *l, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return;
    if (!S_ISDIR(sb.st_mode) || vt_video_is_frame_dir(path)) {
        list_add(l, path);
        return;
    }
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (skip_name(e->d_name))
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        list_files(l, sub);
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain bench decode DIR|FILE... [options]\n"
            "  Decode throughput of vidtrain's FFmpeg pipeline on every video under DIR.\n"
            "  --threads N          decoder threads per video (default 1; 0 = FFmpeg's choice)\n"
            "  --short-side S       scale frames so the short side is S, RGB24 (default 128; 0 = native)\n"
            "  --clip T             frames per clip (default 16)\n"
            "  --stride S           frame step inside a clip (default 2)\n"
            "  --clips-per-video K  random clips read per video in clip mode (default 4)\n"
            "  --workers W          clip mode: W threads reading different videos (default 1)\n"
            "  --reopen             clip mode: open the video again for each of its clips, as the\n"
            "                       loader's workers do on a dataset larger than they keep open\n"
            "  --open-cache MIB     what opening a file learned, kept for its next open (default\n"
            "                       64; 0 = none: every open demuxes and decodes a frame again)\n"
            "  --decoder-pool P     off | gpu | all: a closed video's decoder kept for the next\n"
            "                       open of a stream like it (H.264/HEVC in MP4/Matroska; default\n"
            "                       gpu: NVDEC decoders only; docs/decode.md)\n"
            "  --decode D           cpu | nvdec | auto: where frames decode (default auto,\n"
            "                       docs/decode.md)\n"
            "  --starts-out FILE    clip mode: write 'path<TAB>W<TAB>H<TAB>start...' per video that\n"
            "                       opens, W x H before rotation (the peer reads it)\n"
            "  --mode M             sequential | clips | both (default both)\n"
            "  --seed S             clip positions (default 1)\n"
            "  --probe              per file: opens? frames, size, rotation, codec, one clip and a\n"
            "                       full decode, or the reason it is refused (tab-separated)\n"
            "  --list               per file that opens: 'path<TAB>W<TAB>H<TAB>rotation<TAB>frames',\n"
            "                       W x H the output size before rotation (what swscale makes)\n"
            "Sequential: open + index + decode + scale of every frame, one video after another.\n"
            "Clips: open + index, then K clips at random positions (seek, decode, pick, scale);\n"
            "clip positions depend on (seed, file order) only, not on the workers.\n"
            "Prints 'RESULT mode=... ' lines for bench/bench-decode.sh. Each file that cannot\n"
            "be read is named with its reason; exit 1 when none could (or --starts-out failed).\n");
}

/* Process CPU seconds, every thread (decoder threads included). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void probe(file_list *files, int threads, int short_side, int clip, int stride) {
    char err[512];
    for (int i = 0; i < files->n; i++) {
        const char *p = files->path[i];
        vt_video *v = NULL;
        double t0 = vt_now();
        if (vt_video_open(&v, p, threads, err, sizeof err) < 0) {
            printf("error\t%s\t%s\n", p, err);
            fflush(stdout);
            continue;
        }
        const vt_video_info *in = vt_video_get_info(v);
        int ow, oh;
        vt_video_scaled_size(v, short_side, &ow, &oh);
        uint8_t *buf = vt_malloc((size_t)clip * ow * oh * 3);
        int64_t span = (int64_t)(clip - 1) * stride + 1;
        int64_t start = in->nframes > span ? (in->nframes - span) / 2 : 0;
        int rc = vt_video_read_clip(v, buf, start, clip, stride, short_side, VT_PAD_LOOP, err,
                                    sizeof err);
        int rc0 = rc < 0 ? rc
                         : vt_video_read_clip(v, buf, 0, clip, stride, short_side, VT_PAD_LOOP,
                                              err, sizeof err);
        int64_t decoded = 0;
        int rc2 = rc0 < 0 ? rc0
                          : vt_video_decode_all(v, short_side, NULL, NULL, &decoded, err,
                                                sizeof err);
        const vt_video_stats *s = vt_video_get_stats(v);
        printf("%s\t%s\tframes=%lld\tdecoded=%lld\t%dx%d\trot=%d\tout=%dx%d\t%s/%s/%s\t"
               "fps=%.3f\tdur=%.3f\tvfr=%d\tcounted=%d\tdecode_errors=%lld\tmissing=%lld\t%.3fs\t%s\n",
               rc2 < 0 ? "error" : "ok", p, (long long)in->nframes, (long long)decoded,
               in->width, in->height, in->rotation, ow, oh, in->container, in->codec, in->pix_fmt,
               in->fps, in->duration, in->vfr, in->counted, (long long)s->decode_errors,
               (long long)s->missing_frames, vt_now() - t0, rc2 < 0 ? err : "-");
        fflush(stdout);
        free(buf);
        vt_video_close(&v);
    }
}

static void list_sizes(file_list *files, int threads, int short_side) {
    char err[512];
    for (int i = 0; i < files->n; i++) {
        vt_video *v = NULL;
        if (vt_video_open(&v, files->path[i], threads, err, sizeof err) < 0)
            continue;
        const vt_video_info *in = vt_video_get_info(v);
        int ow, oh;
        vt_video_scaled_size(v, short_side, &ow, &oh);
        int swap = in->rotation == 90 || in->rotation == 270;
        printf("%s\t%d\t%d\t%d\t%lld\n", files->path[i], swap ? oh : ow, swap ? ow : oh,
               in->rotation, (long long)in->nframes);
        vt_video_close(&v);
    }
}

/* Clip mode: what one video produced. starts is (per_video) clip starts. */
typedef struct clip_job {
    int ok;              /* opened */
    char why[1024];      /* why not */
    int64_t clips;       /* clips read without error */
    int64_t *starts;     /* (per_video) */
    int sw, sh;          /* output size before rotation (what swscale makes) */
    double open_s;       /* wall seconds in vt_video_open */
    int64_t decoded;     /* frames out of the decoder (wanted or not), seeks done */
    int64_t seeks;
} clip_job;

typedef struct clip_run {
    const file_list *files;
    clip_job *jobs;      /* (files->n) */
    int threads, short_side, clip, stride, per_video, reopen;
    uint64_t seed;
    atomic_int next;     /* next file index to take */
} clip_run;

/* One worker: takes videos one at a time, reads its K clips, closes it. Clip positions
 * come from (seed, file index) alone, so every worker count reads the same clips. */
static void *clip_worker(void *arg) {
    clip_run *r = arg;
    char err[512];
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (;;) {
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->files->n)
            break;
        clip_job *job = &r->jobs[i];
        vt_video *v = NULL;
        double t0 = vt_now();
        int rc = vt_video_open(&v, r->files->path[i], r->threads, err, sizeof err);
        job->open_s = vt_now() - t0;
        if (rc < 0) {
            snprintf(job->why, sizeof job->why, "%s: %s", r->files->path[i], err);
            continue;
        }
        job->ok = 1;
        int ow, oh;
        vt_video_scaled_size(v, r->short_side, &ow, &oh);
        int rot = vt_video_get_info(v)->rotation;
        job->sw = rot == 90 || rot == 270 ? oh : ow;
        job->sh = rot == 90 || rot == 270 ? ow : oh;
        size_t need = (size_t)r->clip * ow * oh * 3;
        if (need > cap) {
            free(buf);
            buf = vt_malloc(need);
            cap = need;
        }
        int64_t n = vt_video_get_info(v)->nframes;
        int64_t span = (int64_t)(r->clip - 1) * r->stride + 1;
        vt_rng rng;
        vt_rng_seed(&rng, vt_hash64(r->seed) ^ (uint64_t)i);
        for (int k = 0; k < r->per_video; k++) {
            int64_t start = n > span ? (int64_t)vt_rng_below(&rng, (uint32_t)(n - span + 1)) : 0;
            job->starts[k] = start;
            if (k > 0 && r->reopen) { /* the counters are summed over the opens */
                job->decoded += vt_video_get_stats(v)->frames_decoded;
                job->seeks += vt_video_get_stats(v)->seeks;
                vt_video_close(&v);
                double t1 = vt_now();
                rc = vt_video_open(&v, r->files->path[i], r->threads, err, sizeof err);
                job->open_s += vt_now() - t1;
                if (rc < 0) /* it opened a moment ago: the rest of its clips are lost */
                    break;
            }
            if (vt_video_read_clip(v, buf, start, r->clip, r->stride, r->short_side, VT_PAD_LOOP,
                                   err, sizeof err) == 0)
                job->clips++;
        }
        if (v) {
            job->decoded += vt_video_get_stats(v)->frames_decoded;
            job->seeks += vt_video_get_stats(v)->seeks;
        }
        vt_video_close(&v);
    }
    free(buf);
    return NULL;
}

/* Returns the videos that opened, or -1 when --starts-out could not be written; each
 * that did not is named with its reason unless named already (named). */
static int bench_clips(const file_list *files, int threads, int short_side, int clip,
                       int stride, int per_video, int workers, int reopen, uint64_t seed,
                       const char *starts_out, int named) {
    clip_run r = {.files = files, .threads = threads, .short_side = short_side, .clip = clip,
                  .stride = stride, .per_video = per_video, .reopen = reopen, .seed = seed};
    atomic_init(&r.next, 0);
    r.jobs = vt_calloc((size_t)files->n, sizeof(clip_job));
    for (int i = 0; i < files->n; i++)
        r.jobs[i].starts = vt_calloc((size_t)per_video, sizeof(int64_t));
    double t0 = vt_now(), c0 = cpu_now();
    if (workers <= 1) {
        clip_worker(&r);
    } else {
        pthread_t *th = vt_malloc((size_t)workers * sizeof(pthread_t));
        for (int w = 0; w < workers; w++)
            vt_thread_start(&th[w], clip_worker, &r, "the decode workers");
        for (int w = 0; w < workers; w++)
            pthread_join(th[w], NULL);
        free(th);
    }
    double dt = vt_now() - t0, cpu = cpu_now() - c0;
    int64_t nclips = 0, decoded = 0, seeks = 0;
    int ok = 0;
    double open_s = 0;
    for (int i = 0; i < files->n; i++) {
        ok += r.jobs[i].ok;
        if (!r.jobs[i].ok && !named)
            fprintf(stderr, "vidtrain bench decode: %s\n", r.jobs[i].why);
        decoded += r.jobs[i].decoded;
        seeks += r.jobs[i].seeks;
        nclips += r.jobs[i].clips;
        open_s += r.jobs[i].open_s;
    }
    if (starts_out) {
        /* Built in memory and written atomically: the peer never reads half a list. */
        char *text = NULL, err[1024];
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        VT_CHECK_MEM(f != NULL, "a text built in memory");
        for (int i = 0; i < files->n; i++) {
            if (!r.jobs[i].ok)
                continue;
            fprintf(f, "%s\t%d\t%d", files->path[i], r.jobs[i].sw, r.jobs[i].sh);
            for (int k = 0; k < per_video; k++)
                fprintf(f, "\t%lld", (long long)r.jobs[i].starts[k]);
            fprintf(f, "\n");
        }
        int bad = ferror(f);
        VT_CHECK(fclose(f) == 0 && !bad, "building %s in memory failed", starts_out);
        if (vt_file_write_atomic(starts_out, text, len, err, sizeof err) != 0) {
            fprintf(stderr, "vidtrain bench decode: %s\n", err);
            ok = -1;
        }
        free(text);
    }
    printf("clips: %d videos (%d unreadable), %lld clips of %d frames (stride %d), %d worker%s "
           "x %d decoder thread%s, in %.3f s (cpu %.3f s, opening %.3f s) = %.1f clips/s, "
           "%.1f frames/s; %lld frames out of the decoder, %lld seeks\n",
           ok, files->n - ok, (long long)nclips, clip, stride, workers, workers == 1 ? "" : "s",
           threads, threads == 1 ? "" : "s", dt, cpu, open_s, dt > 0 ? nclips / dt : 0.0,
           dt > 0 ? (double)nclips * clip / dt : 0.0, (long long)decoded, (long long)seeks);
    printf("RESULT mode=clips videos=%d clips=%lld frames=%lld seconds=%.4f cpu_seconds=%.4f "
           "open_seconds=%.4f workers=%d\n",
           ok, (long long)nclips, (long long)nclips * clip, dt, cpu, open_s, workers);
    vt_video_open_cache_stats oc;
    vt_video_get_open_cache_stats(&oc);
    printf("open cache: %lld of %lld opens found the file kept, %lld of them without a "
           "probe\n", (long long)oc.hits, (long long)(oc.hits + oc.misses),
           (long long)oc.probes_skipped);
    vt_decoder_pool_stats dp;
    vt_video_get_decoder_pool_stats(&dp);
    printf("decoder pool (%s): %lld opens took a kept decoder, %lld made one, %lld evicted; "
           "NVDEC decoders: %lld alive at most, %lld opens on the CPU for the session cap\n",
           vt_decoder_pool_name(vt_video_get_decoder_pool()), (long long)dp.reused,
           (long long)dp.made, (long long)dp.evicted, (long long)dp.gpu_peak,
           (long long)dp.gpu_capped);
    for (int i = 0; i < files->n; i++)
        free(r.jobs[i].starts);
    free(r.jobs);
    return ok;
}

/* Returns the videos decoded whole; each that was not is named with its reason. */
static int bench_sequential(const file_list *files, int threads, int short_side) {
    char err[512];
    int64_t frames = 0, errors = 0;
    int bad = 0, ok = 0, damaged = 0;
    double open_s = 0, dec_s = 0, open_cpu = 0, dec_cpu = 0;
    double t0 = vt_now(), c0 = cpu_now();
    for (int i = 0; i < files->n; i++) {
        vt_video *v = NULL;
        double a = vt_now(), ac = cpu_now();
        int rc = vt_video_open(&v, files->path[i], threads, err, sizeof err);
        double b = vt_now(), bc = cpu_now();
        open_s += b - a;
        open_cpu += bc - ac;
        if (rc < 0) {
            fprintf(stderr, "vidtrain bench decode: %s: %s\n", files->path[i], err);
            bad++;
            continue;
        }
        int64_t got = 0, e0 = vt_video_get_stats(v)->decode_errors;
        if (vt_video_decode_all(v, short_side, NULL, NULL, &got, err, sizeof err) < 0) {
            fprintf(stderr, "vidtrain bench decode: %s: %s\n", files->path[i], err);
            bad++;
        } else
            ok++;
        dec_s += vt_now() - b;
        dec_cpu += cpu_now() - bc;
        frames += got;
        /* a damaged stream decodes at another speed (rejected packets, concealment): said */
        int64_t e = vt_video_get_stats(v)->decode_errors - e0;
        int64_t lost = vt_video_get_info(v)->nframes - got;
        if (e > 0 || lost > 0) {
            fprintf(stderr, "vidtrain bench decode: %s: a damaged stream: %lld decode error(s), "
                    "%lld indexed frame(s) never decoded\n", files->path[i], (long long)e,
                    (long long)(lost > 0 ? lost : 0));
            damaged++;
            errors += e;
        }
        vt_video_close(&v);
    }
    double dt = vt_now() - t0, cpu = cpu_now() - c0;
    printf("sequential: %d videos (%d unreadable, %d damaged), %lld frames in %.3f s = %.1f "
           "frames/s (opening %.3f s, decoding %.3f s; cpu %.3f s of which decoding %.3f s)\n",
           ok, bad, damaged, (long long)frames, dt, dt > 0 ? frames / dt : 0.0, open_s, dec_s,
           cpu, dec_cpu);
    printf("RESULT mode=sequential videos=%d frames=%lld seconds=%.4f open_seconds=%.4f "
           "decode_seconds=%.4f cpu_seconds=%.4f decode_cpu_seconds=%.4f damaged=%d "
           "decode_errors=%lld\n",
           ok, (long long)frames, dt, open_s, dec_s, cpu, dec_cpu, damaged, (long long)errors);
    return ok;
}

/* An option the chosen work never reads (--starts-out beside --mode sequential wrote
 * nothing, --list beside --probe listed nothing): 2 after saying which and why, else 0.
 * seq and clips: the modes --mode chose. */
static int ignored_option(const vt_opts_given *g, int seq, int clips) {
    static const char *const probe_not[] = {"--list", "--mode", "--clips-per-video",
                                            "--workers", "--seed", "--starts-out", "--reopen",
                                            NULL};
    static const char *const list_not[] = {"--mode", "--clip", "--stride", "--clips-per-video",
                                           "--workers", "--seed", "--starts-out", "--reopen",
                                           NULL};
    static const char *const seq_not[] = {"--clip", "--stride", "--clips-per-video",
                                          "--workers", "--seed", "--starts-out", "--reopen",
                                          NULL};
    const char *o;
    if (vt_opts_given_has(g, "--probe") && (o = vt_opts_given_any(g, probe_not))) {
        fprintf(stderr, "vidtrain bench decode: %s: not with --probe (it opens each file, reads "
                "one clip at --clip/--stride and decodes it whole, one file after another); "
                "leave %s out, or run without --probe\n", o, o);
        return 2;
    }
    if (vt_opts_given_has(g, "--list") && (o = vt_opts_given_any(g, list_not))) {
        fprintf(stderr, "vidtrain bench decode: %s: not with --list (it only opens each file "
                "for its size at --short-side); leave %s out, or run without --list\n", o, o);
        return 2;
    }
    if (seq && !clips && (o = vt_opts_given_any(g, seq_not))) {
        fprintf(stderr, "vidtrain bench decode: %s: clip mode's (--mode clips or both); "
                "--mode sequential decodes every frame: leave it out, or give --mode both\n", o);
        return 2;
    }
    return 0;
}

int vt_bench_decode(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int threads = 1, short_side = 128, clip = 16, stride = 2, per_video = 4, do_probe = 0;
    int workers = 1, do_list = 0, reopen = 0, open_cache = (int)(VT_VIDEO_OPEN_CACHE_DEFAULT >> 20);
    uint64_t seed = 1;
    const char *mode = "both", *starts_out = NULL;
    int pool = VT_DECODER_POOL_GPU;
    file_list files = {0};
    vt_opts_given given = {0};
    int rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        vt_opts_given_note(&given, a);
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        /* Number options, each checked against its range (strict: "4x" is no 4).
         * threads 0: FFmpeg's choice; short side 0: the native size. */
        const struct { const char *opt; int *v; long lo, hi; } nums[] = {
            {"--threads", &threads, 0, 256},
            {"--short-side", &short_side, 0, VT_CLIP_MAX_SIDE},
            {"--clip", &clip, 1, VT_CLIP_MAX_T},
            {"--stride", &stride, 1, 1024},
            {"--clips-per-video", &per_video, 1, 100000},
            {"--workers", &workers, 1, 256},
            {"--open-cache", &open_cache, 0, 1 << 20},
        };
        size_t k = 0;
        while (k < VT_ARRAY_LEN(nums) && strcmp(a, nums[k].opt))
            k++;
        int dr = vt_decode_opt_take("bench decode", argc, argv, &i);
        if (dr < 0)
            goto done;
        if (dr > 0)
            continue;
        if (k < VT_ARRAY_LEN(nums)) {
            if (vt_opt_int("bench decode", a, val, nums[k].lo, nums[k].hi, nums[k].v) != 0)
                goto done;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (vt_opt_u64("bench decode", a, val, &seed) != 0)
                goto done;
            i++;
        } else if (!strcmp(a, "--starts-out") || !strcmp(a, "--mode")) {
            if (!val) {
                fprintf(stderr, "vidtrain bench decode: %s needs a value\n", a);
                goto done;
            }
            if (!strcmp(a, "--mode"))
                mode = val;
            else
                starts_out = val;
            i++;
        } else if (!strcmp(a, "--decoder-pool")) {
            if ((pool = vt_decoder_pool_parse(val)) < 0) {
                fprintf(stderr, "vidtrain bench decode: --decoder-pool '%s': expected off, gpu "
                                "or all\n", val ? val : "");
                goto done;
            }
            i++;
        } else if (!strcmp(a, "--probe")) {
            do_probe = 1;
        } else if (!strcmp(a, "--list")) {
            do_list = 1;
        } else if (!strcmp(a, "--reopen")) {
            reopen = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "vidtrain bench decode: unknown option %s (see --help)\n", a);
            goto done;
        } else {
            struct stat sb;
            if (stat(a, &sb) != 0) {
                fprintf(stderr, "vidtrain bench decode: %s: no such file or folder\n", a);
                goto done;
            }
            int before = files.n;
            list_files(&files, a);
            if (files.n > before) /* a folder of no video leaves files.path NULL */
                qsort(files.path + before, (size_t)(files.n - before), sizeof(char *), cmp_str);
        }
    }
    int seq = !strcmp(mode, "sequential") || !strcmp(mode, "both");
    int clips = !strcmp(mode, "clips") || !strcmp(mode, "both");
    if (!seq && !clips) {
        fprintf(stderr, "vidtrain bench decode: bad options (mode %s, clip %d, stride %d, "
                        "clips-per-video %d, workers %d)\n", mode, clip, stride, per_video,
                workers);
        goto done;
    }
    if (ignored_option(&given, seq, clips) != 0)
        goto done;
    if (files.n == 0) {
        fprintf(stderr, "vidtrain bench decode: no files given (see --help)\n");
        goto done;
    }
    if (vt_frame_rate_check("bench decode", "none of the inputs is one",
                            (const char *const *)files.path, files.n) != 0)
        goto done;
    /* The videos are inputs (base/common.h's output rule): --starts-out onto one of
     * them, or onto a folder or special file, is refused before any decoding. */
    for (int i = 0; i < files.n; i++)
        vt_inputs_add(files.path[i]);
    if (starts_out) {
        char oerr[1024];
        if (vt_output_check_early(starts_out, oerr, sizeof oerr) != 0) {
            fprintf(stderr, "vidtrain bench decode: --starts-out: %s\n", oerr);
            rc = 2;
            goto done;
        }
    }
    vt_video_set_open_cache((int64_t)open_cache << 20);
    vt_video_set_decoder_pool((vt_decoder_pool_mode)pool);
    rc = 0;
    if (do_probe) {
        probe(&files, threads, short_side, clip, stride);
        goto done;
    }
    if (do_list) {
        list_sizes(&files, threads, short_side);
        goto done;
    }
    printf("vidtrain bench decode: %d files, threads %d, short side %d, decode %s\n", files.n,
           threads, short_side, vt_decode_mode_name(vt_video_get_decode()));
    /* A figure over no video measures nothing: exit 1 (each file was named). */
    int got = seq ? bench_sequential(&files, threads, short_side) : 1;
    if (clips) {
        int c = bench_clips(&files, threads, short_side, clip, stride, per_video, workers,
                            reopen, seed, starts_out, seq);
        got = c < 0 ? -1 : got > 0 ? c : got;
    }
    if (got <= 0) {
        if (got == 0)
            fprintf(stderr, "vidtrain bench decode: none of the %d files could be read\n",
                    files.n);
        rc = 1;
    }
done:
    for (int i = 0; i < files.n; i++)
        free(files.path[i]);
    free(files.path);
    return rc;
}
