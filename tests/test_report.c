/*
 * test_report.c: RUN/report.html from a hand-made run folder — self-contained (no
 * scripts, no external resources), and rendered by headless Chromium (the outside
 * truth for "the page shows the curves"): the DOM Chromium builds holds the loss and
 * accuracy polylines with one point per logged epoch and the confusion heat map's
 * cells, and a screenshot is produced and is not blank. Top-5 of 5 or fewer classes is
 * said to say nothing.
 * Skips (77) when /usr/bin/chromium is absent (scripts/setup.sh installs it).
 */
#include "app/eval/report.h"
#include "app/run/run.h"

#include <sys/stat.h>

/* testutil.h's vt_test_dir formats a 4 KiB path into a 4.2 KiB command: GCC warns when
 * it is inlined with a known prefix. The paths here are short. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/apputil.h"

static int count_str(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* Points in the polyline that follows `cls_attr` (e.g. "class=\"curve train\"") inside
 * the chart whose id is `chart`: counts "x,y" pairs. -1 if absent. */
static int polyline_points(const char *dom, const char *chart, const char *cls_attr) {
    char idq[128];
    snprintf(idq, sizeof idq, "id=\"%s\"", chart);
    const char *c = strstr(dom, idq);
    if (!c)
        return -1;
    const char *end = strstr(c, "</svg>");
    const char *p = strstr(c, cls_attr);
    if (!p || (end && p > end))
        return -1;
    p = strstr(p, " points=\""); /* the space: not data-points= */
    if (!p)
        return -1;
    p += 9;
    int n = 0;
    for (; *p && *p != '"'; p++)
        n += *p == ',';
    return n;
}

int main(void) {
    const char *d = vt_test_dir("report");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", d);

    /* 5 epochs logged; epoch 3 appears twice (a resumed run re-logs it: the last wins);
     * validation only on epochs 1, 3, 5 (--eval-every 2 style), so the val curves have
     * 3 points and the train curves 5. Step lines are not epochs. */
    vt_test_write_file(dir, "metrics.jsonl",
        "{\"kind\":\"step\",\"step\":10,\"loss\":2.0}\n"
        "{\"kind\":\"epoch\",\"epoch\":1,\"train_loss\":1.9,\"train_acc\":0.30,\"val_loss\":1.7,\"val_acc\":0.40,\"val_clip_acc\":0.35,\"clips_per_s\":120,\"data_wait\":0.10,\"seconds\":12,\"lr\":0.1}\n"
        "{\"kind\":\"epoch\",\"epoch\":2,\"train_loss\":1.2,\"train_acc\":0.55,\"clips_per_s\":130,\"data_wait\":0.08,\"seconds\":11,\"lr\":0.1}\n"
        "{\"kind\":\"epoch\",\"epoch\":3,\"train_loss\":9.9,\"train_acc\":0.01,\"clips_per_s\":1,\"data_wait\":0.5,\"seconds\":99,\"lr\":0.1}\n"
        "{\"kind\":\"epoch\",\"epoch\":3,\"train_loss\":0.8,\"train_acc\":0.70,\"val_loss\":0.9,\"val_acc\":0.75,\"val_clip_acc\":0.70,\"clips_per_s\":128,\"data_wait\":0.09,\"seconds\":11,\"lr\":0.05}\n"
        "{\"kind\":\"epoch\",\"epoch\":4,\"train_loss\":0.5,\"train_acc\":0.85,\"clips_per_s\":131,\"data_wait\":0.07,\"seconds\":11,\"lr\":0.02}\n"
        "not json at all\n"
        "{\"kind\":\"epoch\",\"epoch\":5,\"train_loss\":0.3,\"train_acc\":0.92,\"val_loss\":0.4,\"val_acc\":0.95,\"val_clip_acc\":0.90,\"clips_per_s\":129,\"data_wait\":0.07,\"seconds\":11,\"lr\":0.01}\n");
    vt_test_write_file(dir, "config.json", "{\"model\":\"tiny\",\"data\":\"demo <set>\",\"epochs\":5,\"clip\":[8,64,64]}");
    vt_test_write_file(dir, "plan.txt", "devices: cpu:0 (budget 4.00 GiB), cpu:1\nslices: 24 + 8 = 32 clips\n");
    vt_test_write_file(dir, "eval.json",
        "{\"split\":\"test\",\"clips\":60,\"videos\":6,\"clips_per_video\":10,\"crops\":1,\"heads\":[{"
        "\"name\":\"label\",\"loss\":\"softmax\",\"classes\":[\"left\",\"right\",\"up\"],"
        "\"clip_top1\":0.8,\"clip_top5\":1,\"video_top1\":0.8333,\"video_top5\":1,\"mean_class_acc\":0.8333,"
        "\"per_class_acc\":[1,0.5,1],\"per_class_videos\":[2,2,2],"
        "\"confusion\":[[2,0,0],[1,1,0],[0,0,2]]}]}");

    char err[256] = "";
    TCHECK(vt_report_write(dir, err, sizeof err) == 0, "report: %s", err);
    char path[4200];
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = vt_test_slurp(path, NULL);
    TCHECK(html != NULL, "report.html written");
    if (!html)
        return vt_test_done("test_report");

    /* Self-contained: no scripts, no fetched resources. (The SVG xmlns is a name, not a
     * fetch, so "http" alone is not checked.) */
    TCHECK(!strstr(html, "<script"), "no script");
    TCHECK(!strstr(html, " src=") && !strstr(html, "href=") && !strstr(html, "url("),
           "no external resource");
    TCHECK(strstr(html, "demo &lt;set&gt;") != NULL, "strings are HTML-escaped");
    TCHECK(polyline_points(html, "loss-chart", "class=\"curve train\"") == 5, "train loss points");
    TCHECK(polyline_points(html, "loss-chart", "class=\"curve val\"") == 3, "val loss points");
    TCHECK(count_str(html, "class=\"cell\"") == 9, "9 heat-map cells");
    TCHECK(strstr(html, "9.9") == NULL, "the re-logged epoch 3 replaced the first one");
    /* 3 classes: the 100% top-5 rows say they say nothing (eval's lines do; the page did
     * not) */
    TCHECK(count_str(html, "5 or fewer classes: top-5 says nothing") == 2,
           "top-5 of 3 classes: the page does not say it says nothing");

    /* ---- Chromium ---- */
    const char *chromium = "/usr/bin/chromium";
    if (access(chromium, X_OK) != 0) {
        printf("test_report: SKIP rendering: %s is absent (apt-get install chromium; "
               "scripts/setup.sh installs it)\n", chromium);
        free(html);
        int rc = vt_test_done("test_report");
        return rc ? rc : VT_TEST_SKIP;
    }
    const char *flags = "--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                        "--disable-background-networking --disable-component-update --disable-sync "
                        "--disable-dev-shm-usage --hide-scrollbars";
    char cmd[16384];
    /* A fresh profile per run: Chromium must not reuse state across tests. */
    snprintf(cmd, sizeof cmd,
             "timeout 120 %s %s --user-data-dir='%s/profile1' --dump-dom 'file://%s' > '%s/dom.html' "
             "2> '%s/chromium1.log'", chromium, flags, dir, path, dir, dir);
    int rc = system(cmd);
    TCHECK(rc == 0, "chromium --dump-dom exit %d (see %s/chromium1.log)", rc, dir);
    char dpath[4200];
    snprintf(dpath, sizeof dpath, "%s/dom.html", dir);
    char *dom = vt_test_slurp(dpath, NULL);
    TCHECK(dom && strlen(dom) > 1000, "DOM dumped");
    if (dom) {
        /* What the browser parsed, not what we wrote: the curves are SVG polylines with one
         * point per epoch (train 5, validation 3) and the heat map has k*k cells. */
        TCHECK(polyline_points(dom, "loss-chart", "class=\"curve train\"") == 5, "DOM train loss");
        TCHECK(polyline_points(dom, "loss-chart", "class=\"curve val\"") == 3, "DOM val loss");
        TCHECK(polyline_points(dom, "acc-chart", "class=\"curve train\"") == 5, "DOM train acc");
        TCHECK(polyline_points(dom, "acc-chart", "class=\"curve val\"") == 3, "DOM val acc");
        TCHECK(count_str(dom, "<rect class=\"cell\"") == 9, "DOM heat map cells");
        TCHECK(strstr(dom, "slices: 24 + 8") != NULL, "DOM shows the plan");
    }
    free(dom);

    snprintf(cmd, sizeof cmd,
             "timeout 120 %s %s --user-data-dir='%s/profile2' --window-size=1200,1800 "
             "--screenshot='%s/shot.png' 'file://%s' > '%s/chromium2.log' 2>&1", chromium, flags,
             dir, dir, path, dir);
    rc = system(cmd);
    TCHECK(rc == 0, "chromium --screenshot exit %d (see %s/chromium2.log)", rc, dir);
    snprintf(dpath, sizeof dpath, "%s/shot.png", dir);
    FILE *f = fopen(dpath, "rb");
    TCHECK(f != NULL, "screenshot written");
    if (f) {
        unsigned char sig[8] = {0};
        size_t got = fread(sig, 1, 8, f);
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        TCHECK(got == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8), "PNG signature");
        /* A blank 1200x1800 page compresses to a few KB; curves, text and the heat map
         * make it tens of KB. 15 KB separates the two with a wide margin. */
        TCHECK(size > 15000, "screenshot is %ld bytes: blank page?", size);
    }
    free(html);
    return vt_test_done("test_report");
}
