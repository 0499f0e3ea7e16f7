/*
 * test_evalproto.c: the evaluation protocol's arithmetic on hand-made probabilities with
 * exact expected values — clip/video top-1 and top-5, ties counted as misses, mean
 * class accuracy over present classes, per-class accuracy, the confusion matrix (and its
 * CSV), and the multi-label accuracy and mean average precision.
 *
 * The probabilities are dyadic fractions (0.5, 0.25, 0.125, ...) so their sums are exact
 * in float and double and ties are real ties; expected fractions are compared exactly
 * where both sides are one IEEE division of the same integers.
 */
#include "app/eval/evalproto.h"

/* testutil.h's vt_test_dir formats a 4 KiB path into a 4.2 KiB command: GCC warns when
 * it is inlined with a known prefix. The paths here are short. */
#pragma GCC diagnostic ignored "-Wformat-truncation"
#include "tests/testutil.h"

static void softmax_case(void) {
    /* 3 classes, 5 videos (video 4 gets no clip: it must not count). */
    vt_evalproto *e = vt_evalproto_init(5, 3, VT_LOSS_SOFTMAX_CE);
    const float v0[2][3] = {{0.5f, 0.25f, 0.25f}, {0.25f, 0.5f, 0.25f}};
    const float v1[3] = {0.125f, 0.75f, 0.125f};
    const float v2[3][3] = {{0.75f, 0.125f, 0.125f}, {0.125f, 0.125f, 0.75f}, {0.5f, 0.25f, 0.25f}};
    const float v3[3] = {0.5f, 0.25f, 0.25f};
    TCHECK(vt_evalproto_add(e, 0, 0, NULL, v0[0]) == 0, "add");
    TCHECK(vt_evalproto_add(e, 0, 0, NULL, v0[1]) == 0, "add");
    TCHECK(vt_evalproto_add(e, 1, 1, NULL, v1) == 0, "add");
    for (int i = 0; i < 3; i++)
        TCHECK(vt_evalproto_add(e, 2, 2, NULL, v2[i]) == 0, "add");
    TCHECK(vt_evalproto_add(e, 3, 1, NULL, v3) == 0, "add");
    /* Out-of-range ids are refused and not counted. */
    TCHECK(vt_evalproto_add(e, 5, 0, NULL, v3) == -1, "video out of range");
    TCHECK(vt_evalproto_add(e, 0, 3, NULL, v3) == -1, "label out of range");
    vt_evalproto_add_loss(e, 1.5);
    vt_evalproto_add_loss(e, 0.25);

    vt_eval_result r;
    vt_evalproto_result(e, &r);
    TCHECK(r.clips == 7, "clips %lld", (long long)r.clips);
    TCHECK(r.videos == 4, "videos %lld", (long long)r.videos);
    /* clip hits: v0c0 yes, v0c1 no, v1 yes, v2c0 no, v2c1 yes, v2c2 no (0.25 tie with a
     * lower index beats class 2), v3 no (class 0 beats it) -> 3 of 7 */
    TCHECK(r.clip_top1 == 3.0 / 7.0, "clip top1 %.17g", r.clip_top1);
    TCHECK(r.clip_top5 == 1.0, "clip top5 with 3 classes %.17g", r.clip_top5);
    /* v0 sums to [0.75, 0.75, 0.5]: class 0 ties with class 1, a miss (argmax's first
     * maximum called it right). v2 sums to [1.375, 0.5, 1.125]: predicted 0, wrong. v1
     * right, v3 wrong. */
    TCHECK(r.video_top1 == 0.25, "video top1 %.17g", r.video_top1);
    TCHECK(r.video_top5 == 1.0, "video top5 %.17g", r.video_top5);
    TCHECK(r.per_class_acc[0] == 0.0 && r.per_class_acc[1] == 0.5 && r.per_class_acc[2] == 0.0,
           "per class %g %g %g", r.per_class_acc[0], r.per_class_acc[1], r.per_class_acc[2]);
    TCHECK(r.per_class_videos[0] == 1 && r.per_class_videos[1] == 2 && r.per_class_videos[2] == 1,
           "per class videos");
    TCHECK(r.mean_class_acc == 0.5 / 3, "mean class acc %.17g", r.mean_class_acc);
    TCHECK(r.loss_sum == 1.75, "loss sum %g", r.loss_sum);
    const int64_t conf[9] = {0, 1, 0, 1, 1, 0, 1, 0, 0}; /* v0 under the class it tied with */
    for (int i = 0; i < 9; i++)
        TCHECK(r.confusion[i] == conf[i], "confusion[%d][%d] = %lld, want %lld", i / 3, i % 3,
               (long long)r.confusion[i], (long long)conf[i]);
    TCHECK(vt_evalproto_video_clips(e, 2) == 3 && vt_evalproto_video_clips(e, 4) == 0,
           "clips per video");
    TCHECK(vt_evalproto_video_scores(e, 4) == NULL, "no scores for an unseen video");

    /* CSV */
    const char *dir = vt_test_dir("evalproto");
    char path[4200], line[256], all[1024] = "";
    snprintf(path, sizeof path, "%s/confusion.csv", dir);
    const char *names[3] = {"left", "right", "a,b"};
    char err[256];
    TCHECK(vt_eval_confusion_csv(&r, names, path, err, sizeof err) == 0, "csv: %s", err);
    FILE *f = fopen(path, "r");
    TCHECK(f != NULL, "open csv");
    if (f) {
        while (fgets(line, sizeof line, f))
            strncat(all, line, sizeof all - strlen(all) - 1);
        fclose(f);
    }
    const char *want = "true\\pred,left,right,\"a,b\"\nleft,0,1,0\nright,1,1,0\n\"a,b\",1,0,0\n";
    TCHECK(!strcmp(all, want), "csv is\n%s\nwant\n%s", all, want);
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
    TCHECK(e == NULL, "free sets NULL");
    vt_evalproto_free(&e);
}

/* A model that scores every class the same on every clip (a zero head, dead features):
 * it has chosen nothing, so it is right on nothing, whatever the split's classes. With
 * argmax's first maximum it scored 100% on a split of class 0 alone (eval's top-1 and
 * mean class accuracy, and training's accuracy). Top-5 with 3 classes is still 1: every
 * class is within the top 5. */
static void constant_case(void) {
    const float p[3] = {0.25f, 0.25f, 0.25f}; /* any equal values: only order matters */
    vt_evalproto *e = vt_evalproto_init(4, 3, VT_LOSS_SOFTMAX_CE);
    for (int v = 0; v < 4; v++)
        for (int c = 0; c < 2; c++)
            TCHECK(vt_evalproto_add(e, v, v < 3 ? 0 : 2, NULL, p) == 0, "add");
    vt_eval_result r;
    vt_evalproto_result(e, &r);
    TCHECK(r.clip_top1 == 0 && r.video_top1 == 0 && r.mean_class_acc == 0,
           "constant model: clip %g video %g mean class %g, want 0", r.clip_top1, r.video_top1,
           r.mean_class_acc);
    TCHECK(r.clip_top5 == 1 && r.video_top5 == 1, "top-5 of 3 classes %g %g", r.clip_top5,
           r.video_top5);
    /* the confusion matrix agrees: no video on the diagonal */
    TCHECK(r.confusion[0] == 0 && r.confusion[1] == 3 && r.confusion[2 * 3 + 0] == 1,
           "confusion %lld %lld %lld", (long long)r.confusion[0], (long long)r.confusion[1],
           (long long)r.confusion[6]);
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
}

static void top5_case(void) {
    /* 7 classes, scores strictly decreasing: the class of rank 4 is within the top 5, the
     * class of rank 5 is not. */
    const float p[7] = {0.25f, 0.1875f, 0.15625f, 0.125f, 0.09375f, 0.0625f, 0.03125f};
    vt_evalproto *e = vt_evalproto_init(2, 7, VT_LOSS_SOFTMAX_CE);
    vt_evalproto_add(e, 0, 4, NULL, p);
    vt_evalproto_add(e, 1, 5, NULL, p);
    vt_eval_result r;
    vt_evalproto_result(e, &r);
    TCHECK(r.clip_top5 == 0.5 && r.video_top5 == 0.5, "top5 %g %g", r.clip_top5, r.video_top5);
    TCHECK(r.clip_top1 == 0 && r.video_top1 == 0, "top1");
    /* Classes 4 and 5 each have one video, both wrong; the others are absent and left out
     * of the mean. */
    TCHECK(r.mean_class_acc == 0.0, "mean class acc %g", r.mean_class_acc);
    TCHECK(isnan(r.per_class_acc[0]) && r.per_class_acc[4] == 0.0, "absent class is NAN");
    TCHECK(r.confusion[4 * 7 + 0] == 1 && r.confusion[5 * 7 + 0] == 1, "confusion");
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
}

static void bce_case(void) {
    vt_evalproto *e = vt_evalproto_init(3, 2, VT_LOSS_BCE);
    const float t0[2] = {1, 0}, t1[2] = {0, 1}, t2[2] = {1, 1};
    const float p0[2] = {0.75f, 0.25f}, p1[2] = {0.625f, 0.5f}, p2[2] = {0.25f, 0.75f};
    vt_evalproto_add(e, 0, 0, t0, p0);
    vt_evalproto_add(e, 1, 0, t1, p1);
    vt_evalproto_add(e, 2, 0, t2, p2);
    TCHECK(vt_evalproto_add(e, 2, 0, NULL, p2) == -1, "BCE needs a target");
    vt_eval_result r;
    vt_evalproto_result(e, &r);
    /* label-wise: v0 2 right, v1 0 (0.5 is a tie, a miss: it counted as positive, so a
     * model of zero logits was right on every present label), v2 1 -> 3 of 6 */
    TCHECK(r.clip_top1 == 3.0 / 6.0 && r.video_top1 == 3.0 / 6.0, "label acc %g %g", r.clip_top1,
           r.video_top1);
    /* AP class 0: ranking v0(+) v1(-) v2(+) -> (1 + 2/3)/2 = 5/6; class 1: v2(+) v1(+)
     * v0(-) -> 1. mAP = 11/12; 1e-12 allows the few roundings of the running sums. */
    TCHECK(fabs(r.map - 11.0 / 12.0) < 1e-12, "mAP %.17g", r.map);
    TCHECK(r.per_class_videos[0] == 2 && r.per_class_videos[1] == 2, "positives per class");
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
}

/* Average precision is scikit-learn's average_precision_score (the sum over distinct
 * scores of recall gained times precision there), worked by hand here: tied scores are
 * one threshold and a non-finite score is never retrieved. Before, ties were ranked by
 * video index, so a constant model whose positive video came first scored mAP 100%, and
 * NaN scores went through qsort with a comparator that said both orders. */
static void bce_ties_case(void) {
    const float pos[1] = {1}, neg[1] = {0};
    const float half[1] = {0.5f}, nan1[1] = {NAN};
    /* a constant score: one threshold holding 1 positive of 4 -> AP 1 x 1/4 */
    vt_evalproto *e = vt_evalproto_init(4, 1, VT_LOSS_BCE);
    for (int v = 0; v < 4; v++)
        vt_evalproto_add(e, v, 0, v == 0 ? pos : neg, half);
    vt_eval_result r;
    vt_evalproto_result(e, &r);
    TCHECK(r.map == 0.25, "constant model: mAP %.17g, want 0.25 (a tie is one threshold)", r.map);
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
    /* every score NaN, the positive first or last: nothing retrieved, AP 0 */
    for (int first = 0; first < 2; first++) {
        e = vt_evalproto_init(4, 1, VT_LOSS_BCE);
        for (int v = 0; v < 4; v++)
            vt_evalproto_add(e, v, 0, v == (first ? 0 : 3) ? pos : neg, nan1);
        vt_evalproto_result(e, &r);
        TCHECK(r.map == 0 && r.video_top1 == 0 && r.nonfinite == 4, "NaN model: mAP %.17g, "
               "label acc %g, want 0", r.map, r.video_top1);
        vt_eval_result_free(&r);
        vt_evalproto_free(&e);
    }
    /* scores 0.75(+) {0.5(-) 0.5(+)} NaN(+) 0.25(-): 3 positives; thresholds 0.75: recall
     * 1/3 at precision 1; 0.5: 1/3 more at 2/3; 0.25: nothing; the NaN positive never ->
     * AP = 1/3 + 2/9 = 5/9. 1e-15: a few roundings of values near 1. */
    e = vt_evalproto_init(5, 1, VT_LOSS_BCE);
    const float s75[1] = {0.75f}, s25[1] = {0.25f};
    vt_evalproto_add(e, 0, 0, pos, s75);
    vt_evalproto_add(e, 1, 0, neg, half);
    vt_evalproto_add(e, 2, 0, pos, half);
    vt_evalproto_add(e, 3, 0, pos, nan1);
    vt_evalproto_add(e, 4, 0, neg, s25);
    vt_evalproto_result(e, &r);
    TCHECK(fabs(r.map - 5.0 / 9.0) < 1e-15, "mixed: mAP %.17g, want 5/9", r.map);
    vt_eval_result_free(&r);
    vt_evalproto_free(&e);
}

static void helpers_case(void) {
    float l[6] = {0, 0, 1, 1, 1, 1}, out[6];
    vt_softmax_rows(out, l, 1, 2);
    TCHECK(out[0] == 0.5f && out[1] == 0.5f, "softmax of equal logits");
    vt_softmax_rows(out, l + 2, 1, 4);
    TCHECK(out[0] == 0.25f && out[3] == 0.25f, "softmax of 4 equal logits");
    /* softmax([0, ln 3]) = [1/4, 3/4]; float exp/log round at ~1e-7 relative */
    float l2[2] = {0, logf(3.0f)};
    vt_softmax_rows(l2, l2, 1, 2);
    TCHECK(fabsf(l2[0] - 0.25f) < 1e-6f && fabsf(l2[1] - 0.75f) < 1e-6f, "softmax in place");
    /* huge logits must not overflow (max is subtracted) */
    float big[2] = {1000.0f, 1000.0f};
    vt_softmax_rows(big, big, 1, 2);
    TCHECK(big[0] == 0.5f, "softmax of huge logits %g", big[0]);
    float s[3] = {0, -1000, 1000};
    vt_sigmoid(s, s, 3);
    TCHECK(s[0] == 0.5f && s[1] == 0.0f && s[2] == 1.0f, "sigmoid %g %g %g", s[0], s[1], s[2]);
    const float sc[5] = {0.1f, 0.4f, 0.4f, 0.05f, 0.05f};
    int idx[5];
    vt_topk(idx, sc, 5, 5);
    TCHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 0 && idx[3] == 3 && idx[4] == 4,
           "topk order %d %d %d %d %d", idx[0], idx[1], idx[2], idx[3], idx[4]);
}

int main(void) {
    softmax_case();
    top5_case();
    bce_case();
    constant_case();
    bce_ties_case();
    helpers_case();
    return vt_test_done("test_evalproto");
}
