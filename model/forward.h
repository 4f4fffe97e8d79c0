/* forward.h — the forward pass: encoder over a padded batch, incremental decoder.
 *
 * A dmt_state is one worker's memory: activations, cross-attention K/V and the
 * self-attention KV cache. Buffers grow in dmt_encode / dmt_decode_begin when a
 * batch is larger than any before; dmt_decode_step and dmt_decode_reorder never
 * allocate. One state per thread; the model is shared read-only.
 *
 * Typical use (beam search does this):
 *   dmt_encode(s, n, src, len)                    n source sentences, each ending in </s>
 *   dmt_decode_begin(s, H, hyp_src, Hmax, max_steps)  H hypotheses, hyp h reads source hyp_src[h]
 *   loop: dmt_decode_step(s, tokens, logprobs)    feed one token per hypothesis
 *         dmt_decode_reorder(s, H', parent)       keep/duplicate hypotheses (beams, finished), H' <= Hmax
 */
#ifndef DEEPMT_MODEL_FORWARD_H
#define DEEPMT_MODEL_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

typedef struct dmt_state dmt_state;

dmt_state *dmt_state_new(const dmt_model *m);
void dmt_state_free(dmt_state *s);

/* The model a state was made for. */
const dmt_model *dmt_state_model(const dmt_state *s);

/* A buffer of at least `floats` floats for a search's log-probabilities, owned by the
 * state and kept between searches: a fresh one each batch (4 MB at 32 x 4 rows x 8k
 * vocabulary) costs a page fault per 4 KiB on every batch. NULL when out of memory. */
float *dmt_state_logits(dmt_state *s, size_t floats);

/* Vocabulary restriction (a shortlist, model/shortlist.h): from now on decoder steps
 * (dmt_decode_step, dmt_cont_step) score only the n pieces ids[] (ascending, distinct,
 * in the vocabulary) and write rows [hyps][n], entry j of a row being piece ids[j];
 * n = 0 (or ids NULL): the whole vocabulary again. raw = 1: the rows hold the raw
 * scores (logits), for a caller that normalises each row over the pieces it allows
 * (exponentiating only those); 0: log-probabilities over the n pieces. Copies the
 * output projection's n columns (n x d_model weights). 0, or -1 (bad ids, out of
 * memory: the restriction is then lifted). */
int dmt_state_restrict_vocab(dmt_state *s, int n, const int32_t *ids, int raw);
/* Adds pieces ids[0..n) (none scored yet, each once) to a restriction as its next
 * columns, copying only their weights: a sentence that joins a batch needs a few
 * pieces more, not the whole union gathered again. 0, or -1 (no restriction, bad ids,
 * out of memory: the restriction is then unchanged). */
int dmt_state_extend_vocab(dmt_state *s, int n, const int32_t *ids);
/* The length of a step's log-probability rows: n of the restriction, or vocab_size. */
int dmt_state_vocab_size(const dmt_state *s);

/* Encodes n sentences; src[i] holds src_len[i] ids (</s> included, no padding).
 * 0, or -1 with a message (empty sentence, id out of range, too long, out of memory). */
int dmt_encode(dmt_state *s, int n, const int32_t *const *src, const int *src_len, char *err, size_t errlen);

/* Encoder output of sentence i: [src_len[i]][d_model] rows, row stride d_model. */
const float *dmt_encoder_out(const dmt_state *s, int i);

/* Starts decoding n_hyps hypotheses (any n_hyps; several may read one source).
 * max_hyps (>= n_hyps) bounds the count dmt_decode_reorder may grow to: beam search
 * starts with one row per sentence while every beam is the same prefix, then fans
 * out to k. max_steps bounds the number of dmt_decode_step calls. Computes
 * cross-attention K/V once per source sentence. 0, or -1 with a message. */
int dmt_decode_begin(dmt_state *s, int n_hyps, const int *hyp_src, int max_hyps, int max_steps, char *err,
                     size_t errlen);

/* Feeds tokens[h] to hypothesis h at the next position; writes log-probabilities
 * [n_hyps][dmt_state_vocab_size] to logprobs. 0, or -1 when max_steps is exhausted or a token is
 * out of range. */
int dmt_decode_step(dmt_state *s, const int32_t *tokens, float *logprobs);

/* Hypothesis j continues old hypothesis parent[j], for j < n_new (n_new <= max_hyps of
 * dmt_decode_begin, more or fewer than now; a parent may repeat). Gathers the KV
 * cache accordingly. */
void dmt_decode_reorder(dmt_state *s, int n_new, const int *parent);

/* Word alignment: after a dmt_decode_step or dmt_cont_step, entry h is the position in
 * hypothesis h's source (0-based, </s> included) that the cross-attention of decoder
 * layer dmt_alignment_layer attended to most, its heads averaged: the source piece
 * the token predicted at this step is aligned to. Valid until the next step. */
const int *dmt_decode_alignment(const dmt_state *s);
/* The decoder layer alignments are read from: DEEPMT_ALIGN_LAYER (0-based, to
 * compare), else config.json's decoding.alignment_layer, else the last. Which
 * layer aligns best depends on the model: tests/py/test_markup_fixture.py measures
 * it (docs/model-format.md). */
int dmt_alignment_layer(const dmt_model *m);

/* Steps taken since dmt_decode_begin, and the current hypothesis count. */
int dmt_decode_steps(const dmt_state *s);
int dmt_decode_hyps(const dmt_state *s);

/* ---- continuous decoding (a beam session: beam.h) ----
 * Hypotheses of sentences that joined at different times, each at its own
 * position. A source is encoded when it joins and its cross-attention K/V kept
 * until released; the self-attention cache is a pool of slots shared by reference
 * (the beams of a sentence share their prefix), so what finished returns its slots
 * and memory follows what is live, not how long the state has run. Independent of
 * dmt_encode/dmt_decode_* above (it reuses their work buffers, so do not interleave
 * a dmt_decode_* batch with a continuous one on one state). */

/* Encodes n sources and keeps their cross-attention K/V; ids[i] names source i
 * for dmt_cont_add_hyps. 0, or -1 with a message and none of the n kept. */
int dmt_cont_add_sources(dmt_state *s, int n, const int32_t *const *src, const int *src_len, int *ids, char *err,
                         size_t errlen);
/* Frees a source once no hypothesis reads it. */
void dmt_cont_release_source(dmt_state *s, int id);
/* Appends n hypotheses at position 0, hypothesis j reading source src_ids[j]. */
int dmt_cont_add_hyps(dmt_state *s, int n, const int *src_ids, char *err, size_t errlen);
/* Feeds tokens[h] to every hypothesis h at its own next position; log-probabilities
 * [hyps][dmt_state_vocab_size] into logprobs. 0, or -1 (a token out of range, a hypothesis at
 * max_positions, out of memory). */
int dmt_cont_step(dmt_state *s, const int32_t *tokens, float *logprobs);
/* Hypothesis j continues old hypothesis parent[j], j < n_new (a parent may repeat or
 * be left out: its cache slots return to the pool). */
int dmt_cont_reorder(dmt_state *s, int n_new, const int *parent);
int dmt_cont_hyps(const dmt_state *s);
/* Cache slots in use (for tests: back to 0 once every hypothesis is gone). */
int dmt_cont_slots_used(const dmt_state *s);
/* Sources kept (for tests: each added one until it is released). */
int dmt_cont_sources(const dmt_state *s);

#endif
