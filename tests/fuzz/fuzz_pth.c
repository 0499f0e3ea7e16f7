/*
 * fuzz_pth.c: libFuzzer target for the PyTorch checkpoint reader (models/formats/pth.h): the
 * input is a whole .pth file — a zip archive (libzip, data.pkl through the restricted
 * unpickler of models/formats/pickle.c, storages by persistent id) or a legacy torch.save stream.
 * Each input is read twice: from memory (vt_pth_read_mem: libzip over a buffer) and from
 * a file (vt_pth_read: libzip's own file reading, the legacy file read whole).
 *
 * Oracles besides the sanitizers: both readings agree (accepted or refused alike, the
 * same tensors); a refusal names the file and leaves nothing behind; an accepted file's
 * tensors are well formed (ndim 0..8, numel the product of the shape, data present,
 * unique names). It must never write outside its scratch folder.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "models/formats/pth.h"
#include "tests/fuzz/fuzz_util.h"

static char path[1100];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    vt_fuzz_path(vt_fuzz_scratch("pth"), "x.pth", path, sizeof path);
    return 0;
}

static void check_accepted(const vt_pth *p) {
    FUZZ_ASSERT(p->n >= 0 && (p->n == 0 || p->t) && p->container, "accepted: n %d", p->n);
    for (int i = 0; i < p->n; i++) {
        const vt_pth_tensor *t = &p->t[i];
        FUZZ_ASSERT(t->name && t->ndim >= 0 && t->ndim <= 8, "tensor %d: ndim %d", i, t->ndim);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_ASSERT(t->shape[d] >= 0, "tensor %s: size %lld", t->name,
                        (long long)t->shape[d]);
            numel *= t->shape[d];
        }
        FUZZ_ASSERT(numel == t->numel && t->data, "tensor %s: numel %lld of shape product %lld",
                    t->name, (long long)t->numel, (long long)numel);
        volatile float sum = 0; /* touch every value: ASan sees a short buffer */
        for (int64_t k = 0; k < t->numel; k++)
            sum += t->data[k];
        (void)sum;
        for (int j = 0; j < i; j++)
            FUZZ_ASSERT(strcmp(p->t[j].name, t->name) != 0, "name %s twice", t->name);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!path[0])
        LLVMFuzzerInitialize(NULL, NULL);
    /* an exactly-sized copy, so ASan sees a read past the input's end */
    uint8_t *buf = malloc(size ? size : 1);
    FUZZ_ASSERT(buf != NULL, "out of memory (harness)");
    memcpy(buf, data, size);
    vt_pth m, f;
    char errm[1024] = "", errf[1024] = "";
    int rm = vt_pth_read_mem(&m, buf, size, "mem.pth", errm, sizeof errm);
    vt_fuzz_write(path, data, size);
    int rf = vt_pth_read(&f, path, errf, sizeof errf);
    FUZZ_ASSERT(rm == rf, "memory %d ('%s'), file %d ('%s')", rm, errm, rf, errf);
    if (rm) {
        FUZZ_ASSERT(strstr(errm, "mem.pth: ") == errm, "refusal without the name: '%s'", errm);
        FUZZ_ASSERT(strstr(errf, path) == errf, "refusal without the path: '%s'", errf);
        FUZZ_ASSERT(m.n == 0 && !m.t && !m.container && f.n == 0 && !f.t && !f.container,
                    "a refused file left state behind");
    } else {
        check_accepted(&m);
        FUZZ_ASSERT(m.n == f.n && !strcmp(m.container, f.container), "%d vs %d tensors", m.n,
                    f.n);
        for (int i = 0; i < m.n; i++)
            FUZZ_ASSERT(!strcmp(m.t[i].name, f.t[i].name) && m.t[i].numel == f.t[i].numel &&
                            !memcmp(m.t[i].data, f.t[i].data, (size_t)m.t[i].numel * 4),
                        "tensor %d differs between memory and file", i);
    }
    vt_pth_free(&m);
    vt_pth_free(&f);
    free(buf);
    return 0;
}
