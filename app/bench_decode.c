/* bench_decode.c: placeholder until its issue lands; replaced, never shipped as done. */
#include <stdio.h>

int vt_bench_decode(int argc, char **argv);
int vt_bench_decode(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "vidtrain bench %s: not built yet\n", argv[0]);
    return 1;
}
