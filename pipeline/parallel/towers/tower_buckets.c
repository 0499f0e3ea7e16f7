/*
 * tower_buckets.c: gradient buckets (tower.h, "Gradient buckets") — each tower's helper
 * thread, which sums the gradient arena bucket by bucket from its end, each bucket as
 * soon as the tower's last backward pass has made it final, so the reduction overlaps
 * backward. Only the helper calls T->red_grad for its tower; buckets are the same on
 * every tower and summed in the same order as one call, so the sum is bitwise the same.
 * It must never start a bucket before backward has made it final, and never leave a
 * reduction unfinished when the tower goes on to the optimizer step.
 */
#include <pthread.h>

#include "base/common.h"
#include "pipeline/parallel/reduce.h"
#include "pipeline/parallel/towers/tower_impl.h"

void vt_tw_grad_ready_hook(void *ctx, int64_t lo) {
    tower *tw = ctx;
    pthread_mutex_lock(&tw->hmu);
    if (lo < tw->ready_lo) {
        tw->ready_lo = lo;
        pthread_cond_broadcast(&tw->hcv);
    }
    pthread_mutex_unlock(&tw->hmu);
}

/* The helper: per reduction, buckets from the arena's end to its start, each once the
 * tower has made it final. Only this thread calls T->red_grad for this rank. */
void *vt_tw_helper_main(void *arg) {
    tower *tw = arg;
    vt_towers *T = tw->T;
    uint64_t seen = 0;
    pthread_mutex_lock(&tw->hmu);
    for (;;) {
        while (!tw->hquit && tw->hgen == seen)
            pthread_cond_wait(&tw->hcv, &tw->hmu);
        if (tw->hquit)
            break;
        seen = tw->hgen;
        const int64_t np = vt_net_num_params(tw->net);
        float *g = vt_net_grads(tw->net);
        for (int64_t hi = np; hi > 0;) {
            const int64_t lo = VT_MAX(hi - T->bucket_floats, 0);
            while (tw->ready_lo > lo)
                pthread_cond_wait(&tw->hcv, &tw->hmu);
            tw->nbuckets++;
            tw->noverlap += !tw->backward_done;
            pthread_mutex_unlock(&tw->hmu);
            T->red_grad->i->allreduce_sum(T->red_grad, tw->rank, tw->be, g + lo, hi - lo);
            pthread_mutex_lock(&tw->hmu);
            hi = lo;
        }
        tw->hdone = 1;
        pthread_cond_broadcast(&tw->hcv);
    }
    pthread_mutex_unlock(&tw->hmu);
    return NULL;
}

/* Start a reduction: nothing final yet (the last pass's backward reports it). */
void vt_tw_buckets_start(tower *tw) {
    pthread_mutex_lock(&tw->hmu);
    tw->ready_lo = vt_net_num_params(tw->net);
    tw->hdone = 0;
    tw->backward_done = 0;
    tw->nbuckets = tw->noverlap = 0;
    tw->hgen++;
    pthread_cond_broadcast(&tw->hcv);
    pthread_mutex_unlock(&tw->hmu);
}

/* Everything is final now (also for a tower that ran no pass); wait for the helper. */
void vt_tw_buckets_finish(tower *tw) {
    pthread_mutex_lock(&tw->hmu);
    tw->ready_lo = 0;
    tw->backward_done = 1;
    pthread_cond_broadcast(&tw->hcv);
    while (!tw->hdone)
        pthread_cond_wait(&tw->hcv, &tw->hmu);
    pthread_mutex_unlock(&tw->hmu);
}
