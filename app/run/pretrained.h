/*
 * pretrained.h: `vidtrain train --pretrained NAME` — torchvision's Kinetics-400 weights
 * for the zoo's video models, their input convention, and the one download that puts
 * them in the user's cache.
 *
 * The table is torchvision's model registry (torchvision/models/video/resnet.py and s3d.py): the file
 * name carries the first 8 hex digits of the file's SHA-256 (torch.hub's check_hash
 * convention), which is checked on every use, so a truncated or tampered file is never
 * loaded; and pytorchvideo's Kinetics-400 zoo (hub/resnet.py, hub/slowfast.py: slow_r50,
 * slowfast_r50, i3d_r50 .pyth files), whose names carry no checksum and whose SHA-256
 * vidtrain was not given: the first download's SHA-256 (or the first use's, for a file
 * put in the cache by hand) is recorded beside it (NAME.sha256) and printed, and every
 * later use is checked against that record. The file
 * then goes through --init's reader (models/transfer.h): no pickle code is ever run.
 *
 * It must never write anywhere but the cache folder, and never leave a half-written file
 * under the final name: downloads go to NAME.part (resumed when present) and are renamed
 * once whole and checked.
 */
#ifndef VT_PRETRAINED_H
#define VT_PRETRAINED_H

#include <stddef.h>

typedef struct vt_pretrained {
    const char *name;        /* what --pretrained takes ("r3d18"; torchvision's "r3d_18" too) */
    const char *alias;
    const char *model;       /* the zoo's model */
    const char *file;        /* "r3d_18-b3b3357e.pth" */
    const char *sha_prefix;  /* "b3b3357e"; NULL: not pinned (recorded at the first download) */
    const char *base;        /* the zoo's URL folder; NULL: download.pytorch.org/models/ */
    int stride;              /* the frame stride it was trained with; 0: the trainer's */
    int classes;             /* 400 (Kinetics-400) */
    int clip_t, crop, short_side; /* the input it was trained on (torchvision's transforms) */
    const char *top1;        /* torchvision's reported Kinetics-400 clip accuracy */
} vt_pretrained;

/* NULL if unknown. */
const vt_pretrained *vt_pretrained_find(const char *name);
/* The entry whose file name is path's last component ("dir/X3D_M.pyth": x3d_m's), the
 * zoo's file downloaded by hand and given to --init; NULL if none. */
const vt_pretrained *vt_pretrained_find_file(const char *path);
/* "r3d18, mc3_18, r2plus1d18, s3d, slow_r50, ..." for messages and --help. */
const char *vt_pretrained_names(void);
/* The URL of p: $VIDTRAIN_WEIGHTS_URL (a mirror or a folder, "file:///srv/weights/") +
 * the file name, else the zoo's (download.pytorch.org's, pytorchvideo's). */
void vt_pretrained_url(const vt_pretrained *p, char *url, size_t n);
/* The cache folder: $VIDTRAIN_CACHE, else $XDG_CACHE_HOME/vidtrain, else
 * ~/.cache/vidtrain ($HOME, else the account's home); "" when there is none. */
void vt_pretrained_cache_dir(char *dir, size_t n);
/* path = the cached file, downloaded first when absent (progress on stderr unless
 * quiet), its SHA-256 prefix checked. 0, or -1 with err saying what to do (the URL and
 * where to put the file when there is no network). */
int vt_pretrained_fetch(const vt_pretrained *p, char *path, size_t n, int quiet, char *err,
                        size_t errlen);

#endif
