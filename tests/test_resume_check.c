/*
 * test_resume_check.c: --resume puts config.json through the command line's own checks
 * (app/train/train_ranges.h; issue 41 item 4). A run's config.json edited to hold a value the
 * command line refuses is refused at once, with exit 1 and a message naming config.json,
 * the key, the option and its range: workers=100000 (it used to abort in pthread_create
 * 45 s in), lr=-1e308 (it used to train), crop=1e9 (a negative byte count), an unknown
 * optimizer, val_crops=2, a fractional or huge stride. The same option given with --resume
 * overrides the bad value, and an untouched config.json resumes.
 */
#include <signal.h>
#include <time.h>

#include "tests/apputil.h"

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
    return vt_test_done("test_resume_check");
}
