/*
 * test_repeat_aug.c: repeated augmentation in the loader (loader.h repeat_aug, --repeat-aug
 * K), on real encoded videos (tests/make_media.sh), without a frame cache so that every
 * read is a decode:
 *   - the sampler still covers the dataset: each of the 8 videos gives exactly K clips an
 *     epoch, as consecutive samples K i .. K i + K - 1;
 *   - one decode serves the K: the loader counts 8 decodes for 24 clips at K = 3 (and 8
 *     for 8 at K = 1), and the K clips share start, stride and short side;
 *   - they are differently augmented: crop, flip or colour differ within the groups;
 *   - repeat 0 of group i is exactly clip i of the run without repeats (the base draw is
 *     unchanged), and K = 0 is K = 1 bit for bit;
 *   - determinism: 1 and 2 workers give the same batches.
 */
#include <string.h>

#include "base/common.h"
#include "pipeline/data/loader.h"
#include "tests/mediautil.h"
#include "tests/testutil.h"

enum { MAXC = 64, MAXB = 32 };

typedef struct epoch_rec {
    int n, nb;
    int video[MAXC];
    vt_clip_params where[MAXC];
    uint64_t hash[MAXB];
    int64_t decodes;
} epoch_rec;

static void run(vt_dataset *ds, int k, int workers, epoch_rec *r) {
    vt_loader_cfg c;
    vt_loader_cfg_default(&c);
    c.clip.t = 4;
    c.clip.stride = 2;
    c.clip.crop = 32;
    c.clip.short_side = 36;
    c.clip.jitter_min = 32;
    c.clip.jitter_max = 44;
    c.clip.contrast_min = 0.5f;
    c.clip.brightness = 0.1f;
    c.batch = 6;
    c.workers = workers;
    c.seed = 99;
    c.repeat_aug = k;
    char err[512];
    memset(r, 0, sizeof *r);
    vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
    TCHECK(l != NULL, "init: %s", err);
    if (!l)
        return;
    const vt_batch *b;
    while ((b = vt_loader_next(l)) != NULL) {
        if (r->nb < MAXB)
            r->hash[r->nb] = vt_test_batch_hash(b);
        r->nb++;
        for (int i = 0; i < b->n && r->n < MAXC; i++, r->n++) {
            r->video[r->n] = b->video[i];
            r->where[r->n] = b->where[i];
        }
    }
    vt_loader_stats st;
    vt_loader_get_stats(l, &st);
    r->decodes = st.decodes;
    vt_loader_free(&l);
}

int main(void) {
    if (vt_test_media_make() != 0)
        return 1;
    vt_dataset *ds = vt_test_media_good_set("repeat_aug");
    epoch_rec *one = vt_calloc(1, sizeof *one), *rep = vt_calloc(1, sizeof *rep),
              *rep2 = vt_calloc(1, sizeof *rep2), *zero = vt_calloc(1, sizeof *zero);
    run(ds, 1, 1, one);
    run(ds, 3, 1, rep);
    run(ds, 3, 2, rep2);
    run(ds, 0, 1, zero);
    printf("K = 1: %d clips, %lld decodes; K = 3: %d clips in %d batches, %lld decodes\n",
           one->n, (long long)one->decodes, rep->n, rep->nb, (long long)rep->decodes);
    TCHECK(one->n == 8 && one->decodes == 8, "K = 1: %d clips, %lld decodes", one->n,
           (long long)one->decodes);
    TCHECK(rep->n == 24 && rep->nb == 4, "K = 3: %d clips in %d batches, want 24 in 4", rep->n,
           rep->nb);
    TCHECK(rep->decodes == 8, "K = 3: %lld decodes for 24 clips, want 8", (long long)rep->decodes);
    int count[8] = {0}, shared = 1, base = 1, differ = 0;
    for (int g = 0; g < 8; g++) {
        const vt_clip_params *p = &rep->where[3 * g];
        for (int r = 0; r < 3; r++) {
            const vt_clip_params *q = &rep->where[3 * g + r];
            count[rep->video[3 * g + r] % 8]++;
            shared &= rep->video[3 * g + r] == rep->video[3 * g] && q->start == p->start &&
                      q->stride == p->stride && q->short_side == p->short_side;
            if (r)
                differ += q->x0 != p->x0 || q->y0 != p->y0 || q->flip != p->flip ||
                          q->contrast != p->contrast || q->brightness != p->brightness;
        }
        base &= rep->video[3 * g] == one->video[g] && !memcmp(p, &one->where[g], sizeof *p);
    }
    int cover = 1;
    for (int v = 0; v < 8; v++)
        cover &= count[v] == 3;
    TCHECK(cover, "every video 3 times an epoch");
    TCHECK(shared, "the repeats of a sample share its video, frames and scale");
    TCHECK(base, "repeat 0 is not the draw of the run without repeats");
    /* colour is drawn continuously: two repeats alike would take a hash collision */
    TCHECK(differ == 16, "%d of 16 repeats differ from their group's first", differ);
    TCHECK(rep2->nb == rep->nb && !memcmp(rep->hash, rep2->hash, sizeof(uint64_t) * (size_t)rep->nb),
           "1 and 2 workers differ");
    TCHECK(zero->nb == one->nb && !memcmp(zero->hash, one->hash, sizeof(uint64_t) * (size_t)one->nb),
           "K = 0 is not K = 1");
    free(one), free(rep), free(rep2), free(zero);
    vt_dataset_free(&ds);
    return vt_test_done("test_repeat_aug");
}
