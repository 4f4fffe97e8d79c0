/* marks.h — a sentence's final run of marks ("!!!", "?!", "...") kept whole
 * through translation (marks.c; translate.c applies it for every model).
 *
 * A small model writes one mark for a run: "What???" came out as "Was?", "This is
 * amazing!!!" as "Das ist unglaublich!", and "Wait..." as "Warte!.". So a sentence
 * that ends with a run of 2 to DMT_MARKS_MAX of . ! ? (closing quotes and brackets
 * and white space after it allowed) reaches the model with one mark instead ('?'
 * if the run has one, else '!' if it has one, else '.'), and the run goes back in
 * place of the translation's own final . ! ? marks, before its closing quotes and
 * brackets: "Was???", "C'est incroyable !!!" (French spacing kept), "Warte...".
 * A run one space apart from its word ("10/10 !!!") is found too: the model gets
 * the mark on the word ("10/10!"), and the space comes back with the run.
 */
#ifndef DEEPMT_MODEL_MARKS_H
#define DEEPMT_MODEL_MARKS_H

#include <stddef.h>

#define DMT_MARKS_MAX 16

typedef struct {
    size_t start, len;           /* the bytes the one mark replaces: the run, and a space before it (len 0: none) */
    char run[DMT_MARKS_MAX + 1]; /* its marks, NUL-terminated */
    size_t marks;                /* their number */
    int spaced;                  /* 1: one space between the word and the run */
    char single;                 /* the one mark the model gets */
} dmt_marks;

/* Finds the final run of text[0..len): 1 and *m filled when the sentence ends with
 * such a run after a letter or digit, or one space after it; 0 otherwise (m->len 0). */
int dmt_marks_find(const char *text, size_t len, dmt_marks *m);

/* text with the run replaced by its single mark: malloc'd, NUL-terminated, length
 * in *out_len; NULL when out of memory. */
char *dmt_marks_strip(const char *text, size_t len, const dmt_marks *m, size_t *out_len);

/* tr (a translation of the stripped text) with the run in place of its final
 * . ! ? marks, or added before its closing quotes, brackets and white space when it
 * ends without one. malloc'd, NUL-terminated, length in *out_len; NULL when out of
 * memory. */
char *dmt_marks_restore(const char *tr, size_t len, const dmt_marks *m, size_t *out_len);

#endif
