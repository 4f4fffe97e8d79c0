/* halfclose.c — answering a client that half-closed its connection.
 *
 * HTTP/1.1 lets a client send its request and then shutdown(SHUT_WR). The
 * libmicrohttpd of Debian 12 (0.9.75) has no option for this (no flag or option
 * mentions half-close or read EOF): a suspended connection keeps the event-loop
 * state it had before the suspension (reading), and on resume the daemon marks it
 * readable and calls recv() before it lets the handler answer; recv() returns 0
 * (the client's FIN) and the connection is closed with an error
 * (MHD_REQUEST_TERMINATED_WITH_ERROR here), the finished translation unsent and
 * the handler never called again. (Later libmicrohttpd versions keep a connection
 * whose request is complete when its read side ends.)
 *
 * So http.c's completion callback calls this when a request whose work is done
 * ends any other way than with its answer sent. That needs the answer to be ready
 * at every resume: /translate_file's document is parsed on another thread, which
 * then queues its sentences itself (http.c file_parsed) instead of resuming the
 * connection in between, where the FIN would end it with nothing to answer. The socket is still open and
 * writable then: the daemon runs with MHD_USE_TURBO, so it has not called
 * shutdown(), and it closes the descriptor only after the callback. The answer is written here at once,
 * non-blocking, with "Connection: close": the send buffer is first raised to fit
 * it (the kernel caps this at twice net.core.wmem_max), so nothing waits on a
 * slow reader and no HTTP thread blocks. A client that reset the connection gets
 * an error from send() and the request counts as status 0, as before. While the
 * request runs, the disconnect watcher tells a half-close from a close by sending
 * one interim "100 Continue" when it sees the FIN (http.c work_alive): a closed
 * socket answers with a reset and its work is dropped; a half-closed client gets
 * here.
 */
#include "server/transport/http.h"
#include "server/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

/* Sends all of buf without blocking: 0, or -1 when the kernel refused part of it. */
static int send_now(int fd, const char *buf, size_t len) {
    while (len) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int dmt_http_answer_half_closed(const dmt_server *srv, struct MHD_Connection *conn, json_t *res, int status,
                                size_t *bytes) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *body = res && ci && ci->connect_fd != MHD_INVALID_SOCKET ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    if (!body) return 0;
    const dmt_server_config *cfg = srv->cfg;
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    size_t blen = strlen(body), cap = blen + 512 + strlen(cfg->cors_origin);
    char *msg = malloc(cap);
    if (!msg) {
        free(body);
        return 0;
    }
    int h = snprintf(msg, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\nX-Content-Type-Options: nosniff\r\n%s%s%s%s\r\n",
                     status, reason && *reason ? reason : "Unknown", blen,
                     cfg->cors_origin[0] ? "Access-Control-Allow-Origin: " : "", cfg->cors_origin,
                     cfg->cors_origin[0] ? "\r\n" : "",
                     cfg->cors_origin[0] && strcmp(cfg->cors_origin, "*") ? "Vary: Origin\r\n" : "");
    memcpy(msg + h, body, blen);
    size_t total = (size_t)h + blen;
    free(body);
    int fd = ci->connect_fd;
    int want = total > (size_t)1 << 30 ? 1 << 30 : (int)total + 4096;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want); /* best effort: capped by the kernel */
    int ok = send_now(fd, msg, total) == 0;
    free(msg);
    if (!ok) {
        dmt_server_log(cfg, "a half-closed connection's answer (%zu bytes, status %d) did not fit the socket buffer "
                            "or the client is gone; dropped", total, status);
        return 0;
    }
    *bytes = blen;
    return status;
}
