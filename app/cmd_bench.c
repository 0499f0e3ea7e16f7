/*
 * cmd_bench.c: `vidtrain bench decode|step|conv` — dispatches to the benchmark that
 * measures the decode pipeline (bench_decode.c), a training step across towers
 * (bench_step.c) or cuDNN's convolutions per R3D-18 shape and layout (bench_conv.c).
 */
#include <stdio.h>
#include <string.h>

#include "app/app.h"

int vt_bench_decode(int argc, char **argv);
int vt_bench_step(int argc, char **argv);
int vt_bench_conv(int argc, char **argv);

int vt_cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: vidtrain bench decode DIR [options]   decode+scale throughput (clips/s, frames/s)\n"
                "       vidtrain bench step [options]         training-step throughput per split policy\n"
                "       vidtrain bench conv [options]         cuDNN per R3D-18 conv shape, NCDHW vs NDHWC (GPU)\n"
                "Run 'vidtrain bench decode --help' (step, conv) for options.\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "decode"))
        return vt_bench_decode(argc - 1, argv + 1);
    if (!strcmp(argv[1], "step"))
        return vt_bench_step(argc - 1, argv + 1);
    if (!strcmp(argv[1], "conv"))
        return vt_bench_conv(argc - 1, argv + 1);
    fprintf(stderr, "vidtrain bench: unknown benchmark '%s' (decode, step or conv)\n", argv[1]);
    return 2;
}
