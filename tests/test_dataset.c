/*
 * test_dataset.c: folder scanning, splits (folders, UCF101 lists, hashed --val-split that
 * is stable when files are added and stratified per class) and labels.csv parsing with a
 * multi-label column and bad lines reported with file:line. Symbolic links (class
 * folders, split folders, files; absolute and relative) give the same videos, classes
 * and splits as real folders, while loops and dangling links, and a second name of one
 * file in a split, are warned about with their path, counted and skipped. Any non-empty subset of train/, val/, test/ is a split layout.
 * Class and file names in list files may hold spaces.
 * A folder of loose videos opens for a labels file or a Kinetics CSV that names them, and
 * a loose video a row made a sample of is no longer counted as left out.
 *
 * Files are empty: the scan looks at names only, never at contents (probing is covered
 * by test_loader with real videos).
 */
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "tests/apputil.h"

/* root/rel -> target (a symbolic link; parent folders created). */
static void lnk(const char *root, const char *rel, const char *target) {
    char path[4096], cmd[8300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    if (system(cmd) != 0 || symlink(target, path) != 0) {
        fprintf(stderr, "cannot create the link %s -> %s\n", path, target);
        exit(1);
    }
}

static int find(const vt_dataset *ds, const char *rel) {
    for (int i = 0; i < ds->nvideos; i++)
        if (!strcmp(ds->videos[i].relpath, rel))
            return i;
    return -1;
}

static int ds_class_is(const vt_dataset *ds, int i, const char *name) {
    return ds->videos[i].labeled && !strcmp(ds->heads[0].classes[ds->videos[i].label[0]], name);
}

/* stderr into DIR/stderr.txt while a call runs (testutil.h), so that warnings can be
 * checked in captured. */
static char *captured, cap_path[4096];
static void capture_begin(const char *dir) {
    snprintf(cap_path, sizeof cap_path, "%s/stderr.txt", dir);
    vt_test_capture_begin(cap_path);
}
static void capture_end(void) {
    free(captured);
    captured = vt_test_capture_end(cap_path);
}

static void test_flat(void) {
    const char *d = vt_test_dir("dataset_flat");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", d);
    vt_test_touch(dir, "walk/b.mp4");
    vt_test_touch(dir, "walk/a.AVI");
    vt_test_touch(dir, "jump/x.mkv");
    vt_test_touch(dir, "jump/sub/y.webm");
    vt_test_touch(dir, "jump/notes.txt");
    vt_test_touch(dir, "readme.md");
    vt_test_touch(dir, "jump/.hidden.mp4");
    char err[512];
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    TCHECK(ds->layout == VT_LAYOUT_FLAT, "layout %d", ds->layout);
    TCHECK(ds->nheads == 1 && ds->heads[0].nclasses == 2, "classes %d", ds->heads[0].nclasses);
    TCHECK(!strcmp(ds->heads[0].classes[0], "jump") && !strcmp(ds->heads[0].classes[1], "walk"),
           "sorted class names");
    TCHECK(ds->nvideos == 4, "videos %d", ds->nvideos);
    /* sorted by relpath: jump/sub/y.webm, jump/x.mkv, walk/a.AVI, walk/b.mp4 */
    const char *want[] = {"jump/sub/y.webm", "jump/x.mkv", "walk/a.AVI", "walk/b.mp4"};
    const int lab[] = {0, 0, 1, 1};
    for (int i = 0; i < 4 && i < ds->nvideos; i++) {
        TCHECK(!strcmp(ds->videos[i].relpath, want[i]), "video %d %s", i, ds->videos[i].relpath);
        TCHECK(ds->videos[i].label[0] == lab[i], "label %d", ds->videos[i].label[0]);
        TCHECK(ds->videos[i].split == VT_SPLIT_TRAIN, "split");
    }
    TCHECK(ds->nignored == 2, "ignored %d", ds->nignored);
    TCHECK(ds->nignored == 2 && !strcmp(ds->ignored[0], "jump/notes.txt") &&
               !strcmp(ds->ignored[1], "readme.md"), "ignored names");
    TCHECK(vt_dataset_count_stray(ds) == 0, "no video among them: %d", vt_dataset_count_stray(ds));
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 4, "train count");
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_VAL) == 0, "val count");
    vt_dataset_free(&ds);
    TCHECK(ds == NULL, "free sets NULL");
    vt_dataset_free(&ds); /* takes NULL */

    const char *e = vt_test_dir("dataset_empty");
    vt_test_touch(e, "a/readme.txt");
    vt_dataset *none = vt_dataset_open(e, NULL, err, sizeof err);
    TCHECK(none == NULL && strstr(err, "no videos"), "empty folder: %s", err);
    none = vt_dataset_open("/nonexistent/vidtrain", NULL, err, sizeof err);
    TCHECK(none == NULL && strstr(err, "not a readable folder"), "missing folder: %s", err);
}

static void test_folders(void) {
    const char *dir = vt_test_dir("dataset_folders");
    vt_test_touch(dir, "train/b/1.mp4");
    vt_test_touch(dir, "train/a/2.mp4");
    vt_test_touch(dir, "train/a/3.mp4");
    vt_test_touch(dir, "val/a/4.mp4");
    vt_test_touch(dir, "val/c/5.mp4"); /* a class only in val still gets an id */
    vt_test_touch(dir, "test/b/6.mp4");
    vt_test_touch(dir, "train/loose.mp4"); /* above the class level: ignored */
    char err[512];
    vt_dataset_opts o = {.val_split = 0.5}; /* ignored: the layout has a val split */
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    TCHECK(ds->layout == VT_LAYOUT_FOLDERS, "layout");
    TCHECK(ds->heads[0].nclasses == 3, "classes a b c: %d", ds->heads[0].nclasses);
    TCHECK(ds->nvideos == 6, "videos %d", ds->nvideos);
    int i;
    TCHECK((i = find(ds, "train/a/2.mp4")) >= 0 && ds->videos[i].split == VT_SPLIT_TRAIN &&
               ds->videos[i].label[0] == 0, "train/a/2");
    TCHECK((i = find(ds, "train/b/1.mp4")) >= 0 && ds->videos[i].split == VT_SPLIT_TRAIN &&
               ds->videos[i].label[0] == 1, "train/b/1");
    TCHECK((i = find(ds, "val/c/5.mp4")) >= 0 && ds->videos[i].split == VT_SPLIT_VAL &&
               ds->videos[i].label[0] == 2, "val/c/5");
    TCHECK((i = find(ds, "test/b/6.mp4")) >= 0 && ds->videos[i].split == VT_SPLIT_TEST &&
               ds->videos[i].label[0] == 1, "test/b/6");
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 3, "train 3");
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_VAL) == 2, "val 2 (val-split not applied)");
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TEST) == 1, "test 1");
    TCHECK(vt_dataset_eval_split(ds) == VT_SPLIT_VAL, "eval on val");
    TCHECK(ds->nignored == 1 && !strcmp(ds->ignored[0], "train/loose.mp4"), "loose file ignored");
    /* a video, not a non-video file: train says so (it counted as a non-video file) */
    TCHECK(vt_dataset_count_stray(ds) == 1, "the loose video: %d", vt_dataset_count_stray(ds));
    vt_dataset_free(&ds);
}

/* 1 when some entry of ds->broken starts with rel followed by ": " and holds `why`. */
static int has_broken(const vt_dataset *ds, const char *rel, const char *why) {
    size_t n = strlen(rel);
    for (int i = 0; i < ds->nbroken; i++)
        if (!strncmp(ds->broken[i], rel, n) && !strncmp(ds->broken[i] + n, ": ", 2) &&
            strstr(ds->broken[i] + n, why))
            return 1;
    return 0;
}

/* Same relpaths, labels (by class name) and splits in both scans. */
static int same_videos(const vt_dataset *a, const vt_dataset *b) {
    if (a->nvideos != b->nvideos || a->heads[0].nclasses != b->heads[0].nclasses)
        return 0;
    for (int i = 0; i < a->nvideos; i++) {
        const vt_dataset_video *x = &a->videos[i], *y = &b->videos[i];
        if (strcmp(x->relpath, y->relpath) || x->split != y->split ||
            strcmp(a->heads[0].classes[x->label[0]], b->heads[0].classes[y->label[0]]))
            return 0;
    }
    return 1;
}

static void test_symlinks(void) {
    const char *d = vt_test_dir("dataset_links");
    char base[4096], real[4200], linked[4200], splits[4200], t[8400];
    snprintf(base, sizeof base, "%s", d);
    snprintf(real, sizeof real, "%s/real", base);
    snprintf(linked, sizeof linked, "%s/linked", base);
    snprintf(splits, sizeof splits, "%s/splits", base);
    vt_test_touch(real, "a/1.mp4");
    vt_test_touch(real, "a/2.mp4");
    vt_test_touch(real, "b/3.mp4");
    vt_test_touch(real, "b/4.mp4");
    vt_test_touch(real, "b/sub/5.mp4");
    /* The same dataset assembled from links: a class folder (absolute), files (absolute
     * and relative), a nested folder (relative); then what must be skipped: two links to
     * folders above them, a dangling file link, a dangling class-folder link, and two file
     * links pointing at each other. */
    snprintf(t, sizeof t, "%s/a", real);
    lnk(linked, "a", t);
    snprintf(t, sizeof t, "%s/b/3.mp4", real);
    lnk(linked, "b/3.mp4", t);
    lnk(linked, "b/4.mp4", "../../real/b/4.mp4");
    lnk(linked, "b/sub", "../../real/b/sub");
    lnk(linked, "b/up", "..");
    lnk(linked, "b/self", ".");
    lnk(linked, "b/gone.mp4", "../../real/b/none.mp4");
    lnk(linked, "ghost", "/nonexistent-vidtrain/ghost");
    lnk(linked, "b/x.mp4", "y.mp4");
    lnk(linked, "b/y.mp4", "x.mp4");
    snprintf(t, sizeof t, "%s/b/pipe.mp4", linked); /* opening it would block the prober */
    TCHECK(mkfifo(t, 0644) == 0, "mkfifo %s", t);

    char err[512];
    vt_dataset *r = vt_dataset_open(real, NULL, err, sizeof err);
    TCHECK(r != NULL && r->nvideos == 5 && r->nbroken == 0, "real folders: %s", r ? "" : err);
    capture_begin(base);
    vt_dataset *l = vt_dataset_open(linked, NULL, err, sizeof err);
    capture_end();
    TCHECK(l != NULL, "linked folders: %s", err);
    if (r && l) {
        TCHECK(l->layout == VT_LAYOUT_FLAT, "layout %d", l->layout);
        TCHECK(same_videos(r, l), "linked: %d videos, real: %d; same paths, classes, splits",
               l->nvideos, r->nvideos);
        TCHECK(l->nignored == 0, "ignored %d", l->nignored);
        TCHECK(l->nbroken == 7, "broken %d, want 7 (up, self, gone, ghost, x, y, pipe)",
               l->nbroken);
        TCHECK(has_broken(l, "b/pipe.mp4", "not a regular file"), "a FIFO is skipped");
        TCHECK(has_broken(l, "b/up", "a loop") && has_broken(l, "b/self", "a loop"),
               "links to a folder above are loops");
        TCHECK(has_broken(l, "b/gone.mp4", "dangling") && has_broken(l, "ghost", "dangling"),
               "dangling file and folder links");
        TCHECK(has_broken(l, "b/x.mp4", "loop of links") && has_broken(l, "b/y.mp4", "loop of links"),
               "links pointing at each other");
        char want[4400];
        snprintf(want, sizeof want, "%s/b/gone.mp4: symbolic link to '../../real/b/none.mp4' "
                 "leads nowhere", linked);
        TCHECK(strstr(captured, want) != NULL, "warning names the dangling link: %s", want);
        snprintf(want, sizeof want, "%s/b/up: leads back to a folder above it", linked);
        TCHECK(strstr(captured, want) != NULL, "warning names the loop: %s", want);
    }
    vt_dataset_free(&l);

    /* Split folders as links: train -> the real dataset, test/ with a linked class, a loop
     * under test/ and a dangling val/. */
    lnk(splits, "train", real);
    snprintf(t, sizeof t, "%s/a", real);
    lnk(splits, "test/a", t);
    lnk(splits, "test/loop", "..");
    lnk(splits, "val", "/nonexistent-vidtrain/val");
    capture_begin(base);
    vt_dataset *s = vt_dataset_open(splits, NULL, err, sizeof err);
    capture_end();
    TCHECK(s != NULL, "linked split folders: %s", err);
    if (s) {
        TCHECK(s->layout == VT_LAYOUT_FOLDERS, "layout %d", s->layout);
        TCHECK(vt_dataset_split_count(s, VT_SPLIT_TRAIN) == 5, "train %d",
               vt_dataset_split_count(s, VT_SPLIT_TRAIN));
        TCHECK(vt_dataset_split_count(s, VT_SPLIT_TEST) == 2, "test %d",
               vt_dataset_split_count(s, VT_SPLIT_TEST));
        TCHECK(s->nbroken == 2 && has_broken(s, "test/loop", "a loop") &&
                   has_broken(s, "val", "dangling"), "broken %d", s->nbroken);
        int i;
        TCHECK((i = find(s, "train/b/sub/5.mp4")) >= 0 && ds_class_is(s, i, "b"), "train/b/sub/5");
    }
    vt_dataset_free(&s);
    vt_dataset_free(&r);

    /* One file under two names in one split: a link into another class (it was scored
     * under both labels) and a hard link in its own class (it counted twice) are skipped,
     * the first name kept; the same file in train and test above stays (the leak check's). */
    char dup[4200], a1[4300], a1b[4300];
    snprintf(dup, sizeof dup, "%s/dup", base);
    vt_test_touch(dup, "a/1.mp4");
    vt_test_touch(dup, "b/2.mp4");
    lnk(dup, "b/1.mp4", "../a/1.mp4");
    snprintf(a1, sizeof a1, "%s/a/1.mp4", dup);
    snprintf(a1b, sizeof a1b, "%s/a/1b.mp4", dup);
    TCHECK(link(a1, a1b) == 0, "hard link %s", a1b);
    capture_begin(base);
    vt_dataset *dd = vt_dataset_open(dup, NULL, err, sizeof err);
    capture_end();
    TCHECK(dd != NULL, "one file twice: %s", err);
    if (dd) {
        TCHECK(dd->nvideos == 2 && find(dd, "a/1.mp4") >= 0 && find(dd, "b/2.mp4") >= 0,
               "one file twice: %d videos, want a/1.mp4 and b/2.mp4", dd->nvideos);
        TCHECK(dd->nbroken == 2 && has_broken(dd, "b/1.mp4", "the same file as a/1.mp4") &&
                   has_broken(dd, "a/1b.mp4", "the same file as a/1.mp4"),
               "one file twice: %d skipped, want b/1.mp4 and a/1b.mp4 named", dd->nbroken);
        TCHECK(strstr(captured, "dup/b/1.mp4: the same file as a/1.mp4") != NULL,
               "no warning names the second name");
    }
    vt_dataset_free(&dd);
}

/* Any non-empty subset of train/, val/, test/ holding class folders is a split layout. */
static void test_split_subsets(void) {
    const char *d = vt_test_dir("dataset_subsets");
    char base[4096], dir[4200], err[512];
    snprintf(base, sizeof base, "%s", d);
    vt_dataset_opts vs = {.val_split = 0.5};

    snprintf(dir, sizeof dir, "%s/onlytest", base);
    vt_test_touch(dir, "test/a/1.mp4");
    vt_test_touch(dir, "test/b/2.mp4");
    vt_test_touch(dir, "test/b/3.mp4");
    vt_dataset *ds = vt_dataset_open(dir, &vs, err, sizeof err);
    TCHECK(ds && ds->layout == VT_LAYOUT_FOLDERS, "only test/: %s", ds ? "flat" : err);
    if (ds) {
        TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TEST) == 3 &&
                   vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 0 &&
                   vt_dataset_split_count(ds, VT_SPLIT_VAL) == 0, "only test/: all 3 in test");
        TCHECK(ds->heads[0].nclasses == 2, "classes a b");
        TCHECK(vt_dataset_eval_split(ds) == VT_SPLIT_TEST, "only test/: evaluate on test");
    }
    vt_dataset_free(&ds);

    snprintf(dir, sizeof dir, "%s/onlyval", base);
    vt_test_touch(dir, "val/a/1.mp4");
    vt_test_touch(dir, "val/b/2.mp4");
    ds = vt_dataset_open(dir, &vs, err, sizeof err);
    TCHECK(ds && ds->layout == VT_LAYOUT_FOLDERS, "only val/: %s", ds ? "flat" : err);
    if (ds)
        TCHECK(vt_dataset_split_count(ds, VT_SPLIT_VAL) == 2 &&
                   vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 0 &&
                   vt_dataset_eval_split(ds) == VT_SPLIT_VAL, "only val/: 2 val");
    vt_dataset_free(&ds);

    /* train/ + test/, no val/: --val-split draws val from train, as for a flat folder. */
    snprintf(dir, sizeof dir, "%s/traintest", base);
    char rel[64];
    for (int k = 0; k < 8; k++) {
        snprintf(rel, sizeof rel, "train/%s/%d.mp4", k < 4 ? "a" : "b", k);
        vt_test_touch(dir, rel);
    }
    vt_test_touch(dir, "test/a/8.mp4");
    vt_test_touch(dir, "test/b/9.mp4");
    ds = vt_dataset_open(dir, &vs, err, sizeof err);
    TCHECK(ds && ds->layout == VT_LAYOUT_FOLDERS, "train/ + test/: %s", ds ? "flat" : err);
    if (ds) {
        int ntr = vt_dataset_split_count(ds, VT_SPLIT_TRAIN), nv = vt_dataset_split_count(ds, VT_SPLIT_VAL);
        TCHECK(nv >= 2 && ntr >= 2 && ntr + nv == 8, "train %d + val %d from 8 train videos", ntr, nv);
        for (int i = 0; i < ds->nvideos; i++)
            if (ds->videos[i].split == VT_SPLIT_VAL)
                TCHECK(!strncmp(ds->videos[i].relpath, "train/", 6), "val %s drawn from train",
                       ds->videos[i].relpath);
        TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TEST) == 2, "test 2");
        TCHECK(vt_dataset_eval_split(ds) == VT_SPLIT_VAL, "validate on the drawn val");
    }
    vt_dataset_free(&ds);
    ds = vt_dataset_open(dir, NULL, err, sizeof err);
    if (ds)
        TCHECK(vt_dataset_split_count(ds, VT_SPLIT_VAL) == 0 &&
                   vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 8 &&
                   vt_dataset_eval_split(ds) == VT_SPLIT_TEST, "no --val-split: validate on test");
    vt_dataset_free(&ds);

    /* A class folder named "test" that holds videos, not class folders: still flat. */
    snprintf(dir, sizeof dir, "%s/flattest", base);
    vt_test_touch(dir, "test/1.mp4");
    vt_test_touch(dir, "walk/2.mp4");
    ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds && ds->layout == VT_LAYOUT_FLAT && ds->heads[0].nclasses == 2 && ds->nvideos == 2,
           "class 'test' of a flat folder: %s", ds ? "" : err);
    vt_dataset_free(&ds);
}

static void test_lists(void) {
    const char *d = vt_test_dir("dataset_lists");
    char dir[4096], lists[4200];
    snprintf(dir, sizeof dir, "%s/videos", d);
    snprintf(lists, sizeof lists, "%s/lists", d);
    vt_test_touch(dir, "ApplyLipstick/v_ApplyLipstick_g01_c01.avi");
    vt_test_touch(dir, "ApplyLipstick/v_ApplyLipstick_g02_c01.avi");
    vt_test_touch(dir, "Archery/v_Archery_g01_c01.avi");
    vt_test_touch(dir, "Archery/v_Archery_g02_c01.avi");
    vt_test_touch(dir, "Archery/v_Archery_g03_c01.avi"); /* in no list */
    vt_test_touch(lists, "x");
    /* classInd's order is the label order, even when it is not alphabetical. */
    vt_test_write_file(lists, "classInd.txt", "1 Archery\r\n2 ApplyLipstick\r\n");
    vt_test_write_file(lists, "trainlist01.txt",
               "ApplyLipstick/v_ApplyLipstick_g01_c01.avi 2\r\n"
               "Archery/v_Archery_g01_c01.avi 1\r\n"
               "Archery/v_Archery_g09_c01.avi 1\r\n"); /* missing */
    vt_test_write_file(lists, "testlist01.txt",
               "ApplyLipstick/v_ApplyLipstick_g02_c01.avi\r\n"
               "Archery/v_Archery_g02_c01.avi\r\n");
    char err[512];
    vt_dataset_opts o = {.lists_dir = lists};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    TCHECK(ds->layout == VT_LAYOUT_LISTS, "layout");
    TCHECK(ds->heads[0].nclasses == 2 && !strcmp(ds->heads[0].classes[0], "Archery") &&
               !strcmp(ds->heads[0].classes[1], "ApplyLipstick"), "classInd order");
    int i;
    TCHECK((i = find(ds, "ApplyLipstick/v_ApplyLipstick_g01_c01.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TRAIN && ds->videos[i].label[0] == 1, "train lip");
    TCHECK((i = find(ds, "Archery/v_Archery_g02_c01.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TEST && ds->videos[i].label[0] == 0, "test arch");
    TCHECK((i = find(ds, "Archery/v_Archery_g03_c01.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_NONE, "unlisted");
    TCHECK(ds->nmissing == 1, "missing %d", ds->nmissing);
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 2, "train 2");
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TEST) == 2, "test 2");
    TCHECK(vt_dataset_eval_split(ds) == VT_SPLIT_TEST, "no val: evaluate on test");
    vt_dataset_free(&ds);

    /* a video in both lists (a hand-made fold) or twice in one: it was taken in silence,
     * the test list's line winning; now warned with both lines, and a test video */
    vt_test_write_file(lists, "trainlist01.txt",
               "ApplyLipstick/v_ApplyLipstick_g01_c01.avi 2\n"
               "Archery/v_Archery_g01_c01.avi 1\n"
               "Archery/v_Archery_g01_c01.avi 1\n"        /* line 3: twice in train */
               "Archery/v_Archery_g02_c01.avi 1\n");      /* line 4: in test too */
    capture_begin(vt_test_env("VT_TMP", "/tmp/vidtrain-tests"));
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    capture_end();
    TCHECK(ds != NULL, "open: %s", err);
    TCHECK(captured && strstr(captured, "trainlist01.txt:3: Archery/v_Archery_g01_c01.avi is "
                                        "listed a second time (first in trainlist01.txt line 2)"),
           "a line twice in trainlist01.txt is not warned about: %s", captured ? captured : "");
    TCHECK(captured && strstr(captured, "testlist01.txt:2: Archery/v_Archery_g02_c01.avi is "
                                        "listed a second time (first in trainlist01.txt line 4)"
                                        "; it is a test video"),
           "a video in both lists is not warned about: %s", captured ? captured : "");
    TCHECK(ds && (i = find(ds, "Archery/v_Archery_g02_c01.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TEST, "a video in both lists is a test video");
    vt_dataset_free(&ds);

    vt_test_write_file(lists, "classInd.txt", "1 Archery\nApplyLipstick\n");
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds == NULL && strstr(err, "classInd.txt:2"), "bad classInd: %s", err);
    vt_dataset_free(&ds);
}

/* Class and file names with spaces in list files: a classInd.txt name is the rest of its
 * line (it was cut at the first space, and every list line of the class was then warned
 * about and skipped), a list line's path is all but its trailing label, and so is an
 * HMDB51 split line's. */
static void test_lists_spaces(void) {
    const char *d = vt_test_dir("dataset_lists_spaces");
    char dir[4096], lists[4200], hmdb[4200], err[512];
    snprintf(dir, sizeof dir, "%s/videos", d);
    snprintf(lists, sizeof lists, "%s/lists", d);
    snprintf(hmdb, sizeof hmdb, "%s/hmdb", d);
    vt_test_touch(dir, "Apply Eye Makeup/v_a 1.avi");
    vt_test_touch(dir, "Apply Eye Makeup/v_a2.avi");
    vt_test_touch(dir, "Archery/v_b1.avi");
    vt_test_touch(lists, "x");
    vt_test_write_file(lists, "classInd.txt", "1 Apply Eye Makeup \r\n2\tArchery\r\n");
    vt_test_write_file(lists, "trainlist01.txt",
                       "Apply Eye Makeup/v_a 1.avi  1\r\nArchery/v_b1.avi 2\r\n");
    vt_test_write_file(lists, "testlist01.txt", "Apply Eye Makeup/v_a2.avi\r\n");
    vt_dataset_opts o = {.lists_dir = lists};
    capture_begin(d);
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    capture_end();
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    TCHECK(ds->heads[0].nclasses == 2 && !strcmp(ds->heads[0].classes[0], "Apply Eye Makeup") &&
               !strcmp(ds->heads[0].classes[1], "Archery"),
           "classInd names with spaces: '%s'", ds->heads[0].classes[0]);
    int i;
    TCHECK((i = find(ds, "Apply Eye Makeup/v_a 1.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TRAIN && ds_class_is(ds, i, "Apply Eye Makeup"),
           "a train line with spaces in its path");
    TCHECK((i = find(ds, "Apply Eye Makeup/v_a2.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TEST && ds_class_is(ds, i, "Apply Eye Makeup"),
           "a test line without a label");
    TCHECK(ds->nmissing == 0 && captured && !strstr(captured, "skipped") &&
               !strstr(captured, "disagrees"),
           "lines warned about: %s", captured ? captured : "");
    vt_dataset_free(&ds);

    /* HMDB51: "video.avi K", the name all but K */
    vt_test_touch(hmdb, "x");
    vt_test_write_file(hmdb, "Apply Eye Makeup_test_split1.txt",
                       "v_a 1.avi 1\r\nv_a2.avi 2 \r\n");
    vt_test_write_file(hmdb, "Archery_test_split1.txt", "v_b1.avi 1\n");
    vt_dataset_opts oh = {.lists_dir = hmdb, .lists_format = VT_LISTS_HMDB51};
    capture_begin(d);
    ds = vt_dataset_open(dir, &oh, err, sizeof err);
    capture_end();
    TCHECK(ds != NULL, "open hmdb: %s", err);
    if (!ds)
        return;
    TCHECK((i = find(ds, "Apply Eye Makeup/v_a 1.avi")) >= 0 &&
               ds->videos[i].split == VT_SPLIT_TRAIN && ds_class_is(ds, i, "Apply Eye Makeup"),
           "an HMDB51 line with spaces in its name");
    TCHECK(ds->nmissing == 0 && captured && !strstr(captured, "skipped"),
           "hmdb lines warned about: %s", captured ? captured : "");
    vt_dataset_free(&ds);
}

/* --val-split: stable when files are added, stratified, tiny classes get one val. */
static void test_val_split(void) {
    const char *d = vt_test_dir("dataset_valsplit");
    char dir[4096], rel[256];
    snprintf(dir, sizeof dir, "%s", d);
    const char *cls[] = {"left", "right", "up"};
    for (int c = 0; c < 3; c++)
        for (int k = 0; k < 30; k++) {
            snprintf(rel, sizeof rel, "%s/clip_%03d.mp4", cls[c], k);
            vt_test_touch(dir, rel);
        }
    vt_test_touch(dir, "pair/a.mp4");
    vt_test_touch(dir, "pair/b.mp4");
    vt_test_touch(dir, "single/only.mp4");
    char err[512];
    vt_dataset_opts o = {.val_split = 0.2};
    vt_dataset *ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    int n0 = ds->nvideos;
    vt_split *before = vt_malloc((size_t)n0 * sizeof *before);
    char **names = vt_malloc((size_t)n0 * sizeof *names);
    int nval[8] = {0}, ntot[8] = {0};
    for (int i = 0; i < n0; i++) {
        before[i] = ds->videos[i].split;
        names[i] = vt_strdup(ds->videos[i].relpath);
        ntot[ds->videos[i].label[0]]++;
        nval[ds->videos[i].label[0]] += before[i] == VT_SPLIT_VAL;
    }
    /* classes sorted: left pair right single up */
    for (int c = 0; c < 5; c++) {
        const char *name = ds->heads[0].classes[c];
        if (ntot[c] >= 30) {
            /* 30 draws at p = 0.2: mean 6, sd 2.2; [1, 15] is > 4 sd either side, and
             * the names are fixed, so this is deterministic anyway. */
            TCHECK(nval[c] >= 1 && nval[c] <= 15, "class %s: %d of %d val", name, nval[c], ntot[c]);
        } else if (ntot[c] == 2) {
            TCHECK(nval[c] == 1, "class %s with 2 videos: exactly one val, got %d", name, nval[c]);
        } else {
            TCHECK(nval[c] == 0, "class %s with 1 video stays train", name);
        }
    }
    vt_dataset_free(&ds);

    /* Add 30 more videos per class and a new class; old files keep their split. */
    for (int c = 0; c < 3; c++)
        for (int k = 30; k < 60; k++) {
            snprintf(rel, sizeof rel, "%s/clip_%03d.mp4", cls[c], k);
            vt_test_touch(dir, rel);
        }
    vt_test_touch(dir, "aaa_new/first.mp4");
    vt_test_touch(dir, "aaa_new/second.mp4");
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL && ds->nvideos == n0 + 92, "rescan: %s", ds ? "" : err);
    if (ds) {
        int kept = 0;
        for (int i = 0; i < n0; i++) {
            int j = find(ds, names[i]);
            kept += j >= 0 && ds->videos[j].split == before[i];
        }
        TCHECK(kept == n0, "%d of %d old videos kept their split", kept, n0);
        /* the same dataset scanned twice is identical */
        vt_dataset *again = vt_dataset_open(dir, &o, err, sizeof err);
        int same = again && again->nvideos == ds->nvideos;
        for (int i = 0; same && i < ds->nvideos; i++)
            same = ds->videos[i].split == again->videos[i].split &&
                   ds->videos[i].label[0] == again->videos[i].label[0] &&
                   !strcmp(ds->videos[i].relpath, again->videos[i].relpath);
        TCHECK(same, "rescan identical");
        vt_dataset_free(&again);
    }
    for (int i = 0; i < n0; i++)
        free(names[i]);
    free(names);
    free(before);
    vt_dataset_free(&ds);
}

static void test_labels(void) {
    const char *d = vt_test_dir("dataset_labels");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", d);
    vt_test_touch(dir, "A/1.mp4");
    vt_test_touch(dir, "A/2.mp4");
    vt_test_touch(dir, "B/3.mp4");
    vt_test_touch(dir, "B/4.mp4");
    vt_test_touch(dir, "B/5.mp4");
    vt_test_touch(dir, "flat/6.mp4"); /* scanned as class "flat"; labels.csv relabels it */
    vt_test_touch(dir, "extra.mp4");  /* not in a class folder: added by its CSV row */
    vt_test_write_file(dir, "labels.csv",
               "path,action,objects\n"          /* 1 */
               "A/1.mp4,run,person;ball\n"      /* 2 */
               "\"A/2.mp4\",walk, person \n"    /* 3 quoted path, spaces */
               "B/3.mp4,run,\n"                 /* 4 no tags */
               "B/4.mp4,walk\n"                 /* 5 bad: 2 columns */
               "C/none.mp4,run,car\n"           /* 6 bad: unknown path */
               "A/1.mp4,walk,car\n"             /* 7 bad: duplicate */
               "B/5.mp4,,dog\n"                 /* 8 bad: empty single-label cell */
               "\n"                             /* 9 blank: skipped silently */
               "./flat/6.mp4,jump,ball;;cat\n"  /* 10 */
               "extra.mp4,run,person\n");       /* 11 */
    char err[512], csv[4200];
    snprintf(csv, sizeof csv, "%s/labels.csv", dir);
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(ds != NULL, "open: %s", err);
    if (!ds)
        return;
    int nbad = -1;
    capture_begin(vt_test_env("VT_TMP", "/tmp/vidtrain-tests"));
    int rc = vt_dataset_load_labels(ds, csv, &nbad, err, sizeof err);
    capture_end();
    TCHECK(rc == 0, "load_labels: %s", err);
    TCHECK(nbad == 4, "bad lines %d", nbad);
    char want[4300];
    const int badlines[] = {5, 6, 7, 8};
    for (int k = 0; k < 4; k++) {
        snprintf(want, sizeof want, "labels.csv:%d:", badlines[k]);
        TCHECK(strstr(captured, want) != NULL, "warning names %s", want);
    }
    TCHECK(strstr(captured, "labels.csv:2:") == NULL && strstr(captured, "labels.csv:10:") == NULL,
           "no warning for good lines");
    TCHECK(ds->nheads == 2, "heads %d", ds->nheads);
    TCHECK(!strcmp(ds->heads[0].name, "action") && ds->heads[0].loss == VT_LOSS_SOFTMAX_CE,
           "action is softmax");
    TCHECK(ds->heads[0].nclasses == 3 && !strcmp(ds->heads[0].classes[0], "jump") &&
               !strcmp(ds->heads[0].classes[1], "run") && !strcmp(ds->heads[0].classes[2], "walk"),
           "action classes from valid rows only");
    TCHECK(!strcmp(ds->heads[1].name, "objects") && ds->heads[1].loss == VT_LOSS_BCE,
           "objects is multi-label");
    /* union of tags of valid rows: ball cat person (car, dog only on bad lines) */
    TCHECK(ds->heads[1].nclasses == 3 && !strcmp(ds->heads[1].classes[0], "ball") &&
               !strcmp(ds->heads[1].classes[1], "cat") && !strcmp(ds->heads[1].classes[2], "person"),
           "tag classes %d", ds->heads[1].nclasses);
    TCHECK(ds->nvideos == 7, "extra.mp4 added: %d videos", ds->nvideos);
    int i;
    TCHECK((i = find(ds, "A/1.mp4")) >= 0 && ds->videos[i].labeled && ds->videos[i].label[0] == 1 &&
               ds->videos[i].ntags[1] == 2 && ds->videos[i].tags[1][0] == 0 &&
               ds->videos[i].tags[1][1] == 2, "A/1 run {ball, person}");
    TCHECK((i = find(ds, "A/2.mp4")) >= 0 && ds->videos[i].labeled && ds->videos[i].label[0] == 2 &&
               ds->videos[i].ntags[1] == 1 && ds->videos[i].tags[1][0] == 2, "A/2 walk {person}");
    TCHECK((i = find(ds, "B/3.mp4")) >= 0 && ds->videos[i].labeled && ds->videos[i].label[0] == 1 &&
               ds->videos[i].ntags[1] == 0, "B/3 run {}");
    TCHECK((i = find(ds, "B/4.mp4")) >= 0 && !ds->videos[i].labeled, "B/4 unlabeled");
    TCHECK((i = find(ds, "B/5.mp4")) >= 0 && !ds->videos[i].labeled, "B/5 unlabeled");
    TCHECK((i = find(ds, "flat/6.mp4")) >= 0 && ds->videos[i].label[0] == 0 &&
               ds->videos[i].ntags[1] == 2 && ds->videos[i].tags[1][0] == 0 &&
               ds->videos[i].tags[1][1] == 1, "flat/6 jump {ball, cat}");
    TCHECK((i = find(ds, "extra.mp4")) >= 0 && ds->videos[i].labeled && ds->videos[i].label[0] == 1,
           "extra run");
    /* a sample now, no longer left out: train printed "videos outside a class folder: 1,
     * left out" for the video it trained on */
    TCHECK(vt_dataset_count_stray(ds) == 0, "extra.mp4 still counted as left out (%d)",
           vt_dataset_count_stray(ds));
    TCHECK(vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 5, "labelled videos: %d",
           vt_dataset_split_count(ds, VT_SPLIT_TRAIN));
    vt_head_cfg hc[VT_MAX_HEADS];
    vt_dataset_head_cfgs(ds, hc);
    TCHECK(hc[1].classes == 3 && hc[1].loss == VT_LOSS_BCE && hc[0].weight == 1.0f, "head cfgs");

    vt_test_write_file(dir, "bad.csv", "justonecolumn\nA/1.mp4\n");
    snprintf(csv, sizeof csv, "%s/bad.csv", dir);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "header"), "no label column: %s", err);
    snprintf(csv, sizeof csv, "%s/nope.csv", dir);
    rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
    TCHECK(rc < 0 && strstr(err, "cannot read"), "missing csv: %s", err);
    vt_dataset_free(&ds);
}

/* A folder of loose videos and no class folder, named by a labels file or a Kinetics CSV,
 * whose readers take files anywhere under it (their docs): the open failed first with "no
 * videos under DIR", while one video moved into any subfolder made every row work. */
static void test_loose(void) {
    const char *d = vt_test_dir("dataset_loose");
    char dir[4096], csv[4200], err[512];
    snprintf(dir, sizeof dir, "%s/data", d);
    vt_test_touch(dir, "v1.mp4");
    vt_test_touch(dir, "v2.mp4");
    vt_test_touch(dir, "v3.mp4");
    vt_test_write_file(d, "labels.csv", "path,class\nv1.mp4,run\nv2.mp4,walk\n");
    vt_test_write_file(d, "kin.csv", "label,youtube_id,time_start,time_end,split\n"
                       "run,v1,0,10,train\nwalk,v2,0,10,train\nwalk,v3,0,10,val\n");
    vt_dataset *ds = vt_dataset_open(dir, NULL, err, sizeof err);
    TCHECK(!ds && strstr(err, "no videos under"), "loose videos alone, nothing to name them: "
           "%s", ds ? "opened" : err);
    vt_dataset_free(&ds);
    snprintf(csv, sizeof csv, "%s/labels.csv", d);
    vt_dataset_opts o = {.labels = csv};
    ds = vt_dataset_open(dir, &o, err, sizeof err);
    TCHECK(ds != NULL, "a folder of loose videos with --labels: %s", err);
    if (ds) {
        int rc = vt_dataset_load_labels(ds, csv, NULL, err, sizeof err);
        TCHECK(rc == 0 && ds->nvideos == 2 && vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 2,
               "--labels over loose videos: rc %d, %d videos (%s)", rc, ds->nvideos, err);
        /* v3.mp4, in no row, is the one left out */
        TCHECK(vt_dataset_count_stray(ds) == 1, "left out: %d, want 1 (v3.mp4)",
               vt_dataset_count_stray(ds));
    }
    vt_dataset_free(&ds);
    snprintf(csv, sizeof csv, "%s/kin.csv", d);
    vt_dataset_opts k = {.lists_dir = csv};
    ds = vt_dataset_open(dir, &k, err, sizeof err);
    TCHECK(ds && ds->nvideos == 3 && vt_dataset_split_count(ds, VT_SPLIT_TRAIN) == 2 &&
               vt_dataset_split_count(ds, VT_SPLIT_VAL) == 1 && vt_dataset_count_stray(ds) == 0,
           "a Kinetics CSV over loose videos: %s", ds ? "wrong samples" : err);
    vt_dataset_free(&ds);
}

int main(void) {
    TCHECK(vt_is_video_name("a.mp4") && vt_is_video_name("B.MKV") && vt_is_video_name("x.y4m") &&
               vt_is_video_name("c.ts") && !vt_is_video_name("a.txt") && !vt_is_video_name("mp4") &&
               !vt_is_video_name(".mp4"), "extensions");
    /* camcorders, phones, Windows, discs and raw camera streams (test_decode reads such
     * files against the ffmpeg command) */
    TCHECK(vt_is_video_name("a.MTS") && vt_is_video_name("b.m2ts") && vt_is_video_name("c.wmv") &&
               vt_is_video_name("d.3gp") && vt_is_video_name("e.VOB") &&
               vt_is_video_name("f.mxf") && vt_is_video_name("g.h264") &&
               !vt_is_video_name("a.ogg") && !vt_is_video_name("a.jpg"),
           "the extensions of camera, phone, Windows, disc and raw footage");
    TCHECK(strstr(vt_video_exts_text(), "mp4 avi") == vt_video_exts_text() &&
               strstr(vt_video_exts_text(), " mts ") && strstr(vt_video_exts_text(), " wmv "),
           "the extensions' text for messages: %s", vt_video_exts_text());
    test_flat();
    test_folders();
    test_symlinks();
    test_split_subsets();
    test_lists();
    test_lists_spaces();
    test_val_split();
    test_labels();
    test_loose();
    return vt_test_done("test_dataset");
}
