/* html.h — format "html": which parts of an HTML text to translate, and the text
 * with their translations put back (html.c, over Debian's libgumbo, an HTML5
 * parser).
 *
 * Every run of text between tags is a segment, translated on its own; tags,
 * attributes, comments, entities elsewhere and the spacing around each segment
 * are copied byte for byte, so inline markup stays exactly where it was. Text
 * inside script, style, code, pre, textarea, kbd, samp, var, svg, math,
 * template, noscript, or under an element with translate="no" or class
 * "notranslate", and text without letters, is left alone.
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
/* Text t with its segments replaced by tr[first..] (escaped for HTML);
 * malloc'd, NUL-terminated, length in *len; NULL when out of memory. */
char *dmt_html_render(const dmt_html *h, int t, const char *const *tr, const size_t *tr_lens, size_t *len);
void dmt_html_free(dmt_html *h);

#endif
