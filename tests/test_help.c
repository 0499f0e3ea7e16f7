/*
 * test_help.c: `--help` answers what a user asks first. Every command's --help exits 0
 * and says how to call it ("usage:"), and train's --model list names every model of the
 * zoo (models/zoo.c's vt_zoo_names, the list train takes): the list was written by hand,
 * and videomae_vit_s, videomae_vit_b and tiny_nobn, which train takes, were missing. The
 * commands whose --model list is made from vt_zoo_names (plan, bench step) are checked
 * the same way, so a hand-written list anywhere fails here.
 */
#include <stdlib.h>
#include <string.h>

#include "models/net_types.h"
#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

/* `vidtrain ARGS --help` into dir/h.txt: its exit code; *text the output (free it). */
static int help(const char *bin, const char *dir, const char *args, char **text) {
    int rc = vt_test_sh("'%s' %s --help > '%s/h.txt' 2>&1", bin, args, dir);
    char p[4200];
    snprintf(p, sizeof p, "%s/h.txt", dir);
    *text = vt_test_slurp(p, NULL);
    return rc;
}

/* 1 when text names model as a word of a list (not as a part of a longer name). */
static int names(const char *text, const char *model) {
    const size_t n = strlen(model);
    for (const char *p = text; (p = strstr(p, model)) != NULL; p += n) {
        const char b = p == text ? ' ' : p[-1], a = p[n];
        if (!(b == '_' || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9')) &&
            !(a == '_' || (a >= 'a' && a <= 'z') || (a >= '0' && a <= '9')))
            return 1;
    }
    return 0;
}

int main(void) {
    const char *bin = vt_test_bin("test_help");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("help"));
    static const char *const cmds[] = {"devices", "synth", "scan", "plan", "train", "eval",
                                       "predict", "embed", "export", "prep", "bench"};
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char *t = NULL;
        int rc = help(bin, dir, cmds[i], &t);
        TCHECK(rc == 0 && t && strstr(t, "usage:"), "%s --help: exit %d, usage %s", cmds[i],
               rc, t && strstr(t, "usage:") ? "given" : "missing");
        free(t);
    }
    static const char *const lists[] = {"train", "plan", "bench step"};
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) {
        char *t = NULL;
        help(bin, dir, lists[i], &t);
        int missing = 0;
        for (int m = 0; vt_zoo_names[m]; m++)
            if (!t || !names(t, vt_zoo_names[m])) {
                printf("%s --help does not name %s\n", lists[i], vt_zoo_names[m]);
                missing++;
            }
        TCHECK(missing == 0, "%s --help leaves %d model(s) of the zoo out", lists[i], missing);
        free(t);
    }
    return vt_test_done("test_help");
}
