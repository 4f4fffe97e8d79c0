/* metrics.c — request, latency and batch counters, rendered as Prometheus text.
 *
 * One mutex guards everything: updates are a handful of additions per request or
 * batch, far below the cost of either. */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double latency_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define N_LAT (sizeof latency_buckets / sizeof *latency_buckets)
static const int batch_buckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_BATCH (sizeof batch_buckets / sizeof *batch_buckets)
#define N_STATUS 16

struct dmt_metrics {
    pthread_mutex_t mu;
    struct { int code; long long n; } status[N_STATUS];
    long long lat_count[N_LAT + 1];  /* per bucket (not cumulative); last = +Inf */
    double lat_sum;
    long long lat_total;
    long long batch_count[N_BATCH + 1];
    long long batches, batch_sentences;
    long long step_count[N_BATCH + 1]; /* continuous batching: sentences a decoder step advanced */
    long long steps, step_sentences;
    double batch_seconds;
    long long sentences, src_tokens, out_tokens, rejected, read_timeouts, evicted_connections;
};

dmt_metrics *dmt_metrics_new(void) {
    dmt_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void dmt_metrics_free(dmt_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void dmt_metrics_request(dmt_metrics *m, int status, double seconds) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < N_STATUS; i++) {
        if (m->status[i].n == 0 || m->status[i].code == status) {
            m->status[i].code = status;
            m->status[i].n++;
            break;
        }
    }
    size_t b = 0;
    while (b < N_LAT && seconds > latency_buckets[b]) b++;
    m->lat_count[b]++;
    m->lat_sum += seconds;
    m->lat_total++;
    pthread_mutex_unlock(&m->mu);
}

/* The batch_buckets bucket of a sentence count (N_BATCH: +Inf). */
static size_t sentence_bucket(int sentences) {
    size_t b = 0;
    while (b < N_BATCH && sentences > batch_buckets[b]) b++;
    return b;
}

void dmt_metrics_batch(dmt_metrics *m, int sentences, long src_tokens, long out_tokens, double seconds) {
    pthread_mutex_lock(&m->mu);
    m->batch_count[sentence_bucket(sentences)]++;
    m->batches++;
    m->batch_sentences += sentences;
    m->batch_seconds += seconds;
    m->sentences += sentences;
    m->src_tokens += src_tokens;
    m->out_tokens += out_tokens;
    pthread_mutex_unlock(&m->mu);
}

void dmt_metrics_step(dmt_metrics *m, int sentences) {
    pthread_mutex_lock(&m->mu);
    m->step_count[sentence_bucket(sentences)]++;
    m->steps++;
    m->step_sentences += sentences;
    pthread_mutex_unlock(&m->mu);
}

void dmt_metrics_rejected(dmt_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->rejected++;
    pthread_mutex_unlock(&m->mu);
}

void dmt_metrics_read_timeout(dmt_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->read_timeouts++;
    pthread_mutex_unlock(&m->mu);
}

void dmt_metrics_connection_evicted(dmt_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->evicted_connections++;
    pthread_mutex_unlock(&m->mu);
}

/* A growing string for the exposition. */
typedef struct { char *s; size_t len, cap; int oom; } buf;

static void put(buf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* A histogram of sentence counts over batch_buckets: per-bucket counts (not
 * cumulative; the last is +Inf), their sum and count. */
static void put_sentences(buf *b, const char *name, const char *help, const long long *count, long long sum,
                          long long n) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    long long cum = 0;
    for (size_t i = 0; i < N_BATCH; i++) {
        cum += count[i];
        put(b, "%s_bucket{le=\"%d\"} %lld\n", name, batch_buckets[i], cum);
    }
    put(b, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %lld\n%s_count %lld\n", name, n, name, sum, name, n);
}

char *dmt_metrics_render(dmt_metrics *m, int queue_sentences, int busy_workers, int ready, int active_requests) {
    buf b = {0};
    pthread_mutex_lock(&m->mu);
    put(&b, "# HELP deepmt_requests_total HTTP requests answered, by status code (0: client gone).\n"
            "# TYPE deepmt_requests_total counter\n");
    for (int i = 0; i < N_STATUS && m->status[i].n; i++)
        put(&b, "deepmt_requests_total{code=\"%d\"} %lld\n", m->status[i].code, m->status[i].n);
    put(&b, "# HELP deepmt_request_duration_seconds Time from the request's headers to its completion.\n"
            "# TYPE deepmt_request_duration_seconds histogram\n");
    long long cum = 0;
    for (size_t i = 0; i < N_LAT; i++) {
        cum += m->lat_count[i];
        put(&b, "deepmt_request_duration_seconds_bucket{le=\"%g\"} %lld\n", latency_buckets[i], cum);
    }
    put(&b, "deepmt_request_duration_seconds_bucket{le=\"+Inf\"} %lld\n", m->lat_total);
    put(&b, "deepmt_request_duration_seconds_sum %.6f\ndeepmt_request_duration_seconds_count %lld\n", m->lat_sum,
        m->lat_total);
    put_sentences(&b, "deepmt_batch_sentences", "Sentences per batch run by a worker.", m->batch_count,
                  m->batch_sentences, m->batches);
    put_sentences(&b, "deepmt_step_sentences", "Sentences a decoder step advanced together (continuous batching).",
                  m->step_count, m->step_sentences, m->steps);
    put(&b, "# HELP deepmt_batch_seconds_total Time workers spent running batches.\n"
            "# TYPE deepmt_batch_seconds_total counter\ndeepmt_batch_seconds_total %.6f\n", m->batch_seconds);
    put(&b, "# HELP deepmt_sentences_translated_total Sentences translated.\n"
            "# TYPE deepmt_sentences_translated_total counter\ndeepmt_sentences_translated_total %lld\n",
        m->sentences);
    put(&b, "# HELP deepmt_source_tokens_total Source tokens read.\n"
            "# TYPE deepmt_source_tokens_total counter\ndeepmt_source_tokens_total %lld\n", m->src_tokens);
    put(&b, "# HELP deepmt_tokens_generated_total Tokens generated (best hypothesis).\n"
            "# TYPE deepmt_tokens_generated_total counter\ndeepmt_tokens_generated_total %lld\n", m->out_tokens);
    put(&b, "# HELP deepmt_rejected_total Requests refused because the queue was full.\n"
            "# TYPE deepmt_rejected_total counter\ndeepmt_rejected_total %lld\n", m->rejected);
    put(&b, "# HELP deepmt_read_timeouts_total Connections closed because a request was not read in time.\n"
            "# TYPE deepmt_read_timeouts_total counter\ndeepmt_read_timeouts_total %lld\n", m->read_timeouts);
    put(&b, "# HELP deepmt_connections_evicted_total Idle connections closed to keep room for new clients "
            "near --max-connections.\n"
            "# TYPE deepmt_connections_evicted_total counter\ndeepmt_connections_evicted_total %lld\n",
        m->evicted_connections);
    pthread_mutex_unlock(&m->mu);
    put(&b, "# HELP deepmt_queue_sentences Sentences waiting for a worker.\n"
            "# TYPE deepmt_queue_sentences gauge\ndeepmt_queue_sentences %d\n", queue_sentences);
    put(&b, "# HELP deepmt_busy_workers Workers running a batch.\n"
            "# TYPE deepmt_busy_workers gauge\ndeepmt_busy_workers %d\n", busy_workers);
    put(&b, "# HELP deepmt_requests_in_flight Requests received and not yet answered.\n"
            "# TYPE deepmt_requests_in_flight gauge\ndeepmt_requests_in_flight %d\n", active_requests);
    put(&b, "# HELP deepmt_ready 1 once the model is loaded.\n"
            "# TYPE deepmt_ready gauge\ndeepmt_ready %d\n", ready);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
