/* ratelimit.h — requests per minute per client (--req-limit), as LibreTranslate's
 * --req-limit: a token bucket per client (dmt_api_client_id: its API key when keys
 * are on, else its address) that holds at most N requests and refills N a minute.
 * Thread-safe; bounded memory (the least recently seen clients are forgotten first,
 * which only ever gives them a full bucket again). */
#ifndef DEEPMT_SERVER_RATELIMIT_H
#define DEEPMT_SERVER_RATELIMIT_H

typedef struct dmt_ratelimit dmt_ratelimit;

/* per_minute 0: no limit (NULL is returned, and every call below allows). */
dmt_ratelimit *dmt_ratelimit_new(int per_minute);
void dmt_ratelimit_free(dmt_ratelimit *r);
/* Takes one request from client's bucket at time now (seconds). 0 when allowed;
 * else the seconds until the next request would be (>= 1), and nothing is taken. */
int dmt_ratelimit_take(dmt_ratelimit *r, const char *client, double now);

#endif
