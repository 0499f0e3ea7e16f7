/*
 * cpu_mvit.c: MViT's ops for cpu-ref (cpu_mvit.h): cpu_mvit_impl.h on one thread with
 * every sum in double — the readable reference the fast cpu backend is checked against.
 */
#include "models/cpu/cpu_mvit.h"

#define MV(name) vt_ref_##name
#define ACC double
#define NT(be) 1

#include "models/cpu/cpu_mvit_impl.h"
