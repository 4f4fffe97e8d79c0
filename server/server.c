/* server.c — the life of `deepmt serve`: start, load, serve, drain, stop.
 *
 *   1. read config.json (fails fast on a missing or bad model directory);
 *   2. open the HTTP socket: /health answers at once, /ready says 503 "loading";
 *   3. load the weights on a background thread, then start the workers (/ready 200);
 *   4. on SIGTERM or SIGINT: stop accepting connections, answer every request in
 *      flight or still arriving on an open connection (within --drain-timeout; a
 *      second signal cuts the wait short), stop the workers and the HTTP threads,
 *      exit 0. A signal during the load exits at once: the loader is not waited
 *      for (nothing depends on it).
 * Signals are turned into bytes on a pipe by a handler (the only global here):
 * BLAS creates threads before main() that would not block them, so sigwait()
 * could not be relied on.
 */
#include "server/server.h"
#include "server/clock.h"
#include "server/log.h"
#include "server/ratelimit.h"
#include "server/transport/http.h"
#include "model/blas_kernels.h"
#include "model/gemm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    int saved = errno;
    char b = sig == SIGINT ? 'I' : 'T';
    if (write(signal_pipe[1], &b, 1) < 0) { /* pipe full: a wake-up is pending anyway */ }
    errno = saved;
}

typedef struct {
    dmt_server *srv;
    atomic_int failed;
} load_state;

static void on_loaded(void *arg, const char *error) {
    load_state *ls = arg;
    if (error) {
        dmt_server_log(ls->srv->cfg, "cannot load the model: %s", error);
        atomic_store(&ls->failed, 1);
    }
    char b = error ? 'F' : 'L';
    if (write(signal_pipe[1], &b, 1) < 0) { /* the main loop also polls the flag */ }
}

/* Waits up to ms for a byte on the signal pipe; returns it, or 0 on timeout. */
static char wait_event(int ms) {
    struct pollfd p = {.fd = signal_pipe[0], .events = POLLIN};
    int rc = poll(&p, 1, ms);
    char b = 0;
    if (rc > 0 && read(signal_pipe[0], &b, 1) != 1) b = 0;
    return b;
}

/* A clear message when the model directory is missing. */
static int check_model_dir(const dmt_server_config *cfg, dmt_config *mcfg) {
    struct stat st;
    char err[1024], path[1100];
    snprintf(path, sizeof path, "%s/config.json", cfg->model_dir);
    if (stat(path, &st) != 0) {
        int e = errno;
        if (!strcmp(cfg->model_dir, "models/default"))
            fprintf(stderr, "deepmt serve: no model in models/default yet: the training run produces it "
                            "(make train, docs/training.md). Until then pass --model DIR (or set DEEPMT_MODEL) "
                            "to a folder with config.json, model.safetensors and sentencepiece.model, "
                            "e.g. --model tests/fixtures/tiny-model (random weights, for trying the API).\n");
        else
            fprintf(stderr, "deepmt serve: %s: %s (is --model a model directory?)\n", path, strerror(e));
        return -1;
    }
    if (dmt_config_load(path, mcfg, err, sizeof err) != 0) {
        fprintf(stderr, "deepmt serve: %s\n", err);
        return -1;
    }
    if (mcfg->n_languages == 0) {
        fprintf(stderr, "deepmt serve: %s lists no languages\n", path);
        return -1;
    }
    return 0;
}

/* --max-batch-cost 0: the most one sentence may cost under the API's limits (beam
 * 16 at most, max_positions pieces in and out), so any valid request can run, but
 * at least 16384 so that ordinary sentences fill batches of 32. */
static long batch_cost(const dmt_server_config *cfg, const dmt_config *mcfg) {
    if (cfg->max_batch_cost > 0) return cfg->max_batch_cost;
    long one = 16L * 2 * mcfg->max_positions;
    return one > 16384 ? one : 16384;
}

#define DRAIN_LINGER_S 2.0 /* how long a drain keeps connections with no request in flight */

/* Stops accepting connections and answers what was accepted: requests in flight,
 * and requests still arriving on open connections (headers half sent at the
 * signal, a keep-alive connection's next request), all with Connection: close.
 * A connection with nothing in flight is kept DRAIN_LINGER_S (an idle keep-alive
 * connection shows nothing until its client sends). After --drain-timeout, or on
 * a second signal, queued and running work is dropped with 503. */
static void drain(dmt_server *srv) {
    const dmt_server_config *cfg = srv->cfg;
    dmt_http_quiesce(srv);
    double t0 = dmt_now(), limit = t0 + cfg->drain_timeout_s, linger = t0 + DRAIN_LINGER_S;
    for (;;) {
        double now = dmt_now();
        int active = atomic_load(&srv->active), open = atomic_load(&srv->connections);
        if (active == 0 && (open == 0 || now >= linger || now >= limit)) return;
        if (now >= limit) {
            dmt_server_log(cfg, "drain timeout (%d s): dropping the work of %d request(s)", cfg->drain_timeout_s,
                           active);
            break;
        }
        char ev = wait_event(20);
        if (ev == 'T' || ev == 'I') {
            dmt_server_log(cfg, "second signal: dropping queued work, stopping without waiting for %d request(s)",
                           atomic_load(&srv->active));
            break;
        }
    }
    dmt_scheduler_cancel(srv->sched);
}

int dmt_server_run(const dmt_server_config *cfg) {
    dmt_server srv = {.cfg = cfg};
    char err[1024];
    int status = 1;
    if (check_model_dir(cfg, &srv.model_cfg)) return 1;
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK)) {
        perror("deepmt serve: pipe");
        return 1;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv.started = dmt_now();
    srv.metrics = dmt_metrics_new();
    srv.sched = dmt_scheduler_new((dmt_scheduler_options){cfg->workers, cfg->blas_threads, cfg->max_batch_sentences,
                                                          cfg->max_batch_tokens, cfg->max_wait_ms, cfg->max_queue,
                                                          cfg->precision, batch_cost(cfg, &srv.model_cfg),
                                                          cfg->max_request_cost, cfg->batching == 1},
                                  srv.metrics);
    srv.ratelimit = dmt_ratelimit_new(cfg->req_limit);
    if (!srv.metrics || !srv.sched || (cfg->req_limit > 0 && !srv.ratelimit)) {
        fprintf(stderr, "deepmt serve: out of memory\n");
        goto out;
    }
    if (dmt_http_start(&srv, err, sizeof err)) {
        fprintf(stderr, "deepmt serve: %s\n", err);
        goto out;
    }
    if (dmt_probe_start(&srv, err, sizeof err)) {
        fprintf(stderr, "deepmt serve: %s\n", err);
        dmt_http_stop(&srv);
        goto out;
    }
    dmt_server_log(cfg, "listening on http://%s%s%s:%d (model %s loading; %d worker%s, %d BLAS thread%s each, "
                        "%s BLAS kernels, %s batches of up to %d sentences)",
                   strchr(cfg->host, ':') ? "[" : "", cfg->host, strchr(cfg->host, ':') ? "]" : "", dmt_http_port(&srv),
                   cfg->model_dir, cfg->workers, cfg->workers == 1 ? "" : "s", cfg->blas_threads,
                   cfg->blas_threads == 1 ? "" : "s", dmt_blas_corename(), cfg->batching == 1 ? "continuous" : "whole",
                   cfg->max_batch_sentences);
    load_state ls = {.srv = &srv};
    if (dmt_scheduler_load_async(srv.sched, cfg->model_dir, on_loaded, &ls)) {
        fprintf(stderr, "deepmt serve: cannot start the loader thread\n");
        goto stop;
    }
    status = 0;
    for (;;) {
        char ev = wait_event(-1);
        if (ev == 'L') {
            const dmt_model *m = dmt_scheduler_model(srv.sched);
            char products[64];
            dmt_server_log(cfg, "model loaded in %.2f s (%s products); ready", dmt_scheduler_load_seconds(srv.sched),
                           dmt_gemm_describe(m->kernels, m->layout, products, sizeof products));
        } else if (ev == 'F') {
            status = 1;
            break;
        } else if (ev == 'T' || ev == 'I') {
            dmt_server_log(cfg, "%s: draining %d request%s in flight", ev == 'T' ? "SIGTERM" : "SIGINT",
                           atomic_load(&srv.active), atomic_load(&srv.active) == 1 ? "" : "s");
            break;
        }
    }
    if (!dmt_scheduler_ready(srv.sched) && !atomic_load(&ls.failed)) {
        /* still loading (a large model, a slow disk): nothing is in flight, and the
         * loader cannot be interrupted, so stop without waiting for it */
        dmt_http_stop(&srv);
        dmt_server_log(cfg, "stopped while the model was loading");
        fflush(NULL);
        _exit(status);
    }
    drain(&srv);
stop:
    dmt_scheduler_stop(srv.sched); /* finishes what is queued, resuming those connections */
    for (int i = 0; i < 100 && atomic_load(&srv.active) > 0; i++) wait_event(20);
    dmt_http_stop(&srv);
    dmt_server_log(cfg, "stopped");
out:
    dmt_scheduler_free(srv.sched);
    dmt_metrics_free(srv.metrics);
    dmt_ratelimit_free(srv.ratelimit);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    return status;
}
