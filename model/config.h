/* config.h — the architecture and conventions of a model, from config.json.
 *
 * docs/model-format.md lists every key. Parsing checks types and ranges and names
 * the offending key in the error message.
 */
#ifndef DEEPMT_MODEL_CONFIG_H
#define DEEPMT_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { DMT_NORM_DEEPNORM, DMT_NORM_POST, DMT_NORM_PRE } dmt_norm_mode;
typedef enum { DMT_ACT_RELU, DMT_ACT_GELU } dmt_activation;
typedef enum { DMT_POS_SINUSOIDAL, DMT_POS_LEARNED } dmt_position_kind;

#define DMT_MAX_LANGUAGES 128
#define DMT_MAX_POSITIONS 65536 /* longest sequence a config may declare */
#define DMT_CONFIG_MAX_BYTES (1u << 20) /* config.json is a few KB; larger is refused unread */

typedef struct {
    char code[16];   /* "de" */
    char name[64];   /* "German" */
    char token[32];  /* "__de__" */
    int id;          /* model id of the token */
} dmt_language;

typedef struct {
    int beam_size;            /* default 4 */
    float length_penalty;     /* score / len^lp; default 1.0 */
    float max_len_a;          /* max target length = a * src_len + b */
    int max_len_b;
    int min_len;              /* tokens before </s> may end a hypothesis */
    int no_repeat_ngram_size; /* 0 = off */
    int max_repeats;          /* repetition guard: a unit of 1..8 tokens at most this many times
                               * in a row unless the source has more (0 = off) */
    int all_caps_lower;       /* "all_caps": "lower": ALL-CAPS sentences are translated in sentence
                               * case and answered in capitals (model/casing.h); 0 = "as_is" */
    int alignment_layer;      /* the decoder layer word alignments are read from (forward.h);
                               * -1 (absent): the last */
    int copy_numbers;         /* "copy_numbers": true: digits only as copies of the source's numbers
                               * (beam.h); needs a vocabulary with every digit its own piece; default 0 */
    int numbers_as_written;   /* "number_format": "source": a number of several separators goes back as
                               * the source wrote it; default ("target"): as the target language writes
                               * it (model/numbers.h) */
    int pass_through;         /* "pass_through": true: URLs, e-mail addresses and emoji are kept out of the
                               * model and put back by the alignment (model/passthrough.h); default 0 */
    int placeholders;         /* "placeholders": true: format placeholders ("%d", "{name}") reach the model
                               * as numbers and go back whole (model/placeholders.h); default 0 */
    char pass_through_characters[96]; /* "pass_through_characters": printable ASCII punctuation and symbols
                               * the model loses (measured by tools/check_characters.py): with pass_through,
                               * a word with one is copied; NUL-terminated, default "" */
} dmt_decoding_defaults;

/* A measured quality change of a faster precision against F32 (config.json
 * "precision_checks", written by tools/check_precision.py): what lets
 * `--precision auto` choose it (model.h dmt_precision_choose). */
typedef struct {
    bool present;
    float mean_bleu_change;  /* mean over the directions of (BLEU at that precision - BLEU in F32) */
    float worst_bleu_change; /* the lowest direction's change */
    int directions;          /* how many directions were measured */
    char test_set[96];       /* where ("multi30k test_2016_flickr, 1000 lines a direction") */
} dmt_precision_check;

typedef struct {
    int encoder_layers, decoder_layers; /* N, M */
    int d_model, heads, ffn_dim, vocab_size;
    dmt_norm_mode normalization;
    float encoder_alpha, decoder_alpha; /* residual scale; 1 unless deepnorm */
    dmt_activation activation;
    float layer_norm_eps;
    float embed_scale;                  /* sqrt(d_model) or 1 */
    dmt_position_kind positions;
    int position_offset;                /* position p uses row p + offset */
    int max_positions;                  /* longest sequence, specials included */
    bool layernorm_embedding;
    bool share_embeddings;              /* decoder input embedding = encoder's */
    bool tie_output;                    /* output projection = decoder input embedding */
    int pad_id, bos_id, eos_id, unk_id, decoder_start_id;
    int n_languages;
    dmt_language languages[DMT_MAX_LANGUAGES];
    dmt_decoding_defaults decoding;
    dmt_precision_check check_bf16, check_int8; /* "precision_checks": {"bf16": ..., "int8": ...} */
    int max_batch_sentences;            /* "batching": {"max_sentences": N}: the batch size measured to run
                                         * this model fastest, which lowers a server's default (0: absent) */
} dmt_config;

/* Parses config.json at `path` into *cfg. 0 on success, -1 with a message in err.
 * Refuses a non-regular file (FIFO, directory, device) without blocking. */
int dmt_config_load(const char *path, dmt_config *cfg, char *err, size_t errlen);

/* The same from a JSON string (tests, converters). */
int dmt_config_parse(const char *json_text, dmt_config *cfg, char *err, size_t errlen);

/* The language with this code ("de"), or NULL. */
const dmt_language *dmt_config_language(const dmt_config *cfg, const char *code);

const char *dmt_norm_mode_name(dmt_norm_mode m);
const char *dmt_activation_name(dmt_activation a);

#endif
