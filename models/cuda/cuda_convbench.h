/*
 * cuda_convbench.h: one convolution shape timed in cuDNN's three directions (forward,
 * backward data, backward filter) for `vidtrain bench conv` (app/bench_conv.c; issue 45
 * step 1): which layout of the activations (PyTorch's NCDHW, or channels-last NDHWC) and
 * which algorithms are fastest at a precision. Plain C, free of CUDA headers; only built
 * with the CUDA backend (VT_HAVE_CUDA).
 */
#ifndef VT_CUDA_CONVBENCH_H
#define VT_CUDA_CONVBENCH_H

#include <stddef.h>

#include "models/backend.h"

/* One direction's result: the fastest algorithm cuDNN's timed search (cudnnFind*Ex)
 * offers within the workspace that the precision's math allows (FP32: no tensor ops), and
 * the fastest deterministic one (what the backend takes unless it is > 10% slower), each
 * re-timed over `reps` runs with cudaEvents. ok = 0: cuDNN offers none (the layout or
 * data type is not supported for this shape). */
typedef struct vt_convbench_dir {
    int ok;
    int algo;           /* cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    int tensor_ops;     /* the algorithm runs on tensor cores (its math type) */
    size_t ws;          /* its workspace, bytes */
    double ms;          /* mean time of one call */
    int det_ok, det_algo;
    double det_ms;
} vt_convbench_dir;

/* Times conv p on input (n, cin, thw) on GPU `device` at precision prec (FP32: FMA math;
 * TF32: float data, tensor ops allowed; BF16: bf16 data, float compute), activations and
 * filter in NCDHW/KCTRS (ndhwc = 0) or NDHWC/KTRSC (ndhwc = 1), workspace at most ws_max
 * bytes. out[0..2]: forward, backward data, backward filter. Returns 0, or -1 with err
 * (out of memory, no such device); a direction cuDNN cannot do is out[d].ok = 0, not an
 * error. */
int vt_cuda_convbench(int device, int n, const int thw[3], const vt_conv3d_p *p,
                      vt_precision prec, int ndhwc, size_t ws_max, int reps,
                      vt_convbench_dir out[3], char *err, size_t errlen);

#endif
