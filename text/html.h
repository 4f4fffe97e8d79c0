/* html.h — format "html": which parts of an HTML text to translate, and the text
 * with their translations put back (html.c, over Debian's libgumbo, an HTML5
 * parser).
 *
 * A segment is a run of text with the inline elements inside it (a, b, i, em,
 * strong, span, code, u, sub, sup, ...): it is translated as one, and each inline
 * element's tags are put back around the target words aligned to the words it
 * enclosed (the decoder's cross-attention, dmt_translate_output's alignment), so
 * "A dog is <i>running</i>" is one sentence, not three. Any other element (blocks,
 * line breaks, images), a comment, or the end of the text ends a segment. Tags,
 * attributes, comments, entities elsewhere and the spacing around each segment
 * are copied byte for byte; the tags moved keep their bytes, and the result is
 * always well nested: where alignments would make two elements cross, one of
 * them is shrunk. A literal (code, kbd, samp, var, with its end tag) stays in
 * its sentence but is not translated: the segment's text leaves it out, and the
 * element comes back byte for byte after the target word aligned to the source
 * word before it ("Download the <code>deepmt</code> binary." is read as "Download
 * the binary."); a code never closed is an ordinary inline element, left alone
 * when it holds the whole segment. Text inside script, style, pre, textarea, svg, math, template,
 * noscript, or under an element with translate="no" or class "notranslate", and
 * text without letters outside its literals, is left alone.
 */
#ifndef DEEPMT_TEXT_HTML_H
#define DEEPMT_TEXT_HTML_H

#include <stddef.h>

typedef struct dmt_html dmt_html;

/* Parses the n texts (valid UTF-8). NULL with a message in err (out of memory,
 * or more than max_segments segments in all). */
dmt_html *dmt_html_prepare(const char *const *texts, const size_t *lens, int n, int max_segments, char *err,
                           size_t errlen);
int dmt_html_segment_count(const dmt_html *h);
/* Segment i's text, entities decoded, without its surrounding whitespace. */
const char *dmt_html_segment(const dmt_html *h, int i, size_t *len);
/* Text t's segments are first .. first + count - 1. */
void dmt_html_range(const dmt_html *h, int t, int *first, int *count);
/* Text t with its segments replaced by tr[first..] (escaped for HTML), each
 * segment's inline tags placed by pairs[i]: n_pairs[i] pairs (segment word,
 * translation word), words split at whitespace and counted from 0 (NULL: placed
 * by relative position). malloc'd, NUL-terminated, length in *len; NULL when out
 * of memory. */
char *dmt_html_render_aligned(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens,
                              const int *const *pairs, const int *n_pairs, size_t *len);
/* The same without alignments. */
char *dmt_html_render(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens, size_t *len);
void dmt_html_free(dmt_html *h);

#endif
