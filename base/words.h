/* words.h — the word numbering of alignments, shared by every part (base/: what every
 * part may use): words are the runs of text between ASCII whitespace (space, \t \n
 * \v \f \r), counted from 0. No-break spaces are inside words here: a word is what the
 * user's text separates with plain white space (the model's words are mapped to them). */
#ifndef DEEPMT_BASE_WORDS_H
#define DEEPMT_BASE_WORDS_H

#include <stddef.h>

/* Whether byte c is ASCII whitespace, the separator of words. */
int dmt_is_word_space(unsigned char c);

/* The words that start in s[from..to), s[from - 1] deciding whether s[from] starts
 * one; the word s[at] is in is dmt_words_started(s, 0, at + 1) - 1. */
int dmt_words_started(const char *s, size_t from, size_t to);

/* The number of the word at byte pos of text[0..len) (pos inside a word: that word;
 * on whitespace: the next word), so that a sentence's own word numbers plus this
 * offset number its words in the whole text. */
int dmt_word_index_at(const char *text, size_t len, size_t pos);

/* The words of text[0..len): where each starts and ends (either array may be NULL:
 * counting only); their count. */
int dmt_word_bounds(const char *text, size_t len, size_t *start, size_t *end);

#endif
