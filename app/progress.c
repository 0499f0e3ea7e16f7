/*
 * progress.c: the progress bar / log lines of progress.h. Redraws are throttled so a
 * fast loop never spends its time printing; nothing here may block on or change the
 * training state.
 */
#include "app/progress.h"

#include <string.h>
#include <unistd.h>

#include "app/dist.h"
#include "base/common.h"

struct vt_progress {
    FILE *f;
    char title[64];
    int64_t total, first, done, clips;
    int tty, log_every;
    double t0, last_draw;
    double loss, acc, wait;
    int64_t last_logged;
};

static void fmt_time(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 360000) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
    else
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void vt_progress_format(char *buf, size_t n, const char *title, int64_t done, int64_t total,
                        double clips_per_s, double loss, double acc, double wait_share,
                        double eta_s, int bar_width) {
    char bar[128] = "", eta[32];
    if (bar_width > 0) {
        if (bar_width > 100)
            bar_width = 100;
        int fill = total > 0 ? (int)((double)done / (double)total * bar_width) : 0;
        fill = VT_MIN(VT_MAX(fill, 0), bar_width);
        bar[0] = '[';
        for (int i = 0; i < bar_width; i++)
            bar[1 + i] = i < fill ? '=' : (i == fill ? '>' : ' ');
        bar[1 + bar_width] = ']';
        bar[2 + bar_width] = ' ';
        bar[3 + bar_width] = 0;
    }
    fmt_time(eta, sizeof eta, eta_s);
    snprintf(buf, n, "%s %s%lld/%lld  %.1f clips/s  loss %.4f  acc %.1f%%  data-wait %.0f%%  ETA %s",
             title, bar, (long long)done, (long long)total, clips_per_s, loss, 100.0 * acc,
             100.0 * wait_share, eta);
}

vt_progress *vt_progress_init(FILE *f, const char *title, int64_t total, int64_t first, int tty,
                              int log_every) {
    if (!vt_dist_lead()) /* under mpirun rank 0 shows the progress (its figures are global) */
        return NULL;
    vt_progress *p = vt_calloc(1, sizeof *p);
    p->f = f;
    snprintf(p->title, sizeof p->title, "%s", title);
    p->total = total;
    p->first = first;
    p->done = first;
    p->last_logged = first;
    p->tty = tty < 0 ? isatty(fileno(f)) : tty;
    p->log_every = log_every;
    p->t0 = vt_now();
    p->last_draw = -1;
    return p;
}

static void draw(vt_progress *p, int final) {
    double el = vt_now() - p->t0;
    double cps = el > 0 ? (double)p->clips / el : 0;
    int64_t ran = p->done - p->first;
    double eta = ran > 0 ? el / (double)ran * (double)(p->total - p->done) : -1;
    if (final)
        eta = el; /* the last line shows the epoch's time instead of what is left */
    char line[512];
    vt_progress_format(line, sizeof line, p->title, p->done, p->total, cps, p->loss, p->acc,
                       p->wait, eta, p->tty ? 24 : 0);
    if (final) {
        /* "ETA" on the last line reads as the elapsed time */
        char *e = strstr(line, "ETA ");
        if (e)
            memcpy(e, " in", 3);
    }
    if (p->tty)
        fprintf(p->f, "\r%s\033[K", line);
    else
        fprintf(p->f, "%s", line);
}

void vt_progress_update(vt_progress *p, int64_t done, int64_t clips, double loss, double acc,
                        double wait_share) {
    if (!p)
        return;
    p->done = done;
    p->clips = clips;
    p->loss = loss;
    p->acc = acc;
    p->wait = wait_share;
    if (p->tty) {
        double now = vt_now();
        if (p->last_draw < 0 || now - p->last_draw >= 0.1) {
            draw(p, 0);
            fflush(p->f);
            p->last_draw = now;
        }
    } else if (p->log_every > 0 && done - p->last_logged >= p->log_every && done < p->total) {
        draw(p, 0);
        fputc('\n', p->f);
        fflush(p->f);
        p->last_logged = done;
    }
}

void vt_progress_finish(vt_progress *p, const char *extra) {
    if (!p)
        return;
    draw(p, 1);
    if (extra && *extra)
        fprintf(p->f, "  %s", extra);
    if (p->tty)
        fprintf(p->f, "\033[K");
    fputc('\n', p->f);
    fflush(p->f);
}

void vt_progress_free(vt_progress **p) { vt_freep(p); }
