/* config.h — `deepmt serve`'s settings: flags, DEEPMT_* variables, defaults and
 * checks (config.c). Every part of the server reads them; none writes them. */
#ifndef DEEPMT_SERVER_CONFIG_H
#define DEEPMT_SERVER_CONFIG_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char **model_dirs;       /* --model DIR or NAME=DIR, repeatable / DEEPMT_MODEL; none: models/default */
    int n_model_dirs;
    int model_dirs_from_env; /* the list holds DEEPMT_MODEL's: the first --model replaces it */
    char models_folder[1024]; /* --models: serve every model directory in it (models.json may order them) */
    char admin_key[256];     /* --admin-key: POST /admin/reload with it; "" = no admin endpoint */
    char host[256];          /* --host: address to bind (IPv4 or IPv6 literal, or a name) */
    int port;                /* --port */
    int probe_port;          /* --probe-port: /health and /ready on a listener of their own; 0 = off */
    int threads;             /* --threads: CPU threads in all; 0 = the cores */
    int workers;             /* --workers: model workers, each with its own state; 0 = min(threads, 4) */
    int blas_threads;        /* per worker: threads / workers (resolved by dmt_server_config_from_args) */
    int precision;           /* --precision: a dmt_precision; AUTO by default */
    int no_shortlist;        /* --no-shortlist */
    int http_threads;        /* --http-threads: libmicrohttpd thread pool */
    int max_batch_sentences; /* --max-batch-sentences: 1 turns dynamic batching off */
    int model_batch_limits;  /* --max-batch-sentences not given: a model's config.json batching.max_sentences
                              * lowers it for that model (model/config.h) */
    int max_batch_tokens;    /* --max-batch-tokens: source tokens in one batch, summed */
    int max_wait_ms;         /* --max-wait-ms: how long a batch waits to fill up */
    int batching;            /* --batching: 0 whole batches, 1 continuous (iteration-level) */
    long max_batch_cost;     /* --max-batch-cost: summed sentence costs in one batch; 0 = auto */
    long max_request_cost;   /* --max-request-cost: of one request; 0 = no limit */
    size_t max_body_bytes;   /* --max-body-bytes */
    int max_chars;           /* --max-chars: characters (code points) per request */
    int max_sentences;       /* --max-sentences: sentences per request after splitting */
    int max_queue;           /* --max-queue: sentences waiting; more gets 429 */
    int max_alternatives;    /* --max-alternatives */
    int req_limit;           /* --req-limit: requests a minute per client (key, else address); 0 = none */
    int request_timeout_s;   /* --request-timeout: seconds a request may wait in the queue before it starts */
    int drain_timeout_s;     /* --drain-timeout: seconds a SIGTERM drain waits for requests in flight */
    int max_connections;     /* --max-connections */
    int max_connections_per_ip; /* --max-connections-per-ip: 0 = no limit */
    int request_read_timeout_s; /* --request-read-timeout: whole request (headers + body); 0 = none */
    size_t max_file_memory;  /* --max-file-memory: bytes of documents in flight */
    char files_dir[200];     /* --files-dir: translated files, shared by replicas; "" = a private temp folder */
    char cors_origin[256];   /* --cors-origin: "" = no CORS headers */
    int log_json;            /* --log-format json (else text) */
    char **api_keys;         /* --api-keys FILE / DEEPMT_API_KEYS: NULL = no key needed */
    int n_api_keys;
} dmt_server_config;

void dmt_server_config_default(dmt_server_config *c);

/* Fills c from the environment, then from argv (argv[0] is "serve"; flags win).
 * 0 to run, 1 when --help was printed (exit 0), -1 with a message (exit 2). */
int dmt_server_config_from_args(dmt_server_config *c, int argc, char **argv, char *err, size_t errlen);
void dmt_server_config_clear(dmt_server_config *c);
void dmt_server_usage(FILE *f);

#endif
