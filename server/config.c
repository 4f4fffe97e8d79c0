/* config.c — `deepmt serve` flags and environment variables (a flag wins over its
 * variable; every flag --some-name has the variable DEEPMT_SOME_NAME). */
#include "server/server.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/suggest.h"

typedef enum { OPT_STR, OPT_INT, OPT_LONG, OPT_SIZE, OPT_CHOICE, OPT_KEYS } opt_kind;

typedef struct {
    const char *flag;   /* without the leading -- */
    opt_kind kind;
    size_t offset;      /* into dmt_server_config */
    size_t size;        /* OPT_STR: buffer size */
    long lo, hi;        /* OPT_INT / OPT_SIZE range */
    const char *arg, *help; /* OPT_CHOICE: arg lists the choices, "a|b|c"; the int gets the index */
} option;

#define F(field) offsetof(dmt_server_config, field)
static const option options[] = {
    {"model", OPT_STR, F(model_dir), sizeof ((dmt_server_config *)0)->model_dir, 0, 0, "DIR",
     "model directory (config.json, model.safetensors, sentencepiece.model) [models/default]"},
    {"host", OPT_STR, F(host), sizeof ((dmt_server_config *)0)->host, 0, 0, "ADDR", "address to bind [127.0.0.1]"},
    {"port", OPT_INT, F(port), 0, 0, 65535, "N", "TCP port (0: any free port) [5000]"},
    {"threads", OPT_INT, F(threads), 0, 0, 1024, "N", "BLAS threads per worker (0: cores / workers) [0]"},
    {"workers", OPT_INT, F(workers), 0, 0, 64, "N",
     "model workers, each with its own buffers (0: 1 when --threads is given, else min(cores, 4) "
     "with one BLAS thread each) [0]"},
    {"precision", OPT_CHOICE, F(precision), 0, 0, 0, "f32|bf16|int8",
     "matrix-product arithmetic: bf16 (needs AVX-512 BF16) and int8 are faster, translations differ "
     "slightly [f32]"},
    {"http-threads", OPT_INT, F(http_threads), 0, 1, 64, "N", "HTTP threads (epoll thread pool) [2]"},
    {"max-batch-sentences", OPT_INT, F(max_batch_sentences), 0, 1, 4096, "N",
     "sentences in one batch; 1 turns dynamic batching off [32]"},
    {"max-batch-tokens", OPT_INT, F(max_batch_tokens), 0, 1, 1 << 24, "N",
     "padded source tokens in one batch (estimated) [4096]"},
    {"max-wait-ms", OPT_INT, F(max_wait_ms), 0, 0, 10000, "MS", "how long a batch waits to fill up [5]"},
    {"batching", OPT_CHOICE, F(batching), 0, 0, 0, "whole|continuous",
     "continuous: sentences join and leave a worker's running batch between decoder steps; whole: a batch "
     "runs to its end before the next one starts [continuous]"},
    {"max-batch-cost", OPT_LONG, F(max_batch_cost), 0, 0, 1L << 40, "N",
     "summed sentence costs in one batch, a cost being beam x (source + expected output pieces); "
     "a sentence over it gets 413 (0: auto, the largest one sentence can cost, at least 16384) [0]"},
    {"max-request-cost", OPT_LONG, F(max_request_cost), 0, 0, 1L << 40, "N",
     "summed sentence costs of one request; more gets 413 (0: no limit) [1000000]"},
    {"max-body-bytes", OPT_SIZE, F(max_body_bytes), 0, 64, 1L << 30, "BYTES",
     "largest request body (k/M suffixes) [1M]"},
    {"max-chars", OPT_INT, F(max_chars), 0, 1, INT_MAX, "N", "characters per request [20000]"},
    {"max-sentences", OPT_INT, F(max_sentences), 0, 1, 1 << 20, "N", "sentences per request [512]"},
    {"max-queue", OPT_INT, F(max_queue), 0, 1, 1 << 22, "N", "sentences waiting before 429 [4096]"},
    {"max-alternatives", OPT_INT, F(max_alternatives), 0, 0, 16, "N", "largest \"alternatives\" [8]"},
    {"req-limit", OPT_INT, F(req_limit), 0, 0, 1 << 20, "N",
     "requests a minute per client (its API key when keys are on, else its address) to /translate, "
     "/translate_file and /detect; more get 429 with Retry-After (0: no limit, as LibreTranslate's -1) [0]"},
    {"request-timeout", OPT_INT, F(request_timeout_s), 0, 0, 86400, "SEC",
     "a request waiting longer in the queue before it starts gets 503 (0: never) [60]"},
    {"drain-timeout", OPT_INT, F(drain_timeout_s), 0, 0, 86400, "SEC",
     "on SIGTERM, how long to wait for requests in flight before dropping them with 503 [60]"},
    {"probe-port", OPT_INT, F(probe_port), 0, 0, 65535, "PORT",
     "also answer GET /health and GET /ready on this port, with slots of their own, so that probes get "
     "through when the main port's connections are all taken (0: off) [0]"},
    {"max-connections", OPT_INT, F(max_connections), 0, 1, 1 << 20, "N", "open connections [1024]"},
    {"max-connections-per-ip", OPT_INT, F(max_connections_per_ip), 0, 0, 1 << 20, "N",
     "open connections from one client address (0: no limit; behind a reverse proxy, see docs/server.md) [128]"},
    {"request-read-timeout", OPT_INT, F(request_read_timeout_s), 0, 0, 86400, "SEC",
     "a request (headers and body) must arrive within this of the connection opening or of the previous "
     "answer, else the connection is closed (0: no limit) [60]"},
    {"max-file-memory", OPT_SIZE, F(max_file_memory), 0, 1024, 1L << 40, "BYTES",
     "bytes of uploaded documents being parsed, queued or translated at once; an upload beyond it gets 429 "
     "(k/M/G suffixes) [256M]"},
    {"files-dir", OPT_STR, F(files_dir), sizeof ((dmt_server_config *)0)->files_dir, 0, 0, "DIR",
     "keep translated files (/translate_file) in this folder, created when missing; replicas that share it "
     "(a volume) answer each other's downloads [a private folder under $TMPDIR, removed at exit]"},
    {"cors-origin", OPT_STR, F(cors_origin), sizeof ((dmt_server_config *)0)->cors_origin, 0, 0, "ORIGIN",
     "Access-Control-Allow-Origin on every answer and CORS preflight answers: \"*\" (any origin, as "
     "LibreTranslate), one origin, or off [*]"},
    {"log-format", OPT_CHOICE, F(log_json), 0, 0, 0, "text|json", "access log format on stderr [text]"},
    {"api-keys", OPT_KEYS, 0, 0, 0, 0, "FILE",
     "require one of these keys (one a line; env: comma list) [off]"},
};
#undef F
#define N_OPTIONS (sizeof options / sizeof *options)

void dmt_server_config_default(dmt_server_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->model_dir, sizeof c->model_dir, "models/default");
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 5000;
    c->workers = 0; /* auto, resolved after parsing */
    c->http_threads = 2;
    c->max_batch_sentences = 32;
    c->max_batch_tokens = 4096;
    c->max_wait_ms = 5;
    c->max_request_cost = 1000000;
    c->batching = 1;
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

void dmt_server_config_clear(dmt_server_config *c) {
    for (int i = 0; i < c->n_api_keys; i++) free(c->api_keys[i]);
    free(c->api_keys);
    c->api_keys = NULL;
    c->n_api_keys = 0;
}

void dmt_server_usage(FILE *f) {
    fprintf(f, "usage: deepmt serve [options]\n\n"
               "Serves a model over HTTP with a LibreTranslate-compatible JSON API (docs/server.md):\n"
               "  POST /translate            {q, source, target, format, alternatives, api_key} -> translatedText\n"
               "  POST /translate_file       multipart file (.txt .html .srt .docx .odt) -> translatedFileUrl\n"
               "  GET  /download_file/ID/NAME  a translated file, for 30 minutes\n"
               "  POST /detect               {q} -> [{language, confidence}], best first\n"
               "  POST /suggest              403: suggestions are off, as in LibreTranslate by default\n"
               "  GET  /languages            the model's languages and their targets\n"
               "  GET  /frontend/settings    what LibreTranslate's page asks (limits, keys, files)\n"
               "  GET  /spec                 the OpenAPI 3 description of all of this\n"
               "  GET  /                     a translation page for browsers (JSON for others)\n"
               "  GET  /health, /ready       liveness, and readiness once the model is loaded\n"
               "  GET  /metrics              Prometheus text format\n\n"
               "options (each also read from the environment variable shown; a flag wins):\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char env[64], left[64];
        size_t k = (size_t)snprintf(env, sizeof env, "DEEPMT_");
        for (const char *p = options[i].flag; *p && k + 1 < sizeof env; p++)
            env[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[k] = 0;
        snprintf(left, sizeof left, "--%s %s", options[i].flag, options[i].arg);
        fprintf(f, "  %-30s %s\n  %-30s   env %s\n", left, options[i].help, "", env);
    }
    fprintf(f, "  %-30s %s\n", "-m DIR", "the same as --model DIR (as in deepmt translate)");
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
    dmt_server_config_clear(c);
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
    dmt_server_config_clear(c);
    return -1;
}

static int parse_size(const char *v, long lo, long hi, size_t *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || errno) return -1;
    if (*end == 'k' || *end == 'K') x *= 1024, end++;
    else if (*end == 'm' || *end == 'M') x *= 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G') x *= 1024.0 * 1024 * 1024, end++;
    if (*end == 'i' || *end == 'B') end += *end == 'i' ? (end[1] == 'B' ? 2 : 1) : 1;
    if (*end || x < lo || x > hi) return -1;
    *out = (size_t)x;
    return 0;
}

/* Sets one option from a string; src names it in messages ("--port", "DEEPMT_PORT"). */
static int set_option(dmt_server_config *c, const option *o, const char *v, const char *src, int from_env,
                      char *err, size_t errlen) {
    char *base = (char *)c;
    switch (o->kind) {
    case OPT_STR:
        if (strlen(v) >= o->size) {
            snprintf(err, errlen, "%s: value too long", src);
            return -1;
        }
        snprintf(base + o->offset, o->size, "%s", v);
        return 0;
    case OPT_INT: {
        char *end;
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end || errno || x < o->lo || x > o->hi) {
            snprintf(err, errlen, "%s: expected an integer from %ld to %ld, got '%s'", src, o->lo, o->hi, v);
            return -1;
        }
        *(int *)(base + o->offset) = (int)x;
        return 0;
    }
    case OPT_LONG: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno || x < o->lo || x > o->hi) {
            snprintf(err, errlen, "%s: expected an integer from %ld to %ld, got '%s'", src, o->lo, o->hi, v);
            return -1;
        }
        *(long *)(base + o->offset) = (long)x;
        return 0;
    }
    case OPT_SIZE:
        if (parse_size(v, o->lo, o->hi, (size_t *)(base + o->offset))) {
            snprintf(err, errlen, "%s: expected a size from %ld to %ld bytes (k, M suffixes), got '%s'", src, o->lo,
                     o->hi, v);
            return -1;
        }
        return 0;
    case OPT_CHOICE: {
        size_t len = strlen(v);
        int index = 0;
        for (const char *p = o->arg; *p; index++) {
            const char *end = strchr(p, '|');
            size_t n = end ? (size_t)(end - p) : strlen(p);
            if (n == len && !strncmp(p, v, n)) {
                *(int *)(base + o->offset) = index;
                return 0;
            }
            p += n + (end != NULL);
        }
        char choices[128] = ""; /* "text|json" -> "text or json" */
        for (const char *p = o->arg; *p && strlen(choices) + 4 < sizeof choices; p++)
            strncat(choices, *p == '|' ? " or " : (char[]){*p, 0}, sizeof choices - strlen(choices) - 1);
        snprintf(err, errlen, "%s: expected %s, got '%s'", src, choices, v);
        return -1;
    }
    case OPT_KEYS:
        return load_keys(c, v, !from_env, err, errlen);
    }
    return -1;
}

int dmt_server_config_from_args(dmt_server_config *c, int argc, char **argv, char *err, size_t errlen) {
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char env[64];
        size_t k = (size_t)snprintf(env, sizeof env, "DEEPMT_");
        for (const char *p = options[i].flag; *p && k + 1 < sizeof env; p++)
            env[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
        env[k] = 0;
        const char *v = getenv(env);
        if (v && *v && set_option(c, &options[i], v, env, 1, err, errlen)) return -1;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            dmt_server_usage(stdout);
            return 1;
        }
        if (!strcmp(arg, "-m") || !strncmp(arg, "-m=", 3)) { /* as in deepmt translate */
            const char *v = arg[2] == '=' ? arg + 3 : a + 1 < argc ? argv[++a] : NULL;
            if (!v) {
                snprintf(err, errlen, "-m needs a value");
                return -1;
            }
            if (set_option(c, &options[0], v, "-m", 0, err, errlen)) return -1;
            continue;
        }
        if (strncmp(arg, "--", 2)) {
            snprintf(err, errlen, "unexpected argument '%s' (see deepmt serve --help)", arg);
            return -1;
        }
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nl = eq ? (size_t)(eq - name) : strlen(name);
        const option *o = NULL;
        for (size_t i = 0; i < N_OPTIONS; i++)
            if (strlen(options[i].flag) == nl && !strncmp(options[i].flag, name, nl)) o = &options[i];
        if (!o) {
            const char *names[N_OPTIONS + 2];
            char word[64];
            snprintf(word, sizeof word, "%.*s", (int)nl, name);
            for (size_t i = 0; i < N_OPTIONS; i++) names[i] = options[i].flag;
            names[N_OPTIONS] = "help";
            names[N_OPTIONS + 1] = NULL;
            const char *close = dmt_suggest(word, names);
            if (close) snprintf(err, errlen, "unknown option '%s'; did you mean --%s?", arg, close);
            else snprintf(err, errlen, "unknown option '%s' (see deepmt serve --help)", arg);
            return -1;
        }
        const char *v = eq ? eq + 1 : a + 1 < argc ? argv[++a] : NULL;
        if (!v) {
            snprintf(err, errlen, "--%s needs a value", o->flag);
            return -1;
        }
        char src[64];
        snprintf(src, sizeof src, "--%s", o->flag);
        if (set_option(c, o, v, src, 0, err, errlen)) return -1;
    }
    /* Several one-thread workers beat one many-thread worker here: a decoder step's
     * small matrix products scale poorly across BLAS threads, and with one BLAS thread
     * the few-row kernels apply (ops.c). Measured on 2 cores, default model, medians
     * of 3 interleaved rounds: 1 client 34.3 vs 20.4 sentences/s, 64 clients 111.2 vs
     * 86.9 (2 workers x 1 thread vs 1 x 2). At most 4 by default: each worker holds its own buffers (~45 MiB at
     * full batches with the default model). Given --threads alone keeps its old
     * meaning: one worker with that many BLAS threads. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (c->workers == 0) c->workers = c->threads ? 1 : (int)(cores < 4 ? cores : 4);
    if (c->threads == 0) c->threads = cores > c->workers ? (int)(cores / c->workers) : 1;
    if (c->max_sentences > c->max_queue) c->max_sentences = c->max_queue;
    if (!strcmp(c->cors_origin, "off")) c->cors_origin[0] = 0;
    return 0;
}
