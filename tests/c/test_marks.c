/* test_marks.c — model/marks.c: a sentence's final run of marks, the one mark the
 * model gets for it, and the run put back into a translation. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model/marks.h"

/* find + strip + restore: the model input for text and what tr becomes */
static int round_trip(const char *text, const char *want_input, const char *tr, const char *want) {
    dmt_marks m;
    if (!dmt_marks_find(text, strlen(text), &m)) {
        printf("# no run in '%s'\n", text);
        return 0;
    }
    size_t n = 0, k = 0;
    char *input = dmt_marks_strip(text, strlen(text), &m, &n);
    char *out = dmt_marks_restore(tr, strlen(tr), &m, &k);
    int ok = input && out && n == strlen(want_input) && !strcmp(input, want_input) && k == strlen(want) &&
             !strcmp(out, want);
    if (!ok) printf("# '%s': input '%s' (want '%s'), out '%s' (want '%s')\n", text, input, want_input, out, want);
    free(input);
    free(out);
    return ok;
}

int main(void) {
    CHECK(round_trip("What???", "What?", "Was?", "Was???"), "a run of question marks: one for the model, all back");
    CHECK(round_trip("This is amazing!!!", "This is amazing!", "C'est incroyable !", "C'est incroyable !!!"),
          "exclamation marks, the translation's French space kept");
    CHECK(round_trip("Really?!", "Really?", "Wirklich?", "Wirklich?!") &&
              round_trip("No!?", "No?", "Nein?", "Nein!?"),
          "a mixed run: the model gets '?', the run comes back as it was");
    CHECK(round_trip("Wait...", "Wait.", "Warte!.", "Warte..."), "an ellipsis: '.', and the model's own marks replaced");
    CHECK(round_trip("He said \"Stop!!\"  ", "He said \"Stop!\"  ", "Er sagte \xE2\x80\x9EHalt!\xE2\x80\x9C ",
                     "Er sagte \xE2\x80\x9EHalt!!\xE2\x80\x9C "),
          "closing quotes and white space after the run stay after it, on both sides");
    CHECK(round_trip("Version 2..", "Version 2.", "Version 2", "Version 2.."), "after a digit; added where the translation has no mark");
    CHECK(round_trip("Gr\xC3\xBC\xC3\x9F!!", "Gr\xC3\xBC\xC3\x9F!", "Hi!", "Hi!!"), "after a letter outside ASCII");
    CHECK(round_trip("Hey!!", "Hey!", "", "!!"), "an empty translation gets the run");
    CHECK(round_trip("Results: 10/10 !!!", "Results: 10/10!", "Ergebnis: 10/10!", "Ergebnis: 10/10 !!!") &&
              round_trip("Super !!", "Super!", "Génial !", "Génial !!") &&
              round_trip("Why ??", "Why?", "Warum", "Warum ??"),
          "a run one space apart from its word: the mark on the word for the model, the space back with the run "
          "(not doubled where the translation has it)");

    static const char *const none[] = {"Hello.", "Hello!", "What?", "", "!!!", "  ?!", "\"!!\"", "Hi!! there", "a.b..c d",
                                       "Hi  !!", " !!", "Hi\t!!", "x!!!!!!!!!!!!!!!!!"};
    int right = 0, n = (int)(sizeof none / sizeof none[0]);
    for (int i = 0; i < n; i++) {
        dmt_marks m;
        int r = dmt_marks_find(none[i], strlen(none[i]), &m);
        if (!r && m.len == 0) right++;
        else printf("# '%s': a run of %zu\n", none[i], m.len);
    }
    CHECK(right == n, "no run: one mark, none, marks alone, a run inside the sentence, one two spaces or a tab apart "
                      "from its word, "
                      "more than 16", "%d/%d", right, n);
    return check_done();
}
