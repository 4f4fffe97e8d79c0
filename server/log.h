/* log.h — the server's log lines on stderr, text or JSON (log.c). Everything
 * quoted from clients is escaped (text/textsafe.h). */
#ifndef DEEPMT_SERVER_LOG_H
#define DEEPMT_SERVER_LOG_H

#include <stddef.h>

#include "server/config.h"

/* One message line. */
void dmt_server_log(const dmt_server_config *cfg, const char *fmt, ...);
/* One access-log line. */
void dmt_access_log(const dmt_server_config *cfg, const char *client, const char *method, const char *path,
                    int status, size_t bytes, double seconds, int sentences);

#endif
