/* test_textsafe.c — text/textsafe.c: escaping untrusted bytes for logs and JSON,
 * and cutting strings on character boundaries. */
#include "tests/c/check.h"
#include "text/textsafe.h"
#include "base/utf8.h"

#include <string.h>

static void test_escape_table(void) {
    static const struct { const char *what, *in, *want; int flags; } cases[] = {
        {"plain ASCII kept", "GET /translate", "GET /translate", 0},
        {"valid UTF-8 kept", "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x80\xa6 \xf0\x9f\x98\x80", 0},
        {"newline and CR escaped", "/x\nfake\r", "/x\\x0afake\\x0d", 0},
        {"ESC and DEL escaped", "\x1b[31m\x7f", "\\x1b[31m\\x7f", 0},
        {"invalid byte escaped", "/\xff", "/\\xff", 0},
        {"lone continuation byte", "a\x80" "b", "a\\x80b", 0},
        {"truncated sequence", "a\xc3", "a\\xc3", 0},
        {"overlong form", "\xc0\xaf", "\\xc0\\xaf", 0},
        {"surrogate", "\xed\xa0\x80", "\\xed\\xa0\\x80", 0},
        {"above U+10FFFF", "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80", 0},
        {"C1 control (U+009B CSI)", "a\xc2\x9b" "b", "a\\xc2\\x9bb", 0},
        {"U+2028 line separator", "a\xe2\x80\xa8" "b", "a\\xe2\\x80\\xa8b", 0},
        {"U+00A0 kept", "a\xc2\xa0" "b", "a\xc2\xa0" "b", 0},
        {"backslash doubled", "a\\xff", "a\\\\xff", 0},
        {"quote kept without the flag", "a\"b", "a\"b", 0},
        {"quote escaped with DMT_ESC_QUOTE", "a\"b", "a\\\"b", DMT_ESC_QUOTE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char out[128];
        size_t n = dmt_text_escape(out, sizeof out, cases[i].in, strlen(cases[i].in), cases[i].flags);
        CHECK(n == strlen(out) && !strcmp(out, cases[i].want) && dmt_utf8_validate(out, n, NULL), cases[i].what,
              "got '%s', want '%s'", out, cases[i].want);
    }
}

static void test_escape_bounds(void) {
    char out[8];
    /* "ab" + "\xff" needs 2 + 4 bytes + NUL = 7: fits; one more byte of room too little for "é" after it */
    size_t n = dmt_text_escape(out, sizeof out, "ab\xff\xc3\xa9", 5, 0);
    CHECK(n == 6 && !strcmp(out, "ab\\xff"), "an escape or character that does not fit is left out whole",
          "got '%s' (%zu)", out, n);
    n = dmt_text_escape(out, 4, "\n\n", 2, 0);
    CHECK(n == 0 && out[0] == 0, "no partial escape", "got '%s'", out);
    n = dmt_text_escape(out, sizeof out, "a\0b", 3, 0);
    CHECK(n == 6 && !memcmp(out, "a\\x00b", 6), "NUL escaped (length-based)", "got '%s'", out);
}

static void test_clip(void) {
    const char *s = "aaa\xc3\xa9" "b"; /* aaaéb */
    CHECK(dmt_text_clip(s, strlen(s), 4) == 3, "a 2-byte character cut at 4 is left out");
    CHECK(dmt_text_clip(s, strlen(s), 5) == 5, "kept when it fits");
    CHECK(dmt_text_clip(s, strlen(s), 100) == 6, "whole string under the limit");
    CHECK(dmt_text_clip("\xe2\x80\xa6\xe2\x80\xa6", 6, 5) == 3, "3-byte characters");
    CHECK(dmt_text_clip("a\xff\xfe", 3, 2) == 2, "invalid bytes count one each");
    CHECK(dmt_text_clip("", 0, 10) == 0, "empty");
}

/* Every byte string of length 1..3 escapes to valid UTF-8 without controls. */
static void test_exhaustive_short(void) {
    int bad = 0;
    unsigned char in[3];
    char out[64];
    for (int len = 1; len <= 2 && !bad; len++)
        for (unsigned v = 0; v < (1u << (8 * len)) && !bad; v++) {
            for (int k = 0; k < len; k++) in[k] = (unsigned char)(v >> (8 * k));
            size_t n = dmt_text_escape(out, sizeof out, (const char *)in, (size_t)len, 0);
            if (!dmt_utf8_validate(out, n, NULL)) bad = 1;
            for (size_t i = 0; i < n; i++)
                if ((unsigned char)out[i] < 0x20 || out[i] == 0x7F) bad = 1;
        }
    CHECK(!bad, "all 1- and 2-byte inputs escape to valid UTF-8 without control bytes");
}

int main(void) {
    test_escape_table();
    test_escape_bounds();
    test_clip();
    test_exhaustive_short();
    return check_done();
}
