/* beam.c — batched beam search (beam.h has the rules, docs/decoding.md the why).
 *
 * Layout: the sentences still decoding ("active") sit in the state's hypothesis
 * rows in order, `width` rows each; row a*width + j is beam j of active sentence a.
 * width is 1 while every sentence is still reading its prefix (</s> __tgt__): all
 * its beams would be the same row, so the decoder runs one row per sentence and the
 * reorder after the first generated token fans out to k. From then on width = k. A
 * beam with score -inf is an empty slot (a sentence with fewer than k live
 * candidates, or beams 1.. of a sentence still in its prefix when another sentence
 * already generates): its row is still fed, but it never yields a candidate. Each step writes the next layout into the other half of the
 * double-buffered histories and scores, then dmt_decode_reorder gathers the KV
 * cache to match; sentences that stopped are simply not carried over.
 *
 * tools/dmt/beam.py is the same search written plainly, one sentence at a time.
 */
#include "model/beam.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/shortlist.h"

dmt_beam_options dmt_beam_options_default(const dmt_config *cfg) {
    const dmt_decoding_defaults *d = &cfg->decoding;
    return (dmt_beam_options){.beam_size = d->beam_size,
                              .length_penalty = d->length_penalty,
                              .max_len_a = d->max_len_a,
                              .max_len_b = d->max_len_b,
                              .min_len = d->min_len,
                              .nbest = 1,
                              .no_repeat_ngram_size = d->no_repeat_ngram_size,
                              .max_repeats = d->max_repeats,
                              .copy_numbers = d->copy_numbers};
}

int dmt_beam_options_check(const dmt_beam_options *o, char *err, size_t errlen) {
    const char *bad = NULL;
    if (o->beam_size < 1 || o->beam_size > DMT_BEAM_MAX_SIZE) bad = "beam_size must be between 1 and %d";
    else if (!(o->length_penalty >= -10.0f && o->length_penalty <= 10.0f))
        bad = "length_penalty must be a number between -10 and 10";
    else if (!(o->max_len_a >= 0.0f && o->max_len_a <= 1000.0f)) bad = "max_len_a must be a number between 0 and 1000";
    else if (o->max_len_b < 0 || o->max_len_b > 1000000) bad = "max_len_b must be between 0 and 1000000";
    else if (o->min_len < 0 || o->min_len > 1000000) bad = "min_len must be between 0 and 1000000";
    else if (o->nbest < 1 || o->nbest > o->beam_size) {
        snprintf(err, errlen, "nbest must be between 1 and beam_size (%d here; raise the beam with it)", o->beam_size);
        return -1;
    }
    else if (o->no_repeat_ngram_size < 0 || o->no_repeat_ngram_size > 1000000)
        bad = "no_repeat_ngram_size must be between 0 and 1000000 (0 = off)";
    else if (o->max_repeats < 0 || o->max_repeats > 1000) bad = "max_repeats must be between 0 and 1000 (0 = off)";
    if (!bad) return 0;
    snprintf(err, errlen, bad, DMT_BEAM_MAX_SIZE);
    return -1;
}

void dmt_nbest_clear(dmt_nbest *nb) {
    if (!nb) return;
    for (int i = 0; nb->hyps && i < nb->n; i++) {
        free(nb->hyps[i].tokens);
        free(nb->hyps[i].align);
    }
    free(nb->hyps);
    nb->hyps = NULL;
    nb->n = 0;
}

/* ------------------------------------------------------------------ state -- */

typedef struct {
    float score; /* beam sum + log-prob */
    int32_t tok;
    int beam;    /* beam index within the sentence */
} cand;

typedef struct {
    float score; /* length-normalised */
    int len;     /* generated tokens (no </s>) */
    int seq;     /* insertion order: ties go to the earlier one */
} pooled;

typedef struct {
    const dmt_model *m;
    dmt_beam_options o;
    int n, k, V, L;             /* sentences, beam, vocab, longest max_len */
    const int32_t *const *src;  /* [n] source ids (the repetition guard's exceptions) */
    const int *src_len;         /* [n] including </s> */
    int width;                  /* rows per active sentence now: 1 (all in prefix) or k */
    /* per sentence */
    int *plen, *max_len;        /* prefix length (1 or 2), max generated tokens */
    int32_t *prefix;            /* [n][2] decoder start, forced token */
    int *n_pool, *n_fin;        /* pooled hypotheses, of which finished with </s> */
    pooled *pool;               /* [n][2k] */
    int32_t *pool_tok;          /* [n][2k][L] */
    int32_t *pool_al;           /* [n][2k][L] their alignments */
    float *gap;                 /* [n] smallest decision gap so far */
    int *active;                /* [n] sentence index of each active slot */
    /* per row (n*k), double-buffered */
    int32_t *hist[2];           /* [n*k][L] generated tokens */
    int32_t *ahist[2];          /* [n*k][L] the source position each was aligned to */
    const int *step_align;      /* [rows] this step's alignments (forward.h) */
    float *cum[2];              /* [n*k] beam sums */
    int32_t *feed;              /* [n*k] tokens fed this step */
    int *parent;                /* [n*k] next row -> current row */
    float *lp;                  /* [n*k][V] log-probs */
    cand *lists;                /* [k][2k+1] each beam's best candidates */
    int *count, *head;          /* [k] list lengths, merge positions */
    cand *merged;               /* [2k+1] the step's best candidates, in order */
    /* vocabulary shortlist (model/shortlist.h): vocab NULL when the model has none */
    dmt_vocab *vocab;
    int n_cols;                 /* length of a log-prob row: V, or the pieces scored */
    const int32_t *cols;        /* [n_cols] the piece of each row entry; NULL: entry = piece */
    const int32_t *col_of;      /* [V] the entry of each piece, -1 when not scored; NULL with cols */
} search;

static void search_free(search *S) {
    void *all[] = {S->plen, S->max_len, S->prefix, S->n_pool, S->n_fin, S->pool, S->pool_tok, S->pool_al, S->gap,
                   S->active, S->hist[0], S->hist[1], S->ahist[0], S->ahist[1], S->cum[0], S->cum[1], S->feed, S->parent,
                   S->lists, S->count, S->head, S->merged};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(all[i]);
    dmt_vocab_free(S->vocab);
    S->vocab = NULL;
}

/* Restricts the state's vocabulary to what the sentences in the batch need (a
 * shortlist), before a decoder step; 0, or -1 out of memory. */
static int sync_vocab(search *S, dmt_state *st) {
    S->n_cols = S->V;
    S->cols = S->col_of = NULL;
    if (!S->vocab) return 0;
    if (dmt_vocab_sync(S->vocab, st)) return -1;
    S->cols = dmt_vocab_cols(S->vocab, &S->n_cols, &S->col_of);
    return 0;
}

/* The row entry of piece tok, -1 when this step does not score it. */
static int entry_of(const search *S, int tok) { return S->col_of ? S->col_of[tok] : tok; }

/* One beam's log-probabilities at a step: val[p] for row entry ent[p], or entry p
 * where ent is NULL, p < n, in piece order either way; every piece not in it is -inf
 * (dmt_vocab_row: a sentence's shortlist candidates, without the rest of the row). */
typedef struct {
    float *val;
    const int32_t *ent;
    int n;
} scores;

static int piece_at(const search *S, const scores *r, int p) {
    int e = r->ent ? r->ent[p] : p;
    return S->cols ? S->cols[e] : e;
}

/* Where piece tok's log-probability is; NULL when it is not a candidate (-inf). */
static float *score_of(const search *S, const scores *r, int tok) {
    int e = entry_of(S, tok);
    if (e < 0) return NULL;
    if (!r->ent) return e < r->n ? r->val + e : NULL;
    int lo = 0, hi = r->n; /* the first candidate piece >= tok */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (piece_at(S, r, mid) < tok) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->n && r->ent[lo] == e ? r->val + lo : NULL;
}

static void ban(const search *S, scores *r, int tok) {
    float *x = score_of(S, r, tok);
    if (x) *x = -INFINITY;
}

/* floor(a * src_len + b), capped by the positions left after the prefix, at least 1. */
static int max_length(const dmt_beam_options *o, int src_len, int plen, int max_positions) {
    double x = floor((double)o->max_len_a * src_len + o->max_len_b);
    double room = (double)max_positions - plen + 1;
    if (x > room) x = room;
    return x < 1 ? 1 : (int)x;
}

static float normalise(float total, int len, float lp) {
    return (float)((double)total / pow((double)len, (double)lp));
}

static int search_init(search *S, dmt_state *st, const dmt_model *m, int n, const int *src_len, const int *forced,
                       const dmt_beam_options *o) {
    memset(S, 0, sizeof *S);
    const dmt_config *c = &m->cfg;
    S->m = m;
    S->o = *o;
    S->n = n;
    S->k = o->beam_size;
    S->V = S->n_cols = c->vocab_size;
    size_t k = (size_t)S->k, rows = (size_t)n * k;
    S->plen = malloc((size_t)n * sizeof *S->plen);
    S->max_len = malloc((size_t)n * sizeof *S->max_len);
    S->prefix = malloc((size_t)n * 2 * sizeof *S->prefix);
    if (!S->plen || !S->max_len || !S->prefix) return -1;
    S->L = 1;
    for (int i = 0; i < n; i++) {
        S->prefix[2 * i] = c->decoder_start_id;
        S->prefix[2 * i + 1] = forced ? forced[i] : -1;
        S->plen[i] = S->prefix[2 * i + 1] >= 0 ? 2 : 1;
        S->max_len[i] = max_length(o, src_len[i], S->plen[i], c->max_positions);
        if (S->max_len[i] > S->L) S->L = S->max_len[i];
    }
    size_t L = (size_t)S->L;
    S->n_pool = calloc((size_t)n, sizeof *S->n_pool);
    S->n_fin = calloc((size_t)n, sizeof *S->n_fin);
    S->pool = malloc((size_t)n * 2 * k * sizeof *S->pool);
    S->pool_tok = malloc((size_t)n * 2 * k * L * sizeof *S->pool_tok);
    S->pool_al = malloc((size_t)n * 2 * k * L * sizeof *S->pool_al);
    S->gap = malloc((size_t)n * sizeof *S->gap);
    S->active = malloc((size_t)n * sizeof *S->active);
    S->feed = malloc(rows * sizeof *S->feed);
    S->parent = malloc(rows * sizeof *S->parent);
    S->lp = dmt_state_logits(st, rows * (size_t)S->V); /* owned by the state */
    S->lists = malloc(k * (2 * k + 1) * sizeof *S->lists);
    S->count = malloc(k * sizeof *S->count);
    S->head = malloc(k * sizeof *S->head);
    S->merged = malloc((2 * k + 1) * sizeof *S->merged);
    for (int b = 0; b < 2; b++) {
        S->hist[b] = malloc(rows * L * sizeof *S->hist[b]);
        S->ahist[b] = malloc(rows * L * sizeof *S->ahist[b]);
        S->cum[b] = malloc(rows * sizeof *S->cum[b]);
        if (!S->hist[b] || !S->ahist[b] || !S->cum[b]) return -1;
    }
    if (!S->n_pool || !S->n_fin || !S->pool || !S->pool_tok || !S->pool_al || !S->gap || !S->active || !S->feed || !S->parent ||
        !S->lp || !S->lists || !S->count || !S->head || !S->merged)
        return -1;
    S->width = 1; /* one row per sentence: beam 0, its prefix */
    for (int i = 0; i < n; i++) {
        S->gap[i] = INFINITY;
        S->active[i] = i;
        S->cum[0][i] = 0.0f;
    }
    return 0;
}

/* --------------------------------------------------------------- one step -- */

/* 1 when seq[0..n) holds `need` tokens in a row of unit[0..p) repeated (the last
 * copy may be cut short). */
static int has_run(const int32_t *seq, int n, const int32_t *unit, int p, int need) {
    for (int s = 0; s + need <= n; s++) {
        int j = 0;
        while (j < need && seq[s + j] == unit[j % p]) j++;
        if (j == need) return 1;
    }
    return 0;
}

/* Repetition guard: hist[0..g) ending in R copies of a unit bans the unit's first
 * token, unless the source has that continuation too: R copies and the unit's
 * first token again (numbers like 1000000, "!!!!", a copied "hahaha" stay
 * possible; "3250000000", whose seven zeros are three copies of "00" and one more,
 * had been cut to "325000000"). A few compares per beam unless a run is already
 * there. */
static void mask_repeats(const search *S, scores *r, const int32_t *hist, int g, int i) {
    int R = S->o.max_repeats;
    const int32_t *src = S->src ? S->src[i] : NULL;
    int n_src = src ? S->src_len[i] - 1 : 0; /* without </s> */
    for (int p = 1; p <= DMT_REPEAT_MAX_UNIT && p * R <= g; p++) {
        const int32_t *unit = hist + g - p;
        int c = 1;
        while (c < R && memcmp(hist + g - (c + 1) * p, unit, (size_t)p * sizeof *unit) == 0) c++;
        float *x = score_of(S, r, unit[0]);
        if (c < R || !x || *x == -INFINITY) continue;
        if (!has_run(src, n_src, unit, p, p * R + 1)) *x = -INFINITY;
    }
}

/* How many maximal runs of digits of seq[0..n) are, digit for digit, run[0..len). */
static int count_runs(const signed char *dig, const int32_t *seq, int n, const int32_t *run, int len) {
    int count = 0;
    for (int s = 0; s < n;) {
        if (dig[seq[s]] < 0) { s++; continue; }
        int e = s;
        while (e < n && dig[seq[e]] >= 0) e++;
        if (e - s == len) {
            int j = 0;
            while (j < len && dig[seq[s + j]] == dig[run[j]]) j++;
            count += j == len;
        }
        s = e;
    }
    return count;
}

/* copy_numbers: digits only as the continuation of a source run of digits (beam.h). */
static void mask_numbers(const search *S, scores *r, const int32_t *hist, int g, int t, int i) {
    const signed char *dig = S->m->digit_of;
    int room = S->max_len[i] - t; /* tokens this hypothesis may still generate after this one */
    const int32_t *src = S->src ? S->src[i] : NULL;
    int n_src = src ? S->src_len[i] - 1 : 0, p = 0;
    while (p < g && dig[hist[g - 1 - p]] >= 0) p++; /* the trailing run of digits */
    const int32_t *run = hist + g - p;
    int open = 0; /* digits the rules before (repeats, n-grams) and the shortlist leave */
    for (int q = 0; q < S->m->n_digit_ids; q++) {
        const float *x = score_of(S, r, S->m->digit_ids[q]);
        if (x && *x > -INFINITY) open |= 1 << dig[S->m->digit_ids[q]];
    }
    int runs = 0;
    for (int s = 0; s < n_src; s++)
        if (dig[src[s]] >= 0 && (s == 0 || dig[src[s - 1]] < 0)) runs++;
    int allowed = 0, complete = p == 0;
    for (int s = 0; s < n_src;) {
        if (dig[src[s]] < 0) { s++; continue; }
        int e = s, j = 0;
        while (e < n_src && dig[src[e]] >= 0) e++;
        while (j < p && s + j < e && dig[src[s + j]] == dig[run[j]]) j++;
        if (j == p) {
            if (e - s == p) complete = 1;
            else if (e - s - p - 1 <= room /* a number it can finish */
                     && (open >> dig[src[s + p]] & 1)
                     /* no number more often than the source has it ("100,000,000,000"
                      * from "100.000"); the count costs the square of the runs */
                     && (runs > DMT_COPY_NUMBERS_MAX_RUNS ||
                         count_runs(dig, hist, g, src + s, e - s) < count_runs(dig, src, n_src, src + s, e - s)))
                allowed |= 1 << dig[src[s + p]];
        }
        s = e;
    }
    /* nothing to continue (a run the source lacks, from a forced prefix; or a number
     * another rule stops): no more digits, and words may follow */
    if (!allowed) complete = 1;
    for (int q = 0; q < S->m->n_digit_ids; q++)
        if (!(allowed >> dig[S->m->digit_ids[q]] & 1)) ban(S, r, S->m->digit_ids[q]);
    if (complete) {
        /* </s> only once every number of the source is written (as often as there);
         * its cost grows with the square of the runs: a source of more than
         * DMT_COPY_NUMBERS_MAX_RUNS (a table of figures) keeps only the rule above */
        float *x_eos = score_of(S, r, S->m->cfg.eos_id);
        if (runs > DMT_COPY_NUMBERS_MAX_RUNS || !x_eos || *x_eos == -INFINITY) return;
        for (int s = 0; s < n_src;) {
            if (dig[src[s]] < 0) { s++; continue; }
            int e = s;
            while (e < n_src && dig[src[e]] >= 0) e++;
            if (count_runs(dig, hist, g, src + s, e - s) < count_runs(dig, src, n_src, src + s, e - s)) {
                *x_eos = -INFINITY;
                return;
            }
            s = e;
        }
        return;
    }
    for (int p = 0; p < r->n; p++) /* inside a number: nothing but its next digit */
        if (dig[piece_at(S, r, p)] < 0) r->val[p] = -INFINITY;
}

/* Masks what may not come next on one beam of sentence i: <pad>, <s>, </s> before
 * min_len, the repetition guard's ban, and tokens that would repeat an n-gram of
 * hist[0..g). */
static void mask_row(const search *S, scores *r, const int32_t *hist, int g, int t, int i) {
    const dmt_config *c = &S->m->cfg;
    if (c->pad_id != c->eos_id) ban(S, r, c->pad_id);
    if (c->bos_id != c->eos_id) ban(S, r, c->bos_id);
    if (t <= S->o.min_len) ban(S, r, c->eos_id);
    if (S->o.max_repeats > 0) mask_repeats(S, r, hist, g, i);
    int ng = S->o.no_repeat_ngram_size;
    if (ng > 0 && g >= ng - 1) {
        const int32_t *tail = hist + g - (ng - 1);
        for (int j = 0; j + ng - 1 < g; j++)
            if (memcmp(hist + j, tail, (size_t)(ng - 1) * sizeof *hist) == 0) ban(S, r, hist[j + ng - 1]);
    }
    /* last: it reads which digits the bans above left */
    if (S->o.copy_numbers && S->m->digit_of) mask_numbers(S, r, hist, g, t, i);
}

/* The best `cap` candidates of one beam into top[] (best first); their count.
 * Tokens are scanned in increasing order (a shortlist's candidates come in piece
 * order too), so an equal score never displaces. */
static int row_candidates(const search *S, cand *top, const scores *r, float cum, int beam, int cap) {
    int n = 0, V = r->n;
    const float *row = r->val;
    for (int v0 = 0; v0 < V; v0 += 16) {
        int end = v0 + 16 < V ? v0 + 16 : V;
        if (n == cap) { /* once the list is full, whole blocks of 16 lose: test them in SIMD */
            float worst = top[n - 1].score;
            int any = 0;
#pragma omp simd reduction(| : any)
            for (int v = v0; v < end; v++) any |= cum + row[v] > worst;
            if (!any) continue;
        }
        for (int v = v0; v < end; v++) {
            float sc = cum + row[v];
            if (!(sc > -INFINITY)) continue;                  /* masked (also NaN) */
            if (n == cap && !(sc > top[n - 1].score)) continue;
            int p = n < cap ? n++ : cap - 1;
            while (p > 0 && top[p - 1].score < sc) { top[p] = top[p - 1]; p--; }
            top[p] = (cand){sc, piece_at(S, r, v), beam};
        }
    }
    return n;
}

/* Candidate order: higher score, then lower token id, then lower beam index. */
static int cand_before(const cand *x, const cand *y) {
    if (x->score != y->score) return x->score > y->score;
    if (x->tok != y->tok) return x->tok < y->tok;
    return x->beam < y->beam;
}

/* Merges the k per-beam lists (each best first) into S->merged, keeping the best
 * `cap`; their count. */
static int merge_candidates(search *S, int cap) {
    int k = S->k, width = 2 * k + 1, n = 0;
    for (int j = 0; j < k; j++) S->head[j] = 0;
    while (n < cap) {
        const cand *best = NULL;
        int from = -1;
        for (int j = 0; j < k; j++) {
            if (S->head[j] >= S->count[j]) continue;
            const cand *c = &S->lists[(size_t)j * width + S->head[j]];
            if (!best || cand_before(c, best)) { best = c; from = j; }
        }
        if (!best) break;
        S->merged[n++] = *best;
        S->head[from]++;
    }
    return n;
}

static void add_to_pool(search *S, int i, const int32_t *tokens, const int32_t *align, int len, float total, int t) {
    int p = S->n_pool[i]++;
    size_t slot = (size_t)i * 2 * S->k + p;
    S->pool[slot] = (pooled){normalise(total, t, S->o.length_penalty), len, p};
    memcpy(S->pool_tok + slot * S->L, tokens, (size_t)len * sizeof *tokens);
    memcpy(S->pool_al + slot * S->L, align, (size_t)len * sizeof *align);
}

/* One generation step of active sentence a (sentence i), generating token t. Writes
 * its next beams to rows na*k.. of the other buffer; 1 when the sentence stopped. */
static int step_sentence(search *S, int a, int i, int t, int cur, int na) {
    int k = S->k, eos = S->m->cfg.eos_id, nxt = !cur;
    size_t L = (size_t)S->L, r0 = (size_t)a * S->width, w0 = (size_t)na * k;
    for (int j = 0; j < k; j++) {
        size_t r = r0 + j;
        S->count[j] = 0;
        if (j >= S->width) continue;      /* narrow layout: beam 0 only */
        float cum = S->cum[cur][r];
        if (!(cum > -INFINITY)) continue; /* empty slot */
        scores sc = {S->lp + r * S->n_cols, NULL, S->n_cols};
        if (S->vocab) sc.n = dmt_vocab_row(S->vocab, i, sc.val, &sc.val, &sc.ent);
        mask_row(S, &sc, S->hist[cur] + r * L, t - 1, t, i);
        S->count[j] = row_candidates(S, S->lists + (size_t)j * (2 * k + 1), &sc, cum, j, 2 * k + 1);
    }
    int nc = merge_candidates(S, 2 * k + 1); /* one past the 2k, for the gap at the edge */
    for (int r = 0; r + 1 < nc && r < 2 * k; r++) {
        float g = S->merged[r].score - S->merged[r + 1].score;
        if (g < S->gap[i]) S->gap[i] = g;
    }
    int live = 0;
    for (int r = 0; r < nc && r < 2 * k; r++) {
        const cand *c = &S->merged[r];
        const int32_t *h = S->hist[cur] + (r0 + c->beam) * L, *ha = S->ahist[cur] + (r0 + c->beam) * L;
        if (c->tok == eos) {
            if (r < k && S->n_fin[i] < k) {
                add_to_pool(S, i, h, ha, t - 1, c->score, t);
                S->n_fin[i]++;
            }
        } else if (live < k) {
            size_t w = w0 + live++;
            S->parent[w] = (int)(r0 + c->beam);
            memcpy(S->hist[nxt] + w * L, h, (size_t)(t - 1) * sizeof *h);
            S->hist[nxt][w * L + t - 1] = c->tok;
            memcpy(S->ahist[nxt] + w * L, ha, (size_t)(t - 1) * sizeof *ha);
            S->ahist[nxt][w * L + t - 1] = S->step_align ? S->step_align[r0 + c->beam] : -1;
            S->cum[nxt][w] = c->score;
        }
    }
    if (live == 0 && S->n_pool[i] == 0) {
        /* every continuation of every beam is masked (rules that contradict each other
         * on a strange input): the beams as they stand are the translation, rather
         * than none */
        for (int j = 0; j < k && j < S->width; j++) {
            size_t r = r0 + j;
            if (S->cum[cur][r] > -INFINITY)
                add_to_pool(S, i, S->hist[cur] + r * L, S->ahist[cur] + r * L, t - 1, S->cum[cur][r], t > 1 ? t - 1 : 1);
        }
    }
    int stop = S->n_fin[i] >= k || live == 0;
    if (!stop && t == S->max_len[i]) {
        for (int l = 0; l < live; l++)
            add_to_pool(S, i, S->hist[nxt] + (w0 + l) * L, S->ahist[nxt] + (w0 + l) * L, t, S->cum[nxt][w0 + l], t);
        stop = 1;
    }
    if (stop) return 1;
    for (int l = live; l < k; l++) { /* empty slots: fed </s>, never expanded */
        size_t w = w0 + l;
        S->parent[w] = (int)r0;
        S->hist[nxt][w * L + t - 1] = eos;
        S->cum[nxt][w] = -INFINITY;
    }
    return 0;
}

/* ----------------------------------------------------------------- output -- */

static int pool_cmp_r(const pooled *x, const pooled *y) {
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Sorts sentence i's pool and copies the best into out (buffers allocated up front). */
static void finish_sentence(search *S, int i, dmt_nbest *out) {
    pooled *p = S->pool + (size_t)i * 2 * S->k;
    int n = S->n_pool[i];
    for (int a = 1; a < n; a++) { /* insertion sort: n <= 2k, stable with the seq key anyway */
        pooled x = p[a];
        int b = a;
        while (b > 0 && pool_cmp_r(&x, &p[b - 1]) < 0) { p[b] = p[b - 1]; b--; }
        p[b] = x;
    }
    int keep = n < S->o.nbest ? n : S->o.nbest;
    for (int r = 0; r < keep && r + 1 < n; r++) {
        float g = p[r].score - p[r + 1].score;
        if (g < S->gap[i]) S->gap[i] = g;
    }
    for (int r = 0; r < keep; r++) {
        dmt_hypothesis *h = &out->hyps[r];
        h->n_tokens = p[r].len;
        h->score = p[r].score;
        memcpy(h->tokens, S->pool_tok + ((size_t)i * 2 * S->k + p[r].seq) * S->L, (size_t)p[r].len * sizeof *h->tokens);
        memcpy(h->align, S->pool_al + ((size_t)i * 2 * S->k + p[r].seq) * S->L, (size_t)p[r].len * sizeof *h->align);
    }
    for (int r = keep; r < out->n; r++) { /* fewer than nbest exist */
        free(out->hyps[r].tokens);
        free(out->hyps[r].align);
    }
    out->n = keep;
    out->min_gap = S->gap[i];
}

/* out[i] with room for nbest hypotheses of max_len[i] tokens; n counts the
 * allocated ones until finish_sentence sets the real count. */
static int alloc_outputs(const search *S, dmt_nbest *out) {
    for (int i = 0; i < S->n; i++) {
        out[i] = (dmt_nbest){0};
        out[i].hyps = calloc((size_t)S->o.nbest, sizeof *out[i].hyps);
        if (!out[i].hyps) return -1;
        for (int r = 0; r < S->o.nbest; r++) {
            out[i].hyps[r].tokens = malloc((size_t)S->max_len[i] * sizeof(int32_t));
            out[i].hyps[r].align = malloc((size_t)S->max_len[i] * sizeof(int32_t));
            out[i].n = r + 1;
            if (!out[i].hyps[r].tokens || !out[i].hyps[r].align) return -1;
        }
    }
    return 0;
}

/* The tokens every row is fed at decoder step s: the prefix, then its last token. */
static void fill_feed(search *S, int n_act, int s, int cur) {
    size_t L = (size_t)S->L;
    for (int a = 0; a < n_act; a++) {
        int i = S->active[a];
        for (int j = 0; j < S->width; j++) {
            size_t r = (size_t)a * S->width + j;
            S->feed[r] = s < S->plen[i] ? S->prefix[2 * i + s] : S->hist[cur][r * L + s - S->plen[i]];
        }
    }
}

/* Moves active sentence a's w rows (histories, beam sums) down to slot na, and
 * records where each came from for dmt_decode_reorder (a kept row only ever moves
 * to a lower index, so this works in place). */
static void keep_rows(search *S, int cur, int a, int na, int w) {
    size_t L = (size_t)S->L;
    for (int j = 0; j < w; j++) {
        size_t from = (size_t)a * w + j, to = (size_t)na * w + j;
        S->parent[to] = (int)from;
        if (to != from) {
            memcpy(S->hist[cur] + to * L, S->hist[cur] + from * L, L * sizeof *S->hist[cur]);
            memcpy(S->ahist[cur] + to * L, S->ahist[cur] + from * L, L * sizeof *S->ahist[cur]);
            S->cum[cur][to] = S->cum[cur][from];
        }
    }
}

/* Drops the active sentences the control cancels, before a decoder step: their
 * rows leave the KV cache (dmt_decode_reorder) and the others move down in place
 * (a kept row only ever moves to a lower index). The new active count. */
static int drop_cancelled(search *S, dmt_state *st, int n_act, int cur, dmt_nbest *out) {
    const dmt_beam_control *ctl = S->o.control;
    if (!ctl || !ctl->cancelled) return n_act;
    int na = 0, w = S->width;
    for (int a = 0; a < n_act; a++) {
        int i = S->active[a];
        if (ctl->cancelled(ctl->arg, i)) {
            dmt_nbest_clear(&out[i]);
            if (S->vocab) dmt_vocab_leave(S->vocab, i);
            continue;
        }
        keep_rows(S, cur, a, na, w);
        S->active[na++] = i;
    }
    if (na < n_act && na > 0) dmt_decode_reorder(st, na * w, S->parent);
    return na;
}

int dmt_beam_search(dmt_state *st, int n, const int32_t *const *src, const int *src_len, const int *forced,
                    const dmt_beam_options *opt, dmt_nbest *out, char *err, size_t errlen) {
    const dmt_model *m = NULL;
    if (n < 0) { snprintf(err, errlen, "beam search: negative sentence count %d", n); return -1; }
    if (dmt_beam_options_check(opt, err, errlen)) return -1;
    if (n == 0) return 0;
    for (int i = 0; i < n; i++) out[i] = (dmt_nbest){0};
    if (dmt_encode(st, n, src, src_len, err, errlen)) return -1;
    m = dmt_state_model(st);
    for (int i = 0; forced && i < n; i++)
        if (forced[i] < -1 || forced[i] >= m->cfg.vocab_size) {
            snprintf(err, errlen, "sentence %d: forced token %d is outside the vocabulary", i, forced[i]);
            return -1;
        }
    search S;
    int rc = -1, k = opt->beam_size;
    int init_failed = search_init(&S, st, m, n, src_len, forced, opt);
    S.src = src;
    S.src_len = src_len;
    dmt_state_restrict_vocab(st, 0, NULL, 0);
    if (!init_failed && m->shortlist && !(S.vocab = dmt_vocab_new(m->shortlist, n))) init_failed = 1;
    for (int i = 0; S.vocab && i < n; i++) dmt_vocab_join(S.vocab, i, forced ? forced[i] : -1, src[i], src_len[i]);
    if (init_failed || alloc_outputs(&S, out)) {
        snprintf(err, errlen, "out of memory for beam search over %d sentences x %d beams", n, k);
        goto done;
    }
    int steps = 0;
    for (int i = 0; i < n; i++)
        if (S.plen[i] + S.max_len[i] - 1 > steps) steps = S.plen[i] + S.max_len[i] - 1;
    for (int i = 0; i < n; i++) S.parent[i] = i; /* hypothesis -> source, one row each */
    if (dmt_decode_begin(st, n, S.parent, n * k, steps, err, errlen)) goto done;
    int cur = 0, n_act = n;
    for (int s = 0; n_act > 0; s++) {
        if ((n_act = drop_cancelled(&S, st, n_act, cur, out)) == 0) break;
        fill_feed(&S, n_act, s, cur);
        if (sync_vocab(&S, st)) {
            snprintf(err, errlen, "out of memory for the shortlist's output projection");
            goto done;
        }
        if (dmt_decode_step(st, S.feed, S.lp)) {
            snprintf(err, errlen, "beam search: decoder step %d failed", s);
            goto done;
        }
        S.step_align = dmt_decode_alignment(st);
        int w_in = S.width, w_out = w_in, na = 0; /* k rows a sentence once any generates */
        for (int a = 0; a < n_act && w_out < k; a++)
            if (s >= S.plen[S.active[a]] - 1) w_out = k;
        for (int a = 0; a < n_act; a++) {
            int i = S.active[a];
            if (s < S.plen[i] - 1) { /* still reading the prefix: rows stay (fanned out to w_out) */
                for (int j = 0; j < w_out; j++) {
                    size_t w = (size_t)na * w_out + j, r = (size_t)a * w_in + (j < w_in ? j : 0);
                    S.parent[w] = (int)r;
                    S.cum[!cur][w] = j < w_in ? S.cum[cur][r] : -INFINITY;
                }
                S.active[na++] = i;
                continue;
            }
            if (step_sentence(&S, a, i, s - S.plen[i] + 2, cur, na)) {
                finish_sentence(&S, i, &out[i]);
                if (S.vocab) dmt_vocab_leave(S.vocab, i);
                if (opt->control && opt->control->finished) opt->control->finished(opt->control->arg, i);
            } else {
                S.active[na++] = i;
            }
        }
        if (na > 0) dmt_decode_reorder(st, na * w_out, S.parent);
        S.width = w_out;
        n_act = na;
        cur = !cur;
    }
    rc = 0;
done:
    if (rc) for (int i = 0; i < n; i++) dmt_nbest_clear(&out[i]);
    dmt_state_restrict_vocab(st, 0, NULL, 0);
    search_free(&S);
    return rc;
}

/* ---------------------------------------------------------------- session -- */

/* The search's arrays, sized for `cap` sentences of up to max_positions tokens, and
 * always k rows a sentence (width k: a sentence still in its prefix has beam 0 live
 * and k - 1 empty beams, which yield no candidates, as in the narrow layout). */
struct dmt_beam_session {
    search S;
    dmt_state *st;
    int cap, n_act, cur;
    int *pos;          /* [cap] decoder steps a sentence has taken */
    int *tag, *src_id; /* [cap] */
    char *used, *cancel;
    dmt_nbest *out;    /* [cap] */
    int *done, n_done; /* finished sentences waiting to be taken */
    int32_t *src_ids;  /* [cap][max_positions] copies of the sources (the repetition guard reads them) */
    const int32_t **src_rows;
    int *src_lens;     /* [cap] */
};

void dmt_beam_session_free(dmt_beam_session *b) {
    if (!b) return;
    for (int i = 0; i < b->cap; i++) {
        if (b->used && b->used[i] && b->src_id[i] >= 0) dmt_cont_release_source(b->st, b->src_id[i]);
        if (b->out) dmt_nbest_clear(&b->out[i]);
    }
    if (b->st && dmt_cont_hyps(b->st) > 0) dmt_cont_reorder(b->st, 0, NULL);
    if (b->st) dmt_state_restrict_vocab(b->st, 0, NULL, 0);
    search_free(&b->S);
    free(b->pos); free(b->tag); free(b->src_id); free(b->used); free(b->cancel); free(b->out); free(b->done);
    free(b->src_ids); free(b->src_rows); free(b->src_lens);
    free(b);
}

dmt_beam_session *dmt_beam_session_new(dmt_state *st, const dmt_beam_options *opt, int max_sentences, char *err,
                                       size_t errlen) {
    if (dmt_beam_options_check(opt, err, errlen)) return NULL;
    if (max_sentences < 1) max_sentences = 1;
    dmt_beam_session *b = calloc(1, sizeof *b);
    if (!b) goto oom;
    const dmt_model *m = dmt_state_model(st);
    search *S = &b->S;
    S->m = m;
    S->o = *opt;
    S->o.control = NULL;
    S->n = b->cap = max_sentences;
    S->k = opt->beam_size;
    S->V = S->n_cols = m->cfg.vocab_size;
    S->L = m->cfg.max_positions;
    S->width = S->k;
    b->st = st;
    size_t n = (size_t)b->cap, k = (size_t)S->k, L = (size_t)S->L, rows = n * k;
    S->plen = calloc(n, sizeof *S->plen);
    S->max_len = calloc(n, sizeof *S->max_len);
    S->prefix = calloc(n * 2, sizeof *S->prefix);
    S->n_pool = calloc(n, sizeof *S->n_pool);
    S->n_fin = calloc(n, sizeof *S->n_fin);
    S->pool = calloc(n * 2 * k, sizeof *S->pool);
    S->pool_tok = calloc(n * 2 * k * L, sizeof *S->pool_tok);
    S->pool_al = calloc(n * 2 * k * L, sizeof *S->pool_al);
    S->gap = calloc(n, sizeof *S->gap);
    S->active = calloc(n, sizeof *S->active);
    S->feed = calloc(rows, sizeof *S->feed);
    S->parent = calloc(rows, sizeof *S->parent);
    S->lists = calloc(k * (2 * k + 1), sizeof *S->lists);
    S->count = calloc(k, sizeof *S->count);
    S->head = calloc(k, sizeof *S->head);
    S->merged = calloc(2 * k + 1, sizeof *S->merged);
    for (int x = 0; x < 2; x++) {
        S->hist[x] = calloc(rows * L, sizeof *S->hist[x]);
        S->ahist[x] = calloc(rows * L, sizeof *S->ahist[x]);
        S->cum[x] = calloc(rows, sizeof *S->cum[x]);
    }
    b->pos = calloc(n, sizeof *b->pos);
    b->tag = calloc(n, sizeof *b->tag);
    b->src_id = calloc(n, sizeof *b->src_id);
    b->used = calloc(n, 1);
    b->cancel = calloc(n, 1);
    b->out = calloc(n, sizeof *b->out);
    b->done = calloc(n, sizeof *b->done);
    b->src_ids = calloc(n * L, sizeof *b->src_ids);
    b->src_rows = calloc(n, sizeof *b->src_rows);
    b->src_lens = calloc(n, sizeof *b->src_lens);
    for (size_t i = 0; b->src_ids && b->src_rows && i < n; i++) b->src_rows[i] = b->src_ids + i * L;
    S->src = (const int32_t *const *)b->src_rows;
    S->src_len = b->src_lens;
    dmt_state_restrict_vocab(st, 0, NULL, 0);
    if (m->shortlist && !(S->vocab = dmt_vocab_new(m->shortlist, b->cap))) goto oom;
    if (!b->src_ids || !b->src_rows || !b->src_lens || !S->plen || !S->max_len || !S->prefix || !S->n_pool || !S->n_fin || !S->pool || !S->pool_tok || !S->pool_al || !S->gap ||
        !S->active || !S->feed || !S->parent || !S->lists || !S->count || !S->head || !S->merged || !S->hist[0] ||
        !S->hist[1] || !S->ahist[0] || !S->ahist[1] || !S->cum[0] || !S->cum[1] || !b->pos || !b->tag || !b->src_id || !b->used || !b->cancel ||
        !b->out || !b->done || !dmt_state_logits(st, rows * (size_t)S->V))
        goto oom;
    return b;
oom:
    snprintf(err, errlen, "out of memory for a beam session of %d sentences", max_sentences);
    dmt_beam_session_free(b);
    return NULL;
}

int dmt_beam_session_active(const dmt_beam_session *b) { return b->n_act; }

int dmt_beam_session_room(const dmt_beam_session *b) {
    int used = 0;
    for (int i = 0; i < b->cap; i++) used += b->used[i];
    return b->cap - used;
}

int dmt_beam_session_admit(dmt_beam_session *b, int n, const int32_t *const *src, const int *src_len,
                           const int *forced, const int *tags, char *err, size_t errlen) {
    search *S = &b->S;
    const dmt_config *c = &S->m->cfg;
    int k = S->k;
    if (n <= 0) return 0;
    if (n > dmt_beam_session_room(b)) {
        snprintf(err, errlen, "beam session: %d sentences do not fit (room for %d)", n, dmt_beam_session_room(b));
        return -1;
    }
    for (int i = 0; forced && i < n; i++)
        if (forced[i] < -1 || forced[i] >= c->vocab_size) {
            snprintf(err, errlen, "sentence %d: forced token %d is outside the vocabulary", i, forced[i]);
            return -1;
        }
    int *ids = malloc((size_t)n * sizeof *ids), *hyp_src = malloc((size_t)n * k * sizeof *hyp_src);
    int *slot = malloc((size_t)n * sizeof *slot);
    if (!ids || !hyp_src || !slot) {
        free(ids); free(hyp_src); free(slot);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = -1;
    if (dmt_cont_add_sources(b->st, n, src, src_len, ids, err, errlen)) goto done;
    for (int q = 0, i = 0; q < n; q++) {
        while (b->used[i]) i++;
        slot[q] = i++;
    }
    for (int q = 0; q < n; q++) {
        int i = slot[q], a = b->n_act + q;
        dmt_nbest *o = &b->out[i];
        S->prefix[2 * i] = c->decoder_start_id;
        S->prefix[2 * i + 1] = forced ? forced[q] : -1;
        S->plen[i] = S->prefix[2 * i + 1] >= 0 ? 2 : 1;
        S->max_len[i] = max_length(&S->o, src_len[q], S->plen[i], c->max_positions);
        S->n_pool[i] = S->n_fin[i] = 0;
        S->gap[i] = INFINITY;
        memcpy(b->src_ids + (size_t)i * S->L, src[q], (size_t)src_len[q] * sizeof *src[q]);
        b->src_lens[i] = src_len[q];
        if (S->vocab) dmt_vocab_join(S->vocab, i, S->prefix[2 * i + 1], src[q], src_len[q]);
        *o = (dmt_nbest){0};
        o->hyps = calloc((size_t)S->o.nbest, sizeof *o->hyps);
        for (int r = 0; o->hyps && r < S->o.nbest; r++) {
            o->hyps[r].tokens = malloc((size_t)S->max_len[i] * sizeof(int32_t));
            o->hyps[r].align = malloc((size_t)S->max_len[i] * sizeof(int32_t));
            if (o->hyps[r].tokens || o->hyps[r].align) o->n = r + 1; /* counted to be freed */
            if (!o->hyps[r].tokens || !o->hyps[r].align) break;
        }
        if (!o->hyps || o->n < S->o.nbest || !o->hyps[S->o.nbest - 1].align || !o->hyps[S->o.nbest - 1].tokens) {
            for (int z = 0; z <= q; z++) {
                dmt_nbest_clear(&b->out[slot[z]]);
                if (S->vocab) dmt_vocab_leave(S->vocab, slot[z]);
            }
            for (int z = 0; z < n; z++) dmt_cont_release_source(b->st, ids[z]);
            snprintf(err, errlen, "out of memory");
            goto done;
        }
        for (int j = 0; j < k; j++) {
            S->cum[b->cur][(size_t)a * k + j] = j == 0 ? 0.0f : -INFINITY;
            hyp_src[q * k + j] = ids[q];
        }
    }
    if (dmt_cont_add_hyps(b->st, n * k, hyp_src, err, errlen)) {
        for (int z = 0; z < n; z++) {
            dmt_nbest_clear(&b->out[slot[z]]);
            dmt_cont_release_source(b->st, ids[z]);
            if (S->vocab) dmt_vocab_leave(S->vocab, slot[z]);
        }
        goto done;
    }
    for (int q = 0; q < n; q++) {
        int i = slot[q];
        b->used[i] = 1;
        b->cancel[i] = 0;
        b->tag[i] = tags ? tags[q] : q;
        b->src_id[i] = ids[q];
        b->pos[i] = 0;
        S->active[b->n_act++] = i;
    }
    rc = 0;
done:
    free(ids); free(hyp_src); free(slot);
    return rc;
}

/* A sentence leaves: its source goes, its slot is free again (out[i] stays for
 * take when it finished). */
static void session_leave(dmt_beam_session *b, int i) {
    if (b->src_id[i] >= 0) dmt_cont_release_source(b->st, b->src_id[i]);
    if (b->S.vocab) dmt_vocab_leave(b->S.vocab, i);
    b->src_id[i] = -1;
    b->cancel[i] = 0;
}

/* Drops cancelled sentences before a step (their rows leave the cache). */
static int session_drop(dmt_beam_session *b) {
    search *S = &b->S;
    int k = S->k, na = 0, cur = b->cur;
    for (int a = 0; a < b->n_act; a++) {
        int i = S->active[a];
        if (b->cancel[i]) {
            session_leave(b, i);
            dmt_nbest_clear(&b->out[i]);
            b->used[i] = 0;
            continue;
        }
        keep_rows(S, cur, a, na, k);
        S->active[na++] = i;
    }
    if (na == b->n_act) return 0;
    b->n_act = na;
    return dmt_cont_reorder(b->st, na * k, S->parent);
}

int dmt_beam_session_step(dmt_beam_session *b, char *err, size_t errlen) {
    search *S = &b->S;
    int k = S->k, cur = b->cur;
    size_t L = (size_t)S->L;
    if (session_drop(b)) goto oom;
    if (b->n_act == 0) return 0;
    for (int a = 0; a < b->n_act; a++) {
        int i = S->active[a], s = b->pos[i];
        for (int j = 0; j < k; j++) {
            size_t r = (size_t)a * k + j;
            S->feed[r] = s < S->plen[i] ? S->prefix[2 * i + s] : S->hist[cur][r * L + s - S->plen[i]];
        }
    }
    S->lp = dmt_state_logits(b->st, (size_t)b->n_act * k * S->V);
    if (sync_vocab(S, b->st)) goto oom;
    if (!S->lp || dmt_cont_step(b->st, S->feed, S->lp)) {
        snprintf(err, errlen, "beam session: decoder step failed");
        return -1;
    }
    S->step_align = dmt_decode_alignment(b->st);
    int na = 0;
    for (int a = 0; a < b->n_act; a++) {
        int i = S->active[a], s = b->pos[i]++;
        if (s < S->plen[i] - 1) { /* still reading the prefix: rows stay */
            for (int j = 0; j < k; j++) {
                size_t w = (size_t)na * k + j, r = (size_t)a * k + j;
                S->parent[w] = (int)r;
                S->cum[!cur][w] = S->cum[cur][r];
            }
            S->active[na++] = i;
        } else if (step_sentence(S, a, i, s - S->plen[i] + 2, cur, na)) {
            finish_sentence(S, i, &b->out[i]);
            session_leave(b, i);
            b->done[b->n_done++] = i;
        } else {
            S->active[na++] = i;
        }
    }
    b->n_act = na;
    b->cur = !cur;
    if (dmt_cont_reorder(b->st, na * k, S->parent)) goto oom;
    return 0;
oom:
    snprintf(err, errlen, "beam session: out of memory");
    return -1;
}

int dmt_beam_session_take(dmt_beam_session *b, int *tag, dmt_nbest *out) {
    if (b->n_done == 0) return 0;
    int i = b->done[0];
    memmove(b->done, b->done + 1, (size_t)(--b->n_done) * sizeof *b->done);
    *tag = b->tag[i];
    *out = b->out[i];
    b->out[i] = (dmt_nbest){0};
    b->used[i] = 0;
    return 1;
}

void dmt_beam_session_cancel(dmt_beam_session *b, int tag) {
    for (int a = 0; a < b->n_act; a++) {
        int i = b->S.active[a];
        if (b->tag[i] == tag) b->cancel[i] = 1;
    }
}
