/*
 * dataset_lists.c: --lists — which format it names (UCF101 folder, HMDB51 split folder,
 * Kinetics CSV: vt_dataset_lists_detect), the dispatch to the reader of that format
 * (HMDB51 in dataset_hmdb.c, Kinetics in dataset_kinetics.c), and the UCF101 reader:
 * classInd.txt ("1 Name" per line: the classes and their ids, in its order; the name is
 * the rest of the line, spaces and all), trainlistFF.txt and testlistFF.txt
 * ("Class/video.avi [label]" per line, the path all but a trailing number: which scanned
 * videos are train and test for fold FF). Videos in no list are kept on record as
 * VT_SPLIT_NONE and unlabeled.
 *
 * A missing list file, a classInd line that is not "N Name" with N counting up from 1,
 * a class name listed twice, or a classInd without classes fails the open with
 * file:line; a train/test line naming an unknown class or a file that is not there is
 * warned about with file:line and skipped, and so is a second line for one video (in
 * both lists: warned, and a test video). It must never abort or read outside the
 * buffers on any file contents.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/common.h"
#include "base/nfc.h"
#include "pipeline/data/dataset/dataset_impl.h"

static int apply_ucf101(vt_dataset *ds, const char *lists_dir, int fold, char *err,
                        size_t errlen) {
    int rc = -1;
    char name[64];
    char *path = NULL, *text = NULL;
    vt_ds_strv classes = {0};
    int *first = NULL;
    uint8_t *first_in = NULL;

    path = vt_ds_join_path(lists_dir, "classInd.txt");
    text = vt_ds_read_text(path, err, errlen);
    if (!text) {
        goto end;
    }
    char *cur = text, *line;
    int lineno = 0;
    while ((line = vt_ds_next_line(&cur)) != NULL) {
        lineno++;
        if (!*line)
            continue;
        /* the name is the rest of the line: a class folder may be "Apply Eye Makeup" */
        char *cls;
        int id;
        if (!vt_ds_cut_first_int(line, &id, &cls) || id != classes.n + 1) {
            vt_set_err(err, errlen, "%s:%d: expected \"%d ClassName\", got \"%s\"", path, lineno,
                       classes.n + 1, line);
            goto end;
        }
        /* A name listed twice would be two classes with one name: the videos of that
         * folder would all take the later id, and the earlier one would never be seen.
         * Names in NFC, as the folders' (base/nfc.h). */
        char *nfc = vt_nfc(cls);
        for (int k = 0; k < classes.n; k++)
            if (!strcmp(classes.s[k], nfc)) {
                vt_set_err(err, errlen, "%s:%d: class '%s' is listed twice (first as %d)",
                           path, lineno, cls, k + 1);
                free(nfc);
                goto end;
            }
        vt_ds_strv_push(&classes, nfc);
    }
    if (classes.n == 0) {
        vt_set_err(err, errlen, "%s: no classes", path);
        goto end;
    }
    vt_freep(&text);
    vt_freep(&path);

    for (int i = 0; i < ds->nvideos; i++) {
        ds->videos[i].split = VT_SPLIT_NONE;
        vt_ds_video_free_labels(&ds->videos[i]);
    }
    /* the list line that named each video first (1-based), and in which list: a second
     * line for one video was taken in silence, the test list's winning (HMDB51's reader
     * warns of a video listed twice) */
    first = vt_calloc((size_t)(ds->nvideos ? ds->nvideos : 1), sizeof *first);
    first_in = vt_calloc((size_t)(ds->nvideos ? ds->nvideos : 1), 1);
    for (int which = 0; which < 2; which++) {
        snprintf(name, sizeof name, "%s%02d.txt", which == 0 ? "trainlist" : "testlist", fold);
        path = vt_ds_join_path(lists_dir, name);
        text = vt_ds_read_text(path, err, errlen);
        if (!text) {
            goto end;
        }
        cur = text;
        lineno = 0;
        while ((line = vt_ds_next_line(&cur)) != NULL) {
            lineno++;
            if (!*line)
                continue;
            /* "Class/video.avi [label]": the label is a trailing number, the path the
             * rest, which may hold spaces as the class names may */
            int given = 0;
            vt_ds_cut_last_int(line, &given);
            char *cls = vt_ds_class_of(line, 0);
            int c = -1;
            for (int k = 0; cls && k < classes.n; k++)
                if (!strcmp(classes.s[k], cls))
                    c = k;
            free(cls);
            if (c < 0) {
                vt_warn("%s:%d: class of '%s' is not in classInd.txt; line skipped\n", path,
                        lineno, line);
                continue;
            }
            if (given && given != c + 1)
                vt_warn("%s:%d: label %d disagrees with classInd.txt (%d for this folder); "
                        "using the folder\n", path, lineno, given, c + 1);
            int vi = vt_ds_find_video(ds, line);
            if (vi < 0) {
                vt_ds_missing(ds, path, lineno, line);
                continue;
            }
            if (first[vi]) {
                /* in both lists: a test video (it is what the fold evaluates on, and a
                 * video trained on would inflate it) */
                vt_warn("%s:%d: %s is listed a second time (first in %s%02d.txt line %d)%s\n",
                        path, lineno, line, first_in[vi] ? "testlist" : "trainlist", fold,
                        first[vi], which != first_in[vi] ? "; it is a test video, left out of "
                        "training" : "; line skipped");
                if (which == first_in[vi])
                    continue;
            } else {
                first[vi] = lineno;
                first_in[vi] = (uint8_t)which;
            }
            ds->videos[vi].split = which == 0 ? VT_SPLIT_TRAIN : VT_SPLIT_TEST;
            vt_ds_set_video_class(&ds->videos[vi], c);
        }
        vt_freep(&text);
        vt_freep(&path);
    }
    ds->nheads = 1;
    snprintf(ds->heads[0].name, sizeof ds->heads[0].name, "class");
    ds->heads[0].loss = VT_LOSS_SOFTMAX_CE;
    ds->heads[0].nclasses = classes.n;
    ds->heads[0].classes = classes.s;
    classes.s = NULL;
    classes.n = 0;
    rc = 0;
end:
    vt_ds_strv_free(&classes);
    free(first);
    free(first_in);
    free(text);
    free(path);
    return rc;
}

/* ---- the format ---- */

static const char *const format_names[] = {"auto", "ucf101", "hmdb51", "kinetics"};

const char *vt_lists_format_name(vt_lists_format f) {
    return f >= 0 && (size_t)f < VT_ARRAY_LEN(format_names) ? format_names[f] : "?";
}

int vt_lists_format_parse(const char *name) {
    for (size_t i = 0; name && i < VT_ARRAY_LEN(format_names); i++)
        if (!strcasecmp(name, format_names[i]))
            return (int)i;
    return -1;
}

/* 1 when the file's first non-empty line is a CSV header naming youtube_id, time_start
 * and time_end (Kinetics' own files, with or without label and split columns). */
static int is_kinetics_csv(const char *path) {
    char err[8];
    FILE *f = vt_fopen_regular(path, err, sizeof err);
    if (!f)
        return 0;
    char line[1024] = "";
    while (fgets(line, sizeof line, f) && strspn(line, " \t\r\n") == strlen(line))
        ;
    fclose(f);
    return strstr(line, "youtube_id") && strstr(line, "time_start") && strstr(line, "time_end");
}

/* What a folder holds: classInd.txt (UCF101), a *_test_split<N>.txt (HMDB51), a Kinetics
 * .csv; in that order of precedence. */
static vt_lists_format detect_folder(const char *dir) {
    char *p = vt_ds_join_path(dir, "classInd.txt");
    int ucf = vt_file_exists(p);
    free(p);
    if (ucf)
        return VT_LISTS_UCF101;
    DIR *d = opendir(dir);
    if (!d)
        return VT_LISTS_AUTO;
    vt_lists_format found = VT_LISTS_AUTO;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && found != VT_LISTS_HMDB51) {
        const char *dot = strrchr(e->d_name, '.');
        if (strstr(e->d_name, "_test_split") && dot && !strcasecmp(dot, ".txt")) {
            found = VT_LISTS_HMDB51;
        } else if (dot && !strcasecmp(dot, ".csv") && e->d_name[0] != '.') {
            char *f = vt_ds_join_path(dir, e->d_name);
            if (is_kinetics_csv(f))
                found = VT_LISTS_KINETICS;
            free(f);
        }
    }
    closedir(d);
    return found;
}

vt_lists_format vt_dataset_lists_detect(const char *lists_dir, char *err, size_t errlen) {
    vt_lists_format f = VT_LISTS_AUTO;
    if (vt_dir_exists(lists_dir))
        f = detect_folder(lists_dir);
    else if (vt_file_exists(lists_dir))
        f = is_kinetics_csv(lists_dir) ? VT_LISTS_KINETICS : VT_LISTS_AUTO;
    else {
        vt_set_err(err, errlen, "--lists %s: no such file or folder", lists_dir);
        return VT_LISTS_AUTO;
    }
    if (f == VT_LISTS_AUTO)
        vt_set_err(err, errlen,
                   "--lists %s: not a list format vidtrain knows: expected a folder with "
                   "classInd.txt + trainlist01.txt + testlist01.txt (UCF101), a folder of "
                   "<class>_test_split1.txt files (HMDB51), or a CSV with the header "
                   "label,youtube_id,time_start,time_end,split (Kinetics); --list-format "
                   "names one", lists_dir);
    return f;
}

int vt_ds_apply_lists(vt_dataset *ds, const vt_dataset_opts *o, char *err, size_t errlen) {
    vt_lists_format f = o->lists_format;
    if (f == VT_LISTS_AUTO && (f = vt_dataset_lists_detect(o->lists_dir, err, errlen)) ==
                                  VT_LISTS_AUTO)
        return -1;
    int fold = o->list_fold > 0 ? o->list_fold : 1, rc;
    switch (f) {
    case VT_LISTS_HMDB51: rc = vt_ds_apply_hmdb(ds, o->lists_dir, fold, err, errlen); break;
    case VT_LISTS_KINETICS: rc = vt_ds_apply_kinetics(ds, o->lists_dir, err, errlen); break;
    default: rc = apply_ucf101(ds, o->lists_dir, fold, err, errlen); break;
    }
    if (rc == 0)
        vt_ds_missing_summary(ds, o->lists_dir);
    return rc;
}
