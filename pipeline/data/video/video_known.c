/*
 * video_known.c: what opening a video learned, kept for the next open of the same file in
 * this process (video_impl.h, vt_video_set_open_cache in video.h).
 *
 * Opening 1080p H.264 costs ~140 ms of one core (docs/notebook/decode.md, "Where a
 * clip's CPU time goes"): the container's probe (~40 ms: FFmpeg decodes a frame), demuxing every packet
 * for the frame index (~3 ms from the page cache, the whole file from a disk), and
 * decoding the first frame to prove the file decodes (~95 ms: with B-frames that is three
 * frames, the heaviest of the GOP). The loader's workers each keep a few videos open and
 * open one again, in another worker or after evicting it, for nearly every clip of a
 * dataset larger than that. An open that finds its file here takes the index instead of
 * demuxing, and, when the first open decoded on the CPU without an error, also the first
 * frame's facts (size, format, range) instead of decoding it: the file was proven once.
 * Where its container's header states the streams (MP4/MOV, Matroska/WebM) and says
 * the same of the chosen stream as before, it also takes the probe's parameters of that
 * stream instead of probing, which decodes a frame again.
 *
 * A file is the same when its path, device, inode, size and modification time (ns) are;
 * frame folders are not kept (their files change under an unchanged folder). Bounded in
 * bytes, least recently used out first; thread-safe (one mutex, held for a copy).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/common.h"
#include "pipeline/data/video/video_impl.h"

typedef struct known {
    char *path;
    uint64_t hash;               /* of path and identity, compared first */
    vt_vid_file_id id;
    vt_vid_known k;              /* its pts and kf arrays owned here */
    int64_t bytes;
    uint64_t used;
    int next;                    /* the next entry of its bucket, -1 at the end */
} known;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static known *tab;               /* (n, cap) */
static int n, cap;
static int *head;                /* (2 cap) buckets: first entry by hash, -1 when empty */
static int64_t held, budget = VT_VIDEO_OPEN_CACHE_DEFAULT;
static uint64_t tick;
static vt_video_open_cache_stats counts;

static uint64_t key_hash(const char *path, const vt_vid_file_id *id) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the path, then the identity */
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    const int64_t f[] = {id->dev, id->ino, id->size, id->mtime_s, id->mtime_ns};
    for (size_t i = 0; i < VT_ARRAY_LEN(f); i++)
        h = vt_hash64(h ^ (uint64_t)f[i]);
    return h;
}

static int *bucket(uint64_t h) { return &head[h & (uint64_t)(2 * cap - 1)]; }

static int find(const char *path, const vt_vid_file_id *id, uint64_t h) {
    for (int i = cap ? *bucket(h) : -1; i >= 0; i = tab[i].next)
        if (tab[i].hash == h && !memcmp(&tab[i].id, id, sizeof *id) && !strcmp(tab[i].path, path))
            return i;
    return -1;
}

/* The link in its bucket that leads to entry i now leads to `to`. */
static void relink(int i, int to) {
    int *p = bucket(tab[i].hash);
    while (*p != i)
        p = &tab[*p].next;
    *p = to;
}

static void drop(int i) {
    held -= tab[i].bytes;
    free(tab[i].path);
    free(tab[i].k.pts);
    free(tab[i].k.kf);
    avcodec_parameters_free(&tab[i].k.par);
    relink(i, tab[i].next);
    if (i != --n) { /* the last entry moves into the hole */
        relink(n, i);
        tab[i] = tab[n];
    }
    counts.entries = n;
    counts.bytes = held;
}

/* Room for one more entry: twice the table and its buckets when full. */
static void grow(void) {
    if (n < cap)
        return;
    cap = cap ? 2 * cap : 64;
    tab = vt_realloc(tab, (size_t)cap * sizeof *tab);
    free(head);
    head = vt_malloc((size_t)(2 * cap) * sizeof *head);
    for (int b = 0; b < 2 * cap; b++)
        head[b] = -1;
    for (int i = 0; i < n; i++) {
        int *p = bucket(tab[i].hash);
        tab[i].next = *p;
        *p = i;
    }
}

/* The least recently used out until `more` bytes fit the budget. */
static void make_room(int64_t more) {
    while (n > 0 && held + more > budget) {
        int old = 0;
        for (int i = 1; i < n; i++)
            if (tab[i].used < tab[old].used)
                old = i;
        drop(old);
    }
}

/* A copy of p, or NULL (none, or no memory: the open that takes it probes instead). */
static AVCodecParameters *dup_par(const AVCodecParameters *p) {
    AVCodecParameters *c = p ? avcodec_parameters_alloc() : NULL;
    if (c && avcodec_parameters_copy(c, p) < 0)
        avcodec_parameters_free(&c);
    return c;
}

static int64_t *dup_i64(const int64_t *a, int64_t len) {
    int64_t *b = vt_malloc((size_t)VT_MAX(len, 1) * sizeof *b);
    memcpy(b, a, (size_t)len * sizeof *b);
    return b;
}

int vt_vid_known_get(const char *path, const vt_vid_file_id *id, vt_vid_known *out) {
    uint64_t h = key_hash(path, id);
    pthread_mutex_lock(&lock);
    int i = budget > 0 ? find(path, id, h) : -1;
    if (i >= 0) {
        tab[i].used = ++tick;
        *out = tab[i].k;
        out->pts = dup_i64(tab[i].k.pts, tab[i].k.info.nframes);
        out->kf = dup_i64(tab[i].k.kf, tab[i].k.nkf);
        out->par = dup_par(tab[i].k.par);
        counts.hits++;
    } else {
        counts.misses++;
    }
    pthread_mutex_unlock(&lock);
    return i >= 0;
}

void vt_vid_known_put(const char *path, const vt_vid_file_id *id, const vt_vid_known *k) {
    /* A file rewritten in the same granule of its clock (a jiffy, a few ms) keeps its
     * size and time: one modified lately is not kept (git's "racy" files). */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if ((int64_t)now.tv_sec - id->mtime_s < 2)
        return;
    int64_t bytes = (int64_t)(sizeof(known) + strlen(path) + 1) +
                    8 * (k->info.nframes + k->nkf) +
                    (k->par ? (int64_t)sizeof *k->par + k->par->extradata_size : 0);
    uint64_t h = key_hash(path, id);
    pthread_mutex_lock(&lock);
    if (bytes <= budget && find(path, id, h) < 0) {
        make_room(bytes);
        grow();
        int *b = bucket(h);
        known *e = &tab[n];
        e->next = *b;
        *b = n++;
        e->path = vt_strdup(path);
        e->hash = h;
        e->id = *id;
        e->k = *k;
        e->k.pts = dup_i64(k->pts, k->info.nframes);
        e->k.kf = dup_i64(k->kf, k->nkf);
        e->k.par = dup_par(k->par);
        e->bytes = bytes;
        e->used = ++tick;
        held += bytes;
        counts.entries = n;
        counts.bytes = held;
    }
    pthread_mutex_unlock(&lock);
}

void vt_vid_known_probe_skipped(void) {
    pthread_mutex_lock(&lock);
    counts.probes_skipped++;
    pthread_mutex_unlock(&lock);
}

void vt_video_set_open_cache(int64_t bytes) {
    pthread_mutex_lock(&lock);
    budget = VT_MAX(bytes, 0);
    make_room(0);
    pthread_mutex_unlock(&lock);
}

void vt_video_get_open_cache_stats(vt_video_open_cache_stats *out) {
    pthread_mutex_lock(&lock);
    *out = counts;
    pthread_mutex_unlock(&lock);
}
