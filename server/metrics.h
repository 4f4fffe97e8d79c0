/* metrics.h — the server's counters and histograms, rendered as Prometheus text
 * (metrics.c). Thread-safe: HTTP threads count requests, workers count batches. */
#ifndef DEEPMT_SERVER_METRICS_H
#define DEEPMT_SERVER_METRICS_H


typedef struct dmt_metrics dmt_metrics;
dmt_metrics *dmt_metrics_new(void);
void dmt_metrics_free(dmt_metrics *m);
/* One finished HTTP request (status 0: the client went away before the answer). */
void dmt_metrics_request(dmt_metrics *m, int status, double seconds);
/* One batch run by a worker. */
void dmt_metrics_batch(dmt_metrics *m, int sentences, long src_tokens, long out_tokens, double seconds);
/* One decoder step of a continuous worker's session, over this many sentences. */
void dmt_metrics_step(dmt_metrics *m, int sentences);
void dmt_metrics_rejected(dmt_metrics *m); /* a request refused because the queue was full */
void dmt_metrics_read_timeout(dmt_metrics *m); /* a connection closed by --request-read-timeout */
void dmt_metrics_connection_evicted(dmt_metrics *m); /* an idle connection closed near --max-connections */
/* The Prometheus text exposition; malloc'd, NUL-terminated. */
char *dmt_metrics_render(dmt_metrics *m, int queue_sentences, int busy_workers, int ready, int active_requests);

#endif
