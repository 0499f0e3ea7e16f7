/*
 * cmd_embed.c: `vidtrain embed RUN VIDEO...|DIR --out FILE` — one feature vector per
 * video (per segment when DIR's labels give segments, per window with --timeline, per
 * clip with --per-clip): the pooled features a trained model's heads are applied to,
 * averaged over predict's K clips x crops (app/stream/embed_run.h), written as safetensors or
 * .npy with a CSV of what each row is (app/stream/embed_out.h). docs/embed.md says how the
 * rows relate to predict's probabilities.
 *
 * A file that cannot be read is reported with FFmpeg's reason and the others go on. It
 * must never write into the run folder.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/app.h"
#include "app/decode_opt.h"
#include "app/stream/embed_run.h"
#include "app/opts.h"
#include "app/run/run_claim.h"
#include "app/run/run_files.h"
#include "base/common.h"
#include "pipeline/data/video/video.h"

static void usage(FILE *f) {
    fprintf(f,
        "usage: vidtrain embed RUN VIDEO...|DIR --out FILE [options]\n\n"
        "Writes one feature vector per video: the pooled features RUN's classifier is\n"
        "applied to (its input), averaged over K uniformly spaced clips (x crops) exactly\n"
        "as `vidtrain predict` picks them. For retrieval, clustering and linear probes.\n\n"
        "  --out FILE            FILE.safetensors (tensor \"embeddings\" (N, D) float32 and\n"
        "                        metadata) or FILE.npy, by the extension; FILE.csv beside\n"
        "                        it names each row: index, path, start, end, then per head\n"
        "                        the top-1 label and probability (predict's answer)\n"
        "  --clips-per-video K   (default 10)\n"
        "  --crops 1|3           (default 1)\n"
        "  --per-clip            one row per clip and crop instead of their mean (CSV\n"
        "                        columns clip, crop); rows of a video are consecutive\n"
        "  --checkpoint PATH     another checkpoint\n"
        "  --tower-split POLICY  equal, memory (default), speed, auto, manual:W,W,...\n"
        "  --precision P         fp32 (default), tf32, bf16\n"
        VT_DECODE_OPT_HELP
        "\nA dataset folder DIR instead of videos: every readable sample of it, read as the\n"
        "run read its data (its --lists, --labels); a labels file with start and end\n"
        "columns (docs/segments.md) gives one row per segment:\n"
        "  --labels FILE.csv     this labels file instead of the run's\n"
        "  --lists PATH          these list files instead of the run's\n"
        "  --split S             train, val, test (labelled samples of that split) or all\n"
        "                        (default: every readable sample, labelled or not)\n"
        "\nWindows (docs/timeline.md): --timeline gives one row per window of each video,\n"
        "streamed once, each the mean over the window's clips as predict --timeline has it:\n"
        "  --timeline  --window D (default 2s)  --hop D (default 1s)  --batch N (default 8)\n"
        "  --decode-threads N; --clips-per-video K: clips a window (default: enough to\n"
        "  cover it, at most 16)\n"
        "%s\n"
        "Exit codes: 0 when at least one row was written, 1 when nothing could be embedded\n"
        "(or RUN cannot be loaded, or the output cannot be written), 2 usage.\n",
        vt_device_args_help);
}

typedef struct embed_args {
    const char *run, *out, *labels, *lists, *split;
    const char **inputs;
    int ninputs, per_clip, timeline, targs, clips_given;
    vt_model_args ma;
    vt_embed_timeline tl;
} embed_args;

/* argv into a; 0, or 2 after a usage message. */
static int parse(embed_args *a, int argc, char **argv) {
    vt_model_args_default(&a->ma);
    a->ma.clips_per_video = 0; /* not given: 10, or the timeline's own default */
    a->tl = (vt_embed_timeline){.window = 2, .hop = 1, .batch = 8};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = NULL;
        int r = vt_model_args_take(&a->ma, argc, argv, &i, "embed");
        if (r != 0) {
            if (r < 0)
                return 2;
            continue;
        }
        if ((r = vt_decode_opt_take("embed", argc, argv, &i)) != 0) {
            if (r < 0)
                return 2;
            continue;
        }
#define OPT(name) ((r = vt_opt_value(argc, argv, &i, name, &v)) != 0)
        if (!strcmp(o, "--per-clip")) { a->per_clip = 1; continue; }
        if (!strcmp(o, "--timeline")) { a->timeline = 1; continue; }
        const char **str = OPT("--out") ? &a->out : OPT("--labels") ? &a->labels
                         : OPT("--lists") ? &a->lists : OPT("--split") ? &a->split : NULL;
        if (str) {
            if (r < 0) {
                fprintf(stderr, "vidtrain embed: %s needs a value\n", o);
                return 2;
            }
            *str = v;
            continue;
        }
        double *dur = OPT("--window") ? &a->tl.window : OPT("--hop") ? &a->tl.hop : NULL;
        if (dur) {
            if (r < 0 || (*dur = vt_parse_duration(v)) <= 0) {
                fprintf(stderr, "vidtrain embed: bad value for %s: '%s' (seconds: 2, 2s, 0.5s, "
                        "1m)\n", o, r < 0 ? "" : v);
                return 2;
            }
            a->targs++;
            continue;
        }
        int *num = OPT("--batch") ? &a->tl.batch : OPT("--decode-threads") ? &a->tl.threads
                                                                        : NULL;
        if (num) {
            int batch = num == &a->tl.batch;
            if (vt_opt_int("embed", batch ? "--batch" : "--decode-threads", r < 0 ? NULL : v,
                           batch ? 1 : 0, batch ? 4096 : 64, num))
                return 2;
            a->targs++;
            continue;
        }
#undef OPT
        if (o[0] == '-' && o[1]) { /* a lone "-" is standard input (--timeline) */
            fprintf(stderr, "vidtrain embed: unknown option %s (see --help)\n", o);
            return 2;
        }
        if (!a->run)
            a->run = vt_run_path_trim(argv[i]); /* "r7/" is r7: one slash in r7/x */
        else
            a->inputs[a->ninputs++] = o;
    }
    return 0;
}

/* 1 when a and b name one existing file. */
static int same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* An output over an input (FILE.csv over a labels file FILE.csv, --out over a video):
 * 1 with its path in over (which outlives this call), else 0. */
static int clobbers(const embed_args *a, char *over, size_t overlen) {
    char csv[4200];
    vt_embed_csv_path(a->out, csv, sizeof csv);
    const char *outs[2] = {a->out, csv};
    for (int k = 0; k < 2; k++) {
        int hit = same_file(outs[k], a->labels) || same_file(outs[k], a->lists);
        for (int i = 0; i < a->ninputs && !hit; i++)
            hit = same_file(outs[k], a->inputs[i]);
        if (hit) {
            snprintf(over, overlen, "%s", outs[k]);
            return 1;
        }
    }
    return 0;
}

/* The combinations parse cannot see. 0, or 2 after saying why. */
static int check_args(const embed_args *a, int *is_dir) {
    const char *why = NULL;
    struct stat st;
    *is_dir = a->ninputs == 1 && stat(a->inputs[0], &st) == 0 && S_ISDIR(st.st_mode);
    for (int i = 0; i < a->ninputs && !*is_dir; i++)
        if (stat(a->inputs[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "vidtrain embed: %s is a folder: give one dataset folder alone, or "
                            "video files\n", a->inputs[i]);
            return 2;
        }
    if (!*is_dir && vt_frame_rate_check("embed", "none of the inputs is one", a->inputs,
                                        a->ninputs) != 0)
        return 2;
    if (!a->out)
        why = "--out FILE is required (FILE.safetensors or FILE.npy)";
    else if (vt_embed_format_of(a->out) < 0) {
        fprintf(stderr, "vidtrain embed: --out %s: the format follows the extension: "
                        ".safetensors or .npy\n", a->out);
        return 2;
    }
    else if (a->targs && !a->timeline)
        why = "--window, --hop, --batch and --decode-threads are --timeline's options";
    else if (a->timeline && a->per_clip)
        why = "--per-clip and --timeline do not go together (a window is already a mean)";
    else if (a->timeline && *is_dir)
        why = "--timeline takes video files, not a dataset folder";
    else if (!*is_dir && (a->labels || a->lists || a->split))
        why = "--labels, --lists and --split are for a dataset folder DIR";
    else if (a->split && strcmp(a->split, "all") && vt_split_parse(a->split) < 0)
        why = "--split: train, val, test or all";
    char over[4200];
    if (!why && clobbers(a, over, sizeof over)) {
        fprintf(stderr, "vidtrain embed: %s is one of the inputs; the output would overwrite "
                        "it (the CSV goes beside --out, its extension .csv): pick another "
                        "--out\n", over);
        return 2;
    }
    if (why) {
        fprintf(stderr, "vidtrain embed: %s\n", why);
        return 2;
    }
    return 0;
}

/* "embed: 12/40 (30%), 3.1 per s, about 9 s left" on stderr: redrawn in place on a
 * terminal, else a line every 10 seconds, so a long run shows it is alive. */
static void progress(int done, int total, double t0, double *last) {
    int tty = isatty(fileno(stderr));
    double now = vt_now(), el = now - t0;
    if (done < total && now - *last < (tty ? 0.5 : 10.0))
        return;
    *last = now;
    double rate = el > 0.5 ? done / el : 0; /* a rate over less is noise */
    fprintf(stderr, "%sembed: %d/%d (%d%%)", tty ? "\r" : "", done, total,
            total ? 100 * done / total : 100);
    if (rate > 0)
        fprintf(stderr, ", %.1f per s", rate);
    if (done < total && rate > 0)
        fprintf(stderr, ", about %.0f s left", (total - done) / rate);
    fprintf(stderr, tty && done < total ? "   " : "\n");
}

/* The dataset's samples to embed into *idx (free()); their count, or -1 with err. */
static int dataset_samples(vt_dataset *ds, const char *split, int32_t **idx) {
    if (split && strcmp(split, "all"))
        return vt_dataset_split_indices(ds, (vt_split)vt_split_parse(split), idx);
    *idx = vt_malloc(sizeof(int32_t) * (size_t)(ds->nvideos ? ds->nvideos : 1));
    int n = 0;
    for (int i = 0; i < ds->nvideos; i++)
        if (!vt_dataset_bad(ds, i))
            (*idx)[n++] = i;
    return n;
}

/* DIR as the run reads its data, with --labels/--lists in place of the run's. */
static vt_dataset *open_dataset(const embed_args *a, const vt_run_model *m, char *err,
                                size_t errlen) {
    vt_dataset *ds = vt_run_dataset_open(&m->opts, a->inputs[0], a->labels, a->lists, err,
                                         errlen);
    /* unreadable files: warned, left out; files the system refused to open: stopped */
    if (ds && vt_dataset_probe(ds, 0, 1, NULL, NULL) < 0 && vt_video_system_failed(err, errlen))
        vt_dataset_free(&ds);
    return ds;
}

/* Every input through e; rows into e->out. Returns the inputs that failed (each
 * reported), or -1 when the dataset cannot be opened, -2 when it makes --frame-rate a
 * usage error (said). */
static int embed_all(const embed_args *a, int is_dir, vt_embedder *e, vt_run_model *m) {
    char err[1024], name[4400];
    int failed = 0, total = a->ninputs;
    int32_t *idx = NULL;
    vt_dataset *ds = NULL;
    if (is_dir) {
        if (!(ds = open_dataset(a, m, err, sizeof err))) {
            fprintf(stderr, "vidtrain embed: %s\n", err);
            return -1;
        }
        if (vt_frame_rate_check_data("embed", ds, NULL) != 0) {
            vt_dataset_free(&ds);
            return -2;
        }
        total = dataset_samples(ds, a->split, &idx);
        fprintf(stderr, "embed: %d samples of %s%s\n", total, a->inputs[0],
                ds->nsegments ? " (segments give a row each)" : "");
    }
    double t0 = vt_now(), last = t0;
    for (int i = 0; i < total; i++) {
        const vt_dataset_video *dv = ds ? &ds->videos[idx[i]] : NULL;
        const char *path = dv ? dv->path : a->inputs[i];
        int rc = a->timeline ? vt_embed_timeline_video(e, path, &a->tl, err, sizeof err)
                             : vt_embed_sample(e, path, dv, err, sizeof err);
        if (rc != 0) {
            fprintf(stderr, "vidtrain embed: %s: %s (skipped)\n",
                    dv ? vt_dataset_sample_name(dv, name, sizeof name) : path, err);
            failed++;
        }
        progress(i + 1, total, t0, &last);
    }
    free(idx);
    vt_dataset_free(&ds);
    return failed;
}

/* What a reader needs to use the rows (safetensors metadata). */
static void make_meta(vt_ckpt_meta *meta, const embed_args *a, const vt_embedder *e,
                      const vt_run_model *m, int is_dir) {
    char buf[4400];
    vt_ckpt_meta_set(meta, "format", "vidtrain-embeddings");
    vt_ckpt_meta_set(meta, "vidtrain_version", VT_VERSION);
    vt_ckpt_meta_set(meta, "run", a->run);
    vt_ckpt_meta_set(meta, "checkpoint", m->ckpt);
    vt_ckpt_meta_set(meta, "model", m->opts.model);
    vt_ckpt_meta_set(meta, "rows", a->timeline ? "window" : a->per_clip ? "clip"
                                   : is_dir ? "sample" : "video");
    snprintf(buf, sizeof buf, "%d", e->dim);
    vt_ckpt_meta_set(meta, "dim", buf);
    snprintf(buf, sizeof buf, "%d", e->ec.K);
    vt_ckpt_meta_set(meta, "clips_per_video", a->timeline && !a->clips_given ? "auto" : buf);
    snprintf(buf, sizeof buf, "%d", e->ec.crops);
    vt_ckpt_meta_set(meta, "crops", buf);
    vt_ckpt_meta_set(meta, "precision", vt_precision_name(m->precision));
    /* the classifier the features feed: head 0's weight and bias in the checkpoint */
    vt_net *net = vt_towers_net(m->towers, 0);
    for (int i = 0; i < vt_net_num_tensors(net); i++)
        if (vt_net_tensor_head(net, i) == 0) {
            const char *n = vt_net_tensor(net, i)->name;
            size_t l = strlen(n);
            int bias = l >= 5 && !strcmp(n + l - 5, ".bias");
            vt_ckpt_meta_set(meta, bias ? "classifier_bias" : "classifier_weight", n);
        }
    vt_ckpt_meta_set(meta, "csv", vt_embed_csv_path(a->out, buf, sizeof buf));
}

int vt_cmd_embed(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    embed_args a;
    memset(&a, 0, sizeof a);
    a.inputs = vt_calloc((size_t)argc, sizeof(char *));
    int is_dir = 0, rc = parse(&a, argc, argv);
    if (rc == 0 && (!a.run || a.ninputs == 0)) {
        usage(stderr);
        rc = 2;
    }
    if (rc == 0)
        rc = check_args(&a, &is_dir);
    if (rc != 0) {
        free(a.inputs);
        return rc;
    }
    a.clips_given = a.ma.clips_per_video > 0;
    int K = a.clips_given ? a.ma.clips_per_video : a.timeline ? 0 : 10;
    char err[1024];
    rc = 1;
    vt_run_model m;
    vt_embed_set set = {0};
    vt_embedder e;
    memset(&e, 0, sizeof e);
    vt_ckpt_meta meta = {0};
    for (int i = 0; i < a.ninputs; i++) /* the output rule (base/common.h) */
        vt_inputs_add(a.inputs[i]);
    if (a.labels) /* read only once the dataset opens: declared before the early check */
        vt_inputs_add(a.labels);
    if (a.lists)
        vt_inputs_add(a.lists);
    if (vt_run_model_open(&m, a.run, a.ma.ckpt, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain embed: %s\n", err);
        goto end;
    }
    char csv[4200];
    vt_embed_csv_path(a.out, csv, sizeof csv);
    if (vt_output_check_early(a.out, err, sizeof err) != 0 ||
        vt_output_check_early(csv, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain embed: %s\n", err);
        goto end;
    }
    m.precision = a.ma.precision;
    int B = VT_MAX((K ? K : 16) * a.ma.crops, a.timeline ? a.tl.batch : 1);
    int lrc = vt_run_model_load(&m, &a.ma.devices, a.ma.tower_split, B, err, sizeof err);
    if (lrc != 0) {
        fprintf(stderr, "vidtrain embed: %s\n", err);
        rc = lrc == -2 ? 2 : 1;
        goto end;
    }
    vt_embedder_init(&e, &m, K ? K : 16, a.ma.crops, a.per_clip, &set);
    a.tl.K = K;
    int failed = embed_all(&a, is_dir, &e, &m);
    if (failed == -2) { /* a usage error, said */
        rc = 2;
        goto end;
    }
    if (failed < 0 || set.n == 0) {
        fprintf(stderr, "vidtrain embed: nothing to write%s\n", failed < 0 ? "" :
                " (no input could be embedded; see the messages above)");
        goto end;
    }
    int64_t noanswer = 0, ties = 0; /* rows whose scores name no class (embed_out.h: label
                                     * -1 not finite, -2 a tie) */
    for (int64_t i = 0; i < set.n; i++) {
        int nf = 0, tie = 0;
        for (int h = 0; h < m.heads.n; h++) {
            nf |= set.rows[i].label[h] == -1;
            tie |= set.rows[i].label[h] == -2;
        }
        noanswer += nf;
        ties += tie;
    }
    if (ties)
        fprintf(stderr, "vidtrain embed: warning: %lld of %lld rows have a top score two "
                "classes share (a tie: no single answer): their label cell is empty\n",
                (long long)ties, (long long)set.n);
    vt_fps_tally_warn(&e.fps, "embed", &m);
    if (noanswer)
        fprintf(stderr, "vidtrain embed: warning: %lld of %lld rows have scores that are not "
                "finite (NaN or inf: the network overflows on their clips although its weights are "
                "finite): their label and prob cells are empty\n",
                (long long)noanswer, (long long)set.n);
    make_meta(&meta, &a, &e, &m, is_dir);
    /* FILE and FILE.csv are one answer: two embeds onto one --out at once write their
     * pairs one after the other (the rows of one named by the CSV of the other, else),
     * under the lock eval takes on a run folder, here on --out's folder */
    char folder[4200];
    snprintf(folder, sizeof folder, "%s", a.out);
    char *slash = strrchr(folder, '/');
    if (slash)
        slash[slash == folder] = 0; /* "/x.npy": the root */
    else
        snprintf(folder, sizeof folder, ".");
    int wfd = vt_run_claim_writes(folder);
    int wrc = vt_embed_write(&set, a.out, &meta, &m.heads, err, sizeof err);
    vt_run_claim_unshare(&wfd);
    if (wrc != 0) {
        fprintf(stderr, "vidtrain embed: %s\n", err);
        goto end;
    }
    fprintf(stderr, "embed: %lld rows of %d features -> %s (rows named in %s)%s\n",
            (long long)set.n, set.dim, a.out, vt_embed_csv_path(a.out, csv, sizeof csv),
            failed ? "; some inputs were skipped (see above)" : "");
    rc = 0;
end:
    vt_ckpt_meta_free(&meta);
    vt_embedder_free(&e);
    vt_embed_set_free(&set);
    vt_run_model_free(&m);
    free(a.inputs);
    return rc;
}
