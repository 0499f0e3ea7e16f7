/*
 * balance.c: class imbalance (balance.h) — the class-balanced epoch order, inverse-
 * frequency weights and the class-count lines. Pure functions: no clock, no shared RNG,
 * no allocation in the order (the loader hands the scratch in once).
 */
#include "pipeline/data/balance.h"

#include <math.h>
#include <string.h>

#include "base/common.h"
#include "pipeline/data/dataset/dataset.h"
#include "pipeline/data/sample.h"

int vt_balance_parse(const char *s) {
    static const char *const names[] = {"auto", "none", "sampler", "loss", "logit"};
    for (int i = 0; i < (int)VT_ARRAY_LEN(names); i++)
        if (s && !strcmp(s, names[i]))
            return i;
    return -1;
}

const char *vt_balance_name(vt_balance_mode m) {
    switch (m) {
    case VT_BALANCE_NONE: return "none";
    case VT_BALANCE_SAMPLER: return "sampler";
    case VT_BALANCE_LOSS: return "loss";
    case VT_BALANCE_LOGIT: return "logit";
    default: return "auto";
    }
}

double vt_balance_ratio(const int64_t *count, int k) {
    int64_t lo = 0, hi = 0;
    for (int c = 0; c < k; c++) {
        if (count[c] <= 0)
            continue;
        lo = lo == 0 || count[c] < lo ? count[c] : lo;
        hi = count[c] > hi ? count[c] : hi;
    }
    return lo > 0 ? (double)hi / (double)lo : 1.0;
}

vt_balance_mode vt_balance_auto(const int64_t *count, int k) {
    return vt_balance_ratio(count, k) > VT_BALANCE_RATIO ? VT_BALANCE_DEFAULT : VT_BALANCE_NONE;
}

void vt_balance_weights(float *w, const int64_t *count, int k) {
    int64_t total = 0;
    int present = 0;
    for (int c = 0; c < k; c++) {
        total += count[c] > 0 ? count[c] : 0;
        present += count[c] > 0;
    }
    for (int c = 0; c < k; c++)
        w[c] = count[c] > 0 ? (float)((double)total / ((double)present * (double)count[c])) : 1.0f;
}

void vt_balance_log_priors(float *adj, const int64_t *count, int k) {
    int64_t total = 0;
    for (int c = 0; c < k; c++)
        total += count[c] > 0 ? count[c] : 0;
    for (int c = 0; c < k; c++)
        adj[c] = (float)log((count[c] > 0 ? (double)count[c] : 0.5) / (double)VT_MAX(total, 1));
}

int64_t vt_balance_scratch(int64_t n, int k) { return 2 * n + 2 * (int64_t)k + 2; }

/* Fisher-Yates of a[0..m) from r. */
static void shuffle(int32_t *a, int64_t m, vt_rng *r) {
    for (int64_t i = m - 1; i > 0; i--) {
        int64_t j = vt_rng_below(r, (uint32_t)(i + 1)); /* n < 2^31: int32 indices */
        int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void vt_balance_order(int32_t *perm, const int32_t *cls, int64_t n, int k, uint64_t seed,
                      int64_t epoch, int32_t *scratch) {
    if (n <= 0)
        return;
    /* scratch: members (n) grouped by class | one class's pass (n) | first (k+1) | slots (k+1) */
    int32_t *members = scratch, *pass = scratch + n, *first = scratch + 2 * n;
    int32_t *slots = first + k + 1;
    memset(first, 0, sizeof *first * (size_t)(k + 1));
    for (int64_t i = 0; i < n; i++)
        first[cls[i] + 1]++;
    int present = 0;
    for (int c = 0; c < k; c++) {
        present += first[c + 1] > 0;
        first[c + 1] += first[c];
    }
    memset(slots, 0, sizeof *slots * (size_t)(k + 1));
    for (int64_t i = 0; i < n; i++) /* slots[] counts as a fill cursor for now */
        members[first[cls[i]] + slots[cls[i]]++] = (int32_t)i;

    /* The epoch's own stream, apart from vt_sample_shuffle's (key index -1). */
    vt_rng r;
    vt_rng_seed(&r, vt_sample_key(seed, epoch, -2));
    /* Slots per class: n / C each, the remainder to classes in a random order. */
    int32_t *order = pass; /* the present classes, shuffled (k <= n: fits) */
    int np = 0;
    for (int c = 0; c < k; c++)
        if (first[c + 1] > first[c])
            order[np++] = c;
    shuffle(order, np, &r);
    memset(slots, 0, sizeof *slots * (size_t)(k + 1));
    for (int i = 0; i < np; i++)
        slots[order[i]] = (int32_t)(n / present + (i < n % present ? 1 : 0));

    /* Each class fills its slots with fresh permutations of its samples. */
    int64_t o = 0;
    for (int c = 0; c < k; c++) {
        int64_t m = first[c + 1] - first[c];
        for (int64_t done = 0; done < slots[c]; done += m) {
            memcpy(pass, members + first[c], sizeof *pass * (size_t)m);
            shuffle(pass, m, &r);
            int64_t take = slots[c] - done < m ? slots[c] - done : m;
            memcpy(perm + o, pass, sizeof *perm * (size_t)take);
            o += take;
        }
    }
    shuffle(perm, n, &r); /* the classes mixed through the epoch */
}

struct vt_balancer {
    int k;
    int64_t cap;
    int32_t *video_class; /* (nvideos) */
    int32_t *cls;         /* (cap) the epoch's samples' classes */
    int32_t *scratch;     /* vt_balance_scratch(cap, k) */
};

vt_balancer *vt_balancer_new(const vt_dataset *ds, int head, int64_t cap) {
    vt_balancer *b = vt_calloc(1, sizeof *b);
    b->k = ds->heads[head].nclasses;
    b->cap = cap;
    b->video_class = vt_malloc(sizeof *b->video_class * (size_t)VT_MAX(ds->nvideos, 1));
    for (int v = 0; v < ds->nvideos; v++) /* unlabelled videos never reach an order */
        b->video_class[v] = ds->videos[v].labeled ? ds->videos[v].label[head] : 0;
    b->cls = vt_malloc(sizeof *b->cls * (size_t)VT_MAX(cap, 1));
    b->scratch = vt_malloc(sizeof *b->scratch * (size_t)vt_balance_scratch(cap, b->k));
    return b;
}

void vt_balancer_free(vt_balancer **pb) {
    vt_balancer *b = *pb;
    if (!b)
        return;
    free(b->video_class);
    free(b->cls);
    free(b->scratch);
    free(b);
    *pb = NULL;
}

void vt_balancer_order(vt_balancer *b, int32_t *perm, const int32_t *video, int64_t stride,
                       int64_t n, uint64_t seed, int64_t epoch) {
    VT_CHECK(n <= b->cap, "balanced order: %lld samples, room for %lld", (long long)n,
             (long long)b->cap);
    for (int64_t i = 0; i < n; i++)
        b->cls[i] = b->video_class[video[i * stride]];
    vt_balance_order(perm, b->cls, n, b->k, seed, epoch, b->scratch);
}

double vt_balance_print_counts(FILE *f, const char *indent, const char *what,
                               const int64_t *count, const char *const *names, int k) {
    double ratio = vt_balance_ratio(count, k);
    int lo = -1, hi = -1;
    for (int c = 0; c < k; c++) {
        if (count[c] > 0 && (lo < 0 || count[c] < count[lo]))
            lo = c;
        if (count[c] > 0 && (hi < 0 || count[c] > count[hi]))
            hi = c;
    }
    fprintf(f, "%s%s:", indent, what);
    int col = (int)strlen(indent) + (int)strlen(what) + 1;
    if (k > 24 && lo >= 0) /* Kinetics' 400 would fill a screen: the extremes */
        fprintf(f, " %d classes, %lld (%s) to %lld (%s)", k, (long long)count[lo],
                names ? names[lo] : "smallest", (long long)count[hi], names ? names[hi] : "largest");
    for (int c = 0; c < k && k <= 24; c++) {
        char item[96];
        int len = names ? snprintf(item, sizeof item, " %s %lld", names[c], (long long)count[c])
                        : snprintf(item, sizeof item, " %d: %lld", c, (long long)count[c]);
        if (col + len > 88) {
            fprintf(f, "\n%s   ", indent);
            col = (int)strlen(indent) + 3;
        }
        fputs(item, f);
        col += len;
    }
    fputc('\n', f);
    if (lo >= 0 && ratio > VT_BALANCE_RATIO) {
        char big[80] = "the largest class", small[80] = "the smallest";
        if (names) {
            snprintf(big, sizeof big, "%s", names[hi]);
            snprintf(small, sizeof small, "%s", names[lo]);
        }
        fprintf(f,
                "%swarning: imbalanced classes: %s has %lld, %s %lld (x%.1f, above x%.1f); "
                "--balance evens them out (docs/balance.md)\n",
                indent, big, (long long)count[hi], small, (long long)count[lo], ratio,
                VT_BALANCE_RATIO);
    }
    return ratio;
}
