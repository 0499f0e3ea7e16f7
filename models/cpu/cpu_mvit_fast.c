/*
 * cpu_mvit_fast.c: MViT's ops for the cpu backend (cpu_mvit.h): cpu_mvit_impl.h with
 * OpenMP across query rows, keys, channels and windows (be->threads) and sums in float.
 */
#include "models/cpu/cpu_mvit.h"

#define MV(name) vt_fast_##name
#define ACC float
#define NT(be) ((be)->threads)

#include "models/cpu/cpu_mvit_impl.h"
