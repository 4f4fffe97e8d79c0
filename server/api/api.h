/* api.h — the JSON side of POST /translate and GET /languages (api.c): request
 * validation, sentence splitting into scheduler work, answers. */
#ifndef DEEPMT_SERVER_API_API_H
#define DEEPMT_SERVER_API_API_H

#include <stddef.h>

#include <jansson.h>

#include "model/config.h"
#include "server/config.h"
#include "server/sched/scheduler.h"
#include "text/sentences.h"

/* A validated POST /translate. */
typedef struct {
    json_t *body;              /* owns the strings texts[] point into */
    int is_array;              /* q was an array */
    int n_texts;
    const char **texts;
    size_t *lens;
    int *first, *count;        /* text t owns jobs first[t] .. first[t] + count[t] - 1 */
    dmt_span *spans;           /* per job: where the sentence sits in its text */
    int n_sentences;
    int same_language;         /* source == target: echo the input */
    int alternatives;
    int empty_alternatives;    /* format html with alternatives: answered as [] (none computed) */
    int alignments;            /* "alignments": true: word pairs in the answer (format text) */
    const char **detected;     /* per text, source "auto": a language code, or NULL */
    double *confidence;
    /* format "html": texts[] above are the documents' text runs (html.h); the
     * documents as sent and their detected languages are kept here */
    struct dmt_html *html;
    int n_docs;
    const char **docs;
    size_t *doc_lens;
    const char **doc_detected;
    double *doc_confidence;
    dmt_work work;
} dmt_api_request;

/* Parses and validates a translate request; takes ownership of body. model (NULL
 * until loaded) measures sentences: one too long for it is cut into chunks
 * (dmt_sentence_chunks) translated as jobs of their own. Returns 0 with *out set, or
 * an HTTP status (400, 403, 413) with a message in err. */
int dmt_api_translate_parse(const dmt_server_config *cfg, const dmt_config *mcfg, const dmt_model *model, json_t *body,
                            dmt_api_request **out, char *err, size_t errlen);

/* The response body once every job is done; *status is 200, or the error status
 * (with {"error": ...}). */
json_t *dmt_api_translate_result(const dmt_api_request *r, int *status);

void dmt_api_request_free(dmt_api_request *r);

json_t *dmt_api_languages(const dmt_config *mcfg);
/* key is one of --api-keys (compared in constant time); NULL never is. */
int dmt_api_key_allowed(const dmt_server_config *cfg, const char *key);
/* A request's key: its "api_key" field, or "apiKey" (the npm libretranslate
 * client's spelling); NULL when it has neither (or not as a string). */
const char *dmt_api_key_of(json_t *body);
/* The key check as LibreTranslate answers it: 0 when keys are off or key is one
 * of them; 400 "Please contact the server operator to get an API key" when keys
 * are on and none was sent; 403 "Invalid API key" for any other key. */
int dmt_api_key_status(const dmt_server_config *cfg, const char *key, char *err, size_t errlen);
json_t *dmt_api_error(const char *fmt, ...);
/* Who a request comes from, for fairness and quotas: "key:" and a hash of its API key
 * when keys are on (the key itself is not kept), else "addr:" and the client
 * address. A key sent to a server without keys is ignored: it would let any client
 * take a fresh share per request. */
void dmt_api_client_id(const dmt_server_config *cfg, const char *api_key, const char *address, char *out, size_t cap);

#endif
