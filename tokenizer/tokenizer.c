/* tokenizer.c — model ids on top of SentencePiece (spm.cc); see tokenizer.h.
 *
 * Everything here is built once in dmt_tokenizer_load and only read afterwards,
 * which is what makes a handle safe to share between threads.
 */
#include "tokenizer/tokenizer.h"

#include "base/fileio.h"
#include "tokenizer/spm.h"
#include "base/utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct dmt_tokenizer {
    dmt_spm *spm;
    int vocab_size;           /* model ids are 0 .. vocab_size-1 */
    int unk_id;               /* model id of pieces vocab.txt does not list */
    const char **pieces;      /* [vocab_size] piece of each model id (into vocab_text or spm) */
    char *vocab_text;         /* vocab.txt's bytes, cut into pieces; NULL without vocab.txt */
    int32_t *spm_to_model;    /* [spm size] model id of each SentencePiece id; NULL: same ids */
    int32_t *model_to_spm;    /* [vocab_size] SentencePiece id to decode with; NULL: same ids */
    unsigned char *skip;      /* [vocab_size] 1 when decode leaves the id out */
    int32_t *slots;           /* [nslots] piece -> model id hash table, -1 = empty */
    size_t nslots;            /* a power of two, at least 2 * vocab_size */
};

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- piece -> model id: open addressing over the pieces array ---- */

static uint64_t hash_piece(const char *s) {             /* FNV-1a */
    uint64_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

/* Returns the slot holding piece, or the empty slot where it would go. */
static size_t find_slot(const dmt_tokenizer *tok, const char *piece) {
    size_t i = hash_piece(piece) & (tok->nslots - 1);
    while (tok->slots[i] >= 0 && strcmp(tok->pieces[tok->slots[i]], piece) != 0)
        i = (i + 1) & (tok->nslots - 1);
    return i;
}

/* Fills the table from tok->pieces; a repeated piece is an error (from vocab.txt). */
static int build_index(dmt_tokenizer *tok, char *err, size_t errlen) {
    tok->nslots = 16;
    while (tok->nslots < 2 * (size_t)tok->vocab_size) tok->nslots *= 2;
    tok->slots = malloc(tok->nslots * sizeof *tok->slots);
    if (!tok->slots) { set_err(err, errlen, "out of memory"); return -1; }
    memset(tok->slots, 0xff, tok->nslots * sizeof *tok->slots);   /* all -1 */
    for (int id = 0; id < tok->vocab_size; id++) {
        size_t i = find_slot(tok, tok->pieces[id]);
        if (tok->slots[i] >= 0) {
            set_err(err, errlen, "vocab.txt line %d: piece \"%s\" repeats line %d",
                    id + 1, tok->pieces[id], tok->slots[i] + 1);
            return -1;
        }
        tok->slots[i] = id;
    }
    return 0;
}

/* ---- loading ---- */

#define VOCAB_MAX_BYTES ((size_t)256 << 20) /* 10^6 pieces of 256 bytes */

/* Reads vocab.txt into tok->vocab_text and points tok->pieces at its lines. */
static int read_vocab(dmt_tokenizer *tok, const char *path, char *err, size_t errlen) {
    size_t len;
    char fileerr[512];
    /* a FIFO or device named vocab.txt is refused, not waited on or read for ever */
    char *buf = dmt_file_read_small(path, VOCAB_MAX_BYTES, &len, fileerr, sizeof fileerr);
    if (!buf) { set_err(err, errlen, "%s", fileerr); return -1; }
    tok->vocab_text = buf;
    if (memchr(buf, '\0', len)) { set_err(err, errlen, "%s: contains a NUL byte", path); return -1; }

    int lines = 0;                       /* a last line without '\n' still counts */
    for (size_t i = 0; i < len; i++) lines += buf[i] == '\n';
    if (len > 0 && buf[len - 1] != '\n') lines++;
    if (lines != tok->vocab_size) {
        set_err(err, errlen, "%s has %d lines but vocab_size is %d", path, lines, tok->vocab_size);
        return -1;
    }
    tok->pieces = malloc((size_t)lines * sizeof *tok->pieces);
    if (!tok->pieces) { set_err(err, errlen, "out of memory"); return -1; }
    char *line = buf;
    for (int id = 0; id < lines; id++) {
        char *end = strchr(line, '\n');
        if (!end) end = buf + len;
        *end = '\0';
        if (end > line && end[-1] == '\r') end[-1] = '\0';
        if (!*line) { set_err(err, errlen, "%s line %d: empty piece", path, id + 1); return -1; }
        tok->pieces[id] = line;
        line = end + 1;
    }
    return 0;
}

/* "__xx__": two underscores, a code of letters, digits, '_' or '-' that starts and
 * ends with a letter or digit, two underscores (__de__, __zh_Hans__). */
int dmt_tokenizer_is_language_piece(const char *p) {
    size_t n = p ? strlen(p) : 0;
    if (n < 5 || strncmp(p, "__", 2) != 0 || strcmp(p + n - 2, "__") != 0) return 0;
    for (size_t i = 2; i < n - 2; i++) {
        unsigned char c = (unsigned char)p[i];
        int alnum = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
        if (!alnum && !((c == '_' || c == '-') && i != 2 && i != n - 3)) return 0;
    }
    return 1;
}

/* Builds spm_to_model, model_to_spm and skip once pieces are known. */
static int build_maps(dmt_tokenizer *tok, char *err, size_t errlen) {
    int nspm = dmt_spm_size(tok->spm);
    tok->skip = calloc((size_t)tok->vocab_size, 1);
    if (!tok->skip) { set_err(err, errlen, "out of memory"); return -1; }
    if (tok->vocab_text) {
        tok->spm_to_model = malloc((size_t)nspm * sizeof *tok->spm_to_model);
        tok->model_to_spm = malloc((size_t)tok->vocab_size * sizeof *tok->model_to_spm);
        if (!tok->spm_to_model || !tok->model_to_spm) { set_err(err, errlen, "out of memory"); return -1; }
        for (int s = 0; s < nspm; s++) {
            int id = dmt_tokenizer_piece_to_id(tok, dmt_spm_id_to_piece(tok->spm, s));
            tok->spm_to_model[s] = id >= 0 ? id : tok->unk_id;
        }
    }
    for (int id = 0; id < tok->vocab_size; id++) {
        const char *p = tok->pieces[id];
        int s = tok->model_to_spm ? dmt_spm_piece_to_id(tok->spm, p) : id;
        int control = s >= 0 ? dmt_spm_is_control(tok->spm, s)
                             : !strcmp(p, "<s>") || !strcmp(p, "</s>") || !strcmp(p, "<pad>");
        tok->skip[id] = (unsigned char)(control || dmt_tokenizer_is_language_piece(p));
        if (tok->model_to_spm) tok->model_to_spm[id] = s >= 0 ? s : dmt_spm_unk_id(tok->spm);
    }
    return 0;
}

dmt_tokenizer *dmt_tokenizer_load(const char *model_dir, int vocab_size, int unk_id,
                                  char *err, size_t errlen) {
    if (vocab_size <= 0 || unk_id < 0 || unk_id >= vocab_size) {
        set_err(err, errlen, "bad vocab_size %d / unk_id %d", vocab_size, unk_id);
        return NULL;
    }
    size_t plen = strlen(model_dir) + sizeof "/sentencepiece.model";
    char *path = malloc(plen);
    dmt_tokenizer *tok = calloc(1, sizeof *tok);
    if (!path || !tok) { set_err(err, errlen, "out of memory"); goto fail; }
    tok->vocab_size = vocab_size;
    tok->unk_id = unk_id;

    struct stat st;
    snprintf(path, plen, "%s/sentencepiece.model", model_dir);
    if (stat(path, &st) != 0) { set_err(err, errlen, "%s: %s", path, strerror(errno)); goto fail; }
    if (!S_ISREG(st.st_mode)) { set_err(err, errlen, "%s: not a regular file", path); goto fail; }
    if (!(tok->spm = dmt_spm_load(path, err, errlen))) goto fail;

    snprintf(path, plen, "%s/vocab.txt", model_dir);
    if (stat(path, &st) == 0) {
        if (read_vocab(tok, path, err, errlen) != 0) goto fail;
    } else if (errno != ENOENT) {
        set_err(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    } else {
        int nspm = dmt_spm_size(tok->spm);
        if (nspm != vocab_size) {
            set_err(err, errlen, "%s/sentencepiece.model has %d pieces but vocab_size is %d "
                    "(and there is no vocab.txt)", model_dir, nspm, vocab_size);
            goto fail;
        }
        if (dmt_spm_unk_id(tok->spm) != unk_id) {
            set_err(err, errlen, "%s/sentencepiece.model has unk id %d but unk_id is %d",
                    model_dir, dmt_spm_unk_id(tok->spm), unk_id);
            goto fail;
        }
        tok->pieces = malloc((size_t)vocab_size * sizeof *tok->pieces);
        if (!tok->pieces) { set_err(err, errlen, "out of memory"); goto fail; }
        for (int id = 0; id < vocab_size; id++) tok->pieces[id] = dmt_spm_id_to_piece(tok->spm, id);
    }
    if (build_index(tok, err, errlen) != 0 || build_maps(tok, err, errlen) != 0) goto fail;
    free(path);
    return tok;
fail:
    free(path);
    dmt_tokenizer_free(tok);
    return NULL;
}

void dmt_tokenizer_free(dmt_tokenizer *tok) {
    if (!tok) return;
    dmt_spm_free(tok->spm);
    free(tok->pieces);
    free(tok->vocab_text);
    free(tok->spm_to_model);
    free(tok->model_to_spm);
    free(tok->skip);
    free(tok->slots);
    free(tok);
}

/* ---- encode / decode ---- */

int dmt_tokenizer_encode(const dmt_tokenizer *tok, const char *text, size_t len,
                         int32_t *ids, int max_ids, char *err, size_t errlen) {
    if ((!text && len) || max_ids < 0 || (!ids && max_ids > 0)) {
        set_err(err, errlen, "encode: bad arguments");
        return -1;
    }
    const char *nul = len ? memchr(text, '\0', len) : NULL;
    if (nul) {
        set_err(err, errlen, "input contains a NUL byte at byte offset %zu", (size_t)(nul - text));
        return -1;
    }
    size_t bad;
    if (!dmt_utf8_validate(text, len, &bad)) {
        set_err(err, errlen, "invalid UTF-8 at byte offset %zu", bad);
        return -1;
    }
    int n = dmt_spm_encode(tok->spm, len ? text : "", len, ids, max_ids, err, errlen);
    if (n < 0) return -1;
    if (n > max_ids) {
        set_err(err, errlen, "input too long: %d pieces, limit %d", n, max_ids);
        return -1;
    }
    if (tok->spm_to_model)
        for (int i = 0; i < n; i++) ids[i] = tok->spm_to_model[ids[i]];
    return n;
}

int dmt_tokenizer_count(const dmt_tokenizer *tok, const char *text, size_t len, char *err, size_t errlen) {
    if (!text && len) {
        set_err(err, errlen, "count: bad arguments");
        return -1;
    }
    size_t bad;
    if ((len && memchr(text, '\0', len)) || !dmt_utf8_validate(text, len, &bad)) {
        set_err(err, errlen, "invalid text (NUL byte or invalid UTF-8)");
        return -1;
    }
    return dmt_spm_encode(tok->spm, len ? text : "", len, NULL, 0, err, errlen);
}

int dmt_tokenizer_decode(const dmt_tokenizer *tok, const int32_t *ids, int n, char **out,
                         char *err, size_t errlen) {
    *out = NULL;
    if (n < 0 || (!ids && n > 0)) { set_err(err, errlen, "decode: bad arguments"); return -1; }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->vocab_size) {
            set_err(err, errlen, "id %d at position %d is out of range (vocab size %d)",
                    (int)ids[i], i, tok->vocab_size);
            return -1;
        }
    }
    int32_t *spm_ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *spm_ids);
    if (!spm_ids) { set_err(err, errlen, "out of memory"); return -1; }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!tok->skip[ids[i]])
            spm_ids[m++] = tok->model_to_spm ? tok->model_to_spm[ids[i]] : ids[i];
    int len = dmt_spm_decode(tok->spm, spm_ids, m, out, err, errlen);
    free(spm_ids);
    return len;
}

int dmt_tokenizer_spells(const dmt_tokenizer *tok, const char *text, size_t len) {
    int32_t small[64], *ids = small;
    if (len > (size_t)INT32_MAX / 8) return -1;
    int max_ids = len + 2 > 64 ? (int)len + 2 : 64; /* a piece holds at least a byte, and the word's ▁ */
    if (len + 2 > 64 && !(ids = malloc((size_t)max_ids * sizeof *ids))) return -1;
    int n = dmt_tokenizer_encode(tok, text, len, ids, max_ids, NULL, 0), spelt = n >= 0;
    for (int t = 0; t < n && spelt; t++) {
        const char *p = tok->pieces[ids[t]];
        spelt = ids[t] != tok->unk_id && !(strlen(p) == 6 && !strncmp(p, "<0x", 3) && p[5] == '>');
    }
    if (ids != small) free(ids);
    return n < 0 ? -1 : spelt;
}

/* ---- look-ups ---- */

int dmt_tokenizer_vocab_size(const dmt_tokenizer *tok) { return tok->vocab_size; }

int dmt_tokenizer_piece_to_id(const dmt_tokenizer *tok, const char *piece) {
    if (!piece) return -1;
    return tok->slots[find_slot(tok, piece)];
}

const char *dmt_tokenizer_id_to_piece(const dmt_tokenizer *tok, int id) {
    return id >= 0 && id < tok->vocab_size ? tok->pieces[id] : NULL;
}

int dmt_tokenizer_language_id(const dmt_tokenizer *tok, const char *code) {
    char piece[64];
    if (!code || !*code) return -1;
    int n = snprintf(piece, sizeof piece, "__%s__", code);
    if (n < 0 || (size_t)n >= sizeof piece) return -1;
    return dmt_tokenizer_piece_to_id(tok, piece);
}
