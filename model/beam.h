/* beam.h — batched beam search over token ids (DESIGN.md "Beam search").
 *
 * B sentences x k beams advance together, one dmt_decode_step per output position
 * for all live hypotheses. Each sentence may force its own first token (the target
 * language), so one batch can mix target languages. Finished sentences leave the
 * batch; the KV cache follows the surviving beams' parents. Ties break towards the
 * lower token id, then the lower beam index, so results are deterministic and match
 * the Python reference (tools/dmt/beam.py) token for token.
 *
 * Scores: a hypothesis' score is the sum of the log-probabilities of its scored
 * tokens (generated tokens and the final </s>; the forced token is not scored),
 * divided by (number of scored tokens)^length_penalty.
 */
#ifndef DEEPMT_MODEL_BEAM_H
#define DEEPMT_MODEL_BEAM_H

#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"

typedef struct {
    int beam_size;            /* k >= 1; 1 is greedy */
    float length_penalty;     /* exponent of the length normalisation */
    float max_len_a;          /* at most a * src_len + b generated tokens (</s> included) */
    int max_len_b;
    int min_len;              /* </s> is not allowed before this many generated tokens */
    int nbest;                /* hypotheses returned per sentence, 1 <= nbest <= beam_size */
    int no_repeat_ngram_size; /* 0 = off; else no n-gram of this size appears twice */
} dmt_beam_options;

/* The decoding defaults of config.json's "decoding" (nbest 1). */
dmt_beam_options dmt_beam_options_default(const dmt_config *cfg);

/* Checks ranges; 0, or -1 with a message naming the option. */
int dmt_beam_options_check(const dmt_beam_options *opt, char *err, size_t errlen);

typedef struct {
    int32_t *tokens;  /* generated ids: no forced token, no </s>; malloc'd */
    int n_tokens;
    float score;      /* length-normalised, see above */
} dmt_hypothesis;

typedef struct {
    dmt_hypothesis *hyps; /* best first; malloc'd */
    int n;
} dmt_nbest;

/* Translates n sentences at once. src[i] holds src_len[i] ids ending in </s>;
 * forced[i] is the token forced after the decoder start (a language id), or -1.
 * out[i] receives opt->nbest hypotheses, best first (free with dmt_nbest_clear).
 * 0, or -1 with a message (out is then left empty). */
int dmt_beam_search(dmt_state *s, int n, const int32_t *const *src, const int *src_len, const int *forced,
                    const dmt_beam_options *opt, dmt_nbest *out, char *err, size_t errlen);

void dmt_nbest_clear(dmt_nbest *nb);

#endif
