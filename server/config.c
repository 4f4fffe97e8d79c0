/* config.c — `deepmt serve` flags and environment variables (a flag wins over its
 * variable; every flag --some-name has the variable DEEPMT_SOME_NAME). */
#include "server/server.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/options.h"
#include "model/model.h"

static int set_api_keys(void *target, const char *value, int from_env, char *err, size_t errlen);
static int add_model(void *target, const char *value, int from_env, char *err, size_t errlen);

#define F(field) offsetof(dmt_server_config, field)
static const dmt_option options[] = {
    {"model", 'm', DMT_OPT_CUSTOM, 0, 0, 0, 0, "DIR", DMT_MODEL_HELP, 0, add_model},
    {"models", 0, DMT_OPT_STR, F(models_folder), sizeof ((dmt_server_config *)0)->models_folder, 0, 0, "FOLDER",
     "serve every model directory in FOLDER too (a models.json there may name, order and configure them; "
     "SIGHUP reads it again); -m may also be given several times, as DIR or NAME=DIR [off]", 0, NULL},
    {"admin-key", 0, DMT_OPT_STR, F(admin_key), sizeof ((dmt_server_config *)0)->admin_key, 0, 0, "KEY",
     "enable POST /admin/reload for requests with this key (header X-Admin-Key), as SIGHUP does [off]", 0, NULL},
    {"host", 0, DMT_OPT_STR, F(host), sizeof ((dmt_server_config *)0)->host, 0, 0, "ADDR", "address to bind [127.0.0.1]", 0, NULL},
    {"port", 0, DMT_OPT_INT, F(port), 0, 0, 65535, "N", "TCP port (0: any free port) [5000]", 0, NULL},
    DMT_OPTION_THREADS(F(threads)),
    DMT_OPTION_WORKERS(F(workers)),
    DMT_OPTION_PRECISION(F(precision)),
    DMT_OPTION_NO_SHORTLIST(F(no_shortlist)),
    {"http-threads", 0, DMT_OPT_INT, F(http_threads), 0, 1, 64, "N", "HTTP threads (epoll thread pool) [2]", 0, NULL},
    DMT_OPTION_MAX_BATCH_SENTENCES(F(max_batch_sentences)),
    {"max-batch-tokens", 0, DMT_OPT_INT, F(max_batch_tokens), 0, 1, 1 << 24, "N",
     "source tokens in one batch, summed [4096]", 0, NULL},
    {"max-wait-ms", 0, DMT_OPT_INT, F(max_wait_ms), 0, 0, 10000, "MS", "how long a batch waits to fill up [5]", 0, NULL},
    DMT_OPTION_BATCHING(F(batching)),
    {"max-batch-cost", 0, DMT_OPT_LONG, F(max_batch_cost), 0, 0, 1L << 40, "N",
     "summed sentence costs in one batch, a cost being beam x (source + expected output pieces); "
     "a sentence over it gets 413 (0: auto, the largest one sentence can cost, at least 16384) [0]", 0, NULL},
    {"max-request-cost", 0, DMT_OPT_LONG, F(max_request_cost), 0, 0, 1L << 40, "N",
     "summed sentence costs of one request; more gets 413 (0: no limit) [1000000]", 0, NULL},
    {"max-body-bytes", 0, DMT_OPT_SIZE, F(max_body_bytes), 0, 64, 1L << 30, "BYTES",
     "largest request body (k/M suffixes) [1M]", 0, NULL},
    {"max-chars", 0, DMT_OPT_INT, F(max_chars), 0, 1, INT_MAX, "N", "characters per request [20000]", 0, NULL},
    {"max-sentences", 0, DMT_OPT_INT, F(max_sentences), 0, 1, 1 << 20, "N", "sentences per request [512]", 0, NULL},
    {"max-queue", 0, DMT_OPT_INT, F(max_queue), 0, 1, 1 << 22, "N", "sentences waiting before 429 [4096]", 0, NULL},
    {"max-alternatives", 0, DMT_OPT_INT, F(max_alternatives), 0, 0, 16, "N", "largest \"alternatives\" [8]", 0, NULL},
    {"req-limit", 0, DMT_OPT_INT, F(req_limit), 0, 0, 1 << 20, "N",
     "requests a minute per client (its API key when keys are on, else its address) to /translate, "
     "/translate_file and /detect; more get 429 with Retry-After (0: no limit, as LibreTranslate's -1) [0]", 0, NULL},
    {"request-timeout", 0, DMT_OPT_INT, F(request_timeout_s), 0, 0, 86400, "SEC",
     "a request waiting longer in the queue before it starts gets 503 (0: never) [60]", 0, NULL},
    {"drain-timeout", 0, DMT_OPT_INT, F(drain_timeout_s), 0, 0, 86400, "SEC",
     "on SIGTERM, how long to wait for requests in flight before dropping them with 503 [60]", 0, NULL},
    {"probe-port", 0, DMT_OPT_INT, F(probe_port), 0, 0, 65535, "PORT",
     "also answer GET /health and GET /ready on this port, with slots of their own, so that probes get "
     "through when the main port's connections are all taken (0: off) [0]", 0, NULL},
    {"max-connections", 0, DMT_OPT_INT, F(max_connections), 0, 1, 1 << 20, "N", "open connections [1024]", 0, NULL},
    {"max-connections-per-ip", 0, DMT_OPT_INT, F(max_connections_per_ip), 0, 0, 1 << 20, "N",
     "open connections from one client address (0: no limit; behind a reverse proxy, see docs/server.md) [128]", 0, NULL},
    {"request-read-timeout", 0, DMT_OPT_INT, F(request_read_timeout_s), 0, 0, 86400, "SEC",
     "a request (headers and body) must arrive within this of the connection opening or of the previous "
     "answer, else the connection is closed (0: no limit) [60]", 0, NULL},
    {"max-file-memory", 0, DMT_OPT_SIZE, F(max_file_memory), 0, 1024, 1L << 40, "BYTES",
     "bytes of uploaded documents being parsed, queued or translated at once; an upload beyond it gets 429 "
     "(k/M/G suffixes) [256M]", 0, NULL},
    {"files-dir", 0, DMT_OPT_STR, F(files_dir), sizeof ((dmt_server_config *)0)->files_dir, 0, 0, "DIR",
     "keep translated files (/translate_file) in this folder, created when missing; replicas that share it "
     "(a volume) answer each other's downloads [a private folder under $TMPDIR, removed at exit]", 0, NULL},
    {"cors-origin", 0, DMT_OPT_STR, F(cors_origin), sizeof ((dmt_server_config *)0)->cors_origin, 0, 0, "ORIGIN",
     "Access-Control-Allow-Origin on every answer and CORS preflight answers: \"*\" (any origin, as "
     "LibreTranslate), one origin, or off [*]", 0, NULL},
    {"log-format", 0, DMT_OPT_CHOICE, F(log_json), 0, 0, 0, "text|json", "access log format on stderr [text]", 0, NULL},
    {"api-keys", 0, DMT_OPT_CUSTOM, 0, 0, 0, 0, "FILE", "require one of these keys (one a line; env: comma list) [off]",
     0, set_api_keys},
};
#undef F
#define N_OPTIONS (int)(sizeof options / sizeof *options)

void dmt_server_config_default(dmt_server_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 5000;
    c->workers = 0; /* auto, resolved after parsing */
    c->http_threads = 2;
    c->max_batch_sentences = 32;
    c->max_batch_tokens = 4096;
    c->max_wait_ms = 5;
    c->max_request_cost = 1000000;
    c->batching = 1;
    c->precision = DMT_PRECISION_AUTO;
    c->max_body_bytes = 1 << 20;
    c->max_file_memory = (size_t)256 << 20;
    c->max_chars = 20000;
    c->max_sentences = 512;
    c->max_queue = 4096;
    c->max_alternatives = 8;
    c->request_timeout_s = 60;
    c->drain_timeout_s = 60;
    c->max_connections = 1024;
    c->max_connections_per_ip = 128;
    c->request_read_timeout_s = 60;
    /* as LibreTranslate: any origin may call the API from a browser. Keys travel in
     * request bodies, never in cookies, so a foreign page gains nothing it could not
     * do itself; --cors-origin off (or one origin) narrows it. */
    snprintf(c->cors_origin, sizeof c->cors_origin, "*");
}

/* --model / DEEPMT_MODEL: one more model; a flag's first replaces the variable's. */
static int add_model(void *target, const char *value, int from_env, char *err, size_t errlen) {
    dmt_server_config *c = target;
    if (!from_env && c->model_dirs_from_env) {
        for (int i = 0; i < c->n_model_dirs; i++) free(c->model_dirs[i]);
        c->n_model_dirs = 0;
        c->model_dirs_from_env = 0;
    }
    if (!*value || strlen(value) >= 1024) {
        snprintf(err, errlen, "--model: %s model directory name", *value ? "too long a" : "an empty");
        return -1;
    }
    char **dirs = realloc(c->model_dirs, sizeof *dirs * (size_t)(c->n_model_dirs + 1));
    if (!dirs || !(dirs[c->n_model_dirs] = strdup(value))) {
        if (dirs) c->model_dirs = dirs;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->model_dirs = dirs;
    c->n_model_dirs++;
    c->model_dirs_from_env = from_env;
    return 0;
}

static void clear_keys(dmt_server_config *c) {
    for (int i = 0; i < c->n_api_keys; i++) free(c->api_keys[i]);
    free(c->api_keys);
    c->api_keys = NULL;
    c->n_api_keys = 0;
}

void dmt_server_config_clear(dmt_server_config *c) {
    for (int i = 0; i < c->n_model_dirs; i++) free(c->model_dirs[i]);
    free(c->model_dirs);
    c->model_dirs = NULL;
    c->n_model_dirs = 0;
    clear_keys(c);
}

void dmt_server_usage(FILE *f) {
    fprintf(f, "usage: deepmt serve [options] [MODEL_DIR]\n\n"
               "Serves one model or several (-m repeated, --models FOLDER) over HTTP with a\n"
               "LibreTranslate-compatible JSON API (docs/server.md); SIGHUP reloads the model list:\n"
               "  POST /translate            {q, source, target, format, alternatives, api_key} -> translatedText\n"
               "  POST /translate_file       multipart file (.txt .html .srt .docx .odt) -> translatedFileUrl\n"
               "  GET  /download_file/ID/NAME  a translated file, for 30 minutes\n"
               "  POST /detect               {q} -> [{language, confidence}], best first\n"
               "  POST /suggest              403: suggestions are off, as in LibreTranslate by default\n"
               "  GET  /languages            the languages served and their targets (pivots via English too)\n"
               "  GET  /models               the models served, and the latest reload's failures\n"
               "  POST /admin/reload         read the model list again (--admin-key, header X-Admin-Key)\n"
               "  GET  /frontend/settings    what LibreTranslate's page asks (limits, keys, files)\n"
               "  GET  /spec                 the OpenAPI 3 description of all of this\n"
               "  GET  /                     a translation page for browsers (JSON for others)\n"
               "  GET  /health, /ready       liveness, and readiness once the model is loaded\n"
               "  GET  /metrics              Prometheus text format\n\n"
               "options (each also read from the environment variable shown; a flag wins):\n");
    dmt_options_usage(f, options, N_OPTIONS);
    fprintf(f, "  %-30s %s\n", "-h, --help", "this help");
}

/* Longest API key accepted: far above any generated key (a 256-bit key is 64 hex
 * characters), small enough that a wrong file (a binary, a log) is refused. */
#define MAX_API_KEY_BYTES 1024

/* Adds the key k[0..len) after trimming surrounding whitespace. where names it in
 * messages ("FILE line 3", "DEEPMT_API_KEYS entry 2"). A blank line or a '#'
 * comment is skipped when skip_blank; otherwise an empty key is an error. */
static int add_key(dmt_server_config *c, const char *k, size_t len, int skip_blank, const char *where, char *err,
                   size_t errlen) {
    while (len && isspace((unsigned char)*k)) k++, len--;
    while (len && isspace((unsigned char)k[len - 1])) len--;
    if (skip_blank && (!len || *k == '#')) return 0;
    if (!len) {
        snprintf(err, errlen, "--api-keys: %s: empty key", where);
        return -1;
    }
    if (len > MAX_API_KEY_BYTES) {
        snprintf(err, errlen, "--api-keys: %s: key too long (%zu bytes, limit %d)", where, len, MAX_API_KEY_BYTES);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)k[i] < 0x20 || k[i] == 0x7F) {
            snprintf(err, errlen, "--api-keys: %s: control character (byte 0x%02x) in the key", where,
                     (unsigned char)k[i]);
            return -1;
        }
    char **keys = realloc(c->api_keys, sizeof *keys * (size_t)(c->n_api_keys + 1));
    if (!keys) goto oom;
    c->api_keys = keys;
    if (!(keys[c->n_api_keys] = strndup(k, len))) goto oom;
    c->n_api_keys++;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

/* Keys from a comma list (env; no empty entries) or a file: one key a line, of
 * any length (read whole, never split), blank lines and '#' comments skipped. */
static int load_keys(dmt_server_config *c, const char *value, int is_file, char *err, size_t errlen) {
    char where[1100];
    clear_keys(c);
    if (!is_file) {
        int entry = 1;
        for (const char *p = value;; entry++) {
            const char *e = strchr(p, ',');
            size_t l = e ? (size_t)(e - p) : strlen(p);
            snprintf(where, sizeof where, "DEEPMT_API_KEYS entry %d", entry);
            if (add_key(c, p, l, 0, where, err, errlen)) goto fail;
            if (!e) break;
            p = e + 1;
        }
    } else {
        FILE *f = fopen(value, "r");
        if (!f) {
            snprintf(err, errlen, "--api-keys: cannot open %s: %s", value, strerror(errno));
            return -1;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        long lineno = 0;
        while ((n = getline(&line, &cap, f)) >= 0) {
            snprintf(where, sizeof where, "%.1000s line %ld", value, ++lineno);
            if (add_key(c, line, (size_t)n, 1, where, err, errlen)) {
                free(line);
                fclose(f);
                goto fail;
            }
        }
        int read_error = ferror(f);
        free(line);
        fclose(f);
        if (read_error) {
            snprintf(err, errlen, "--api-keys: cannot read %s", value);
            goto fail;
        }
    }
    if (c->n_api_keys == 0) {
        snprintf(err, errlen, "--api-keys: no keys in %s", is_file ? value : "DEEPMT_API_KEYS");
        return -1;
    }
    return 0;
fail:
    clear_keys(c);
    return -1;
}

static int set_api_keys(void *target, const char *value, int from_env, char *err, size_t errlen) {
    return load_keys(target, value, !from_env, err, errlen);
}

int dmt_server_config_from_args(dmt_server_config *c, int argc, char **argv, char *err, size_t errlen) {
    const char *dir[1];
    int n_dir = 0, given[N_OPTIONS];
    memset(given, 0, sizeof given);
    int rc = dmt_options_parse("serve", options, N_OPTIONS, c, argc, argv, given, dir, 1, &n_dir, err, errlen);
    if (rc == 1) {
        dmt_server_usage(stdout);
        return 1;
    }
    if (rc) return -1;
    /* a model's own batch limit (config.json "batching") lowers the default, not a limit the operator gave */
    c->model_batch_limits = 1;
    for (int i = 0; i < N_OPTIONS; i++)
        if (given[i] && options[i].offset == offsetof(dmt_server_config, max_batch_sentences))
            c->model_batch_limits = 0;
    if (n_dir && add_model(c, dir[0], 0, err, errlen)) return -1; /* deepmt serve models/default */
    /* a models folder replaces DEEPMT_MODEL's one model (an image's default), while
     * --model flags on the command line add to it */
    if (c->models_folder[0] && c->model_dirs_from_env) {
        for (int i = 0; i < c->n_model_dirs; i++) free(c->model_dirs[i]);
        c->n_model_dirs = 0;
        c->model_dirs_from_env = 0;
    }
    if (c->n_model_dirs == 0 && !c->models_folder[0] && add_model(c, DMT_DEFAULT_MODEL, 0, err, errlen)) return -1;
    /* Several one-thread workers beat one many-thread worker here: a decoder step's
     * small matrix products scale poorly across BLAS threads, and with one BLAS thread
     * the few-row kernels apply (ops.c). Measured on 2 cores, default model, medians
     * of 3 interleaved rounds: 1 client 34.3 vs 20.4 sentences/s, 64 clients 111.2 vs
     * 86.9 (2 workers x 1 thread vs 1 x 2). At most 4 by default: each worker holds
     * its own buffers (~45 MiB at full batches with the default model). */
    dmt_options_threads(c->threads, c->workers, &c->workers, &c->blas_threads);
    if (c->max_sentences > c->max_queue) c->max_sentences = c->max_queue;
    if (!strcmp(c->cors_origin, "off")) c->cors_origin[0] = 0;
    return 0;
}
