/*
 * pretrained.c: torchvision's Kinetics-400 weights (pretrained.h): the registry, the
 * cache, and the download with libcurl (resumable into NAME.part, progress on stderr,
 * SHA-256 prefix checked, renamed into place). Built without libcurl (the static GPU
 * build), it says where to put a file fetched by other means.
 */
#include "app/run/pretrained.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/run/run_files.h"
#include "base/common.h"
#include "base/sha256.h"

#ifdef VT_HAVE_CURL
#include <curl/curl.h>
#endif

#define PYVIDEO_URL "https://dl.fbaipublicfiles.com/pytorchvideo/model_zoo/kinetics/"

/* torchvision 0.14+: models/video/resnet.py and s3d.py (weights, transforms, metrics);
 * pytorchvideo: hub/resnet.py, hub/slowfast.py and docs/source/model_zoo.md (8x8: 8 slow
 * frames at stride 8; SlowFast's 32 fast frames at stride 2; 224 crops of 256 frames). */
static const vt_pretrained table[] = {
    {"r3d18", "r3d_18", "r3d18", "r3d_18-b3b3357e.pth", "b3b3357e", NULL, 0, 400, 16, 112, 128,
     "63.2"},
    {"mc3_18", "mc3-18", "mc3_18", "mc3_18-a90a0ba3.pth", "a90a0ba3", NULL, 0, 400, 16, 112, 128,
     "63.96"},
    {"r2plus1d18", "r2plus1d_18", "r2plus1d18", "r2plus1d_18-91a641e6.pth", "91a641e6", NULL, 0,
     400, 16, 112, 128, "67.463"},
    {"s3d", "s3d_kinetics400", "s3d", "s3d-d76dad2f.pth", "d76dad2f", NULL, 0, 400, 16, 224, 256,
     "68.368"},
    {"slow_r50", "SLOW_8x8_R50", "slow_r50", "SLOW_8x8_R50.pyth", NULL, PYVIDEO_URL, 8, 400, 8,
     224, 256, "74.58"},
    {"slowfast_r50", "SLOWFAST_8x8_R50", "slowfast_r50", "SLOWFAST_8x8_R50.pyth", NULL,
     PYVIDEO_URL, 2, 400, 32, 224, 256, "76.94"},
    {"i3d_r50", "I3D_8x8_R50", "i3d_r50", "I3D_8x8_R50.pyth", NULL, PYVIDEO_URL, 8, 400, 8, 224,
     256, "73.27"},
    /* pytorchvideo hub/x3d.py and model_zoo.md: X3D's frames x stride and crops (160, 160,
     * 224, 312 in training; short sides as their inference transforms, 182 for XS and S) */
    {"x3d_xs", "X3D_XS", "x3d_xs", "X3D_XS.pyth", NULL, PYVIDEO_URL, 12, 400, 4, 160, 182,
     "69.12"},
    {"x3d_s", "X3D_S", "x3d_s", "X3D_S.pyth", NULL, PYVIDEO_URL, 6, 400, 13, 160, 182, "73.33"},
    {"x3d_m", "X3D_M", "x3d_m", "X3D_M.pyth", NULL, PYVIDEO_URL, 5, 400, 16, 224, 256, "75.94"},
    {"x3d_l", "X3D_L", "x3d_l", "X3D_L.pyth", NULL, PYVIDEO_URL, 5, 400, 16, 312, 356, "77.44"},
    /* torchvision 0.14 models/video/mvit.py: MViT_V2_S_Weights and MViT_V1_B_Weights'
     * KINETICS400_V1 (16 frames
     * at frame_rate 7.5: a stride of 4 at 30 fps; 224 crops of 256) */
    {"mvit_v2_s", "mvit_v2_s", "mvit_v2_s", "mvit_v2_s-ae3be167.pth", "ae3be167", NULL, 4, 400,
     16, 224, 256, "80.757"},
    {"mvit_v1_b", "mvit_v1_b", "mvit_v1_b", "mvit_v1_b-dbeb1030.pth", "dbeb1030", NULL, 4, 400,
     16, 224, 256, "78.477"},
    /* hub/r2plus1d.py, hub/csn.py; model_zoo.md: 16x4 and 32x2, 224 crops */
    {"r2plus1d_r50", "R2PLUS1D_16x4_R50", "r2plus1d_r50", "R2PLUS1D_16x4_R50.pyth", NULL,
     PYVIDEO_URL, 4, 400, 16, 224, 256, "76.01"},
    {"csn_r101", "CSN_32x2_R101", "csn_r101", "CSN_32x2_R101.pyth", NULL, PYVIDEO_URL, 2, 400, 32,
     224, 256, "77.00"},
};

#define BASE_URL "https://download.pytorch.org/models/"

const vt_pretrained *vt_pretrained_find(const char *name) {
    for (size_t i = 0; i < VT_ARRAY_LEN(table); i++)
        if (!strcmp(name, table[i].name) || !strcmp(name, table[i].alias))
            return &table[i];
    return NULL;
}

const vt_pretrained *vt_pretrained_find_file(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < VT_ARRAY_LEN(table); i++)
        if (!strcmp(base, table[i].file))
            return &table[i];
    return NULL;
}

const char *vt_pretrained_names(void) {
    /* from the table, so a row added is a name listed */
    static char names[512];
    if (!names[0])
        for (size_t i = 0, n = 0; i < VT_ARRAY_LEN(table) && n < sizeof names; i++)
            n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", i ? ", " : "",
                                  table[i].name);
    return names;
}

void vt_pretrained_url(const vt_pretrained *p, char *url, size_t n) {
    const char *base = getenv("VIDTRAIN_WEIGHTS_URL");
    if (!base || !base[0])
        base = p->base ? p->base : BASE_URL;
    size_t bl = strlen(base);
    snprintf(url, n, "%s%s%s", base, bl && base[bl - 1] == '/' ? "" : "/", p->file);
}

void vt_pretrained_cache_dir(char *dir, size_t n) {
    const char *v = getenv("VIDTRAIN_CACHE");
    if (v && v[0]) {
        snprintf(dir, n, "%s", v);
        return;
    }
    v = getenv("XDG_CACHE_HOME");
    if (v && v[0]) {
        snprintf(dir, n, "%s/vidtrain", v);
        return;
    }
    v = getenv("HOME");
    if (!v || !v[0]) { /* the account's home; never the current folder, which may be a
                          dataset (HOME unset wrote .cache/ into it) */
        const struct passwd *pw = getpwuid(getuid());
        v = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    }
    if (v && v[0])
        snprintf(dir, n, "%s/.cache/vidtrain", v);
    else
        dir[0] = 0;
}

/* A file of a zoo that publishes no checksum (sha_prefix NULL): its SHA-256 against the
 * record `cached`.sha256 written at its first download or use (pretrained.h), or, with
 * `record` (the first download, checked at `path` = the .part; the first use of a file
 * put in the cache by hand), that record made. */
static int check_recorded(const vt_pretrained *p, const char *path, const char *cached,
                          const char *hex, int record, int quiet, char *err, size_t errlen) {
    char rec[2200], e1[1024];
    snprintf(rec, sizeof rec, "%s.sha256", cached);
    if (record) {
        char line[128];
        int len = snprintf(line, sizeof line, "%s  %s\n", hex, p->file);
        if (vt_output_check(rec, e1, sizeof e1) != 0 ||
            vt_file_write_atomic(rec, line, (size_t)len, e1, sizeof e1) != 0) {
            vt_set_err(err, errlen, "%s", e1);
            return -1;
        }
        if (!quiet)
            fprintf(stderr, "%s: SHA-256 %s (the zoo publishes none: recorded in %s and checked "
                    "on every later use)\n", p->file, hex, rec);
        return 0;
    }
    char *want = vt_file_read(rec);
    int ok = want && strlen(want) >= 64 && !strncmp(want, hex, 64);
    if (!ok)
        vt_set_err(err, errlen, "%s: SHA-256 %.16s... is not the %.16s... recorded in %s at its "
                   "first use: the file changed or is damaged (delete both and run again "
                   "to download it anew)", path, hex, want ? want : "(no record)", rec);
    free(want);
    return ok ? 0 : -1;
}

static int check_sum(const vt_pretrained *p, const char *path, const char *cached, int record,
                     int quiet, char *err, size_t errlen) {
    char hex[65];
    if (vt_sha256_file(path, hex) != 0) {
        vt_set_err(err, errlen, "%s: cannot read it: %s", path, strerror(errno));
        return -1;
    }
    if (!p->sha_prefix)
        return check_recorded(p, path, cached, hex, record, quiet, err, errlen);
    if (strncmp(hex, p->sha_prefix, strlen(p->sha_prefix)) != 0) {
        vt_set_err(err, errlen, "%s: SHA-256 %.16s... does not begin with %s as %s's should: "
                   "the file is damaged or not torchvision's (delete it and run again to "
                   "download it anew)", path, hex, p->sha_prefix, p->file);
        return -1;
    }
    return 0;
}

#ifdef VT_HAVE_CURL
typedef struct dl_state {
    FILE *f;
    int quiet;
    int werr; /* errno of the first write into the .part that failed (a full disk) */
    double t_last, t0;
    curl_off_t resumed;
} dl_state;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ctx) {
    dl_state *d = ctx;
    size_t w = fwrite(ptr, size, nmemb, d->f);
    if (w < nmemb && !d->werr)
        d->werr = errno ? errno : EIO;
    return w * size;
}

static int on_progress(void *ctx, curl_off_t total, curl_off_t now, curl_off_t ut, curl_off_t un) {
    (void)ut;
    (void)un;
    dl_state *d = ctx;
    double t = vt_now();
    if (d->quiet || (t - d->t_last < 0.5 && !(total > 0 && now == total)))
        return 0;
    d->t_last = t;
    double mb = (double)(now + d->resumed) / 1048576.0;
    double rate = t > d->t0 ? (double)now / 1048576.0 / (t - d->t0) : 0;
    if (total > 0) {
        double all = (double)(total + d->resumed) / 1048576.0;
        int w = (int)(30.0 * mb / all);
        fprintf(stderr, "\r  [%.*s%*s] %6.1f / %.1f MiB  %5.1f MiB/s", w,
                "##############################", 30 - w, "", mb, all, rate);
    } else {
        fprintf(stderr, "\r  %6.1f MiB  %5.1f MiB/s", mb, rate);
    }
    return 0;
}

/* url -> part (appended from its current size). 0, or -1 with err, -2 when writing part
 * failed (err names it and the reason). */
static int download(const char *url, const char *part, int quiet, char *err, size_t errlen) {
    static int inited;
    if (!inited) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        inited = 1;
    }
    dl_state d = {.quiet = quiet, .t0 = vt_now()};
    struct stat st;
    if (stat(part, &st) == 0 && st.st_size > 0)
        d.resumed = (curl_off_t)st.st_size;
    d.f = fopen(part, d.resumed ? "ab" : "wb");
    if (!d.f) {
        vt_set_err(err, errlen, "%s: cannot write: %s", part, strerror(errno));
        return -1;
    }
    CURL *c = curl_easy_init();
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &d);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    /* a stalled transfer (under 1 KiB/s for a minute) fails instead of hanging */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    if (d.resumed)
        curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, d.resumed);
    if (!quiet)
        fprintf(stderr, "downloading %s%s\n", url, d.resumed ? " (resuming)" : "");
    CURLcode rc = curl_easy_perform(c);
    if (!quiet)
        fprintf(stderr, "\n");
    int bad = fflush(d.f) != 0 || fsync(fileno(d.f)) != 0;
    bad |= fclose(d.f) != 0;
    curl_easy_cleanup(c);
    if (rc == CURLE_WRITE_ERROR && d.werr) { /* this disk, not the network */
        vt_set_err(err, errlen, "cannot write %s: %s (free space there, or VIDTRAIN_CACHE=DIR "
                   "puts the cache elsewhere; the download resumes from what it holds)", part,
                   strerror(d.werr));
        return -2;
    }
    if (rc != CURLE_OK) {
        vt_set_err(err, errlen, "cannot download %s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
        return -1;
    }
    if (bad) {
        vt_set_err(err, errlen, "%s: write failed: %s", part, strerror(errno));
        return -1;
    }
    return 0;
}
#endif

int vt_pretrained_fetch(const vt_pretrained *p, char *path, size_t n, int quiet, char *err,
                        size_t errlen) {
    char dir[1536], url[2048];
    vt_pretrained_cache_dir(dir, sizeof dir);
    if (!dir[0]) {
        vt_set_err(err, errlen, "no cache folder for the weights: HOME is not set and this "
                   "account has no home; set VIDTRAIN_CACHE=DIR");
        return -1;
    }
    vt_pretrained_url(p, url, sizeof url);
    snprintf(path, n, "%s/%s", dir, p->file);
    if (vt_file_exists(path)) {
        /* A file of an unpinned zoo with no record was put there by hand, as the message
         * without network says to (a download records before it renames into place): its
         * first use records its SHA-256, as a download's does. */
        char rec[2200];
        snprintf(rec, sizeof rec, "%s.sha256", path);
        const int first = !p->sha_prefix && !vt_file_exists(rec);
        return check_sum(p, path, path, first, quiet, err, errlen);
    }
#ifdef VT_HAVE_CURL
    char e1[1024];
    if (vt_run_mkdirs(dir, e1, sizeof e1) != 0) {
        vt_set_err(err, errlen, "%s (VIDTRAIN_CACHE=DIR puts the cache elsewhere)", e1);
        return -1;
    }
    char part[2100];
    snprintf(part, sizeof part, "%s.part", path);
    /* The output rule (base/common.h): the .part and the final name only ever regular
     * files or new names, never inputs (a FIFO at NAME.part used to block the download;
     * one at NAME was replaced by the rename). */
    if (vt_output_check(part, e1, sizeof e1) != 0 || vt_output_check(path, e1, sizeof e1) != 0) {
        vt_set_err(err, errlen, "%s (VIDTRAIN_CACHE=DIR puts the cache elsewhere)", e1);
        return -1;
    }
    char e2[1024];
    int drc = download(url, part, quiet, e2, sizeof e2);
    if (drc == -2) { /* the disk: no word about the network */
        vt_set_err(err, errlen, "%s", e2);
        return -1;
    }
    if (drc != 0) {
        vt_set_err(err, errlen, "%s. Without network: fetch %s elsewhere and put it at %s "
                   "(or pass the file with --init FILE); an interrupted download resumes from "
                   "%s", e2, url, path, part);
        return -1;
    }
    if (check_sum(p, part, path, 1, quiet, err, errlen) != 0) {
        unlink(part); /* resuming a bad file would only make it longer */
        return -1;
    }
    if (rename(part, path) != 0) {
        vt_set_err(err, errlen, "%s: cannot rename into place: %s", path, strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
#else
    (void)quiet;
    vt_set_err(err, errlen, "%s is not in the cache and this vidtrain was built without libcurl: "
               "fetch %s and put it at %s (or pass the file with --init FILE)", p->file, url,
               path);
    return -1;
#endif
}
