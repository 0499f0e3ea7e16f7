/*
 * test_groups.c: grouped --val-split (--group, pipeline/data/dataset_split.c).
 *   - over random recordings cut into random clips (some of one recording filed under two
 *     classes), named so that a --group regex finds the recording: every recording's clips
 *     are on ONE side; the truth is the generator's own list of which clip came from which
 *     recording, not vidtrain's keys. The same names under --group none split recordings
 *     apart (so the check can fail);
 *   - UCF101 (v_X_g08_c01.avi) and HMDB51 (Source_class_u_nm_np1_fr_goo_0.avi) names are
 *     recognised with no --group: the keys of real file names from both sets, and a
 *     dataset where each gNN is on one side across every class;
 *   - the split is deterministic: the same folder opened twice is identical, and adding
 *     new recordings moves no old clip;
 *   - a regex that does not compile, or has no capture group, is an error naming --group;
 *   - a config.json written before --group reads as "none" (the split those runs drew).
 *
 * Files are empty: the split looks at names only.
 */
#include "app/train/train_opts.h"
#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "tests/apputil.h"

static int find(const vt_dataset *ds, const char *rel) {
    for (int i = 0; i < ds->nvideos; i++)
        if (!strcmp(ds->videos[i].relpath, rel))
            return i;
    return -1;
}

#define NREC 60
#define MAXCLIPS 6
static const char *cls[] = {"jump", "run", "sit", "wave"};

typedef struct truth {
    char rel[NREC * MAXCLIPS][128];
    int rec[NREC * MAXCLIPS]; /* which recording clip k was cut from */
    int n;
} truth;

/* NREC recordings with random 6-letter names, 1..MAXCLIPS clips each, a clip's class
 * mostly its recording's, sometimes another (a recording that shows two actions). */
static void make_recordings(const char *dir, truth *t, uint64_t seed, int first) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int g = 0; g < NREC; g++) {
        char name[8];
        for (int k = 0; k < 6; k++)
            name[k] = (char)('a' + vt_rng_below(&r, 26));
        name[6] = 0;
        int c0 = (int)vt_rng_below(&r, 4), nclips = 1 + (int)vt_rng_below(&r, MAXCLIPS);
        for (int k = 0; k < nclips; k++) {
            int c = vt_rng_below(&r, 5) == 0 ? (int)vt_rng_below(&r, 4) : c0;
            snprintf(t->rel[t->n], sizeof t->rel[0], "%s/%s%d_clip%02d.mp4", cls[c], name,
                     first + g, k);
            t->rec[t->n] = first + g;
            vt_test_touch(dir, t->rel[t->n]);
            t->n++;
        }
    }
}

/* Recordings of t that have clips on both sides of ds (train vs val). */
static int split_recordings(const vt_dataset *ds, const truth *t, int *nval_clips) {
    int side[2 * NREC];
    for (int g = 0; g < 2 * NREC; g++)
        side[g] = -1;
    int both = 0;
    *nval_clips = 0;
    for (int k = 0; k < t->n; k++) {
        int i = find(ds, t->rel[k]);
        if (i < 0)
            continue;
        int s = ds->videos[i].split;
        *nval_clips += s == VT_SPLIT_VAL;
        if (side[t->rec[k]] >= 0 && side[t->rec[k]] != s && side[t->rec[k]] != 9) {
            both++;
            side[t->rec[k]] = 9; /* counted */
        } else if (side[t->rec[k]] < 0) {
            side[t->rec[k]] = s;
        }
    }
    return both;
}

static void test_random_groups(void) {
    const char *d = vt_test_dir("groups_random");
    char dir[4096], err[512];
    snprintf(dir, sizeof dir, "%s", d);
    static truth t;
    t.n = 0;
    make_recordings(dir, &t, 46, 0);
    /* the recording: the file name up to "_clip" (letters then its number) */
    vt_dataset_opts o = {.val_split = 0.25, .group = "/([a-z]+[0-9]+)_clip[0-9]+\\.mp4$"};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    int nval = 0, both = split_recordings(ds, &t, &nval);
    TCHECK(both == 0, "--group: %d recordings have clips on both sides", both);
    TCHECK(nval > 0 && nval < t.n, "--group: %d of %d clips in val", nval, t.n);
    TCHECK(ds->groups.nregex == t.n, "every clip matched the regex: %d of %d",
           ds->groups.nregex, t.n);
    /* group counts against the generator's recordings */
    int seen[NREC] = {0}, ng[2] = {0};
    for (int k = 0; k < t.n; k++)
        if (!seen[t.rec[k]]) {
            seen[t.rec[k]] = 1;
            ng[ds->videos[find(ds, t.rel[k])].split == VT_SPLIT_VAL]++;
        }
    TCHECK(ds->groups.ngroups[VT_SPLIT_TRAIN] == ng[0] && ds->groups.ngroups[VT_SPLIT_VAL] == ng[1],
           "groups train %d val %d, the recordings say %d and %d",
           ds->groups.ngroups[VT_SPLIT_TRAIN], ds->groups.ngroups[VT_SPLIT_VAL], ng[0], ng[1]);
    char line[256];
    vt_dataset_groups_line(ds, line, sizeof line);
    TCHECK(strstr(line, "--group") && strstr(line, "in val"), "plan line: '%s'", line);

    /* Determinism: opened again, identical; new recordings added move no old clip. */
    vt_split *before = vt_malloc((size_t)t.n * sizeof *before);
    for (int k = 0; k < t.n; k++)
        before[k] = ds->videos[find(ds, t.rel[k])].split;
    vt_dataset_free(&ds);
    static truth t2;
    t2.n = 0;
    make_recordings(dir, &t2, 4646, NREC);
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "reopen: %s", err);
    if (ds) {
        int moved = 0;
        for (int k = 0; k < t.n; k++)
            moved += ds->videos[find(ds, t.rel[k])].split != before[k];
        /* every class has dozens of groups: no tiny-class repair, so nothing may move */
        TCHECK(moved == 0, "%d old clips changed side when recordings were added", moved);
        int nv2 = 0;
        TCHECK(split_recordings(ds, &t2, &nv2) == 0, "new recordings whole too");
        vt_dataset *again = vt_dataset_open(dir, &o, err, sizeof err);
        int same = again && again->nvideos == ds->nvideos;
        for (int i = 0; same && i < ds->nvideos; i++)
            same = ds->videos[i].split == again->videos[i].split;
        TCHECK(same, "the same folder twice: the same split");
        vt_dataset_free(&again);
        vt_dataset_free(&ds);
    }
    free(before);

    /* The same names path by path: recordings are cut apart (what --group prevents). */
    vt_dataset_opts none = {.val_split = 0.25, .group = "none"};
    ds = vt_dataset_open(dir, &none, err, sizeof err);
    TCHECK(ds != NULL, "open none: %s", err);
    if (ds) {
        TCHECK(split_recordings(ds, &t, &nval) > 0, "--group none splits some recording");
        TCHECK(ds->groups.nvideos_grouped == 0, "none: no video shares a group");
        vt_dataset_free(&ds);
    }
}

static void test_default_names(void) {
    char key[256];
    /* real UCF101 and HMDB51 file names */
    TCHECK(vt_dataset_group_key(NULL, "ApplyEyeMakeup/v_ApplyEyeMakeup_g08_c01.avi", key,
                                sizeof key) == 1 && !strcmp(key, "g08"), "UCF101: '%s'", key);
    TCHECK(vt_dataset_group_key("auto", "YoYo/v_YoYo_g25_c05.avi", key, sizeof key) == 1 &&
               !strcmp(key, "g25"), "UCF101 g25: '%s'", key);
    TCHECK(vt_dataset_group_key(NULL, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_0.avi",
                                key, sizeof key) == 2 && !strcmp(key, "April_09"),
           "HMDB51: '%s'", key);
    TCHECK(vt_dataset_group_key(NULL, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_2.avi",
                                key, sizeof key) == 2 && !strcmp(key, "April_09"),
           "HMDB51 clip 2 of the same source: '%s'", key);
    TCHECK(vt_dataset_group_key(NULL, "laugh/21_laugh_h_nm_np1_fr_goo_1.avi", key, sizeof key) == 2 &&
               !strcmp(key, "21"), "HMDB51 short source name: '%s'", key);
    TCHECK(vt_dataset_group_key(NULL, "walk/clip_001.mp4", key, sizeof key) == 0 &&
               !strcmp(key, "walk/clip_001.mp4"), "other names: the path, '%s'", key);
    TCHECK(vt_dataset_group_key("none", "YoYo/v_YoYo_g25_c05.avi", key, sizeof key) == 0,
           "none: no rule");

    /* a UCF101-named set: 25 groups x 3 classes x 3 clips, no --group */
    const char *d = vt_test_dir("groups_ucf");
    char dir[4096], rel[256], err[512];
    snprintf(dir, sizeof dir, "%s", d);
    const char *ucls[] = {"Archery", "Biking", "Diving"};
    for (int c = 0; c < 3; c++)
        for (int g = 1; g <= 25; g++)
            for (int k = 1; k <= 3; k++) {
                snprintf(rel, sizeof rel, "%s/v_%s_g%02d_c%02d.avi", ucls[c], ucls[c], g, k);
                vt_test_touch(dir, rel);
            }
    vt_test_touch(dir, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_0.avi");
    vt_test_touch(dir, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_1.avi");
    vt_test_touch(dir, "brush_hair/Other_brush_hair_f_cm_np2_le_med_0.avi");
    vt_dataset_opts o = {.val_split = 0.2};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    int side[26], both = 0, nval = 0;
    for (int g = 0; g <= 25; g++)
        side[g] = -1;
    for (int c = 0; c < 3; c++)
        for (int g = 1; g <= 25; g++)
            for (int k = 1; k <= 3; k++) {
                snprintf(rel, sizeof rel, "%s/v_%s_g%02d_c%02d.avi", ucls[c], ucls[c], g, k);
                int s = ds->videos[find(ds, rel)].split;
                nval += s == VT_SPLIT_VAL;
                if (side[g] < 0)
                    side[g] = s;
                both += side[g] != s;
            }
    TCHECK(both == 0, "gNN on both sides %d times", both);
    TCHECK(nval > 0 && nval < 225, "%d of 225 UCF101 clips in val", nval);
    TCHECK(ds->groups.nucf == 225 && ds->groups.nhmdb == 3, "recognised: %d UCF101, %d HMDB51",
           ds->groups.nucf, ds->groups.nhmdb);
    TCHECK(ds->groups.ngroups[VT_SPLIT_TRAIN] + ds->groups.ngroups[VT_SPLIT_VAL] == 27,
           "27 groups (25 gNN, 2 HMDB51 sources): %d + %d", ds->groups.ngroups[0],
           ds->groups.ngroups[1]);
    int a = find(ds, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_0.avi");
    int b = find(ds, "brush_hair/April_09_brush_hair_u_nm_np1_ba_goo_1.avi");
    TCHECK(ds->videos[a].split == ds->videos[b].split, "HMDB51 clips of one source together");
    char line[256];
    vt_dataset_groups_line(ds, line, sizeof line);
    TCHECK(strstr(line, "UCF101 and HMDB51 names") != NULL, "plan line: '%s'", line);
    vt_dataset_free(&ds);
}

static void test_bad_regex(void) {
    const char *d = vt_test_dir("groups_bad");
    char dir[4096], err[512];
    snprintf(dir, sizeof dir, "%s", d);
    vt_test_touch(dir, "a/x.mp4");
    vt_test_touch(dir, "b/y.mp4");
    vt_dataset_opts o = {.val_split = 0.2, .group = "([a-z"};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(!ds && strstr(err, "--group") != NULL, "bad regex refused: %s", err);
    vt_dataset_free(&ds);
    o.group = "[a-z]+_clip";
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(!ds && strstr(err, "capture group") != NULL, "no ( ) refused: %s", err);
    vt_dataset_free(&ds);
}

static void test_old_config(void) {
    vt_train_opts o;
    vt_train_opts_default(&o);
    TCHECK(!strcmp(o.group, "auto"), "default auto, got '%s'", o.group);
    cJSON *j = cJSON_Parse("{\"val_split\": 0.1}");
    vt_train_opts_from_json(&o, j);
    TCHECK(!strcmp(o.group, "none"), "a config before --group reads as none, got '%s'", o.group);
    cJSON_Delete(j);
    snprintf(o.group, sizeof o.group, "_(g[0-9]+)_");
    j = vt_train_opts_to_json(&o);
    vt_train_opts p;
    vt_train_opts_default(&p);
    vt_train_opts_from_json(&p, j);
    TCHECK(!strcmp(p.group, o.group), "round trip: '%s'", p.group);
    cJSON_Delete(j);
}

int main(void) {
    test_random_groups();
    test_default_names();
    test_bad_regex();
    test_old_config();
    return vt_test_done("test_groups");
}
