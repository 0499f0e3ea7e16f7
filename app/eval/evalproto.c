/*
 * evalproto.c: the evaluation protocol's metrics (see evalproto.h for the conventions).
 * Scores are summed per video in double so the order clips arrive in (which depends on
 * the tower split) cannot change a tie; only the final comparison uses them. It must
 * never drop or duplicate what it is fed: the counts it reports are the counts it got.
 */
#include "app/eval/evalproto.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "base/common.h"
#include "base/csv.h"
#include "base/textwidth.h"

struct vt_evalproto {
    int nvideos, classes;
    vt_loss_kind loss;
    double *vsum;       /* (nvideos, classes) summed scores */
    int64_t *vclips;    /* (nvideos) clips fed per video */
    int32_t *vlabel;    /* (nvideos) true class (softmax) */
    float *vtarget;     /* (nvideos, classes) targets (BCE) */
    int64_t clips;
    int64_t clip_top1, clip_top5;  /* softmax hits */
    int64_t clip_lab_ok;           /* BCE label-wise hits */
    int64_t nonfinite;             /* clips with a non-finite score (counted wrong) */
    double loss_sum;
};

vt_evalproto *vt_evalproto_init(int nvideos, int classes, vt_loss_kind loss) {
    VT_CHECK(nvideos >= 0 && classes >= 1, "nvideos=%d classes=%d", nvideos, classes);
    vt_evalproto *e = vt_calloc(1, sizeof *e);
    e->nvideos = nvideos;
    e->classes = classes;
    e->loss = loss;
    e->vsum = vt_calloc((size_t)nvideos * classes, sizeof(double));
    e->vclips = vt_calloc((size_t)nvideos, sizeof(int64_t));
    e->vlabel = vt_calloc((size_t)nvideos, sizeof(int32_t));
    if (loss == VT_LOSS_BCE)
        e->vtarget = vt_calloc((size_t)nvideos * classes, sizeof(float));
    return e;
}

void vt_evalproto_free(vt_evalproto **pe) {
    if (!pe || !*pe)
        return;
    vt_evalproto *e = *pe;
    free(e->vsum);
    free(e->vclips);
    free(e->vlabel);
    free(e->vtarget);
    free(e);
    *pe = NULL;
}

/* Rank of class y: how many other classes score as high or higher. A tie counts against
 * y: a model that gives two classes the same score has not chosen between them, and
 * breaking the tie by index (argmax's first maximum) would credit it with the lower one:
 * a model that scores every class the same, whatever the clip, got every video of class
 * 0 right (100% on a split of that class alone). A row with a non-finite score ranks y
 * last: NaN compares false with everything, so "no class scores higher" would make a
 * diverged model's every answer right (issue 41). INT_MAX: past any top-k. One body for a
 * clip's float row (rank_of) and a video's double sums (rank_of_d). */
#define RANK_OF(name, T)                                                                   \
    static int name(const T *p, int k, int y) {                                            \
        int r = 0;                                                                         \
        for (int j = 0; j < k; j++) {                                                      \
            if (!isfinite(p[j]))                                                           \
                return INT_MAX;                                                            \
            if (j != y && p[j] >= p[y])                                                    \
                r++;                                                                       \
        }                                                                                  \
        return r;                                                                          \
    }
RANK_OF(rank_of, float)
RANK_OF(rank_of_d, double)
#undef RANK_OF

static int row_finite(const float *p, int k) {
    for (int j = 0; j < k; j++)
        if (!isfinite(p[j]))
            return 0;
    return 1;
}

int vt_evalproto_add(vt_evalproto *e, int video, int label, const float *target,
                     const float *prob) {
    if (video < 0 || video >= e->nvideos)
        return -1;
    int k = e->classes;
    int finite = row_finite(prob, k);
    e->nonfinite += !finite;
    if (e->loss == VT_LOSS_SOFTMAX_CE) {
        if (label < 0 || label >= k)
            return -1;
        int r = rank_of(prob, k, label);
        e->clip_top1 += r < 1;
        e->clip_top5 += r < 5;
        e->vlabel[video] = label;
    } else {
        if (!target)
            return -1;
        for (int j = 0; j < k; j++) {
            e->clip_lab_ok += finite && prob[j] != 0.5f && /* 0.5: a tie, a miss */
                              (prob[j] > 0.5f) == (target[j] >= 0.5f);
            e->vtarget[(size_t)video * k + j] = target[j];
        }
    }
    double *s = e->vsum + (size_t)video * k;
    for (int j = 0; j < k; j++)
        s[j] += prob[j];
    e->vclips[video]++;
    e->clips++;
    return 0;
}

void vt_evalproto_add_loss(vt_evalproto *e, double loss) { e->loss_sum += loss; }

int64_t vt_evalproto_video_clips(const vt_evalproto *e, int video) {
    return video >= 0 && video < e->nvideos ? e->vclips[video] : 0;
}

const double *vt_evalproto_video_scores(const vt_evalproto *e, int video) {
    if (video < 0 || video >= e->nvideos || e->vclips[video] == 0)
        return NULL;
    return e->vsum + (size_t)video * e->classes;
}

/* Pack layout: clips, top-1, top-5, label-wise hits, non-finite clips, loss sum, then per video its clip
 * count, whether it has clips (0/1), its label times that, then per video and class the
 * score sums and (BCE) the targets times "has clips". Sums of packs stay exact for every
 * count below 2^53, and a label or target is the summed value over the summed "has". */
int64_t vt_evalproto_pack_len(const vt_evalproto *e) {
    int64_t nk = (int64_t)e->nvideos * e->classes;
    return 6 + 3 * (int64_t)e->nvideos + nk + (e->loss == VT_LOSS_BCE ? nk : 0);
}

void vt_evalproto_pack(const vt_evalproto *e, double *out) {
    const int nv = e->nvideos, k = e->classes;
    double *p = out;
    *p++ = (double)e->clips;
    *p++ = (double)e->clip_top1;
    *p++ = (double)e->clip_top5;
    *p++ = (double)e->clip_lab_ok;
    *p++ = (double)e->nonfinite;
    *p++ = e->loss_sum;
    for (int v = 0; v < nv; v++) {
        int has = e->vclips[v] > 0;
        p[v] = (double)e->vclips[v];
        p[nv + v] = has;
        p[2 * nv + v] = has ? (double)e->vlabel[v] : 0;
    }
    p += 3 * nv;
    memcpy(p, e->vsum, sizeof(double) * (size_t)nv * k);
    p += (size_t)nv * k;
    if (e->loss == VT_LOSS_BCE)
        for (int v = 0; v < nv; v++)
            for (int j = 0; j < k; j++)
                p[(size_t)v * k + j] = e->vclips[v] > 0 ? e->vtarget[(size_t)v * k + j] : 0;
}

void vt_evalproto_unpack(vt_evalproto *e, const double *in) {
    const int nv = e->nvideos, k = e->classes;
    const double *p = in;
    e->clips = (int64_t)p[0];
    e->clip_top1 = (int64_t)p[1];
    e->clip_top5 = (int64_t)p[2];
    e->clip_lab_ok = (int64_t)p[3];
    e->nonfinite = (int64_t)p[4];
    e->loss_sum = p[5];
    p += 6;
    for (int v = 0; v < nv; v++) {
        double has = p[nv + v];
        e->vclips[v] = (int64_t)p[v];
        e->vlabel[v] = has > 0 ? (int32_t)llround(p[2 * nv + v] / has) : 0;
    }
    const double *hasv = p + nv;
    p += 3 * nv;
    memcpy(e->vsum, p, sizeof(double) * (size_t)nv * k);
    p += (size_t)nv * k;
    if (e->loss == VT_LOSS_BCE)
        for (int v = 0; v < nv; v++)
            for (int j = 0; j < k; j++)
                e->vtarget[(size_t)v * k + j] =
                    hasv[v] > 0 ? (float)(p[(size_t)v * k + j] / hasv[v]) : 0.0f;
}

typedef struct score_idx { double s; int v; } score_idx;

static int cmp_score_desc(const void *a, const void *b) {
    const score_idx *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return (x->v > y->v) - (x->v < y->v);
}

void vt_evalproto_result(const vt_evalproto *e, vt_eval_result *r) {
    int k = e->classes;
    memset(r, 0, sizeof *r);
    r->loss = e->loss;
    r->classes = k;
    r->clips = e->clips;
    r->nonfinite = e->nonfinite;
    r->loss_sum = e->loss_sum;
    r->per_class_acc = vt_calloc((size_t)k, sizeof(double));
    r->per_class_videos = vt_calloc((size_t)k, sizeof(int64_t));
    r->confusion = vt_calloc((size_t)k * k, sizeof(int64_t));
    int64_t videos = 0;
    for (int v = 0; v < e->nvideos; v++)
        videos += e->vclips[v] > 0;
    r->videos = videos;

    if (e->loss == VT_LOSS_SOFTMAX_CE) {
        int64_t v1 = 0, v5 = 0;
        int64_t *hits = vt_calloc((size_t)k, sizeof(int64_t));
        for (int v = 0; v < e->nvideos; v++) {
            if (!e->vclips[v])
                continue;
            const double *s = e->vsum + (size_t)v * k;
            int y = e->vlabel[v];
            int rk = rank_of_d(s, k, y);
            int pred = 0;
            for (int j = 1; j < k; j++)
                if (s[j] > s[pred])
                    pred = j;
            if (rk == INT_MAX) /* non-finite scores: wrong, and not confused with class 0 */
                pred = y == 0 ? VT_MIN(1, k - 1) : 0;
            else if (rk >= 1 && pred == y) /* y tied for the top: a miss, confused with the */
                for (int j = 0; j < k; j++)  /* first class it tied with */
                    if (j != y && s[j] == s[y]) {
                        pred = j;
                        break;
                    }
            v1 += rk < 1;
            v5 += rk < 5;
            r->per_class_videos[y]++;
            hits[y] += rk < 1;
            r->confusion[(size_t)y * k + pred]++;
        }
        r->clip_top1 = e->clips ? (double)e->clip_top1 / (double)e->clips : 0;
        r->clip_top5 = e->clips ? (double)e->clip_top5 / (double)e->clips : 0;
        r->video_top1 = videos ? (double)v1 / (double)videos : 0;
        r->video_top5 = videos ? (double)v5 / (double)videos : 0;
        double msum = 0;
        int mn = 0;
        for (int c = 0; c < k; c++) {
            if (r->per_class_videos[c]) {
                r->per_class_acc[c] = (double)hits[c] / (double)r->per_class_videos[c];
                msum += r->per_class_acc[c];
                mn++;
            } else {
                r->per_class_acc[c] = NAN;
            }
        }
        r->mean_class_acc = mn ? msum / mn : 0;
        free(hits);
        return;
    }

    /* Multi-label: label-wise accuracy at 0.5 (clip and video), per-class video
     * accuracy, and average precision per class over videos ranked by mean score. AP is
     * scikit-learn's average_precision_score: sum over the distinct scores, high to low,
     * of the recall gained there times the precision at that threshold, so tied videos
     * are one threshold (ranked among themselves by index, a constant model's positives
     * at low indices scored AP 1); a video whose score is not finite is never retrieved
     * (its positives gain no recall: a NaN model's AP is 0, never an order's accident). */
    r->clip_top1 = e->clips ? (double)e->clip_lab_ok / ((double)e->clips * k) : 0;
    int64_t ok = 0;
    score_idx *si = vt_malloc((size_t)(videos ? videos : 1) * sizeof *si);
    double apsum = 0;
    int apn = 0;
    for (int c = 0; c < k; c++) {
        int64_t n = 0, nall = 0, okc = 0, pos = 0;
        for (int v = 0; v < e->nvideos; v++) {
            if (!e->vclips[v])
                continue;
            double mean = e->vsum[(size_t)v * k + c] / (double)e->vclips[v];
            int t = e->vtarget[(size_t)v * k + c] >= 0.5f;
            okc += isfinite(mean) && mean != 0.5 && (mean > 0.5) == t; /* 0.5: a miss */
            pos += t;
            nall++;
            if (!isfinite(mean))
                continue;
            si[n].s = mean;
            si[n].v = v;
            n++;
        }
        ok += okc;
        r->per_class_videos[c] = pos;
        r->per_class_acc[c] = nall ? (double)okc / (double)nall : NAN;
        if (pos == 0)
            continue;
        qsort(si, (size_t)n, sizeof *si, cmp_score_desc);
        double ap = 0;
        int64_t tp = 0;
        for (int64_t i = 0; i < n;) {
            int64_t j = i, gain = 0;
            for (; j < n && si[j].s == si[i].s; j++) /* one threshold: the tied scores */
                gain += e->vtarget[(size_t)si[j].v * k + c] >= 0.5f;
            tp += gain;
            ap += (double)gain / (double)pos * ((double)tp / (double)j);
            i = j;
        }
        apsum += ap;
        apn++;
    }
    free(si);
    r->video_top1 = videos ? (double)ok / ((double)videos * k) : 0;
    r->map = apn ? apsum / apn : 0;
}

void vt_eval_result_free(vt_eval_result *r) {
    if (!r)
        return;
    vt_freep(&r->per_class_acc);
    vt_freep(&r->per_class_videos);
    vt_freep(&r->confusion);
}

void vt_softmax_rows(float *out, const float *logits, int n, int k) {
    for (int i = 0; i < n; i++) {
        const float *l = logits + (size_t)i * k;
        float *o = out + (size_t)i * k;
        float m = l[0];
        for (int j = 1; j < k; j++)
            m = l[j] > m ? l[j] : m;
        double s = 0;
        for (int j = 0; j < k; j++) {
            o[j] = expf(l[j] - m);
            s += o[j];
        }
        for (int j = 0; j < k; j++)
            o[j] = (float)(o[j] / s);
    }
}

void vt_sigmoid(float *out, const float *logits, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = logits[i];
        out[i] = x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
    }
}

int vt_top_tied(const float *score, int n, int top) {
    for (int j = 0; j < n; j++)
        if (j != top && score[j] == score[top])
            return 1;
    return 0;
}

void vt_topk(int *idx, const float *score, int n, int k) {
    /* Selection by rank: n is a class count (small), so O(n*k) is fine. */
    for (int t = 0; t < k; t++) {
        int best = -1;
        for (int j = 0; j < n; j++) {
            int used = 0;
            for (int u = 0; u < t; u++)
                used |= idx[u] == j;
            if (used)
                continue;
            if (best < 0 || score[j] > score[best])
                best = j;
        }
        idx[t] = best;
    }
}

static const char *cname(const char *const *names, int c, char *buf, size_t n) {
    if (names && names[c])
        return names[c];
    snprintf(buf, n, "%d", c);
    return buf;
}

void vt_eval_confusion_print(const vt_eval_result *r, const char *const *names, FILE *f) {
    int k = r->classes;
    char b[32];
    int w = 5;
    for (int c = 0; c < k; c++) {
        int l = vt_text_cols(cname(names, c, b, sizeof b)); /* columns, not bytes */
        w = l > w ? l : w;
    }
    if (w > 16)
        w = 16;
    fprintf(f, "confusion (rows: true class, columns: predicted class index; videos)\n%*s", w, "");
    for (int c = 0; c < k; c++)
        fprintf(f, " %6d", c);
    fputc('\n', f);
    for (int t = 0; t < k; t++) {
        vt_text_pad(f, cname(names, t, b, sizeof b), w);
        for (int p = 0; p < k; p++)
            fprintf(f, " %6lld", (long long)r->confusion[(size_t)t * k + p]);
        fputc('\n', f);
    }
}

int vt_eval_confusion_csv(const vt_eval_result *r, const char *const *names, const char *path,
                          char *err, size_t errlen) {
    /* Built in memory and written atomically: a reader never sees half a table. */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    VT_CHECK_MEM(f != NULL, "a text built in memory");
    int k = r->classes;
    char b[32];
    fputs("true\\pred", f);
    for (int c = 0; c < k; c++) {
        fputc(',', f);
        vt_csv_field(f, cname(names, c, b, sizeof b));
    }
    fputc('\n', f);
    for (int t = 0; t < k; t++) {
        vt_csv_field(f, cname(names, t, b, sizeof b));
        for (int p = 0; p < k; p++)
            fprintf(f, ",%lld", (long long)r->confusion[(size_t)t * k + p]);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        vt_out_of_memory(0, "a file built in memory");
    int rc = vt_file_write_atomic(path, text, len, err, errlen);
    free(text);
    return rc;
}
