/* log.c — the server's log lines (log.h): messages and the access log, as text or
 * JSON lines on stderr, with a UTC timestamp to the millisecond. */
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <jansson.h>

#include "text/textsafe.h"

static void timestamp(char *buf, size_t cap) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, cap - n, ".%03dZ", (int)(tv.tv_usec / 1000));
}

/* Messages may quote what clients sent (libmicrohttpd quotes URLs): escaped to one
 * line of valid UTF-8, so that a line cannot be forged nor dropped. */
void dmt_server_log(const dmt_server_config *cfg, const char *fmt, ...) {
    char raw[1024], msg[2048], ts[40];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof raw ? (size_t)n : sizeof raw - 1;
    dmt_text_escape(msg, sizeof msg, raw, len, 0);
    timestamp(ts, sizeof ts);
    if (cfg->log_json) {
        json_t *j = json_pack("{s:s, s:s, s:s}", "time", ts, "level", "info", "message", msg);
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s) fprintf(stderr, "%s\n", s);
        free(s);
        json_decref(j);
    } else {
        fprintf(stderr, "%s deepmt serve: %s\n", ts, msg);
    }
}

/* Client, method and path are escaped (dmt_text_escape): a request line of any
 * bytes gives one line, in JSON too. Latency is rounded to 0.1 ms. */
void dmt_access_log(const dmt_server_config *cfg, const char *client, const char *method, const char *path,
                    int status, size_t bytes, double seconds, int sentences) {
    char ts[40], cl[128], m[80], p[640];
    int json = cfg->log_json, flags = json ? 0 : DMT_ESC_QUOTE;
    timestamp(ts, sizeof ts);
    dmt_text_escape(cl, sizeof cl, client, strlen(client), flags);
    dmt_text_escape(m, sizeof m, method, strlen(method), flags);
    dmt_text_escape(p, sizeof p, path, strlen(path), flags);
    double ms = (double)(long long)(seconds * 1e4 + 0.5) / 10.0;
    if (json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:f, s:i}", "time", ts, "client", cl, "method", m,
                              "path", p, "status", status, "bytes", (json_int_t)bytes, "latency_ms", ms,
                              "sentences", sentences);
        /* 12 significant digits print the rounded value (527.9, not 527.89999999999998) */
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(12)) : NULL;
        if (s) fprintf(stderr, "%s\n", s);
        else fprintf(stderr, "%s %s \"%s %s\" %d (out of memory formatting the JSON log line)\n", ts, cl, m, p, status);
        free(s);
        json_decref(j);
    } else {
        fprintf(stderr, "%s %s \"%s %s\" %d %zu %.1fms sentences=%d\n", ts, cl, m, p, status, bytes, ms, sentences);
    }
}
