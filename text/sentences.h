/* sentences.h — split a text into sentences so each can be translated on its own.
 *
 * The server translates the sentences of every text as one batch and puts the
 * translations back with the original whitespace between them: a text is
 *   gap[0] sentence[0] gap[1] sentence[1] ... sentence[n-1] gap[n]
 * where the gaps are the bytes between the spans (whitespace, line breaks, a line's
 * list markers) and are copied unchanged.
 *
 * Rules (heuristic, language-agnostic, good for Latin/Greek/Cyrillic scripts):
 * - line breaks are hard boundaries; blank lines and indentation stay in the gaps;
 * - within a line a sentence ends after a run of terminators (. ! ? … and the CJK
 *   。！？, the latter need no following space), plus any closing quotes or
 *   brackets, when whitespace follows and the next character opens a sentence:
 *   an uppercase letter, a digit, an opening quote/bracket, ¿ ¡, or a letter of
 *   a script without case;
 * - a '.' does not end a sentence after a known abbreviation ("Dr.", "e.g.",
 *   "z.B.", "Mme.", "Mio.", "tzv."), a single letter ("J. Smith", and spaced ones:
 *   "z. B.", "n. Chr.", "u. a.", "č. 5"), a dotted acronym ("U.S.", "J.-C.") or a
 *   German ordinal before a month or a noun ordinals go with ("am 3. Oktober", "im
 *   19. Jahrhundert", "1. FC");
 * - "3.5" and "www.example.com" never split (no whitespace after the dot);
 * - a line's list markers stay in the gap before its sentence, each followed by
 *   horizontal space: bullets (- * + > • ◦ ▪ ■ ● ► → ✓ ☐ – — ·...), enumerators
 *   ("2)", "(3)", "[4]", "a)", "(iv)") and a Markdown heading's #s. A small model
 *   read them as part of the sentence and left its first words untranslated
 *   ("- Check your e-mail" -> "- Check deine E-Mail"). "1." is a sentence of its
 *   own by the rules above.
 *
 * A sentence longer than the model accepts is then cut into chunks
 * (dmt_sentence_chunks), which join back the same way.
 */
#ifndef DEEPMT_TEXT_SENTENCES_H
#define DEEPMT_TEXT_SENTENCES_H

#include <stddef.h>

typedef struct {
    size_t start; /* byte offset of the sentence in the text */
    size_t len;   /* bytes; never 0, never starts or ends with whitespace */
} dmt_span;

/* Splits len bytes of UTF-8 text. Writes at most cap spans to out (out may be
 * NULL when cap is 0) and returns the number of sentences in the text, which may
 * be more than cap: call once with cap 0 to size the array. Whitespace-only text
 * has 0 sentences. Invalid UTF-8 does not crash (the server validates it first): a
 * byte that starts no valid sequence stands for the code point of its value (0x85
 * and 0xA0 count as spaces, other bytes as letters), and an overlong form for the
 * code point it encodes. */
int dmt_sentences_split(const char *text, size_t len, dmt_span *out, int cap);

/* A sentence too long for the model, as chunks that each fit, so that no text is
 * ever refused for its length: fits(arg, text, len) says whether a piece of text
 * fits the model (e.g. its source pieces are within the limit). A chunk ends after
 * the clause punctuation (, ; : dashes, closing brackets, their CJK forms) nearest
 * the end of the longest fitting prefix; failing that (or when that would leave the
 * chunk under a quarter of the room) at the whitespace nearest it; failing that
 * with a hard cut at the last character that fits. Chunks carry no whitespace at
 * either end: the bytes between them are the gaps, kept as they are when the
 * translations are joined. A sentence that fits is one chunk. Returns the number
 * of chunks (spans into text; at most cap written, call with cap 0 to size), 0 for
 * whitespace-only text, or -1 when not even one character fits. */
int dmt_sentence_chunks(const char *text, size_t len, int (*fits)(void *arg, const char *text, size_t len), void *arg,
                        dmt_span *out, int cap);

/* Word numbering for alignments (dmt_word_index_at, dmt_word_bounds): base/words.h. */

/* The words that start and end in the gap text[gap_start..gap_end) (list markers:
 * "-", "2)"; not a no-break space glued to the sentence's first word, which is that
 * word), which a translation copies unchanged, starting at out_start of
 * out[0..out_len): each paired with its copy as (source word, target word) in the
 * numbering above, written to pairs (room for 2 ints a word; NULL: counting only).
 * Their count. */
int dmt_gap_pairs(const char *text, size_t len, size_t gap_start, size_t gap_end, const char *out, size_t out_len,
                  size_t out_start, int *pairs);

#endif
