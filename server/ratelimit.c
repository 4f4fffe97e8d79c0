/* ratelimit.c — token buckets per client (ratelimit.h).
 *
 * An open-addressing table of RL_SLOTS buckets, keyed by a hash of the client id;
 * the id itself is kept to tell clients apart. When the table is full, the bucket
 * seen least recently among a few probed is reused. */
#include "server/ratelimit.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RL_SLOTS 16384
#define RL_PROBES 16

typedef struct {
    char id[72];
    double tokens, last;
    int used;
} bucket;

struct dmt_ratelimit {
    pthread_mutex_t mu;
    double capacity, per_second;
    bucket *b;
};

dmt_ratelimit *dmt_ratelimit_new(int per_minute) {
    if (per_minute <= 0) return NULL;
    dmt_ratelimit *r = calloc(1, sizeof *r);
    if (!r || !(r->b = calloc(RL_SLOTS, sizeof *r->b))) {
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->capacity = per_minute;
    r->per_second = per_minute / 60.0;
    return r;
}

void dmt_ratelimit_free(dmt_ratelimit *r) {
    if (!r) return;
    pthread_mutex_destroy(&r->mu);
    free(r->b);
    free(r);
}

static unsigned long long hash(const char *s) {
    unsigned long long h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int dmt_ratelimit_take(dmt_ratelimit *r, const char *client, double now) {
    if (!r) return 0;
    if (!client) client = "";
    unsigned long long h = hash(client);
    pthread_mutex_lock(&r->mu);
    bucket *found = NULL, *oldest = NULL;
    for (int k = 0; k < RL_PROBES && !found; k++) {
        bucket *b = &r->b[(h + (unsigned long long)k) % RL_SLOTS];
        if (b->used && !strncmp(b->id, client, sizeof b->id - 1)) found = b;
        else if (!oldest || !b->used || (oldest->used && b->last < oldest->last)) oldest = b;
    }
    if (!found) { /* a new client, or one forgotten: a full bucket */
        found = oldest;
        snprintf(found->id, sizeof found->id, "%s", client);
        found->tokens = r->capacity;
        found->last = now;
        found->used = 1;
    }
    found->tokens = fmin(r->capacity, found->tokens + (now - found->last) * r->per_second);
    found->last = now;
    int wait = 0;
    if (found->tokens >= 1) {
        found->tokens -= 1;
    } else {
        wait = (int)ceil((1 - found->tokens) / r->per_second);
        if (wait < 1) wait = 1;
    }
    pthread_mutex_unlock(&r->mu);
    return wait;
}
