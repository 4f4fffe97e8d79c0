/* test_sentences.c — text/sentences.c: the sentence splitter and the chunks of a
 * sentence too long for the model.
 *
 * Each case lists the text and the sentences expected, joined by " | "; a second
 * pass checks that gaps are whitespace only, so that reassembly (gap, sentence,
 * gap, ...) gives back the text byte for byte. */
#include "tests/c/check.h"
#include "text/sentences.h"

#include <stdlib.h>
#include <string.h>

/* "s1 | s2 | s3" for the spans of text, in buf. Returns the count. */
static int split_joined(const char *text, char *buf, size_t cap) {
    size_t len = strlen(text);
    int n = dmt_sentences_split(text, len, NULL, 0);
    dmt_span *sp = calloc((size_t)n + 1, sizeof *sp);
    int m = dmt_sentences_split(text, len, sp, n);
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < n && m == n; i++)
        o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%s%.*s", i ? " | " : "", (int)sp[i].len, text + sp[i].start);
    free(sp);
    return n;
}

static void test_table(void) {
    static const struct { const char *what, *text, *want; } cases[] = {
        {"empty", "", ""},
        {"whitespace only", "  \n\t \n", ""},
        {"one sentence, no terminator", "Hello world", "Hello world"},
        {"one sentence with terminator", "Hello world.", "Hello world."},
        {"two sentences", "Hello world. How are you?", "Hello world. | How are you?"},
        {"three terminators", "Stop! Why? Because.", "Stop! | Why? | Because."},
        {"leading and trailing spaces", "  Ab cd.  Ef gh.  ", "Ab cd. | Ef gh."},
        {"lowercase after dot: no split", "It costs 5 dollars. and more", "It costs 5 dollars. and more"},
        {"decimal number", "Pi is 3.14 and e is 2.71. Both are numbers.", "Pi is 3.14 and e is 2.71. | Both are numbers."},
        {"number ends a sentence", "It was 2024. Then it was 2025.", "It was 2024. | Then it was 2025."},
        {"digit starts a sentence", "We left. 3 people stayed.", "We left. | 3 people stayed."},
        {"Dr. abbreviation", "Dr. Smith is here. He waits.", "Dr. Smith is here. | He waits."},
        {"Mr. and Mrs.", "Mr. and Mrs. Brown came. They sat.", "Mr. and Mrs. Brown came. | They sat."},
        {"e.g. and i.e.", "Fruit, e.g. Apples, i.e. Red ones. Good.", "Fruit, e.g. Apples, i.e. Red ones. | Good."},
        {"German z.B.", "Obst, z.B. Äpfel. Gut.", "Obst, z.B. Äpfel. | Gut."},
        {"initial", "J. R. R. Tolkien wrote it. Yes.", "J. R. R. Tolkien wrote it. | Yes."},
        {"acronym U.S.", "The U.S. Army left. Then peace.", "The U.S. Army left. | Then peace."},
        {"No. before a number", "See No. 5 here. No. It is not.", "See No. 5 here. | No. | It is not."},
        {"URL", "Visit www.example.com today. Thanks.", "Visit www.example.com today. | Thanks."},
        {"ellipsis dots", "Wait... What happened?", "Wait... | What happened?"},
        {"ellipsis dots, lowercase", "Wait... what happened?", "Wait... what happened?"},
        {"unicode ellipsis", "Hmm\xE2\x80\xA6 Fine.", "Hmm\xE2\x80\xA6 | Fine."},
        {"?! run", "Really?! Yes.", "Really?! | Yes."},
        {"closing quote", "He said \"Go.\" She went.", "He said \"Go.\" | She went."},
        {"closing bracket", "(It works.) Next one.", "(It works.) | Next one."},
        {"opening quote starts", "Done. \"Next,\" he said.", "Done. | \"Next,\" he said."},
        {"guillemets", "C'est fini. \xC2\xAB Oui \xC2\xBB, dit-il.", "C'est fini. | \xC2\xAB Oui \xC2\xBB, dit-il."},
        {"accented uppercase", "Il est l\xC3\xA0. \xC3\x89tienne arrive.", "Il est l\xC3\xA0. | \xC3\x89tienne arrive."},
        {"Czech uppercase \xC5\xA0", "Je to dobr\xC3\xA9. \xC5\xA0li jsme.", "Je to dobr\xC3\xA9. | \xC5\xA0li jsme."},
        {"Cyrillic", "\xD0\x94\xD0\xB0. \xD0\x9D\xD0\xB5\xD1\x82.", "\xD0\x94\xD0\xB0. | \xD0\x9D\xD0\xB5\xD1\x82."},
        {"Spanish \xC2\xBF", "Hola. \xC2\xBF" "Qu\xC3\xA9 tal?", "Hola. | \xC2\xBF" "Qu\xC3\xA9 tal?"},
        {"CJK full stop, no space", "\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82\xE5\x86\x8D\xE8\xA7\x81\xE3\x80\x82",
         "\xE4\xBD\xA0\xE5\xA5\xBD\xE3\x80\x82 | \xE5\x86\x8D\xE8\xA7\x81\xE3\x80\x82"},
        {"newline is a hard boundary", "first line\nsecond line", "first line | second line"},
        {"paragraphs", "One. Two.\n\nThree.", "One. | Two. | Three."},
        {"CRLF", "a b\r\nc d", "a b | c d"},
        {"dot then newline", "End.\nnext", "End. | next"},
        {"terminator at the very start", "...and so on. Fine.", "...and so on. | Fine."},
        {"lone terminator", "!", "!"},
        {"space before newline", "A.  \n  B.", "A. | B."},
        {"nbsp inside", "Ab\xC2\xA0" "cd. Ef gh.", "Ab\xC2\xA0" "cd. | Ef gh."},
        {"invalid UTF-8 bytes are letters", "x\xFF\xFE yes. Z.", "x\xFF\xFE yes. | Z."},
        {"truncated sequence at end", "ab. \xC3", "ab. | \xC3"},
        {"German ordinals", "Ich habe am 3. Oktober Geburtstag. Im 19. Jahrhundert, beim 1. FC K\xC3\xB6ln. Gut.",
         "Ich habe am 3. Oktober Geburtstag. | Im 19. Jahrhundert, beim 1. FC K\xC3\xB6ln. | Gut."},
        {"not ordinals", "Er war 12. Oktoberfest ist toll. Es war 2024. Mai kam. Wir 5. Mai", "Er war 12. | Oktoberfest ist toll. | Es war 2024. | Mai kam. | Wir 5. Mai"},
        {"spaced abbreviations", "Obst, z. B. \xC3\x84pfel. Um 400 n. Chr. endete es. Er ist u. a. Arzt. Gut.",
         "Obst, z. B. \xC3\x84pfel. | Um 400 n. Chr. endete es. | Er ist u. a. Arzt. | Gut."},
        {"German, French and Czech abbreviations",
         "Es kostet 5 Mio. Euro. Dr. med. Schmidt kommt. Siehe Abb. 3 in der Hauptstr. Berlin. "
         "J.-P. Sartre est n\xC3\xA9 av. J.-C. Tzv. Obr. Verze \xC4\x8D. 5 je tj. Dobr\xC3\xA1.",
         "Es kostet 5 Mio. Euro. | Dr. med. Schmidt kommt. | Siehe Abb. 3 in der Hauptstr. Berlin. | "
         "J.-P. Sartre est n\xC3\xA9 av. J.-C. Tzv. Obr. | Verze \xC4\x8D. 5 je tj. Dobr\xC3\xA1."},
        {"list markers stay in the gap", "- Check mail.\n* Buy milk\n  + Call Tom\n> Quoted.\n## Heading",
         "Check mail. | Buy milk | Call Tom | Quoted. | Heading"},
        {"typographic bullets", "\xE2\x80\xA2 Buy milk\n\xE2\x80\x94 Come here, he said.\n\xE2\x98\x90 Todo",
         "Buy milk | Come here, he said. | Todo"},
        {"enumerators", "2) Click it.\n(3) Save it.\n[4] Ref\na) One\n(iv) Four\n1.2) Sub",
         "Click it. | Save it. | Ref | One | Four | Sub"},
        {"markers in a row", "> > - Nested", "Nested"},
        {"not markers", "-5 degrees\n1.5 million here\n(see) this\nab) no\n#tag here\nA. Smith came.\n- \nx - y",
         "-5 degrees | 1.5 million here | (see) this | ab) no | #tag here | A. Smith came. | - | x - y"},
        {"only at a line's start", "Hi. - Bye.\nGo (2) now", "Hi. | - Bye. | Go (2) now"},
    };
    char got[1024], what[160];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        split_joined(cases[i].text, got, sizeof got);
        snprintf(what, sizeof what, "split: %s", cases[i].what);
        CHECK(!strcmp(got, cases[i].want), what, "got [%s], want [%s]", got, cases[i].want);
    }
}

/* Spans are in order, non-empty, trimmed, and everything between them is
 * whitespace (in texts without list markers): reassembling gaps + sentences gives
 * the text back. */
static void test_gaps_are_whitespace(void) {
    const char *texts[] = {
        "  Hello there.  How are you?\n\n  Fine, thanks!  \n",
        "Line one\r\nLine two. And three.\r\n",
        "\t\"Quoted.\" Next. (Bracket.) Last...",
        "x",
    };
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        const char *s = texts[t];
        size_t len = strlen(s), pos = 0;
        dmt_span sp[32];
        int n = dmt_sentences_split(s, len, sp, 32), ok = n > 0 && n <= 32;
        for (int i = 0; ok && i < n; i++) {
            if (sp[i].start < pos || sp[i].len == 0 || sp[i].start + sp[i].len > len) ok = 0;
            for (size_t k = pos; ok && k < sp[i].start; k++)
                if (!strchr(" \t\r\n", s[k])) ok = 0;
            if (ok && strchr(" \t\r\n", s[sp[i].start])) ok = 0;
            if (ok && strchr(" \t\r\n", s[sp[i].start + sp[i].len - 1])) ok = 0;
            pos = sp[i].start + sp[i].len;
        }
        for (size_t k = pos; ok && k < len; k++)
            if (!strchr(" \t\r\n", s[k])) ok = 0;
        CHECK(ok, "gaps between sentences are whitespace only", "text %zu", t);
    }
}

/* The gap's list markers paired with their copies in a translation. */
static void test_gap_pairs(void) {
    const char *text = "Hi.\n- Check mail.", *out = "Hallo.\n- Post lesen.";
    int pairs[8], n = dmt_gap_pairs(text, strlen(text), 3, 6, out, strlen(out), 6, pairs);
    CHECK(n == 1 && pairs[0] == 1 && pairs[1] == 1, "a list marker is paired with its copy", "%d: %d-%d", n, pairs[0],
          pairs[1]);
    n = dmt_gap_pairs("A. > > B", 8, 2, 7, "X. > > Y", 8, 2, pairs);
    CHECK(n == 2 && pairs[0] == 1 && pairs[1] == 1 && pairs[2] == 2 && pairs[3] == 2, "two markers, two pairs", "%d", n);
    CHECK(dmt_gap_pairs("A.  B", 5, 2, 4, "X.  Y", 5, 2, NULL) == 0, "a gap of spaces has none");
    CHECK(dmt_gap_pairs("A. \xC2\xA0" "B", 6, 2, 5, "X. \xC2\xA0" "Y", 6, 2, NULL) == 0,
          "a no-break space glued to the sentence's first word is that word's, not a marker (its pair was listed twice)");
}

static void test_capacity(void) {
    const char *s = "Ab. Cd. Ef. Gh.";
    dmt_span sp[2];
    memset(sp, 0, sizeof sp);
    int n = dmt_sentences_split(s, strlen(s), sp, 2);
    CHECK(n == 4, "returns the full count when cap is smaller", "n=%d", n);
    CHECK(sp[1].start == 4 && sp[1].len == 3, "fills only cap spans", "start %zu len %zu", sp[1].start, sp[1].len);
    CHECK(dmt_sentences_split(NULL, 0, NULL, 0) == 0, "NULL text has no sentences");
}

/* A long pseudo-random text: no crash, spans in bounds (run under ASan). */
static void test_random_bytes(void) {
    unsigned x = 12345;
    char buf[4096];
    int ok = 1;
    for (int round = 0; round < 200 && ok; round++) {
        size_t len = 1 + (size_t)(round * 17 % 4000);
        static const char alphabet[] = "aB. !?\n\r\t\"')(3\xC3\xA9\xE2\x80\xA6\xE3\x80\x82\xFF";
        for (size_t i = 0; i < len; i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = alphabet[(x >> 16) % (sizeof alphabet - 1)];
        }
        int n = dmt_sentences_split(buf, len, NULL, 0);
        dmt_span *sp = malloc(sizeof *sp * (size_t)(n + 1));
        int m = dmt_sentences_split(buf, len, sp, n);
        size_t pos = 0;
        if (m != n) ok = 0;
        for (int i = 0; ok && i < n; i++) {
            if (sp[i].start < pos || sp[i].len == 0 || sp[i].start + sp[i].len > len) ok = 0;
            pos = sp[i].start + sp[i].len;
        }
        free(sp);
    }
    CHECK(ok, "random byte soup: spans ordered, non-empty, in bounds");
}

/* ---- dmt_sentence_chunks ---- */

/* fits: at most *(size_t *)arg bytes */
static int fits_bytes(void *arg, const char *text, size_t len) {
    (void)text;
    return len <= *(size_t *)arg;
}

/* fits: at most *(int *)arg words (runs of non-spaces) */
static int fits_words(void *arg, const char *text, size_t len) {
    int words = 0, in = 0;
    for (size_t i = 0; i < len; i++) {
        int sp = text[i] == ' ';
        if (!sp && !in) words++;
        in = !sp;
    }
    return words <= *(int *)arg;
}

/* "c1 | c2 | c3" for the chunks, in buf; the count (-1 when refused). */
static int chunks_joined(const char *text, int (*fits)(void *, const char *, size_t), void *arg, char *buf,
                         size_t cap) {
    size_t len = strlen(text);
    int n = dmt_sentence_chunks(text, len, fits, arg, NULL, 0);
    buf[0] = 0;
    if (n <= 0) return n;
    dmt_span *sp = calloc((size_t)n, sizeof *sp);
    int m = dmt_sentence_chunks(text, len, fits, arg, sp, n);
    size_t o = 0;
    for (int i = 0; i < n && m == n; i++)
        o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "%s%.*s", i ? " | " : "", (int)sp[i].len,
                              text + sp[i].start);
    free(sp);
    return n;
}

static void test_chunks_table(void) {
    char got[1024];
    int words = 6;
    static const struct { const char *what, *text, *want; } cases[] = {
        {"a sentence that fits is one chunk", "  A dog runs on the beach.  ", "A dog runs on the beach."},
        {"cut after the comma nearest the limit",
         "When the sun rose over the hills, the farmers went out, and the dogs followed them home.",
         "When the sun rose over the | hills, the farmers went out, | and the dogs followed them home."},
        {"a semicolon and a colon end clauses", "One two three four five; six seven: eight nine ten eleven twelve",
         "One two three four five; | six seven: | eight nine ten eleven twelve"},
        {"no punctuation: whitespace nearest the limit", "a b c d e f g h i j k l m", "a b c d e f | g h i j k l | m"},
        {"a comma too early is not worth a chunk", "Oh, a bb ccc dddd eeee f g h i j", "Oh, a bb ccc dddd eeee | f g h i j"},
        {"whitespace only: no chunks", "   ", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        chunks_joined(cases[i].text, fits_words, &words, got, sizeof got);
        CHECK(!strcmp(got, cases[i].want), cases[i].what, "got \"%s\", want \"%s\"", got, cases[i].want);
    }
    size_t bytes = 10;
    chunks_joined("abcdefghijklmnopqrstuvwxy", fits_bytes, &bytes, got, sizeof got);
    CHECK(!strcmp(got, "abcdefghij | klmnopqrst | uvwxy"), "no whitespace: a hard cut at the limit", "got %s", got);
    bytes = 7; /* 3 bytes a character: 2 fit */
    chunks_joined("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae", fits_bytes, &bytes, got, sizeof got);
    CHECK(!strcmp(got, "\xe6\x97\xa5\xe6\x9c\xac | \xe8\xaa\x9e\xe3\x81\xae"),
          "a hard cut never splits a UTF-8 character", "got %s", got);
    bytes = 2;
    CHECK(chunks_joined("\xe6\x97\xa5", fits_bytes, &bytes, got, sizeof got) == -1,
          "a character that does not fit on its own: -1");
}

/* Random sentences of words, commas and multibyte letters under random limits:
 * every chunk fits, none is empty or starts/ends with whitespace, they are in order,
 * the gaps between them are whitespace (or nothing, at a hard cut), and together
 * they hold every non-space byte of the text. */
static void test_chunks_random(void) {
    static const char *const parts[] = {"a", "bb", "ccc", "dddd", ",", ";", " ", " ", " ", "\xc3\xa9", "\xe6\x97\xa5",
                                        "  ", "\t", ":"};
    unsigned seed = 12345;
    int bad = 0, cases = 0;
    char text[600], why[200] = "";
    for (int t = 0; t < 3000 && !bad; t++) {
        size_t o = 0;
        int n_parts = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 120;
        for (int k = 0; k < n_parts; k++) {
            const char *p = parts[((seed = seed * 1103515245u + 12345u) >> 16) % (sizeof parts / sizeof *parts)];
            size_t l = strlen(p);
            if (o + l >= sizeof text) break;
            memcpy(text + o, p, l);
            o += l;
        }
        text[o] = 0;
        size_t limit = 3 + ((seed = seed * 1103515245u + 12345u) >> 16) % 40;
        int n = dmt_sentence_chunks(text, o, fits_bytes, &limit, NULL, 0);
        if (n < 0) continue;
        cases++;
        dmt_span sp[600];
        if (dmt_sentence_chunks(text, o, fits_bytes, &limit, sp, 600) != n) { bad = 1; snprintf(why, sizeof why, "count"); break; }
        size_t prev_end = 0, covered = 0, nonspace = 0;
        for (size_t i = 0; i < o; i++) nonspace += text[i] != ' ' && text[i] != '\t';
        for (int i = 0; i < n && !bad; i++) {
            const char *c = text + sp[i].start;
            if (sp[i].len == 0 || sp[i].len > limit || c[0] == ' ' || c[0] == '\t' || c[sp[i].len - 1] == ' ' ||
                c[sp[i].len - 1] == '\t' || sp[i].start < prev_end)
                bad = 1;
            for (size_t k = prev_end; k < sp[i].start; k++)
                if (text[k] != ' ' && text[k] != '\t') bad = 1;
            for (size_t k = 0; k < sp[i].len; k++) covered += c[k] != ' ' && c[k] != '\t';
            if (bad) snprintf(why, sizeof why, "text \"%.80s\" limit %zu chunk %d", text, limit, i);
            prev_end = sp[i].start + sp[i].len;
        }
        if (!bad && covered != nonspace) {
            bad = 1;
            snprintf(why, sizeof why, "text \"%.80s\": %zu of %zu non-space bytes in chunks", text, covered, nonspace);
        }
    }
    CHECK(!bad && cases > 2000, "random sentences: chunks fit, are trimmed, in order, and lose no text", "%s (%d cases)",
          why, cases);
}

int main(void) {
    test_chunks_table();
    test_chunks_random();
    test_table();
    test_gaps_are_whitespace();
    test_gap_pairs();
    test_capacity();
    test_random_bytes();
    return check_done();
}
