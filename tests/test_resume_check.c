/*
 * test_resume_check.c: --resume puts config.json through the command line's own checks
 * (app/train/train_ranges.h; issue 41 item 4). A run's config.json edited to hold a value the
 * command line refuses is refused at once, with exit 1 and a message naming config.json,
 * the key, the option and its range: workers=100000 (it used to abort in pthread_create
 * 45 s in), lr=-1e308 (it used to train), crop=1e9 (a negative byte count), an unknown
 * optimizer, val_crops=2, a fractional or huge stride. The same option given with --resume
 * overrides the bad value, and an untouched config.json resumes.
 * The commands that run a trained model read the checkpoint's own copy of the
 * configuration (rewritten here by Python): they refuse what --resume refuses, naming the
 * key (predict ran a short side of -5 at another scale, exit 0; crop 1e9 printed a
 * negative byte count), and a heads list with a loss other than softmax and bce (read as
 * softmax), a class name that is not a string (printed "?") or one there twice (eval put
 * every video of it under the first). A key no part of this vidtrain writes (a newer
 * one's option, a misspelt edit) is refused by both: it was read past in silence.
 */
#include <signal.h>
#include <time.h>

#include "tests/apputil.h"

/* RUN copied to NEW with its best.safetensors' own configuration edited by `edit`, Python
 * run on the configuration `c` (plain json and struct: the header rewritten). */
static int ckpt_edited(const char *dir, const char *nw, const char *edit) {
    static const char *const prog =
        "import json, struct, sys\n"
        "f, edit = sys.argv[1:3]\n"
        "b = open(f, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]\n"
        "h = json.loads(b[8:8 + n]); m = h['__metadata__']\n"
        "c = json.loads(m['vidtrain_config']); exec(edit)\n"
        "m['vidtrain_config'] = json.dumps(c)\n"
        "hb = json.dumps(h).encode(); hb += b' ' * (-len(hb) % 8)\n"
        "open(f, 'wb').write(struct.pack('<Q', len(hb)) + hb + b[8 + n:])\n";
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    return vt_test_sh("cd '%s' && rm -rf '%s' && cp -a r '%s' && rm '%s/last.safetensors' && '%s' "
                      "-c \"%s\" '%s/best.safetensors' \"%s\"", dir, nw, nw, nw, py, prog, nw, edit);
}

static void ckpt_configs(const char *bin, const char *dir) {
    static const struct {
        const char *edit, *needle;
    } cases[] = {
        {"c['short_side'] = -5", "\"short_side\" is -5"},
        {"c['crop'] = 1e9", "\"crop\" is 1e+09"},
        {"c['stride'] = 0", "\"stride\" is 0"},
        {"c['heads'][0]['loss'] = 'focal'", "neither softmax nor bce"},
        {"c['heads'][0]['classes'][1] = 7", "not a string"},
        {"c['heads'][0]['classes'][1] = c['heads'][0]['classes'][0]", "is there twice"},
        {"c['stride_mode'] = 'adaptive'", "\"stride_mode\" is not a key"}, /* a newer one's */
        {"pass", NULL}, /* the rewrite alone changes nothing */
    };
    char err[4200], video[4200];
    snprintf(err, sizeof err, "%s/c.err", dir);
    TCHECK(vt_test_sh_line(video, sizeof video, "cd '%s' && ls data/test/*/* | head -n 1", dir)
               == 0, "a video");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCHECK(ckpt_edited(dir, "rc", cases[i].edit) == 0, "rewrite: %s", cases[i].edit);
        int rc = vt_test_sh("cd '%s' && '%s' predict rc '%s' --clips-per-video 1 > /dev/null "
                            "2> c.err", dir, bin, video);
        int rc2 = vt_test_sh("cd '%s' && '%s' eval rc data -q --clips-per-video 1 > /dev/null "
                             "2>> c.err", dir, bin);
        if (cases[i].needle)
            TCHECK(rc == 1 && rc2 == 1 && vt_test_file_has(err, "rc/best.safetensors") &&
                       vt_test_file_has(err, cases[i].needle),
                   "%s: predict exit %d, eval %d: 1 naming '%s' expected (see %s)",
                   cases[i].edit, rc, rc2, cases[i].needle, err);
        else
            TCHECK(rc == 0 && rc2 == 0, "an untouched copy: predict exit %d, eval %d (see %s)",
                   rc, rc2, err);
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *bin = vt_test_bin("test_resume_check");
    if (!bin)
        return 1;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("resume_check"));
    TCHECK(vt_test_synth(bin, dir, "--classes 2 --train 3 --val 1 --test 1 --frames 12") == 0,
           "synth");
    TCHECK(vt_test_sh("cd '%s' && '%s' train data --out r --model tiny --epochs 1 --clip 4x32 "
                      "--batch 2 --workers 1 -q > t.log 2>&1", dir, bin) == 0, "train");
    static const struct {
        const char *key, *value, *opt, *override;
    } cases[] = {
        {"workers", "100000", "--workers", "--workers 1"},
        {"lr", "-1e308", "--lr", "--lr 0.01"},
        {"crop", "1e9", "--clip", "--clip 4x32"},
        {"optim", "\"bogus\"", "--optim", "--optim sgd"},
        {"val_crops", "2", "--val-crops", "--val-crops 1"},
        {"stride", "1e300", "--stride", "--stride 1"},
        {"batch", "0", "--batch", "--batch 2"},
    };
    char err[4200];
    snprintf(err, sizeof err, "%s/e.err", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* the run folder copied, one key of its config.json replaced (sed: a key per line) */
        TCHECK(vt_test_sh("cd '%s' && rm -rf rr && cp -a r rr && sed -i 's/^\\(\t\"%s\":\t\\).*,$/"
                          "\\1%s,/' rr/config.json && grep -q '\"%s\":\t%s,' rr/config.json", dir,
                          cases[i].key, cases[i].value, cases[i].key, cases[i].value) == 0,
               "edit config.json's %s", cases[i].key);
        time_t t0 = time(NULL);
        int rc = vt_test_sh("cd '%s' && timeout 120 '%s' train --resume rr --epochs 2 -q "
                            "> /dev/null 2> e.err", dir, bin);
        char key[64];
        snprintf(key, sizeof key, "\"%s\"", cases[i].key);
        TCHECK(rc == 1 && vt_test_file_has(err, "rr/config.json") &&
                   vt_test_file_has(err, key) && vt_test_file_has(err, cases[i].opt),
               "%s=%s: exit %d, 1 naming config.json, the key and %s expected (see %s)",
               cases[i].key, cases[i].value, rc, cases[i].opt, err);
        TCHECK(time(NULL) - t0 < 30, "%s=%s: refused only after %lds", cases[i].key,
               cases[i].value, (long)(time(NULL) - t0));
        rc = vt_test_sh("cd '%s' && timeout 120 '%s' train --resume rr --epochs 2 %s -q "
                        "> /dev/null 2> e.err", dir, bin, cases[i].override);
        TCHECK(rc == 0, "%s=%s overridden by %s: exit %d (see %s)", cases[i].key,
               cases[i].value, cases[i].override, rc, err);
    }
    int rc = vt_test_sh("cd '%s' && rm -rf rr && cp -a r rr && '%s' train --resume rr --epochs 2 "
                        "-q > /dev/null 2> e.err", dir, bin);
    TCHECK(rc == 0, "an untouched config.json: exit %d (see %s)", rc, err);
    /* a key this vidtrain does not write (a misspelt edit: it changed nothing, exit 0) */
    rc = vt_test_sh("cd '%s' && rm -rf rr && cp -a r rr && sed -i 's/^\\t\"epochs\":/\\t\"epochz\":"
                    "\\t3,\\n&/' rr/config.json && grep -q epochz rr/config.json && '%s' train "
                    "--resume rr --epochs 2 -q > /dev/null 2> e.err", dir, bin);
    TCHECK(rc == 1 && vt_test_file_has(err, "\"epochz\" is not a key"), "an unknown key in "
           "config.json: exit %d, 1 naming it expected (see %s)", rc, err);
    ckpt_configs(bin, dir);
    return vt_test_done("test_resume_check");
}
