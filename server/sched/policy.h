/* policy.h — the server's batching policy: which queued sentences run next.
 *
 * A pure data structure: no threads, no clock, no model. The caller passes the
 * time and each sentence's cost, so tests/c/test_policy.c drives it step by step;
 * scheduler.c wraps it in a mutex and runs what it picks.
 *
 * Cost model. A sentence costs what its beam search will touch: beam x (source
 * pieces + expected output pieces) (dmt_policy_cost). Alternatives raise the beam
 * (n-best <= beam), so they are included; the expected output length is the
 * source length times a typical ratio, capped by the request's max length.
 *
 * Fairness between clients. Clients (an API key, or an address: whatever the caller
 * names) share the capacity first, then each client's requests share its part: a
 * client's service is the cost admitted for all its requests, and the next sentence
 * comes from the waiting client with the least service. A client that arrives (or
 * comes back) starts at the least service among the clients waiting, but not below
 * the service the last picked client reached (else a stream of new one-request
 * clients would hold back a waiting client's next sentence as long as it lasts).
 * So a client flooding requests gets one share, not one share a request: another
 * client's one request runs as soon as it is the least served, whatever the flood's
 * size. Two clients level: the earlier request first.
 *
 * Fairness between a client's requests. Requests, not sentences, share the capacity. Each request carries the
 * cost admitted for it so far (its service); a batch is filled by taking, again and
 * again, the next sentence of the compatible request with the least service (ties:
 * the earlier request). A request that arrives later starts at the least service
 * among those waiting (not below the service its client's last picked request
 * reached, for the same reason), so it is served in the next batch instead of queueing
 * behind a large request's remaining sentences, and the large request still gets
 * its share: every other request's service grows past its own (no starvation).
 * Sentences of one request run in order. Only requests with equal keys (decoding
 * options) share a batch; the batch's first pick decides the key.
 *
 * Deadlines bound queue time before a request's first sentence is admitted: once
 * any part of a request runs, the rest is not dropped for waiting (finished work
 * of a live request is never thrown away).
 */
#ifndef DEEPMT_SERVER_SCHED_POLICY_H
#define DEEPMT_SERVER_SCHED_POLICY_H

#include <stddef.h>

typedef struct {
    int max_batch_sentences;  /* sentences in one batch */
    long max_batch_tokens;    /* source pieces in one batch, summed (the encoder packs them) */
    long max_batch_cost;      /* summed sentence costs in one batch */
    long max_request_cost;    /* summed sentence costs of one request; 0 = no limit */
} dmt_policy_limits;

/* beam x (source pieces with </s> + expected output pieces), where the expected
 * output is about 1.25 x the source (+ 3), at most max_out. At least 1. */
long dmt_policy_cost(int beam, int src_tokens, int max_out);

/* What can never run under lim: 0, or 413 with a message naming the sentence (0-based
 * index + 1) or the request and the limit. */
int dmt_policy_check(const dmt_policy_limits *lim, int n, const long *cost, const int *tokens, char *err,
                     size_t errlen);

typedef struct dmt_policy dmt_policy;

/* same_key(a, b): nonzero when requests with keys a and b may share a batch (NULL:
 * a == b). NULL when out of memory. */
dmt_policy *dmt_policy_new(dmt_policy_limits lim, int (*same_key)(const void *a, const void *b));
void dmt_policy_free(dmt_policy *p);

typedef struct {
    void *owner;              /* the caller's request; identifies it */
    const char *client;       /* who sent it (an API key's hash, an address); NULL or "": one anonymous client */
    const void *key;          /* decoding options */
    int n;                    /* sentences (>= 1) */
    const long *cost;         /* [n], borrowed until the request leaves the policy */
    const int *tokens;        /* [n] source pieces, borrowed likewise */
    double deadline;          /* drop unstarted after this time; 0 = never */
} dmt_policy_request;

/* Queues every sentence of r at time now. 0, or -1 when out of memory. */
int dmt_policy_add(dmt_policy *p, const dmt_policy_request *r, double now);

/* One admitted sentence: sentence `index` of request `owner`. */
typedef struct {
    void *owner;
    int index;
} dmt_policy_pick;

/* Fills a batch of at most `limit` sentences (and the limits') into out, in pick
 * order; their count (0 when nothing is queued). A request leaves the policy once
 * all its sentences are picked. */
int dmt_policy_take(dmt_policy *p, int limit, dmt_policy_pick *out);

/* The same, adding to a batch that is already running (continuous batching): only
 * requests whose key equals key (NULL: any, the first pick decides), within the
 * batch cost left after cost_used, and at most limit sentences. With nothing
 * running (key NULL, cost_used 0) it is dmt_policy_take. */
int dmt_policy_take_more(dmt_policy *p, const void *key, long cost_used, int limit, dmt_policy_pick *out);

/* The same where some keys have less room: room(k, ctx) is how many more sentences
 * with key k the caller can run now (a model measured to run fastest in small
 * batches, model/config.h, in a batch already holding some), or < 0 for no limit
 * of its own. A request whose key has no room is passed over; the batch stops at its
 * key's room. room NULL: dmt_policy_take_more. */
int dmt_policy_take_within(dmt_policy *p, const void *key, long cost_used, int limit,
                           int (*room)(const void *key, void *ctx), void *ctx, dmt_policy_pick *out);

/* Nonzero when the waiting sentences already make a full batch: `limit` of them, or,
 * for some key, as many as room(key, ctx) allows (room NULL: limit only). A worker
 * that waits for company stops waiting then. */
int dmt_policy_batch_full(const dmt_policy *p, int limit, int (*room)(const void *key, void *ctx), void *ctx);

/* Removes the requests not started by their deadline (deadline < now); their owners
 * go to out (at most cap); the count. */
int dmt_policy_expire(dmt_policy *p, double now, void **out, int cap);

/* Removes owner's sentences still queued; how many there were (0: none, or not queued). */
int dmt_policy_remove(dmt_policy *p, const void *owner);

int dmt_policy_queued(const dmt_policy *p);        /* sentences waiting */
int dmt_policy_requests(const dmt_policy *p);      /* requests with sentences waiting */
long dmt_policy_queued_cost(const dmt_policy *p);  /* their summed cost */
/* When the longest-waiting request arrived; 0 when nothing waits. */
double dmt_policy_oldest(const dmt_policy *p);
/* The owner of the i-th waiting request (0 <= i < dmt_policy_requests). */
void *dmt_policy_owner(const dmt_policy *p, int i);

#endif
