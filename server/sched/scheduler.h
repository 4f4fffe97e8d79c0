/* scheduler.h — the sentence queue, batching and the model workers (scheduler.c;
 * policy.h decides what runs next, pool.h wraps it for the command line). Knows
 * nothing of HTTP: a request is a dmt_work whose done() the caller supplies. */
#ifndef DEEPMT_SERVER_SCHED_SCHEDULER_H
#define DEEPMT_SERVER_SCHED_SCHEDULER_H

#include <stdatomic.h>
#include <stddef.h>

#include "model/translate.h"
#include "server/metrics.h"
#include "server/sched/registry.h"

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

/* What sentences must share to run in one batch: the model and the decoding options. */
typedef struct {
    dmt_served *model;         /* borrowed: the submitter keeps it alive until done() */
    dmt_beam_options opt;
} dmt_batch_key;

/* All sentences of one request; they share a model and decoding options. The scheduler calls
 * done(w) exactly once, from a scheduler thread, when every job has an output,
 * has failed, timed out or was cancelled. */
struct dmt_work {
    dmt_job *jobs;
    int n_jobs;
    dmt_batch_key key;
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
    long max_batch_cost;       /* summed policy costs in one batch (policy.h) */
    long max_request_cost;     /* of one request; 0 = no limit */
    int continuous;            /* iteration-level batching (a beam session a worker); 0: whole batches */
    int model_batch_limits;    /* a model's config.json "batching.max_sentences" lowers max_batch_sentences
                                * for its batches (an operator's explicit limit: 0, one limit for all) */
} dmt_scheduler_options;

typedef struct dmt_scheduler dmt_scheduler;

dmt_scheduler *dmt_scheduler_new(dmt_scheduler_options o, dmt_metrics *metrics);

/* Starts the workers and the watcher. Workers serve whatever model a request names
 * (dmt_batch_key): each keeps a decoder state per model it runs, made when first
 * needed, and drops it once that model is retired (registry.h) and idle. 0, or -1
 * with a message. */
int dmt_scheduler_start(dmt_scheduler *s, char *err, size_t errlen);
int dmt_scheduler_ready(dmt_scheduler *s);
/* After a reload: idle workers drop their states for retired models now. */
void dmt_scheduler_models_changed(dmt_scheduler *s);

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
/* Stops (if not yet) and frees; the workers' references on models go with it. */
void dmt_scheduler_free(dmt_scheduler *s);

#endif
