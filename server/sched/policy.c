/* policy.c — which queued sentences run next (policy.h has the rules).
 *
 * The waiting requests sit in one array in arrival order; a batch scans it once
 * per pick. The queue holds at most a few hundred requests (--max-queue sentences
 * in all), and a scan is a few nanoseconds a request, so no heap is needed.
 */
#include "server/sched/policy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A client with requests waiting; freed when its last one leaves the policy. */
typedef struct client {
    struct client *next;
    char id[72];
    double service;  /* cost admitted for its requests, plus the start it got on arrival */
    double level;    /* the service its last picked request reached: where a newcomer starts */
    int requests;    /* entries waiting */
} client;

typedef struct {
    dmt_policy_request r;
    client *c;
    int next;        /* next sentence to admit */
    double service;  /* cost admitted so far, plus the start it got on arrival */
    double arrived;
    long seq;        /* arrival order: breaks ties */
} entry;

struct dmt_policy {
    dmt_policy_limits lim;
    int (*same_key)(const void *, const void *);
    entry *e;
    int n, cap;
    client *clients; /* those with requests waiting */
    double level;    /* the service the last picked sentence's client reached: where a newcomer starts */
    long seq;
    int queued;
    long queued_cost;
};

long dmt_policy_cost(int beam, int src_tokens, int max_out) {
    if (beam < 1) beam = 1;
    if (src_tokens < 0) src_tokens = 0;
    long expected = (long)ceil(1.25 * src_tokens) + 3;
    if (max_out > 0 && expected > max_out) expected = max_out;
    return (long)beam * (src_tokens + 1 + expected);
}

int dmt_policy_check(const dmt_policy_limits *lim, int n, const long *cost, const int *tokens, char *err,
                     size_t errlen) {
    long total = 0;
    for (int i = 0; i < n; i++) {
        if (lim->max_batch_cost > 0 && cost[i] > lim->max_batch_cost) {
            snprintf(err, errlen,
                     "sentence %d would cost %ld (beam x (source + expected output pieces)), more than one batch "
                     "may take (%ld, --max-batch-cost): lower beam_size, alternatives or max_length, or split it",
                     i + 1, cost[i], lim->max_batch_cost);
            return 413;
        }
        if (lim->max_batch_tokens > 0 && tokens[i] > lim->max_batch_tokens) {
            snprintf(err, errlen, "sentence %d has %d pieces, more than one batch may take (%ld, --max-batch-tokens)",
                     i + 1, tokens[i], lim->max_batch_tokens);
            return 413;
        }
        total += cost[i];
    }
    if (lim->max_request_cost > 0 && total > lim->max_request_cost) {
        snprintf(err, errlen,
                 "the request would cost %ld (beam x (source + expected output pieces), summed over %d sentences), "
                 "the limit is %ld (--max-request-cost): send fewer or shorter sentences, or lower beam_size or "
                 "alternatives",
                 total, n, lim->max_request_cost);
        return 413;
    }
    return 0;
}

dmt_policy *dmt_policy_new(dmt_policy_limits lim, int (*same_key)(const void *, const void *)) {
    if (lim.max_batch_sentences < 1) lim.max_batch_sentences = 1;
    dmt_policy *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->lim = lim;
    p->same_key = same_key;
    return p;
}

void dmt_policy_free(dmt_policy *p) {
    if (!p) return;
    for (client *c = p->clients, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(p->e);
    free(p);
}

/* The client named id, joining at the least service among those waiting. NULL when
 * out of memory. */
static client *client_of(dmt_policy *p, const char *id) {
    if (!id) id = "";
    double least = 0;
    int any = 0;
    for (client *c = p->clients; c; c = c->next) {
        if (!strncmp(c->id, id, sizeof c->id - 1)) return c;
        if (!any || c->service < least) least = c->service;
        any = 1;
    }
    client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->id, sizeof c->id, "%s", id);
    /* not below the level the last pick reached: were newcomers to start at the least
     * service waiting, a stream of one-sentence clients would hold a longer request's
     * later sentences back for as long as the stream lasts */
    c->service = any && least > p->level ? least : p->level;
    c->next = p->clients;
    p->clients = c;
    return c;
}

static void client_leave(dmt_policy *p, client *c) {
    if (--c->requests > 0) return;
    for (client **pp = &p->clients; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            free(c);
            return;
        }
}

static int same(const dmt_policy *p, const void *a, const void *b) { return p->same_key ? p->same_key(a, b) : a == b; }

int dmt_policy_add(dmt_policy *p, const dmt_policy_request *r, double now) {
    if (r->n < 1) return 0;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 64;
        entry *e = realloc(p->e, (size_t)cap * sizeof *e);
        if (!e) return -1;
        p->e = e;
        p->cap = cap;
    }
    client *c = client_of(p, r->client);
    if (!c) return -1;
    /* start at the least service among its client's requests waiting: a newcomer is
     * neither owed the whole past (it would starve the others) nor put behind it; but
     * not below the level its client's last pick reached, where the requests served
     * most recently stand (else one-sentence requests arriving all the time, each
     * leaving at once, would hold a longer request's later sentences back) */
    double start = 0;
    int any = 0;
    for (int i = 0; i < p->n; i++)
        if (p->e[i].c == c && (!any || p->e[i].service < start)) start = p->e[i].service, any = 1;
    if (start < c->level) start = c->level;
    c->requests++;
    entry *e = &p->e[p->n++];
    *e = (entry){.r = *r, .c = c, .service = start, .arrived = now, .seq = p->seq++};
    p->queued += r->n;
    for (int i = 0; i < r->n; i++) p->queued_cost += r->cost[i];
    return 0;
}

/* Drops entry i, keeping arrival order. */
static void drop(dmt_policy *p, int i) {
    const entry *e = &p->e[i];
    p->queued -= e->r.n - e->next;
    for (int s = e->next; s < e->r.n; s++) p->queued_cost -= e->r.cost[s];
    client_leave(p, e->c);
    memmove(&p->e[i], &p->e[i + 1], (size_t)(p->n - i - 1) * sizeof *p->e);
    p->n--;
}

int dmt_policy_take(dmt_policy *p, int limit, dmt_policy_pick *out) {
    if (limit > p->lim.max_batch_sentences || limit < 1) limit = p->lim.max_batch_sentences;
    return dmt_policy_take_more(p, NULL, 0, limit, out);
}

int dmt_policy_take_more(dmt_policy *p, const void *key, long cost_used, int limit, dmt_policy_pick *out) {
    return dmt_policy_take_within(p, key, cost_used, limit, NULL, NULL, out);
}

/* limit, lowered to what key has room for. */
static int within_room(const void *key, int limit, int (*room)(const void *, void *), void *ctx) {
    int r = room ? room(key, ctx) : -1;
    return r >= 0 && r < limit ? r : limit;
}

int dmt_policy_take_within(dmt_policy *p, const void *key, long cost_used, int limit,
                           int (*room)(const void *key, void *ctx), void *ctx, dmt_policy_pick *out) {
    const dmt_policy_limits *lim = &p->lim;
    long cost = cost_used;
    long tokens = 0; /* source pieces picked: the engine encodes them packed, without padding */
    int n = 0, running = key != NULL || cost_used > 0;
    if (key) limit = within_room(key, limit, room, ctx);
    while (n < limit) {
        int best = -1;
        for (int i = 0; i < p->n; i++) {
            const entry *e = &p->e[i];
            long c = e->r.cost[e->next];
            int t = e->r.tokens[e->next];
            if (key && !same(p, key, e->r.key)) continue;
            if (!key && room && room(e->r.key, ctx) == 0) continue; /* its model's batch is full */
            if (n > 0 || running) { /* a first pick alone always fits: dmt_policy_check refused what cannot */
                if (lim->max_batch_cost > 0 && cost + c > lim->max_batch_cost) continue;
                if (n > 0 && lim->max_batch_tokens > 0 && tokens + t > lim->max_batch_tokens) continue;
            }
            /* the least served client, then its least served request, then arrival (two
             * clients level: their requests' services count from different starts) */
            const entry *b = best < 0 ? NULL : &p->e[best];
            if (!b || e->c->service < b->c->service ||
                (e->c->service == b->c->service &&
                 (e->c == b->c && e->service != b->service ? e->service < b->service : e->seq < b->seq)))
                best = i;
        }
        if (best < 0) break;
        entry *e = &p->e[best];
        long c = e->r.cost[e->next];
        int t = e->r.tokens[e->next];
        if (!key) {
            key = e->r.key;
            limit = within_room(key, limit, room, ctx);
        }
        out[n++] = (dmt_policy_pick){e->r.owner, e->next};
        cost += c;
        tokens += t;
        e->service += (double)c;
        e->c->service += (double)c;
        e->c->level = e->service;
        p->level = e->c->service;
        e->next++;
        p->queued--;
        p->queued_cost -= c;
        if (e->next == e->r.n) drop(p, best);
    }
    return n;
}

int dmt_policy_batch_full(const dmt_policy *p, int limit, int (*room)(const void *key, void *ctx), void *ctx) {
    if (p->queued >= limit) return 1;
    if (!room) return 0;
    /* Each key once, at its first request. Bounded: a request leaves the queue with its
     * last sentence, so fewer than limit requests wait here, and the scan is < limit^2. */
    for (int i = 0; i < p->n; i++) {
        const void *key = p->e[i].r.key;
        int full = within_room(key, limit, room, ctx), waiting = 0, seen = 0;
        /* no room now, or more than all that waits (no limit of its own): cannot be full */
        if (full == 0 || full > p->queued) continue;
        for (int j = 0; j < i && !seen; j++) seen = same(p, key, p->e[j].r.key);
        if (seen) continue;
        for (int j = i; j < p->n; j++)
            if (same(p, key, p->e[j].r.key)) waiting += p->e[j].r.n - p->e[j].next;
        if (waiting >= full) return 1;
    }
    return 0;
}

int dmt_policy_expire(dmt_policy *p, double now, void **out, int cap) {
    int k = 0;
    for (int i = 0; i < p->n && k < cap;) {
        const entry *e = &p->e[i];
        if (e->next == 0 && e->r.deadline > 0 && e->r.deadline < now) {
            out[k++] = e->r.owner;
            drop(p, i);
        } else {
            i++;
        }
    }
    return k;
}

int dmt_policy_remove(dmt_policy *p, const void *owner) {
    for (int i = 0; i < p->n; i++)
        if (p->e[i].r.owner == owner) {
            int left = p->e[i].r.n - p->e[i].next;
            drop(p, i);
            return left;
        }
    return 0;
}

int dmt_policy_queued(const dmt_policy *p) { return p->queued; }
int dmt_policy_requests(const dmt_policy *p) { return p->n; }
long dmt_policy_queued_cost(const dmt_policy *p) { return p->queued_cost; }
double dmt_policy_oldest(const dmt_policy *p) { return p->n ? p->e[0].arrived : 0; }
void *dmt_policy_owner(const dmt_policy *p, int i) { return i >= 0 && i < p->n ? p->e[i].r.owner : NULL; }
