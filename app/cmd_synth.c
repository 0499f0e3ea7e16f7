/* cmd_synth.c: placeholder until its issue lands; replaced, never shipped as done. */
#include <stdio.h>

#include "app/app.h"

int vt_cmd_synth(int argc, char **argv) {
    (void)argc;
    fprintf(stderr, "vidtrain %s: not built yet\n", argv[0]);
    return 1;
}
