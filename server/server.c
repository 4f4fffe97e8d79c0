/* server.c — the life of `deepmt serve`: start, load, serve, reload, drain, stop.
 *
 *   1. read the model list and every config.json (fails fast on a missing or bad
 *      model directory);
 *   2. open the HTTP socket: /health answers at once, /ready says 503 "loading";
 *   3. load the weights on a background thread, then start the workers (/ready 200);
 *   SIGHUP (or POST /admin/reload): the list is read again and what is new or
 *      changed loads on a background thread while the old set serves (registry.h);
 *      a reload asked for during one runs after it;
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
#include "base/options.h"
#include "model/blas_kernels.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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
    char b = sig == SIGINT ? 'I' : sig == SIGHUP ? 'H' : 'T';
    if (write(signal_pipe[1], &b, 1) < 0) { /* pipe full: a wake-up is pending anyway */ }
    errno = saved;
}

/* A load (the first) or a reload on its own thread; it reports with a byte on the
 * pipe: 'L' loaded, 'F' the first load failed, 'R' a reload ended. */
typedef struct {
    dmt_server *srv;
    dmt_model_source src;
    pthread_t thread;
    atomic_int running;
    int first;
    char error[1024];
} load_state;

static void *load_main(void *arg) {
    load_state *ls = arg;
    char err[1024] = "";
    int rc = dmt_registry_reload(ls->srv->registry, &ls->src, err, sizeof err);
    snprintf(ls->error, sizeof ls->error, "%s", rc ? err : "");
    char b = ls->first ? (rc ? 'F' : 'L') : 'R';
    atomic_store(&ls->running, 0);
    if (write(signal_pipe[1], &b, 1) < 0) { /* the main loop also sees running drop at its next event */ }
    return NULL;
}

static int start_load(load_state *ls, int first) {
    if (atomic_load(&ls->running)) return 1; /* one at a time */
    if (ls->thread) pthread_join(ls->thread, NULL);
    ls->thread = 0;
    ls->first = first;
    atomic_store(&ls->running, 1);
    if (pthread_create(&ls->thread, NULL, load_main, ls) != 0) {
        atomic_store(&ls->running, 0);
        ls->thread = 0;
        return -1;
    }
    return 0;
}

/* One line for what the latest load did, model by model. */
static void log_models(const dmt_server_config *cfg, dmt_registry *reg, const char *what) {
    dmt_model_set *set = dmt_registry_acquire(reg);
    if (!set) return;
    char line[4096], products[64];
    size_t o = 0;
    for (int i = 0; i < set->n && o < sizeof line; i++) {
        const dmt_served *m = set->models[i];
        o += (size_t)snprintf(line + o, sizeof line - o, "%s%s (%s, %d languages, %s products: %s%s, loaded in %.2f s)",
                              i ? "; " : "", m->spec.name, m->spec.dir, m->cfg.n_languages,
                              dmt_gemm_describe(m->model->kernels, m->model->layout, products, sizeof products),
                              m->model->precision_reason, m->model->shortlist ? "; vocabulary shortlist" : "",
                              m->load_seconds);
    }
    dmt_server_log(cfg, "%s: %d model%s: %s", what, set->n, set->n == 1 ? "" : "s", line);
    for (int i = 0; i < set->n_failures; i++)
        dmt_server_log(cfg, "%s: model %s failed to load (%s): %s", what, set->failures[i].name,
                       dmt_model_set_find(set, set->failures[i].name) ? "its previous version serves on"
                                                                       : "not served",
                       set->failures[i].error);
    dmt_model_set_release(set);
}

/* Waits up to ms for a byte on the signal pipe; returns it, or 0 on timeout. */
static char wait_event(int ms) {
    struct pollfd p = {.fd = signal_pipe[0], .events = POLLIN};
    int rc = poll(&p, 1, ms);
    char b = 0;
    if (rc > 0 && read(signal_pipe[0], &b, 1) != 1) b = 0;
    return b;
}

/* A clear message when a model directory is missing; the union of the configs'
 * languages into mcfg (for /languages while the weights load). */
static int check_models(const dmt_server_config *cfg, const dmt_model_source *src, dmt_config *mcfg, int *max_positions) {
    dmt_model_spec specs[DMT_MAX_MODELS];
    char err[1024], path[1100];
    int n = dmt_model_list_read(src, specs, err, sizeof err);
    if (n < 0) {
        fprintf(stderr, "deepmt serve: %s\n", err);
        return -1;
    }
    memset(mcfg, 0, sizeof *mcfg);
    for (int i = 0; i < n; i++) {
        struct stat st;
        dmt_config c;
        snprintf(path, sizeof path, "%s/config.json", specs[i].dir);
        if (stat(path, &st) != 0) {
            int e = errno;
            if (!strcmp(specs[i].dir, DMT_DEFAULT_MODEL))
                fprintf(stderr, "deepmt serve: no model in models/default yet: the training run produces it "
                                "(make train, docs/training.md). Until then pass --model DIR (or set DEEPMT_MODEL) "
                                "to a folder with config.json, model.safetensors and sentencepiece.model, "
                                "e.g. --model tests/fixtures/tiny-model (random weights, for trying the API).\n");
            else
                fprintf(stderr, "deepmt serve: %s: %s (is --model a model directory?)\n", path, strerror(e));
            return -1;
        }
        if (dmt_config_load(path, &c, err, sizeof err) != 0) {
            fprintf(stderr, "deepmt serve: %s\n", err);
            return -1;
        }
        if (c.n_languages == 0) {
            fprintf(stderr, "deepmt serve: %s lists no languages\n", path);
            return -1;
        }
        if (c.max_positions > *max_positions) *max_positions = c.max_positions;
        for (int l = 0; l < c.n_languages; l++) {
            int seen = 0;
            for (int k = 0; k < mcfg->n_languages && !seen; k++) seen = !strcmp(mcfg->languages[k].code, c.languages[l].code);
            if (!seen && mcfg->n_languages < DMT_MAX_LANGUAGES) mcfg->languages[mcfg->n_languages++] = c.languages[l];
        }
    }
    return 0;
}

/* --max-batch-cost 0: the most one sentence may cost under the API's limits (beam
 * 16 at most, max_positions pieces in and out), so any valid request can run, but
 * at least 16384 so that ordinary sentences fill batches of 32. */
static long batch_cost(const dmt_server_config *cfg, int max_positions) {
    if (cfg->max_batch_cost > 0) return cfg->max_batch_cost;
    long one = 16L * 2 * max_positions;
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

/* The ready line: "model loaded in T s (P products); ready", each model named when
 * there are several. */
static void log_ready(const dmt_server_config *cfg, dmt_registry *reg, double seconds) {
    dmt_model_set *set = dmt_registry_acquire(reg);
    char line[4096] = "", products[64];
    size_t o = 0;
    for (int i = 0; i < set->n && o < sizeof line; i++) {
        const dmt_served *m = set->models[i];
        const char *p = dmt_gemm_describe(m->model->kernels, m->model->layout, products, sizeof products);
        const char *sl = m->model->shortlist ? "; vocabulary shortlist" : "";
        char batch[96] = ""; /* a model's own batch limit (scheduler.h model_batch_limits) */
        if (cfg->model_batch_limits && m->cfg.max_batch_sentences > 0 &&
            m->cfg.max_batch_sentences < cfg->max_batch_sentences)
            snprintf(batch, sizeof batch, "; batches of up to %d sentences (its config.json)",
                     m->cfg.max_batch_sentences);
        if (set->n == 1)
            o += (size_t)snprintf(line + o, sizeof line - o, "(%s products: %s%s%s)", p, m->model->precision_reason,
                                  sl, batch);
        else
            o += (size_t)snprintf(line + o, sizeof line - o, "%s%s %s (%s products: %s%s%s)", i ? ", " : "",
                                  m->spec.name, m->spec.dir, p, m->model->precision_reason, sl, batch);
    }
    dmt_server_log(cfg, "%s loaded in %.2f s%s%s; ready", set->n == 1 ? "model" : "models", seconds,
                   set->n == 1 ? " " : ": ", line);
    for (int i = 0; i < set->n_failures; i++)
        dmt_server_log(cfg, "model %s (%s) not served: %s", set->failures[i].name, set->failures[i].dir,
                       set->failures[i].error);
    dmt_model_set_release(set);
}

int dmt_server_run(const dmt_server_config *cfg) {
    dmt_server srv = {.cfg = cfg, .reload_fd = -1};
    char err[1024];
    int status = 1, max_positions = 0;
    load_state ls = {.srv = &srv};
    ls.src = (dmt_model_source){.dirs = (const char *const *)cfg->model_dirs, .n_dirs = cfg->n_model_dirs,
                                .folder = cfg->models_folder[0] ? cfg->models_folder : NULL,
                                .precision = cfg->precision, .no_shortlist = cfg->no_shortlist};
    if (check_models(cfg, &ls.src, &srv.model_cfg, &max_positions)) return 1;
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK)) {
        perror("deepmt serve: pipe");
        return 1;
    }
    srv.reload_fd = signal_pipe[1];
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv.started = dmt_now();
    srv.metrics = dmt_metrics_new();
    srv.registry = dmt_registry_new();
    srv.sched = dmt_scheduler_new((dmt_scheduler_options){cfg->workers, cfg->blas_threads, cfg->max_batch_sentences,
                                                          cfg->max_batch_tokens, cfg->max_wait_ms, cfg->max_queue,
                                                          batch_cost(cfg, max_positions), cfg->max_request_cost,
                                                          cfg->batching == 1, cfg->model_batch_limits},
                                  srv.metrics);
    srv.ratelimit = dmt_ratelimit_new(cfg->req_limit);
    if (!srv.metrics || !srv.sched || !srv.registry || (cfg->req_limit > 0 && !srv.ratelimit)) {
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
    char what[1200];
    if (cfg->models_folder[0]) snprintf(what, sizeof what, "models in %s", cfg->models_folder);
    else if (cfg->n_model_dirs == 1) snprintf(what, sizeof what, "model %s", cfg->model_dirs[0]);
    else snprintf(what, sizeof what, "%d models", cfg->n_model_dirs);
    dmt_server_log(cfg, "listening on http://%s%s%s:%d (%s loading; %d worker%s, %d BLAS thread%s each, "
                        "%s BLAS kernels, %s batches of up to %d sentences)",
                   strchr(cfg->host, ':') ? "[" : "", cfg->host, strchr(cfg->host, ':') ? "]" : "", dmt_http_port(&srv),
                   what, cfg->workers, cfg->workers == 1 ? "" : "s", cfg->blas_threads,
                   cfg->blas_threads == 1 ? "" : "s", dmt_blas_corename(), cfg->batching == 1 ? "continuous" : "whole",
                   cfg->max_batch_sentences);
    if (cfg->blas_threads > 0) dmt_kernels_set_threads(cfg->blas_threads); /* before the load: packing uses them */
    double t0 = dmt_now();
    if (start_load(&ls, 1)) {
        fprintf(stderr, "deepmt serve: cannot start the loader thread\n");
        goto stop;
    }
    status = 0;
    int reload_wanted = 0;
    for (;;) {
        char ev = wait_event(-1);
        if (ev == 'L') {
            if (dmt_scheduler_start(srv.sched, err, sizeof err)) {
                dmt_server_log(cfg, "cannot start: %s", err);
                status = 1;
                break;
            }
            log_ready(cfg, srv.registry, dmt_now() - t0);
        } else if (ev == 'F') {
            dmt_server_log(cfg, "cannot load the model: %s", ls.error);
            status = 1;
            break;
        } else if (ev == 'H') {
            if (!dmt_scheduler_ready(srv.sched) || start_load(&ls, 0) == 1) {
                reload_wanted = 1; /* after the load or reload that runs now */
            } else {
                dmt_server_log(cfg, "reload: reading the model list again");
            }
        } else if (ev == 'R') {
            if (ls.error[0]) dmt_server_log(cfg, "reload failed, the models serve on unchanged: %s", ls.error);
            else log_models(cfg, srv.registry, "reload");
            dmt_scheduler_models_changed(srv.sched); /* idle workers free what they held of retired models */
        } else if (ev == 'T' || ev == 'I') {
            dmt_server_log(cfg, "%s: draining %d request%s in flight", ev == 'T' ? "SIGTERM" : "SIGINT",
                           atomic_load(&srv.active), atomic_load(&srv.active) == 1 ? "" : "s");
            break;
        }
        if (reload_wanted && dmt_scheduler_ready(srv.sched) && !atomic_load(&ls.running)) {
            reload_wanted = 0;
            if (start_load(&ls, 0) == 0) dmt_server_log(cfg, "reload: reading the model list again");
        }
    }
    if (atomic_load(&ls.running)) {
        /* still loading (a large model, a slow disk): the loader cannot be
         * interrupted; at the first load nothing is in flight, so stop without
         * waiting for it; a reload is waited for after the drain */
        if (!dmt_scheduler_ready(srv.sched)) {
            dmt_http_stop(&srv);
            dmt_server_log(cfg, "stopped while the model was loading");
            fflush(NULL);
            _exit(status);
        }
    }
    if (dmt_scheduler_ready(srv.sched)) drain(&srv);
stop:
    dmt_scheduler_stop(srv.sched); /* finishes what is queued, resuming those connections */
    for (int i = 0; i < 100 && atomic_load(&srv.active) > 0; i++) wait_event(20);
    dmt_http_stop(&srv);
    if (ls.thread) pthread_join(ls.thread, NULL);
    dmt_server_log(cfg, "stopped");
out:
    dmt_scheduler_free(srv.sched); /* first: its workers hold states of the models */
    dmt_registry_free(srv.registry);
    dmt_metrics_free(srv.metrics);
    dmt_ratelimit_free(srv.ratelimit);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    return status;
}
