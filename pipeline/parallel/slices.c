/*
 * slices.c: the splitter's policies, largest-remainder rounding, the predicted step
 * time, the printed plan, and the auto policy's measuring controller (slices.h).
 *
 * Pure logic on numbers: it must never touch a backend, a net or a clock, so that the
 * same inputs always give the same plan (docs/design.md §3.5) and tests can feed it
 * any mix of devices.
 */
#include "pipeline/parallel/slices.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"

const char *vt_slice_kind_name(vt_slice_kind kind) {
    switch (kind) {
    case VT_SLICE_EQUAL: return "equal";
    case VT_SLICE_MEMORY: return "memory";
    case VT_SLICE_SPEED: return "speed";
    case VT_SLICE_MANUAL: return "manual";
    case VT_SLICE_AUTO: return "auto";
    }
    return "?";
}

int vt_slice_policy_parse(vt_slice_policy *out, const char *s, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (!s || !strcmp(s, "equal")) {
        out->kind = VT_SLICE_EQUAL;
    } else if (!strcmp(s, "memory")) {
        out->kind = VT_SLICE_MEMORY;
    } else if (!strcmp(s, "speed")) {
        out->kind = VT_SLICE_SPEED;
    } else if (!strcmp(s, "auto")) {
        out->kind = VT_SLICE_AUTO;
    } else if (!strncmp(s, "manual:", 7)) {
        out->kind = VT_SLICE_MANUAL;
        const char *p = s + 7;
        double sum = 0;
        while (*p) {
            char *end;
            double w = strtod(p, &end);
            if (end == p || !(w >= 0) || !isfinite(w) || (*end && *end != ',')) {
                vt_set_err(err, errlen, "--tower-split %s: weights must be non-negative numbers, "
                           "e.g. manual:3,1", s);
                return -1;
            }
            if (out->nweights >= VT_MAX_DEVICES) {
                vt_set_err(err, errlen, "--tower-split %s: more than %d weights", s,
                           VT_MAX_DEVICES);
                return -1;
            }
            out->weight[out->nweights++] = w;
            sum += w;
            p = *end ? end + 1 : end;
        }
        if (out->nweights == 0 || !(sum > 0)) {
            vt_set_err(err, errlen, "--tower-split %s: give at least one positive weight", s);
            return -1;
        }
    } else {
        vt_set_err(err, errlen, "--tower-split '%s': expected equal, memory, speed, auto or "
                   "manual:W,W...", s);
        return -1;
    }
    return 0;
}

int vt_slice_policy_like(const char *s) {
    vt_slice_policy p;
    return s && (vt_slice_policy_parse(&p, s, NULL, 0) == 0 || !strncmp(s, "manual", 6));
}

void vt_slice_policy_moved(char *err, size_t errlen, const char *value) {
    vt_set_err(err, errlen,
               "--split %s: the tower policy option is --tower-split: use --tower-split %s "
               "(--split, where a command has it, names a data split: train, val, test)",
               value, value);
}

void vt_slice_round(int *out, int total, const double *w, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += w[i] > 0 ? w[i] : 0;
    VT_CHECK(sum > 0 || total == 0, "vt_slice_round: no positive weight for %d clips", total);
    double frac[VT_MAX_DEVICES];
    int given = 0;
    for (int i = 0; i < n; i++) {
        double q = sum > 0 && w[i] > 0 ? (double)total * w[i] / sum : 0;
        out[i] = (int)floor(q);
        frac[i] = w[i] > 0 ? q - out[i] : -1; /* -1: never gets a remainder clip */
        given += out[i];
    }
    /* Floating error can make floors sum one past total when shares are exact. */
    while (given > total) {
        int j = -1;
        for (int i = 0; i < n; i++)
            if (out[i] > 0 && (j < 0 || frac[i] < frac[j]))
                j = i;
        out[j]--;
        given--;
    }
    for (int r = given; r < total; r++) {
        int j = -1;
        for (int i = 0; i < n; i++) /* strict >: ties go to the lower index */
            if (frac[i] >= 0 && (j < 0 || frac[i] > frac[j]))
                j = i;
        if (j < 0) { /* every positive weight had one (float error in the floors): again */
            for (int i = 0; i < n; i++)
                if (w[i] > 0)
                    frac[i] = 0;
            r--;
            continue;
        }
        out[j]++;
        frac[j] = -0.5; /* one remainder clip each, then the next in line */
    }
}

int vt_slice_fits(const vt_memplan *mp, const vt_device *d) {
    if (!strcmp(d->backend, "cuda"))
        return VT_MIN(vt_memplan_max_clips_cuda(mp, d->budget), VT_SLICE_UNLIMITED);
    if (d->budget <= 0)
        return VT_SLICE_UNLIMITED;
    return VT_MIN(vt_memplan_max_clips(mp, d->budget), VT_SLICE_UNLIMITED);
}

int vt_ckpt_mode_parse(const char *s) {
    static const char *const names[] = {"auto", "off", "on"};
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

const char *vt_ckpt_mode_name(vt_ckpt_mode m) {
    return m == VT_CKPT_ON ? "on" : m == VT_CKPT_OFF ? "off" : "auto";
}

int vt_ckpt_choose(vt_ckpt_mode mode, const vt_memplan *mp_off, const vt_memplan *mp_on,
                   const vt_device *d, int *fits) {
    const int off = vt_slice_fits(mp_off, d);
    int on = mp_on && (mode == VT_CKPT_ON || (mode == VT_CKPT_AUTO && off == 0 &&
                                              vt_slice_fits(mp_on, d) > 0));
    *fits = on ? vt_slice_fits(mp_on, d) : off;
    return on;
}

static int passes(int clips, int fits) {
    if (clips <= 0)
        return 0;
    int mb = VT_MIN(clips, fits);
    return mb > 0 ? (clips + mb - 1) / mb : 0;
}

double vt_slice_time(const vt_slice_dev *d, int clips) {
    if (!(d->speed > 0))
        return 0;
    if (clips > 0 && d->max_clips <= 0)
        return HUGE_VAL;
    return clips / d->speed + passes(clips, d->max_clips) * d->overhead;
}

int vt_slice_plan(vt_plan *out, const vt_slice_policy *pol, int batch, int n,
                  const vt_slice_dev *devs, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    VT_CHECK(n >= 1 && n <= VT_MAX_DEVICES, "vt_slice_plan: %d towers", n);
    VT_CHECK(batch >= 0, "vt_slice_plan: batch %d", batch);
    out->kind = pol->kind;
    out->n = n;
    out->batch = batch;
    int usable = 0;
    for (int i = 0; i < n; i++) {
        out->fits[i] = devs[i].max_clips;
        usable += devs[i].max_clips > 0;
    }
    if (usable == 0 && batch > 0) {
        vt_set_err(err, errlen, "no tower can hold one clip in its memory budget");
        return -1;
    }

    /* Effective speeds: unknown ones take the mean of the known ones (so they get work
     * and get measured); all unknown -> speed-based policies fall back to memory. */
    double speed[VT_MAX_DEVICES], known_sum = 0;
    int known = 0;
    for (int i = 0; i < n; i++)
        if (devs[i].max_clips > 0 && devs[i].speed > 0) {
            known_sum += devs[i].speed;
            known++;
        }
    for (int i = 0; i < n; i++) {
        speed[i] = devs[i].speed > 0 ? devs[i].speed : 0;
        if (!(speed[i] > 0) && known > 0 && devs[i].max_clips > 0)
            speed[i] = known_sum / known;
    }
    if (known > 0 && known < usable)
        snprintf(out->note, sizeof out->note, "%d tower(s) of unknown speed assumed at the mean",
                 usable - known);

    double w[VT_MAX_DEVICES];
    vt_slice_kind k = pol->kind;
    if ((k == VT_SLICE_SPEED || k == VT_SLICE_AUTO) && known == 0) {
        k = VT_SLICE_MEMORY;
        snprintf(out->note, sizeof out->note, "speeds unknown: memory shares until measured");
    }
    for (int i = 0; i < n; i++) {
        int ok = devs[i].max_clips > 0;
        switch (k) {
        case VT_SLICE_EQUAL: w[i] = ok; break;
        case VT_SLICE_MEMORY: w[i] = ok ? (double)devs[i].max_clips : 0; break;
        case VT_SLICE_SPEED:
        case VT_SLICE_AUTO: w[i] = ok ? speed[i] : 0; break;
        case VT_SLICE_MANUAL:
            if (pol->nweights != n) {
                vt_set_err(err, errlen, "--tower-split manual: %d weight(s) for %d tower(s)",
                           pol->nweights, n);
                return -1;
            }
            w[i] = pol->weight[i];
            if (w[i] > 0 && !ok) {
                vt_set_err(err, errlen, "--tower-split manual: tower %s has weight %g but "
                           "cannot hold one clip", devs[i].name[0] ? devs[i].name : "?", w[i]);
                return -1;
            }
            break;
        }
    }
    if (batch > 0)
        vt_slice_round(out->slice, batch, w, n);

    /* Speed-based: move single clips off the slowest tower while that lowers the
     * predicted step (this is what makes micro-batch overheads and rounding count). */
    if ((k == VT_SLICE_SPEED || k == VT_SLICE_AUTO) && batch > 0) {
        vt_slice_dev d[VT_MAX_DEVICES];
        for (int i = 0; i < n; i++) {
            d[i] = devs[i];
            d[i].speed = speed[i];
        }
        for (int iter = 0; iter < batch * n + 1; iter++) {
            int hi = -1;
            for (int i = 0; i < n; i++)
                if (out->slice[i] > 0 &&
                    (hi < 0 || vt_slice_time(&d[i], out->slice[i]) > vt_slice_time(&d[hi], out->slice[hi])))
                    hi = i;
            int lo = -1;
            double lo_t = 0;
            for (int j = 0; j < n; j++) {
                if (j == hi || devs[j].max_clips <= 0)
                    continue;
                double t = vt_slice_time(&d[j], out->slice[j] + 1);
                if (lo < 0 || t < lo_t) {
                    lo = j;
                    lo_t = t;
                }
            }
            /* relative margin: moving must help by more than float noise */
            if (hi < 0 || lo < 0 || !(lo_t < vt_slice_time(&d[hi], out->slice[hi]) * (1 - 1e-9)))
                break;
            out->slice[hi]--;
            out->slice[lo]++;
        }
    }

    double ssum = 0;
    int all_known = 1;
    for (int i = 0; i < n; i++) {
        int s = out->slice[i];
        out->mb[i] = s > 0 ? VT_MIN(s, devs[i].max_clips) : 0;
        out->nmb[i] = passes(s, devs[i].max_clips);
        out->speed[i] = speed[i];
        vt_slice_dev di = devs[i];
        di.speed = speed[i];
        out->time[i] = vt_slice_time(&di, s);
        if (s > 0 && !(speed[i] > 0))
            all_known = 0;
        if (out->time[i] > out->predicted)
            out->predicted = out->time[i];
        if (devs[i].max_clips > 0)
            ssum += speed[i];
    }
    if (!all_known || known == 0)
        out->predicted = 0;
    out->ideal = known > 0 && ssum > 0 ? batch / ssum : 0;
    return 0;
}

void vt_plan_print(const vt_plan *p, const vt_slice_dev *devs, FILE *f) {
    fprintf(f, "split plan: policy %s, batch %d", vt_slice_kind_name(p->kind), p->batch);
    if (p->predicted > 0)
        fprintf(f, ", predicted step %.4f s (ideal %.4f s, %+.1f%%)", p->predicted, p->ideal,
                p->ideal > 0 ? 100.0 * (p->predicted / p->ideal - 1) : 0.0);
    fputc('\n', f);
    if (p->note[0])
        fprintf(f, "  note: %s\n", p->note);
    fprintf(f, "  %-9s %-12s %9s %14s %6s %14s %11s\n", "tower", "budget", "fits/pass",
            "speed clips/s", "slice", "micro-batches", "predicted");
    for (int i = 0; i < p->n; i++) {
        char b[32], fits[16], sp[32], mb[32], t[32];
        if (p->fits[i] >= VT_SLICE_UNLIMITED)
            snprintf(fits, sizeof fits, "any");
        else
            snprintf(fits, sizeof fits, "%d", p->fits[i]);
        if (p->speed[i] > 0)
            snprintf(sp, sizeof sp, "%.2f%s", p->speed[i], devs[i].speed > 0 ? "" : "?");
        else
            snprintf(sp, sizeof sp, "-");
        if (p->nmb[i] > 0)
            snprintf(mb, sizeof mb, "%d x %d", p->nmb[i], p->mb[i]);
        else
            snprintf(mb, sizeof mb, "-");
        if (p->time[i] > 0)
            snprintf(t, sizeof t, "%.4f s", p->time[i]);
        else
            snprintf(t, sizeof t, "-");
        fprintf(f, "  %-9s %-12s %9s %14s %6d %14s %11s\n", devs[i].name[0] ? devs[i].name : "?",
                devs[i].budget ? vt_fmt_bytes(b, sizeof b, devs[i].budget) : "unlimited", fits, sp,
                p->slice[i], mb, t);
    }
}

void vt_plan_format(const vt_plan *p, const vt_slice_dev *devs, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "%s B=%d:", vt_slice_kind_name(p->kind), p->batch);
    for (int i = 0; i < p->n && o < n; i++) {
        o += (size_t)snprintf(buf + o, n - o, "%s %s %d (%dx%d)", i ? " |" : "",
                              devs[i].name[0] ? devs[i].name : "?", p->slice[i], p->nmb[i], p->mb[i]);
        if (o < n && p->time[i] > 0)
            o += (size_t)snprintf(buf + o, n - o, " %.3fs", p->time[i]);
    }
}

/* ---- auto ---- */

void vt_auto_init(vt_auto *a, int n) {
    memset(a, 0, sizeof *a);
    a->n = n;
    /* 0.5: a step is a fair sample (hundreds of ms of compute); two steps follow a
     * change while one outlier step moves the estimate only half way. */
    a->alpha = 0.5;
    a->min_gain = 0.03;
    a->warmup = 1;
    a->every = 1;
}

int vt_auto_observe(vt_auto *a, vt_plan *plan, vt_slice_dev *devs, const int *clips,
                    const double *compute_s) {
    a->steps++;
    if (a->steps <= a->warmup)
        return 0;
    for (int i = 0; i < a->n; i++) {
        if (clips[i] > 0 && compute_s[i] > 0) {
            double r = clips[i] / compute_s[i];
            a->rate[i] = a->rate[i] > 0 ? (1 - a->alpha) * a->rate[i] + a->alpha * r : r;
        }
        if (a->rate[i] > 0)
            devs[i].speed = a->rate[i];
    }
    if ((a->steps - a->warmup) % VT_MAX(a->every, 1) != 0)
        return 0;
    vt_slice_policy pol = {.kind = VT_SLICE_AUTO};
    vt_plan cand;
    char err[256];
    if (vt_slice_plan(&cand, &pol, plan->batch, a->n, devs, err, sizeof err))
        return 0;
    if (!(cand.predicted > 0))
        return 0;
    /* The current plan's time under the same (new) speeds; unknown speeds take the mean
     * exactly as in the candidate. */
    double cur = 0;
    for (int i = 0; i < a->n; i++) {
        vt_slice_dev d = devs[i];
        d.speed = cand.speed[i];
        double t = vt_slice_time(&d, plan->slice[i]);
        if (t > cur)
            cur = t;
    }
    if (cand.predicted < cur * (1 - a->min_gain)) {
        *plan = cand;
        a->replans++;
        return 1;
    }
    /* Keep the plan, but refresh its predicted times with the new speeds for display. */
    plan->predicted = cur;
    plan->ideal = cand.ideal;
    for (int i = 0; i < a->n; i++) {
        vt_slice_dev d = devs[i];
        d.speed = cand.speed[i];
        plan->speed[i] = cand.speed[i];
        plan->time[i] = vt_slice_time(&d, plan->slice[i]);
    }
    return 0;
}
