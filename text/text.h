/* text.h — deepmt's text handling, shared by the server and the command line: what
 * turns a user's text or file into sentences for the model, and the translations
 * back into the same text or file. No HTTP, no model: it depends on base/ and, for
 * detection, on a model's config (its languages) only.
 *
 * The parts:
 *   sentences.h   segmentation: a text into sentences, with the whitespace between
 *                 them kept; a sentence too long for the model into chunks at clause
 *                 boundaries, then whitespace, then a hard cut
 *   html.h        format "html": the text runs of an HTML text, and the text put back
 *   documents.h   .txt, .html, .srt, .docx, .odt files as lists of texts, and back
 *   detect.h      which of a model's languages a text is in (CLD2)
 *   textsafe.h    untrusted bytes made safe for log lines and JSON messages
 */
#ifndef DEEPMT_TEXT_TEXT_H
#define DEEPMT_TEXT_TEXT_H

#include "text/detect.h"
#include "text/documents.h"
#include "text/html.h"
#include "text/sentences.h"
#include "text/textsafe.h"

#endif
