/*
 * optim.c: optimizers with torch.optim semantics over a whole parameter arena (one op
 * call per step, so every replica applies the identical update), clipping by the global
 * gradient norm (torch.nn.utils.clip_grad_norm_), and learning-rate schedules.
 *
 * It must never hold per-layer state or allocate after vt_optim_init: the memory plan
 * counts exactly state_per_param floats per parameter.
 */
#include "models/optim.h"

#include <math.h>
#include <string.h>

#include "base/common.h"

struct vt_optim {
    vt_optim_cfg cfg;
    vt_backend *be;
    int64_t n;      /* parameters */
    int64_t step;   /* completed steps (updates taken), as of the last gate read */
    float *state;   /* (state_per_param * n) */
    int ngroups;    /* 0: one group, the whole arena at lr */
    vt_optim_group group[VT_OPTIM_MAX_GROUPS];
    vt_grad_gate *gate;      /* backend memory: this step's norm, clip and skip */
    vt_grad_gate *gate_host; /* its copy back (pinned where the backend has host_alloc) */
    int in_flight;  /* an update was queued whose gate has not been read: `step` does not
                       count it yet */
};

void vt_optim_cfg_default(vt_optim_cfg *cfg, vt_opt_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    switch (kind) {
    case VT_OPT_SGD:
        cfg->momentum = 0.9f;
        break;
    case VT_OPT_RMSPROP:
        cfg->alpha = 0.99f;
        cfg->eps = 1e-8f;
        break;
    case VT_OPT_ADAMW:
        cfg->beta1 = 0.9f;
        cfg->beta2 = 0.999f;
        cfg->eps = 1e-8f;
        cfg->wd = 0.01f; /* torch.optim.AdamW's default weight_decay */
        break;
    }
}

int vt_optim_kind_parse(const char *name) {
    if (!strcmp(name, "sgd"))
        return VT_OPT_SGD;
    if (!strcmp(name, "rmsprop"))
        return VT_OPT_RMSPROP;
    if (!strcmp(name, "adamw"))
        return VT_OPT_ADAMW;
    return -1;
}

const char *vt_optim_kind_name(vt_opt_kind kind) {
    switch (kind) {
    case VT_OPT_SGD: return "sgd";
    case VT_OPT_RMSPROP: return "rmsprop";
    case VT_OPT_ADAMW: return "adamw";
    }
    return "?";
}

int vt_optim_state_per_param(const vt_optim_cfg *cfg) {
    switch (cfg->kind) {
    case VT_OPT_SGD: return cfg->momentum != 0 ? 1 : 0;
    case VT_OPT_RMSPROP: return cfg->momentum > 0 ? 2 : 1;
    case VT_OPT_ADAMW: return 2;
    }
    return 0;
}

vt_optim *vt_optim_init(const vt_optim_cfg *cfg, vt_backend *be, int64_t nparams) {
    vt_optim *o = vt_calloc(1, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->n = nparams;
    int64_t len = vt_optim_state_len(o);
    if (len > 0) {
        o->state = vt_backend_alloc_x(be, (size_t)len * sizeof(float), "optimizer state");
        VT_OP(be, fill, o->state, 0.0f, len);
    }
    /* the gate: in the memory plan's optimizer share (memplan.c) */
    o->gate = vt_backend_alloc_x(be, sizeof(vt_grad_gate), "the optimizer's gradient gate");
    o->gate_host = be->i->host_alloc ? be->i->host_alloc(be, sizeof(vt_grad_gate))
                                     : vt_malloc(sizeof(vt_grad_gate));
    VT_CHECK(o->gate_host, "%s: no host memory for the gradient gate's copy", be->i->name);
    memset(o->gate_host, 0, sizeof *o->gate_host);
    be->i->to_device(be, o->gate, o->gate_host, sizeof *o->gate_host);
    return o;
}

void vt_optim_free(vt_optim **po) {
    if (!po || !*po)
        return;
    vt_optim *o = *po;
    vt_backend_free_ptr(o->be, o->state);
    vt_backend_free_ptr(o->be, o->gate);
    if (o->be->i->host_alloc)
        o->be->i->host_free(o->be, o->gate_host);
    else
        free(o->gate_host);
    free(o);
    *po = NULL;
}

void vt_optim_set_groups(vt_optim *o, const vt_optim_group *g, int n) {
    o->ngroups = 0;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        VT_CHECK(g[i].lo == at && g[i].hi >= g[i].lo && g[i].lr_mult >= 0,
                 "optimizer group %d [%lld, %lld) x%g: groups must tile the arena in order", i,
                 (long long)g[i].lo, (long long)g[i].hi, (double)g[i].lr_mult);
        at = g[i].hi;
        if (g[i].hi == g[i].lo)
            continue;
        if (o->ngroups && o->group[o->ngroups - 1].lr_mult == g[i].lr_mult &&
            o->group[o->ngroups - 1].no_decay == g[i].no_decay) {
            o->group[o->ngroups - 1].hi = g[i].hi;
            continue;
        }
        VT_CHECK(o->ngroups < VT_OPTIM_MAX_GROUPS, "more than %d optimizer groups",
                 VT_OPTIM_MAX_GROUPS);
        o->group[o->ngroups++] = g[i];
    }
    VT_CHECK(n == 0 || at == o->n, "optimizer groups cover %lld of %lld parameters",
             (long long)at, (long long)o->n);
    if (o->ngroups == 1 && o->group[0].lr_mult == 1.0f && !o->group[0].no_decay)
        o->ngroups = 0; /* the plain case: one op call over the arena, as before */
}

/* One update op over [lo, lo + n) of the arena and the matching slice of every state
 * buffer (the state is the kind's buffers of o->n floats one after another). */
static void update_range(vt_optim *o, float *params, const float *grads, int64_t lo, int64_t n,
                         float lr, int no_decay, int64_t step) {
    vt_backend *be = o->be;
    vt_optim_cfg cc = o->cfg;
    const vt_optim_cfg *c = &cc;
    if (no_decay)
        cc.wd = 0;
    const int64_t N = o->n;
    float *s0 = o->state ? o->state + lo : NULL, *s1 = o->state ? o->state + N + lo : NULL;
    switch (c->kind) {
    case VT_OPT_SGD:
        VT_OP(be, sgd_update, params + lo, grads + lo, c->momentum != 0 ? s0 : NULL, n, lr,
              c->momentum, c->dampening, c->wd, c->nesterov, step, o->gate);
        break;
    case VT_OPT_RMSPROP:
        VT_OP(be, rmsprop_update, params + lo, grads + lo, s0, c->momentum > 0 ? s1 : NULL, n,
              lr, c->alpha, c->eps, c->wd, c->momentum, o->gate);
        break;
    case VT_OPT_ADAMW:
        VT_OP(be, adamw_update, params + lo, grads + lo, s0, s1, n, lr, c->beta1, c->beta2,
              c->eps, c->wd, step, o->gate);
        break;
    }
}

/* The gate (optim.h; issue 45 item 3). The norm's sum of squares is sumsq's over the
 * arena, or over the groups that train added in order from 0 (0 + s is s: the host's
 * `ss = 0; ss += s` of before), and the decision is grad_gate's: the very double
 * arithmetic optim.c did on the host, so a step clips and skips with the same bits. */
void vt_optim_gate(vt_optim *o, const float *grads, int skip, double skip_at) {
    vt_backend *be = o->be;
    VT_CHECK(!o->in_flight, "vt_optim_gate: the last update's gate is not read yet "
             "(vt_optim_gate_read)");
    if (o->ngroups == 0) {
        VT_OP(be, grad_sumsq, o->gate, grads, o->n, 0);
    } else {
        /* Groups: frozen ranges take no part (torch never sees a gradient for them). */
        VT_OP(be, grad_sumsq, o->gate, grads, 0, 0);
        for (int i = 0; i < o->ngroups; i++)
            if (o->group[i].lr_mult > 0)
                VT_OP(be, grad_sumsq, o->gate, grads + o->group[i].lo,
                      o->group[i].hi - o->group[i].lo, 1);
    }
    VT_OP(be, grad_gate, o->gate, o->cfg.clip_norm, skip_at, skip);
}

void vt_optim_apply_gated(vt_optim *o, float *params, const float *grads, float lr) {
    VT_CHECK(!o->in_flight, "vt_optim_apply_gated: the last update's gate is not read yet");
    o->in_flight = 1;
    /* The step count the update uses is the count of the steps taken before it, + 1: the
     * gate of every earlier step has been read (in_flight), so the count is exact whatever
     * they decided; the skip of this one is the device's to decide. */
    const int64_t step = o->step + 1;
    if (o->ngroups == 0) {
        update_range(o, params, grads, 0, o->n, lr, 0, step);
        return;
    }
    for (int i = 0; i < o->ngroups; i++) {
        const vt_optim_group *g = &o->group[i];
        if (g->lr_mult == 0)
            continue;
        update_range(o, params, grads, g->lo, g->hi - g->lo, lr * g->lr_mult, g->no_decay, step);
    }
}

const vt_grad_gate *vt_optim_gate_dev(const vt_optim *o) { return o->gate; }

void vt_optim_gate_fetch(vt_optim *o) {
    vt_backend_to_host_async(o->be, o->gate_host, o->gate, sizeof *o->gate_host);
}

double vt_optim_gate_read(vt_optim *o, int *skipped) {
    const vt_grad_gate *g = o->gate_host;
    if (o->in_flight && !g->skip)
        o->step++;
    o->in_flight = 0;
    if (skipped)
        *skipped = g->skip != 0;
    return g->norm;
}

int vt_optim_in_flight(const vt_optim *o) { return o->in_flight; }

float vt_optim_step(vt_optim *o, float *params, float *grads, float lr) {
    vt_optim_gate(o, grads, 0, 0); /* never skipped: the caller sees the norm */
    vt_optim_apply_gated(o, params, grads, lr);
    vt_optim_gate_fetch(o);
    vt_backend_sync(o->be);
    return (float)vt_optim_gate_read(o, NULL);
}

void vt_optim_set_momentum(vt_optim *o, float momentum) {
    switch (o->cfg.kind) {
    case VT_OPT_SGD:
    case VT_OPT_RMSPROP:
        if (o->cfg.momentum != 0) /* else there is no buffer: stays plain */
            o->cfg.momentum = momentum;
        break;
    case VT_OPT_ADAMW:
        o->cfg.beta1 = momentum;
        break;
    }
}

int64_t vt_optim_step_count(const vt_optim *o) {
    VT_CHECK(!o->in_flight, "the optimizer's step count with an update whose gate is not read");
    return o->step;
}
void vt_optim_set_step_count(vt_optim *o, int64_t step) {
    VT_CHECK(!o->in_flight, "the optimizer's step count set with an update in flight");
    o->step = step;
}
float *vt_optim_state(vt_optim *o) { return o->state; }
int64_t vt_optim_state_len(const vt_optim *o) {
    return (int64_t)vt_optim_state_per_param(&o->cfg) * o->n;
}
const vt_optim_cfg *vt_optim_config(const vt_optim *o) { return &o->cfg; }

/* ---- schedules ---- */

/* OneCycleLR (torch 1.13, defaults: pct_start 0.3, div_factor 25, final_div_factor 1e4,
 * cosine annealing, momentum 0.95 -> 0.85 -> 0.95). Phase one ends at step
 * 0.3 * total - 1 (a float, as in torch), phase two at total - 1; within a phase the value
 * goes from its start to its end by (1 + cos(pi * pct)) / 2. Steps past the end keep the
 * last value (torch refuses them). */
static double onecycle_pct(const vt_sched_cfg *s, int64_t step, int *second) {
    double end1 = 0.3 * (double)s->total_steps - 1.0, end2 = (double)s->total_steps - 1.0;
    double t = (double)step;
    *second = t > end1;
    double a = *second ? end1 : 0.0, b = *second ? end2 : end1;
    if (b <= a)
        return 1.0;
    return VT_MIN((t - a) / (b - a), 1.0);
}

static double anneal_cos(double from, double to, double pct) {
    const double pi = 3.14159265358979323846;
    return to + (from - to) / 2.0 * (cos(pi * pct) + 1.0);
}

float vt_sched_momentum(const vt_sched_cfg *s, int64_t step, float fixed) {
    if (s->kind != VT_SCHED_ONECYCLE)
        return fixed;
    int second;
    double pct = onecycle_pct(s, step < 0 ? 0 : step, &second);
    return (float)(second ? anneal_cos(0.85, 0.95, pct) : anneal_cos(0.95, 0.85, pct));
}

double vt_sched_cosine_frac(const vt_sched_cfg *s, int64_t step) {
    int64_t t = step - s->warmup_steps, span = s->total_steps - s->warmup_steps;
    if (t <= 0)
        return 0;
    if (span <= 0 || t >= span)
        return 1;
    if (s->anchor_step > s->warmup_steps) {
        if (step >= s->anchor_step) {
            int64_t rest = s->total_steps - s->anchor_step; /* > 0: step < total_steps */
            return s->anchor_frac +
                   (1.0 - s->anchor_frac) * (double)(step - s->anchor_step) / (double)rest;
        }
        /* before the anchor: the straight line to it (what the run ran, up to rounding,
         * when it had not been re-planned before) */
        return s->anchor_frac * (double)t / (double)(s->anchor_step - s->warmup_steps);
    }
    return (double)t / (double)span;
}

float vt_sched_lr(const vt_sched_cfg *s, int64_t step) {
    if (step < 0)
        step = 0;
    if (s->kind == VT_SCHED_ONECYCLE) {
        double peak = s->base_lr, initial = peak / 25.0, final = initial / 1e4;
        int second;
        double pct = onecycle_pct(s, step, &second);
        return (float)(second ? anneal_cos(peak, final, pct) : anneal_cos(initial, peak, pct));
    }
    /* Linear warm-up: base * (step + 1) / warmup for step < warmup, as torch's LinearLR
     * with start_factor 1/warmup and total_iters warmup - 1 (then the main schedule
     * starts at step 0 of its own, as under SequentialLR). */
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return (float)((double)s->base_lr * (double)(step + 1) / (double)s->warmup_steps);
    int64_t t = step - s->warmup_steps;
    switch (s->kind) {
    case VT_SCHED_CONST:
        return s->base_lr;
    case VT_SCHED_STEP: {
        int64_t k = s->step_size > 0 ? t / s->step_size : 0;
        return (float)((double)s->base_lr * pow((double)s->gamma, (double)k));
    }
    case VT_SCHED_ONECYCLE: /* above */
        break;
    case VT_SCHED_COSINE: {
        double f = vt_sched_cosine_frac(s, step);
        if (f >= 1.0)
            return s->min_lr;
        const double pi = 3.14159265358979323846;
        return (float)(s->min_lr + ((double)s->base_lr - s->min_lr) * (1.0 + cos(pi * f)) / 2.0);
    }
    }
    return s->base_lr;
}

int vt_sched_kind_parse(const char *name) {
    if (!strcmp(name, "const"))
        return VT_SCHED_CONST;
    if (!strcmp(name, "step"))
        return VT_SCHED_STEP;
    if (!strcmp(name, "cosine"))
        return VT_SCHED_COSINE;
    if (!strcmp(name, "onecycle"))
        return VT_SCHED_ONECYCLE;
    return -1;
}
