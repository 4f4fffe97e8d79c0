/* test_placeholders.c — model/placeholders.c: format placeholders found, given to the
 * model as numbers and put back; none lost, none made of ordinary text. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/placeholders.h"

/* The placeholders found in text, joined with '|' ("" for none). */
static const char *found(const char *text) {
    static char out[512];
    dmt_placeholders p;
    out[0] = 0;
    int n = dmt_placeholders_find(text, strlen(text), &p);
    for (int k = 0; k < n; k++) {
        if (k) strcat(out, "|");
        strncat(out, p.source + p.items[k].at, p.items[k].len);
    }
    dmt_placeholders_clear(&p);
    return out;
}

static int finds(const char *text, const char *want) {
    const char *got = found(text);
    if (strcmp(got, want)) printf("# '%s': found '%s', want '%s'\n", text, got, want);
    return !strcmp(got, want);
}

/* strip text, give `translation` (with the numbers) to restore; the result */
static int trip(const char *text, const char *want_input, const char *translation, const char *want) {
    dmt_placeholders p;
    if (dmt_placeholders_find(text, strlen(text), &p) <= 0) {
        printf("# no placeholder in '%s'\n", text);
        return 0;
    }
    size_t n = 0, m = 0;
    char *input = dmt_placeholders_strip(&p, &n);
    char *out = dmt_placeholders_restore(&p, translation, strlen(translation), &m);
    int ok = input && out && !strcmp(input, want_input) && n == strlen(input) && !strcmp(out, want) && m == strlen(out);
    if (!ok) printf("# '%s': input '%s' (want '%s'), out '%s' (want '%s')\n", text, input, want_input, out, want);
    free(input);
    free(out);
    dmt_placeholders_clear(&p);
    return ok;
}

int main(void) {
    CHECK(finds("Delete %d files?", "%d") && finds("Could not open %s: %s", "%s|%s") &&
              finds("Saved %1$s to %2$s.", "%1$s|%2$s") && finds("%(count)d items, %-5.2f%, %lld, %zu, %@", "%(count)d|%-5.2f|%lld|%zu|%@") &&
              finds("Page %1 of %2", "%1|%2") && finds("%{name} left", "%{name}") && finds("%*d and %.*s", "%*d|%.*s"),
          "printf, Qt and Ruby placeholders");
    CHECK(finds("%dx%d pixels, file%d.png, %sMB", "%d|%d|%d|%s") && finds("12,6 %in Bezug, 5 %of them", "") &&
              finds("%sMB", "") && finds("%sMB of %s", "%s|%s") && finds("Volume: %i %%, 100%% sure", "%i|%%") &&
              finds("%PRODUCTNAME %PRODUCTVERSION, $(ARG1), %APPDATA%, %MOD1 key, with %3f turns",
                    "%PRODUCTNAME|%PRODUCTVERSION|$(ARG1)|%APPDATA%|%MOD1|%3f") && finds("50 %% off", ""),
          "printf's may touch letters (starting a word, beside another placeholder only: typos); a lone %% beside "
          "printf's; LibreOffice's and Windows' names; a width");
    CHECK(finds("Hello {name}, {0} and {} with {value:.2f}", "{name}|{0}|{}|{value:.2f}") &&
              finds("Welcome, {{user}}!", "{{user}}") && finds("Open ${filename} now", "${filename}") &&
              finds("(%d%%) and [%s]", "%d%%|%s") && finds("%s%s", "%s%s"),
          "braced names; placeholders side by side and a %% beside one are one");
    CHECK(finds("It costs $5 or 50% of 100 %% or 100 % d'entre eux.", "") && finds("{ name } {{ user }} {a b}", "") &&
              finds("5%d, %d5, %q, %0, %, abc{x}, a%1", "") && finds("$name, ${a, ${{x}}", "${{x}}") && finds("%%s and {{x}", "") && finds("%100 %1234", ""),
          "not placeholders: prices, percentages, a spaced %, spaced braces, glued to letters or digits, unknown "
          "conversions, escapes (%%s, {{x})");
    CHECK(finds("", "") && finds("{", "") && finds("%", "") && finds("%(", "") && finds("%(x", "") && finds("%1$", "") &&
              finds("{{x}", "") && finds("%{x", ""),
          "truncated placeholders at the end of the text are no placeholders");

    CHECK(trip("Volume $(ARG1) is not ready.", "Volume 201 is not ready.", "Volume 201 ist nicht bereit.",
               "Volume $(ARG1) ist nicht bereit."),
          "a sentence whose only placeholder starts with '$'");
    CHECK(trip("Delete %d files?", "Delete 201 files?", "201 Dateien löschen?", "%d Dateien löschen?"),
          "the placeholder goes where the translation put its number");
    CHECK(trip("Saved %1$s to %2$s.", "Saved 201 to 202.", "202 enthält jetzt 201.", "%2$s enthält jetzt %1$s."),
          "each placeholder has its own number: reordered, each goes back to its own");
    CHECK(trip("Page 201 of %d", "Page 201 of 202", "Seite 201 von 202", "Seite 201 von %d"),
          "a number the sentence holds is not used for a placeholder, and stays a number");
    CHECK(trip("Rows 201-203, 0205, 2040 and 204.5: %s %s", "Rows 201-203, 0205, 2040 and 204.5: 202 205",
               "Zeilen 201-203: 205, 202", "Zeilen 201-203: %s, %s"),
          "numbers are chosen among those no run of the sentence is (0205 and 2040 are other numbers)");
    CHECK(trip("Could not open %s: %s", "Could not open 201: 202", "Konnte nicht öffnen.", "Konnte nicht öffnen %s %s."),
          "placeholders the translation dropped go at its end, before its closing punctuation");
    CHECK(trip("Hello {name}!", "Hello 201!", "Hallo 201, 201!", "Hallo {name}, {name}!") &&
              trip("%s", "201", "", "%s") && trip("(%d%%)", "(201)", "(2010)", "(2010 %d%%)"),
          "a number written twice gives the placeholder twice; an empty translation gets it; 2010 is no 201");

    const char nul[] = "%s\0x %d";
    dmt_placeholders z;
    size_t zn = 0, zm = 0;
    int zk = dmt_placeholders_find(nul, sizeof nul - 1, &z);
    char *zin = zk == 2 ? dmt_placeholders_strip(&z, &zn) : NULL;
    char *zback = zin ? dmt_placeholders_restore(&z, zin, zn, &zm) : NULL;
    CHECK(zin && zn == 9 && !memcmp(zin, "201\0x 202", 9) && zback && zm == sizeof nul - 1 && !memcmp(zback, nul, zm),
          "a NUL byte in the sentence is kept, not the end of it");
    free(zin);
    free(zback);
    dmt_placeholders_clear(&z);

    /* more placeholders than the limit: the rest stay text */
    char many[1024] = "";
    for (int i = 0; i < 80; i++) strcat(many, "%s ");
    dmt_placeholders p;
    int n = dmt_placeholders_find(many, strlen(many), &p);
    size_t len = 0;
    char *input = n > 0 ? dmt_placeholders_strip(&p, &len) : NULL;
    CHECK(n == 64 && input && !strncmp(input, "201 202 ", 8) && strstr(input, "264 %s"),
          "at most 64 a sentence, numbered 201 to 264; the rest stay as written", "n %d", n);
    free(input);
    dmt_placeholders_clear(&p);
    return check_done();
}
