/* shortlist.c — loading a lexical shortlist and a sentence's candidates (shortlist.h). */
#include "model/shortlist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"
#include "base/fileio.h"
#include "model/ops.h"

#define MAGIC "DMTSL01\n"
#define HEADER_BYTES 24
#define MAX_FILE_BYTES ((size_t)1 << 30) /* 16k pieces x 3 languages x 50 is ~10 MB */

typedef struct {
    int target;              /* language token id */
    uint32_t n_entries;
    const uint32_t *start;   /* [V + 1] */
    const uint16_t *e16;     /* [n_entries] when the file's entries are 2 bytes, */
    const uint32_t *e32;     /*   else these */
} table;

struct dmt_shortlist {
    int V, words, eos, entry_bytes;
    uint32_t n_frequent;
    const uint32_t *frequent;
    int n_tables;
    table *tables;
    unsigned char *file; /* the whole file; tables point into it */
};

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The file's fields are read in place: they are converted to host order once, here
 * (a no-op on little-endian hosts, but the checks below read them either way). */
static void to_host(unsigned char *p, size_t n_words) {
    for (size_t i = 0; i < n_words; i++) {
        uint32_t v = u32_at(p + 4 * i);
        memcpy(p + 4 * i, &v, 4);
    }
}
static void to_host16(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint16_t v = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        memcpy(p + 2 * i, &v, 2);
    }
}

static uint32_t entry_at(const table *tb, uint32_t e) { return tb->e16 ? tb->e16[e] : tb->e32[e]; }

static int language_token(const dmt_config *cfg, int id) {
    for (int i = 0; i < cfg->n_languages; i++)
        if (cfg->languages[i].id == id) return 1;
    return 0;
}

/* Checks the tables after the header; 0, or -1 with a message. */
static int parse_tables(dmt_shortlist *sl, const dmt_config *cfg, size_t size, size_t at, const char *path,
                        char *err, size_t errlen) {
    unsigned char *f = sl->file;
    for (int t = 0; t < sl->n_tables; t++) {
        table *tb = &sl->tables[t];
        if (size - at < 8 + 4 * ((size_t)sl->V + 1)) {
            snprintf(err, errlen, "%s: table %d is cut short (the file has %zu bytes)", path, t, size);
            return -1;
        }
        to_host(f + at, 2 + (size_t)sl->V + 1);
        memcpy(&tb->target, f + at, 4);
        memcpy(&tb->n_entries, f + at + 4, 4);
        tb->start = (const uint32_t *)(f + at + 8);
        at += 8 + 4 * ((size_t)sl->V + 1);
        if (!language_token(cfg, tb->target)) {
            snprintf(err, errlen, "%s: table %d is for token %d, which is none of config.json's languages", path, t,
                     tb->target);
            return -1;
        }
        for (int u = 0; u < t; u++)
            if (sl->tables[u].target == tb->target) {
                snprintf(err, errlen, "%s: tables %d and %d are both for token %d", path, u, t, tb->target);
                return -1;
            }
        if (tb->start[0] != 0 || tb->start[sl->V] != tb->n_entries) {
            snprintf(err, errlen, "%s: table %d: its offsets do not run from 0 to its %u entries", path, t,
                     tb->n_entries);
            return -1;
        }
        for (int s = 0; s < sl->V; s++)
            if (tb->start[s + 1] < tb->start[s]) {
                snprintf(err, errlen, "%s: table %d: the offset of piece %d decreases", path, t, s + 1);
                return -1;
            }
        size_t eb = (size_t)sl->entry_bytes, span = ((size_t)tb->n_entries * eb + 3) / 4 * 4;
        if ((size - at) / eb < tb->n_entries || size - at < span) {
            snprintf(err, errlen, "%s: table %d: %u entries do not fit in the file's %zu bytes", path, t,
                     tb->n_entries, size);
            return -1;
        }
        if (eb == 2) {
            to_host16(f + at, tb->n_entries);
            tb->e16 = (const uint16_t *)(f + at);
        } else {
            to_host(f + at, tb->n_entries);
            tb->e32 = (const uint32_t *)(f + at);
        }
        for (uint32_t e = 0; e < tb->n_entries; e++)
            if (entry_at(tb, e) >= (uint32_t)sl->V) {
                snprintf(err, errlen, "%s: table %d: entry %u is piece %u, outside the vocabulary of %d", path, t, e,
                         entry_at(tb, e), sl->V);
                return -1;
            }
        for (size_t pad = (size_t)tb->n_entries * eb; pad < span; pad++)
            if (f[at + pad]) {
                snprintf(err, errlen, "%s: table %d: its padding is not zero", path, t);
                return -1;
            }
        at += span;
    }
    if (at != size) {
        snprintf(err, errlen, "%s: %zu bytes after the last table", path, size - at);
        return -1;
    }
    return 0;
}

dmt_shortlist *dmt_shortlist_load(const char *path, const dmt_config *cfg, char *err, size_t errlen) {
    size_t size = 0;
    char *raw = dmt_file_read_small(path, MAX_FILE_BYTES, &size, err, errlen);
    if (!raw) return NULL;
    dmt_shortlist *sl = dmt_fault_hit() ? NULL : calloc(1, sizeof *sl);
    if (!sl) {
        free(raw);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sl->file = (unsigned char *)raw;
    unsigned char *f = sl->file;
    if (size < HEADER_BYTES || memcmp(f, MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not a deepmt shortlist (no \"DMTSL01\" header)", path);
        goto fail;
    }
    uint32_t V = u32_at(f + 8), n_frequent = u32_at(f + 12), n_tables = u32_at(f + 16), entry_bytes = u32_at(f + 20);
    if (V != (uint32_t)cfg->vocab_size) {
        snprintf(err, errlen, "%s: made for a vocabulary of %u pieces; config.json has %d", path, V, cfg->vocab_size);
        goto fail;
    }
    if (n_tables == 0 || n_tables > DMT_MAX_LANGUAGES) {
        snprintf(err, errlen, "%s: %u tables (1 to %d): not a valid header", path, n_tables, DMT_MAX_LANGUAGES);
        goto fail;
    }
    if (entry_bytes != 4 && !(entry_bytes == 2 && V <= 65536)) {
        snprintf(err, errlen, "%s: entries of %u bytes (2, for at most 65536 pieces, or 4)", path, entry_bytes);
        goto fail;
    }
    if (n_frequent > V || (size - HEADER_BYTES) / 4 < n_frequent) {
        snprintf(err, errlen, "%s: %u frequent pieces do not fit", path, n_frequent);
        goto fail;
    }
    sl->V = (int)V;
    sl->words = (int)((V + 63) / 64);
    sl->eos = cfg->eos_id;
    sl->entry_bytes = (int)entry_bytes;
    sl->n_frequent = n_frequent;
    to_host(f + HEADER_BYTES, n_frequent);
    sl->frequent = (const uint32_t *)(f + HEADER_BYTES);
    for (uint32_t i = 0; i < n_frequent; i++)
        if (sl->frequent[i] >= V) {
            snprintf(err, errlen, "%s: frequent piece %u is %u, outside the vocabulary", path, i, sl->frequent[i]);
            goto fail;
        }
    sl->n_tables = (int)n_tables;
    sl->tables = dmt_fault_hit() ? NULL : calloc(n_tables, sizeof *sl->tables);
    if (!sl->tables) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (parse_tables(sl, cfg, size, HEADER_BYTES + 4 * (size_t)n_frequent, path, err, errlen)) goto fail;
    return sl;
fail:
    dmt_shortlist_free(sl);
    return NULL;
}

void dmt_shortlist_free(dmt_shortlist *sl) {
    if (!sl) return;
    free(sl->tables);
    free(sl->file);
    free(sl);
}

int dmt_shortlist_words(const dmt_shortlist *sl) { return sl->words; }

static void set_bit(uint64_t *bits, uint32_t i) { bits[i >> 6] |= (uint64_t)1 << (i & 63); }

int dmt_shortlist_sentence(const dmt_shortlist *sl, int target, const int32_t *src, int src_len, uint64_t *allow) {
    const table *tb = NULL;
    for (int t = 0; t < sl->n_tables && !tb; t++)
        if (sl->tables[t].target == target) tb = &sl->tables[t];
    if (!tb) return 0;
    memset(allow, 0, (size_t)sl->words * sizeof *allow);
    for (uint32_t i = 0; i < sl->n_frequent; i++) set_bit(allow, sl->frequent[i]);
    set_bit(allow, (uint32_t)sl->eos);
    /* </s>'s list: the pieces every sentence into this language may use (every source
     * ends with </s>; applied here also for one that does not) */
    for (uint32_t e = tb->start[sl->eos]; e < tb->start[sl->eos + 1]; e++) set_bit(allow, entry_at(tb, e));
    for (int p = 0; p < src_len; p++) {
        if (src[p] < 0 || src[p] >= sl->V) continue; /* the caller's ids are checked by the encoder */
        set_bit(allow, (uint32_t)src[p]);
        for (uint32_t e = tb->start[src[p]]; e < tb->start[src[p] + 1]; e++) set_bit(allow, entry_at(tb, e));
    }
    return 1;
}

const char *dmt_shortlist_describe(const dmt_shortlist *sl, char *buf, size_t len) {
    size_t entries = 0;
    for (int t = 0; t < sl->n_tables; t++) entries += sl->tables[t].n_entries;
    snprintf(buf, len, "%d target language%s, %.1f pieces a source piece, %u frequent", sl->n_tables,
             sl->n_tables == 1 ? "" : "s", (double)entries / sl->n_tables / sl->V, sl->n_frequent);
    return buf;
}

/* ------------------------------------------------------ the pieces a batch scores -- */

struct dmt_vocab {
    const dmt_shortlist *sl;
    int V, words, cap;
    uint64_t *allow;  /* [cap][words] each sentence's candidates */
    int *n_allow;     /* [cap] how many */
    int *n_sample;    /* [cap] sample pieces outside each sentence's candidates */
    float *sample_lw; /* [cap] log of the pieces outside its candidates each stands for */
    int32_t **entry;  /* [cap][n_allow + n_sample] their entries in a row: the candidates
                       * in piece order, then the sample pieces outside; NULL: stale */
    char *in;         /* [cap] 0: not in, 1: in with its candidates, 2: in, needs the whole vocabulary */
    int *count;       /* [V] sentences in that need each piece */
    int n_needed;     /* pieces with count > 0 */
    int n_whole;      /* sentences in with in == 2 */
    int32_t *cols;    /* [V] the scored pieces (n_cols of them): ascending when gathered,
                       * then the pieces added as sentences join */
    int32_t *col_of;  /* [V] entry of each piece in cols, -1 when not scored */
    int n_cols;       /* 0: the state scores the whole vocabulary */
    int grow;         /* a needed piece is not scored: rebuild before the next step */
    int rebuilds, additions;
    float *tmp;       /* [V] a row's allowed scores */
};

dmt_vocab *dmt_vocab_new(const dmt_shortlist *sl, int cap) {
    dmt_vocab *v = dmt_fault_hit() ? NULL : calloc(1, sizeof *v);
    if (!v) return NULL;
    v->sl = sl;
    v->V = sl->V;
    v->words = sl->words;
    v->cap = cap;
    v->allow = calloc((size_t)cap * v->words, sizeof *v->allow);
    v->n_allow = calloc((size_t)cap, sizeof *v->n_allow);
    v->n_sample = calloc((size_t)cap, sizeof *v->n_sample);
    v->sample_lw = calloc((size_t)cap, sizeof *v->sample_lw);
    v->entry = calloc((size_t)cap, sizeof *v->entry);
    v->in = calloc((size_t)cap, 1);
    v->count = calloc((size_t)v->V, sizeof *v->count);
    v->cols = malloc((size_t)v->V * sizeof *v->cols);
    v->col_of = malloc((size_t)v->V * sizeof *v->col_of);
    v->tmp = malloc((size_t)v->V * sizeof *v->tmp);
    if (!v->allow || !v->n_allow || !v->n_sample || !v->sample_lw || !v->entry || !v->in || !v->count || !v->cols ||
        !v->col_of || !v->tmp) {
        dmt_vocab_free(v);
        return NULL;
    }
    for (int t = 0; t < v->V; t++) v->col_of[t] = -1;
    return v;
}

void dmt_vocab_free(dmt_vocab *v) {
    if (!v) return;
    for (int i = 0; v->entry && i < v->cap; i++) free(v->entry[i]);
    free(v->allow); free(v->n_allow); free(v->n_sample); free(v->sample_lw); free(v->entry); free(v->in);
    free(v->count); free(v->cols); free(v->col_of);
    free(v->tmp);
    free(v);
}

static int allowed(const uint64_t *allow, int t) { return allow[t >> 6] >> (t & 63) & 1; }

/* One more sentence in needs piece t. */
static void need(dmt_vocab *v, int t) {
    if (v->count[t]++ == 0) {
        v->n_needed++;
        if (v->n_cols && v->col_of[t] < 0) v->grow = 1;
    }
}

static void unneed(dmt_vocab *v, int t) {
    if (--v->count[t] == 0) v->n_needed--;
}

void dmt_vocab_join(dmt_vocab *v, int slot, int target, const int32_t *src, int src_len) {
    if (slot < 0 || slot >= v->cap) return;
    dmt_vocab_leave(v, slot);
    uint64_t *allow = v->allow + (size_t)slot * v->words;
    if (!dmt_shortlist_sentence(v->sl, target, src, src_len, allow)) {
        v->in[slot] = 2;
        v->n_whole++;
        return;
    }
    v->in[slot] = 1;
    int n = 0, ns = 0;
    for (int w = 0; w < v->words; w++)
        for (uint64_t bits = allow[w]; bits; bits &= bits - 1) {
            need(v, w * 64 + __builtin_ctzll(bits));
            n++;
        }
    for (int t = DMT_SHORTLIST_SAMPLE_AT; t < v->V; t += DMT_SHORTLIST_SAMPLE_EVERY)
        if (!allowed(allow, t)) {
            need(v, t);
            ns++;
        }
    v->n_allow[slot] = n;
    v->n_sample[slot] = ns;
    v->sample_lw[slot] = ns ? logf((float)(v->V - n) / (float)ns) : 0.0f;
}

void dmt_vocab_leave(dmt_vocab *v, int slot) {
    if (slot < 0 || slot >= v->cap || !v->in[slot]) return;
    if (v->in[slot] == 2) {
        v->n_whole--;
    } else {
        const uint64_t *allow = v->allow + (size_t)slot * v->words;
        for (int w = 0; w < v->words; w++)
            for (uint64_t bits = allow[w]; bits; bits &= bits - 1) unneed(v, w * 64 + __builtin_ctzll(bits));
        for (int t = DMT_SHORTLIST_SAMPLE_AT; t < v->V; t += DMT_SHORTLIST_SAMPLE_EVERY)
            if (!allowed(allow, t)) unneed(v, t);
    }
    free(v->entry[slot]);
    v->entry[slot] = NULL;
    v->in[slot] = 0;
}

static void unrestrict(dmt_vocab *v) {
    for (int j = 0; j < v->n_cols; j++) v->col_of[v->cols[j]] = -1;
    v->n_cols = 0;
}

static void drop_entries(dmt_vocab *v) {
    for (int i = 0; i < v->cap; i++) {
        free(v->entry[i]);
        v->entry[i] = NULL;
    }
}

/* Each sentence's row entries under the current columns, in piece order (the
 * candidates, then the sample); entries already filled stay valid as columns are
 * added. */
static int fill_entries(dmt_vocab *v) {
    for (int i = 0; i < v->cap; i++) {
        if (v->in[i] != 1 || v->entry[i]) continue;
        int32_t *e = v->entry[i] = malloc((size_t)(v->n_allow[i] + v->n_sample[i] + 1) * sizeof *e);
        if (!e) return -1;
        const uint64_t *allow = v->allow + (size_t)i * v->words;
        int n = 0;
        for (int w = 0; w < v->words; w++)
            for (uint64_t bits = allow[w]; bits; bits &= bits - 1) {
                int t = w * 64 + __builtin_ctzll(bits);
                e[n++] = v->n_cols ? v->col_of[t] : t;
            }
        for (int t = DMT_SHORTLIST_SAMPLE_AT; t < v->V; t += DMT_SHORTLIST_SAMPLE_EVERY)
            if (!allowed(allow, t)) e[n++] = v->n_cols ? v->col_of[t] : t;
    }
    return 0;
}

int dmt_vocab_sync(dmt_vocab *v, dmt_state *st) {
    /* scoring 3/4 of the vocabulary or more saves little next to gathering the
     * columns again */
    int restrict_to_union = v->n_whole == 0 && v->n_needed > 0 && v->n_needed < v->V / 4 * 3;
    if (!restrict_to_union) {
        if (v->n_cols) {
            unrestrict(v);
            drop_entries(v);
        }
        dmt_state_restrict_vocab(st, 0, NULL, 1);
        return fill_entries(v);
    }
    /* a few unneeded pieces cost less than gathering the columns again */
    int room = v->n_needed + v->n_needed / 4 + 64;
    if (v->n_cols && !v->grow && v->n_cols <= room) return fill_entries(v);
    if (v->n_cols && v->grow) {
        /* the pieces a sentence that joined needs: added as new columns while the
         * columns stay within the room (nearly every sentence brings some, and
         * gathering the whole union again cost 6% of a translation) */
        int n = v->n_cols;
        for (int t = 0; t < v->V && n <= room; t++)
            if (v->count[t] > 0 && v->col_of[t] < 0) v->cols[n++] = t;
        if (n <= room && dmt_state_extend_vocab(st, n - v->n_cols, v->cols + v->n_cols) == 0) {
            for (int j = v->n_cols; j < n; j++) v->col_of[v->cols[j]] = j;
            v->n_cols = n;
            v->grow = 0;
            v->additions++;
            return fill_entries(v);
        }
    }
    unrestrict(v);
    drop_entries(v);
    int n = 0;
    for (int t = 0; t < v->V; t++)
        if (v->count[t] > 0) {
            v->col_of[t] = n;
            v->cols[n++] = t;
        }
    v->n_cols = n;
    v->grow = 0;
    v->rebuilds++;
    if (dmt_state_restrict_vocab(st, n, v->cols, 1) == 0 && fill_entries(v) == 0) return 0;
    unrestrict(v);
    drop_entries(v);
    dmt_state_restrict_vocab(st, 0, NULL, 1);
    return -1;
}

const int32_t *dmt_vocab_cols(const dmt_vocab *v, int *n, const int32_t **col_of) {
    *n = v->n_cols ? v->n_cols : v->V;
    *col_of = v->n_cols ? v->col_of : NULL;
    return v->n_cols ? v->cols : NULL;
}

int dmt_vocab_row(const dmt_vocab *v, int slot, float *row, float **values, const int32_t **entries) {
    int n = v->n_cols ? v->n_cols : v->V;
    if (slot < 0 || slot >= v->cap || v->in[slot] != 1 || !v->entry[slot]) {
        dmt_log_softmax(row, 1, n); /* a sentence without a table: all of the row */
        *values = row;
        *entries = NULL;
        return n;
    }
    const int32_t *e = v->entry[slot];
    int m = v->n_allow[slot], ns = v->n_sample[slot];
    float *x = v->tmp, lw = v->sample_lw[slot];
    for (int j = 0; j < m; j++) x[j] = row[e[j]];
    for (int j = m; j < m + ns; j++) x[j] = row[e[j]] + lw; /* each stands for e^lw pieces */
    /* the kernels' vectorised log-softmax over the candidates and the weighted sample:
     * the candidates' entries come out normalised by the estimate (shortlist.h) */
    dmt_log_softmax(x, 1, m + ns);
    *values = x; /* the candidates first, in piece order */
    *entries = e;
    return m;
}

int dmt_vocab_rebuilds(const dmt_vocab *v) { return v->rebuilds; }
int dmt_vocab_additions(const dmt_vocab *v) { return v->additions; }
