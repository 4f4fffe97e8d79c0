/* webpage.h — the page GET / answers to browsers (server/api/webpage.html, built into
 * the binary: one self-contained file, no outside fonts, scripts or styles). */
#ifndef DEEPMT_SERVER_API_WEBPAGE_H
#define DEEPMT_SERVER_API_WEBPAGE_H

#include <stddef.h>

const char *dmt_webpage(size_t *len);

/* A request with this Accept header wants the page, not the JSON banner:
 * browsers list text/html; API clients send application/json, * / * or nothing. */
int dmt_webpage_wanted(const char *accept);

#endif
