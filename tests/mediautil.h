/*
 * mediautil.h: the real encoded test files the loader-level tests share — made once per
 * build folder by tests/make_media.sh (the ffmpeg command) under $VT_TMP/loader_media —
 * and the small class folders those tests assemble from them, and the hash that says
 * two loaders gave the same batch. Header-only, like testutil.h.
 *
 * It must never hide a failure: a file that cannot be copied ends the test (it could not
 * go on meaningfully), and a media set that was not made is an error, not a skip.
 */
#ifndef VT_MEDIAUTIL_H
#define VT_MEDIAUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "pipeline/data/batch.h"
#include "pipeline/data/dataset/dataset.h"
#include "tests/testutil.h"

static char vt_media[4096]; /* the media folder, set by vt_test_media_make */

/* Makes (or finds made) the media under $VT_TMP/loader_media. 0, or 1 after saying why. */
static inline int vt_test_media_make(void) {
    const char *tmp = vt_test_env("VT_TMP", "/tmp/vidtrain-tests");
    snprintf(vt_media, sizeof vt_media, "%s/loader_media", tmp);
    if (vt_test_make_media(vt_media, "")) /* make_media.sh makes the folders */
        return 1;
    static const char *const expected[] = {"h264.mp4", "hostile/corrupt_mid.mp4"};
    for (size_t i = 0; i < sizeof expected / sizeof *expected; i++) {
        char p[8300];
        snprintf(p, sizeof p, "%s/%s", vt_media, expected[i]);
        struct stat st;
        if (stat(p, &st) != 0) {
            fprintf(stderr, "make_media.sh did not make %s\n", expected[i]);
            return 1;
        }
    }
    return 0;
}

/* Copy media file `name` to dir/rel (creating folders); ends the test when it cannot. */
static inline void vt_test_media_put(const char *dir, const char *rel, const char *name) {
    char cmd[12800];
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s/%s')\" && cp '%s/%s' '%s/%s'", dir, rel,
             vt_media, name, dir, rel);
    if (system(cmd) != 0) {
        fprintf(stderr, "command failed: %s\n", cmd);
        exit(1);
    }
}

/* A fresh dataset folder `name` of 8 good videos in 3 classes (every codec, VFR, two
 * rotations), opened; ends the test when it does not open. */
static inline vt_dataset *vt_test_media_good_set(const char *name) {
    const char *dir = vt_test_dir(name);
    vt_test_media_put(dir, "left/a.mp4", "h264.mp4");
    vt_test_media_put(dir, "left/b.avi", "mpeg4.avi");
    vt_test_media_put(dir, "left/c.mkv", "ffv1.mkv");
    vt_test_media_put(dir, "right/d.mkv", "mjpeg.mkv");
    vt_test_media_put(dir, "right/e.mp4", "vfr.mp4");
    vt_test_media_put(dir, "right/f.mp4", "rot90.mp4");
    vt_test_media_put(dir, "up/g.mp4", "rot270.mp4");
    vt_test_media_put(dir, "up/h.mp4", "h264.mp4");
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    if (!ds) {
        fprintf(stderr, "dataset: %s\n", err);
        exit(1);
    }
    return ds;
}

/* Everything a batch holds (count, index, pixels, labels, videos, clips), hashed: two
 * loaders that must agree give equal hashes batch by batch. */
static inline uint64_t vt_test_batch_hash(const vt_batch *b) {
    uint64_t h = VT_FNV_SEED;
    h = vt_fnv1a(&b->n, sizeof b->n, h);
    h = vt_fnv1a(&b->index, sizeof b->index, h);
    h = vt_fnv1a(b->x, (size_t)(b->n * vt_batch_clip_floats(b)) * sizeof(float), h);
    for (int k = 0; k < b->nheads; k++)
        if (b->label[k])
            h = vt_fnv1a(b->label[k], (size_t)b->n * sizeof(int32_t), h);
    h = vt_fnv1a(b->video, (size_t)b->n * sizeof(int32_t), h);
    h = vt_fnv1a(b->clip, (size_t)b->n * sizeof(int32_t), h);
    return h;
}

#endif
