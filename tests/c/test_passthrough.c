/* test_passthrough.c — model/passthrough.c: which words are URLs or e-mail
 * addresses, the sentence the model sees without them, and where they go back
 * into a translation (by the word alignment, or by relative position). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/passthrough.h"

static int find(const char *text, dmt_passthrough *p) { return dmt_passthrough_find(text, strlen(text), p); }

/* a stand-in for the vocabulary's test: words with a Cyrillic zhe (U+0436) cannot be
 * spelt; counts its calls in *arg */
static int has_zhe(void *arg, const char *word, size_t len) {
    ++*(int *)arg;
    for (size_t i = 0; i + 1 < len; i++)
        if ((unsigned char)word[i] == 0xD0 && (unsigned char)word[i + 1] == 0xB6) return 1;
    return 0;
}

static int find_with(const char *text, int *calls, dmt_passthrough *p) {
    dmt_passthrough_spelling spelling = {NULL, has_zhe, calls, 0};
    return dmt_passthrough_find_with(text, strlen(text), &spelling, p);
}

/* a vocabulary without '<' and '~' */
static int find_missing_ascii(const char *text, int *calls, dmt_passthrough *p) {
    static unsigned char missing[128];
    missing['<'] = missing['~'] = 1;
    dmt_passthrough_spelling spelling = {missing, has_zhe, calls, 0};
    return dmt_passthrough_find_with(text, strlen(text), &spelling, p);
}

/* restore tr with pairs ("s t s t ..." as an int list, n pairs) and compare; the
 * spans found with the stand-in spelling above */
static int restores_to(const char *text, const char *tr, const int *pairs, int n_pairs, const char *want,
                       const int *want_pairs, int n_want) {
    dmt_passthrough p;
    int calls = 0;
    if (find_missing_ascii(text, &calls, &p) != 1) {
        printf("# no span found in %s\n", text);
        return 0;
    }
    size_t len = 0;
    int *np = NULL, nn = 0;
    char *got = dmt_passthrough_restore(&p, tr, strlen(tr), pairs, n_pairs, &len, want_pairs ? &np : NULL, &nn);
    int ok = got && len == strlen(want) && !strcmp(got, want);
    if (!ok) printf("#   got  '%s'\n#   want '%s'\n", got ? got : "(null)", want);
    if (ok && want_pairs) {
        ok = nn == n_want && !memcmp(np, want_pairs, (size_t)n_want * 2 * sizeof *np);
        if (!ok) {
            printf("#   pairs:");
            for (int q = 0; q < nn; q++) printf(" %d-%d", np[2 * q], np[2 * q + 1]);
            printf("\n");
        }
    }
    free(np);
    free(got);
    dmt_passthrough_clear(&p);
    return ok;
}

int main(void) {
    dmt_passthrough p = {0};

    /* --- finding spans ------------------------------------------------------ */
    CHECK(find("Visit https://example.com/a?b=1&c=%20 for details.", &p) == 1 && p.n_spans == 1 &&
              !strcmp(p.stripped, "Visit for details.") && p.n_kept == 3 && p.spans[0].prev == 0 &&
              p.spans[0].word == 1 && !p.spans[0].glued && p.kept_word[1] == 2,
          "a URL is taken out; the model sees the rest", "'%s'", p.stripped);
    dmt_passthrough_clear(&p);
    CHECK(find("Visit https://x.org.", &p) == 1 && !strcmp(p.stripped, "Visit.") && p.spans[0].glued &&
              p.spans[0].len == strlen("https://x.org"),
          "its trailing full stop stays in the sentence, glued to the word before", "'%s'", p.stripped);
    dmt_passthrough_clear(&p);
    CHECK(find("Write to anna.k+mt@mail.example.co.uk, please", &p) == 1 && !strcmp(p.stripped, "Write to, please"),
          "an e-mail address is taken out (its comma stays)", "'%s'", p.stripped);
    dmt_passthrough_clear(&p);
    CHECK(find("See (www.example.org) and mailto:x@y.cz now", &p) == 1 && p.n_spans == 2 &&
              !strcmp(p.stripped, "See and now"),
          "www. and mailto: spans, brackets around them go with them", "'%s' %d", p.stripped, p.n_spans);
    dmt_passthrough_clear(&p);
    CHECK(find("Happy birthday \xF0\x9F\x8E\x89\xF0\x9F\x8E\x82! \xE2\x98\x95 later, \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD.", &p) == 1 &&
              p.n_spans == 3 && !strcmp(p.stripped, "Happy birthday! later,."),
          "a word of emoji (joiners, skin tones and all) is a span", "'%s' %d", p.stripped, p.n_spans);
    dmt_passthrough_clear(&p);
    CHECK(find("great\xF0\x9F\x98\x80 and \xC3\xA9t\xC3\xA9 \xE2\x82\xAC" "5 \xE2\x80\x94 \xE4\xB8\xAD\xE6\x96\x87", &p) == 0,
          "emoji inside a word, accents, the euro sign, dashes and CJK are not");
    dmt_passthrough_clear(&p);
    CHECK(find("It is 20 m\xC2\xB2, H\xE2\x82\x82O, 29\xC2\xBE inches, \xE2\x91\xA0 and DeepMT\xE2\x84\xA2.", &p) == 1 &&
              p.n_spans == 5 && !strcmp(p.stripped, "It is 20,, inches, and."),
          "superscripts, subscripts, fractions, enclosed numbers and the trade mark sign, which the normaliser makes "
          "plain letters and digits, are spans", "'%s' %d", p.stripped, p.n_spans);
    dmt_passthrough_clear(&p);
    CHECK(find("It is 20 m\xC2\xB2.", &p) == 1 && p.n_spans == 1, "a superscript of two bytes of UTF-8 passes the quick look too");
    dmt_passthrough_clear(&p);
    CHECK(find("Der CO\xE2\x82\x82-Aussto\xC3\x9F sinkt um 5 \xC2\xB0" "C.", &p) == 0,
          "not in a word with a hyphen (the model translates the rest), nor a degree sign");
    dmt_passthrough_clear(&p);
    static const char *const not_spans[] = {
        "It is 5:30 now.", "a@b is not an address", "x@y.z1 is not either", "user@localhost neither",
        "http:/broken and www. alone", "hello.world is a word", "ftp:// alone", "@home today", "Tom's e-mail.",
        "HTTPS:// nothing", "two@@signs.com", "dots@a..com", "end@dot.com.", /* the last one is an address */
    };
    int wrong = 0;
    for (size_t i = 0; i + 1 < sizeof not_spans / sizeof *not_spans; i++) {
        int r = find(not_spans[i], &p);
        if (r != 0) printf("#   taken as a span: %s\n", not_spans[i]), wrong++;
        dmt_passthrough_clear(&p);
    }
    CHECK(wrong == 0, "times, bare @ words, hosts without a dot, broken schemes are not spans");
    CHECK(find("end@dot.com.", &p) == 1 && p.n_kept == 0 && !strcmp(p.stripped, ""),
          "a sentence of nothing but a span and punctuation leaves nothing to translate");
    dmt_passthrough_clear(&p);
    CHECK(find("Plain text without any.", &p) == 0 && p.stripped == NULL && p.n_spans == 0,
          "a sentence without spans is left alone");
    CHECK(find("Bad https://x.org/\xff\xfe bytes", &p) == 0, "a URL that is not valid UTF-8 is not a span");
    dmt_passthrough_clear(&p);
    static const char nul[] = "Nul https://x.org/\0a (x\0) bytes";
    int r = dmt_passthrough_find(nul, sizeof nul - 1, &p);
    CHECK(r == 1 && p.n_spans == 1 && p.spans[0].len == 16 && p.stripped_len == strlen("Nul ") + 4 + strlen(" bytes"),
          "NUL bytes inside a word do not stop the scan", "%d spans, %zu bytes left", p.n_spans, p.stripped_len);
    dmt_passthrough_clear(&p);

    /* --- putting them back -------------------------------------------------- */
    {   /* Visit(0) URL(1) for(2) details.(3); stripped: Visit(0) for(1) details.(2) */
        static const int pairs[] = {0, 0, 0, 1, 1, 2, 2, 3};
        static const int want[] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 4};
        CHECK(restores_to("Visit https://example.com/a?b=1 for details.", "Besuchen Sie für Details.", pairs, 4,
                          "Besuchen Sie https://example.com/a?b=1 für Details.", want, 5),
              "after the last target word aligned to the word before it; the alignment counts it");
    }
    {
        static const int pairs[] = {0, 0, 0, 1};
        static const int want[] = {0, 0, 0, 1, 1, 2};
        CHECK(restores_to("Visit https://x.org.", "Besuchen Sie.", pairs, 2, "Besuchen Sie https://x.org.", want, 3),
              "before that word's full stop when the source had it so");
    }
    {   /* the word before is unaligned: before the word aligned to the one after */
        static const int pairs[] = {1, 2, 2, 3};
        CHECK(restores_to("Visit https://x.org for details.", "Bitte besuchen für Details.", pairs, 2,
                          "Bitte besuchen https://x.org für Details.", NULL, 0),
              "the word before unaligned: before the word aligned to the word after");
    }
    {   /* a pair with a negative target word (not from the engine, but restore must not lose the span) */
        static const int pairs[] = {1, -1, 0, 7};
        CHECK(restores_to("Visit https://x.org for details now.", "Besuchen Sie für Details jetzt.", pairs, 2,
                          "Besuchen https://x.org Sie für Details jetzt.", NULL, 0),
              "pairs out of range are ignored: by relative position");
    }
    CHECK(restores_to("Visit https://x.org for details now.", "Besuchen Sie für Details jetzt.", NULL, 0,
                      "Besuchen https://x.org Sie für Details jetzt.", NULL, 0),
          "no alignment (an n-best entry): by relative position");
    CHECK(restores_to("https://x.org is a site.", "Das ist eine Seite.", NULL, 0, "https://x.org Das ist eine Seite.",
                      NULL, 0),
          "a span that starts the sentence starts the translation");
    {
        static const int pairs[] = {0, 0, 1, 1};
        CHECK(restores_to("Mail a@b.cz https://x.org now", "Schreib jetzt", pairs, 2,
                          "Schreib a@b.cz https://x.org jetzt", NULL, 0),
              "two spans at one place keep their order");
    }
    {   /* Skura(0) bought(1) a(2) new(3) dog.(4) ADDRESS(5): the German verb comes last */
        static const int pairs[] = {0, 0, 2, 1, 3, 2, 4, 3, 1, 4};
        CHECK(restores_to("Skura bought a new dog. info@example.org", "Skura hat einen neuen Hund gekauft.", pairs, 5,
                          "Skura hat einen neuen Hund gekauft. info@example.org", NULL, 0),
              "a span that ends the sentence ends the translation, whatever the word before aligns to");
        static const int two[] = {0, 0, 1, 1};
        CHECK(restores_to("Write to a@b.cz", "Schreib an.", two, 2, "Schreib an a@b.cz.", NULL, 0) &&
                  restores_to("Mail https://x.org now", "Jetzt mailen!", (const int[]){0, 1, 2, 1}, 2,
                              "Jetzt mailen https://x.org!", NULL, 0),
              "placed after the last word, a span goes before the full stop the model added or ended on");
        CHECK(restores_to("Skura bought a new dog at www.dogs.cz.", "Skura hat bei einen neuen Hund gekauft.", pairs, 5,
                          "Skura hat bei einen neuen Hund gekauft www.dogs.cz.", NULL, 0),
              "... before the final full stop when the source had it so");
    }
    {   /* French puts a space before ! ? ; : so the last target word is the mark alone */
        static const int pairs[] = {0, 0, 0, 1};
        CHECK(restores_to("Visit https://x.org!", "Visitez !", pairs, 2, "Visitez https://x.org !", NULL, 0),
              "a span glued to the final mark goes before it when the translation writes the mark apart");
    }
    {   /* a first span's comma stays in the sentence, and on the span again in the translation */
        static const int pairs[] = {0, 0, 1, 1, 2, 2};
        CHECK(restores_to("https://x.org, the site, is down", ", le site, est en panne", pairs, 3,
                          "https://x.org, le site, est en panne", NULL, 0),
              "no space between a span and the comma that followed it");
        /* two spans first, the comma on the second: "https://y.org," is one word of the output, its second,
         * and the alignment pairs it once (the span and its comma are one source word too) */
        static const int want[] = {0, 0, 1, 1, 2, 2, 3, 3};
        CHECK(restores_to("https://x.org https://y.org, the site", ", le site", pairs, 3,
                          "https://x.org https://y.org, le site", want, 4),
              "two spans before a comma: only the last one takes it, and the word alignment stays inside the output");
    }
    CHECK(restores_to("end@dot.com.", "", NULL, 0, "end@dot.com.", NULL, 0),
          "nothing to translate: the sentence comes back as it was");
    {
        static const int pairs[] = {0, 0, 1, 1};
        CHECK(restores_to("  Visit   https://x.org  now ", "Besuchen  jetzt ", pairs, 2, "Besuchen https://x.org  jetzt ",
                          NULL, 0),
              "the translation's own spacing is kept");
    }
    /* --- words the model cannot spell (the caller's test) ---------------------- */
    {
        CHECK(find("He said \xD0\xB6\xD1\x83\xD0\xBA to me.", &p) == 0,
              "without a test, a word in another script is no span");
        dmt_passthrough_clear(&p);
        int calls = 0;
        CHECK(find_with("He said \xD0\xB6\xD1\x83\xD0\xBA to me.", &calls, &p) == 1 &&
                  p.n_spans == 1 && !strcmp(p.stripped, "He said to me.") && p.spans[0].prev == 1 &&
                  p.spans[0].len == 6,
              "with one, a word it calls unspellable is taken out (2-byte characters: past the quick look)",
              "'%s' %d", p.stripped, p.n_spans);
        CHECK(calls == 1, "the test is asked about words with a character outside ASCII only", "%d calls", calls);
        dmt_passthrough_clear(&p);
        calls = 0;
        CHECK(find_with("Caf\xC3\xA9 and tea, \xC2\xAB\xD0\xB6\xD1\x83\xD0\xBA\xC2\xBB.", &calls, &p) == 1 &&
                  !strcmp(p.stripped, "Caf\xC3\xA9 and tea,.") && calls == 2,
              "quotes around it go with it, its full stop stays; a word it does not call unspellable stays",
              "'%s' %d calls", p.stripped, calls);
        dmt_passthrough_clear(&p);
        calls = 0;
        CHECK(find_with("\xD0\xB6\xD1\x83\xD0\xBA \xD0\xB6\xD0\xB0.", &calls, &p) == 1 &&
                  p.n_spans == 2 && p.n_kept == 0 && !strcmp(p.stripped, ""),
              "a sentence of nothing else: nothing to translate (it comes back as it was)", "'%s'", p.stripped);
        dmt_passthrough_clear(&p);
    }
    /* --- letters alone -------------------------------------------------------- */
    {
        dmt_passthrough_spelling letters = {NULL, NULL, NULL, (1u << 26) - 1};
        letters.lone_letters &= ~(1u << 0 | 1u << ('i' - 'a')); /* English: "a" and "I" are words */
        const char *text = "Let x be a (n) and Plan B, I said to A.";
        CHECK(dmt_passthrough_find_with(text, strlen(text), &letters, &p) == 1 && p.n_spans == 3 &&
                  !strcmp(p.stripped, "Let be a and Plan, I said to A."),
              "a letter alone that is no word is a span, brackets and a comma after it too; words and "
              "a letter before a full stop (an initial, M. for Monsieur) are not",
              "'%s' %d", p.stripped, p.n_spans);
        dmt_passthrough_clear(&p);
        letters.lone_letters = 0;
        CHECK(dmt_passthrough_find_with(text, strlen(text), &letters, &p) == 0, "no letters given: no span");
        dmt_passthrough_clear(&p);
        letters.lone_letters = 1u << ('x' - 'a');
        text = "x-ray, xx, x1 and 3x";
        CHECK(dmt_passthrough_find_with(text, strlen(text), &letters, &p) == 0,
              "a letter inside a word or beside a digit is no letter alone");
        dmt_passthrough_clear(&p);
    }
    /* --- nothing to translate ------------------------------------------------- */
    {
        static const char *const verbatim[] = {"!!!", "-----", "  * * *  ", "\xE2\x80\x94", "\xE2\x80\xA6", "\xE2\x82\xAC",
                                               ":-) \xF0\x9F\x98\x80", "\xC2\xA7 \xC2\xB6"};
        int right = 0, n = (int)(sizeof verbatim / sizeof verbatim[0]);
        for (int i = 0; i < n; i++) {
            size_t len = strlen(verbatim[i]), out_len = 0;
            int r = dmt_passthrough_verbatim(verbatim[i], len, &p);
            char *back = r == 1 ? dmt_passthrough_restore(&p, "", 0, NULL, 0, &out_len, NULL, NULL) : NULL;
            if (r == 1 && p.n_spans == 0 && p.n_kept == 0 && p.stripped && !*p.stripped && back && out_len == len &&
                !memcmp(back, verbatim[i], len))
                right++;
            else
                printf("# '%s': %d\n", verbatim[i], r);
            free(back);
            dmt_passthrough_clear(&p);
        }
        CHECK(right == n, "punctuation, symbols and emoji alone: nothing to translate, given back as they are",
              "%d/%d", right, n);
        static const char *const content[] = {"", "   ", "Hi!", "3", "(1)", "\xE6\x97\xA5\xE6\x9C\xAC",
                                              "\xC3\xA9", "\xD0\x96!", "!\xFF!", "! \xC3"};
        right = 0, n = (int)(sizeof content / sizeof content[0]);
        for (int i = 0; i < n; i++) {
            int r = dmt_passthrough_verbatim(content[i], strlen(content[i]), &p);
            right += r == 0 && !p.original && !p.stripped;
            if (r) printf("# '%s': %d\n", content[i], r);
            dmt_passthrough_clear(&p);
        }
        CHECK(right == n, "not for a letter or digit of any script, blank text, or invalid UTF-8 (the tokenizer's to refuse)",
              "%d/%d", right, n);
    }
    /* --- ASCII characters the vocabulary lacks ------------------------------- */
    {
        int calls = 0;
        CHECK(find_missing_ascii("if x < 3 then", &calls, &p) == 1 && p.n_spans == 1 &&
                  !strcmp(p.stripped, "if x 3 then") && p.spans[0].prev == 1 && p.spans[0].len == 1 && calls == 0,
              "'<' alone is a span (an ASCII sentence, past the quick look; no unspellable call)", "'%s' %d calls",
              p.stripped, calls);
        dmt_passthrough_clear(&p);
        CHECK(find_missing_ascii("Use a<b, ~/bin and (<3).", &calls, &p) == 1 && p.n_spans == 3 &&
                  !strcmp(p.stripped, "Use, and."),
              "so is a word with one, brackets and all; its trailing punctuation stays", "'%s' %d", p.stripped,
              p.n_spans);
        dmt_passthrough_clear(&p);
        CHECK(find_missing_ascii("Use a>b and 3 > 2.", &calls, &p) == 0, "characters the vocabulary has are no span");
        dmt_passthrough_clear(&p);
        CHECK(find_with("if x < 3 then", &calls, &p) == 0, "without the table, '<' is no span");
        dmt_passthrough_clear(&p);
        const char *text = "if x < 3 then";
        CHECK(find_missing_ascii(text, &calls, &p) == 1 && p.spans[0].number_len == 1 &&
                  p.spans[0].number_start == 7,
              "'<' before a number goes with it");
        dmt_passthrough_clear(&p);
        CHECK(restores_to(text, "wenn 3 x dann", (const int[]){0, 0, 1, 2, 2, 1, 3, 3}, 4, "wenn < 3 x dann", NULL, 0) &&
                  restores_to(text, "wenn 3, dann", (const int[]){0, 0, 2, 1, 3, 2}, 3, "wenn < 3, dann", NULL, 0),
              "before the number's target word, wherever the word before it went, or if it was dropped");
        CHECK(restores_to("Kids < 12 go free", "Kinder reisen 12 Jahre frei", (const int[]){0, 0, 2, 1, 3, 4}, 3,
                          "Kinder reisen < 12 Jahre frei", NULL, 0) &&
                  restores_to("Kids < 12 go", "Kinder gehen 120 12", (const int[]){0, 0, 1, 1, 2, 1}, 3,
                              "Kinder gehen 120 < 12", NULL, 0) &&
                  restores_to("Kids < 12 go", "Kinder gehen zwölf", (const int[]){0, 0, 1, 2, 2, 1}, 3,
                              "Kinder gehen < zwölf", NULL, 0),
              "before the number's copy in the translation (its digits exactly), else its aligned word");
        CHECK(restores_to("Press < now", "Jetzt drücken", (const int[]){0, 1, 1, 0}, 2, "Jetzt drücken <", NULL, 0),
              "before a word that is no number: after the word aligned to the one before it");
        CHECK(find_missing_ascii("a <b 3 and <, 4 and x< 5", &calls, &p) == 1 && p.n_spans == 3 &&
                  !p.spans[0].number_len && !p.spans[1].number_len && !p.spans[2].number_len,
              "not for a span with letters, one with punctuation after it, or one glued to a word", "%d", p.n_spans);
        dmt_passthrough_clear(&p);
    }
    { /* a target word aligned to the words on both sides of the span: the span goes before it;
       * the word before's own punctuation stays before the span */
        const int pairs[] = {0, 0, 0, 1, 1, 1, 2, 2};
        CHECK(restores_to("Contact: a@b.cz, +420 777", "Kontakt: +420 777", pairs, 4, "Kontakt: a@b.cz +420 777", NULL, 0),
              "between the two words it sat between (\"Contact: +420 a@b.cz 777\" before)");
        const int two[] = {0, 0, 0, 1, 1, 2};
        CHECK(restores_to("Visit x@y.cz, then rest.", "Besuchen Sie, dann Ruhe.", two, 3,
                          "Besuchen Sie x@y.cz, dann Ruhe.", NULL, 0),
              "without punctuation before it, a glued comma still follows the span");
        const int press[] = {0, 0, 1, 1, 2, 5, 4, 3};
        CHECK(restores_to("Open https://x.org to close the window.", "\xC3\x96" "ffnen, um das Fenster zu schlie\xC3\x9F" "en.",
                          press, 4, "\xC3\x96" "ffnen https://x.org, um das Fenster zu schlie\xC3\x9F" "en.", NULL, 0) &&
                  restores_to("Send it to anna@b.cz and wait.", "Schick es an, und warte.", (const int[]){2, 2}, 1,
                              "Schick es an anna@b.cz, und warte.", NULL, 0),
              "after a word the source had no punctuation after: before the translation's own punctuation "
              "(\"\xC3\x96" "ffnen, https://x.org um ...\" before)");
    }
    { /* a letter before a colon is a label ("A: ..."), whatever the languages' one-letter words */
        dmt_passthrough p;
        int calls = 0;
        CHECK(find_with("A: My name is Tom.", &calls, &p) == 1 && p.n_spans == 1 && p.spans[0].len == 1 &&
                  !strcmp(p.stripped, ": My name is Tom."),
              "a letter before a colon: a label, kept out", "'%s'", p.stripped ? p.stripped : "");
        dmt_passthrough_clear(&p);
        CHECK(find_with("A cat: my pet.", &calls, &p) == 0 && find("A: My name.", &p) == 0,
              "not a word before a colon, and not without the model's spelling");
        CHECK(restores_to("Q: What is it?", ": Was ist das?", NULL, 0, "Q: Was ist das?", NULL, 0) &&
                  restores_to("Q: What is it?", "; Was ist das?", NULL, 0, "Q; Was ist das?", NULL, 0),
              "back with the colon the translation starts with, unspaced (\"Q : Wie\" before)");
    }
    { /* rules, blanks and rows of stars, for every model */
        dmt_passthrough p;
        CHECK(find("Name: __________ Date: __________", &p) == 1 && p.n_spans == 2 && !strcmp(p.stripped, "Name: Date:") &&
                  p.spans[0].len == 10 && p.spans[0].prev == 0 && p.spans[1].prev == 1,
              "blanks in a form: kept out, each after its label");
        dmt_passthrough_clear(&p);
        CHECK(find("Rating: ***** (five stars), see ~~~ and ===.", &p) == 1 && p.n_spans == 3 &&
                  !strcmp(p.stripped, "Rating: (five stars), see and.") && p.spans[2].len == 3 && p.spans[2].glued,
              "stars, tildes, equals signs; trailing punctuation stays in the sentence", "'%s'", p.stripped);
        dmt_passthrough_clear(&p);
        static const char *const none[] = {"He paused -- then left.", "Wait... what?!", "Really??? Yes!!!",
                                           "a---b and -*- and __init__", "Use --- carefully", "x ;;; y ,,, z :::"};
        int right = 0, n = (int)(sizeof none / sizeof none[0]);
        for (int i = 0; i < n; i++) {
            int r = find(none[i], &p);
            if ((r == 0) == (i != 4)) right++;
            else printf("# '%s': %d spans\n", none[i], p.n_spans);
            dmt_passthrough_clear(&p);
        }
        CHECK(right == n, "not two dashes, marks or punctuation in a row, a run inside a word, or mixed symbols; "
                          "three dashes alone are one", "%d/%d", right, n);
        const int pairs[] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
        CHECK(restores_to("I ____ to school every day.", "Ich gehe jeden Tag zur Schule.", pairs, 1,
                          "Ich ____ gehe jeden Tag zur Schule.", NULL, 0) &&
                  restores_to("----- Bye.", "Tschüss.", NULL, 0, "----- Tschüss.", NULL, 0),
              "back after the word aligned to the one before, or first");
    }
    return check_done();
}
