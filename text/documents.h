/* documents.h — files for /translate_file: what to translate in them, and the
 * file rebuilt with the translations (documents.c).
 *
 *   .txt         the whole text (sentences split as for /translate)
 *   .html .htm   the whole file, as format "html" (html.h)
 *   .srt         each subtitle's text (lines joined by a space) without its
 *                formatting tags (<i>, </font>...) and override blocks ({\an8}),
 *                which go back around the words aligned to the text they framed,
 *                as a .docx run's formatting; numbers and timings are kept as
 *                they are
 *   .docx        each paragraph (w:p) of word/document.xml, the headers,
 *                footers, footnotes and endnotes
 *   .odt         each paragraph and heading (text:p, text:h) of content.xml
 *                and styles.xml (page headers and footers)
 *
 * A .docx or .odt keeps only its texts while it waits for translation (its DOM,
 * several times its XML, is dropped after reading); dmt_doc_write reads the archive
 * again. A paragraph is translated whole even when formatting splits it into runs;
 * with a word alignment (dmt_doc_write_aligned) each run gets the stretch of the
 * translation aligned to its own words, in the runs' order (so bold stays on the
 * translated bold words; when the translation reorders them past their
 * neighbours, the bold run takes them with the neighbour rather than nothing);
 * without one, the translation goes into the first run. Every element stays,
 * only the text moves.
 */
#ifndef DEEPMT_TEXT_DOCUMENTS_H
#define DEEPMT_TEXT_DOCUMENTS_H

#include <stddef.h>

typedef enum { DMT_DOC_TXT, DMT_DOC_HTML, DMT_DOC_SRT, DMT_DOC_DOCX, DMT_DOC_ODT } dmt_doc_kind;

/* The kind a file name's extension says (case-insensitive), or -1. */
int dmt_doc_kind_of(const char *filename);
/* ".txt, .html, .htm, .srt, .docx, .odt" as a list of extensions. */
extern const char *const dmt_doc_extensions[];

typedef struct dmt_doc dmt_doc;

/* Reads a file of that kind. NULL with a message (not UTF-8, a malformed or
 * oversized archive, XML that does not parse, too many paragraphs...). */
dmt_doc *dmt_doc_open(dmt_doc_kind kind, const char *data, size_t len, char *err, size_t errlen);
int dmt_doc_count(const dmt_doc *d);                         /* texts to translate */
const char *dmt_doc_text(const dmt_doc *d, int i, size_t *len);
int dmt_doc_is_html(const dmt_doc *d);                        /* translate as format "html" */
/* Writes the file with text i replaced by tr[i] to path. 0, or -1 with a message. */
int dmt_doc_write(dmt_doc *d, const char *const *tr, const size_t *tr_lens, const char *path, char *err,
                  size_t errlen);
/* The same, with each text's word alignment: n_pairs[i] pairs (text word,
 * translation word) in pairs[i], words split at whitespace, from 0 (NULL: none).
 * A .docx/.odt paragraph's runs then get the words aligned to their own (bold
 * stays on the words it was on), in the runs' order. */
int dmt_doc_write_aligned(dmt_doc *d, const char *const *tr, const size_t *tr_lens, const int *const *pairs,
                          const int *n_pairs, const char *path, char *err, size_t errlen);
void dmt_doc_free(dmt_doc *d);

#endif
