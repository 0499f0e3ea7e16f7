/*
 * test_cuda_versions.c: `vidtrain devices` refuses cuDNN or NCCL built for another CUDA
 * major than the runtime (issue 27, item 5: PyTorch's CUDA 12 wheels of cuDNN and NCCL
 * carry the same file names as CUDA 13's, and a search path can pair them). Checked on
 * made-up version tables (no GPU needed): a CUDA 12.8 cuDNN beside runtime 13.0 is
 * refused with both versions named; a CUDA 12 NCCL likewise; minor differences (13.1 vs
 * 13.0, what this machine has) and unknown versions (0) pass. Then the libraries this
 * build loads must agree with each other, as `vidtrain devices` checks. Skips (77)
 * without the CUDA backend.
 */
#include <string.h>

#include "tests/testutil.h"
#ifdef VT_HAVE_CUDA
#include "models/cuda/cuda_info.h"
#endif

int main(void) {
#ifndef VT_HAVE_CUDA
    printf("test_cuda_versions: CUDA not built in: skipped\n");
    return VT_TEST_SKIP;
#else
    char err[512] = "";
    vt_cuda_versions v = {.runtime = 13000, .cudnn_cudart = 12080, .nccl_cuda = 13000};
    TCHECK(vt_cuda_versions_check(&v, err, sizeof err) < 0 && strstr(err, "cuDNN") &&
               strstr(err, "12.8") && strstr(err, "13.0"),
           "cuDNN for CUDA 12.8 beside 13.0 not refused: %s", err);
    printf("refused: %s\n", err);
    v.cudnn_cudart = 13010;
    v.nccl_cuda = 12040;
    err[0] = 0;
    TCHECK(vt_cuda_versions_check(&v, err, sizeof err) < 0 && strstr(err, "NCCL") &&
               strstr(err, "12.4"),
           "NCCL for CUDA 12.4 not refused: %s", err);
    v.nccl_cuda = 13000;
    TCHECK(vt_cuda_versions_check(&v, err, sizeof err) == 0, "13.1 vs 13.0 refused: %s", err);
    v.nccl_cuda = 0;
    v.cudnn_cudart = 0;
    TCHECK(vt_cuda_versions_check(&v, err, sizeof err) == 0, "unknown versions refused");
    vt_cuda_versions here;
    vt_cuda_versions_get(&here);
    printf("this build: runtime %d, cuDNN built for %d, NCCL for %d, archs %s\n", here.runtime,
           here.cudnn_cudart, here.nccl_cuda, vt_cuda_archs());
    TCHECK(vt_cuda_versions_check(&here, err, sizeof err) == 0, "%s", err);
    TCHECK(here.cudnn_cudart > 0, "cudnnGetCudartVersion() = 0");
    TCHECK(strcmp(vt_cuda_archs(), "?") != 0, "architectures not compiled in");
    return vt_test_done("test_cuda_versions");
#endif
}
