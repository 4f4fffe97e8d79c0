/* cld2_shim.h — C view of the Compact Language Detector 2 (Debian libcld2).
 *
 * One call runs CLD2 over plain UTF-8 text and returns its top three
 * languages as ISO codes ("en", "zh-Hant"; "un" for none). CLD2 keeps no state
 * between calls, so any number of threads may call at once.
 */
#ifndef DEEPMT_TEXT_CLD2_SHIM_H
#define DEEPMT_TEXT_CLD2_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char code[3][16];  /* top three languages, best first; "un" = none */
    int percent[3];    /* share of the text's letters each language covers */
    int reliable;      /* CLD2's own "is_reliable" */
    int text_bytes;    /* letters it actually scored */
} dmt_cld2_result;

/* hints: a comma list of codes CLD2 should favour ("en,de"), or NULL.
 * best_effort: answer even for text too short for CLD2's usual threshold.
 * 0, or -1 when the text is not valid UTF-8 (r then says "un"). */
int dmt_cld2_detect(const char *text, size_t len, const char *hints, int best_effort, dmt_cld2_result *r);

#ifdef __cplusplus
}
#endif

#endif
