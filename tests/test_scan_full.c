/*
 * test_scan_full.c: `vidtrain scan DIR --full` (app/scan_full.h) names the damaged videos
 * and only them, against the ffmpeg command: a file is damaged when `ffmpeg -v error -i F
 * -f null -` reports anything, and its frames decoded are ffprobe's count_frames. The set:
 * tests/make_media.sh's concealed.mp4 (one P-frame repaired: every frame comes out, a
 * plain scan cannot tell), corrupt_mid.mp4 and corrupt_mid.avi (3 KB of junk mid-file:
 * frames lost), and the clean short5.mp4 and one_frame.mp4. A plain scan says it decoded
 * only first frames and lists nothing. `bench decode --mode sequential` decodes the same
 * files whole and names and counts the same damaged ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/apputil.h"

#pragma GCC diagnostic ignored "-Wformat-truncation"

static const char *const files[] = {"a/concealed.mp4", "a/corrupt_mid.mp4", "b/corrupt_mid.avi",
                                    "b/short5.mp4", "b/one_frame.mp4"};
#define NFILES (int)(sizeof files / sizeof *files)

/* The entry of full_decode.damaged for path, NULL when it is not listed. */
static const cJSON *listed(const cJSON *damaged, const char *path) {
    for (const cJSON *e = damaged ? damaged->child : NULL; e; e = e->next) {
        const cJSON *p = cJSON_GetObjectItem(e, "path");
        if (cJSON_IsString(p) && !strcmp(p->valuestring, path))
            return e;
    }
    return NULL;
}

int main(void) {
    const char *bin = vt_test_bin("test_scan_full");
    if (!bin)
        return VT_TEST_SKIP;
    char dir[4096], set[4200], p[4400];
    snprintf(dir, sizeof dir, "%s", vt_test_dir("scan_full"));
    snprintf(set, sizeof set, "%s/set", dir);
    const char *src = vt_test_env("VT_SRC", VT_SOURCE_DIR);
    int rc = vt_test_sh("bash '%s/tests/make_media.sh' '%s/media' hostile && rm -rf '%s' && "
                        "mkdir -p '%s/a' '%s/b'", src, dir, set, set, set);
    TCHECK(rc == 0, "make_media.sh");
    for (int i = 0; i < NFILES; i++)
        TCHECK(vt_test_sh("cp '%s/media/hostile/%s' '%s/%s'", dir, strchr(files[i], '/') + 1,
                          set, files[i]) == 0, "copy %s", files[i]);

    TCHECK(vt_test_sh("'%s' scan '%s' --full --no-leaks --json > '%s/full.json' 2> "
                      "'%s/full.log'", bin, set, dir, dir) == 0, "scan --full");
    snprintf(p, sizeof p, "%s/full.json", dir);
    cJSON *j = vt_test_read_json(p);
    const cJSON *fd = cJSON_GetObjectItem(j, "full_decode");
    const cJSON *dmg = cJSON_GetObjectItem(fd, "damaged");
    TCHECK(cJSON_IsArray(dmg), "scan --full --json: full_decode.damaged");
    int ndamaged = 0;
    for (int i = 0; i < NFILES; i++) {
        snprintf(p, sizeof p, "%s/%s", set, files[i]);
        /* the truth: does the ffmpeg command report an error? */
        int clean = vt_test_sh("test -z \"$(ffmpeg -nostdin -v error -i '%s' -f null - 2>&1)\"",
                               p) == 0;
        const cJSON *e = listed(dmg, files[i]);
        TCHECK((e == NULL) == clean, "%s: %s by ffmpeg, %s by scan --full", files[i],
               clean ? "clean" : "damaged", e ? "listed" : "not listed");
        ndamaged += !clean;
        if (!e)
            continue;
        int64_t want = vt_test_ffprobe_frames(p);
        const cJSON *fr = cJSON_GetObjectItem(e, "frames");
        TCHECK(cJSON_IsNumber(fr) && (int64_t)fr->valuedouble == want,
               "%s: %g frames decoded, ffprobe counts %lld", files[i],
               cJSON_IsNumber(fr) ? fr->valuedouble : -1, (long long)want);
    }
    TCHECK(ndamaged == 3, "ffmpeg finds %d damaged files of the set, make_media.sh made 3",
           ndamaged);
    const cJSON *nf = cJSON_GetObjectItem(fd, "files");
    TCHECK(cJSON_IsNumber(nf) && nf->valuedouble == NFILES, "full_decode.files %g",
           cJSON_IsNumber(nf) ? nf->valuedouble : -1);
    cJSON_Delete(j);

    /* the text report names them; a plain scan says what it did not look at */
    TCHECK(vt_test_sh("'%s' scan '%s' --full --no-leaks > '%s/full.txt' 2>&1 && grep -q "
                      "'a/concealed.mp4: 1 decode error' '%s/full.txt' && grep -q "
                      "'damaged (3' '%s/full.txt'", bin, set, dir, dir, dir) == 0,
           "scan --full text (%s/full.txt)", dir);
    TCHECK(vt_test_sh("'%s' scan '%s' --no-leaks > '%s/plain.txt' 2>&1 && grep -q -- "
                      "'--full decodes every frame' '%s/plain.txt' && ! grep -q 'decoded in "
                      "full' '%s/plain.txt'", bin, set, dir, dir, dir) == 0,
           "plain scan (%s/plain.txt)", dir);
    /* bench decode's sequential pass decodes the same files whole: it counts them too */
    TCHECK(vt_test_sh("'%s' bench decode '%s' --mode sequential > '%s/bench.txt' 2>&1 && grep "
                      "-q '^RESULT .* damaged=3 ' '%s/bench.txt' && grep -q 'concealed.mp4: a "
                      "damaged stream' '%s/bench.txt'", bin, set, dir, dir, dir) == 0,
           "bench decode --mode sequential names and counts the 3 damaged files (%s/bench.txt)",
           dir);
    return vt_test_done("test_scan_full");
}
