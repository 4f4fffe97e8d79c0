/* connguard.c — a deadline for reading each whole request (--request-read-timeout).
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte restarts it,
 * so a client sending one header byte every 25 s holds its connection (and its
 * slot among --max-connections) for ever. Here every connection gets a deadline
 * when it opens and again after each answer; the request (headers and body) must
 * be complete before it. One thread wakes once a second and shuts down the
 * sockets past their deadline; libmicrohttpd then reads the end of stream and
 * closes the connection itself, on its own thread.
 *
 * The list is shared by the HTTP threads (open, close, request read, answer sent)
 * and the sweeper, under one mutex. libmicrohttpd calls the "closed" notification
 * before it closes the descriptor, and that call waits for the mutex, so the
 * sweeper never shuts down a descriptor that has been closed and reused.
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

typedef struct guarded {
    struct guarded *prev, *next;
    int fd;
    double deadline; /* dmt_now(); 0 while a request is being answered */
} guarded;

struct dmt_conn_guard {
    int timeout_s;
    dmt_metrics *metrics;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* stop */
    int stop;
    guarded *head;
    pthread_t sweeper;
};

/* Shuts down every connection past its deadline; with g->mu held. */
static void sweep(dmt_conn_guard *g, double now) {
    for (guarded *e = g->head; e; e = e->next) {
        if (e->deadline == 0 || now < e->deadline) continue;
        e->deadline = 0; /* once */
        shutdown(e->fd, SHUT_RDWR);
        dmt_metrics_read_timeout(g->metrics);
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

dmt_conn_guard *dmt_conn_guard_new(int timeout_s, const dmt_server_config *cfg, dmt_metrics *metrics) {
    if (timeout_s <= 0) return NULL;
    dmt_conn_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->timeout_s = timeout_s;
    g->metrics = metrics;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->sweeper, NULL, sweeper_main, g)) {
        dmt_server_log(cfg, "cannot start the request-read-timeout thread: %s", strerror(errno));
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
        e->deadline = dmt_now() + g->timeout_s;
        pthread_mutex_lock(&g->mu);
        e->next = g->head;
        if (g->head) g->head->prev = e;
        g->head = e;
        pthread_mutex_unlock(&g->mu);
        *socket_context = e;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        guarded *e = *socket_context;
        if (!e) return;
        pthread_mutex_lock(&g->mu);
        if (e->prev) e->prev->next = e->next;
        else g->head = e->next;
        if (e->next) e->next->prev = e->prev;
        pthread_mutex_unlock(&g->mu);
        free(e);
        *socket_context = NULL;
    }
}

static void set_deadline(dmt_conn_guard *g, struct MHD_Connection *conn, double deadline) {
    if (!g) return;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    guarded *e = ci ? ci->socket_context : NULL;
    if (!e) return;
    pthread_mutex_lock(&g->mu);
    e->deadline = deadline;
    pthread_mutex_unlock(&g->mu);
}

void dmt_conn_guard_request_read(dmt_conn_guard *g, struct MHD_Connection *conn) { set_deadline(g, conn, 0); }

void dmt_conn_guard_request_done(dmt_conn_guard *g, struct MHD_Connection *conn) {
    if (g) set_deadline(g, conn, dmt_now() + g->timeout_s);
}
