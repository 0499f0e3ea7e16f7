/*
 * host_mem.h: how much memory this process may still take, and which limit says so.
 * Four things cap it, each counting differently (docs/design.md §3.8):
 *   - the RAM: MemAvailable of /proc/meminfo (pages in use, reclaimable cache free);
 *   - an address-space limit (ulimit -v, RLIMIT_AS): every mapping, touched or not,
 *     against VmSize; a refused mmap is ENOMEM;
 *   - a data limit (ulimit -d, RLIMIT_DATA): private writable mappings (the heap, every
 *     malloc'd block, thread stacks, OpenBLAS's buffers) against VmData, since Linux 4.7;
 *   - a cgroup's memory limit (memory.max in cgroup v2, memory.limit_in_bytes in v1:
 *     Docker's --memory, systemd's MemoryMax): the pages the cgroup holds, against its
 *     usage less the inactive file cache the kernel reclaims first (as `docker stats`
 *     counts it); reaching it is the OOM killer's SIGKILL, not an error.
 * The least room of the four decides, and is what a CPU tower's budget is drawn from.
 *
 * It must never print, and never take a limit it could not read for none: a file it
 * cannot parse leaves that limit out and says nothing (the other three still count).
 */
#ifndef VT_HOST_MEM_H
#define VT_HOST_MEM_H

#include <stddef.h>
#include <stdint.h>

typedef enum vt_mem_by {
    VT_MEM_RAM = 0, /* nothing tighter than the RAM available */
    VT_MEM_AS,      /* ulimit -v */
    VT_MEM_DATA,    /* ulimit -d */
    VT_MEM_CGROUP,  /* the cgroup's memory limit */
} vt_mem_by;

typedef struct vt_host_mem {
    int64_t ram_total, ram_available; /* /proc/meminfo; 0 when unread */
    int64_t as_limit, as_used;        /* RLIMIT_AS and VmSize; limit -1: none */
    int64_t data_limit, data_used;    /* RLIMIT_DATA and VmData; limit -1: none */
    int64_t cg_limit, cg_used;        /* the cgroup level with least room; limit -1: none */
    char cg_file[512];                /* its limit file, as read (under the root given) */
    int64_t available;                /* the least room of the four, >= 0 */
    vt_mem_by by;                     /* which one that is */
} vt_host_mem;

/* The process's memory limits now. The cgroup files are read under the folder in the
 * environment variable VT_HOST_ROOT when set (tests: a fake /proc/self and /sys/fs/cgroup),
 * else under /. */
void vt_host_mem_get(vt_host_mem *m);

/* The cgroup memory limit of this process read under root ("" or NULL: /): its
 * /proc/self/cgroup and /proc/self/mountinfo locate the cgroup (v2: the "0::" line and a
 * cgroup2 mount; v1: the memory controller's line and mount), and every level from it up
 * to the mount is read (a parent's limit caps its children). 1 with the level of least
 * room in *limit, *used and file; 0 when no level has a limit or nothing is readable. */
int vt_cgroup_mem_read(const char *root, int64_t *limit, int64_t *used, char *file, size_t n);

/* Bytes the limit that decided may still give (m->available), less `reserve` counted in
 * that limit's own measure; never below 0. */
int64_t vt_host_mem_left(const vt_host_mem *m, int64_t reserve);

/* "the cgroup's memory limit (4.00 GiB in /sys/fs/cgroup/memory.max, 1.10 GiB in use)",
 * "the address-space limit (ulimit -v: 3.00 GiB, 1.20 GiB mapped)", "the RAM available":
 * the limit that decided, for messages. Returns buf. */
const char *vt_host_mem_said(const vt_host_mem *m, char *buf, size_t n);

/* The stack a new thread maps (pthread's default: RLIMIT_STACK's soft value, 8 MiB on
 * most systems): a limit on mappings (ulimit -v, -d) counts it whole. */
int64_t vt_host_thread_stack(void);

/* The limit that decided counts address space (ulimit -v or -d), where a mapping costs
 * its whole size; else pages touched (RAM, cgroup). */
int vt_host_mem_counts_maps(const vt_host_mem *m);

#endif
