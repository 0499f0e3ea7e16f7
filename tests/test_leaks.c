/*
 * test_leaks.c: near-copies across splits (app/leaks.h, pipeline/data/signature.h) through
 * the commands a user runs, on a synthetic motion set (`vidtrain synth --preset motion`)
 * into whose test split the `ffmpeg` command plants copies of one training video:
 *   - identical (cp), re-encoded (libx264 at a high CRF, or mpeg4 without it), cropped
 *     (the central 80%, scaled back) and trimmed (the first 0.6 s cut): `scan --json`
 *     pairs each with its original, and the count per split is 4;
 *   - no other pair: the other videos of each synthetic class (same kind of world, same
 *     camera motion) are not flagged — the truth is which files the test made;
 *   - a second scan reads every signature from the cache (VIDTRAIN_CACHE); a FIFO in its
 *     place is not waited on (recomputed);
 *   - `train --strict-splits` stops before training with exit 1, names the pairs and
 *     leaves no run behind;
 *     `train` without it warns, writes RUN/leaks.json and trains; `eval --split test`
 *     writes the count into eval.json and report.html shows it;
 *   - another folder holding the copies (the test split copied as class folders): `eval`
 *     on it counts and names them in eval.json, and `train --val-dir` on it warns and
 *     counts them as val in RUN/leaks.json;
 *   - long-GOP 720p files over the whole-decode limit: signed by their keyframes alone
 *     (counted as such), a re-encode still paired, an unrelated video not; after
 *     `prep`, whose decode signs each copy and its source, scans of both folders read
 *     every signature from the cache, none keyframes alone, with the same pair.
 */
#include "base/common.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}
static double num(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

int main(void) {
    const char *bin = vt_test_bin("test_leaks");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], src[4096], cls[256];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("leaks"));
    setenv("VIDTRAIN_CACHE", dir, 1);
    vt_test_sh("rm -rf '%s/data' '%s/signatures' '%s/run' '%s/run2'", dir, dir, dir, dir);
    /* 3 s videos (75 frames at 25 fps) so that a trimmed copy keeps 2.4 s */
    TCHECK(vt_test_synth(bin, dir, "--preset motion --classes 2 --train 4 --test 2 --frames 75 "
                                   "--fps 25 --size 192x144") == 0, "synth");
    /* the original: the first training video of the first class */
    TCHECK(vt_test_sh("cd '%s/data/train' && c=$(ls | head -1) && f=$(ls \"$c\" | head -1) && "
                      "printf '%%s' \"$c\" > ../../cls && printf '%%s' \"$c/$f\" > ../../src",
                      dir) == 0, "pick a source");
    char p[4300];
    snprintf(p, sizeof p, "%s/cls", dir);
    char *c = vt_test_slurp(p, NULL);
    snprintf(p, sizeof p, "%s/src", dir);
    char *s = vt_test_slurp(p, NULL);
    if (!c || !s) {
        free(c);
        free(s);
        return vt_test_done("test_leaks");
    }
    snprintf(cls, sizeof cls, "%s", c);
    snprintf(src, sizeof src, "%s", s);
    free(c);
    free(s);
    int x264 = system("ffmpeg -hide_banner -encoders 2>/dev/null | grep -q libx264") == 0;
    const char *reenc = x264 ? "-c:v libx264 -preset veryfast -crf 32" : "-c:v mpeg4 -q:v 8";
    const char *ext = strrchr(src, '.');
    char in[8500], t[8500];
    snprintf(in, sizeof in, "%s/data/train/%s", dir, src);
    snprintf(t, sizeof t, "%s/data/test/%s", dir, cls);
    TCHECK(vt_test_sh("cp '%s' '%s/leak_ident%s'", in, t, ext) == 0, "identical copy");
    TCHECK(vt_test_sh("ffmpeg -v error -y -i '%s' -an %s '%s/leak_reenc.mp4'", in, reenc, t) == 0,
           "re-encode");
    TCHECK(vt_test_sh("ffmpeg -v error -y -i '%s' -an -vf 'crop=iw*0.8:ih*0.8,scale=192:144' "
                      "-c:v mpeg4 -q:v 4 '%s/leak_crop.mp4'", in, t) == 0, "crop");
    TCHECK(vt_test_sh("ffmpeg -v error -y -ss 0.6 -i '%s' -an -c:v mpeg4 -q:v 4 '%s/leak_trim.mp4'",
                      in, t) == 0, "trim");

    /* scan: the four pairs, nothing else */
    TCHECK(vt_test_sh("'%s' scan '%s/data' --json > '%s/scan.json'", bin, dir, dir) == 0, "scan");
    snprintf(p, sizeof p, "%s/scan.json", dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(j, "leaks");
    const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(lk, "pairs");
    TCHECK(cJSON_IsArray(pairs), "scan --json has leaks.pairs");
    int found[4] = {0}, other = 0;
    static const char *kind[4] = {"leak_ident", "leak_reenc", "leak_crop", "leak_trim"};
    char want_train[4400];
    snprintf(want_train, sizeof want_train, "train/%s", src);
    for (const cJSON *e = pairs ? pairs->child : NULL; e; e = e->next) {
        int k = -1;
        for (int i = 0; i < 4; i++)
            if (strstr(str(e, "other"), kind[i]))
                k = i;
        if (k >= 0 && !strcmp(str(e, "train"), want_train)) {
            found[k]++;
        } else {
            other++;
            fprintf(stderr, "unexpected pair: %s ~ %s (%.2f)\n", str(e, "other"), str(e, "train"),
                    num(e, "similarity"));
        }
    }
    for (int i = 0; i < 4; i++)
        TCHECK(found[i] == 1, "%s paired with %s: %d times", kind[i], want_train, found[i]);
    TCHECK(other == 0, "%d pairs that are not planted copies (videos of one class flagged)", other);
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(lk, "test");
    TCHECK(num(ts, "with_copy_in_train") == 4, "test: %g with a copy in train, want 4",
           num(ts, "with_copy_in_train"));
    cJSON_Delete(j);

    /* again: every signature from the cache */
    TCHECK(vt_test_sh("'%s' scan '%s/data' --json > '%s/scan2.json'", bin, dir, dir) == 0, "scan 2");
    snprintf(p, sizeof p, "%s/scan2.json", dir);
    j = vt_test_read_json(p);
    const cJSON *sg = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "leaks"),
                                                       "signatures");
    TCHECK(num(sg, "files") > 0 && num(sg, "cached") == num(sg, "files"),
           "second scan: %g of %g signatures cached", num(sg, "cached"), num(sg, "files"));
    double nfiles = num(sg, "files");
    cJSON_Delete(j);

    /* a FIFO where a cached signature was is not waited on (a plain fopen waited for a
     * writer for ever): recomputed (and not stored: an output is never a FIFO) */
    TCHECK(vt_test_sh("cd '%s/signatures' && f=$(ls *.sig | head -1) && rm \"$f\" && "
                      "mkfifo \"$f\"", dir) == 0, "a FIFO in the cache");

    int frc = vt_test_sh("timeout 60 '%s' scan '%s/data' --json > '%s/scan3.json'", bin, dir,
                         dir);
    snprintf(p, sizeof p, "%s/scan3.json", dir);
    j = frc == 0 ? vt_test_read_json(p) : NULL;
    sg = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "leaks"),
                                          "signatures");
    TCHECK(frc == 0 && num(sg, "cached") == nfiles - 1, "a FIFO in the cache: exit %d (124: "
           "it waited), %g of %g cached", frc, num(sg, "cached"), nfiles);
    cJSON_Delete(j);

    /* train: --strict-splits refuses, the default warns and trains */
    const char *tr = "--model tiny --clip 4x32 --batch 2 --epochs 1 --max-steps 1 --val-clips 1";
    int rc = vt_test_sh("'%s' train '%s/data' --out '%s/run2' %s --strict-splits > '%s/strict.log' "
                        "2>&1", bin, dir, dir, tr, dir);
    snprintf(p, sizeof p, "%s/strict.log", dir);
    char *log = vt_test_slurp(p, NULL);
    TCHECK(rc == 1 && log && strstr(log, "--strict-splits") && strstr(log, "leak_ident"),
           "--strict-splits: exit %d, said: %s", rc, log ? log : "");
    free(log);
    snprintf(p, sizeof p, "%s/run2", dir);
    TCHECK(!vt_dir_exists(p), "--strict-splits: a failed start leaves no run folder");
    rc = vt_test_sh("'%s' train '%s/data' --out '%s/run' %s > '%s/train.log' 2>&1", bin, dir, dir,
                    tr, dir);
    snprintf(p, sizeof p, "%s/train.log", dir);
    log = vt_test_slurp(p, NULL);
    TCHECK(rc == 0 && log && strstr(log, "warning: test 4 of"), "train warns: %s", log ? log : "");
    free(log);
    snprintf(p, sizeof p, "%s/run/leaks.json", dir);
    j = vt_test_read_json(p);
    TCHECK(num(cJSON_GetObjectItemCaseSensitive(j, "test"), "with_copy_in_train") == 4,
           "RUN/leaks.json counts 4");
    cJSON_Delete(j);
    rc = vt_test_sh("'%s' eval '%s/run' '%s/data' --split test > '%s/eval.log' 2>&1", bin, dir, dir,
                    dir);
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    j = vt_test_read_json(p);
    const cJSON *el = cJSON_GetObjectItemCaseSensitive(j, "leaks");
    TCHECK(rc == 0 && num(el, "with_copy_in_train") == 4 && num(el, "videos") > 4,
           "eval.json leaks: %g of %g", num(el, "with_copy_in_train"), num(el, "videos"));
    cJSON_Delete(j);
    snprintf(p, sizeof p, "%s/run/report.html", dir);
    char *html = vt_test_slurp(p, NULL);
    TCHECK(html && strstr(html, "4 of") && strstr(html, "near-copy in train"), "report shows it");
    free(html);

    /* another folder (an outside test set): a copy of the test split as class folders,
     * the 4 planted copies among the synthetic videos. eval compares it with the run's
     * training videos itself, and train's --val-dir check compares it as val. */
    TCHECK(vt_test_sh("rm -rf '%s/other' && cp -r '%s/data/test' '%s/other'", dir, dir, dir) == 0,
           "other folder");
    rc = vt_test_sh("'%s' eval '%s/run' '%s/other' --split all > '%s/eval2.log' 2>&1", bin, dir,
                    dir, dir);
    snprintf(p, sizeof p, "%s/run/eval.json", dir);
    j = vt_test_read_json(p);
    el = cJSON_GetObjectItemCaseSensitive(j, "leaks");
    int nfolder = 0;
    for (const cJSON *e = cJSON_GetObjectItemCaseSensitive(el, "pairs") ?
                          cJSON_GetObjectItemCaseSensitive(el, "pairs")->child : NULL;
         e; e = e->next)
        nfolder += strstr(str(e, "other"), "leak_") && !strcmp(str(e, "train"), want_train) &&
                   strstr(str(e, "folder"), "other");
    TCHECK(rc == 0 && num(el, "with_copy_in_train") == 4 && num(el, "videos") > 4 && nfolder == 4,
           "eval on another folder: %g of %g with a copy, %d pairs name the copies",
           num(el, "with_copy_in_train"), num(el, "videos"), nfolder);
    cJSON_Delete(j);
    rc = vt_test_sh("'%s' train '%s/data' --val-dir '%s/other' --out '%s/run3' %s > "
                    "'%s/train3.log' 2>&1", bin, dir, dir, dir, tr, dir);
    snprintf(p, sizeof p, "%s/train3.log", dir);
    log = vt_test_slurp(p, NULL);
    TCHECK(rc == 0 && log && strstr(log, "warning: val 4 of"), "--val-dir: train warns: %s",
           log ? log : "");
    free(log);
    snprintf(p, sizeof p, "%s/run3/leaks.json", dir);
    j = vt_test_read_json(p);
    TCHECK(num(cJSON_GetObjectItemCaseSensitive(j, "val"), "with_copy_in_train") == 4 &&
           num(cJSON_GetObjectItemCaseSensitive(j, "test"), "with_copy_in_train") == 4,
           "--val-dir: RUN/leaks.json counts the other folder's 4 as val, the test split's 4");
    cJSON_Delete(j);

    /* a long-GOP file over the whole-decode limit (signature.h: 720p, 150 frames = 138 Mpx,
     * 2 keyframes) is signed by its keyframes alone, and such signatures still pair a
     * re-encode (same keyframe frames) and not an unrelated video */
    TCHECK(vt_test_sh("rm -rf '%s/big' && mkdir -p '%s/big/train/a' '%s/big/test/a' && cd '%s/big' && "
                      "ffmpeg -v error -f lavfi -i testsrc2=s=1280x720:rate=30 -t 5 -c:v %s -g 75 "
                      "train/a/orig.mp4 && ffmpeg -v error -i train/a/orig.mp4 -c:v %s -g 75 "
                      "test/a/copy.mp4 && ffmpeg -v error -f lavfi -i "
                      "mandelbrot=s=1280x720:rate=30 -t 5 -c:v %s -g 75 test/a/other.mp4",
                      dir, dir, dir, dir, x264 ? "libx264 -preset ultrafast -crf 23" : "mpeg4 -q:v 4",
                      x264 ? "libx264 -preset ultrafast -crf 35" : "mpeg4 -q:v 10",
                      x264 ? "libx264 -preset ultrafast -crf 23" : "mpeg4 -q:v 4") == 0,
           "long-GOP 720p files");
    TCHECK(vt_test_sh("'%s' scan '%s/big' --json > '%s/scan3.json'", bin, dir, dir) == 0, "scan 3");
    snprintf(p, sizeof p, "%s/scan3.json", dir);
    j = vt_test_read_json(p);
    lk = cJSON_GetObjectItemCaseSensitive(j, "leaks");
    pairs = cJSON_GetObjectItemCaseSensitive(lk, "pairs");
    sg = cJSON_GetObjectItemCaseSensitive(lk, "signatures");
    TCHECK(num(sg, "keyframes_only") == 3, "%g of 3 long-GOP 720p signatures are keyframes alone",
           num(sg, "keyframes_only"));
    TCHECK(cJSON_GetArraySize(pairs) == 1 && !strcmp(str(pairs->child, "other"), "test/a/copy.mp4"),
           "keyframes alone: the re-encode paired, the unrelated video not (%d pairs)",
           cJSON_GetArraySize(pairs));
    cJSON_Delete(j);

    /* prep signs each copy and its source from its own decode: a scan of either folder
     * then reads all 3 signatures from the cache, the sources' now whole-decode ones (none
     * keyframes alone), and pairs the same files */
    TCHECK(vt_test_sh("rm -rf '%s/big128' && '%s' prep '%s/big' '%s/big128' > '%s/prep.log' 2>&1",
                      dir, bin, dir, dir, dir) == 0, "prep");
    for (int k = 0; k < 2; k++) {
        TCHECK(vt_test_sh("'%s' scan '%s/%s' --json > '%s/scan4.json'", bin, dir,
                          k ? "big128" : "big", dir) == 0, "scan 4");
        snprintf(p, sizeof p, "%s/scan4.json", dir);
        j = vt_test_read_json(p);
        lk = cJSON_GetObjectItemCaseSensitive(j, "leaks");
        pairs = cJSON_GetObjectItemCaseSensitive(lk, "pairs");
        sg = cJSON_GetObjectItemCaseSensitive(lk, "signatures");
        TCHECK(num(sg, "cached") == 3 && num(sg, "keyframes_only") == 0,
               "after prep, %s: %g of 3 signatures cached, %g keyframes alone", k ? "copies" : "sources",
               num(sg, "cached"), num(sg, "keyframes_only"));
        TCHECK(cJSON_GetArraySize(pairs) == 1 &&
                   !strcmp(str(pairs->child, "other"), "test/a/copy.mp4"),
               "after prep, %s: the re-encode paired, nothing else (%d pairs)",
               k ? "copies" : "sources", cJSON_GetArraySize(pairs));
        cJSON_Delete(j);
    }
    return vt_test_done("test_leaks");
}
