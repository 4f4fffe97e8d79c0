/* http.h — the HTTP side of `deepmt serve` (libmicrohttpd): the server's shared
 * state, the daemon (http.c), the read deadline (connguard.c) and answers to
 * half-closed clients (halfclose.c). */
#ifndef DEEPMT_SERVER_TRANSPORT_HTTP_H
#define DEEPMT_SERVER_TRANSPORT_HTTP_H

#include <stdatomic.h>
#include <stddef.h>

#include "model/config.h"
#include "server/api/api.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/sched/registry.h"
#include "server/sched/scheduler.h"

struct MHD_Connection;
typedef struct dmt_conn_guard dmt_conn_guard;

typedef struct dmt_server {
    const dmt_server_config *cfg;
    dmt_config model_cfg;      /* the languages of every config.json, read before the models load */
    dmt_registry *registry;    /* the models served (registry.h) */
    dmt_scheduler *sched;
    int reload_fd;             /* POST /admin/reload writes 'H' here, as SIGHUP does (server.c) */
    dmt_metrics *metrics;
    struct MHD_Daemon *daemon;
    int quiesced_fd;           /* the listening socket after dmt_http_quiesce (shut down; closed at stop); 0: none */
    struct MHD_Daemon *probe_daemon; /* --probe-port: /health and /ready only (probe.c); NULL when off */
    dmt_conn_guard *guard;     /* --request-read-timeout and room under --max-connections (connguard.c) */
    struct dmt_files *files;   /* /translate_file results (files.h) */
    struct dmt_ratelimit *ratelimit; /* --req-limit (ratelimit.h); NULL: none */
    atomic_int active;         /* requests between their first callback and completion */
    atomic_int connections;    /* open client connections (a request may be arriving on one) */
    atomic_int draining;       /* shutting down: answers carry Connection: close */
    double started;
    /* libmicrohttpd's own messages (one per refused connection, under a flood) are
     * throttled: at most MHD_LOG_BURST a window of MHD_LOG_WINDOW_S seconds */
    atomic_long mhd_log_window;   /* the window's start, whole seconds of dmt_now() */
    atomic_int mhd_log_lines, mhd_log_dropped;
} dmt_server;

/* connguard.c: the whole-request read deadline (--request-read-timeout; 0: none). A
 * connection must deliver a complete request (headers and body) within the
 * timeout of opening, or of its previous answer; otherwise it is shut down. The
 * idle timeout alone cannot do this: it restarts on every byte. Near
 * max_connections, the connections that have waited longest for a request are shut
 * down, so new clients are always accepted. NULL guard: every call does nothing. */
dmt_conn_guard *dmt_conn_guard_new(int timeout_s, int max_connections, const dmt_server_config *cfg,
                                   dmt_metrics *metrics);
void dmt_conn_guard_free(dmt_conn_guard *g);    /* after the daemon stopped */
/* For the MHD_OPTION_NOTIFY_CONNECTION callback: code is its
 * MHD_ConnectionNotificationCode (started, closed). */
void dmt_conn_guard_notify(dmt_conn_guard *g, struct MHD_Connection *conn, void **socket_context, int code);
void dmt_conn_guard_request_read(dmt_conn_guard *g, struct MHD_Connection *conn); /* request complete */
void dmt_conn_guard_request_done(dmt_conn_guard *g, struct MHD_Connection *conn); /* next one starts */

/* halfclose.c: writes res (stolen), an answer with that status, on conn's socket
 * at once, after libmicrohttpd ended the request unanswered because the client
 * half-closed. Returns the status written, with *bytes set, or 0 when it could not
 * be written (the client is gone). */
int dmt_http_answer_half_closed(const dmt_server *srv, struct MHD_Connection *conn, json_t *res, int status,
                                size_t *bytes);

/* probe.c: --probe-port's listener (nothing when 0). 0, or -1 with a message. */
int dmt_probe_start(dmt_server *srv, char *err, size_t errlen);
void dmt_probe_stop(dmt_server *srv);

int dmt_http_start(dmt_server *srv, char *err, size_t errlen);
int dmt_http_port(dmt_server *srv);     /* the bound port (for --port 0) */
void dmt_http_quiesce(dmt_server *srv); /* stop accepting connections */
void dmt_http_stop(dmt_server *srv);

#endif
