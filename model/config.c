/* config.c — config.json -> dmt_config, with every key type- and range-checked. */
#include "model/config.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

/* Each getter writes "config.json: <key>: <problem>" and returns -1 on failure. */

static int get_int(json_t *root, const char *key, int *out, int min, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v) { snprintf(err, errlen, "config.json: missing key \"%s\"", key); return -1; }
    if (!json_is_integer(v)) { snprintf(err, errlen, "config.json: \"%s\" must be an integer", key); return -1; }
    json_int_t x = json_integer_value(v);
    if (x < min || x > 1000000000) {
        snprintf(err, errlen, "config.json: \"%s\" = %lld is out of range (min %d)", key, (long long)x, min);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* decoding's optional true/false key: *out set where present, left as it was where not. */
static int get_flag(json_t *decoding, const char *key, int *out, char *err, size_t errlen) {
    json_t *v = json_object_get(decoding, key);
    if (!v) return 0;
    if (!json_is_boolean(v)) {
        snprintf(err, errlen, "config.json: decoding.%s must be true or false", key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* decoding's optional key of two string values: *out = 0 for value0, 1 for value1; left
 * as it was where the key is absent; anything else is refused, naming both. */
static int get_choice(json_t *decoding, const char *key, const char *value0, const char *value1, int *out,
                      char *err, size_t errlen) {
    json_t *v = json_object_get(decoding, key);
    if (!v) return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (!s || (strcmp(s, value0) && strcmp(s, value1))) {
        snprintf(err, errlen, "config.json: decoding.%s must be \"%s\" or \"%s\"", key, value0, value1);
        return -1;
    }
    *out = !strcmp(s, value1);
    return 0;
}

static int get_num(json_t *root, const char *key, float *out, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v) { snprintf(err, errlen, "config.json: missing key \"%s\"", key); return -1; }
    if (!json_is_number(v)) { snprintf(err, errlen, "config.json: \"%s\" must be a number", key); return -1; }
    double x = json_number_value(v);
    /* as a float: 1e300 would pass as a double and become inf (every translation NaN) */
    if (!isfinite(x) || x <= 0 || x > 1e6 || (float)x <= 0) {
        snprintf(err, errlen, "config.json: \"%s\" must be a positive number, at most 1e6 (got %g)", key, x);
        return -1;
    }
    *out = (float)x;
    return 0;
}

static int get_bool(json_t *root, const char *key, bool *out, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v) { snprintf(err, errlen, "config.json: missing key \"%s\"", key); return -1; }
    if (!json_is_boolean(v)) { snprintf(err, errlen, "config.json: \"%s\" must be true or false", key); return -1; }
    *out = json_is_true(v);
    return 0;
}

/* One of `names` (NULL-terminated); its index in *out. */
static int get_enum(json_t *root, const char *key, const char *const *names, int *out, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v) { snprintf(err, errlen, "config.json: missing key \"%s\"", key); return -1; }
    if (json_is_string(v))
        for (int i = 0; names[i]; i++)
            if (strcmp(json_string_value(v), names[i]) == 0) { *out = i; return 0; }
    char allowed[128] = "";
    for (int i = 0; names[i]; i++) {
        strncat(allowed, i ? ", " : "", sizeof allowed - strlen(allowed) - 1);
        strncat(allowed, names[i], sizeof allowed - strlen(allowed) - 1);
    }
    snprintf(err, errlen, "config.json: \"%s\" must be one of: %s", key, allowed);
    return -1;
}

static int copy_string(json_t *obj, const char *key, char *dst, size_t cap, const char *where,
                       char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= cap) {
        snprintf(err, errlen, "config.json: %s: \"%s\" must be a non-empty string of under %zu bytes",
                 where, key, cap);
        return -1;
    }
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

static int parse_languages(json_t *root, dmt_config *c, char *err, size_t errlen) {
    json_t *langs = json_object_get(root, "languages");
    if (!langs) { snprintf(err, errlen, "config.json: missing key \"languages\""); return -1; }
    if (!json_is_array(langs) || json_array_size(langs) > DMT_MAX_LANGUAGES) {
        snprintf(err, errlen, "config.json: \"languages\" must be an array of at most %d objects", DMT_MAX_LANGUAGES);
        return -1;
    }
    c->n_languages = (int)json_array_size(langs);
    for (int i = 0; i < c->n_languages; i++) {
        json_t *l = json_array_get(langs, (size_t)i);
        dmt_language *d = &c->languages[i];
        char where[48];
        snprintf(where, sizeof where, "languages[%d]", i);
        if (!json_is_object(l)) { snprintf(err, errlen, "config.json: %s must be an object", where); return -1; }
        if (copy_string(l, "code", d->code, sizeof d->code, where, err, errlen) ||
            copy_string(l, "name", d->name, sizeof d->name, where, err, errlen) ||
            copy_string(l, "token", d->token, sizeof d->token, where, err, errlen))
            return -1;
        json_t *id = json_object_get(l, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= c->vocab_size) {
            snprintf(err, errlen, "config.json: %s: \"id\" must be an integer in [0, vocab_size)", where);
            return -1;
        }
        d->id = (int)json_integer_value(id);
        for (int j = 0; j < i; j++)
            if (strcmp(c->languages[j].code, d->code) == 0) {
                snprintf(err, errlen, "config.json: language \"%s\" is listed twice", d->code);
                return -1;
            }
    }
    return 0;
}

static int parse_decoding(json_t *root, dmt_config *c, char *err, size_t errlen) {
    c->decoding = (dmt_decoding_defaults){.beam_size = 4, .length_penalty = 1.0f, .max_len_a = 1.2f, .max_len_b = 10,
                                          .min_len = 1, .no_repeat_ngram_size = 0, .max_repeats = 0,
                                          .alignment_layer = -1};
    json_t *d = json_object_get(root, "decoding");
    if (!d) return 0;
    if (!json_is_object(d)) { snprintf(err, errlen, "config.json: \"decoding\" must be an object"); return -1; }
    json_t *v;
    if ((v = json_object_get(d, "beam_size")) && get_int(d, "beam_size", &c->decoding.beam_size, 1, err, errlen)) return -1;
    if ((v = json_object_get(d, "length_penalty"))) {
        if (!json_is_number(v) || fabs(json_number_value(v)) > 100) { snprintf(err, errlen, "config.json: decoding.length_penalty must be a number in -100..100"); return -1; }
        c->decoding.length_penalty = (float)json_number_value(v);
    }
    if ((v = json_object_get(d, "max_len_a"))) {
        if (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) > 1000) { snprintf(err, errlen, "config.json: decoding.max_len_a must be a number in 0..1000"); return -1; }
        c->decoding.max_len_a = (float)json_number_value(v);
    }
    if ((v = json_object_get(d, "max_len_b")) && get_int(d, "max_len_b", &c->decoding.max_len_b, 0, err, errlen)) return -1;
    if ((v = json_object_get(d, "min_len")) && get_int(d, "min_len", &c->decoding.min_len, 0, err, errlen)) return -1;
    if ((v = json_object_get(d, "no_repeat_ngram_size")) &&
        get_int(d, "no_repeat_ngram_size", &c->decoding.no_repeat_ngram_size, 0, err, errlen)) return -1;
    if ((v = json_object_get(d, "max_repeats")) && get_int(d, "max_repeats", &c->decoding.max_repeats, 0, err, errlen))
        return -1;
    if ((v = json_object_get(d, "alignment_layer"))) {
        if (get_int(d, "alignment_layer", &c->decoding.alignment_layer, 0, err, errlen)) return -1;
        if (c->decoding.alignment_layer >= c->decoder_layers) {
            snprintf(err, errlen, "config.json: decoding.alignment_layer %d, but the decoder has %d layers (0-based)",
                     c->decoding.alignment_layer, c->decoder_layers);
            return -1;
        }
    }
    if (get_choice(d, "all_caps", "as_is", "lower", &c->decoding.all_caps_lower, err, errlen) ||
        get_flag(d, "copy_numbers", &c->decoding.copy_numbers, err, errlen) ||
        get_choice(d, "number_format", "target", "source", &c->decoding.numbers_as_written, err, errlen) ||
        get_flag(d, "pass_through", &c->decoding.pass_through, err, errlen) ||
        get_flag(d, "placeholders", &c->decoding.placeholders, err, errlen))
        return -1;
    if ((v = json_object_get(d, "pass_through_characters"))) {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        size_t n = s ? json_string_length(v) : 0;
        for (size_t i = 0; s && i < n; i++)
            if (s[i] <= ' ' || s[i] >= 0x7F || isalnum((unsigned char)s[i]) || memchr(s, s[i], i)) s = NULL;
        if (!s || n >= sizeof c->decoding.pass_through_characters) {
            snprintf(err, errlen, "config.json: decoding.pass_through_characters must be a string of distinct "
                                  "ASCII punctuation and symbols (no letters, digits or spaces)");
            return -1;
        }
        memcpy(c->decoding.pass_through_characters, s, n + 1);
    }
    return 0;
}

/* "precision_checks": {"int8": {"mean_bleu_change": -0.01, "worst_bleu_change": -0.27,
 * "directions": 12, "test_set": "..."}, "bf16": {...}}; optional, every field checked. */
static int parse_precision_check(json_t *e, const char *name, dmt_precision_check *out, char *err, size_t errlen) {
    if (!json_is_object(e)) {
        snprintf(err, errlen, "config.json: precision_checks.%s must be an object", name);
        return -1;
    }
    static const char *const keys[] = {"mean_bleu_change", "worst_bleu_change"};
    float *vals[] = {&out->mean_bleu_change, &out->worst_bleu_change};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(e, keys[i]);
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || fabs(json_number_value(v)) > 100) {
            snprintf(err, errlen, "config.json: precision_checks.%s.%s must be a number of BLEU points in -100..100",
                     name, keys[i]);
            return -1;
        }
        *vals[i] = (float)json_number_value(v);
    }
    if (out->worst_bleu_change > out->mean_bleu_change) {
        snprintf(err, errlen, "config.json: precision_checks.%s: worst_bleu_change %g is above mean_bleu_change %g",
                 name, out->worst_bleu_change, out->mean_bleu_change);
        return -1;
    }
    json_t *d = json_object_get(e, "directions");
    if (!json_is_integer(d) || json_integer_value(d) < 1 || json_integer_value(d) > 100000) {
        snprintf(err, errlen, "config.json: precision_checks.%s.directions must be an integer from 1", name);
        return -1;
    }
    out->directions = (int)json_integer_value(d);
    json_t *t = json_object_get(e, "test_set");
    if (t && !json_is_string(t)) {
        snprintf(err, errlen, "config.json: precision_checks.%s.test_set must be a string", name);
        return -1;
    }
    snprintf(out->test_set, sizeof out->test_set, "%s", t ? json_string_value(t) : "");
    out->present = true;
    return 0;
}

static int parse_precision_checks(json_t *root, dmt_config *c, char *err, size_t errlen) {
    json_t *checks = json_object_get(root, "precision_checks");
    if (!checks) return 0;
    if (!json_is_object(checks)) {
        snprintf(err, errlen, "config.json: \"precision_checks\" must be an object");
        return -1;
    }
    const char *name;
    json_t *e;
    json_object_foreach(checks, name, e) {
        dmt_precision_check *out = !strcmp(name, "int8") ? &c->check_int8 : !strcmp(name, "bf16") ? &c->check_bf16 : NULL;
        if (!out) {
            snprintf(err, errlen, "config.json: precision_checks: unknown precision \"%.32s\" (int8 or bf16)", name);
            return -1;
        }
        if (parse_precision_check(e, name, out, err, errlen)) return -1;
    }
    return 0;
}

/* "batching": {"max_sentences": 8}: at most this many sentences in one batch of
 * this model (server/sched/scheduler.h: the default yields to it; an explicit
 * --max-batch-sentences does not). */
static int parse_batching(json_t *root, dmt_config *c, char *err, size_t errlen) {
    json_t *b = json_object_get(root, "batching");
    if (!b) return 0;
    if (!json_is_object(b)) {
        snprintf(err, errlen, "config.json: \"batching\" must be an object");
        return -1;
    }
    json_t *v = json_object_get(b, "max_sentences");
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096) {
        snprintf(err, errlen, "config.json: batching.max_sentences must be an integer in 1..4096");
        return -1;
    }
    c->max_batch_sentences = (int)json_integer_value(v);
    return 0;
}

static int check_id(const char *key, int id, const dmt_config *c, char *err, size_t errlen) {
    if (id >= c->vocab_size) {
        snprintf(err, errlen, "config.json: \"%s\" = %d is not below vocab_size %d", key, id, c->vocab_size);
        return -1;
    }
    return 0;
}

static int parse_root(json_t *root, dmt_config *c, char *err, size_t errlen) {
    static const char *const norms[] = {"deepnorm", "post", "pre", NULL};
    static const char *const acts[] = {"relu", "gelu", NULL};
    static const char *const poss[] = {"sinusoidal", "learned", NULL};
    int norm, act, pos;
    memset(c, 0, sizeof *c);
    if (!json_is_object(root)) { snprintf(err, errlen, "config.json: top level must be an object"); return -1; }
    json_t *fmt = json_object_get(root, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "deepmt") != 0) {
        snprintf(err, errlen, "config.json: \"format\" must be \"deepmt\" (convert other checkpoints with tools/convert_fairseq.py)");
        return -1;
    }
    int version;
    if (get_int(root, "format_version", &version, 1, err, errlen)) return -1;
    if (version != 1) { snprintf(err, errlen, "config.json: format_version %d is not supported (this build reads 1)", version); return -1; }
    if (get_int(root, "encoder_layers", &c->encoder_layers, 1, err, errlen) ||
        get_int(root, "decoder_layers", &c->decoder_layers, 1, err, errlen) ||
        get_int(root, "d_model", &c->d_model, 2, err, errlen) ||
        get_int(root, "heads", &c->heads, 1, err, errlen) ||
        get_int(root, "ffn_dim", &c->ffn_dim, 1, err, errlen) ||
        get_int(root, "vocab_size", &c->vocab_size, 5, err, errlen) ||
        get_enum(root, "normalization", norms, &norm, err, errlen) ||
        get_num(root, "encoder_alpha", &c->encoder_alpha, err, errlen) ||
        get_num(root, "decoder_alpha", &c->decoder_alpha, err, errlen) ||
        get_enum(root, "activation", acts, &act, err, errlen) ||
        get_num(root, "layer_norm_eps", &c->layer_norm_eps, err, errlen) ||
        get_num(root, "embed_scale", &c->embed_scale, err, errlen) ||
        get_enum(root, "positions", poss, &pos, err, errlen) ||
        get_int(root, "position_offset", &c->position_offset, 0, err, errlen) ||
        get_int(root, "max_positions", &c->max_positions, 2, err, errlen) ||
        get_bool(root, "layernorm_embedding", &c->layernorm_embedding, err, errlen) ||
        get_bool(root, "share_embeddings", &c->share_embeddings, err, errlen) ||
        get_bool(root, "tie_output", &c->tie_output, err, errlen) ||
        get_int(root, "pad_id", &c->pad_id, 0, err, errlen) ||
        get_int(root, "bos_id", &c->bos_id, 0, err, errlen) ||
        get_int(root, "eos_id", &c->eos_id, 0, err, errlen) ||
        get_int(root, "unk_id", &c->unk_id, 0, err, errlen) ||
        get_int(root, "decoder_start_id", &c->decoder_start_id, 0, err, errlen))
        return -1;
    /* Position tables are built at load (rows x d_model floats): keep them sane. */
    if (c->max_positions > DMT_MAX_POSITIONS || c->position_offset > DMT_MAX_POSITIONS) {
        snprintf(err, errlen, "config.json: \"max_positions\" %d / \"position_offset\" %d over the limit of %d",
                 c->max_positions, c->position_offset, DMT_MAX_POSITIONS);
        return -1;
    }
    c->normalization = (dmt_norm_mode)norm;
    c->activation = (dmt_activation)act;
    c->positions = (dmt_position_kind)pos;
    if (c->d_model % c->heads) {
        snprintf(err, errlen, "config.json: d_model %d is not divisible by heads %d", c->d_model, c->heads);
        return -1;
    }
    if (c->positions == DMT_POS_SINUSOIDAL && (c->d_model % 2 || c->d_model < 4)) {
        snprintf(err, errlen, "config.json: sinusoidal positions need an even d_model >= 4 (got %d)", c->d_model);
        return -1;
    }
    if (c->normalization != DMT_NORM_DEEPNORM && (c->encoder_alpha != 1.0f || c->decoder_alpha != 1.0f)) {
        snprintf(err, errlen, "config.json: encoder_alpha/decoder_alpha must be 1 unless normalization is \"deepnorm\"");
        return -1;
    }
    if (check_id("pad_id", c->pad_id, c, err, errlen) || check_id("bos_id", c->bos_id, c, err, errlen) ||
        check_id("eos_id", c->eos_id, c, err, errlen) || check_id("unk_id", c->unk_id, c, err, errlen) ||
        check_id("decoder_start_id", c->decoder_start_id, c, err, errlen))
        return -1;
    if (parse_languages(root, c, err, errlen) || parse_decoding(root, c, err, errlen) ||
        parse_batching(root, c, err, errlen) || parse_precision_checks(root, c, err, errlen))
        return -1;
    return 0;
}

int dmt_config_parse(const char *json_text, dmt_config *cfg, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (!je.text[0]) snprintf(err, errlen, "config.json: out of memory parsing it"); /* jansson: no text */
        else snprintf(err, errlen, "config.json: not valid JSON (line %d: %s)", je.line, je.text);
        return -1;
    }
    int rc = parse_root(root, cfg, err, errlen);
    json_decref(root);
    return rc;
}

int dmt_config_load(const char *path, dmt_config *cfg, char *err, size_t errlen) {
    size_t len;
    char *text = dmt_file_read_small(path, DMT_CONFIG_MAX_BYTES, &len, err, errlen);
    if (!text) {
        if (errno == ENOENT) snprintf(err, errlen, "%s: cannot open (missing config.json?)", path);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root) {
        if (!je.text[0]) snprintf(err, errlen, "%s: out of memory parsing it", path); /* jansson: no text */
        else snprintf(err, errlen, "%s: not valid JSON (line %d: %s)", path, je.line, je.text);
        return -1;
    }
    int rc = parse_root(root, cfg, err, errlen);
    json_decref(root);
    return rc;
}

const dmt_language *dmt_config_language(const dmt_config *cfg, const char *code) {
    for (int i = 0; i < cfg->n_languages; i++)
        if (strcmp(cfg->languages[i].code, code) == 0) return &cfg->languages[i];
    return NULL;
}

const char *dmt_norm_mode_name(dmt_norm_mode m) {
    return m == DMT_NORM_DEEPNORM ? "deepnorm" : m == DMT_NORM_POST ? "post" : "pre";
}

const char *dmt_activation_name(dmt_activation a) { return a == DMT_ACT_GELU ? "gelu" : "relu"; }
