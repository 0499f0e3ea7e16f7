/*
 * step_opts.c: the step options of plan and bench step (step_opts.h). The clip goes
 * through vt_parse_clip like train's, so every command takes TxS and TxHxW alike; the
 * numbers through the strict parsers. It must never abort on what a user typed.
 */
#include "app/step_opts.h"

#include <string.h>

#include "app/opts.h"
#include "models/backend.h"
#include "base/common.h"

int vt_step_args_take(vt_step_args *a, int argc, char **argv, int *i) {
    static const vt_opt_str opts[] = {
        {"--model", offsetof(vt_step_args, model)},
        {"--clip", offsetof(vt_step_args, clip)},
        {"--batch", offsetof(vt_step_args, batch)},
        {"--classes", offsetof(vt_step_args, classes)},
        {"--tower-split", offsetof(vt_step_args, tower_split)},
        {"--split", offsetof(vt_step_args, old_split)}, /* refused with a hint by resolve */
        {"--optimizer", offsetof(vt_step_args, optimizer)},
        {"--precision", offsetof(vt_step_args, precision)},
    };
    int r = vt_device_args_take(&a->dev, argc, argv, i);
    return r ? r : vt_opt_take_str(a, opts, VT_ARRAY_LEN(opts), argc, argv, i);
}

int vt_step_args_resolve(const vt_step_args *a, vt_net_cfg *net, vt_optim_cfg *optim,
                         vt_slice_policy *policy, vt_device_list *devs, int *batch,
                         char *err, size_t errlen) {
    vt_clip_shape clip;
    int classes;
    if (vt_parse_clip(a->clip, &clip) != 0) {
        vt_set_err(err, errlen, "--clip '%s': expected TxS or TxHxW (e.g. 8x32 or 8x32x32), "
                   "T up to %d, H and W up to %d", a->clip ? a->clip : "", VT_CLIP_MAX_T,
                   VT_CLIP_MAX_SIDE);
        return VT_STEP_ARGS_USAGE;
    }
    if (vt_parse_int(a->batch, 1, 1 << 20, batch) != 0) {
        vt_set_err(err, errlen, "--batch '%s': expected a whole number from 1 to %d",
                   a->batch ? a->batch : "", 1 << 20);
        return VT_STEP_ARGS_USAGE;
    }
    if (vt_parse_int(a->classes, 1, 1 << 20, &classes) != 0) {
        vt_set_err(err, errlen, "--classes '%s': expected a whole number from 1 to %d",
                   a->classes ? a->classes : "", 1 << 20);
        return VT_STEP_ARGS_USAGE;
    }
    const char *opt = a->optimizer ? a->optimizer : "sgd";
    int ok = vt_optim_kind_parse(opt);
    if (ok < 0) {
        vt_set_err(err, errlen, "unknown optimizer '%s' (sgd, rmsprop, adamw)", opt);
        return VT_STEP_ARGS_USAGE;
    }
    int prec = vt_precision_parse(a->precision ? a->precision : "fp32");
    if (prec < 0) {
        vt_set_err(err, errlen, "--precision '%s': fp32, tf32 or bf16", a->precision);
        return VT_STEP_ARGS_USAGE;
    }
    if (a->old_split) {
        if (vt_slice_policy_like(a->old_split))
            vt_slice_policy_moved(err, errlen, a->old_split);
        else
            vt_set_err(err, errlen, "--split %s: this command has no data split; the tower "
                       "policy option is --tower-split", a->old_split);
        return VT_STEP_ARGS_USAGE;
    }
    if (vt_slice_policy_parse(policy, a->tower_split ? a->tower_split : "equal", err, errlen))
        return VT_STEP_ARGS_USAGE;
    int drc = vt_devices_from_args(devs, &a->dev, err, errlen);
    if (drc)
        return drc == -2 ? VT_STEP_ARGS_USAGE : -1;
    if (a->precision && vt_devices_check_precision(devs, (vt_precision)prec, err, errlen))
        return VT_STEP_ARGS_USAGE;
    vt_net_cfg_default(net, a->model ? a->model : "tiny", classes, clip.t, clip.h, clip.w);
    net->precision = (vt_precision)prec;
    vt_optim_cfg_default(optim, (vt_opt_kind)ok);
    return 0;
}

void vt_step_args_help(FILE *f, const vt_step_args *a) {
    /* every zoo name, wrapped under the option's text column (22) before column 80 */
    char models[1024] = "";
    for (int i = 0, col = 22; vt_zoo_names[i]; i++) {
        size_t n = strlen(models), w = strlen(vt_zoo_names[i]);
        const int wrap = i && col + 2 + (int)w + 1 > 80;
        snprintf(models + n, sizeof models - n, "%s%s%s", i ? "," : "",
                 wrap ? "\n                      " : i ? " " : "", vt_zoo_names[i]);
        col = wrap ? 22 + (int)w : col + (i ? 2 : 0) + (int)w;
    }
    fprintf(f,
            "  --model M           %s (default %s)\n"
            "  --clip TxS|TxHxW    frames x crop side, or frames x height x width\n"
            "                      (default %s)\n"
            "  --batch B           global batch (default %s)\n"
            "  --classes K         classes of the head (default %s)\n"
            "  --tower-split POLICY\n"
            "                      how a batch splits over the towers: equal | memory | speed |\n"
            "                      auto | manual:W,W... (default %s)\n"
            "  --optimizer NAME    sgd | rmsprop | adamw (default %s)\n"
            "  --precision P       %s\n",
            models, a->model, a->clip, a->batch, a->classes, a->tower_split, a->optimizer,
            vt_precision_help);
}
