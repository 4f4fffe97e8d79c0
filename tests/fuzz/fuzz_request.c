/* fuzz_request.c — libFuzzer target for the request path of POST /translate,
 * without sockets: body -> parsed (JSON, or a form decoded as the server does)
 * -> validated request (dmt_api_translate_parse) -> response JSON
 * (dmt_api_translate_result, with every sentence "translated" by a stand-in) or
 * error JSON (dmt_api_error). Two models are served: the tiny model's config.json
 * (tests/fixtures/tiny-model; $DEEPMT_FIXTURES overrides the folder; en, de, fr,
 * cs) and a second with en and es, so that routing, the "model" field and pivots
 * through English are fuzzed too; no weights are loaded.
 *
 * The first byte picks the variant: bit 0 a form body (else JSON), bit 1 API keys
 * on (the key is "k"), bit 2 small limits (--max-chars 64, --max-sentences 4),
 * bit 3 the last sentence fails in the engine (the answer is then a 413).
 * Checked on every input (a failed check aborts, which libFuzzer reports):
 *   - a refusal is 400, 403 or 413 with a message; never 500 (no allocation fails
 *     here), and its error JSON always builds (a message quoting the client's
 *     bytes stays valid UTF-8);
 *   - an accepted request has spans inside its texts, jobs that point into them,
 *     and within the limits; its answer is 200 and serializes, with as many
 *     translatedText entries as texts for an array q.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/config.h"
#include "server/api/api.h"
#include "text/detect.h"
#include "text/textsafe.h"
#include "base/utf8.h"

#define REQUIRE(cond, ...)                                                           \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "fuzz_request: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            abort();                                                                 \
        }                                                                            \
    } while (0)

static dmt_config mcfg;
static dmt_served tiny, esp;
static dmt_model_set set;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *root = getenv("DEEPMT_FIXTURES");
    char path[1024], err[1024];
    snprintf(path, sizeof path, "%s/tiny-model/config.json", root && *root ? root : "tests/fixtures");
    if (dmt_config_load(path, &mcfg, err, sizeof err)) {
        fprintf(stderr, "fuzz_request: %s (run from the repository root, or set DEEPMT_FIXTURES)\n", err);
        exit(1);
    }
    tiny.cfg = esp.cfg = mcfg;
    esp.cfg.n_languages = 2;
    snprintf(esp.cfg.languages[1].code, sizeof esp.cfg.languages[1].code, "es");
    snprintf(esp.cfg.languages[1].name, sizeof esp.cfg.languages[1].name, "Spanish");
    snprintf(tiny.spec.name, sizeof tiny.spec.name, "tiny");
    snprintf(esp.spec.name, sizeof esp.spec.name, "esp");
    atomic_store(&tiny.refs, 1); /* never freed: the set below is never released to 0 */
    atomic_store(&esp.refs, 1);
    set.models[set.n++] = &tiny;
    set.models[set.n++] = &esp;
    set.languages = mcfg;
    set.languages.languages[set.languages.n_languages++] = esp.cfg.languages[1];
    atomic_store(&set.refs, 1);
    return 0;
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* application/x-www-form-urlencoded, percent and '+' decoded in place; returns the length. */
static size_t form_decode(char *s, size_t len) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '+') s[o++] = ' ';
        else if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            s[o++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else s[o++] = s[i];
    }
    return o;
}

/* A form body into the JSON object the server builds from one (http.c: every value a
 * string, a repeated key an array, invalid UTF-8 refused). NULL with a message. */
static json_t *parse_form(const char *body, size_t len, char *err, size_t errlen) {
    json_t *obj = json_object();
    char *copy = malloc(len + 1);
    memcpy(copy, body, len);
    copy[len] = 0;
    for (char *p = copy, *end = copy + len; p < end;) {
        char *amp = memchr(p, '&', (size_t)(end - p));
        if (!amp) amp = end;
        *amp = 0;
        char *eq = strchr(p, '=');
        if (eq) *eq = 0;
        size_t kl = form_decode(p, strlen(p)), vl = eq ? form_decode(eq + 1, (size_t)(amp - eq - 1)) : 0;
        p[kl] = 0;
        if (kl && !memchr(p, 0, kl)) {
            if (!dmt_utf8_validate(p, kl, NULL) || (eq && !dmt_utf8_validate(eq + 1, vl, NULL))) {
                snprintf(err, errlen, "invalid UTF-8 in a form field");
                json_decref(obj);
                free(copy);
                return NULL;
            }
            json_t *v = json_stringn(eq ? eq + 1 : "", vl), *old = json_object_get(obj, p);
            REQUIRE(v, "json_stringn refused valid UTF-8");
            if (!old) json_object_set_new(obj, p, v);
            else if (json_is_array(old)) json_array_append_new(old, v);
            else json_object_set_new(obj, p, json_pack("[O, o]", old, v));
        }
        p = amp + 1;
    }
    free(copy);
    return obj;
}

/* As http.c's parse_body for a JSON body. */
static json_t *parse_json(const char *body, size_t len, char *err, size_t errlen) {
    if (!dmt_utf8_validate(body, len, NULL)) {
        snprintf(err, errlen, "invalid UTF-8 in the request body");
        return NULL;
    }
    json_error_t jerr;
    json_t *j = json_loadb(body, len, 0, &jerr);
    if (!j) snprintf(err, errlen, "invalid JSON: %s", jerr.text);
    return j;
}

/* Every sentence "translated" by a stand-in: its text with ASCII upper-cased;
 * hypothesis k > 0 gets "~k" appended. With fail_last, the last sentence fails as
 * one the engine refuses ("too long": 413). */
static void fake_translate(dmt_api_request *r, int fail_last) {
    for (int i = 0; i < r->n_jobs; i++) {
        dmt_job *j = &r->jobs[i];
        REQUIRE(j->text && j->len > 0, "job %d: empty sentence", i);
        if (fail_last && i == r->n_jobs - 1) {
            snprintf(j->out.error, sizeof j->out.error, "source too long: 9999 pieces, limit 254");
            continue;
        }
        int n = r->alternatives + 1; /* the answer's n-best (a pivot's second leg) */
        j->out.texts = calloc((size_t)n, sizeof *j->out.texts);
        j->out.scores = calloc((size_t)n, sizeof *j->out.scores);
        j->out.n = n;
        for (int k = 0; k < n; k++) {
            char *t = malloc(j->len + 3);
            size_t l = j->len;
            memcpy(t, j->text, l);
            for (size_t b = 0; b < l; b++)
                if (t[b] >= 'a' && t[b] <= 'z') t[b] = (char)(t[b] - 32);
            if (k) t[l++] = '~', t[l++] = (char)('0' + k % 10);
            t[l] = 0;
            j->out.texts[k] = t;
        }
    }
}

static void check_accepted(const dmt_server_config *cfg, dmt_api_request *r, int fail_last) {
    REQUIRE(r->n_sentences <= cfg->max_sentences, "%d sentences", r->n_sentences);
    for (int t = 0; t < r->n_texts; t++)
        for (int i = 0; i < r->count[t]; i++) {
            const dmt_span *sp = &r->spans[r->first[t] + i];
            REQUIRE(sp->len > 0 && sp->start + sp->len <= r->lens[t], "text %d span %d outside", t, i);
        }
    for (int i = 0; i < r->n_jobs; i++) {
        const dmt_job *j = &r->jobs[i];
        int inside = 0;
        for (int t = 0; t < r->n_texts && !inside; t++)
            inside = j->text >= r->texts[t] && j->text + j->len <= r->texts[t] + r->lens[t];
        REQUIRE(inside, "job %d points outside the texts", i);
    }
    fake_translate(r, fail_last);
    int status = 0;
    json_t *res = dmt_api_translate_result(r, &status);
    fail_last = fail_last && r->n_jobs > 0;
    REQUIRE(res && status == (fail_last ? 413 : 200), "result status %d", status);
    if (fail_last) {
        REQUIRE(json_is_string(json_object_get(res, "error")), "no error message");
        json_decref(res);
        return;
    }
    char *s = json_dumps(res, JSON_COMPACT);
    REQUIRE(s, "the answer does not serialize");
    json_t *tt = json_object_get(res, "translatedText");
    REQUIRE(r->is_array ? json_array_size(tt) == (size_t)r->n_texts : json_is_string(tt), "translatedText shape");
    free(s);
    json_decref(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    dmt_server_config cfg;
    dmt_server_config_default(&cfg);
    char *key = "k";
    if (mode & 2) cfg.api_keys = &key, cfg.n_api_keys = 1;
    if (mode & 4) cfg.max_chars = 64, cfg.max_sentences = 4;
    char err[1024] = "";
    json_t *j = mode & 1 ? parse_form(body, len, err, sizeof err) : parse_json(body, len, err, sizeof err);
    int status = 400;
    dmt_api_request *r = NULL;
    if (j) {
        err[0] = 0;
        atomic_fetch_add(&set.refs, 1); /* the request's, released when it is freed */
        status = dmt_api_translate_parse(&cfg, &set, j, &r, err, sizeof err);
    }
    if (status) {
        REQUIRE(!r, "a refused request was returned");
        REQUIRE(status == 400 || status == 403 || status == 413, "status %d: %s", status, err);
        REQUIRE(err[0] && memchr(err, 0, sizeof err), "no message for status %d", status);
        json_t *e = dmt_api_error("%s", err);
        REQUIRE(e, "the error JSON does not build for: %s", err);
        char *s = json_dumps(e, JSON_COMPACT);
        REQUIRE(s, "the error JSON does not serialize");
        free(s);
        json_decref(e);
        return 0;
    }
    check_accepted(&cfg, r, mode & 8);
    dmt_api_request_free(r);
    return 0;
}
