/* test_shortlist.c — the vocabulary shortlist (model/shortlist.c) and beam search over it.
 *
 * File: a valid file loads; each way of breaking one (magic, vocabulary size, header,
 * offsets, entries, a table for a token that is no language, two tables for one,
 * bytes missing or left over) is refused with a message that names the fault.
 * Candidates: a sentence's bitmap is its pieces' entries, the frequent pieces, its
 * own pieces and </s>; a target without a table gets none.
 * Search (tests/fixtures/beam/deepnorm-6x6, 80 pieces, a random shortlist for de and
 * fr, none for en): greedy decoding by hand over the whole vocabulary, masked to the
 * sentence's candidates and normalised by the sample's estimate (model/shortlist.h),
 * gives the shortlisted search's tokens and scores (and normalising over the
 * candidates alone would not); every token of every hypothesis is a candidate of its
 * sentence; a sentence alone = the same sentence in a batch of mixed languages (with and without tables)
 * and in a beam session; a shortlist that allows everything changes nothing; the
 * scored columns follow the sentences in the batch (dmt_vocab).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/beam.h"
#include "model/forward.h"
#include "model/gemm.h"
#include "model/kernels/kernels.h"
#include "model/model.h"
#include "model/shortlist.h"
#include "tests/c/check.h"
#include "tests/c/fixtures.h"

static unsigned long long rng_state = 0x243F6A8885A308D3ull;
static unsigned rnd(unsigned n) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return (unsigned)(rng_state % n);
}

/* ------------------------------------------------------------------ files -- */

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(bytes *b, uint32_t v) {
    unsigned char x[4] = {v & 255, v >> 8 & 255, v >> 16 & 255, v >> 24 & 255};
    put(b, x, 4);
}

/* A shortlist: `per` random entries a source piece for each table target. */
typedef struct {
    int V, n_frequent, n_tables, per, entry_bytes;
    int extra; /* the last source piece lists this many more (its first entries again): an odd count */
    int frequent[64];
    int target[4];
    int *entries[4]; /* [V][per] */
} spec;

static bytes encode(const spec *s) {
    bytes b = {0};
    put(&b, "DMTSL01\n", 8);
    put_u32(&b, (uint32_t)s->V);
    put_u32(&b, (uint32_t)s->n_frequent);
    put_u32(&b, (uint32_t)s->n_tables);
    put_u32(&b, (uint32_t)s->entry_bytes);
    for (int i = 0; i < s->n_frequent; i++) put_u32(&b, (uint32_t)s->frequent[i]);
    for (int t = 0; t < s->n_tables; t++) {
        put_u32(&b, (uint32_t)s->target[t]);
        put_u32(&b, (uint32_t)(s->V * s->per + s->extra));
        for (int v = 0; v <= s->V; v++) put_u32(&b, (uint32_t)(v * s->per + (v == s->V ? s->extra : 0)));
        for (int v = 0; v < s->V * s->per + s->extra; v++) {
            uint32_t e = (uint32_t)s->entries[t][v < s->V * s->per ? v : v - s->V * s->per];
            unsigned char two[2] = {e & 255, e >> 8 & 255};
            if (s->entry_bytes == 2) put(&b, two, 2);
            else put_u32(&b, e);
        }
        while (b.n % 4) put(&b, "\0", 1);
    }
    return b;
}

static int write_bytes(const char *path, const bytes *b) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(b->p, 1, b->n, f);
    return fclose(f) == 0 && w == b->n ? 0 : -1;
}

static spec random_spec(int V, int per, int n_frequent) {
    spec s = {.V = V, .n_frequent = n_frequent, .n_tables = 2, .per = per, .entry_bytes = 2, .target = {5, 6}};
    for (int i = 0; i < n_frequent; i++) s.frequent[i] = 8 + (int)rnd((unsigned)(V - 8));
    for (int t = 0; t < s.n_tables; t++) {
        s.entries[t] = malloc((size_t)V * per * sizeof *s.entries[t]);
        for (int v = 0; v < V * per; v++) s.entries[t][v] = 8 + (int)rnd((unsigned)(V - 8));
    }
    return s;
}

static void spec_free(spec *s) {
    for (int t = 0; t < s->n_tables; t++) free(s->entries[t]);
}

/* Loads b as a shortlist for cfg; NULL with err set when refused. */
static dmt_shortlist *load_bytes(const char *dir, const bytes *b, const dmt_config *cfg, char *err, size_t errlen) {
    char path[600];
    snprintf(path, sizeof path, "%s/case.bin", dir);
    if (write_bytes(path, b)) {
        snprintf(err, errlen, "cannot write %.300s", path);
        return NULL;
    }
    return dmt_shortlist_load(path, cfg, err, errlen);
}

static void set_u32(bytes *b, size_t at, uint32_t v) {
    unsigned char x[4] = {v & 255, v >> 8 & 255, v >> 16 & 255, v >> 24 & 255};
    memcpy(b->p + at, x, 4);
}

static void file_tests(const char *tmp, const dmt_config *cfg) {
    char err[512];
    spec s = random_spec(cfg->vocab_size, 3, 4); /* 80 pieces x 3 = 240 entries: 2-byte ones end a word early */
    s.per = 3;
    s.entry_bytes = 4;
    bytes wide = encode(&s);
    dmt_shortlist *sl = load_bytes(tmp, &wide, cfg, err, sizeof err);
    CHECK(sl != NULL, "a valid shortlist with 4-byte entries loads", "%s", err);
    dmt_shortlist_free(sl);
    free(wide.p);
    s.entry_bytes = 2;
    s.per = 1; /* 80 entries: 160 bytes, a multiple of 4 */
    bytes even = encode(&s);
    sl = load_bytes(tmp, &even, cfg, err, sizeof err);
    CHECK(sl != NULL, "a valid shortlist with 2-byte entries and no padding loads", "%s", err);
    dmt_shortlist_free(sl);
    free(even.p);
    s.per = 3;
    s.extra = 1; /* 241 entries: 482 bytes and 2 of padding */
    bytes good = encode(&s);
    sl = load_bytes(tmp, &good, cfg, err, sizeof err);
    CHECK(sl != NULL, "a valid shortlist with 2-byte entries and padding loads", "%s", err);
    dmt_shortlist_free(sl);

    size_t table0 = 24 + 4 * (size_t)s.n_frequent, start0 = table0 + 8,
           entries0 = start0 + 4 * ((size_t)s.V + 1), padding0 = entries0 + ((size_t)s.V * s.per + 1) * 2,
           table1 = padding0 + 2;
    struct {
        const char *what, *needle;
        size_t at;
        uint32_t value;
        long resize; /* bytes added (> 0) or removed (< 0) at the end */
    } cases[] = {
        {"a wrong magic", "not a deepmt shortlist", 0, 0x4c534d44, 0},
        {"another vocabulary size", "vocabulary of", 8, (uint32_t)s.V + 1, 0},
        {"no tables", "tables", 16, 0, 0},
        {"entries of 3 bytes", "entries of 3 bytes", 20, 3, 0},
        {"more frequent pieces than fit", "frequent pieces do not fit", 12, 1u << 30, 0},
        {"a frequent piece outside the vocabulary", "outside the vocabulary", 24, (uint32_t)s.V, 0},
        {"a table for a token that is no language", "none of config.json's languages", table0, 3, 0},
        {"offsets not starting at 0", "offsets do not run", start0, 1, 0},
        {"an offset that decreases", "decreases", start0 + 4 * 10, 0, 0},
        {"an entry outside the vocabulary", "outside the vocabulary", entries0 + 2 * 5, (uint32_t)s.V + 3, 0},
        {"a padding byte set", "padding is not zero", padding0 - 2, (uint32_t)8 | 1u << 16, 0},
        {"the second table for a token that is no language", "none of config.json's languages", table1, 99, 0},
        {"a byte missing", "", 0, 0, -1},
        {"a table cut short", "cut short", 0, 0, -(long)(good.n - entries0 + 4 * ((size_t)s.V + 1) + 4)},
        {"bytes after the last table", "after the last table", 0, 0, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        bytes b = {0};
        put(&b, good.p, good.n);
        if (cases[c].resize > 0) for (long i = 0; i < cases[c].resize; i++) put(&b, "\0", 1);
        else if (cases[c].resize < 0) b.n -= (size_t)(-cases[c].resize);
        else set_u32(&b, cases[c].at, cases[c].value);
        err[0] = 0;
        sl = load_bytes(tmp, &b, cfg, err, sizeof err);
        char what[200];
        snprintf(what, sizeof what, "refused: %s (says so)", cases[c].what);
        CHECK(!sl && strstr(err, cases[c].needle) && strstr(err, "case.bin"), what, "%s", sl ? "loaded" : err);
        dmt_shortlist_free(sl);
        free(b.p);
    }
    /* two tables for one language */
    spec d = s;
    d.target[1] = d.target[0];
    bytes dup = encode(&d);
    sl = load_bytes(tmp, &dup, cfg, err, sizeof err);
    CHECK(!sl && strstr(err, "both for token"), "refused: two tables for one language", "%s", sl ? "loaded" : err);
    dmt_shortlist_free(sl);
    free(dup.p);

    /* a sentence's candidates */
    sl = load_bytes(tmp, &good, cfg, err, sizeof err);
    int32_t src[] = {20, 33, 20, cfg->eos_id};
    uint64_t allow[2] = {0}, want[2] = {0};
    int words = sl ? dmt_shortlist_words(sl) : 0;
    int has = sl && words == (cfg->vocab_size + 63) / 64 && dmt_shortlist_sentence(sl, 6, src, 4, allow);
    for (int i = 0; i < s.n_frequent; i++) want[s.frequent[i] / 64] |= 1ull << (s.frequent[i] % 64);
    for (int p = 0; p < 4; p++) {
        int v = src[p];
        want[v / 64] |= 1ull << (v % 64);
        for (int e = 0; e < s.per; e++) {
            int t = s.entries[1][v * s.per + e];
            want[t / 64] |= 1ull << (t % 64);
        }
    }
    want[cfg->eos_id / 64] |= 1ull << (cfg->eos_id % 64);
    CHECK(has && !memcmp(allow, want, sizeof want),
          "a sentence's candidates: its pieces' entries, the frequent pieces, its own pieces and </s>");
    /* </s>'s entries (the target language's own frequent pieces) also for a source
     * without </s>: the same candidates plus </s> itself */
    uint64_t allow3[2] = {0};
    int has3 = sl && dmt_shortlist_sentence(sl, 6, src, 3, allow3);
    CHECK(has3 && !memcmp(allow3, want, sizeof want), "a source without </s> still gets </s>'s entries");
    uint64_t untouched[2] = {7, 7};
    CHECK(sl && !dmt_shortlist_sentence(sl, 4, src, 4, untouched) && untouched[0] == 7,
          "a target without a table: no candidates (the whole vocabulary)");
    CHECK(sl && !dmt_shortlist_sentence(sl, -1, src, 4, untouched), "no target language: no candidates");
    dmt_shortlist_free(sl);
    free(good.p);
    spec_free(&s);
}

/* ----------------------------------------------------------------- search -- */

typedef struct {
    int n;
    int32_t *src[40];
    int len[40], forced[40];
} batch;

static void random_batch(batch *b, int n, const dmt_config *c, int max_body) {
    b->n = n;
    int lo = 4 + c->n_languages;
    static const int targets[] = {5, 6, 5, 6, 4, -1}; /* de, fr (tables), en and none (no table) */
    for (int i = 0; i < n; i++) {
        int body = 1 + (int)rnd((unsigned)max_body);
        b->len[i] = body + 1;
        b->src[i] = malloc((size_t)b->len[i] * sizeof *b->src[i]);
        for (int t = 0; t < body; t++) b->src[i][t] = lo + (int)rnd((unsigned)(c->vocab_size - lo));
        b->src[i][body] = c->eos_id;
        b->forced[i] = targets[rnd(6)];
    }
}

static void batch_free(batch *b) {
    for (int i = 0; i < b->n; i++) free(b->src[i]);
}

static int search(dmt_state *st, const batch *b, int from, int n, const dmt_beam_options *o, dmt_nbest *out) {
    char err[256];
    return dmt_beam_search(st, n, (const int32_t *const *)&b->src[from], &b->len[from], &b->forced[from], o, out, err,
                           sizeof err);
}

static int same_nbest(const dmt_nbest *a, const dmt_nbest *b, float tol) {
    if (a->n != b->n) return 0;
    for (int r = 0; r < a->n; r++)
        if (a->hyps[r].n_tokens != b->hyps[r].n_tokens ||
            memcmp(a->hyps[r].tokens, b->hyps[r].tokens, (size_t)a->hyps[r].n_tokens * sizeof(int32_t)) ||
            !(fabsf(a->hyps[r].score - b->hyps[r].score) <= tol))
            return 0;
    return 1;
}

static int near_tie(const dmt_nbest *a, const dmt_nbest *b) { return fminf(a->min_gap, b->min_gap) < 1e-4f; }

/* Greedy decoding by hand over the whole vocabulary (no restriction on the state):
 * log-softmax, then the sentence's candidates only, normalised over them and the
 * sample pieces outside them, each weighted by (pieces outside) / (sample pieces
 * outside) (with_sample 0: over the candidates alone), <pad>/<s> never,
 * </s> not before min_len. The tokens into out, the count; *score the mean
 * log-probability (length penalty 1). */
static int greedy_masked(dmt_state *st, const dmt_model *m, const int32_t *src, int len, int forced,
                         const uint64_t *allow, int with_sample, const dmt_beam_options *o, int32_t *out,
                         float *score) {
    const dmt_config *c = &m->cfg;
    int V = c->vocab_size, plen = forced >= 0 ? 2 : 1, hyp = 0, n = 0;
    int max_len = (int)floor((double)o->max_len_a * len + o->max_len_b);
    if (max_len > c->max_positions - plen + 1) max_len = c->max_positions - plen + 1;
    float *lp = malloc((size_t)V * sizeof *lp);
    char err[256];
    int n_allow = 0, n_sample = 0;
    for (int v = 0; v < V; v++) {
        int in = allow[v / 64] >> (v % 64) & 1;
        n_allow += in;
        n_sample += !in && dmt_shortlist_in_sample(v);
    }
    double weight = with_sample && n_sample ? (double)(V - n_allow) / n_sample : 0;
    double total = 0;
    if (dmt_encode(st, 1, &src, &len, err, sizeof err) ||
        dmt_decode_begin(st, 1, &hyp, 1, plen + max_len, err, sizeof err)) {
        free(lp);
        return -1;
    }
    int32_t tok = c->decoder_start_id;
    dmt_decode_step(st, &tok, lp);
    if (forced >= 0) { tok = forced; dmt_decode_step(st, &tok, lp); }
    while (n < max_len) {
        double mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++)
            if (allow[v / 64] >> (v % 64) & 1 && lp[v] > mx) mx = lp[v];
        for (int v = 0; v < V; v++)
            if (allow[v / 64] >> (v % 64) & 1)
                sum += exp(lp[v] - mx);
            else if (dmt_shortlist_in_sample(v))
                sum += weight * exp(lp[v] - mx);
        int best = -1;
        for (int v = 0; v < V; v++) {
            if (!(allow[v / 64] >> (v % 64) & 1)) continue;
            if (v == c->pad_id || v == c->bos_id || (v == c->eos_id && n + 1 <= o->min_len)) continue;
            if (best < 0 || lp[v] > lp[best]) best = v;
        }
        total += lp[best] - (mx + log(sum));
        if (best == c->eos_id) break;
        out[n++] = best;
        if (n < max_len) { tok = best; dmt_decode_step(st, &tok, lp); }
    }
    *score = (float)(total / (n < max_len ? n + 1 : n));
    free(lp);
    return n;
}

static void search_tests(const dmt_model *m, const dmt_model *plain, const dmt_shortlist *sl) {
    const dmt_config *c = &m->cfg;
    dmt_state *st = dmt_state_new(m), *st_plain = dmt_state_new(plain);
    int words = dmt_shortlist_words(sl);
    uint64_t *allow = calloc((size_t)words, sizeof *allow);
    enum { B = 36 };
    batch b;
    random_batch(&b, B, c, 20);

    /* greedy by hand vs the shortlisted search, beam 1 */
    dmt_beam_options g = dmt_beam_options_default(c);
    g.beam_size = 1;
    g.max_repeats = 0;
    g.length_penalty = 1.0f;
    int agree = 0, tried = 0, near = 0, ran = 1, candidates_alone = 0;
    for (int i = 0; i < B && ran; i++) {
        if (!dmt_shortlist_sentence(sl, b.forced[i], b.src[i], b.len[i], allow)) continue;
        int32_t hand[128], alone[128];
        float hand_score = 0, alone_score = 0;
        int n = greedy_masked(st_plain, plain, b.src[i], b.len[i], b.forced[i], allow, 1, &g, hand, &hand_score);
        int n_alone = greedy_masked(st_plain, plain, b.src[i], b.len[i], b.forced[i], allow, 0, &g, alone,
                                    &alone_score);
        dmt_nbest got;
        ran = n >= 0 && n_alone >= 0 && search(st, &b, i, 1, &g, &got) == 0;
        if (!ran) break;
        tried++;
        if (got.hyps[0].n_tokens == n && !memcmp(got.hyps[0].tokens, hand, (size_t)n * sizeof *hand) &&
            fabsf(got.hyps[0].score - hand_score) <= 1e-4f)
            agree++;
        else if (got.min_gap < 1e-4f)
            near++;
        candidates_alone += fabsf(got.hyps[0].score - alone_score) <= 1e-4f;
        dmt_nbest_clear(&got);
    }
    CHECK(ran && tried >= 10 && agree + near == tried,
          "greedy: the shortlisted search = greedy by hand over the whole vocabulary masked to the candidates and "
          "normalised by the sample's estimate (tokens, scores within 1e-4)",
          "%d of %d agree, %d near-ties", agree, tried, near);
    CHECK(ran && candidates_alone < tried / 2,
          "greedy: normalising over the candidates alone would give other scores (the check above can fail)",
          "%d of %d within 1e-4", candidates_alone, tried);

    /* beam 4, n-best 2: every token a candidate; alone = batched (mixed languages), bit
     * for bit: the batch scores the union of its sentences' candidates, and a column's
     * products do not depend on which others are scored (test_gemm) nor a row's on its
     * mates (test_beam). The generic level's F32 products are OpenBLAS's, whose rounding
     * changes with the matrix shape: there scores within 1e-4, other words at near-ties. */
    int exact = dmt_gemm_layout(dmt_kernels_active(), m->precision) != DMT_LAYOUT_ROWS; /* not OpenBLAS's */
    float tol = exact ? 0.0f : 1e-4f;
    dmt_beam_options o = dmt_beam_options_default(c);
    o.beam_size = 4;
    o.nbest = 2;
    dmt_nbest all[B], one;
    ran = search(st, &b, 0, B, &o, all) == 0;
    int outside = 0, differ = 0, ties = 0;
    for (int i = 0; ran && i < B; i++) {
        if (dmt_shortlist_sentence(sl, b.forced[i], b.src[i], b.len[i], allow))
            for (int r = 0; r < all[i].n; r++)
                for (int t = 0; t < all[i].hyps[r].n_tokens; t++) {
                    int v = all[i].hyps[r].tokens[t];
                    outside += !(allow[v / 64] >> (v % 64) & 1);
                }
        if (search(st, &b, i, 1, &o, &one)) { ran = 0; break; }
        if (!same_nbest(&one, &all[i], tol)) {
            if (!exact && near_tie(&one, &all[i])) ties++;
            else differ++;
        }
        dmt_nbest_clear(&one);
    }
    CHECK(ran && outside == 0, "beam 4: every token of every hypothesis is a candidate of its sentence",
          "%d tokens outside", outside);
    CHECK(ran && differ == 0,
          exact ? "a sentence alone = the same sentence in a batch of 36 with other languages, with and without "
                  "tables (bit for bit)"
                : "a sentence alone = the same sentence in a batch of 36 with other languages, with and without "
                  "tables (OpenBLAS products: within 1e-4, near-ties aside)",
          "%d differ beyond near-ties (%d near-ties)", differ, ties);

    /* a beam session: sentences joining and leaving = each alone */
    dmt_state *ss = dmt_state_new(m);
    char err[256] = "";
    dmt_beam_session *ses = dmt_beam_session_new(ss, &o, 5, err, sizeof err);
    int next = 0, steps = 0, finished = 0, bad = 0;
    ran = ses != NULL;
    while (ran && (next < B || dmt_beam_session_active(ses) > 0) && steps < 5000) {
        int want = steps % 2 == 0 ? 1 : 0, room = dmt_beam_session_room(ses);
        if (want > room) want = room;
        if (want > B - next) want = B - next;
        if (want) {
            int tag = next;
            ran = dmt_beam_session_admit(ses, 1, (const int32_t *const *)&b.src[next], &b.len[next], &b.forced[next],
                                         &tag, err, sizeof err) == 0;
            next++;
        }
        ran = ran && dmt_beam_session_step(ses, err, sizeof err) == 0;
        int tag;
        dmt_nbest nb;
        while (ran && dmt_beam_session_take(ses, &tag, &nb)) {
            finished++;
            bad += !same_nbest(&nb, &all[tag], tol) && !(!exact && near_tie(&nb, &all[tag]));
            dmt_nbest_clear(&nb);
        }
        steps++;
    }
    CHECK(ran && finished == B && bad == 0, "beam session with a shortlist: each sentence = the same sentence alone",
          "%s; %d finished, %d differ", err, finished, bad);
    dmt_beam_session_free(ses);
    dmt_state_free(ss);

    /* the same batch without the shortlist differs somewhere (else the checks above
     * could not fail) */
    dmt_nbest free_out[B];
    int changed = 0;
    if (ran && search(st_plain, &b, 0, B, &o, free_out) == 0) {
        for (int i = 0; i < B; i++) {
            changed += !same_nbest(&free_out[i], &all[i], 1e-4f);
            dmt_nbest_clear(&free_out[i]);
        }
    }
    CHECK(changed > 0, "the shortlist changes some translations of this random model (the checks can fail)",
          "none changed");
    for (int i = 0; ran && i < B; i++) dmt_nbest_clear(&all[i]);
    batch_free(&b);
    free(allow);
    dmt_state_free(st);
    dmt_state_free(st_plain);
}

/* A shortlist whose frequent pieces are the whole vocabulary changes nothing. */
static void allow_all_test(const char *tmp, const dmt_model *plain) {
    const dmt_config *c = &plain->cfg;
    char err[512], path[600];
    spec s = random_spec(c->vocab_size, 1, 0);
    bytes b = encode(&s);
    /* rewrite with every piece frequent */
    bytes all = {0};
    put(&all, b.p, 12);
    put_u32(&all, (uint32_t)c->vocab_size);
    put(&all, b.p + 16, 8);
    for (int v = 0; v < c->vocab_size; v++) put_u32(&all, (uint32_t)v);
    put(&all, b.p + 24, b.n - 24);
    snprintf(path, sizeof path, "%s/all.bin", tmp);
    write_bytes(path, &all);
    dmt_shortlist *sl = dmt_shortlist_load(path, c, err, sizeof err);
    dmt_model m = *plain; /* the same weights, this shortlist */
    m.shortlist = sl;
    dmt_state *a = dmt_state_new(&m), *p = dmt_state_new(plain);
    batch bt;
    random_batch(&bt, 24, c, 20);
    dmt_beam_options o = dmt_beam_options_default(c);
    o.beam_size = 4;
    o.nbest = 2;
    dmt_nbest x[24], y[24];
    int ok = sl && search(a, &bt, 0, 24, &o, x) == 0 && search(p, &bt, 0, 24, &o, y) == 0, differ = 0;
    for (int i = 0; ok && i < 24; i++) {
        differ += !same_nbest(&x[i], &y[i], 1e-4f) && !near_tie(&x[i], &y[i]);
        dmt_nbest_clear(&x[i]);
        dmt_nbest_clear(&y[i]);
    }
    CHECK(ok && differ == 0, "a shortlist allowing every piece gives the translations of none", "%s; %d differ",
          sl ? "ran" : err, differ);
    batch_free(&bt);
    dmt_state_free(a);
    dmt_state_free(p);
    dmt_shortlist_free(sl);
    free(b.p);
    free(all.p);
    spec_free(&s);
}

static int near_or_same(float a, float b, int exact) {
    return exact ? !memcmp(&a, &b, sizeof a) : fabsf(a - b) <= 1e-5f * (1.0f + fabsf(b));
}

/* dmt_vocab: what the state scores follows the sentences in. */
static void vocab_tests(const dmt_model *m, const dmt_shortlist *sl) {
    const dmt_config *c = &m->cfg;
    dmt_state *st = dmt_state_new(m);
    dmt_vocab *v = dmt_vocab_new(sl, 4);
    int words = dmt_shortlist_words(sl);
    uint64_t *a0 = calloc((size_t)words, 8), *a1 = calloc((size_t)words, 8);
    int32_t s0[] = {10, 11, c->eos_id}, s1[] = {40, 41, 42, 43, c->eos_id};
    dmt_shortlist_sentence(sl, 5, s0, 3, a0);
    dmt_shortlist_sentence(sl, 6, s1, 5, a1);
    /* what is scored: the candidates and the normaliser's sample */
    for (int t = 0; t < c->vocab_size; t++)
        if (dmt_shortlist_in_sample(t)) {
            a0[t / 64] |= 1ull << (t % 64);
            a1[t / 64] |= 1ull << (t % 64);
        }
    int n0 = 0, n01 = 0;
    for (int w = 0; w < words; w++) {
        n0 += __builtin_popcountll(a0[w]);
        n01 += __builtin_popcountll(a0[w] | a1[w]);
    }
    int n, ok = v != NULL;
    const int32_t *col_of;
    dmt_vocab_join(v, 0, 5, s0, 3);
    ok = ok && dmt_vocab_sync(v, st) == 0;
    const int32_t *cols = dmt_vocab_cols(v, &n, &col_of);
    int exact = ok && cols && n == n0 && dmt_state_vocab_size(st) == n0;
    for (int j = 0; exact && j < n; j++) exact = (a0[cols[j] / 64] >> (cols[j] % 64) & 1) && col_of[cols[j]] == j;
    CHECK(exact, "one sentence in: the state scores exactly its candidates and the sample, ascending",
          "%d scored, %d candidates", dmt_state_vocab_size(st), n0);
    /* the logits of one step over the first sentence's columns, to compare after */
    int32_t bos = c->bos_id;
    const int32_t *src0 = s0;
    int len0 = 3, hyp0 = 0;
    float *lp_before = malloc((size_t)c->vocab_size * sizeof(float)), *lp = malloc((size_t)c->vocab_size * sizeof(float));
    int stepped = ok && dmt_encode(st, 1, &src0, &len0, NULL, 0) == 0 &&
                  dmt_decode_begin(st, 1, &hyp0, 1, 2, NULL, 0) == 0 && dmt_decode_step(st, &bos, lp_before) == 0;
    dmt_vocab_join(v, 1, 6, s1, 5);
    ok = ok && dmt_vocab_sync(v, st) == 0;
    cols = dmt_vocab_cols(v, &n, &col_of);
    /* its pieces come as new columns after the first sentence's: each piece of the
     * union once, col_of its column */
    int added_ok = ok && cols && n == n01;
    for (int j = 0; added_ok && j < n; j++)
        added_ok = ((a0[cols[j] / 64] | a1[cols[j] / 64]) >> (cols[j] % 64) & 1) && col_of[cols[j]] == j &&
                   (j < n0) == ((a0[cols[j] / 64] >> (cols[j] % 64) & 1) != 0);
    CHECK(added_ok && dmt_state_vocab_size(st) == n01 && dmt_vocab_rebuilds(v) == 1 && dmt_vocab_additions(v) == 1,
          "a second sentence needing more: its pieces are added as columns after the first's (the union scored, "
          "nothing gathered again)",
          "%d scored, want %d; %d rebuilds, %d additions", dmt_state_vocab_size(st), n01, dmt_vocab_rebuilds(v),
          dmt_vocab_additions(v));
    /* the same step again: each column's logit is its piece's, bit for bit, old
     * columns and added ones */
    int same_logits = stepped && dmt_decode_begin(st, 1, &hyp0, 1, 2, NULL, 0) == 0 &&
                      dmt_decode_step(st, &bos, lp) == 0;
    float *lp_full = malloc((size_t)c->vocab_size * sizeof(float));
    dmt_state *full = dmt_state_new(m);
    same_logits = same_logits && full && dmt_encode(full, 1, &src0, &len0, NULL, 0) == 0 &&
                  dmt_decode_begin(full, 1, &hyp0, 1, 2, NULL, 0) == 0 && dmt_state_restrict_vocab(full, 0, NULL, 1) == 0;
    int32_t *every = malloc((size_t)c->vocab_size * sizeof *every);
    for (int t = 0; t < c->vocab_size; t++) every[t] = t;
    same_logits = same_logits && dmt_state_restrict_vocab(full, c->vocab_size, every, 1) == 0 &&
                  dmt_decode_step(full, &bos, lp_full) == 0;
    /* the packed layouts give a column the same bits wherever it sits; OpenBLAS's
     * (the generic level's row layout) rounds by the matrix's width */
    int packed = dmt_gemm_layout(dmt_kernels_active(), m->precision) != DMT_LAYOUT_ROWS;
    for (int j = 0; same_logits && j < n; j++)
        same_logits = near_or_same(lp[j], lp_full[cols[j]], packed) &&
                      (j >= n0 || near_or_same(lp[j], lp_before[j], packed));
    CHECK(same_logits, packed ? "after the addition every column scores its piece as the whole vocabulary does, bit for bit"
                             : "after the addition every column scores its piece as the whole vocabulary does (OpenBLAS "
                               "products: within 1e-5)");
    free(lp_before), free(lp), free(lp_full), free(every);
    dmt_state_free(full);
    dmt_vocab_leave(v, 1);
    ok = ok && dmt_vocab_sync(v, st) == 0;
    int shrank = dmt_state_vocab_size(st) == n0 || n01 <= n0 + n0 / 4 + 64;
    CHECK(ok && shrank, "after it leaves, the columns shrink back when much less is needed (or stay: few extra)",
          "%d scored, %d needed", dmt_state_vocab_size(st), n0);
    dmt_vocab_join(v, 2, 4, s0, 3); /* English: no table */
    ok = ok && dmt_vocab_sync(v, st) == 0;
    CHECK(ok && dmt_state_vocab_size(st) == c->vocab_size, "a sentence without a table: the whole vocabulary",
          "%d scored", dmt_state_vocab_size(st));
    dmt_vocab_leave(v, 2);
    dmt_vocab_leave(v, 2); /* twice: ignored */
    ok = ok && dmt_vocab_sync(v, st) == 0;
    CHECK(ok && dmt_state_vocab_size(st) == n0, "once it leaves, the candidates again", "%d scored",
          dmt_state_vocab_size(st));
    int32_t bad[] = {3, 3}, one[] = {3}, out_of_range[] = {c->vocab_size};
    CHECK(dmt_state_restrict_vocab(st, 2, bad, 0) == -1 && dmt_state_vocab_size(st) == c->vocab_size,
          "dmt_state_restrict_vocab refuses ids that are not ascending (and scores the whole vocabulary)");
    CHECK(dmt_state_extend_vocab(st, 1, one) == -1 && dmt_state_vocab_size(st) == c->vocab_size,
          "dmt_state_extend_vocab refuses when nothing is restricted");
    int32_t two[] = {1, 2};
    CHECK(dmt_state_restrict_vocab(st, 2, two, 1) == 0 && dmt_state_extend_vocab(st, 1, out_of_range) == -1 &&
              dmt_state_extend_vocab(st, 1, (int32_t[]){-1}) == -1 && dmt_state_vocab_size(st) == 2,
          "dmt_state_extend_vocab refuses a piece out of range, the restriction unchanged");
    dmt_vocab_free(v);
    dmt_state_free(st);
    free(a0);
    free(a1);
}

/* Rules that leave a sentence nothing to generate (no token twice, no </s> before a
 * length its few candidates cannot reach): the beams as they stand come back, not an
 * empty result ("no translation found"). */
static void dead_end_test(const dmt_model *m) {
    const dmt_config *c = &m->cfg;
    dmt_state *st = dmt_state_new(m);
    enum { B = 24 };
    batch b;
    random_batch(&b, B, c, 4);
    dmt_beam_options o = dmt_beam_options_default(c);
    o.beam_size = 2;
    o.nbest = 1;
    o.no_repeat_ngram_size = 1;
    o.min_len = 1000000;
    o.max_len_a = 0;
    o.max_len_b = 1000;
    dmt_nbest out[B];
    memset(out, 0, sizeof out);
    int ok = search(st, &b, 0, B, &o, out) == 0, empty = 0, cornered = 0, repeats = 0;
    for (int i = 0; ok && i < B; i++) {
        empty += out[i].n == 0;
        if (out[i].n == 0) continue;
        const dmt_hypothesis *h = &out[i].hyps[0];
        cornered += h->n_tokens < 40; /* a shortlisted sentence has ~20 candidates; max_len is 60+ */
        for (int x = 0; x < h->n_tokens; x++)
            for (int y = x + 1; y < h->n_tokens; y++) repeats += h->tokens[x] == h->tokens[y];
    }
    CHECK(ok && empty == 0 && cornered > 0 && repeats == 0,
          "every candidate masked: the beams as they stand are the translation (none comes back empty)",
          "%d of %d empty, %d cornered, %d repeated tokens", empty, B, cornered, repeats);
    for (int i = 0; i < B; i++) dmt_nbest_clear(&out[i]);
    batch_free(&b);
    dmt_state_free(st);
}

int main(void) {
    char dir[512], err[512], tmp[] = "/tmp/deepmt-shortlist-XXXXXX";
    fixture_path(dir, sizeof dir, "beam/deepnorm-6x6");
    dmt_model *plain = dmt_model_load(dir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    if (!CHECK(plain && mkdtemp(tmp), "fixture model loads", "%s", err)) return check_done();
    file_tests(tmp, &plain->cfg);

    /* the same model directory with a shortlist.bin: config and weights linked */
    char mdir[600], path[700], target[1024];
    snprintf(mdir, sizeof mdir, "%s/model", tmp);
    mkdir(mdir, 0755);
    const char *files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char rel[600];
        snprintf(rel, sizeof rel, "%s/%s", dir, files[i]);
        snprintf(path, sizeof path, "%s/%s", mdir, files[i]);
        if (!realpath(rel, target) || symlink(target, path)) break;
    }
    spec s = random_spec(plain->cfg.vocab_size, 2, 3);
    bytes b = encode(&s);
    snprintf(path, sizeof path, "%s/shortlist.bin", mdir);
    write_bytes(path, &b);
    dmt_model *m = dmt_model_load(mdir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    CHECK(m && m->shortlist, "a model directory with shortlist.bin loads it", "%s", err);
    dmt_model *off = dmt_model_load(mdir, (dmt_load_options){.ids_only = 1, .no_shortlist = 1}, err, sizeof err);
    CHECK(off && !off->shortlist, "no_shortlist: the file is ignored", "%s", err);
    dmt_model_free(off);
    if (m && m->shortlist) {
        search_tests(m, plain, m->shortlist);
        vocab_tests(m, m->shortlist);
        dead_end_test(m);
    }
    allow_all_test(tmp, plain);

    /* a broken shortlist.bin fails the load, naming the file */
    set_u32(&b, 8, (uint32_t)plain->cfg.vocab_size + 1);
    write_bytes(path, &b);
    dmt_model *broken = dmt_model_load(mdir, (dmt_load_options){.ids_only = 1}, err, sizeof err);
    CHECK(!broken && strstr(err, "shortlist.bin"), "a broken shortlist.bin fails the model's load, naming it", "%s",
          broken ? "loaded" : err);
    dmt_model_free(broken);
    dmt_model_free(m);
    dmt_model_free(plain);
    free(b.p);
    spec_free(&s);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "# could not remove %s\n", tmp);
    return check_done();
}
