/*
 * cmd_scan.c: `vidtrain scan DIR` — what a dataset folder holds before training on it:
 * classes and counts per split, codecs, resolutions, frame rates, durations, and every
 * file FFmpeg cannot read, with its reason.
 *
 * It opens each video once (through vt_dataset_probe) and never decodes frames or
 * writes anything; bad files are reported, never fatal (exit 0 as long as the folder
 * scans). Output is a human summary, or one JSON object with --json.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "base/common.h"
#include "pipeline/data/balance.h"
#include "app/leaks.h"
#include "pipeline/data/dataset/dataset.h"
#include "base/json_str.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: vidtrain scan DIR [--val-split F] [--group REGEX|auto|none] [--lists PATH]\n"
            "                         [--list-format F] [--fold N] [--labels CSV] [--threads N]\n"
            "                         [--no-leaks] [--json]\n\n"
            "Scan a dataset folder: DIR/<class>/<video>, or DIR/<split>/<class>/<video> with any of\n"
            "the split folders train, val, test (only test/ is fine). Symbolic links to folders and\n"
            "files are followed; dangling links and links back to a folder above them (loops) are\n"
            "listed and skipped. Every video is opened once with FFmpeg; unreadable files are\n"
            "listed with the reason.\n\n"
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

int vt_cmd_scan(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *dir = NULL, *labels = NULL;
    vt_dataset_opts opts = {0};
    int threads = 0, json = 0, no_leaks = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strncmp(a, "--frame-rate", 12)) {
            if (vt_decode_opt_take("scan", argc, argv, &i) != 1)
                return 2;
        } else if (!strcmp(a, "--no-leaks")) {
            no_leaks = 1;
        } else if (!strcmp(a, "--val-split") && more) {
            double f;
            if (vt_parse_f64(argv[++i], 0, 1, &f) != 0 || f >= 1) {
                fprintf(stderr, "vidtrain scan: --val-split takes a fraction in [0, 1), got '%s'\n",
                        argv[i]);
                return 2;
            }
            opts.val_split = f;
        } else if (!strcmp(a, "--group") && more) {
            opts.group = argv[++i];
            char gerr[512];
            if (vt_dataset_group_check(opts.group, gerr, sizeof gerr) < 0) {
                fprintf(stderr, "vidtrain scan: %s\n", gerr);
                return 2;
            }
        } else if (!strcmp(a, "--lists") && more) {
            opts.lists_dir = argv[++i];
        } else if (!strcmp(a, "--list-format") && more) {
            int f = vt_lists_format_parse(argv[++i]);
            if (f < 0) {
                fprintf(stderr, "vidtrain scan: --list-format takes ucf101, hmdb51 or kinetics\n");
                return 2;
            }
            opts.lists_format = (vt_lists_format)f;
        } else if (!strcmp(a, "--fold") && more) {
            if (vt_parse_int(argv[++i], 1, 99, &opts.list_fold) != 0) {
                fprintf(stderr, "vidtrain scan: --fold takes 1..99\n");
                return 2;
            }
        } else if (!strcmp(a, "--labels") && more) {
            labels = argv[++i];
        } else if (!strcmp(a, "--threads") && more) {
            if (vt_parse_int(argv[++i], 1, 4096, &threads) != 0) {
                fprintf(stderr, "vidtrain scan: --threads takes a count from 1 to 4096\n");
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vidtrain scan: unknown option or missing value: %s\n\n", a);
            usage(stderr);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "vidtrain scan: one folder only (got '%s' and '%s')\n", dir, a);
            return 2;
        }
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }

    char err[1024];
    vt_dataset *ds = vt_dataset_open(dir, &opts, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "vidtrain scan: %s\n", err);
        return 1;
    }
    int nbadlines = 0;
    if (labels && vt_dataset_load_labels(ds, labels, &nbadlines, err, sizeof err) < 0) {
        fprintf(stderr, "vidtrain scan: %s\n", err);
        vt_dataset_free(&ds);
        return 1;
    }
    progress_ctx pc = {.tty = isatty(2) && !json ? 1 : 0};
    double t0 = vt_now();
    int nbad = vt_dataset_probe(ds, threads, 0, on_progress, &pc);
    double probe_s = vt_now() - t0;

    /* Per class x split counts (first head), and the figures of readable videos. */
    const vt_dataset_head *h0 = &ds->heads[0];
    int nc = h0->nclasses;
    int *counts = vt_calloc((size_t)(nc + 1) * VT_NSPLITS, sizeof *counts); /* row nc: no class */
    int *badc = vt_calloc((size_t)(nc + 1), sizeof *badc); /* unreadable per class */
    int split_total[VT_NSPLITS] = {0};
    double *fps = vt_malloc((size_t)ds->nvideos * sizeof *fps);
    double *dur = vt_malloc((size_t)ds->nvideos * sizeof *dur);
    double *frames = vt_malloc((size_t)ds->nvideos * sizeof *frames);
    int nok = 0, nunlabeled = 0, nvfr = 0, nrot = 0;
    tally codecs = {0}, sizes = {0}, containers = {0};
    char buf[128];
    for (int i = 0; i < ds->nvideos; i++) {
        const vt_dataset_video *v = &ds->videos[i];
        int c = v->labeled && h0->loss == VT_LOSS_SOFTMAX_CE ? v->label[0] : nc;
        if (v->bad != VT_BAD_NONE) {
            badc[c]++;
            continue;
        }
        nunlabeled += !v->labeled;
        counts[c * VT_NSPLITS + v->split]++;
        split_total[v->split]++;
        fps[nok] = v->info.fps;
        dur[nok] = v->info.duration;
        frames[nok] = (double)v->info.nframes;
        nok++;
        nvfr += v->info.vfr != 0;
        nrot += v->info.rotation != 0;
        tally_add(&codecs, v->info.codec[0] ? v->info.codec : "?");
        tally_add(&containers, v->info.container[0] ? v->info.container : "?");
        snprintf(buf, sizeof buf, "%dx%d", v->info.disp_width, v->info.disp_height);
        tally_add(&sizes, buf);
    }
    stat3 sf = stat_of(fps, nok), sd = stat_of(dur, nok), sn = stat_of(frames, nok);
    int has_split[VT_NSPLITS];
    for (int s = 0; s < VT_NSPLITS; s++)
        has_split[s] = split_total[s] > 0;
    vt_leaks lk = {0};
    int check_leaks = !no_leaks && split_total[VT_SPLIT_TRAIN] &&
                      (split_total[VT_SPLIT_VAL] || split_total[VT_SPLIT_TEST]);
    if (check_leaks)
        vt_leaks_find(ds, threads, !json, &lk);

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "dir", ds->dir);
        cJSON_AddStringToObject(o, "layout", layout_name(ds->layout));
        cJSON_AddNumberToObject(o, "videos", ds->nvideos);
        cJSON_AddNumberToObject(o, "segments", ds->nsegments);
        cJSON_AddNumberToObject(o, "readable", nok);
        cJSON_AddNumberToObject(o, "unreadable", nbad);
        cJSON_AddNumberToObject(o, "unlabeled", nunlabeled);
        cJSON *sp = cJSON_AddObjectToObject(o, "splits");
        for (int s = 0; s < VT_NSPLITS; s++)
            if (has_split[s])
                cJSON_AddNumberToObject(sp, vt_split_name((vt_split)s), split_total[s]);
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
        if (h0->loss == VT_LOSS_SOFTMAX_CE) {
            cJSON *pc_ = cJSON_AddObjectToObject(o, "per_class");
            for (int c = 0; c < nc; c++) {
                cJSON *co = cJSON_AddObjectToObject(pc_, h0->classes[c]);
                for (int s = 0; s < VT_NSPLITS; s++)
                    if (has_split[s])
                        cJSON_AddNumberToObject(co, vt_split_name((vt_split)s),
                                                counts[c * VT_NSPLITS + s]);
                if (badc[c])
                    cJSON_AddNumberToObject(co, "unreadable", badc[c]);
            }
            cJSON *ir = cJSON_AddObjectToObject(o, "imbalance"); /* largest / smallest */
            for (int s = 0; s < VT_NSPLITS; s++) {
                int lo, hi;
                double r = has_split[s] ? split_ratio(counts, nc, s, &lo, &hi) : 0;
                if (has_split[s] && lo >= 0)
                    cJSON_AddNumberToObject(ir, vt_split_name((vt_split)s), r);
            }
        }
        cJSON_AddItemToObject(o, "codecs", tally_json(&codecs));
        cJSON_AddItemToObject(o, "containers", tally_json(&containers));
        cJSON_AddItemToObject(o, "resolutions", tally_json(&sizes));
        cJSON_AddItemToObject(o, "fps", stat_json(sf));
        cJSON_AddItemToObject(o, "duration_s", stat_json(sd));
        cJSON_AddItemToObject(o, "frames", stat_json(sn));
        cJSON_AddNumberToObject(o, "vfr", nvfr);
        cJSON_AddNumberToObject(o, "rotated", nrot);
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
        if (check_leaks)
            cJSON_AddItemToObject(o, "leaks", vt_leaks_json(ds, &lk));
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
        if (labels)
            cJSON_AddNumberToObject(o, "label_lines_skipped", nbadlines);
        char *s = vt_json_print(o, 1);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("%s: %s, %d videos (%d readable, %d unreadable), probed in %.1f s\n", ds->dir,
               layout_name(ds->layout), ds->nvideos, nok, nbad, probe_s);
        char gl[256];
        if (vt_dataset_groups_line(ds, gl, sizeof gl)[0])
            printf("%s\n", gl);
        if (ds->nsegments) /* counts below are samples: a segment counts as one */
            printf("%d of these samples are segments of longer videos (start-end in seconds)\n",
                   ds->nsegments);
        for (int h = 0; h < ds->nheads; h++)
            printf("head %-8s %s, %d classes\n", ds->heads[h].name,
                   ds->heads[h].loss == VT_LOSS_BCE ? "multi-label (BCE)" : "softmax",
                   ds->heads[h].nclasses);
        if (h0->loss == VT_LOSS_SOFTMAX_CE) {
            int wname = 5;
            for (int c = 0; c < nc; c++)
                wname = VT_MAX(wname, (int)strlen(h0->classes[c]));
            wname = VT_MIN(wname, 40);
            printf("\n  %-4s %-*s", "id", wname, "class");
            for (int s = 0; s < VT_NSPLITS; s++)
                if (has_split[s])
                    printf(" %7s", vt_split_name((vt_split)s));
            printf("%s\n", nbad ? " unreadable" : "");
            for (int c = 0; c <= nc; c++) {
                int any = badc[c];
                for (int s = 0; s < VT_NSPLITS; s++)
                    any |= counts[c * VT_NSPLITS + s];
                if (c == nc && !any)
                    continue;
                if (c < nc)
                    printf("  %-4d %-*.*s", c, wname, wname, h0->classes[c]);
                else
                    printf("  %-4s %-*s", "-", wname, "(unlabeled)");
                for (int s = 0; s < VT_NSPLITS; s++)
                    if (has_split[s])
                        printf(" %7d", counts[c * VT_NSPLITS + s]);
                if (nbad)
                    printf(" %10d", badc[c]);
                printf("\n");
            }
            printf("  %-4s %-*s", "", wname, "total");
            for (int s = 0; s < VT_NSPLITS; s++)
                if (has_split[s])
                    printf(" %7d", split_total[s]);
            if (nbad)
                printf(" %10d", nbad);
            printf("\n");
            print_imbalance(counts, h0, has_split);
            printf("\n");
        }
        tally_print("codecs", &codecs);
        tally_print("containers", &containers);
        tally_print("resolutions", &sizes);
        if (nok) {
            printf("%-12s min %.2f, median %.2f, max %.2f%s\n", "fps", sf.min, sf.median, sf.max,
                   nvfr ? " (some variable frame rate)" : "");
            printf("%-12s min %.2f s, median %.2f s, max %.2f s\n", "duration", sd.min, sd.median,
                   sd.max);
            printf("%-12s min %.0f, median %.0f, max %.0f\n", "frames", sn.min, sn.median, sn.max);
        }
        if (nrot)
            printf("%-12s %d with rotation metadata (decoded upright)\n", "rotated", nrot);
        if (ds->nmissing)
            printf("list files name %d videos that are not there (see the warnings)\n", ds->nmissing);
        if (labels && nbadlines)
            printf("%s: %d lines skipped (see the warnings)\n", labels, nbadlines);
        if (check_leaks) {
            printf("\n");
            vt_leaks_print(stdout, ds, &lk, 20);
        }
        if (nbad) {
            printf("\nunreadable (%d, excluded from training):\n", nbad);
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
            printf("\nignored (%d, not a video name):\n", ds->nignored);
            int shown = VT_MIN(ds->nignored, 20);
            for (int i = 0; i < shown; i++)
                printf("  %s\n", ds->ignored[i]);
            if (shown < ds->nignored)
                printf("  ... and %d more (--json lists all)\n", ds->nignored - shown);
        }
    }
    tally_free(&codecs);
    tally_free(&containers);
    tally_free(&sizes);
    free(fps);
    free(dur);
    free(frames);
    free(counts);
    free(badc);
    vt_leaks_free(&lk);
    vt_dataset_free(&ds);
    return 0;
}
