/* test_casing.c — all-caps detection and case mapping (model/casing.c). */
#include <stdlib.h>
#include <string.h>

#include "model/casing.h"
#include "tests/c/check.h"

static void expect(char *(*f)(const char *, size_t, size_t *), const char *in, const char *want, const char *what) {
    size_t n = 0;
    char *got = f(in, strlen(in), &n);
    CHECK(got && !strcmp(got, want) && n == strlen(want), what, "got \"%s\", want \"%s\"", got ? got : "(null)", want);
    free(got);
}

/* a vocabulary of whole-word pieces, as dmt_casing_true_case's oracle */
static const char *const vocab[] = {"Tom", "Mary", "Hund", "Garten", "I", "i", "the", "The", "Élodie", "Čapek", "park",
                                    "Park", "straße"};
static int in_vocab(void *arg, const char *w, size_t n) {
    int *calls = arg;
    ++*calls;
    for (size_t i = 0; i < sizeof vocab / sizeof *vocab; i++)
        if (strlen(vocab[i]) == n && !memcmp(vocab[i], w, n)) return 1;
    return 0;
}

static void expect_true_case(const char *in, const char *want, const char *what) {
    size_t n = 0;
    int calls = 0;
    char *got = dmt_casing_true_case(in, strlen(in), &n, in_vocab, &calls);
    CHECK(got && !strcmp(got, want) && n == strlen(want), what, "got \"%s\", want \"%s\"", got ? got : "(null)", want);
    free(got);
}

int main(void) {
    const char *yes[] = {"THE CHILDREN ARE PLAYING IN THE PARK.", "ČEŠTINA JE TĚŽKÁ!", "ÜBER ALLES, 2024.",
                         "ÉTÉ À PARIS ?", "HELLO 😀 WORLD"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        CHECK(dmt_casing_is_all_caps(yes[i], strlen(yes[i])), "all caps", "\"%s\"", yes[i]);
    const char *no[] = {"The children are playing.", "THE CHILDREN are playing.", "USA", "OK!", "1234 5678",
                        "", "Ein HUND.", "ÉTÉ à PARIS"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        CHECK(!dmt_casing_is_all_caps(no[i], strlen(no[i])), "not all caps", "\"%s\"", no[i]);
    CHECK(!dmt_casing_is_all_caps("ABCD\xff", 5), "invalid UTF-8 is not all caps");

    expect(dmt_casing_sentence_case, "THE CHILDREN ARE PLAYING IN THE PARK.", "The children are playing in the park.",
           "sentence case: first letter kept upper");
    expect(dmt_casing_sentence_case, "HELLO. HOW ARE YOU? \"FINE!\" OK", "Hello. How are you? \"Fine!\" Ok",
           "sentence case: a capital after . ? ! and white space");
    expect(dmt_casing_sentence_case, "ČEŠTINA JE TĚŽKÁ, ŘEKL.", "Čeština je těžká, řekl.", "sentence case: Czech letters");
    expect(dmt_casing_sentence_case, "«ÉTÉ» À 3,50 € 😀", "«Été» à 3,50 € 😀", "sentence case: French, digits, emoji kept");
    expect(dmt_casing_sentence_case, "", "", "sentence case: empty");
    expect_true_case("I SAW TOM AND MARY IN THE PARK.", "I saw Tom and Mary in the park.",
                     "true case: names whose capitalised form alone is a piece; park (both forms) stays");
    expect_true_case("DER HUND SCHLÄFT IM GARTEN, SAGT ÉLODIE (ČAPEK).", "Der Hund schläft im Garten, sagt Élodie (Čapek).",
                     "true case: German nouns, accented capitals, leading punctuation");
    expect_true_case("\"TOM?\" I ASKED. TOM'S DOG", "\"Tom?\" I asked. Tom's dog",
                     "true case: quotes, the word's letters only (Tom's), i known both ways stays as sentence case left it");
    expect_true_case("STRASSE 3,50 € 😀 TOM", "Strasse 3,50 € 😀 Tom", "true case: digits, symbols and emoji kept");
    {
        size_t n = 0;
        char *got = dmt_casing_true_case("TOM IS HERE", 11, &n, NULL, NULL);
        CHECK(got && !strcmp(got, "Tom is here"), "true case without an oracle: sentence case", "%s", got);
        free(got);
        CHECK(dmt_casing_true_case("A\xc3", 2, &n, in_vocab, &(int){0}) == NULL, "true case: invalid UTF-8 refused");
    }
    expect(dmt_casing_upper, "Die Kinder spielen im Park, ça va? Čeština.", "DIE KINDER SPIELEN IM PARK, ÇA VA? ČEŠTINA.",
           "upper: accented letters too");
    expect(dmt_casing_upper, "straße 😀 3.50", "STRAßE 😀 3.50", "upper: simple mapping (ß stays), emoji and digits kept");
    CHECK(dmt_casing_upper("a\xc3", 2, NULL) == NULL, "upper: invalid UTF-8 refused (NULL)");
    expect(dmt_casing_lower, "MON PÈRE, ŁÓDŹ, CŒUR, ČEŠTINA 3.50 😀", "mon père, łódź, cœur, čeština 3.50 😀",
           "lower: every letter, accented capitals too, digits and emoji kept");
    CHECK(dmt_casing_lower("A\xc3", 2, NULL) == NULL, "lower: invalid UTF-8 refused (NULL)");
    return check_done();
}
