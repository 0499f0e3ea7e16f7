/*
 * train_epoch.c: the training loop of train.h — the steps of one epoch with the LR
 * schedule, the progress display, step lines, mid-epoch checkpoints and the stop at a
 * signal or --max-steps; the end of an epoch (validation, the epoch line, last and best
 * checkpoints, the report); and the end of the run. Ctrl-C finishes the step,
 * checkpoints and exits 130. It must never decode, split batches or touch a backend
 * directly: the loader and the towers do.
 */
#include "app/train/train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/dist.h"
#include "app/eval/metrics.h"
#include "app/eval/report.h"
#include "app/run/run_files.h"
#include "app/signals.h"
#include "app/eval/tensorboard.h"
#include "base/common.h"
#include "base/fileset.h"
#include "pipeline/data/mix.h"
#include "pipeline/data/video/video.h"
#include "pipeline/parallel/mpi.h"

/* The momentum a step uses when no schedule cycles it: SGD/RMSprop's, AdamW's beta1. */
static float step_momentum(const vt_optim_cfg *oc) {
    return oc->kind == VT_OPT_ADAMW ? oc->beta1 : oc->momentum;
}

/* --dump after step st->step: the batch it took and the state it left. */
static int dump_step(vt_train *t, const vt_batch *b, float lr, float momentum, double loss) {
    char err[512], name[64];
    vt_mix_draw mix;
    int mixed = vt_train_mix_draw(t, t->st.step - 1, b->h, b->w, &mix);
    if (vt_dump_train(t->dump, b, (long long)t->st.step, lr, momentum, loss,
                      vt_towers_dropout_base(t->o.seed, (long long)t->st.step),
                      mixed ? &mix : NULL, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: --dump: %s\n", err);
        return -1;
    }
    snprintf(name, sizeof name, "state_%06lld.safetensors", (long long)t->st.step);
    return vt_train_save(t, vt_dump_dir(t->dump), name, &t->st);
}

/* One training step as the epoch's sums and lines see it (issue 45 item 3): issued, and
 * finished once its gradient norm and skip are known — after the next step is issued,
 * whose first pass's wait read them, or at once where the step must be known before
 * anything else happens (a checkpoint, a stop, --dump, the epoch's end). */
typedef struct epoch_step {
    vt_step_stats ss;
    float lr;
    int64_t step;   /* st.step after it (steps count from 1) */
    int64_t index;  /* its batch's index in the epoch */
    double w;       /* its data wait */
} epoch_step;

/* A {"kind":"step"} line of metrics.jsonl: step `step`, just finished; w: its data wait. */
static void log_step(vt_train *t, int64_t epoch, int64_t step, float lr, const vt_step_stats *ss,
                     double w) {
    char err[1024];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "step");
    cJSON_AddNumberToObject(j, "step", (double)step);
    cJSON_AddNumberToObject(j, "epoch", (double)epoch + 1);
    cJSON_AddNumberToObject(j, "batch", (double)t->st.cursor);
    cJSON_AddNumberToObject(j, "lr", lr);
    cJSON_AddNumberToObject(j, "loss", ss->n ? ss->loss / ss->n : 0);
    cJSON_AddNumberToObject(j, "acc", ss->n ? (double)ss->head_correct[0] / ss->n : 0);
    cJSON_AddNumberToObject(j, "grad_norm", ss->grad_norm);
    if (ss->skipped) /* --skip-nonfinite: this step took no update */
        cJSON_AddTrueToObject(j, "skipped");
    cJSON_AddNumberToObject(j, "clips_per_s", ss->step_s + w > 0 ? ss->n / (ss->step_s + w) : 0);
    cJSON_AddNumberToObject(j, "data_wait", ss->step_s + w > 0 ? w / (ss->step_s + w) : 0);
    if (vt_metrics_append(t->o.out, j, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    cJSON_Delete(j);
}

/* A step the towers skipped as non-finite (tower.h vt_step_stats.skipped: no replica
 * took its update). Without --skip-nonfinite the run stops here, with an error naming the
 * step, and writes nothing: the last checkpoint on disk is the last finite state. With
 * it the step is counted and left out of the epoch's sums, as AMP's GradScaler skips.
 * 0 (counted), or -1 (printed: the run must stop). */
static int nonfinite_step(vt_train *t, int64_t epoch, const epoch_step *es) {
    vt_run_state *st = &t->st;
    const vt_train_opts *o = &t->o;
    const vt_step_stats *ss = &es->ss;
    const float lr = es->lr;
    double loss = ss->n ? ss->loss / ss->n : NAN;
    if (o->skip_nonfinite) {
        st->sums.skipped++;
        st->skipped_total++;
        return 0;
    }
    char path[2100], why[160];
    snprintf(path, sizeof path, "%s/last.safetensors", o->out);
    if (!isfinite(loss))
        snprintf(why, sizeof why, "the loss is %s", isnan(loss) ? "NaN" : "inf");
    else if (!isfinite(ss->grad_norm))
        snprintf(why, sizeof why, "the gradient norm is %s", isnan(ss->grad_norm) ? "NaN" : "inf");
    else /* exact sums: the norm reached their range (tower_worker.c) */
        snprintf(why, sizeof why, "the gradient norm %.3g is past the range of exact sums "
                 "(NaN and inf saturate there)", (double)ss->grad_norm);
    fprintf(stderr, "vidtrain train: step %lld (epoch %lld, batch %lld): %s: training diverged "
            "at lr %g. Stopped without saving this state: %s%s. Lower --lr (or set "
            "--clip-norm), or pass --skip-nonfinite to skip such steps and go on\n",
            (long long)es->step, (long long)epoch + 1, (long long)es->index + 1, why, (double)lr,
            vt_file_exists(path) ? "the last finite checkpoint is kept, " : "no checkpoint "
            "was written before it", vt_file_exists(path) ? path : "");
    return -1;
}

/* The step's figures into the epoch's sums, the progress display and the step lines, its
 * norm and skip read first (vt_towers_train_read); b: its batch when it is the step just
 * issued (--dump writes it), else NULL. 0, or -1 (printed: a non-finite step stops the
 * run without --skip-nonfinite). */
static int finish_step(vt_train *t, int64_t epoch, vt_progress *pg, vt_train_epoch_stats *es,
                       epoch_step *s, const vt_batch *b) {
    const vt_train_opts *o = &t->o;
    vt_run_state *st = &t->st;
    vt_towers_train_read(t->towers, &s->ss);
    const vt_step_stats ss = s->ss;
    const double w = s->w;
    if (ss.skipped && nonfinite_step(t, epoch, s) != 0)
        return -1;
    if (t->dump &&
        dump_step(t, b, s->lr, vt_sched_momentum(&t->sc, s->step - 1, step_momentum(&t->tc.optim)),
                  ss.n ? ss.loss / ss.n : 0) != 0)
        return -1;
    st->cursor = s->index + 1;
    if (!ss.skipped) { /* a skipped step's loss is NaN or inf: not in the sums */
        st->sums.loss += ss.loss;
        st->sums.clips += ss.n;
        for (int h = 0; h < t->heads.n; h++) {
            st->sums.head_loss[h] += ss.head_loss[h];
            st->sums.correct[h] += ss.head_correct[h];
        }
    }
    es->clips += ss.n;
    es->compute += ss.step_s;
    es->waited += w;
    st->sums.seconds += ss.step_s + w;
    st->sums.wait_s += w;
    double share = es->compute + es->waited > 0 ? es->waited / (es->compute + es->waited) : 0;
    double mloss = st->sums.clips ? st->sums.loss / (double)st->sums.clips : 0;
    double macc = st->sums.clips ? (double)st->sums.correct[0] / (double)st->sums.clips : 0;
    vt_progress_update(pg, st->cursor, es->clips, mloss, macc, share);
    if (o->log_every && s->step % o->log_every == 0)
        log_step(t, epoch, s->step, s->lr, &ss, w);
    return 0;
}

int vt_train_epoch(vt_train *t, int64_t epoch, vt_progress **pg, vt_train_epoch_stats *es) {
    const vt_train_opts *o = &t->o;
    vt_run_state *st = &t->st;
    /* The loader starts on (st.epoch, st.cursor); later epochs from batch 0. st holds
     * (epoch, 0, zero sums) there already: the previous epoch's end set it. */
    if (epoch != t->first_epoch) {
        vt_dist_dataset_sync(t->ds, "the next epoch's order");
        vt_loader_start_epoch(t->loader, epoch, 0);
    }
    char title[64];
    snprintf(title, sizeof title, "epoch %lld/%d", (long long)epoch + 1, o->epochs);
    *pg = vt_progress_init(stderr, title, t->spe, st->cursor, t->quiet ? 0 : -1,
                           t->quiet ? 0 : o->log_every);
    if (st->sums.clips) /* resumed within the epoch: its figures so far, not zeros, until a
                         * step runs (a run stopped at the epoch's last step runs none) */
        vt_progress_update(*pg, st->cursor, 0, st->sums.loss / (double)st->sums.clips,
                           (double)st->sums.correct[0] / (double)st->sums.clips, 0);
    memset(es, 0, sizeof *es);
    es->t0 = vt_now();
    vt_loader_stats ls;
    vt_loader_get_stats(t->loader, &ls);
    double wait0 = ls.wait_s;
    const vt_batch *b;
    epoch_step prev; /* the step before, finished after this one is issued */
    int have_prev = 0;
    while ((b = vt_loader_next(t->loader)) != NULL) {
        vt_loader_get_stats(t->loader, &ls);
        double w = ls.wait_s - wait0;
        wait0 = ls.wait_s;
        float lr = vt_train_lr(t, st->step);
        if (t->sc.kind == VT_SCHED_ONECYCLE)
            vt_towers_set_momentum(t->towers, vt_sched_momentum(&t->sc, st->step, 0));
        vt_train_mix_batch(t, (vt_batch *)b, st->step); /* --mixup/--cutmix: the loader's
                                                           batch, refilled after this step */
        if (o->tb_clips > 0 && b->index == 0 && vt_dist_lead())
            vt_tb_clips(o->out, st->step, b, o->tb_clips, o->input_norm);
        epoch_step cur = {.lr = lr, .index = b->index, .w = w};
        vt_towers_train_issue(t->towers, b, lr, &cur.ss);
        vt_train_mix_done(t, (vt_batch *)b);
        cur.step = ++st->step;
        if (have_prev) { /* its norm and skip: read by this step's first pass, no wait */
            have_prev = 0;
            if (finish_step(t, epoch, *pg, es, &prev, NULL) != 0)
                goto fail;
        }
        /* A batch with clips the system refused to open is not the run's: stopped before
         * it is checkpointed (last.safetensors keeps the step before). */
        char serr[640];
        if (vt_video_system_failed(serr, sizeof serr)) {
            vt_progress_finish(*pg, "stopped");
            char last[2100];
            snprintf(last, sizeof last, "%s/last.safetensors", o->out);
            int kept = access(last, F_OK) == 0;
            fprintf(stderr, "vidtrain train: %s%s%s%s\n", serr,
                    kept ? " (resume with vidtrain train --resume " : "", kept ? o->out : "",
                    kept ? ")" : "");
            goto fail;
        }
        /* Under mpirun every rank stops after the same step: the towers agreed on it. */
        int sig = vt_mpi_size() > 1 ? cur.ss.signal : vt_signal_pending();
        int at_max = o->max_steps && st->step >= o->max_steps;
        int save = sig || at_max || (o->checkpoint_every && st->step % o->checkpoint_every == 0);
        if (!save && !t->dump) {
            prev = cur;
            have_prev = 1;
            continue;
        }
        /* A checkpoint holds this step's state and figures, and --dump its batch: it is
         * finished now (a wait for its gradient norm: never a skipped step unseen). */
        if (finish_step(t, epoch, *pg, es, &cur, b) != 0)
            goto fail;
        if (save && vt_train_save(t, o->out, "last.safetensors", st) != 0)
            goto fail;
        if (sig || at_max) {
            vt_progress_finish(*pg, sig ? "interrupted" : "max steps reached");
            vt_progress_free(pg);
            fprintf(t->out, "%s at step %lld: checkpoint %s/last.safetensors (resume with "
                            "vidtrain train --resume %s)\n", sig ? "interrupted" : "stopped",
                    (long long)st->step, o->out, o->out);
            t->stopped = sig ? 128 + sig : -1;
            return 0;
        }
    }
    /* the epoch's last step, before its end evaluates and checkpoints (a wait) */
    if (have_prev && finish_step(t, epoch, *pg, es, &prev, NULL) != 0)
        goto fail;
    return 0;
fail:
    vt_progress_free(pg);
    return -1;
}

/* Validation at the end of `epoch`: its figures into the epoch line, RUN/val.json, the
 * line's text into extra; *vacc and *vloss for the best checkpoint. 0, or -1 (printed). */
static int validate(vt_train *t, int64_t epoch, cJSON *line, char *extra, size_t extra_n,
                    double *vacc, double *vloss, int64_t *vnonfinite) {
    const vt_train_opts *o = &t->o;
    const vt_run_heads *heads = &t->heads;
    const int nh = heads->n;
    char err[1024];
    vt_eval_opts eo;
    vt_train_val_opts(&eo, o);
    eo.dump = epoch + 1 == o->epochs ? t->dump : NULL; /* the twin checks the last */
    vt_eval_counts cnt;
    if (vt_run_evaluate(t->ep, &cnt, t->towers, t->val_ds, heads, t->val_idx, t->nval, &eo, err,
                        sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: validation: %s\n", err);
        return -1;
    }
    vt_eval_result r[VT_MAX_HEADS];
    for (int h = 0; h < nh; h++)
        vt_evalproto_result(t->ep[h], &r[h]);
    const vt_run_sums *sums = &t->st.sums;
    *vacc = t->val_by_class ? r[0].mean_class_acc : r[0].video_top1; /* train_balance.c */
    *vloss = r[0].clips ? r[0].loss_sum / (double)r[0].clips : INFINITY;
    *vnonfinite = 0;
    for (int h = 0; h < nh; h++)
        *vnonfinite += r[h].nonfinite;
    cJSON_AddNumberToObject(line, "val_loss", r[0].clips ? r[0].loss_sum / (double)r[0].clips : NAN);
    cJSON_AddNumberToObject(line, "val_acc", r[0].video_top1);
    cJSON_AddNumberToObject(line, "val_top5", r[0].video_top5);
    cJSON_AddNumberToObject(line, "val_clip_acc", r[0].clip_top1);
    cJSON_AddNumberToObject(line, "val_mean_class_acc", r[0].mean_class_acc);
    for (int h = 1; h < nh; h++) {
        char k[96];
        snprintf(k, sizeof k, "%s_val_acc", heads->cfg[h].name);
        cJSON_AddNumberToObject(line, k, r[h].video_top1);
        snprintf(k, sizeof k, "%s_train_acc", heads->cfg[h].name);
        cJSON_AddNumberToObject(line, k, sums->clips ? (double)sums->correct[h] / (double)sums->clips : 0);
    }
    const char *split = vt_split_name(t->vds ? VT_SPLIT_VAL : vt_dataset_eval_split(t->ds));
    cJSON *vj = vt_eval_json(r, heads, &cnt, split, &eo, t->val_ds, t->val_idx, t->nval);
    char path[2100];
    snprintf(path, sizeof path, "%s/val.json", o->out);
    if (vt_run_write_json(path, vj, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    vt_tb_confusion(o->out, t->st.step, vj);
    cJSON_Delete(vj);
    snprintf(extra, extra_n, "val: video top-1 %.1f%%, clip top-1 %.1f%%, loss %.4f (%lld videos)",
             100 * r[0].video_top1, 100 * r[0].clip_top1,
             r[0].clips ? r[0].loss_sum / (double)r[0].clips : 0, (long long)r[0].videos);
    if (cnt.filled_frames) /* a damaged stream's clips, scored all the same: said */
        snprintf(extra + strlen(extra), extra_n - strlen(extra), ", %lld frames filled in "
                 "(never decoded)", (long long)cnt.filled_frames);
    if (cnt.decode_errors) /* ... and those of repaired pictures (val.json names them) */
        snprintf(extra + strlen(extra), extra_n - strlen(extra), ", %lld decode errors in %lld "
                 "video(s)", (long long)cnt.decode_errors, (long long)cnt.damaged_videos);
    if (cnt.bad_clips) /* left out of the figures */
        snprintf(extra + strlen(extra), extra_n - strlen(extra), ", %lld of %lld clips failed "
                 "to decode", (long long)cnt.bad_clips, (long long)cnt.expected);
    if (r[0].nonfinite) /* counted wrong (evalproto.c) */
        snprintf(extra + strlen(extra), extra_n - strlen(extra), ", %lld clips with non-finite "
                 "scores", (long long)r[0].nonfinite);
    if (t->val_by_class) /* what best.safetensors is chosen on */
        snprintf(extra + strlen(extra), extra_n - strlen(extra), ", mean class %.1f%%",
                 100 * r[0].mean_class_acc);
    for (int h = 1; h < nh; h++) {
        size_t el = strlen(extra);
        snprintf(extra + el, extra_n - el, "; head %s: video %s %.1f%%", heads->cfg[h].name,
                 r[h].loss == VT_LOSS_BCE ? "label-wise acc" : "top-1", 100 * r[h].video_top1);
    }
    for (int h = 0; h < nh; h++) {
        vt_eval_result_free(&r[h]);
        vt_evalproto_free(&t->ep[h]);
    }
    return 0;
}

static int epoch_end(vt_train *t, int64_t epoch, vt_progress **pg,
                     const vt_train_epoch_stats *es, vt_fileset **set) {
    const vt_train_opts *o = &t->o;
    const vt_run_state *st = &t->st;
    char err[1024];
    double tr_loss = st->sums.clips ? st->sums.loss / (double)st->sums.clips : NAN;
    double tr_acc = st->sums.clips ? (double)st->sums.correct[0] / (double)st->sums.clips : NAN;
    cJSON *line = cJSON_CreateObject();
    cJSON_AddStringToObject(line, "kind", "epoch");
    cJSON_AddNumberToObject(line, "epoch", (double)epoch + 1);
    cJSON_AddNumberToObject(line, "step", (double)st->step);
    cJSON_AddNumberToObject(line, "lr", vt_train_lr(t, st->step > 0 ? st->step - 1 : 0));
    vt_train_budget_epoch_end(t, epoch, es); /* may change o->epochs: before do_val */
    cJSON_AddNumberToObject(line, "train_loss", tr_loss);
    cJSON_AddNumberToObject(line, "train_acc", tr_acc);
    if (o->skip_nonfinite)
        cJSON_AddNumberToObject(line, "skipped_steps", (double)st->sums.skipped);
    char skipped[96] = "";
    if (st->sums.skipped)
        snprintf(skipped, sizeof skipped, "; %lld non-finite step(s) skipped",
                 (long long)st->sums.skipped);
    vt_progress_finish(*pg, NULL);
    vt_progress_free(pg);
    int do_val = t->nval > 0 && ((epoch + 1) % o->eval_every == 0 || epoch + 1 == o->epochs);
    double vacc = NAN, vloss = NAN;
    int64_t vnonfinite = 0;
    /* The running statistics that validation and the checkpoints carry: from clean clips
     * (train_bn.c), at every validation and at the end. */
    double tp = vt_now();
    if ((do_val || epoch + 1 == o->epochs) && vt_train_precise_bn(t) != 0) {
        cJSON_Delete(line);
        return -1;
    }
    if (do_val || epoch + 1 == o->epochs) /* --time-budget's measurements (budget.h) */
        t->bud.bn_s = vt_now() - tp;
    if (do_val) {
        char extra[1024] = "";
        tp = vt_now();
        if (validate(t, epoch, line, extra, sizeof extra, &vacc, &vloss, &vnonfinite) != 0) {
            cJSON_Delete(line);
            return -1;
        }
        t->bud.val_s = vt_now() - tp;
        fprintf(t->out, "epoch %lld/%d: train loss %.4f acc %.1f%%%s; %s\n", (long long)epoch + 1,
                o->epochs, tr_loss, 100 * tr_acc, skipped, extra);
    } else {
        fprintf(t->out, "epoch %lld/%d: train loss %.4f acc %.1f%%%s\n", (long long)epoch + 1,
                o->epochs, tr_loss, 100 * tr_acc, skipped);
    }
    double busy = es->compute + es->waited;
    cJSON_AddNumberToObject(line, "clips_per_s", busy > 0 ? (double)es->clips / busy : 0);
    cJSON_AddNumberToObject(line, "data_wait", busy > 0 ? es->waited / busy : 0);
    cJSON_AddNumberToObject(line, "seconds", vt_now() - es->t0);
    char plan[512];
    vt_towers_plan_line(t->towers, plan, sizeof plan);
    cJSON_AddStringToObject(line, "plan", plan);
    if (vt_metrics_append(o->out, line, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: %s\n", err);
    cJSON_Delete(line);
    fflush(t->out);

    /* The next epoch starts at batch 0 with fresh sums: that is what last holds. */
    vt_run_state next = *st;
    next.epoch = epoch + 1;
    next.cursor = 0;
    memset(&next.sums, 0, sizeof next.sums);
    /* best.safetensors: chosen once the warm-up is over (a model still on its way up
     * the learning rate is no candidate, and a small validation set can rank one
     * first by luck); a small validation set ties often (every video right, or the
     * same count): the later epoch with the lower loss is the better model then, not
     * the first one to get there. */
    int candidate = epoch + 1 >= o->warmup_epochs;
    int better = do_val && candidate &&
                 (vacc > st->best || (vacc == st->best && vloss < st->best_loss));
    /* At the end, the last epoch is best unless an earlier one beat it by more than the
     * validation set's noise (run_ckpt.h). */
    if (do_val && epoch + 1 == o->epochs) {
        better = !vt_ckpt_keep_earlier_best(st->best, vacc, t->nval);
        if (better && st->best > vacc && vnonfinite == 0)
            fprintf(t->out, "best: the last epoch (%.1f%%), not epoch %d (%.1f%%): on %d "
                            "validation videos that lead is within the noise\n",
                    100 * vacc, st->best_epoch, 100 * st->best, t->nval);
    }
    /* A model whose validation scores went NaN or inf has diverged, however finite its
     * weights: never best.safetensors (issue 41), whatever the noise rule says. */
    if (do_val && vnonfinite > 0 && better) {
        fprintf(t->out, "best: not epoch %lld, whose validation gave %lld non-finite score(s) "
                "(the model diverged)%s\n", (long long)epoch + 1, (long long)vnonfinite,
                st->best >= 0 ? "" : "; no best.safetensors yet");
        better = 0;
    }
    vt_train_length_epoch_end(t, epoch, do_val, vacc, vloss, &next);
    if (better) {
        next.best = vacc;
        next.best_loss = vloss;
        next.best_epoch = (int)epoch + 1;
    }
    tp = vt_now();
    if (vt_train_save(t, o->out, "last.safetensors", &next) != 0)
        return -1;
    t->bud.save_s = vt_now() - tp;
    if (better && vt_train_save(t, o->out, "best.safetensors", &next) != 0)
        return -1;
    t->st = next;
    if (vt_fileset_commit(set, err, sizeof err) != 0) {
        fprintf(stderr, "vidtrain train: %s\n", err);
        return -1;
    }
    if (vt_report_write(o->out, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: report: %s\n", err);
    return 0;
}

int vt_train_epoch_end(vt_train *t, int64_t epoch, vt_progress **pg,
                       const vt_train_epoch_stats *es) {
    /* The epoch's val.json, last.safetensors (whose state names the best epoch and its
     * score) and best.safetensors are one set (base/fileset.h): renamed together after
     * all are whole, behind RUN/.last.safetensors.set. A kill between two renames left a
     * last.safetensors naming a best epoch beside another epoch's best.safetensors, and
     * --resume went on from it. A file the epoch does not write (best when not better,
     * val.json without a validation) still belongs with the new ones: kept. */
    vt_fileset *set = NULL;
    if (vt_dist_lead()) {
        char p[2100];
        snprintf(p, sizeof p, "%s/last.safetensors", t->o.out);
        set = vt_fileset_begin(p, VT_FILESET_KEEP);
        snprintf(p, sizeof p, "%s/best.safetensors", t->o.out);
        vt_fileset_add(set, p, VT_FILESET_KEEP);
        snprintf(p, sizeof p, "%s/val.json", t->o.out);
        vt_fileset_add(set, p, VT_FILESET_KEEP);
    }
    int rc = epoch_end(t, epoch, pg, es, &set);
    vt_fileset_free(&set); /* not committed: the staged files go, the last set stays */
    return rc;
}

int vt_train_finish(vt_train *t) {
    const vt_train_opts *o = &t->o;
    char err[1024];
    /* Under mpirun a stop by signal exits non-zero, which ends every rank (MPI_Abort):
     * not before rank 0 has written its checkpoint. */
    vt_mpi_barrier("the end of training");
    if (t->stopped > 0)
        return t->stopped;
    vt_loader_stats ls;
    vt_loader_get_stats(t->loader, &ls);
    if (ls.frames.cap > 0 && ls.frames.hits + ls.frames.misses > 0) {
        char held[32], cap[32];
        fprintf(t->out, "frame cache: %s of %s held (%lld frames%s); %.1f%% of clips served "
                        "from it\n", vt_fmt_bytes(held, sizeof held, ls.frames.bytes),
                vt_fmt_bytes(cap, sizeof cap, ls.frames.cap), (long long)ls.frames.frames,
                ls.frames.full ? ", full: raise --frame-cache to keep every frame" : "",
                100.0 * (double)ls.frames.hits / (double)(ls.frames.hits + ls.frames.misses));
    }
    if (!t->stopped && o->time_budget > 0 && !t->resume[0]) {
        /* The epochs were fitted to the machine's speed in the first seconds; say how
         * far the whole run drifted from the budget (a shared machine's speed moves). */
        double took = vt_now() - t->t_start, off = took / o->time_budget - 1;
        fprintf(t->out, "time budget %.0f s: took %.1f s (%+.1f%%)%s\n",
                (double)o->time_budget, took, 100 * off,
                off > 0.03 ? ": the machine ran slower than when it was timed" : "");
    }
    if (!t->stopped)
        vt_train_length_finish(t);
    if (ls.filled_frames || ls.bad_clips || ls.decode_errors)
        /* Damaged streams: the videos were named as found (loader_fill.c); the totals. */
        fprintf(t->out, "damaged streams: %lld frame(s) of the training clips never decoded "
                "and hold the nearest decoded frame; %lld decode error(s) met reading them "
                "(packets rejected, pictures the decoder repaired); %lld sampled clip(s) left "
                "out (their decode failed)\n", (long long)ls.filled_frames,
                (long long)ls.decode_errors, (long long)ls.bad_clips);
    if (t->st.skipped_total)
        fprintf(t->out, "skipped: %lld non-finite step(s) in all (--skip-nonfinite): their loss "
                "or gradient was NaN or inf; many mean the run diverges (lower --lr)\n",
                (long long)t->st.skipped_total);
    if (!t->stopped) {
        if (t->st.best >= 0)
            fprintf(t->out, "done: best validation %s %.1f%% (epoch %d); %s/best.safetensors\n",
                    t->val_by_class ? "mean class accuracy" : "video top-1", 100 * t->st.best,
                    t->st.best_epoch, o->out);
        else
            fprintf(t->out, "done: %s/last.safetensors\n", o->out);
    }
    if (vt_report_write(o->out, err, sizeof err) != 0)
        fprintf(stderr, "vidtrain train: report: %s\n", err);
    return 0;
}
