/*
 * cmd_scan.c: `vidtrain scan DIR` — what a dataset folder holds before training on it:
 * classes and counts per split, codecs, resolutions, frame rates, durations, and every
 * file FFmpeg cannot read, with its reason.
 *
 * It opens each video once (through vt_dataset_probe: the container and its first frame)
 * and never writes anything; with --full it also decodes every frame of every readable
 * video and names the damaged ones (app/scan_full.h). Bad files are reported, never fatal
 * (exit 0 as long as the folder scans). Output is a human summary, or one JSON object
 * with --json.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/opts.h"
#include "app/scan_full.h"
#include "base/common.h"
#include "pipeline/data/balance.h"
#include "app/leaks.h"
#include "pipeline/data/dataset/dataset.h"
#include "base/json_str.h"
#include "base/textwidth.h"
#include "pipeline/data/video/video.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain scan DIR [--val-split F] [--group REGEX|auto|none] [--lists PATH]\n"
            "                         [--list-format F] [--fold N] [--labels CSV] [--threads N]\n"
            "                         [--no-leaks] [--full] [--json]\n\n"
            "Scan a dataset folder: DIR/<class>/<video>, or DIR/<split>/<class>/<video> with any of\n"
            "the split folders train, val, test (only test/ is fine). Symbolic links to folders and\n"
            "files are followed; dangling links and links back to a folder above them (loops) are\n"
            "listed and skipped. Every video is opened once with FFmpeg and its first frame\n"
            "decoded; unreadable files are listed with the reason. A file damaged past its\n"
            "first frame opens fine: --full finds it. A frame rate, size, codec or pixel\n"
            "format that gives a class away (80%% or more of its training videos have values\n"
            "no other class has) is listed as a shortcut: a network can learn it instead of\n"
            "the content (docs/splits.md). Files that hold another's bytes under a second\n"
            "name (a copy, not a link) are listed as copies, and class names that differ\n"
            "only in case, spaces, '_' or '-' as similar (Unicode's two spellings of a name,\n"
            "a Mac's and a typed one, are one class).\n\n"
            "  --val-split F   put a stable, per-class fraction F of train videos in val\n"
            "                  (by a hash of the path: a video keeps its split as files are added)\n"
            "  --group REGEX   the videos of one recording stay on one side of --val-split: the\n"
            "                  first ( ) of the POSIX ERE names it; auto (default): UCF101\n"
            "                  v_X_g08_c01 and HMDB51 names; none: path by path\n"
            "  --lists PATH    list files, format detected: UCF101 (classInd.txt, trainlist0N.txt,\n"
            "                  testlist0N.txt in PATH), HMDB51 (<class>_test_splitN.txt in PATH),\n"
            "                  Kinetics (PATH a CSV label,youtube_id,time_start,time_end,split, or\n"
            "                  a folder of them; see docs/segments.md)\n"
            "  --list-format F ucf101, hmdb51 or kinetics instead of detecting it\n"
            "  --fold N        which trainlist/testlist, or HMDB51 split (default 1)\n"
            "  --labels CSV    multi-head labels: path,head1,head2... (';' separates tags);\n"
            "                  optional start,end columns (seconds): each row a segment sample\n"
            "  --threads N     probing threads (default: cores)\n"
            "  --frame-rate R  frames per second of frame folders (a folder of numbered\n"
            "                  JPEG/PNG frames is one video; default 30)\n"
            "  --no-leaks      skip the near-copy check: by default every val and test video\n"
            "                  is compared with every training video by a perceptual signature\n"
            "                  (re-encoded, rescaled, cropped, trimmed copies and clips of one\n"
            "                  recording; cached under the vidtrain cache; docs/splits.md)\n"
            "  --full          also decode every frame of every readable video (as long as a\n"
            "                  pass of training over it) and list the damaged ones: decode\n"
            "                  errors (packets rejected, pictures the decoder repaired), frames\n"
            "                  the index lists that never decode, a decode that stops midway\n"
            "  --json          one JSON object on stdout instead of the summary\n");
}

typedef struct progress_ctx {
    int tty;
    double last;
} progress_ctx;

static void on_progress(void *ctx, int done, int total) {
    progress_ctx *p = ctx;
    if (!p->tty)
        return;
    double now = vt_now();
    if (done < total && now - p->last < 0.1)
        return;
    p->last = now;
    fprintf(stderr, "\rprobing %d/%d videos", done, total);
    if (done == total)
        fprintf(stderr, "\r\033[K");
    fflush(stderr);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Counts of distinct strings, in first-seen order. */
typedef struct tally {
    char **key;
    int *count;
    int n;
} tally;

static void tally_add(tally *t, const char *key) {
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->key[i], key)) {
            t->count[i]++;
            return;
        }
    t->key = vt_realloc(t->key, (size_t)(t->n + 1) * sizeof *t->key);
    t->count = vt_realloc(t->count, (size_t)(t->n + 1) * sizeof *t->count);
    t->key[t->n] = vt_strdup(key);
    t->count[t->n++] = 1;
}

static void tally_free(tally *t) {
    for (int i = 0; i < t->n; i++)
        free(t->key[i]);
    free(t->key);
    free(t->count);
    memset(t, 0, sizeof *t);
}

static void tally_print(const char *what, const tally *t) {
    printf("%-12s", what);
    for (int i = 0; i < t->n; i++)
        printf("%s %s (%d)", i ? "," : "", t->key[i], t->count[i]);
    printf("%s\n", t->n ? "" : " -");
}

static cJSON *tally_json(const tally *t) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < t->n; i++)
        cJSON_AddNumberToObject(o, t->key[i], t->count[i]);
    return o;
}

typedef struct stat3 {
    double min, median, max;
    int n;
} stat3;

static stat3 stat_of(double *v, int n) {
    stat3 s = {0, 0, 0, n};
    if (n == 0)
        return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.min = v[0];
    s.max = v[n - 1];
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return s;
}

static cJSON *stat_json(stat3 s) {
    cJSON *o = cJSON_CreateObject();
    if (s.n) {
        cJSON_AddNumberToObject(o, "min", s.min);
        cJSON_AddNumberToObject(o, "median", s.median);
        cJSON_AddNumberToObject(o, "max", s.max);
    }
    return o;
}

/* Split s's largest/smallest class ratio (pipeline/data/balance.h) from scan's counts
 * (nc classes x VT_NSPLITS); *lo, *hi: those classes (-1 when the split is empty). */
static double split_ratio(const int *counts, int nc, int s, int *lo, int *hi) {
    int64_t *c = vt_calloc((size_t)VT_MAX(nc, 1), sizeof *c);
    *lo = *hi = -1;
    for (int k = 0; k < nc; k++) {
        c[k] = counts[k * VT_NSPLITS + s];
        if (c[k] > 0 && (*lo < 0 || c[k] < c[*lo]))
            *lo = k;
        if (c[k] > 0 && (*hi < 0 || c[k] > c[*hi]))
            *hi = k;
    }
    double r = vt_balance_ratio(c, nc);
    free(c);
    return r;
}

/* "  imbalance: train x8.0 (walk 40 / pan_left 5), val x1.0" and a warning for a split
 * above VT_BALANCE_RATIO: training balances such a set by default (docs/balance.md). */
static void print_imbalance(const int *counts, const vt_dataset_head *h0, const int *has_split) {
    char warn[512] = "";
    printf("  imbalance (largest / smallest class):");
    const char *sep = " ";
    for (int s = 0; s < VT_NSPLITS; s++) {
        int lo, hi;
        if (!has_split[s] || s == VT_SPLIT_NONE)
            continue;
        double r = split_ratio(counts, h0->nclasses, s, &lo, &hi);
        if (lo < 0)
            continue;
        if (counts[hi * VT_NSPLITS + s] == counts[lo * VT_NSPLITS + s])
            printf("%s%s x1.0 (%d each)", sep, vt_split_name((vt_split)s),
                   counts[lo * VT_NSPLITS + s]);
        else
            printf("%s%s x%.1f (%s %d / %s %d)", sep, vt_split_name((vt_split)s), r,
                   h0->classes[hi], counts[hi * VT_NSPLITS + s], h0->classes[lo],
                   counts[lo * VT_NSPLITS + s]);
        sep = ", ";
        if (r > VT_BALANCE_RATIO && !warn[0])
            snprintf(warn, sizeof warn, "warning: the %s split's classes are imbalanced (x%.1f, "
                     "above x%.1f): `vidtrain train` evens them out by default (--balance "
                     "auto: logit; docs/balance.md) and picks best.safetensors by mean class "
                     "accuracy when validation is imbalanced too\n", vt_split_name((vt_split)s), r,
                     VT_BALANCE_RATIO);
    }
    printf("\n%s%s", warn[0] ? "  " : "", warn);
}

static const char *layout_name(vt_dataset_layout l) {
    return l == VT_LAYOUT_FOLDERS ? "split folders"
           : l == VT_LAYOUT_LISTS ? "list files"
                                  : "class folders";
}

/* ---- parse: the command line into scan_opts ---- */

typedef struct scan_opts {
    const char *dir, *labels; /* DIR; --labels CSV or NULL */
    vt_dataset_opts ds;       /* --val-split, --group, --lists, --list-format, --fold */
    int threads, json, no_leaks, full;
} scan_opts;

/* The options that would change nothing beside the others: 0, or 2 after saying why. */
static int scan_check(const scan_opts *op, const vt_opts_given *g) {
    static const char *const lists_only[] = {"--list-format", "--fold", NULL};
    const char *o = vt_opts_given_any(g, lists_only);
    if (o && !op->ds.lists_dir) {
        fprintf(stderr, "vidtrain scan: %s says how --lists is read: not without --lists PATH; "
                "leave it out\n", o);
        return 2;
    }
    if (vt_opts_given_has(g, "--fold") && op->ds.lists_format == VT_LISTS_KINETICS) {
        fprintf(stderr, "vidtrain scan: --fold picks UCF101's trainlist/testlist pair or an "
                "HMDB51 split: a Kinetics CSV has one split column; leave it out\n");
        return 2;
    }
    if (vt_opts_given_has(g, "--group") && !(op->ds.val_split > 0)) {
        fprintf(stderr, "vidtrain scan: --group %s keeps a recording's videos on one side of "
                "--val-split: not %s (nothing is split); give both (F above 0), or leave "
                "it out\n", op->ds.group, vt_opts_given_has(g, "--val-split")
                ? "with --val-split 0, which draws nothing" : "without --val-split F");
        return 2;
    }
    return 0;
}

/* Fills *op from argv; 0, or the exit status (2) after saying what is wrong. */
static int scan_parse(scan_opts *op, int argc, char **argv) {
    memset(op, 0, sizeof *op);
    vt_opts_given given = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        vt_opts_given_note(&given, a);
        if (!strcmp(a, "--json")) {
            op->json = 1;
        } else if (!strncmp(a, "--frame-rate", 12)) {
            if (vt_decode_opt_take("scan", argc, argv, &i) != 1)
                return 2;
        } else if (!strcmp(a, "--no-leaks")) {
            op->no_leaks = 1;
        } else if (!strcmp(a, "--full")) {
            op->full = 1;
        } else if (!strcmp(a, "--val-split") && more) {
            double f;
            if (vt_parse_f64(argv[++i], 0, 1, &f) != 0 || f >= 1) {
                fprintf(stderr, "vidtrain scan: --val-split takes a fraction in [0, 1), got '%s'\n",
                        argv[i]);
                return 2;
            }
            op->ds.val_split = f;
        } else if (!strcmp(a, "--group") && more) {
            op->ds.group = argv[++i];
            char gerr[512];
            if (vt_dataset_group_check(op->ds.group, gerr, sizeof gerr) < 0) {
                fprintf(stderr, "vidtrain scan: %s\n", gerr);
                return 2;
            }
        } else if (!strcmp(a, "--lists") && more) {
            op->ds.lists_dir = argv[++i];
        } else if (!strcmp(a, "--list-format") && more) {
            int f = vt_lists_format_parse(argv[++i]);
            if (f < 0) {
                fprintf(stderr, "vidtrain scan: --list-format takes ucf101, hmdb51 or kinetics\n");
                return 2;
            }
            op->ds.lists_format = (vt_lists_format)f;
        } else if (!strcmp(a, "--fold") && more) {
            if (vt_parse_int(argv[++i], 1, 99, &op->ds.list_fold) != 0) {
                fprintf(stderr, "vidtrain scan: --fold takes 1..99\n");
                return 2;
            }
        } else if (!strcmp(a, "--labels") && more) {
            op->labels = op->ds.labels = argv[++i];
        } else if (!strcmp(a, "--threads") && more) {
            if (vt_parse_int(argv[++i], 1, 4096, &op->threads) != 0) {
                fprintf(stderr, "vidtrain scan: --threads takes a count from 1 to 4096\n");
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vidtrain scan: unknown option or missing value: %s\n\n", a);
            usage(stderr);
            return 2;
        } else if (!op->dir) {
            op->dir = a;
        } else {
            fprintf(stderr, "vidtrain scan: one folder only (got '%s' and '%s')\n", op->dir, a);
            return 2;
        }
    }
    if (!op->dir) {
        usage(stderr);
        return 2;
    }
    return scan_check(op, &given);
}

/* ---- plan: open and probe the folder, and tally what it holds ---- */

typedef struct scan_summary {
    const vt_dataset_head *h0; /* counts are of the first head */
    int nc;                    /* its classes */
    int *counts;               /* [(nc + 1) x VT_NSPLITS] readable samples; row nc: no class */
    int *badc;                 /* [nc + 1] unreadable per class */
    int split_total[VT_NSPLITS], has_split[VT_NSPLITS];
    int nok, nbad, nunlabeled, nvfr, nrot, ncounted, nsar, nbadlines;
    tally codecs, sizes, containers;
    stat3 sf, sd, sn; /* fps, duration (s), frames of the readable videos */
    double probe_s;
    int check_leaks; /* the near-copy check ran: lk holds its findings */
    vt_leaks lk;
    int full;        /* --full ran: fd holds what it found */
    vt_scan_full fd;
    vt_shortcut *sc; /* file properties that give a class away (dataset.h) */
    vt_dataset_copy *cp; /* one file's bytes under two names */
    int ncp;
    vt_like_classes *lk_cls; /* classes named alike (case, spaces, '_', '-') */
    int nlike;
    int nsc;
    const char *sc_what; /* the samples they were counted over */
} scan_summary;

static void scan_summary_free(scan_summary *sm) {
    tally_free(&sm->codecs);
    tally_free(&sm->containers);
    tally_free(&sm->sizes);
    free(sm->counts);
    free(sm->badc);
    vt_leaks_free(&sm->lk);
    vt_scan_full_free(&sm->fd);
    free(sm->sc);
    free(sm->cp);
    free(sm->lk_cls);
}

/* Opens op->dir into *ds (and its labels), probes every video, tallies them into *sm and
 * runs the near-copy check unless told not to. 0, or the exit status after saying why
 * the folder cannot be scanned (1), or why --val-split draws nothing from it (2); *ds is
 * NULL then. */
static int scan_plan(const scan_opts *op, vt_dataset **dsp, scan_summary *sm) {
    memset(sm, 0, sizeof *sm);
    char err[1024];
    vt_dataset *ds = *dsp = vt_dataset_open(op->dir, &op->ds, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "vidtrain scan: %s\n", err);
        return 1;
    }
    if (op->ds.val_split > 0 && !(ds->val_split > 0)) { /* vt_dataset_open drew none */
        fprintf(stderr, "vidtrain scan: --val-split %g: %s has val videos (a val/ folder or "
                "its lists' val rows), and they are the val split; leave --val-split out\n",
                op->ds.val_split, op->dir);
        vt_dataset_free(dsp);
        return 2;
    }
    if (vt_frame_rate_check_data("scan", ds, NULL) != 0) {
        vt_dataset_free(dsp);
        return 2;
    }
    if (op->labels && vt_dataset_load_labels(ds, op->labels, &sm->nbadlines, err, sizeof err) < 0) {
        fprintf(stderr, "vidtrain scan: %s\n", err);
        vt_dataset_free(dsp);
        return 1;
    }
    progress_ctx pc = {.tty = isatty(2) && !op->json ? 1 : 0};
    double t0 = vt_now();
    sm->nbad = vt_dataset_probe(ds, op->threads, 0, on_progress, &pc);
    sm->probe_s = vt_now() - t0;
    if (sm->nbad < 0 && vt_video_system_failed(err, sizeof err)) {
        fprintf(stderr, "vidtrain scan: %s\n", err);
        vt_dataset_free(dsp);
        return 1;
    }

    /* Per class x split counts (first head), and the figures of readable videos. */
    const vt_dataset_head *h0 = sm->h0 = &ds->heads[0];
    const int nc = sm->nc = h0->nclasses;
    sm->counts = vt_calloc((size_t)(nc + 1) * VT_NSPLITS, sizeof *sm->counts);
    sm->badc = vt_calloc((size_t)(nc + 1), sizeof *sm->badc);
    double *fps = vt_malloc((size_t)ds->nvideos * sizeof *fps);
    double *dur = vt_malloc((size_t)ds->nvideos * sizeof *dur);
    double *frames = vt_malloc((size_t)ds->nvideos * sizeof *frames);
    char buf[128];
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        int c = v->labeled && h0->loss == VT_LOSS_SOFTMAX_CE ? v->label[0] : nc;
        if (v->bad != VT_BAD_NONE) {
            sm->badc[c]++;
            continue;
        }
        sm->nunlabeled += !v->labeled;
        sm->counts[c * VT_NSPLITS + v->split]++;
        sm->split_total[v->split]++;
        fps[sm->nok] = v->info.fps;
        dur[sm->nok] = v->info.duration;
        frames[sm->nok] = (double)v->info.nframes;
        sm->nok++;
        sm->nvfr += v->info.vfr != 0;
        sm->nrot += v->info.rotation != 0;
        sm->ncounted += v->info.counted != 0;
        sm->nsar += v->info.sar_num != v->info.sar_den;
        tally_add(&sm->codecs, v->info.codec[0] ? v->info.codec : "?");
        tally_add(&sm->containers, v->info.container[0] ? v->info.container : "?");
        snprintf(buf, sizeof buf, "%dx%d", v->info.disp_width, v->info.disp_height);
        tally_add(&sm->sizes, buf);
    }
    sm->sf = stat_of(fps, sm->nok);
    sm->sd = stat_of(dur, sm->nok);
    sm->sn = stat_of(frames, sm->nok);
    free(fps);
    free(dur);
    free(frames);
    for (int s = 0; s < VT_NSPLITS; s++)
        sm->has_split[s] = sm->split_total[s] > 0;
    /* over what training would learn from; a folder without train videos, over them all */
    const int sc_split = sm->split_total[VT_SPLIT_TRAIN] ? VT_SPLIT_TRAIN : -1;
    sm->sc_what = sc_split < 0 ? "videos" : "training videos";
    sm->nsc = vt_dataset_shortcuts(ds, sc_split, &sm->sc);
    sm->ncp = vt_dataset_copies(ds, &sm->cp);
    sm->nlike = vt_dataset_like_classes(ds, &sm->lk_cls);
    sm->check_leaks = !op->no_leaks && sm->split_total[VT_SPLIT_TRAIN] &&
                      (sm->split_total[VT_SPLIT_VAL] || sm->split_total[VT_SPLIT_TEST]);
    if (sm->check_leaks)
        vt_leaks_find(ds, op->threads, !op->json, &sm->lk);
    sm->full = op->full;
    if (sm->full)
        vt_scan_full_run(ds, op->threads, pc.tty, &sm->fd);
    return 0;
}

/* ---- run: the report, as one JSON object or as the human summary ---- */

/* "N decode error(s), M of K frames never decoded; stopped: why", the parts that apply. */
static void damage_text(const vt_scan_damage *d, char *buf, size_t n) {
    buf[0] = 0;
    if (d->decode_errors)
        snprintf(buf, n, "%lld decode error(s)", (long long)d->decode_errors);
    if (d->frames < d->indexed)
        snprintf(buf + strlen(buf), n - strlen(buf), "%s%lld of %lld frames never decoded",
                 buf[0] ? ", " : "", (long long)(d->indexed - d->frames),
                 (long long)d->indexed);
    if (d->error)
        snprintf(buf + strlen(buf), n - strlen(buf), "%sthe decode stopped: %s",
                 buf[0] ? "; " : "", d->error);
}

static cJSON *full_json(const vt_dataset *ds, const vt_scan_full *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "files", f->files);
    cJSON_AddNumberToObject(o, "frames", (double)f->frames);
    cJSON_AddNumberToObject(o, "seconds", f->seconds);
    cJSON *a = cJSON_AddArrayToObject(o, "damaged");
    for (int i = 0; i < f->ndamaged; i++) {
        const vt_scan_damage *d = &f->damaged[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", ds->videos[d->video].relpath);
        cJSON_AddNumberToObject(e, "decode_errors", (double)d->decode_errors);
        cJSON_AddNumberToObject(e, "frames", (double)d->frames);
        cJSON_AddNumberToObject(e, "frames_indexed", (double)d->indexed);
        if (d->error)
            cJSON_AddStringToObject(e, "error", d->error);
        cJSON_AddItemToArray(a, e);
    }
    return o;
}

static void full_print(const vt_dataset *ds, const vt_scan_full *f) {
    printf("\ndecoded in full: %d file(s), %lld frames in %.1f s", f->files,
           (long long)f->frames, f->seconds);
    if (!f->ndamaged) {
        printf(": no damage found\n");
        return;
    }
    printf("; damaged (%d, used by training all the same: their clips hold the decoder's "
           "guesses or the nearest decoded frame):\n", f->ndamaged);
    for (int i = 0; i < f->ndamaged; i++) {
        char what[1400];
        damage_text(&f->damaged[i], what, sizeof what);
        printf("  %s: %s\n", ds->videos[f->damaged[i].video].relpath, what);
    }
}

static void scan_print_json(const scan_opts *op, const vt_dataset *ds, scan_summary *sm) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "dir", ds->dir);
    cJSON_AddStringToObject(o, "layout", layout_name(ds->layout));
    cJSON_AddNumberToObject(o, "videos", ds->nvideos);
    cJSON_AddNumberToObject(o, "segments", ds->nsegments);
    cJSON_AddNumberToObject(o, "readable", sm->nok);
    cJSON_AddNumberToObject(o, "unreadable", sm->nbad);
    cJSON_AddNumberToObject(o, "unlabeled", sm->nunlabeled);
    cJSON *sp = cJSON_AddObjectToObject(o, "splits");
    for (int s = 0; s < VT_NSPLITS; s++)
        if (sm->has_split[s])
            cJSON_AddNumberToObject(sp, vt_split_name((vt_split)s), sm->split_total[s]);
    cJSON *heads = cJSON_AddArrayToObject(o, "heads");
    for (int h = 0; h < ds->nheads; h++) {
        cJSON *ho = cJSON_CreateObject();
        cJSON_AddStringToObject(ho, "name", ds->heads[h].name);
        cJSON_AddStringToObject(ho, "loss", ds->heads[h].loss == VT_LOSS_BCE ? "bce" : "softmax");
        cJSON *cl = cJSON_AddArrayToObject(ho, "classes");
        for (int c = 0; c < ds->heads[h].nclasses; c++)
            cJSON_AddItemToArray(cl, cJSON_CreateString(ds->heads[h].classes[c]));
        cJSON_AddItemToArray(heads, ho);
    }
    if (sm->h0->loss == VT_LOSS_SOFTMAX_CE) {
        cJSON *pc_ = cJSON_AddObjectToObject(o, "per_class");
        for (int c = 0; c < sm->nc; c++) {
            cJSON *co = cJSON_AddObjectToObject(pc_, sm->h0->classes[c]);
            for (int s = 0; s < VT_NSPLITS; s++)
                if (sm->has_split[s])
                    cJSON_AddNumberToObject(co, vt_split_name((vt_split)s),
                                            sm->counts[c * VT_NSPLITS + s]);
            if (sm->badc[c])
                cJSON_AddNumberToObject(co, "unreadable", sm->badc[c]);
        }
        cJSON *ir = cJSON_AddObjectToObject(o, "imbalance"); /* largest / smallest */
        for (int s = 0; s < VT_NSPLITS; s++) {
            int lo, hi;
            double r = sm->has_split[s] ? split_ratio(sm->counts, sm->nc, s, &lo, &hi) : 0;
            if (sm->has_split[s] && lo >= 0)
                cJSON_AddNumberToObject(ir, vt_split_name((vt_split)s), r);
        }
    }
    cJSON_AddItemToObject(o, "codecs", tally_json(&sm->codecs));
    cJSON_AddItemToObject(o, "containers", tally_json(&sm->containers));
    cJSON_AddItemToObject(o, "resolutions", tally_json(&sm->sizes));
    cJSON_AddItemToObject(o, "fps", stat_json(sm->sf));
    cJSON_AddItemToObject(o, "duration_s", stat_json(sm->sd));
    cJSON_AddItemToObject(o, "frames", stat_json(sm->sn));
    cJSON_AddNumberToObject(o, "vfr", sm->nvfr);
    cJSON_AddNumberToObject(o, "rotated", sm->nrot);
    cJSON_AddNumberToObject(o, "counted", sm->ncounted);
    cJSON_AddNumberToObject(o, "non_square_pixels", sm->nsar);
    cJSON *bad = cJSON_AddArrayToObject(o, "unreadable_files");
    for (int i = 0; i < ds->nvideos; i++)
        if (ds->videos[i].bad != VT_BAD_NONE) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddStringToObject(b, "path", ds->videos[i].relpath);
            cJSON_AddStringToObject(b, "reason", ds->videos[i].reason ? ds->videos[i].reason : "");
            cJSON_AddItemToArray(bad, b);
        }
    cJSON *ign = cJSON_AddArrayToObject(o, "ignored_files");
    for (int i = 0; i < ds->nignored; i++)
        cJSON_AddItemToArray(ign, cJSON_CreateString(ds->ignored[i]));
    cJSON *nf = cJSON_AddArrayToObject(o, "not_followed");
    for (int i = 0; i < ds->nbroken; i++)
        cJSON_AddItemToArray(nf, cJSON_CreateString(ds->broken[i]));
    if (ds->nmissing)
        cJSON_AddNumberToObject(o, "list_entries_missing", ds->nmissing);
    cJSON *sca = cJSON_AddArrayToObject(o, "shortcuts");
    for (int k = 0; k < sm->nsc; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "property", vt_shortcut_property_name(sm->sc[k].property));
        cJSON_AddStringToObject(e, "class", sm->h0->classes[sm->sc[k].cls]);
        cJSON_AddNumberToObject(e, "given", sm->sc[k].given);
        cJSON_AddNumberToObject(e, "of", sm->sc[k].total);
        cJSON_AddStringToObject(e, "values", sm->sc[k].values);
        cJSON_AddItemToArray(sca, e);
    }
    cJSON *lka = cJSON_AddArrayToObject(o, "similar_classes");
    for (int k = 0; k < sm->nlike; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "head", ds->heads[sm->lk_cls[k].head].name);
        cJSON_AddStringToObject(e, "a", ds->heads[sm->lk_cls[k].head].classes[sm->lk_cls[k].a]);
        cJSON_AddStringToObject(e, "b", ds->heads[sm->lk_cls[k].head].classes[sm->lk_cls[k].b]);
        cJSON_AddItemToArray(lka, e);
    }
    cJSON *cpa = cJSON_AddArrayToObject(o, "copies");
    for (int k = 0; k < sm->ncp; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "path", ds->videos[sm->cp[k].b].relpath);
        cJSON_AddStringToObject(e, "same_bytes_as", ds->videos[sm->cp[k].a].relpath);
        cJSON_AddBoolToObject(e, "same_labels", vt_dataset_same_labels(ds, sm->cp[k].a, sm->cp[k].b));
        cJSON_AddItemToArray(cpa, e);
    }
    if (sm->check_leaks)
        cJSON_AddItemToObject(o, "leaks", vt_leaks_json(ds, &sm->lk));
    if (ds->groups.mode[0]) {
        cJSON *g = cJSON_AddObjectToObject(o, "groups");
        cJSON_AddStringToObject(g, "mode", ds->groups.mode);
        cJSON_AddNumberToObject(g, "train", ds->groups.ngroups[VT_SPLIT_TRAIN]);
        cJSON_AddNumberToObject(g, "val", ds->groups.ngroups[VT_SPLIT_VAL]);
        cJSON_AddNumberToObject(g, "videos_sharing", ds->groups.nvideos_grouped);
        cJSON_AddNumberToObject(g, "ucf101_names", ds->groups.nucf);
        cJSON_AddNumberToObject(g, "hmdb51_names", ds->groups.nhmdb);
        cJSON_AddNumberToObject(g, "regex_matched", ds->groups.nregex);
    }
    if (op->labels)
        cJSON_AddNumberToObject(o, "label_lines_skipped", sm->nbadlines);
    if (sm->full)
        cJSON_AddItemToObject(o, "full_decode", full_json(ds, &sm->fd));
    char *s = vt_json_print(o, 1);
    puts(s);
    free(s);
    cJSON_Delete(o);
}

static void scan_print_text(const scan_opts *op, const vt_dataset *ds, scan_summary *sm) {
    printf("%s: %s, %d videos (%d readable, %d unreadable), probed in %.1f s\n", ds->dir,
           layout_name(ds->layout), ds->nvideos, sm->nok, sm->nbad, sm->probe_s);
    char gl[256];
    if (vt_dataset_groups_line(ds, gl, sizeof gl)[0])
        printf("%s\n", gl);
    if (ds->nsegments) /* counts below are samples: a segment counts as one */
        printf("%d of these samples are segments of longer videos (start-end in seconds)\n",
               ds->nsegments);
    for (int h = 0; h < ds->nheads; h++) {
        printf("head "); /* a labels.csv column's name: in columns, as the class table */
        vt_text_pad(stdout, ds->heads[h].name, VT_MAX(8, vt_text_cols(ds->heads[h].name)));
        printf(" %s, %d classes\n",
               ds->heads[h].loss == VT_LOSS_BCE ? "multi-label (BCE)" : "softmax",
               ds->heads[h].nclasses);
    }
    if (sm->h0->loss == VT_LOSS_SOFTMAX_CE) {
        /* in terminal columns, not bytes: a name like "café" or "走る" kept its row's
         * counts out of line (base/textwidth.h) */
        int wname = 5, unlabeled = sm->badc[sm->nc];
        for (int s = 0; s < VT_NSPLITS; s++)
            unlabeled |= sm->counts[sm->nc * VT_NSPLITS + s];
        for (int c = 0; c < sm->nc; c++)
            wname = VT_MAX(wname, vt_text_cols(sm->h0->classes[c]));
        if (unlabeled) /* its row is printed: it had pushed its counts right */
            wname = VT_MAX(wname, (int)strlen("(unlabeled)"));
        wname = VT_MIN(wname, 40);
        printf("\n  %-4s %-*s", "id", wname, "class");
        for (int s = 0; s < VT_NSPLITS; s++)
            if (sm->has_split[s])
                printf(" %7s", vt_split_name((vt_split)s));
        printf("%s\n", sm->nbad ? " unreadable" : "");
        for (int c = 0; c <= sm->nc; c++) {
            int any = sm->badc[c];
            for (int s = 0; s < VT_NSPLITS; s++)
                any |= sm->counts[c * VT_NSPLITS + s];
            if (c == sm->nc && !any)
                continue;
            if (c < sm->nc) {
                printf("  %-4d ", c);
                vt_text_pad(stdout, sm->h0->classes[c], wname);
            } else
                printf("  %-4s %-*s", "-", wname, "(unlabeled)");
            for (int s = 0; s < VT_NSPLITS; s++)
                if (sm->has_split[s])
                    printf(" %7d", sm->counts[c * VT_NSPLITS + s]);
            if (sm->nbad)
                printf(" %10d", sm->badc[c]);
            printf("\n");
        }
        printf("  %-4s %-*s", "", wname, "total");
        for (int s = 0; s < VT_NSPLITS; s++)
            if (sm->has_split[s])
                printf(" %7d", sm->split_total[s]);
        if (sm->nbad)
            printf(" %10d", sm->nbad);
        printf("\n");
        print_imbalance(sm->counts, sm->h0, sm->has_split);
        printf("\n");
    }
    tally_print("codecs", &sm->codecs);
    tally_print("containers", &sm->containers);
    tally_print("resolutions", &sm->sizes);
    if (sm->nok) {
        printf("%-12s min %.2f, median %.2f, max %.2f%s\n", "fps", sm->sf.min, sm->sf.median,
               sm->sf.max, sm->nvfr ? " (some variable frame rate)" : "");
        if (sm->sf.min > 0 && sm->sf.max > 1.25 * sm->sf.min) /* a clip is frames */
            printf("%-12s a clip of the fastest spans %.1fx less time than one of the slowest "
                   "(train --clip-fps F counts the stride at F a second for every video)\n", "",
                   sm->sf.max / sm->sf.min);
        printf("%-12s min %.2f s, median %.2f s, max %.2f s\n", "duration", sm->sd.min,
               sm->sd.median, sm->sd.max);
        printf("%-12s min %.0f, median %.0f, max %.0f\n", "frames", sm->sn.min, sm->sn.median,
               sm->sn.max);
    }
    if (sm->nrot)
        printf("%-12s %d with rotation metadata (decoded upright)\n", "rotated", sm->nrot);
    if (sm->nsar)
        printf("%-12s %d with non-square pixels (DVD, DV, HDV): read at their stored size, as "
               "the ffmpeg command and PyTorch's readers read them, not as a player shows "
               "them\n", "pixel shape", sm->nsar);
    if (sm->ncounted)
        printf("%-12s %d whose frames are counted from the start (no timestamps, or times that "
               "go back: segments joined with overlapping times): each clip decodes from the "
               "top (vidtrain prep writes copies that seek)\n", "counted", sm->ncounted);
    if (ds->nmissing)
        printf("list files name %d videos that are not there (see the warnings)\n", ds->nmissing);
    if (op->labels && sm->nbadlines)
        printf("%s: %d lines skipped (see the warnings)\n", op->labels, sm->nbadlines);
    if (sm->nsc) {
        printf("\n");
        vt_dataset_shortcuts_print(stdout, "shortcut: ", ds, sm->sc, sm->nsc, sm->sc_what);
    }
    if (sm->ncp) {
        printf("\n");
        vt_dataset_copies_print(stdout, "copies: ", ds, sm->cp, sm->ncp);
    }
    if (sm->nlike) {
        printf("\n");
        vt_dataset_like_classes_print(stdout, "similar class names: ", ds, sm->lk_cls, sm->nlike);
    }
    if (sm->check_leaks) {
        printf("\n");
        vt_leaks_print(stdout, ds, &sm->lk, 20);
    }
    if (sm->full)
        full_print(ds, &sm->fd);
    else if (sm->nok)
        printf("\n(each video opened and its first frame decoded; --full decodes every frame "
               "and finds damage past it)\n");
    if (sm->nbad) {
        printf("\nunreadable (%d, excluded from training):\n", sm->nbad);
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].bad != VT_BAD_NONE)
                printf("  %s: %s\n", ds->videos[i].relpath,
                       ds->videos[i].reason ? ds->videos[i].reason : "");
    }
    if (ds->nbroken) {
        printf("\nnot followed (%d, skipped):\n", ds->nbroken);
        for (int i = 0; i < ds->nbroken; i++)
            printf("  %s\n", ds->broken[i]);
    }
    if (ds->nignored) {
        const int stray = vt_dataset_count_stray(ds);
        printf("\nignored (%d: %d not a video name, %d a video outside a class folder):\n",
               ds->nignored, ds->nignored - stray, stray);
        int shown = VT_MIN(ds->nignored, 20);
        for (int i = 0; i < shown; i++)
            printf("  %s\n", ds->ignored[i]);
        if (shown < ds->nignored)
            printf("  ... and %d more (--json lists all)\n", ds->nignored - shown);
    }
}

/* parse, plan, run. */
int vt_cmd_scan(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    scan_opts op;
    int rc = scan_parse(&op, argc, argv);
    if (rc)
        return rc;
    vt_dataset *ds;
    scan_summary sm;
    rc = scan_plan(&op, &ds, &sm);
    if (rc)
        return rc;
    if (op.json)
        scan_print_json(&op, ds, &sm);
    else
        scan_print_text(&op, ds, &sm);
    scan_summary_free(&sm);
    vt_dataset_free(&ds);
    return 0;
}
