/*
 * run_heads.h: the model's heads as a run records them — name, loss kind, weight, label
 * smoothing and class names per head — in config.json "heads" and so in every
 * checkpoint's copy of it. eval and predict rebuild the model's outputs from it.
 *
 * It must never guess a head: a list that lacks a name, a loss or classes is refused, and
 * so is one with a loss other than softmax and bce, a class name that is not a string or
 * is there twice in a head, or two heads of one name.
 */
#ifndef VT_RUN_HEADS_H
#define VT_RUN_HEADS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "models/net.h"

typedef struct vt_run_heads {
    int n;
    vt_head_cfg cfg[VT_MAX_HEADS];
    char **classes[VT_MAX_HEADS];  /* (cfg[h].classes) class names, owned */
} vt_run_heads;

/* [{"name":..,"loss":"softmax"|"bce","weight":..,"smoothing":..,"classes":[..]}] */
cJSON *vt_run_heads_to_json(const vt_run_heads *h);
/* h from such a list (h is always initialised: vt_run_heads_free it). 0, or -1 with err. */
int vt_run_heads_from_json(vt_run_heads *h, const cJSON *arr, char *err, size_t errlen);
void vt_run_heads_free(vt_run_heads *h);

#endif
