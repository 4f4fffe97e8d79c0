/* translate.h — text in, text out: tokenizer + beam search for a batch of sentences.
 *
 * The caller decides what one batch is (the CLI sorts by length, the server's
 * scheduler mixes requests and languages); this layer tokenizes, runs one beam
 * search over all sentences that tokenized cleanly, and detokenizes. A sentence
 * that cannot be translated (invalid UTF-8, too long) gets its own error and does
 * not fail the others. Empty or whitespace-only input translates to "".
 */
#ifndef DEEPMT_MODEL_TRANSLATE_H
#define DEEPMT_MODEL_TRANSLATE_H

#include <stddef.h>

#include "model/beam.h"
#include "model/marks.h"
#include "model/model.h"
#include "model/numbers.h"
#include "model/placeholders.h"
#include "model/passthrough.h"

typedef struct {
    const char *text;  /* one sentence of UTF-8 (not necessarily NUL-terminated) */
    size_t len;
    int target_id;     /* language token id (dmt_config_language(...)->id) */
} dmt_translate_input;

typedef struct {
    char **texts;      /* n translations, best first; malloc'd */
    float *scores;     /* their scores */
    int n;
    int src_tokens;    /* source pieces (without </s>) */
    int out_tokens;    /* generated tokens of the best translation */
    int all_caps;      /* the source was ALL-CAPS and the model's decoding.all_caps is "lower":
                        * it was translated in sentence case and texts are upper-cased */
    char error[256];   /* non-empty when this sentence failed; texts is then NULL */
    /* Word alignment of the best translation. Words are the whitespace-separated
     * words of the source sentence and of texts[0], counted from 0 (a no-break
     * space, which the model reads as a space, separates none); each target
     * piece is aligned to the source piece the decoder attended to most
     * (dmt_decode_alignment), and a pair (source word, target word) is listed once,
     * in target order. Pieces aligned to </s> give no pair. */
    int *alignment;    /* [2 * n_alignment]: source word, target word; malloc'd */
    int n_alignment;
    int *src_words;    /* [src_tokens] the source word of each source piece (dmt_translate_encode); malloc'd */
    dmt_passthrough *pass; /* the URLs, addresses and emoji kept out of the model (decoding.pass_through),
                            * put back into texts and counted in alignment's words; NULL: none; malloc'd */
    dmt_marks marks;   /* the source's final run of marks ("!!!"), given to the model as one and put
                        * back into texts (model/marks.h); len 0: none */
    dmt_numbers numbers; /* numbers with group separators ("1,500,000"), given to the model as plain
                          * digits and put back into texts (model/numbers.h, decoding.copy_numbers);
                          * n 0: none */
    dmt_placeholders placeholders; /* format placeholders ("%d", "{name}"), given to the model as numbers
                          * and put back into texts (model/placeholders.h, decoding.placeholders);
                          * n 0: none */
    int target_id;       /* the target language's token id, set by a caller of dmt_translate_decode
                          * (dmt_translate sets it): numbers go back as that language writes them
                          * (decoding.number_format); 0: as the source wrote them */
} dmt_translate_output;

/* Translates n sentences with one beam search. 0 when the batch ran (individual
 * sentences may still carry errors), -1 with a message for a batch-level failure
 * (out of memory, no tokenizer loaded). Free each out[i] with dmt_translate_output_clear. */
int dmt_translate(const dmt_model *m, dmt_state *s, int n, const dmt_translate_input *in,
                  const dmt_beam_options *opt, dmt_translate_output *out, char *err, size_t errlen);

void dmt_translate_output_clear(dmt_translate_output *o);

/* The two halves of dmt_translate, for a caller that runs its own beam search (the
 * server's continuous batching, beam.h "beam session"):
 * one sentence's source ids: its pieces (language tokens made <unk>, see
 * translate.c) and </s>, into ids (room for dmt_translate_max_source_tokens + 1).
 * The count with </s>; 0 for an empty sentence (nothing to search: it translates
 * to ""); -1 with a message in o->error (invalid UTF-8, too long). Sets o->all_caps
 * (the all-caps rule, model/casing.h), which dmt_translate_decode then applies. */
int dmt_translate_encode(const dmt_model *m, const char *text, size_t len, int32_t *ids, dmt_translate_output *o);
/* A search result into o: texts, scores, out_tokens (o->src_tokens is the caller's).
 * 0, or -1 with o->error set. nb NULL (an empty sentence) gives "". */
int dmt_translate_decode(const dmt_model *m, const dmt_nbest *nb, dmt_translate_output *o);

/* Longest source accepted, in pieces (max_positions minus room for </s>). */
int dmt_translate_max_source_tokens(const dmt_model *m);

/* Source pieces of a sentence as dmt_translate_encode counts them (all-caps rule
 * included, without </s>), however many; -1 for invalid text. */
int dmt_translate_source_pieces(const dmt_model *m, const char *text, size_t len);
/* The longest source a caller should give at once: half of max_positions (at least
 * 16, at most dmt_translate_max_source_tokens), so that the translation, which may
 * be longer than its source, still fits the decoder's positions, and inputs stay
 * near the lengths models are trained on. Longer sentences are cut into chunks of
 * at most this many pieces (text/sentences.h, dmt_sentence_chunks). */
int dmt_translate_chunk_tokens(const dmt_model *m);

#endif
