/* api.c — the JSON side of the LibreTranslate-compatible API.
 *
 * POST /translate takes {"q": str | [str], "source": code | "auto", "target": code,
 * "format": "text" | "html", "alternatives": n, "api_key": key} plus our engine fields
 * beam_size, length_penalty and max_length. Form bodies arrive here already turned
 * into a JSON object of strings (http.c), so numbers may also be digit strings.
 * Texts are split into sentences (sentences.h); every sentence is one scheduler
 * job; the answer puts the translated sentences back between the original gaps.
 * With format "html" the texts are first cut into their runs of text (html.h),
 * which then go through the same path, and are put back into the markup.
 * docs/server.md lists the messages and status codes.
 */
#include "server/api/api.h"
#include "text/detect.h"
#include "text/textsafe.h"
#include "base/utf8.h"
#include "base/words.h"

#include "text/html.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BEAM 16

/* Messages quote what the client sent (a path, a language code), which may be
 * anything: escaped to valid UTF-8, since jansson refuses anything else. NULL
 * only when out of memory. */
json_t *dmt_api_error(const char *fmt, ...) {
    char msg[1024], safe[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    if (n >= (int)sizeof msg) { /* cut by vsnprintf: drop the last, maybe partial, character */
        while (len && ((unsigned char)msg[len - 1] & 0xC0) == 0x80) len--;
        if (len && (unsigned char)msg[len - 1] >= 0xC0) len--;
    }
    if (dmt_utf8_validate(msg, len, NULL)) return json_pack("{s:s%}", "error", msg, len);
    dmt_text_escape(safe, sizeof safe, msg, len, 0);
    return json_pack("{s:s}", "error", safe);
}

void dmt_api_client_id(const dmt_server_config *cfg, const char *api_key, const char *address, char *out, size_t cap) {
    if (cfg->n_api_keys > 0 && api_key) {
        unsigned long long h = 1469598103934665603ull; /* FNV-1a */
        for (const char *k = api_key; *k; k++) h = (h ^ (unsigned char)*k) * 1099511628211ull;
        snprintf(out, cap, "key:%016llx", h);
    } else {
        snprintf(out, cap, "addr:%s", address && *address ? address : "-");
    }
}

json_t *dmt_api_languages(const dmt_model_set *set, const dmt_config *boot) {
    json_t *arr = json_array();
    const dmt_config *mcfg = set ? &set->languages : boot;
    for (int i = 0; i < mcfg->n_languages; i++) {
        json_t *targets = json_array();
        dmt_served *d, *a, *b;
        for (int k = 0; k < mcfg->n_languages; k++)
            if (k != i && (!set || !dmt_model_set_route(set, mcfg->languages[i].code, mcfg->languages[k].code, NULL,
                                                        &d, &a, &b)))
                json_array_append_new(targets, json_string(mcfg->languages[k].code));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:o}", "code", mcfg->languages[i].code, "name",
                                             mcfg->languages[i].name, "targets", targets));
    }
    return arr;
}

/* "en, de, fr" into buf. */
static const char *language_list(const dmt_config *mcfg, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < mcfg->n_languages && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", mcfg->languages[i].code);
    return buf;
}

/* An optional integer field: a JSON integer, or a string of digits (form bodies).
 * 0 when absent, 1 with *v set, -1 with a message. */
static int get_int(json_t *body, const char *key, long lo, long hi, long *v, char *err, size_t errlen) {
    json_t *j = json_object_get(body, key);
    if (!j || json_is_null(j)) return 0;
    long x;
    if (json_is_integer(j)) {
        json_int_t i = json_integer_value(j);
        x = i < lo ? lo - 1 : i > hi ? hi + 1 : (long)i;
    } else if (json_is_string(j) && json_string_length(j) > 0 && json_string_length(j) < 12) {
        char *end;
        x = strtol(json_string_value(j), &end, 10);
        if (*end) goto bad;
    } else {
        goto bad;
    }
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s must be between %ld and %ld", key, lo, hi);
        return -1;
    }
    *v = x;
    return 1;
bad:
    snprintf(err, errlen, "%s must be an integer", key);
    return -1;
}

static int get_number(json_t *body, const char *key, double lo, double hi, double *v, char *err, size_t errlen) {
    json_t *j = json_object_get(body, key);
    if (!j || json_is_null(j)) return 0;
    double x;
    if (json_is_number(j)) {
        x = json_number_value(j);
    } else if (json_is_string(j) && json_string_length(j) > 0 && json_string_length(j) < 32) {
        char *end;
        x = strtod(json_string_value(j), &end);
        if (*end) goto bad;
    } else {
        goto bad;
    }
    if (!isfinite(x) || x < lo || x > hi) {
        snprintf(err, errlen, "%s must be between %g and %g", key, lo, hi);
        return -1;
    }
    *v = x;
    return 1;
bad:
    snprintf(err, errlen, "%s must be a number", key);
    return -1;
}

/* A required string field; NULL with a message when missing or not a string. */
static const char *get_string(json_t *body, const char *key, int required, char *err, size_t errlen) {
    json_t *j = json_object_get(body, key);
    if (!j || json_is_null(j)) {
        if (required) snprintf(err, errlen, "Invalid request: missing %s parameter", key);
        return NULL;
    }
    if (!json_is_string(j)) {
        snprintf(err, errlen, "%s must be a string", key);
        return NULL;
    }
    return json_string_value(j);
}

static size_t count_chars(const char *s, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

int dmt_api_key_allowed(const dmt_server_config *cfg, const char *key) {
    if (!key) return 0;
    size_t kl = strlen(key);
    int ok = 0;
    for (int i = 0; i < cfg->n_api_keys; i++) {
        const char *k = cfg->api_keys[i];
        size_t l = strlen(k);
        unsigned diff = (unsigned)(l ^ kl);
        for (size_t j = 0; j < l; j++) diff |= (unsigned char)k[j] ^ (unsigned char)(j < kl ? key[j] : 0);
        ok |= diff == 0;
    }
    return ok;
}

const char *dmt_api_key_of(json_t *body) {
    json_t *k = json_is_object(body) ? json_object_get(body, "api_key") : NULL;
    if (!json_is_string(k) && json_is_object(body)) k = json_object_get(body, "apiKey");
    return json_is_string(k) ? json_string_value(k) : NULL;
}

int dmt_api_key_status(const dmt_server_config *cfg, const char *key, char *err, size_t errlen) {
    if (cfg->n_api_keys <= 0 || dmt_api_key_allowed(cfg, key)) return 0;
    if (!key || !*key) {
        snprintf(err, errlen, "Please contact the server operator to get an API key");
        return 400;
    }
    snprintf(err, errlen, "Invalid API key");
    return 403;
}

/* Allocates the per-text arrays for n texts. 0, or -1 out of memory. */
static int alloc_texts(dmt_api_request *r, int n) {
    r->n_texts = n;
    r->texts = calloc((size_t)n + 1, sizeof *r->texts);
    r->lens = calloc((size_t)n + 1, sizeof *r->lens);
    r->first = calloc((size_t)n + 1, sizeof *r->first);
    r->count = calloc((size_t)n + 1, sizeof *r->count);
    r->detected = calloc((size_t)n + 1, sizeof *r->detected);
    r->confidence = calloc((size_t)n + 1, sizeof *r->confidence);
    return r->texts && r->lens && r->first && r->count && r->detected && r->confidence ? 0 : -1;
}

/* Collects q into r->texts / r->lens. 0, or 400 with a message. */
static int read_q(dmt_api_request *r, json_t *q, char *err, size_t errlen) {
    if (!q || json_is_null(q)) {
        snprintf(err, errlen, "Invalid request: missing q parameter");
        return 400;
    }
    r->is_array = json_is_array(q);
    if ((json_is_string(q) && json_string_length(q) == 0) || (r->is_array && json_array_size(q) == 0)) {
        snprintf(err, errlen, "Invalid request: missing q parameter"); /* as LibreTranslate ("not q") */
        return 400;
    }
    if (!r->is_array && !json_is_string(q)) {
        snprintf(err, errlen, "q must be a string or an array of strings");
        return 400;
    }
    if (alloc_texts(r, r->is_array ? (int)json_array_size(q) : 1)) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    for (int t = 0; t < r->n_texts; t++) {
        json_t *s = r->is_array ? json_array_get(q, (size_t)t) : q;
        if (!json_is_string(s)) {
            snprintf(err, errlen, "q[%d] must be a string", t);
            return 400;
        }
        r->texts[t] = json_string_value(s);
        r->lens[t] = json_string_length(s);
        if (memchr(r->texts[t], 0, r->lens[t])) {
            snprintf(err, errlen, "q%s contains a NUL character", r->is_array ? "[]" : "");
            return 400;
        }
    }
    return 0;
}

/* fits(): a piece of a sentence is short enough for the model at once. */
static int fits_model(void *arg, const char *text, size_t len) {
    const dmt_model *m = arg;
    int k = dmt_translate_source_pieces(m, text, len);
    return k >= 0 && k <= dmt_translate_chunk_tokens(m);
}

/* The jobs of one sentence: itself, or the chunks of one too long for the model
 * (text/sentences.h), never a refusal. Spans are relative to text; returns how
 * many (written when out is not NULL). */
static int sentence_jobs(const dmt_model *model, const char *text, dmt_span s, dmt_span *out) {
    int n = model ? dmt_sentence_chunks(text + s.start, s.len, fits_model, (void *)model, NULL, 0) : 1;
    if (n <= 1) { /* fits, or cannot be cut (dmt_translate will say why) */
        if (out) out[0] = s;
        return 1;
    }
    if (out) {
        dmt_sentence_chunks(text + s.start, s.len, fits_model, (void *)model, out, n);
        for (int i = 0; i < n; i++) out[i].start += s.start;
    }
    return n;
}

/* Splits every text into sentences and those into jobs (a sentence too long for
 * the model becomes several, see sentence_jobs); fills spans/first/count. The
 * limits count characters and sentences, never a sentence's length. 0, or 400 /
 * 500 with a message. */
int dmt_api_text_jobs(const dmt_model *model, const char *text, size_t len, dmt_span *out, int cap) {
    int n = dmt_sentences_split(text, len, NULL, 0), total = 0;
    dmt_span *sent = calloc((size_t)n + 1, sizeof *sent);
    if (!sent) return -1;
    dmt_sentences_split(text, len, sent, n);
    for (int i = 0; i < n; i++) {
        int k = sentence_jobs(model, text, sent[i], NULL);
        if (out && total + k <= cap) sentence_jobs(model, text, sent[i], out + total);
        total += k;
    }
    free(sent);
    return total;
}

/* The model that measures text t's sentences: its route's first leg (NULL before
 * routing, or when nothing is translated). */
static const dmt_model *text_model(const dmt_api_request *r, int t) {
    if (!r->parts || !r->text_part) return NULL;
    const dmt_api_part *p = &r->parts[r->text_part[t]];
    return (p->pivot_model ? p->pivot_model : p->model)->model;
}

static int split_texts(dmt_api_request *r, const dmt_server_config *cfg, char *err, size_t errlen) {
    size_t chars = 0;
    long sentences = 0, total = 0;
    for (int t = 0; t < r->n_texts; t++) chars += count_chars(r->texts[t], r->lens[t]);
    if (chars > (size_t)cfg->max_chars) { /* 400, LibreTranslate's status and wording */
        snprintf(err, errlen, "Invalid request: request (%zu) exceeds text limit (%d)", chars, cfg->max_chars);
        return 400;
    }
    int *n_sent = calloc((size_t)r->n_texts + 1, sizeof *n_sent);
    if (!n_sent) goto oom;
    for (int t = 0; t < r->n_texts; t++) sentences += n_sent[t] = dmt_sentences_split(r->texts[t], r->lens[t], NULL, 0);
    if (sentences > cfg->max_sentences) {
        free(n_sent);
        snprintf(err, errlen, "Invalid request: request (%ld sentences) exceeds the sentence limit (%d)", sentences,
                 cfg->max_sentences);
        return 400;
    }
    dmt_span *sent = calloc((size_t)sentences + 1, sizeof *sent);
    if (!sent) goto oom;
    for (int t = 0, o = 0; t < r->n_texts; o += n_sent[t++]) dmt_sentences_split(r->texts[t], r->lens[t], sent + o, n_sent[t]);
    for (int t = 0, o = 0; t < r->n_texts; o += n_sent[t++]) {
        r->count[t] = 0;
        for (int i = 0; i < n_sent[t]; i++) r->count[t] += sentence_jobs(text_model(r, t), r->texts[t], sent[o + i], NULL);
    }
    /* jobs part by part: each part's are one stretch, the work of one leg */
    for (int p = 0; p < (r->n_parts ? r->n_parts : 1); p++) {
        if (r->n_parts) r->parts[p].first = (int)total;
        for (int t = 0; t < r->n_texts; t++)
            if (!r->n_parts || r->text_part[t] == p) {
                r->first[t] = (int)total;
                total += r->count[t];
            }
        if (r->n_parts) r->parts[p].count = (int)total - r->parts[p].first;
    }
    r->n_sentences = (int)total;
    r->spans = calloc((size_t)total + 1, sizeof *r->spans);
    if (!r->spans) {
        free(sent);
        goto oom;
    }
    for (int t = 0, o = 0; t < r->n_texts; o += n_sent[t++])
        for (int i = 0, k = r->first[t]; i < n_sent[t]; i++)
            k += sentence_jobs(text_model(r, t), r->texts[t], sent[o + i], r->spans + k);
    free(sent);
    free(n_sent);
    return 0;
oom:
    free(n_sent);
    snprintf(err, errlen, "out of memory");
    return 500;
}

/* The request's engine fields, kept to be applied to each model's own defaults
 * (dmt_api_leg_options). max_length may not exceed what the largest served model
 * takes; each leg caps it at its own model's. */
static int read_options(dmt_api_request *r, const dmt_server_config *cfg, json_t *body, char *err, size_t errlen) {
    long v;
    double d;
    int rc, most = 3;
    for (int i = 0; i < r->set->n; i++)
        if (r->set->models[i]->cfg.max_positions > most) most = r->set->models[i]->cfg.max_positions;
    if ((rc = get_int(body, "alternatives", 0, cfg->max_alternatives, &v, err, errlen)) < 0) return 400;
    if (rc) r->alternatives = (int)v;
    if ((rc = get_int(body, "beam_size", 1, MAX_BEAM, &v, err, errlen)) < 0) return 400;
    if (rc) r->want_beam = v;
    r->want_length_penalty = -1;
    if ((rc = get_number(body, "length_penalty", 0.0, 10.0, &d, err, errlen)) < 0) return 400;
    if (rc) r->want_length_penalty = d;
    if ((rc = get_int(body, "max_length", 1, most - 2, &v, err, errlen)) < 0) return 400;
    if (rc) r->want_max_length = v;
    return 0;
}

int dmt_api_leg_options(const dmt_api_request *r, const dmt_config *mcfg, int nbest, dmt_beam_options *out, char *err,
                        size_t errlen) {
    dmt_beam_options o = dmt_beam_options_default(mcfg);
    if (r->want_beam > 0) o.beam_size = (int)r->want_beam;
    if (r->want_length_penalty >= 0) o.length_penalty = (float)r->want_length_penalty;
    if (r->want_max_length > 0) {
        int most = mcfg->max_positions > 2 ? mcfg->max_positions - 2 : 1;
        o.max_len_a = 0;
        o.max_len_b = r->want_max_length < most ? (int)r->want_max_length : most;
        if (o.min_len > o.max_len_b) o.min_len = o.max_len_b;
    }
    o.nbest = nbest;
    if (o.beam_size < o.nbest) o.beam_size = o.nbest;
    if (dmt_beam_options_check(&o, err, errlen) != 0) return 400;
    *out = o;
    return 0;
}

/* format "html": the documents move to docs[], texts[] become their runs of text.
 * The character limit counts the documents as sent (markup included); the
 * language is detected on each document's text, not its markup. */
static int html_to_runs(dmt_api_request *r, const dmt_server_config *cfg, const dmt_config *mcfg, int detect,
                        char *err, size_t errlen) {
    size_t chars = 0;
    for (int t = 0; t < r->n_texts; t++) chars += count_chars(r->texts[t], r->lens[t]);
    if (chars > (size_t)cfg->max_chars) { /* 400, as LibreTranslate */
        snprintf(err, errlen, "Invalid request: request (%zu) exceeds text limit (%d)", chars, cfg->max_chars);
        return 400;
    }
    r->html = dmt_html_prepare(r->texts, r->lens, r->n_texts, cfg->max_sentences, err, errlen);
    if (!r->html) return strstr(err, "memory") ? 500 : 400;
    r->n_docs = r->n_texts;
    r->docs = r->texts;
    r->doc_lens = r->lens;
    r->doc_detected = r->detected;
    r->doc_confidence = r->confidence;
    free(r->first);
    free(r->count);
    r->texts = NULL;
    r->lens = NULL;
    r->first = r->count = NULL;
    r->detected = NULL;
    r->confidence = NULL;
    int n = dmt_html_segment_count(r->html);
    if (alloc_texts(r, n)) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    for (int i = 0; i < n; i++) r->texts[i] = dmt_html_segment(r->html, i, &r->lens[i]);
    if (detect) {
        for (int d = 0; d < r->n_docs; d++) {
            int f, c;
            size_t len = 0;
            dmt_html_range(r->html, d, &f, &c);
            for (int i = f; i < f + c; i++) len += r->lens[i] + 1;
            char *joined = malloc(len + 1);
            if (!joined) {
                snprintf(err, errlen, "out of memory");
                return 500;
            }
            len = 0;
            for (int i = f; i < f + c; i++) {
                memcpy(joined + len, r->texts[i], r->lens[i]);
                len += r->lens[i];
                joined[len++] = '\n';
            }
            r->doc_detected[d] = dmt_detect_language(mcfg, joined, len, &r->doc_confidence[d]);
            free(joined);
        }
    }
    return 0;
}

/* "en, de, fr" for each model: what is served, for a message. */
static const char *served_list(const dmt_model_set *set, char *buf, size_t cap) {
    size_t o = 0;
    char langs[1024];
    buf[0] = 0;
    for (int i = 0; i < set->n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%s: %s", i ? "; " : "", set->models[i]->spec.name,
                              language_list(&set->models[i]->cfg, langs, sizeof langs));
    return buf;
}

/* The source language of text t: the request's, or the one detected for the text
 * (format html: for its document). */
static const char *text_source(const dmt_api_request *r, const char *source, int t) {
    if (strcmp(source, "auto")) return source;
    if (r->html) {
        for (int d = 0; d < r->n_docs; d++) {
            int f, c;
            dmt_html_range(r->html, d, &f, &c);
            if (t >= f && t < f + c) return r->doc_detected[d] ? r->doc_detected[d] : source;
        }
        return source;
    }
    return r->detected[t] ? r->detected[t] : source;
}

/* Routes every text (dmt_model_set_route): texts that go the same way share a part.
 * 0, or 400 naming what is served. */
static int route_texts(dmt_api_request *r, const char *source, const char *target, char *err, size_t errlen) {
    char served[2048];
    r->text_part = calloc((size_t)r->n_texts + 1, sizeof *r->text_part);
    r->parts = calloc((size_t)r->n_texts + 1, sizeof *r->parts);
    if (!r->text_part || !r->parts) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    for (int t = 0; t < r->n_texts; t++) {
        const char *src = text_source(r, source, t);
        dmt_served *d, *a, *b;
        if (!strcmp(src, "auto")) src = target; /* no language to detect from (no languages): as before */
        if (dmt_model_set_route(r->set, src, target, r->model_name, &d, &a, &b)) {
            if (r->model_name)
                snprintf(err, errlen, "model '%s' does not translate '%s' into '%s'; it has: %s", r->model_name, src,
                         target, language_list(&dmt_model_set_find(r->set, r->model_name)->cfg, served, sizeof served));
            else
                snprintf(err, errlen, "no model translates '%s' into '%s', directly or through English; served: %s",
                         src, target, served_list(r->set, served, sizeof served));
            return 400;
        }
        dmt_served *model = d ? d : b, *pivot = d ? NULL : a;
        int p = 0;
        while (p < r->n_parts && !(r->parts[p].model == model && r->parts[p].pivot_model == pivot)) p++;
        if (p == r->n_parts) {
            dmt_api_part *part = &r->parts[r->n_parts++];
            part->req = r;
            part->model = model;
            part->pivot_model = pivot;
            part->target_id = dmt_config_language(&model->cfg, target)->id;
        }
        r->text_part[t] = p;
        r->pivoted |= pivot != NULL;
    }
    return 0;
}

int dmt_api_translate_parse(const dmt_server_config *cfg, dmt_model_set *set, json_t *body, dmt_api_request **out,
                            char *err, size_t errlen) {
    char langs[1024];
    int status = 0;
    *out = NULL;
    dmt_api_request *r = calloc(1, sizeof *r);
    if (!r) {
        json_decref(body);
        dmt_model_set_release(set);
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    r->body = body;
    r->set = set;
    const dmt_config *mcfg = &set->languages; /* every language served */
    if (!json_is_object(body)) {
        snprintf(err, errlen, "the request body must be a JSON object");
        status = 400;
        goto fail;
    }
    if ((status = dmt_api_key_status(cfg, dmt_api_key_of(body), err, errlen))) goto fail;
    if ((status = read_q(r, json_object_get(body, "q"), err, errlen))) goto fail;
    const char *source = get_string(body, "source", 1, err, errlen);
    if (!source) {
        status = 400;
        goto fail;
    }
    if (strcmp(source, "auto") && !dmt_config_language(mcfg, source)) {
        snprintf(err, errlen, "source language '%.*s' is not supported; supported: auto, %s",
                 (int)dmt_text_clip(source, strlen(source), 32), source, language_list(mcfg, langs, sizeof langs));
        status = 400;
        goto fail;
    }
    const char *target = get_string(body, "target", 1, err, errlen);
    if (!target) {
        status = 400;
        goto fail;
    }
    if (!dmt_config_language(mcfg, target)) {
        snprintf(err, errlen, "target language '%.*s' is not supported; supported: %s",
                 (int)dmt_text_clip(target, strlen(target), 32), target, language_list(mcfg, langs, sizeof langs));
        status = 400;
        goto fail;
    }
    err[0] = 0;
    r->model_name = get_string(body, "model", 0, err, errlen);
    if (err[0]) {
        status = 400;
        goto fail;
    }
    if (r->model_name && !dmt_model_set_find(set, r->model_name)) {
        char served[2048];
        snprintf(err, errlen, "model '%.*s' is not served; served: %s",
                 (int)dmt_text_clip(r->model_name, strlen(r->model_name), 64), r->model_name,
                 served_list(set, served, sizeof served));
        status = 400;
        goto fail;
    }
    const char *format = get_string(body, "format", 0, err, errlen);
    if (err[0]) {
        status = 400;
        goto fail;
    }
    if (format && !*format) format = NULL; /* "": text, as LibreTranslate */
    if (format && strcmp(format, "text") && strcmp(format, "html")) {
        snprintf(err, errlen, "format must be \"text\" or \"html\"");
        status = 400;
        goto fail;
    }
    if ((status = read_options(r, cfg, body, err, errlen))) goto fail;
    json_t *al = json_object_get(body, "alignments");
    if (al && !json_is_null(al)) {
        const char *as = json_string_value(al); /* form fields arrive as strings */
        if (!json_is_boolean(al) && !(as && (!strcmp(as, "true") || !strcmp(as, "false")))) {
            snprintf(err, errlen, "alignments must be true or false");
            status = 400;
            goto fail;
        }
        r->alignments = json_is_true(al) || (as && !strcmp(as, "true"));
        if (r->alignments && format && !strcmp(format, "html")) {
            snprintf(err, errlen, "alignments are given for format \"text\" only");
            status = 400;
            goto fail;
        }
    }
    r->same_language = !strcmp(source, target);
    if (format && !strcmp(format, "html")) {
        /* LibreTranslate answers "alternatives": [] for html (its own page always asks
         * for 3): none are computed, the field says so */
        r->empty_alternatives = r->alternatives > 0;
        r->alternatives = 0;
        if ((status = html_to_runs(r, cfg, mcfg, !strcmp(source, "auto"), err, errlen))) goto fail;
    } else if (!strcmp(source, "auto")) {
        for (int t = 0; t < r->n_texts; t++)
            r->detected[t] = dmt_detect_language(mcfg, r->texts[t], r->lens[t], &r->confidence[t]);
    }
    if (!r->same_language && (status = route_texts(r, source, target, err, errlen))) goto fail;
    if ((status = split_texts(r, cfg, err, errlen))) goto fail;
    if (!r->same_language && r->n_sentences > 0) {
        r->jobs = calloc((size_t)r->n_sentences, sizeof *r->jobs);
        if (!r->jobs) {
            snprintf(err, errlen, "out of memory");
            status = 500;
            goto fail;
        }
        r->n_jobs = r->n_sentences;
        for (int t = 0; t < r->n_texts; t++) {
            for (int i = 0; i < r->count[t]; i++) {
                dmt_job *j = &r->jobs[r->first[t] + i];
                const dmt_span *sp = &r->spans[r->first[t] + i];
                j->text = r->texts[t] + sp->start;
                j->len = sp->len;
                j->target_id = r->parts[r->text_part[t]].target_id; /* the scheduler measures its cost */
            }
        }
        for (int p = 0; p < r->n_parts; p++) { /* the options each leg's model gives */
            dmt_api_part *part = &r->parts[p];
            dmt_beam_options o;
            if (part->pivot_model &&
                (status = dmt_api_leg_options(r, &part->pivot_model->cfg, 1, &part->work.key.opt, err, errlen)))
                goto fail;
            if ((status = dmt_api_leg_options(r, &part->model->cfg, r->alternatives + 1, &o, err, errlen))) goto fail;
            if (part->pivot_model) part->work2.key.opt = o;
            else part->work.key.opt = o;
        }
    }
    *out = r;
    return 0;
fail:
    dmt_api_request_free(r);
    return status;
}

void dmt_api_request_free(dmt_api_request *r) {
    if (!r) return;
    for (int i = 0; i < r->n_jobs; i++) dmt_translate_output_clear(&r->jobs[i].out);
    free(r->jobs);
    for (int p = 0; r->parts && p < r->n_parts; p++) {
        dmt_api_part *part = &r->parts[p];
        for (int i = 0; part->pivot_jobs && i < part->count; i++) dmt_translate_output_clear(&part->pivot_jobs[i].out);
        for (int i = 0; part->leg2_jobs && i < part->n_leg2; i++) dmt_translate_output_clear(&part->leg2_jobs[i].out);
        free(part->pivot_jobs);
        free(part->leg2_jobs);
        free(part->leg2_spans);
        free(part->leg2_first);
    }
    free(r->parts);
    free(r->text_part);
    free(r->texts);
    free(r->lens);
    free(r->first);
    free(r->count);
    free(r->spans);
    free(r->detected);
    free(r->confidence);
    dmt_html_free(r->html);
    free(r->docs);
    free(r->doc_lens);
    free(r->doc_detected);
    free(r->doc_confidence);
    json_decref(r->body);
    dmt_model_set_release(r->set);
    free(r);
}

/* Text t with each sentence replaced by its hypothesis k (the best when a sentence
 * has fewer). A json string, or NULL when out of memory. */
static json_t *assemble(const dmt_api_request *r, int t, int k) {
    const char *text = r->texts[t];
    size_t cap = 1, pos = 0, o = 0;
    const dmt_job *jobs = r->jobs + r->first[t];
    const dmt_span *sp = r->spans + r->first[t];
    for (int i = 0; i < r->count[t]; i++) {
        const dmt_translate_output *out = &jobs[i].out;
        cap += sp[i].start - pos + strlen(out->texts[k < out->n ? k : 0]);
        pos = sp[i].start + sp[i].len;
    }
    cap += r->lens[t] - pos;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    pos = 0;
    for (int i = 0; i < r->count[t]; i++) {
        const dmt_translate_output *out = &jobs[i].out;
        const char *tr = out->texts[k < out->n ? k : 0];
        size_t l = strlen(tr);
        memcpy(buf + o, text + pos, sp[i].start - pos);
        o += sp[i].start - pos;
        memcpy(buf + o, tr, l);
        o += l;
        pos = sp[i].start + sp[i].len;
    }
    memcpy(buf + o, text + pos, r->lens[t] - pos);
    o += r->lens[t] - pos;
    json_t *s = json_stringn(buf, o);
    free(buf);
    return s;
}

/* The alternatives of text t: hypotheses 1.. assembled, without duplicates and
 * without the main translation, at most r->alternatives. */
static json_t *alternatives_of(const dmt_api_request *r, int t, json_t *main_text) {
    json_t *alts = json_array();
    int most = 0;
    for (int i = 0; i < r->count[t]; i++)
        if (r->jobs[r->first[t] + i].out.n > most) most = r->jobs[r->first[t] + i].out.n;
    for (int k = 1; k < most && (int)json_array_size(alts) < r->alternatives; k++) {
        json_t *a = assemble(r, t, k);
        int dup = !a || json_equal(a, main_text);
        for (size_t i = 0; !dup && i < json_array_size(alts); i++) dup = json_equal(a, json_array_get(alts, i));
        if (dup) json_decref(a);
        else json_array_append_new(alts, a);
    }
    return alts;
}

/* The word pairs (source word, target word) of text t and its translation tr
 * (words split at whitespace, numbered over the whole text: each sentence's own
 * pairs plus where the sentence and its translation start); *n of them. malloc'd;
 * NULL when out of memory. */
static int *word_pairs(const dmt_api_request *r, int t, const char *tr, size_t tr_len, int *n) {
    const char *text = r->texts[t];
    size_t pos = 0, o = 0, most = 1;
    *n = 0;
    if (r->same_language || r->count[t] == 0) { /* the text itself: word i is word i */
        int words = dmt_word_index_at(text, r->lens[t], r->lens[t]);
        int *pairs = malloc(((size_t)words + 1) * 2 * sizeof *pairs);
        for (int w = 0; pairs && w < words; w++) pairs[2 * w] = pairs[2 * w + 1] = w;
        if (pairs) *n = words;
        return pairs;
    }
    const dmt_job *jobs = r->jobs + r->first[t];
    const dmt_span *sp = r->spans + r->first[t];
    for (int i = 0; i < r->count[t]; i++) most += (size_t)jobs[i].out.n_alignment;
    most += (size_t)dmt_gap_pairs(text, r->lens[t], 0, r->lens[t], NULL, 0, 0, NULL); /* the gaps' words: at most all */
    int *pairs = malloc(most * 2 * sizeof *pairs);
    for (int i = 0; pairs && i < r->count[t]; i++) { /* as assemble() lays the translation out */
        const dmt_translate_output *jo = &jobs[i].out;
        *n += dmt_gap_pairs(text, r->lens[t], pos, sp[i].start, tr, tr_len, o, pairs + 2 * *n); /* copied list markers */
        o += sp[i].start - pos;
        int src0 = dmt_word_index_at(text, r->lens[t], sp[i].start), tgt0 = dmt_word_index_at(tr, tr_len, o);
        for (int q = 0; q < jo->n_alignment; q++) {
            pairs[2 * *n] = src0 + jo->alignment[2 * q];
            pairs[2 * *n + 1] = tgt0 + jo->alignment[2 * q + 1];
            (*n)++;
        }
        o += strlen(jo->texts[0]);
        pos = sp[i].start + sp[i].len;
    }
    return pairs;
}

/* "alignments": text t's word pairs as [[source word, target word], ...]; NULL when
 * out of memory. */
static json_t *alignments_of(const dmt_api_request *r, int t, json_t *out) {
    int n;
    int *pairs = word_pairs(r, t, json_string_value(out), json_string_length(out), &n);
    json_t *list = pairs ? json_array() : NULL;
    for (int k = 0; list && k < n; k++) json_array_append_new(list, json_pack("[i,i]", pairs[2 * k], pairs[2 * k + 1]));
    free(pairs);
    return list;
}

/* format "html": the translated runs (runs, stolen) put back into each document;
 * a json array with one string a document, or NULL when out of memory. */
static json_t *html_documents(const dmt_api_request *r, json_t *runs) {
    size_t n = json_array_size(runs);
    const char **tr = calloc(n + 1, sizeof *tr);
    size_t *lens = calloc(n + 1, sizeof *lens);
    int **pairs = calloc(n + 1, sizeof *pairs), *n_pairs = calloc(n + 1, sizeof *n_pairs), failed = !pairs || !n_pairs;
    json_t *docs = json_array();
    for (size_t i = 0; tr && lens && i < n; i++) {
        tr[i] = json_string_value(json_array_get(runs, i));
        lens[i] = json_string_length(json_array_get(runs, i));
        /* where each inline element's tags go (html.h) */
        if (!failed && !r->same_language && !(pairs[i] = word_pairs(r, (int)i, tr[i], lens[i], &n_pairs[i])))
            failed = 1;
    }
    for (int d = 0; tr && lens && docs && !failed && d < r->n_docs; d++) {
        size_t len;
        char *s = r->same_language ? NULL
                                   : dmt_html_render_aligned(r->html, d, tr, lens, (const int *const *)pairs, n_pairs,
                                                             &len);
        json_t *j = r->same_language ? json_stringn(r->docs[d], r->doc_lens[d]) : s ? json_stringn(s, len) : NULL;
        free(s);
        if (!j || json_array_append_new(docs, j)) {
            json_decref(docs);
            docs = NULL;
        }
    }
    if (!tr || !lens || failed) {
        json_decref(docs);
        docs = NULL;
    }
    for (size_t i = 0; pairs && i < n; i++) free(pairs[i]);
    free(pairs);
    free(n_pairs);
    free(tr);
    free(lens);
    json_decref(runs);
    return docs;
}

json_t *dmt_api_translate_result(const dmt_api_request *r, int *status) {
    const char *dropped;
    if ((*status = dmt_api_dropped(r, &dropped))) return dmt_api_error("%s", dropped);
    if (r->fail_status) {
        *status = r->fail_status;
        return dmt_api_error("%s", r->fail_error);
    }
    for (int i = 0; i < r->n_jobs; i++) {
        const dmt_job *j = &r->jobs[i];
        if (j->out.error[0] || !j->out.texts || j->out.n < 1) {
            int t = 0; /* the text that owns job i (texts' jobs are grouped by part, not in text order) */
            while (t + 1 < r->n_texts && !(i >= r->first[t] && i < r->first[t] + r->count[t])) t++;
            *status = j->internal_error ? 500 : strstr(j->out.error, "too long") ? 413 : 400;
            if (r->is_array)
                return dmt_api_error("q[%d], sentence %d: %s", t, i - r->first[t] + 1,
                                     j->out.error[0] ? j->out.error : "no translation");
            return dmt_api_error("sentence %d: %s", i - r->first[t] + 1, j->out.error[0] ? j->out.error : "no translation");
        }
    }
    json_t *texts = json_array(), *alts = json_array(), *aligned = json_array();
    for (int t = 0; t < r->n_texts; t++) {
        json_t *s = r->same_language || r->count[t] == 0 ? json_stringn(r->texts[t], r->lens[t]) : assemble(r, t, 0);
        if (!s) {
            json_decref(texts);
            json_decref(alts);
            json_decref(aligned);
            *status = 500;
            return dmt_api_error("out of memory");
        }
        json_array_append_new(texts, s);
        if (r->alternatives > 0)
            json_array_append_new(alts, r->same_language || r->count[t] == 0 ? json_array() : alternatives_of(r, t, s));
        if (r->alignments) json_array_append_new(aligned, alignments_of(r, t, s));
    }
    if (r->html && !(texts = html_documents(r, texts))) {
        json_decref(alts);
        json_decref(aligned);
        *status = 500;
        return dmt_api_error("out of memory");
    }
    if (r->empty_alternatives) /* html: asked for, none computed */
        for (int t = 0; t < (r->is_array ? (int)json_array_size(texts) : 1); t++) json_array_append_new(alts, json_array());
    int with_alts = r->alternatives > 0 || r->empty_alternatives;
    json_t *res = json_object();
    if (r->is_array) {
        json_object_set_new(res, "translatedText", texts);
        if (with_alts) json_object_set_new(res, "alternatives", alts);
        else json_decref(alts);
    } else {
        json_object_set(res, "translatedText", json_array_get(texts, 0));
        if (with_alts) json_object_set(res, "alternatives", json_array_get(alts, 0));
        json_decref(texts);
        json_decref(alts);
    }
    if (r->alignments)
        json_object_set(res, "alignments", r->is_array ? aligned : json_array_get(aligned, 0));
    json_decref(aligned);
    /* source "auto": {"language", "confidence"} (an array of them for an array q) */
    int any = 0, n = r->html ? r->n_docs : r->n_texts;
    const char **detected = r->html ? r->doc_detected : r->detected;
    const double *confidence = r->html ? r->doc_confidence : r->confidence;
    for (int t = 0; t < n; t++) any |= detected[t] != NULL;
    if (any) {
        json_t *det = json_array();
        for (int t = 0; t < n; t++)
            json_array_append_new(det, detected[t] ? json_pack("{s:f, s:s}", "confidence", confidence[t],
                                                               "language", detected[t])
                                                   : json_null());
        json_object_set(res, "detectedLanguage", r->is_array ? det : json_array_get(det, 0));
        json_decref(det);
    }
    *status = 200;
    return res;
}
