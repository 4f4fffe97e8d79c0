/* suggest.c — the closest known word (suggest.h): optimal string alignment
 * distance (Damerau-Levenshtein without repeated edits of a substring). */
#include "base/suggest.h"

#include <string.h>

#define SUGGEST_MAX 64 /* longer words are not compared */

static int distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > SUGGEST_MAX || m > SUGGEST_MAX) return 1 << 20;
    int d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int cost = a[i - 1] != b[j - 1], best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[n][m];
}

const char *dmt_suggest(const char *word, const char *const *candidates) {
    const char *best = NULL;
    int best_d = 3;
    size_t len = strlen(word);
    for (; *candidates; candidates++) {
        int dd = distance(word, *candidates);
        if (dd < best_d && (size_t)dd * 2 < len) {
            best = *candidates;
            best_d = dd;
        }
    }
    return best;
}
