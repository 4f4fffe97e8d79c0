/* http.c — libmicrohttpd glue: routing, body limits, suspend/resume, responses.
 *
 * The daemon runs a small pool of HTTP threads over epoll (not a thread a
 * connection). Each request gets a conn_ctx on its first callback, freed in the
 * completion callback (which also writes the access log). POST /translate:
 *   1st call   route, method, readiness and Content-Length checks (413 before a
 *              single body byte is read);
 *   body       appended up to --max-body-bytes; beyond that counted, not kept;
 *   last call  parse (JSON or form) and validate (api.c); queue the sentences and
 *              MHD_suspend_connection — nothing here waits for the model;
 *   resumed    a worker finished the request and called MHD_resume_connection;
 *              the answer is built and queued.
 */
#include "server/transport/http.h"
#include "server/clock.h"
#include "server/log.h"
#include "server/ratelimit.h"
#include "text/textsafe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/api/files.h"
#include "server/api/lt_api.h"
#include "server/api/webpage.h"
#include "base/utf8.h"

#define DEEPMT_VERSION_STR "0.1.0"

typedef enum { R_NONE, R_ROOT, R_TRANSLATE, R_LANGUAGES, R_HEALTH, R_READY, R_METRICS, R_SETTINGS, R_DETECT, R_SUGGEST,
               R_SPEC, R_TRANSLATE_FILE, R_DOWNLOAD, R_MODELS, R_ADMIN_RELOAD } route;

static const struct { const char *path; route r; const char *allow; } routes[] = {
    {"/", R_ROOT, "GET, HEAD, OPTIONS"},
    {"/translate", R_TRANSLATE, "POST, OPTIONS"},
    {"/languages", R_LANGUAGES, "GET, HEAD, POST, OPTIONS"},
    {"/health", R_HEALTH, "GET, HEAD, OPTIONS"},
    {"/ready", R_READY, "GET, HEAD, OPTIONS"},
    {"/metrics", R_METRICS, "GET, HEAD, OPTIONS"},
    {"/frontend/settings", R_SETTINGS, "GET, HEAD, OPTIONS"},
    {"/detect", R_DETECT, "POST, OPTIONS"},
    {"/suggest", R_SUGGEST, "POST, OPTIONS"},
    {"/spec", R_SPEC, "GET, HEAD, OPTIONS"},
    {"/translate_file", R_TRANSLATE_FILE, "POST, OPTIONS"},
    {"/download_file/", R_DOWNLOAD, "GET, HEAD, OPTIONS"}, /* a prefix: /download_file/ID/NAME */
    {"/models", R_MODELS, "GET, HEAD, OPTIONS"},
    {"/admin/reload", R_ADMIN_RELOAD, "POST, OPTIONS"},
};

/* Routes whose POST body is read (and limited) like /translate's. */
static int takes_body(route r) { return r == R_TRANSLATE || r == R_DETECT || r == R_SUGGEST || r == R_TRANSLATE_FILE; }
/* Routes that queue sentences for the model. */
static int translates(route r) { return r == R_TRANSLATE || r == R_TRANSLATE_FILE; }

/* ST_READY: an answer decided off the HTTP thread (the parser thread's, for
 * /translate_file) waits in pending; it is queued when the connection resumes. */
typedef enum { ST_NEW, ST_ROUTE, ST_BODY, ST_PARSING, ST_QUEUED, ST_FINISHED, ST_READY, ST_ANSWERED } conn_state;

typedef struct {
    dmt_server *srv;
    struct MHD_Connection *conn;
    conn_state state;
    int route_index;
    double t0;
    char method[16], path[128], client[64];
    /* body */
    char *body;
    size_t body_len, body_cap, body_seen;
    /* translate */
    dmt_api_request *req;
    dmt_file_job *file;        /* /translate_file: the document being translated */
    pthread_mutex_t mu;        /* state, suspended: HTTP thread vs worker's done() */
    int suspended;
    int http11;                /* the request is HTTP/1.1: it may be sent an interim 1xx */
    int probed;                /* work_alive sent its "100 Continue" probe (watcher thread only) */
    /* answer */
    int status;
    size_t bytes;
    json_t *pending;           /* ST_READY: the answer, its status and Retry-After (or NULL) */
    int pending_status;
    const char *pending_retry;
} conn_ctx;

/* ---- responses ---- */

static void add_common_headers(conn_ctx *c, struct MHD_Response *resp) {
    const dmt_server_config *cfg = c->srv->cfg;
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff"); /* every answer is what its type says */
    if (cfg->cors_origin[0]) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", cfg->cors_origin);
        if (strcmp(cfg->cors_origin, "*")) MHD_add_response_header(resp, "Vary", "Origin");
    }
    if (atomic_load(&c->srv->draining)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
}

/* Queues a response with the given body (copied); extra header pairs are a
 * NULL-terminated list of name, value. */
static enum MHD_Result respond_raw(conn_ctx *c, int status, const char *type, const char *data, size_t len, ...) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!resp) return MHD_NO;
    if (type) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    va_list ap;
    va_start(ap, len);
    for (const char *name; (name = va_arg(ap, const char *));) {
        const char *value = va_arg(ap, const char *);
        MHD_add_response_header(resp, name, value);
    }
    va_end(ap);
    add_common_headers(c, resp);
    enum MHD_Result r = MHD_queue_response(c->conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    c->status = status;
    c->bytes = len;
    c->state = ST_ANSWERED;
    return r;
}

/* Sends j (stolen) as JSON; one optional extra header. */
static enum MHD_Result respond_json_h(conn_ctx *c, int status, json_t *j, const char *hname, const char *hvalue) {
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL; /* 99.9, not 99.900000000000006 */
    json_decref(j);
    if (!s) { /* messages are escaped to valid UTF-8 (dmt_api_error): only an allocation fails here */
        static const char oom[] = "{\"error\":\"internal error: cannot build the answer (out of memory)\"}";
        return respond_raw(c, 500, "application/json", oom, sizeof oom - 1, (char *)NULL);
    }
    size_t len = strlen(s);
    enum MHD_Result r = hname ? respond_raw(c, status, "application/json", s, len, hname, hvalue, (char *)NULL)
                              : respond_raw(c, status, "application/json", s, len, (char *)NULL);
    free(s);
    return r;
}

static enum MHD_Result respond_json(conn_ctx *c, int status, json_t *j) { return respond_json_h(c, status, j, NULL, NULL); }

static enum MHD_Result respond_error(conn_ctx *c, int status, const char *msg) {
    return respond_json(c, status, dmt_api_error("%s", msg));
}

/* ---- the worker's side: a request's sentences are all done ---- */

/* Runs on a worker thread. The resume comes after the unlock: once resumed, the
 * HTTP thread may answer and free c at any moment, so c must not be touched. */
static void work_done(dmt_api_request *r) {
    conn_ctx *c = r->user;
    struct MHD_Connection *conn = c->conn;
    pthread_mutex_lock(&c->mu);
    c->state = ST_FINISHED;
    int resume = c->suspended;
    c->suspended = 0;
    pthread_mutex_unlock(&c->mu);
    if (resume) MHD_resume_connection(conn);
}

/* Polled by the scheduler (watcher thread) while the request waits or runs: has
 * the client gone? The connection is suspended, so libmicrohttpd reads nothing
 * from it meanwhile. A reset means nobody will read the answer. End of stream (the
 * client's FIN) is either a close or a half-close (shutdown(SHUT_WR), then read the
 * answer: halfclose.c delivers it), and the two look the same from here. So the
 * first FIN is answered with an interim "HTTP/1.1 100 Continue" (RFC 9110 15.2: an
 * HTTP/1.1 client must accept 1xx responses it did not ask for; curl, Python's
 * http.client and browsers skip them): a client that closed its socket answers
 * those bytes with a reset, seen at the next poll; a half-closed one reads them
 * and stays. HTTP/1.0 requests may not be sent a 1xx, and /translate_file is not
 * probed: for those a FIN counts as a half-close (only a reset means gone). A
 * client that sends more (a pipelined request) counts as there. */
static int work_alive(dmt_api_request *r) {
    conn_ctx *c = r->user;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 1;
    if (p.revents & (POLLHUP | POLLERR)) return 0;
    if (p.revents & POLLRDHUP) {
        /* HTTP/1.0 may not be sent a 1xx, and /translate_file's answer is built by
         * libmicrohttpd's side: no probe for those. A FIN is then taken for a
         * half-close (their answer still arrives, halfclose.c); a client that closed
         * outright costs its work, and its answer finds the socket gone. */
        if (!c->http11 || c->file) return 1;
        if (!c->probed) {
            static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
            c->probed = 1;
            return send(ci->connect_fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof probe - 1;
        }
        return 1; /* probed: still here until a reset says otherwise */
    }
    char b;
    ssize_t got = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return got > 0 || (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

/* ---- POST /translate ---- */

typedef struct {
    json_t *obj;
    char *key;
    char *val;
    size_t len;
    int bad;
    char err[256];
} form_state;

/* Appends a field value (or a piece of one: off > 0) to fs; flushes on key change. */
static void form_flush(form_state *fs) {
    if (!fs->key) return;
    size_t bad_at;
    if (!fs->bad && fs->len && memchr(fs->val, 0, fs->len)) { /* "%00": a key "k1%00junk" must not pass as "k1" */
        snprintf(fs->err, sizeof fs->err, "form field '%.64s' contains a NUL byte (%%00)", fs->key);
        fs->bad = 1;
    }
    if (!fs->bad && !dmt_utf8_validate(fs->val, fs->len, &bad_at)) {
        snprintf(fs->err, sizeof fs->err, "invalid UTF-8 in form field '%.64s' at byte %zu", fs->key, bad_at);
        fs->bad = 1;
    }
    if (!fs->bad) {
        json_t *v = json_stringn(fs->val ? fs->val : "", fs->len), *old = json_object_get(fs->obj, fs->key);
        if (!v) {
            snprintf(fs->err, sizeof fs->err, "form field '%.64s' is not valid text", fs->key);
            fs->bad = 1;
        } else if (!old) {
            json_object_set_new(fs->obj, fs->key, v);
        } else if (json_is_array(old)) {
            json_array_append_new(old, v);
        } else {
            json_object_set_new(fs->obj, fs->key, json_pack("[O, o]", old, v));
        }
    }
    free(fs->key);
    free(fs->val);
    fs->key = fs->val = NULL;
    fs->len = 0;
}

static enum MHD_Result form_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *encoding, const char *data, uint64_t off,
                                  size_t size) {
    form_state *fs = cls;
    if (!key) return MHD_YES;
    if (!fs->key || off == 0 || strcmp(fs->key, key)) {
        form_flush(fs);
        fs->key = strdup(key);
    }
    if (size) {
        char *v = realloc(fs->val, fs->len + size + 1);
        if (!v || !fs->key) return MHD_NO;
        memcpy(v + fs->len, data, size);
        fs->val = v;
        fs->len += size;
    }
    return MHD_YES;
}

/* Form body -> JSON object of strings (a repeated key becomes an array). */
static json_t *parse_form(conn_ctx *c, char *err, size_t errlen) {
    form_state fs = {.obj = json_object()};
    struct MHD_PostProcessor *pp = MHD_create_post_processor(c->conn, 16 * 1024, form_field, &fs);
    if (!pp) {
        json_decref(fs.obj);
        snprintf(err, errlen, "cannot parse the form body");
        return NULL;
    }
    enum MHD_Result ok = MHD_post_process(pp, c->body ? c->body : "", c->body_len);
    MHD_destroy_post_processor(pp);
    form_flush(&fs);
    if (ok != MHD_YES || fs.bad) {
        snprintf(err, errlen, "%s", fs.bad ? fs.err : "malformed form body");
        free(fs.key);
        free(fs.val);
        json_decref(fs.obj);
        return NULL;
    }
    return fs.obj;
}

static json_t *parse_body(conn_ctx *c, char *err, size_t errlen) {
    const char *type = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (type && (!strncasecmp(type, "application/x-www-form-urlencoded", 33) ||
                 !strncasecmp(type, "multipart/form-data", 19)))
        return parse_form(c, err, errlen);
    size_t bad_at;
    if (!dmt_utf8_validate(c->body, c->body_len, &bad_at)) {
        snprintf(err, errlen, "invalid UTF-8 in the request body at byte %zu", bad_at);
        return NULL;
    }
    if (c->body_len == 0) {
        snprintf(err, errlen, "empty request body: expected JSON or a form");
        return NULL;
    }
    json_error_t jerr;
    json_t *j = json_loadb(c->body, c->body_len, 0, &jerr);
    if (!j) snprintf(err, errlen, "invalid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    return j;
}

typedef enum { Q_QUEUED, Q_FINISHED, Q_REFUSED } queue_outcome;
static queue_outcome queue_translation(conn_ctx *c, json_t *body, json_t **answer, int *status,
                                       const char **retry_after);

/* Runs on the files' parser thread: the document is parsed. Its sentences are queued
 * from here, the connection still suspended, so that it resumes once, with an answer
 * ready (ST_FINISHED, or ST_READY for a refusal). A resume in between would let
 * libmicrohttpd read the end of a half-closed client's stream before the handler
 * could queue the work: the connection would end with nothing to answer (halfclose.c).
 * As in work_done, c is not touched after the resume. */
static void file_parsed(void *arg) {
    conn_ctx *c = arg;
    struct MHD_Connection *conn = c->conn;
    char err[1024] = "";
    json_t *body = NULL;
    pthread_mutex_lock(&c->mu); /* a worker's work_done waits until the state is set */
    int status = dmt_file_job_request(c->file, &body, err, sizeof err);
    if (status) {
        c->pending = dmt_api_error("%s", err);
        c->pending_status = status;
        c->pending_retry = NULL;
        c->state = ST_READY;
    } else {
        queue_outcome q = queue_translation(c, body, &c->pending, &c->pending_status, &c->pending_retry);
        if (q == Q_QUEUED) {
            c->state = ST_QUEUED;
            pthread_mutex_unlock(&c->mu); /* work_done resumes the connection */
            return;
        }
        c->state = q == Q_FINISHED ? ST_FINISHED : ST_READY;
    }
    int resume = c->suspended;
    c->suspended = 0;
    pthread_mutex_unlock(&c->mu);
    if (resume) MHD_resume_connection(conn);
}

static int over_rate_limit(conn_ctx *c, const char *api_key, enum MHD_Result *answer);

/* POST /translate_file, the body in: the upload's fields are read and its key is
 * checked here; the document itself is parsed on the files' parser thread while
 * the connection is suspended (files.h), then its sentences are queued from the parser thread (file_parsed). */
static enum MHD_Result translate_file_received(conn_ctx *c) {
    dmt_server *srv = c->srv;
    char err[1024] = "";
    if (!srv->files)
        return respond_error(c, 403, "Files translation are disabled on this server: it has no writable temporary folder");
    int status = dmt_files_receive(srv->files, c->conn, c->body, c->body_len, &c->file, err, sizeof err);
    free(c->body);
    c->body = NULL;
    if (status == 429) return respond_json_h(c, status, dmt_api_error("%s", err), MHD_HTTP_HEADER_RETRY_AFTER, "5");
    if (status) return respond_error(c, status, err);
    if ((status = dmt_api_key_status(srv->cfg, dmt_file_job_api_key(c->file), err, sizeof err)))
        return respond_error(c, status, err);
    enum MHD_Result limited;
    if (over_rate_limit(c, dmt_file_job_api_key(c->file), &limited)) return limited;
    if ((status = dmt_files_admit(srv->files, c->conn, c->file, srv->cfg, err, sizeof err)))
        return respond_json_h(c, status, dmt_api_error("%s", err), MHD_HTTP_HEADER_RETRY_AFTER, "60");
    pthread_mutex_lock(&c->mu); /* file_parsed waits for the suspension */
    status = dmt_files_parse_async(srv->files, c->file, file_parsed, c, err, sizeof err);
    if (status == 0) {
        c->state = ST_PARSING;
        c->suspended = 1;
        MHD_suspend_connection(c->conn);
    }
    pthread_mutex_unlock(&c->mu);
    if (status == 0) return MHD_YES;
    if (status == 429) dmt_metrics_rejected(srv->metrics);
    return respond_json_h(c, status, dmt_api_error("%s", err), MHD_HTTP_HEADER_RETRY_AFTER, "1");
}

static enum MHD_Result translate_request(conn_ctx *c, json_t *body);
static enum MHD_Result respond_translation(conn_ctx *c, int status, json_t *res);

/* The whole body is in: validate, then queue and suspend (or answer at once). */
static enum MHD_Result translate_body_done(conn_ctx *c) {
    dmt_server *srv = c->srv;
    char err[1024] = "";
    if (c->body_seen > srv->cfg->max_body_bytes) {
        snprintf(err, sizeof err, "request body too large: %zu bytes, limit %zu", c->body_seen,
                 srv->cfg->max_body_bytes);
        return respond_error(c, 413, err);
    }
    if (routes[c->route_index].r == R_TRANSLATE_FILE) return translate_file_received(c);
    json_t *body = parse_body(c, err, sizeof err);
    free(c->body);
    c->body = NULL;
    if (!body) return respond_error(c, 400, err);
    return translate_request(c, body);
}

/* A parsed request body (stolen): /detect and /suggest are answered at once;
 * /translate and /translate_file are validated and queued. */
/* --req-limit: 0, or the answer already queued (429) when the client is over it. */
static int over_rate_limit(conn_ctx *c, const char *api_key, enum MHD_Result *answer) {
    dmt_server *srv = c->srv;
    if (!srv->ratelimit) return 0;
    char client[80], retry[16], msg[160];
    dmt_api_client_id(srv->cfg, api_key, c->client, client, sizeof client);
    int wait = dmt_ratelimit_take(srv->ratelimit, client, dmt_now());
    if (!wait) return 0;
    snprintf(retry, sizeof retry, "%d", wait);
    snprintf(msg, sizeof msg, "Too many requests: the limit is %d a minute (--req-limit); try again in %d s",
             srv->cfg->req_limit, wait);
    dmt_metrics_rejected(srv->metrics);
    *answer = respond_json_h(c, 429, dmt_api_error("%s", msg), MHD_HTTP_HEADER_RETRY_AFTER, retry);
    return 1;
}

/* The model side of /translate and /translate_file, for a parsed body (stolen):
 * validated against the served models and submitted, with c->mu held. Q_QUEUED: a
 * worker's work_done will finish it; Q_FINISHED: nothing to translate, or all done
 * already (done() not called), c->req holds the result; Q_REFUSED: *answer, *status
 * and *retry_after (or NULL) say why. Runs on an HTTP thread or, for a document, on
 * the parser thread (file_parsed), so it answers nothing itself. */
static queue_outcome queue_translation(conn_ctx *c, json_t *body, json_t **answer, int *status,
                                       const char **retry_after) {
    dmt_server *srv = c->srv;
    char err[1024] = "";
    *retry_after = "1";
    dmt_model_set *set = dmt_registry_acquire(srv->registry);
    if (!set) {
        json_decref(body);
        *status = 503;
        *answer = dmt_api_error("the model is loading; try again shortly");
        return Q_REFUSED;
    }
    if ((*status = dmt_api_translate_parse(srv->cfg, set, body, &c->req, err, sizeof err))) { /* takes set */
        *answer = dmt_api_error("%s", err);
        *retry_after = NULL;
        return Q_REFUSED;
    }
    dmt_api_request *r = c->req;
    if (r->n_jobs == 0) return Q_FINISHED; /* empty texts, source == target */
    dmt_api_client_id(srv->cfg, dmt_api_key_of(r->body), c->client, r->client, sizeof r->client); /* workers are shared between clients first (policy.h) */
    r->user = c;
    r->done = work_done;
    r->alive = work_alive;
    r->deadline = srv->cfg->request_timeout_s > 0 ? dmt_now() + srv->cfg->request_timeout_s : 0;
    int rc = dmt_api_submit(srv->sched, r, err, sizeof err);
    if (rc == DMT_SUBMIT_OK) return Q_QUEUED;
    if (rc == DMT_API_SUBMIT_FINISHED) return Q_FINISHED;
    if (rc == DMT_SUBMIT_TOO_LARGE) {
        *status = 413;
        *answer = dmt_api_error("%s", err);
        *retry_after = NULL;
    } else if (rc == DMT_SUBMIT_FULL) {
        dmt_metrics_rejected(srv->metrics);
        *status = 429;
        *answer = dmt_api_error("too many requests: the translation queue is full");
    } else {
        *status = 503;
        *answer = dmt_api_error("the server is %s", dmt_scheduler_ready(srv->sched) ? "shutting down"
                                                                                    : "loading the model");
    }
    return Q_REFUSED;
}

static enum MHD_Result translate_request(conn_ctx *c, json_t *body) {
    dmt_server *srv = c->srv;
    int status;
    route r0 = routes[c->route_index].r;
    enum MHD_Result limited;
    if (r0 != R_TRANSLATE_FILE && r0 != R_SUGGEST && over_rate_limit(c, dmt_api_key_of(body), &limited)) {
        json_decref(body); /* /translate_file was counted before its document was read */
        return limited;
    }
    if (!translates(r0)) { /* lt_api.c: answered at once, no model run */
        dmt_model_set *set = dmt_registry_acquire(srv->registry);
        json_t *res = r0 == R_DETECT ? dmt_lt_detect(srv->cfg, set ? &set->languages : &srv->model_cfg, body, &status)
                                     : dmt_lt_suggest(srv->cfg, body, &status);
        dmt_model_set_release(set);
        return respond_json(c, status, res);
    }
    json_t *answer = NULL;
    const char *retry = NULL;
    pthread_mutex_lock(&c->mu); /* work_done waits until the suspension */
    queue_outcome q = queue_translation(c, body, &answer, &status, &retry);
    if (q == Q_QUEUED) {
        c->state = ST_QUEUED;
        c->suspended = 1;
        MHD_suspend_connection(c->conn);
    }
    pthread_mutex_unlock(&c->mu);
    if (q == Q_QUEUED) return MHD_YES;
    if (q == Q_REFUSED) return respond_json_h(c, status, answer, retry ? MHD_HTTP_HEADER_RETRY_AFTER : NULL, retry);
    c->state = ST_FINISHED; /* answered here */
    json_t *res = dmt_api_translate_result(c->req, &status);
    if (c->file) res = dmt_files_finish(srv->files, c->conn, c->file, res, status, &status);
    return c->req->n_jobs ? respond_translation(c, status, res) : respond_json(c, status, res);
}

static enum MHD_Result translate_first(conn_ctx *c) {
    dmt_server *srv = c->srv;
    if (translates(routes[c->route_index].r) && !dmt_scheduler_ready(srv->sched))
        return respond_json_h(c, 503, dmt_api_error("the model is loading; try again shortly"),
                              MHD_HTTP_HEADER_RETRY_AFTER, "1");
    const char *cl = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end != cl && n > srv->cfg->max_body_bytes) {
            char err[256];
            snprintf(err, sizeof err, "request body too large: %llu bytes, limit %zu", n, srv->cfg->max_body_bytes);
            return respond_error(c, 413, err);
        }
    }
    c->state = ST_BODY;
    return MHD_YES;
}

static enum MHD_Result translate_upload(conn_ctx *c, const char *data, size_t *size) {
    size_t n = *size, max = c->srv->cfg->max_body_bytes;
    c->body_seen += n;
    *size = 0;
    if (c->body_seen > max) { /* counted, not kept: the answer will be 413 */
        free(c->body);
        c->body = NULL;
        c->body_len = c->body_cap = 0;
        return MHD_YES;
    }
    if (c->body_len + n > c->body_cap) {
        size_t cap = c->body_cap ? c->body_cap : 4096;
        while (cap < c->body_len + n) cap *= 2;
        if (cap > max) cap = max;
        char *b = realloc(c->body, cap + 1);
        if (!b) return MHD_NO;
        c->body = b;
        c->body_cap = cap;
    }
    memcpy(c->body + c->body_len, data, n);
    c->body_len += n;
    return MHD_YES;
}

/* ---- the GET endpoints ---- */

/* POST /admin/reload with the admin key: the model list is read again, as on
 * SIGHUP (server.c does it); 202 at once, /models shows the outcome. */
static enum MHD_Result admin_reload(conn_ctx *c) {
    dmt_server *srv = c->srv;
    const char *key = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "X-Admin-Key");
    if (!srv->cfg->admin_key[0]) return respond_error(c, 404, "not found: /admin/reload (the server has no --admin-key)");
    size_t kl = key ? strlen(key) : 0, al = strlen(srv->cfg->admin_key);
    unsigned diff = key ? (unsigned)(kl ^ al) : 1; /* constant time in the key's length */
    for (size_t i = 0; key && i < al; i++) diff |= (unsigned char)srv->cfg->admin_key[i] ^ (unsigned char)(i < kl ? key[i] : 0);
    if (diff) return respond_error(c, key ? 403 : 401, key ? "wrong admin key" : "the X-Admin-Key header is missing");
    char b = 'H';
    if (write(srv->reload_fd, &b, 1) != 1) return respond_error(c, 503, "cannot start a reload now; try again");
    dmt_model_set *set = dmt_registry_acquire(srv->registry);
    json_t *res = json_pack("{s:s, s:I}", "status", "reloading", "generation", (json_int_t)(set ? set->generation : 0));
    dmt_model_set_release(set);
    return respond_json(c, 202, res);
}

/* A translation's answer, with the models that made it (X-Deepmt-Model) and, when
 * a text went through English, X-Deepmt-Pivot. */
static enum MHD_Result respond_translation(conn_ctx *c, int status, json_t *res) {
    char used[512];
    if (!c->req || !c->req->n_parts) return respond_json(c, status, res);
    dmt_api_models_used(c->req, used, sizeof used);
    char *s = res ? json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    json_decref(res);
    if (!s) return respond_json(c, 500, NULL);
    enum MHD_Result r = c->req->pivoted ? respond_raw(c, status, "application/json", s, strlen(s), "X-Deepmt-Model",
                                                      used, "X-Deepmt-Pivot", DMT_PIVOT_LANGUAGE, (char *)NULL)
                                        : respond_raw(c, status, "application/json", s, strlen(s), "X-Deepmt-Model",
                                                      used, (char *)NULL);
    free(s);
    return r;
}

static enum MHD_Result respond_get(conn_ctx *c, route r) {
    dmt_server *srv = c->srv;
    int ready = dmt_scheduler_ready(srv->sched);
    switch (r) {
    case R_ROOT:
        if (dmt_webpage_wanted(MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT))) {
            size_t len;
            const char *page = dmt_webpage(&len);
            /* the page may load nothing from elsewhere: it works offline */
            /* it loads nothing from elsewhere, and no other site may frame it (clickjacking) */
            return respond_raw(c, 200, "text/html; charset=utf-8", page, len, "Vary", "Accept",
                               "Content-Security-Policy",
                               "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; "
                               "frame-ancestors 'none'",
                               "X-Frame-Options", "DENY", (char *)NULL);
        }
        return respond_json_h(c, 200, json_pack("{s:s, s:s, s:s, s:[ssssssssss]}", "name", "deepmt", "version",
                                                DEEPMT_VERSION_STR, "status", ready ? "ready" : "loading", "endpoints",
                                                "POST /translate", "POST /translate_file", "POST /detect",
                                                "GET /languages", "GET /models", "GET /frontend/settings", "GET /spec",
                                                "GET /health", "GET /ready", "GET /metrics"),
                              "Vary", "Accept");
    case R_LANGUAGES: {
        dmt_model_set *set = dmt_registry_acquire(srv->registry);
        json_t *res = dmt_api_languages(set, &srv->model_cfg);
        dmt_model_set_release(set);
        return respond_json(c, 200, res);
    }
    case R_MODELS: {
        dmt_model_set *set = dmt_registry_acquire(srv->registry);
        if (!set)
            return respond_json_h(c, 503, dmt_api_error("the models are loading"), MHD_HTTP_HEADER_RETRY_AFTER, "1");
        json_t *res = dmt_api_models(set);
        dmt_model_set_release(set);
        return respond_json(c, 200, res);
    }
    case R_HEALTH:
        return respond_json(c, 200, json_pack("{s:s}", "status", "ok"));
    case R_READY:
        if (ready) return respond_json(c, 200, json_pack("{s:s}", "status", "ready"));
        return respond_json_h(c, 503, json_pack("{s:s}", "status", "loading"), MHD_HTTP_HEADER_RETRY_AFTER, "1");
    case R_SETTINGS:
    {
        dmt_model_set *set = dmt_registry_acquire(srv->registry);
        json_t *res = dmt_lt_settings(srv->cfg, set ? &set->languages : &srv->model_cfg, srv->files != NULL);
        dmt_model_set_release(set);
        return respond_json(c, 200, res);
    }
    case R_DOWNLOAD: {
        char *data, name[160], err[256], disp[200];
        size_t len;
        const char *type;
        if (!srv->files) return respond_error(c, 404, "no such file");
        int st = dmt_files_get(srv->files, c->path + strlen("/download_file/"), &data, &len, name, sizeof name, &type,
                               err, sizeof err);
        if (st) return respond_error(c, st, err);
        snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", name);
        /* a translated page is someone's upload: opened in a browser, it runs in a
         * sandbox (no scripts, no access to this origin) */
        enum MHD_Result res = respond_raw(c, 200, type, data, len, "Content-Disposition", disp,
                                          "Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:",
                                          (char *)NULL);
        free(data);
        return res;
    }
    case R_SPEC: {
        size_t len;
        const char *spec = dmt_lt_spec(&len);
        return respond_raw(c, 200, "application/json", spec, len, (char *)NULL);
    }
    case R_METRICS: {
        char *text = dmt_metrics_render(srv->metrics, dmt_scheduler_queued(srv->sched),
                                        dmt_scheduler_busy(srv->sched), ready, atomic_load(&srv->active));
        dmt_model_set *set = dmt_registry_acquire(srv->registry);
        char *per_model = set ? dmt_api_model_metrics(set) : NULL;
        dmt_model_set_release(set);
        if (text && per_model) {
            size_t a = strlen(text), b = strlen(per_model);
            char *joined = realloc(text, a + b + 1);
            if (joined) memcpy(joined + a, per_model, b + 1);
            text = joined;
        }
        free(per_model);
        if (!text) return respond_error(c, 500, "out of memory");
        enum MHD_Result res = respond_raw(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text),
                                          (char *)NULL);
        free(text);
        return res;
    }
    default:
        return respond_error(c, 404, "not found");
    }
}

/* ---- the access handler ---- */

/* Answers everything but the body of POST /translate. Called on the second
 * callback: libmicrohttpd closes the connection after an answer queued on the
 * first one, which only the refusals of a body (413, 503) want. */
static enum MHD_Result answer_route(conn_ctx *c, const char *url, const char *method) {
    int ri = c->route_index;
    if (ri < 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "not found: %.*s", (int)dmt_text_clip(url, strlen(url), 160), url);
        return respond_error(c, 404, msg);
    }
    route r = routes[ri].r;
    const char *allow = routes[ri].allow;
    if (!strcmp(method, "OPTIONS")) {
        const dmt_server_config *cfg = c->srv->cfg;
        if (cfg->cors_origin[0])
            return respond_raw(c, 204, NULL, "", 0, "Allow", allow, "Access-Control-Allow-Methods", allow,
                               "Access-Control-Allow-Headers", "Content-Type, Authorization",
                               "Access-Control-Max-Age", "86400", (char *)NULL);
        return respond_raw(c, 204, NULL, "", 0, "Allow", allow, (char *)NULL);
    }
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    int post = !strcmp(method, "POST");
    if (r == R_ADMIN_RELOAD && post) return admin_reload(c);
    if ((!takes_body(r) && r != R_ADMIN_RELOAD && get) || (r == R_LANGUAGES && post)) return respond_get(c, r);
    char msg[256];
    snprintf(msg, sizeof msg, "method %.*s not allowed on %s; allowed: %s", (int)dmt_text_clip(method, strlen(method), 16),
             method, routes[ri].path, allow);
    return respond_json_h(c, 405, dmt_api_error("%s", msg), MHD_HTTP_HEADER_ALLOW, allow);
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **req_cls) {
    dmt_server *srv = cls;
    conn_ctx *c = *req_cls;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        c->srv = srv;
        c->conn = conn;
        c->t0 = dmt_now();
        c->http11 = !strcmp(version, MHD_HTTP_VERSION_1_1);
        pthread_mutex_init(&c->mu, NULL);
        /* kept raw (the access log escapes them), cut on a character boundary */
        snprintf(c->method, sizeof c->method, "%.*s", (int)dmt_text_clip(method, strlen(method), sizeof c->method - 1),
                 method);
        snprintf(c->path, sizeof c->path, "%.*s", (int)dmt_text_clip(url, strlen(url), sizeof c->path - 1), url);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        snprintf(c->client, sizeof c->client, "-");
        if (ci && ci->client_addr) {
            const struct sockaddr *sa = ci->client_addr;
            if (sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, c->client, sizeof c->client);
            else if (sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, c->client, sizeof c->client);
        }
        atomic_fetch_add(&srv->active, 1);
        *req_cls = c;
        c->route_index = -1;
        for (size_t i = 0; i < sizeof routes / sizeof *routes; i++)
            if (!strcmp(url, routes[i].path) ||
                (routes[i].r == R_DOWNLOAD && !strncmp(url, routes[i].path, strlen(routes[i].path))))
                c->route_index = (int)i;
        if (c->route_index >= 0 && takes_body(routes[c->route_index].r) && !strcmp(method, "POST"))
            return translate_first(c);
        c->state = ST_ROUTE;
        return MHD_YES;
    }
    if (!*upload_data_size && (c->state == ST_ROUTE || c->state == ST_BODY)) /* the whole request is in */
        dmt_conn_guard_request_read(srv->guard, conn);
    switch (c->state) {
    case ST_ROUTE:
        if (*upload_data_size) { /* a body where none is expected: ignored */
            *upload_data_size = 0;
            return MHD_YES;
        }
        return answer_route(c, url, method);
    case ST_BODY:
        if (*upload_data_size) return translate_upload(c, upload_data, upload_data_size);
        return translate_body_done(c);
    case ST_READY: { /* /translate_file refused after its document was parsed */
        json_t *answer = c->pending;
        c->pending = NULL;
        return respond_json_h(c, c->pending_status, answer, c->pending_retry ? MHD_HTTP_HEADER_RETRY_AFTER : NULL,
                              c->pending_retry);
    }
    case ST_FINISHED: {
        int status;
        json_t *res = dmt_api_translate_result(c->req, &status);
        if (c->file) res = dmt_files_finish(c->srv->files, c->conn, c->file, res, status, &status);
        return respond_translation(c, status, res);
    }
    case ST_PARSING:
    case ST_QUEUED: /* not expected: MHD calls again only after the resume */
        return MHD_YES;
    default: /* answered already (e.g. 413 up front): ignore any body */
        *upload_data_size = 0;
        return MHD_YES;
    }
}

static void completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe) {
    dmt_server *srv = cls;
    conn_ctx *c = *req_cls;
    if (!c) return;
    *req_cls = NULL;
    /* A request still queued cannot be completed: MHD never ends a suspended
     * connection on its own, and shutdown drains the scheduler first. */
    int status = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? c->status : 0;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->state == ST_FINISHED && c->req) {
        /* read EOF: the client half-closed; its answer, a file's too, is written here */
        int st = 500;
        json_t *res = dmt_api_translate_result(c->req, &st);
        if (c->file) res = dmt_files_finish(srv->files, conn, c->file, res, st, &st);
        status = dmt_http_answer_half_closed(srv, conn, res, st, &c->bytes);
    } else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && c->state == ST_READY && c->pending) {
        status = dmt_http_answer_half_closed(srv, conn, c->pending, c->pending_status, &c->bytes); /* takes it */
        c->pending = NULL;
    }
    json_decref(c->pending);
    double dt = dmt_now() - c->t0;
    dmt_conn_guard_request_done(srv->guard, conn); /* a next request on this connection gets its own time */
    dmt_metrics_request(srv->metrics, status, dt);
    if (c->req) dmt_api_account(c->req, status, dt);
    dmt_access_log(srv->cfg, c->client, c->method, c->path, status, c->bytes, dt, c->req ? c->req->n_sentences : 0);
    dmt_api_request_free(c->req);
    dmt_file_job_free(c->file);
    free(c->body);
    pthread_mutex_destroy(&c->mu);
    free(c);
    atomic_fetch_sub(&srv->active, 1);
}

/* Counts open connections, so that a drain also waits for requests that are still
 * arriving (no callback has seen them yet), and keeps the read deadlines'
 * bookkeeping (connguard.c). */
static void connection_event(void *cls, struct MHD_Connection *conn, void **socket_context,
                             enum MHD_ConnectionNotificationCode code) {
    dmt_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) atomic_fetch_add(&srv->connections, 1);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED) atomic_fetch_sub(&srv->connections, 1);
    dmt_conn_guard_notify(srv->guard, conn, socket_context, (int)code);
}

#define MHD_LOG_BURST 20
#define MHD_LOG_WINDOW_S 10

/* libmicrohttpd's messages quote the decoded URL: dmt_server_log escapes them. A
 * flood of refused connections would write a line each (897 for 897 connects): past
 * MHD_LOG_BURST lines in a window, they are counted, and the count is logged when the
 * next window's first message comes. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    dmt_server *srv = cls;
    long now = (long)dmt_now(), start = atomic_load(&srv->mhd_log_window);
    if (now - start >= MHD_LOG_WINDOW_S && atomic_compare_exchange_strong(&srv->mhd_log_window, &start, now)) {
        int dropped = atomic_exchange(&srv->mhd_log_dropped, 0);
        atomic_store(&srv->mhd_log_lines, 0);
        if (dropped)
            dmt_server_log(srv->cfg, "libmicrohttpd: %d more messages in the last %ld s were not logged", dropped,
                           now - start);
    }
    if (atomic_fetch_add(&srv->mhd_log_lines, 1) >= MHD_LOG_BURST) {
        atomic_fetch_add(&srv->mhd_log_dropped, 1);
        return;
    }
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t l = strlen(msg);
    while (l && (msg[l - 1] == '\n' || msg[l - 1] == '\r')) msg[--l] = 0;
    dmt_server_log(srv->cfg, "libmicrohttpd: %s", msg);
}

int dmt_http_start(dmt_server *srv, char *err, size_t errlen) {
    const dmt_server_config *cfg = srv->cfg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "--host %s: %s", cfg->host, gai_strerror(gai));
        return -1;
    }
    if (!srv->files) { /* without a writable temporary folder, only /translate_file is off */
        char ferr[512];
        if (!(srv->files = dmt_files_new(cfg->files_dir, cfg->max_file_memory, ferr, sizeof ferr)))
            dmt_server_log(cfg, "file translation is off: %s (%s)", ferr,
                           cfg->files_dir[0] ? "make --files-dir writable" : "set TMPDIR to a writable folder");
        else if (dmt_files_shared(srv->files))
            dmt_server_log(cfg, "translated files in %s, shared with other replicas", dmt_files_dir(srv->files));
        unsigned long long stale_bytes = 0;
        int stale = srv->files ? dmt_files_stale_removed(srv->files, &stale_bytes) : 0;
        if (stale)
            dmt_server_log(cfg, "removed %d folder%s of translated files left by servers that were killed (%.1f MB)",
                           stale, stale == 1 ? "" : "s", (double)stale_bytes / 1e6);
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_USE_TURBO;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->guard = dmt_conn_guard_new(cfg->request_read_timeout_s, cfg->max_connections, cfg, srv->metrics);
    if (!srv->guard) {
        freeaddrinfo(ai);
        dmt_files_free(srv->files);
        srv->files = NULL;
        snprintf(err, errlen, "cannot start the connection guard's thread");
        return -1;
    }
    srv->daemon = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, handler, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
                                   MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                   MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->http_threads,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                                   MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                   MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
                                   MHD_OPTION_NOTIFY_COMPLETED, completed, srv,
                                   MHD_OPTION_NOTIFY_CONNECTION, connection_event, srv,
                                   MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!srv->daemon) {
        dmt_conn_guard_free(srv->guard);
        srv->guard = NULL;
        dmt_files_free(srv->files);
        srv->files = NULL;
        snprintf(err, errlen, "cannot listen on %s:%d (address in use, or not allowed?)", cfg->host, cfg->port);
        return -1;
    }
    return 0;
}

int dmt_http_port(dmt_server *srv) {
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return di ? di->port : srv->cfg->port;
}

void dmt_http_quiesce(dmt_server *srv) {
    atomic_store(&srv->draining, 1);
    MHD_socket fd = MHD_quiesce_daemon(srv->daemon);
    /* shut down, not closed yet: new clients are refused at once, while an HTTP
     * thread at the connection limit may still hand the descriptor to epoll_ctl
     * (closing it now let the number be reused under it; ThreadSanitizer saw the
     * race). dmt_http_stop closes it once the threads are gone. */
    if (fd != MHD_INVALID_SOCKET) {
        shutdown(fd, SHUT_RDWR);
        srv->quiesced_fd = fd;
    }
}

void dmt_http_stop(dmt_server *srv) {
    /* a document still being parsed resumes its connection first: libmicrohttpd
     * must not be stopped with a connection suspended */
    dmt_files_stop_parsing(srv->files);
    if (srv->daemon) MHD_stop_daemon(srv->daemon);
    if (srv->quiesced_fd > 0) close(srv->quiesced_fd);
    srv->quiesced_fd = 0;
    dmt_probe_stop(srv); /* last: the probes answer until the main port is gone */
    srv->daemon = NULL;
    dmt_conn_guard_free(srv->guard); /* every connection is closed now */
    srv->guard = NULL;
    dmt_files_free(srv->files); /* after the daemon: no request uses it any more */
    srv->files = NULL;
}
