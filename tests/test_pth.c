/*
 * test_pth.c: PyTorch checkpoints (models/formats/pth.h) against torch itself.
 *   1. Outside truth: tests/oracle/torch_pth.py writes state_dicts with torch.save — random
 *      r3d_18, mc3_18, r2plus1d_18, a small net in zip, legacy and pickle protocol 4, one
 *      nested under 'state_dict' with 'module.' names beside an optimizer state, strided
 *      views, tensors sharing a storage, every dtype — and each tensor's .float() as raw
 *      float32. Every name, shape, dtype flag and value must match, values bitwise (the
 *      reader's conversions are IEEE round-to-nearest like torch's; no tolerance).
 *   2. The same bytes from memory (vt_pth_read_mem) give the same tensors; every prefix
 *      of the small files is refused cleanly (truncation never crashes, ASan in CI).
 *   3. Hostile files — os.system / builtins.eval / subprocess.Popen payloads (proven live
 *      by the script with Python's own pickle), INST, a REDUCE of a storage type, unknown
 *      opcodes, deep nesting, memo games, truncated and malformed zips, a storage shorter
 *      than its tensor, 2^60 sizes, big-endian, TorchScript — are refused with a message
 *      naming the path and what the manifest expects (pickle offset, the global's name),
 *      and the payloads' marker file never appears.
 * It skips (77) when /usr/bin/python3 cannot import torch and torchvision.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/common.h"
#include "models/formats/pth.h"
#include "tests/testutil.h"

static char g_dir[4096];
static int g_tensors, g_values;

static const char *path_in(const char *name) {
    static char buf[8][4700]; /* g_dir + a name: -Wformat-truncation */
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = vt_malloc(n > 0 ? (size_t)n : 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* One good file against its reference: every tensor, bitwise. */
static void check_good(const char *file, const char *ref) {
    char name[512], err[1024] = "";
    snprintf(name, sizeof name, "%s.ref.json", ref);
    char *js = vt_file_read(path_in(name));
    snprintf(name, sizeof name, "%s.ref.bin", ref);
    size_t reflen = 0;
    float *vals = read_all(path_in(name), &reflen);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    TCHECK(root && vals, "%s: reference %s unreadable", file, ref);
    if (!root || !vals)
        goto end;
    vt_pth p;
    const char *path = path_in(file);
    TCHECK(vt_pth_sniff(path) == 1, "%s: not sniffed as a checkpoint", file);
    int rc = vt_pth_read(&p, path, err, sizeof err);
    TCHECK(rc == 0, "%s: %s", file, err);
    if (rc)
        goto end;
    const cJSON *ts = cJSON_GetObjectItem(root, "tensors");
    const char *container = cJSON_GetObjectItem(root, "container")->valuestring;
    TCHECK(!strcmp(p.container, container), "%s: container '%s', torch nested it under '%s'",
           file, p.container, container);
    TCHECK(p.n == cJSON_GetArraySize(ts), "%s: %d tensors, torch saved %d", file, p.n,
           cJSON_GetArraySize(ts));
    int bad = 0;
    for (int i = 0; i < p.n && i < cJSON_GetArraySize(ts); i++) {
        const cJSON *t = cJSON_GetArrayItem(ts, i), *shape = cJSON_GetObjectItem(t, "shape");
        const vt_pth_tensor *o = &p.t[i];
        int64_t at = (int64_t)cJSON_GetObjectItem(t, "offset")->valuedouble;
        int same = !strcmp(o->name, cJSON_GetObjectItem(t, "name")->valuestring) &&
                   o->ndim == cJSON_GetArraySize(shape) &&
                   o->was_int == cJSON_GetObjectItem(t, "was_int")->valueint;
        int64_t numel = 1;
        for (int d = 0; same && d < o->ndim; d++) {
            same = o->shape[d] == (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble;
            numel *= o->shape[d];
        }
        same = same && numel == o->numel && (size_t)(at + numel) * 4 <= reflen &&
               (numel == 0 || !memcmp(o->data, vals + at, (size_t)numel * 4));
        if (!same && bad++ < 5)
            TCHECK(0, "%s: tensor %d '%s' differs from torch's '%s'", file, i, o->name,
                   cJSON_GetObjectItem(t, "name")->valuestring);
        g_values += (int)numel;
    }
    g_tensors += p.n;
    TCHECK(!bad, "%s: %d of %d tensors differ", file, bad, p.n);

    /* From memory: the same tensors. */
    size_t len = 0;
    void *buf = read_all(path, &len);
    vt_pth m;
    rc = vt_pth_read_mem(&m, buf, len, file, err, sizeof err);
    TCHECK(rc == 0 && m.n == p.n, "%s from memory: %s", file, err);
    for (int i = 0; rc == 0 && i < m.n && i < p.n; i++)
        if (strcmp(m.t[i].name, p.t[i].name) || m.t[i].numel != p.t[i].numel ||
            memcmp(m.t[i].data, p.t[i].data, (size_t)p.t[i].numel * 4)) {
            TCHECK(0, "%s from memory: tensor %s differs", file, p.t[i].name);
            break;
        }
    vt_pth_free(&m);
    vt_pth_free(&p);
    free(buf);
end:
    cJSON_Delete(root);
    free(js);
    free(vals);
}

static int contains_all(const char *err, const cJSON *expect, const char **missing) {
    const cJSON *e;
    cJSON_ArrayForEach(e, expect) {
        if (!strstr(err, e->valuestring)) {
            *missing = e->valuestring;
            return 0;
        }
    }
    return 1;
}

static void check_hostile(const char *file, const cJSON *expect) {
    vt_pth p;
    char err[1024] = "";
    const char *path = path_in(file), *missing = "";
    int rc = vt_pth_read(&p, path, err, sizeof err);
    TCHECK(rc == -1, "%s: accepted (%d tensors)", file, p.n);
    TCHECK(rc != -1 || (p.n == 0 && p.t == NULL && p.container == NULL),
           "%s: a refusal left state behind", file);
    TCHECK(strstr(err, path) == err, "%s: message without the path: '%s'", file, err);
    TCHECK(contains_all(err, expect, &missing), "%s: message lacks '%s': '%s'", file, missing,
           err);
    printf("  refused %-26s %s\n", file, err + strlen(g_dir) + 1);
    vt_pth_free(&p);
    /* from memory too, with the name standing for the path */
    size_t len = 0;
    void *buf = read_all(path, &len);
    err[0] = 0;
    rc = vt_pth_read_mem(&p, buf, len, file, err, sizeof err);
    TCHECK(rc == -1 && strstr(err, file) == err, "%s from memory: rc %d '%s'", file, rc, err);
    vt_pth_free(&p);
    free(buf);
}

/* Every prefix of a small file is refused, never crashes; the whole file reads. */
static void check_prefixes(const char *file) {
    size_t len = 0;
    uint8_t *buf = read_all(path_in(file), &len);
    int accepted = 0;
    for (size_t n = 0; buf && n < len; n++) {
        uint8_t *cut = vt_malloc(n ? n : 1); /* exact size: ASan sees any overread */
        memcpy(cut, buf, n);
        vt_pth p;
        char err[512] = "";
        if (vt_pth_read_mem(&p, cut, n, file, err, sizeof err) == 0)
            accepted++;
        else if (!err[0])
            accepted += 1000;
        vt_pth_free(&p);
        free(cut);
    }
    TCHECK(buf && accepted == 0, "%s: %d of %zu prefixes accepted or refused silently", file,
           accepted, len);
    free(buf);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", vt_test_dir("pth"));
    const char *py = vt_test_env("VT_PYTHON", "/usr/bin/python3");
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' '%s/tests/oracle/torch_pth.py' '%s'", py, src, g_dir);
    int st = system(cmd);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
        printf("test_pth: skipped: %s cannot import torch and torchvision\n", py);
        return VT_TEST_SKIP;
    }
    TCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "torch_pth.py failed (%d)", st);
    char *js = vt_file_read(path_in("manifest.json"));
    cJSON *man = js ? cJSON_Parse(js) : NULL;
    TCHECK(man != NULL, "no manifest.json");
    if (!man)
        return vt_test_done("test_pth");

    const cJSON *g;
    int ngood = 0, nhostile = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(man, "good")) {
        check_good(cJSON_GetObjectItem(g, "file")->valuestring,
                   cJSON_GetObjectItem(g, "ref")->valuestring);
        ngood++;
    }
    printf("test_pth: %d good files, %d tensors, %d values compared bitwise\n", ngood,
           g_tensors, g_values);
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(man, "hostile")) {
        check_hostile(cJSON_GetObjectItem(g, "file")->valuestring,
                      cJSON_GetObjectItem(g, "expect"));
        nhostile++;
    }
    const char *marker = cJSON_GetObjectItem(man, "marker")->valuestring;
    TCHECK(access(marker, F_OK) != 0, "%s exists: a payload ran", marker);
    TCHECK(vt_pth_sniff(path_in("text.pth")) == 0 && vt_pth_sniff(path_in("nothing")) == 0,
           "sniff accepts text or a missing file");
    TCHECK(vt_pth_sniff(path_in("small_legacy_proto4.pth")) == 1, "legacy protocol 4 not sniffed");
    printf("test_pth: %d hostile files refused\n", nhostile);
    check_prefixes("small.pth");
    check_prefixes("small_legacy.pth");
    check_prefixes("dtypes_legacy.pth");

    /* vt_pth_free takes what a refusal or a zeroed struct leaves. */
    vt_pth z = {0};
    vt_pth_free(&z);
    vt_pth_free(NULL);
    cJSON_Delete(man);
    free(js);
    int rc = vt_test_done("test_pth");
    if (rc == 0) { /* 730 MB of checkpoints: kept only when something failed */
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    return rc;
}
