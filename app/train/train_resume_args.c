/*
 * train_resume_args.c: --resume's saved options that no longer apply (train_args.h
 * vt_train_resume_unused). The checks of train_args.c refuse an option that would change
 * nothing beside the others, but they are for what the command line gave (app/opts.h
 * vt_opts_given): a saved value that no longer applies — the run's --threads on towers
 * without the cpu backend, its --gamma after --sched cosine given now, a value an older
 * vidtrain took before its check existed — was never typed there, so it must not refuse
 * the resume. It must never drop a value the command line gave, nor one that still acts.
 */
#include <stdio.h>
#include <string.h>

#include "app/device_opts.h"
#include "app/dist.h"
#include "app/train/train_args.h"
#include "models/finetune.h"

/* 1 when the command line gave the option `name`. */
static int given(const vt_opts_given *g, const char *name) {
    return vt_opts_given_has(g, name);
}

/* One saved value dropped: said in one line (rank 0 under mpirun). */
static void dropped(const char *resume, const char *opt, const char *why) {
    if (vt_dist_lead())
        fprintf(stderr, "vidtrain train: note: --resume %s: the run's %s (its configuration) "
                "%s: dropped\n", resume, opt, why);
}

void vt_train_resume_unused(vt_train_opts *o, vt_train_opts *saved, const vt_opts_given *g,
                            const char *resume) {
    char line[256], err[1024];
    vt_device_args da;
    vt_train_opts_device_args(o, &da);
    const int un = vt_device_args_unused(&da, err, sizeof err); /* -1: train.c says why */
    if (un > 0 && (un & VT_DEVARG_BACKEND) && !given(g, "--backend")) {
        snprintf(line, sizeof line, "--backend %s", o->backend);
        dropped(resume, line, "picks the backend of plain cpu towers, and these towers have "
                "none");
        o->backend[0] = saved->backend[0] = '\0';
    }
    if (un > 0 && (un & VT_DEVARG_THREADS) && !given(g, "--threads")) {
        snprintf(line, sizeof line, "--threads %d", o->threads);
        dropped(resume, line, "is threads per tower of the cpu backend, and these towers have "
                "none (cpu-ref runs one thread, a GPU tower its GPU)");
        o->threads = saved->threads = 0;
    }
    vt_train_opts d; /* what leaving an option out gives */
    vt_train_opts_default(&d);
    if (strcmp(o->sched, "step") && !given(g, "--step-epochs") && !given(g, "--gamma") &&
        (o->step_epochs != d.step_epochs || o->gamma != d.gamma)) {
        snprintf(line, sizeof line, "--step-epochs %d --gamma %g", o->step_epochs,
                 (double)o->gamma);
        char why[128];
        snprintf(why, sizeof why, "shapes --sched step, and the run's schedule is %.40s",
                 o->sched);
        dropped(resume, line, why);
        o->step_epochs = saved->step_epochs = d.step_epochs;
        o->gamma = saved->gamma = d.gamma;
    }
    if (!(o->mixup > 0 && o->cutmix > 0) && !given(g, "--mixup-switch-prob") &&
        o->mix_switch != d.mix_switch) {
        snprintf(line, sizeof line, "--mixup-switch-prob %g", (double)o->mix_switch);
        dropped(resume, line, "chooses between mixup and CutMix, and the run does not mix "
                "with both");
        o->mix_switch = saved->mix_switch = d.mix_switch;
    }
    if (vt_finetune_nlayers(o->model) <= 0 && !given(g, "--drop-path") && o->drop_path > 0) {
        snprintf(line, sizeof line, "--drop-path %g", (double)o->drop_path);
        dropped(resume, line, "acts on a transformer's blocks, which the model has none of");
        o->drop_path = saved->drop_path = 0;
    }
    if (vt_finetune_nlayers(o->model) <= 0 && !given(g, "--layer-decay") &&
        o->layer_decay > 0 && o->layer_decay != 1.0f) {
        snprintf(line, sizeof line, "--layer-decay %g", (double)o->layer_decay);
        dropped(resume, line, "acts on a transformer's blocks, which the model has none of");
        o->layer_decay = saved->layer_decay = 1.0f; /* what resolve makes of a CNN's */
    }
    if (!strcmp(vt_train_opts_optim(o), "adamw") && !given(g, "--momentum") &&
        o->momentum != d.momentum) {
        snprintf(line, sizeof line, "--momentum %g", (double)o->momentum);
        dropped(resume, line, "is SGD's and RMSprop's, and the run trains with AdamW");
        o->momentum = saved->momentum = d.momentum;
    }
    if (!strcmp(o->sched, "onecycle") && !given(g, "--warmup") && o->warmup_epochs > 0) {
        snprintf(line, sizeof line, "--warmup %g", (double)o->warmup_epochs);
        dropped(resume, line, "is replaced by --sched onecycle's own rise");
        o->warmup_epochs = saved->warmup_epochs = 0; /* what resolve gives onecycle */
    }
    if (!strcmp(o->sched, "onecycle") && !given(g, "--momentum") &&
        o->momentum != d.momentum) {
        snprintf(line, sizeof line, "--momentum %g", (double)o->momentum);
        dropped(resume, line, "is replaced by --sched onecycle's cycled momentum");
        o->momentum = saved->momentum = d.momentum;
    }
    if (o->no_leak_check && o->strict_splits && !given(g, "--strict-splits")) {
        dropped(resume, "--strict-splits", "makes the leak check's finds errors, and "
                "--no-leak-check skips it");
        o->strict_splits = saved->strict_splits = 0;
    }
    if (o->time_budget > 0 && given(g, "--epochs")) { /* train.c kept the budget's plan */
        snprintf(line, sizeof line, "--time-budget %gs%s", (double)o->time_budget,
                 o->budget_once ? " --budget-once" : "");
        dropped(resume, line, "is replaced by --epochs given now");
        o->time_budget = saved->time_budget = 0;
        o->budget_once = saved->budget_once = 0;
    }
    if (o->freeze_bn > 0 && o->precise_bn > 0 && !given(g, "--precise-bn")) {
        snprintf(line, sizeof line, "--precise-bn %d", o->precise_bn);
        dropped(resume, line, "recomputes batch-norm statistics, and --freeze-bn keeps them");
        o->precise_bn = saved->precise_bn = 0; /* what resolve gives frozen batch norm */
    }
    /* --class-weights implies --balance loss: another --balance given now replaces it */
    if (o->class_weights[0] && !given(g, "--class-weights") && given(g, "--balance") &&
        strcmp(o->balance, "loss") && strcmp(o->balance, "auto")) {
        snprintf(line, sizeof line, "--class-weights %.200s", o->class_weights);
        dropped(resume, line, "weights the loss of --balance loss, which --balance replaces");
        o->class_weights[0] = saved->class_weights[0] = '\0';
    }
}

