/* tokenizer.h — text <-> model ids, through a SentencePiece model.
 *
 * A dmt_tokenizer is read-only once loaded: encode, decode and the look-ups may be
 * called from any number of threads at once on one handle. Functions that can fail
 * return NULL or -1 and write a message into the caller's buffer `err` (`errlen`
 * bytes, always NUL-terminated; err may be NULL). Nothing here prints or exits.
 *
 * Model ids follow docs/model-format.md ("Vocabulary"): SentencePiece ids, or, when
 * the model folder has a vocab.txt, the line numbers of that file.
 */
#ifndef DEEPMT_TOKENIZER_H
#define DEEPMT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct dmt_tokenizer dmt_tokenizer;

/* Loads model_dir/sentencepiece.model, and model_dir/vocab.txt when present.
 * With vocab.txt: it must have exactly vocab_size lines, one piece a line, none
 * empty or repeated; line i is model id i, and SentencePiece pieces it does not
 * list encode as unk_id. Without it: the SentencePiece model must have exactly
 * vocab_size pieces and its unknown piece must be unk_id. */
dmt_tokenizer *dmt_tokenizer_load(const char *model_dir, int vocab_size, int unk_id,
                                  char *err, size_t errlen);
void dmt_tokenizer_free(dmt_tokenizer *tok);                /* NULL is fine */

/* Encodes len bytes of UTF-8 text into at most max_ids model ids (no BOS / EOS,
 * no language token). Returns the number of ids, 0 for empty or whitespace-only
 * text, or -1 for invalid UTF-8 (the message gives the byte offset), a NUL byte,
 * or more than max_ids pieces ("input too long: N pieces, limit M"). ids may be
 * NULL when max_ids is 0. */
int dmt_tokenizer_encode(const dmt_tokenizer *tok, const char *text, size_t len,
                         int32_t *ids, int max_ids, char *err, size_t errlen);
/* How many ids dmt_tokenizer_encode would give for the text, however many: for
 * cutting a sentence that is too long. -1 for invalid UTF-8 or a NUL byte. */
int dmt_tokenizer_count(const dmt_tokenizer *tok, const char *text, size_t len, char *err, size_t errlen);

/* Decodes n model ids into text, leaving out control ids (<s>, </s>, <pad>) and
 * language tokens (pieces like __de__). On success *out is a malloc'd
 * NUL-terminated string the caller frees, and the return value is its length in
 * bytes; on failure (an id out of range) *out is NULL and the return is -1. */
int dmt_tokenizer_decode(const dmt_tokenizer *tok, const int32_t *ids, int n, char **out,
                         char *err, size_t errlen);

/* Whether the vocabulary spells the len bytes of UTF-8 text with pieces of its own:
 * 1, or 0 when a character of it comes out as byte-fallback pieces ("<0xD9>") or as
 * unk_id (a character SentencePiece never learnt), or -1 for text encode refuses. */
int dmt_tokenizer_spells(const dmt_tokenizer *tok, const char *text, size_t len);

int dmt_tokenizer_vocab_size(const dmt_tokenizer *tok);
/* The model id of a piece (e.g. "▁Haus", "<0xF0>"), or -1 if the vocabulary has none. */
int dmt_tokenizer_piece_to_id(const dmt_tokenizer *tok, const char *piece);
/* The piece of a model id, or NULL when id is out of range; valid until free. */
const char *dmt_tokenizer_id_to_piece(const dmt_tokenizer *tok, int id);
/* 1 when piece names a language token: "__", a code of letters, digits, '_' or '-'
 * that starts and ends with a letter or digit, "__" (__de__, __zh_Hans__). */
int dmt_tokenizer_is_language_piece(const char *piece);
/* The model id of the language token "__<code>__" (code "de" -> "__de__"), or -1. */
int dmt_tokenizer_language_id(const dmt_tokenizer *tok, const char *code);

#endif
