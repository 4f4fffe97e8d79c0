/* passthrough.h — URLs, e-mail addresses, emoji and words the model cannot spell
 * kept out of the model and put back into its translation (passthrough.c).
 *
 * A small translation model mangles what it should copy: "https://example.com/a?b=1"
 * comes out as pieces of German. With config.json's "decoding": {"pass_through":
 * true}, a sentence's URLs (http://, https://, ftp://, mailto:, www.), e-mail
 * addresses and words of nothing but emoji are taken out before tokenization, the
 * rest is translated, and each one is put back, byte for byte:
 * - after the target word aligned to the source word before it (model/translate.h's
 *   word alignment), before that word's closing punctuation where the source had
 *   the span right before its own;
 * - ASCII symbols right before a number ("x < 3"): before the number in the
 *   translation;
 * - a span that starts the sentence starts the translation; one that ends it, or is
 *   placed after the last word, ends it, before its closing punctuation unless the
 *   source had punctuation before the span ("Visit https://x.org." -> "Besuchen Sie
 *   https://x.org.", though the verb may move).
 * A span is a whitespace-separated word whose core (without opening brackets and
 * quotes, and closing ones and .,;:!? at its end) is a URL, an address or emoji
 * (pictographs, with their joiners and modifiers), or a rule, a blank or a row of
 * stars (3 or more of one ASCII symbol other than .,;:!?: "-----", "_____", "***",
 * which the model shortened, lengthened or dropped); the word's trailing .,;:!? stays
 * in the sentence, glued to the word before. A sentence that is nothing but spans is
 * given back as it is.
 *
 * With the model's spelling (dmt_passthrough_find_with; translate.c gives it from
 * the vocabulary and the model's languages), a word the model cannot spell is a
 * span too:
 * - an ASCII letter alone that is a word in none of the model's languages: a
 *   variable or a label the model dropped ("Let x be" -> "Lass uns ... sein",
 *   "Plan B" -> "Der Plan");
 * - one with an ASCII character the vocabulary lacks (the default model drops
 *   '<': "x < 3" had given "x 3");
 * - one in a script the model cannot spell or was not trained on: an Arabic,
 *   Hebrew, Greek or Chinese word reaches a model of Latin-script languages as
 *   byte-fallback pieces it has hardly seen, and a Russian one as letters it saw
 *   in a few stray lines; both come out as invented words ("مرحبا بالعالم." had
 *   given "eigenousousousia-Stänisse eigendiges ..."). Kept out, the word is
 *   copied, and a sentence of nothing else comes back as it was.
 *
 * Words are counted as everywhere in the translation layer: whitespace-separated.
 */
#ifndef DEEPMT_MODEL_PASSTHROUGH_H
#define DEEPMT_MODEL_PASSTHROUGH_H

#include <stddef.h>

typedef struct {
    size_t start, len;  /* the span's bytes in the original sentence */
    int prev;           /* the kept word before it, in the stripped sentence (-1: none) */
    int word;           /* its own word index in the original sentence */
    int glued;          /* punctuation after it was glued to the word before */
    size_t number_start, number_len; /* ASCII symbols right before a number ("x < 3"): the number's
                           digits in the original; the span goes before their copy in the
                           translation (numbers are copied), else before the number's
                           aligned target word (number_len 0: not such a span) */
} dmt_passthrough_span;

typedef struct {
    char *original;            /* a copy of the sentence as given; malloc'd */
    size_t original_len;
    char *stripped;            /* the sentence without its spans: what the model sees; malloc'd */
    size_t stripped_len;
    int n_kept;                /* words in stripped */
    int *kept_word;            /* [n_kept] each kept word's index in the original sentence */
    int n_spans;
    dmt_passthrough_span *spans;
} dmt_passthrough;

/* Finds text's spans. 1 when it has some (p filled: free with dmt_passthrough_clear;
 * n_kept 0 and stripped "" when nothing but spans and punctuation is left), 0 when
 * none (p left empty), -1 when out of memory. text need not be NUL-terminated. */
int dmt_passthrough_find(const char *text, size_t len, dmt_passthrough *p);

/* Whether word[0..len) (a word's core, valid UTF-8, with a character outside
 * ASCII) is one the model cannot spell. */
typedef int (*dmt_passthrough_unspellable)(void *arg, const char *word, size_t len);

/* What a model can spell. */
typedef struct {
    const unsigned char *missing_ascii;      /* [128] 1: an ASCII character the vocabulary lacks; a word
                                                with one is a span (NULL: none) */
    dmt_passthrough_unspellable unspellable; /* asked about each word with a character outside ASCII
                                                (NULL: none is a span for that) */
    void *arg;                               /* unspellable's first argument */
    unsigned lone_letters;                   /* bit c - 'a': an ASCII letter that alone is no word of the
                                                model's languages; a word of it alone ("x", "(b)", "B,", not
                                                "B." which may be an initial or "M." for Monsieur) is a span */
} dmt_passthrough_spelling;

/* dmt_passthrough_find, with the words the model cannot spell as spans too
 * (spelling NULL: none). */
int dmt_passthrough_find_with(const char *text, size_t len, const dmt_passthrough_spelling *spelling,
                              dmt_passthrough *p);

/* tr (a translation of p->stripped) with p's spans put back: pairs are n_pairs
 * (stripped word, tr word) alignment pairs in target order (NULL: placed by
 * relative position). A malloc'd, NUL-terminated string (length in *out_len), or
 * NULL when out of memory. When new_pairs is not NULL, *new_pairs gets the
 * alignment between the original sentence's words and the result's (the span
 * pairs included, in target order) and *n_new its count. */
char *dmt_passthrough_restore(const dmt_passthrough *p, const char *tr, size_t tr_len, const int *pairs,
                              int n_pairs, size_t *out_len, int **new_pairs, int *n_new);

/* A sentence with nothing to translate: 1 when text holds something but no letter
 * or digit ("!!!", "-----", "…", "* * *", "€"), and p is filled so that it comes
 * back as it is (no spans, nothing kept: free with dmt_passthrough_clear); 0 when it
 * has a letter or digit, is empty or blank (p left empty); -1 when out of memory.
 * The model would have changed it ("!!!" -> "!", "-----" -> "-- klagen Sie!"). */
int dmt_passthrough_verbatim(const char *text, size_t len, dmt_passthrough *p);

void dmt_passthrough_clear(dmt_passthrough *p);

#endif
