/*
 * report.c: builds RUN/report.html from the run folder's files (see report.h). Plain
 * HTML + inline SVG + a little CSS: it opens from a file:// URL on a machine with no
 * network and needs no JavaScript. It must never read anything outside the run folder
 * or reference any external resource (fonts, scripts, images).
 */
#include "app/eval/report.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "app/dist.h"
#include "app/eval/metrics.h"
#include "app/run/run_files.h"
#include "base/common.h"
#include "base/fileset.h"
#include "base/json_str.h"

/* ---- reading ---- */

/* One of the run folder's JSON files, NULL when absent or unreadable. */
static cJSON *read_json(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return vt_file_read_json(path);
}

static double jnum(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

typedef struct epoch_row {
    double epoch, train_loss, train_acc, val_loss, val_acc, val_clip_acc, cps, wait, secs, lr;
} epoch_row;

/* Epoch rows in order; a repeated epoch (after a resume) keeps its last line. */
static int read_epochs(const char *dir, epoch_row **out) {
    cJSON **lines = NULL;
    int nlines = vt_metrics_epochs(&lines, dir);
    int n = 0;
    epoch_row *rows = vt_malloc(sizeof *rows * (size_t)(nlines ? nlines : 1));
    for (int i = 0; i < nlines; i++) {
        const cJSON *j = lines[i];
        epoch_row r = {
            .epoch = jnum(j, "epoch"), .train_loss = jnum(j, "train_loss"),
            .train_acc = jnum(j, "train_acc"), .val_loss = jnum(j, "val_loss"),
            .val_acc = jnum(j, "val_acc"), .val_clip_acc = jnum(j, "val_clip_acc"),
            .cps = jnum(j, "clips_per_s"), .wait = jnum(j, "data_wait"),
            .secs = jnum(j, "seconds"), .lr = jnum(j, "lr"),
        };
        int at = n;
        for (int k = 0; k < n; k++)
            if (rows[k].epoch == r.epoch)
                at = k;
        n += at == n;
        rows[at] = r;
    }
    vt_metrics_epochs_free(lines, nlines);
    *out = rows;
    return n;
}

/* ---- writing ---- */

static void html_esc(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

typedef struct series {
    const char *name, *cls, *color;
    int n;
    const double *x, *y;
} series;

/* One line chart. Each series is one <polyline class="curve CLS"> whose points are the
 * finite (x, y) pairs, plus a dot per point so a single epoch is still visible. */
static void svg_chart(FILE *f, const char *title, const char *id, const series *s, int ns,
                      int fraction, int legend_low) {
    const double W = 560, H = 300, L = 60, R = 16, T = 34, B = 44;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i]) || !isfinite(s[k].x[i]))
                continue;
            x0 = fmin(x0, s[k].x[i]);
            x1 = fmax(x1, s[k].x[i]);
            y0 = fmin(y0, s[k].y[i]);
            y1 = fmax(y1, s[k].y[i]);
        }
    if (!isfinite(x0)) {
        x0 = 0;
        x1 = 1;
    }
    if (x1 - x0 < 1e-9) {
        x0 -= 1;
        x1 += 1;
    }
    if (fraction) {
        y0 = 0;
        y1 = 1;
    } else {
        if (!isfinite(y0)) {
            y0 = 0;
            y1 = 1;
        }
        y0 = fmin(0, y0);
        y1 = y1 <= y0 ? y0 + 1 : y1 * 1.05;
    }
#define PX(x) (L + ((x) - x0) / (x1 - x0) * (W - L - R))
#define PY(y) (T + (1 - ((y) - y0) / (y1 - y0)) * (H - T - B))
    fprintf(f, "<svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" "
               "height=\"%g\" viewBox=\"0 0 %g %g\" role=\"img\">\n", id, W, H, W, H);
    fprintf(f, "<text x=\"%g\" y=\"20\" class=\"ctitle\">", L);
    html_esc(f, title);
    fprintf(f, "</text>\n");
    for (int t = 0; t <= 5; t++) {
        double yv = y0 + (y1 - y0) * t / 5.0;
        fprintf(f, "<line x1=\"%g\" x2=\"%g\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", L, W - R,
                PY(yv), PY(yv));
        if (fraction)
            fprintf(f, "<text x=\"%g\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%.0f%%</text>\n",
                    L - 6, PY(yv) + 4, 100 * yv);
        else
            fprintf(f, "<text x=\"%g\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">%.3g</text>\n",
                    L - 6, PY(yv) + 4, yv);
    }
    /* x ticks at whole epochs, at most ~10 labels */
    double span = x1 - x0;
    int every = span > 10 ? (int)ceil(span / 10) : 1;
    for (double xv = ceil(x0); xv <= x1 + 1e-9; xv += every)
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" class=\"tick\" text-anchor=\"middle\">%g</text>", PX(xv),
                H - B + 16, xv);
    fprintf(f, "\n<text x=\"%g\" y=\"%g\" class=\"tick\" text-anchor=\"middle\">epoch</text>\n",
            (L + W - R) / 2, H - 8);
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" class=\"frame\"/>\n", L, T,
            W - L - R, H - T - B);
    for (int k = 0; k < ns; k++) {
        int pts = 0;
        for (int i = 0; i < s[k].n; i++)
            pts += isfinite(s[k].y[i]) && isfinite(s[k].x[i]);
        fprintf(f, "<polyline class=\"curve %s\" data-points=\"%d\" fill=\"none\" stroke=\"%s\" "
                   "stroke-width=\"2\" points=\"", s[k].cls, pts, s[k].color);
        int first = 1;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i]) || !isfinite(s[k].x[i]))
                continue;
            fprintf(f, "%s%.1f,%.1f", first ? "" : " ", PX(s[k].x[i]), PY(s[k].y[i]));
            first = 0;
        }
        fprintf(f, "\"/>\n");
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i]) && isfinite(s[k].x[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"><title>%s epoch %g: "
                           "%.4g</title></circle>", PX(s[k].x[i]), PY(s[k].y[i]), s[k].color,
                        s[k].name, s[k].x[i], s[k].y[i]);
        /* legend */
        double lx = W - R - 150;
        double ly = legend_low ? H - B - 10 - 16 * (ns - 1 - k) : T + 14 + 16 * k;
        fprintf(f, "\n<line x1=\"%g\" x2=\"%g\" y1=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"/>"
                   "<text x=\"%g\" y=\"%g\" class=\"tick\">%s</text>\n", lx, lx + 20, ly, ly,
                s[k].color, lx + 26, ly + 4, s[k].name);
    }
    fprintf(f, "</svg>\n");
#undef PX
#undef PY
}

/* White -> deep blue by the row-normalised share. */
static void heat_color(char *buf, size_t n, double v) {
    v = fmin(fmax(v, 0), 1);
    int r = (int)(247 + (8 - 247) * v), g = (int)(251 + (48 - 251) * v), b = (int)(255 + (107 - 255) * v);
    snprintf(buf, n, "#%02x%02x%02x", r, g, b);
}

static void svg_heatmap(FILE *f, const cJSON *head) {
    const cJSON *conf = cJSON_GetObjectItemCaseSensitive(head, "confusion");
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(head, "classes");
    int k = cJSON_GetArraySize(conf);
    if (!cJSON_IsArray(conf) || k == 0)
        return;
    double cell = fmin(40, fmax(4, 400.0 / k));
    int labels = cell >= 10;
    double L = labels ? 110 : 10, T = labels ? 80 : 10;
    double W = L + cell * k + 20, H = T + cell * k + 20;
    fprintf(f, "<svg id=\"confusion\" class=\"heatmap\" xmlns=\"http://www.w3.org/2000/svg\" "
               "width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" role=\"img\">\n", W, H, W, H);
    int t = 0;
    for (const cJSON *row = conf->child; row; row = row->next, t++) {
        double rs = 0;
        for (const cJSON *c = row->child; c; c = c->next)
            rs += cJSON_IsNumber(c) ? c->valuedouble : 0;
        int p = 0;
        for (const cJSON *c = row->child; c; c = c->next, p++) {
            double v = cJSON_IsNumber(c) ? c->valuedouble : 0;
            char col[16];
            heat_color(col, sizeof col, rs > 0 ? v / rs : 0);
            fprintf(f, "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                       "fill=\"%s\"><title>true %d, predicted %d: %g</title></rect>", L + p * cell,
                    T + t * cell, cell, cell, col, t, p, v);
            if (cell >= 18 && v > 0)
                fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"cnum\" text-anchor=\"middle\" "
                           "fill=\"%s\">%g</text>", L + (p + 0.5) * cell, T + (t + 0.5) * cell + 4,
                        rs > 0 && v / rs > 0.5 ? "#fff" : "#222", v);
        }
        fputc('\n', f);
    }
    if (labels) {
        for (int c = 0; c < k; c++) {
            const cJSON *nm = cJSON_GetArrayItem(names, c);
            const char *s = cJSON_IsString(nm) ? nm->valuestring : "";
            fprintf(f, "<text x=\"%g\" y=\"%.1f\" class=\"tick\" text-anchor=\"end\">", L - 6,
                    T + (c + 0.5) * cell + 4);
            html_esc(f, s);
            fprintf(f, "</text><text class=\"tick\" transform=\"translate(%.1f,%g) rotate(-60)\">",
                    L + (c + 0.5) * cell + 4, T - 6);
            html_esc(f, s);
            fprintf(f, "</text>\n");
        }
    }
    fprintf(f, "</svg>\n");
}

static void pct_cell(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, "<td>%.1f%%</td>", 100 * v);
    else
        fprintf(f, "<td>–</td>");
}

static void eval_section(FILE *f, const cJSON *ev, const char *what) {
    const cJSON *heads = cJSON_GetObjectItemCaseSensitive(ev, "heads");
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(ev, "split");
    fprintf(f, "<h2>%s", what);
    if (cJSON_IsString(split)) {
        fprintf(f, " (");
        html_esc(f, split->valuestring);
        fprintf(f, " split)");
    }
    fprintf(f, "</h2>\n<p>%g clips, %g videos", jnum(ev, "clips"), jnum(ev, "videos"));
    double k = jnum(ev, "clips_per_video"), c = jnum(ev, "crops");
    if (isfinite(k))
        fprintf(f, "; %g clips per video x %g crop(s), scores averaged per video", k, isfinite(c) ? c : 1);
    fprintf(f, ".</p>\n");
    for (const cJSON *h = heads ? heads->child : NULL; h; h = h->next) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(h, "name");
        const cJSON *loss = cJSON_GetObjectItemCaseSensitive(h, "loss");
        int bce = cJSON_IsString(loss) && !strcmp(loss->valuestring, "bce");
        fprintf(f, "<h3>head ");
        html_esc(f, cJSON_IsString(nm) ? nm->valuestring : "?");
        fprintf(f, "</h3>\n<table class=\"kv\">");
        if (bce) {
            fprintf(f, "<tr><th>clip label-wise accuracy</th>");
            pct_cell(f, jnum(h, "clip_top1"));
            fprintf(f, "</tr><tr><th>video label-wise accuracy</th>");
            pct_cell(f, jnum(h, "video_top1"));
            fprintf(f, "</tr><tr><th>mean average precision</th>");
            pct_cell(f, jnum(h, "map"));
            fprintf(f, "</tr></table>\n");
            continue;
        }
        static const char *keys[][2] = {{"clip_top1", "clip top-1"}, {"clip_top5", "clip top-5"},
                                        {"video_top1", "video top-1"}, {"video_top5", "video top-5"},
                                        {"mean_class_acc", "mean class accuracy"}};
        /* 5 or fewer classes: every finite row holds its label in its top 5; said beside
         * the 100%, as eval's own lines say it, so that it is not read as a result */
        int few = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(h, "classes")) <= 5;
        for (size_t i = 0; i < VT_ARRAY_LEN(keys); i++) {
            fprintf(f, "<tr><th>%s</th>", keys[i][1]);
            pct_cell(f, jnum(h, keys[i][0]));
            if (few && strstr(keys[i][0], "top5"))
                fprintf(f, "<td>5 or fewer classes: top-5 says nothing</td>");
            fprintf(f, "</tr>");
        }
        fprintf(f, "</table>\n<div class=\"row\"><div><p>Confusion matrix (videos; rows: true "
                   "class, columns: predicted; shade: share of the row)</p>");
        svg_heatmap(f, h);
        fprintf(f, "</div><div><table class=\"grid\"><tr><th>class</th><th>videos</th><th>accuracy</th></tr>\n");
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(h, "classes");
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(h, "per_class_acc");
        const cJSON *cnt = cJSON_GetObjectItemCaseSensitive(h, "per_class_videos");
        int nc = cJSON_GetArraySize(names);
        for (int i = 0; i < nc && i < 200; i++) {
            const cJSON *s = cJSON_GetArrayItem(names, i), *a = cJSON_GetArrayItem(acc, i),
                        *v = cJSON_GetArrayItem(cnt, i);
            fprintf(f, "<tr><td>");
            html_esc(f, cJSON_IsString(s) ? s->valuestring : "?");
            fprintf(f, "</td><td>%g</td>", cJSON_IsNumber(v) ? v->valuedouble : 0);
            pct_cell(f, cJSON_IsNumber(a) ? a->valuedouble : NAN);
            fprintf(f, "</tr>\n");
        }
        fprintf(f, "</table></div></div>\n");
    }
}

static void config_table(FILE *f, const cJSON *cfg) {
    fprintf(f, "<h2>Configuration</h2>\n<table class=\"kv\">\n");
    for (const cJSON *c = cfg->child; c; c = c->next) {
        fprintf(f, "<tr><th>");
        html_esc(f, c->string ? c->string : "");
        fprintf(f, "</th><td>");
        if (cJSON_IsString(c)) {
            html_esc(f, c->valuestring);
        } else {
            char *s = vt_json_print(c, 0);
            if (s && strlen(s) > 300)
                strcpy(s + 290, " …");
            html_esc(f, s ? s : "");
            cJSON_free(s);
        }
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n");
}

static const char *css =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}"
    "h3{font-size:15px}table{border-collapse:collapse;font-size:13px}"
    "th,td{padding:3px 10px;text-align:left;border-bottom:1px solid #eee}"
    "pre{background:#f6f6f6;padding:10px;font-size:12px;overflow-x:auto}"
    ".row{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}"
    ".grid{stroke:#e4e4e4;stroke-width:1}.frame{fill:none;stroke:#999}"
    ".tick{font-size:11px;fill:#555}.ctitle{font-size:14px;font-weight:bold;fill:#222}"
    ".cnum{font-size:11px}table.grid td,table.grid th{stroke:none}";

/* RUN/leaks.json (app/leaks.h): a warning when val or test hold near-copies of training
 * videos, since their scores then count scenes training has seen. */
static void leaks_section(FILE *f, const char *run_dir) {
    cJSON *lk = read_json(run_dir, "leaks.json");
    if (!lk)
        return;
    int any = 0;
    for (int s = 0; s < 2; s++) {
        const char *name = s ? "test" : "val";
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(lk, name);
        double k = jnum(o, "with_copy_in_train"), n = jnum(o, "videos");
        if (!(k > 0))
            continue;
        if (!any)
            fprintf(f, "<h2>Leaks between splits</h2>\n<p style=\"color:#b00\">");
        fprintf(f, "%s%s: %.0f of %.0f videos have a near-copy in train", any ? "; " : "",
                name, k, n);
        any = 1;
    }
    if (any)
        fprintf(f, ". Their scores count scenes training has seen: the pairs are in "
                   "leaks.json (<code>vidtrain scan</code> lists them).</p>\n");
    cJSON_Delete(lk);
}

int vt_report_write_eval(const char *run_dir, const cJSON *eval, char *err, size_t errlen) {
    if (!vt_dist_lead()) /* under mpirun rank 0 owns the run folder */
        return 0;
    char path[4096];
    /* The page is built in memory and written by vt_run_write_file (temp file, fsync,
     * rename), so a reader never sees half of it. */
    char *page = NULL;
    size_t page_len = 0;
    FILE *f = open_memstream(&page, &page_len);
    VT_CHECK(f != NULL, "open_memstream: %s", strerror(errno));
    cJSON *cfg = read_json(run_dir, "config.json");
    /* eval.json with the report and confusion.csv is a set (base/fileset.h): one a killed
     * eval may have left mixed is not shown as this run's evaluation */
    char cut[1536] = "";
    snprintf(path, sizeof path, "%s/eval.json", run_dir);
    cJSON *ev = eval ? cJSON_Duplicate(eval, 1)
                     : vt_fileset_check(path, cut, sizeof cut) == 0 ? read_json(run_dir, "eval.json")
                                                                    : NULL;
    cJSON *val = ev ? NULL : read_json(run_dir, "val.json");
    epoch_row *rows = NULL;
    int n = read_epochs(run_dir, &rows);

    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<title>vidtrain report</title><style>%s</style></head><body>\n", css);
    fprintf(f, "<h1>vidtrain run: ");
    html_esc(f, run_dir);
    fprintf(f, "</h1>\n");
    if (cfg) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(cfg, "model");
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(cfg, "data");
        fprintf(f, "<p>model <b>");
        html_esc(f, cJSON_IsString(m) ? m->valuestring : "?");
        fprintf(f, "</b> on <b>");
        html_esc(f, cJSON_IsString(d) ? d->valuestring : "?");
        fprintf(f, "</b>, %d epoch(s) logged. vidtrain %s.</p>\n", n, VT_VERSION);
    }

    fprintf(f, "<h2>Training curves</h2>\n<div class=\"row\">\n");
    double *x = vt_calloc((size_t)(n ? n : 1), sizeof(double));
    double *a = vt_calloc((size_t)(n ? n : 1) * 6, sizeof(double));
    for (int i = 0; i < n; i++) {
        x[i] = rows[i].epoch;
        a[i] = rows[i].train_loss;
        a[n + i] = rows[i].val_loss;
        a[2 * n + i] = rows[i].train_acc;
        a[3 * n + i] = rows[i].val_acc;
        a[4 * n + i] = rows[i].val_clip_acc;
        a[5 * n + i] = rows[i].cps;
    }
    series loss[2] = {{"train loss", "train", "#1f77b4", n, x, a},
                      {"val loss", "val", "#d62728", n, x, a + n}};
    series acc[3] = {{"train accuracy (clips)", "train", "#1f77b4", n, x, a + 2 * n},
                     {"val accuracy (videos)", "val", "#d62728", n, x, a + 3 * n},
                     {"val accuracy (clips)", "valclip", "#ff9896", n, x, a + 4 * n}};
    svg_chart(f, "Loss", "loss-chart", loss, 2, 0, 0);
    svg_chart(f, "Accuracy", "acc-chart", acc, 3, 1, 1);
    fprintf(f, "</div>\n");

    leaks_section(f, run_dir);
    if (cut[0]) {
        fprintf(f, "<h2>Evaluation</h2>\n<p style=\"color:#b00\">Not shown: ");
        html_esc(f, cut);
        fprintf(f, ". Run <code>vidtrain eval</code> on this run again.</p>\n");
    }
    if (ev)
        eval_section(f, ev, "Evaluation");
    else if (val)
        eval_section(f, val, "Validation (last epoch)");

    snprintf(path, sizeof path, "%s/plan.txt", run_dir);
    char *plan = vt_file_read(path);
    if (plan) {
        fprintf(f, "<h2>Devices and slice plan</h2>\n<pre>");
        html_esc(f, plan);
        fprintf(f, "</pre>\n");
        free(plan);
    }
    if (n) {
        fprintf(f, "<h2>Throughput</h2>\n<div class=\"row\">");
        series thr[1] = {{"clips/s", "throughput", "#2ca02c", n, x, a + 5 * n}};
        svg_chart(f, "Training throughput (clips/s)", "throughput-chart", thr, 1, 0, 1);
        fprintf(f, "<table class=\"grid\"><tr><th>epoch</th><th>clips/s</th><th>data wait</th>"
                   "<th>seconds</th><th>lr</th></tr>\n");
        for (int i = 0; i < n; i++) {
            fprintf(f, "<tr><td>%g</td><td>%.1f</td>", rows[i].epoch, rows[i].cps);
            pct_cell(f, rows[i].wait);
            fprintf(f, "<td>%.1f</td><td>%.3g</td></tr>\n", rows[i].secs, rows[i].lr);
        }
        fprintf(f, "</table></div>\n");
    }
    if (cfg)
        config_table(f, cfg);
    fprintf(f, "</body></html>\n");
    free(x);
    free(a);
    free(rows);
    cJSON_Delete(cfg);
    cJSON_Delete(ev);
    cJSON_Delete(val);
    int bad = ferror(f);
    VT_CHECK_MEM(fclose(f) == 0 && !bad, "the report, built in memory");
    snprintf(path, sizeof path, "%s/report.html", run_dir);
    int rc = vt_run_write_file(path, page, err, errlen);
    free(page);
    return rc;
}

int vt_report_write(const char *run_dir, char *err, size_t errlen) {
    return vt_report_write_eval(run_dir, NULL, err, errlen);
}
