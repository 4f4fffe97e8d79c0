/* connguard.c — every client connection's wait for its next request: a deadline for
 * reading each whole request (--request-read-timeout), and room for new clients when
 * the connection limit is near.
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte restarts it,
 * so a client sending one header byte every 25 s holds its connection (and its
 * slot among --max-connections) for ever. Here every connection starts waiting when
 * it opens and again after each answer; the request (headers and body) must be
 * complete within the timeout. One thread wakes once a second and shuts down the
 * sockets past their deadline; libmicrohttpd then reads the end of stream and
 * closes the connection itself, on its own thread.
 *
 * Pressure. Idle connections spread over many addresses can fill --max-connections
 * (the per-address limit does not stop 8 addresses x 128), and libmicrohttpd then
 * accepts nobody: not a new client, not a probe. So the server never lets itself be
 * full: when a connection opens above the high-water mark (the limit less 1/64, at
 * least 1), the connection that has waited longest for a request is shut down
 * (oldest first; connections whose request is being answered are never touched),
 * and while more than half the limit is open the wait for a request is cut to
 * PRESSURE_WAIT_S. A flood of idle connections then costs each of its connections
 * its slot, not a newcomer: a new connection is the youngest, the last to go.
 *
 * The list is shared by the HTTP threads (open, close, request read, answer sent)
 * and the sweeper, under one mutex. libmicrohttpd calls the "closed" notification
 * before it closes the descriptor, and that call waits for the mutex, so no
 * descriptor is shut down after it has been closed and reused.
 */
#include "server/transport/http.h"
#include "server/clock.h"
#include "server/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#define PRESSURE_WAIT_S 5.0

typedef struct guarded {
    struct guarded *prev, *next;
    int fd;
    double waiting_since; /* dmt_now() when it began to wait for a request; 0 while one is answered */
    int shut;             /* shut down here: no longer counted, never again */
} guarded;

struct dmt_conn_guard {
    int timeout_s;        /* 0: no read deadline (pressure still applies) */
    int open, high_water; /* connections not shut down here; the most let open */
    int pressure;         /* above it, the wait is cut to PRESSURE_WAIT_S */
    dmt_metrics *metrics;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* stop */
    int stop;
    guarded *head;
    pthread_t sweeper;
};

/* With g->mu held. */
static void shut(dmt_conn_guard *g, guarded *e) {
    e->shut = 1;
    e->waiting_since = 0;
    g->open--;
    shutdown(e->fd, SHUT_RDWR);
}

/* Shuts down every connection waiting past its deadline: the read timeout, or under
 * pressure PRESSURE_WAIT_S; with g->mu held. */
static void sweep(dmt_conn_guard *g, double now) {
    double wait = g->open > g->pressure ? PRESSURE_WAIT_S : (double)g->timeout_s;
    if (g->timeout_s > 0 && wait > g->timeout_s) wait = g->timeout_s;
    if (wait <= 0) return;
    for (guarded *e = g->head; e; e = e->next) {
        if (e->shut || e->waiting_since == 0 || now - e->waiting_since < wait) continue;
        int timed_out = g->timeout_s > 0 && now - e->waiting_since >= g->timeout_s;
        shut(g, e);
        if (timed_out) dmt_metrics_read_timeout(g->metrics);
        else dmt_metrics_connection_evicted(g->metrics);
    }
}

/* Above the high-water mark: shuts down the connections that have waited longest for
 * a request until it is reached again (none when every one is being answered); with
 * g->mu held. */
static void make_room(dmt_conn_guard *g) {
    while (g->open > g->high_water) {
        guarded *oldest = NULL;
        for (guarded *e = g->head; e; e = e->next)
            if (!e->shut && e->waiting_since > 0 && (!oldest || e->waiting_since <= oldest->waiting_since)) oldest = e;
        if (!oldest) return;
        shut(g, oldest);
        dmt_metrics_connection_evicted(g->metrics);
    }
}

static void *sweeper_main(void *arg) {
    dmt_conn_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&g->wake, &g->mu, &ts);
        if (!g->stop) sweep(g, dmt_now());
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

dmt_conn_guard *dmt_conn_guard_new(int timeout_s, int max_connections, const dmt_server_config *cfg,
                                   dmt_metrics *metrics) {
    dmt_conn_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->timeout_s = timeout_s > 0 ? timeout_s : 0;
    int margin = max_connections / 64 > 1 ? max_connections / 64 : 1;
    g->high_water = max_connections - margin;
    g->pressure = max_connections / 2;
    g->metrics = metrics;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->sweeper, NULL, sweeper_main, g)) {
        dmt_server_log(cfg, "cannot start the connection guard's thread: %s", strerror(errno));
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void dmt_conn_guard_free(dmt_conn_guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->sweeper, NULL);
    while (g->head) { /* none after the daemon stopped; kept safe anyway */
        guarded *e = g->head;
        g->head = e->next;
        free(e);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

void dmt_conn_guard_notify(dmt_conn_guard *g, struct MHD_Connection *conn, void **socket_context, int code) {
    if (!g) return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        guarded *e = ci ? calloc(1, sizeof *e) : NULL;
        if (!e) return; /* unguarded: the idle timeout still applies */
        e->fd = ci->connect_fd;
        e->waiting_since = dmt_now();
        pthread_mutex_lock(&g->mu);
        e->next = g->head;
        if (g->head) g->head->prev = e;
        g->head = e;
        g->open++;
        make_room(g);
        pthread_mutex_unlock(&g->mu);
        *socket_context = e;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        guarded *e = *socket_context;
        if (!e) return;
        pthread_mutex_lock(&g->mu);
        if (e->prev) e->prev->next = e->next;
        else g->head = e->next;
        if (e->next) e->next->prev = e->prev;
        if (!e->shut) g->open--;
        pthread_mutex_unlock(&g->mu);
        free(e);
        *socket_context = NULL;
    }
}

static void set_waiting(dmt_conn_guard *g, struct MHD_Connection *conn, double since) {
    if (!g) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    guarded *e = ci ? ci->socket_context : NULL;
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    if (!e->shut) e->waiting_since = since;
    pthread_mutex_unlock(&g->mu);
}

void dmt_conn_guard_request_read(dmt_conn_guard *g, struct MHD_Connection *conn) { set_waiting(g, conn, 0); }

void dmt_conn_guard_request_done(dmt_conn_guard *g, struct MHD_Connection *conn) {
    if (g) set_waiting(g, conn, dmt_now());
}
