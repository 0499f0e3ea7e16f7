/*
 * test_model_outputs.c: the commands that read a trained model (eval, predict, embed) and
 * the files they write (docs/design.md §3.8), each case a defect found on main:
 *   - the run's labels file (train --labels) is an input of every command that opens the
 *     run: embed --out LABELS.npy wrote its row-naming CSV over it, exit 0, and the run
 *     could no longer be evaluated; refused now with the file unchanged, from a video
 *     list and from the dataset folder alike; so is embed's own --labels file;
 *   - predict --dump-input onto RUN/config.json (an input the run declares) was refused
 *     only after every video was decoded and predicted; now at once, exit 2, nothing
 *     predicted, the file unchanged; eval of a run that lies inside DIR (an input
 *     folder) is refused before it evaluates, not after;
 *   - eval read DIR with the run's labels file only: a test folder labelled apart (its
 *     own labels file) could not be evaluated; eval --labels names DIR's own, an input
 *     like embed's (one of the files eval writes is refused before evaluating);
 *   - a damaged stream's frames that never decode are filled with the nearest decoded
 *     frame (video.h): eval, predict and embed said nothing, so a video scored from a
 *     few repeated frames passed as whole; eval prints and counts them (eval.json
 *     "filled_frames"), predict and embed warn per video (predict --json too);
 *   - a validation video with a clip that does not decode was dropped from every later
 *     validation (the loader skipped videos marked bad in evaluations too), so the
 *     epochs' figures compared other sets of videos; every pass now scores the same;
 *   - eval RUN --checkpoint of another run's checkpoint (another model, clip, statistics
 *     or classes than RUN/config.json) wrote that model's figures into RUN's eval.json
 *     and report; refused, the run's own checkpoints still taken;
 *   - two evals of one run at the same time wrote eval.json, confusion.csv and
 *     report.html interleaved (eval.json of one split, confusion.csv of the other): an
 *     eval holds the run folder's write lock (an flock on RUN) while it writes its set,
 *     so it waits while another holds it (here flock(1) holds it) and writes when it is
 *     released; embed likewise for its FILE and FILE.csv, on --out's folder;
 *   - the run's paths (its dataset, labels file, lists, --init) were recorded as given,
 *     relative to the folder train ran in: eval from another folder read the file of that
 *     name there as the run's labels; config.json holds their real paths, and an earlier
 *     run's relative labels file is said to be read from the folder eval runs in.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *g_bin;
static char g_dir[4096];

/* 1 when files a and b (under g_dir) hold the same bytes. */
static int same_bytes(const char *a, const char *b) {
    char pa[4300], pb[4300];
    snprintf(pa, sizeof pa, "%s/%s", g_dir, a);
    snprintf(pb, sizeof pb, "%s/%s", g_dir, b);
    long la = 0, lb = 0;
    char *x = vt_test_slurp(pa, &la), *y = vt_test_slurp(pb, &lb);
    int same = x && y && la == lb && !memcmp(x, y, (size_t)la);
    free(x);
    free(y);
    return same;
}

static void labels_kept(void) {
    /* embed from a video list, and from the dataset folder: the CSV beside --out would be
     * the run's labels file */
    static const char *const inputs[] = {"data/test/*/* ", "data --split test "};
    for (int i = 0; i < 2; i++) {
        int rc = vt_test_sh("cd '%s' && '%s' embed run %s --out lab.npy --clips-per-video 1 > "
                            "/dev/null 2> e.err", g_dir, g_bin, inputs[i]);
        TCHECK(rc == 1 && same_bytes("lab.csv", "lab.keep"),
               "embed run %s--out lab.npy: exit %d (1), the run's labels file %s", inputs[i], rc,
               same_bytes("lab.csv", "lab.keep") ? "kept" : "REPLACED");
        if (!same_bytes("lab.csv", "lab.keep"))
            vt_test_sh("cd '%s' && cp lab.keep lab.csv", g_dir);
    }
    /* embed's own --labels (a copy of the run's): the same rule */
    int rc = vt_test_sh("cd '%s' && cp lab.keep own.csv && '%s' embed run data --labels own.csv "
                        "--split test --out own.safetensors --clips-per-video 1 > /dev/null 2> "
                        "e.err", g_dir, g_bin);
    TCHECK(rc != 0 && same_bytes("own.csv", "lab.keep"), "embed --labels own.csv --out "
           "own.safetensors: exit %d, own.csv %s", rc,
           same_bytes("own.csv", "lab.keep") ? "kept" : "REPLACED");
}

static void dump_refused_early(void) {
    int rc = vt_test_sh("cd '%s' && cp run/config.json cfg.keep && v=$(ls data/test/*/* | head "
                        "-1) && '%s' predict run \"$v\" --dump-input run/config.json > p.out 2> "
                        "p.err", g_dir, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/p.out", g_dir);
    char *out = vt_test_slurp(p, NULL);
    TCHECK(rc == 2 && out && !strstr(out, "1. "), "predict --dump-input RUN/config.json: exit %d "
           "(2), %s", rc, out && strstr(out, "1. ") ? "predicted first" : "nothing predicted");
    free(out);
    TCHECK(same_bytes("run/config.json", "cfg.keep"), "RUN/config.json changed");
}

static void eval_inside_data(void) {
    /* a copy of the run inside a folder eval reads: eval.json there would be inside an
     * input folder; refused before any clip is evaluated (it was after all of them) */
    int rc = vt_test_sh("cd '%s' && rm -rf dd && mkdir dd && cp -a data/test dd/ && cp -a run "
                        "dd/run && rm -f dd/run/eval.json && '%s' eval dd/run dd -q "
                        "--clips-per-video 1 > dd.out 2> dd.err", g_dir, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/dd.out", g_dir);
    char *out = vt_test_slurp(p, NULL);
    snprintf(p, sizeof p, "%s/dd.err", g_dir);
    TCHECK(rc == 1 && out && !strstr(out, "clips evaluated") && vt_test_file_has(p, "dd/run/"
           "eval.json"), "eval of a run inside DIR: exit %d (1), %s", rc,
           out && strstr(out, "clips evaluated") ? "refused after evaluating" : "see dd.err");
    free(out);
}

static void eval_own_labels(void) {
    /* a test folder labelled apart from the training folder (its own layout and labels
     * file): eval read it with the run's labels file only, whose rows name none of its
     * videos, and could not evaluate it; --labels names its own, as embed's does. The
     * truth: each video's class is the synth folder it was copied from */
    int rc = vt_test_sh("cd '%s' && rm -rf od && mkdir -p od/test/all && (echo path,class; for f "
                        "in data/test/*/*; do c=${f#data/test/}; c=${c%%/*}; n=$c-${f##*/}; cp "
                        "\"$f\" od/test/all/$n; echo \"test/all/$n,$c\"; done) > od.csv", g_dir);
    TCHECK(rc == 0, "the test folder od (copies of data/test)");
    rc = vt_test_sh("cd '%s' && '%s' eval run od -q --clips-per-video 1 > od.out 2> od.err",
                    g_dir, g_bin);
    TCHECK(rc == 1, "eval run od (the run's labels file names none of od's videos): exit %d (1)",
           rc);
    rc = vt_test_sh("cd '%s' && '%s' eval run od --labels od.csv -q --clips-per-video 1 > od.out "
                    "2> od.err", g_dir, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/run/eval.json", g_dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *v = cJSON_GetObjectItem(j, "videos"), *u = cJSON_GetObjectItem(j, "unknown_videos");
    const cJSON *d = cJSON_GetObjectItem(j, "data");
    TCHECK(rc == 0 && cJSON_IsNumber(v) && v->valuedouble == 2 && cJSON_IsNumber(u) &&
           u->valuedouble == 0 && cJSON_IsString(d) && !strcmp(d->valuestring, "od"),
           "eval run od --labels od.csv: exit %d (0), eval.json videos %g (2), unknown %g (0), "
           "data %s (od)", rc, cJSON_IsNumber(v) ? v->valuedouble : -1,
           cJSON_IsNumber(u) ? u->valuedouble : -1, cJSON_IsString(d) ? d->valuestring : "?");
    cJSON_Delete(j);
    /* --labels is an input: one of the files eval writes is refused before evaluating */
    rc = vt_test_sh("cd '%s' && cp od.csv run/confusion.csv && '%s' eval run od --labels "
                    "run/confusion.csv -q --clips-per-video 1 > od.out 2> od.err", g_dir, g_bin);
    snprintf(p, sizeof p, "%s/od.out", g_dir);
    char *out = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && out && !strstr(out, "clips evaluated") && same_bytes("run/confusion.csv",
           "od.csv"), "eval --labels RUN/confusion.csv: exit %d (1), %s, the file %s", rc,
           out && strstr(out, "clips evaluated") ? "refused after evaluating" : "not evaluated",
           same_bytes("run/confusion.csv", "od.csv") ? "kept" : "REPLACED");
    free(out);
    vt_test_sh("cd '%s' && rm -f run/confusion.csv", g_dir);
}

static void filled_frames_said(void) {
    /* an MJPEG stream whose middle 6%% is overwritten: its index lists frames the decoder
     * never delivers, and vt_video_read_clip fills them with the nearest decoded one
     * (video.h). eval, predict and embed scored such a video as whole, unsaid */
    int rc = vt_test_sh("cd '%s' && f=data/test/move_left/zz.mp4 && ffmpeg -v error -y -f "
                        "lavfi -i testsrc=size=96x72:rate=25 -frames:v 40 -c:v mjpeg $f && "
                        "s=$(stat -c %%s $f) && head -c $((s * 6 / 100)) /dev/zero | tr '\\0' "
                        "'\\377' | dd of=$f bs=1 seek=$((s / 2)) conv=notrunc status=none && "
                        "echo test/move_left/zz.mp4,move_left >> lab.csv", g_dir);
    TCHECK(rc == 0, "the damaged video (ffmpeg)");
    /* (the run reads its labels file for any folder: the video has its row there) */
    rc = vt_test_sh("cd '%s' && '%s' predict run data/test/move_left/zz.mp4 --json > dp.out 2> "
                    "dp.err && '%s' eval run data -q > de.out 2> de.err", g_dir, g_bin, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/dp.out", g_dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "filled_frames");
    double pf = cJSON_IsNumber(f) ? f->valuedouble : 0;
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/dp.err", g_dir);
    TCHECK(rc == 0 && pf >= 1 && vt_test_file_has(p, "never decoded"), "predict of a damaged "
           "video: exit %d, filled_frames %g (>= 1), warning %s", rc, pf,
           vt_test_file_has(p, "never decoded") ? "given" : "missing");
    snprintf(p, sizeof p, "%s/run/eval.json", g_dir);
    j = vt_test_read_json(p);
    f = cJSON_GetObjectItem(j, "filled_frames");
    double ef = cJSON_IsNumber(f) ? f->valuedouble : 0;
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/de.out", g_dir);
    TCHECK(ef >= 1 && vt_test_file_has(p, "frames filled in"), "eval of a damaged video: "
           "eval.json filled_frames %g (>= 1), line %s", ef,
           vt_test_file_has(p, "frames filled in") ? "printed" : "missing");
    /* the count is the data's: 3 crops count each clip 3 times, whatever the batch and
     * the workers (the loader's shared decode of a clip's crops counted once, and which
     * crops shared one depended on the batch: 7 or 4 for 12) */
    rc = vt_test_sh("cd '%s' && '%s' eval run data -q --crops 3 --batch 5 --workers 3 > /dev/null "
                    "2>&1", g_dir, g_bin);
    snprintf(p, sizeof p, "%s/run/eval.json", g_dir);
    j = vt_test_read_json(p);
    f = cJSON_GetObjectItem(j, "filled_frames");
    double ef3 = cJSON_IsNumber(f) ? f->valuedouble : 0;
    cJSON_Delete(j);
    TCHECK(rc == 0 && ef3 == 3 * ef, "eval --crops 3 --batch 5: filled_frames %g, want 3 x %g",
           ef3, ef);
}

static void validation_keeps_its_videos(void) {
    /* a validation video whose middle never decodes (MJPEG, 28%%..98%% of the file
     * overwritten): its failing clips were counted, and the video marked bad and dropped
     * from every later validation, so epoch 2 scored 1 video fewer than epoch 1 (and the
     * best checkpoint was picked over other sets of videos) */
    int rc = vt_test_sh("cd '%s' && rm -rf dv rv && cp -r data dv && f=dv/val/move_left/zz.mp4 && "
                        "ffmpeg -v error -y -f lavfi -i testsrc=size=96x72:rate=25 -frames:v 40 "
                        "-c:v mjpeg -movflags +faststart $f && s=$(stat -c %%s $f) && head -c "
                        "$((s * 70 / 100)) /dev/zero | tr '\\0' '\\377' | dd of=$f bs=1 "
                        "seek=$((s * 28 / 100)) conv=notrunc status=none && '%s' train dv --out rv "
                        "--model tiny --clip 4x32 --batch 2 --epochs 2 --val-clips 10 --devices "
                        "cpu:1 -q > rv.out 2> rv.err", g_dir, g_bin);
    TCHECK(rc == 0, "train with a damaged validation video (see %s/rv.err)", g_dir);
    char p[4300];
    snprintf(p, sizeof p, "%s/rv.out", g_dir);
    char *out = vt_test_slurp(p, NULL);
    int n[2] = {-1, -1};
    for (int e = 0; e < 2 && out; e++) {
        char key[32];
        snprintf(key, sizeof key, "epoch %d/2:", e + 1);
        const char *l = strstr(out, key), *v = l ? strstr(l, " videos)") : NULL;
        while (v && v > l && v[-1] != '(')
            v--;
        n[e] = v ? atoi(v) : -1;
    }
    free(out);
    snprintf(p, sizeof p, "%s/rv.err", g_dir);
    TCHECK(n[0] == 3 && n[1] == 3 && vt_test_file_has(p, "no frame of the clip decoded"),
           "validation videos by epoch: %d, %d (3 each: the damaged one kept; see %s/rv.out)",
           n[0], n[1], g_dir);
}

static void foreign_checkpoint(void) {
    /* a copy of the run whose config.json says another crop: the run's checkpoint is not
     * one of it, and eval of it there would file its figures as the copy's */
    int rc = vt_test_sh("cd '%s' && rm -rf other && cp -a run other && rm -f other/eval.json && "
                        "sed -i -E 's/\"crop\":[[:space:]]*32/\"crop\": 48/' other/config.json "
                        "&& grep -q '\"crop\": 48' other/config.json", g_dir);
    TCHECK(rc == 0, "the copy with another crop");
    rc = vt_test_sh("cd '%s' && '%s' eval other data -q --clips-per-video 1 --checkpoint "
                    "run/best.safetensors > fc.out 2> fc.err", g_dir, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/fc.err", g_dir);
    int said = vt_test_file_has(p, "not a checkpoint of the run");
    snprintf(p, sizeof p, "%s/other/eval.json", g_dir);
    char *ej = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && said && !ej, "eval OTHER --checkpoint RUN's: exit %d (1), %s, eval.json "
           "%s", rc, said ? "said" : "not said", ej ? "WRITTEN" : "not written");
    free(ej);
    /* the run's own last checkpoint: taken */
    rc = vt_test_sh("cd '%s' && '%s' eval run data -q --clips-per-video 1 --checkpoint "
                    "run/last.safetensors > /dev/null 2>&1", g_dir, g_bin);
    TCHECK(rc == 0, "eval --checkpoint of the run's own last: exit %d", rc);
}

/* flock(1) holds folder `lock` until the file 'go' appears; `cmd` runs meanwhile (stdout
 * line buffered through stdbuf's preloaded library, which an ASan build accepts only with
 * verify_asan_link_order=0; stderr beside it, so its progress shows) and must not write `out` while
 * the lock is held, once `marker` shows it has done its work, then must write it once
 * released. */
static void waits_for_lock(const char *what, const char *lock, const char *cmd,
                           const char *marker, const char *out) {
    int rc = vt_test_sh(
        "cd '%s' && rm -f go early.txt '%s' w.out && (flock '%s' sh -c 'while [ ! -e go ]; do "
        "sleep 0.1; done' &) && sleep 0.3 && (ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
        "verify_asan_link_order=0 stdbuf -oL %s > w.out 2>&1; echo \"exit $?\" >> "
        "w.out) & cd '%s' && for i in $(seq 600); do grep -q '%s' w.out && break; sleep 0.1; "
        "done; sleep 1; test -e '%s' && echo early > early.txt; touch go; wait; grep -q 'exit 0' "
        "w.out", g_dir, out, lock, cmd, g_dir, marker, out);
    char p[4300];
    snprintf(p, sizeof p, "%s/early.txt", g_dir);
    char *early = vt_test_slurp(p, NULL);
    snprintf(p, sizeof p, "%s/%s", g_dir, out);
    char *o = vt_test_slurp(p, NULL);
    TCHECK(rc == 0 && !early && o, "%s while another holds %s's write lock: wrote %s %s (exit "
           "check %d, see %s/w.out)", what, lock, out, early ? "while it was held" : o ? "after"
           : "never", rc, g_dir);
    free(early);
    free(o);
}

static void one_set_at_a_time(void) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "'%s' eval run data -q --clips-per-video 1", g_bin);
    waits_for_lock("eval", "run", cmd, "clips evaluated", "run/eval.json");
    /* embed's FILE and FILE.csv: a pair, under the lock of --out's folder */
    vt_test_sh("mkdir -p '%s/eo'", g_dir);
    snprintf(cmd, sizeof cmd, "'%s' embed run data/test/move_right/* --out eo/x.npy "
             "--clips-per-video 1", g_bin);
    waits_for_lock("embed", "eo", cmd, "(100%)", "eo/x.npy");
}

static void labels_from_elsewhere(void) {
    /* train --labels lab.csv named it relative to the folder train ran in, and config.json
     * kept it so: an eval run from another folder read that folder's lab.csv as the run's
     * labels (here a decoy that labels everything 'zzz': every video left out, exit 1; a
     * decoy with the classes swapped was scored, exit 0). The run records the real path. */
    int rc = vt_test_sh("cd '%s' && rm -rf elsewhere && mkdir elsewhere && sed 's/,[a-z_]*$/,zzz/' "
                        "lab.keep > elsewhere/lab.csv && cd elsewhere && '%s' eval ../run ../data "
                        "--split test -q --clips-per-video 1 > el.out 2> el.err", g_dir, g_bin);
    char p[4300];
    snprintf(p, sizeof p, "%s/elsewhere/el.err", g_dir);
    TCHECK(rc == 0 && !vt_test_file_has(p, "zzz"), "eval from another folder read its lab.csv "
           "as the run's: exit %d (see %s)", rc, p);
    snprintf(p, sizeof p, "%s/run/config.json", g_dir);
    cJSON *c = vt_test_read_json(p);
    const cJSON *l = cJSON_GetObjectItem(c, "labels"), *d = cJSON_GetObjectItem(c, "data");
    TCHECK(cJSON_IsString(l) && l->valuestring[0] == '/' && cJSON_IsString(d) &&
           d->valuestring[0] == '/', "config.json's labels and data are not absolute paths");
    cJSON_Delete(c);
    /* a run of an earlier vidtrain (its checkpoint's configuration rewritten by Python to
     * name lab.csv as given): still read from here, and said */
    static const char *const prog =
        "import json, struct, sys\n"
        "b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]\n"
        "h = json.loads(b[8:8 + n]); m = h['__metadata__']\n"
        "c = json.loads(m['vidtrain_config']); c['labels'] = 'lab.csv'\n"
        "m['vidtrain_config'] = json.dumps(c)\n"
        "hb = json.dumps(h).encode(); hb += b' ' * (-len(hb) % 8)\n"
        "open(sys.argv[1], 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])\n";
    rc = vt_test_sh("cd '%s' && rm -rf oldrun && cp -a run oldrun && rm oldrun/last.safetensors "
                    "&& '%s' -c \"%s\" oldrun/best.safetensors && '%s' eval oldrun data --split "
                    "test -q --clips-per-video 1 > old.out 2> old.err", g_dir,
                    vt_test_env("VT_PYTHON", "/usr/bin/python3"), prog, g_bin);
    snprintf(p, sizeof p, "%s/old.err", g_dir);
    TCHECK(rc == 0 && vt_test_file_has(p, "labels file 'lab.csv' is a path relative"),
           "an earlier run's relative labels file: exit %d, not said (see %s)", rc, p);
}

int main(void) {
    g_bin = vt_test_bin("test_model_outputs");
    if (!g_bin)
        return VT_TEST_SKIP;
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("model_outputs"));
    int rc = vt_test_synth(g_bin, g_dir, "--classes 2 --train 2 --val 1 --test 1 --frames 16");
    TCHECK(rc == 0, "synth");
    /* a labels file outside the dataset, as train --labels names it */
    rc = vt_test_sh("cd '%s/data' && (echo path,class; for f in */*/*; do c=${f#*/}; echo "
                    "\"$f,${c%%/*}\"; done) > ../lab.csv && cp ../lab.csv ../lab.keep && cd .. && "
                    "'%s' train data --labels lab.csv --out run --model tiny --clip 4x32 --batch 2 "
                    "--epochs 1 --devices cpu:1 -q > train.log 2>&1", g_dir, g_bin);
    TCHECK(rc == 0, "train (see %s/train.log)", g_dir);
    if (rc != 0)
        return vt_test_done("test_model_outputs");
    labels_kept();
    dump_refused_early();
    eval_inside_data();
    eval_own_labels();
    filled_frames_said();
    foreign_checkpoint();
    validation_keeps_its_videos();
    one_set_at_a_time();
    labels_from_elsewhere();
    return vt_test_done("test_model_outputs");
}
