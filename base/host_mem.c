/*
 * host_mem.c: the process's memory limits (host_mem.h). The cgroup reader follows the
 * kernel's files as they are: /proc/self/cgroup ("0::/path" for v2, "N:memory:/path" for
 * v1), /proc/self/mountinfo (mount root, mount point, and after " - " the type and super
 * options), then the limit, usage and memory.stat of each level.
 *
 * It must never print, never let an unreadable file stand for "no limit" when another
 * level or limit was readable (each counts on its own), and never call common.c or
 * alloc.c: they call it when memory runs out.
 */
#include "base/host_mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/bytes_text.h"
#include "base/common.h" /* VT_MIN, VT_MAX */

/* v1 writes "no limit" as the page counter's largest value (9223372036854771712 with
 * 4 KiB pages); anything from 2^62 is taken for it */
#define CG_V1_UNLIMITED ((int64_t)1 << 62)

/* The first number of the file at dir/name; -1 when absent or not a number, -2 for v2's
 * "max". */
static int64_t read_num(const char *dir, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[64] = "";
    int64_t v = -1;
    if (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "max", 3))
            v = -2;
        else {
            char *end = NULL;
            long long x = strtoll(line, &end, 10);
            v = end != line && (*end == '\n' || *end == ' ' || !*end) && x >= 0 ? x : -1;
        }
    }
    fclose(f);
    return v;
}

/* `key N` of dir/memory.stat; 0 when absent */
static int64_t stat_num(const char *dir, const char *key) {
    char path[1200], line[256];
    snprintf(path, sizeof path, "%s/memory.stat", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t k = strlen(key);
    long long v = 0;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ' ') {
            v = atoll(line + k + 1);
            break;
        }
    fclose(f);
    return v;
}

/* mountinfo writes a space as \040, a tab \011, a newline \012, a backslash \134 */
static void unescape(char *s) {
    char *o = s;
    for (char *i = s; *i; i++) {
        if (i[0] == '\\' && i[1] >= '0' && i[1] <= '3' && i[2] >= '0' && i[2] <= '7' &&
            i[3] >= '0' && i[3] <= '7') {
            *o++ = (char)((i[1] - '0') * 64 + (i[2] - '0') * 8 + (i[3] - '0'));
            i += 3;
        } else {
            *o++ = *i;
        }
    }
    *o = 0;
}

/* 1 when word is one of the comma-separated words of list */
static int has_word(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, word, n))
            return 1;
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* The cgroup path of this process for version v (2: the "0::" line, 1: the memory
 * controller's) into path. 1, or 0 when it has none. */
static int cgroup_path(const char *root, int v, char *path, size_t n) {
    char file[1100], line[1200];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        found = v == 2 ? !strcmp(line, "0") && c1 + 1 == c2 : has_word(c1 + 1, "memory");
        if (found)
            snprintf(path, n, "%s", c2 + 1);
    }
    fclose(f);
    return found;
}

/* The mount of version v's hierarchy (2: cgroup2; 1: a cgroup mount with the memory
 * controller): its root within the hierarchy and its mount point. 1, or 0. */
static int cgroup_mount(const char *root, int v, char *mroot, char *mpoint, size_t n) {
    char file[1100], line[4096];
    snprintf(file, sizeof file, "%s/proc/self/mountinfo", root);
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        /* id parent maj:min root point options [optional...] - type source super */
        char *sep = strstr(line, " - ");
        if (!sep)
            continue;
        *sep = 0;
        char type[64] = "", super[1024] = "", r[1024] = "", p[1024] = "";
        if (sscanf(sep + 3, "%63s %*s %1023s", type, super) < 1 ||
            sscanf(line, "%*s %*s %*s %1023s %1023s", r, p) != 2)
            continue;
        found = v == 2 ? !strcmp(type, "cgroup2")
                       : !strcmp(type, "cgroup") && has_word(super, "memory");
        if (found) {
            unescape(r);
            unescape(p);
            snprintf(mroot, n, "%s", r);
            snprintf(mpoint, n, "%s", p);
        }
    }
    fclose(f);
    return found;
}

/* Version v's limit with least room, from the process's cgroup up to the mount. */
static int read_version(const char *root, int v, int64_t *limit, int64_t *used, char *file,
                        size_t n) {
    char path[1024], mroot[1024], mpoint[1024];
    if (!cgroup_path(root, v, path, sizeof path) ||
        !cgroup_mount(root, v, mroot, mpoint, sizeof mroot))
        return 0;
    /* the path within the mount: the mount shows the hierarchy from mroot down (a
     * container's own cgroup, with or without a cgroup namespace); a path outside it
     * (another namespace's view) is read at the mount point */
    size_t rl = strlen(mroot);
    const char *rel = path;
    if (!strcmp(mroot, "/"))
        rel = path;
    else if (!strncmp(path, mroot, rl) && (path[rl] == '/' || path[rl] == 0))
        rel = path + rl;
    else
        rel = "";
    char dir[2200], top[1100];
    snprintf(top, sizeof top, "%s%s", root, mpoint);
    snprintf(dir, sizeof dir, "%s%s", top, rel);
    while (strlen(dir) > 1 && dir[strlen(dir) - 1] == '/')
        dir[strlen(dir) - 1] = 0;
    const char *lim_name = v == 2 ? "memory.max" : "memory.limit_in_bytes";
    int found = 0;
    int64_t best = INT64_MAX;
    for (;;) {
        int64_t lim = read_num(dir, lim_name);
        if (lim >= 0 && lim < CG_V1_UNLIMITED) {
            /* usage less the inactive file cache, which the kernel reclaims before it
             * refuses a page (v1's usage and total_ counts take in the children) */
            int64_t cur = read_num(dir, v == 2 ? "memory.current" : "memory.usage_in_bytes");
            int64_t in = stat_num(dir, v == 2 ? "inactive_file" : "total_inactive_file");
            int64_t u = VT_MAX(cur > 0 ? cur - in : 0, 0);
            if (lim - u < best) {
                best = lim - u;
                *limit = lim;
                *used = u;
                snprintf(file, n, "%s/%s", dir, lim_name);
                found = 1;
            }
        }
        if (strlen(dir) <= strlen(top))
            break;
        char *slash = strrchr(dir, '/');
        if (!slash || slash < dir + strlen(top))
            break;
        *slash = 0;
    }
    return found;
}

int vt_cgroup_mem_read(const char *root, int64_t *limit, int64_t *used, char *file, size_t n) {
    if (!root)
        root = "";
    int64_t l2 = 0, u2 = 0, l1 = 0, u1 = 0;
    char f2[1200] = "", f1[1200] = "";
    int h2 = read_version(root, 2, &l2, &u2, f2, sizeof f2);
    int h1 = read_version(root, 1, &l1, &u1, f1, sizeof f1);
    if (!h2 && !h1)
        return 0;
    /* a hybrid system has both; the memory controller is in one of them */
    int two = h2 && (!h1 || l2 - u2 <= l1 - u1);
    *limit = two ? l2 : l1;
    *used = two ? u2 : u1;
    snprintf(file, n, "%s", two ? f2 : f1);
    return 1;
}

/* The number after `key` in the /proc file at path, times 1024 (its "kB"), -1 when
 * unread. Read with read(2) into the stack, not stdio: vt_out_of_memory asks it when
 * malloc has just failed, and fopen allocates. */
static int64_t proc_kb(const char *path, const char *key) {
    char buf[8192];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = 0;
    size_t k = strlen(key);
    for (const char *p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (!strncmp(p, key, k))
            return (int64_t)atoll(p + k) * 1024;
    return -1;
}

static int64_t rlimit_of(int res) {
    struct rlimit rl;
    if (getrlimit(res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return -1;
    return (int64_t)VT_MIN(rl.rlim_cur, (rlim_t)INT64_MAX);
}

/* room under limit lim with used in use (the used unread: nothing left, so a limit that
 * cannot be measured is not taken as room) */
static int64_t room(int64_t lim, int64_t used) {
    return used < 0 ? 0 : VT_MAX(lim - used, 0);
}

void vt_host_mem_get(vt_host_mem *m) {
    memset(m, 0, sizeof *m);
    m->as_limit = m->data_limit = m->cg_limit = -1;
    m->ram_total = VT_MAX(proc_kb("/proc/meminfo", "MemTotal:"), 0);
    m->ram_available = VT_MAX(proc_kb("/proc/meminfo", "MemAvailable:"), 0);
    m->available = m->ram_available;
    m->by = VT_MEM_RAM;
    m->as_limit = rlimit_of(RLIMIT_AS);
    if (m->as_limit >= 0) {
        m->as_used = proc_kb("/proc/self/status", "VmSize:");
        if (room(m->as_limit, m->as_used) < m->available) {
            m->available = room(m->as_limit, m->as_used);
            m->by = VT_MEM_AS;
        }
    }
    m->data_limit = rlimit_of(RLIMIT_DATA);
    if (m->data_limit >= 0) {
        m->data_used = proc_kb("/proc/self/status", "VmData:");
        if (room(m->data_limit, m->data_used) < m->available) {
            m->available = room(m->data_limit, m->data_used);
            m->by = VT_MEM_DATA;
        }
    }
    const char *root = getenv("VT_HOST_ROOT");
    if (vt_cgroup_mem_read(root ? root : "", &m->cg_limit, &m->cg_used, m->cg_file,
                           sizeof m->cg_file)) {
        if (room(m->cg_limit, m->cg_used) < m->available) {
            m->available = room(m->cg_limit, m->cg_used);
            m->by = VT_MEM_CGROUP;
        }
    } else {
        m->cg_limit = -1;
    }
}

int64_t vt_host_thread_stack(void) {
    size_t stack = (size_t)8 << 20;
    pthread_attr_t a;
    if (pthread_getattr_default_np(&a) == 0) {
        pthread_attr_getstacksize(&a, &stack);
        pthread_attr_destroy(&a);
    }
    return (int64_t)stack;
}

int64_t vt_host_mem_left(const vt_host_mem *m, int64_t reserve) {
    return VT_MAX(m->available - VT_MAX(reserve, 0), 0);
}

int vt_host_mem_counts_maps(const vt_host_mem *m) {
    return m->by == VT_MEM_AS || m->by == VT_MEM_DATA;
}

const char *vt_host_mem_said(const vt_host_mem *m, char *buf, size_t n) {
    char a[32], b[32];
    switch (m->by) {
    case VT_MEM_AS:
        snprintf(buf, n, "the address-space limit (ulimit -v: %s, %s mapped)",
                 vt_bytes_text(a, sizeof a, m->as_limit), vt_bytes_text(b, sizeof b, m->as_used));
        break;
    case VT_MEM_DATA:
        snprintf(buf, n, "the data limit (ulimit -d: %s, %s in data mappings)",
                 vt_bytes_text(a, sizeof a, m->data_limit),
                 vt_bytes_text(b, sizeof b, m->data_used));
        break;
    case VT_MEM_CGROUP:
        snprintf(buf, n, "the cgroup's memory limit (%s in %s, %s in use)",
                 vt_bytes_text(a, sizeof a, m->cg_limit), m->cg_file,
                 vt_bytes_text(b, sizeof b, m->cg_used));
        break;
    default:
        snprintf(buf, n, "the RAM (%s total; no tighter limit: ulimit -v, ulimit -d, cgroup)",
                 vt_bytes_text(a, sizeof a, m->ram_total));
        (void)b;
        break;
    }
    return buf;
}
