/*
 * test_host_mem.c: the cgroup memory limit is read as the kernel writes it
 * (base/host_mem.h), and it caps a CPU tower's budget. Each case is a fake root with
 * /proc/self/cgroup, /proc/self/mountinfo and the cgroup files in the kernel's own format
 * (lines copied from a Docker container, a systemd session and this machine's hybrid
 * v1/v2 layout):
 *   1. cgroup v2 in a container (Docker's default, its own cgroup namespace: "0::/"):
 *      memory.max 1 GiB, memory.current 1 GiB of which 512 MiB inactive file cache: a
 *      1 GiB limit with 512 MiB in use (the cache is reclaimed before a page is refused).
 *   2. v2 on a host, the limit two levels up (systemd's MemoryMax on user-1000.slice,
 *      "max" in the session's own cgroup): the parent's limit is the one.
 *   3. v1 in a container (Docker on a v1 host): the memory controller's mount shows the
 *      container's cgroup (/docker/ID) at /sys/fs/cgroup/memory; usage less
 *      total_inactive_file.
 *   4. hybrid, as on this machine: a cgroup2 mount without a memory controller, v1's
 *      memory unlimited (9223372036854771712): no limit.
 *   5. a mount point with a space (\040 in mountinfo).
 *   6. nothing readable: no limit.
 *   7. `vidtrain plan` in case 1's container (VT_HOST_ROOT): the cgroup decided, the
 *      memory line says so, and the CPU tower's budget is what it leaves (512 MiB less
 *      OpenBLAS's touched buffers), where the budget was the host's RAM. (Smaller than
 *      any RAM this test meets free, so the cgroup decides on a loaded machine too.) A
 *      --mem cap past what it leaves is warned of, one within it is not.
 */
#include <sys/stat.h>

#include "base/host_mem.h"
#include "tests/apputil.h"

static char g_dir[4096];

/* root/rel's folders made, then text written to it */
static void put(const char *root, const char *rel, const char *text) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s/%s')\"", root, rel);
    TCHECK(system(cmd) == 0, "mkdir for %s", rel);
    vt_test_write_file(root, rel, text);
}

static const char *root_of(const char *name) {
    static char r[4200];
    snprintf(r, sizeof r, "%s/%s", g_dir, name);
    return r;
}

/* a memory.stat as v2 writes it (the keys around inactive_file too) */
static void stat_v2(const char *root, const char *dir, long long inactive) {
    char rel[600], text[600];
    snprintf(rel, sizeof rel, "%s/memory.stat", dir);
    snprintf(text, sizeof text, "anon 402653184\nfile 671088640\nkernel 12582912\n"
             "active_anon 0\ninactive_anon 402653184\nactive_file 134217728\n"
             "inactive_file %lld\nunevictable 0\n", inactive);
    put(root, rel, text);
}

static void v2_container(void) {
    const char *r = root_of("v2c");
    put(r, "proc/self/cgroup", "0::/\n");
    put(r, "proc/self/mountinfo",
        "1084 1066 0:355 / / rw,relatime master:455 - overlay overlay rw,lowerdir=/l\n"
        "1090 1084 0:359 / /sys ro,nosuid,nodev,noexec,relatime - sysfs sysfs ro\n"
        "1091 1090 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup "
        "rw,nsdelegate,memory_recursiveprot\n");
    put(r, "sys/fs/cgroup/memory.max", "1073741824\n");
    put(r, "sys/fs/cgroup/memory.current", "1073741824\n");
    stat_v2(r, "sys/fs/cgroup", 536870912);
    int64_t lim = 0, used = 0;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 1 &&
           lim == 1073741824LL && used == 536870912LL && strstr(file, "/sys/fs/cgroup/memory.max"),
           "v2 container: limit %lld used %lld (%s); 1 GiB with 512 MiB in use expected",
           (long long)lim, (long long)used, file);
}

static void v2_parent(void) {
    const char *r = root_of("v2p");
    const char *s = "sys/fs/cgroup/user.slice/user-1000.slice";
    put(r, "proc/self/cgroup", "0::/user.slice/user-1000.slice/session-3.scope\n");
    put(r, "proc/self/mountinfo",
        "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
        "35 25 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
        "cgroup2 rw,nsdelegate,memory_recursiveprot\n");
    char rel[600];
    snprintf(rel, sizeof rel, "%s/session-3.scope/memory.max", s);
    put(r, rel, "max\n");
    snprintf(rel, sizeof rel, "%s/session-3.scope/memory.current", s);
    put(r, rel, "104857600\n");
    snprintf(rel, sizeof rel, "%s/memory.max", s);
    put(r, rel, "2147483648\n");
    snprintf(rel, sizeof rel, "%s/memory.current", s);
    put(r, rel, "1073741824\n");
    stat_v2(r, s, 0);
    put(r, "sys/fs/cgroup/user.slice/memory.max", "max\n");
    int64_t lim = 0, used = 0;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 1 &&
           lim == 2147483648LL && used == 1073741824LL &&
           strstr(file, "user-1000.slice/memory.max") && !strstr(file, "session-3"),
           "v2 limit on a parent: limit %lld used %lld (%s); user-1000.slice's 2 GiB expected",
           (long long)lim, (long long)used, file);
}

static void v1_container(void) {
    const char *r = root_of("v1c");
    put(r, "proc/self/cgroup",
        "12:pids:/docker/3f2a9c\n11:memory:/docker/3f2a9c\n10:cpu,cpuacct:/docker/3f2a9c\n"
        "1:name=systemd:/docker/3f2a9c\n0::/system.slice/containerd.service\n");
    put(r, "proc/self/mountinfo",
        "700 699 0:50 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - tmpfs tmpfs ro,mode=755\n"
        "705 700 0:29 /docker/3f2a9c /sys/fs/cgroup/memory ro,nosuid,nodev,noexec,relatime "
        "master:15 - cgroup cgroup rw,memory\n"
        "706 700 0:30 /docker/3f2a9c /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime "
        "master:16 - cgroup cgroup rw,cpu,cpuacct\n");
    put(r, "sys/fs/cgroup/memory/memory.limit_in_bytes", "4294967296\n");
    put(r, "sys/fs/cgroup/memory/memory.usage_in_bytes", "1500000000\n");
    put(r, "sys/fs/cgroup/memory/memory.stat",
        "cache 700000000\nrss 800000000\ninactive_file 500000000\n"
        "hierarchical_memory_limit 4294967296\ntotal_cache 700000000\n"
        "total_inactive_file 500000000\n");
    int64_t lim = 0, used = 0;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 1 &&
           lim == 4294967296LL && used == 1000000000LL &&
           strstr(file, "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
           "v1 container: limit %lld used %lld (%s); 4 GiB with 1e9 in use expected",
           (long long)lim, (long long)used, file);
}

static void hybrid_unlimited(void) {
    const char *r = root_of("hyb");
    put(r, "proc/self/cgroup", "4:memory:/process_api/eb6ca1\n1:cpu:/\n0::/\n");
    put(r, "proc/self/mountinfo",
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
    put(r, "sys/fs/cgroup/unified/cgroup.controllers", "\n");
    put(r, "sys/fs/cgroup/memory/process_api/eb6ca1/memory.limit_in_bytes",
        "9223372036854771712\n");
    put(r, "sys/fs/cgroup/memory/process_api/eb6ca1/memory.usage_in_bytes", "81911808\n");
    put(r, "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "9223372036854771712\n");
    put(r, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    int64_t lim = -1, used = -1;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 0,
           "hybrid, v1 unlimited: a limit read (%lld in %s)", (long long)lim, file);
    /* the same with a limit on the v1 level above: it is found through the walk up */
    put(r, "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes", "8589934592\n");
    put(r, "sys/fs/cgroup/memory/process_api/memory.usage_in_bytes", "2147483648\n");
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 1 && lim == 8589934592LL &&
           used == 2147483648LL && strstr(file, "/memory/process_api/memory.limit_in_bytes"),
           "hybrid, v1 limit a level up: %lld used %lld (%s)", (long long)lim, (long long)used,
           file);
}

static void escaped_mount(void) {
    const char *r = root_of("esc");
    put(r, "proc/self/cgroup", "0::/job\n");
    put(r, "proc/self/mountinfo",
        "35 25 0:30 / /cg\\040fs rw,relatime shared:9 - cgroup2 cgroup2 rw\n");
    put(r, "cg fs/job/memory.max", "1073741824\n");
    put(r, "cg fs/job/memory.current", "0\n");
    int64_t lim = 0, used = 0;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(r, &lim, &used, file, sizeof file) == 1 && lim == 1073741824LL &&
           used == 0, "a mount point with a space: %lld (%s)", (long long)lim, file);
}

static void nothing(void) {
    int64_t lim = -1, used = -1;
    char file[1200] = "";
    TCHECK(vt_cgroup_mem_read(root_of("none"), &lim, &used, file, sizeof file) == 0,
           "no files: a limit read (%lld)", (long long)lim);
}

static void plan_in_container(void) {
    const char *bin = vt_test_bin("test_host_mem");
    if (!bin)
        return;
    int rc = vt_test_sh("cd '%s' && VT_HOST_ROOT='%s' '%s' plan --model tiny --clip 4x32 "
                        "--batch 2 --threads 2 > plan.out 2>&1", g_dir, root_of("v2c"), bin);
    char out[4200];
    snprintf(out, sizeof out, "%s/plan.out", g_dir);
    /* 1 GiB less 512 MiB in use = 512 MiB; less 2 threads x 8 MiB of OpenBLAS buffers
     * touched = 496 MiB */
    TCHECK(rc == 0 && vt_test_file_has(out, "cpu memory: 512.0 MiB available under the "
                                       "cgroup's memory limit (1.00 GiB in ") &&
           vt_test_file_has(out, "sys/fs/cgroup/memory.max, 512.0 MiB in use)") &&
           vt_test_file_has(out, "496.0 MiB for 1 cpu tower") &&
           vt_test_file_has(out, "cpu0      cpu      2        496.0 MiB"),
           "plan in a 1 GiB container: exit %d, the cgroup's limit and a 496 MiB budget "
           "expected (see %s)", rc, out);
    TCHECK(!vt_test_file_has(out, "warning"), "no warning without --mem (see %s)", out);
    /* --mem past it: said, with what is left (the kernel's OOM killer ends such a run
     * without a word); within it: nothing */
    rc = vt_test_sh("cd '%s' && VT_HOST_ROOT='%s' '%s' plan --model tiny --clip 4x32 --batch 2 "
                    "--threads 2 --mem 2G > mem.out 2>&1", g_dir, root_of("v2c"), bin);
    snprintf(out, sizeof out, "%s/mem.out", g_dir);
    TCHECK(rc == 0 && vt_test_file_has(out, "warning: --mem gives the cpu towers 2.00 GiB, more "
                                       "than the 496.0 MiB left to them under the cgroup's") &&
               vt_test_file_has(out, "without a word); give them 496.0 MiB or less"),
           "--mem 2G in a 1 GiB container: exit %d, a warning naming 496 MiB (see %s)", rc, out);
    rc = vt_test_sh("cd '%s' && VT_HOST_ROOT='%s' '%s' plan --model tiny --clip 4x32 --batch 2 "
                    "--threads 2 --mem 400M > mem.out 2>&1", g_dir, root_of("v2c"), bin);
    TCHECK(rc == 0 && !vt_test_file_has(out, "warning"), "--mem 400M within it: no warning (%s)",
           out);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("host_mem"));
    v2_container();
    v2_parent();
    v1_container();
    hybrid_unlimited();
    escaped_mount();
    nothing();
    plan_in_container();
    return vt_test_done("test_host_mem");
}
