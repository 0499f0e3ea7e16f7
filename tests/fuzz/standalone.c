/*
 * standalone.c: runs a fuzz target without libFuzzer, for the normal build's ctest
 * (fuzz_regress_*): every file named on the command line, or every file of every folder
 * named (sorted, non-recursive, hidden files skipped), goes once through
 * LLVMFuzzerTestOneInput. The regression inputs in tests/fuzz/regress/TARGET/ and the
 * seed corpus made by tests/fuzz/make_seeds.sh are replayed this way on every test run;
 * under the ASan + UBSan build (scripts/test.sh) a regression fails loudly.
 *
 * It must never pass by running nothing: a missing path or zero inputs is a failure.
 * A finding is an abort or a sanitizer report inside the target, never a return code.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz_util.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0, r;
    uint8_t *buf = malloc(cap);
    while (buf && (r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            cap *= 2;
            uint8_t *nb = realloc(buf, cap);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "out of memory reading %s\n", path);
        return -1;
    }
    /* An exactly-sized copy: a read one byte past the input is an ASan report, as under
     * libFuzzer. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0, bad = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "%s: not found\n", argv[a]);
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[a]) != 0;
            ran++;
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "%s: cannot read\n", argv[a]);
            bad++;
            continue;
        }
        char **names = NULL;
        int nn = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            names = realloc(names, (size_t)(nn + 1) * sizeof *names);
            names[nn++] = strdup(e->d_name);
        }
        closedir(d);
        if (nn > 1)
            qsort(names, (size_t)nn, sizeof *names, cmp_str);
        for (int i = 0; i < nn; i++) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", argv[a], names[i]);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                bad += run_file(path) != 0;
                ran++;
            }
            free(names[i]);
        }
        free(names);
    }
    printf("%s: %d inputs ran without a finding, %d unreadable\n", argv[0], ran, bad);
    if (ran == 0)
        fprintf(stderr, "FAIL: no input ran (a replay of nothing proves nothing)\n");
    return ran == 0 || bad ? 1 : 0;
}
