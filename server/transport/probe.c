/* probe.c — GET /health and GET /ready on a listener of their own (--probe-port).
 *
 * The main listener's connection slots can all be taken (8 addresses x 128 idle
 * connections fill --max-connections 1024), and then a liveness probe times out and
 * an orchestrator restarts a server that is fine. The probe listener is a second
 * libmicrohttpd daemon with its own thread and its own few slots, answering only the
 * two probes (404 for anything else), so it stays reachable whatever the main port
 * carries. /ready answers 503 "draining" once a SIGTERM drain has begun, so that a
 * balancer stops sending work while requests in flight finish.
 */
#include "server/transport/http.h"

#include <netdb.h>
#include <string.h>

#include <microhttpd.h>

#include "server/log.h"

#define PROBE_CONNECTIONS 32

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *body) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result probe_handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                     const char *version, const char *upload_data, size_t *upload_data_size,
                                     void **req_cls) {
    dmt_server *srv = cls;
    if (!*req_cls) { /* first call: headers only */
        *req_cls = srv;
        return MHD_YES;
    }
    if (*upload_data_size) { /* a body is ignored */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return answer(conn, 405, "{\"error\":\"the probe port answers GET /health and GET /ready\"}");
    if (!strcmp(url, "/health")) return answer(conn, 200, "{\"status\":\"ok\"}");
    if (!strcmp(url, "/ready")) {
        if (atomic_load(&srv->draining)) return answer(conn, 503, "{\"status\":\"draining\"}");
        if (dmt_scheduler_ready(srv->sched)) return answer(conn, 200, "{\"status\":\"ready\"}");
        return answer(conn, 503, "{\"status\":\"loading\"}");
    }
    return answer(conn, 404, "{\"error\":\"not found: the probe port answers GET /health and GET /ready\"}");
}

int dmt_probe_start(dmt_server *srv, char *err, size_t errlen) {
    const dmt_server_config *cfg = srv->cfg;
    if (!cfg->probe_port) return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->probe_port);
    int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "--host %s: %s", cfg->host, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_TURBO;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->probe_daemon = MHD_start_daemon(flags, (uint16_t)cfg->probe_port, NULL, NULL, probe_handler, srv,
                                         MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)PROBE_CONNECTIONS,
                                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)5, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!srv->probe_daemon) {
        snprintf(err, errlen, "--probe-port: cannot listen on %s:%d (address in use, or not allowed?)", cfg->host,
                 cfg->probe_port);
        return -1;
    }
    dmt_server_log(cfg, "probes (GET /health, GET /ready) also on port %d", cfg->probe_port);
    return 0;
}

void dmt_probe_stop(dmt_server *srv) {
    if (srv->probe_daemon) MHD_stop_daemon(srv->probe_daemon);
    srv->probe_daemon = NULL;
}
