/* server.h — `deepmt serve`: a LibreTranslate-compatible HTTP translation server.
 *
 * HTTP threads (libmicrohttpd, a small pool over epoll) parse and validate requests,
 * split texts into sentences and queue them; worker threads, each with its own
 * dmt_state, form batches from everything queued (all requests, all target
 * languages) and run dmt_translate; finished requests are resumed and answered.
 * docs/server.md describes the API, the flags and the metrics.
 *
 * The parts, each depending only on those below it (tests/sh/test_layout.sh checks):
 *   server.c, server.h   the life of a server: start, load, serve, drain, stop
 *   transport/           libmicrohttpd: routing, body limits, suspend and resume,
 *                        read deadlines (connguard.c), half-closed clients
 *   api/                 the JSON API (api.c), the other LibreTranslate endpoints
 *                        (lt_api.c), /translate_file (files.c), the web page, the spec
 *   sched/               the sentence queue and workers (scheduler.c), the pure
 *                        batching policy (policy.c), the pool the CLI shares (pool.c)
 *   config, log, metrics, clock   what every part may use
 * Text handling (sentences, HTML, documents, detection) is the text/ module's.
 */
#ifndef DEEPMT_SERVER_SERVER_H
#define DEEPMT_SERVER_SERVER_H

#include "server/config.h"

/* Serves until SIGTERM or SIGINT, then stops accepting connections, finishes the
 * requests in flight and returns 0; 1 when the model or the socket failed. */
int dmt_server_run(const dmt_server_config *c);

#endif
