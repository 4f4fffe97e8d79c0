// spm.cc — the only C++ in deepmt: wraps sentencepiece::SentencePieceProcessor
// behind the C functions declared in spm.h.
//
// SentencePieceProcessor's Encode / Decode / IdToPiece / PieceToId are const and
// keep no per-call state in the object, so one loaded processor serves any number
// of threads. Exceptions (only std::bad_alloc in practice) are caught at this
// boundary and turned into an error message.

#include "tokenizer/spm.h"

#include <sentencepiece_processor.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

struct dmt_spm {
    sentencepiece::SentencePieceProcessor sp;
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

extern "C" dmt_spm *dmt_spm_load(const char *path, char *err, size_t errlen) {
    try {
        dmt_spm *spm = new dmt_spm;
        const auto st = spm->sp.Load(path);
        if (!st.ok()) {
            set_err(err, errlen, "%s: %s", path, st.ToString().c_str());
            delete spm;
            return nullptr;
        }
        return spm;
    } catch (const std::exception &e) {
        set_err(err, errlen, "%s: %s", path, e.what());
        return nullptr;
    }
}

extern "C" void dmt_spm_free(dmt_spm *spm) { delete spm; }

extern "C" int dmt_spm_size(const dmt_spm *spm) { return spm->sp.GetPieceSize(); }

extern "C" int dmt_spm_unk_id(const dmt_spm *spm) { return spm->sp.unk_id(); }

extern "C" const char *dmt_spm_id_to_piece(const dmt_spm *spm, int id) {
    // IdToPiece returns a reference into the model proto, which outlives the call.
    return spm->sp.IdToPiece(id).c_str();
}

extern "C" int dmt_spm_piece_to_id(const dmt_spm *spm, const char *piece) {
    // PieceToId answers unk_id for pieces it does not know; tell the two apart.
    const int id = spm->sp.PieceToId(piece);
    if (id == spm->sp.unk_id() && spm->sp.IdToPiece(id) != piece) return -1;
    return id;
}

extern "C" int dmt_spm_is_control(const dmt_spm *spm, int id) { return spm->sp.IsControl(id); }

extern "C" int dmt_spm_encode(const dmt_spm *spm, const char *text, size_t len,
                              int32_t *ids, int max_ids, char *err, size_t errlen) {
    try {
        std::vector<int> v;
        const auto st = spm->sp.Encode(std::string_view(text, len), &v);
        if (!st.ok()) {
            set_err(err, errlen, "sentencepiece encode: %s", st.ToString().c_str());
            return -1;
        }
        if (v.size() > INT_MAX) {
            set_err(err, errlen, "input too long: more than %d pieces", INT_MAX);
            return -1;
        }
        const int n = (int)v.size();
        for (int i = 0; i < n && i < max_ids; i++) ids[i] = v[i];
        return n;
    } catch (const std::exception &e) {
        set_err(err, errlen, "sentencepiece encode: %s", e.what());
        return -1;
    }
}

extern "C" int dmt_spm_decode(const dmt_spm *spm, const int32_t *ids, int n, char **out,
                              char *err, size_t errlen) {
    try {
        const std::vector<int> v(ids, ids + n);
        std::string text;
        const auto st = spm->sp.Decode(v, &text);
        if (!st.ok()) {
            set_err(err, errlen, "sentencepiece decode: %s", st.ToString().c_str());
            return -1;
        }
        if (text.size() > INT_MAX) {
            set_err(err, errlen, "decoded text too long: %zu bytes", text.size());
            return -1;
        }
        char *s = (char *)malloc(text.size() + 1);
        if (!s) {
            set_err(err, errlen, "out of memory (%zu bytes)", text.size() + 1);
            return -1;
        }
        memcpy(s, text.data(), text.size() + 1);
        *out = s;
        return (int)text.size();
    } catch (const std::exception &e) {
        set_err(err, errlen, "sentencepiece decode: %s", e.what());
        return -1;
    }
}
