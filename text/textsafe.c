/* textsafe.c — untrusted bytes made safe for logs and JSON answers.
 *
 * Requests carry arbitrary bytes (a decoded URL may hold "\n" or "\xff"), and
 * both log formats and jansson need one line of valid UTF-8: a newline would
 * forge a log line, and json_pack refuses invalid UTF-8 outright. Every string
 * that reaches a log line or an error message goes through here.
 */
#include "text/textsafe.h"

#include <string.h>

/* Length of the valid UTF-8 character at s[0..len), or 0 when s does not start
 * with one (stray continuation byte, overlong form, surrogate, > U+10FFFF,
 * truncated sequence). */
static size_t char_len(const unsigned char *s, size_t len) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!n || n > len) return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
    return n;
}

/* Characters a terminal or a log reader may act on: C0 controls, DEL, C1
 * controls (U+0080..U+009F: CSI and friends) and the Unicode line and paragraph
 * separators (U+2028, U+2029) some viewers break lines at. */
static int is_control(const unsigned char *s, size_t n) {
    if (n == 1) return s[0] < 0x20 || s[0] == 0x7F;
    if (n == 2) return s[0] == 0xC2 && s[1] < 0xA0;
    if (n == 3) return s[0] == 0xE2 && s[1] == 0x80 && (s[2] == 0xA8 || s[2] == 0xA9);
    return 0;
}

size_t dmt_text_escape(char *dst, size_t cap, const char *src, size_t len, int flags) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0;
    if (!cap) return 0;
    for (size_t i = 0; i < len;) {
        size_t n = char_len(s + i, len - i);
        char unit[16];
        size_t u = 0;
        if (n == 0 || is_control(s + i, n)) { /* every byte of it as \xNN */
            for (size_t k = 0; k < (n ? n : 1); k++) {
                unit[u++] = '\\', unit[u++] = 'x';
                unit[u++] = hex[s[i + k] >> 4], unit[u++] = hex[s[i + k] & 15];
            }
            n = n ? n : 1;
        } else if (s[i] == '\\' || (s[i] == '"' && (flags & DMT_ESC_QUOTE))) {
            unit[u++] = '\\', unit[u++] = (char)s[i];
        } else {
            memcpy(unit, s + i, n);
            u = n;
        }
        if (o + u + 1 > cap) break; /* never a cut character or escape */
        memcpy(dst + o, unit, u);
        o += u;
        i += n;
    }
    dst[o] = 0;
    return o;
}

size_t dmt_text_clip(const char *src, size_t len, size_t max) {
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0;
    while (i < len) {
        size_t n = char_len(s + i, len - i);
        if (!n) n = 1; /* an invalid byte is one unit: escaping it later keeps it whole */
        if (i + n > max) break;
        i += n;
    }
    return i;
}
