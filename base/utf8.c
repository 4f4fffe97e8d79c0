/* utf8.c — strict UTF-8 validation; see utf8.h. */
#include "base/utf8.h"

/* Table 3-7 of the Unicode Standard ("Well-Formed UTF-8 Byte Sequences"): the lead
 * byte fixes the sequence length and the allowed range of the second byte; later
 * bytes are always 0x80..0xBF. The narrowed second-byte ranges are what exclude
 * overlongs (E0, F0), surrogates (ED) and code points past U+10FFFF (F4). */
int dmt_utf8_validate(const char *s, size_t len, size_t *bad_offset) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        const unsigned c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t more;                          /* continuation bytes after the lead */
        unsigned lo = 0x80, hi = 0xBF;        /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)      more = 1;
        else if (c == 0xE0)            { more = 2; lo = 0xA0; }
        else if (c == 0xED)            { more = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) more = 2;
        else if (c == 0xF0)            { more = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) more = 3;
        else if (c == 0xF4)            { more = 3; hi = 0x8F; }
        else goto bad;                        /* 80..C1 (stray / overlong), F5..FF */
        if (len - i <= more) goto bad;        /* truncated */
        if (p[i + 1] < lo || p[i + 1] > hi) goto bad;
        for (size_t k = 2; k <= more; k++)
            if ((p[i + k] & 0xC0) != 0x80) goto bad;
        i += more + 1;
    }
    return 1;
bad:
    if (bad_offset) *bad_offset = i;
    return 0;
}
