/* test_tokenizer.c — tokenizer/ against the small SentencePiece fixtures made by
 * tests/fixtures/tokenizer/make.sh (run from the repository root, or set
 * DEEPMT_FIXTURES to the fixtures folder). */
#include "tests/c/check.h"
#include "tokenizer/tokenizer.h"
#include "base/utf8.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IDS 1024

static char fixture_dir[512], vocab_dir[512];

static void fixture_paths(void) {
    const char *root = getenv("DEEPMT_FIXTURES");
    if (!root) root = "tests/fixtures";
    snprintf(fixture_dir, sizeof fixture_dir, "%s/tokenizer", root);
    snprintf(vocab_dir, sizeof vocab_dir, "%s/tokenizer-vocab", root);
}

/* ---- dmt_utf8_validate ---- */

static void test_utf8_table(void) {
    static const struct { const char *what, *s; size_t len; int valid; size_t off; } cases[] = {
        {"empty", "", 0, 1, 0},
        {"ascii", "hello", 5, 1, 0},
        {"NUL is valid UTF-8", "a\0b", 3, 1, 0},
        {"2-byte é", "caf\xC3\xA9", 5, 1, 0},
        {"3-byte €", "\xE2\x82\xAC", 3, 1, 0},
        {"smallest 3-byte U+0800", "\xE0\xA0\x80", 3, 1, 0},
        {"U+D7FF below surrogates", "\xED\x9F\xBF", 3, 1, 0},
        {"U+E000 above surrogates", "\xEE\x80\x80", 3, 1, 0},
        {"U+FFFF", "\xEF\xBF\xBF", 3, 1, 0},
        {"smallest 4-byte U+10000", "\xF0\x90\x80\x80", 4, 1, 0},
        {"4-byte emoji", "x\xF0\x9F\x98\x80y", 6, 1, 0},
        {"largest U+10FFFF", "\xF4\x8F\xBF\xBF", 4, 1, 0},
        {"lone continuation byte", "ab\x80", 3, 0, 2},
        {"continuation after a full char", "\xC3\xA9\xA9", 3, 0, 2},
        {"truncated 2-byte at end", "abc\xC3", 4, 0, 3},
        {"truncated 3-byte at end", "\xE2\x82", 2, 0, 0},
        {"truncated 4-byte then ascii", "a\xF0\x9F\x98z", 5, 0, 1},
        {"overlong 2-byte C0 AF", "a\xC0\xAF", 3, 0, 1},
        {"overlong 2-byte C1 BF", "\xC1\xBF", 2, 0, 0},
        {"overlong 3-byte E0 80 AF", "\xE0\x80\xAF", 3, 0, 0},
        {"overlong 3-byte E0 9F BF", "\xE0\x9F\xBF", 3, 0, 0},
        {"overlong 4-byte F0 8F BF BF", "\xF0\x8F\xBF\xBF", 4, 0, 0},
        {"surrogate U+D800", "ab\xED\xA0\x80", 5, 0, 2},
        {"surrogate U+DFFF", "\xED\xBF\xBF", 3, 0, 0},
        {"U+110000", "\xF4\x90\x80\x80", 4, 0, 0},
        {"F5 lead byte", "\xF5\x80\x80\x80", 4, 0, 0},
        {"FF byte", "ok\xFF", 3, 0, 2},
        {"bad second continuation", "\xE2\x28\xA1", 3, 0, 0},
        {"bad third continuation", "\xF0\x90\x28\xBC", 4, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t off = 12345;
        int v = dmt_utf8_validate(cases[i].s, cases[i].len, &off);
        char what[128];
        snprintf(what, sizeof what, "utf8_validate: %s", cases[i].what);
        if (cases[i].valid)
            CHECK(v == 1, what, "got %d", v);
        else
            CHECK(v == 0 && off == cases[i].off, what, "got %d, offset %zu (want %zu)",
                  v, off, cases[i].off);
    }
    CHECK(dmt_utf8_validate(NULL, 0, NULL) == 1, "utf8_validate: NULL with length 0");
    CHECK(dmt_utf8_validate("\x80", 1, NULL) == 0, "utf8_validate: NULL bad_offset is allowed");
}

/* ---- helpers ---- */

static int encode(const dmt_tokenizer *tok, const char *text, int32_t *ids, char *err) {
    return dmt_tokenizer_encode(tok, text, strlen(text), ids, MAX_IDS, err, 256);
}

/* Encodes then decodes text; returns the malloc'd result or NULL. */
static char *round_trip(const dmt_tokenizer *tok, const char *text, int *n_ids, char *err) {
    int32_t ids[MAX_IDS];
    char *out = NULL;
    *n_ids = encode(tok, text, ids, err);
    if (*n_ids < 0) return NULL;
    if (dmt_tokenizer_decode(tok, ids, *n_ids, &out, err, 256) < 0) return NULL;
    return out;
}

/* ---- load ---- */

static void test_load_errors(void) {
    char err[256] = "";
    CHECK(!dmt_tokenizer_load("tests/fixtures/no-such-model", 400, 3, err, sizeof err)
          && strstr(err, "tests/fixtures/no-such-model/sentencepiece.model"),
          "load: missing model dir is an error naming the path", "err: %s", err);
    err[0] = '\0';
    CHECK(!dmt_tokenizer_load(fixture_dir, 401, 3, err, sizeof err)
          && strstr(err, "400") && strstr(err, "401"),
          "load: vocab_size mismatch names both numbers", "err: %s", err);
    err[0] = '\0';
    CHECK(!dmt_tokenizer_load(fixture_dir, 400, 0, err, sizeof err) && strstr(err, "unk"),
          "load: unk_id mismatch is an error", "err: %s", err);
    err[0] = '\0';
    CHECK(!dmt_tokenizer_load(vocab_dir, 400, 3, err, sizeof err)
          && strstr(err, "vocab.txt") && strstr(err, "399") && strstr(err, "400"),
          "load: vocab.txt line count must equal vocab_size", "err: %s", err);
    CHECK(!dmt_tokenizer_load("tests/fixtures/no-such-model", 400, 3, NULL, 0),
          "load: a NULL err buffer is allowed");
    char tiny[8];
    CHECK(!dmt_tokenizer_load("tests/fixtures/no-such-model", 400, 3, tiny, sizeof tiny)
          && strlen(tiny) == sizeof tiny - 1, "load: message is cut to the buffer");
}

/* Malformed model folders, made in a temporary directory. */
static void write_file(const char *dir, const char *name, const char *data) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) { fputs(data, f); fclose(f); }
}

static void test_load_bad_files(void) {
    char dir[] = "/tmp/deepmt-tok-XXXXXX", model[PATH_MAX], path[PATH_MAX], err[256] = "";
    if (!mkdtemp(dir) || !realpath(fixture_dir, model)) { SKIP("no temporary directory"); return; }
    strncat(model, "/sentencepiece.model", sizeof model - strlen(model) - 1);
    snprintf(path, sizeof path, "%s/sentencepiece.model", dir);

    write_file(dir, "sentencepiece.model", "not a model");
    CHECK(!dmt_tokenizer_load(dir, 400, 3, err, sizeof err) && strstr(err, path),
          "load: a corrupt sentencepiece.model is an error naming it", "err: %s", err);
    unlink(path);
    CHECK(symlink(model, path) == 0, "load: (set up a model link)");

    write_file(dir, "vocab.txt", "<s>\n<pad>\n</s>\n<unk>\n<pad>\n");
    err[0] = '\0';
    CHECK(!dmt_tokenizer_load(dir, 5, 3, err, sizeof err) && strstr(err, "line 5") && strstr(err, "repeats"),
          "load: a repeated vocab.txt piece is an error", "err: %s", err);
    write_file(dir, "vocab.txt", "<s>\n\n</s>\n<unk>\n");
    err[0] = '\0';
    CHECK(!dmt_tokenizer_load(dir, 4, 3, err, sizeof err) && strstr(err, "line 2") && strstr(err, "empty"),
          "load: an empty vocab.txt line is an error", "err: %s", err);

    /* CRLF and no final newline are fine; pieces it does not list encode as unk. */
    write_file(dir, "vocab.txt", "<s>\r\n<pad>\r\n</s>\r\n<unk>");
    dmt_tokenizer *tok = dmt_tokenizer_load(dir, 4, 3, err, sizeof err);
    int32_t ids[8];
    int n = tok ? dmt_tokenizer_encode(tok, "ab", 2, ids, 8, err, sizeof err) : -1, unks = 0;
    for (int i = 0; i < n; i++) unks += ids[i] == 3;
    CHECK(tok && !strcmp(dmt_tokenizer_id_to_piece(tok, 3), "<unk>") && n > 0 && unks == n,
          "load: CRLF vocab.txt without a final newline; unlisted pieces are unk", "n=%d err: %s", n, err);
    CHECK(tok && dmt_tokenizer_spells(tok, "ab", 2) == 0, "spells: text that encodes as unk is not spelt");
    dmt_tokenizer_free(tok);

    unlink(path);
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    unlink(path);
    rmdir(dir);
}

/* ---- encode / decode ---- */

static const char *const texts[] = {
    "Hello world, the teacher reads a long letter.",
    "Der alte Mann möchte heißen Kaffee über die Straße.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy; čeřit řeku.",
    "Ma sœur écrit une lettre à Noël, déjà vu.",
    "机器翻译很有趣。東京",
    "Emoji 😀 and 🚀 fall back to bytes.",
    "Mixed: café 東京 Überraschung 🍕 čtvrtek 42!",
};
#define NTEXTS (int)(sizeof texts / sizeof texts[0])

static void test_round_trips(const dmt_tokenizer *tok) {
    char err[256] = "", what[160];
    for (int i = 0; i < NTEXTS; i++) {
        int n;
        char *out = round_trip(tok, texts[i], &n, err);
        snprintf(what, sizeof what, "round trip: %.60s", texts[i]);
        CHECK(out && n > 0 && strcmp(out, texts[i]) == 0, what, "n=%d got \"%s\" err: %s",
              n, out ? out : "(null)", err);
        free(out);
    }
    /* SentencePiece normalises: extra whitespace collapses, NFKC folds. */
    static const char *const norm[][2] = {
        {"  two   spaces\there  ", "two spaces here"},
        {"\xEF\xAC\x81ne \xEF\xBC\xA1\xEF\xBC\xA2", "fine AB"},   /* "ﬁne ＡＢ" */
    };
    for (size_t i = 0; i < sizeof norm / sizeof norm[0]; i++) {
        int n;
        char *out = round_trip(tok, norm[i][0], &n, err);
        snprintf(what, sizeof what, "round trip normalises to \"%s\"", norm[i][1]);
        CHECK(out && strcmp(out, norm[i][1]) == 0, what, "got \"%s\" err: %s",
              out ? out : "(null)", err);
        free(out);
    }

    int32_t ids[MAX_IDS];
    int n = encode(tok, "😀", ids, err), bytes = 0;
    for (int i = 0; i < n; i++) bytes += strncmp(dmt_tokenizer_id_to_piece(tok, ids[i]), "<0x", 3) == 0;
    CHECK(n >= 4 && bytes == 4, "encode: an emoji becomes 4 byte pieces", "n=%d bytes=%d", n, bytes);

    static const char *const blank[] = {"", " ", "   ", "\t\n  \r\n", "\xE3\x80\x80"};  /* U+3000 */
    for (size_t i = 0; i < sizeof blank / sizeof blank[0]; i++) {
        snprintf(what, sizeof what, "encode: empty / whitespace-only #%zu gives 0 ids", i);
        n = encode(tok, blank[i], ids, err);
        CHECK(n == 0, what, "n=%d err: %s", n, err);
    }
    CHECK(dmt_tokenizer_encode(tok, NULL, 0, NULL, 0, err, sizeof err) == 0,
          "encode: NULL text of length 0 with no id buffer gives 0");

    char *out = NULL;
    CHECK(dmt_tokenizer_decode(tok, ids, 0, &out, err, sizeof err) == 0 && out && !*out,
          "decode: no ids gives an empty string");
    free(out);
}

static void test_encode_errors(const dmt_tokenizer *tok) {
    static const struct { const char *what, *s; size_t len; size_t off; } bad[] = {
        {"lone continuation byte", "ab\x80 cd", 6, 2},
        {"truncated sequence", "abc \xC3", 5, 4},
        {"overlong", "x\xC0\xAF", 3, 1},
        {"surrogate", "hi \xED\xA0\x80", 6, 3},
    };
    char err[256], want[64], what[128];
    int32_t ids[MAX_IDS];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int n = dmt_tokenizer_encode(tok, bad[i].s, bad[i].len, ids, MAX_IDS, err, sizeof err);
        snprintf(want, sizeof want, "byte offset %zu", bad[i].off);
        snprintf(what, sizeof what, "encode: invalid UTF-8 (%s) is an error with its offset", bad[i].what);
        CHECK(n == -1 && strstr(err, "UTF-8") && strstr(err, want), what, "n=%d err: %s", n, err);
    }
    err[0] = '\0';
    int n = dmt_tokenizer_encode(tok, "ab\0cd", 5, ids, MAX_IDS, err, sizeof err);
    CHECK(n == -1 && strstr(err, "NUL"), "encode: embedded NUL is an error", "n=%d err: %s", n, err);

    const char *text = "The teacher reads a long letter every morning in the city.";
    int full = encode(tok, text, ids, err);
    err[0] = '\0';
    n = dmt_tokenizer_encode(tok, text, strlen(text), ids, 5, err, sizeof err);
    char expect[96];
    snprintf(expect, sizeof expect, "input too long: %d pieces, limit 5", full);
    CHECK(full > 5 && n == -1 && strcmp(err, expect) == 0, "encode: over-long input is an error",
          "full=%d n=%d err: %s", full, n, err);
    CHECK(dmt_tokenizer_encode(tok, text, strlen(text), ids, full, err, sizeof err) == full,
          "encode: exactly max_ids pieces fits");
}

static void test_pieces(const dmt_tokenizer *tok) {
    int v = dmt_tokenizer_vocab_size(tok), bad = 0;
    CHECK(v == 400, "vocab_size is 400", "got %d", v);
    for (int id = 0; id < v; id++) {
        const char *p = dmt_tokenizer_id_to_piece(tok, id);
        if (!p || dmt_tokenizer_piece_to_id(tok, p) != id) bad++;
    }
    CHECK(bad == 0, "piece_to_id(id_to_piece(id)) == id for every id", "%d bad", bad);
    CHECK(!dmt_tokenizer_id_to_piece(tok, -1) && !dmt_tokenizer_id_to_piece(tok, v),
          "id_to_piece out of range is NULL");
    CHECK(dmt_tokenizer_piece_to_id(tok, "no-such-piece") == -1, "piece_to_id of an unknown piece is -1");
    CHECK(!strcmp(dmt_tokenizer_id_to_piece(tok, 0), "<s>") && !strcmp(dmt_tokenizer_id_to_piece(tok, 1), "<pad>")
          && !strcmp(dmt_tokenizer_id_to_piece(tok, 2), "</s>") && !strcmp(dmt_tokenizer_id_to_piece(tok, 3), "<unk>"),
          "special pieces at 0..3");
    CHECK(dmt_tokenizer_piece_to_id(tok, "<0xF0>") >= 0, "byte pieces are in the vocabulary");

    char long_word[200];
    memset(long_word, 'e', sizeof long_word);
    CHECK(dmt_tokenizer_spells(tok, "teacher", 7) == 1 && dmt_tokenizer_spells(tok, long_word, sizeof long_word) == 1 &&
              dmt_tokenizer_spells(tok, "", 0) == 1,
          "spells: words of the vocabulary's pieces, however long, and nothing");
    CHECK(dmt_tokenizer_spells(tok, "\xF0\x9F\x98\x80", 4) == 0 && dmt_tokenizer_spells(tok, "ok\xF0\x9F\x98\x80", 6) == 0,
          "spells: an emoji (byte-fallback pieces) is not spelt, alone or in a word");
    CHECK(dmt_tokenizer_spells(tok, "a\xC3", 2) == -1 && dmt_tokenizer_spells(tok, "a\0b", 3) == -1,
          "spells: invalid UTF-8 and a NUL byte are refused");

    static const char *const codes[] = {"en", "de", "fr", "cs"};
    for (int i = 0; i < 4; i++) {
        char what[64], piece[16];
        snprintf(what, sizeof what, "language_id(\"%s\") is id %d", codes[i], 4 + i);
        snprintf(piece, sizeof piece, "__%s__", codes[i]);
        int id = dmt_tokenizer_language_id(tok, codes[i]);
        CHECK(id == 4 + i && !strcmp(dmt_tokenizer_id_to_piece(tok, id), piece), what, "got %d", id);
    }
    CHECK(dmt_tokenizer_language_id(tok, "xx") == -1 && dmt_tokenizer_language_id(tok, "") == -1,
          "language_id of an unknown code is -1");

    /* The language token in the text is one piece (user-defined symbol). */
    int32_t ids[MAX_IDS];
    char err[256];
    int n = encode(tok, "__de__ Hallo", ids, err), found = 0;
    for (int i = 0; i < n; i++) found += ids[i] == dmt_tokenizer_language_id(tok, "de");
    CHECK(found == 1, "encode: __de__ in the text is the one language piece", "n=%d found=%d", n, found);
}

static void test_decode(const dmt_tokenizer *tok) {
    char err[256] = "", *out = NULL;
    int32_t ids[MAX_IDS + 4];
    const char *text = "Der Lehrer liest das neue Buch.";
    int n = encode(tok, text, ids + 2, err);
    ids[0] = 0;                                         /* <s> */
    ids[1] = dmt_tokenizer_language_id(tok, "de");
    ids[n + 2] = 2;                                     /* </s> */
    ids[n + 3] = 1;                                     /* <pad> */
    int len = dmt_tokenizer_decode(tok, ids, n + 4, &out, err, sizeof err);
    CHECK(out && len == (int)strlen(text) && !strcmp(out, text),
          "decode: skips <s>, </s>, <pad> and language tokens", "got \"%s\" (%d) err: %s",
          out ? out : "(null)", len, err);
    free(out);

    int32_t bad[] = {5, 400};
    out = (char *)1;
    err[0] = '\0';
    len = dmt_tokenizer_decode(tok, bad, 2, &out, err, sizeof err);
    CHECK(len == -1 && !out && strstr(err, "400"), "decode: id out of range is an error", "err: %s", err);
    bad[1] = -1;
    CHECK(dmt_tokenizer_decode(tok, bad, 2, &out, err, sizeof err) == -1, "decode: negative id is an error");
}

/* ---- vocab.txt ---- */

static void test_vocab_mapping(const dmt_tokenizer *plain) {
    char err[256] = "";
    dmt_tokenizer *tok = dmt_tokenizer_load(vocab_dir, 399, 3, err, sizeof err);
    CHECK(tok != NULL, "vocab.txt: loads", "err: %s", err);
    if (!tok) return;
    CHECK(dmt_tokenizer_vocab_size(tok) == 399, "vocab.txt: vocab_size 399");
    CHECK(!strcmp(dmt_tokenizer_id_to_piece(tok, 0), "<s>") && !strcmp(dmt_tokenizer_id_to_piece(tok, 3), "<unk>")
          && !strcmp(dmt_tokenizer_id_to_piece(tok, 398), "madeupword0000")
          && dmt_tokenizer_piece_to_id(tok, "madeupword0000") == 398,
          "vocab.txt: id i is line i's piece");
    CHECK(dmt_tokenizer_piece_to_id(tok, "<0xF0>") == -1, "vocab.txt: an unlisted piece has no id");

    int moved = 0, langs_ok = 1;
    for (int id = 4; id < 398; id++)
        moved += dmt_tokenizer_piece_to_id(plain, dmt_tokenizer_id_to_piece(tok, id)) != id;
    CHECK(moved > 300, "vocab.txt: the fixture really reorders ids", "only %d moved", moved);
    static const char *const codes[] = {"en", "de", "fr", "cs"};
    for (int i = 0; i < 4; i++) {
        int id = dmt_tokenizer_language_id(tok, codes[i]);
        char piece[16];
        snprintf(piece, sizeof piece, "__%s__", codes[i]);
        langs_ok &= id > 7 && !strcmp(dmt_tokenizer_id_to_piece(tok, id), piece);
    }
    CHECK(langs_ok, "vocab.txt: language ids follow vocab.txt");

    /* Same pieces as the plain tokenizer, position by position; <0xF0> becomes unk. */
    int bad = 0, unks = 0;
    for (int t = 0; t < NTEXTS; t++) {
        int32_t a[MAX_IDS], b[MAX_IDS];
        int na = encode(plain, texts[t], a, err), nb = encode(tok, texts[t], b, err);
        if (na != nb || na <= 0) { bad++; continue; }
        for (int i = 0; i < na; i++) {
            const char *pa = dmt_tokenizer_id_to_piece(plain, a[i]);
            if (!strcmp(pa, "<0xF0>") || !strcmp(pa, "<0xFF>")) {
                unks++;
                bad += b[i] != 3;
            } else {
                bad += strcmp(pa, dmt_tokenizer_id_to_piece(tok, b[i])) != 0;
            }
        }
        if (!strstr(texts[t], "\xF0")) {     /* no emoji: decodes back exactly */
            char *out = NULL;
            dmt_tokenizer_decode(tok, b, nb, &out, err, sizeof err);
            bad += !out || strcmp(out, texts[t]) != 0;
            free(out);
        }
    }
    CHECK(bad == 0 && unks > 0, "vocab.txt: encode maps pieces to model ids, unlisted ones to unk",
          "bad=%d unks=%d", bad, unks);

    char *out = NULL;
    int32_t ids[] = {0, dmt_tokenizer_language_id(tok, "fr"), 398, 2, 1};
    CHECK(dmt_tokenizer_decode(tok, ids, 5, &out, err, sizeof err) >= 0 && out && strstr(out, "\xE2\x81\x87"),
          "vocab.txt: decode skips specials; a piece unknown to SentencePiece decodes as unk",
          "got \"%s\"", out ? out : "(null)");
    free(out);
    dmt_tokenizer_free(tok);
}

/* ---- threads ---- */

struct worker { const dmt_tokenizer *tok; int32_t (*want)[MAX_IDS]; int *want_n; int mismatches; };

static void *work(void *arg) {
    struct worker *w = arg;
    char err[256];
    for (int round = 0; round < 200; round++) {
        for (int t = 0; t < NTEXTS; t++) {
            int32_t ids[MAX_IDS];
            int n = encode(w->tok, texts[t], ids, err);
            if (n != w->want_n[t] || memcmp(ids, w->want[t], (size_t)n * sizeof ids[0]) != 0) {
                w->mismatches++;
                continue;
            }
            char *out = NULL;
            if (dmt_tokenizer_decode(w->tok, ids, n, &out, err, sizeof err) < 0 || strcmp(out, texts[t]) != 0)
                w->mismatches++;
            free(out);
        }
    }
    return NULL;
}

static void test_threads(const dmt_tokenizer *tok) {
    static int32_t want[NTEXTS][MAX_IDS];
    int want_n[NTEXTS];
    char err[256];
    for (int t = 0; t < NTEXTS; t++) want_n[t] = encode(tok, texts[t], want[t], err);
    struct worker w[4];
    pthread_t th[4];
    int started = 0, mismatches = 0;
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){tok, want, want_n, 0};
        started += pthread_create(&th[i], NULL, work, &w[i]) == 0;
    }
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        mismatches += w[i].mismatches;
    }
    CHECK(started == 4 && mismatches == 0, "threads: 4 threads encode and decode identically",
          "started %d, %d mismatches", started, mismatches);
}

int main(void) {
    fixture_paths();
    test_utf8_table();
    test_load_errors();
    test_load_bad_files();
    char err[256] = "";
    dmt_tokenizer *tok = dmt_tokenizer_load(fixture_dir, 400, 3, err, sizeof err);
    CHECK(tok != NULL, "load: the fixture model", "err: %s", err);
    if (!tok) return check_done();
    test_round_trips(tok);
    test_encode_errors(tok);
    test_pieces(tok);
    test_decode(tok);
    test_vocab_mapping(tok);
    test_threads(tok);
    dmt_tokenizer_free(tok);
    dmt_tokenizer_free(NULL);
    return check_done();
}
