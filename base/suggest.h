/* suggest.h — "did you mean": the known word closest to a mistyped one. */
#ifndef DEEPMT_BASE_SUGGEST_H
#define DEEPMT_BASE_SUGGEST_H

/* The candidate (NULL-terminated list) at the smallest edit distance from word
 * (insertions, deletions, substitutions, adjacent swaps), if that distance is at
 * most 2 and under half the word's length; else NULL. */
const char *dmt_suggest(const char *word, const char *const *candidates);

#endif
