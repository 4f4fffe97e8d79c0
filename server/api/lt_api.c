/* lt_api.c — /detect, /suggest, /frontend/settings and /spec (lt_api.h). */
#include "server/api/lt_api.h"

#include <stdlib.h>
#include <string.h>

#include "text/documents.h"
#include "server/api/embed.h"
#include "server/api/api.h"
#include "text/detect.h"
#include "text/textsafe.h"

/* Texts longer than this are read only this far for detection (detect.c reads
 * at most 4 KiB anyway); keeps an array q from costing a big copy. */
#define DETECT_JOIN_BYTES 8192

static size_t count_chars(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* The API key check shared by these endpoints: NULL when allowed, else the
 * 403 answer. */
static json_t *check_key(const dmt_server_config *cfg, json_t *body, int *status) {
    char err[128];
    int st = dmt_api_key_status(cfg, dmt_api_key_of(body), err, sizeof err);
    if (!st) return NULL;
    *status = st;
    return dmt_api_error("%s", err);
}

json_t *dmt_lt_detect(const dmt_server_config *cfg, const dmt_config *mcfg, json_t *body, int *status) {
    json_t *res = NULL;
    char *joined = NULL;
    *status = 400;
    if (!json_is_object(body)) {
        res = dmt_api_error("the request body must be a JSON object");
        goto out;
    }
    if ((res = check_key(cfg, body, status))) goto out;
    json_t *q = json_object_get(body, "q");
    /* as LibreTranslate: an empty q is a missing one */
    if (!q || json_is_null(q) || (json_is_string(q) && json_string_length(q) == 0) ||
        (json_is_array(q) && json_array_size(q) == 0)) {
        res = dmt_api_error("Invalid request: missing q parameter");
        goto out;
    }
    size_t n = json_is_array(q) ? json_array_size(q) : 1, chars = 0, len = 0;
    if (!json_is_array(q) && !json_is_string(q)) {
        res = dmt_api_error("q must be a string or an array of strings");
        goto out;
    }
    joined = malloc(DETECT_JOIN_BYTES + 1);
    if (!joined) {
        *status = 500;
        res = dmt_api_error("out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_is_array(q) ? json_array_get(q, i) : q;
        if (!json_is_string(s)) {
            res = dmt_api_error("q[%zu] must be a string", i);
            goto out;
        }
        const char *t = json_string_value(s);
        size_t l = json_string_length(s);
        chars += count_chars(t, l);
        /* whole texts only, a line each, while they fit */
        if (len + l + 1 <= DETECT_JOIN_BYTES) {
            memcpy(joined + len, t, l);
            len += l;
            joined[len++] = '\n';
        }
    }
    if (chars > (size_t)cfg->max_chars) {
        *status = 413;
        res = dmt_api_error("text too long: %zu characters, limit %d", chars, cfg->max_chars);
        goto out;
    }
    dmt_detect_guess g[DMT_MAX_LANGUAGES];
    int ng = dmt_detect(mcfg, joined, len, g, DMT_MAX_LANGUAGES);
    res = json_array();
    for (int i = 0; i < ng; i++)
        json_array_append_new(res, json_pack("{s:f, s:s}", "confidence", g[i].confidence, "language", g[i].code));
    *status = 200;
out:
    free(joined);
    json_decref(body);
    return res;
}

json_t *dmt_lt_suggest(const dmt_server_config *cfg, json_t *body, int *status) {
    json_t *res = check_key(cfg, body, status);
    json_decref(body);
    if (res) return res;
    *status = 403;
    return dmt_api_error("Suggestions are disabled on this server.");
}

json_t *dmt_lt_settings(const dmt_server_config *cfg, const dmt_config *mcfg, int files) {
    /* The web page starts on auto -> the first language that is not English
     * (English is the usual source), or the first one. */
    const dmt_language *target = mcfg->n_languages > 0 ? &mcfg->languages[0] : NULL;
    for (int i = 0; i < mcfg->n_languages; i++)
        if (strcmp(mcfg->languages[i].code, "en")) {
            target = &mcfg->languages[i];
            break;
        }
    json_t *formats = json_array();
    for (const char *const *e = dmt_doc_extensions; files && *e; e++) json_array_append_new(formats, json_string(*e));
    return json_pack("{s:i, s:i, s:b, s:b, s:b, s:b, s:o, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:i}",
                     "charLimit", cfg->max_chars, "frontendTimeout", 500,
                     "apiKeys", cfg->n_api_keys > 0, "keyRequired", cfg->n_api_keys > 0,
                     "suggestions", 0, "filesTranslation", files != 0, "supportedFilesFormat", formats,
                     "language", "source", "code", "auto", "name", "Auto Detect",
                     "target", "code", target ? target->code : "", "name", target ? target->name : "",
                     "maxAlternatives", cfg->max_alternatives); /* ours: what "alternatives" may ask */
}

DMT_EMBED(dmt_openapi_json, "server/api/openapi.json"); /* server/api/embed.h */

const char *dmt_lt_spec(size_t *len) {
    *len = (size_t)(dmt_openapi_json_end - dmt_openapi_json);
    return dmt_openapi_json;
}
