/* internal.h — what the server's modules share (not a public API).
 *
 *   server.c     startup, signals, drain and shutdown, access log
 *   http.c       libmicrohttpd glue: routing, body limits, suspend/resume, responses
 *   api.c        the JSON API: request validation, sentence splitting, responses
 *   scheduler.c  the sentence queue, model workers, cancellation
 *   policy.c     which queued sentences run next (policy.h: pure, unit-tested)
 *   metrics.c    counters and histograms, Prometheus text
 *   detect.c     language detection (CLD2 over the model's languages)
 *   textsafe.c   untrusted bytes made safe for log lines and JSON messages
 *   halfclose.c  answering a client that half-closed its connection
 *   connguard.c  per-connection read deadline (slow requests)
 *   lt_api.c     /detect, /suggest, /frontend/settings, /spec (lt_api.h)
 *   html.c       format "html" (html.h); documents.c, files.c: /translate_file
 *   webpage.c    the page GET / gives browsers (webpage.h)
 */
#ifndef DEEPMT_SERVER_INTERNAL_H
#define DEEPMT_SERVER_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include <jansson.h>

#include "model/translate.h"
#include "server/sentences.h"
#include "server/server.h"

/* Monotonic clock in seconds. */
double dmt_now(void);

/* ---- metrics.c: thread-safe counters ---- */

typedef struct dmt_metrics dmt_metrics;
dmt_metrics *dmt_metrics_new(void);
void dmt_metrics_free(dmt_metrics *m);
/* One finished HTTP request (status 0: the client went away before the answer). */
void dmt_metrics_request(dmt_metrics *m, int status, double seconds);
/* One batch run by a worker. */
void dmt_metrics_batch(dmt_metrics *m, int sentences, long src_tokens, long out_tokens, double seconds);
void dmt_metrics_rejected(dmt_metrics *m); /* a request refused because the queue was full */
void dmt_metrics_read_timeout(dmt_metrics *m); /* a connection closed by --request-read-timeout */
/* The Prometheus text exposition; malloc'd, NUL-terminated. */
char *dmt_metrics_render(dmt_metrics *m, int queue_sentences, int busy_workers, int ready, int active_requests);

/* ---- scheduler.c: queue + batching + workers (policy.h decides what runs) ---- */

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

/* ---- api.c: the JSON side of the API ---- */

/* A validated POST /translate. */
typedef struct {
    json_t *body;              /* owns the strings texts[] point into */
    int is_array;              /* q was an array */
    int n_texts;
    const char **texts;
    size_t *lens;
    int *first, *count;        /* text t owns jobs first[t] .. first[t] + count[t] - 1 */
    dmt_span *spans;           /* per job: where the sentence sits in its text */
    int n_sentences;
    int same_language;         /* source == target: echo the input */
    int alternatives;
    const char **detected;     /* per text, source "auto": a language code, or NULL */
    double *confidence;
    /* format "html": texts[] above are the documents' text runs (html.h); the
     * documents as sent and their detected languages are kept here */
    struct dmt_html *html;
    int n_docs;
    const char **docs;
    size_t *doc_lens;
    const char **doc_detected;
    double *doc_confidence;
    dmt_work work;
} dmt_api_request;

/* Parses and validates a translate request; takes ownership of body. Returns 0 with
 * *out set, or an HTTP status (400, 403, 413) with a message in err. */
int dmt_api_translate_parse(const dmt_server_config *cfg, const dmt_config *mcfg, json_t *body,
                            dmt_api_request **out, char *err, size_t errlen);

/* The response body once every job is done; *status is 200, or the error status
 * (with {"error": ...}). */
json_t *dmt_api_translate_result(const dmt_api_request *r, int *status);

void dmt_api_request_free(dmt_api_request *r);

json_t *dmt_api_languages(const dmt_config *mcfg);
/* key is one of --api-keys (compared in constant time); NULL never is. */
int dmt_api_key_allowed(const dmt_server_config *cfg, const char *key);
json_t *dmt_api_error(const char *fmt, ...);

/* ---- detect.c ---- */

typedef struct {
    const char *code;          /* a model language code (points into the config) */
    double confidence;         /* 0..100, calibrated: docs/server.md */
} dmt_detect_guess;

/* The model languages text may be in, best first (up to max; the best is always
 * there when the model has languages). Returns how many were filled. */
int dmt_detect(const dmt_config *mcfg, const char *text, size_t len, dmt_detect_guess *out, int max);
/* Just the best guess; NULL only for a model without languages. */
const char *dmt_detect_language(const dmt_config *mcfg, const char *text, size_t len, double *confidence);

/* ---- textsafe.c ---- */

enum { DMT_ESC_QUOTE = 1 }; /* also escape '"' (inside a quoted field of a text log) */

/* Copies src[0..len) into dst (cap bytes, NUL-terminated) as one line of valid
 * UTF-8: invalid bytes and control characters (C0, DEL, C1, U+2028/2029) become
 * \xNN, a backslash \\ (and '"' \" with DMT_ESC_QUOTE). Stops before a character
 * or an escape that would not fit. Returns the length written. */
size_t dmt_text_escape(char *dst, size_t cap, const char *src, size_t len, int flags);

/* The longest prefix of src[0..len), at most max bytes, that ends on a character
 * boundary (an invalid byte counts as one character): for "%.*s" without cutting
 * a UTF-8 sequence in two. */
size_t dmt_text_clip(const char *src, size_t len, size_t max);

/* ---- server.c / http.c ---- */

struct MHD_Connection;
typedef struct dmt_conn_guard dmt_conn_guard;

typedef struct dmt_server {
    const dmt_server_config *cfg;
    dmt_config model_cfg;      /* config.json, read before the model loads */
    dmt_scheduler *sched;
    dmt_metrics *metrics;
    struct MHD_Daemon *daemon;
    dmt_conn_guard *guard;     /* --request-read-timeout; NULL when off */
    struct dmt_files *files;   /* /translate_file results (files.h) */
    atomic_int active;         /* requests between their first callback and completion */
    atomic_int connections;    /* open client connections (a request may be arriving on one) */
    atomic_int draining;       /* shutting down: answers carry Connection: close */
    double started;
} dmt_server;

/* connguard.c: the whole-request read deadline (--request-read-timeout). A
 * connection must deliver a complete request (headers and body) within the
 * timeout of opening, or of its previous answer; otherwise it is shut down. The
 * idle timeout alone cannot do this: it restarts on every byte. NULL guard (timeout
 * 0): every call does nothing. */
dmt_conn_guard *dmt_conn_guard_new(int timeout_s, const dmt_server_config *cfg, dmt_metrics *metrics);
void dmt_conn_guard_free(dmt_conn_guard *g);    /* after the daemon stopped */
/* For the MHD_OPTION_NOTIFY_CONNECTION callback: code is its
 * MHD_ConnectionNotificationCode (started, closed). */
void dmt_conn_guard_notify(dmt_conn_guard *g, struct MHD_Connection *conn, void **socket_context, int code);
void dmt_conn_guard_request_read(dmt_conn_guard *g, struct MHD_Connection *conn); /* request complete */
void dmt_conn_guard_request_done(dmt_conn_guard *g, struct MHD_Connection *conn); /* next one starts */

/* halfclose.c: writes the answer of req (work done) on conn's socket at once,
 * after libmicrohttpd ended the request unanswered because the client
 * half-closed. Returns the status written, with *bytes
 * set, or 0 when it could not be written (the client is gone). */
int dmt_http_answer_half_closed(const dmt_server *srv, struct MHD_Connection *conn, const dmt_api_request *req,
                                size_t *bytes);

int dmt_http_start(dmt_server *srv, char *err, size_t errlen);
int dmt_http_port(dmt_server *srv);     /* the bound port (for --port 0) */
void dmt_http_quiesce(dmt_server *srv); /* stop accepting connections */
void dmt_http_stop(dmt_server *srv);

/* One access-log line on stderr. */
void dmt_access_log(const dmt_server *srv, const char *client, const char *method, const char *path, int status,
                    size_t bytes, double seconds, int sentences);
void dmt_server_log(const dmt_server_config *cfg, const char *fmt, ...);

#endif
