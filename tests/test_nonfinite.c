/*
 * test_nonfinite.c: a non-finite loss or weight never passes as a result, and --init
 * files are read for what they are (issue 41). The outside truths are IEEE arithmetic
 * (a NaN score is no answer at all, so never a right one) and the files themselves: a
 * checkpoint's bytes are scanned here for NaN and inf, independently of the program.
 *   - evalproto: rows of NaN scores are counted wrong at top-1 and top-5, per video, in
 *     the mean class accuracy and label-wise (BCE), and counted as non-finite
 *     (nan_scores_never_right);
 *   - --init (vt_net_load_init): a directory, a FIFO (never waited on: alarm), a
 *     truncated .pth zip, a file whose only matches are BN counters, a file with a NaN
 *     weight (init_files);
 *   - the repro of the issue, `train --lr 10`: a non-zero exit naming the step, no
 *     checkpoint with a NaN in it, and eval does not print 100% (diverged_run);
 *   - --skip-nonfinite: the run ends, the skipped steps are counted in the epoch line,
 *     metrics.jsonl and the summary, and no checkpoint holds a NaN (skip_nonfinite);
 *   - eval, predict, export and embed refuse a run whose best.safetensors was given a
 *     NaN, naming the tensor; a model with finite weights whose scores overflow is
 *     scored 0% by eval (which counts the non-finite clips) and gets no answer from
 *     predict; a constant model (a zero classifier) scores 0%, not class 0's share, and
 *     one that gives every clip the same class is said to; a negative batch-norm
 *     variance is refused by export (it wrote a model of NaN outputs), predict and
 *     --init; train
 *     --init refuses the NaN file too, and a directory and a FIFO as
 *     --init say what they are (refusals); embed writes such a model's rows with empty
 *     label and prob cells (it named the first class), and refuses features that
 *     overflow (it wrote inf embeddings, exit 0); predict --dump-input holds no entry
 *     for the video it skipped.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/eval/evalproto.h"
#include "base/common.h"
#include "models/formats/safetensors.h"
#include "models/net.h"
#include "models/registry.h"
#include "models/transfer.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin;
static char g_dir[4096];
static char g_data[4200];

/* ---- safetensors bytes, read and patched here without the program's code ---- */

/* The header of a safetensors file as JSON and the data's start; NULL if unreadable. */
static cJSON *st_header(const char *path, long *data_at) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char len8[8];
    cJSON *j = NULL;
    if (fread(len8, 1, 8, f) == 8) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | len8[i];
        char *h = n < (1u << 26) ? calloc(1, n + 1) : NULL;
        if (h && fread(h, 1, n, f) == n)
            j = cJSON_Parse(h);
        free(h);
        *data_at = 8 + (long)n;
    }
    fclose(f);
    return j;
}

/* The F32 tensors of path that hold a NaN or inf: their count (0: all finite); -1 when
 * the file cannot be read. */
static int st_nonfinite_tensors(const char *path) {
    long at = 0;
    cJSON *j = st_header(path, &at);
    long len = 0;
    char *all = vt_test_slurp(path, &len);
    int bad = j && all ? 0 : -1;
    const cJSON *t;
    cJSON_ArrayForEach(t, j) {
        const cJSON *dt = cJSON_GetObjectItem(t, "dtype"), *off = cJSON_GetObjectItem(t, "data_offsets");
        if (bad < 0 || !cJSON_IsString(dt) || strcmp(dt->valuestring, "F32"))
            continue;
        long a = at + (long)cJSON_GetArrayItem(off, 0)->valuedouble;
        long b = at + (long)cJSON_GetArrayItem(off, 1)->valuedouble;
        int hit = 0;
        for (long p = a; p + 4 <= b && p + 4 <= len; p += 4) {
            float x;
            memcpy(&x, all + p, 4);
            hit |= !isfinite(x);
        }
        bad += hit;
    }
    cJSON_Delete(j);
    free(all);
    return bad;
}

/* Writes v over the first value of tensor `name` in path. 0, or -1. */
static int st_set_first(const char *path, const char *name, float v) {
    long at = 0;
    cJSON *j = st_header(path, &at);
    const cJSON *t = j ? cJSON_GetObjectItem(j, name) : NULL;
    const cJSON *off = t ? cJSON_GetObjectItem(t, "data_offsets") : NULL;
    int rc = -1;
    FILE *f = off ? fopen(path, "r+b") : NULL;
    if (f) {
        rc = fseek(f, at + (long)cJSON_GetArrayItem(off, 0)->valuedouble, SEEK_SET) == 0 &&
                     fwrite(&v, 4, 1, f) == 1
                 ? 0
                 : -1;
        rc |= fclose(f) != 0 ? -1 : 0;
    }
    cJSON_Delete(j);
    return rc;
}

/* Writes NaN over the first value of tensor `name` in path. 0, or -1. */
static int st_poison(const char *path, const char *name) {
    return st_set_first(path, name, NAN);
}

/* Sets every value of tensor `name` in path to v. 0, or -1. */
static int st_fill(const char *path, const char *name, float v) {
    long at = 0;
    cJSON *j = st_header(path, &at);
    const cJSON *t = j ? cJSON_GetObjectItem(j, name) : NULL;
    const cJSON *off = t ? cJSON_GetObjectItem(t, "data_offsets") : NULL;
    int rc = -1;
    FILE *f = off ? fopen(path, "r+b") : NULL;
    if (f) {
        long a = (long)cJSON_GetArrayItem(off, 0)->valuedouble;
        long b = (long)cJSON_GetArrayItem(off, 1)->valuedouble;
        rc = fseek(f, at + a, SEEK_SET);
        for (long p = a; rc == 0 && p < b; p += 4)
            rc = fwrite(&v, 4, 1, f) == 1 ? 0 : -1;
        rc |= fclose(f) != 0 ? -1 : 0;
    }
    cJSON_Delete(j);
    return rc;
}

static int grep_file(const char *path, const char *needle) {
    char *s = vt_test_slurp(path, NULL);
    int hit = s && strstr(s, needle) != NULL;
    free(s);
    return hit;
}

/* ---- evalproto ---- */

static void nan_scores_never_right(void) {
    vt_evalproto *e = vt_evalproto_init(2, 3, VT_LOSS_SOFTMAX_CE);
    const float nan_row[3] = {NAN, NAN, NAN}, half_nan[3] = {0.1f, NAN, 0.2f};
    const float good[3] = {0.7f, 0.2f, 0.1f};
    vt_evalproto_add(e, 0, 0, NULL, nan_row);  /* before the fix: top-1 (no class higher) */
    vt_evalproto_add(e, 0, 0, NULL, half_nan); /* a NaN in another class: still no answer */
    vt_evalproto_add(e, 1, 0, NULL, good);     /* right */
    vt_eval_result r;
    vt_evalproto_result(e, &r);
    TCHECK(r.clip_top1 == 1.0 / 3 && r.clip_top5 == 1.0 / 3, "NaN clips counted right: top-1 %g "
           "top-5 %g, want 1/3 each", r.clip_top1, r.clip_top5);
    TCHECK(r.video_top1 == 0.5 && r.video_top5 == 0.5, "NaN video counted right: top-1 %g top-5 %g",
           r.video_top1, r.video_top5);
    TCHECK(r.mean_class_acc == 0.5 && r.nonfinite == 2, "mean class %g (want 0.5), non-finite %lld "
           "(want 2)", r.mean_class_acc, (long long)r.nonfinite);
    /* the pack that merges ranks carries the count */
    double *pk = vt_malloc((size_t)vt_evalproto_pack_len(e) * sizeof(double));
    vt_evalproto_pack(e, pk);
    vt_evalproto *e2 = vt_evalproto_init(2, 3, VT_LOSS_SOFTMAX_CE);
    vt_evalproto_unpack(e2, pk);
    vt_eval_result r2;
    vt_evalproto_result(e2, &r2);
    TCHECK(r2.nonfinite == 2 && r2.video_top1 == 0.5, "unpacked: non-finite %lld, top-1 %g",
           (long long)r2.nonfinite, r2.video_top1);
    vt_eval_result_free(&r);
    vt_eval_result_free(&r2);
    vt_evalproto_free(&e);
    vt_evalproto_free(&e2);
    free(pk);
    /* BCE: a NaN score is neither above nor below 0.5, so it matched every 0 target */
    vt_evalproto *b = vt_evalproto_init(1, 2, VT_LOSS_BCE);
    const float tgt[2] = {0, 0}, nan2[2] = {NAN, NAN};
    vt_evalproto_add(b, 0, 0, tgt, nan2);
    vt_evalproto_result(b, &r);
    TCHECK(r.clip_top1 == 0 && r.video_top1 == 0 && r.nonfinite == 1, "BCE NaN: clip %g video %g",
           r.clip_top1, r.video_top1);
    vt_eval_result_free(&r);
    vt_evalproto_free(&b);
}

/* ---- --init files, through vt_net_load_init ---- */

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "FAIL test_nonfinite: --init on a FIFO blocked\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(1);
}

/* vt_net_load_init of path into a fresh tiny net: its rc, err into err. */
static int init_from(vt_backend *be, const char *path, char *err, size_t errlen) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "tiny", 3, 4, 32, 32);
    char e[512];
    vt_net *net = vt_net_init(&cfg, be, 1, e, sizeof e);
    VT_CHECK(net, "tiny: %s", e);
    vt_net_init_weights(net, 1);
    err[0] = 0;
    int rc = vt_net_load_init(net, path, 0, NULL, NULL, err, errlen);
    vt_net_free(&net);
    return rc;
}

/* tiny's tensors with their own shapes (all zero but num_batches_tracked) written as a
 * safetensors file; with `wrong_shapes` every float tensor gets a leading extra dim of 2,
 * so only the I64 counters still match; `nan_in`: that tensor's first value is NaN. */
static void write_tiny_like(vt_backend *be, const char *path, int wrong_shapes, const char *nan_in) {
    vt_net_cfg cfg;
    vt_net_cfg_default(&cfg, "tiny", 3, 4, 32, 32);
    char e[512];
    vt_net *net = vt_net_init(&cfg, be, 1, e, sizeof e);
    VT_CHECK(net, "tiny: %s", e);
    int nt = vt_net_num_tensors(net);
    vt_ckpt_out *outs = vt_calloc((size_t)nt, sizeof *outs);
    int64_t(*shapes)[9] = vt_calloc((size_t)nt, sizeof *shapes);
    float **data = vt_calloc((size_t)nt, sizeof *data);
    for (int i = 0; i < nt; i++) {
        const vt_tensor_info *t = vt_net_tensor(net, i);
        int extra = wrong_shapes && !t->is_int64;
        int64_t n = t->numel * (extra ? 2 : 1);
        data[i] = vt_calloc((size_t)(n ? n : 1), sizeof(float));
        if (nan_in && !strcmp(t->name, nan_in))
            data[i][0] = NAN;
        if (extra)
            shapes[i][0] = 2;
        for (int d = 0; d < t->ndim; d++)
            shapes[i][d + extra] = t->shape[d];
        outs[i] = (vt_ckpt_out){t->name, data[i], n, t->is_int64, t->ndim + extra, shapes[i]};
    }
    TCHECK(vt_ckpt_write_file(path, NULL, outs, nt, e, sizeof e) == 0, "write %s: %s", path, e);
    for (int i = 0; i < nt; i++)
        free(data[i]);
    free(data);
    free(shapes);
    free(outs);
    vt_net_free(&net);
}

static void init_files(void) {
    vt_backend *be = vt_backend_cpu_init(1, 0);
    char path[4300], err[1024];

    /* a directory: "is a directory", not "no such file" */
    TCHECK(init_from(be, g_dir, err, sizeof err) != 0 && strstr(err, "is a directory") &&
               !strstr(err, "no such file"), "directory: '%s'", err);

    /* a FIFO: said, never opened for reading (that would wait for a writer) */
    snprintf(path, sizeof path, "%s/fifo", g_dir);
    TCHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    signal(SIGALRM, on_alarm);
    alarm(20);
    TCHECK(init_from(be, path, err, sizeof err) != 0 && strstr(err, "not a regular file") &&
               strstr(err, "FIFO"), "FIFO: '%s'", err);
    alarm(0);

    /* a truncated .pth: a zip's local header and no central directory, as a download cut
     * short leaves it. A PyTorch file by its first bytes, reported as one. */
    snprintf(path, sizeof path, "%s/cut.pth", g_dir);
    FILE *f = fopen(path, "wb");
    static const unsigned char zip_head[] = {'P', 'K', 3, 4, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0,
                                             0, 0, 'a', 'r', 'c', 'h', 'i', 'v', 'e', '/'};
    TCHECK(f && fwrite(zip_head, 1, sizeof zip_head, f) == sizeof zip_head && fclose(f) == 0,
           "write %s", path);
    TCHECK(init_from(be, path, err, sizeof err) != 0 && strstr(err, "PyTorch") &&
               strstr(err, "zip") && !strstr(err, "safetensors"), "truncated zip: '%s'", err);

    /* only the BN counters match: refused, not "loaded 4 of 26 tensors" */
    snprintf(path, sizeof path, "%s/mismatch.safetensors", g_dir);
    write_tiny_like(be, path, 1, NULL);
    TCHECK(init_from(be, path, err, sizeof err) != 0 && strstr(err, "none of its weights"),
           "all weights mismatching: '%s'", err);

    /* the same names and shapes load; one NaN and the file is refused, naming it */
    snprintf(path, sizeof path, "%s/good.safetensors", g_dir);
    write_tiny_like(be, path, 0, NULL);
    TCHECK(init_from(be, path, err, sizeof err) == 0, "a matching file: '%s'", err);
    snprintf(path, sizeof path, "%s/nan.safetensors", g_dir);
    write_tiny_like(be, path, 0, "conv2.weight");
    TCHECK(init_from(be, path, err, sizeof err) != 0 && strstr(err, "'conv2.weight'") &&
               strstr(err, "NaN"), "NaN weight: '%s'", err);
    vt_backend_free(&be);
}

/* ---- the program ---- */

#define TRAIN_ARGS "--model tiny --epochs 3 --clip 4x32 --batch 2 --workers 1 -q"

static void diverged_run(void) {
    /* the repro: lr 10 diverges in epoch 3 (exact sums: the same on any machine) */
    int rc = vt_test_sh("cd '%s' && '%s' train '%s' --out r %s --lr 10 > r.out 2> r.err", g_dir,
                        g_bin, g_data, TRAIN_ARGS);
    char p[4400];
    snprintf(p, sizeof p, "%s/r.err", g_dir);
    TCHECK(rc == 1, "train --lr 10 exited %d, want 1", rc);
    TCHECK(grep_file(p, "vidtrain train: step ") && grep_file(p, "(epoch ") &&
               grep_file(p, "diverged") && grep_file(p, "--skip-nonfinite"),
           "no error naming the step in %s", p);
    static const char *const files[] = {"last.safetensors", "best.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/r/%s", g_dir, files[i]);
        if (access(p, F_OK) == 0)
            TCHECK(st_nonfinite_tensors(p) == 0, "%s holds %d non-finite tensor(s)", p,
                   st_nonfinite_tensors(p));
    }
    /* eval scores what was kept: never the 100% of NaN scores */
    snprintf(p, sizeof p, "%s/r/best.safetensors", g_dir);
    if (access(p, F_OK) == 0) {
        rc = vt_test_sh("cd '%s' && '%s' eval r '%s' > e.out 2>&1", g_dir, g_bin, g_data);
        snprintf(p, sizeof p, "%s/e.out", g_dir);
        TCHECK(rc == 0 && !grep_file(p, "video top-1 100.00%"), "eval of the kept model: rc %d", rc);
    }
}

static void skip_nonfinite(void) {
    int rc = vt_test_sh("cd '%s' && '%s' train '%s' --out s %s --lr 10 --skip-nonfinite > s.out "
                        "2> s.err", g_dir, g_bin, g_data, TRAIN_ARGS);
    TCHECK(rc == 0, "train --skip-nonfinite exited %d", rc);
    char p[4400];
    snprintf(p, sizeof p, "%s/s.out", g_dir);
    TCHECK(grep_file(p, "non-finite step(s) skipped") && grep_file(p, "skipped: "),
           "no count of skipped steps in %s", p);
    snprintf(p, sizeof p, "%s/s/metrics.jsonl", g_dir);
    TCHECK(grep_file(p, "\"skipped_steps\":"), "no skipped_steps in %s", p);
    static const char *const files[] = {"last.safetensors", "best.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/s/%s", g_dir, files[i]);
        TCHECK(st_nonfinite_tensors(p) == 0, "%s: %d non-finite tensor(s) (-1: unreadable)", p,
               st_nonfinite_tensors(p));
    }
}

/* The command's stderr (in DIR/cmd.err) names the tensor and says why. */
static void refused(const char *what, int rc, const char *tensor) {
    char p[4400];
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    TCHECK(rc != 0 && grep_file(p, tensor) && grep_file(p, "non-finite") && grep_file(p, "--lr"),
           "%s: rc %d, the refusal does not name '%s' (see %s)", what, rc, tensor, p);
}

static void refusals(void) {
    /* a finished run (s) whose best.safetensors gets a NaN */
    TCHECK(vt_test_sh("cd '%s' && cp -a s n && cp n/best.safetensors nan.safetensors", g_dir) == 0,
           "copy the run");
    char p[4400];
    snprintf(p, sizeof p, "%s/n/best.safetensors", g_dir);
    TCHECK(st_poison(p, "conv2.weight") == 0 && st_nonfinite_tensors(p) == 1, "poison %s", p);
    snprintf(p, sizeof p, "%s/nan.safetensors", g_dir);
    TCHECK(st_poison(p, "conv2.weight") == 0, "poison %s", p);
    char video[4400];
    TCHECK(vt_test_sh_line(video, sizeof video, "cd '%s' && ls data/test/*/* | head -1", g_dir)
               == 0, "a video");
    int rc = vt_test_sh("cd '%s' && '%s' eval n '%s' > cmd.out 2> cmd.err", g_dir, g_bin, g_data);
    refused("eval", rc, "conv2.weight");
    rc = vt_test_sh("cd '%s' && '%s' predict n '%s' > cmd.out 2> cmd.err", g_dir, g_bin, video);
    refused("predict", rc, "conv2.weight");
    rc = vt_test_sh("cd '%s' && '%s' export n --onnx n.onnx > cmd.out 2> cmd.err", g_dir, g_bin);
    refused("export", rc, "conv2.weight");
    rc = vt_test_sh("cd '%s' && '%s' embed n '%s' --out emb.npy > cmd.out 2> cmd.err", g_dir,
                    g_bin, video);
    refused("embed", rc, "conv2.weight");
    /* finite weights whose scores overflow (fc 3e38 everywhere: logits inf, softmax NaN):
     * the checkpoint check passes them, so eval must count every clip wrong, and say so,
     * where NaN's "no class scores higher" printed 100% before; predict names no class */
    TCHECK(vt_test_sh("cd '%s' && rm -rf o && cp -a s o", g_dir) == 0, "copy the run");
    snprintf(p, sizeof p, "%s/o/best.safetensors", g_dir);
    TCHECK(st_fill(p, "fc.weight", 3e38f) == 0 && st_nonfinite_tensors(p) == 0, "overflow %s", p);
    rc = vt_test_sh("cd '%s' && '%s' eval o '%s' > cmd.out 2> cmd.err", g_dir, g_bin, g_data);
    snprintf(p, sizeof p, "%s/cmd.out", g_dir);
    TCHECK(rc == 0 && grep_file(p, "non-finite scores: 60 of 60 clips") &&
               grep_file(p, "video top-1   0.00%   top-5   0.00%") &&
               grep_file(p, "mean class accuracy 0.00%"),
           "eval of an overflowing model: rc %d (see %s)", rc, p);
    snprintf(p, sizeof p, "%s/o/eval.json", g_dir);
    cJSON *ej = vt_test_read_json(p);
    const cJSON *nf = cJSON_GetObjectItem(ej, "nonfinite_clips");
    TCHECK(cJSON_IsNumber(nf) && nf->valuedouble == 60, "no nonfinite_clips 60 in %s", p);
    cJSON_Delete(ej);
    rc = vt_test_sh("cd '%s' && '%s' predict o '%s' --dump-input od.json > cmd.out 2> cmd.err",
                    g_dir, g_bin, video);
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    TCHECK(rc != 0 && grep_file(p, "scores are not finite"), "predict of an overflowing model: "
           "rc %d (see %s)", rc, p);
    /* --dump-input holds the videos predicted: not the one skipped (its NaN probabilities
     * went into the dump) */
    snprintf(p, sizeof p, "%s/od.json", g_dir);
    cJSON *od = vt_test_read_json(p);
    TCHECK(cJSON_IsArray(od) && cJSON_GetArraySize(od) == 0, "predict --dump-input of a skipped "
           "video: %d entries (0)", od ? cJSON_GetArraySize(od) : -1);
    cJSON_Delete(od);
    /* a constant model (fc 0: every class the same score on every clip) answers nothing:
     * eval scores it 0%, where argmax's first maximum gave it class 0's share (33% here,
     * 100% on a split of class 0 alone) */
    TCHECK(vt_test_sh("cd '%s' && rm -rf z && cp -a s z", g_dir) == 0, "copy the run");
    snprintf(p, sizeof p, "%s/z/best.safetensors", g_dir);
    TCHECK(st_fill(p, "fc.weight", 0) == 0 && st_fill(p, "fc.bias", 0) == 0, "zero %s", p);
    rc = vt_test_sh("cd '%s' && '%s' eval z '%s' > cmd.out 2> cmd.err", g_dir, g_bin, g_data);
    snprintf(p, sizeof p, "%s/cmd.out", g_dir);
    TCHECK(rc == 0 && grep_file(p, "clip  top-1   0.00%") &&
               grep_file(p, "video top-1   0.00%") && grep_file(p, "mean class accuracy 0.00%"),
           "eval of a constant model: rc %d (see %s)", rc, p);
    /* predict says it is a tie rather than naming class 0 as if it were the answer */
    rc = vt_test_sh("cd '%s' && '%s' predict z '%s' --clips-per-video 2 > cmd.out 2> cmd.err "
                    "&& '%s' predict z '%s' --clips-per-video 2 --json > tie.json 2>> cmd.err",
                    g_dir, g_bin, video, g_bin, video);
    snprintf(p, sizeof p, "%s/cmd.out", g_dir);
    int said = grep_file(p, "(a tie: the top score is shared");
    snprintf(p, sizeof p, "%s/tie.json", g_dir);
    TCHECK(rc == 0 && said && grep_file(p, "\"tie\":\ttrue"), "predict of a constant model: rc "
           "%d, the tie said %d (see %s)", rc, said, p);
    /* so do its windows (--timeline) and embed's rows (no label, the shared score) */
    rc = vt_test_sh("cd '%s' && '%s' predict z '%s' --timeline --json > tie.jsonl 2> cmd.err && "
                    "'%s' embed z '%s' --out tie.npy --clips-per-video 2 > cmd.out 2> tie.err",
                    g_dir, g_bin, video, g_bin, video);
    snprintf(p, sizeof p, "%s/tie.jsonl", g_dir);
    said = grep_file(p, "\"tie\":true");
    snprintf(p, sizeof p, "%s/tie.csv", g_dir);
    char *tcsv = vt_test_slurp(p, NULL);
    const char *trow = tcsv ? strchr(tcsv, '\n') : NULL;
    snprintf(p, sizeof p, "%s/tie.err", g_dir);
    TCHECK(rc == 0 && said && trow && strstr(trow, ",,,0.333333") && grep_file(p, "(a tie"),
           "--timeline and embed of a constant model: rc %d, windows say it %d, row %s", rc,
           said, trow ? trow : "(none)");
    free(tcsv);
    /* the same with a bias that picks class 0 for every clip: not a tie, so scored as what
     * it is (class 0's share), and said to be one answer whatever the clip */
    snprintf(p, sizeof p, "%s/z/best.safetensors", g_dir);
    TCHECK(st_set_first(p, "fc.bias", 1) == 0, "bias %s", p);
    rc = vt_test_sh("cd '%s' && '%s' eval z '%s' > cmd.out 2> cmd.err", g_dir, g_bin, g_data);
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    TCHECK(rc == 0 && grep_file(p, "every video was predicted 'move_left'"),
           "eval of a one-answer model: rc %d, no warning (see %s)", rc, p);
    /* a negative batch-norm variance (no training writes one; every output NaN): export
     * wrote an ONNX model of NaN outputs, exit 0; it, predict and --init refuse it */
    TCHECK(vt_test_sh("cd '%s' && rm -rf nv && cp -a s nv", g_dir) == 0, "copy the run");
    snprintf(p, sizeof p, "%s/nv/best.safetensors", g_dir);
    TCHECK(st_fill(p, "bn2.running_var", -1) == 0, "negative variance %s", p);
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    rc = vt_test_sh("cd '%s' && '%s' export nv --onnx nv.onnx > cmd.out 2> cmd.err", g_dir, g_bin);
    TCHECK(rc == 1 && grep_file(p, "bn2.running_var") && grep_file(p, "negative variance") &&
               vt_test_sh("test ! -e '%s/nv.onnx'", g_dir) == 0,
           "export of a negative variance: rc %d (see %s)", rc, p);
    rc = vt_test_sh("cd '%s' && '%s' predict nv '%s' > cmd.out 2> cmd.err", g_dir, g_bin, video);
    TCHECK(rc == 1 && grep_file(p, "negative variance"), "predict: rc %d (see %s)", rc, p);
    rc = vt_test_sh("cd '%s' && '%s' train '%s' --out nvi %s --init nv/best.safetensors > "
                    "cmd.out 2> cmd.err", g_dir, g_bin, g_data, TRAIN_ARGS);
    TCHECK(rc != 0 && grep_file(p, "negative variance"), "--init: rc %d (see %s)", rc, p);
    /* predict --timeline: each window says it has no answer, none ranks NaN */
    rc = vt_test_sh("cd '%s' && '%s' predict o '%s' --timeline --json > cmd.out 2> cmd.err", g_dir,
                    g_bin, video);
    snprintf(p, sizeof p, "%s/cmd.out", g_dir);
    TCHECK(grep_file(p, "\"nonfinite\":true") && !grep_file(p, "\"label\""),
           "predict --timeline of an overflowing model: rc %d (see %s)", rc, p);
    /* embed of it: the features are finite (only the classifier overflows), so the row
     * stays, but its scores name no class (the CSV named the first class, prob -nan),
     * with a warning */
    rc = vt_test_sh("cd '%s' && '%s' embed o '%s' --out oe.npy --clips-per-video 2 > cmd.out 2> "
                    "cmd.err", g_dir, g_bin, video);
    snprintf(p, sizeof p, "%s/oe.csv", g_dir);
    char *csv = vt_test_slurp(p, NULL);
    const char *row = csv ? strchr(csv, '\n') : NULL;
    /* label and prob empty, then the damage columns (decode_errors, filled_frames) */
    TCHECK(rc == 0 && row && strstr(row, ",,,0,0\n") && !strstr(row, "nan"),
           "embed of an overflowing classifier: rc %d, rows %s", rc, row ? row : "(none)");
    free(csv);
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    TCHECK(grep_file(p, "not finite"), "embed: no warning of the non-finite scores");
    /* features that overflow (conv4 3e38: inf after the pool): no embedding, the video
     * named and skipped (inf features were written, exit 0), with predict's hint */
    TCHECK(vt_test_sh("cd '%s' && rm -rf of && cp -a s of", g_dir) == 0, "copy the run");
    snprintf(p, sizeof p, "%s/of/best.safetensors", g_dir);
    TCHECK(st_fill(p, "conv4.weight", 3e38f) == 0, "overflow %s", p);
    for (int tl = 0; tl < 2; tl++) {
        rc = vt_test_sh("cd '%s' && rm -f of.npy && '%s' embed of '%s' --out of.npy %s > cmd.out "
                        "2> cmd.err", g_dir, g_bin, video, tl ? "--timeline" : "");
        snprintf(p, sizeof p, "%s/cmd.err", g_dir);
        TCHECK(rc == 1 && grep_file(p, "features are not finite"), "embed%s of overflowing "
               "features: rc %d (1), see %s", tl ? " --timeline" : "", rc, p);
    }
    /* --init from it: refused before any training */
    rc = vt_test_sh("cd '%s' && '%s' train '%s' --out i %s --init nan.safetensors > cmd.out 2> "
                    "cmd.err", g_dir, g_bin, g_data, TRAIN_ARGS);
    snprintf(p, sizeof p, "%s/cmd.err", g_dir);
    TCHECK(rc != 0 && grep_file(p, "conv2.weight") && grep_file(p, "non-finite"),
           "train --init with a NaN: rc %d (see %s)", rc, p);
    /* a directory and a FIFO as --init: said, and a FIFO never waited on (timeout) */
    rc = vt_test_sh("cd '%s' && '%s' train '%s' --out i %s --init data > cmd.out 2> cmd.err", g_dir,
                    g_bin, g_data, TRAIN_ARGS);
    TCHECK(rc != 0 && grep_file(p, "is a directory"), "--init DIR: rc %d", rc);
    rc = vt_test_sh("cd '%s' && rm -f f && mkfifo f && timeout 60 '%s' train '%s' --out i %s "
                    "--init f > cmd.out 2> cmd.err", g_dir, g_bin, g_data, TRAIN_ARGS);
    TCHECK(rc != 0 && rc != 124 && grep_file(p, "not a regular file"), "--init FIFO: rc %d", rc);
}

int main(void) {
    g_bin = vt_test_bin("test_nonfinite");
    nan_scores_never_right();
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("nonfinite"));
    init_files();
    if (!g_bin)
        return vt_test_done("test_nonfinite");
    snprintf(g_data, sizeof g_data, "%s/data", g_dir);
    TCHECK(vt_test_synth(g_bin, g_dir, "--classes 3 --train 4 --val 2 --test 2 --frames 12") == 0,
           "synth");
    diverged_run();
    skip_nonfinite();
    refusals();
    return vt_test_done("test_nonfinite");
}
