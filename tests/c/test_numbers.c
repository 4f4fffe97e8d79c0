/* test_numbers.c — model/numbers.c: numbers with several group separators, the
 * plain digits the model gets for them, and the numbers put back into a
 * translation as the source wrote them. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/numbers.h"

/* find + strip + restore (in lang's style; NULL: as written): the model input for
 * text, and what tr becomes */
static int styled_trip(const char *text, const char *want_input, const char *tr, const char *lang, const char *want) {
    dmt_numbers g;
    if (dmt_numbers_find(text, strlen(text), &g) != 1) {
        printf("# no number in '%s'\n", text);
        return 0;
    }
    size_t n = 0, k = 0;
    char *input = dmt_numbers_strip(text, strlen(text), &g, &n);
    char *out = dmt_numbers_restore(tr, strlen(tr), &g, &k, NULL, lang ? dmt_numbers_style(lang) : NULL);
    int ok = input && out && n == strlen(want_input) && !strcmp(input, want_input) && k == strlen(want) &&
             !strcmp(out, want);
    if (!ok) printf("# '%s': input '%s' (want '%s'), out '%s' (want '%s')\n", text, input, want_input, out, want);
    free(input);
    free(out);
    dmt_numbers_clear(&g);
    return ok;
}

static int round_trip(const char *text, const char *want_input, const char *tr, const char *want) {
    return styled_trip(text, want_input, tr, NULL, want);
}

int main(void) {
    CHECK(round_trip("The city has 1,500,000 people.", "The city has 1500000 people.", "Die Stadt hat 1500000 Leute.",
                     "Die Stadt hat 1,500,000 Leute."),
          "commas: one run for the model, the number back as written");
    CHECK(round_trip("Es kostet 3.250.000,50 Euro.", "Es kostet 3250000,50 Euro.", "It costs 3250000.50 euros.",
                     "It costs 3.250.000,50 euros."),
          "full stops and a decimal comma; the translation's decimal point is matched too");
    CHECK(round_trip("Il y a 12\xC2\xA0" "000\xC2\xA0" "000 habitants et 1'234'567 francs.",
                     "Il y a 12000000 habitants et 1234567 francs.", "There are 1234567 francs and 12000000 people.",
                     "There are 1'234'567 francs and 12\xC2\xA0" "000\xC2\xA0" "000 people."),
          "no-break spaces and apostrophes; numbers found wherever the translation moved them");
    CHECK(round_trip("From 1,000,000 to 1,000,000.", "From 1000000 to 1000000.", "Von 1000000 bis 1000000 und 1000000.",
                     "Von 1,000,000 bis 1,000,000 und 1000000."),
          "each number once: a third run the source did not have stays as written");
    CHECK(round_trip("1,234,567.89 and 2,000,000", "1234567.89 and 2000000", "1234567 und 2000000,0 und 1234567,89",
                     "1234567 und 2000000,0 und 1,234,567.89"),
          "a run with other decimals, or without the source's, is not the number");

    static const char *const none[] = {
        "Version 1.2.3 and 192.168.1.1", "On 12.05.2024 at 10.30", "It costs 1,234 dollars.", "6.000 Leute",
        "1,234,5678 and 12345,678,901", "10.000.000.1 is an address", "1,000,000 or 1000000", "1,500,000 and 1.500.000",
        "a1,000,000", "", "1,,000,000", "1,000.000,000", "In 2019 100 000 people", "1  500  000", "1 500 000 2",
        "12 000 euros", "1 500\xC2\xA0" "000", "1 500 0000", "in 2 500,5 cases", "1,500,50", "2.500.5"};
    int right = 0, n = (int)(sizeof none / sizeof none[0]);
    for (int i = 0; i < n; i++) {
        dmt_numbers g;
        int r = dmt_numbers_find(none[i], strlen(none[i]), &g);
        if (r == 0 && g.n == 0) right++;
        else printf("# '%s': %d numbers\n", none[i], g.n);
        dmt_numbers_clear(&g);
    }
    CHECK(right == n, "not a number of several groups: versions, addresses, dates, one group, uneven groups, "
                      "glued to a word, mixed separators, a year before one group, double spaces, a digit after; nor one "
          "whose digits another run has",
          "%d/%d", right, n);
    dmt_numbers g;
    CHECK(dmt_numbers_find("1,000,000 and 2,000,000", 23, &g) == 1 && g.n == 2 && g.items[1].at == 14 &&
              g.items[1].digits == 7 && g.items[1].decimals == 0,
          "two numbers, where they are");
    dmt_numbers_clear(&g);
    CHECK(dmt_numbers_find("1,500,000 2,000,000 3.000.000", 29, &g) == 1 && g.n == 3 && g.items[1].at == 10 &&
              g.items[2].at == 20,
          "a list of numbers one space apart: each is one (the space is not a separator of theirs)");
    dmt_numbers_clear(&g);

    /* a line of 3,000 numbers, one in ten also written without separators elsewhere:
     * found, and those left to the model, in one pass (this had taken 30 s) */
    enum { MANY = 3000 };
    char *line = malloc(MANY * 24 + 1);
    size_t at = 0;
    for (int k = 0; k < MANY; k++) at += (size_t)sprintf(line + at, "%d,%03d,%03d ", 100 + k % 900, k % 1000, k / 1000);
    for (int k = 0; k < MANY; k += 10) at += (size_t)sprintf(line + at, "%d%03d%03d ", 100 + k % 900, k % 1000, k / 1000);
    int many = dmt_numbers_find(line, at, &g);
    CHECK(many == 1 && g.n == MANY - MANY / 10 && g.items[0].at == 12 && g.items[g.n - 1].at == (size_t)(MANY - 1) * 12,
          "3,000 numbers on a line: the 2,700 whose digits no plain run repeats", "%d numbers", g.n);
    dmt_numbers_clear(&g);
    free(line);

    CHECK(round_trip("100 200 1 500 000 lid\xC3\xAD", "100 200 1500000 lid\xC3\xAD", "100 200 1500000 people",
                     "100 200 1 500 000 people"),
          "groups that are no number before one that is: the number found after them");
    char *chain = malloc(4 * 20000 + 4);
    for (int k = 0; k < 20000; k++) memcpy(chain + 4 * k, "123 ", 4);
    memcpy(chain + 4 * 20000, "12", 3);
    CHECK(dmt_numbers_find(chain, strlen(chain), &g) == 0,
          "20,000 groups and a digit after them: no number, read once (not again from each group)");
    dmt_numbers_clear(&g);
    free(chain);

    CHECK(round_trip("Il a 1 500 000 et 2 000 000 euros.", "Il a 1500000 et 2000000 euros.",
                     "He has 2000000 and 1500000 euros.", "He has 2 000 000 and 1 500 000 euros."),
          "plain spaces: one run for the model, the number back as written");
    CHECK(styled_trip("It costs 1,500,000.50 euros.", "It costs 1500000.50 euros.", "Es kostet 1500000.50 Euro.", "de",
                      "Es kostet 1.500.000,50 Euro.") &&
              styled_trip("Es kostet 1.500.000 Euro.", "Es kostet 1500000 Euro.", "It costs 1500000 euros.", "en",
                          "It costs 1,500,000 euros.") &&
              styled_trip("It costs 1,500,000 euros.", "It costs 1500000 euros.", "Cela co\xC3\xBBte 1500000 euros.", "fr",
                          "Cela co\xC3\xBBte 1\xE2\x80\xAF" "500\xE2\x80\xAF" "000 euros.") &&
              styled_trip("It costs 12,500,000.5 euros.", "It costs 12500000.5 euros.", "Stoj\xC3\xAD 12500000,5 eur.", "cs",
                          "Stoj\xC3\xAD 12\xC2\xA0" "500\xC2\xA0" "000,5 eur."),
          "in the target's style: German, English, French (U+202F), Czech (U+00A0)");
    CHECK(styled_trip("It costs 2,500.50 euros.", "It costs 2500.50 euros.", "Cela co\xC3\xBBte 2500,50 euros.", "fr",
                      "Cela co\xC3\xBBte 2\xE2\x80\xAF" "500,50 euros.") &&
              styled_trip("Es kostet 2.500,50 Euro.", "Es kostet 2500,50 Euro.", "It costs 2500.50 euros.", "en",
                          "It costs 2,500.50 euros."),
          "one group with decimals after the other separator is such a number too");
    CHECK(styled_trip("Il y a 1 500 000 habitants.", "Il y a 1500000 habitants.", "There are 1500000 people.", "en",
                      "There are 1 500 000 people.") &&
              styled_trip("Il y a 1\xC2\xA0" "500\xC2\xA0" "000 habitants.", "Il y a 1500000 habitants.",
                          "There are 1500000 people.", "en", "There are 1,500,000 people.") &&
              styled_trip("It costs 1,500,000 euros.", "It costs 1500000 euros.", "Cena 1500000 eur.", "xx",
                          "Cena 1,500,000 eur."),
          "plain spaces stay as written (a phone number may be grouped so), no-break spaces do not; a language "
          "without a style: as written");
    CHECK(styled_trip("Connect to 10.100.200.250 now.", "Connect to 10100200250 now.", "Verbinde 10100200250 jetzt.", "en",
                      "Verbinde 10.100.200.250 jetzt.") &&
              styled_trip("Es kostet 1.500.000.000 Euro.", "Es kostet 1500000000 Euro.", "It costs 1500000000 euros.", "en",
                          "It costs 1,500,000,000 euros."),
          "four parts of at most 255 may be an IPv4 address: as written; 1.500.000.000 is a number");
    CHECK(dmt_numbers_style("es") && !strcmp(dmt_numbers_style("es")->group, ".") && dmt_numbers_style("ja") &&
              !strcmp(dmt_numbers_style("ja")->decimal, ".") && dmt_numbers_style("pl") &&
              !strcmp(dmt_numbers_style("pl")->group, "\xC2\xA0") && !dmt_numbers_style("e") &&
              !dmt_numbers_style("xx") && !dmt_numbers_style("") && !dmt_numbers_style(NULL) &&
              !dmt_numbers_style("en de") && !dmt_numbers_style("de "),
          "styles of other languages (CLDR's symbols); no style for unknown codes or parts of the table");
    CHECK(round_trip("Volejte 777 123 456 nebo 6\xE2\x80\x89" "000\xE2\x80\x89" "000.", "Volejte 777123456 nebo 6000000.",
                     "Call 777123456 or 6000000.", "Call 777 123 456 or 6\xE2\x80\x89" "000\xE2\x80\x89" "000."),
          "a phone number grouped in threes goes back as written; thin spaces");

    /* the alignment through numbers of several words: "Il0 a1 1 500 000 et 2 000 000 euros." is
     * "Il a N et M euros." for the model, its translation "He has M and N euros." */
    const char *text = "Il a 1 500 000 et 2 000 000 euros.", *tr = "He has 2000000 and 1500000 euros.";
    int placed[2] = {-9, -9}, *pairs = NULL, n_pairs = 0;
    size_t k = 0;
    char *out = NULL;
    int found = dmt_numbers_find(text, strlen(text), &g);
    CHECK(found == 1 && g.n == 2 && g.spaced == 2 && g.items[0].word == 2 && g.items[0].spaces == 2 &&
              g.items[1].word == 6 && g.items[1].spaces == 2,
          "each number's word and plain spaces");
    if (found == 1) out = dmt_numbers_restore(tr, strlen(tr), &g, &k, placed, NULL);
    CHECK(out && placed[0] == 4 && placed[1] == 2, "restore says which word of the translation each number went into",
          "%d %d", placed[0], placed[1]);
    static const int model_pairs[] = {0, 0, 1, 1, 4, 2, 3, 3, 2, 4, 3, 4, 5, 5, -1, 2};
    static const int want[] = {0, 0, 1, 1, 6, 2, 7, 3, 8, 4, 5, 5, 2, 6, 5, 6, 3, 7, 5, 7, 4, 8, 5, 8, 9, 9};
    int n_want = (int)(sizeof want / sizeof want[0]) / 2, rc = -1;
    if (out) rc = dmt_numbers_map_pairs(&g, placed, model_pairs, 8, &pairs, &n_pairs);
    int same = rc == 0 && n_pairs == n_want && !memcmp(pairs, want, sizeof want);
    if (!same && rc == 0)
        for (int q = 0; q < n_pairs; q++) printf("# %d-%d\n", pairs[2 * q], pairs[2 * q + 1]);
    CHECK(same, "the pairs in the sentence's and the translation's words: a number's words group by group, a word "
                "aligned to a number with each of its words, in target order",
          "%d pairs, want %d", n_pairs, n_want);
    free(pairs);
    pairs = NULL;
    rc = dmt_numbers_map_pairs(&g, NULL, (const int[]){2, 0, 3, 1}, 2, &pairs, &n_pairs);
    CHECK(rc == 0 && n_pairs == 4 && pairs[0] == 2 && pairs[2] == 3 && pairs[4] == 4 && pairs[5] == 0 && pairs[6] == 5 &&
              pairs[7] == 1,
          "without placed, only the source side widens");
    free(pairs);
    free(out);
    dmt_numbers_clear(&g);
    return check_done();
}
