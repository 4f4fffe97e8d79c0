// cld2_shim.cc — wraps CLD2's ExtDetectLanguageSummaryCheckUTF8 behind the C
// function in cld2_shim.h. CLD2 throws nothing; the try block only guards
// against std::bad_alloc from its internals.

#include "text/cld2_shim.h"

#include <climits>
#include <cstdio>  // compact_lang_det.h uses FILE without including it
#include <cstring>
#include <exception>

#include <cld2/public/compact_lang_det.h>
#include <cld2/public/encodings.h>

static void set_unknown(dmt_cld2_result *r) {
    std::memset(r, 0, sizeof *r);
    for (int i = 0; i < 3; i++) std::snprintf(r->code[i], sizeof r->code[i], "un");
}

extern "C" int dmt_cld2_detect(const char *text, size_t len, const char *hints, int best_effort,
                               dmt_cld2_result *r) {
    set_unknown(r);
    if (len > INT_MAX / 2) len = INT_MAX / 2;
    try {
        CLD2::CLDHints h = {hints, nullptr, CLD2::UNKNOWN_ENCODING, CLD2::UNKNOWN_LANGUAGE};
        CLD2::Language l3[3];
        double norm[3];
        bool reliable = false;
        int text_bytes = 0, valid = 0;
        CLD2::ExtDetectLanguageSummaryCheckUTF8(text, (int)len, true, &h, best_effort ? CLD2::kCLDFlagBestEffort : 0,
                                                l3, r->percent, norm, nullptr, &text_bytes, &reliable, &valid);
        if (valid < (int)len) {
            set_unknown(r);
            return -1;
        }
        for (int i = 0; i < 3; i++) std::snprintf(r->code[i], sizeof r->code[i], "%s", CLD2::LanguageCode(l3[i]));
        r->reliable = reliable;
        r->text_bytes = text_bytes;
        return 0;
    } catch (const std::exception &) {
        set_unknown(r);
        return -1;
    }
}
