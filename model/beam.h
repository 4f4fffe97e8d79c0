/* beam.h — batched beam search over token ids (DESIGN.md "Beam search";
 * docs/decoding.md has the rules in full).
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
 *
 * The rules, step t = 1, 2, ... (t = number of the token being generated):
 *   - <pad> and <s> are never generated; </s> only when t > min_len; with
 *     no_repeat_ngram_size n, a token that would repeat an n-gram of the generated
 *     tokens (forced token excluded) is not generated.
 *   - repetition guard, max_repeats R > 0: when the generated tokens end with R
 *     copies in a row of a unit u of p tokens (p = 1..DMT_REPEAT_MAX_UNIT), u's first
 *     token is not generated (no R+1-th copy), unless the source (without </s>)
 *     holds that continuation: R copies of u in a row and u's first token. It stops
 *     degenerate loops ("m m m m ...",
 *     "tags tags tags ...") and changes nothing else.
 *   - copy_numbers (with the model's digit table, model.h digit_of): a digit is
 *     generated only where it continues the generated tokens' trailing run of
 *     digits (possibly empty) into a prefix of one of the source's runs of digits
 *     (without </s>) that max_len leaves room to finish, that no earlier rule
 *     bans and that is not yet written as often as the source holds it (for
 *     sources of at most DMT_COPY_NUMBERS_MAX_RUNS runs); while the trailing run
 *     is a prefix of some source run and equal to none, only such digits may
 *     follow (no other token, </s> included). </s> only once every source run
 *     has been written as often as the source holds it (for sources of at most
 *     DMT_COPY_NUMBERS_MAX_RUNS runs). Numbers come out as the source wrote them
 *     (separators between runs may change: "1,000" -> "1.000"), never as
 *     invented digits ("197197") nor cut off,
 *     and none is dropped unless max_len cuts the hypothesis off.
 *   - candidates: the 2k best (beam sum + log-prob) over k beams x vocab, best
 *     first; at t = 1 the k beams are one, so only beam 0's candidates count.
 *   - a </s> candidate among the first k finishes a hypothesis (until the sentence
 *     has k finished); the first k other candidates are the next step's beams.
 *   - a sentence stops when it has k finished hypotheses (fairseq's early stop: a
 *     live beam that might still overtake them after length normalisation is not
 *     waited for), when no beam is left, or after step max_len, where its live
 *     beams become hypotheses as they are (no </s>, t scored tokens). When no
 *     beam is left and none has finished (the rules masked every continuation),
 *     the beams of the step before become hypotheses as they are: a sentence
 *     never ends without one.
 *   - max_len = min(floor(max_len_a * src_len + max_len_b), room left in
 *     max_positions), at least 1, where src_len counts the source's </s> (as the
 *     src_len argument does).
 *   - n-best: finished and cut-off hypotheses sorted by score, best first (equal
 *     scores: the one that finished first).
 */
#ifndef DEEPMT_MODEL_BEAM_H
#define DEEPMT_MODEL_BEAM_H

#include <stddef.h>
#include <stdint.h>

#include "model/forward.h"

#define DMT_BEAM_MAX_SIZE 64 /* largest beam_size accepted */
#define DMT_REPEAT_MAX_UNIT 8 /* longest repeated unit the repetition guard looks for */
#define DMT_COPY_NUMBERS_MAX_RUNS 32 /* copy_numbers holds </s> back only for sources with at most this many numbers */

/* Hooks into a running search, for a caller that serves many clients (the
 * server's scheduler): sentences can leave the batch between decoder steps, and
 * each result is announced as soon as it is final. Not a decoding option: it never
 * changes a translation. */
typedef struct {
    /* Polled before each decoder step for every sentence still decoding; nonzero
     * drops sentence i from the batch at once: its rows leave the decoder and out[i]
     * is left empty (n = 0). May be NULL. */
    int (*cancelled)(void *arg, int i);
    /* out[i] is final (once per sentence that finished, in finishing order; never
     * for a cancelled one). Runs on the searching thread. May be NULL. */
    void (*finished)(void *arg, int i);
    void *arg;
} dmt_beam_control;

typedef struct {
    int beam_size;            /* k >= 1; 1 is greedy */
    float length_penalty;     /* exponent of the length normalisation, in [-10, 10] (0: none) */
    float max_len_a;          /* at most a * src_len + b generated tokens (</s> included), */
    int max_len_b;            /*   src_len counting the source's </s> */
    int min_len;              /* </s> is not allowed before this many generated tokens */
    int nbest;                /* hypotheses returned per sentence, 1 <= nbest <= beam_size */
    int no_repeat_ngram_size; /* 0 = off; else no n-gram of this size appears twice */
    int max_repeats;          /* repetition guard (see above); 0 = off */
    int copy_numbers;         /* numbers copied from the source (see above); needs the model's digit
                               * table (config.json decoding.copy_numbers), else no effect */
    const dmt_beam_control *control; /* NULL: none (see above; not compared as an option) */
} dmt_beam_options;

/* The decoding defaults of config.json's "decoding" (nbest 1). */
dmt_beam_options dmt_beam_options_default(const dmt_config *cfg);

/* Checks ranges; 0, or -1 with a message naming the option. */
int dmt_beam_options_check(const dmt_beam_options *opt, char *err, size_t errlen);

typedef struct {
    int32_t *tokens;  /* generated ids: no forced token, no </s>; malloc'd */
    int32_t *align;   /* [n_tokens] the source position (0-based, </s> counted) each token
                       * was aligned to: forward.h dmt_decode_alignment; malloc'd */
    int n_tokens;
    float score;      /* length-normalised, see above */
} dmt_hypothesis;

typedef struct {
    dmt_hypothesis *hyps; /* best first; malloc'd */
    int n;                /* nbest, fewer only when fewer hypotheses with a finite score exist */
    float min_gap;        /* diagnostic: the smallest score gap among the candidates and the
                           * n-best ranks that decided this list (INFINITY when none); below
                           * ~1e-5 another engine's rounding may pick differently */
} dmt_nbest;

/* Translates n sentences at once. src[i] holds src_len[i] ids ending in </s>;
 * forced[i] is the token forced after the decoder start (a language id), or -1
 * for none (forced may be NULL: none for all).
 * out[i] receives opt->nbest hypotheses, best first (free with dmt_nbest_clear).
 * 0, or -1 with a message (out is then left empty). Allocates once per call, not
 * per step. */
int dmt_beam_search(dmt_state *s, int n, const int32_t *const *src, const int *src_len, const int *forced,
                    const dmt_beam_options *opt, dmt_nbest *out, char *err, size_t errlen);

void dmt_nbest_clear(dmt_nbest *nb);

/* ---- a beam session: iteration-level (continuous) batching ----
 * The same search, one decoder step at a time over a set of sentences that changes
 * between steps: sentences join (their encoder pass runs and their cross-attention
 * K/V and cache slots join the batch: forward.h "continuous decoding") while others
 * decode, and leave as soon as they are final or cancelled. A sentence's result is
 * the one dmt_beam_search gives it (up to rounding in a different batch). All
 * sentences of a session share its options. */
typedef struct dmt_beam_session dmt_beam_session;

/* A session on state st (which it then uses alone) for at most max_sentences
 * sentences at once. NULL with a message on bad options or out of memory. */
dmt_beam_session *dmt_beam_session_new(dmt_state *st, const dmt_beam_options *opt, int max_sentences, char *err,
                                       size_t errlen);
void dmt_beam_session_free(dmt_beam_session *b);
/* Adds n sentences (as dmt_beam_search's src, src_len, forced), tagged tags[i] by
 * the caller. At most dmt_beam_session_room. 0, or -1 with a message (nothing added). */
int dmt_beam_session_admit(dmt_beam_session *b, int n, const int32_t *const *src, const int *src_len,
                           const int *forced, const int *tags, char *err, size_t errlen);
/* Drops cancelled sentences, then runs one decoder step for every sentence decoding.
 * 0, or -1 with a message (the session is then unusable: free it). */
int dmt_beam_session_step(dmt_beam_session *b, char *err, size_t errlen);
/* Takes one finished sentence: 1 with *tag and *out set (out owned by the caller:
 * dmt_nbest_clear), 0 when none is waiting. */
int dmt_beam_session_take(dmt_beam_session *b, int *tag, dmt_nbest *out);
/* The sentence tagged tag leaves at the next step, without a result. */
void dmt_beam_session_cancel(dmt_beam_session *b, int tag);
int dmt_beam_session_active(const dmt_beam_session *b); /* sentences decoding */
int dmt_beam_session_room(const dmt_beam_session *b);   /* sentences it can still admit */

#endif
