/* words.c — the word numbering of alignments (words.h). */
#include "base/words.h"

int dmt_is_word_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int dmt_words_started(const char *s, size_t from, size_t to) {
    int words = 0;
    for (size_t j = from; j < to; j++)
        words += !dmt_is_word_space((unsigned char)s[j]) && (j == 0 || dmt_is_word_space((unsigned char)s[j - 1]));
    return words;
}

int dmt_word_bounds(const char *text, size_t len, size_t *start, size_t *end) {
    int w = 0;
    for (size_t i = 0; i < len; i++) {
        if (dmt_is_word_space((unsigned char)text[i])) continue;
        if (start) start[w] = i;
        while (i < len && !dmt_is_word_space((unsigned char)text[i])) i++;
        if (end) end[w] = i;
        w++;
    }
    return w;
}

int dmt_word_index_at(const char *text, size_t len, size_t pos) {
    if (pos > len) pos = len;
    int words = dmt_words_started(text, 0, pos);
    if (pos > 0 && pos < len && !dmt_is_word_space((unsigned char)text[pos - 1]) &&
        !dmt_is_word_space((unsigned char)text[pos]))
        words--; /* pos is inside the last word counted */
    return words;
}
