/* textsafe.h — untrusted bytes made safe for log lines and JSON messages
 * (textsafe.c). */
#ifndef DEEPMT_TEXT_TEXTSAFE_H
#define DEEPMT_TEXT_TEXTSAFE_H

#include <stddef.h>

enum { DMT_ESC_QUOTE = 1 }; /* also escape '"' (inside a quoted field of a text log) */

/* Copies src[0..len) into dst (cap bytes, NUL-terminated) as one line of valid
 * UTF-8: invalid bytes and control characters (C0, DEL, C1, U+2028/2029) become
 * \xNN, a backslash \\ (and '"' \" with DMT_ESC_QUOTE). Stops before a character
 * or an escape that would not fit. Returns the length written. */
size_t dmt_text_escape(char *dst, size_t cap, const char *src, size_t len, int flags);

/* The longest prefix of src[0..len), at most max bytes, that ends on a character
 * boundary (an invalid byte counts as one character): for "%.*s" without cutting
 * a UTF-8 sequence in two. */
size_t dmt_text_clip(const char *src, size_t len, size_t max);

#endif
