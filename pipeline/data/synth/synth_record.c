/*
 * synth_record.c: the record of a synth's videos (synth_record.h). The record holds one
 * path a line, relative to DIR, written atomically before the first video.
 */
#define _POSIX_C_SOURCE 200809L
#include "pipeline/data/synth/synth_record.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"

static const char *const splits[3] = {"train", "val", "test"};

/* A recorded name that stays inside DIR: relative, no "..", no empty part. */
static int safe_name(const char *r) {
    if (!r[0] || r[0] == '/' || strstr(r, "//"))
        return 0;
    for (const char *p = r; p; p = strchr(p, '/')) {
        p += *p == '/';
        if (!strncmp(p, "..", 2) && (p[2] == '/' || !p[2]))
            return 0;
    }
    return 1;
}

/* Removes what the old record names: regular files only (a link is not followed, its
 * name is removed), then their folder and the one above when that left them empty. */
static void remove_recorded(const char *dir, char *text) {
    char *save = NULL;
    for (char *r = strtok_r(text, "\n", &save); r; r = strtok_r(NULL, "\n", &save)) {
        if (!safe_name(r))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, r);
        struct stat st;
        if (lstat(path, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
            continue;
        unlink(path);
        for (int up = 0; up < 2; up++) { /* class folder, split folder: only when empty */
            char *slash = strrchr(path, '/');
            if (!slash || (size_t)(slash - path) <= strlen(dir))
                break;
            *slash = 0;
            if (rmdir(path) != 0)
                break;
        }
    }
}

int vt_synth_record_replace(const char *dir, const char *list, size_t len, char *err,
                            size_t errlen) {
    char rec[4400];
    snprintf(rec, sizeof rec, "%s/" VT_SYNTH_RECORD, dir);
    char *old = vt_file_read(rec);
    if (old)
        remove_recorded(dir, old);
    free(old);
    return vt_file_write_atomic(rec, list, len, err, errlen);
}

/* The video names (not hidden) in folder d. */
static int count_videos(const char *d) {
    DIR *dd = opendir(d);
    if (!dd)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dd)) != NULL)
        n += e->d_name[0] != '.' && vt_is_video_name(e->d_name);
    closedir(dd);
    return n;
}

int vt_synth_count_foreign(const char *dir, int wrote) {
    int found = 0;
    for (int sp = 0; sp < 3; sp++) {
        char sd[4400];
        snprintf(sd, sizeof sd, "%s/%s", dir, splits[sp]);
        DIR *d = opendir(sd);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char cd[4700];
            snprintf(cd, sizeof cd, "%s/%s", sd, e->d_name);
            found += count_videos(cd);
        }
        closedir(d);
    }
    return VT_MAX(found - wrote, 0);
}
