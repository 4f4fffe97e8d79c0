/* cmd_probe.c — `deepmt probe [PATH]`: GET a server's /health or /ready and exit 0
 * on 200, 1 otherwise. A health check for images that have no curl, given as an
 * exec probe in Kubernetes, a Docker HEALTHCHECK, or what `podman kube play`
 * makes of either: every argument is one word, so joining them with spaces and
 * splitting them again (podman does) changes nothing. The port defaults to the
 * server's own variables, so the same command follows DEEPMT_PORT. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/options.h"
#include "cli/commands.h"

typedef struct {
    char host[256];
    int port, timeout;
} probe_args;

/* Not read from the environment: the port's default follows the server's own
 * variables instead (default_port), and DEEPMT_HOST is the server's bind address. */
static const dmt_option probe_options[] = {
    {"host", 0, DMT_OPT_STR, offsetof(probe_args, host), sizeof ((probe_args *)0)->host, 0, 0, "ADDR",
     "server address [127.0.0.1]", DMT_OPT_NO_ENV, NULL},
    {"port", 0, DMT_OPT_INT, offsetof(probe_args, port), 0, 1, 65535, "N",
     "[DEEPMT_PROBE_PORT when set and not 0, else DEEPMT_PORT, else 5000]", DMT_OPT_NO_ENV, NULL},
    {"timeout", 0, DMT_OPT_INT, offsetof(probe_args, timeout), 0, 1, 3600, "SEC",
     "for connecting and the answer together [5]", DMT_OPT_NO_ENV, NULL},
};

static void usage(FILE *f) {
    fprintf(f, "usage: deepmt probe [PATH] [--host ADDR] [--port N] [--timeout SEC]\n\n"
               "GET PATH (default /health; /ready once the model is loaded) from a running server and\n"
               "exit 0 when it answers 200, else 1 with the reason on stderr. A health check for\n"
               "images without curl (Kubernetes exec probes, Docker HEALTHCHECK, podman kube play).\n\n"
               "options:\n");
    dmt_options_usage(f, probe_options, 3);
}

static long number(const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : -1;
    return s && *s && !*end && !errno && v >= lo && v <= hi ? v : -1;
}

static int default_port(void) {
    long p = number(getenv("DEEPMT_PROBE_PORT"), 1, 65535);
    if (p < 0) p = number(getenv("DEEPMT_PORT"), 1, 65535);
    return p < 0 ? 5000 : (int)p;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Waits for fd to be ready for events until deadline: 1, or 0 on timeout / error. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        int ms = (int)((deadline - now()) * 1000);
        if (ms <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 0;
    }
}

/* Connects to host:port before deadline: the socket, or -1 with a message. */
static int connect_to(const char *host, int port, double deadline, char *err, size_t errlen) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    int gai = getaddrinfo(host, ports, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "%s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen), e0 = errno;
    freeaddrinfo(ai);
    errno = e0;
    if (rc && fd >= 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline)) {
        int e = 0;
        socklen_t l = sizeof e;
        rc = getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l) || e ? -1 : 0;
        errno = e ? e : ETIMEDOUT;
    } else if (rc && errno == EINPROGRESS) {
        errno = ETIMEDOUT;
    }
    if (rc) {
        snprintf(err, errlen, "cannot connect to %s:%d: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* GET path: the HTTP status, or -1 with a message. */
static int get_status(const char *host, int port, const char *path, double timeout, char *err, size_t errlen) {
    double deadline = now() + timeout;
    int fd = connect_to(host, port, deadline, err, errlen);
    if (fd < 0) return -1;
    char req[512], buf[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\nUser-Agent: deepmt-probe\r\n\r\n", path);
    size_t sent = 0, got = 0;
    while (sent < (size_t)n) {
        ssize_t w = wait_fd(fd, POLLOUT, deadline) ? send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL) : -1;
        if (w <= 0 && !(w < 0 && errno == EINTR)) {
            snprintf(err, errlen, "cannot send the request: %s", w < 0 ? strerror(errno) : "closed");
            close(fd);
            return -1;
        }
        if (w > 0) sent += (size_t)w;
    }
    /* the status line is all we read: "HTTP/1.x NNN ..." */
    while (got < sizeof buf - 1 && !memchr(buf, '\n', got)) {
        ssize_t r = wait_fd(fd, POLLIN, deadline) ? recv(fd, buf + got, sizeof buf - 1 - got, 0) : -2;
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = 0;
    int status;
    if (strncmp(buf, "HTTP/1.", 7) || sscanf(buf + 8, " %3d", &status) != 1) {
        snprintf(err, errlen, "%s", got ? "not an HTTP answer" : "no answer in time");
        return -1;
    }
    return status;
}

int cmd_probe(int argc, char **argv) {
    probe_args a = {"127.0.0.1", default_port(), 5};
    const char *pos[1], *path = "/health";
    int n_pos = 0;
    char perr[300];
    int rc = dmt_options_parse("probe", probe_options, 3, &a, argc, argv, NULL, pos, 1, &n_pos, perr, sizeof perr);
    if (rc == 0 && n_pos) {
        path = pos[0];
        if (path[0] != '/' || strlen(path) >= 256 || strpbrk(path, " \r\n")) {
            rc = -1;
            snprintf(perr, sizeof perr, "PATH must start with / (e.g. /ready), got '%.100s'", path);
        }
    }
    if (rc) { /* an error in one line, as every command; the help only when asked */
        if (rc < 0) fprintf(stderr, "deepmt probe: %s\n", perr);
        else usage(stdout);
        return rc > 0 ? 0 : 2;
    }
    const char *host = a.host;
    int port = a.port;
    long timeout = a.timeout;
    char err[300];
    int status = get_status(host, port, path, (double)timeout, err, sizeof err);
    if (status == 200) return 0;
    if (status < 0) fprintf(stderr, "deepmt probe: GET %s on %s:%d: %s\n", path, host, port, err);
    else fprintf(stderr, "deepmt probe: GET %s on %s:%d answered %d\n", path, host, port, status);
    return 1;
}
