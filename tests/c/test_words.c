/* test_words.c — base/words.c: the word numbering every alignment uses (words are the
 * runs between ASCII whitespace; a no-break space is inside a word). */
#include <string.h>

#include "base/words.h"
#include "check.h"

int main(void) {
    const char *t = "  Hello,\tbig\n world  ";
    size_t len = strlen(t), start[8], end[8];
    int n = dmt_word_bounds(t, len, start, end);
    CHECK(n == 3 && start[0] == 2 && end[0] == 8 && start[1] == 9 && end[1] == 12 && start[2] == 14 && end[2] == 19,
          "dmt_word_bounds: each word's start and end, tabs and line breaks separate", "n %d", n);
    CHECK(dmt_word_bounds(t, len, NULL, NULL) == 3 && dmt_word_bounds("", 0, NULL, NULL) == 0 &&
              dmt_word_bounds(" \t\r\n\v\f", 6, NULL, NULL) == 0,
          "dmt_word_bounds: counting only; empty and all-whitespace text has no word");
    const char *nb = "10\xC2\xA0km de route"; /* U+00A0 inside "10 km" */
    CHECK(dmt_word_bounds(nb, strlen(nb), NULL, NULL) == 3, "a no-break space does not separate words");

    CHECK(dmt_word_index_at(t, len, 0) == 0 && dmt_word_index_at(t, len, 2) == 0 && dmt_word_index_at(t, len, 5) == 0 &&
              dmt_word_index_at(t, len, 8) == 1 && dmt_word_index_at(t, len, 10) == 1 &&
              dmt_word_index_at(t, len, 13) == 2 && dmt_word_index_at(t, len, 16) == 2,
          "dmt_word_index_at: inside a word that word, on whitespace the next one");
    CHECK(dmt_word_index_at(t, len, len) == 3 && dmt_word_index_at(t, len, len + 100) == 3 &&
              dmt_word_index_at("ab", 2, 2) == 1,
          "dmt_word_index_at: at or past the end, the number of words");

    CHECK(dmt_words_started(t, 0, len) == 3 && dmt_words_started(t, 3, 12) == 1 && dmt_words_started(t, 9, 10) == 1 &&
              dmt_words_started(t, 10, 12) == 0,
          "dmt_words_started: a word starting inside the range counts, one begun before it does not");
    int ok = 1;
    for (size_t at = 0; at < len; at++)
        if (!dmt_is_word_space((unsigned char)t[at]) && dmt_words_started(t, 0, at + 1) - 1 != dmt_word_index_at(t, len, at))
            ok = 0;
    CHECK(ok, "the word s[at] is in: dmt_words_started(s, 0, at + 1) - 1 agrees with dmt_word_index_at");
    CHECK(dmt_is_word_space(' ') && dmt_is_word_space('\r') && dmt_is_word_space('\v') && !dmt_is_word_space(0xA0) &&
              !dmt_is_word_space(0xC2) && !dmt_is_word_space('x') && !dmt_is_word_space(0),
          "dmt_is_word_space: ASCII whitespace only");
    return check_done();
}
