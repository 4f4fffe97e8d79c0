/* utf8.h — strict UTF-8 validation (RFC 3629), shared by every part (base/: what every
 * part may use). */
#ifndef DEEPMT_BASE_UTF8_H
#define DEEPMT_BASE_UTF8_H

#include <stddef.h>

/* Returns 1 when the len bytes at s are valid UTF-8, else 0 and, when bad_offset
 * is not NULL, the byte offset where the first invalid sequence starts (its lead
 * byte, or the stray continuation byte). Strict: rejects overlong forms, UTF-16
 * surrogates (U+D800..U+DFFF), code points above U+10FFFF and truncated
 * sequences. NUL bytes are valid UTF-8; callers that mind them check themselves.
 * s may be NULL when len is 0. */
int dmt_utf8_validate(const char *s, size_t len, size_t *bad_offset);

#endif
