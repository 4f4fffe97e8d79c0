/* scheduler.c — the sentence queue, the model workers and cancellation.
 *
 * HTTP threads submit a request (its sentences are jobs, all for one model: its
 * dmt_batch_key): the scheduler measures each sentence with that model (source
 * pieces, cost: policy.h) and refuses what could never run, then hands the request
 * to the batching policy (policy.c), all under one mutex. A batch holds one
 * model's sentences with one set of decoding options; a worker keeps a decoder
 * state per model it runs and frees it once the model is retired (registry.h).
 * Each worker thread owns a dmt_state and loops:
 *   1. wait until something is queued;
 *   2. unless a full batch is already waiting (the batch limit, or a model's own),
 *      wait a little after the oldest request arrived, so that requests arriving
 *      together share one batch: a tenth of a recent batch's duration, at most
 *      max_wait_ms (whole batches only: in continuous batching later arrivals join
 *      the running batch at its next decoder step);
 *   3. let the policy fill a batch (fair share by request, equal decoding options,
 *      the batch caps, and an even share of the queue when other workers are idle);
 *   4. run dmt_translate without the lock. Its control hooks deliver each sentence
 *      as soon as it is final (a request is answered when its last sentence is,
 *      not when the batch ends) and drop, between decoder steps, the sentences of
 *      requests that were cancelled.
 * A watcher thread polls, every WATCH_MS, whether each pending request's client is
 * still there (dmt_work.alive) and drops the requests that passed their deadline
 * before starting; a dropped request leaves the queue at once and the running
 * batches at their next step. Finished parts of a live request are never dropped.
 */
#include "server/sched/scheduler.h"
#include "server/clock.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/forward.h"
#include "server/sched/policy.h"
#include "tokenizer/tokenizer.h"

#include "model/kernels/kernels.h"

#define WATCH_MS 50 /* how often clients and deadlines are checked */

/* Whole batches: a worker's decoder states, one per model it ran lately (a model's
 * batches then reuse its grown buffers when models alternate). */
#define WORKER_STATES 4

typedef struct {
    dmt_scheduler *s;
    dmt_state *state[WORKER_STATES];
    dmt_served *state_model[WORKER_STATES]; /* each state's model, a reference held */
    int next_evict;
    pthread_t thread;
    int started;
} worker;

struct dmt_scheduler {
    dmt_scheduler_options o;
    dmt_metrics *metrics;
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* work queued, or stopping */
    pthread_cond_t watch_cv;   /* wakes the watcher early when stopping */
    dmt_policy *policy;
    dmt_work **live;           /* submitted, done() not yet called */
    int n_live, cap_live;
    int busy;
    int stopping;
    double batch_seconds;      /* moving average of a batch's duration */
    atomic_int ready;
    worker *workers;
    pthread_t watcher;
    int watcher_started;
};

static void abs_time(double t, struct timespec *ts) {
    ts->tv_sec = (time_t)t;
    ts->tv_nsec = (long)((t - (double)ts->tv_sec) * 1e9);
}

static int same_options(const dmt_beam_options *a, const dmt_beam_options *b) {
    return a->beam_size == b->beam_size && a->length_penalty == b->length_penalty && a->max_len_a == b->max_len_a &&
           a->max_len_b == b->max_len_b && a->min_len == b->min_len && a->nbest == b->nbest &&
           a->no_repeat_ngram_size == b->no_repeat_ngram_size && a->max_repeats == b->max_repeats &&
           a->copy_numbers == b->copy_numbers;
}

/* The policy's key test: the same model and the same options share a batch. */
static int same_key(const void *x, const void *y) {
    const dmt_batch_key *a = x, *b = y;
    return a->model == b->model && same_options(&a->opt, &b->opt);
}

/* The most sentences one batch of key's model should hold, where its config.json
 * asks for fewer than the scheduler's limit (model/config.h); 0: no limit of its own. */
static int model_sentences(const dmt_scheduler *s, const dmt_batch_key *key) {
    int own = s->o.model_batch_limits ? key->model->cfg.max_batch_sentences : 0;
    return own > 0 && own < s->o.max_batch_sentences ? own : 0;
}

/* The policy's room for a whole batch of key x: its model's own limit, if any. */
static int batch_room(const void *x, void *ctx) {
    int own = model_sentences(ctx, x);
    return own > 0 ? own : -1;
}

/* A decoder state for model m in *state (held with a reference in *held): kept when
 * it is already m's, else made anew. 0, or -1 out of memory. */
static int state_for(dmt_state **state, dmt_served **held, dmt_served *m) {
    if (*state && *held == m) return 0;
    dmt_state_free(*state);
    dmt_served_unref(*held);
    *state = NULL;
    *held = NULL;
    if (!(*state = dmt_state_new(m->model))) return -1;
    dmt_served_ref(m);
    *held = m;
    return 0;
}

static void state_drop(dmt_state **state, dmt_served **held) {
    dmt_state_free(*state);
    dmt_served_unref(*held);
    *state = NULL;
    *held = NULL;
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
    s->policy = dmt_policy_new((dmt_policy_limits){o.max_batch_sentences, o.max_batch_tokens, o.max_batch_cost,
                                                   o.max_request_cost},
                               same_key);
    s->workers = calloc((size_t)o.workers, sizeof *s->workers);
    if (!s->policy || !s->workers) {
        dmt_policy_free(s->policy);
        free(s->workers);
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->watch_cv, &ca);
    pthread_condattr_destroy(&ca);
    return s;
}

/* ------------------------------------------------------------ submitting -- */

/* Source pieces and policy cost of every job (outside the lock: tokenizing is
 * the HTTP thread's work). A sentence that will fail (invalid, too long) counts
 * as the longest source; dmt_translate reports its error. */
static void measure(const dmt_model *m, dmt_work *w) {
    int maxsrc = dmt_translate_max_source_tokens(m);
    int32_t *ids = malloc((size_t)(maxsrc + 1) * sizeof *ids);
    const dmt_beam_options *o = &w->key.opt;
    for (int i = 0; i < w->n_jobs; i++) {
        dmt_translate_output tmp = {0}; /* as the search will tokenize it (all-caps rule included) */
        int k = ids ? dmt_translate_encode(m, w->jobs[i].text, w->jobs[i].len, ids, &tmp) : -1;
        dmt_translate_output_clear(&tmp);
        if (k > 0) k--; /* without </s> */
        if (k < 0) k = ids ? maxsrc : (int)(w->jobs[i].len / 4) + 1;
        double max_out = floor((double)o->max_len_a * (k + 1) + o->max_len_b);
        if (max_out > m->cfg.max_positions) max_out = m->cfg.max_positions;
        w->tokens[i] = k + 1; /* with </s> */
        w->cost[i] = k == 0 ? 0 : dmt_policy_cost(o->beam_size, k, (int)max_out);
    }
    free(ids);
}

static int add_live(dmt_scheduler *s, dmt_work *w) {
    if (s->n_live == s->cap_live) {
        int cap = s->cap_live ? 2 * s->cap_live : 64;
        dmt_work **p = realloc(s->live, (size_t)cap * sizeof *p);
        if (!p) return -1;
        s->live = p;
        s->cap_live = cap;
    }
    s->live[s->n_live++] = w;
    return 0;
}

static void free_measures(dmt_work *w) {
    free(w->cost);
    free(w->tokens);
    w->cost = NULL;
    w->tokens = NULL;
}

int dmt_scheduler_submit(dmt_scheduler *s, dmt_work *w, char *err, size_t errlen) {
    if (!atomic_load(&s->ready)) return DMT_SUBMIT_NOT_READY;
    double t0 = dmt_now();
    w->cost = calloc((size_t)w->n_jobs, sizeof *w->cost);
    w->tokens = calloc((size_t)w->n_jobs, sizeof *w->tokens);
    if (!w->cost || !w->tokens) {
        free_measures(w);
        snprintf(err, errlen, "out of memory");
        return DMT_SUBMIT_TOO_LARGE;
    }
    measure(w->key.model->model, w);
    if (w->deadline > 0) w->deadline += dmt_now() - t0; /* the deadline bounds waiting, not measuring */
    dmt_policy_limits lim = {s->o.max_batch_sentences, s->o.max_batch_tokens, s->o.max_batch_cost,
                             s->o.max_request_cost};
    if (dmt_policy_check(&lim, w->n_jobs, w->cost, w->tokens, err, errlen)) {
        free_measures(w);
        return DMT_SUBMIT_TOO_LARGE;
    }
    pthread_mutex_lock(&s->mu);
    int rc = DMT_SUBMIT_OK;
    if (s->stopping) rc = DMT_SUBMIT_NOT_READY;
    else if (w->n_jobs > s->o.max_queue - dmt_policy_queued(s->policy)) rc = DMT_SUBMIT_FULL;
    if (rc == DMT_SUBMIT_OK) {
        w->enqueued = dmt_now();
        atomic_store(&w->pending, w->n_jobs);
        atomic_store(&w->timed_out, 0);
        atomic_store(&w->cancelled, 0);
        atomic_store(&w->disconnected, 0);
        for (int i = 0; i < w->n_jobs; i++) {
            w->jobs[i].work = w;
            memset(&w->jobs[i].out, 0, sizeof w->jobs[i].out);
        }
        dmt_policy_request pr = {.owner = w, .client = w->client, .key = &w->key, .n = w->n_jobs, .cost = w->cost,
                                 .tokens = w->tokens, .deadline = w->deadline};
        if (add_live(s, w) || dmt_policy_add(s->policy, &pr, w->enqueued)) {
            if (s->n_live && s->live[s->n_live - 1] == w) s->n_live--;
            rc = DMT_SUBMIT_FULL;
        } else {
            pthread_cond_broadcast(&s->cv);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc != DMT_SUBMIT_OK) free_measures(w);
    return rc;
}

int dmt_scheduler_queued(dmt_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int n = dmt_policy_queued(s->policy);
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

void dmt_scheduler_models_changed(dmt_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- finishing -- */

/* Takes w off the live list (lock held): after this nobody polls it, and done(w)
 * may be called (after unlocking). */
static void retire(dmt_scheduler *s, dmt_work *w) {
    for (int i = 0; i < s->n_live; i++)
        if (s->live[i] == w) {
            s->live[i] = s->live[--s->n_live];
            break;
        }
    free_measures(w);
}

/* Job j has its output; calls done() when it was its request's last (lock not held). */
static void complete_job(dmt_scheduler *s, dmt_job *j) {
    dmt_work *w = j->work;
    if (atomic_fetch_sub(&w->pending, 1) != 1) return;
    pthread_mutex_lock(&s->mu);
    retire(s, w);
    pthread_mutex_unlock(&s->mu);
    w->done(w);
}

/* Marks the last `count` jobs of w (those the policy still held) as dropped with
 * msg (lock held); returns 1 when that finished w (retired: call done after unlock). */
static int drop_jobs(dmt_scheduler *s, dmt_work *w, int count, const char *msg) {
    for (int i = w->n_jobs - count; i < w->n_jobs; i++)
        snprintf(w->jobs[i].out.error, sizeof w->jobs[i].out.error, "%s", msg);
    if (count == 0 || atomic_fetch_sub(&w->pending, count) != count) return 0;
    retire(s, w);
    return 1;
}

/* Drops what is queued for requests past their deadline before starting, whose
 * client went away (asked with poll_clients: the watcher's job, a syscall a request),
 * or (cancel_all) all of them (lock held). Requests thereby finished go to done[];
 * their count. */
static int sweep(dmt_scheduler *s, double now, int cancel_all, int poll_clients, dmt_work ***done, int *cap) {
    int n_done = 0;
    if (*cap < s->n_live) {
        dmt_work **d = realloc(*done, (size_t)s->n_live * sizeof *d);
        if (!d) return 0;
        *done = d;
        *cap = s->n_live;
    }
    /* the live list changes as requests retire: walk a snapshot of its length backwards */
    for (int i = s->n_live - 1; i >= 0; i--) {
        if (i >= s->n_live) continue;
        dmt_work *w = s->live[i];
        if (cancel_all) atomic_store(&w->cancelled, 1);
        else if (poll_clients && !atomic_load(&w->disconnected) && w->alive && !w->alive(w))
            atomic_store(&w->disconnected, 1);
        if (!atomic_load(&w->cancelled) && !atomic_load(&w->disconnected)) continue;
        int left = dmt_policy_remove(s->policy, w);
        if (drop_jobs(s, w, left, cancel_all ? "the server is shutting down" : "the client went away"))
            (*done)[n_done++] = w;
    }
    void *expired[64];
    int k;
    while ((k = dmt_policy_expire(s->policy, now, expired, 64)) > 0)
        for (int i = 0; i < k; i++) {
            dmt_work *w = expired[i];
            atomic_store(&w->timed_out, 1);
            if (drop_jobs(s, w, w->n_jobs, "timed out in the queue")) (*done)[n_done++] = w;
        }
    return n_done;
}

static void call_done(dmt_work **done, int n) {
    for (int i = 0; i < n; i++) done[i]->done(done[i]);
}

/* --------------------------------------------------------------- workers -- */

typedef struct {
    dmt_scheduler *s;
    dmt_job **batch;
    dmt_translate_output *out;
    char *delivered;
    long src, gen;             /* pieces of the sentences delivered early (for metrics) */
} batch_run;

static int batch_cancelled(void *arg, int i) {
    batch_run *b = arg;
    dmt_work *w = b->batch[i]->work;
    return atomic_load(&w->cancelled) || atomic_load(&w->disconnected);
}

/* A sentence is final: hand it to its request now, not when the batch ends. */
static void batch_finished(void *arg, int i) {
    batch_run *b = arg;
    dmt_job *j = b->batch[i];
    if (!b->out[i].error[0]) {
        b->src += b->out[i].src_tokens;
        b->gen += b->out[i].out_tokens;
    }
    j->out = b->out[i];
    memset(&b->out[i], 0, sizeof b->out[i]);
    b->delivered[i] = 1;
    complete_job(b->s, j);
}

/* Should the worker wait for more jobs before taking a batch? (lock held) */
static int batch_wait(dmt_scheduler *s, double now, struct timespec *until) {
    if (s->stopping || s->o.max_wait_ms <= 0) return 0;
    if (dmt_policy_batch_full(s->policy, s->o.max_batch_sentences, batch_room, s)) return 0; /* a model's own limit too */
    if (s->o.max_batch_cost > 0 && dmt_policy_queued_cost(s->policy) >= s->o.max_batch_cost) return 0;
    /* a tenth of a recent batch's duration, at most max_wait: a small model is not
     * held up by waiting, a large one waits the full time for company */
    double wait = s->o.max_wait_ms * 1e-3;
    if (s->batch_seconds * 0.1 < wait) wait = s->batch_seconds * 0.1;
    double t = dmt_policy_oldest(s->policy) + wait;
    if (now >= t) return 0;
    abs_time(t, until);
    return 1;
}

/* Runs one batch (lock not held); returns its duration in seconds. */
static double run_batch(worker *wk, dmt_job **batch, int n, dmt_translate_input *in, dmt_translate_output *out,
                        char *delivered) {
    dmt_scheduler *s = wk->s;
    for (int i = 0; i < n; i++) {
        in[i] = (dmt_translate_input){batch[i]->text, batch[i]->len, batch[i]->target_id};
        memset(&out[i], 0, sizeof out[i]);
        delivered[i] = 0;
    }
    batch_run br = {s, batch, out, delivered, 0, 0};
    dmt_beam_control ctl = {batch_cancelled, batch_finished, &br};
    dmt_beam_options opt = batch[0]->work->key.opt;
    dmt_served *m = batch[0]->work->key.model;
    opt.control = &ctl;
    char err[256] = "";
    double t0 = dmt_now();
    int rc = -1;
    int slot = 0;
    while (slot < WORKER_STATES && wk->state_model[slot] != m) slot++;
    if (slot == WORKER_STATES) { /* a model this worker has no state for: a free slot, else the oldest */
        for (slot = 0; slot < WORKER_STATES && wk->state_model[slot]; slot++) {}
        if (slot == WORKER_STATES) slot = wk->next_evict++ % WORKER_STATES;
    }
    if (state_for(&wk->state[slot], &wk->state_model[slot], m))
        snprintf(err, sizeof err, "out of memory for a worker state");
    else rc = dmt_translate(m->model, wk->state[slot], n, in, &opt, out, err, sizeof err);
    double dt = dmt_now() - t0;
    long src = br.src, gen = br.gen; /* a delivered job may be freed already: not read again */
    for (int i = 0; i < n; i++)
        if (!delivered[i] && rc == 0 && !out[i].error[0]) {
            src += out[i].src_tokens;
            gen += out[i].out_tokens;
        }
    dmt_metrics_batch(s->metrics, n, src, gen, dt);
    for (int i = 0; i < n; i++) {
        if (delivered[i]) continue;
        dmt_job *j = batch[i];
        if (rc != 0) {
            dmt_translate_output_clear(&out[i]);
            memset(&out[i], 0, sizeof out[i]);
            snprintf(out[i].error, sizeof out[i].error, "%s", err[0] ? err : "translation failed");
        }
        j->out = out[i];
        j->internal_error = rc != 0;
        complete_job(s, j);
    }
    return dt;
}

/* ------------------------------------------------- continuous batching -- */

/* A worker's running beam sessions, one per set of decoding options (a session
 * shares its beam size and options across its sentences): which job each sentence
 * is, and its cost. Each session decodes on its own dmt_state. */
#define MAX_SESSIONS 4
/* A session that starts goes ahead of the running ones by up to this much worker
 * time, as a waking task does in a fair CPU scheduler: a short request (a light
 * session's whole run is ~25 ms of steps) finishes before a heavy session's next
 * long step instead of alternating with it. It cannot starve the heavy session:
 * the credit is given once per session start, not per step. */
#define START_CREDIT_S 0.02

typedef struct {
    dmt_beam_session *ses;
    dmt_state *state;
    dmt_served *state_model;   /* the model of state (a reference held) */
    dmt_batch_key key;         /* the session's model and options (the policy key) */
    dmt_job **job;             /* [cap] by tag; NULL: free */
    long *cost;
    int cap, n;
    long cost_sum;
    double vt;                 /* worker time its steps have taken (sessions share the worker fairly) */
} running;

typedef struct {
    worker *wk;
    running run[MAX_SESSIONS];
    int cap, n;                /* sentences in all sessions, at most cap */
    long cost_sum;
    int32_t *ids;              /* [cap][max source + 1] token buffers for an admission */
    size_t ids_cap;            /* int32s in ids */
} sessions;

/* Frees what idle sessions hold for retired models (a reload replaced or removed
 * them): their last reference may be one of these. */
static void drop_retired(sessions *all) {
    for (int i = 0; i < MAX_SESSIONS; i++) {
        running *r = &all->run[i];
        if (r->n == 0 && r->state_model && atomic_load(&r->state_model->retired)) {
            dmt_beam_session_free(r->ses);
            r->ses = NULL;
            state_drop(&r->state, &r->state_model);
        }
    }
}

static void running_remove(sessions *all, running *r, int tag) {
    r->cost_sum -= r->cost[tag];
    all->cost_sum -= r->cost[tag];
    r->job[tag] = NULL;
    r->n--;
    all->n--;
}

/* The session for key o: the one running it, else an empty one (set up for it);
 * NULL when every session is busy with other models or options. */
static running *session_for(sessions *all, const dmt_batch_key *o, char *err, size_t errlen) {
    running *empty = NULL, *ready = NULL;
    double vt = 0; /* the least-served running session's time */
    int any_running = 0;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        running *r = &all->run[i];
        if (r->n > 0 && same_key(&r->key, o)) return r;
        if (r->n > 0 && (!any_running || r->vt < vt)) vt = r->vt, any_running = 1;
        if (r->n == 0 && !empty) empty = r;
        if (r->n == 0 && r->ses && same_key(&r->key, o)) ready = r; /* idle, already set up for o */
    }
    running *r = ready ? ready : empty;
    if (!r) return NULL;
    /* a session that (re)starts is not owed the past, only the start credit */
    r->vt = vt - START_CREDIT_S;
    if (ready) return r;
    dmt_beam_session_free(r->ses);
    r->ses = NULL;
    if (state_for(&r->state, &r->state_model, o->model)) {
        snprintf(err, errlen, "out of memory for a worker state");
        return NULL;
    }
    r->key = *o;
    r->key.opt.control = NULL;
    r->ses = dmt_beam_session_new(r->state, &r->key.opt, r->cap, err, errlen);
    return r->ses ? r : NULL;
}

/* Tokenizes the picked jobs (all with the same options) and admits them to their
 * session (lock not held). A job that fails to tokenize, or is empty, is finished
 * at once. */
static void admit(sessions *all, dmt_job **jobs, int n) {
    dmt_scheduler *s = all->wk->s;
    if (n <= 0) return;
    const dmt_model *m = jobs[0]->work->key.model->model;
    int stride = dmt_translate_max_source_tokens(m) + 1, k = 0;
    const int32_t *src[n];
    int len[n], forced[n], tags[n];
    char err[256] = "";
    if ((size_t)n * stride > all->ids_cap) { /* a model with longer sources than the last */
        int32_t *ids = realloc(all->ids, (size_t)n * stride * sizeof *ids);
        if (!ids) abort(); /* a few hundred KB */
        all->ids = ids;
        all->ids_cap = (size_t)n * stride;
    }
    running *r = session_for(all, &jobs[0]->work->key, err, sizeof err);
    for (int i = 0; i < n; i++) {
        dmt_job *j = jobs[i];
        memset(&j->out, 0, sizeof j->out);
        j->out.target_id = j->target_id; /* numbers go back as the target writes them */
        int32_t *ids = all->ids + (size_t)k * stride;
        int got = r ? dmt_translate_encode(m, j->text, j->len, ids, &j->out) : -1;
        if (!r) snprintf(j->out.error, sizeof j->out.error, "%s", err[0] ? err : "no beam session free");
        if (got <= 0) { /* empty ("") or failed (error set): nothing to search */
            if (got == 0) dmt_translate_decode(m, NULL, &j->out);
            j->internal_error = !r;
            complete_job(s, j);
            continue;
        }
        int tag = 0;
        while (r->job[tag]) tag++; /* a free tag exists: all->n < cap */
        r->job[tag] = j;
        r->cost[tag] = j->work->cost[j - j->work->jobs];
        r->cost_sum += r->cost[tag];
        all->cost_sum += r->cost[tag];
        r->n++;
        all->n++;
        j->out.src_tokens = got - 1;
        src[k] = ids;
        len[k] = got;
        forced[k] = j->target_id;
        tags[k++] = tag;
    }
    if (k > 0 && dmt_beam_session_admit(r->ses, k, src, len, forced, tags, err, sizeof err)) {
        for (int i = 0; i < k; i++) {
            dmt_job *j = r->job[tags[i]];
            running_remove(all, r, tags[i]);
            snprintf(j->out.error, sizeof j->out.error, "%s", err);
            j->internal_error = 1;
            complete_job(s, j);
        }
    }
}

/* One decoder step of a session, then hands out what finished and drops what was
 * cancelled (lock not held). Returns the sentences finished. */
static int step(sessions *all, running *r, long *src, long *gen) {
    dmt_scheduler *s = all->wk->s;
    for (int t = 0; t < r->cap; t++) {
        dmt_job *j = r->job[t];
        if (!j || !(atomic_load(&j->work->cancelled) || atomic_load(&j->work->disconnected))) continue;
        dmt_beam_session_cancel(r->ses, t); /* it leaves at the step below; its tokens are copied */
        running_remove(all, r, t);
        snprintf(j->out.error, sizeof j->out.error, "cancelled");
        complete_job(s, j);
    }
    char err[256];
    int failed = dmt_beam_session_step(r->ses, err, sizeof err) != 0, done = 0, tag;
    dmt_nbest nb;
    while (!failed && dmt_beam_session_take(r->ses, &tag, &nb)) {
        dmt_job *j = r->job[tag];
        running_remove(all, r, tag);
        dmt_translate_decode(r->key.model->model, &nb, &j->out);
        dmt_nbest_clear(&nb);
        if (!j->out.error[0]) {
            *src += j->out.src_tokens;
            *gen += j->out.out_tokens;
        }
        done++;
        complete_job(s, j);
    }
    if (failed) { /* out of memory: fail what runs, start over with a fresh session */
        for (int t = 0; t < r->cap; t++) {
            dmt_job *j = r->job[t];
            if (!j) continue;
            running_remove(all, r, t);
            snprintf(j->out.error, sizeof j->out.error, "%s", err);
            j->internal_error = 1;
            complete_job(s, j);
        }
        dmt_beam_session_free(r->ses);
        r->ses = NULL;
    }
    return done;
}

/* One pick (lock held): the sentences picked so far, grouped by key. */
typedef struct {
    sessions *all;
    dmt_job **jobs;
    int *groups, g, n;
} pick_round;

/* How many more sentences with key x this worker may run now (the policy's room):
 * its model's own limit less what the worker's session with that key runs and what
 * this pick has taken for it; -1: no limit of its own. */
static int session_room(const void *x, void *ctx) {
    const pick_round *pr = ctx;
    const dmt_batch_key *key = x;
    int own = model_sentences(pr->all->wk->s, key), used = 0;
    if (own == 0) return -1;
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (pr->all->run[i].n > 0 && same_key(&pr->all->run[i].key, key)) used += pr->all->run[i].n;
    for (int i = 0, at = 0; i < pr->g; at += pr->groups[i++])
        if (same_key(&pr->jobs[at]->work->key, key)) used += pr->groups[i];
    return used < own ? own - used : 0;
}

/* Adds up to limit - pr->n sentences with key (NULL: the fairest request's) to
 * pr->jobs as one group (lock held); how many. */
static int pick_group(pick_round *pr, const dmt_batch_key *key, int limit, dmt_policy_pick *picks) {
    sessions *all = pr->all;
    int k = dmt_policy_take_within(all->wk->s->policy, key, all->cost_sum, limit - pr->n, session_room, pr, picks);
    for (int q = 0; q < k; q++) {
        pr->jobs[pr->n + q] = &((dmt_work *)picks[q].owner)->jobs[picks[q].index];
        all->cost_sum += ((dmt_work *)picks[q].owner)->cost[picks[q].index]; /* reserved; admit recounts */
    }
    if (k) pr->groups[pr->g++] = k;
    pr->n += k;
    return k;
}

/* Picks what joins the running sessions (lock held). First the fairest waiting
 * request (policy.h), whatever its model and options, while a session is free:
 * a model or set of options that no session here runs is not held behind the
 * running sessions' refills, so no model starves another. Then more sentences for
 * each running session, then, while sessions are free, others. Shares the
 * worker's room (sentences, cost) across its sessions, and keeps each model within
 * its own batch limit (session_room). The picked jobs go to jobs[] grouped by key;
 * group sizes to groups[]. */
static int pick(sessions *all, int limit, dmt_policy_pick *picks, dmt_job **jobs, int *groups) {
    pick_round pr = {.all = all, .jobs = jobs, .groups = groups};
    int free_sessions = MAX_SESSIONS;
    for (int i = 0; i < MAX_SESSIONS; i++) free_sessions -= all->run[i].n > 0;
    if (free_sessions > 0 && pick_group(&pr, NULL, limit, picks)) free_sessions--;
    for (int i = 0; i < MAX_SESSIONS && pr.n < limit; i++)
        if (all->run[i].n > 0) pick_group(&pr, &all->run[i].key, limit, picks);
    for (; free_sessions > 0 && pr.n < limit; free_sessions--)
        if (!pick_group(&pr, NULL, limit, picks)) break;
    int n = pr.n, g = pr.g;
    for (int i = 0; i < n; i++) all->cost_sum -= jobs[i]->work->cost[jobs[i] - jobs[i]->work->jobs];
    return g;
}

/* The continuous worker: between two decoder steps, sentences join the running
 * sessions as room (sentences, cost) allows, fairly across requests (policy.h), and
 * leave the moment they are final or cancelled. Sentences with other decoding
 * options run in a session of their own, stepped in turn (up to MAX_SESSIONS). */
static void continuous_main(worker *wk) {
    dmt_scheduler *s = wk->s;
    int cap = s->o.max_batch_sentences, done_cap = 0;
    sessions all = {.wk = wk, .cap = cap};
    int ok = 1;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        all.run[i].cap = cap;
        ok &= (all.run[i].job = calloc((size_t)cap, sizeof *all.run[i].job)) != NULL;
        ok &= (all.run[i].cost = calloc((size_t)cap, sizeof *all.run[i].cost)) != NULL;
    }
    dmt_policy_pick *picks = calloc((size_t)cap, sizeof *picks);
    dmt_job **jobs = calloc((size_t)cap, sizeof *jobs);
    int groups[2 * MAX_SESSIONS];
    dmt_work **done = NULL;
    if (!ok || !picks || !jobs) abort(); /* startup */
    long src = 0, gen = 0;
    int finished = 0;
    double t_steps = 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (all.n == 0) {
            while (dmt_policy_queued(s->policy) == 0 && !s->stopping) {
                drop_retired(&all); /* woken by a reload too (dmt_scheduler_models_changed) */
                pthread_cond_wait(&s->cv, &s->mu);
            }
            if (dmt_policy_queued(s->policy) == 0) break; /* stopping and drained */
        }
        double now = dmt_now();
        /* no wait for company (batch_wait): what arrives later joins at the next step */
        int n_done = sweep(s, now, 0, 0, &done, &done_cap), g = 0;
        int limit = cap - all.n, idle = s->o.workers - s->busy, q = dmt_policy_queued(s->policy);
        if (all.n == 0) { /* an even share for idle workers, as in whole batches */
            if (idle > 1 && (q + idle - 1) / idle < limit) limit = (q + idle - 1) / idle;
        } else if (idle > 0) {
            limit = 0; /* a busy worker leaves new work to the idle ones: it runs sooner there */
        }
        if (limit > 0 && dmt_policy_queued(s->policy) > 0) g = pick(&all, limit, picks, jobs, groups);
        int was_busy = all.n > 0;
        if (!was_busy && g > 0) s->busy++;
        pthread_mutex_unlock(&s->mu);
        call_done(done, n_done);
        for (int i = 0, at = 0; i < g; at += groups[i++]) admit(&all, jobs + at, groups[i]);
        /* step the session that has had the least worker time: a light session's
         * cheap steps are not each held up behind a heavy session's long one */
        running *next = NULL;
        for (int i = 0; i < MAX_SESSIONS; i++)
            if (all.run[i].n > 0 && (!next || all.run[i].vt < next->vt)) next = &all.run[i];
        if (next) {
            dmt_metrics_step(s->metrics, next->n);
            double t0 = dmt_now();
            finished += step(&all, next, &src, &gen);
            double dt = dmt_now() - t0;
            next->vt += dt;
            t_steps += dt;
        }
        drop_retired(&all);
        if (finished > 0 && (all.n == 0 || t_steps > 0.05)) { /* metrics: sentences finished over some steps */
            dmt_metrics_batch(s->metrics, finished, src, gen, t_steps);
            finished = 0;
            src = gen = 0;
            t_steps = 0;
        }
        pthread_mutex_lock(&s->mu);
        if ((was_busy || g > 0) && all.n == 0) s->busy--;
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < MAX_SESSIONS; i++) {
        dmt_beam_session_free(all.run[i].ses);
        state_drop(&all.run[i].state, &all.run[i].state_model);
        free(all.run[i].job);
        free(all.run[i].cost);
    }
    free(all.ids);
    free(picks);
    free(jobs);
    free(done);
}

static void *worker_main(void *arg) {
    worker *wk = arg;
    if (wk->s->o.continuous) {
        continuous_main(wk);
        return NULL;
    }
    dmt_scheduler *s = wk->s;
    int cap = s->o.max_batch_sentences, done_cap = 0;
    dmt_job **batch = calloc((size_t)cap, sizeof *batch);
    dmt_policy_pick *picks = calloc((size_t)cap, sizeof *picks);
    dmt_translate_input *in = calloc((size_t)cap, sizeof *in);
    dmt_translate_output *out = calloc((size_t)cap, sizeof *out);
    char *delivered = calloc((size_t)cap, 1);
    dmt_work **done = NULL;
    if (!batch || !picks || !in || !out || !delivered) abort(); /* a few KB at startup */
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (dmt_policy_queued(s->policy) == 0 && !s->stopping) {
            for (int i = 0; i < WORKER_STATES; i++)
                if (wk->state_model[i] && atomic_load(&wk->state_model[i]->retired))
                    state_drop(&wk->state[i], &wk->state_model[i]);
            pthread_cond_wait(&s->cv, &s->mu); /* woken by a reload too (dmt_scheduler_models_changed) */
        }
        if (dmt_policy_queued(s->policy) == 0) break; /* stopping and drained */
        double now = dmt_now();
        int n_done = sweep(s, now, 0, 0, &done, &done_cap);
        struct timespec until;
        int n = 0;
        if (dmt_policy_queued(s->policy) > 0 && !batch_wait(s, now, &until)) {
            /* share what is queued among the idle workers, this one included: with 8
             * sentences queued and 2 idle workers, 2 batches of 4 finish sooner than 1 of 8 */
            int idle = s->o.workers - s->busy, q = dmt_policy_queued(s->policy), limit = cap;
            if (idle > 1 && (q + idle - 1) / idle < limit) limit = (q + idle - 1) / idle;
            n = dmt_policy_take_within(s->policy, NULL, 0, limit, batch_room, s, picks);
            for (int i = 0; i < n; i++) batch[i] = &((dmt_work *)picks[i].owner)->jobs[picks[i].index];
        }
        if (n > 0) s->busy++;
        else if (dmt_policy_queued(s->policy) > 0 && n_done == 0) {
            pthread_cond_timedwait(&s->cv, &s->mu, &until);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        call_done(done, n_done);
        double dt = 0;
        if (n > 0) {
            dt = run_batch(wk, batch, n, in, out, delivered);
        }
        pthread_mutex_lock(&s->mu);
        if (n > 0) {
            s->busy--;
            s->batch_seconds = s->batch_seconds > 0 ? 0.8 * s->batch_seconds + 0.2 * dt : dt;
        }
    }
    pthread_mutex_unlock(&s->mu);
    free(batch);
    free(picks);
    free(in);
    free(out);
    free(delivered);
    free(done);
    return NULL;
}

/* Every WATCH_MS: drops requests whose client went away or whose deadline passed
 * before they started, even while every worker is busy. */
static void *watcher_main(void *arg) {
    dmt_scheduler *s = arg;
    dmt_work **done = NULL;
    int cap = 0;
    pthread_mutex_lock(&s->mu);
    while (!s->stopping || s->n_live > 0) {
        int n = sweep(s, dmt_now(), 0, 1, &done, &cap);
        if (n > 0) {
            pthread_mutex_unlock(&s->mu);
            call_done(done, n);
            pthread_mutex_lock(&s->mu);
            continue;
        }
        struct timespec until;
        abs_time(dmt_now() + WATCH_MS * 1e-3, &until);
        pthread_cond_timedwait(&s->watch_cv, &s->mu, &until);
    }
    pthread_mutex_unlock(&s->mu);
    free(done);
    return NULL;
}

int dmt_scheduler_start(dmt_scheduler *s, char *err, size_t errlen) {
    if (s->o.blas_threads > 0) dmt_kernels_set_threads(s->o.blas_threads);
    for (int i = 0; i < s->o.workers; i++) {
        worker *wk = &s->workers[i];
        wk->s = s;
        if (pthread_create(&wk->thread, NULL, worker_main, wk) != 0) {
            snprintf(err, errlen, "cannot start a worker thread");
            return -1;
        }
        wk->started = 1;
    }
    if (pthread_create(&s->watcher, NULL, watcher_main, s) != 0) {
        snprintf(err, errlen, "cannot start the watcher thread");
        return -1;
    }
    s->watcher_started = 1;
    atomic_store(&s->ready, 1);
    return 0;
}

void dmt_scheduler_cancel(dmt_scheduler *s) {
    dmt_work **done = NULL;
    int cap = 0;
    pthread_mutex_lock(&s->mu);
    int n = sweep(s, dmt_now(), 1, 0, &done, &cap);
    pthread_mutex_unlock(&s->mu);
    call_done(done, n);
    free(done);
}

void dmt_scheduler_stop(dmt_scheduler *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->watch_cv);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->o.workers; i++)
        if (s->workers[i].started) pthread_join(s->workers[i].thread, NULL);
    for (int i = 0; i < s->o.workers; i++) s->workers[i].started = 0;
    if (s->watcher_started) pthread_join(s->watcher, NULL);
    s->watcher_started = 0;
}

void dmt_scheduler_free(dmt_scheduler *s) {
    if (!s) return;
    dmt_scheduler_stop(s);
    /* nothing can be left queued: submit needs ready workers and refuses once stopping */
    for (int i = 0; i < s->o.workers; i++)
        for (int k = 0; k < WORKER_STATES; k++) state_drop(&s->workers[i].state[k], &s->workers[i].state_model[k]);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->watch_cv);
    pthread_mutex_destroy(&s->mu);
    dmt_policy_free(s->policy);
    free(s->live);
    free(s->workers);
    free(s);
}
