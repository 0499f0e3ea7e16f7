/*
 * test_ignored_opts.c: an option that would change nothing in the run it is given to is
 * refused with why (exit 2), never taken without a word:
 *   - --drop-path P and --layer-decay F act on a transformer's blocks: for a CNN (tiny,
 *     x3d_xs) both were accepted and ignored, and the fine-tuning line even named the
 *     layer decay; a transformer (vit_test) still takes them (it fails later, on the
 *     missing dataset, not on the option).
 */
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static int has(const char *path, const char *text) {
    char *s = vt_test_slurp(path, NULL);
    int r = s && strstr(s, text);
    free(s);
    return r;
}

/* train with args on a folder that does not exist: the exit code, stderr in dir/e.err */
static int train(const char *bin, const char *dir, const char *args) {
    return vt_test_sh("'%s' train '%s/nodata' --out '%s/run' -q %s > /dev/null 2> '%s/e.err'",
                      bin, dir, dir, args, dir);
}

int main(void) {
    const char *bin = vt_test_bin("test_ignored_opts");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], err[4200];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("ignored_opts"));
    snprintf(err, sizeof err, "%s/e.err", dir);
    static const char *const cnn[] = {"--model tiny --drop-path 0.2",
                                      "--model x3d_xs --drop-path 0.1",
                                      "--model tiny --layer-decay 0.5",
                                      "--model r3d18 --layer-decay 0.75 --init w.pth"};
    for (size_t i = 0; i < sizeof cnn / sizeof *cnn; i++) {
        int rc = train(bin, dir, cnn[i]);
        printf("%-40s exit %d\n", cnn[i], rc);
        TCHECK(rc == 2 && has(err, "no transformer blocks"), "%s: exit %d, want 2 naming why",
               cnn[i], rc);
    }
    int rc = train(bin, dir, "--model vit_test --drop-path 0.1 --layer-decay 0.75");
    TCHECK(rc != 2 && !has(err, "no transformer blocks"),
           "a transformer's --drop-path/--layer-decay refused: exit %d", rc);
    return vt_test_done("test_ignored_opts");
}
