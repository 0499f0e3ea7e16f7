/*
 * cmd_devices.c: `vidtrain devices` — what this machine offers (CPU model, cores, RAM;
 * GPUs with memory, capability, and driver/runtime/cuDNN/NCCL versions when CUDA is
 * built in), and, given device options, the towers they resolve to with their budgets.
 * It must never create a backend: listing devices has to work where training cannot.
 */
#include <stdio.h>
#include <string.h>

#include "app/app.h"
#include "app/device_opts.h"
#include "base/common.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/cuda_info.h"
#endif

static void usage(FILE *f) {
    fprintf(f, "usage: vidtrain devices [device options]\n\n"
               "Lists the CPU and GPUs of this machine, then the towers that the device options\n"
               "resolve to (the same options as train, plan and bench step).\n\n%s",
            vt_device_args_help);
}

/* The CUDA libraries' own builds against the runtime's, and the GPU code this binary
 * carries. 1 when cuDNN or NCCL was built for another CUDA major (a CUDA 12 wheel found
 * before CUDA 13's library): that pairing fails at the first kernel, so say it here. */
static int check_cuda_libs(void) {
#ifdef VT_HAVE_CUDA
    vt_cuda_versions v;
    vt_cuda_versions_get(&v);
    printf("      cuDNN built for CUDA %d.%d, NCCL for ", v.cudnn_cudart / 1000,
           v.cudnn_cudart % 1000 / 10);
    if (v.nccl_cuda)
        printf("CUDA %d.%d", v.nccl_cuda / 1000, v.nccl_cuda % 1000 / 10);
    else
        printf("an unknown CUDA (no version banner in the library)");
    printf("\n      GPU code for architectures %s (N-real: that card's code; N alone: also "
           "PTX, compiled by the driver for newer cards)\n", vt_cuda_archs());
    char err[512];
    if (vt_cuda_versions_check(&v, err, sizeof err)) {
        fprintf(stderr, "vidtrain devices: %s\n", err);
        return 1;
    }
#endif
    return 0;
}

int vt_cmd_devices(int argc, char **argv) {
    if (vt_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    vt_device_args da;
    memset(&da, 0, sizeof da);
    for (int i = 1; i < argc; i++) {
        int took = vt_device_args_take(&da, argc, argv, &i);
        if (took == 1)
            continue;
        if (took < 0)
            fprintf(stderr, "vidtrain devices: %s needs a value\n", argv[i]);
        else
            fprintf(stderr, "vidtrain devices: unknown option '%s'\n", argv[i]);
        usage(stderr);
        return 2;
    }
    vt_devices_print_machine(stdout);
    if (check_cuda_libs())
        return 1;
    vt_device_list l;
    char err[1024];
    int drc = vt_devices_from_args(&l, &da, err, sizeof err);
    if (drc) {
        fprintf(stderr, "vidtrain devices: %s\n", err);
        return drc == -2 ? 2 : 1; /* -2: an option that changes nothing */
    }
    printf("\ntowers with these options:\n");
    vt_device_list_print(&l, stdout);
    return 0;
}
