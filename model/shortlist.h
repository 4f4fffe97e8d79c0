/* shortlist.h — a lexical shortlist: the target pieces a source sentence can need.
 *
 * A decoder step of a 16k-piece model spends a quarter of its time or more on the
 * output projection, scoring every piece of the vocabulary, although a sentence's
 * translation draws on a few hundred of them. A shortlist (Bergamot's "lexical
 * shortlist") lists, for each target language and each source piece, the target
 * pieces that co-occur with it most in the training data (tools/make_shortlist.py
 * builds it); a sentence's candidates are those of its pieces, plus the most frequent
 * target pieces, plus its own pieces (names and numbers are copied), plus </s> and
 * the pieces </s> lists (the target language's own frequent pieces). Beam
 * search then scores only the union of its sentences' candidates, each sentence
 * normalised over its own (beam.c), so a sentence's translation does not depend on
 * the others in its batch. Optional: a model directory without MODEL_DIR/shortlist.bin
 * scores the whole vocabulary.
 *
 * The normaliser. A softmax over the candidates alone would give each hypothesis the
 * probability the model puts outside them back, most to the hypotheses heading for
 * pieces the candidates lack, and the search would favour those (on Tatoeba en-cs that
 * cost 0.46 BLEU against the whole vocabulary, all of it: masking the whole
 * vocabulary's softmax to the same candidates cost nothing). The mass outside is
 * estimated instead from a fixed sample of the vocabulary, every piece whose id is
 * DMT_SHORTLIST_SAMPLE_AT modulo DMT_SHORTLIST_SAMPLE_EVERY: those of a sentence's
 * sample pieces that are not its candidates are scored with them (never chosen), each
 * standing for (pieces outside its candidates) / (sample pieces outside) pieces:
 *
 *   log p(t) = l_t - log(sum over candidates c of e^l_c
 *                        + w * sum over sample pieces s outside of e^l_s)
 *
 * Ids follow SentencePiece's frequency order, so the sample spans rare and common
 * pieces alike; it is the same for every sentence and batch.
 *
 * File format (little-endian, every field checked at load; docs/model-format.md):
 *
 *   offset  size          field
 *   0       8             magic "DMTSL01\n"
 *   8       4             u32 vocab_size (must equal config.json's)
 *   12      4             u32 n_frequent: pieces allowed for every sentence
 *   16      4             u32 n_tables: one a target language
 *   20      4             u32 entry_bytes: 2 (u16 entries; vocab_size <= 65536) or 4
 *   24      4 n_frequent  u32 frequent[n_frequent], each < vocab_size
 *   then n_tables times:
 *           4             i32 target: the language token the table is for
 *           4             u32 n_entries
 *           4 (V + 1)     u32 start[V + 1]: source piece s lists entries
 *                         [start[s], start[s + 1]); start[0] = 0, non-decreasing,
 *                         start[V] = n_entries
 *           eb n_entries  target pieces (entry_bytes each), each < vocab_size,
 *                         then zero bytes up to a multiple of 4
 *   and nothing after the last table.
 */
#ifndef DEEPMT_MODEL_SHORTLIST_H
#define DEEPMT_MODEL_SHORTLIST_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/forward.h"

#define DMT_SHORTLIST_FILE "shortlist.bin"
#define DMT_SHORTLIST_SAMPLE_EVERY 32
#define DMT_SHORTLIST_SAMPLE_AT 16

/* 1 when piece t is in the normaliser's sample. */
static inline int dmt_shortlist_in_sample(int t) { return t % DMT_SHORTLIST_SAMPLE_EVERY == DMT_SHORTLIST_SAMPLE_AT; }

typedef struct dmt_shortlist dmt_shortlist;

/* Reads and validates path against cfg (vocabulary size, language tokens).
 * NULL with a message naming the file and the field. */
dmt_shortlist *dmt_shortlist_load(const char *path, const dmt_config *cfg, char *err, size_t errlen);
void dmt_shortlist_free(dmt_shortlist *sl);

/* 64-bit words of a sentence's candidate bitmap (one bit a vocabulary piece). */
int dmt_shortlist_words(const dmt_shortlist *sl);

/* The candidates of one source sentence translated into the language whose token
 * is target (-1: none forced), as a bitmap of dmt_shortlist_words words into allow:
 * the frequent pieces, the table's pieces of each source piece, the source pieces
 * themselves and </s>. 1 when set; 0 when the shortlist has no table for that
 * target (allow is then untouched: the sentence needs the whole vocabulary). */
int dmt_shortlist_sentence(const dmt_shortlist *sl, int target, const int32_t *src, int src_len, uint64_t *allow);

/* Tables and entries, for logs: "2 languages, 50 a piece on average, 100 frequent". */
const char *dmt_shortlist_describe(const dmt_shortlist *sl, char *buf, size_t len);

/* ---- the pieces a batch scores ----
 * Beam search keeps one dmt_vocab for its batch, in which sentences join and leave
 * (slots 0 .. cap-1, the search's sentence indices), each with its own candidates and
 * the sample pieces outside them. dmt_vocab_sync restricts the state's vocabulary
 * (dmt_state_restrict_vocab) to their union when that is worth it (not when a sentence
 * has no table or the union is most of the vocabulary); dmt_vocab_row then masks a
 * row of logits to its sentence's own candidates and normalises it with the estimate
 * above, so a sentence's scores are the same whatever else is in the batch (up to
 * rounding). */
typedef struct dmt_vocab dmt_vocab;

/* NULL when out of memory. */
dmt_vocab *dmt_vocab_new(const dmt_shortlist *sl, int cap);
void dmt_vocab_free(dmt_vocab *v);
/* Sentence `slot` joins with its source and target token (dmt_shortlist_sentence). */
void dmt_vocab_join(dmt_vocab *v, int slot, int target, const int32_t *src, int src_len);
/* It leaves (a slot that is not in is ignored). */
void dmt_vocab_leave(dmt_vocab *v, int slot);
/* Before a decoder step: restricts st's vocabulary to what the sentences in need, or
 * lifts the restriction. Pieces a sentence needs that are not scored are added as
 * new columns (dmt_state_extend_vocab) while the columns stay within a quarter of
 * what is needed (plus 64); past that, or when much less is needed than scored, the
 * union is gathered again, ascending. The row order therefore follows the batch's
 * history, not the pieces; a sentence's log-probabilities (dmt_vocab_row) do not
 * depend on it. 0, or -1 out of memory. */
int dmt_vocab_sync(dmt_vocab *v, dmt_state *st);
/* After a sync: the piece of each row entry (NULL: entry j is piece j; not
 * necessarily ascending) and *n the row length; col_of[piece] (NULL when cols is) is
 * its entry, -1 when not scored. */
const int32_t *dmt_vocab_cols(const dmt_vocab *v, int *n, const int32_t **col_of);
/* Turns a row of the last step's logits into log-probabilities: sentence slot's
 * candidates normalised as above, every other piece -inf. Returns their number n, with
 * (*values)[p] the log-probability of row entry (*entries)[p], in piece order; values
 * is v's own buffer, valid until the next call, so nothing spends time on the pieces
 * that are not candidates. A sentence without a table (or a slot not in): the
 * log-softmax of the whole row, in place (*values = row, *entries = NULL, n its
 * length). */
int dmt_vocab_row(const dmt_vocab *v, int slot, float *row, float **values, const int32_t **entries);
/* Restriction rebuilds (the union gathered whole) and additions (the pieces a
 * sentence that joined needs, added as columns) so far, for tests and logs. */
int dmt_vocab_rebuilds(const dmt_vocab *v);
int dmt_vocab_additions(const dmt_vocab *v);

#endif
