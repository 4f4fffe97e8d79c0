/* sentences.h — split a text into sentences so each can be translated on its own.
 *
 * The server translates the sentences of every text as one batch and puts the
 * translations back with the original whitespace between them: a text is
 *   gap[0] sentence[0] gap[1] sentence[1] ... sentence[n-1] gap[n]
 * where the gaps are the bytes between the spans (whitespace, line breaks) and are
 * copied unchanged.
 *
 * Rules (heuristic, language-agnostic, good for Latin/Greek/Cyrillic scripts):
 * - line breaks are hard boundaries; blank lines and indentation stay in the gaps;
 * - within a line a sentence ends after a run of terminators (. ! ? … and the CJK
 *   。！？, the latter need no following space), plus any closing quotes or
 *   brackets, when whitespace follows and the next character opens a sentence:
 *   an uppercase letter, a digit, an opening quote/bracket, ¿ ¡, or a letter of
 *   a script without case;
 * - a '.' does not end a sentence after a known abbreviation ("Dr.", "e.g.",
 *   "z.B.", "Mme."), a single letter ("J. Smith") or a dotted acronym ("U.S.");
 * - "3.5" and "www.example.com" never split (no whitespace after the dot).
 */
#ifndef DEEPMT_SERVER_SENTENCES_H
#define DEEPMT_SERVER_SENTENCES_H

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

#endif
