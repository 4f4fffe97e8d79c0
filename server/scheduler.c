/* scheduler.c — the sentence queue, dynamic batching and the model workers.
 *
 * HTTP threads submit a request's sentences (jobs) under one mutex; each worker
 * thread owns a dmt_state and loops:
 *   1. wait until something is queued;
 *   2. unless a full batch is already waiting, wait a little after the oldest job
 *      arrived, so that requests arriving together share one batch: a tenth of a
 *      recent batch's duration, at most max_wait_ms (waiting 5 ms in front of a
 *      2 ms batch would only add latency);
 *   3. take the oldest job plus the longest jobs with the same decoding options
 *      (any target language), up to max_batch_sentences and max_batch_tokens
 *      padded source tokens, and to an even share of the queue when other workers
 *      are idle (they take the rest at once);
 *   4. run dmt_translate without the lock, hand each job its output and call a
 *      request's done() when its last job is finished.
 * Taking the oldest job first bounds every job's wait; longest-first keeps
 * padding low. Jobs whose request passed its deadline are dropped unrun.
 */
#include "server/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/forward.h"

#include "model/kernels/kernels.h"

typedef struct {
    dmt_scheduler *s;
    dmt_state *state;
    pthread_t thread;
    int started;
} worker;

struct dmt_scheduler {
    dmt_scheduler_options o;
    dmt_metrics *metrics;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dmt_job **queue;           /* arrival order; n_queue of cap o.max_queue */
    int n_queue;
    int *scratch;              /* batch selection, cap o.max_queue */
    int busy;
    int stopping;
    double batch_seconds;      /* moving average of a batch's duration */
    atomic_int ready;
    dmt_model *model;
    worker *workers;
    pthread_t loader;
    int loader_started;
    char model_dir[1024];
    double load_seconds;
    void (*on_loaded)(void *, const char *);
    void *on_loaded_arg;
};

double dmt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

dmt_scheduler *dmt_scheduler_new(dmt_scheduler_options o, dmt_metrics *metrics) {
    if (o.workers < 1) o.workers = 1;
    if (o.max_batch_sentences < 1) o.max_batch_sentences = 1;
    if (o.max_batch_tokens < 1) o.max_batch_tokens = 1;
    if (o.max_queue < 1) o.max_queue = 1;
    dmt_scheduler *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->o = o;
    s->metrics = metrics;
    s->queue = calloc((size_t)o.max_queue, sizeof *s->queue);
    s->scratch = calloc((size_t)o.max_queue, sizeof *s->scratch);
    s->workers = calloc((size_t)o.workers, sizeof *s->workers);
    if (!s->queue || !s->scratch || !s->workers) {
        free(s->queue);
        free(s->scratch);
        free(s->workers);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    return s;
}

static int same_options(const dmt_beam_options *a, const dmt_beam_options *b) {
    return a->beam_size == b->beam_size && a->length_penalty == b->length_penalty && a->max_len_a == b->max_len_a &&
           a->max_len_b == b->max_len_b && a->min_len == b->min_len && a->nbest == b->nbest &&
           a->no_repeat_ngram_size == b->no_repeat_ngram_size && a->max_repeats == b->max_repeats;
}

/* Marks one job of w finished; returns 1 when it was the last one. */
static int job_finished(dmt_work *w) { return atomic_fetch_sub(&w->pending, 1) == 1; }

int dmt_scheduler_submit(dmt_scheduler *s, dmt_work *w) {
    if (!atomic_load(&s->ready)) return DMT_SUBMIT_NOT_READY;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return DMT_SUBMIT_NOT_READY;
    }
    if (w->n_jobs > s->o.max_queue - s->n_queue) {
        pthread_mutex_unlock(&s->mu);
        return DMT_SUBMIT_FULL;
    }
    w->enqueued = dmt_now();
    atomic_store(&w->pending, w->n_jobs);
    atomic_store(&w->timed_out, 0);
    atomic_store(&w->cancelled, 0);
    for (int i = 0; i < w->n_jobs; i++) {
        w->jobs[i].work = w;
        memset(&w->jobs[i].out, 0, sizeof w->jobs[i].out);
        s->queue[s->n_queue++] = &w->jobs[i];
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return DMT_SUBMIT_OK;
}

int dmt_scheduler_queued(dmt_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_queue;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int dmt_scheduler_busy(dmt_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->busy;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int dmt_scheduler_ready(dmt_scheduler *s) { return atomic_load(&s->ready); }

const dmt_model *dmt_scheduler_model(dmt_scheduler *s) { return atomic_load(&s->ready) ? s->model : NULL; }

double dmt_scheduler_load_seconds(dmt_scheduler *s) { return s->load_seconds; }

/* Removes the queued jobs whose request is past its deadline (lock held); the
 * requests that thereby finished are appended to done[] (called after unlock). */
static int drop_expired(dmt_scheduler *s, double now, dmt_work **done, int n_done) {
    int k = 0;
    for (int i = 0; i < s->n_queue; i++) {
        dmt_job *j = s->queue[i];
        if (j->work->deadline > 0 && now > j->work->deadline) {
            atomic_store(&j->work->timed_out, 1);
            snprintf(j->out.error, sizeof j->out.error, "timed out in the queue");
            if (job_finished(j->work)) done[n_done++] = j->work;
        } else {
            s->queue[k++] = j;
        }
    }
    s->n_queue = k;
    return n_done;
}

/* Picks a batch (lock held): the oldest job, then compatible jobs longest-first
 * within the caps. Removes them from the queue; returns the count. */
static int take_batch(dmt_scheduler *s, dmt_job **batch) {
    const dmt_beam_options *opt = &s->queue[0]->work->opt;
    int n_cand = 0;
    for (int i = 1; i < s->n_queue; i++)
        if (same_options(&s->queue[i]->work->opt, opt)) s->scratch[n_cand++] = i;
    /* longest first, then arrival order (insertion sort: stable, the queue is short) */
    for (int i = 1; i < n_cand; i++) {
        int v = s->scratch[i], j = i;
        while (j > 0 && s->queue[s->scratch[j - 1]]->cost < s->queue[v]->cost) {
            s->scratch[j] = s->scratch[j - 1];
            j--;
        }
        s->scratch[j] = v;
    }
    /* share what is queued among the idle workers, this one included: with 8 sentences
     * queued and 2 idle workers, one batch of 8 would leave a core idle while 2
     * batches of 4 finish sooner */
    int idle = s->o.workers - s->busy, limit = s->o.max_batch_sentences;
    if (idle > 1 && (s->n_queue + idle - 1) / idle < limit) limit = (s->n_queue + idle - 1) / idle;
    int n = 0, longest = s->queue[0]->cost;
    batch[n++] = s->queue[0];
    s->queue[0] = NULL;
    for (int c = 0; c < n_cand && n < limit; c++) {
        dmt_job *j = s->queue[s->scratch[c]];
        int l = j->cost > longest ? j->cost : longest;
        if ((long)l * (n + 1) > s->o.max_batch_tokens) continue;
        longest = l;
        batch[n++] = j;
        s->queue[s->scratch[c]] = NULL;
    }
    int k = 0;
    for (int i = 0; i < s->n_queue; i++)
        if (s->queue[i]) s->queue[k++] = s->queue[i];
    s->n_queue = k;
    return n;
}

/* Should the worker wait for more jobs before taking a batch? (lock held) */
static int batch_wait(dmt_scheduler *s, double now, struct timespec *until) {
    if (s->stopping || s->o.max_wait_ms <= 0 || s->n_queue >= s->o.max_batch_sentences) return 0;
    long tokens = 0;
    for (int i = 0; i < s->n_queue; i++) tokens += s->queue[i]->cost;
    if (tokens >= s->o.max_batch_tokens) return 0;
    /* a tenth of a recent batch's duration, at most max_wait: a small model is not
     * held up by waiting, a large one waits the full time for company */
    double wait = s->o.max_wait_ms * 1e-3;
    if (s->batch_seconds * 0.1 < wait) wait = s->batch_seconds * 0.1;
    double t = s->queue[0]->work->enqueued + wait;
    if (now >= t) return 0;
    until->tv_sec = (time_t)t;
    until->tv_nsec = (long)((t - (double)until->tv_sec) * 1e9);
    return 1;
}

/* Runs one batch (lock not held); returns its duration in seconds. */
static double run_batch(worker *wk, dmt_job **batch, int n, dmt_translate_input *in, dmt_translate_output *out) {
    dmt_scheduler *s = wk->s;
    /* longest first inside the batch too */
    for (int i = 1; i < n; i++) {
        dmt_job *v = batch[i];
        int j = i;
        while (j > 0 && batch[j - 1]->cost < v->cost) {
            batch[j] = batch[j - 1];
            j--;
        }
        batch[j] = v;
    }
    for (int i = 0; i < n; i++) {
        in[i] = (dmt_translate_input){batch[i]->text, batch[i]->len, batch[i]->target_id};
        memset(&out[i], 0, sizeof out[i]);
    }
    char err[256] = "";
    double t0 = dmt_now();
    int rc = dmt_translate(s->model, wk->state, n, in, &batch[0]->work->opt, out, err, sizeof err);
    double dt = dmt_now() - t0;
    long src = 0, gen = 0;
    for (int i = 0; i < n; i++) {
        if (rc != 0) {
            dmt_translate_output_clear(&out[i]);
            memset(&out[i], 0, sizeof out[i]);
            snprintf(out[i].error, sizeof out[i].error, "%s", err[0] ? err : "translation failed");
        } else if (!out[i].error[0]) {
            src += out[i].src_tokens;
            gen += out[i].out_tokens;
        }
    }
    dmt_metrics_batch(s->metrics, n, src, gen, dt);
    for (int i = 0; i < n; i++) {
        dmt_job *j = batch[i];
        j->out = out[i];
        j->internal_error = rc != 0;
        if (job_finished(j->work)) j->work->done(j->work);
    }
    return dt;
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    dmt_scheduler *s = wk->s;
    int cap = s->o.max_batch_sentences;
    dmt_job **batch = calloc((size_t)cap, sizeof *batch);
    dmt_translate_input *in = calloc((size_t)cap, sizeof *in);
    dmt_translate_output *out = calloc((size_t)cap, sizeof *out);
    dmt_work **done = calloc((size_t)s->o.max_queue, sizeof *done);
    if (!batch || !in || !out || !done) abort(); /* a few KB at startup */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->n_queue == 0 && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (s->n_queue == 0) break; /* stopping and drained */
        double now = dmt_now();
        int n_done = drop_expired(s, now, done, 0);
        struct timespec until;
        int n = 0;
        if (s->n_queue > 0 && !batch_wait(s, now, &until))
            n = take_batch(s, batch);
        if (n > 0) s->busy++;
        else if (s->n_queue > 0 && n_done == 0) {
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n_done; i++) done[i]->done(done[i]);
        double dt = n > 0 ? run_batch(wk, batch, n, in, out) : 0;
        pthread_mutex_lock(&s->mu);
        if (n > 0) {
            s->busy--;
            s->batch_seconds = s->batch_seconds > 0 ? 0.8 * s->batch_seconds + 0.2 * dt : dt;
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(batch);
    free(in);
    free(out);
    free(done);
    return NULL;
}

static void *loader_main(void *arg) {
    dmt_scheduler *s = arg;
    char err[512] = "";
    double t0 = dmt_now();
    if (s->o.blas_threads > 0) dmt_kernels_set_threads(s->o.blas_threads);
    s->model = dmt_model_load(s->model_dir, (dmt_load_options){.precision = (dmt_precision)s->o.precision}, err,
                              sizeof err);
    if (!s->model) {
        s->on_loaded(s->on_loaded_arg, err[0] ? err : "model load failed");
        return NULL;
    }
    if (!s->model->tokenizer) {
        s->on_loaded(s->on_loaded_arg, "the model has no tokenizer (sentencepiece.model)");
        return NULL;
    }
    for (int i = 0; i < s->o.workers; i++) {
        worker *wk = &s->workers[i];
        wk->s = s;
        wk->state = dmt_state_new(s->model);
        if (!wk->state) {
            s->on_loaded(s->on_loaded_arg, "out of memory creating a worker state");
            return NULL;
        }
        if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
            s->on_loaded(s->on_loaded_arg, "cannot start a worker thread");
            return NULL;
        }
        wk->started = 1;
    }
    atomic_store(&s->ready, 1);
    s->load_seconds = dmt_now() - t0;
    s->on_loaded(s->on_loaded_arg, NULL);
    return NULL;
}

int dmt_scheduler_load_async(dmt_scheduler *s, const char *model_dir, void (*on_loaded)(void *, const char *),
                             void *arg) {
    snprintf(s->model_dir, sizeof s->model_dir, "%s", model_dir);
    s->on_loaded = on_loaded;
    s->on_loaded_arg = arg;
    if (pthread_create(&s->loader, NULL, loader_main, s) != 0) return -1;
    s->loader_started = 1;
    return 0;
}

void dmt_scheduler_cancel(dmt_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int n_done = 0;
    dmt_work **done = calloc((size_t)s->n_queue + 1, sizeof *done);
    for (int i = 0; i < s->n_queue; i++) {
        dmt_job *j = s->queue[i];
        atomic_store(&j->work->cancelled, 1);
        snprintf(j->out.error, sizeof j->out.error, "the server is shutting down");
        if (job_finished(j->work) && done) done[n_done++] = j->work;
    }
    s->n_queue = 0;
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < n_done; i++) done[i]->done(done[i]);
    free(done);
}

void dmt_scheduler_stop(dmt_scheduler *s) {
    if (!s) return;
    if (s->loader_started) pthread_join(s->loader, NULL);
    s->loader_started = 0;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->o.workers; i++)
        if (s->workers[i].started) pthread_join(s->workers[i].thread, NULL);
    for (int i = 0; i < s->o.workers; i++) s->workers[i].started = 0;
}

void dmt_scheduler_free(dmt_scheduler *s) {
    if (!s) return;
    dmt_scheduler_stop(s);
    /* nothing can be left queued: submit needs ready workers and refuses once stopping */
    for (int i = 0; i < s->o.workers; i++) dmt_state_free(s->workers[i].state);
    dmt_model_free(s->model);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->queue);
    free(s->scratch);
    free(s->workers);
    free(s);
}
