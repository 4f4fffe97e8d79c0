/* webpage.c — GET / for browsers (webpage.h). */
#include "server/api/webpage.h"

#include <string.h>
#include <strings.h>

#include "server/api/embed.h"

DMT_EMBED(dmt_webpage_html, "server/api/webpage.html"); /* server/api/embed.h */

const char *dmt_webpage(size_t *len) {
    *len = (size_t)(dmt_webpage_html_end - dmt_webpage_html);
    return dmt_webpage_html;
}

int dmt_webpage_wanted(const char *accept) {
    if (!accept) return 0;
    for (const char *p = accept; (p = strcasestr(p, "text/html")); p += 9) {
        /* "text/html;q=0" declines it */
        const char *end = strchr(p, ',');
        const char *q = strstr(p, "q=0");
        if (!q || (end && q > end) || (q[3] == '.' && strspn(q + 4, "0") < strcspn(q + 4, ",; "))) return 1;
    }
    return 0;
}
