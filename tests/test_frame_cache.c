/*
 * test_frame_cache.c: the frame cache (pipeline/data/frame_cache.c) serves exactly the
 * bytes a decode gives, on real encoded files (tests/make_media.sh, made with the ffmpeg
 * command; and the 18 robustness videos when ../shared/data/robustness is there —
 * VT_ROBUSTNESS names another folder):
 *   - per file: clips at many starts, strides, sizes and both pad policies, read once by
 *     a handle without a cache (the reference) and again from kept frames after a
 *     second handle filled the cache (first by its own clip reads, then front to back):
 *     every clip served from the cache equals the reference byte for byte, and on a clean
 *     file every clip is served (none after a decode error needs to be);
 *   - the cap: a cache smaller than a file holds at most its cap, says it is full, and
 *     still serves only exact clips;
 *   - the loader: three epochs with a cache give bitwise the batches of three without,
 *     with 1 and 2 workers, and (the workers fill it before any of them takes a batch)
 *     every clip comes from the cache.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/frame_cache.h"
#include "pipeline/data/loader.h"
#include "pipeline/data/video/video.h"
#include "tests/mediautil.h"
#include "tests/testutil.h"

typedef struct req {
    int64_t start;
    int t, stride, short_side;
    vt_pad_policy pad;
} req;

enum { NREQ = 24 };

/* Clip requests for a video of n frames: starts spread over it, some running past the
 * end (both pads), a few repeated. */
static void make_reqs(req *r, int64_t n, uint64_t seed) {
    uint64_t s = seed;
    for (int i = 0; i < NREQ; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r[i].t = i % 3 == 0 ? 8 : 4;
        r[i].stride = 1 + (int)((s >> 33) % 3);
        r[i].start = (int64_t)((s >> 17) % (uint64_t)(n + 3));
        r[i].short_side = i % 2 ? 36 : 48;
        r[i].pad = i % 4 == 3 ? VT_PAD_REPEAT_LAST : VT_PAD_LOOP;
    }
    r[NREQ - 1] = r[0]; /* the same clip twice */
}

static size_t clip_bytes(const vt_video_info *in, const req *r) {
    int w, h;
    vt_video_info_scaled_size(in, r->short_side, &w, &h);
    return (size_t)r->t * (size_t)w * (size_t)h * 3;
}

/* One file: returns 1 when it opened. clean: expect every clip served. */
static int check_file(const char *path, int clean, int64_t cap) {
    char err[512];
    vt_video *a = NULL, *b = NULL;
    if (vt_video_open(&a, path, 1, err, sizeof err) < 0)
        return 0; /* refused files are the loader's tests' business */
    const vt_video_info *in = vt_video_get_info(a);
    req r[NREQ];
    make_reqs(r, in->nframes, (uint64_t)strlen(path) * 7919u);
    uint8_t *ref[NREQ];
    int ok[NREQ];
    for (int i = 0; i < NREQ; i++) {
        ref[i] = vt_malloc(clip_bytes(in, &r[i]));
        ok[i] = vt_video_read_clip(a, ref[i], r[i].start, r[i].t, r[i].stride, r[i].short_side,
                                   r[i].pad, err, sizeof err) == 0;
    }
    vt_frame_cache *c = vt_frame_cache_new(3, cap);
    TCHECK(vt_video_open(&b, path, 1, err, sizeof err) == 0, "%s: second open", path);
    vt_frame_cache_attach(c, 1, b);
    vt_video_info ci;
    TCHECK(vt_frame_cache_info(c, 1, &ci) && ci.nframes == in->nframes &&
               ci.rotation == in->rotation && ci.disp_width == in->disp_width,
           "%s: info kept", path);
    TCHECK(!vt_frame_cache_info(c, 0, &ci), "%s: no info for a video never attached", path);
    /* Fill by clip reads (frames passed on the way are kept too), then front to back. */
    uint8_t *tmp = vt_malloc(clip_bytes(in, &(req){.t = 8, .short_side = 48}));
    for (int i = 0; i < NREQ / 2; i++)
        (void)vt_video_read_clip(b, tmp, r[i].start, r[i].t, r[i].stride, r[i].short_side,
                                 r[i].pad, err, sizeof err);
    int64_t got = 0;
    (void)vt_video_decode_all(b, -1, NULL, NULL, &got, err, sizeof err);
    vt_scaler *sc = vt_scaler_new();
    int served = 0, exact = 1, wanted = 0;
    for (int i = 0; i < NREQ; i++) {
        if (!ok[i])
            continue;
        wanted++;
        uint8_t *out = vt_malloc(clip_bytes(in, &r[i]));
        int k = vt_frame_cache_read_clip(c, 1, sc, out, r[i].start, r[i].t, r[i].stride,
                                         r[i].short_side, r[i].pad, err, sizeof err);
        TCHECK(k >= 0, "%s: clip %d: %s", path, i, err);
        if (k == 1) {
            served++;
            if (memcmp(out, ref[i], clip_bytes(in, &r[i]))) {
                exact = 0;
                fprintf(stderr, "  %s: clip %d (start %lld, %dx stride %d, side %d) differs\n",
                        path, i, (long long)r[i].start, r[i].t, r[i].stride, r[i].short_side);
            }
        }
        free(out);
    }
    vt_frame_cache_stats st;
    vt_frame_cache_get_stats(c, &st);
    TCHECK(exact, "%s: every clip served from the cache equals the decode (%d served)", path,
           served);
    TCHECK(st.bytes <= st.cap, "%s: %lld bytes held under a cap of %lld", path,
           (long long)st.bytes, (long long)st.cap);
    if (clean && st.cap >= ((int64_t)1 << 30))
        TCHECK(served == wanted && st.frames == in->nframes,
               "%s: clean file, big cache: %d of %d clips served, %lld of %lld frames kept",
               path, served, wanted, (long long)st.frames, (long long)in->nframes);
    if (st.cap < ((int64_t)1 << 30))
        TCHECK(st.full && st.frames < in->nframes, "%s: small cap: full after %lld frames",
               path, (long long)st.frames);
    printf("  %-60s %4lld frames, %2d/%2d clips from the cache, %lld frames kept (%s)\n",
           path + (strlen(path) > 60 ? strlen(path) - 60 : 0), (long long)in->nframes, served,
           wanted, (long long)st.frames, clean ? "clean" : "decode errors allowed");
    vt_scaler_free(&sc);
    free(tmp);
    for (int i = 0; i < NREQ; i++)
        free(ref[i]);
    vt_video_close(&b); /* before the cache: frames outlive their decoder anyway */
    vt_frame_cache_free(&c);
    vt_video_close(&a);
    return 1;
}

static void test_files(void) {
    static const char *clean[] = {"h264.mp4", "mpeg4.avi", "mjpeg.mkv", "ffv1.mkv",
                                  "vfr.mp4", "rot90.mp4", "rot270.mp4", "hostile/short5.mp4",
                                  "hostile/one_frame.mp4"};
    static const char *dirty[] = {"hostile/corrupt_mid.mp4", "hostile/corrupt_mid.avi",
                                  "hostile/truncated.mp4", "hostile/concealed.mp4"};
    char p[8300];
    for (size_t i = 0; i < sizeof clean / sizeof *clean; i++) {
        snprintf(p, sizeof p, "%s/%s", vt_media, clean[i]);
        TCHECK(check_file(p, 1, (int64_t)4 << 30), "%s opens", clean[i]);
    }
    for (size_t i = 0; i < sizeof dirty / sizeof *dirty; i++) {
        snprintf(p, sizeof p, "%s/%s", vt_media, dirty[i]);
        (void)check_file(p, 0, (int64_t)4 << 30);
    }
    /* A cap of about two frames of the 160x120 file. */
    snprintf(p, sizeof p, "%s/h264.mp4", vt_media);
    check_file(p, 1, 70000);
}

/* Every file under the robustness folder (their manifest says which decode with errors:
 * those are only checked for exactness). */
static void test_robustness(const char *root) {
    const char *sub[] = {"codecs", "corrupt", "odd", "rotation", "vfr"};
    int n = 0;
    for (size_t s = 0; s < sizeof sub / sizeof *sub; s++) {
        char d[4200];
        snprintf(d, sizeof d, "%s/%s", root, sub[s]);
        DIR *dir = opendir(d);
        if (!dir)
            continue;
        struct dirent *e;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[8400];
            snprintf(p, sizeof p, "%s/%s", d, e->d_name);
            n += check_file(p, strcmp(sub[s], "corrupt") != 0, (int64_t)4 << 30);
        }
        closedir(dir);
    }
    TCHECK(n >= 15, "robustness: %d files opened and checked", n);
}

static void test_loader(void) {
    vt_dataset *ds = vt_test_media_good_set("frame_cache_loader");
    char err[512];
    enum { EPOCHS = 3, MAXB = 64 };
    uint64_t ref[EPOCHS][MAXB];
    int nref[EPOCHS] = {0};
    for (int pass = 0; pass < 3; pass++) {
        vt_loader_cfg c;
        vt_loader_cfg_default(&c);
        c.clip.t = 4;
        c.clip.stride = 2;
        c.clip.crop = 32;
        c.clip.short_side = 36;
        c.clip.jitter_min = 32;
        c.clip.jitter_max = 44;
        c.batch = 3;
        c.clips_per_video = 2;
        c.seed = 77;
        c.workers = pass == 2 ? 2 : 1;
        c.cache = 2;
        c.frame_cache = pass == 0 ? 0 : (int64_t)256 << 20;
        vt_loader *l = vt_loader_init(ds, &c, err, sizeof err);
        TCHECK(l != NULL, "loader: %s", err);
        if (!l)
            break;
        int same = 1;
        for (int e = 0; e < EPOCHS; e++) {
            if (e)
                vt_loader_start_epoch(l, e, 0);
            const vt_batch *b;
            int nb = 0;
            while ((b = vt_loader_next(l)) != NULL && nb < MAXB) {
                uint64_t h = vt_test_batch_hash(b);
                if (pass == 0)
                    ref[e][nb] = h;
                else
                    same &= nb < nref[e] && ref[e][nb] == h;
                nb++;
            }
            if (pass == 0)
                nref[e] = nb;
            else
                same &= nb == nref[e];
        }
        vt_loader_stats st;
        vt_loader_get_stats(l, &st);
        if (pass > 0) {
            TCHECK(same, "%d worker(s) with a frame cache: the batches of 3 epochs equal "
                         "those without", c.workers);
            /* The workers fill the cache before any of them takes a batch. */
            TCHECK(st.frames.hits == st.clips && st.frames.misses == 0 && st.frames.frames > 0,
                   "%d worker(s): %lld of %lld clips from the cache (%lld misses, %lld frames)",
                   c.workers, (long long)st.frames.hits, (long long)st.clips,
                   (long long)st.frames.misses, (long long)st.frames.frames);
        } else {
            TCHECK(st.frames.cap == 0 && st.frames.hits == 0, "no cache: no hits");
        }
        vt_loader_free(&l);
    }
    vt_dataset_free(&ds);
}

int main(void) {
    if (vt_test_media_make() != 0)
        return 1;
    test_files();
    test_loader();
    int here;
    const char *r = vt_test_robustness_dir(&here);
    if (here)
        test_robustness(r);
    else
        printf("  (no robustness folder at %s: skipped)\n", r);
    return vt_test_done("test_frame_cache");
}
