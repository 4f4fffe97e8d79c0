/* scheduler.h — the sentence queue, batching and the model workers (scheduler.c;
 * policy.h decides what runs next, pool.h wraps it for the command line). Knows
 * nothing of HTTP: a request is a dmt_work whose done() the caller supplies. */
#ifndef DEEPMT_SERVER_SCHED_SCHEDULER_H
#define DEEPMT_SERVER_SCHED_SCHEDULER_H

#include <stdatomic.h>
#include <stddef.h>

#include "model/translate.h"
#include "server/metrics.h"

typedef struct dmt_work dmt_work;

/* One sentence to translate. */
typedef struct {
    const char *text;          /* borrowed from the request */
    size_t len;
    int target_id;             /* language token id */
    dmt_work *work;            /* owner */
    dmt_translate_output out;  /* filled by a worker */
    int internal_error;        /* the whole batch failed (out of memory...): 500 */
} dmt_job;

/* All sentences of one request; they share decoding options. The scheduler calls
 * done(w) exactly once, from a scheduler thread, when every job has an output,
 * has failed, timed out or was cancelled. */
struct dmt_work {
    dmt_job *jobs;
    int n_jobs;
    dmt_beam_options opt;
    double deadline;           /* dmt_now() after which a request not yet started is dropped; 0 = never */
    void (*done)(dmt_work *w);
    /* Polled by the scheduler while the request is queued or running (never after
     * done): 0 once its client has gone, and the request is dropped. NULL: never. */
    int (*alive)(dmt_work *w);
    void *user;
    char client[72];           /* who sent it: workers are shared fairly between clients first (policy.h); "" = anonymous */
    /* scheduler-owned */
    atomic_int pending;
    atomic_int timed_out;      /* dropped at its deadline before it started */
    atomic_int cancelled;      /* dropped at shutdown */
    atomic_int disconnected;   /* dropped because its client went away */
    long *cost;                /* [n_jobs] policy costs */
    int *tokens;               /* [n_jobs] source pieces */
    double enqueued;
};

typedef struct {
    int workers, blas_threads;
    int max_batch_sentences, max_batch_tokens, max_wait_ms;
    int max_queue;             /* sentences */
    int precision;             /* dmt_precision of the model's products */
    long max_batch_cost;       /* summed policy costs in one batch (policy.h) */
    long max_request_cost;     /* of one request; 0 = no limit */
    int continuous;            /* iteration-level batching (a beam session a worker); 0: whole batches */
} dmt_scheduler_options;

typedef struct dmt_scheduler dmt_scheduler;

dmt_scheduler *dmt_scheduler_new(dmt_scheduler_options o, dmt_metrics *metrics);

/* Loads the model on a background thread, then starts the workers; calls
 * on_loaded(arg, NULL) when ready or on_loaded(arg, message) on failure, from
 * that thread. 0, or -1 when the thread cannot start. */
int dmt_scheduler_load_async(dmt_scheduler *s, const char *model_dir,
                             void (*on_loaded)(void *arg, const char *error), void *arg);
int dmt_scheduler_ready(dmt_scheduler *s);
const dmt_model *dmt_scheduler_model(dmt_scheduler *s); /* NULL until ready */
double dmt_scheduler_load_seconds(dmt_scheduler *s);

enum { DMT_SUBMIT_OK = 0, DMT_SUBMIT_FULL = -1, DMT_SUBMIT_NOT_READY = -2, DMT_SUBMIT_TOO_LARGE = -3 };
/* Measures every job of w (n_jobs >= 1: source pieces, cost) and queues them. On
 * DMT_SUBMIT_OK, w belongs to the scheduler until done(w) is called; otherwise
 * nothing was queued. DMT_SUBMIT_TOO_LARGE: w can never run under the batch or
 * request limits (message in err, for a 413). */
int dmt_scheduler_submit(dmt_scheduler *s, dmt_work *w, char *err, size_t errlen);

int dmt_scheduler_queued(dmt_scheduler *s);  /* sentences waiting */
int dmt_scheduler_busy(dmt_scheduler *s);    /* workers running a batch */

/* Drops every queued job and makes running batches drop theirs at the next decoder
 * step (their requests finish with 503). For a shutdown that should not wait. */
void dmt_scheduler_cancel(dmt_scheduler *s);
/* Lets the workers finish everything queued and joins every thread; later
 * submits are refused (DMT_SUBMIT_NOT_READY). The scheduler stays valid. */
void dmt_scheduler_stop(dmt_scheduler *s);
/* Stops (if not yet) and frees, model included. */
void dmt_scheduler_free(dmt_scheduler *s);

#endif
