/* api.h — the JSON side of POST /translate and GET /languages (api.c): request
 * validation, routing to the served models, sentence splitting into scheduler
 * work (legs.c: one part a route, pivots as two legs), answers; GET /models
 * (models_api.c). */
#ifndef DEEPMT_SERVER_API_API_H
#define DEEPMT_SERVER_API_API_H

#include <stddef.h>

#include <jansson.h>

#include "model/config.h"
#include "server/config.h"
#include "server/sched/registry.h"
#include "server/sched/scheduler.h"
#include "text/sentences.h"

typedef struct dmt_api_request dmt_api_request;

/* The texts of one request that go one way: straight through one model, or
 * through English (a pivot) by two. Their jobs are the request's jobs[first ..
 * first + count). */
typedef struct {
    dmt_api_request *req;
    dmt_served *model;         /* the model whose output is the answer (pivot: en -> target) */
    dmt_served *pivot_model;   /* pivot: source -> en; NULL when direct */
    int first, count;
    int target_id;             /* in model */
    dmt_work work;             /* the first (or only) leg */
    dmt_work work2;            /* pivot: the second leg, over the request's jobs */
    dmt_job *pivot_jobs;       /* pivot: the first leg's jobs (their outputs are English) */
    /* pivot: the second leg translates each English output as a text of its own
     * (split into sentences and chunks, as a request would be) */
    dmt_job *leg2_jobs;
    dmt_span *leg2_spans;      /* [n_leg2] where each sits in its English text */
    int *leg2_first;           /* [count + 1]: English text i owns leg2_jobs[leg2_first[i] .. leg2_first[i + 1]) */
    int n_leg2;
} dmt_api_part;

/* A validated POST /translate. */
struct dmt_api_request {
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
    int empty_alternatives;    /* format html with alternatives: answered as [] (none computed) */
    int alignments;            /* "alignments": true: word pairs in the answer (format text) */
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
    /* routing and work (legs.c) */
    dmt_model_set *set;        /* the models as they were when the request came: held until it is freed */
    const char *model_name;    /* "model": the one asked for, or NULL */
    int *text_part;            /* per text: its part */
    dmt_api_part *parts;
    int n_parts;
    dmt_job *jobs;             /* every sentence, part by part */
    int n_jobs;
    long want_beam;            /* the request's engine fields (0 / < 0: the model's default) */
    double want_length_penalty;
    long want_max_length;
    /* set by the caller before dmt_api_submit */
    char client[72];           /* who sent it (dmt_api_client_id) */
    double deadline;           /* as dmt_work's */
    void *user;
    void (*done)(dmt_api_request *r);  /* once, when every part is done */
    int (*alive)(dmt_api_request *r);  /* as dmt_work's; NULL: always */
    /* scheduler side */
    dmt_scheduler *sched;
    atomic_int parts_pending;
    int fail_status;           /* a part could not be queued (its second leg): this status, fail_error */
    char fail_error[256];
    int pivoted;               /* some text went through English */
};

/* Parses and validates a translate request; takes ownership of body and of the
 * reference on set (released when the request is freed, or now on failure). Each
 * text is routed to the model that has its pair (the "model" field may name one),
 * or through English by two; its sentences are measured by that model: one too
 * long for it is cut into chunks (dmt_sentence_chunks) translated as jobs of their
 * own. Returns 0 with *out set, or an HTTP status (400, 403, 413) with a message
 * in err. */
int dmt_api_translate_parse(const dmt_server_config *cfg, dmt_model_set *set, json_t *body, dmt_api_request **out,
                            char *err, size_t errlen);

/* api.c: the decoding options of one leg on a model with config mcfg: its defaults,
 * the request's engine fields, nbest hypotheses. 0, or 400 with a message. */
int dmt_api_leg_options(const dmt_api_request *r, const dmt_config *mcfg, int nbest, dmt_beam_options *out, char *err,
                        size_t errlen);
/* api.c: the jobs of one whole text as a request's are made (sentences, and the
 * chunks of those too long for model): their spans (at most cap written); how many,
 * or -1 out of memory. */
int dmt_api_text_jobs(const dmt_model *model, const char *text, size_t len, dmt_span *out, int cap);
/* legs.c: queues every part of r (r->n_jobs > 0) on s; r->done is called once
 * when all are done (a pivot's second leg is queued when its first is done), from
 * a scheduler thread. A DMT_SUBMIT_* code: on anything but DMT_SUBMIT_OK nothing was
 * queued, unless some parts were, in which case it is DMT_SUBMIT_OK and the rest
 * fail in the answer. DMT_API_SUBMIT_FINISHED: everything finished before this
 * returned, and done() will not be called: the caller answers now. */
#define DMT_API_SUBMIT_FINISHED 1
int dmt_api_submit(dmt_scheduler *s, dmt_api_request *r, char *err, size_t errlen);
/* legs.c: the request's work was dropped (cancelled at shutdown, client gone, timed out):
 * 503, 499, or 503, and the message; 0 when not. */
int dmt_api_dropped(const dmt_api_request *r, const char **msg);
/* legs.c: counts a finished request in its models' metrics. */
void dmt_api_account(const dmt_api_request *r, int status, double seconds);
/* legs.c: the models that answered, "a" or "a,b" (a pivot: both), into buf. */
const char *dmt_api_models_used(const dmt_api_request *r, char *buf, size_t cap);

/* The response body once every job is done; *status is 200, or the error status
 * (with {"error": ...}). */
json_t *dmt_api_translate_result(const dmt_api_request *r, int *status);

void dmt_api_request_free(dmt_api_request *r);

/* GET /languages: every language served, each with the targets some route reaches;
 * before the first models are loaded (set NULL), boot's languages, each to all others. */
json_t *dmt_api_languages(const dmt_model_set *set, const dmt_config *boot);
/* GET /models (models_api.c): the models, their languages, sizes, precision and cards,
 * and the latest reload's failures. */
json_t *dmt_api_models(const dmt_model_set *set);
/* models_api.c: per-model counters in the Prometheus text format (malloc'd; NULL out of memory). */
char *dmt_api_model_metrics(const dmt_model_set *set);
/* key is one of --api-keys (compared in constant time); NULL never is. */
int dmt_api_key_allowed(const dmt_server_config *cfg, const char *key);
/* A request's key: its "api_key" field, or "apiKey" (the npm libretranslate
 * client's spelling); NULL when it has neither (or not as a string). */
const char *dmt_api_key_of(json_t *body);
/* The key check as LibreTranslate answers it: 0 when keys are off or key is one
 * of them; 400 "Please contact the server operator to get an API key" when keys
 * are on and none was sent; 403 "Invalid API key" for any other key. */
int dmt_api_key_status(const dmt_server_config *cfg, const char *key, char *err, size_t errlen);
json_t *dmt_api_error(const char *fmt, ...);
/* Who a request comes from, for fairness and quotas: "key:" and a hash of its API key
 * when keys are on (the key itself is not kept), else "addr:" and the client
 * address. A key sent to a server without keys is ignored: it would let any client
 * take a fresh share per request. */
void dmt_api_client_id(const dmt_server_config *cfg, const char *api_key, const char *address, char *out, size_t cap);

#endif
