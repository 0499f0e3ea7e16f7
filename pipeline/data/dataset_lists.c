/*
 * dataset_lists.c: UCF101-style list files (--lists DIR) — classInd.txt ("1 Name" per
 * line: the classes and their ids, in its order), trainlistFF.txt and testlistFF.txt
 * ("Class/video.avi [label]" per line: which scanned videos are train and test for fold
 * FF). Videos in no list are kept on record as VT_SPLIT_NONE and unlabeled.
 *
 * A missing list file, a classInd line that is not "N Name" with N counting up from 1,
 * a class name listed twice, or a classInd without classes fails the open with
 * file:line; a train/test line naming an unknown class or a file that is not there is
 * warned about with file:line and skipped. It must never abort or read outside the
 * buffers on any file contents.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/common.h"
#include "pipeline/data/dataset_impl.h"

int vt_ds_apply_lists(vt_dataset *ds, const char *lists_dir, int fold, char *err,
                      size_t errlen) {
    int rc = -1;
    char name[64];
    char *path = NULL, *text = NULL;
    vt_ds_strv classes = {0};

    path = vt_ds_join_path(lists_dir, "classInd.txt");
    text = vt_file_read(path);
    if (!text) {
        vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        goto end;
    }
    char *cur = text, *line;
    int lineno = 0;
    while ((line = vt_ds_next_line(&cur)) != NULL) {
        lineno++;
        if (!*line)
            continue;
        char cls[1024];
        int id;
        if (sscanf(line, "%d %1023s", &id, cls) != 2 || id != classes.n + 1) {
            vt_set_err(err, errlen, "%s:%d: expected \"%d ClassName\", got \"%s\"", path, lineno,
                       classes.n + 1, line);
            goto end;
        }
        /* A name listed twice would be two classes with one name: the videos of that
         * folder would all take the later id, and the earlier one would never be seen. */
        for (int k = 0; k < classes.n; k++)
            if (!strcmp(classes.s[k], cls)) {
                vt_set_err(err, errlen, "%s:%d: class '%s' is listed twice (first as %d)",
                           path, lineno, cls, k + 1);
                goto end;
            }
        vt_ds_strv_push(&classes, vt_strdup(cls));
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
    for (int which = 0; which < 2; which++) {
        snprintf(name, sizeof name, "%s%02d.txt", which == 0 ? "trainlist" : "testlist", fold);
        path = vt_ds_join_path(lists_dir, name);
        text = vt_file_read(path);
        if (!text) {
            vt_set_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
            goto end;
        }
        cur = text;
        lineno = 0;
        while ((line = vt_ds_next_line(&cur)) != NULL) {
            lineno++;
            if (!*line)
                continue;
            char *sp = line;
            while (*sp && !isspace((unsigned char)*sp))
                sp++;
            int given = 0;
            if (*sp) {
                *sp++ = 0;
                given = atoi(sp);
            }
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
                vt_warn("%s:%d: %s not found under %s\n", path, lineno, line, ds->dir);
                ds->nmissing++;
                continue;
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
    free(text);
    free(path);
    return rc;
}
