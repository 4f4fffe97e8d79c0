/* lt_api.h — the LibreTranslate endpoints beyond /translate and /languages:
 * /detect, /suggest, /frontend/settings and /spec (lt_api.c). Each builds a
 * whole answer at once; none runs the model.
 */
#ifndef DEEPMT_SERVER_API_LT_API_H
#define DEEPMT_SERVER_API_LT_API_H

#include <stddef.h>

#include <jansson.h>

#include "model/config.h"
#include "server/server.h"

/* POST /detect {"q": str | [str], "api_key"} -> [{"confidence", "language"}, ...],
 * best first; an array q is read as one text. Takes body; sets *status. */
json_t *dmt_lt_detect(const dmt_server_config *cfg, const dmt_config *mcfg, json_t *body, int *status);

/* POST /suggest: suggestions are not collected here, so 403 as LibreTranslate
 * answers with --suggestions off (after the API key check). Takes body. */
json_t *dmt_lt_suggest(const dmt_server_config *cfg, json_t *body, int *status);

/* GET /frontend/settings; files: /translate_file works. */
json_t *dmt_lt_settings(const dmt_server_config *cfg, const dmt_config *mcfg, int files);

/* GET /spec: the OpenAPI 3 description (server/api/openapi.json, built in). */
const char *dmt_lt_spec(size_t *len);

#endif
