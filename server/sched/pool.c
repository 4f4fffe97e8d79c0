/* pool.c — the scheduler (scheduler.c, policy.c) as a plain translation pool. */
#include "server/sched/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/kernels/kernels.h"
#include "server/sched/registry.h"
#include "server/sched/scheduler.h"
#include "server/clock.h"

struct dmt_pool {
    dmt_scheduler *sched;
    dmt_metrics *metrics;
    dmt_registry *registry;
    dmt_model_set *set;        /* one model: the pool's */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

dmt_pool *dmt_pool_open(const char *model_dir, dmt_pool_options o, char *err, size_t errlen) {
    dmt_pool *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* the model is named by its directory as given: no NAME=DIR reading here */
    char named[1100];
    snprintf(named, sizeof named, "model=%s", model_dir);
    const char *dirs[1] = {named};
    dmt_model_source src = {.dirs = dirs, .n_dirs = 1, .precision = o.precision, .no_shortlist = o.no_shortlist};
    p->metrics = dmt_metrics_new();
    p->registry = dmt_registry_new();
    if (!p->metrics || !p->registry) {
        snprintf(err, errlen, "out of memory");
        dmt_pool_close(p);
        return NULL;
    }
    if (o.threads > 0) dmt_kernels_set_threads(o.threads); /* before the load: packing uses them */
    if (dmt_registry_reload(p->registry, &src, err, errlen)) {
        dmt_pool_close(p);
        return NULL;
    }
    p->set = dmt_registry_acquire(p->registry);
    /* no limits but the batch size: the caller's input is all there is */
    dmt_scheduler_options so = {.workers = o.workers, .blas_threads = o.threads,
                                .max_batch_sentences = o.batch_sentences, .max_batch_tokens = 1 << 30,
                                .max_wait_ms = 0, .max_queue = 1 << 30, .continuous = o.continuous,
                                .model_batch_limits = o.model_batch_limits};
    p->sched = dmt_scheduler_new(so, p->metrics);
    if (!p->sched) snprintf(err, errlen, "out of memory");
    if (!p->sched || dmt_scheduler_start(p->sched, err, errlen)) {
        dmt_pool_close(p);
        return NULL;
    }
    return p;
}

const dmt_model *dmt_pool_model(const dmt_pool *p) { return p->set->models[0]->model; }

typedef struct {
    dmt_pool *p;
    int finished;
} waiter;

static void work_done(dmt_work *w) {
    waiter *wt = w->user;
    pthread_mutex_lock(&wt->p->mu);
    wt->finished = 1;
    pthread_cond_broadcast(&wt->p->cv);
    pthread_mutex_unlock(&wt->p->mu);
}

int dmt_pool_translate(dmt_pool *p, int n, const dmt_translate_input *in, const dmt_beam_options *opt,
                       dmt_translate_output *out, void (*progress)(void *arg, int done), void *arg, char *err,
                       size_t errlen) {
    if (n <= 0) return 0;
    dmt_work w = {.n_jobs = n, .key = {p->set->models[0], *opt}, .done = work_done};
    waiter wt = {p, 0};
    w.user = &wt;
    w.jobs = calloc((size_t)n, sizeof *w.jobs);
    if (!w.jobs) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) w.jobs[i] = (dmt_job){.text = in[i].text, .len = in[i].len, .target_id = in[i].target_id};
    int rc = dmt_scheduler_submit(p->sched, &w, err, errlen);
    if (rc != DMT_SUBMIT_OK) {
        if (rc != DMT_SUBMIT_TOO_LARGE) snprintf(err, errlen, "the pool refused the work");
        free(w.jobs);
        return -1;
    }
    pthread_mutex_lock(&p->mu);
    while (!wt.finished) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (progress && !wt.finished) {
            pthread_mutex_unlock(&p->mu);
            progress(arg, n - atomic_load(&w.pending));
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    if (progress) progress(arg, n);
    for (int i = 0; i < n; i++) {
        out[i] = w.jobs[i].out;
        if (w.jobs[i].internal_error && !out[i].error[0]) snprintf(out[i].error, sizeof out[i].error, "failed");
    }
    free(w.jobs);
    return 0;
}

void dmt_pool_close(dmt_pool *p) {
    if (!p) return;
    dmt_scheduler_free(p->sched); /* first: its workers hold states of the model */
    dmt_model_set_release(p->set);
    dmt_registry_free(p->registry);
    dmt_metrics_free(p->metrics);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
