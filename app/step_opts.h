/*
 * step_opts.h: the options of a training step that `vidtrain plan` and `bench step`
 * share, so that both read them the same way:
 *   --model M  --clip TxS|TxHxW  --batch B  --classes K  --tower-split POLICY
 *   --optimizer NAME  --precision fp32|tf32|bf16
 * plus the device options (app/device_opts.h). The caller sets its defaults in the
 * struct, takes options with vt_step_args_take, then checks and converts them with
 * vt_step_args_resolve. (`train`, `eval` and `predict` parse their own richer sets.)
 *
 * It must never build a model or touch a device: it turns strings into configurations.
 */
#ifndef VT_STEP_OPTS_H
#define VT_STEP_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "app/device_opts.h"
#include "models/net.h"
#include "models/optim.h"
#include "pipeline/parallel/slices.h"

typedef struct vt_step_args {
    vt_device_args dev;
    const char *model, *clip, *tower_split, *optimizer, *precision;
    const char *batch, *classes;    /* as typed: resolve checks them */
    const char *old_split;          /* --split as given: a usage error in resolve, with a
                                       hint when it names a policy (now --tower-split) */
} vt_step_args;

#define VT_STEP_ARGS_USAGE (-2)

/* As vt_device_args_take, for the device options and the seven above (and --split). */
int vt_step_args_take(vt_step_args *a, int argc, char **argv, int *i);
/* Check and convert, in this order: clip (vt_parse_clip: TxS or TxHxW), batch and
 * classes (whole numbers from 1 to 2^20), the optimizer's name, the precision, --split
 * (refused), the tower policy — each a usage error, VT_STEP_ARGS_USAGE with err set —
 * then the device list (-1 with err set, as vt_devices_from_args; its -2, an option that
 * changes nothing, a usage error), then a --precision
 * given that none of its towers computes (vt_devices_check_precision: a usage error).
 * 0 on success: net =
 * the model with one softmax head of `classes` (the model name is not checked here: the
 * memory plan or the towers refuse an unknown one), optim = the optimizer's defaults. */
int vt_step_args_resolve(const vt_step_args *a, vt_net_cfg *net, vt_optim_cfg *optim,
                         vt_slice_policy *policy, vt_device_list *devs, int *batch,
                         char *err, size_t errlen);
/* Help lines for the seven options, showing the defaults in `a`. */
void vt_step_args_help(FILE *f, const vt_step_args *a);

#endif
